"""Start-up of the ``stagecut`` command: CPU seconds of ``--help``, ``--version`` and every
subcommand's ``--help``.

Run: ``python benches/bench_cli.py`` (``--repeat N``; exit status 1 when the best run of any
``stagecut ...`` case passes 0.3 s of CPU). Each run is a fresh ``python -m stagecut ...`` process; its CPU time
(user + system, from ``resource.getrusage(RUSAGE_CHILDREN)``) is what is compared, wall time is
shown beside it (it grows with the machine's load, CPU time much less). For reference the same
is measured for a bare ``python -c pass`` (the interpreter's own start-up, included in the
figures) and for ``import stagecut`` followed by a first solve (the cost the lazy imports move
to the first use).

Measured (best of 5, CPU seconds, a 2-core machine under a load average of about 17, so the wall
seconds are 3-4 times the CPU's): ``python -c pass`` 0.05; ``stagecut --help`` 0.08,
``--version`` 0.09; ``stagecut COMMAND --help`` 0.075 (trace) to 0.114 (plan) for every
subcommand (partition 0.083, evaluate 0.090, slice 0.102, certify 0.093, latency 0.097,
sweep 0.082, show 0.087, demo 0.089). Before the subcommands' modules imported their solvers
and the graph model on load, the same runs took 0.32 (trace) to 0.84 (certify) s of CPU, and
``--help`` 0.14; ``import stagecut`` and a first partition take 0.5-0.6 s either way.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

from stagecut.cli._parser import COMMANDS

#: the strict figure: CPU seconds for ``stagecut --help``, ``--version`` and ``stagecut COMMAND --help``
LIMIT_S = 0.3

#: the subcommands, in the order of ``stagecut --help``
SUBCOMMANDS = tuple(COMMANDS)

CASES: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "stagecut --help": ["-m", "stagecut", "--help"],
    "stagecut --version": ["-m", "stagecut", "--version"],
    **{f"stagecut {c} --help": ["-m", "stagecut", c, "--help"] for c in SUBCOMMANDS},
    "import stagecut + a first partition": ["-c", "import stagecut as sc; sc.partition(sc.Graph.chain([1.0, 2.0]), "
                                                  "devices=2)"],
}


def measure(args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``python ARGS`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs per case; the best is kept (default: 5)")
    args = parser.parse_args(argv)
    print(f"{'case':<40}  {'CPU (s)':>8}  {'wall (s)':>8}")
    failed = []
    for name, case in CASES.items():
        runs = [measure(case) for _ in range(args.repeat)]
        cpu, wall = min(r[0] for r in runs), min(r[1] for r in runs)
        print(f"{name:<40}  {cpu:>8.3f}  {wall:>8.3f}")
        if name.startswith("stagecut") and cpu > LIMIT_S:
            failed.append(f"{name}: {cpu:.3f} s of CPU > {LIMIT_S} s")
    for line in failed:
        print(f"FAIL {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
