"""Are the MTPP plans the gap? The testbed's plans set against a hypergraph partitioner's.

A certified ratio below 1 is the bound's gap plus the plan's, and on graphs the exact DP cannot
solve the optimum that would split them is unknown. This script gives the plan half a yardstick:
it partitions each graph of a ``certify`` sweep's results with Mt-KaHyPar (its highest-quality
preset, the sum-of-external-degrees objective, which is what the blocks of an MTPP plan pay for
their tensors: a tensor split over ``j`` blocks is paid once in each), the work balanced within
``eps`` for several ``eps`` and seeds, and prices every partition block by block as the evaluator
does (``stagecut.mtpp.block_cost``). Such a partition need not have an acyclic quotient, so it is
no MTPP plan and its largest block is no bound either: a plan close to it is about as good as a
leading partitioner gets without the pipeline order. With ``--repair`` each partition is also
made into a plan (blocks ordered by their nodes' mean topological position, each node moved to
the latest block of its predecessors when that is later than its own) and improved by
``improve_plan`` for ``--improve`` seconds: the partitioner's cut with the order put back.

Mt-KaHyPar is not a dependency of stagecut (``pip install mtkahypar``)::

    python benches/mtpp_partitioner_check.py benches/mtpp_testbed_600s_200_2000_k8.results \\
        [--models erdos_renyi,barabasi_albert] [--seeds 0] [--eps 0.01,0.02,0.03,0.05] [--runs 2] [--repair]
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import networkx as nx
from mtpp_levels import graph_of, rows_of

import stagecut as sc
from stagecut.mtpp.improve import improve_plan
from stagecut.mtpp.model import MtppProblem, block_cost

#: integer weights for the partitioner: work and tensor times this, rounded
SCALE = 1000

_INIT: list[Any] = []  # (Mt-KaHyPar is initialised once per process)


def partitions(problem: MtppProblem, eps: list[float], runs: int) -> list[tuple[float, list[int]]]:
    """``(eps, block of each node position)`` for each balance and seed."""
    try:
        import mtkahypar
    except ImportError:
        raise SystemExit("mtpp_partitioner_check: needs Mt-KaHyPar (pip install mtkahypar)") from None
    g = problem.graph
    n, k = len(g.nodes), problem.devices
    edges = [[u, *sorted(g.succ[u])] for u in range(n) if g.succ[u] and g.nodes[u].comm > 0]
    node_w = [max(1, round(problem.work(i) * SCALE)) for i in range(n)]
    edge_w = [max(1, round(g.nodes[e[0]].comm * SCALE)) for e in edges]
    if not _INIT:
        _INIT.append(mtkahypar.initialize(1))
    init = _INIT[0]
    ctx = init.context_from_preset(mtkahypar.PresetType.HIGHEST_QUALITY)
    ctx.logging = False
    out = []
    for e in eps:
        ctx.set_partitioning_parameters(k, e, mtkahypar.Objective.SOED)
        for s in range(runs):
            mtkahypar.set_seed(s)
            hg = init.create_hypergraph(ctx, n, len(edges), edges, node_w, edge_w)
            part = hg.partition(ctx)
            out.append((e, [part.block_id(i) for i in range(n)]))
    return out


def blocks_of(labels: list[int]) -> list[list[int]]:
    by: dict[int, list[int]] = {}
    for i, b in enumerate(labels):
        by.setdefault(b, []).append(i)
    return [by[b] for b in sorted(by)]


def largest_block(problem: MtppProblem, labels: list[int]) -> float:
    ids = [nd.id for nd in problem.graph.nodes]
    return max(block_cost(problem, [ids[i] for i in blk]) for blk in blocks_of(labels))


def acyclic(problem: MtppProblem, labels: list[int]) -> bool:
    g = problem.graph
    q = nx.DiGraph()
    q.add_nodes_from(set(labels))
    q.add_edges_from((labels[u], labels[v]) for u in range(len(g.nodes)) for v in g.succ[u] if labels[u] != labels[v])
    return nx.is_directed_acyclic_graph(q)


def repaired(problem: MtppProblem, labels: list[int]) -> list[int]:
    """The blocks in the order of their nodes' mean topological position; each node moved to the
    latest block of its predecessors when that comes after its own (an acyclic quotient)."""
    g = problem.graph
    topo = g.topological_order()
    rank = {v: r for r, v in enumerate(topo)}
    mean: dict[int, list[float]] = {}
    for i, b in enumerate(labels):
        mean.setdefault(b, []).append(rank[i])
    pos = {b: j for j, b in enumerate(sorted(mean, key=lambda b: sum(mean[b]) / len(mean[b])))}
    new = [0] * len(labels)
    for v in topo:
        new[v] = max([pos[labels[v]], *(new[u] for u in g.pred[v])])
    return new


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--models", default="erdos_renyi,barabasi_albert")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--eps", default="0.01,0.02,0.03,0.05")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--repair", action="store_true")
    ap.add_argument("--improve", type=float, default=20.0)
    a = ap.parse_args(argv)
    models, seeds = a.models.split(","), {int(s) for s in a.seeds.split(",")}
    eps = [float(e) for e in a.eps.split(",")]
    rows: list[dict[str, Any]] = [r for t in a.tables for r in rows_of(t)]
    rows = [r for r in rows if r["graph"].startswith("regal:") and r["graph"].split(":")[2] in models
            and int(r["graph"].split(":")[3]) in seeds]
    head = "| graph | k | plan (testbed) | partitioner, no order | plan / partitioner | acyclic |"
    if a.repair:
        head += " order put back, improved | plan / that |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    ratios, ratios_r = [], []
    for r in sorted(rows, key=lambda r: (int(r["graph"].split(":")[1]), r["graph"])):
        problem = MtppProblem(graph_of(r["graph"]), devices=int(r["devices"]))
        found = partitions(problem, eps, a.runs)
        costs = [largest_block(problem, lab) for _, lab in found]
        best = min(costs)
        ratios.append(r["objective"] / best)
        line = (f"| {r['graph']} | {r['devices']} | {r['objective']:,.1f} | {best:,.1f} | {r['objective'] / best:.4f} "
                f"| {sum(acyclic(problem, lab) for _, lab in found)} of {len(found)} |")
        if a.repair:
            fixed = math.inf
            for _, lab in found:
                ids = [nd.id for nd in problem.graph.nodes]
                start = [[ids[i] for i in blk] for blk in blocks_of(repaired(problem, lab))]
                plan = improve_plan(problem, start, time_limit=a.improve, kicks=None)
                fixed = min(fixed, float(plan.objective))
            ratios_r.append(r["objective"] / fixed)
            line += f" {fixed:,.1f} | {r['objective'] / fixed:.4f} |"
        print(line, flush=True)
    if ratios:
        print(f"\ngeometric mean of plan / partitioner: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f}"
              + (f"; plan / order put back: {math.exp(sum(map(math.log, ratios_r)) / len(ratios_r)):.4f}"
                 if ratios_r else ""))
    print(f"(stagecut {sc.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
