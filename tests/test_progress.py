"""Progress reports (issue 15, item 6): the ``progress=`` callback of the entry points, the tqdm
bar on stderr and ``--quiet`` on the command line.

* every run of a phase reports ``done`` non-decreasing and ends with a final event, at ``total``
  when it ran to completion; a search's best so far never increases and ends at its answer;
* reports change nothing in the results;
* a callback that raises stops the call, and Ctrl-C still does;
* the bar shows only on a terminal and only after ``BAR_DELAY``; ``--quiet`` silences stderr.
"""

import io
import math
import os
import signal
import threading
import time

import pytest

import stagecut as sc
from stagecut import progress as pg
from stagecut.cli.main import main
from stagecut.training import chain_problem


def runs(events, phase):
    """The runs of ``phase``: lists of events, each ending at a final one (an unfinished last run too)."""
    out, cur = [], []
    for e in events:
        if e.phase != phase:
            continue
        cur.append(e)
        if e.final:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def assert_monotone(run):
    dones = [e.done for e in run]
    assert dones == sorted(dones), dones
    bests = [e.best for e in run if e.best is not None]
    assert bests == sorted(bests, reverse=True), bests
    assert len({e.total for e in run}) == 1


def big_graph():
    return sc.regal_graph(300, seed=1)  # ~1,400 BRKGA decodes a second on 2 cores


# ---------------------------------------------------------------------------- searches
def test_brkga_reports_decodes_up_to_its_budget_and_its_best_so_far():
    events = []
    plan = sc.slice_graph(big_graph(), devices=8, method="brkga", population=40, decodes=1500, seed=3,
                          progress=events.append)
    (run,) = runs(events, "brkga")
    assert_monotone(run)
    last = run[-1]
    assert last.final and last.done == last.total == 1500 == plan.stats["decodes"]
    assert last.unit == "decodes" and last.fraction == 1.0
    assert last.best == plan.history[-1]  # the core's best, exactly
    assert math.isclose(last.best, plan.stats["start_objective"], rel_tol=1e-9)  # re-scored (before the re-splits)
    assert all(e.elapsed >= 0 for e in events)


def test_a_search_cut_short_reports_while_it_runs():
    events = []
    t0 = time.monotonic()
    plan = sc.slice_graph(big_graph(), devices=8, method="brkga", population=40, decodes=10**7, seed=3,
                          time_limit=1.5, progress=events.append)
    took = time.monotonic() - t0
    (run,) = runs(events, "brkga")
    assert_monotone(run)
    ticks = [e for e in run if not e.final]
    assert len(ticks) >= 2, f"{len(ticks)} reports in {took:.1f} s"  # one every 0.25 s
    assert run[-1].final and 0 < run[-1].done < run[-1].total == 10**7
    assert plan.status == "time_limit" and run[-1].best == plan.history[-1]


@pytest.mark.parametrize("method, phase, unit", [("random", "random", "decodes"), ("mla", "mla", "evaluations")])
def test_random_t_and_mla_count_their_budget(method, phase, unit):
    events = []
    plan = sc.slice_graph(sc.regal_graph(60, seed=2), devices=4, method=method, decodes=400, progress=events.append)
    (run,) = runs(events, phase)
    assert_monotone(run)
    assert run[-1].final and run[-1].done == run[-1].total == 400 and run[-1].unit == unit
    if method == "random":
        assert run[-1].best == plan.history[-1]
    else:  # the arrangement cost is not the objective: no best
        assert all(e.best is None for e in run)


def test_reports_change_nothing():
    g = sc.regal_graph(80, seed=4)
    quiet = sc.slice_graph(g, devices=4, method="brkga", population=30, decodes=600, seed=1)
    loud = sc.slice_graph(g, devices=4, method="brkga", population=30, decodes=600, seed=1,
                          progress=lambda e: None)
    assert (loud.objective, loud.stages, loud.history) == (quiet.objective, quiet.stages, quiet.history)
    d = sc.random_dag(48, edge_prob=0.35, seed=1, max_span=6)
    a = sc.partition(d, devices=3, method="dp")
    b = sc.partition(d, devices=3, method="dp", progress=lambda e: None)
    assert (a.objective, a.stages, a.stats["ideals"]) == (b.objective, b.stages, b.stats["ideals"])


# ---------------------------------------------------------------------------- dynamic programs
def test_the_throughput_dp_reports_its_ideals_and_rows():
    events = []
    plan = sc.partition(sc.random_dag(50, edge_prob=0.35, seed=5, max_span=6), devices=4, method="dp",
                        progress=events.append)
    n = plan.stats["ideals"]
    assert n > 1000
    dp_runs = runs(events, "dp")  # the exact DP, after DPL's (n + 1 ideals) for a first bound
    assert dp_runs[-1][-1].total == n
    for run in dp_runs:
        assert_monotone(run)
        assert run[-1].final and run[-1].done == run[-1].total
    (enum,) = runs(events, "ideals")[-1:]
    assert enum[-1].final and enum[-1].done == n and enum[-1].total is None
    (links,) = runs(events, "ideal links")[-1:]
    assert links[-1].done == links[-1].total == n


