"""What a subcommand reads: the ``GRAPH`` argument (:func:`load_graph`: a workload ``FILE``,
``example:NAME``, ``regal:N[:MODEL[:SEED]]``, ``rwnn:...`` or ``MODEL.onnx``), JSON files
(:func:`read_json`) and a split or saved result as a placement (:func:`read_placement`). Bad input
is an :class:`~stagecut.errors.InvalidGraphError` naming the file and the bad part.

Everything here is importable from :mod:`stagecut.cli._common` too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.validate import MAX_INT, check_id, check_int

if TYPE_CHECKING:  # the graph model (numpy, the core) is imported on first use: a --help needs none of it
    from stagecut.graph import Graph

__all__ = ["RWNN_SPEC", "GRAPH_HELP", "EXAMPLES", "load_graph", "read_json", "read_placement"]

#: the grammar of a randomly wired network (:func:`stagecut.rwnn.rwnn`) as a GRAPH
RWNN_SPEC = "rwnn:modules=M:channels=C[:dep=sdep|wdep][:size=10|32][:model=er|ws|ba][:seed=S]"

GRAPH_HELP = ("the input: a workload JSON FILE (the format of ../shared/workloads: times in ms, "
              "sizes in bytes), example:NAME (a built-in synthetic graph: %s), "
              "regal:N[:MODEL[:SEED]] (a seeded random REGAL-style DAG of N nodes; MODEL "
              "erdos_renyi (default), barabasi_albert, watts_strogatz or random_geometric; SEED 0), or "
              f"{RWNN_SPEC} (stacked randomly wired modules of DiviML for the latency planner: "
              "modules of 10 (default) or 32 nodes, Erdos-Renyi (default), Watts-Strogatz or "
              "Barabasi-Albert, joined by C channels, strongly (default) or weakly dependent; "
              "times in ms for the device kinds cpu, t4 and a100, outputs (comm) in bytes; SEED 0), "
              "or MODEL.onnx (an ONNX model: FLOP times at 1e12 FLOP/s and a 10 GB/s link, in ms; "
              "'stagecut trace' sets these)")


def _example(name: str) -> Graph:
    from stagecut import examples

    return EXAMPLES[name][1](examples)


def _chain(ex: Any) -> Graph:
    from stagecut.graph import Graph

    return Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0, 3.0, 2.0, 1.0], comm=0.5)


#: example name -> (description, maker)
EXAMPLES: dict[str, tuple[str, Callable[[Any], Graph]]] = {
    "transformer": ("12-layer transformer-like inference chain, 110 nodes",
                    lambda ex: ex.transformer_like(layers=12)),
    "transformer-training": ("the same with backward nodes, 220 nodes",
                             lambda ex: ex.transformer_like(layers=12, training=True)),
    "chain": ("an 8-layer chain, accelerator times 4 1 1 2 4 3 2 1 ms, outputs 0.5 ms to move",
              _chain),
}


def load_graph(spec: str) -> Graph:
    """The :class:`~stagecut.graph.Graph` a ``GRAPH`` argument names.

    A path ending in ``.onnx`` is an ONNX model (:func:`stagecut.cli._onnx.onnx_graph`: FLOP
    times at 1e12 FLOP/s and a 10 GB/s link, converted to ms; ``stagecut trace`` sets them).

    Raises
    ------
    InvalidGraphError
        Unreadable or malformed file, unknown example, malformed ``regal:`` or ``rwnn:`` spec
        (naming the bad part).
    InvalidArgumentError
        An unreadable ONNX model.
    BackendUnavailableError
        An ONNX model without onnx installed.
    """
    if spec.startswith("example:"):
        name = spec.split(":", 1)[1]
        if name not in EXAMPLES:
            raise InvalidGraphError(f"unknown example {name!r}; choose one of {', '.join(EXAMPLES)}")
        return _example(name)
    if spec.startswith("regal:"):
        from stagecut.examples import REGAL_MODELS, regal_graph

        parts = spec.split(":")[1:]
        try:
            if not 1 <= len(parts) <= 3:
                raise ValueError
            n = int(parts[0])
            model = parts[1] if len(parts) > 1 and parts[1] else "erdos_renyi"
            seed = int(parts[2]) if len(parts) > 2 else 0
        except ValueError:
            raise InvalidGraphError(f"{spec!r}: expected regal:N[:MODEL[:SEED]] with integers N and SEED") from None
        if model not in REGAL_MODELS:
            raise InvalidGraphError(f"{spec!r}: unknown model {model!r}; choose one of {', '.join(REGAL_MODELS)}")
        return regal_graph(n, model=model, seed=seed)
    if spec.startswith("rwnn:"):
        return _rwnn(spec)
    if spec.lower().endswith(".onnx"):  # an ONNX model: FLOP times at 1e12 FLOP/s, a 10 GB/s link, in ms
        from stagecut.cli._onnx import onnx_graph

        return onnx_graph(spec)
    from stagecut.formats import read_workload

    return read_workload(spec)


def _rwnn(spec: str) -> Graph:
    """The graph of an ``rwnn:KEY=VALUE:...`` spec (:data:`RWNN_SPEC`); a bad part is an
    ``InvalidGraphError`` naming it."""
    from stagecut.rwnn import rwnn

    given: dict[str, str] = {}
    for part in spec.split(":")[1:]:
        key, eq, value = part.partition("=")
        if not eq:
            raise InvalidGraphError(f"{spec!r}: {part!r} is not KEY=VALUE; expected {RWNN_SPEC}")
        if key not in ("modules", "channels", "dep", "size", "model", "seed"):
            raise InvalidGraphError(f"{spec!r}: unknown key {key!r} in {part!r}; expected {RWNN_SPEC}")
        if key in given:
            raise InvalidGraphError(f"{spec!r}: {key} is given twice")
        given[key] = value
    for key in ("modules", "channels"):
        if key not in given:
            raise InvalidGraphError(f"{spec!r}: {key}= is missing; expected {RWNN_SPEC}")
    ints: dict[str, int] = {}
    for key in ("modules", "channels", "size", "seed"):
        if key in given:
            text = given[key]
            if not (text.isascii() and text.isdecimal() and len(text) <= 20):
                raise InvalidGraphError(f"{spec!r}: {key}={text[:40]}: expected a non-negative integer")
            ints[key] = int(text)
    if ints.get("size", 10) not in (10, 32):
        raise InvalidGraphError(f"{spec!r}: size must be 10 or 32 (DiviML's modules), got {ints['size']} "
                                "(other sizes: stagecut.rwnn.rwnn)")
    try:
        return rwnn(ints["modules"], ints["channels"], model=given.get("model", "er"), size=ints.get("size", 10),
                    dep=given.get("dep", "sdep"), seed=ints.get("seed", 0))
    except InvalidArgumentError as e:
        raise InvalidGraphError(f"{spec!r}: {e}") from None


def read_json(path: str, what: str) -> Any:
    """A JSON file's content; a missing file, a directory or bad JSON is an ``InvalidGraphError``
    naming ``path`` (see :func:`stagecut.formats.read_json`)."""
    from stagecut import formats

    return formats.read_json(path, what)


class _Ids:
    """Node ids read from JSON mapped back to the graph's: lists to tuples, and string keys of a
    JSON object (``"7"``) to the graph's id whose text they are."""

    def __init__(self, graph: Graph) -> None:
        self.index = graph.index
        self.by_str: dict[str, Any] | None = None

    def __call__(self, v: Any, where: str) -> Any:
        v = check_id(v, where)
        if v in self.index:
            return v
        if self.by_str is None:  # built once, on the first miss
            self.by_str = {str(i): i for i in self.index}
        return self.by_str.get(str(v), v)


