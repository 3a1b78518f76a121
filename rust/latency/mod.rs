//! The latency planner's hot evaluator: the ASAP schedule of one request of a DAG placed on
//! heterogeneous devices (see `stagecut.latency.model.evaluate`, the Python reference it must equal).
//!
//! A [`Problem`] is the graph on its devices, validated and laid out once: predecessors and
//! successors in CSR form, `times` as a flat `n * D` array (row `i`: node `i`'s time on each
//! device; `inf`: it cannot run there), output sizes, the `D * D` bandwidth matrix and the
//! devices with unbounded parallelism. A [`Workspace`] holds every buffer one evaluation needs,
//! so re-evaluating a placement allocates nothing. The timing rule and the orders live in
//! [`asap`] and `rrr`, the parallel evaluation of many placements in [`batch`].
//!
//! The model: node `i` on device `dev[i]` runs for `times[i, dev[i]]`; it starts when the node
//! before it in its device's order has finished (never waits on a parallel device) and every
//! predecessor `u`'s output has arrived: `finish[u]`, plus `size[u] / bandwidth[dev[u], dev[i]]`
//! when `u` ran on another device.

pub mod asap;
pub mod batch;
mod maxset;
mod rrr;

pub use asap::{Order, Workspace};
pub use batch::makespans;

use crate::dag::Dag;
use crate::error::{CoreError, CoreResult};

/// "No node" in the `u32` node arrays.
pub(crate) const NONE: u32 = u32::MAX;

/// A graph on devices, validated (see the module docs). Immutable; share it between threads.
#[derive(Debug, Clone)]
pub struct Problem {
    n: usize,
    nd: usize,
    pred_off: Vec<u32>,
    pred: Vec<u32>,
    succ_off: Vec<u32>,
    succ: Vec<u32>,
    /// A topological order of the nodes (for the ranks).
    topo: Vec<u32>,
    times: Vec<f64>,
    size: Vec<f64>,
    bandwidth: Vec<f64>,
    parallel: Vec<bool>,
    /// `tr[(u * D + a) * D + b]`: the transfer times, precomputed (no division in the sweeps)
    /// when there are at most [`MAX_TRANSFER_TABLE`] of them; empty otherwise.
    tr: Vec<f64>,
    node_names: Vec<String>,
    device_names: Vec<String>,
}

/// The largest transfer table [`Problem`] precomputes (32 MiB of `f64`).
pub const MAX_TRANSFER_TABLE: usize = 1 << 22;

/// The arrays a [`Problem`] is built from (see [`Problem::new`]).
#[derive(Debug, Clone, Default)]
pub struct ProblemData {
    /// Number of nodes.
    pub n: usize,
    /// Edges `(u, v)` between node positions.
    pub edges: Vec<(u32, u32)>,
    /// `n * D` times, row-major (`inf`: cannot run there).
    pub times: Vec<f64>,
    /// Output size of each node (in the bandwidths' unit).
    pub size: Vec<f64>,
    /// `D * D` bandwidths, row-major; the diagonal is ignored.
    pub bandwidth: Vec<f64>,
    /// Per device: unbounded parallelism.
    pub parallel: Vec<bool>,
    /// How errors name each node (empty: `node <position>`).
    pub node_names: Vec<String>,
    /// How errors name each device (empty: `device <position>`).
    pub device_names: Vec<String>,
}

fn bad(msg: String) -> CoreError {
    CoreError::InvalidInput(msg)
}

impl Problem {
    /// Validate `data` and lay it out. The device count `D` is `parallel.len()`.
    ///
    /// Errors (`InvalidInput`): no device; arrays of the wrong length; a time that is NaN or
    /// negative; a size that is not finite and non-negative; a bandwidth between two distinct
    /// devices that is NaN, zero or negative (`inf` is a free link); bad edges or a cycle
    /// (`Cycle`); more nodes than `u32` ids.
    pub fn new(data: ProblemData) -> CoreResult<Problem> {
        let ProblemData {
            n,
            edges,
            times,
            size,
            bandwidth,
            parallel,
            node_names,
            device_names,
        } = data;
        let nd = parallel.len();
        if nd == 0 {
            return Err(bad("devices: at least one device is needed".into()));
        }
        if n >= NONE as usize {
            return Err(bad(format!(
                "{n} nodes: at most {} are supported",
                NONE - 1
            )));
        }
        if times.len() != n.saturating_mul(nd) {
            return Err(bad(format!(
                "times: expected {n} x {nd} values, got {}",
                times.len()
            )));
        }
        if let Some(k) = times.iter().position(|t| t.is_nan() || *t < 0.0) {
            return Err(bad(format!(
                "times[{}, {}] = {} is not a non-negative number (inf: cannot run there)",
                k / nd,
                k % nd,
                times[k]
            )));
        }
        crate::numeric::check_values("size", &size, n)?;
        if bandwidth.len() != nd * nd {
            return Err(bad(format!(
                "bandwidth: expected {nd} x {nd} values, got {}",
                bandwidth.len()
            )));
        }
        for a in 0..nd {
            for b in (0..nd).filter(|&b| b != a) {
                let x = bandwidth[a * nd + b];
                if x.is_nan() || x <= 0.0 {
                    return Err(bad(format!(
                        "bandwidth[{a}, {b}] = {x} is not a positive number"
                    )));
                }
            }
        }
        if !node_names.is_empty() && node_names.len() != n {
            return Err(bad(format!(
                "node_names: expected {n} names, got {}",
                node_names.len()
            )));
        }
        if !device_names.is_empty() && device_names.len() != nd {
            return Err(bad(format!(
                "device_names: expected {nd} names, got {}",
                device_names.len()
            )));
        }
        let dag = Dag::from_edges(n, &edges)?;
        if dag.num_edges() >= NONE as usize {
            return Err(bad("too many edges".into()));
        }
        let topo = dag.topo_order()?.into_iter().map(|v| v as u32).collect();
        let (pred_off, pred) = flatten(n, |v| dag.preds(v));
        let (succ_off, succ) = flatten(n, |v| dag.succs(v));
        let mut tr = Vec::new();
        if n.saturating_mul(nd * nd) <= MAX_TRANSFER_TABLE {
            tr.reserve_exact(n * nd * nd);
            for &s in &size {
                for a in 0..nd {
                    for b in 0..nd {
                        tr.push(if a == b {
                            0.0
                        } else {
                            s / bandwidth[a * nd + b]
                        });
                    }
                }
            }
        }
        Ok(Problem {
            n,
            nd,
            pred_off,
            pred,
            succ_off,
            succ,
            topo,
            times,
            size,
            bandwidth,
            parallel,
            tr,
            node_names,
            device_names,
        })
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.n
    }

