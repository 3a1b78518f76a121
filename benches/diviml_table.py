"""The DiviML tables: stacked Erdos-Renyi RWNN modules of 10 body nodes on a
CPU, a T4 and an A100 (:func:`stagecut.rwnn.rwnn_devices`), in the shape of DiviML's Table I/III.

    python benches/diviml_table.py [--milp-limit 20] [--split-per-module 2] [--solver highs]

Table 1 (one request): makespan (ms) of best-device, MET, greedy, HEFT, EA and SA (each
``--search-evals`` evaluations), the whole MILP (warm-started from the best heuristic,
``--milp-limit`` seconds), MILP-SPLIT (``--split-per-module`` seconds per module in all, started
from the same heuristic schedule) and
SPLIT's lower bound; the CPU seconds of the two exact methods (each stops at its limit unless it
proves optimality first), the CPU seconds the MILP took to reach SPLIT's makespan (from HiGHS's
live incumbents, :mod:`stagecut.progress`; ``>`` its whole run when it never did) and the
speed-up of SPLIT over the MILP to that makespan (DiviML's measure: time to the same quality).
Table 2 (``L`` inputs): throughput (inputs per ms) of the
heuristics' placements run as one batch of ``L`` per node, of the batched MILP, of batched SPLIT
and the upper bound ``L / LB``. Prints Markdown.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from stagecut.latency import LatencyProblem
from stagecut.latency.diviml.batched import batch_spec, evaluate_batched, solve_batched
from stagecut.latency.diviml.split import solve_split
from stagecut.latency.diviml.split_multi import single_batch, solve_split_batched, solve_split_multi
from stagecut.latency.exact.milp import solve_milp
from stagecut.latency.heuristics import constructive as heuristics
from stagecut.latency.heuristics import search
from stagecut.progress import ProgressEvent, reporting
from stagecut.rwnn import rwnn, rwnn_devices

CONFIGS = ((1, "sdep"), (2, "sdep"), (2, "wdep"), (4, "sdep"), (4, "wdep"))


def timed(f: Callable[..., Any], *a: Any, **kw: Any) -> tuple[Any, float]:
    t = time.process_time()
    out = f(*a, **kw)
    return out, time.process_time() - t


def traced_milp(p: LatencyProblem, **kw: Any) -> tuple[Any, float, list[tuple[float, float]]]:
    """The MILP, its CPU seconds, and (CPU seconds, best makespan so far) at each progress event."""
    seen: list[tuple[float, float]] = []
    t0 = time.process_time()

    def note(e: ProgressEvent) -> None:
        if e.phase == "mip" and e.best is not None:
            seen.append((time.process_time() - t0, e.best))

    with reporting(note):
        out = solve_milp(p, **kw)
    return out, time.process_time() - t0, seen


def reached(seen: list[tuple[float, float]], value: float) -> float | None:
    """The first CPU second at which the MILP's best was at most ``value``."""
    return next((t for t, b in seen if b <= value * (1 + 1e-9)), None)


def fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def table1(args: argparse.Namespace) -> None:
    head = ["channels", "modules", "nodes", "best-device", "MET", "greedy", "HEFT", "EA", "SA", "MILP", "SPLIT",
            "LB", "MILP s", "SPLIT s", "MILP s to SPLIT's", "speed-up", "SPLIT status"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for c, dep in CONFIGS:
        for m in args.modules:
            p = LatencyProblem(rwnn(m, channels=c, size=10, dep=dep, seed=args.seed), rwnn_devices(),
                               output_bytes="comm")
            base = [heuristics.best_device(p), heuristics.met(p), heuristics.greedy(p), heuristics.heft(p),
                    search.evolutionary(p, seed=0, max_evaluations=args.search_evals),
                    search.simulated_annealing(p, seed=0, max_evaluations=args.search_evals)]
            best = min((s for s in base if s.objective is not None), key=lambda s: s.objective or 0.0)
            milp, milp_s, seen = traced_milp(p, time_limit=args.milp_limit, solver=args.solver, threads=1, start=best)
            limit = args.split_per_module * m
            if c == 1:
                split, split_s = timed(solve_split, p, time_limit=limit, solver=args.solver, threads=1, start=best)
            else:
                split, split_s = timed(solve_split_multi, p, channels=c, time_limit=limit, solver=args.solver,
                                       threads=1, start=best)
            label = "1" if c == 1 else f"{c} {dep}"
            t = reached(seen, split.objective)
            if t is None and milp.objective is not None and milp.objective <= split.objective * (1 + 1e-9):
                t = milp_s  # reached at the end (no live event in between)
            to = f"> {milp_s:.1f}" if t is None else f"{t:.1f}"
            up = f"> {milp_s / max(split_s, 1e-9):.1f}x" if t is None else f"{t / max(split_s, 1e-9):.1f}x"
            print("| " + " | ".join([label, str(m), str(len(p)), *(fmt(s.objective) for s in base),
                                     fmt(milp.objective), fmt(split.objective), fmt(split.lower_bound),
                                     f"{milp_s:.1f}", f"{split_s:.1f}", to, up, split.status]) + " |", flush=True)


def table2(args: argparse.Namespace) -> None:
    head = ["L", "best-device", "MET", "greedy", "HEFT", "batched MILP", "batched SPLIT", "L / LB",
            "MILP s", "SPLIT s"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    p = LatencyProblem(rwnn(args.batch_modules, size=10, seed=args.seed), rwnn_devices(), output_bytes="comm")
    for L in args.inputs:
        spec = batch_spec(p, L)
        row = [str(L)]
        for f in (heuristics.best_device, heuristics.met, heuristics.greedy, heuristics.heft):
            s = f(p)
            dev = [p.devices.names.index(s.placement[v]) for v in p.ids]
            order = [[p.index[v] for v in s.order.get(name, ())] for name in p.devices.names]
            mk = evaluate_batched(p, spec, single_batch(p, spec, dev), order)[0]
            row.append(fmt(L / mk, 3))
        b, b_s = timed(solve_batched, p, spec=spec, time_limit=args.milp_limit, solver=args.solver, threads=1)
        sp, sp_s = timed(solve_split_batched, p, L, spec=spec, solver=args.solver, threads=1,
                         time_limit=args.split_per_module * args.batch_modules)
        lb = max(b.lower_bound or 0.0, sp.lower_bound or 0.0)
        row += [fmt(b.throughput, 3), fmt(sp.throughput, 3), fmt(L / lb if lb > 0 else None, 3), f"{b_s:.1f}",
                f"{sp_s:.1f}"]
        print("| " + " | ".join(row) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--milp-limit", type=float, default=20.0)
    ap.add_argument("--split-per-module", type=float, default=2.0)
    ap.add_argument("--search-evals", type=int, default=3000)
    ap.add_argument("--solver", default="highs")
    ap.add_argument("--modules", type=int, nargs="*", default=[5, 10, 20])
    ap.add_argument("--inputs", type=int, nargs="*", default=[4, 8, 16])
    ap.add_argument("--batch-modules", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=("1", "2"), default=None)
    args = ap.parse_args()
    if args.only != "2":
        table1(args)
        print()
    if args.only != "1":
        table2(args)


if __name__ == "__main__":
    main()
