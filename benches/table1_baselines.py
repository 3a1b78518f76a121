"""Table 1's baselines (Tarnawski et al., NeurIPS 2020): local search, PipeDream, Scotch on the 16
workloads of ``../shared/workloads/throughput-inputs``, our value next to the published one, and
the DP's advantage over each (baseline / DP, with the DP's published value, which the exact DP
reproduces: tests/throughput/test_published.py). Prints Markdown.

    nice python benches/table1_baselines.py [--restarts 10] [--only NAME] [--methods pipedream,...]

A baseline that does not apply says why in its cell (PipeDream on a graph its contraction
collapses); ``*`` marks a non-contiguous split; ``--methods`` runs some of the baselines only
(the others' cells say "not run"): PipeDream's column takes a few seconds for all 16 rows.

A non-contiguous split is outside the set the DP optimises over, so beside local search and
Scotch the table also gives the exact optimum of the same family of splits ("exact"): the DP
(``dp_tps``) for a contiguous result, the paper's non-contiguous IP optimum
(``ip_noncontiguous_tps``, found by Gurobi) for a non-contiguous one, and the advantage
baseline / exact. Times are CPU seconds (this process's and gpart's).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Callable
from pathlib import Path

import stagecut as sc
from stagecut.errors import StagecutError
from stagecut.results import Plan
from stagecut.throughput.baselines import local_search, pipedream, scotch
from stagecut.throughput.problem import ThroughputProblem

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "workloads"
COLUMNS = (("local search", "local_search_tps"), ("PipeDream", "pipedream_tps"), ("Scotch", "scotch_tps"))


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (gpart)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--restarts", type=int, default=10)
    ap.add_argument("--only", default=None)
    ap.add_argument("--methods", default="local-search,pipedream,scotch",
                    help="comma-separated baselines to run (local-search, pipedream, scotch)")
    args = ap.parse_args()
    table = json.loads((SHARED / "published-table1.json").read_text())
    cols = table["columns"]
    print("| workload | DP | IP non-contig. | local search (ours / paper) | DP adv. | exact | adv. "
          "| PipeDream (ours / paper) | DP adv. | Scotch (ours / paper) | DP adv. | exact | adv. "
          "| CPU s (LS / PD / Scotch) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    adv: dict[str, list[float]] = {name: [] for name, _ in COLUMNS}
    same: dict[str, list[float]] = {name: [] for name, _ in COLUMNS}
    below = dict.fromkeys(adv, 0)
    for name, row in table["rows"].items():
        if args.only and args.only not in name:
            continue
        pub = dict(zip(cols, row))
        problem = ThroughputProblem.from_graph(sc.read_workload(SHARED / "throughput-inputs" / name))
        dp, ip = pub["dp_tps"], pub["ip_noncontiguous_tps"]
        cells, secs = [name.replace(".json", ""), _fmt(dp), _fmt(ip)], []
        runs: tuple[Callable[[ThroughputProblem], Plan], ...] = (
            lambda p: local_search(p, restarts=args.restarts, seed=0), pipedream, scotch)
        for (label, key), run, method in zip(COLUMNS, runs, ("local-search", "pipedream", "scotch")):
            with_exact = method != "pipedream"  # PipeDream is contiguous: its exact is the DP
            if method not in args.methods.split(","):
                cells += [f"not run / {_fmt(pub[key])}", "–"] + (["–", "–"] if with_exact else [])
                secs.append("–")
                continue
            t0 = _cpu()
            contiguous = True
            try:
                plan = run(problem)
                ours = plan.objective
                contiguous = plan.contiguous
                mark = "" if contiguous else "*"
            except StagecutError as e:
                ours, mark = None, f" ({type(e).__name__})"
            secs.append(f"{_cpu() - t0:.2f}")
            cells.append(f"{_fmt(ours)}{mark} / {_fmt(pub[key])}")
            if ours is not None:
                adv[label].append(ours / dp)
                below[label] += ours < dp - 0.005  # the published values have 2 decimals
            cells.append("–" if ours is None else f"{ours / dp:.2f}x")
            if with_exact:
                exact, tag = (dp, "DP") if contiguous else (ip, "IP")
                cells.append(f"{_fmt(exact)} ({tag})")
                if ours is not None:
                    same[label].append(ours / exact)
                cells.append("–" if ours is None else f"{ours / exact:.3f}x")
        cells.append(" / ".join(secs))
        print("| " + " | ".join(cells) + " |", flush=True)
    print()
    for label, vals in adv.items():
        if vals:
            print(f"- {label}: DP advantage up to {max(vals):.2f}x (min {min(vals):.2f}x) over {len(vals)} workloads"
                  f" ({below[label]} below the DP)")
    for label, vals in same.items():
        if vals:
            print(f"- {label}: advantage of the exact optimum of the same family (DP if contiguous, published"
                  f" non-contiguous IP if not) from {min(vals):.3f}x to {max(vals):.2f}x over {len(vals)} workloads")
    print("- paper: up to 2.08x over local search, 1.21x over PipeDream, 7.69x over Scotch")


if __name__ == "__main__":
    main()
