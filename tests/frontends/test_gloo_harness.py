"""The harness that spawns the gloo ranks of the pipeline tests and of
``benches/bench_gloo_pipeline.py`` (:func:`stagecut.frontends._gloo.run_ranks`): every rank runs
every case with its own state, a case that raises ends that rank's list with the error, and a rank
still running at the time limit is ended (the call returns; no process is left behind)."""

import os
import time

import pytest

from frontends.extras import require_extra

require_extra("torch", "torch")
require_extra("torch.distributed", "torch")

from stagecut.frontends._gloo import run_ranks  # noqa: E402


def _sum_step(rank, case, state):
    """Every rank adds ``case`` to an all-reduced sum; rank 1 raises on the case ``"boom"``."""
    import torch
    import torch.distributed as dist

    if case == "boom":
        if rank == 1:
            raise ValueError("planted failure")
        return {"rank": rank, "calls": state.setdefault("calls", 0)}
    state["calls"] = state.get("calls", 0) + 1
    t = torch.tensor([float(case + rank)])
    dist.all_reduce(t)
    return [{"rank": rank, "sum": float(t[0]), "world": dist.get_world_size(), "pid": os.getpid()}]


def _hang_step(rank, case, state):
    """Rank 1 never returns (a rank stuck in a collective)."""
    if rank == 1:
        time.sleep(3600)
    return {"rank": rank, "pid": os.getpid()}


@pytest.mark.slow  # spawns 2 + 2 processes importing torch
def test_every_rank_runs_every_case_until_one_fails_and_a_hung_rank_is_ended(tmp_path):
    ranks = run_ranks(_sum_step, [1, 2, "boom", 3], world=2, timeout=300, group_timeout=30, tmp_dir=tmp_path)
    assert len(ranks) == 2
    r0, r1 = ranks
    assert [r["sum"] for r in r0[:2]] == [3.0, 5.0] == [r["sum"] for r in r1[:2]]  # (1 + 0) + (1 + 1), ...
    assert all(r["ok"] and r["world"] == 2 and r["cpu_s"] >= 0 for r in r0[:2] + r1[:2])
    assert r0[2] == {"ok": True, "cpu_s": r0[2]["cpu_s"], "rank": 0, "calls": 2}  # the state kept across cases
    assert not r1[2]["ok"] and r1[2]["error"] == "ValueError: planted failure" and "_sum_step" in r1[2]["trace"]
    assert len(r1) == 3 and r0[0]["pid"] != r1[0]["pid"] != os.getpid()  # rank 1 stopped at its failure
    assert len(r0) == 4 and not r0[3]["ok"]  # so rank 0's next collective failed (no peer), not hung
    assert os.listdir(tmp_path) == []  # the rendezvous and result files are removed

    ranks = run_ranks(_hang_step, [None], world=2, timeout=90, tmp_dir=tmp_path)
    assert ranks[0][0]["ok"] and ranks[0][0]["rank"] == 0
    assert not ranks[1][0]["ok"] and "wrote no result" in ranks[1][0]["error"]
    assert "time limit of 90 s" in ranks[1][0]["error"]
