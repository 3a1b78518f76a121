"""Soundness of every reported bound and status, against brute force (issue 10, item 5).

For every throughput solver (``dp``, ``dpl``, ``auto`` and its DPL fallback, the contiguous and
non-contiguous IP) and every MTPP solver (each ``slice_graph`` method, each ``mtpp_bound``
level, ``certify``), on random small graphs with memory limits, nodes that only some device
kinds can run, zero-cost nodes and colocation classes:

- ``lower_bound <= optimum`` (a bound never exceeds the optimum over the set the solver states);
- ``objective >= optimum`` (the objective is the evaluator's score of a split in that set);
- ``status == "optimal"`` implies ``objective == optimum``;
- ``status == "infeasible"`` implies that nothing fits (a heuristic that found nothing without a
  proof says ``"unknown"``).

The optimum is brute force: the throughput one over every assignment of colocation classes to
devices (acyclic quotients for the contiguous solvers, any for the non-contiguous IP), the MTPP
one over every partition of the classes into at most ``k`` blocks the evaluator accepts. The
default run checks well over a thousand instances (the combinatorial solvers on many, the MIPs
on fewer); the ``slow`` sweep checks many more.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stagecut as sc
from helpers import brute_force as brute_contiguous
from helpers import brute_force_any, colocation_groups, set_partitions
from stagecut.errors import InvalidGraphError
from stagecut.graph import Node
from stagecut.mtpp.bounds import LEVELS, mtpp_bound
from stagecut.mtpp.certify import certify
from stagecut.mtpp.model import MtppProblem
from stagecut.mtpp.model import evaluate as mtpp_evaluate
from stagecut.mtpp.slicegraph import METHODS, slice_graph
from stagecut.throughput.ip import partition_ip

pytestmark = pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")

#: Relative slack for comparisons with the brute force (the data are small integers).
REL = 1e-7
FAST = settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _tol(opt: float) -> float:
    return REL * max(1.0, abs(opt)) if math.isfinite(opt) else 0.0


def check(result, opt: float, what: str) -> None:
    """The promises of one result against the optimum ``opt`` over its stated set."""
    tol = _tol(opt)
    lb = result.lower_bound
    assert lb is None or lb <= opt + tol, f"{what}: lower bound {lb} above the optimum {opt}"
    obj = result.objective
    if obj is not None:
        assert obj >= opt - tol, f"{what}: objective {obj} below the optimum {opt}"
    if result.status == "optimal":
        assert obj is not None and abs(obj - opt) <= tol, f"{what}: 'optimal' {obj}, optimum {opt}"
    if result.status == "infeasible":
        assert opt == math.inf and obj is None, f"{what}: 'infeasible', but a split of cost {opt} exists"


# ------------------------------------------------------------------------- throughput
KINDS = [None, None, None, frozenset({"cpu"}), frozenset({"accelerator"})]
TIMES = st.sampled_from([0.0, 0.0, 1.0, 2.0, 3.0, 5.0, 6.0, 8.0, 9.0])


@st.composite
def throughput_instances(draw, max_n=5):
    """A random DAG with times per kind (zeros common), memory, output costs, kinds allowed and
    colocation classes; 0-2 accelerators, 0-2 CPUs, a memory limit or none."""
    n = draw(st.integers(1, max_n))
    perm = draw(st.permutations(range(n)))
    edges = [(perm[a], perm[b]) for a in range(n) for b in range(a + 1, n) if draw(st.integers(0, 2)) == 0]
    nodes = [Node(v, {"accelerator": draw(TIMES), "cpu": draw(TIMES)}, memory=float(draw(st.integers(0, 4))),
                  comm=float(draw(st.sampled_from([0, 0, 1, 2, 3]))), kinds=draw(st.sampled_from(KINDS)),
                  colocation=draw(st.sampled_from([None, None, None, 0, 1])))
             for v in range(n)]
    devices = draw(st.integers(0, 2))
    cpus = draw(st.integers(0 if devices else 1, 2))
    memory = draw(st.sampled_from([math.inf, 2.0, 4.0, 6.0]))
    return sc.Graph(nodes, edges), devices, cpus, memory


def check_combinatorial(instance):
    graph, devices, cpus, memory = instance
    opt = brute_contiguous(graph, devices, cpus, memory)
    kw = {"devices": devices, "cpus": cpus, "memory": memory}
    for method in ("dp", "dpl", "auto"):
        check(sc.partition(graph, method=method, **kw), opt, method)
    # auto with too few ideals allowed falls back to DPL (its notes say so)
    fallback = sc.partition(graph, method="auto", max_ideals=1, **kw)
    assert fallback.method == "dpl"
    check(fallback, opt, "auto -> dpl")


def check_ips(instance):
    graph, devices, cpus, memory = instance
    kw = {"devices": devices, "cpus": cpus, "memory": memory}
    check(partition_ip(graph, **kw), brute_contiguous(graph, devices, cpus, memory), "ip")
    check(partition_ip(graph, contiguous=False, **kw), brute_force_any(graph, devices, cpus, memory), "ip, any split")


@settings(FAST, max_examples=800)
@given(throughput_instances())
def test_throughput_dp_dpl_auto_bounds_are_sound(instance):
    check_combinatorial(instance)


@settings(FAST, max_examples=60)
@given(throughput_instances(max_n=4))
def test_throughput_ip_bounds_and_statuses_are_sound(instance):
    check_ips(instance)


@pytest.mark.slow
@settings(FAST, max_examples=6000)
@given(throughput_instances(max_n=6))
def test_throughput_dp_dpl_auto_bounds_are_sound_sweep(instance):
    check_combinatorial(instance)


@pytest.mark.slow
@settings(FAST, max_examples=600)
@given(throughput_instances(max_n=5))
def test_throughput_ip_bounds_and_statuses_are_sound_sweep(instance):
    check_ips(instance)


def test_dpl_bound_on_the_issue_example():
    # a (accelerator 6, CPU 8, memory 1) -> z (no time, memory 4, CPU only); 1 accelerator, 1 CPU,
    # memory 4: the optimum puts a on the accelerator, z on the CPU (6.0); DPL's units fold z
    # into a, which must not make its bound 8.0
    g = sc.Graph([Node("a", {"accelerator": 6.0, "cpu": 8.0}, memory=1.0),
                  Node("z", {"cpu": 0.0}, memory=4.0, kinds=frozenset({"cpu"}))], [("a", "z")])
    kw = {"devices": 1, "cpus": 1, "memory": 4.0}
    assert sc.partition(g, method="dp", **kw).objective == 6.0
    for method, max_ideals in (("dpl", 10), ("auto", 1)):
        plan = sc.partition(g, method=method, max_ideals=max_ideals, **kw)
        assert plan.method == "dpl" and plan.status == "feasible"
        assert plan.lower_bound is not None and plan.lower_bound <= 6.0
        check(plan, 6.0, method)


# ------------------------------------------------------------------------------ MTPP
@st.composite
def mtpp_instances(draw, max_n=6):
    """A random DAG with work, parameters, tensor costs and colocation classes; no memory term,
    a hard limit, or overflow streamed at a bandwidth; 1-3 blocks."""
    n = draw(st.integers(1, max_n))
    perm = draw(st.permutations(range(n)))
    edges = [(perm[a], perm[b]) for a in range(n) for b in range(a + 1, n) if draw(st.integers(0, 2)) == 0]
    nodes = [Node(v, {"accelerator": draw(TIMES)}, memory=float(draw(st.integers(0, 4))),
                  comm=float(draw(st.sampled_from([0, 0, 1, 2, 3]))),
                  colocation=draw(st.sampled_from([None, None, None, 0, 1])))
             for v in range(n)]
    g = sc.Graph(nodes, edges)
    k = draw(st.integers(1, 3))
    mem = draw(st.sampled_from(["none", "hard", "overflow"]))
    if mem == "none":
        return MtppProblem(g, devices=k)
    if mem == "hard":
        return MtppProblem(g, devices=k, memory=float(draw(st.integers(3, 8))))
    return MtppProblem(g, devices=k, memory=5.0, bandwidth=0.5, reserved_memory=1.0)


def brute_mtpp(problem):
    """The MTPP optimum: every partition of the colocation classes the evaluator accepts (the
    quotient must be acyclic), in any block order that is one."""
    g = problem.graph
    groups = colocation_groups(g)
    best = math.inf
    for part in set_partitions(list(range(len(groups))), problem.devices):
        blocks = [[g.nodes[i].id for c in block for i in groups[c]] for block in part]
        try:
            best = min(best, mtpp_evaluate(problem, blocks).objective)
        except InvalidGraphError:
            continue  # a cyclic quotient
    return best


def check_slice_graph(problem):
    opt = brute_mtpp(problem)
    for method in METHODS:
        plan = slice_graph(problem, method=method, population=6, generations=3, decodes=12)
        check(plan, opt, f"slice_graph {method}")
    assert mtpp_bound(problem, level="simple").bound <= opt + _tol(opt)
    return opt


def check_mtpp_mips(problem):
    opt = check_slice_graph(problem)
    for level in LEVELS:
        r = mtpp_bound(problem, level=level)
        assert r.bound <= opt + _tol(opt), f"{level}: bound {r.bound} above the optimum {opt}"
        if r.status == "infeasible":
            assert opt == math.inf, f"{level}: 'infeasible', optimum {opt}"
        if level == "exact" and r.status == "optimal":
            assert r.objective is not None and abs(r.objective - opt) <= _tol(opt) + 1e-6 * max(1.0, opt)
    if math.isfinite(opt):
        plan = slice_graph(problem, method="order")
        cert = certify(problem, plan, time_limit=None)
        check(cert, opt, "certify")


@settings(FAST, max_examples=300)
@given(mtpp_instances())
def test_mtpp_slice_graph_bounds_are_sound(problem):
    check_slice_graph(problem)


@settings(FAST, max_examples=40)
@given(mtpp_instances(max_n=5))
def test_mtpp_bound_levels_and_certify_are_sound(problem):
    check_mtpp_mips(problem)


@pytest.mark.slow
@settings(FAST, max_examples=3000)
@given(mtpp_instances(max_n=7))
def test_mtpp_slice_graph_bounds_are_sound_sweep(problem):
    check_slice_graph(problem)


@pytest.mark.slow
@settings(FAST, max_examples=400)
@given(mtpp_instances(max_n=6))
def test_mtpp_bound_levels_and_certify_are_sound_sweep(problem):
    check_mtpp_mips(problem)
