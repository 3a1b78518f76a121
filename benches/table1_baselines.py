"""Table 1's baselines (Tarnawski et al., NeurIPS 2020): local search, PipeDream, Scotch on the 16
workloads of ``../shared/workloads/throughput-inputs``, our value next to the published one, and
the DP's advantage over each (baseline / DP, with the DP's published value, which the exact DP
reproduces: tests/throughput/test_published.py). Prints Markdown.

    nice python benches/table1_baselines.py [--restarts 10] [--only NAME] [--methods pipedream,...]

A baseline that does not apply says why in its cell (PipeDream on a graph its contraction
collapses); ``*`` marks a non-contiguous split; ``--methods`` runs some of the baselines only
(the others' cells say "not run"): PipeDream's column takes a few seconds for all 16 rows.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import stagecut as sc
from stagecut.errors import StagecutError
from stagecut.throughput.baselines import local_search, pipedream, scotch
from stagecut.throughput.problem import ThroughputProblem

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "workloads"
COLUMNS = (("local search", "local_search_tps"), ("PipeDream", "pipedream_tps"), ("Scotch", "scotch_tps"))


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--restarts", type=int, default=10)
    ap.add_argument("--only", default=None)
    ap.add_argument("--methods", default="local-search,pipedream,scotch",
                    help="comma-separated baselines to run (local-search, pipedream, scotch)")
    args = ap.parse_args()
    table = json.loads((SHARED / "published-table1.json").read_text())
    cols = table["columns"]
    print("| workload | DP | local search (ours / paper) | DP adv. | PipeDream (ours / paper) | DP adv. "
          "| Scotch (ours / paper) | DP adv. | seconds (LS / PD / Scotch) |")
    print("|---|---|---|---|---|---|---|---|---|")
    adv: dict[str, list[float]] = {name: [] for name, _ in COLUMNS}
    for name, row in table["rows"].items():
        if args.only and args.only not in name:
            continue
        pub = dict(zip(cols, row))
        problem = ThroughputProblem.from_graph(sc.read_workload(SHARED / "throughput-inputs" / name))
        dp = pub["dp_tps"]
        cells, secs = [name.replace(".json", ""), _fmt(dp)], []
        runs = (lambda p=problem: local_search(p, restarts=args.restarts, seed=0),
                lambda p=problem: pipedream(p), lambda p=problem: scotch(p))
        for (label, key), run, method in zip(COLUMNS, runs, ("local-search", "pipedream", "scotch")):
            if method not in args.methods.split(","):
                cells += [f"not run / {_fmt(pub[key])}", "–"]
                secs.append("–")
                continue
            t0 = time.perf_counter()
            try:
                plan = run()
                ours = plan.objective
                mark = "" if plan.contiguous else "*"
            except StagecutError as e:
                ours, mark = None, f" ({type(e).__name__})"
            secs.append(f"{time.perf_counter() - t0:.1f}")
            cells.append(f"{_fmt(ours)}{mark} / {_fmt(pub[key])}")
            if ours is not None:
                adv[label].append(ours / dp)
            cells.append("–" if ours is None else f"{ours / dp:.2f}x")
        cells.append(" / ".join(secs))
        print("| " + " | ".join(cells) + " |", flush=True)
    print()
    for label, vals in adv.items():
        if vals:
            print(f"- {label}: DP advantage up to {max(vals):.2f}x (min {min(vals):.2f}x) over {len(vals)} workloads")
    print("- paper: up to 2.08x over local search, 1.21x over PipeDream, 7.69x over Scotch")


if __name__ == "__main__":
    main()
