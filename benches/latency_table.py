"""The latency results page (docs/results/latency.md): every ``stagecut.place`` method under the
``asap`` semantics on realistic graphs, with makespan, bound, gap and time.

    python benches/latency_table.py [--auto-limit 120] [--limit 30] [--graphs NAME ...]
                                    [--rows rows.jsonl] [--out docs/results/latency.md]

Graphs: the four shared LayerGraphs latency inputs (the PCIe star of each file: a CPU pool and
``maxFPGAs`` accelerators of ``maxSizePerFPGA`` bytes; read from ``../shared/workloads``), the
traced operator graphs of ``tests/data/opgraphs`` (PCIe star of each file) and synthetic
operator graphs (``stagecut.latency.quickp.opgraph.synthetic_operator_graph``) on 4 GPUs in servers of
2 whose memory holds 40% of the graph each. Methods run with their default budgets; those
without one (``local``, ``mcmc``, ``milp``, ``quickp``, ``metis`` has none) get ``--limit``
seconds, ``auto`` gets ``--auto-limit``. The MILP runs only on models of at most 2,000
node-device pairs. Each (graph, method) row is appended to ``--rows`` as it finishes (JSON lines;
a rerun skips the rows already there), and the page is written from all rows.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import time
from typing import Any

import stagecut as sc
from stagecut.latency import LatencyProblem
from stagecut.latency.heuristics.memaware import pcie_asap
from stagecut.latency.quickp.opgraph import operator_devices, operator_graph_from_data, synthetic_operator_graph

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "workloads" / "latency-inputs" / "LayerGraphs"
TRACED = ROOT / "tests" / "data" / "opgraphs"
LAYER = ("bert24", "gnmt", "inceptionv3", "resnet50")
TRACED_NAMES = ("resnet50", "inception_v3", "gpt12", "gpt12_training", "resnet152_training", "gpt96_training")
SYNTHETIC = (("alexnet", 1600), ("cnn", 2000), ("vgg", 3600), ("transformer", 10000))
METHODS = ("best-device", "met", "greedy", "heft", "m-heft", "m-greedy", "m-topo", "m-chain", "pcie-greedy (asap)",
           "metis", "sa", "ea", "local", "mcmc", "lns", "quickp", "milp", "auto")
TIMED = ("local", "mcmc", "milp", "quickp")
#: ``--limits``: every method on these 10,000-node graphs with one time limit
LIMIT_GRAPHS = (("vgg", 10000), ("transformer", 10000))
LIMIT_METHODS = ("best-device", "met", "greedy", "heft", "m-heft", "m-greedy", "m-topo", "m-chain", "metis", "sa",
                 "ea", "local", "mcmc", "lns", "quickp", "quickp-p1", "milp", "split", "auto")
TAKES_LIMIT = ("sa", "ea", "local", "mcmc", "lns", "quickp", "quickp-p1", "milp", "split", "auto")


def graphs(names: list[str] | None) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for n in LAYER:
        out.append((f"LayerGraphs/{n}", lambda n=n: LatencyProblem.from_workload(
            sc.read_workload(SHARED / f"{n}_inference.json"))))
    for n in TRACED_NAMES:
        out.append((f"traced/{n}", lambda n=n: LatencyProblem.from_workload(sc.read_workload(TRACED / f"{n}.json"))))
    for shape, size in SYNTHETIC:
        out.append((f"synthetic/{shape}-{size}", lambda shape=shape, size=size: synthetic(shape, size)))
    return [x for x in out if not names or x[0] in names or x[0].split("/")[1] in names]


def synthetic(shape: str, size: int) -> LatencyProblem:
    """A synthetic operator graph on 4 GPUs (2 per server), each holding 40% of its memory."""
    g, out_bytes, _ = operator_graph_from_data(synthetic_operator_graph(size, shape, seed=0, devices=4))
    total = sum(v.memory for v in g.nodes)
    return LatencyProblem(g, operator_devices(4, memory=0.4 * total if total > 0 else math.inf),
                          output_bytes=out_bytes)


def run_limited(problem: LatencyProblem, method: str, limit: float) -> dict[str, Any]:
    """One method with ``limit`` (those that take one), wall and CPU seconds."""
    t, c = time.perf_counter(), time.process_time()
    kw = {"time_limit": limit} if method in TAKES_LIMIT else {}
    s = sc.place(problem, method=method, seed=0, threads=1, **kw) if method in ("milp", "split", "quickp",
                                                                                "quickp-p1") else \
        sc.place(problem, method=method, seed=0, **kw)
    return {"objective": s.objective, "status": s.status, "found": s.method, "limit": kw.get("time_limit"),
            "wall": time.perf_counter() - t, "cpu": time.process_time() - c,
            "notes": [x for x in s.notes if len(x) < 400]}


def limits_section(rows: list[dict[str, Any]]) -> list[str]:
    """The page's section on time limits at 10,000 operators (rows of ``--limits``)."""
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["graph"].startswith("limits/"):
            by.setdefault(r["graph"].removeprefix("limits/"), {})[r["method"]] = r
    if not by:
        return []
    names = list(by)
    limit = next((r["limit"] for ms in by.values() for r in ms.values() if r.get("limit")), None)
    out = ["", "## Time limits on 10,000 operators", "",
           f"Every method on {' and '.join(f'`{n}`' for n in names)} (the synthetic graphs above, 4 GPUs) with "
           f"a {limit:g} s limit where it takes one (`python benches/latency_table.py --limits {limit:g}`); the "
           f"promise is to end within the limit + max(2 s, 5%) = {limit + max(2.0, 0.05 * limit):g} s. Wall "
           "seconds with CPU seconds in brackets: on this shared machine the process got a fraction of a core, "
           "so the CPU seconds are what an idle machine would take.", "",
           "| method | " + " | ".join(f"{n} makespan | {n} s (CPU s)" for n in names) + " |",
           "|---|" + "---|---|" * len(names)]
    for m in LIMIT_METHODS:
        cells = []
        for n in names:
            r = by[n].get(m)
            if r is None:
                cells += ["-", "-"]
                continue
            star = "*" if r.get("status") == "time_limit" else ""
            cells += [fmt(r.get("objective"), 0), f"{fmt(r.get('wall'))} ({fmt(r.get('cpu'))}){star}"]
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    out += ["", "`*`: stopped by the time limit (its best answer so far). Methods without a limit (the "
            "constructive ones) show what they cost at this size. `sa`, `ea`, `local` and `lns` first build "
            "their start from every constructive method (about 10 s of CPU at this size, which their limit "
            "does not cut): on this loaded machine that alone took several times the limit, so they overrun "
            "it by far in wall time while their CPU time stays near it. `milp` refuses a model of more than "
            "2,000,000 disjunctive rows before building it, and returns its start: on the transformer that "
            "start (its earliest-finish greedy schedule) is below `auto`'s answer; `auto` has taken it as "
            "one more constructive start since (not re-run)."]
    return out


