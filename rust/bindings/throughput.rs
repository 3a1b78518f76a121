//! Bindings for the throughput (max-load) DP: `_core.max_load_dp`. See `stagecut.throughput`.

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{owned, pairs, run, u32s};
use crate::dag::Dag;
use crate::error::{CoreError, CoreResult};
use crate::ideal_bounds::solve_bounded;
use crate::ideal_dp::solve_with;
use crate::ideals::Ideals;
use crate::throughput::{MaxLoadCost, OriginalNodes};

/// The members of each unit from a CSR offset array over `members`.
fn unit_members(n_units: usize, off: &[u32], flat: &[u32]) -> CoreResult<Vec<Vec<u32>>> {
    if off.len().checked_sub(1) != Some(n_units)
        || off.windows(2).any(|w| w[0] > w[1])
        || off[n_units] as usize > flat.len()
    {
        return Err(CoreError::InvalidInput(
            "members_off is not a valid CSR offset array".into(),
        ));
    }
    Ok((0..n_units)
        .map(|u| flat[off[u] as usize..off[u + 1] as usize].to_vec())
        .collect())
}

/// Exact max-load DP over the ideals of the unit DAG. See `stagecut.throughput`. Device counts
/// past the number of units are capped (they cannot be used); past `time_limit` seconds the
/// call raises `DeadlineReached`.
#[pyfunction]
#[pyo3(signature = (acc_time, cpu_time, size, comm, acc_ok, cpu_ok, edge_src, edge_dst,
                    n_units, unit_src, unit_dst, members_off, members,
                    accelerators, cpus, acc_memory, cpu_memory, max_ideals, prune=true, upper_bound=None,
                    time_limit=None))]
#[allow(clippy::too_many_arguments)]
fn max_load_dp<'py>(
    py: Python<'py>,
    acc_time: PyReadonlyArray1<'py, f64>,
    cpu_time: PyReadonlyArray1<'py, f64>,
    size: PyReadonlyArray1<'py, f64>,
    comm: PyReadonlyArray1<'py, f64>,
    acc_ok: PyReadonlyArray1<'py, bool>,
    cpu_ok: PyReadonlyArray1<'py, bool>,
    edge_src: PyReadonlyArray1<'py, i64>,
    edge_dst: PyReadonlyArray1<'py, i64>,
    n_units: usize,
    unit_src: PyReadonlyArray1<'py, i64>,
    unit_dst: PyReadonlyArray1<'py, i64>,
    members_off: PyReadonlyArray1<'py, i64>,
    members: PyReadonlyArray1<'py, i64>,
    accelerators: usize,
    cpus: usize,
    acc_memory: f64,
    cpu_memory: f64,
    max_ideals: usize,
    prune: bool,
    upper_bound: Option<f64>,
    time_limit: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    if upper_bound.is_some_and(f64::is_nan) {
        return Err(CoreError::InvalidArgument("upper_bound is NaN".into()).into());
    }
    let orig = OriginalNodes {
        acc_time: owned(&acc_time)?,
        cpu_time: owned(&cpu_time)?,
        size: owned(&size)?,
        comm: owned(&comm)?,
        acc_ok: owned(&acc_ok)?,
        cpu_ok: owned(&cpu_ok)?,
        edges: pairs(&u32s(&edge_src, "edge_src")?, &u32s(&edge_dst, "edge_dst")?)?,
    };
    let unit_edges = pairs(&u32s(&unit_src, "unit_src")?, &u32s(&unit_dst, "unit_dst")?)?;
    let unit_members = unit_members(
        n_units,
        &u32s(&members_off, "members_off")?,
        &u32s(&members, "members")?,
    )?;
    let sol = run(py, time_limit, move |cancel| {
        let dag = Dag::from_edges(n_units, &unit_edges)?;
        let cost = MaxLoadCost::new(&orig, &unit_members, acc_memory, cpu_memory)?;
        let ideals = Ideals::enumerate_with(&dag, max_ideals, cancel)?;
        let upper = upper_bound.unwrap_or(f64::INFINITY);
        if prune {
            // with a bound of its own (a greedy split) when the caller has none or a worse one
            solve_bounded(&ideals, &cost, accelerators, cpus, upper, cancel)
        } else {
            solve_with(&ideals, &cost, accelerators, cpus, false, upper, cancel)
        }
    })?;
    let out = PyDict::new(py);
    out.set_item("objective", sol.objective)?;
    let blocks: Vec<(bool, Vec<usize>)> = sol
        .blocks
        .into_iter()
        .map(|b| (b.accelerator, b.nodes))
        .collect();
    out.set_item("blocks", blocks)?;
    out.set_item("ideals", sol.ideals)?;
    out.set_item("pairs", sol.pairs)?;
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(max_load_dp, m)?)?;
    Ok(())
}