def _device(stage: Any, position: int, where: str) -> tuple[str, int]:
    if isinstance(stage, Mapping):
        if "kind" in stage and "kind_index" in stage:
            kind = stage["kind"]
            if not isinstance(kind, str):
                raise InvalidGraphError(f"{where}.kind: expected a device kind (a string), got {type(kind).__name__}")
            return kind, check_int(stage["kind_index"], f"{where}.kind_index", error=InvalidGraphError)
        device = stage.get("device")
        if device is not None:
            if not isinstance(device, str) or not device:
                raise InvalidGraphError(f"{where}.device: expected a device name such as 'cpu' or 'accelerator:0', "
                                        f"got {device!r}"[:200])
            if ":" not in device:
                return device, 0  # a device of its own kind ("cpu" of the latency planner)
            kind, _, idx = device.rpartition(":")
            if not (kind and idx.isascii() and idx.isdecimal() and int(idx) <= MAX_INT):
                raise InvalidGraphError(f"{where}.device: expected KIND:INDEX with a small index, got {device!r}"[:200])
            return kind, int(idx)
    return "accelerator", position


def _stage_nodes(stage: Any, where: str) -> list[Any]:
    nodes = stage.get("nodes", []) if isinstance(stage, Mapping) else None
    if not isinstance(nodes, list):
        raise InvalidGraphError(f"{where}.nodes: expected a list of node ids")
    return nodes


def read_placement(path: str, graph: Graph) -> dict[Any, tuple[str, int]]:
    """``{node id: (device kind, index)}`` from a file: a saved result (``-o``), a split in the
    workload format (``fpgas``/``cpus``), ``{"blocks": [[ids], ...]}``, a list of blocks, or
    ``{node: stage}``. Blocks and stages without a device run on accelerators 0, 1, ...

    Raises
    ------
    InvalidGraphError
        Missing file, bad JSON, none of these shapes, or a malformed entry (named).
    """
    data = read_json(path, "a split or a saved result")
    ids = _Ids(graph)
    if isinstance(data, Mapping) and isinstance(data.get("stages"), list) and "kind" in data:
        return {ids(v, f"{path}: stages[{i}].nodes[{j}]"): _device(st, i, f"{path}: stages[{i}]")
                for i, st in enumerate(data["stages"]) for j, v in enumerate(_stage_nodes(st, f"{path}: stages[{i}]"))}
    if isinstance(data, Mapping) and ("fpgas" in data or "cpus" in data):
        from stagecut import formats

        return dict(formats.split_from_dict(data, graph))
    if isinstance(data, Mapping) and "blocks" in data:
        data = data["blocks"]
    if isinstance(data, list) and all(isinstance(b, list) for b in data):
        return {ids(v, f"{path}: blocks[{i}][{j}]"): ("accelerator", i) for i, b in enumerate(data)
                for j, v in enumerate(b)}
    if isinstance(data, Mapping) and data and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_INT
                                                  for s in data.values()):
        return {ids(k, f"{path}: key {k!r}"): ("accelerator", s) for k, s in data.items()}
    raise InvalidGraphError(f"{path}: expected a saved result, a fpgas/cpus split, "
                            "{\"blocks\": [[ids], ...]} or {node: stage}")
