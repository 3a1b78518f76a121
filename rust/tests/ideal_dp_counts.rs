//! What the ideal DP reports besides its optimum: the number of ideal pairs it visits (all of
//! them without pruning, fewer with it), the blocks behind the optimum when fewer devices
//! than available are used, and the size estimate that refuses a table over the memory budget.
//! This binary runs alone in its process and its tests one at a time, so setting
//! `STAGECUT_MEMORY_BUDGET` is safe here.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

mod common;

use common::chain;
use common::sum_cost::Sum;
use stagecut_core::dag::Dag;
use stagecut_core::ideal_dp::{solve, solve_with, BlockCost, Costs};
use stagecut_core::ideals::Ideals;
use stagecut_core::{Cancel, CoreError};

const INF: f64 = f64::INFINITY;

/// The tests of this binary one at a time: one of them lowers the memory budget.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn ideals_of(n: usize, edges: &[(u32, u32)]) -> Ideals {
    Ideals::enumerate(&Dag::from_edges(n, edges).unwrap(), 1 << 20).unwrap()
}

#[test]
fn without_pruning_every_pair_is_visited() {
    let _one = serial();
    // a chain of n nodes: ideals are its n + 1 prefixes, pairs J < I number n (n + 1) / 2
    let n = 10;
    let sol = solve(
        &ideals_of(n, &chain(n)),
        &Sum::new(vec![1.0; n]),
        3,
        1,
        false,
        INF,
    )
    .unwrap();
    assert_eq!((sol.ideals, sol.pairs), (n + 1, (n * (n + 1) / 2) as u64));
    // an antichain of 4: 16 ideals, 3^4 pairs J <= I, minus the 16 with J = I
    let sol = solve(
        &ideals_of(4, &[]),
        &Sum::new(vec![1.0; 4]),
        2,
        1,
        false,
        INF,
    )
    .unwrap();
    assert_eq!((sol.ideals, sol.pairs), (16, 81 - 16));
}

#[test]
fn pruning_cuts_pairs_of_a_wide_graph() {
    let _one = serial();
    // two chains of 8, unequal weights; with an upper bound at the optimum (the cost of a
    // known split, as the Python callers pass) the descent stops once a block's weight passes
    // it; without pruning every pair is visited. The row thresholds alone cut only blocks that
    // cannot fit (their bound reaches the one-device cell): none here.
    let mut edges = Vec::new();
    for i in 0..7u32 {
        edges.push((i, i + 1));
        edges.push((8 + i, 9 + i));
    }
    let w: Vec<f64> = (0..16).map(|i| 1.0 + (i * 7 % 5) as f64).collect();
    let ideals = ideals_of(16, &edges);
    for (acc, cpus) in [(3, 0), (3, 1), (0, 2), (2, 2)] {
        let full = solve(&ideals, &Sum::new(w.clone()), acc, cpus, false, INF).unwrap();
        // 9 x 9 ideals (a, b), each with (a + 1)(b + 1) - 1 strict sub-ideals
        assert_eq!(full.pairs, 45 * 45 - 81, "every pair");
        let rows = solve(&ideals, &Sum::new(w.clone()), acc, cpus, true, INF).unwrap();
        assert_eq!((rows.objective, rows.pairs), (full.objective, full.pairs));
        let cut = solve(
            &ideals,
            &Sum::new(w.clone()),
            acc,
            cpus,
            true,
            full.objective,
        )
        .unwrap();
        assert_eq!(cut.objective, full.objective);
        assert!(
            cut.pairs * 10 < full.pairs * 9,
            "{acc} accelerators, {cpus} CPUs: pruning visited {} of {} pairs",
            cut.pairs,
            full.pairs
        );
    }
    // mostly weightless nodes: a block holding all of an ideal's weight already costs as much
    // as the whole ideal on one device, the row's largest cell, so the row thresholds alone
    // cut the descent below it
    let w0: Vec<f64> = (0..16)
        .map(|i| if i == 5 || i == 12 { 4.0 } else { 0.0 })
        .collect();
    for (acc, cpus) in [(3, 0), (0, 2), (2, 1)] {
        let full = solve(&ideals, &Sum::new(w0.clone()), acc, cpus, false, INF).unwrap();
        let rows = solve(&ideals, &Sum::new(w0.clone()), acc, cpus, true, INF).unwrap();
        assert_eq!(rows.objective, full.objective);
        assert!(
            rows.pairs * 10 < full.pairs * 9,
            "{acc} accelerators, {cpus} CPUs: the thresholds cut {} of {} pairs",
            rows.pairs,
            full.pairs
        );
    }
}

