"""Draw the README's plot, docs/plan.png, from a graph we generate (no shared data needed).

A seeded random DAG split into 4 pipeline stages by three methods: on the left the graph in
layers (topological generations), coloured by the optimal plan's stages; on the right each
method's stage loads (compute + communication, stacked) against the proven lower bound.

    python benches/make_readme_plots.py [OUT.png]
"""

from __future__ import annotations

import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

import stagecut as sc
from stagecut import examples
from stagecut.plot import plot_graph, plot_stages, savefig

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main(out: pathlib.Path) -> None:
    graph = examples.random_dag(22, edge_prob=0.25, max_span=5, seed=1, cpu=False)
    graph = graph.map_nodes(lambda n: sc.Node(n.id, n.compute, memory=n.memory, comm=0.4 * n.comm))
    plans = {m: sc.partition(graph, devices=4, cpus=0, method=m) for m in ("dp", "dpl", "local-search")}
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4), layout="constrained",
                                      gridspec_kw={"width_ratios": [1.5, 1]})
    plot_graph(graph, plans["dp"], ax=left)
    left.set_title(f"random DAG, {len(graph)} nodes: the optimal 4-stage split (dp)")
    plot_stages(plans, ax=right)
    right.set_title("stage loads by method")
    savefig(fig, out, dpi=100)
    for m, p in plans.items():
        print(f"{m:13s} objective {p.objective:.4g} ({p.status}), bound {p.lower_bound}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "plan.png")
