"""The grammar every subcommand shares.

* one input loader (:func:`load_graph`): a workload ``FILE``, ``example:NAME``,
  ``regal:N[:MODEL[:SEED]]``, ``rwnn:...`` or ``MODEL.onnx`` (with the readers of JSON files and
  placements, in :mod:`stagecut.cli._inputs`, importable from here);
* one device-count flag, ``-k/--devices`` (:func:`add_devices`; the old spellings
  ``--accelerators`` and ``--stages`` still work for one release and say so on stderr);
* ``--memory`` and ``--bandwidth`` with units (:func:`add_memory`, :func:`add_bandwidth`, read
  by :func:`memory_of` and :func:`bandwidth_of` through :mod:`stagecut.units`); memory defaults
  to the file's in every subcommand;
* one output story (:func:`add_output`, :func:`report`): the summary block and the stage table,
  ``--json`` for the result's JSON on stdout, ``-o FILE`` to save it (``stagecut show FILE``
  loads it back);
* one error handler (:func:`guarded`): bad input is one line ``stagecut: error: ...`` on stderr
  and exit 2; a bug is exit 1 with "please report" (the traceback with ``--debug``); Ctrl-C is
  exit 130; a closed stdout (``| head``) is a quiet exit 141. Output paths (``-o``,
  ``--split-out``) are checked before any work, and written atomically (temporary file, then
  rename: a full disk leaves the old file intact); JSON output never holds ``Infinity``/``NaN``.
* one progress story: a tqdm bar on stderr for a run past 2 s when stderr is a terminal
  (:mod:`stagecut.progress`); ``-q/--quiet`` (:func:`add_quiet`) prints nothing on stderr but
  errors: no bar, no notes, no warnings.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stagecut import _startup
from stagecut.cli._inputs import EXAMPLES, GRAPH_HELP, RWNN_SPEC, load_graph, read_json, read_placement
from stagecut.cli._parser import EXIT_BUG, EXIT_INTERRUPTED, EXIT_OK, EXIT_SIGPIPE, EXIT_USAGE, Parser
from stagecut.cli._quiet import add_quiet, defer_note, print_parse_notes, quiet, quieted
from stagecut.errors import InvalidArgumentError, StagecutError
from stagecut.validate import MAX_INT

if TYPE_CHECKING:  # the graph model, the readers (numpy, the core) and the units are imported on first use
    from stagecut.graph import Graph
    from stagecut.units import Display

__all__ = [
    "EXIT_OK", "EXIT_BUG", "EXIT_USAGE", "EXIT_INTERRUPTED", "GRAPH_HELP", "EXAMPLES",
    "Parser", "load_graph", "add_graph", "add_devices", "add_memory", "add_bandwidth", "add_output",
    "add_deprecated", "memory_of", "bandwidth_of", "positive_int", "nonnegative_int", "number",
    "positive_number", "report", "note", "guarded", "read_json", "read_placement", "write_json", "stage_table",
    "bad_argument", "doc", "check_outputs", "requires", "add_quiet", "quiet", "quieted",
    "print_parse_notes", "display_of", "saved_display", "node_names", "settings_of", "RWNN_SPEC", "as_flags",
]


# ------------------------------------------------------------------------------------ parser
def doc(text: str | None) -> str:
    """A module docstring as a subcommand's ``--help`` description (without reST ````quotes````)."""
    return (text or "").replace("``", "")


def note(text: str) -> None:
    """One line ``stagecut: note: ...`` on stderr (deprecations, fallbacks the user should know),
    unless ``--quiet``."""
    if not quiet():
        print(f"stagecut: note: {text}", file=sys.stderr)


