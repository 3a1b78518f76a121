# Hand-written stubs of the private native module (rust/bindings). Not public API: use the
# Python wrappers (stagecut.partition, stagecut.slice_graph, stagecut.plan_training).
# The result dicts are TypedDicts with the exact keys the bindings set; their names start with
# an underscore because they exist only here (not at runtime).
from collections.abc import Callable
from typing import TypedDict, final

import numpy as np
import numpy.typing as npt

from stagecut.errors import StagecutError

__all__ = [
    "__version__",
    "DeadlineReached",
    "count_ideals",
    "set_progress_hook",
    "max_load_dp",
    "MtppInstance",
    "mtpp_slice",
    "mtpp_exact",
    "mtpp_segment_io",
    "BlockSearch",
    "BlockLocal",
    "piper_plan",
    "LatencyEvaluator",
]

__version__: str

class DeadlineReached(StagecutError):
    """The time limit passed before the call had an answer (the wrappers report status 'time_limit')."""

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]

class _MaxLoadResult(TypedDict):
    objective: float
    """Optimal max load; inf when no split fits."""
    blocks: list[tuple[bool, list[int]]]
    """(on an accelerator?, unit indices) per block, in pipeline order."""
    ideals: int
    pairs: int
    """Ideal pairs whose block cost was evaluated."""

class _MtppSliceResult(TypedDict):
    objective: float
    order: list[int]
    """The topological order of the units that was split."""
    blocks: list[list[int]]
    """Contiguous segments of ``order`` (unit indices), in pipeline order."""
    decodes: int
    history: list[float]
    """Best objective after each generation (or batch)."""
    rounds: int
    """Threshold rounds of the SliceGraph DP on the final order."""
    time_limit_reached: bool
    """The search stopped at ``time_limit``: its best so far (objective inf, no blocks: none)."""

class _MtppExactResult(TypedDict):
    objective: float
    blocks: list[list[int]]
    """Unit indices per block, in pipeline order (empty when infeasible)."""
    ideals: int

class _PiperStage(TypedDict):
    nodes: list[int]
    t: int
    d: int
    tmpcs: list[int]
    """Chosen TMPC (index into the TMPC arrays) for each node of ``nodes``."""
    tps: float

class _PiperPlanResult(TypedDict):
    objective: float
    stages: list[_PiperStage]
    cols: int
    table: _F64
    """Row-major (devices + 1) x cols table of the best time per sample."""
    num_ideals: int
    pairs_visited: int

@final
class BlockSearch:
    """The exact pricing of ``partition-lp`` at one ``T`` (``stagecut.mtpp.pricing``): per
    position (a forced group, in topological order) its work, parameters, node bitset and
    convexity rules (a node's ancestors, the positions its descendants bar); per producer its
    cost, position and consumer positions (distinct, ascending, not its own); the memory model;
    bitsets as 64-bit words."""

    def __new__(
        cls, t: float, work: list[float], params: list[float], gmask: list[list[int]],
        rules: list[list[tuple[list[int], list[int]]]], pcomm: list[float], ppos: list[int],
        cons: list[list[int]], hard: bool, slope: float, limit: float, nodes: int,
    ) -> BlockSearch: ...
    def solve(
        self, pv: list[float], time_limit: float | None = None, floor: float | None = None, nodes: int | None = None,
    ) -> tuple[float, list[int], bool, int]:
        """``(M, positions of the block found, searched to its end, nodes searched)``."""
    def local(self, desc: list[list[int]], anc: list[list[int]]) -> BlockLocal:
        """The tabu search on the same costs, with each position's reach and reachers (bitsets of
        positions, itself included)."""

@final
class BlockLocal:
    """The tabu search for heavy blocks at one ``T`` (``stagecut.mtpp.pricing``); made by
    :meth:`BlockSearch.local`."""

    def search(
        self, pv: list[float], starts: list[int], floor: float, moves: int, tenure: int, want: int, seed: int,
        time_limit: float | None = None,
    ) -> list[tuple[float, list[int]]]:
        """Blocks of weight at least ``floor`` as ``(weight, positions)``, the heaviest first."""

