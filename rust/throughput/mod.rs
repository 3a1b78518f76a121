//! Throughput with the max-load objective: the exact pipeline DP of Tarnawski, Phanishayee,
//! Devanur, Mahajan and Nina Paravecino, "Efficient algorithms for device placement of DNN
//! graph operators" (NeurIPS 2020, Section 5.1.1 and Table 1).
//!
//! The DP itself is generic ([`crate::ideal_dp`]); this module holds its cost model,
//! [`MaxLoadCost`]: accelerator blocks pay compute plus boundary communication under a memory
//! limit, CPU blocks pay compute only. Python: `stagecut.throughput` (`_core.max_load_dp`).

pub mod max_load;

pub use max_load::{MaxLoadCost, MaxLoadState, OriginalNodes};
