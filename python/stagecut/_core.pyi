# Hand-written stubs of the private native module (rust/bindings). Not public API: use the
# Python wrappers (stagecut.partition, stagecut.slice_graph, stagecut.plan_training).
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

__version__: str

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

def max_load_dp(
    acc_time: F64, cpu_time: F64, size: F64, comm: F64, acc_ok: B, cpu_ok: B,
    edge_src: I64, edge_dst: I64, n_units: int, unit_src: I64, unit_dst: I64,
    members_off: I64, members: I64, accelerators: int, cpus: int, acc_memory: float,
    cpu_memory: float, max_ideals: int, prune: bool = True, upper_bound: Optional[float] = None,
) -> dict[str, Any]: ...
def count_ideals(n: int, src: I64, dst: I64, max_ideals: int) -> int: ...
def mtpp_exact(
    work: F64, params: F64, t_cost: F64, t_prod: I64, t_cons_off: I64, t_cons: I64,
    fast_memory: float, reserved: float, bandwidth: Optional[float], stages: int,
    max_ideals: int, prune: bool = True, upper_bound: Optional[float] = None,
) -> dict[str, Any]: ...
def mtpp_segment_io(
    work: F64, params: F64, t_cost: F64, t_prod: I64, t_cons_off: I64, t_cons: I64,
    order: I64, builder: str = "fenwick",
) -> F64: ...
def mtpp_slice(
    work: F64, params: F64, t_cost: F64, t_prod: I64, t_cons_off: I64, t_cons: I64,
    fast_memory: float, reserved: float, bandwidth: Optional[float], stages: int, method: str,
    seed: int = 0, population: int = 100, generations: int = 100, elite: float = 0.2,
    mutant: float = 0.1, rho: float = 0.7, max_decodes: Optional[int] = None, samples: int = 1000,
    islands: int = 1, order: Optional[I64] = None, priorities: Optional[F64] = None,
    segment_costs: str = "scan",
) -> dict[str, Any]: ...
def piper_plan(
    n: int, edge_src: I64, edge_dst: I64, edge_comm: F64, tm_node: I64, tm_t: I64, tm_time: F64,
    tm_param: F64, tm_a: F64, tm_b: F64, sfw_off: I64, sfw: F64, sbw_off: I64, sbw: F64,
    devices: int, memory: float, bandwidth: float, batch: int, exact_batch: bool, allow_dp: bool,
    knapsack: str, exact_max_nodes: int, max_ideals: int, server_size: Optional[int] = None,
    intra_bandwidth: Optional[float] = None,
) -> dict[str, Any]: ...
