//! PyO3 glue: the private `stagecut._core` module, one file per objective like the crate
//! (`throughput.rs`, `mtpp.rs`, `training.rs`), each exposing `register(m)`, plus the error
//! mapping (`errors.rs`). Inputs are copied into owned Rust vectors and validated, then the
//! GIL is released; every core error becomes a `stagecut.errors` exception through `?`.
//! Long calls go through [`run::run`]: on the crate's thread pool, interruptible by Ctrl-C,
//! with an optional time limit.

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;

use crate::dag::Dag;
use crate::error::{CoreError, CoreResult};
use crate::ideals::Ideals;

mod errors;
mod latency;
mod mtpp;
mod pricing;
mod run;
mod throughput;
mod training;

pub(crate) use run::run;

/// Copy a numpy array into an owned vector (the input must be contiguous).
pub(crate) fn owned<T: numpy::Element + Copy>(a: &PyReadonlyArray1<'_, T>) -> PyResult<Vec<T>> {
    Ok(a.as_slice()?.to_vec())
}

/// Node indices as `u32`; a negative or too large one is an error naming `what`.
pub(crate) fn u32s(a: &PyReadonlyArray1<'_, i64>, what: &str) -> PyResult<Vec<u32>> {
    let out = a
        .as_slice()?
        .iter()
        .map(|&x| {
            u32::try_from(x)
                .map_err(|_| CoreError::InvalidInput(format!("{what}: index {x} out of range")))
        })
        .collect::<CoreResult<Vec<u32>>>()?;
    Ok(out)
}

/// Zip two endpoint arrays into an edge list (they must have the same length).
pub(crate) fn pairs(src: &[u32], dst: &[u32]) -> CoreResult<Vec<(u32, u32)>> {
    if src.len() != dst.len() {
        return Err(CoreError::InvalidInput(
            "edge arrays differ in length".into(),
        ));
    }
    Ok(src.iter().copied().zip(dst.iter().copied()).collect())
}

/// Number of ideals of a DAG, or `TooManyIdealsError` past `max_ideals`.
#[pyfunction]
#[pyo3(signature = (n, src, dst, max_ideals, time_limit=None))]
fn count_ideals(
    py: Python<'_>,
    n: usize,
    src: PyReadonlyArray1<'_, i64>,
    dst: PyReadonlyArray1<'_, i64>,
    max_ideals: usize,
    time_limit: Option<f64>,
) -> PyResult<usize> {
    // n + 1 ideals at least: refuse before allocating anything for n nodes
    if n >= max_ideals {
        return Err(CoreError::TooManyIdeals { limit: max_ideals }.into());
    }
    let edges = pairs(&u32s(&src, "src")?, &u32s(&dst, "dst")?)?;
    run(py, time_limit, move |cancel| {
        let dag = Dag::from_edges(n, &edges)?;
        Ideals::enumerate_with(&dag, max_ideals, cancel).map(|i| i.len())
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DeadlineReached",
        m.py().get_type::<errors::DeadlineReached>(),
    )?;
    m.add_function(wrap_pyfunction!(count_ideals, m)?)?;
    m.add_function(wrap_pyfunction!(run::set_progress_hook, m)?)?;
    throughput::register(m)?;
    mtpp::register(m)?;
    pricing::register(m)?;
    training::register(m)?;
    latency::register(m)?;
    Ok(())
}
