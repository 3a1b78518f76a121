//! Bindings for the latency evaluator: the `_core.LatencyEvaluator` class. See
//! `stagecut.latency.model._fast` (the Python wrapper) and [`crate::latency`].
//!
//! A `LatencyEvaluator` is built once from the arrays of a `LatencyProblem` and validated then;
//! it keeps one [`Workspace`] for the single evaluations (which hold the GIL: they take
//! microseconds). `makespans` evaluates a batch on the crate's thread pool with the GIL
//! released, interruptible by Ctrl-C (through [`run`]).

use std::sync::Mutex;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::{owned, pairs, run, u32s};
use crate::error::{CoreError, CoreResult};
use crate::latency::{makespans, Order, Problem, ProblemData, Workspace};

/// A prepared latency problem and the buffers to evaluate it (see the module docs).
#[pyclass(frozen, module = "stagecut._core")]
pub struct LatencyEvaluator {
    problem: Problem,
    ws: Mutex<Workspace>,
}

/// A 2-d array as a row-major vector, with its shape.
fn owned2(a: &PyReadonlyArray2<'_, f64>, what: &str) -> PyResult<(Vec<f64>, usize, usize)> {
    let shape = a.shape();
    let data = a
        .as_slice()
        .map_err(|_| CoreError::InvalidInput(format!("{what}: expected a C-contiguous array")))?;
    Ok((data.to_vec(), shape[0], shape[1]))
}

/// The order argument: none (rank round-robin), a sequence, or lists given by `offsets`.
fn order_of<'a>(order: Option<&'a [i64]>, off: &'a Option<Vec<usize>>) -> Order<'a> {
    match (order, off) {
        (None, _) => Order::RankRoundRobin,
        (Some(flat), Some(off)) => Order::Lists { off, flat },
        (Some(seq), None) => Order::Sequence(seq),
    }
}

/// `offsets` as `usize`s (a negative one is an error).
fn offsets(a: Option<PyReadonlyArray1<'_, i64>>) -> PyResult<Option<Vec<usize>>> {
    let Some(a) = a else { return Ok(None) };
    let out = a
        .as_slice()?
        .iter()
        .map(|&x| {
            usize::try_from(x)
                .map_err(|_| CoreError::InvalidArgument(format!("order: offset {x} out of range")))
        })
        .collect::<CoreResult<Vec<usize>>>()?;
    Ok(Some(out))
}

impl LatencyEvaluator {
    /// Run `f` on the evaluator's workspace (a fresh one if another call holds it).
    fn with_ws<R>(&self, f: impl FnOnce(&mut Workspace) -> R) -> R {
        match self.ws.try_lock() {
            Ok(mut ws) => f(&mut ws),
            Err(_) => f(&mut Workspace::new(&self.problem)),
        }
    }
}

