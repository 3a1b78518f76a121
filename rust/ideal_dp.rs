//! The generic DP over ideals (Tarnawski et al., "Efficient algorithms for device placement of
//! DNN graph operators", NeurIPS 2020, Section 5.1.1), shared by both throughput objectives:
//! the max-load cost of [`crate::throughput`] and the MTPP cost of [`crate::mtpp::exact`].
//!
//! `dp[c][f][I]` is the least possible max block cost when the nodes of ideal `I` are split
//! into contiguous blocks on at most `c` CPUs and `f` accelerators. A block is `I \ J` for a
//! sub-ideal `J` of `I`; the recurrence takes
//! `min over J of max(dp[c-1][f][J], cpu_cost(I \ J))` and likewise for accelerators, plus
//! "leave a device unused". The block cost is abstract ([`BlockCost`]); it is kept
//! incrementally while the sub-ideals of `I` are visited by canonical descent (see
//! [`crate::ideals`]), so no table of ideal pairs is ever stored: memory is
//! `O(ideals * (k + 1) * (l + 1))` plus the ideals themselves.
//!
//! Pruning: a block's *lower bound* (e.g. its compute time) never decreases as the block
//! grows, so once the bound reaches the worst current value of `I`'s row, no larger block can
//! improve it and that branch of the descent is cut. The answer is unaffected.
//!
//! With a finite `upper` and pruning, only the cells that can lie on a solution of cost
//! `<= upper` are computed ([`CellFilter`], from per-node lower bounds): an ideal with no such
//! cell is skipped, and a row's thresholds are taken over its useful cells only. On a chain of
//! `n` nodes and `k` devices that leaves `O(k)` descents of `O(n / k)` pairs instead of `n`.
//!
//! Levels of a few ideals (a chain has one per level) run on the calling thread with one block
//! state; wider levels run in parallel, the states taken from a pool (a state may hold arrays
//! of the graph's size, so none is allocated per level). Rows are written in place.
//!
//! Device counts are capped at the number of nodes (blocks are non-empty, so more devices
//! cannot be used); the tables are estimated against the [`crate::memory`] budget before they
//! are allocated, and the descent polls a [`Cancel`] token.

use std::sync::Mutex;

use rayon::prelude::*;

use crate::cancel::{Cancel, Stop};
use crate::error::CoreResult;
use crate::ideal_bounds::{CellFilter, FILTER_BYTES_PER_IDEAL};
use crate::ideals::Ideals;
use crate::memory;
use crate::numeric::INF;
use crate::progress::Phase;

/// Levels with fewer ideals than this run on the calling thread.
const PARALLEL_LEVEL: usize = 4;

/// Costs of the current block on each device kind, with monotone lower bounds.
#[derive(Debug, Clone, Copy)]
pub struct Costs {
    pub acc: f64,
    pub cpu: f64,
    /// Lower bound on `acc` for this block and every superset the descent can reach.
    pub acc_lb: f64,
    /// Likewise for `cpu`.
    pub cpu_lb: f64,
}

/// A block cost kept incrementally as the block grows and shrinks one node at a time.
pub trait BlockCost: Sync {
    type State: Send;
    fn new_state(&self) -> Self::State;
    /// Add node `v` (of the DAG the ideals were enumerated on) to the block.
    fn push(&self, st: &mut Self::State, v: usize);
    /// Undo the last `push(v)`.
    fn pop(&self, st: &mut Self::State, v: usize);
    fn eval(&self, st: &Self::State) -> Costs;
    /// Additive lower bounds `(accelerator, CPU)` of node `v` (`INF`: never fits that kind):
    /// every block's `acc_lb` is at least the sum of its nodes' first bounds, its `cpu_lb` at
    /// least the sum of the second. The default (zeros) is always valid and filters nothing.
    fn node_lb(&self, _v: usize) -> (f64, f64) {
        (0.0, 0.0)
    }
}

/// One block of the optimal split, on a device of the given kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub accelerator: bool,
    pub nodes: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct DpSolution {
    /// Optimal max block cost; `INF` when no split fits.
    pub objective: f64,
    /// Blocks in pipeline order (the first holds the sources).
    pub blocks: Vec<Block>,
    pub ideals: usize,
    /// Ideal pairs `(I, J)` whose block cost was evaluated (all of them when `prune` is off).
    pub pairs: u64,
}

