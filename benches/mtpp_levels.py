"""The MTPP certificate table in the SliceGraph paper's form from a certify sweep's results.

Reads the rows of a ``stagecut sweep`` results table whose objective is ``certify`` (for instance
``benches/mtpp_testbed_60s.toml``'s), recomputes the fast combinatorial levels (``simple``,
``node-cut``, ``crossing``, ``cover``) on each instance, and prints per graph size and device count the geometric
mean over the instances of each level's bound over the plan the sweep certified (or the cheaper
partition a level of its ladder found), the sweep's own
bound (its method's column), and how many times smaller the gap is than with ``simple`` alone::

    python benches/mtpp_levels.py benches/mtpp_testbed_60s.results [more tables] [--json levels.json] \\
        [--from-json levels-before.json] [--plot table.png]

The graphs are rebuilt from their ``regal:N:MODEL:SEED`` names, or read from their files (a
workload JSON, relative to the directory holding the results table, as the sweep file names it),
with the task's memory (``none``, ``file`` or a size) and colocation setting (the method's
``colocate`` option: a results row does not hold the ``plan`` table, so a sweep whose plan
ignores colocation names ``colocate = false`` in its method options too); other graph names
are refused. An instance is its graph, ``k``, method, memory and time limit: a table may hold
runs of the same graphs at other budgets (they are separate instances, never averaged
together: the table refuses a group that mixes them). REGAL rows are grouped by size, the graphs
read from files in one group (``operator graphs``).

``--ladder`` measures nothing: it reads each level's bound from the rows' ``detail`` column (the
ladder as the sweep ran it, within the task's budget) and prints, per level, the best bound the
ladder had after it (a level with no bound keeps the one before), so the columns climb to the
sweep's own bound and show which level added what.
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
from stagecut.mtpp.bounds import EXTRA_LEVELS
from stagecut.mtpp.bounds import LEVELS as LADDER

LEVELS = ("simple", "node-cut", "crossing", "cover")


def rows_of(table: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    parts = sorted(glob.glob(str(pathlib.Path(table) / "*.parquet")))
    if not parts:
        raise SystemExit(f"mtpp_levels: no results in {table}")
    rows = [r for f in parts for r in pq.read_table(f).to_pylist()]
    rows = [r for r in rows if r.get("problem") == "certify" and r.get("error") is None]
    none = [r for r in rows if r.get("objective") is None]  # (proven infeasible, or no plan found)
    if none:
        statuses = ", ".join(sorted({str(r.get("status")) for r in none}))
        print(f"mtpp_levels: {len(none)} rows without a plan left out ({statuses})", file=sys.stderr)
    return [r for r in rows if r.get("objective") is not None]


#: the group of the graphs read from files
OPS = "operator graphs"


def graph_of(name: str, base: pathlib.Path | None = None) -> Any:
    """The graph of a row: ``regal:N:MODEL:SEED``, or a workload file relative to ``base``."""
    if base is not None and name.endswith(".json") and ":" not in name:
        from stagecut.cli._common import load_graph

        path = base / name
        if not path.is_file():
            raise SystemExit(f"mtpp_levels: graph file {path} not found")
        return load_graph(str(path))
    parts = name.split(":")
    if len(parts) != 4 or parts[0] != "regal":
        raise SystemExit(f"mtpp_levels: graph {name!r} is not regal:N:MODEL:SEED or a workload file")
    return sc.regal_graph(int(parts[1]), model=parts[2], seed=int(parts[3]))


def settings_of(row: dict[str, Any], graph: Any) -> dict[str, Any]:
    """The memory and colocation the task solved for (as the sweep runs a certify task)."""
    from stagecut.units import parse_bytes

    memory = row.get("memory") or "file"
    if memory == "file":
        value = graph.defaults.get("memory")
        mem = None if value is None else float(value)
    else:
        mem = parse_bytes(memory, flag="memory")
    options = json.loads(row.get("options") or "{}")
    return {"memory": mem, "colocate": options.get("colocate")}


def _record(r: dict[str, Any], nodes: int | None, regal: bool) -> dict[str, Any]:
    """What every instance's record holds from its row: the instance, its group, plan and bound
    (the plan: the cheaper of the one certified and a partition a level of its ladder found)."""
    better = json.loads(r["detail"]).get("best_objective") if r.get("detail") else None
    plan = r["objective"] if better is None else min(r["objective"], float(better))
    return {"graph": r["graph"], "nodes": nodes, "group": nodes if regal else OPS, "devices": r["devices"],
            "method": r["method"], "memory": r.get("memory"), "time_limit": r.get("time_limit"),
            "plan": plan, "bound": r["lower_bound"]}


def measure_one(r: dict[str, Any], time_limit: float = 30.0, base: pathlib.Path | None = None) -> dict[str, Any]:
    """One row's levels, each on its own within ``time_limit`` seconds (stopped there it gives its
    best bound so far, a valid one; ``<level>_status`` says so)."""
    g = graph_of(r["graph"], base)
    regal = r["graph"].startswith("regal:")
    rec = _record(r, len(g.nodes), regal)
    settings = settings_of(r, g)
    for level in LEVELS:
        t0 = time.process_time()
        res = sc.mtpp_bound(g, level=level, devices=r["devices"], time_limit=time_limit, **settings)
        rec[level], rec[level + "_status"] = res.bound, res.status
        rec[level + "_cpu_s"] = time.process_time() - t0
    return rec


def ladder_one(r: dict[str, Any]) -> dict[str, Any]:
    """One row's ladder from its ``detail`` column: per level, the best bound so far."""
    if not r.get("detail"):
        raise SystemExit(f"mtpp_levels: {r['graph']} k={r['devices']}: no detail column (a table from an older "
                         f"release): run without --ladder")
    regal = r["graph"].startswith("regal:")
    nodes = int(r["graph"].split(":")[1]) if regal else None
    rec = _record(r, nodes, regal)
    best = 0.0
    rows = json.loads(r["detail"])["levels"]
    rank = {lv: i for i, lv in enumerate(LADDER + EXTRA_LEVELS)}
    # (in the ladder's order, whatever order the levels ran in: certify may run subgraph first)
    for level, bound, status, seconds in sorted(rows, key=lambda row: rank.get(row[0], len(rank))):
        if bound is not None:
            best = max(best, min(float(bound), rec["plan"]))
        rec[level], rec[level + "_status"], rec[level + "_s"] = best, status, seconds
    return rec


