"""Parameters and buffers used by several operators: where their bytes go, what is colocated,
and what replicating a tied weight costs in training.

* A **tied parameter** (one tensor used by operators of different modules: GPT-2's token
  embedding and its output projection) is *replicated*: its users are not forced onto one stage;
  every user's node carries the parameter's bytes (each stage holding a user holds a copy: the
  count is conservative when two users share a stage). In training each copy's gradient is
  all-reduced between the replicas after backward: each user's backward node is charged
  ``2 (m - 1) / m * bytes / bandwidth`` seconds (a ring all-reduce over its ``m`` users).
  :func:`colocate_tied` gives the other choice (all users on one stage, the bytes counted once,
  no all-reduce); :func:`partition_shared` plans both and keeps the cheaper, which is the optimum
  over both treatments (the replicated graph over-charges only plans that keep the users
  together, which the colocated graph scores exactly).
* A parameter whose users are all in one module (a weight read twice in a loop) keeps its users
  colocated, as does every node of a module called several times.
* A **shared buffer** (a causal mask sliced in every layer, a constant) is not a reason to
  colocate anything: it is replicated, its bytes counted on its first user only (buffers are not
  trained, so there is no all-reduce; the other copies are not counted in memory, which a note
  says).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stagecut.frontends._unionfind import UnionFind

__all__ = ["TiedWeight", "place_weights", "allreduce_seconds", "charge_tied", "colocate_tied", "partition_shared"]


@dataclass(frozen=True)
class TiedWeight:
    """A parameter used by operators of different modules.

    Attributes
    ----------
    name : str
        Its fully qualified name in the traced program.
    aliases : tuple of str
        Every name the model reaches it by (``model.named_parameters(remove_duplicate=False)``:
        ``("transformer.wte.weight", "lm_head.weight")``).
    bytes : float
        Its size.
    users : tuple of str
        The node ids using it, in program order.
    """

    name: str
    aliases: tuple[str, ...]
    bytes: float
    users: tuple[str, ...]


def place_weights(uses: Mapping[str, Sequence[str]], size: Mapping[str, float], params: set[str],
                  modules: Mapping[str, tuple[str, ...]], position: Mapping[str, int], classes: UnionFind,
                  memory: dict[str, float], aliases: Mapping[str, tuple[str, ...]],
                  notes: list[str]) -> tuple[dict[str, TiedWeight], list[str]]:
    """Put each weight's bytes on its users and colocate them as the module docstring says.

    ``uses``: weight name -> user node ids (any order, repeats allowed, nodes not in ``position``
    ignored); ``params``: the names that are trainable parameters (the rest are buffers and
    constants). Updates ``classes``, ``memory`` and ``notes``; returns the tied parameters and the
    weights used by no kept node.
    """
    tied: dict[str, TiedWeight] = {}
    unused: list[str] = []
    shared_buffers: list[str] = []
    for fqn, names in uses.items():
        users = sorted({u for u in names if u in position}, key=position.__getitem__)
        if not users:
            unused.append(fqn)
            continue
        inner = {modules[u][-1] if modules[u] else "" for u in users}
        if len(users) == 1 or (fqn in params and len(inner) == 1):
            memory[users[0]] += size[fqn]
            for u in users:
                classes.union("weight:" + fqn, u)
        elif fqn in params:
            tied[fqn] = TiedWeight(name=fqn, aliases=aliases.get(fqn, (fqn,)), bytes=size[fqn], users=tuple(users))
            for u in users:
                memory[u] += size[fqn]
        else:
            shared_buffers.append(fqn)
            memory[users[0]] += size[fqn]
    used = set(uses) - set(unused)
    unused = [fqn for fqn in unused if not used & set(aliases.get(fqn, ()))]  # a tied alias: not unused
    notes.append(f"{len(uses)} parameters/buffers are not nodes: their bytes are the memory of the operator using "
                 "them")
    if tied:
        notes.append("tied parameter(s) replicated on the stages of their users (bytes counted on each user; in "
                     "training each user's backward is charged the gradient all-reduce): "
                     + "; ".join(f"{t.name} ({' = '.join(t.aliases)}, {len(t.users)} users)"
                                 for t in list(tied.values())[:5]))
    if shared_buffers:
        notes.append(f"{len(shared_buffers)} buffer(s)/constant(s) used by several operators are replicated, not "
                     f"colocated (counted once, on the first user): {', '.join(shared_buffers[:5])}")
    return tied, unused


def allreduce_seconds(t: TiedWeight, bandwidth: float) -> float:
    """Seconds one replica spends in the ring all-reduce of ``t``'s gradient over its users."""
    m = len(t.users)
    return 2.0 * (m - 1) / m * t.bytes / bandwidth if m > 1 and bandwidth > 0 else 0.0


