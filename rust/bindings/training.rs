//! Bindings for the Piper training planner: `_core.piper_plan`. See `stagecut.training`.

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::{owned, run};
use crate::error::{CoreError, CoreResult};
use crate::training::{plan_with, Knapsack, PlanOut, Problem, Tmpc};

fn bad(msg: String) -> CoreError {
    CoreError::InvalidInput(msg)
}

/// The edge list `(source, target, communication bytes)`, endpoints checked against `0..n`.
fn read_edges(n: usize, es: &[i64], ed: &[i64], ec: &[f64]) -> CoreResult<Vec<(u32, u32, f64)>> {
    if es.len() != ed.len() || es.len() != ec.len() {
        return Err(bad("edge arrays differ in length".into()));
    }
    let mut edges = Vec::with_capacity(es.len());
    for i in 0..es.len() {
        let (a, b) = (es[i], ed[i]);
        if a < 0
            || b < 0
            || a as u64 >= n as u64
            || b as u64 >= n as u64
            || a > u32::MAX as i64
            || b > u32::MAX as i64
        {
            return Err(bad(format!(
                "edge {i} ({a} -> {b}) has an endpoint outside 0..{n}"
            )));
        }
        edges.push((a as u32, b as u32, ec[i]));
    }
    Ok(edges)
}

/// The TMPC arrays as read from Python: one entry per TMPC, sync arrays in CSR form.
struct TmpcArrays {
    node: Vec<i64>,
    t: Vec<i64>,
    time: Vec<f64>,
    param: Vec<f64>,
    a: Vec<f64>,
    b: Vec<f64>,
    sfw_off: Vec<i64>,
    sfw: Vec<f64>,
    sbw_off: Vec<i64>,
    sbw: Vec<f64>,
}

/// `vals[off[i]..off[i + 1]]`, or `None` if the offsets are not a valid range.
fn csr_row(off: &[i64], vals: &[f64], i: usize) -> Option<Vec<f64>> {
    let (s, e) = (off[i], off[i + 1]);
    if s < 0 || e < s || e as u64 > vals.len() as u64 {
        return None;
    }
    Some(vals[s as usize..e as usize].to_vec())
}

impl TmpcArrays {
    /// Check the lengths, the node indices (`< n`) and degrees, and the sync offsets.
    fn into_tmpcs(self, n: usize) -> CoreResult<Vec<Tmpc>> {
        let m = self.node.len();
        if [
            self.t.len(),
            self.time.len(),
            self.param.len(),
            self.a.len(),
            self.b.len(),
        ]
        .iter()
        .any(|&l| l != m)
            || self.sfw_off.len() != m + 1
            || self.sbw_off.len() != m + 1
        {
            return Err(bad("TMPC arrays differ in length".into()));
        }
        let mut tmpcs = Vec::with_capacity(m);
        for i in 0..m {
            let (node, t) = (self.node[i], self.t[i]);
            if node < 0 || node as u64 >= n as u64 || t < 1 || t > u32::MAX as i64 {
                return Err(bad(format!(
                    "TMPC {i}: bad node {node} or tensor-parallel degree {t}"
                )));
            }
            let (Some(sfw), Some(sbw)) = (
                csr_row(&self.sfw_off, &self.sfw, i),
                csr_row(&self.sbw_off, &self.sbw, i),
            ) else {
                return Err(bad(format!("TMPC {i}: bad sync offsets")));
            };
            tmpcs.push(Tmpc {
                node: node as usize,
                t: t as u32,
                time: self.time[i],
                param: self.param[i],
                a: self.a[i],
                b: self.b[i],
                sfw,
                sbw,
            });
        }
        Ok(tmpcs)
    }
}

fn parse_knapsack(knapsack: &str, exact_max_nodes: usize) -> CoreResult<Knapsack> {
    match knapsack {
        "heuristic" => Ok(Knapsack::Heuristic),
        "generic" => Ok(Knapsack::GenericHeuristic),
        "exact" => Ok(Knapsack::Exact {
            max_nodes: exact_max_nodes,
        }),
        other => Err(CoreError::InvalidArgument(format!(
            "unknown knapsack mode {other:?}"
        ))),
    }
}

