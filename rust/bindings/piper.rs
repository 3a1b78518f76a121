//! Bindings for the Piper training planner (`stagecut.piper`).

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::{owned, to_pyerr};
use crate::error::CoreError;
use crate::training::{plan, Knapsack, Problem, Tmpc};


/// Piper DP. TMPC `i` has sync arrays `sfw[sfw_off[i]..sfw_off[i+1]]` (one per incoming edge of
/// its node, in edge order) and likewise `sbw`. See `stagecut.piper.plan_training`.
#[pyfunction]
#[pyo3(signature = (n, edge_src, edge_dst, edge_comm, tm_node, tm_t, tm_time, tm_param, tm_a, tm_b,
                    sfw_off, sfw, sbw_off, sbw, devices, memory, bandwidth, batch,
                    exact_batch, allow_dp, knapsack, exact_max_nodes, max_ideals,
                    server_size=None, intra_bandwidth=None))]
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
) -> PyResult<Bound<'py, PyDict>> {
    let err = |m: String| to_pyerr(py, CoreError::InvalidInput(m));
    let (es, ed, ec) = (owned(&edge_src)?, owned(&edge_dst)?, owned(&edge_comm)?);
    if es.len() != ed.len() || es.len() != ec.len() {
        return Err(err("edge arrays differ in length".into()));
    }
    let mut edges = Vec::with_capacity(es.len());
    for i in 0..es.len() {
        let (a, b) = (es[i], ed[i]);
        if a < 0 || b < 0 || a as usize >= n || b as usize >= n {
            return Err(err(format!(
                "edge {i} ({a} -> {b}) has an endpoint outside 0..{n}"
            )));
        }
        edges.push((a as u32, b as u32, ec[i]));
    }
    let (node, tt, time, param, a, b) = (
        owned(&tm_node)?,
        owned(&tm_t)?,
        owned(&tm_time)?,
        owned(&tm_param)?,
        owned(&tm_a)?,
        owned(&tm_b)?,
    );
    let (fo, fv, bo, bv) = (owned(&sfw_off)?, owned(&sfw)?, owned(&sbw_off)?, owned(&sbw)?);
    let m = node.len();
    if [tt.len(), time.len(), param.len(), a.len(), b.len()]
        .iter()
        .any(|&l| l != m)
        || fo.len() != m + 1
        || bo.len() != m + 1
    {
        return Err(err("TMPC arrays differ in length".into()));
    }
    let slice = |off: &[i64], vals: &[f64], i: usize| -> Option<Vec<f64>> {
        let (s, e) = (off[i], off[i + 1]);
        if s < 0 || e < s || e as usize > vals.len() {
            return None;
        }
        Some(vals[s as usize..e as usize].to_vec())
    };
    let mut tmpcs = Vec::with_capacity(m);
    for i in 0..m {
        if node[i] < 0 || node[i] as usize >= n || tt[i] < 1 || tt[i] > u32::MAX as i64 {
            return Err(err(format!(
                "TMPC {i}: bad node {} or tensor-parallel degree {}",
                node[i], tt[i]
            )));
        }
        let (Some(f), Some(bw)) = (slice(&fo, &fv, i), slice(&bo, &bv, i)) else {
            return Err(err(format!("TMPC {i}: bad sync offsets")));
        };
        tmpcs.push(Tmpc {
            node: node[i] as usize,
            t: tt[i] as u32,
            time: time[i],
            param: param[i],
            a: a[i],
            b: b[i],
            sfw: f,
            sbw: bw,
        });
    }
    let knapsack = match knapsack {
        "heuristic" => Knapsack::Heuristic,
        "generic" => Knapsack::GenericHeuristic,
        "exact" => Knapsack::Exact {
            max_nodes: exact_max_nodes,
        },
        other => return Err(err(format!("unknown knapsack mode {other:?}"))),
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
        server: match (server_size, intra_bandwidth) {
            (Some(g), Some(b)) => Some((g, b)),
            (None, None) => None,
            _ => return Err(err("server_size and intra_bandwidth go together".into())),
        },
    };
    let res = py
        .allow_threads(move || plan(&prob))
        .map_err(|e| to_pyerr(py, e))?;
    let out = PyDict::new(py);
    out.set_item("objective", res.objective)?;
    let stages = PyList::empty(py);
    for s in &res.stages {
        let d = PyDict::new(py);
        d.set_item("nodes", s.nodes.clone())?;
        d.set_item("t", s.t)?;
        d.set_item("d", s.d)?;
        d.set_item("tmpcs", s.tmpcs.clone())?;
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(piper_plan, m)?)?;
    Ok(())
}