    /// No nodes.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Number of devices.
    pub fn num_devices(&self) -> usize {
        self.nd
    }

    /// Number of (distinct) edges.
    pub fn num_edges(&self) -> usize {
        self.succ.len()
    }

    #[inline]
    pub(crate) fn preds(&self, v: usize) -> &[u32] {
        &self.pred[self.pred_off[v] as usize..self.pred_off[v + 1] as usize]
    }

    #[inline]
    pub(crate) fn succs(&self, v: usize) -> &[u32] {
        &self.succ[self.succ_off[v] as usize..self.succ_off[v + 1] as usize]
    }

    /// Node `i`'s time on device `d`.
    #[inline]
    pub fn time(&self, i: usize, d: usize) -> f64 {
        self.times[i * self.nd + d]
    }

    /// Time to move node `u`'s output from device `a` to device `b` (0 when `a == b`); the
    /// reference's `size[u] / bandwidth[a, b]`, so the two agree bit for bit.
    #[inline]
    pub fn transfer(&self, u: usize, a: usize, b: usize) -> f64 {
        if !self.tr.is_empty() {
            self.tr[(u * self.nd + a) * self.nd + b]
        } else if a == b {
            0.0
        } else {
            self.size[u] / self.bandwidth[a * self.nd + b]
        }
    }

    /// Is the transfer table there (see [`MAX_TRANSFER_TABLE`])?
    #[inline]
    pub(crate) fn has_table(&self) -> bool {
        !self.tr.is_empty()
    }

    /// Where the transfers of node `u`'s output from device `a` start in the table: the
    /// transfer to device `b` is `table(row + b)`.
    #[inline]
    pub(crate) fn table_row(&self, u: usize, a: usize) -> usize {
        (u * self.nd + a) * self.nd
    }

    /// Entry `k` of the transfer table.
    #[inline]
    pub(crate) fn table(&self, k: usize) -> f64 {
        self.tr[k]
    }

    /// Does device `d` run any number of nodes at once?
    #[inline]
    pub fn is_parallel(&self, d: usize) -> bool {
        self.parallel[d]
    }

    pub(crate) fn topo(&self) -> &[u32] {
        &self.topo
    }

    /// The error of a bad placement of the right length: the first node on a device out of range,
    /// else the first on a device that cannot run it (the reference's order of checks).
    #[cold]
    pub(crate) fn placement_error(&self, dev: &[i64]) -> CoreError {
        let nd = self.num_devices();
        let out = |d: i64| d < 0 || d as u64 >= nd as u64;
        if let Some(i) = dev.iter().position(|&d| out(d)) {
            return CoreError::InvalidArgument(format!(
                "placement: node {} is on device {}, but there are {nd} devices",
                self.node_name(i),
                dev[i]
            ));
        }
        match (0..dev.len()).find(|&i| !self.time(i, dev[i] as usize).is_finite()) {
            Some(i) => CoreError::InvalidArgument(format!(
                "placement: node {} cannot run on {}",
                self.node_name(i),
                self.device_name(dev[i] as usize)
            )),
            None => CoreError::Internal("a placement refused without a reason".into()),
        }
    }

    /// How error messages name node `i`.
    pub fn node_name(&self, i: usize) -> String {
        self.node_names
            .get(i)
            .cloned()
            .unwrap_or_else(|| i.to_string())
    }

    /// How error messages name device `d`.
    pub fn device_name(&self, d: usize) -> String {
        self.device_names
            .get(d)
            .cloned()
            .unwrap_or_else(|| format!("device {d}"))
    }
}

/// One CSR row per node, with `u32` offsets (the edge count was checked to fit).
fn flatten<'a>(n: usize, row: impl Fn(usize) -> &'a [u32]) -> (Vec<u32>, Vec<u32>) {
    let mut off = Vec::with_capacity(n + 1);
    let mut flat = Vec::new();
    off.push(0);
    for v in 0..n {
        flat.extend_from_slice(row(v));
        off.push(flat.len() as u32);
    }
    (off, flat)
}
