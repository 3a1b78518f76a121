//! Bindings for the pricing of the `partition-lp` bound: `_core.BlockSearch` (the exact branch
//! and bound), built once per tested `T` from the tables `stagecut.mtpp.pricing.BlockSearch`
//! derives and solved for many weight vectors, and `_core.BlockLocal` (the tabu search), made
//! from it by `BlockSearch.local`. Bitsets come as 64-bit words, least significant first.

use std::sync::Arc;

use pyo3::prelude::*;

use super::run;
use crate::error::CoreResult;
use crate::mtpp::pricing::{BlockCosts, BlockSearch, Bits};
use crate::mtpp::pricing_local::BlockLocal;

/// One pricing problem at a fixed `T` (see `stagecut.mtpp.pricing`).
#[pyclass(frozen, module = "stagecut._core", name = "BlockSearch")]
pub struct PyBlockSearch {
    inner: Arc<BlockSearch>,
}

type Rule = (Vec<u64>, Vec<u64>);

fn bitsets(words: &[Vec<u64>], width: usize) -> CoreResult<Vec<Bits>> {
    words.iter().map(|w| Bits::from_words(w, width)).collect()
}

#[pymethods]
impl PyBlockSearch {
    #[new]
    #[pyo3(signature = (t, work, params, gmask, rules, pcomm, ppos, cons, hard, slope, limit, nodes))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        t: f64, work: Vec<f64>, params: Vec<f64>, gmask: Vec<Vec<u64>>, rules: Vec<Vec<Rule>>, pcomm: Vec<f64>,
        ppos: Vec<usize>, cons: Vec<Vec<usize>>, hard: bool, slope: f64, limit: f64, nodes: usize,
    ) -> PyResult<PyBlockSearch> {
        let m = work.len();
        let gmask = bitsets(&gmask, nodes)?;
        let rules = rules
            .iter()
            .map(|rs| {
                rs.iter()
                    .map(|(a, b)| Ok((Bits::from_words(a, nodes)?, Bits::from_words(b, m)?)))
                    .collect::<CoreResult<Vec<_>>>()
            })
            .collect::<CoreResult<Vec<_>>>()?;
        let c = BlockCosts { t, work, params, pcomm, ppos, cons, hard, slope, limit };
        Ok(PyBlockSearch { inner: Arc::new(BlockSearch::new(c, gmask, rules, nodes)?) })
    }

    /// `(M, positions of the block found, searched to its end, nodes)`; see the Python class.
    #[pyo3(signature = (pv, time_limit=None, floor=None, nodes=None))]
    fn solve(
        &self, py: Python<'_>, pv: Vec<f64>, time_limit: Option<f64>, floor: Option<f64>, nodes: Option<u64>,
    ) -> PyResult<(f64, Vec<usize>, bool, u64)> {
        let s = Arc::clone(&self.inner);
        let r = run(py, time_limit, move |cancel| s.solve(&pv, floor, nodes, cancel))?;
        Ok((r.upper, r.inside, r.solved, r.count))
    }

    /// The tabu search on the same costs, with each position's reach (`desc`) and reachers
    /// (`anc`) as bitsets of positions.
    fn local(&self, desc: Vec<Vec<u64>>, anc: Vec<Vec<u64>>) -> PyResult<PyBlockLocal> {
        let m = self.inner.c.m();
        let inner = BlockLocal::new(self.inner.c.clone(), bitsets(&desc, m)?, bitsets(&anc, m)?)?;
        Ok(PyBlockLocal { inner: Arc::new(inner) })
    }
}

/// The tabu search for heavy blocks at a fixed `T` (see `stagecut.mtpp.pricing`).
#[pyclass(frozen, module = "stagecut._core", name = "BlockLocal")]
pub struct PyBlockLocal {
    inner: Arc<BlockLocal>,
}

#[pymethods]
impl PyBlockLocal {
    /// `[(weight, positions)]`: blocks of weight at least `floor`, the heaviest first.
    #[pyo3(signature = (pv, starts, floor, moves, tenure, want, seed, time_limit=None))]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self, py: Python<'_>, pv: Vec<f64>, starts: Vec<usize>, floor: f64, moves: usize, tenure: usize,
        want: usize, seed: u64, time_limit: Option<f64>,
    ) -> PyResult<Vec<(f64, Vec<usize>)>> {
        let s = Arc::clone(&self.inner);
        run(py, time_limit, move |cancel| s.search(&pv, &starts, floor, moves, tenure, want, seed, cancel))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBlockSearch>()?;
    m.add_class::<PyBlockLocal>()?;
    Ok(())
}
