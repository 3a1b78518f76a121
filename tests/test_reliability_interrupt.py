"""Ctrl-C during a MIP solve and the solvers' output.

* Ctrl-C (or a progress callback's exception) during any MIP solve ends the call with
  ``KeyboardInterrupt`` and the command line with exit 130 and one line, never with an answer,
  even once CBC (which installs its own SIGINT handler while it solves and then reports its
  incumbent as if the search had ended) or HiGHS is in branch and bound. The children announce
  when the solver is inside its search; the thresholds are generous (seconds of wall time on a
  loaded machine), the strict figure is a benchmark's (benches/interrupt_latency.py).
* The solvers write nothing on the process's stdout, and no solve touches file descriptor 1:
  many threads solving MIPs at once leave stdout working.
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import stagecut as sc
import stagecut._mip as m

#: seconds from SIGINT to the end of the child (the solver stops at its next check; the
#: figure unloaded is well under a second: benches/interrupt_latency.py)
GENEROUS = 10.0

# the child: a latency MILP on a 40-node REGAL graph and 4 accelerators (minutes to solve with
# either solver; HiGHS is in branch and bound after a few seconds), which says "searching" on stderr once
# the solver is inside its search: CBC's own SIGINT handler is installed (seen by the wait loop; CBC
# builds differ: cbcbox's generic build installs one, its AVX2 build none) or CBC has been solving
# for 5 s, or HiGHS reports a dual bound from its branch-and-bound callback
CHILD = textwrap.dedent("""
    import sys, time, stagecut as sc, stagecut._mip as m
    solver, how = sys.argv[1], sys.argv[2]
    said = []
    def say():
        if not said:
            said.append(1)
            print("searching", file=sys.stderr, flush=True)
    reclaim = m._Interrupt.reclaim
    began = []
    def watched(self):
        reclaim(self)
        if not began:
            began.append(time.monotonic())
        if self.foreign is not None or (self.cbc and time.monotonic() - began[0] > 5.0):
            say()
    m._Interrupt.reclaim = watched
    def progress(ev):
        if ev.phase == "mip" and ev.bound is not None and not ev.final:
            say()
    if how == "api":
        try:
            r = sc.place(sc.regal_graph(40, seed=3), 4, method="milp", solver=solver, time_limit=600,
                         progress=progress)
            print("finished", r.status)
        except KeyboardInterrupt:
            print("interrupted")
    else:
        from stagecut.cli.main import main
        sys.exit(main(["latency", "regal:40:erdos_renyi:3", "-k", "4", "--method", "milp", "--solver", solver,
                       "--time-limit", "600"]))
""")


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background job's SIGINT is ignored, and inherited so


def _interrupt_in_search(solver, how):
    """Run the child until its solver is searching (plus 2 s), send SIGINT; ``(stdout, stderr,
    exit status, seconds from the signal to the end)``."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, solver, how], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        line = proc.stderr.readline()
        if line.split() != ["searching"]:  # (the child ended first: say how, a negative code is a signal)
            out, err = proc.communicate()
            pytest.fail(f"the child ended before its search, exit status {proc.returncode}: "
                        f"stdout {out!r}, stderr {line + err!r}")
        time.sleep(2.0)  # well inside the search (it takes minutes)
        assert proc.poll() is None, proc.communicate()
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        return out, err, proc.returncode, time.monotonic() - sent
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("solver", ["cbc", pytest.param("highs", marks=pytest.mark.slow)])
def test_ctrl_c_in_branch_and_bound_raises_keyboard_interrupt(solver):
    out, err, code, latency = _interrupt_in_search(solver, "api")
    assert out.split() == ["interrupted"] and not err, (out, err)  # not 'finished', not a traceback
    assert code == 0
    assert latency < GENEROUS, f"{latency:.1f} s from SIGINT to the end"


@pytest.mark.slow
def test_ctrl_c_in_cbc_branch_and_bound_on_the_command_line_is_exit_130():
    out, err, code, latency = _interrupt_in_search("cbc", "cli")
    assert code == 130, (out, err)
    assert out == "" and err.splitlines() == ["stagecut: interrupted"], (out, err)
    assert latency < GENEROUS, f"{latency:.1f} s from SIGINT to the end"


def _small_mip(solver="cbc", n=12):
    mip = m.import_mip()
    model = m.new_model("t", solver=solver)
    x = [model.add_var(var_type=mip.INTEGER, ub=20) for _ in range(n)]
    for i in range(n - 1):
        model += 3 * x[i] + 2 * x[i + 1] >= 7.5 + (i % 3)
    model.objective = mip.xsum((i % 5 + 1) * x[i] for i in range(n))
    return model, x


def test_a_cbc_solve_stopped_by_its_own_sigint_handler_raises_keyboard_interrupt(monkeypatch):
    # what happens when SIGINT reaches CBC's handler (before the wait loop put the caller's back,
    # or on another thread): CBC stops "on event" and python-mip reports its incumbent as FEASIBLE
    model, _ = _small_mip()
    monkeypatch.setattr(m._Interrupt, "stopped_by_signal", lambda self, status: True)
    with pytest.raises(KeyboardInterrupt):
        m.solve(model, time_limit=10)
    monkeypatch.undo()
    model, _ = _small_mip()
    assert m.solve(model, time_limit=10).status == "optimal"  # the real check: a finished search is not a signal


