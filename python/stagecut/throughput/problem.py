"""The throughput problem: a graph, its device counts and memory limit, validated once.

Every throughput solver (:func:`~stagecut.throughput.partition`,
:func:`~stagecut.throughput.partition_ip`) takes a :class:`ThroughputProblem` or a graph plus
settings, from which it builds one with :meth:`ThroughputProblem.from_graph`. Settings left out
come from the graph's defaults (a workload file's ``maxFPGAs``, ``maxCPUs``,
``maxSizePerFPGA``), and the problem says so in :attr:`ThroughputProblem.notes`.

Graph hygiene (exact): :func:`set_aside_free_nodes` removes isolated nodes that cost nothing
and hold no memory, which otherwise double the ideals each; the solvers put them back into the
first stage of their answer.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

from stagecut.errors import InvalidArgumentError, InvalidGraphError, StagecutError, user_stacklevel
from stagecut.graph import ACCELERATOR, CPU, Graph, NodeId
from stagecut.graph_check import check_graph
from stagecut.validate import check_int, check_number

__all__ = ["ThroughputProblem", "resolve_problem", "set_aside_free_nodes"]

#: graph.defaults key -> (the workload file's field, the fallback when absent)
_FILE_FIELDS: dict[str, tuple[str, str, float]] = {
    "devices": ("accelerators", "maxFPGAs", 1),
    "cpus": ("cpus", "maxCPUs", 0),
    "memory": ("memory", "maxSizePerFPGA", math.inf),
}


def _check(name: str, value: Any, error: type[StagecutError]) -> int | float:
    if name == "memory":
        return check_number(value, "memory", allow_inf=True, error=error)
    return check_int(value, name, minimum=0, error=error)


@dataclass(frozen=True)
class ThroughputProblem:
    """A pipeline throughput instance (Tarnawski et al., NeurIPS 2020, Table 1).

    Split ``graph`` into stages on at most ``devices`` accelerators and ``cpus`` CPUs, each
    accelerator holding at most ``memory`` (the unit of the nodes' memory, typically bytes;
    ``inf``: no limit), minimizing the largest device load (in the unit of the nodes' times).

    Attributes
    ----------
    graph : Graph
    devices : int
        The number of accelerators.
    cpus : int
    memory : float
    notes : tuple of str
        The settings taken from the graph's defaults (``"cpus=1 from the file's maxCPUs"``);
        not compared.

    Raises
    ------
    InvalidArgumentError
        A count that is not a non-negative integer, a memory that is NaN or negative, no
        device at all, or a ``graph`` that is not a :class:`~stagecut.graph.Graph`.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([1.0, 2.0], defaults={"accelerators": 4, "cpus": 1, "memory": 8e9})
    >>> p = ThroughputProblem.from_graph(g, devices=2)
    >>> p.devices, p.cpus, p.memory
    (2, 1, 8000000000.0)
    >>> p.notes
    ("cpus=1 from the file's maxCPUs", "memory=8e+09 from the file's maxSizePerFPGA")
    """

    graph: Graph
    devices: int
    cpus: int
    memory: float
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        check_graph(self.graph)
        for name in ("devices", "cpus", "memory"):
            object.__setattr__(self, name, _check(name, getattr(self, name), InvalidArgumentError))
        if self.devices + self.cpus == 0:
            raise InvalidArgumentError("no devices: devices + cpus must be at least 1")

    @classmethod
    def from_graph(cls, graph: Graph, devices: int | None = None, cpus: int | None = None,
                   memory: float | None = None) -> ThroughputProblem:
        """The problem with the given settings, the others from ``graph.defaults``.

        Parameters
        ----------
        graph : Graph
        devices, cpus : int, optional
            Accelerator and CPU counts; default the graph's (a workload file's ``maxFPGAs`` /
            ``maxCPUs``), else 1 accelerator and 0 CPUs.
        memory : float, optional
            Memory per accelerator, in the unit of the nodes' memory (typically bytes); default
            the graph's (``maxSizePerFPGA``), else unlimited.

        Returns
        -------
        ThroughputProblem

        Raises
        ------
        InvalidArgumentError
            A bad argument (see the class).
        InvalidGraphError
            A bad default carried by the graph (a negative ``maxCPUs``...).
        """
        check_graph(graph)
        given: dict[str, Any] = {"devices": devices, "cpus": cpus, "memory": memory}
        notes = []
        for name, (key, file_field, fallback) in _FILE_FIELDS.items():
            if given[name] is not None:
                continue
            if key in graph.defaults:
                given[name] = _check(name, graph.defaults[key], InvalidGraphError)
                notes.append(f"{name}={given[name]:g} from the file's {file_field}")
            else:
                given[name] = fallback
        return cls(graph, given["devices"], given["cpus"], given["memory"], tuple(notes))

    @property
    def kinds(self) -> tuple[str, ...]:
        """The device kinds with at least one device."""
        return tuple(k for k, n in ((ACCELERATOR, self.devices), (CPU, self.cpus)) if n)


def resolve_problem(graph: Graph | ThroughputProblem, devices: int | None, cpus: int | None,
                    memory: float | None, accelerators: int | None, caller: str) -> ThroughputProblem:
    """The problem a solver was called with: ``graph`` itself, or built from the settings.

    ``accelerators`` is the deprecated spelling of ``devices`` (a :class:`DeprecationWarning`).

    Raises
    ------
    InvalidArgumentError
        Settings given with a :class:`ThroughputProblem`, both ``devices`` and ``accelerators``,
        or a bad setting.
    InvalidGraphError
        A bad default carried by the graph.
    """
    if accelerators is not None:
        warnings.warn(f"{caller}(accelerators=...) is deprecated and will be removed in the next release; "
                      "use devices=...", DeprecationWarning, stacklevel=user_stacklevel())
        if devices is not None:
            raise InvalidArgumentError("give devices=, not both devices= and the deprecated accelerators=")
        devices = accelerators
    if isinstance(graph, ThroughputProblem):
        if devices is not None or cpus is not None or memory is not None:
            raise InvalidArgumentError(
                "devices, cpus and memory are set by the ThroughputProblem; pass its graph to change them"
            )
        return graph
    return ThroughputProblem.from_graph(graph, devices, cpus, memory)


def _free_isolated(problem: ThroughputProblem) -> list[int]:
    """Positions of isolated nodes with no memory, no compute time on any kind in use, that
    every kind in use can run, and no colocation class shared with another node."""
    g = problem.graph
    classes: dict[NodeId, int] = {}
    for nd in g.nodes:
        if nd.colocation is not None:
            classes[nd.colocation] = classes.get(nd.colocation, 0) + 1
    return [i for i, nd in enumerate(g.nodes)
            if not g.succ[i] and not g.pred[i] and nd.memory == 0
            and (nd.colocation is None or classes[nd.colocation] == 1)
            and all(nd.supports(k) and nd.time(k) == 0 for k in problem.kinds)]


def set_aside_free_nodes(problem: ThroughputProblem) -> tuple[ThroughputProblem, tuple[NodeId, ...]]:
    """The problem without its free isolated nodes, and their ids.

    A node without edges, memory or compute time on any kind in use, that every kind in use
    can run (and that shares no colocation class), changes no load wherever it goes: any split
    of the rest, with these nodes added to any stage, costs the same. Setting them aside is
    therefore exact, and it divides the number of ideals by 2 per node (a ``torch.export``
    graph's ``num_batches_tracked`` buffers, for instance). At least one node is kept.

    Parameters
    ----------
    problem : ThroughputProblem

    Returns
    -------
    (ThroughputProblem, tuple of node ids)
        ``problem`` itself when nothing is set aside.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.graph import Node
    >>> chain = sc.Graph.chain([1.0, 2.0, 3.0])
    >>> g = sc.Graph(list(chain.nodes) + [Node(id="buf", compute={"accelerator": 0.0})], chain.edges)
    >>> core, aside = set_aside_free_nodes(ThroughputProblem.from_graph(g, devices=2))
    >>> len(core.graph), aside
    (3, ('buf',))
    """
    free = _free_isolated(problem)
    if len(free) == len(problem.graph):
        free = free[1:]
    if not free:
        return problem, ()
    g = problem.graph
    drop = set(free)
    core = Graph([nd for i, nd in enumerate(g.nodes) if i not in drop], g.edges, g.defaults)
    reduced = ThroughputProblem(core, problem.devices, problem.cpus, problem.memory, problem.notes)
    return reduced, tuple(g.nodes[i].id for i in free)
