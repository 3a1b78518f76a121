"""The combinatorial MTPP bounds (node-cut, crossing, subgraph) held to brute force and the exact DP.

Every bound must be at most the optimum (brute force over every partition on the smallest
graphs, the ideal DP on larger ones): 0 bounds above it on thousands of random instances (the
default run checks 600, the slow sweep 12,000). The node cut is also held to its definition
(the least block cost over every node set holding the group, by enumeration), so a weaker cut
fails too, and each bound is held to hand-computed values where it beats the simple bound.
"""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest
from tests.mtpp.sweeps import chunk_seeds, optimum_sweep, sweep

import stagecut as sc
from helpers import brute_force_mtpp
from stagecut.errors import InvalidGraphError
from stagecut.graph import Node
from stagecut.mtpp.bounds import mtpp_bound
from stagecut.mtpp.combinatorial import crossing_bound, least_bins, node_cut_bound, subgraph_bound
from stagecut.mtpp.model import MtppProblem, block_cost, evaluate, forced_groups, lower_bound
from stagecut.mtpp.slicegraph import slice_graph


def random_problem(seed: int, n_max: int = 6, k_max: int = 5) -> MtppProblem:
    """A random DAG: integer work, tensor costs (some 0, some large) and parameters, optional
    colocation classes, and no memory term, a hard limit, or overflow at a bandwidth."""
    rng = random.Random(seed)
    n = rng.randint(1, n_max)
    dens = rng.choice([0.2, 0.35, 0.6])
    big = rng.random() < 0.3
    nodes = [Node(i, {"accelerator": float(rng.randint(0, 9))}, memory=float(rng.randint(0, 5)),
                  comm=float(rng.choice([0, 1, 2, 3, 5] + ([12, 20] if big else []))),
                  colocation=rng.choice([None, None, None, 0, 1]) if seed % 3 == 0 else None)
             for i in range(n)]
    perm = list(range(n))
    rng.shuffle(perm)
    edges = [(perm[a], perm[b]) for a in range(n) for b in range(a + 1, n) if rng.random() < dens]
    g = sc.Graph(nodes, edges)
    k = rng.randint(1, k_max)
    mem = rng.choice(["none", "none", "hard", "overflow"])
    if mem == "hard":
        return MtppProblem(g, devices=k, memory=float(rng.randint(4, 12)))
    if mem == "overflow":
        return MtppProblem(g, devices=k, memory=float(rng.randint(2, 8)), bandwidth=rng.choice([0.5, 1.0, 3.0]),
                           reserved_memory=float(rng.randint(0, 2)))
    return MtppProblem(g, devices=k)


def bounds_of(problem: MtppProblem) -> dict[str, float]:
    cut = node_cut_bound(problem)
    return {"node-cut": cut.bound, "crossing": crossing_bound(problem, cut=cut).bound,
            "subgraph": subgraph_bound(problem, cut=cut).bound}


def optimum_dp(problem: MtppProblem) -> float:
    plan = slice_graph(problem, method="dp")
    assert plan.status in ("optimal", "infeasible")
    return math.inf if plan.objective is None else plan.objective


def _sound(problem: MtppProblem, opt: float, seed: int) -> None:
    check_sound(problem, opt, f"seed {seed}")


def check_sound(problem: MtppProblem, opt: float, what: str) -> None:
    tol = 1e-9 * max(1.0, abs(opt)) if math.isfinite(opt) else 0.0
    for name, b in bounds_of(problem).items():
        assert b <= opt + tol, f"{what}: {name} bound {b} above the optimum {opt}"
        assert b >= lower_bound(problem) - 1e-9, f"{what}: {name} below the simple bound"


