"""The ``spectral`` bound held to its parts, hand-computed values, brute force and the exact DP.

Its parts: the clique weight per pair against every split of a tensor's groups, and the tensor
graph's Laplacian against the communication every partition pays (by enumeration). Soundness:
never above the optimum (brute force over every partition, the ideal DP; more in the ``slow``
sweep). Strength: a hand-computed value, and on sparse random graphs it beats every other
combinatorial level by several percent, so a dropped term fails.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from tests.mtpp.sweeps import chunk_seeds, optimum_sweep, sweep
from tests.mtpp.test_combinatorial import optimum_dp, random_problem

import stagecut as sc
from helpers import brute_force_mtpp, set_partitions
from stagecut.examples import regal_graph
from stagecut.graph import Node
from stagecut.mtpp import spectral
from stagecut.mtpp.bounds import mtpp_bound
from stagecut.mtpp.certify import certify
from stagecut.mtpp.combinatorial import crossing_bound, node_cut_bound
from stagecut.mtpp.cover import cover_bound
from stagecut.mtpp.model import MtppProblem, block_parts, forced_groups, lower_bound
from stagecut.mtpp.spectral import pair_weight, spectral_bound


@pytest.mark.parametrize("m", range(2, 8))
def test_pair_weight_is_the_least_payment_per_split_pair(m):
    # every assignment of m groups to blocks: a tensor over b >= 2 blocks is paid b times; the
    # weight times the pairs split never passes that, and meets it for some split
    w = pair_weight(m)
    ratios = []
    for labels in itertools.product(range(m), repeat=m):
        b = len(set(labels))
        if b < 2:
            continue
        split = sum(1 for i, j in itertools.combinations(range(m), 2) if labels[i] != labels[j])
        assert w * split <= b * (1 + 1e-12), (labels, w, split, b)
        ratios.append(b / split)
    assert w == pytest.approx(min(ratios), rel=1e-12)


def _paid(problem: MtppProblem, blocks: list[list[object]]) -> float:
    """The tensors every block of ``blocks`` pays, summed (the evaluator's ``io``)."""
    return math.fsum(block_parts(problem, b)[1] for b in blocks)


@pytest.mark.parametrize("chunk", range(2))
def test_the_tensor_laplacian_never_exceeds_the_communication_paid(chunk):
    # any partition of the groups (convex or not): the blocks pay at least 1/2 sum_j x_j' L x_j;
    # and the clique weights are the least: some partition of some instance pays exactly that
    tight = 0
    for seed in range(500 + chunk * 60, 500 + (chunk + 1) * 60):
        p = random_problem(seed, n_max=6, k_max=4)
        grp = forced_groups(p)
        reps = sorted(set(grp))
        index = {r: i for i, r in enumerate(reps)}
        lap = spectral._laplacian(p, grp, index)
        ids = p.graph.ids
        for part in set_partitions(reps, len(reps)):
            blocks = [[ids[i] for i in range(len(grp)) if grp[i] in b] for b in part]
            x = np.zeros((len(reps), len(part)))
            for j, b in enumerate(part):
                for r in b:
                    x[index[r], j] = 1.0
            lower = 0.5 * float(np.einsum("ij,ik,kj->", x, lap, x))
            paid = _paid(p, blocks)
            assert lower <= paid + 1e-9 * max(1.0, paid), (seed, part, lower, paid)
            tight += paid > 0 and abs(lower - paid) <= 1e-9 * paid
    assert tight >= 20


def test_two_nodes_and_one_tensor_by_hand():
    # works 1 and 1, a tensor of 1, k = 2: the Laplacian is 2 [[1, -1], [-1, 1]] (eigenvalues 0
    # and 4). With T < 2 two blocks are needed, of sizes T and 2 - T: they pay at least
    # 1/2 (2 - T) 4, so 2 T >= 2 + 2 (2 - T), T >= 1.5 (the optimum is 2, the simple bound 1)
    p = MtppProblem(sc.Graph.chain([1.0, 1.0], comm=1.0), devices=2)
    assert lower_bound(p) == pytest.approx(1.0)
    r = spectral_bound(p)
    assert r.bound == pytest.approx(1.5, rel=1e-9) and r.complete and r.solves >= 1
    assert brute_force_mtpp(p) == pytest.approx(2.0)


def test_the_least_total_overflow_is_added():
    # the same two nodes with 3 bytes of parameters each, memory 2.5, bandwidth 1: two blocks
    # overflow by 1 in all (one node alone by 0.5): 2 T >= 2 + 2 (2 - T) + 1, T >= 1.75 (without
    # the overflow 1.5, under the simple bound 1.5); the optimum is 2.5
    g = sc.Graph.chain([1.0, 1.0], comm=1.0, memory=[3.0, 3.0])
    p = MtppProblem(g, devices=2, memory=2.5, bandwidth=1.0)
    assert lower_bound(p) == pytest.approx(1.5)
    assert spectral_bound(p).bound == pytest.approx(1.75, rel=1e-9)
    assert brute_force_mtpp(p) == pytest.approx(2.5)


def test_a_graph_with_no_tensor_gives_the_floor():
    p = MtppProblem(sc.Graph.chain([1.0, 2.0, 3.0], comm=0.0), devices=2)
    assert spectral_bound(p).bound == lower_bound(p)
    assert spectral_bound(p, floor=3.5).bound == 3.5


def test_sparse_random_graphs_pay_cuts_no_other_combinatorial_level_sees():
    # 100-node Erdos-Renyi and Barabasi-Albert graphs at k = 8: no single tensor has to cross, yet
    # every balanced partition cuts many (measured: 7% and 2% above cover)
    for model, gain in (("erdos_renyi", 1.05), ("barabasi_albert", 1.01)):
        p = MtppProblem(regal_graph(100, model=model, seed=0), devices=8)
        cut = node_cut_bound(p)
        best_other = max(cut.bound, crossing_bound(p, cut=cut).bound, cover_bound(p, cut=cut).bound)
        assert spectral_bound(p, floor=cut.bound).bound > gain * best_other, model


def test_more_steps_never_lower_the_bound():
    p = MtppProblem(regal_graph(80, model="barabasi_albert", seed=1), devices=8)
    bounds = [spectral_bound(p, steps=s).bound for s in (1, 10, 60)]
    assert bounds == sorted(bounds) and bounds[2] > bounds[0]


class _Clock:
    """``time`` for the spectral module: each ``monotonic()`` call is one second later."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        self.now += 1.0
        return self.now


def test_stopped_by_its_deadline_it_is_still_a_bound(monkeypatch):
    p = MtppProblem(regal_graph(60, model="erdos_renyi", seed=2), devices=4)
    full = spectral_bound(p).bound
    monkeypatch.setattr(spectral, "time", _Clock())
    r = spectral_bound(p, deadline=2.5)  # time for one step, not for a second
    assert not r.complete and r.solves == 1 and lower_bound(p) <= r.bound <= full


def test_a_deadline_too_close_for_one_step_gives_the_floor():
    p = MtppProblem(regal_graph(60, model="erdos_renyi", seed=2), devices=4)
    r = spectral_bound(p, floor=lower_bound(p), deadline=time.monotonic() - 1.0)
    assert (r.bound, r.complete, r.solves) == (lower_bound(p), False, 0)


def test_too_many_groups_is_refused_with_the_floor(monkeypatch):
    monkeypatch.setattr(spectral, "MAX_GROUPS", 10)
    p = MtppProblem(regal_graph(30, seed=0), devices=4)
    r = spectral_bound(p, floor=lower_bound(p))
    assert (r.bound, r.complete, r.solves) == (lower_bound(p), False, 0)


def test_spectral_level_in_mtpp_bound_and_certify():
    g = regal_graph(60, model="barabasi_albert", seed=0)
    r = mtpp_bound(g, level="spectral", devices=4)
    assert r.level == "spectral" and r.status == "optimal" and r.bound > lower_bound(MtppProblem(g, devices=4))
    plan = sc.slice_graph(g, devices=4, seed=0, decodes=2000)
    cert = certify(g, plan, levels=("simple", "spectral"), time_limit=60)
    assert [x.level for x in cert.levels] == ["simple", "spectral"]
    assert cert.lower_bound == pytest.approx(min(r.bound, plan.objective)) and cert.bound_source == "spectral"


def _check(p: MtppProblem, opt: float, what: str) -> bool:
    b = spectral_bound(p).bound
    tol = 1e-9 * max(1.0, abs(opt)) if math.isfinite(opt) else 0.0
    assert b <= opt + tol, f"{what}: spectral {b} above the optimum {opt}"
    assert b >= lower_bound(p) - 1e-9, f"{what}: spectral below the simple bound"
    return b > lower_bound(p) * (1 + 1e-9) + 1e-12


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_spectral_never_passes_brute_force_and_often_beats_the_simple_bound():
    better = sum(_check(p, brute_force_mtpp(p), f"seed {s}")
                 for s in range(700_000, 700_250) for p in [random_problem(s, n_max=7, k_max=6)])
    assert better >= 40  # (59 of these 250)


def _seeded(p: MtppProblem, opt: float, seed: int) -> bool:
    return _check(p, opt, f"seed {seed}")


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_spectral_never_passes_the_dp_and_often_beats_the_simple_bound():
    better = sweep(_seeded, chunk_seeds(800_000, 0, 150), optimum_dp, n_max=12, k_max=8)
    assert better >= 37  # (56 of these 150)


#: The slow sweeps: the optimum to hold the bound to, first seed, seeds per chunk, largest graph and k.
_SWEEPS = {"brute-force": (brute_force_mtpp, 900_000, 600, 7, 6), "dp": (optimum_dp, 1_000_000, 750, 12, 8)}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
@pytest.mark.parametrize(("against", "chunk"), [(a, c) for a in sorted(_SWEEPS) for c in range(4)])
def test_spectral_never_passes_the_optimum_sweep(against, chunk):
    optimum_sweep(_seeded, _SWEEPS, against, chunk)


def test_a_graph_over_the_group_limit_is_a_skipped_level_with_its_reason(monkeypatch):
    monkeypatch.setattr(spectral, "MAX_GROUPS", 10)
    r = mtpp_bound(regal_graph(30, seed=0), level="spectral", devices=4)
    assert (r.status, r.bound) == ("skipped", None) and "more than 10 forced groups" in r.reason


def test_a_matrix_the_eigensolver_cannot_take_gives_the_floor_not_an_error(monkeypatch):
    # work 1e-200 and a tensor of 1e200: the scaled matrix overflows; it is not decomposed
    g = sc.Graph([Node(0, {"accelerator": 1e-200}, comm=1e200), Node(1, {"accelerator": 1e-200}),
                  Node(2, {"accelerator": 1e-200})], [(0, 1), (0, 2)])
    p = MtppProblem(g, devices=2)
    r = spectral_bound(p)
    assert r.bound == lower_bound(p) and r.solves == 0
    # an eigensolver that does not converge: the bound so far stands

    def fails(_):
        raise np.linalg.LinAlgError("Eigenvalues did not converge")

    monkeypatch.setattr(spectral.np.linalg, "eigh", fails)
    q = MtppProblem(regal_graph(30, model="barabasi_albert", seed=0), devices=4)
    assert spectral_bound(q).bound == lower_bound(q)


def test_a_nan_never_proves_a_threshold():
    class NanTest:
        def need(self, t, mu, trace):
            return math.nan

    assert spectral._bisect(NanTest(), np.zeros(2), 0.0, 5.0) == 5.0


def test_the_eigenvalues_are_lowered_by_the_round_off_margin(monkeypatch):
    p = MtppProblem(regal_graph(60, model="barabasi_albert", seed=0), devices=4)
    exact = spectral_bound(p, steps=1).bound
    monkeypatch.setattr(spectral, "_EIGH_SLACK", 1e-3)  # a margin far above round-off: a lower bound
    assert spectral_bound(p, steps=1).bound < exact * (1 - 1e-4)


def _reserved_over_memory(seed: int, p: MtppProblem) -> MtppProblem:
    """The instance with more fast memory reserved than there is (every block overflows)."""
    return MtppProblem(p.graph, devices=p.devices, memory=2.0, bandwidth=[0.5, 1.0, 3.0][seed % 3],
                       reserved_memory=float(3 + seed % 4), colocate=p.colocate)


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_spectral_never_passes_brute_force_with_more_memory_reserved_than_there_is():
    # the overflow of j blocks then grows with j: testing k blocks alone must still be a bound
    better = sweep(_seeded, chunk_seeds(710_000, 0, 150), brute_force_mtpp, n_max=6, k_max=5,
                   transform=_reserved_over_memory)
    assert better >= 12  # (17 of these 150)