def test_a_solve_waiting_on_the_main_thread_puts_the_callers_sigint_handler_back(monkeypatch):
    # the wait loop replaces a handler installed behind its back (CBC's) by the one from before
    # the solve, and remembers the solver's to stop it
    seen = []
    real = m._Interrupt.reclaim

    def spy(self):
        before = m._handler_address(m._sigaction())
        real(self)
        seen.append((before, m._handler_address(m._sigaction()), self.foreign))

    monkeypatch.setattr(m._Interrupt, "reclaim", spy)
    python_handler = m._handler_address(m._sigaction())
    model, _ = _small_mip(n=40)
    m.solve(model, time_limit=5)
    assert seen, "the wait loop never ran"
    assert all(after == python_handler for _, after, _ in seen)
    assert m._handler_address(m._sigaction()) == python_handler
    assert signal.getsignal(signal.SIGINT) is not None


def test_a_progress_callback_exception_ends_a_mip_solve():
    class Stop(Exception):
        pass

    def progress(ev):
        if ev.phase == "mip":
            raise Stop

    g = sc.regal_graph(30, seed=2)
    with pytest.raises(Stop):
        sc.place(g, 2, method="milp", time_limit=30, progress=progress)


def test_solvers_print_nothing_on_stdout(capfd):
    for solver in m.SOLVERS:
        model, x = _small_mip(solver)
        m.solve(model, time_limit=5, start=[(v, 20.0) for v in x])
        m.solve(_small_mip(solver)[0], time_limit=5, relax=True)
        bad, y = _small_mip(solver, n=3)
        bad += y[0] >= 30  # infeasible (ub 20)
        m.solve(bad, time_limit=5)
    out, _ = capfd.readouterr()
    assert out == ""


def test_many_threads_solving_mips_leave_stdout_working(capfd):
    fd_before = os.fstat(1)
    errors = []

    def work(i):
        try:
            for k in range(4):
                solver = m.SOLVERS[(i + k) % 2]
                model, _ = _small_mip(solver, n=8 + i % 5)
                assert m.solve(model, time_limit=10).status == "optimal"
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    fd_after = os.fstat(1)
    assert (fd_after.st_dev, fd_after.st_ino) == (fd_before.st_dev, fd_before.st_ino)
    print("still here")
    sys.stdout.flush()
    out, _ = capfd.readouterr()
    assert out == "still here\n"


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5, 1.0])
def test_ctrl_c_while_the_command_starts_is_one_line_and_exit_130(delay):
    # SIGINT while the command imports what it needs (well before any work): no KeyboardInterrupt
    # traceback. The child says "up" once the package's first statement has put the command's handler
    # in place (a signal before that, during Python's own start-up or the import of that one module,
    # is Python's: waiting for it makes the test independent of the machine's load), then runs the
    # command as its script does
    code = ("import sys, runpy, signal\n"
            "sys.argv = ['stagecut', 'partition', 'example:chain', '-k', '2']\n"
            "import stagecut\n"
            "assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler\n"
            "print('up', file=sys.stderr, flush=True)\n"
            "runpy.run_module('stagecut', run_name='__main__')\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    try:
        assert proc.stderr.readline() == "up\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    if proc.returncode == 0:  # finished before the signal (an unloaded, fast machine): nothing to check
        return
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
    assert "Traceback" not in err and err.splitlines() in ([], ["stagecut: interrupted"]), err


@pytest.mark.parametrize("where", ["stagecut.cli._common.check_outputs", "stagecut.cli.main.print_parse_notes"])
def test_ctrl_c_that_surfaces_as_an_import_error_is_still_an_interruption(where):
    # a SIGINT while a compiled module initialises reaches the command as ImportError (an extension's
    # import replaces the KeyboardInterrupt; numpy wraps it in its "IMPORTANT: PLEASE READ THIS"
    # message): that is the user's Ctrl-C, not an internal error. Simulated deterministically, in the
    # command's own error handler (check_outputs) and in its set-up (the parse notes)
    module, name = where.rsplit(".", 1)
    code = textwrap.dedent(f"""\
        import importlib, os, signal, sys, time, runpy
        sys.argv = ['stagecut', 'partition', 'example:chain', '-k', '2']
        import stagecut
        target = importlib.import_module({module!r})
        def interrupted_import(*args, **kwargs):
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(60)
            except KeyboardInterrupt:
                raise ImportError("numpy.core.multiarray failed to import") from None
        setattr(target, {name!r}, interrupted_import)
        runpy.run_module('stagecut', run_name='__main__')
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          preexec_fn=_default_sigint)
    assert (proc.returncode, proc.stderr, proc.stdout) == (130, "stagecut: interrupted\n", "")


def test_the_command_remembers_a_ctrl_c_and_a_program_is_left_alone(monkeypatch):
    from stagecut import _startup
    from stagecut.cli._common import guarded

    def run(args):
        raise ImportError("numpy.core.multiarray failed to import")

    command = guarded(run)
    args = type("Args", (), {"debug": False})()
    assert not _startup.seen()  # (this process imported stagecut as a program: its handler is its own)
    assert command(args) == 1  # without a Ctrl-C: a bug
    monkeypatch.setattr(signal, "getsignal", lambda signum: _startup.interrupted)
    installed = []
    monkeypatch.setattr(signal, "signal", lambda signum, handler: installed.append(handler))
    _startup.release()  # in the command: the start-up handler is replaced by one that remembers
    assert len(installed) == 1
    monkeypatch.setattr(_startup, "_seen", False)
    with pytest.raises(KeyboardInterrupt):
        installed[0](signal.SIGINT, None)
    assert _startup.seen()
    assert command(args) == 130


def test_importing_stagecut_leaves_sigint_alone():
    code = "import signal, stagecut; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         preexec_fn=_default_sigint).stdout
    assert out.split() == ["True"]