def _least_block_holding(problem: MtppProblem, members: list[int]) -> float:
    """min f(S) without the memory term over every node set S holding ``members`` and keeping
    every forced group whole (by enumeration), plus the overflow of ``members`` alone."""
    g = problem.graph
    n = len(g.nodes)
    grp = forced_groups(problem)
    plain = MtppProblem(g, devices=problem.devices, colocate=problem.colocate)
    best = math.inf
    rest = [i for i in range(n) if i not in members]
    for r in range(len(rest) + 1):
        for extra in itertools.combinations(rest, r):
            s = set(members) | set(extra)
            if any((grp[i] in {grp[j] for j in s}) != (i in s) for i in range(n)):
                continue
            best = min(best, block_cost(plain, [g.nodes[i].id for i in s]))
    return best + problem.overflow(sum(g.nodes[i].memory for i in members))


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_node_cut_is_the_least_block_holding_each_group():
    """The cut is exact, not merely sound: a dropped gadget arc (a cheaper cut) fails here."""
    checked = 0
    for seed in range(300):
        p = random_problem(seed, n_max=7)
        if p.bandwidth is not None:
            continue  # (the linear overflow term is checked by soundness)
        r = node_cut_bound(p)
        groups: dict[int, list[int]] = {}
        for i, gi in enumerate(forced_groups(p)):
            groups.setdefault(gi, []).append(i)
        want = max(_least_block_holding(p, m) for m in groups.values())
        assert max(r.per_group.values()) == pytest.approx(want, rel=1e-9, abs=1e-9), f"seed {seed}"
        assert r.bound == pytest.approx(max(want, lower_bound(p)), rel=1e-9, abs=1e-9)
        checked += 1
    assert checked > 150


def test_node_cut_sees_the_tensors_a_heavy_node_must_move():
    # the heavy middle node 2 receives 3 tensors and sends one: alone it costs 10 + 4 * 3
    g = sc.Graph([Node(i, {"accelerator": w}, comm=3.0) for i, w in enumerate([5.0, 5.0, 10.0, 5.0, 5.0])],
                 [(0, 2), (1, 2), (3, 2), (2, 4)])
    p = MtppProblem(g, devices=5)
    assert lower_bound(p) == 10.0
    r = node_cut_bound(p)
    # taking a neighbour in costs its work 5 instead of its tensor 3: alone is best
    assert r.bound == pytest.approx(22.0) and r.witness == (2,)
    assert slice_graph(p, method="dp").objective == pytest.approx(22.0)


def test_node_cut_keeps_other_forced_groups_whole():
    # v's tensor (10) is avoided by taking its consumer a in (work 1), but a is colocated with b
    # (work 20): the block then holds b too (71), so v alone (60) is the cheapest; a cut that
    # could split {a, b} would say 51
    g = sc.Graph([Node("v", {"accelerator": 50.0}, comm=10.0), Node("a", {"accelerator": 1.0}, colocation=0),
                  Node("b", {"accelerator": 20.0}, colocation=0)], [("v", "a")])
    p = MtppProblem(g, devices=3)
    r = node_cut_bound(p)
    assert r.bound == pytest.approx(60.0) and r.witness == ("v",)
    assert slice_graph(p, method="dp").objective == pytest.approx(60.0)


def test_node_cut_with_a_bandwidth_uses_the_linear_overflow():
    # two nodes of 6 parameters each, 4 fit: overflow (params - 4) / 2. Node 1 alone: 1 + (6 - 4)/2 = 2;
    # the cut may take node 0 in (no tensor paid, work 1) but its parameters then overflow too
    g = sc.Graph([Node(0, {"accelerator": 1.0}, memory=6.0, comm=1.5), Node(1, {"accelerator": 1.0}, memory=6.0)],
                 [(0, 1)])
    p = MtppProblem(g, devices=2, memory=4.0, bandwidth=2.0)
    opt = slice_graph(p, method="dp").objective
    r = node_cut_bound(p)
    # alone: 1 + 1.5 + 1 = 3.5; together: 2 + (12 - 4)/2 = 6; the linear minorant charges 6/2 per node
    assert r.bound == pytest.approx(3.5) and opt == pytest.approx(3.5)


