//! Bindings for SliceGraph / MTPP. See `stagecut.slicegraph`.
//!
//! Every function takes the instance as flat arrays: per-unit `work`, `params`; per-tensor
//! `t_cost`, `t_prod`, and the consumers in CSR form (`t_cons_off`, `t_cons`); plus the memory
//! model (`fast_memory`, `reserved`, `bandwidth`; `bandwidth=None` makes memory a hard limit).

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::to_pyerr;
use crate::error::{CoreError, CoreResult};
use crate::mtpp::slicegraph::{self as dp, ScanCosts, TableCosts};
use crate::mtpp::fenwick::{build_fenwick, build_naive};
use crate::mtpp::kahn::kahn;
use crate::mtpp::search::{self, BrkgaParams};
use crate::mtpp::{exact, Instance, Memory, OrderCtx, Tensor};

struct RawInstance {
    work: Vec<f64>,
    params: Vec<f64>,
    t_cost: Vec<f64>,
    t_prod: Vec<i64>,
    t_cons_off: Vec<i64>,
    t_cons: Vec<i64>,
    memory: Memory,
}

fn idx(x: i64, n: usize, what: &str) -> CoreResult<u32> {
    if x < 0 || x as u64 >= n as u64 {
        return Err(CoreError::InvalidInput(format!(
            "{what}: index {x} out of range 0..{n}"
        )));
    }
    Ok(x as u32)
}

impl RawInstance {
    #[allow(clippy::too_many_arguments)]
    fn read(
        work: &PyReadonlyArray1<'_, f64>,
        params: &PyReadonlyArray1<'_, f64>,
        t_cost: &PyReadonlyArray1<'_, f64>,
        t_prod: &PyReadonlyArray1<'_, i64>,
        t_cons_off: &PyReadonlyArray1<'_, i64>,
        t_cons: &PyReadonlyArray1<'_, i64>,
        fast_memory: f64,
        reserved: f64,
        bandwidth: Option<f64>,
    ) -> PyResult<RawInstance> {
        Ok(RawInstance {
            work: work.as_slice()?.to_vec(),
            params: params.as_slice()?.to_vec(),
            t_cost: t_cost.as_slice()?.to_vec(),
            t_prod: t_prod.as_slice()?.to_vec(),
            t_cons_off: t_cons_off.as_slice()?.to_vec(),
            t_cons: t_cons.as_slice()?.to_vec(),
            memory: Memory {
                fast: fast_memory,
                reserved,
                bandwidth,
            },
        })
    }

    fn build(self) -> CoreResult<Instance> {
        let n = self.work.len();
        let nt = self.t_cost.len();
        if self.t_prod.len() != nt || self.t_cons_off.len() != nt + 1 {
            return Err(CoreError::InvalidInput(
                "tensor arrays differ in length".into(),
            ));
        }
        if self.t_cons_off[0] != 0
            || self.t_cons_off.windows(2).any(|w| w[0] > w[1])
            || self.t_cons_off[nt] as u64 != self.t_cons.len() as u64
        {
            return Err(CoreError::InvalidInput(
                "t_cons_off is not a valid CSR offset array".into(),
            ));
        }
        let mut tensors = Vec::with_capacity(nt);
        for t in 0..nt {
            let cons = self.t_cons[self.t_cons_off[t] as usize..self.t_cons_off[t + 1] as usize]
                .iter()
                .map(|&c| idx(c, n, "t_cons"))
                .collect::<CoreResult<Vec<u32>>>()?;
            tensors.push(Tensor {
                cost: self.t_cost[t],
                producer: idx(self.t_prod[t], n, "t_prod")?,
                consumers: cons,
            });
        }
        Instance::new(self.work, self.params, &tensors, self.memory)
    }
}

fn read_order(
    inst: &Instance,
    order: Option<Vec<i64>>,
    prio: Option<Vec<f64>>,
) -> CoreResult<Vec<usize>> {
    if let Some(o) = order {
        let o = o
            .iter()
            .map(|&x| idx(x, inst.n, "order").map(|v| v as usize))
            .collect::<CoreResult<Vec<_>>>()?;
        inst.check_order(&o)?;
        return Ok(o);
    }
    if let Some(p) = prio {
        if p.len() != inst.n || p.iter().any(|x| x.is_nan()) {
            return Err(CoreError::InvalidInput(format!(
                "priorities: expected {} numbers, no NaN",
                inst.n
            )));
        }
        return Ok(kahn(inst, &p));
    }
    inst.dag.topo_order()
}

struct Outcome {
    objective: f64,
    order: Vec<usize>,
    blocks: Vec<Vec<usize>>,
    decodes: u64,
    history: Vec<f64>,
    rounds: u32,
}

