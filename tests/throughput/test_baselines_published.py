"""The paper's three baselines on the 16 Table-1 workloads of ../shared/workloads.

Every result is re-scored by the one evaluator. The claims checked are the two that hold by
construction, each against the exact method over the same family of splits:

- a contiguous result (every PipeDream result, and any other that happens to be contiguous) is at
  or above the DP optimum (computed here by ``sc.partition``, relative 1e-6); on InceptionV3 the DP
  takes 8-10 s of CPU a graph, so the default run compares with the published ``dp_tps`` (which
  tests/throughput/test_published.py shows the DP reproduces; rounded to 2 decimals) and the slow
  run (``pytest -m slow``) with the DP itself;
- every result, contiguous or not, is at or above the published non-contiguous optimum
  ``ip_noncontiguous_tps`` (Gurobi's, rounded to 2 decimals) within 0.5%.

Lower bounds do not notice a baseline that got worse, so each result is also held to at most the
paper's own value of that baseline where Table 1 has one, with a stated tolerance.

CPU time per workload (``time.process_time``, plus gpart's for Scotch): local search (10 restarts)
0.02-2.0 s, PipeDream and Scotch under 0.1 s, the DP under 0.6 s except InceptionV3 (7.8 and
10.0 s: slow); the default run takes about 10 s.
"""

import functools

import pytest
from tests.helpers import SHARED, published_rows, require_shared
from tests.throughput.test_baselines import _rescored, require_gpart

import stagecut as sc
from stagecut.throughput.baselines import local_search, pipedream, scotch
from stagecut.throughput.problem import ThroughputProblem

ROWS = published_rows()
# without ../shared the one placeholder case skips (fails in CI) instead of an empty parametrisation
NAMES = sorted(ROWS) or ["../shared/workloads is absent"]
SLOW_DP = {"LayerGraphs/inceptionv3_inference.json", "LayerGraphs/inceptionv3_training.json"}
# local search on the two 12-layer BERT operator graphs takes most of this file's time: the slow run
# has them; the default run's local search covers the same code on the other fourteen workloads
SLOW_LOCAL = {"OperatorGraphs/bert_L-12_training.json", "OperatorGraphs/bert_l-12_inference.json"}
ROUNDING = 0.005  # the published values have 2 decimals
IP_TOL = 0.005  # relative, against ip_noncontiguous_tps
# our result <= the paper's value of the same baseline * (1 + tolerance): PipeDream is the same
# deterministic algorithm; Scotch's gpart and the paper's differ in version and options (worst
# row now +1.4%, inceptionv3_inference); local search is random restarts (worst +4.4%, bert_l-3)
PAPER_TOL = {"pipedream": 0.005, "scotch": 0.02, "local-search": 0.06}
RUNS = {
    "local-search": lambda p: local_search(p, restarts=10, seed=0),
    "pipedream": pipedream,
    "scotch": lambda p: scotch(p, backend="gpart"),
}
PAPER_COLUMN = {"local-search": "local_search_tps", "pipedream": "pipedream_tps", "scotch": "scotch_tps"}


@functools.cache
def _problem(name):
    graph = sc.read_workload(require_shared(SHARED / "throughput-inputs" / name))
    return graph, ThroughputProblem.from_graph(graph)


@functools.cache
def _dp(name):
    plan = sc.partition(_problem(name)[0], method="dp")
    assert plan.status == "optimal"
    return plan.objective


@functools.cache
def _plan(name, method):
    if method == "scotch":
        require_gpart()
    graph, problem = _problem(name)
    plan = RUNS[method](problem)
    assert plan.method == method and plan.objective is not None
    _rescored(graph, plan, problem)
    return plan


def _contiguous_floor(name, exact_dp):
    """The DP optimum less its tolerance: computed, or the published dp_tps on the slow rows."""
    if exact_dp or name not in SLOW_DP:
        return _dp(name) * (1 - 1e-6)
    return ROWS[name]["dp_tps"] - ROUNDING


def _check(name, method, exact_dp=False):
    require_shared()
    plan = _plan(name, method)
    row = ROWS[name]
    if method == "pipedream":
        assert plan.contiguous
    if plan.contiguous:
        assert plan.objective >= _contiguous_floor(name, exact_dp), (plan.objective, row["dp_tps"])
    assert plan.objective >= row["ip_noncontiguous_tps"] * (1 - IP_TOL), (plan.objective, row["ip_noncontiguous_tps"])
    return plan


def _params(names, slow=frozenset()):
    return [pytest.param(n, id=n.replace(".json", ""), marks=[pytest.mark.slow] if n in slow else [])
            for n in names]


@pytest.mark.parametrize("name", _params(NAMES, slow=SLOW_LOCAL))
def test_local_search_bounded_by_the_exact_optima(name):
    _check(name, "local-search")


@pytest.mark.parametrize("name", _params(NAMES))
def test_pipedream_is_contiguous_and_at_or_above_the_dp(name):
    _check(name, "pipedream")


@pytest.mark.parametrize("name", _params(NAMES))
def test_scotch_bounded_by_the_exact_optima(name):
    _check(name, "scotch")


@pytest.mark.slow
@pytest.mark.parametrize("name", _params(sorted(SLOW_DP)))
@pytest.mark.parametrize("method", sorted(RUNS))
def test_slow_rows_against_the_computed_dp(name, method):
    require_shared()
    if name not in ROWS:
        pytest.fail(f"{name} is not a row of published-table1.json")
    _check(name, method, exact_dp=True)
    assert _dp(name) == pytest.approx(ROWS[name]["dp_tps"], abs=ROUNDING)


# Table 1 has no PipeDream value on the operator graphs
WITH_PAPER_VALUE = [pytest.param(n, m, id=f"{n.replace('.json', '')}-{m}",
                                 marks=[pytest.mark.slow] if m == "local-search" and n in SLOW_LOCAL else [])
                    for n in NAMES for m in sorted(RUNS) if n not in ROWS or ROWS[n][PAPER_COLUMN[m]] is not None]


@pytest.mark.parametrize(("name", "method"), WITH_PAPER_VALUE)
def test_no_worse_than_the_papers_value_of_the_baseline(name, method):
    require_shared()
    paper = ROWS[name][PAPER_COLUMN[method]]
    assert _plan(name, method).objective <= paper * (1 + PAPER_TOL[method]) + ROUNDING


def test_some_baseline_beats_the_dp_only_outside_its_family():
    """The reason for two floors: on some rows a non-contiguous result is below the DP optimum."""
    require_shared()
    below = [(n, m) for n in sorted(set(ROWS) - SLOW_DP - SLOW_LOCAL) for m in ("local-search", "scotch")
             if _plan(n, m).objective < _dp(n) * (1 - 1e-6)]
    assert below and all(not _plan(n, m).contiguous for n, m in below)