def test_crossing_bound_counts_forced_tensors_twice():
    p = MtppProblem(sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=3)
    # every edge's two ends cost >= 9 together: at T < 9 all three tensors cross: 3T >= 16 + 6
    assert crossing_bound(p).bound == pytest.approx(22 / 3)
    assert lower_bound(p) == pytest.approx(16 / 3)
    assert slice_graph(p, method="dp").objective == pytest.approx(9.0)


def test_crossing_bound_pays_a_forced_tensor_twice_even_when_its_ends_are_light():
    # three copies of x -> u -> v -> y (work 10, 1, 1, 10; tensors 10, 1, 10): any block holding
    # u and v costs 22, so at T < 22 the light tensor of u crosses and is paid twice, although
    # u and v together weigh 2 (one block could hold their work): (66 + 3 * 2) / 5 = 14.4
    nodes, edges = [], []
    for c in range(3):
        nodes += [Node(f"x{c}", {"accelerator": 10.0}, comm=10.0), Node(f"u{c}", {"accelerator": 1.0}, comm=1.0),
                  Node(f"v{c}", {"accelerator": 1.0}, comm=10.0), Node(f"y{c}", {"accelerator": 10.0})]
        edges += [(f"x{c}", f"u{c}"), (f"u{c}", f"v{c}"), (f"v{c}", f"y{c}")]
    p = MtppProblem(sc.Graph(nodes, edges), devices=5)
    assert node_cut_bound(p).bound == pytest.approx(13.2)  # the average bound 66 / 5 (node cuts: 12)
    assert crossing_bound(p).bound == pytest.approx(14.4, rel=1e-9)
    assert slice_graph(p, method="dp").objective >= 14.4


def test_crossing_bound_counts_every_block_a_hub_tensor_reaches():
    # u (work 1) sends one tensor (6) to six consumers of work 3, k = 4. They cannot share a block
    # below 19, so the tensor crosses; each block holding some of them pays it and has room for
    # T - 6 of their work. By total work alone, at T = 10.75 that is 19 / 4.75 = 4 blocks and
    # (19 + 4 * 6) / 4 = 10.75; but below T = 12 no two consumers share a block (6 > T - 6): six
    # blocks, (19 + 6 * 6) / 4 > 12. At 12 the bound meets the optimum
    g = sc.Graph([Node("u", {"accelerator": 1.0}, comm=6.0)] + [Node(i, {"accelerator": 3.0}) for i in range(6)],
                 [("u", i) for i in range(6)])
    p = MtppProblem(g, devices=4)
    assert crossing_bound(p).bound == pytest.approx(12.0, rel=1e-9)
    assert slice_graph(p, method="dp").objective == pytest.approx(12.0)


def test_crossing_bound_packs_the_groups_a_tensor_reaches_into_blocks():
    # u (no work) sends a tensor (1) to three consumers of work 6, k = 2: they cannot share a block
    # below 18, so the tensor crosses; each block holding some of them pays it and has room for
    # T - 1 of their work. At T = 10 that is two blocks by total work (18 / 9), but no two
    # consumers fit in one (12 > 9): three, (18 + 3) / 2 = 10.5 > 10; at 10.5 three blocks of 9.5
    g = sc.Graph([Node("u", {"accelerator": 0.0}, comm=1.0)] + [Node(i, {"accelerator": 6.0}) for i in range(3)],
                 [("u", i) for i in range(3)])
    p = MtppProblem(g, devices=2)
    assert crossing_bound(p).bound == pytest.approx(10.5, rel=1e-9)  # (10 by total work alone)
    assert slice_graph(p, method="dp").objective == pytest.approx(13.0)