def _int_type(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        if value > MAX_INT:
            raise argparse.ArgumentTypeError(f"must be an integer below 2**64, got {text[:20]}... "
                                             f"({len(text)} digits)")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


positive_int = _int_type(1)
nonnegative_int = _int_type(0)


def number(text: str) -> float:
    """A finite non-negative float for argparse (fractions, gaps...)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text[:40]!r}")
    return value


def positive_number(text: str) -> float:
    """A finite float > 0 for argparse (a time limit: 0 or less would skip all the work)."""
    value = number(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _already(namespace: argparse.Namespace, dest: str) -> bool:
    return getattr(namespace, dest, None) is not None


class _Once(argparse.Action):
    """A flag whose value may be given once (it and its old spelling must not both be given)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if _already(namespace, self.dest):
            parser.error(f"{option_string} is given twice (or together with its old spelling)")
        setattr(namespace, self.dest, values)


class _Deprecated(argparse.Action):
    """A hidden old spelling: stores into the new flag's ``dest`` and says so on stderr (after the
    parse, unless ``--quiet``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "",
                 convert: Callable[[str], Any] | None = None, **kw: Any) -> None:
        self.new, self.convert = new, convert
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if self.nargs == 0:
            defer_note(namespace, f"{option_string} is no longer needed ({self.new}); it does nothing and "
                        "goes away in the next release")
            setattr(namespace, self.dest, True)
            return
        if _already(namespace, self.dest):
            parser.error(f"{option_string} is the old spelling of {self.new}: give one of them, once")
        defer_note(namespace, f"{option_string} is deprecated and goes away in the next release; use {self.new}")
        setattr(namespace, self.dest, self.convert(values) if self.convert else values)


def add_deprecated(p: argparse.ArgumentParser, old: str, dest: str, new: str, *,
                   type: Callable[[str], Any] | None = None,
                   convert: Callable[[str], Any] | None = None, flag: bool = False) -> None:
    """Keep ``old`` as a hidden alias of the flag stored in ``dest`` (``new`` names it); with
    ``flag=True`` it takes no value and does nothing (``new`` says why)."""
    if flag:
        p.add_argument(old, action=_Deprecated, dest=dest, new=new, nargs=0, default=argparse.SUPPRESS)
    else:
        kw: dict[str, Any] = {} if type is None else {"type": type}
        p.add_argument(old, action=_Deprecated, dest=dest, new=new, convert=convert, default=argparse.SUPPRESS, **kw)


# -------------------------------------------------------------------------------- arguments
def add_graph(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """The positional input (``GRAPH``) every subcommand takes."""
    p.add_argument("graph", metavar="GRAPH", help=help or GRAPH_HELP % ", ".join(EXAMPLES))


def add_devices(p: argparse.ArgumentParser, meaning: str, default: str, *, old: Sequence[str] = ()) -> None:
    """``-k/--devices`` (an integer >= 1) meaning ``meaning``; ``old`` spellings are hidden aliases."""
    p.add_argument("-k", "--devices", type=positive_int, default=None, metavar="K", action=_Once,
                   help=f"{meaning} (default: {default})")
    for o in old:
        add_deprecated(p, o, "devices", "-k/--devices", type=positive_int)


def add_memory(p: argparse.ArgumentParser, meaning: str, default: str, *, old: Sequence[str] = (),
               dest: str = "memory", flag: str = "--memory") -> None:
    """``--memory SIZE`` with units (parsed later by :func:`memory_of`, so a bad unit is an
    :class:`~stagecut.errors.InvalidArgumentError` naming the flag)."""
    p.add_argument(flag, dest=dest, default=None, metavar="SIZE", action=_Once,
                   help=f"{meaning}: bytes, or with a unit (16GiB, 512MB, 16e9; 'none' for no limit) "
                        f"(default: {default})")
    for o in old:
        add_deprecated(p, o, dest, flag)


def add_bandwidth(p: argparse.ArgumentParser, meaning: str, default: str, plain: str, *,
                  dest: str = "bandwidth", flag: str = "--bandwidth") -> None:
    """``--bandwidth RATE`` with units (25GB/s, 25GiB/s); ``plain`` says what a bare number is."""
    p.add_argument(flag, dest=dest, default=None, metavar="RATE", action=_Once,
                   help=f"{meaning}: a rate with units (25GB/s, 25GiB/s, 100MB/ms), or a plain number "
                        f"of {plain} (default: {default})")


def add_output(p: argparse.ArgumentParser, *, save: bool = True) -> None:
    """``--json``, ``-q/--quiet`` and (for solving subcommands) ``-o FILE``."""
    add_quiet(p)
    p.add_argument("--json", action="store_true",
                   help="print the result as one JSON object on stdout (the full node lists) "
                        "instead of the summary and the stage table")
    if save:
        p.add_argument("-o", "--output", metavar="FILE", default=None,
                       help="also write the result JSON to FILE (read it back with 'stagecut show FILE') "
                            "(default: not written)")


def memory_of(args: argparse.Namespace, graph: Graph | None = None, *, dest: str = "memory",
              flag: str = "--memory") -> float | None:
    """The ``--memory`` value in bytes (``inf`` for 'none'), else the file's memory, else ``None``."""
    text = getattr(args, dest, None)
    if text is not None and getattr(args, "memory_from_file", False):
        raise bad_argument("--memory-from-file", f"(the file's memory) conflicts with {flag} {text}: give one")
    if text is not None:
        from stagecut.units import parse_bytes

        return parse_bytes(text, flag=flag)
    if graph is not None:
        value = graph.defaults.get("memory")
        return None if value is None else float(value)
    return None


def bandwidth_of(args: argparse.Namespace, *, time_unit_s: float = 1.0, dest: str = "bandwidth",
                 flag: str = "--bandwidth") -> float | None:
    """The ``--bandwidth`` value in bytes per time unit of the input (``None`` when not given)."""
    from stagecut.units import parse_bandwidth

    text = getattr(args, dest, None)
    return None if text is None else parse_bandwidth(text, flag=flag, time_unit_s=time_unit_s)


# ----------------------------------------------------------------------------------- output
#: what the table's node lists need, when a list was cut (see stagecut.results.node_list_notes)
FULL_LISTS = "lists cut short: the full lists are in --json and -o FILE"
#: the time unit spelled as on the command line -> as printed
TIME_LABELS = {"us": "\u00b5s", "ms": "ms", "s": "s"}


def node_names(graph: Graph | None) -> dict[Any, str] | None:
    """``{node id: name}`` in topological order when the graph's names say more than its ids
    (a workload's ``node7`` for id 7 does not), else ``None``."""
    if graph is None:
        return None
    names = {}
    for i in graph.topological_order():
        n = graph.nodes[i]
        if n.name:
            names[n.id] = n.name
    if not any(name not in (str(v), f"node{v}") for v, name in names.items()):
        return None
    return names


def display_of(args: argparse.Namespace, graph: Graph | None = None, *, time: str | None = "ms",
               memory_dest: str = "memory") -> Display:
    """How :func:`report` prints the numbers of this input: its time unit (``time``, or the
    subcommand's ``--time-unit``), sizes in the unit given to ``--memory`` (else a binary unit
    that fits), and the graph's node names when they say more than the ids. A ``regal:`` graph
    is in abstract units (time = size at bandwidth 1)."""
    from stagecut.units import Display, rate_unit, size_unit

    spec = getattr(args, "graph", None) or ""
    if isinstance(spec, str) and spec.startswith("regal:"):
        return Display(time="units", bytes=False)
    unit = getattr(args, "time_unit", None) or time
    return Display(time=TIME_LABELS.get(unit, unit) if unit else None,
                   memory=size_unit(getattr(args, memory_dest, None)), names=node_names(graph),
                   bandwidth=rate_unit(getattr(args, "bandwidth", None)))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def settings_of(result: Any, display: Display) -> str | None:
    """The settings a result was solved for, in the units the user gave (``--memory 2.5GiB``
    prints as 2.5 GiB): the devices, the memory per device, the bandwidth; ``None`` for a
    result that prints its own (a training plan) or has none."""
    kind = type(result).__name__
    unlimited = result.memory == float("inf") if kind in ("Plan", "SlicePlan", "Certificate") else True
    if kind == "Plan":
        memory = "no memory limit" if unlimited else f"memory {display.size_text(result.memory)} per accelerator"
        return f"{_plural(result.devices, 'accelerator')}, {_plural(result.cpus, 'CPU')}, {memory}"
    if kind in ("SlicePlan", "Certificate"):
        parts = [f"at most {_plural(result.devices, 'stage')}",
                 "no fast-memory limit" if unlimited else f"fast memory {display.size_text(result.memory)} per stage"]
        if result.reserved_memory:
            parts.append(f"{display.size_text(result.reserved_memory)} of it reserved")
        if result.bandwidth is not None and not unlimited:
            parts.append(f"overflow read at {display.rate_text(result.bandwidth)}")
        return ", ".join(parts)
    return None


def saved_display(data: Any) -> Display:
    """The :class:`~stagecut.units.Display` of a saved result: its ``units`` key (what
    :func:`report` writes: ``{"time": "ms", "memory": "bytes", "shown": {"memory": "GiB",
    "bandwidth": null}}``: the units of the JSON's numbers, and the units the user gave, in
    which they were shown); no units when it has none."""
    from stagecut.units import Display, rate_unit, size_unit

    units = data.get("units") if isinstance(data, Mapping) else None
    if not isinstance(units, Mapping):
        return Display()
    time = units.get("time")
    shown: Mapping[str, Any] = units["shown"] if isinstance(units.get("shown"), Mapping) else {}
    memory, rate = size_unit(f"1{shown.get('memory')}"), rate_unit(f"1{shown.get('bandwidth')}")
    known = (*TIME_LABELS.values(), "units")
    return Display(time=time if time in known else None, bytes=units.get("memory") == "bytes",
                   memory=memory, bandwidth=rate)


def _from_spec(text: str, spec: str) -> str:
    """Notes true for an input that is not a file (``example:``, ``rwnn:``): its settings come
    from the built-in graph's defaults, not from "the file"."""
    if not spec.startswith(("example:", "regal:", "rwnn:")):
        return text
    text = re.sub(r"the file's \w+ adds", f"the defaults of {spec} add", text)
    return re.sub(r"(from )?the file's (max\w+|\w+)", rf"\1the defaults of {spec}", text)


#: the throughput evaluator's memory issue, whose numbers are bytes in the CLI's inputs
_MEMORY_ISSUE = re.compile(r"memory ([0-9.e+]+) exceeds the limit ([0-9.e+]+)")


def _human_sizes(text: str, display: Display) -> str:
    """The evaluator's ``memory 3.49643e+08 exceeds the limit 3e+08`` in the display's units."""
    if not display.bytes:
        return text
    return _MEMORY_ISSUE.sub(lambda m: f"memory {display.size_text(float(m.group(1)))} exceeds the limit "
                                       f"{display.size_text(float(m.group(2)))}", text)


#: a note listing each method's answer (``auto``): ``methods: heft: 100.2, met: 162.3``
_METHODS_NOTE = re.compile(r"^(note {7}methods): ", re.MULTILINE)
#: certify's note on a cheaper partition, whose stages the JSON holds (``best_stages``)
_BEST_STAGES = re.compile(r"\(cost ([0-9.e+-]+)\): see best_stages")
#: a setting the library took from the input (``devices=6 from the file's maxFPGAs``): the flag
#: that sets it on the command line, and the value
_FROM_INPUT = re.compile(r"\b(devices|cpus|memory)=(\S+) from (the file's \w+)")
#: the library's keyword arguments that notes and messages name, and the flags that set them
_KEYWORD_FLAGS = {"method": "--method", "knapsack": "--knapsack", "max_ideals": "--max-ideals"}
_KEYWORDS = "|".join(_KEYWORD_FLAGS)
#: a call with one keyword (``partition(method='dp')``), a keyword with its value (``method='dpl'``,
#: ``max_ideals=1000``), a keyword as a word (``raise max_ideals``)
_KEYWORD_CALL = re.compile(rf"\b[a-z_]+\(({_KEYWORDS})='([\w-]+)'\)")
_KEYWORD_VALUE = re.compile(rf"\b({_KEYWORDS})=(?:'([\w-]+)'|(\d+)\b)")
_KEYWORD_WORD = re.compile(r"\b(raise) (max_ideals)\b")
#: a boolean keyword and what says it on the command line
_BOOLEAN_FLAGS = {"colocate=False": "--ignore-colocation", "colocate=True": "leaving out --ignore-colocation"}
_BOOLEAN = re.compile(r"\b(" + "|".join(_BOOLEAN_FLAGS) + r")\b")
#: the training plan's ``uses`` line (the sum over its stages of the data-parallel degree ``d``)
_SUM_OF_D = re.compile(r"^(uses {7}\d+ devices?), sum of d (\d+)$", re.MULTILINE)


def _flag_value(name: str, value: str, display: Display | None) -> str:
    """A value as the flag ``name`` takes it: a memory in bytes as a size (``8e+09`` as ``7.451GiB``)."""
    if name != "memory" or display is None or not display.bytes:
        return value
    try:
        size = float(value)
    except ValueError:
        return value
    text = display.size_text(size)
    return value if text.endswith(" bytes") else text.replace(" ", "")


def as_flags(text: str, display: Display | None = None) -> str:
    """Notes and messages written for the library, read on the command line: its keyword
    arguments as the flags that set them (``devices=6 from the file's maxFPGAs`` as ``--devices 6
    (from the file's maxFPGAs)``, ``method='dpl'`` as ``--method dpl``, ``max_ideals=1000`` as
    ``--max-ideals 1000``, ``knapsack='exact'`` as ``--knapsack exact``, ``colocate=False`` as
    ``--ignore-colocation``), and the training plan's
    ``sum of d`` in words.

    >>> as_flags("devices=6 from the file's maxFPGAs; raise max_ideals, or use partition(method='dpl')")
    "--devices 6 (from the file's maxFPGAs); raise --max-ideals, or use --method dpl"
    """
    text = _FROM_INPUT.sub(lambda m: f"--{m.group(1)} {_flag_value(m.group(1), m.group(2), display)} "
                                     f"(from {m.group(3)})", text)
    text = _KEYWORD_CALL.sub(lambda m: f"{_KEYWORD_FLAGS[m.group(1)]} {m.group(2)}", text)
    text = _KEYWORD_VALUE.sub(lambda m: f"{_KEYWORD_FLAGS[m.group(1)]} {m.group(2) or m.group(3)}", text)
    text = _KEYWORD_WORD.sub(lambda m: f"{m.group(1)} {_KEYWORD_FLAGS[m.group(2)]}", text)
    text = _BOOLEAN.sub(lambda m: _BOOLEAN_FLAGS[m.group(1)], text)
    return _SUM_OF_D.sub(r"\1; the stages' data-parallel degrees (d) sum to \2", text)


def _units_in_notes(text: str, display: Display) -> str:
    """Notes written for the library, read on the command line: the numbers of ``auto``'s
    ``methods:`` note in the input's time unit, certify's cheaper partition with its unit and
    where its stages are (``best_stages`` in ``--json`` and ``-o FILE``)."""
    unit = f" {display.time}" if display.time else ""
    if unit:
        text = _METHODS_NOTE.sub(rf"\1 ({display.time}): ", text)
    return _BEST_STAGES.sub(rf"(cost \1{unit}): its stages are best_stages in --json and -o FILE", text)


def report(result: Any, args: argparse.Namespace, *, extra_notes: Sequence[str] = (),
           data: Mapping[str, Any] | None = None, display: Display | None = None) -> int:
    """Print ``result`` as every subcommand does and save it with ``-o``; returns exit 0.

    Human-readable: :meth:`~stagecut.results.Result.summary` (plus ``extra_notes``), a blank line,
    :meth:`~stagecut.results.Result.table`, and what the node lists need said about them, with
    the input's units (``display``, see :func:`display_of`). ``--json``: the result's
    :meth:`~stagecut.results.Result.to_json` on one line (or ``data`` when given), with the
    units of its numbers under ``units`` (``{"time": "ms", "memory": "bytes", "shown": {...}}``,
    see :func:`saved_display`).
    """
    from stagecut import formats
    from stagecut.results import node_list_notes
    from stagecut.units import Display

    display = display or Display()
    if data is None:
        data = result.to_json()
    units = {"time": display.time, "memory": "bytes" if display.bytes else "units",
             "shown": {"memory": display.memory, "bandwidth": display.bandwidth}}
    data = formats.json_safe({**data, "units": units})
    out = getattr(args, "output", None)
    if out:
        write_json(out, data)
    if getattr(args, "json", False):
        print(json.dumps(data, allow_nan=False))
        return EXIT_OK
    spec = str(getattr(args, "graph", "") or "")
    summary = result.summary(display)
    lines = [summary] + [f"note       {n}" for n in extra_notes]
    settings = settings_of(result, display)
    if settings:
        lines.append(f"settings   {settings}")
    text = _from_spec(as_flags("\n".join(lines), display), spec)  # (the flags first: "(from the file's ...)")
    print(_units_in_notes(_human_sizes(text, display), display))
    table = stage_table(result, display)
    if table:
        print()
        print(table)
        notes = node_list_notes(result.stages)
        if notes:
            print(f"({'; '.join(notes)})")
    if out:
        print(f"saved the result to {out}")
    return EXIT_OK


def stage_table(result: Any, display: Display | None = None) -> str:
    """``result.table()``, also for a result class with a *field* named ``table`` that hides the
    method (then the protocol's :meth:`~stagecut.results.Result.table` is used)."""
    from stagecut.results import Result

    method = getattr(type(result), "table", None)
    if not callable(method):
        method = Result.table
    text: str = method(result, display=display)
    return text


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON, atomically (:func:`stagecut.formats.write_json`: a temporary file
    renamed over ``path``), non-finite floats as ``null``; an ``OSError`` names the path."""
    from stagecut import formats

    formats.write_json(formats.json_safe(data), path)


#: output flags checked before a subcommand runs: (namespace attribute, flag)
OUTPUT_FLAGS = (("output", "-o"), ("split_out", "--split-out"), ("plot", "--plot"))
#: input arguments an output must not overwrite
INPUT_ARGS = ("graph", "split", "result")


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse an output path that cannot be written, or that would overwrite an input or the
    other output, before any work is done (a long solve must not end in "cannot write").

    Raises
    ------
    InvalidArgumentError
        Names the flag and the path.
    """
    from stagecut import formats

    seen: dict[str, str] = {}
    inputs = {os.path.realpath(v): name for name in INPUT_ARGS
              if isinstance(v := getattr(args, name, None), str) and os.path.exists(v)}
    for attr, flag in OUTPUT_FLAGS:
        path = getattr(args, attr, None)
        if not path:
            continue
        formats.check_writable(path, flag)
        real = os.path.realpath(path)
        if real in inputs:
            raise bad_argument(flag, f"{path} is the input {inputs[real].upper()}: write the result elsewhere")
        if real in seen:
            raise bad_argument(flag, f"{path} is also the {seen[real]} file: give two different files")
        seen[real] = flag


def requires(args: argparse.Namespace, condition: bool, needs: str, flags: Sequence[tuple[str, str]]) -> None:
    """Refuse flags that only mean something under ``needs`` (e.g. ``--method ip``) when
    ``condition`` does not hold: each of ``flags`` is (namespace attribute, flag), given when the
    attribute is not ``None``/``False``.

    Raises
    ------
    InvalidArgumentError
        ``FLAG: goes with NEEDS`` for the first flag given.
    """
    if condition:
        return
    for attr, flag in flags:
        if getattr(args, attr, None) not in (None, False):
            raise bad_argument(flag, f"goes with {needs}")


# ----------------------------------------------------------------------------------- errors
def _one_line(e: BaseException) -> str:
    text = str(e).strip()
    if isinstance(e, OSError) and e.strerror:
        text = f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    if isinstance(e, KeyError):  # str(KeyError) is the quoted key
        text = f"missing {text}"
    if isinstance(e, RecursionError):
        text = "the input is nested too deeply to read (Python's recursion limit)"
    if isinstance(e, MemoryError) and not isinstance(e, StagecutError):  # not a request refused beforehand
        text = f"out of memory{': ' + text if text else ''}"
    first = text.splitlines()[0] if text else type(e).__name__
    return as_flags(first)


def _is_bug(e: BaseException) -> bool:
    return isinstance(e, StagecutError) and "please report" in str(e)


def guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a subcommand: the one error handler of the command line.

    Output paths are checked first (:func:`check_outputs`). ``StagecutError``, ``ValueError``,
    ``OSError``, a warning turned into an error (``-W error``), ``RecursionError`` (input nested
    too deeply), ``MemoryError`` (a request too large) -> ``stagecut: error: <first line>`` on
    stderr, exit 2 (an internal ``SolverError`` saying "please report" is a bug: exit 1); any
    other exception is a bug: one line with "please report", the traceback only with
    ``--debug``, exit 1; ``KeyboardInterrupt``, or any exception after a Ctrl-C (an interrupted
    import of a compiled module surfaces as ``ImportError``) -> one line, exit 130; a closed stdout -> exit
    141, quietly.
    """

    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        import traceback

        debug = bool(getattr(args, "debug", False) or os.environ.get("STAGECUT_DEBUG"))
        try:
            check_outputs(args)
            code = int(run(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
            return code
        except KeyboardInterrupt:
            print("stagecut: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # the reader went away (| head): no message, as a shell tool killed by SIGPIPE
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_SIGPIPE
        except Exception as e:
            if debug:
                traceback.print_exc()
            if _startup.seen():  # Ctrl-C that surfaced as another exception (an interrupted import)
                print("stagecut: interrupted", file=sys.stderr)
                return EXIT_INTERRUPTED
            if not isinstance(e, (StagecutError, ValueError, OSError, Warning, RecursionError, MemoryError)):
                print(f"stagecut: internal error: {type(e).__name__}: {_one_line(e)}; please report this "
                      "with the command and input (run with --debug for the traceback)", file=sys.stderr)
                return EXIT_BUG  # a bug in stagecut
            # a Warning is raised under -W error; RecursionError is input nested too deeply;
            # MemoryError is a request too large for this machine: each is the input's, not a bug
            if _is_bug(e):
                print(f"stagecut: {_one_line(e)}", file=sys.stderr)
                return EXIT_BUG
            print(f"stagecut: error: {_one_line(e)}", file=sys.stderr)
            return EXIT_USAGE

    return wrapper


def bad_argument(flag: str, message: str) -> InvalidArgumentError:
    """The error for a bad flag value (``flag: message``)."""
    return InvalidArgumentError(f"{flag}: {message}")
