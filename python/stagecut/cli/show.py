"""``stagecut show RESULT.json``: print a saved result again.

    stagecut show RESULT.json [--json]

RESULT.json is what ``-o FILE`` (or ``--json``) of any solving subcommand wrote; its ``kind``
key (``Plan``, ``SlicePlan``, ``Certificate``, ``TrainingPlan``...) says which result class
loads it back (``from_json``), and the summary block and the stage table are printed as the
subcommand printed them.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from stagecut.cli import _common
from stagecut.errors import InvalidGraphError

if TYPE_CHECKING:
    from stagecut.results import Result

__all__ = ["add_parser", "run", "load_result"]


def _result_classes() -> dict[str, type[Result]]:
    import stagecut
    from stagecut.results import Result

    out: dict[str, type[Result]] = {}
    for name in dir(stagecut):
        obj = getattr(stagecut, name)
        if isinstance(obj, type) and issubclass(obj, Result) and obj is not Result:
            out[obj.__name__] = obj
    return out


def load_result(path: str) -> Result:
    """The result saved in ``path`` (by ``-o`` or ``--json``), rebuilt by its class's ``from_json``.

    Raises
    ------
    InvalidGraphError
        Missing file, bad JSON, no or unknown ``kind``, or fields that do not fit the class.
    """
    data = _common.read_json(path, "a saved result")
    kind = data.get("kind") if isinstance(data, dict) else None
    classes = _result_classes()
    if kind is None:
        raise InvalidGraphError(f"{path}: not a saved result (no 'kind' key); write one with -o FILE")
    if not isinstance(kind, str) or kind not in classes:
        shown = repr(kind) if len(repr(kind)) <= 60 else repr(kind)[:57] + "..."
        raise InvalidGraphError(f"{path}: unknown result kind {shown}; known: {', '.join(sorted(classes))}")
    try:
        return classes[kind].from_json(data)
    except InvalidGraphError as e:
        raise InvalidGraphError(f"{path}: {e}") from None
    except (TypeError, KeyError, AttributeError, ValueError) as e:
        raise InvalidGraphError(f"{path}: a malformed {kind} ({e})") from None


@_common.guarded
def run(args: argparse.Namespace) -> int:
    result = load_result(args.result)
    display = _common.saved_display(_common.read_json(args.result, "a saved result"))
    return _common.report(result, args, display=display)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("show", help="print a result saved with -o (or --json) again",
                              description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result", metavar="RESULT.json", help="a result file written by -o FILE or --json")
    _common.add_output(p, save=False)
    p.set_defaults(func=run)
    return p
