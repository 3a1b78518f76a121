"""Golden output: what ``stagecut`` prints for a person, on the shared workloads, held line by line
(partition, evaluate, slice, show, plan, latency).

Each case runs one command in-process on a file of ``../shared/workloads`` with deterministic
methods and seeds, and compares its stdout with ``tests/cli/golden/NAME.txt``: the summary
block, the units in the table headers, the stage rows, the footnotes. Only what varies from
run to run is masked: the ``time`` line (wall-clock seconds) and the path ``-o`` wrote to.
A change of a unit, a header or a number fails here.

Regenerate the files after an intended change of the output (and read the diff)::

    python tests/cli/test_golden.py            # rewrites tests/cli/golden/*.txt
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
SHARED = HERE.parent.parent.parent / "shared" / "workloads"
TP = "$SHARED/throughput-inputs/LayerGraphs"
LAT = "$SHARED/latency-inputs/LayerGraphs"

#: name -> the command's arguments ($SHARED: the shared workloads; $OUT: a file in a temporary folder)
CASES: dict[str, list[str]] = {
    "partition_bert24": ["partition", f"{TP}/bert24_inference.json"],
    "partition_bert24_memory": ["partition", f"{TP}/bert24_inference.json", "-k", "3", "--memory", "2.5GiB"],
    "partition_operators_names": ["partition", "$SHARED/throughput-inputs/OperatorGraphs/bert_l-3_inference.json",
                                  "-k", "4"],
    "partition_gnmt_training": ["partition", f"{TP}/gnmt_training.json", "-k", "4", "--method", "dpl"],
    "partition_gnmt_auto_fallback": ["partition", f"{TP}/gnmt_training.json", "-k", "4", "--max-ideals", "1000"],
    "evaluate_bert24_expert_300MB": ["evaluate", f"{TP}/bert24_inference.json",
                                     "$SHARED/human-experts/bert24_inference_expert.json", "--memory", "300MB"],
    "slice_bert24": ["slice", f"{TP}/bert24_inference.json", "-k", "4", "--memory", "300MB", "--bandwidth", "10GB/s",
                     "--method", "dp", "-o", "$OUT"],
    "show_slice_bert24": ["show", "$OUT"],
    "plan_gnmt": ["plan", "$SHARED/piper/gnmt.json", "-k", "2", "--memory", "2.5GiB", "--bandwidth", "25GiB/s"],
    "latency_bert24_heft": ["latency", f"{LAT}/bert24_inference.json", "--method", "heft"],
    "latency_gnmt_expert": ["latency", f"{LAT}/gnmt_inference.json", "-k", "6", "--evaluate",
                            "$SHARED/human-experts/gnmt_inference_expert.json"],
}

#: a case that reads what another one saved: that one runs first when its file is not there
NEEDS = {"show_slice_bert24": "slice_bert24"}

_TIME = re.compile(r"^(time {7})\d+\.\d+ s$", re.MULTILINE)


def render(name: str, out_file: pathlib.Path) -> str:
    """The golden text of a case: the command (with ``$SHARED``) and its masked stdout."""
    from stagecut.cli.main import main

    if name in NEEDS and not out_file.exists():
        render(NEEDS[name], out_file)
    argv = CASES[name]
    real = [a.replace("$SHARED", str(SHARED)).replace("$OUT", str(out_file)) for a in argv]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(real)
    text = _TIME.sub(r"\g<1><masked> s", stdout.getvalue()).replace(str(out_file), "$OUT")
    head = f"$ stagecut {' '.join(argv)}" + ("" if code == 0 else f"\n(exit status {code})")
    return f"{head}\n{text}"


@pytest.fixture(scope="module")
def out_file(tmp_path_factory):
    if not (SHARED / "published-table1.json").exists():
        pytest.skip("../shared/workloads is absent")
    return tmp_path_factory.mktemp("golden") / "result.json"


@pytest.mark.parametrize("name", list(CASES))
def test_output_is_the_golden_text(name, out_file):
    expected = (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")
    got = render(name, out_file)
    assert got == expected, (f"stagecut's output for {name} changed; if that is intended, run "
                             f"'python tests/cli/test_golden.py' and read the diff\n{got}")


def test_every_table_header_has_units():
    """The golden files themselves: every stage table's times and sizes carry a unit, and no
    number is in e-notation."""
    paths = sorted(GOLDEN.glob("*.txt"))
    assert paths, f"no golden file in {GOLDEN}"
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\de[+-]\d", text), f"{path.name}: a number in e-notation"
        heads = [line for line in text.splitlines() if line.startswith("stage ")]
        assert heads, path.name
        for head in heads:
            columns = re.split(r"\s{2,}", head.strip())
            for col in columns:
                if col not in ("stage", "device", "nodes", "ids", "first node", "last node"):
                    assert re.fullmatch(r"\w+ \((ms|s|µs|B|KiB|MiB|GiB|TiB|kB|MB|GB|TB)\)", col), (path.name, col)


def main() -> int:
    import tempfile

    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "result.json"
        for name in CASES:
            (GOLDEN / f"{name}.txt").write_text(render(name, out), encoding="utf-8")
            print(f"wrote {GOLDEN / name}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