/// How a DP cell got its value (back-pointer kinds).
const ACC_SKIP: u8 = 0;
const CPU_SKIP: u8 = 1;
const ACC_BLOCK: u8 = 2;
const CPU_BLOCK: u8 = 3;

/// The device counts and pruning options of one run; a row holds `(cpus + 1) * kf` cells,
/// cell `c * kf + f` for `c` CPUs and `f` accelerators.
#[derive(Debug, Clone, Copy)]
struct Shape {
    accelerators: usize,
    cpus: usize,
    /// `accelerators + 1`: the stride of one more CPU.
    kf: usize,
    width: usize,
    prune: bool,
    upper: f64,
}

/// One level of the canonical descent below an ideal: the sub-ideal `k` reached by removing
/// `added` (`u32::MAX` at the root), whose removals must have rank below `r`; `next` is the
/// next immediate sub of `k` to try.
struct Frame {
    k: u32,
    r: u32,
    next: usize,
    added: u32,
}

/// A useful cell of a row: its index, and whether it has a CPU (`c > 0`) and an accelerator
/// (`f > 0`) to take one more block.
type Cell = (u32, bool, bool);

/// A block state borrowed from a pool for one rayon task, given back when the task ends.
struct Pooled<'a, S> {
    pool: &'a Mutex<Vec<S>>,
    st: Option<S>,
}

impl<S> Drop for Pooled<'_, S> {
    fn drop(&mut self) {
        if let Some(s) = self.st.take() {
            self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        }
    }
}

/// Run the DP with `accelerators` accelerators and `cpus` CPUs.
///
/// With `prune`, a block stops growing once its monotone lower bound can no longer improve
/// the row, or exceeds `upper` (the cost of some known solution, or `INF`): no solution of
/// cost `<= upper` uses such a block, so the optimum is unchanged whenever `upper` is at
/// least the optimum. A result `<= upper` is always the optimum; a larger one (or `INF`)
/// means `upper` was below the optimum, and the DP must run again without it.
pub fn solve<C: BlockCost>(
    ideals: &Ideals,
    cost: &C,
    accelerators: usize,
    cpus: usize,
    prune: bool,
    upper: f64,
) -> CoreResult<DpSolution> {
    solve_with(
        ideals,
        cost,
        accelerators,
        cpus,
        prune,
        upper,
        &Cancel::never(),
    )
}

/// [`solve`], stopping with `Interrupted` / `DeadlineReached` when `cancel` says so.
pub fn solve_with<C: BlockCost>(
    ideals: &Ideals,
    cost: &C,
    accelerators: usize,
    cpus: usize,
    prune: bool,
    upper: f64,
    cancel: &Cancel,
) -> CoreResult<DpSolution> {
    // at most one non-empty block per device: more devices than nodes are never used
    let accelerators = accelerators.min(ideals.num_nodes());
    let cpus = cpus.min(ideals.num_nodes());
    let kf = accelerators + 1;
    let width = (cpus + 1) * kf;
    let filtered = prune && upper.is_finite();
    check_memory(ideals, width, filtered)?;
    let filter = filtered.then(|| CellFilter::new(ideals, cost, accelerators, cpus, upper));
    let shape = Shape {
        accelerators,
        cpus,
        kf,
        width,
        prune,
        upper,
    };
    let n_ideals = ideals.len();
    let mut dp = vec![INF; n_ideals * width];
    let mut back: Vec<(u32, u8)> = vec![(0, ACC_SKIP); n_ideals * width];
    for x in dp[..width].iter_mut() {
        *x = 0.0;
    }
    let mut pairs_total = 0u64;
    let mut st = cost.new_state();
    let mut cells = Vec::new();
    let pool: Mutex<Vec<C::State>> = Mutex::new(Vec::new());
    let filter = filter.as_ref();
    cancel.progress().begin(Phase::Dp, n_ideals as u64);
    cancel.progress().reach(1); // the empty ideal's row
    for level in ideals.levels().into_iter().skip(1) {
        cancel.check()?;
        cancel.progress().reach(level.start as u64);
        // every sub-ideal of the level has a smaller id: read rows below, write rows in place
        let (done, rest) = dp.split_at_mut(level.start * width);
        let rows = &mut rest[..level.len() * width];
        let brows = &mut back[level.start * width..level.end * width];
        if level.len() < PARALLEL_LEVEL {
            for (i, (row, brow)) in rows
                .chunks_mut(width)
                .zip(brows.chunks_mut(width))
                .enumerate()
            {
                let id = level.start + i;
                useful_cells(ideals, filter, &shape, id, &mut cells);
                let ctx = (ideals, cost, &*done, &shape, cancel);
                pairs_total += row_for(ctx, &mut st, id, &cells, row, brow)?;
            }
            continue;
        }
        let done = &*done;
        pairs_total += rows
            .par_chunks_mut(width)
            .zip(brows.par_chunks_mut(width))
            .enumerate()
            .map_init(
                || {
                    let st = pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let st = st.unwrap_or_else(|| cost.new_state());
                    (
                        Pooled {
                            pool: &pool,
                            st: Some(st),
                        },
                        Vec::new(),
                    )
                },
                |(p, cells), (i, (row, brow))| {
                    let id = level.start + i;
                    useful_cells(ideals, filter, &shape, id, cells);
                    let st = p.st.as_mut().expect("a pooled state");
                    row_for(
                        (ideals, cost, done, &shape, cancel),
                        st,
                        id,
                        cells,
                        row,
                        brow,
                    )
                },
            )
            .try_reduce(|| 0, |a, b| Ok(a + b))?;
    }
    cancel.progress().reach(n_ideals as u64);
    let full = ideals.full();
    let objective = dp[full * width + cpus * kf + accelerators];
    let blocks = if objective.is_finite() {
        blocks_from(ideals, &back, &shape)
    } else {
        Vec::new()
    };
    Ok(DpSolution {
        objective,
        blocks,
        ideals: n_ideals,
        pairs: pairs_total,
    })
}

