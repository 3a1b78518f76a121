"""QuickP on synthetic operator graphs, in the shape of QuickP's Table I (issue 14).

Run: ``nice python benches/quickp_table.py`` (prints Markdown on stdout, progress on stderr);
``--sizes 1000 --gpus 2 4`` for a shorter run, ``--help`` for the rest.

For each synthetic operator graph (:func:`stagecut.latency.opgraph.synthetic_operator_graph`,
CNN- and transformer-shaped, seeded) and each GPU count K (servers of two GPUs, NVLink 50 GB/s
inside, 20 GB/s across: :func:`stagecut.latency.opgraph.operator_devices`):

* QuickP (P2: fusion, critical-path co-location groups, the reduced IP on the fused graph with
  CBC on one thread and a time limit, the plan re-scored on the original graph);
* the baselines on the original graph: the Metis-style balanced cut (METIS through pymetis when
  it is importable, and the recursive Kernighan–Lin fallback), MCMC (single-operator moves,
  seeded, a fixed evaluation budget, from the single-GPU placement) and the single GPU.

Every makespan is of the original graph in the ASAP model (QuickP's and the baselines' own
orders: the baselines' in rank round-robin order), in milliseconds.

Table 1 (Table I's shape): operators before and after fusion, co-location groups, the fusion
time and the IP time (co-location, model building and CBC) for each K. A ``*`` marks an IP
stopped by its time limit (its best plan is used). Table 2: the makespans.
"""

from __future__ import annotations

import argparse
import sys
import time

from stagecut.latency import LatencyProblem, best_device, mcmc, metis, operator_devices, quickp
from stagecut.latency.opgraph import operator_graph_from_data, synthetic_operator_graph
from stagecut.latency.partition_baselines import have_pymetis


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["cnn", "transformer"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[1_000, 10_000])
    ap.add_argument("--gpus", nargs="+", type=int, default=[2, 4, 6])
    ap.add_argument("--ip-time-limit", type=float, default=30.0, help="seconds per IP (default 30)")
    ap.add_argument("--mcmc-evaluations", type=int, default=2_000, help="MCMC's budget (default 2000)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    t_all = time.perf_counter()
    table1: list[list[str]] = []
    table2: list[list[str]] = []
    for shape in args.shapes:
        for n in args.sizes:
            data = synthetic_operator_graph(n, shape, seed=args.seed, devices=max(args.gpus))
            name = f"{shape}-{n // 1000}k" if n % 1000 == 0 else f"{shape}-{n}"
            fused, groups, fusion_s, ip_s = [], [], [], []
            for k in args.gpus:
                g, out, _ = operator_graph_from_data(data, gpus=k)
                p = LatencyProblem(g, operator_devices(k), out)
                _log(f"{name}, {k} GPUs: QuickP")
                q = quickp(p, time_limit=args.ip_time_limit, threads=1)
                st = q.stats
                fused.append(int(st["fused_nodes"]))
                groups.append(int(st["groups"]))
                fusion_s.append(float(st["fusion_s"]))
                mark = "*" if st.get("ip_status") == "time_limit" else ""
                ip_s.append(f"{float(st['ip_s']):.1f}{mark}")
                _log(f"  Metis, MCMC, single GPU ({time.perf_counter() - t_all:.0f} s so far)")
                kl = metis(p, backend="kl", seed=args.seed)
                real = metis(p, backend="metis", seed=args.seed) if have_pymetis() else None
                mc = mcmc(p, seed=args.seed, max_evaluations=args.mcmc_evaluations)
                single = best_device(p)
                spans = [s.objective for s in (q, real, kl, mc, single) if s is not None]
                best = min(x for x in spans if x is not None)

                def ms(x: float | None, best: float = best) -> str:
                    if x is None:
                        return "none"
                    text = f"{x / 1e3:.2f}"
                    return f"**{text}**" if x <= best * (1 + 1e-9) else text

                cells = [name, str(k), ms(q.objective)]
                if real is not None:
                    cells.append(ms(real.objective))
                cells += [ms(kl.objective), ms(mc.objective), ms(single.objective)]
                table2.append(cells)
            same = len(set(fused)) == 1 and len(set(groups)) == 1
            table1.append([name, f"{n:,} → {'/'.join(map(str, sorted(set(fused))))}",
                           "/".join(map(str, groups if not same else groups[:1])),
                           f"{max(fusion_s):.2f}", *ip_s])
    head1 = ["graph", "operators → fused", "groups", "fusion (s)", *[f"IP {k} GPUs (s)" for k in args.gpus]]
    print(_row(head1))
    print(_row(["---"] * len(head1)))
    for r in table1:
        print(_row(r))
    print()
    head2 = ["graph", "GPUs", "QuickP"] + (["Metis (METIS)"] if have_pymetis() else []) + \
        ["Metis (KL)", f"MCMC ({args.mcmc_evaluations:,} evals)", "single GPU"]
    print(_row(head2))
    print(_row(["---"] * len(head2)))
    for r in table2:
        print(_row(r))
    print()
    print(f"Makespans in ms (best in bold). IP: CBC, 1 thread, time limit {args.ip_time_limit:g} s per IP "
          f"(* = stopped by it); groups per GPU count when they differ; fusion time the slowest of the "
          f"{len(args.gpus)} runs. Seed {args.seed}. Whole run: {time.perf_counter() - t_all:.0f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
