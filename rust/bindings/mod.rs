//! PyO3 glue: the private `stagecut._core` module. One file per topic; each exposes
//! `register(m)`. Inputs are copied into owned Rust vectors, then the GIL is released.

use pyo3::prelude::*;

use crate::error::CoreError;

mod pipeline;
mod piper;
mod slicegraph;

/// Copy a numpy array into an owned vector (the input must be contiguous).
pub(crate) fn owned<T: numpy::Element + Copy>(a: &numpy::PyReadonlyArray1<'_, T>) -> PyResult<Vec<T>> {
    Ok(a.as_slice()?.to_vec())
}

/// Map a core error to the matching exception class of `stagecut.errors`.
pub(crate) fn to_pyerr(py: Python<'_>, err: CoreError) -> PyErr {
    let class = match &err {
        CoreError::InvalidInput(_) => "InvalidGraphError",
        CoreError::Cycle { .. } => "CycleError",
        CoreError::TooManyIdeals { .. } => "TooManyIdealsError",
        CoreError::InvalidArgument(_) => "InvalidArgumentError",
        CoreError::Internal(_) => "SolverError",
    };
    let msg = err.to_string();
    match py
        .import("stagecut.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|cls| cls.call1((msg.clone(),)))
    {
        Ok(value) => PyErr::from_value(value),
        Err(_) => pyo3::exceptions::PyValueError::new_err(msg),
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    pipeline::register(m)?;
    piper::register(m)?;
    slicegraph::register(m)?;
    Ok(())
}
