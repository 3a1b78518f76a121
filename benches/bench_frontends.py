"""The partitioners people use today against stagecut's exact split, on per-layer cost lists.

Run: ``python benches/bench_frontends.py`` (``--k 2 4 8``, ``--markdown``). For each layer graph
of ``../shared/workloads/throughput-inputs/LayerGraphs`` the cost list is the accelerator time of
each layer in topological order (a training graph's backward node added to its forward layer,
through their colocation class) and the parameter list is the layers' memory. Each method's
split is scored by its largest stage sum (time per sample) and shown as % above the optimum,
with the time the method took. The methods are stagecut.frontends.baselines' re-implementations:
DeepSpeed's ``partition_balanced`` on times (min-spread DP) and its default ``"parameters"``
(the same DP on parameter counts), torchgpipe's ``balance_by_time`` partitioner (block moves),
equal layer counts (DeepSpeed ``"uniform"``), the exact min-max split (stagecut's DP) and
:func:`stagecut.balance` (exact; bisection). Times are CPU milliseconds per call, the least of
``--repeat`` calls.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import stagecut as sc
from stagecut.frontends import baselines as bl

SHARED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "workloads"
METHODS = ["optimal", "deepspeed_balanced", "torchgpipe", "uniform", "deepspeed_parameters", "stagecut_balance"]


def cost_lists(root: pathlib.Path = SHARED) -> dict[str, tuple[list[float], list[float]]]:
    """``{name: (per-layer times, per-layer memory)}`` of the shared layer graphs."""
    out = {}
    for path in sorted((root / "throughput-inputs" / "LayerGraphs").glob("*.json")):
        g = sc.read_workload(path)
        times: dict[object, float] = {}
        mem: dict[object, float] = {}
        for i in g.topological_order():
            n = g.nodes[i]
            key = n.colocation if n.colocation is not None else ("node", n.id)
            times[key] = times.get(key, 0.0) + n.compute.get("accelerator", 0.0)
            mem[key] = mem.get(key, 0.0) + n.memory
        out[path.stem] = (list(times.values()), list(mem.values()))
    return out


def _parts(method: str, costs: list[float], params: list[float], k: int) -> list[int]:
    if method == "optimal":
        return bl.optimal_parts(costs, k)
    if method == "deepspeed_balanced":
        return bl.spread_parts(costs, k)
    if method == "deepspeed_parameters":
        return bl.spread_parts(params, k)
    if method == "uniform":
        return bl.uniform_parts(len(costs), k)
    b = sc.balance(costs, k) if method == "stagecut_balance" else bl.block_balance(costs, k)
    return [sum(b[:i]) for i in range(len(b) + 1)]


def run(ks: list[int], repeat: int = 5) -> list[dict[str, object]]:
    rows = []
    for name, (costs, params) in cost_lists().items():
        for k in ks:
            row: dict[str, object] = {"graph": name, "layers": len(costs), "k": k}
            for method in METHODS:
                best = float("inf")
                for _ in range(repeat):
                    t0 = time.process_time()
                    parts = _parts(method, costs, params, k)
                    best = min(best, time.process_time() - t0)
                row[method + "_ms"] = 1e3 * best
                row[method] = bl.max_load(costs, parts)
            rows.append(row)
    return rows


def table(rows: list[dict[str, object]], markdown: bool) -> str:
    head = ["graph", "n", "k"] + [f"{m} %" for m in METHODS[1:]] + [f"{m} ms" for m in METHODS]
    lines = [head]
    for r in rows:
        opt = float(r["optimal"])  # type: ignore[arg-type]
        pct = [f"{100 * (float(r[m]) / opt - 1):.1f}" if opt > 0 else "-" for m in METHODS[1:]]  # type: ignore[arg-type]
        ms = [f"{float(r[m + '_ms']):.2f}" for m in METHODS]  # type: ignore[arg-type]
        lines.append([str(r["graph"]), str(r["layers"]), str(r["k"]), *pct, *ms])
    summary = ["median", "", ""]
    for m in METHODS[1:]:
        over = [float(r[m]) / float(r["optimal"]) - 1 for r in rows if float(r["optimal"]) > 0]  # type: ignore[arg-type]
        misses = sum(o > 1e-9 for o in over)
        summary.append(f"{100 * statistics.median(over):.1f} ({misses}/{len(over)} miss, worst {100 * max(over):.1f})")
    lines.append(summary + [f"{statistics.median(float(r[m + '_ms']) for r in rows):.2f}" for m in METHODS])  # type: ignore[arg-type]
    if markdown:
        out = ["| " + " | ".join(lines[0]) + " |", "|" + "---|" * len(lines[0])]
        out += ["| " + " | ".join(row) + " |" for row in lines[1:]]
        return "\n".join(out)
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--repeat", type=int, default=5, help="calls per method; the least CPU time is shown")
    args = ap.parse_args()
    if not (SHARED / "throughput-inputs").exists():
        raise SystemExit(f"{SHARED} is absent: the layer graphs live in ../shared/workloads")
    print(table(run(args.k, args.repeat), args.markdown))


if __name__ == "__main__":
    main()