def synthetic_note() -> str:
    """The synthetic graphs' sentence of the page (what each graph is)."""
    return ("Synthetic operator graphs (`stagecut.latency.quickp.opgraph.synthetic_operator_graph`, seed 0): "
            "`alexnet` and `vgg` are training graphs as TensorFlow writes them (forward, loss, gradients, "
            "momentum updates, shape plumbing: most operators cost nothing or a few microseconds), `cnn` and "
            "`transformer` inference graphs; on 4 GPUs, 2 per server, 50/20 GB/s, each GPU holding 40% of "
            "the graph's memory; times in microseconds. These devices are no PCIe star, so `pcie-greedy (asap)` "
            "has no row there.")


def run(problem: LatencyProblem, method: str, args: argparse.Namespace) -> dict[str, Any]:
    t, c = time.perf_counter(), time.process_time()
    if method == "pcie-greedy (asap)":
        s = pcie_asap(problem)
    elif method == "milp" and len(problem) * problem.num_devices > 2000:
        return {"status": "skipped (model too large)"}
    elif method == "auto":
        s = sc.place(problem, method="auto", time_limit=args.auto_limit, seed=0)
    elif method in TIMED:
        s = sc.place(problem, method=method, time_limit=args.limit, seed=0)
    else:
        s = sc.place(problem, method=method, seed=0)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    if s is None:
        return {"status": "not a PCIe star", "wall": wall, "cpu": cpu}
    return {"objective": s.objective, "bound": s.lower_bound, "status": s.status, "found": s.method,
            "wall": wall, "cpu": cpu, "notes": list(s.notes)}


def fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def page(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    by: dict[str, dict[str, dict[str, Any]]] = {}
    info: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["graph"].startswith("limits/"):
            continue
        by.setdefault(r["graph"], {})[r["method"]] = r
        info[r["graph"]] = r.get("info", {})
    out = ["# Latency placement on realistic graphs", "",
           "Makespan of one request under the `asap` semantics (`stagecut.place`, seed 0) for every method "
           "of the library, on the four shared LayerGraphs latency inputs (PCIe star of each file), traced "
           "operator graphs (`tests/data/opgraphs`, PCIe star of each file) and synthetic operator graphs "
           "of 1,600-10,000 nodes (below). Methods run with "
           f"their default budgets; `local`, `mcmc`, `milp` and `quickp` get {args.limit:g} s, `auto` "
           f"{args.auto_limit:g} s. `pcie-greedy (asap)` is the throughput workloads' authors' greedy "
           "split re-scored by the `asap` evaluator. Bound: the method's own lower bound (auto: the best "
           "it knows); gap = (makespan - bound) / makespan. Times are wall seconds on a shared 2-core "
           "machine under load, with CPU seconds in brackets.", "",
           synthetic_note(), "",
           "On `synthetic/alexnet-1600` the table's `auto` row (66,221.63, above `lns`'s 66,081.68) was "
           "measured when its bounds phase took 278 s of its 120 s (the skip-path bound did not look at the"
           " clock inside a path) and left no time to search. The bounds now look at the clock inside their"
           " loops and `auto` runs them under a deadline of 15% of the time left: re-run alone on a quieter"
           " machine, `auto` (120 s) ends at 119.7 s (155 s of CPU over its threads) with **62,042.83**, "
           "found by `lns` (phases: constructive 1.5 s, bounds 4.6 s, quickp 34.6 s, local 31.7 s, lns 40.4"
           " s, ...), below every method in the row. The row itself was not regenerated. On the other "
           "synthetic graphs the bounds took 24-79 s of the 120 s before that change (on a machine that "
           "gave the process a tenth of a core: 8-36 s of CPU for the whole call).", "",
           "`auto` runs `quickp` (its fused IP, from every constructive answer) when fusion leaves at most a "
           "quarter of the nodes: on the synthetic graphs, not on the LayerGraphs or traced graphs, which "
           "have no zero-cost operators to fuse. The bounds are the methods' own (critical path and "
           "sequential work, or the MILP's "
           "dual bound where the MILP runs); the large gaps are the bounds' weakness as much as the "
           "schedules'.", "",
           "Regenerate with:", "", "```", "python benches/latency_table.py --auto-limit "
           f"{args.auto_limit:g} --limit {args.limit:g}", "```", "", "## Summary", "",
           "| graph | nodes | devices | auto | found by | best other method | pcie-greedy (asap) | auto bound | "
           "auto gap | auto s (CPU s) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for g, ms in by.items():
        a = ms.get("auto", {})
        others = [(r["objective"], m) for m, r in ms.items() if m != "auto" and r.get("objective") is not None]
        best = min(others) if others else None
        pg = ms.get("pcie-greedy (asap)", {}).get("objective")
        gap = None
        if a.get("objective") and a.get("bound") is not None:
            gap = 100 * (a["objective"] - a["bound"]) / a["objective"]
        found = a.get("found", "-").removeprefix("auto (").removesuffix(")")
        out.append(f"| {g} | {info[g].get('nodes', '-')} | {info[g].get('devices', '-')} | "
                   f"{fmt(a.get('objective'), 2)} | {found} | "
                   f"{fmt(best[0], 2) + ' (' + best[1] + ')' if best else '-'} | {fmt(pg, 2)} | "
                   f"{fmt(a.get('bound'), 2)} | {fmt(gap)}% | {fmt(a.get('wall'))} ({fmt(a.get('cpu'))}) |")
    for g, ms in by.items():
        out += ["", f"## {g}", "", "| method | makespan | bound | gap | status | s (CPU s) |",
                "|---|---|---|---|---|---|"]
        for m in METHODS:
            r = ms.get(m)
            if r is None:
                continue
            gap = None
            if r.get("objective") and r.get("bound") is not None:
                gap = 100 * (r["objective"] - r["bound"]) / r["objective"]
            out.append(f"| {m} | {fmt(r.get('objective'), 2)} | {fmt(r.get('bound'), 2)} | "
                       f"{fmt(gap) + '%' if gap is not None else '-'} | {r.get('status', '-')} | "
                       f"{fmt(r.get('wall'))} ({fmt(r.get('cpu'))}) |")
        a = ms.get("auto")
        if a and a.get("notes"):
            phases = [x for x in a["notes"] if x.startswith(("phases:", "lower bound from", "found by"))]
            out += ["", "auto: " + "; ".join(phases)]
    out += limits_section(rows)
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--auto-limit", type=float, default=120.0)
    ap.add_argument("--limit", type=float, default=30.0)
    ap.add_argument("--graphs", nargs="*", default=None)
    ap.add_argument("--methods", nargs="*", default=list(METHODS))
    ap.add_argument("--rows", default=str(ROOT / "benches" / "latency_rows.jsonl"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "latency.md"))
    ap.add_argument("--page-only", action="store_true")
    ap.add_argument("--limits", type=float, default=None,
                    help="instead: every method on the 10,000-node synthetic graphs with this time limit")
    args = ap.parse_args()
    rows_path = pathlib.Path(args.rows)
    rows = [json.loads(x) for x in rows_path.read_text().splitlines()] if rows_path.exists() else []
    done = {(r["graph"], r["method"]) for r in rows}
    if args.limits is not None and not args.page_only:
        for shape, size in LIMIT_GRAPHS:
            name = f"limits/{shape}-{size}"
            todo = [m for m in LIMIT_METHODS if (name, m) not in done]
            if not todo:
                continue
            problem = synthetic(shape, size)
            for m in todo:
                r = {**run_limited(problem, m, args.limits), "graph": name, "method": m,
                     "info": {"nodes": len(problem), "devices": problem.num_devices}}
                print(name, m, r.get("objective"), r.get("status"), f"{r['wall']:.1f}s ({r['cpu']:.1f} CPU)",
                      flush=True)
                rows.append(r)
                with rows_path.open("a") as f:
                    f.write(json.dumps(r) + "\n")
    elif not args.page_only:
        for name, make in graphs(args.graphs):
            todo = [m for m in args.methods if (name, m) not in done]
            if not todo:
                continue
            problem = make()
            meta = {"nodes": len(problem), "devices": problem.num_devices}
            for m in todo:
                r = {**run(problem, m, args), "graph": name, "method": m, "info": meta}
                print(name, m, r.get("objective"), r.get("status"), f"{r.get('wall', 0):.1f}s", flush=True)
                rows.append(r)
                with rows_path.open("a") as f:
                    f.write(json.dumps(r) + "\n")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(rows, args))


if __name__ == "__main__":
    main()