def _fewest_bins(items: list[int], cap: int) -> int:
    """Bin packing by brute force (first bins first: every assignment up to renaming bins)."""
    best = len(items)

    def place(i: int, loads: list[int]) -> None:
        nonlocal best
        if len(loads) >= best:
            return
        if i == len(items):
            best = len(loads)
            return
        for b in range(len(loads)):
            if loads[b] + items[i] <= cap:
                loads[b] += items[i]
                place(i + 1, loads)
                loads[b] -= items[i]
        place(i + 1, [*loads, items[i]])

    place(0, [])
    return best


def test_least_bins_never_passes_brute_force_and_beats_the_total_work():
    rng = random.Random(7)
    above = 0
    for _ in range(3000):
        cap = rng.randint(2, 12)
        items = [rng.randint(0, cap) for _ in range(rng.randint(1, 7))]
        exact = _fewest_bins(sorted(items, reverse=True), cap)
        got = least_bins([float(x) for x in items], float(cap))
        assert got <= exact, (items, cap)
        assert got >= max(1, math.ceil(sum(items) / cap))
        above += got > max(1, math.ceil(sum(items) / cap))
    assert above > 100  # (items over half a bin are common here: the bound must see them)
    assert least_bins([], 5.0) == 0 and least_bins([6.0], 5.0) == math.inf


def test_crossing_bound_adds_the_least_total_overflow():
    # 16 parameters, 4 fit per device, streamed at 1 per time unit: three blocks overflow 16 - 12 = 4
    # in total at least; every pair of neighbours costs 13 together (8 work, 1 tensor, 4 overflow),
    # so below 13 all three tensors cross: 3T >= 16 + 2 * 3 + 4
    g = sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0, memory=[4.0] * 4)
    p = MtppProblem(g, devices=3, memory=4.0, bandwidth=1.0)
    assert lower_bound(p) == pytest.approx(20 / 3)
    assert crossing_bound(p).bound == pytest.approx(26 / 3, rel=1e-9)
    assert slice_graph(p, method="dp").objective == pytest.approx(13.0)


def test_crossing_bound_takes_the_least_consistent_threshold():
    p = MtppProblem(sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=2)
    # node cuts 5, 6, 6, 5 and the simple bound 8 give the floor 8; the edges' two ends cost 9, 10, 9 together.
    # On [8, 9) all three tensors cross: 2T >= 16 + 6 fails (11 > 9); on [9, 10) only the middle
    # one does: 2T >= 16 + 2 holds at T = 9, the optimum
    assert crossing_bound(p).bound == pytest.approx(9.0)
    assert slice_graph(p, method="dp").objective == pytest.approx(9.0)


def test_subgraph_bound_is_the_optimum_when_the_whole_graph_fits():
    g = sc.regal_graph(12, seed=4)
    p = MtppProblem(g, devices=3)
    assert subgraph_bound(p).bound == pytest.approx(slice_graph(p, method="dp").objective)


def test_subgraph_bound_keeps_every_edge_inside_the_subgraph():
    # the last edge carries the tensor that makes splitting off the heavy node cost 13 > 11 (one block)
    p = MtppProblem(sc.Graph.chain([1.0, 1.0, 1.0, 8.0], comm=5.0), devices=2)
    assert subgraph_bound(p).bound == pytest.approx(11.0) == slice_graph(p, method="dp").objective


def test_subgraph_bound_beats_the_node_cut_where_the_neighbours_compete():
    # a star: k = 2 blocks for a heavy centre and four heavy leaves; the leaves cannot all be alone
    g = sc.Graph([Node("c", {"accelerator": 10.0}, comm=1.0)]
                 + [Node(i, {"accelerator": 8.0}, comm=1.0) for i in range(4)], [("c", i) for i in range(4)])
    p = MtppProblem(g, devices=2)
    cut = node_cut_bound(p).bound
    sub = subgraph_bound(p).bound
    opt = slice_graph(p, method="dp").objective
    assert cut < sub == pytest.approx(opt)


