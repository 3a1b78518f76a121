"""The throughput IPs, held to the DP, brute force and the evaluator."""

import math
import random

import mip  # noqa: E402,F401  (a core dependency)
import pytest

import stagecut as sc  # noqa: E402
from helpers import (  # noqa: E402
    brute_force_any,
    random_inference_graph,
    random_training_graph,
    rescored_ip,
)
from stagecut.throughput.ip import partition_ip  # noqa: E402


def _instance(seed):
    rng = random.Random(seed)
    if seed % 2:
        g = random_training_graph(rng, rng.randint(2, 6))
    else:
        g = random_inference_graph(rng, rng.randint(1, 8))
    k, l = rng.randint(1, 3), rng.randint(0, 1)
    mem = 6.0 if rng.random() < 0.5 else math.inf
    return g, k, l, mem


@pytest.mark.parametrize("seed", range(30))
def test_contiguous_ip_equals_dp(seed):
    g, k, l, mem = _instance(seed)
    dp = sc.partition(g, devices=k, cpus=l, memory=mem, method="dp")
    ip = partition_ip(g, devices=k, cpus=l, memory=mem)
    if dp.objective is None:
        assert ip.status == "infeasible" and ip.objective is None
        return
    assert ip.status == "optimal"
    assert ip.objective == pytest.approx(dp.objective)
    assert ip.lower_bound == pytest.approx(dp.objective, rel=1e-5)
    ev = rescored_ip(g, ip, k, l, mem)
    assert ev.contiguous
    # warm-started from the DP: same optimum
    ws = partition_ip(g, devices=k, cpus=l, memory=mem, warm_start=dp)
    assert ws.objective == pytest.approx(dp.objective)
    # non-contiguous is never worse
    nc = partition_ip(g, devices=k, cpus=l, memory=mem, contiguous=False)
    assert nc.objective <= ip.objective + 1e-9
    rescored_ip(g, nc, k, l, mem)


@pytest.mark.parametrize("seed", range(12))
def test_noncontiguous_ip_equals_brute_force(seed):
    rng = random.Random(1000 + seed)
    if seed % 2 == 0:
        g = random_inference_graph(rng, rng.randint(1, 5))
    else:
        g = random_training_graph(rng, rng.randint(2, 4))
    k, l = rng.randint(1, 3), rng.randint(0, 1)
    mem = 6.0 if rng.random() < 0.5 else math.inf
    want = brute_force_any(g, k, l, mem)
    nc = partition_ip(g, devices=k, cpus=l, memory=mem, contiguous=False)
    if want == math.inf:
        assert nc.status == "infeasible"
        return
    assert nc.status == "optimal"
    assert nc.objective == pytest.approx(want)
    rescored_ip(g, nc, k, l, mem)


def test_noncontiguous_beats_contiguous_on_a_chain():
    # 1 -> 2 -> 1: a contiguous split pays 3; {first, last} / {middle} pays 2
    g = sc.Graph.chain([1.0, 2.0, 1.0])
    assert partition_ip(g, devices=2).objective == 3.0
    nc = partition_ip(g, devices=2, contiguous=False)
    assert nc.objective == 2.0 and not nc.contiguous and nc.status == "optimal"


def test_time_limit_returns_best_found():
    g = sc.regal_graph(60, seed=3) if hasattr(sc, "regal_graph") else None
    if g is None:
        from stagecut.examples import regal_graph
        g = regal_graph(60, seed=3)
    plan = partition_ip(g, devices=6, contiguous=False, time_limit=1.0)
    assert plan.status in ("time_limit", "optimal")
    if plan.objective is not None:
        rescored_ip(g, plan, 6, 0, math.inf)
        assert plan.lower_bound <= plan.objective


def test_bad_options():
    g = sc.Graph.chain([1.0, 2.0])
    with pytest.raises(ValueError):
        partition_ip(g, solver="gurobi")
    with pytest.raises(ValueError):
        partition_ip(g, time_limit=-1)
    with pytest.raises(ValueError):
        partition_ip(g, threads=0)
    with pytest.raises(ValueError):
        partition_ip(g, warm_start=[1, 2])


def test_highs_selectable():
    g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
    try:
        plan = partition_ip(g, devices=3, solver="highs")
    except sc.errors.SolverError as exc:  # the test extra installs highspy: failing to load it is a bug
        pytest.fail(f"HiGHS does not load through python-mip: {exc}")
    assert plan.objective == 4.0
    for seed in range(3):  # the same optimum as the DP and as CBC, contiguous or not
        g = sc.random_dag(6, edge_prob=0.4, seed=seed)
        dp = sc.partition(g, devices=2, cpus=1, memory=9, method="dp")
        hi = partition_ip(g, devices=2, cpus=1, memory=9, solver="highs")
        assert hi.status == "optimal" and hi.objective == pytest.approx(dp.objective)
        free_hi = partition_ip(g, devices=2, cpus=1, memory=9, solver="highs", contiguous=False)
        free_cbc = partition_ip(g, devices=2, cpus=1, memory=9, solver="cbc", contiguous=False)
        assert free_hi.objective == pytest.approx(free_cbc.objective)




@pytest.mark.parametrize("warm, says", [
    ({"nowhere": ("accelerator", 0)}, "node 'nowhere' is not in the graph"),
    ({0: "accelerator"}, "node 0: expected a (device kind, index) pair"),
    ({0: ("accelerator", True)}, "node 0: expected a (device kind, index) pair"),
    ({0: (1, 0)}, "node 0: expected a (device kind, index) pair"),
])
def test_a_warm_start_naming_an_unknown_node_or_a_bad_device_is_refused(warm, says):
    g = sc.Graph.chain([1.0, 2.0, 3.0])
    with pytest.raises(sc.InvalidArgumentError, match=says.replace("(", r"\(").replace(")", r"\)")):
        partition_ip(g, devices=2, warm_start=warm)


def test_a_warm_start_is_refused_by_the_methods_that_do_not_use_it():
    g = sc.Graph.chain([1.0, 2.0, 3.0])
    with pytest.raises(sc.InvalidArgumentError, match="only for method='ip'"):
        sc.partition(g, devices=2, method="dp", warm_start={0: ("accelerator", 0)})
    # the same split is taken by the IP, whose answer is then at most its value
    plan = sc.partition(g, devices=2, method="ip", warm_start={0: ("accelerator", 0), 1: ("accelerator", 0),
                                                              2: ("accelerator", 1)})
    assert plan.objective == 3.0
