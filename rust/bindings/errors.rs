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
//! | `MemoryLimit`     | `MemoryLimitError` (a `MemoryError`)                  |
//! | `Interrupted`     | `KeyboardInterrupt` (normally the signal's own error) |
//! | `DeadlineReached` | `_core.DeadlineReached` (caught by the wrappers)      |
//!
//! `DeadlineReached` is private to the package: the Python wrappers turn it into a result with
//! status `"time_limit"` (and the best answer they know, if any).

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::PyErr;

use crate::error::CoreError;

pyo3::import_exception!(stagecut.errors, InvalidGraphError);
pyo3::import_exception!(stagecut.errors, InvalidArgumentError);
pyo3::import_exception!(stagecut.errors, CycleError);
pyo3::import_exception!(stagecut.errors, TooManyIdealsError);
pyo3::import_exception!(stagecut.errors, SolverError);
pyo3::import_exception!(stagecut.errors, MemoryLimitError);
pyo3::import_exception!(stagecut.errors, StagecutError);

pyo3::create_exception!(
    stagecut._core,
    DeadlineReached,
    StagecutError,
    "The time limit passed before the core had an answer (the wrappers report status 'time_limit')."
);

impl From<CoreError> for PyErr {
    fn from(err: CoreError) -> PyErr {
        let msg = err.to_string();
        match err {
            CoreError::InvalidInput(_) => InvalidGraphError::new_err(msg),
            CoreError::InvalidArgument(_) => InvalidArgumentError::new_err(msg),
            CoreError::Cycle { cycle } => CycleError::new_err((msg, cycle)),
            CoreError::TooManyIdeals { .. } => TooManyIdealsError::new_err(msg),
            CoreError::Internal(_) => SolverError::new_err(msg),
            CoreError::MemoryLimit(_) => MemoryLimitError::new_err(msg),
            CoreError::Interrupted => PyKeyboardInterrupt::new_err(msg),
            CoreError::DeadlineReached => DeadlineReached::new_err(msg),
        }
    }
}
