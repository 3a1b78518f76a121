//! Bindings for MTPP / SliceGraph: the `_core.MtppInstance` class and `_core.mtpp_slice`,
//! `_core.mtpp_exact` and `_core.mtpp_segment_io`, which take one. See `stagecut.mtpp`.
//!
//! An `MtppInstance` is built once from flat arrays: per-unit `work`, `params`; per-tensor
//! `t_cost`, `t_prod`, and the consumers in CSR form (`t_cons_off`, `t_cons`); plus the memory
//! model (`fast_memory`, `reserved`, `bandwidth`; `bandwidth=None` makes memory a hard limit).
//! It is validated once, at construction, and immutable afterwards.
//!
//! The three functions run through [`run`] (interruptible, with an optional `time_limit`), and
//! refuse requests whose memory (populations, segment tables, DP rows) passes the budget.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{owned, run};
use crate::cancel::{Cancel, Stop};
use crate::error::{CoreError, CoreResult};
use crate::ideal_dp;
use crate::ideals::Ideals;
use crate::memory;
use crate::mtpp::exact::MtppBlockCost;
use crate::mtpp::fenwick::{build_fenwick, build_naive, needs_compensation};
use crate::mtpp::kahn::kahn;
use crate::mtpp::search::{self, BrkgaParams};
use crate::mtpp::slicegraph::{self, ScanCosts, Split, TableCosts};
use crate::mtpp::{Instance, Memory, OrderCtx, Tensor};
use crate::pool;
use crate::progress::Phase;

/// The instance arrays as read from Python, before validation.
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
    if x < 0 || x as u64 >= n as u64 || x > u32::MAX as i64 {
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
            work: owned(work)?,
            params: owned(params)?,
            t_cost: owned(t_cost)?,
            t_prod: owned(t_prod)?,
            t_cons_off: owned(t_cons_off)?,
            t_cons: owned(t_cons)?,
            memory: Memory {
                fast: fast_memory,
                reserved,
                bandwidth,
            },
        })
    }

    /// Validate the tensor CSR and build the [`Instance`] (which validates the rest).
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

/// A validated MTPP instance (see the module docs), shared by the three functions below.
#[pyclass(frozen, module = "stagecut._core")]
pub struct MtppInstance {
    inst: Instance,
}

#[pymethods]
impl MtppInstance {
    #[new]
    #[pyo3(signature = (work, params, t_cost, t_prod, t_cons_off, t_cons, fast_memory, reserved, bandwidth))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        work: PyReadonlyArray1<'_, f64>,
        params: PyReadonlyArray1<'_, f64>,
        t_cost: PyReadonlyArray1<'_, f64>,
        t_prod: PyReadonlyArray1<'_, i64>,
        t_cons_off: PyReadonlyArray1<'_, i64>,
        t_cons: PyReadonlyArray1<'_, i64>,
        fast_memory: f64,
        reserved: f64,
        bandwidth: Option<f64>,
    ) -> PyResult<MtppInstance> {
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
        let inst = py.allow_threads(move || raw.build())?;
        Ok(MtppInstance { inst })
    }

    /// Number of units.
    #[getter]
    fn num_units(&self) -> usize {
        self.inst.n
    }

    /// Number of tensors with a consumer outside their producing unit.
    #[getter]
    fn num_tensors(&self) -> usize {
        self.inst.num_tensors()
    }

    fn __repr__(&self) -> String {
        format!(
            "MtppInstance(num_units={}, num_tensors={})",
            self.inst.n,
            self.inst.num_tensors()
        )
    }
}

/// The topological order to split: `order` (checked), or Kahn's order by `prio`, or the
/// smallest-index-first topological order.
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

/// The number of blocks to use: `stages` (at least 1), at most one per unit (blocks are
/// non-empty, so more never helps and would only cost memory).
fn block_count(inst: &Instance, stages: usize) -> CoreResult<usize> {
    if stages == 0 {
        return Err(CoreError::InvalidInput("stages must be at least 1".into()));
    }
    Ok(stages.min(inst.n.max(1)))
}