def measure(rows: list[dict[str, Any]], time_limit: float = 30.0, base: pathlib.Path | None = None,
            jobs: int = 1) -> list[dict[str, Any]]:
    """:func:`measure_one` for every row (``jobs`` processes)."""
    rows = sorted(rows, key=lambda r: (r["devices"], r["graph"], r["method"]))
    if jobs <= 1:
        return [measure_one(r, time_limit, base) for r in rows]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(measure_one, rows, [time_limit] * len(rows), [base] * len(rows)))


def instance(r: dict[str, Any]) -> tuple[Any, ...]:
    """What makes a row one instance: graph, ``k``, method, memory and time limit."""
    return (r["graph"], r["devices"], r["method"], r.get("memory"), r.get("time_limit"))


def group_of(r: dict[str, Any]) -> Any:
    """A row's group: its REGAL size, or the operator graphs (by memory setting, when it is not ``none``)."""
    grp = r.get("group", r["nodes"])
    if grp == OPS and r.get("memory") not in (None, "none"):
        return f"{OPS}, memory {r['memory']}"
    return grp


def table(recs: list[dict[str, Any]], levels: tuple[str, ...] = LEVELS) -> str:
    """One row per group (:func:`group_of`) and device count (REGAL sizes, then the operator
    graphs; k ascending); a group holding the same graph, ``k`` and method twice (runs at other
    budgets or memories) is refused."""
    seen: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in recs:
        other = seen.setdefault((group_of(r), r["graph"], r["devices"], r["method"]), instance(r))
        if other != instance(r):
            raise SystemExit(f"mtpp_levels: {r['graph']} k={r['devices']} {r['method']} twice "
                             f"({other[3:]} and {instance(r)[3:]}): give one run of each instance")
    methods = sorted({r["method"] for r in recs})
    cols = [*levels, *methods]
    lines = ["| nodes | k | graphs | " + " | ".join(f"`{c}`" for c in cols) + " | gap closed against `simple` |",
             "|---|---|---|" + "---|" * (len(cols) + 1)]
    def order(gk: tuple[Any, int]) -> tuple[int, Any, int]:  # (REGAL sizes ascending, then the files)
        return (1, gk[0], gk[1]) if isinstance(gk[0], str) else (0, gk[0], gk[1])

    for size, k in sorted({(group_of(r), r["devices"]) for r in recs}, key=order):
        at = [r for r in recs if r["devices"] == k and group_of(r) == size]
        per = {lv: [r[lv] / r["plan"] for r in at if lv in r] for lv in levels}
        for m in methods:
            per[m] = [r["bound"] / r["plan"] for r in at if r["method"] == m]
        g = {c: math.exp(sum(math.log(x) for x in v) / len(v)) for c, v in per.items() if v}
        best = max(g[m] for m in methods if m in g)
        closed = "every instance proven" if best >= 1 - 1e-9 else f"{(1 - g['simple']) / (1 - best):.1f}x"
        n = len({r["graph"] for r in at})
        lines.append(f"| {size} | {k} | {n} | " + " | ".join(f"{g[c]:.4f}" if c in g else "-" for c in cols)
                     + f" | {closed} |")
    return "\n".join(lines)


