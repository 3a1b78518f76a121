"""Run a function on a few local ``torch.distributed`` ranks and collect what each rank returns.

The harness the pipeline tests (``tests/frontends/gloo_pipeline.py``) and the pipeline benchmark
(``benches/bench_gloo_pipeline.py``) share: :func:`run_ranks` spawns ``world`` processes (one
thread each), joins them into one process group (gloo on the CPU, or NCCL with rank ``r`` on
``cuda:r``), runs ``step(rank, case, state)`` for every case in turn on every rank, and returns
each rank's results. A case that raises ends that rank's list with the error (the other ranks
may be waiting on a message that will not come); a rank still running when the time limit is
up is ended, and its list says how far it got.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["run_ranks", "Step"]

#: ``step(rank, case, state)``: one case on one rank; ``state`` is a dict the rank keeps across
#: its cases (a cache). Returns a dict of results (or a list of them) that JSON can hold.
Step = Callable[[int, Any, dict[str, Any]], "dict[str, Any] | list[dict[str, Any]]"]


def _error(e: BaseException) -> dict[str, Any]:
    first = str(e).splitlines()[0] if str(e) else ""
    return {"ok": False, "error": f"{type(e).__name__}: {first}", "trace": traceback.format_exc()[-2000:]}


def _rank(rank: int, step: Step, cases: Sequence[Any], world: int, backend: str, init_file: str,
          outs: Sequence[str], group_timeout: float) -> None:
    """One spawned rank: the process group, every case, the results written to ``outs[rank]``."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    results: list[dict[str, Any]] = []
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=group_timeout))
        state: dict[str, Any] = {}
        for case in cases:
            try:
                t0 = time.process_time()
                out = step(rank, case, state)
                cpu = time.process_time() - t0
                results += [{"ok": True, "cpu_s": cpu, **r} for r in (out if isinstance(out, list) else [out])]
            except Exception as e:  # noqa: BLE001 - reported to the caller, which fails on it
                results.append(_error(e))
                break  # the other ranks may be waiting on a message that will not come
    except Exception as e:  # noqa: BLE001 - the process group could not start
        results.append(_error(e))
    finally:
        out_file = outs[rank]
        with open(out_file + ".tmp", "w") as f:
            json.dump(results, f)
        os.replace(out_file + ".tmp", out_file)
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - ending anyway
            pass


def _join(ctx: Any, timeout: float) -> str | None:
    """Wait for the ranks, at most ``timeout`` seconds in all, then end those still running; what
    went wrong (a rank that died, or the time limit), else ``None``."""
    deadline = time.monotonic() + timeout
    problem = None
    try:
        while not ctx.join(timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                problem = f"the ranks ran past the time limit of {timeout:g} s and were ended"
                break
    except Exception as e:  # noqa: BLE001 - a rank that died: its results file says how far it got
        problem = f"a rank failed: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
    finally:  # also on KeyboardInterrupt: no rank outlives the call
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
                p.join(10)
    return problem


def run_ranks(step: Step, cases: Sequence[Any], *, world: int = 2, backend: str = "gloo", timeout: float = 600.0,
              group_timeout: float = 60.0, tmp_dir: str | os.PathLike[str] | None = None) -> list[list[dict[str, Any]]]:
    """Run ``step(rank, case, state)`` for each of ``cases`` on ``world`` spawned ranks.

    Parameters
    ----------
    step : callable
        A module-level function (the spawned processes import it by name: its module must be
        importable from ``sys.path`` as it is when this is called).
    cases : sequence
        What each call gets (picklable); every rank runs every case, in order.
    world : int
        The number of ranks.
    backend : {"gloo", "nccl"}
        ``"nccl"``: rank ``r`` on ``cuda:r`` (``torch.cuda.set_device``) before the group starts.
    timeout : float
        Seconds for the whole run; ranks still running then are ended.
    group_timeout : float
        The process group's timeout (a collective that waits longer fails in the rank).
    tmp_dir : path, optional
        Where the rendezvous file and the results go (a fresh directory inside it, removed after).

    Returns
    -------
    list of list of dict
        Per rank, one dict per result: ``{"ok": True, "cpu_s": <the case's process CPU
        seconds>, **step's dict}`` (``step``'s own keys win), or ``{"ok": False, "error",
        "trace"}`` for the case that raised, which ends the list. A rank that wrote nothing (it
        was ended, or died) gets ``[{"ok": False, "error": ...}]`` saying why.
    """
    from stagecut.frontends._common import require

    mp: Any = require("torch.multiprocessing", "torch")
    with tempfile.TemporaryDirectory(dir=None if tmp_dir is None else str(tmp_dir)) as d:
        tag = uuid.uuid4().hex[:8]
        init_file = os.path.join(d, f"init-{tag}")
        outs = [os.path.join(d, f"rank{r}-{tag}.json") for r in range(world)]
        ctx = mp.start_processes(_rank, args=(step, list(cases), world, backend, init_file, outs, group_timeout),
                                 nprocs=world, join=False, start_method="spawn")
        problem = _join(ctx, timeout)
        results = []
        for r, path in enumerate(outs):
            if os.path.exists(path):
                with open(path) as f:
                    results.append(json.load(f))
            else:
                code = ctx.processes[r].exitcode
                results.append([{"ok": False, "error": f"rank {r} wrote no result (exit code {code}"
                                                       f"{'; ' + problem if problem else ''})"}])
        if problem:
            print(f"stagecut: {problem}", file=sys.stderr)
        return results