/// `mtpp_slice`'s `method`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Method {
    /// SliceGraph on one given order.
    Order,
    Brkga,
    Random,
    /// BRKGA on the (weighted) linear-arrangement cost, then one SliceGraph.
    Mla {
        weighted: bool,
    },
}

impl Method {
    fn parse(s: &str) -> CoreResult<Method> {
        match s {
            "order" => Ok(Method::Order),
            "brkga" => Ok(Method::Brkga),
            "random" => Ok(Method::Random),
            "mla" => Ok(Method::Mla { weighted: false }),
            "mla-weighted" => Ok(Method::Mla { weighted: true }),
            other => Err(CoreError::InvalidArgument(format!(
                "unknown method {other:?}"
            ))),
        }
    }
}

/// How the SliceGraph DP of `method="order"` gets its segment costs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum SegCostKind {
    Scan,
    Fenwick,
    Naive,
    /// The plain `O(n^2 k)` DP over the Fenwick table.
    Reference,
}

impl SegCostKind {
    fn parse(s: &str) -> CoreResult<SegCostKind> {
        match s {
            "scan" => Ok(SegCostKind::Scan),
            "fenwick" => Ok(SegCostKind::Fenwick),
            "naive" => Ok(SegCostKind::Naive),
            "reference" => Ok(SegCostKind::Reference),
            other => Err(CoreError::InvalidArgument(format!(
                "segment_costs: unknown value {other:?}"
            ))),
        }
    }
}

/// Refuse an `n x n` segment table (built with a Fenwick tree of the same size when `fenwick`,
/// twice that when the tree must be compensated) that would pass the memory budget.
fn check_table_size(inst: &Instance, n: usize, fenwick: bool) -> CoreResult<()> {
    let tables = match (fenwick, fenwick && needs_compensation(inst)) {
        (false, _) => 1,
        (true, false) => 2,
        (true, true) => 3,
    };
    memory::check(
        memory::product(&[n + 1, n + 1, 8 * tables]),
        &format!("the {n} x {n} segment table"),
        "use segment_costs='scan' (no table)",
    )
}

/// Refuse a search whose population or decoders would pass the memory budget: BRKGA keeps
/// about three populations of `n` keys; random-T a batch of seeds; every decode in flight a
/// SliceGraph table of `(n + 1) x (k + 1)` values.
fn check_search_memory(n: usize, k: usize, method: Method, population: usize) -> CoreResult<()> {
    let threads = pool::get()?.current_num_threads();
    let in_flight = match method {
        Method::Order => 1,
        _ => population.clamp(1, threads),
    };
    let decoders = memory::product(&[in_flight, n + 1, k + 1, 8]);
    let (keys, what) = match method {
        Method::Random => (memory::product(&[population, 16]), "random-T batches"),
        Method::Order => (0.0, "SliceGraph"),
        _ => (
            memory::product(&[3, population, n, 8]),
            "the BRKGA population",
        ),
    };
    let what = format!("{what} ({population} x {n} units, {k} stages)");
    memory::check(keys + decoders, &what, "lower population or devices")
}

/// What `mtpp_slice` returns.
struct Outcome {
    objective: f64,
    order: Vec<usize>,
    blocks: Vec<Vec<usize>>,
    decodes: u64,
    history: Vec<f64>,
    rounds: u32,
    /// The search stopped at its time limit (the rest is its best so far).
    timed_out: bool,
}

