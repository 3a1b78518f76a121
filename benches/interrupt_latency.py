"""Seconds from Ctrl-C to the end of a MIP solve that is inside its search (the strict figure the
tests only bound generously): ``python benches/interrupt_latency.py [--repeat N]``.

For each solver (CBC, HiGHS) and each way in (the Python API, the command line), a child process
solves the latency MILP of a 40-node REGAL graph on 4 accelerators (minutes of branch and bound),
says when the solver is searching, waits 2 s and receives SIGINT; the figure is the wall time
from the signal to the child's exit, with the child's CPU seconds beside it (the machine's load
inflates the wall time)."""

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from test_reliability_interrupt import CHILD  # noqa: E402


def once(solver, how):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, solver, how], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stderr.readline().split() == ["searching"]
        time.sleep(2.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        wall = time.monotonic() - sent
    finally:
        proc.kill()
        proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ok = (how == "api" and out.split() == ["interrupted"]) or (how == "cli" and proc.returncode == 130)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, ok


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print("| solver | via | runs | interrupted | signal to exit, median (s) | max (s) | child CPU per run (s) |")
    print("|---|---|---|---|---|---|---|")
    for solver, how in (("cbc", "api"), ("cbc", "cli"), ("highs", "api")):
        runs = [once(solver, how) for _ in range(args.repeat)]
        walls = [w for w, _, _ in runs]
        print(f"| {solver} | {how} | {len(runs)} | {sum(ok for *_, ok in runs)}/{len(runs)} | "
              f"{statistics.median(walls):.2f} | {max(walls):.2f} | {statistics.mean(c for _, c, _ in runs):.1f} |")


if __name__ == "__main__":
    main()