def test_levels_in_mtpp_bound_and_certify():
    g = sc.Graph([Node(i, {"accelerator": w}, comm=3.0) for i, w in enumerate([5.0, 5.0, 10.0, 5.0, 5.0])],
                 [(0, 2), (1, 2), (3, 2), (2, 4)])
    p = MtppProblem(g, devices=5)
    r = mtpp_bound(p, level="node-cut")
    assert r.bound == pytest.approx(22.0) and r.status == "optimal" and r.stats["witness"] == "2"
    plan = slice_graph(p, method="dp")
    cert = sc.certify(p, plan, levels=("simple", "node-cut", "crossing", "exact"))
    assert cert.status == "optimal" and cert.bound_source == "node-cut"
    assert [x.status for x in cert.levels] == ["optimal", "optimal", "skipped", "skipped"]
    assert cert.levels[2].bound is None


def test_certify_mips_start_from_the_best_bound_before_them():
    # the star of the hub test: crossing proves 12 (the optimum), the bottleneck MIP alone 9 (the node cut)
    g = sc.Graph([Node("u", {"accelerator": 1.0}, comm=6.0)] + [Node(i, {"accelerator": 3.0}) for i in range(6)],
                 [("u", i) for i in range(6)])
    p = MtppProblem(g, devices=4)
    assert mtpp_bound(p, level="bottleneck").bound == pytest.approx(9.0)
    plan = slice_graph(p, method="dp")
    cert = sc.certify(p, plan, levels=("crossing", "bottleneck"), stop_when_proven=False)
    crossing, bottleneck = cert.levels
    assert crossing.bound == pytest.approx(12.0) and bottleneck.bound >= crossing.bound - 1e-9
    assert bottleneck.stats["floor"] == pytest.approx(12.0) and cert.bound_source == "crossing"


def test_a_bad_partition_start_is_refused():
    p = MtppProblem(sc.Graph.chain([1.0, 1.0]), devices=2)
    with pytest.raises(InvalidGraphError):
        mtpp_bound(p, level="exact", start=[[0]])


# ------------------------------------------------- soundness on random instances (last: the slowest)
@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
@pytest.mark.parametrize("chunk", range(2))
def test_bounds_never_pass_brute_force(chunk):
    for seed in range(chunk * 100, chunk * 100 + 100):
        p = random_problem(seed)
        check_sound(p, brute_force_mtpp(p), f"seed {seed}")


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
@pytest.mark.parametrize("chunk", range(4))
def test_bounds_never_pass_the_dp(chunk):
    sweep(_sound, chunk_seeds(10_000, chunk, 100), optimum_dp, n_max=10, k_max=8)


#: The slow sweeps: the optimum to hold the bounds to, first seed, seeds per chunk, largest graph and k.
_SWEEPS = {"brute-force": (brute_force_mtpp, 100_000, 500, 7, 6), "dp": (optimum_dp, 200_000, 1000, 14, 12)}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
@pytest.mark.parametrize(("against", "chunk"), [(a, c) for a in sorted(_SWEEPS) for c in range(8)])
def test_bounds_never_pass_the_optimum_sweep(against, chunk):
    optimum_sweep(_sound, _SWEEPS, against, chunk)


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_subgraph_solves_a_traced_training_graph_whole():
    # ResNet-50 forward + backward (350 nodes) has a few hundred ideals: the level is its
    # optimum, with or without the file's memory as a hard limit (balls of growing radius took a
    # DP per step and reached only the simple bound in the ladder's time)
    path = Path(__file__).resolve().parents[1] / "data" / "opgraphs" / "resnet50_training.json"
    g = sc.read_workload(path)
    for memory in (float(g.defaults["memory"]), None):
        p = MtppProblem(g, devices=8, memory=memory, colocate=False)
        opt = slice_graph(p, method="dp").objective
        r = subgraph_bound(p)
        assert r.complete and r.bound == pytest.approx(opt, rel=1e-12)
        assert len(r.witness) == len(g.nodes) and r.solves == node_cut_bound(p).solves + 1
        assert r.partition is not None and evaluate(p, [list(b) for b in r.partition]).objective == opt