/// Refuse (`MemoryLimit`) tables that would not fit: per ideal and cell, a value and a
/// back-pointer (16 bytes), plus the rows of the largest level (the estimate of when rows were
/// copied: kept as a margin), plus the [`CellFilter`]'s sums when one is used.
fn check_memory(ideals: &Ideals, width: usize, filtered: bool) -> CoreResult<()> {
    let widest = ideals.levels().iter().map(|l| l.len()).max().unwrap_or(1);
    let mut bytes = memory::product(&[ideals.len() + widest, width, 16]);
    if filtered {
        bytes += memory::product(&[ideals.len(), FILTER_BYTES_PER_IDEAL]);
    }
    let what = format!(
        "the DP table ({} ideals x {width} device combinations)",
        ideals.len()
    );
    memory::check(bytes, &what, "use fewer devices or lower max_ideals")
}

/// Follow the back-pointers from the full set with every device: the blocks in pipeline order.
fn blocks_from(ideals: &Ideals, back: &[(u32, u8)], shape: &Shape) -> Vec<Block> {
    let (width, kf) = (shape.width, shape.kf);
    let mut blocks = Vec::new();
    let (mut id, mut c, mut f) = (ideals.full(), shape.cpus, shape.accelerators);
    while id != 0 {
        let (sub, kind) = back[id * width + c * kf + f];
        match kind {
            ACC_SKIP => f -= 1,
            CPU_SKIP => c -= 1,
            _ => {
                let sub = sub as usize;
                let nodes = ideals.difference(id, sub);
                let accelerator = kind == ACC_BLOCK;
                blocks.push(Block { accelerator, nodes });
                if accelerator {
                    f -= 1
                } else {
                    c -= 1
                }
                id = sub;
            }
        }
    }
    blocks.reverse();
    blocks
}

/// The useful cells of ideal `id` (all but `(0, 0)` without a filter).
fn useful_cells(
    ideals: &Ideals,
    filter: Option<&CellFilter>,
    shape: &Shape,
    id: usize,
    out: &mut Vec<Cell>,
) {
    out.clear();
    for c in 0..=shape.cpus {
        for f in 0..=shape.accelerators {
            if (c > 0 || f > 0) && filter.is_none_or(|x| x.useful(ideals, id, c, f)) {
                out.push(((c * shape.kf + f) as u32, c > 0, f > 0));
            }
        }
    }
}

