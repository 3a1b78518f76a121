"""Every latency MIP solver (the MILP, SPLIT with one and several channels, batched SPLIT, the
batched MILP, the PCIe IP) checks its arguments the same way, before any work, with the same
messages (the checks live once, in :mod:`stagecut.latency._args`)."""

import importlib
import re

import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.latency import Devices, LatencyProblem, solve_milp, solve_pcie_ip
from stagecut.latency.diviml.batched import solve_batched
from stagecut.latency.diviml.split import solve_split
from stagecut.latency.diviml.split_multi import solve_split_batched, solve_split_multi

#: name -> (the solver called with the problem and keyword arguments, the arguments it takes)
SOLVERS = {
    "milp": (solve_milp, {"time_limit", "solver", "threads", "gap", "seed", "start", "verbose"}),
    "split": (solve_split, {"time_limit", "solver", "threads", "start", "workers"}),
    "split_multi": (solve_split_multi, {"time_limit", "solver", "threads", "start", "bound_solves"}),
    "split_batched": (lambda p, **kw: solve_split_batched(p, 2, **kw), {"time_limit", "solver", "threads"}),
    "batched": (lambda p, **kw: solve_batched(p, 2, **kw), {"time_limit", "solver", "threads", "seed"}),
    "pcie_ip": (solve_pcie_ip, {"time_limit", "solver", "threads", "gap", "seed", "verbose"}),
}

#: argument -> (a bad value, the whole message)
BAD = {
    "solver": ("gurobi", "solver must be one of ('cbc', 'highs'), got 'gurobi'"),
    "time_limit": (-1, "time_limit (seconds): -1 must be positive"),
    "threads": (0, "threads must be a positive integer, got 0"),
    "gap": ("1%", "gap: '1%' is a string, not a number (write 1%)"),
    "seed": (-1, "seed must be a non-negative integer, got -1"),
    "start": ({"0": "cpu"}, "start: expected a Schedule, got {'0': 'cpu'}"),
    "verbose": ("yes", "verbose: 'yes' is not a boolean (use true/false or 1/0)"),
    "bound_solves": ("no", "bound_solves: 'no' is not a boolean (use true/false or 1/0)"),
    "workers": (0, "workers must be an integer >= 1, got 0"),
}


def _problem():
    return LatencyProblem(sc.Graph.chain([1.0, 2.0, 1.0]), Devices.pcie_star(2))


CASES = [(name, arg) for name, (_, takes) in SOLVERS.items() for arg in sorted(takes)]


@pytest.mark.parametrize("name, arg", CASES, ids=[f"{n}-{a}" for n, a in CASES])
def test_a_bad_option_is_refused_by_name_with_the_shared_message(name, arg):
    solve, _ = SOLVERS[name]
    value, message = BAD[arg]
    with pytest.raises(InvalidArgumentError, match=f"^{re.escape(message)}$"):
        solve(_problem(), **{arg: value})


@pytest.mark.parametrize("name", list(SOLVERS))
def test_a_problem_that_is_not_one_is_named_first(name):
    solve, _ = SOLVERS[name]
    with pytest.raises(InvalidArgumentError, match=r"^problem: expected a LatencyProblem, got 'p\.json'$"):
        solve("p.json", solver="gurobi")


def test_a_bad_start_is_refused_before_an_unplaceable_problem_is_answered():
    """A node that fits no device makes SPLIT answer "infeasible" at once; a bad ``start`` is
    still an error, not an answer."""
    g = sc.Graph([sc.Node(0, {"accelerator": 1.0}, memory=5.0)], [], defaults={"memory": 1.0})
    p = LatencyProblem(g, Devices.pcie_star(1, memory=1.0, cpu=False))
    assert solve_split(p).status == "infeasible"
    with pytest.raises(InvalidArgumentError, match="^start: expected a Schedule"):
        solve_split(p, start="gpu:0")


@pytest.mark.parametrize("solver, module, first_work, arg", [
    *[(solve_milp, "stagecut.latency.exact.milp", "best_bound", a) for a in ("gap", "seed", "verbose", "start",
                                                                             "time_limit")],
    *[(solve_pcie_ip, "stagecut.latency.pcie.ip", "_known", a) for a in ("gap", "seed", "verbose", "time_limit")],
])
def test_the_ips_refuse_before_their_bound_and_warm_start(solver, module, first_work, arg, monkeypatch):
    """A bad option is refused before any work: not later by the model's own check (the MILP's
    simple bound and either IP's warm start can take seconds on a large graph)."""

    def no_work(*_args, **_kwargs):
        raise AssertionError(f"{module} started working before checking its options")

    monkeypatch.setattr(importlib.import_module(module), first_work, no_work)
    value, message = BAD[arg]
    with pytest.raises(InvalidArgumentError, match=f"^{re.escape(message)}$"):
        solver(_problem(), **{arg: value})