@final
class MtppInstance:
    """An MTPP instance, validated once: per-unit work and params, per-tensor cost, producer
    and consumers (CSR), and the memory model (``bandwidth=None``: memory is a hard limit)."""

    def __new__(
        cls, work: _F64, params: _F64, t_cost: _F64, t_prod: _I64, t_cons_off: _I64, t_cons: _I64,
        fast_memory: float, reserved: float, bandwidth: float | None,
    ) -> MtppInstance: ...
    @property
    def num_units(self) -> int: ...
    @property
    def num_tensors(self) -> int: ...

# hook(phase, done, total, best, last): total 0 = unknown, best NaN = none, last = the run's
# final report (stagecut.progress)
_Hook = Callable[[str, int, int, float, bool], object]

def set_progress_hook(hook: _Hook | None = None) -> _Hook | None: ...
def count_ideals(n: int, src: _I64, dst: _I64, max_ideals: int, time_limit: float | None = None) -> int: ...
def max_load_dp(
    acc_time: _F64, cpu_time: _F64, size: _F64, comm: _F64, acc_ok: _B, cpu_ok: _B,
    edge_src: _I64, edge_dst: _I64, n_units: int, unit_src: _I64, unit_dst: _I64,
    members_off: _I64, members: _I64, accelerators: int, cpus: int, acc_memory: float,
    cpu_memory: float, max_ideals: int, prune: bool = True, upper_bound: float | None = None,
    time_limit: float | None = None,
) -> _MaxLoadResult: ...
def mtpp_exact(
    instance: MtppInstance, stages: int, max_ideals: int, prune: bool = True, upper_bound: float | None = None,
    time_limit: float | None = None,
) -> _MtppExactResult: ...
def mtpp_segment_io(instance: MtppInstance, order: _I64, builder: str = "fenwick") -> _F64: ...
def mtpp_slice(
    instance: MtppInstance, stages: int, method: str, seed: int = 0, population: int = 100,
    generations: int = 100, elite: float = 0.2, mutant: float = 0.1, rho: float = 0.7,
    max_decodes: int | None = None, samples: int = 1000, islands: int = 1, order: _I64 | None = None,
    priorities: _F64 | None = None, segment_costs: str = "scan", time_limit: float | None = None,
) -> _MtppSliceResult: ...
def piper_plan(
    n: int, edge_src: _I64, edge_dst: _I64, edge_comm: _F64, tm_node: _I64, tm_t: _I64,
    tm_time: _F64, tm_param: _F64, tm_a: _F64, tm_b: _F64, sfw_off: _I64, sfw: _F64,
    sbw_off: _I64, sbw: _F64, devices: int, memory: float, bandwidth: float, batch: int,
    exact_batch: bool, allow_dp: bool, knapsack: str, exact_max_nodes: int, max_ideals: int,
    server_size: int | None = None, intra_bandwidth: float | None = None, time_limit: float | None = None,
) -> _PiperPlanResult: ...

# -- latency evaluator (stagecut.latency.model._fast)
@final
class LatencyEvaluator:
    """A latency problem prepared once (times (n, D), sizes, bandwidths (D, D), parallel flags,
    edges, names for messages) and the buffers to re-evaluate placements without allocating."""

    def __new__(
        cls, times: _F64, size: _F64, bandwidth: _F64, parallel: _B, edge_src: _I64, edge_dst: _I64,
        node_names: list[str], device_names: list[str],
    ) -> LatencyEvaluator: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_devices(self) -> int: ...
    def makespan(self, dev: _I64, order: _I64 | None = None, offsets: _I64 | None = None) -> float: ...
    def times(self, dev: _I64, order: _I64 | None = None, offsets: _I64 | None = None) -> tuple[_F64, _F64]: ...
    def rank_round_robin(self, dev: _I64) -> list[list[int]]: ...
    def makespans(self, devs: npt.NDArray[np.int64], orders: npt.NDArray[np.int64] | None = None) -> _F64: ...