/// The largest value among the useful cells that can take one more accelerator block
/// (`f > 0`) and one more CPU block (`c > 0`): a block whose lower bound reaches it cannot
/// improve the row.
fn thresholds(cells: &[Cell], row: &[f64]) -> (f64, f64) {
    let mut t_acc = -INF;
    let mut t_cpu = -INF;
    for &(j, has_c, has_f) in cells {
        let x = row[j as usize];
        if has_f && x > t_acc {
            t_acc = x;
        }
        if has_c && x > t_cpu {
            t_cpu = x;
        }
    }
    (t_acc, t_cpu)
}

/// Try the block `I \ J` (costs `cs`, `J = sub` with DP row `prev`) as the last block of every
/// useful cell of `I`'s row; true if some cell improved.
fn relax(
    shape: &Shape,
    cells: &[Cell],
    row: &mut [f64],
    brow: &mut [(u32, u8)],
    prev: &[f64],
    cs: &Costs,
    sub: u32,
) -> bool {
    let kf = shape.kf;
    let mut changed = false;
    for &(j, has_c, has_f) in cells {
        let j = j as usize;
        if has_f && cs.acc < row[j] {
            let cand = prev[j - 1].max(cs.acc);
            if cand < row[j] {
                row[j] = cand;
                brow[j] = (sub, ACC_BLOCK);
                changed = true;
            }
        }
        if has_c && cs.cpu < row[j] {
            let cand = prev[j - kf].max(cs.cpu);
            if cand < row[j] {
                row[j] = cand;
                brow[j] = (sub, CPU_BLOCK);
                changed = true;
            }
        }
    }
    changed
}

/// "Leave a device unused": a cell is no worse than the cell with one device less.
fn leave_unused(shape: &Shape, row: &mut [f64], brow: &mut [(u32, u8)], id: usize) {
    let kf = shape.kf;
    for c in 0..=shape.cpus {
        for f in 0..=shape.accelerators {
            let j = c * kf + f;
            if f > 0 && row[j - 1] < row[j] {
                row[j] = row[j - 1];
                brow[j] = (id as u32, ACC_SKIP);
            }
            if c > 0 && row[j - kf] < row[j] {
                row[j] = row[j - kf];
                brow[j] = (id as u32, CPU_SKIP);
            }
        }
    }
}

/// What every row reads: the ideals, the cost, the rows done so far, the shape, the token.
type Ctx<'a, C> = (&'a Ideals, &'a C, &'a [f64], &'a Shape, &'a Cancel);