/// SliceGraph on one order, or a search over orders. See `stagecut.slicegraph.slice_graph`.
#[pyfunction]
#[pyo3(signature = (work, params, t_cost, t_prod, t_cons_off, t_cons, fast_memory, reserved, bandwidth,
                    stages, method, seed=0, population=100, generations=100, elite=0.2, mutant=0.1,
                    rho=0.7, max_decodes=None, samples=1000, islands=1, order=None, priorities=None,
                    segment_costs="scan"))]
#[allow(clippy::too_many_arguments)]
fn mtpp_slice<'py>(
    py: Python<'py>,
    work: PyReadonlyArray1<'py, f64>,
    params: PyReadonlyArray1<'py, f64>,
    t_cost: PyReadonlyArray1<'py, f64>,
    t_prod: PyReadonlyArray1<'py, i64>,
    t_cons_off: PyReadonlyArray1<'py, i64>,
    t_cons: PyReadonlyArray1<'py, i64>,
    fast_memory: f64,
    reserved: f64,
    bandwidth: Option<f64>,
    stages: usize,
    method: &str,
    seed: u64,
    population: usize,
    generations: usize,
    elite: f64,
    mutant: f64,
    rho: f64,
    max_decodes: Option<u64>,
    samples: u64,
    islands: usize,
    order: Option<PyReadonlyArray1<'py, i64>>,
    priorities: Option<PyReadonlyArray1<'py, f64>>,
    segment_costs: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let raw = RawInstance::read(
        &work,
        &params,
        &t_cost,
        &t_prod,
        &t_cons_off,
        &t_cons,
        fast_memory,
        reserved,
        bandwidth,
    )?;
    let order = order
        .map(|o| o.as_slice().map(|s| s.to_vec()))
        .transpose()?;
    let prio = priorities
        .map(|o| o.as_slice().map(|s| s.to_vec()))
        .transpose()?;
    let method = method.to_string();
    let seg = segment_costs.to_string();
    let bp = BrkgaParams {
        population,
        generations,
        elite,
        mutant,
        rho,
        max_decodes,
        seed,
    };
    let bad = |m: &str| CoreError::InvalidInput(m.to_string());
    if !(0.0..1.0).contains(&elite)
        || !(0.0..1.0).contains(&mutant)
        || elite + mutant > 1.0
        || !(0.0..=1.0).contains(&rho)
    {
        return Err(to_pyerr(
            py,
            bad("BRKGA: need 0 < elite, 0 <= mutant, elite + mutant <= 1, 0 <= rho <= 1"),
        ));
    }
    let result: CoreResult<Outcome> = py.allow_threads(move || {
        let inst = raw.build()?;
        if stages == 0 {
            return Err(bad("stages must be at least 1"));
        }
        // blocks are non-empty: more than n stages never helps (and would only cost memory)
        let k = stages.min(inst.n.max(1));
        let from_keys = |res: search::SearchResult, extra: u64| {
            let (order, split) = search::decode(&inst, &res.best_keys, k);
            Outcome {
                objective: split.objective,
                blocks: split.blocks(&order),
                order,
                decodes: res.decodes + extra,
                history: res.history,
                rounds: split.rounds,
            }
        };
        Ok(match method.as_str() {
            "order" => {
                let o = read_order(&inst, order, prio)?;
                let ctx = OrderCtx::new(&inst, o);
                let split = match seg.as_str() {
                    "scan" => dp::solve(&ctx, &mut ScanCosts::new(&ctx), k),
                    "fenwick" | "naive" => {
                        let table = if seg == "fenwick" {
                            build_fenwick(&ctx)
                        } else {
                            build_naive(&ctx)
                        };
                        dp::solve(&ctx, &mut TableCosts::new(&table), k)
                    }
                    "reference" => {
                        let table = build_fenwick(&ctx);
                        dp::reference(ctx.n(), k, |l, r| ctx.seg_lb(l, r) + table.io(l, r))
                    }
                    other => return Err(bad(&format!("segment_costs: unknown value {other:?}"))),
                };
                Outcome {
                    objective: split.objective,
                    blocks: split.blocks(&ctx.order),
                    order: ctx.order.clone(),
                    decodes: 1,
                    history: vec![split.objective],
                    rounds: split.rounds,
                }
            }
            "brkga" => from_keys(
                search::brkga_islands(inst.n, &bp, islands, |c, cap| {
                    search::decode_capped(&inst, c, k, cap)
                }),
                0,
            ),
            "random" => from_keys(
                search::random_t(inst.n, samples, population, seed, |c, cap| {
                    search::decode_capped(&inst, c, k, cap)
                }),
                0,
            ),
            "mla" | "mla-weighted" => {
                let weighted = method == "mla-weighted";
                let res = search::brkga_islands(inst.n, &bp, islands, |c, _| {
                    search::arrangement_cost(&inst, c, weighted)
                });
                from_keys(res, 1)
            }
            other => return Err(bad(&format!("unknown method {other:?}"))),
        })
    });
    let out = result.map_err(|e| to_pyerr(py, e))?;
    let d = PyDict::new(py);
    d.set_item("objective", out.objective)?;
    d.set_item("order", out.order)?;
    d.set_item("blocks", out.blocks)?;
    d.set_item("decodes", out.decodes)?;
    d.set_item("history", out.history)?;
    d.set_item("rounds", out.rounds)?;
    Ok(d)
}

