"""Scotch's ``gpart`` and METIS (``pymetis``) for the Scotch baseline
(:func:`stagecut.throughput.baselines.scotch`): the weighted graph, Scotch's ``.grf`` file, the parts."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile

from stagecut.errors import SolverError
from stagecut.graph import ACCELERATOR, CPU
from stagecut.throughput.problem import ThroughputProblem

__all__ = ["find_gpart"]


def find_gpart() -> str | None:
    """The path of Scotch's ``gpart`` (Debian names it ``scotch_gpart``), or ``None``.

    A program named ``gpart`` that is not Scotch's (Debian's partition-table guesser) is skipped.

    Returns
    -------
    str or None

    Raises
    ------
    OSError
        Never on a missing program; only what ``subprocess`` raises on a broken one.
    """
    for name in ("scotch_gpart", "gpart"):
        path = shutil.which(name)
        if path is None:
            continue
        try:
            out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if "gpart" in (out.stdout + out.stderr) and "scotch" in (out.stdout + out.stderr).lower() + path:
            return path
    return None


_INSTALL = ("Scotch's gpart is not on PATH: install Scotch (Debian/Ubuntu: apt-get install -y scotch, "
            "which provides scotch_gpart; or build it from https://gitlab.inria.fr/scotch/scotch), or "
            "pip install pymetis for the METIS backend")


def _weights(problem: ThroughputProblem, classes: list[list[int]]) -> tuple[list[int], dict[tuple[int, int], int]]:
    """Integer vertex weights (compute time, on an accelerator if the class may run there) and
    undirected edge weights (tensor-once communication between two classes), scaled to at
    most 10**7 in all."""
    g = problem.graph
    unit_of = [0] * len(g)
    for u, m in enumerate(classes):
        for i in m:
            unit_of[i] = u
    kind = ACCELERATOR if problem.devices else CPU
    vw = [math.fsum(g.nodes[i].time(kind if all(g.nodes[j].supports(kind) for j in m) else CPU) for i in m)
          for m in classes]
    ew: dict[tuple[int, int], float] = {}
    for p, nd in enumerate(g.nodes):
        for q in {unit_of[v] for v in g.succ[p]} - {unit_of[p]}:
            key = (min(unit_of[p], q), max(unit_of[p], q))
            ew[key] = ew.get(key, 0.0) + nd.comm
    vs, es = math.fsum(vw) or 1.0, math.fsum(ew.values()) or 1.0
    return ([round(w / vs * 1e7) for w in vw], {k: max(1, round(w / es * 1e7)) for k, w in ew.items()})


def _run_gpart(exe: str, nparts: int, vw: list[int], ew: dict[tuple[int, int], int], imbalance: float) -> list[int]:
    adj: list[list[tuple[int, int]]] = [[] for _ in vw]
    for (a, b), w in ew.items():
        adj[a].append((b, w))
        adj[b].append((a, w))
    lines = ["0", f"{len(vw)} {2 * len(ew)}", "0 011"]
    lines += [" ".join([str(vw[v]), str(len(adj[v]))] + [f"{w} {x}" for x, w in adj[v]]) for v in range(len(vw))]
    with tempfile.TemporaryDirectory(prefix="stagecut-scotch-") as tmp:
        grf, out = os.path.join(tmp, "graph.grf"), os.path.join(tmp, "graph.map")
        with open(grf, "w") as f:
            f.write("\n".join(lines) + "\n")
        run = subprocess.run([exe, str(nparts), grf, out, f"-b{imbalance:g}", "-Cd"], capture_output=True,
                             text=True, timeout=3600, check=False)
        if run.returncode != 0 or not os.path.exists(out):
            raise SolverError(f"{exe} failed (exit {run.returncode}): {run.stderr.strip()[:500]}")
        with open(out) as f:
            rows = f.read().split()
    parts = [0] * len(vw)
    for v, p in zip(rows[1::2], rows[2::2]):
        parts[int(v)] = int(p)
    return parts


def _run_pymetis(nparts: int, vw: list[int], ew: dict[tuple[int, int], int], seed: int) -> list[int]:
    import pymetis  # type: ignore[import-not-found,unused-ignore]

    adj: list[list[tuple[int, int]]] = [[] for _ in vw]
    for (a, b), w in ew.items():
        adj[a].append((b, w))
        adj[b].append((a, w))
    xadj = [0]
    for row in adj:
        xadj.append(xadj[-1] + len(row))
    _, parts = pymetis.part_graph(nparts, xadj=xadj, adjncy=[x for row in adj for x, _ in row],
                                  vweights=[max(1, w) for w in vw], eweights=[w for row in adj for _, w in row],
                                  options=pymetis.Options(seed=seed))
    return [int(p) for p in parts]