/// Fill the DP row of ideal `id` (`row`, `brow`: all `INF` / skips on entry) over its useful
/// `cells`: canonical descent over its sub-ideals `J`, the block `I \ J` growing one node at a
/// time in `st`, cut by the pruning rule of [`solve`]. Returns the pairs visited; no descent at
/// all when no cell is useful.
fn row_for<C: BlockCost>(
    (ideals, cost, dp, shape, cancel): Ctx<'_, C>,
    st: &mut C::State,
    id: usize,
    cells: &[Cell],
    row: &mut [f64],
    brow: &mut [(u32, u8)],
) -> Result<u64, Stop> {
    let width = shape.width;
    brow.fill((id as u32, ACC_SKIP));
    let mut pairs = 0u64;
    let (mut t_acc, mut t_cpu) = (INF, INF);
    let mut tick = cancel.ticker(256);
    let mut stack = Vec::new();
    if !cells.is_empty() {
        stack.push(Frame {
            k: id as u32,
            r: u32::MAX,
            next: 0,
            added: u32::MAX,
        });
    }
    while let Some(top) = stack.last_mut() {
        let subs = ideals.immediate_subs(top.k as usize);
        while top.next < subs.len() && ideals.rank(subs[top.next].0 as usize) >= top.r {
            top.next += 1;
        }
        if top.next == subs.len() {
            let added = top.added;
            stack.pop();
            if added != u32::MAX {
                cost.pop(st, added as usize);
            }
            continue;
        }
        let (v, sub) = subs[top.next];
        top.next += 1;
        if let Err(stop) = tick.tick() {
            // leave the state as it was: undo the pushes of the frames still open
            for f in stack.iter().rev() {
                if f.added != u32::MAX {
                    cost.pop(st, f.added as usize);
                }
            }
            return Err(stop);
        }
        cost.push(st, v as usize);
        pairs += 1;
        let cs = cost.eval(st);
        let prev = &dp[sub as usize * width..(sub as usize + 1) * width];
        if relax(shape, cells, row, brow, prev, &cs, sub) {
            (t_acc, t_cpu) = thresholds(cells, row);
        }
        let upper = shape.upper;
        if shape.prune
            && (cs.acc_lb >= t_acc || cs.acc_lb > upper)
            && (cs.cpu_lb >= t_cpu || cs.cpu_lb > upper)
        {
            cost.pop(st, v as usize);
            continue;
        }
        stack.push(Frame {
            k: sub,
            r: ideals.rank(v as usize),
            next: 0,
            added: v,
        });
    }
    leave_unused(shape, row, brow, id);
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::Dag;

    /// Block cost = sum of node weights on an accelerator, twice that on a CPU.
    struct Additive(Vec<f64>);

    impl BlockCost for Additive {
        type State = Vec<f64>;
        fn new_state(&self) -> Vec<f64> {
            vec![0.0]
        }
        fn push(&self, st: &mut Vec<f64>, v: usize) {
            let last = *st.last().unwrap();
            st.push(last + self.0[v]);
        }
        fn pop(&self, st: &mut Vec<f64>, _v: usize) {
            st.pop();
        }
        fn eval(&self, st: &Vec<f64>) -> Costs {
            let s = *st.last().unwrap();
            Costs {
                acc: s,
                cpu: 2.0 * s,
                acc_lb: s,
                cpu_lb: 2.0 * s,
            }
        }
    }

    #[test]
    fn chain_split_is_the_best_contiguous_split() {
        // a chain 0 -> 1 -> 2 -> 3: blocks are intervals
        let w = vec![4.0, 1.0, 3.0, 2.0];
        let dag = Dag::from_edges(4, &[(0, 1), (1, 2), (2, 3)]).unwrap();
        let ideals = Ideals::enumerate(&dag, 100).unwrap();
        let cost = Additive(w);
        for prune in [false, true] {
            let two = solve(&ideals, &cost, 2, 0, prune, INF).unwrap();
            assert_eq!(two.objective, 5.0);
            let nodes: Vec<Vec<usize>> = two.blocks.iter().map(|b| b.nodes.clone()).collect();
            assert_eq!(nodes, vec![vec![0, 1], vec![2, 3]]);
            assert!(two.blocks.iter().all(|b| b.accelerator));
            // one accelerator and one CPU (which doubles its block): the CPU takes a light end
            let mixed = solve(&ideals, &cost, 1, 1, prune, INF).unwrap();
            assert_eq!(mixed.objective, 8.0);
            let cpu: Vec<&Block> = mixed.blocks.iter().filter(|b| !b.accelerator).collect();
            assert_eq!(cpu.len(), 1);
            assert!(cpu[0].nodes == vec![0] || cpu[0].nodes == vec![3]);
        }
        // no device at all: infeasible
        assert_eq!(
            solve(&ideals, &cost, 0, 0, true, INF).unwrap().objective,
            INF
        );
        // device counts past the node count are capped (never an allocation per device)
        let four = solve(&ideals, &cost, 4, 0, true, INF).unwrap().objective;
        assert_eq!(four, 4.0);
        let huge = solve(&ideals, &cost, usize::MAX, usize::MAX, true, INF).unwrap();
        assert_eq!(huge.objective, four);
        assert_eq!(huge.blocks.len(), 4);
    }

    #[test]
    fn a_stopped_dp_reports_why() {
        let n = 12;
        let dag = Dag::from_edges(n, &[]).unwrap(); // 4096 ideals
        let ideals = Ideals::enumerate(&dag, 1 << 20).unwrap();
        let cost = Additive(vec![1.0; n]);
        let c = Cancel::never();
        c.interrupt();
        let err = solve_with(&ideals, &cost, 3, 0, false, INF, &c).unwrap_err();
        assert_eq!(err, crate::error::CoreError::Interrupted);
        let d = Cancel::with_limit(Some(std::time::Duration::ZERO));
        let err = solve_with(&ideals, &cost, 3, 0, false, INF, &d).unwrap_err();
        assert_eq!(err, crate::error::CoreError::DeadlineReached);
        // and ideal enumeration stops too
        let err = Ideals::enumerate_with(&dag, 1 << 20, &c).unwrap_err();
        assert_eq!(err, crate::error::CoreError::Interrupted);
    }
}