#[test]
fn fewer_devices_than_available() {
    let _one = serial();
    // one heavy node: a second accelerator or the CPU cannot help; the plan is one block
    let sol = solve(&ideals_of(1, &[]), &Sum::new(vec![5.0]), 3, 2, true, INF).unwrap();
    assert_eq!(sol.objective, 5.0);
    assert_eq!(sol.blocks.len(), 1);
    assert!(sol.blocks[0].accelerator);
    // CPUs only: three times the weight, on one CPU per block
    let sol = solve(
        &ideals_of(3, &chain(3)),
        &Sum::new(vec![1.0, 1.0, 4.0]),
        0,
        2,
        true,
        INF,
    )
    .unwrap();
    assert_eq!(sol.objective, 12.0);
    assert!(sol.blocks.iter().all(|b| !b.accelerator) && sol.blocks.len() <= 2);
}

#[test]
fn the_table_estimate_meets_the_memory_budget() {
    let _one = serial();
    // a chain of 10: 11 ideals, levels of one, 3 accelerators and a CPU: 8 cells per ideal;
    // the estimate is (11 ideals + the widest level) x 8 cells x 16 bytes = 1536 bytes
    let ideals = ideals_of(10, &chain(10));
    let cost = Sum::new(vec![1.0; 10]);
    std::env::set_var("STAGECUT_MEMORY_BUDGET", "1536");
    assert!(solve(&ideals, &cost, 3, 1, true, INF).is_ok());
    std::env::set_var("STAGECUT_MEMORY_BUDGET", "1535");
    let err = solve(&ideals, &cost, 3, 1, true, INF).unwrap_err();
    assert!(matches!(err, CoreError::MemoryLimit(_)), "{err:?}");
    std::env::remove_var("STAGECUT_MEMORY_BUDGET");
}

#[test]
fn the_ideal_estimate_meets_the_memory_budget() {
    let _one = serial();
    // a chain of 99: 100 ideals, 99 immediate subs; estimated at 64 bytes per ideal and 8 per
    // sub as they are found (never n bits per ideal): 6,400 + 792 = 7,192 bytes
    let dag = Dag::from_edges(99, &chain(99)).unwrap();
    std::env::set_var("STAGECUT_MEMORY_BUDGET", "7192");
    assert_eq!(Ideals::enumerate(&dag, 1000).unwrap().len(), 100);
    std::env::set_var("STAGECUT_MEMORY_BUDGET", "7191");
    let err = Ideals::enumerate(&dag, 1000).unwrap_err();
    assert!(matches!(err, CoreError::MemoryLimit(_)), "{err:?}");
    assert!(
        err.to_string().contains("ideals of this 99-node graph"),
        "{err}"
    );
    std::env::remove_var("STAGECUT_MEMORY_BUDGET");
}

/// [`Sum`], interrupting `cancel` at the `at`-th push, and counting pushes minus pops.
struct Interrupting<'c> {
    inner: Sum,
    cancel: &'c Cancel,
    at: usize,
    pushes: AtomicUsize,
    balance: AtomicI64,
}

impl BlockCost for Interrupting<'_> {
    type State = Vec<f64>;
    fn new_state(&self) -> Vec<f64> {
        self.inner.new_state()
    }
    fn push(&self, st: &mut Vec<f64>, v: usize) {
        if self.pushes.fetch_add(1, Ordering::Relaxed) + 1 == self.at {
            self.cancel.interrupt();
        }
        self.balance.fetch_add(1, Ordering::Relaxed);
        self.inner.push(st, v);
    }
    fn pop(&self, st: &mut Vec<f64>, v: usize) {
        assert!(
            v < self.inner.weights.len(),
            "pop of node {v}, never pushed"
        );
        self.balance.fetch_sub(1, Ordering::Relaxed);
        self.inner.pop(st, v);
    }
    fn eval(&self, st: &Vec<f64>) -> Costs {
        self.inner.eval(st)
    }
}

#[test]
fn an_interrupt_in_a_row_undoes_every_push() {
    let _one = serial();
    // an antichain of 12: 4096 ideals, rows of up to 4095 pairs; the interrupt lands inside
    // the descent of some row, which stops at its next poll and pops what it pushed
    let ideals = ideals_of(12, &[]);
    for at in [1, 700, 5000, 40_000] {
        let cancel = Cancel::never();
        let cost = Interrupting {
            inner: Sum::new(vec![1.0; 12]),
            cancel: &cancel,
            at,
            pushes: AtomicUsize::new(0),
            balance: AtomicI64::new(0),
        };
        let err = solve_with(&ideals, &cost, 3, 1, false, INF, &cancel).unwrap_err();
        assert_eq!(err, CoreError::Interrupted, "interrupt at push {at}");
        assert_eq!(
            cost.balance.load(Ordering::Relaxed),
            0,
            "interrupt at push {at}"
        );
    }
}