/// The exact optimum by the ideal DP with the MTPP block cost.
#[pyfunction]
#[pyo3(signature = (work, params, t_cost, t_prod, t_cons_off, t_cons, fast_memory, reserved, bandwidth,
                    stages, max_ideals, prune=true, upper_bound=None))]
#[allow(clippy::too_many_arguments)]
fn mtpp_exact<'py>(
    py: Python<'py>,
    work: PyReadonlyArray1<'py, f64>,
    params: PyReadonlyArray1<'py, f64>,
    t_cost: PyReadonlyArray1<'py, f64>,
    t_prod: PyReadonlyArray1<'py, i64>,
    t_cons_off: PyReadonlyArray1<'py, i64>,
    t_cons: PyReadonlyArray1<'py, i64>,
    fast_memory: f64,
    reserved: f64,
    bandwidth: Option<f64>,
    stages: usize,
    max_ideals: usize,
    prune: bool,
    upper_bound: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let raw = RawInstance::read(
        &work,
        &params,
        &t_cost,
        &t_prod,
        &t_cons_off,
        &t_cons,
        fast_memory,
        reserved,
        bandwidth,
    )?;
    let result = py.allow_threads(move || {
        let inst = raw.build()?;
        if stages == 0 {
            return Err(CoreError::InvalidInput("stages must be at least 1".into()));
        }
        let upper = upper_bound.unwrap_or(f64::INFINITY);
        if upper.is_nan() {
            return Err(CoreError::InvalidInput("upper_bound is NaN".into()));
        }
        exact::solve(&inst, stages.min(inst.n.max(1)), max_ideals, prune, upper)
    });
    let sol = result.map_err(|e| to_pyerr(py, e))?;
    let d = PyDict::new(py);
    d.set_item("objective", sol.objective)?;
    d.set_item("blocks", sol.blocks)?;
    d.set_item("ideals", sol.ideals)?;
    Ok(d)
}

/// The `n x n` table of tensor costs `io(l, r)` of one order (row-major), by the 2D Fenwick
/// construction of Lemma 4.1 or the naive builder.
#[pyfunction]
#[pyo3(signature = (work, params, t_cost, t_prod, t_cons_off, t_cons, order, builder="fenwick"))]
#[allow(clippy::too_many_arguments)]
fn mtpp_segment_io<'py>(
    py: Python<'py>,
    work: PyReadonlyArray1<'py, f64>,
    params: PyReadonlyArray1<'py, f64>,
    t_cost: PyReadonlyArray1<'py, f64>,
    t_prod: PyReadonlyArray1<'py, i64>,
    t_cons_off: PyReadonlyArray1<'py, i64>,
    t_cons: PyReadonlyArray1<'py, i64>,
    order: PyReadonlyArray1<'py, i64>,
    builder: &str,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let raw = RawInstance::read(
        &work,
        &params,
        &t_cost,
        &t_prod,
        &t_cons_off,
        &t_cons,
        f64::INFINITY,
        0.0,
        None,
    )?;
    let order = order.as_slice()?.to_vec();
    let builder = builder.to_string();
    let result = py.allow_threads(move || {
        let inst = raw.build()?;
        let o = read_order(&inst, Some(order), None)?;
        let ctx = OrderCtx::new(&inst, o);
        match builder.as_str() {
            "fenwick" => Ok(build_fenwick(&ctx).io),
            "naive" => Ok(build_naive(&ctx).io),
            other => Err(CoreError::InvalidInput(format!(
                "builder: unknown value {other:?}"
            ))),
        }
    });
    let v = result.map_err(|e| to_pyerr(py, e))?;
    Ok(v.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mtpp_slice, m)?)?;
    m.add_function(wrap_pyfunction!(mtpp_exact, m)?)?;
    m.add_function(wrap_pyfunction!(mtpp_segment_io, m)?)?;
    Ok(())
}