def test_the_mtpp_dp_and_piper_dp_end_at_their_totals():
    events = []
    sc.slice_graph(sc.random_dag(30, edge_prob=0.3, seed=1, max_span=5), devices=3, method="dp",
                   progress=events.append)
    assert runs(events, "dp") and all(r[-1].final and r[-1].done == r[-1].total for r in runs(events, "dp"))
    events.clear()
    prob = chain_problem([3.0, 1.0, 2.0, 2.0, 1.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0,
                         mem_b=1.0)
    sc.plan_training(prob, progress=events.append)
    (run,) = runs(events, "piper dp")
    assert_monotone(run)
    assert run[-1].final and run[-1].done == run[-1].total == 6 and run[-1].unit == "upsets"  # 6 upsets of a chain of 5


def test_a_mip_reports_its_seconds_out_of_its_time_limit():
    events = []
    g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0, 3.0], comm=0.5)
    sc.certify(g, [[0, 1], [2, 3], [4, 5]], devices=3, levels=["exact"], time_limit=30.0, progress=events.append)
    mips = runs(events, "mip")
    assert mips
    for run in mips:
        assert_monotone(run)
        assert run[-1].final and 0 < run[-1].done <= run[-1].total <= 30.0 and run[-1].unit == "s"


def test_place_reports_its_mip():
    events = []
    g = sc.Graph.chain([1.0, 2.0, 3.0, 1.0], cpu_costs=[4.0, 4.0, 4.0, 4.0], comm=0.5)
    s = sc.place(g, 2, method="milp", time_limit=20.0, progress=events.append)
    assert s.objective is not None
    (run,) = runs(events, "mip")
    assert run[-1].final and 0 < run[-1].done <= run[-1].total <= 20.0


# ---------------------------------------------------------------------------- scopes and errors
def test_progress_false_silences_an_enclosing_scope_and_none_inherits_it():
    seen = []
    g = sc.regal_graph(20, seed=0)
    with pg.reporting(seen.append):
        sc.slice_graph(g, devices=2, decodes=50, progress=False)
        assert seen == []
        sc.slice_graph(g, devices=2, decodes=50)
    assert [e.phase for e in seen if e.final] == ["brkga"]
    sc.slice_graph(g, devices=2, decodes=50)  # the scope is over, and the core's hook with it
    assert len([e for e in seen if e.final]) == 1


@pytest.mark.parametrize("bad", ["yes", 1, 0.5])
def test_progress_must_be_a_bool_or_a_callable(bad):
    with pytest.raises(sc.InvalidArgumentError, match="progress must be"):
        sc.partition(sc.Graph.chain([1.0, 2.0]), devices=2, progress=bad)


class Stop(Exception):
    pass


def test_a_callback_that_raises_stops_the_call():
    def stop(event):
        if not event.final:
            raise Stop(event.done)

    t0 = time.process_time()
    with pytest.raises(Stop):  # the full run: 50,000 decodes, over 30 s
        sc.slice_graph(big_graph(), devices=8, method="brkga", population=200, decodes=50_000, progress=stop)
    assert time.process_time() - t0 < 10.0  # CPU seconds (all threads): a load-independent measure
    assert sc.slice_graph(sc.regal_graph(20, seed=0), devices=2, decodes=50).objective is not None


def test_ctrl_c_stops_a_call_that_reports_progress():
    seen = []

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, handler)
    sent = []
    reporting, finished = threading.Event(), threading.Event()

    def report(event):
        seen.append(event)
        if not event.final:
            reporting.set()

    def interrupt():
        # once the search reports (not after a fixed wall time: a loaded machine may not have
        # started it by then); CPU seconds (all threads) from the signal on: the full run takes
        # over 30; wall time would measure the machine's load
        if reporting.wait(120) and not finished.is_set():
            sent.append(time.process_time())
            os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt, daemon=True)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sc.slice_graph(big_graph(), devices=8, method="brkga", population=200, decodes=50_000,
                           progress=report)
    finally:
        finished.set()
        reporting.set()
        sender.join()
        signal.signal(signal.SIGINT, old)
    assert time.process_time() - sent[0] < 3.0
    assert any(not e.final for e in seen)  # it was reporting when the signal came


# ---------------------------------------------------------------------------- the bar and the CLI
class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def run_cli(args, monkeypatch, delay):
    err = FakeTerminal()
    monkeypatch.setattr(pg, "BAR_DELAY", delay)
    monkeypatch.setattr("sys.stderr", err)
    code = main(args)
    return code, err.getvalue()


#: a search that runs 1 s whatever the machine's speed (so the core reports while it runs)
SLICE = ["slice", "regal:300:erdos_renyi:1", "-k", "8", "--population", "40", "--decodes", "10000000",
         "--time-limit", "1"]


def test_the_cli_shows_a_bar_on_a_terminal_and_quiet_shows_nothing(monkeypatch, capsys):
    code, err = run_cli(SLICE, monkeypatch, 0.0)
    assert code == 0 and "BRKGA" in err and "decodes" in err
    code, err = run_cli([*SLICE, "--quiet"], monkeypatch, 0.0)
    assert code == 0 and err == ""
    old = [*SLICE[:2], "--stages", "8", *SLICE[4:]]  # a deprecated flag: a note on stderr
    code, err = run_cli(["-q", *old], monkeypatch, 0.0)
    assert code == 0 and err == ""
    code, err = run_cli(old, monkeypatch, 3600.0)  # the bar waits
    assert code == 0 and "BRKGA" not in err and "--stages" in err
    assert "objective" in capsys.readouterr().out


def test_the_bar_needs_a_terminal(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(pg, "BAR_DELAY", 0.0)
    monkeypatch.setattr("sys.stderr", err)
    kw = dict(devices=8, population=40, decodes=10**7, time_limit=1.0, progress=True)
    sc.slice_graph(big_graph(), **kw)
    assert err.getvalue() == ""
    tty = FakeTerminal()
    monkeypatch.setattr("sys.stderr", tty)
    sc.slice_graph(big_graph(), **kw)
    assert "BRKGA" in tty.getvalue()
