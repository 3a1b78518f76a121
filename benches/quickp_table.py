"""QuickP against HEFT and Metis on training graphs in QuickP's format; writes docs/results/quickp.md.

Run: ``nice python benches/quickp_table.py`` (the page on stdout, progress on stderr; ``-o
docs/results/quickp.md`` writes it), ``--graphs alexnet:1600 --gpus 2 --time-limit 30`` for a
shorter run, ``--help`` for the rest.

For each synthetic training graph (:func:`stagecut.latency.opgraph.synthetic_operator_graph`,
shapes ``alexnet`` and ``vgg``: thousands of operators, most free or of a few microseconds,
seeded) and each GPU count (servers of two GPUs, 50 GB/s inside, 20 GB/s across:
:func:`stagecut.latency.opgraph.operator_devices`): ``quickp`` (P2, CBC on one thread, 5% gap,
the time limit over the whole call), ``heft``, ``metis`` and the single GPU on the original graph,
each makespan re-scored by the ASAP evaluator; the lower bound is the problem's
(:meth:`LatencyProblem.lower_bound`); times are wall seconds with CPU seconds in brackets (the
machine is shared, so wall time is inflated by load).
"""

from __future__ import annotations

import argparse
import sys
import time

from stagecut.latency import LatencyProblem, best_device, heft, metis, operator_devices, quickp
from stagecut.latency.opgraph import operator_graph_from_data, synthetic_operator_graph


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _timed(f, *a, **k):  # type: ignore[no-untyped-def]
    t0, c0 = time.perf_counter(), time.process_time()
    out = f(*a, **k)
    return out, time.perf_counter() - t0, time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", nargs="+", default=["alexnet:1600", "vgg:3600"], help="shape:operators")
    ap.add_argument("--gpus", nargs="+", type=int, default=[2, 4])
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds for quickp (default 60)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", help="write the page here (default: stdout)")
    args = ap.parse_args(argv)
    rows = []
    for spec in args.graphs:
        shape, n = spec.split(":")
        for k in args.gpus:
            data = synthetic_operator_graph(int(n), shape, seed=args.seed, devices=k)
            g, out, _ = operator_graph_from_data(data, gpus=k)
            p = LatencyProblem(g, operator_devices(k), out)
            _log(f"{shape}-{n}, {k} GPUs")
            q, qw, qc = _timed(quickp, p, time_limit=args.time_limit, threads=1)
            h, hw, hc = _timed(heft, p)
            m, mw, mc = _timed(metis, p)
            b = best_device(p)
            assert q.objective is not None and h.objective is not None and m.objective is not None
            st = q.stats
            ms = [q.objective, h.objective, m.objective]
            best = min(ms)

            def cell(x: float, best: float = best) -> str:
                text = f"{x / 1e3:.2f}"
                return f"**{text}**" if x <= best * (1 + 1e-9) else text

            ipm = st.get("ip_makespan")
            rows.append([f"{shape}-{n}", str(k), f"{len(g):,}", f"{int(st['fused_nodes'])} / {int(st['groups'])}",
                         cell(q.objective), str(st["found_by"]),
                         "–" if ipm is None else f"{float(ipm) / 1e3:.2f}",
                         cell(h.objective), cell(m.objective), f"{b.objective / 1e3:.2f}",
                         f"{(q.lower_bound or 0.0) / 1e3:.2f}",
                         f"{qw:.1f} ({qc:.1f})" + ("*" if q.status == "time_limit" else ""),
                         f"{hw:.1f} / {mw:.1f}"])
    head = ["graph", "GPUs", "nodes", "fused nodes / groups", "quickp", "found by", "IP's plan", "heft",
            "metis", "one GPU", "bound", "quickp s (CPU s)", "heft / metis s"]
    lines = ["# QuickP on training graphs in QuickP's format", "",
             "Regenerate with `nice python benches/quickp_table.py -o docs/results/quickp.md` "
             f"(seed {args.seed}, time limit {args.time_limit:g} s).", "",
             "Synthetic AlexNet and VGG-16 training graphs as TensorFlow writes them "
             "(`synthetic_operator_graph(n, \"alexnet\" | \"vgg\")`: forward layers, loss, gradients, momentum "
             "updates, shape plumbing; most operators cost nothing or a few microseconds) on homogeneous GPUs, "
             "two per server (50 GB/s inside a server, 20 GB/s across). Makespans in ms, re-scored on the "
             "original graph by the ASAP evaluator; the best of quickp, heft and metis in bold. "
             "`quickp` is the best of the IP's plan on the fused graph and its warm starts (the single GPU, "
             "HEFT, Metis); *found by* names the part, *IP's plan* is the IP's own answer mapped back to the "
             "original graph. *bound* is the problem's lower bound. A `*` marks a run stopped by its time "
             "limit (the limit covers the starts, fusion, grouping, the model's build, the solve and the "
             "re-scoring).", "",
             _row(head), _row(["---"] * len(head))]
    lines += [_row(r) for r in rows]
    text = "\n".join(lines) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