/// SliceGraph on one order with the chosen segment costs.
fn split_order(
    inst: &Instance,
    k: usize,
    order: Vec<usize>,
    seg: SegCostKind,
    cancel: &Cancel,
) -> CoreResult<Outcome> {
    let ctx = OrderCtx::new(inst, order);
    if seg != SegCostKind::Scan {
        check_table_size(inst, ctx.n(), seg != SegCostKind::Naive)?;
    }
    let split = match seg {
        SegCostKind::Scan => slicegraph::solve_with(&ctx, &mut ScanCosts::new(&ctx), k, cancel),
        SegCostKind::Fenwick | SegCostKind::Naive => {
            let table = if seg == SegCostKind::Fenwick {
                build_fenwick(&ctx)
            } else {
                build_naive(&ctx)
            };
            cancel.check()?;
            slicegraph::solve_with(&ctx, &mut TableCosts::new(&table), k, cancel)
        }
        SegCostKind::Reference => {
            let table = build_fenwick(&ctx);
            let cost = |l, r| ctx.seg_lb(l, r) + table.io(l, r);
            slicegraph::reference_with(ctx.n(), k, cost, cancel)
        }
    }?;
    Ok(Outcome {
        objective: split.objective,
        blocks: split.blocks(&ctx.order),
        order: ctx.order.clone(),
        decodes: 1,
        history: vec![split.objective],
        rounds: split.rounds,
        timed_out: false,
    })
}

/// A search over orders (`method` other than `Order`), then the split of its best order.
/// Stopped by its deadline, the search's best so far (none if nothing was decoded in time);
/// interrupted, an error.
fn search_orders(
    inst: &Instance,
    k: usize,
    method: Method,
    bp: &BrkgaParams,
    islands: usize,
    samples: u64,
    cancel: &Cancel,
) -> CoreResult<Outcome> {
    // every decode counts as progress, and its cost (exact when at most the cap) as a candidate
    // best: the least of them is the search's best
    let progress = cancel.progress();
    let decode = |c: &[f64], cap: f64| {
        let f = search::decode_capped_with(inst, c, k, cap, cancel);
        progress.offer_best(f);
        progress.advance(1);
        f
    };
    let (res, extra) = match method {
        Method::Brkga | Method::Order => {
            progress.begin(Phase::Brkga, search::planned_decodes(bp, islands));
            let r = search::brkga_islands(inst.n, bp, islands, decode, cancel);
            (r, 0)
        }
        Method::Random => {
            progress.begin(Phase::Random, samples.max(1));
            let r = search::random_t_with(inst.n, samples, bp.population, bp.seed, decode, cancel);
            (r, 0)
        }
        Method::Mla { weighted } => {
            progress.begin(Phase::Mla, search::planned_decodes(bp, islands));
            let cost = |c: &[f64], _: f64| {
                progress.advance(1);
                search::arrangement_cost(inst, c, weighted)
            };
            (search::brkga_islands(inst.n, bp, islands, cost, cancel), 1)
        }
    };
    if res.stopped == Some(Stop::Interrupted) {
        return Err(CoreError::Interrupted);
    }
    let timed_out = res.stopped == Some(Stop::Deadline);
    if timed_out && !res.best.is_finite() {
        return Ok(Outcome {
            objective: f64::INFINITY,
            order: Vec::new(),
            blocks: Vec::new(),
            decodes: res.decodes,
            history: res.history,
            rounds: 0,
            timed_out,
        });
    }
    // the best order's split (one more decode, past the deadline if need be: it is the answer)
    let (order, split): (Vec<usize>, Split) = search::decode(inst, &res.best_keys, k);
    Ok(Outcome {
        objective: split.objective,
        blocks: split.blocks(&order),
        order,
        decodes: res.decodes + extra,
        history: res.history,
        rounds: split.rounds,
        timed_out,
    })
}

/// SliceGraph on one order, or a search over orders. See `stagecut.mtpp.slice_graph`.
#[pyfunction]
#[pyo3(signature = (instance, stages, method, seed=0, population=100, generations=100, elite=0.2,
                    mutant=0.1, rho=0.7, max_decodes=None, samples=1000, islands=1, order=None,
                    priorities=None, segment_costs="scan", time_limit=None))]
