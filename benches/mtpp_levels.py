"""The MTPP certificate table in the SliceGraph paper's form from a certify sweep's results.

Reads the rows of a ``stagecut sweep`` results table whose objective is ``certify`` (for instance
``benches/mtpp_testbed_60s.toml``'s), recomputes the fast combinatorial levels (``simple``,
``node-cut``, ``crossing``, ``cover``) on each instance, and prints per graph size and device count the geometric
mean over the instances of each level's bound over the plan the sweep certified, the sweep's own
bound (its method's column), and how many times smaller the gap is than with ``simple`` alone::

    python benches/mtpp_levels.py benches/mtpp_testbed_60s.results [--json levels.json]

The graphs are rebuilt from their ``regal:N:MODEL:SEED`` names (other graph names are refused).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import pathlib
import sys
import time
from typing import Any

import stagecut as sc

LEVELS = ("simple", "node-cut", "crossing", "cover")


def rows_of(table: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    parts = sorted(glob.glob(str(pathlib.Path(table) / "*.parquet")))
    if not parts:
        raise SystemExit(f"mtpp_levels: no results in {table}")
    rows = [r for f in parts for r in pq.read_table(f).to_pylist()]
    return [r for r in rows if r.get("problem") == "certify" and r.get("error") is None]


def graph_of(name: str) -> Any:
    parts = name.split(":")
    if len(parts) != 4 or parts[0] != "regal":
        raise SystemExit(f"mtpp_levels: graph {name!r} is not regal:N:MODEL:SEED")
    return sc.regal_graph(int(parts[1]), model=parts[2], seed=int(parts[3]))


def measure(rows: list[dict[str, Any]], time_limit: float = 30.0) -> list[dict[str, Any]]:
    out = []
    for r in sorted(rows, key=lambda r: (r["devices"], r["graph"], r["method"])):
        g = graph_of(r["graph"])
        rec = {"graph": r["graph"], "nodes": len(g.nodes), "devices": r["devices"], "method": r["method"],
               "plan": r["objective"], "bound": r["lower_bound"]}
        for level in LEVELS:
            t0 = time.process_time()
            rec[level] = sc.mtpp_bound(g, level=level, devices=r["devices"], time_limit=time_limit).bound
            rec[level + "_cpu_s"] = time.process_time() - t0
        out.append(rec)
    return out


def table(recs: list[dict[str, Any]]) -> str:
    """One row per graph size and device count (sizes, then k, ascending)."""
    methods = sorted({r["method"] for r in recs})
    cols = [*LEVELS, *methods]
    lines = ["| nodes | k | graphs | " + " | ".join(f"`{c}`" for c in cols) + " | gap closed against `simple` |",
             "|---|---|---|" + "---|" * (len(cols) + 1)]
    for size, k in sorted({(r["nodes"], r["devices"]) for r in recs}):
        at = [r for r in recs if r["devices"] == k and r["nodes"] == size]
        per = {lv: [r[lv] / r["plan"] for r in at] for lv in LEVELS}
        for m in methods:
            per[m] = [r["bound"] / r["plan"] for r in at if r["method"] == m]
        g = {c: math.exp(sum(math.log(x) for x in v) / len(v)) for c, v in per.items() if v}
        best = max(g[m] for m in methods if m in g)
        closed = "every instance proven" if best >= 1 - 1e-9 else f"{(1 - g['simple']) / (1 - best):.1f}x"
        n = len({r["graph"] for r in at})
        lines.append(f"| {size} | {k} | {n} | " + " | ".join(f"{g[c]:.4f}" if c in g else "-" for c in cols)
                     + f" | {closed} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="the sweep's results table (a directory of Parquet parts)")
    ap.add_argument("--json", help="also write each instance's bounds here")
    a = ap.parse_args(argv)
    recs = measure(rows_of(a.results))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(recs, indent=1))
    print(table(recs))
    print(f"\nlevels' CPU: at most {max(r[lv + '_cpu_s'] for r in recs for lv in LEVELS):.1f} s per instance",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
