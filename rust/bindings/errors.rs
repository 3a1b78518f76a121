//! Core errors as the exception classes of `stagecut.errors` (the pattern of rustworkx's
//! `src/lib.rs`): the classes are imported once with `import_exception!`, and
//! `From<CoreError> for PyErr` lets binding code use `?` on core results.
//!
//! | `CoreError`       | exception                                             |
//! |-------------------|-------------------------------------------------------|
//! | `InvalidInput`    | `InvalidGraphError` (a `ValueError`)                  |
//! | `InvalidArgument` | `InvalidArgumentError` (a `ValueError`)               |
//! | `Cycle`           | `CycleError(message, cycle)` (an `InvalidGraphError`) |
//! | `TooManyIdeals`   | `TooManyIdealsError`                                  |
//! | `Internal`        | `SolverError` ("internal error: ...; please report")  |

use pyo3::PyErr;

use crate::error::CoreError;

pyo3::import_exception!(stagecut.errors, InvalidGraphError);
pyo3::import_exception!(stagecut.errors, InvalidArgumentError);
pyo3::import_exception!(stagecut.errors, CycleError);
pyo3::import_exception!(stagecut.errors, TooManyIdealsError);
pyo3::import_exception!(stagecut.errors, SolverError);

impl From<CoreError> for PyErr {
    fn from(err: CoreError) -> PyErr {
        let msg = err.to_string();
        match err {
            CoreError::InvalidInput(_) => InvalidGraphError::new_err(msg),
            CoreError::InvalidArgument(_) => InvalidArgumentError::new_err(msg),
            CoreError::Cycle { cycle } => CycleError::new_err((msg, cycle)),
            CoreError::TooManyIdeals { .. } => TooManyIdealsError::new_err(msg),
            CoreError::Internal(_) => SolverError::new_err(msg),
        }
    }
}