def charge_tied(graph: Any, tied: Mapping[str, TiedWeight], bandwidth: float) -> Any:
    """``graph`` (with backward nodes ``<id>_bwd``) with each tied parameter's gradient
    all-reduce added to its users' backward nodes (every compute kind)."""
    extra: dict[str, float] = {}
    for t in tied.values():
        for u in t.users:
            extra[f"{u}_bwd"] = extra.get(f"{u}_bwd", 0.0) + allreduce_seconds(t, bandwidth)
    if not extra:
        return graph
    return graph.map_nodes(lambda n: dataclasses.replace(n, compute={k: v + extra[str(n.id)] for k, v in
                                                                     n.compute.items()})
                           if str(n.id) in extra else n)


def colocate_tied(trace: Any) -> Any:
    """``trace`` with every tied parameter kept with one stage instead of replicated: its users
    (and their backward nodes) in one colocation class, its bytes counted once (on the first
    user), no all-reduce charged. The trace's ``tied`` is then empty and a note says so."""
    from stagecut.graph import Graph

    tied: Mapping[str, TiedWeight] = trace.tied
    if not tied:
        return trace
    g = trace.graph
    training = g.is_training
    uf = UnionFind()
    for n in g.nodes:
        uf.union("class:" + str(n.colocation if n.colocation is not None else n.id), str(n.id))
    minus_mem: dict[str, float] = {}
    minus_time: dict[str, float] = {}
    for t in tied.values():
        for u in t.users:
            uf.union(t.users[0], u)
        for u in t.users[1:]:
            minus_mem[u] = minus_mem.get(u, 0.0) + t.bytes
        if training:
            for u in t.users:
                minus_time[f"{u}_bwd"] = minus_time.get(f"{u}_bwd", 0.0) + allreduce_seconds(t, trace.bandwidth)
    members: dict[str, list[str]] = {}
    for n in g.nodes:
        members.setdefault(uf.find(str(n.id)), []).append(str(n.id))
    label = {v: (min(ms) if len(ms) > 1 else None) for ms in members.values() for v in ms}
    nodes = []
    for n in g.nodes:
        v = str(n.id)
        nodes.append(dataclasses.replace(
            n, colocation=label[v], memory=max(0.0, n.memory - minus_mem.get(v, 0.0)),
            compute={k: max(0.0, c - minus_time.get(v, 0.0)) for k, c in n.compute.items()}))
    memory = {v: max(0.0, m - minus_mem.get(v, 0.0)) for v, m in trace.memory.items()}
    note = "tied parameter(s) kept with one stage (users colocated, bytes counted once): " + ", ".join(tied)
    return dataclasses.replace(trace, graph=Graph(nodes, list(g.edges), g.defaults), memory=memory, tied={},
                               notes=(*trace.notes, note))


def partition_shared(trace: Any, devices: int, **options: Any) -> Any:
    """The better of :func:`stagecut.partition` on ``trace.graph`` (tied parameters replicated)
    and on :func:`colocate_tied` ``(trace).graph`` (kept with one stage); its notes say which.
    Its ``summary()`` gives the objective in seconds per traced batch (one run of the example
    inputs: ``stats["time_unit"]`` and ``stats["objective_name"]``), and a note says how to get
    seconds per sample. Without tied parameters, ``partition(trace.graph, ...)`` so labelled.

    Raises
    ------
    InvalidArgumentError
        As :func:`stagecut.partition`.
    """
    import dataclasses as dc

    from stagecut.throughput import partition

    units = ("a traced batch is one run of the example inputs: divide by its batch size for seconds per "
             "sample")
    labels = {"time_unit": "s", "objective_name": "time per traced batch"}  # what summary() prints

    def labelled(p: Any) -> Any:
        return dc.replace(p, notes=(*p.notes, units), stats={**p.stats, **labels})

    rep = labelled(partition(trace.graph, devices=devices, **options))
    if not trace.tied:
        return rep
    col = labelled(partition(colocate_tied(trace).graph, devices=devices, **options))
    names = ", ".join(trace.tied)

    def key(p: Any) -> float:
        return float("inf") if p.objective is None else float(p.objective)

    both_optimal = rep.status == "optimal" and col.status == "optimal"
    bounds = [p.lower_bound for p in (rep, col)]
    lower = min(b for b in bounds if b is not None) if all(b is not None for b in bounds) else None
    if key(col) < key(rep):
        best, note = col, (f"tied parameter(s) {names} kept with one stage: {key(col):.6g} against {key(rep):.6g} "
                           "replicated")
    else:
        best, note = rep, (f"tied parameter(s) {names} replicated (gradient all-reduce charged in training): "
                           f"{key(rep):.6g} against {key(col):.6g} kept with one stage")
    status = best.status if best.status != "optimal" or both_optimal else "feasible"
    lb = None if lower is None or best.objective is None else min(lower, float(best.objective))
    return dc.replace(best, status=status, lower_bound=lb, notes=(*best.notes, note),
                      stats={**best.stats, "tied": "colocated" if best is col else "replicated",
                             "tied_other_objective": key(rep if best is col else col)})
