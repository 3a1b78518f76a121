//! Piper, the training planner (Tarnawski, Narayanan, Phanishayee, "Piper: Multidimensional
//! Planner for DNN Parallelization", NeurIPS 2021).
//!
//! A plan splits the layer DAG into a sequence of stages (each stage is `I \ J` for two upsets
//! `J ⊂ I`: a contiguous set), and gives each stage a data-parallel degree `d` (dividing the
//! number of microbatches `N`), a tensor-parallel degree `t`, and one TMPC per node. The stage
//! runs on `t * d` devices; its time per sample is
//!
//! ```text
//!   TPS = compute / d + (edges / d + 4 (d - 1) / d * params / N) / B
//! ```
//!
//! where `compute` sums the chosen TMPCs' times, `edges` sums `2 (c(u,v) + sync)` over the edges
//! that cross the stage boundary (the sync part of the TMPC on the stage side), `params` sums the
//! TMPCs' parameter sizes, and `B` is the bandwidth. Its memory per device is
//! `sum(a) * ceil(s / d) + sum(b)` where `s` sums the data-parallel degrees of this and all later
//! stages. The objective is the largest stage TPS, subject to `sum t d <= K`, `sum d <= N` (or
//! `= N`), and memory `<= M` on every device.
//!
//! The DP (Section 4 of the paper) runs over upsets (suffixes of the pipeline): `dp[I][k][s]` is
//! the best max-TPS for the upset `I` on at most `k` devices with the sum of data-parallel degrees
//! at most `s` (exactly `s` in exact-batch mode). Sub-upsets `J` of `I` are visited by the
//! canonical descent of [`Ideals`](crate::ideals::Ideals); the stage `I \ J` grows one node at a time, its sums are kept
//! incrementally (recomputed from the parent state along the canonical path, so every value is a
//! function of the stage alone, whatever the traversal or thread split), and the per-stage
//! knapsack (one TMPC per node under the memory limit) is solved lazily, only for the `(t, d, y)`
//! that the combine step asks for.

//!
//! Modules: `model` (the validated problem and its per-node summaries), [`knapsack`] (the
//! per-stage TMPC choice), `table` (sparse DP tables), `work` (the canonical descent with the
//! incremental stage sums), `dp` (the DP over upsets, [`plan`]) and `reconstruct` (the plan
//! behind the optimum). Python: `stagecut.training` (`_core.piper_plan`).

mod dp;
pub mod knapsack;
mod model;
mod reconstruct;
mod table;
mod work;

pub use dp::{plan, plan_with};
pub use knapsack::{knapsack_exact, knapsack_greedy};

use crate::error::CoreError;

/// How the per-stage TMPC choice (a multiple-choice knapsack) is solved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knapsack {
    /// The paper's bang-per-buck greedy (the authors' fast heuristic), with the incremental fast
    /// path where it applies.
    Heuristic,
    /// The same greedy, always through the generic (from scratch) path. For cross-checks.
    GenericHeuristic,
    /// Exact branch and bound for stages of at most `max_nodes` nodes, the greedy above that.
    Exact { max_nodes: usize },
}

/// One TMPC (tensor-parallel execution configuration) of a node for a degree `t`.
#[derive(Debug, Clone)]
pub struct Tmpc {
    pub node: usize,
    /// Tensor-parallel degree (the TMPC runs on `t` devices).
    pub t: u32,
    /// Compute time per sample.
    pub time: f64,
    /// Parameter bytes (all-reduced across data-parallel replicas).
    pub param: f64,
    /// Memory per device: `a` per sample in flight plus `b`.
    pub a: f64,
    pub b: f64,
    /// Sync bytes per incoming edge of `node`, in the order of the problem's edge list.
    pub sfw: Vec<f64>,
    /// Sync bytes per outgoing edge of `node`, in the order of the problem's edge list.
    pub sbw: Vec<f64>,
}

/// A Piper problem over nodes `0..n` (validated by [`plan`]).
#[derive(Debug, Clone)]
pub struct Problem {
    pub n: usize,
    /// `(source, target, communication bytes)`.
    pub edges: Vec<(u32, u32, f64)>,
    pub tmpcs: Vec<Tmpc>,
    /// Devices `K`.
    pub devices: usize,
    /// Memory per device `M`.
    pub memory: f64,
    /// Bandwidth `B` (bytes per time unit).
    pub bandwidth: f64,
    /// Microbatches per batch `N`; data-parallel degrees divide it.
    pub batch: usize,
    /// The data-parallel degrees sum to exactly `N` (else at most `N`).
    pub exact_batch: bool,
    /// Allow data parallelism (`d > 1`).
    pub allow_dp: bool,
    pub knapsack: Knapsack,
    /// Refuse (`TooManyIdeals`) a DAG with more upsets than this.
    pub max_ideals: usize,
    /// Two-level network: `(devices per server g, intra-server bandwidth)`. Tensor parallelism
    /// stays inside a server (t divides g), the t-way sync bytes move at the intra-server
    /// bandwidth, and so does a stage's data-parallel all-reduce when its `t * d` devices fit in
    /// one server (`t * d <= g`); everything else uses `bandwidth`.
    pub server: Option<(usize, f64)>,
}

/// One stage of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct StageOut {
    /// The stage's nodes, ascending.
    pub nodes: Vec<usize>,
    /// Tensor-parallel degree.
    pub t: u32,
    /// Data-parallel degree (divides the batch).
    pub d: u32,
    /// Chosen TMPC (index into `Problem::tmpcs`) for each node of `nodes`.
    pub tmpcs: Vec<usize>,
    /// The stage's TPS as the DP computed it.
    pub tps: f64,
}

/// The result of [`plan`].
#[derive(Debug, Clone)]
pub struct PlanOut {
    /// Best time per sample; `INFINITY` when no plan fits in memory.
    pub objective: f64,
    /// Stages in pipeline order (first stage holds the sources).
    pub stages: Vec<StageOut>,
    /// `table[k * cols + s]`: best TPS on at most `k` devices with sum of d at most `s`
    /// (exactly `s` in exact-batch mode); `cols = min(N, K) + 1`.
    pub table: Vec<f64>,
    pub cols: usize,
    /// Upsets of the DAG.
    pub num_ideals: usize,
    /// Pairs `(I, J)` whose stage was usable for some degree.
    pub pairs_visited: u64,
}

/// An [`CoreError::InvalidInput`] about the problem.
fn bad(msg: String) -> CoreError {
    CoreError::InvalidInput(msg)
}