def _gmeans(recs: list[dict[str, Any]], column: str) -> dict[Any, list[tuple[int, float]]]:
    """Per group: ``(k, geometric mean of column / plan)``, ``k`` ascending (``bound``: the sweep's)."""
    out: dict[Any, list[tuple[int, float]]] = {}
    for r in recs:
        out.setdefault(group_of(r), []).append(r)
    series = {}
    for grp, rs in out.items():
        pts = []
        for k in sorted({r["devices"] for r in rs}):
            vals = [r[column] / r["plan"] for r in rs if r["devices"] == k]
            pts.append((k, math.exp(sum(math.log(v) for v in vals) / len(vals))))
        series[grp] = pts
    return series


def plot(recs: list[dict[str, Any]]) -> Any:
    """Two panels against ``k`` (log scale), one line per group (REGAL size, operator graphs):
    the certified ratio (the sweep's bound over its plan) and the ``simple`` bound's, as the
    paper's figure of the ladder's gain."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.6), layout="constrained", sharey=True)
    panels = ((axes[0], "bound", "the sweep's bound (certified ratio)"), (axes[1], "simple", "the simple bound alone"))
    for ax, column, title in panels:
        series = _gmeans(recs, column)
        for grp in sorted(series, key=lambda g: (1, g) if isinstance(g, str) else (0, g)):
            ks, ys = zip(*series[grp])
            label = grp if isinstance(grp, str) else f"REGAL, {grp} nodes"
            ax.plot(ks, ys, marker="o", label=label, linestyle="--" if isinstance(grp, str) else "-")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="devices k", title=title, ylim=(0.5, 1.02))
        ax.set_xticks(sorted({k for pts in series.values() for k, _ in pts}))
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.axhline(1.0, color="grey", linewidth=0.5)
    axes[0].set_ylabel("bound / plan (geometric mean)")
    axes[0].legend(fontsize="small")
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="*", help="the sweeps' results tables (directories of Parquet parts)")
    ap.add_argument("--json", help="also write each instance's bounds here")
    ap.add_argument("--from-json", action="append", default=[],
                    help="bounds written by --json before (those instances are not measured again; repeatable)")
    ap.add_argument("--plot", help="also draw the certified ratio per group against k (a PNG file)")
    ap.add_argument("--level-time", type=float, default=30.0, help="seconds per level and instance (default 30)")
    ap.add_argument("--jobs", type=int, default=1, help="instances measured at once (processes; default 1)")
    ap.add_argument("--ladder", action="store_true",
                    help="read each level's bound from the rows' detail column instead of measuring")
    a = ap.parse_args(argv)
    if not a.results and not a.from_json:
        ap.error("give a results table or --from-json")
    recs = [r for f in a.from_json for r in json.loads(pathlib.Path(f).read_text())]
    known = {instance(r) for r in recs}  # (not measured again)
    levels = LEVELS
    if a.ladder:
        recs += [ladder_one(r) for t in a.results for r in rows_of(t) if instance(r) not in known]
        levels = tuple(dict.fromkeys(k[:-2] for r in recs for k in r if k.endswith("_s") and k[:-2] + "_status" in r))
    for t in [] if a.ladder else a.results:
        rows = [r for r in rows_of(t) if instance(r) not in known]
        print(f"mtpp_levels: {t}: {len(rows)} instances to measure", file=sys.stderr)
        recs += measure(rows, a.level_time, pathlib.Path(t).resolve().parent, a.jobs)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(recs, indent=1))
    if a.plot:
        plot(recs).savefig(a.plot, dpi=110)
    print(table(recs, levels))
    cpu = [r[lv + "_cpu_s"] for r in recs for lv in LEVELS if lv + "_cpu_s" in r]
    print(f"\nlevels' CPU: at most {max(cpu, default=0.0):.1f} s per instance", file=sys.stderr)
    stopped = {lv: sum(r.get(lv + "_status") == "time_limit" for r in recs) for lv in levels}
    print("stopped at the time limit (best bound so far): "
          + ", ".join(f"{lv} {n} of {len(recs)}" for lv, n in stopped.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