#[pymethods]
impl LatencyEvaluator {
    #[new]
    #[pyo3(signature = (times, size, bandwidth, parallel, edge_src, edge_dst, node_names, device_names))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        times: PyReadonlyArray2<'_, f64>,
        size: PyReadonlyArray1<'_, f64>,
        bandwidth: PyReadonlyArray2<'_, f64>,
        parallel: PyReadonlyArray1<'_, bool>,
        edge_src: PyReadonlyArray1<'_, i64>,
        edge_dst: PyReadonlyArray1<'_, i64>,
        node_names: Vec<String>,
        device_names: Vec<String>,
    ) -> PyResult<LatencyEvaluator> {
        let (times, n, nd) = owned2(&times, "times")?;
        let (bandwidth, b0, b1) = owned2(&bandwidth, "bandwidth")?;
        let parallel = owned(&parallel)?;
        if parallel.len() != nd || b0 != nd || b1 != nd {
            return Err(CoreError::InvalidInput(format!(
                "times has {nd} device columns: expected {nd} parallel flags and a {nd} x {nd} \
                 bandwidth matrix, got {} and {b0} x {b1}",
                parallel.len()
            ))
            .into());
        }
        let problem = Problem::new(ProblemData {
            n,
            edges: pairs(&u32s(&edge_src, "edge_src")?, &u32s(&edge_dst, "edge_dst")?)?,
            times,
            size: owned(&size)?,
            bandwidth,
            parallel,
            node_names,
            device_names,
        })?;
        let ws = Mutex::new(Workspace::new(&problem));
        Ok(LatencyEvaluator { problem, ws })
    }

    /// Number of nodes.
    #[getter]
    fn num_nodes(&self) -> usize {
        self.problem.len()
    }

    /// Number of devices.
    #[getter]
    fn num_devices(&self) -> usize {
        self.problem.num_devices()
    }

    /// The ASAP makespan of placement `dev` in `order` (none: rank round-robin; a sequence of
    /// all node positions; or, with `offsets`, per-device lists `order[offsets[d]:offsets[d+1]]`).
    #[pyo3(signature = (dev, order=None, offsets=None))]
    fn makespan(
        &self,
        dev: PyReadonlyArray1<'_, i64>,
        order: Option<PyReadonlyArray1<'_, i64>>,
        offsets: Option<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<f64> {
        let off = self::offsets(offsets)?;
        let dev = dev.as_slice()?;
        let seq = match &order {
            Some(a) => Some(a.as_slice()?),
            None => None,
        };
        let m = self.with_ws(|ws| ws.evaluate(&self.problem, dev, order_of(seq, &off)))?;
        Ok(m)
    }

    /// The ASAP `(start, finish)` arrays (arguments as for `makespan`).
    #[pyo3(signature = (dev, order=None, offsets=None))]
    #[allow(clippy::type_complexity)]
    fn times<'py>(
        &self,
        py: Python<'py>,
        dev: PyReadonlyArray1<'py, i64>,
        order: Option<PyReadonlyArray1<'py, i64>>,
        offsets: Option<PyReadonlyArray1<'py, i64>>,
    ) -> PyResult<(Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>)> {
        let off = self::offsets(offsets)?;
        let dev = dev.as_slice()?;
        let seq = match &order {
            Some(a) => Some(a.as_slice()?),
            None => None,
        };
        let (s, f) = self.with_ws(|ws| -> CoreResult<_> {
            ws.evaluate(&self.problem, dev, order_of(seq, &off))?;
            Ok((ws.start().to_vec(), ws.finish()))
        })?;
        Ok((s.into_pyarray(py), f.into_pyarray(py)))
    }

    /// Per device, its node positions in the rank round-robin order of placement `dev`.
    fn rank_round_robin(&self, dev: PyReadonlyArray1<'_, i64>) -> PyResult<Vec<Vec<usize>>> {
        let dev = dev.as_slice()?;
        let out = self.with_ws(|ws| -> CoreResult<_> {
            ws.rank_round_robin(&self.problem, dev)?;
            Ok(ws.device_orders(&self.problem))
        })?;
        Ok(out)
    }

    /// Makespans of the rows of `devs` (m x n), each in its rank round-robin order or in the
    /// sequence of the same row of `orders`; in parallel, with the GIL released.
    #[pyo3(signature = (devs, orders=None))]
    fn makespans<'py>(
        &self,
        py: Python<'py>,
        devs: PyReadonlyArray2<'py, i64>,
        orders: Option<PyReadonlyArray2<'py, i64>>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let n = self.problem.len();
        let shape = devs.shape();
        let m = shape[0];
        if shape[1] != n || orders.as_ref().is_some_and(|o| o.shape() != shape) {
            return Err(CoreError::InvalidArgument(format!(
                "placements: expected an (m, {n}) array (and orders of the same shape)"
            ))
            .into());
        }
        let devs = devs.as_slice()?.to_vec();
        let seqs = match &orders {
            Some(o) => Some(o.as_slice()?.to_vec()),
            None => None,
        };
        let problem = &self.problem;
        let out = run(py, None, move |cancel| {
            makespans(problem, m, &devs, seqs.as_deref(), cancel)
        })?;
        Ok(out.into_pyarray(py))
    }

    fn __repr__(&self) -> String {
        format!(
            "LatencyEvaluator(num_nodes={}, num_devices={}, num_edges={})",
            self.problem.len(),
            self.problem.num_devices(),
            self.problem.num_edges()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LatencyEvaluator>()?;
    Ok(())
}