#[allow(clippy::too_many_arguments)]
fn mtpp_slice<'py>(
    py: Python<'py>,
    instance: &Bound<'py, MtppInstance>,
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
    time_limit: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let inst = &instance.get().inst;
    let order = order.map(|o| owned(&o)).transpose()?;
    let prio = priorities.map(|p| owned(&p)).transpose()?;
    let method = Method::parse(method)?;
    let seg = SegCostKind::parse(segment_costs)?;
    let bp = BrkgaParams {
        population,
        generations,
        elite,
        mutant,
        rho,
        max_decodes,
        seed,
    };
    if !(0.0..1.0).contains(&elite)
        || !(0.0..1.0).contains(&mutant)
        || elite + mutant > 1.0
        || !(0.0..=1.0).contains(&rho)
    {
        let msg = "BRKGA: need 0 < elite, 0 <= mutant, elite + mutant <= 1, 0 <= rho <= 1";
        return Err(CoreError::InvalidArgument(msg.into()).into());
    }
    let k = block_count(inst, stages)?;
    check_search_memory(inst.n, k, method, population)?;
    let out = run(py, time_limit, move |cancel| match method {
        Method::Order => split_order(inst, k, read_order(inst, order, prio)?, seg, cancel),
        _ => search_orders(inst, k, method, &bp, islands, samples, cancel),
    })?;
    let d = PyDict::new(py);
    d.set_item("objective", out.objective)?;
    d.set_item("order", out.order)?;
    d.set_item("blocks", out.blocks)?;
    d.set_item("decodes", out.decodes)?;
    d.set_item("history", out.history)?;
    d.set_item("rounds", out.rounds)?;
    d.set_item("time_limit_reached", out.timed_out)?;
    Ok(d)
}

/// The exact optimum by the ideal DP with the MTPP block cost (`DeadlineReached` past
/// `time_limit` seconds).
#[pyfunction]
#[pyo3(signature = (instance, stages, max_ideals, prune=true, upper_bound=None, time_limit=None))]
fn mtpp_exact<'py>(
    py: Python<'py>,
    instance: &Bound<'py, MtppInstance>,
    stages: usize,
    max_ideals: usize,
    prune: bool,
    upper_bound: Option<f64>,
    time_limit: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let inst = &instance.get().inst;
    let upper = upper_bound.unwrap_or(f64::INFINITY);
    if upper.is_nan() {
        return Err(CoreError::InvalidArgument("upper_bound is NaN".into()).into());
    }
    let k = block_count(inst, stages)?;
    let sol = run(py, time_limit, move |cancel| {
        // exact::solve, polling `cancel`
        let ideals = Ideals::enumerate_with(&inst.dag, max_ideals, cancel)?;
        let cost = MtppBlockCost::new(inst);
        ideal_dp::solve_with(&ideals, &cost, k, 0, prune, upper, cancel)
    })?;
    let blocks: Vec<Vec<usize>> = sol.blocks.into_iter().map(|b| b.nodes).collect();
    let d = PyDict::new(py);
    d.set_item("objective", sol.objective)?;
    d.set_item("blocks", blocks)?;
    d.set_item("ideals", sol.ideals)?;
    Ok(d)
}

/// The `n x n` table of tensor costs `io(l, r)` of one order (row-major), by the 2D Fenwick
/// construction of Lemma 4.1 or the naive builder.
#[pyfunction]
#[pyo3(signature = (instance, order, builder="fenwick"))]
fn mtpp_segment_io<'py>(
    py: Python<'py>,
    instance: &Bound<'py, MtppInstance>,
    order: PyReadonlyArray1<'py, i64>,
    builder: &str,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let inst = &instance.get().inst;
    let order = owned(&order)?;
    let naive = match builder {
        "fenwick" => false,
        "naive" => true,
        other => {
            let msg = format!("builder: unknown value {other:?}");
            return Err(CoreError::InvalidArgument(msg).into());
        }
    };
    let io = run(py, None, move |_| -> CoreResult<Vec<f64>> {
        let ctx = OrderCtx::new(inst, read_order(inst, Some(order), None)?);
        check_table_size(inst, ctx.n(), !naive)?;
        Ok(if naive {
            build_naive(&ctx).io
        } else {
            build_fenwick(&ctx).io
        })
    })?;
    Ok(io.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MtppInstance>()?;
    m.add_function(wrap_pyfunction!(mtpp_slice, m)?)?;
    m.add_function(wrap_pyfunction!(mtpp_exact, m)?)?;
    m.add_function(wrap_pyfunction!(mtpp_segment_io, m)?)?;
    Ok(())
}