fn plan_dict<'py>(py: Python<'py>, res: PlanOut) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("objective", res.objective)?;
    let stages = PyList::empty(py);
    for s in res.stages {
        let d = PyDict::new(py);
        d.set_item("nodes", s.nodes)?;
        d.set_item("t", s.t)?;
        d.set_item("d", s.d)?;
        d.set_item("tmpcs", s.tmpcs)?;
        d.set_item("tps", s.tps)?;
        stages.append(d)?;
    }
    out.set_item("stages", stages)?;
    out.set_item("cols", res.cols)?;
    out.set_item("table", res.table.into_pyarray(py))?;
    out.set_item("num_ideals", res.num_ideals)?;
    out.set_item("pairs_visited", res.pairs_visited)?;
    Ok(out)
}

/// Piper DP. TMPC `i` has sync arrays `sfw[sfw_off[i]..sfw_off[i+1]]` (one per incoming edge of
/// its node, in edge order) and likewise `sbw`. See `stagecut.training.plan_training`. Past
/// `time_limit` seconds the call raises `DeadlineReached`.
#[pyfunction]
#[pyo3(signature = (n, edge_src, edge_dst, edge_comm, tm_node, tm_t, tm_time, tm_param, tm_a, tm_b,
                    sfw_off, sfw, sbw_off, sbw, devices, memory, bandwidth, batch,
                    exact_batch, allow_dp, knapsack, exact_max_nodes, max_ideals,
                    server_size=None, intra_bandwidth=None, time_limit=None))]
#[allow(clippy::too_many_arguments)]
fn piper_plan<'py>(
    py: Python<'py>,
    n: usize,
    edge_src: PyReadonlyArray1<'py, i64>,
    edge_dst: PyReadonlyArray1<'py, i64>,
    edge_comm: PyReadonlyArray1<'py, f64>,
    tm_node: PyReadonlyArray1<'py, i64>,
    tm_t: PyReadonlyArray1<'py, i64>,
    tm_time: PyReadonlyArray1<'py, f64>,
    tm_param: PyReadonlyArray1<'py, f64>,
    tm_a: PyReadonlyArray1<'py, f64>,
    tm_b: PyReadonlyArray1<'py, f64>,
    sfw_off: PyReadonlyArray1<'py, i64>,
    sfw: PyReadonlyArray1<'py, f64>,
    sbw_off: PyReadonlyArray1<'py, i64>,
    sbw: PyReadonlyArray1<'py, f64>,
    devices: usize,
    memory: f64,
    bandwidth: f64,
    batch: usize,
    exact_batch: bool,
    allow_dp: bool,
    knapsack: &str,
    exact_max_nodes: usize,
    max_ideals: usize,
    server_size: Option<usize>,
    intra_bandwidth: Option<f64>,
    time_limit: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let edges = read_edges(
        n,
        &owned(&edge_src)?,
        &owned(&edge_dst)?,
        &owned(&edge_comm)?,
    )?;
    let tmpcs = TmpcArrays {
        node: owned(&tm_node)?,
        t: owned(&tm_t)?,
        time: owned(&tm_time)?,
        param: owned(&tm_param)?,
        a: owned(&tm_a)?,
        b: owned(&tm_b)?,
        sfw_off: owned(&sfw_off)?,
        sfw: owned(&sfw)?,
        sbw_off: owned(&sbw_off)?,
        sbw: owned(&sbw)?,
    }
    .into_tmpcs(n)?;
    let knapsack = parse_knapsack(knapsack, exact_max_nodes)?;
    let server = match (server_size, intra_bandwidth) {
        (Some(g), Some(b)) => Some((g, b)),
        (None, None) => None,
        _ => {
            let msg = "server_size and intra_bandwidth go together";
            return Err(CoreError::InvalidArgument(msg.into()).into());
        }
    };
    let prob = Problem {
        n,
        edges,
        tmpcs,
        devices,
        memory,
        bandwidth,
        batch,
        exact_batch,
        allow_dp,
        knapsack,
        max_ideals,
        server,
    };
    let res = run(py, time_limit, move |cancel| plan_with(&prob, cancel))?;
    plan_dict(py, res)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(piper_plan, m)?)?;
    Ok(())
}
