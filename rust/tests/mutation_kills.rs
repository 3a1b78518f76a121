//! Tests written to kill the mutants that cargo-mutants found alive (issue 11, item 4; see
//! benches/MUTATION.md). Each test names the mutant(s) it kills; each one fails on them.

use stagecut_core::mtpp::fenwick::Fenwick2D;
use stagecut_core::training::{knapsack_exact, knapsack_greedy};

/// Every cell of a `side x side` Fenwick tree, by point query and by materialization.
fn cells(fw: &Fenwick2D, side: usize) -> (Vec<f64>, Vec<f64>) {
    let got: Vec<f64> = (0..side * side)
        .map(|c| fw.get(c / side, c % side))
        .collect();
    (got, fw.clone().materialize())
}

/// An empty rectangle (`i0 > i1` or `j0 > j1`, inside the table) adds nothing. The solvers
/// never ask for one, so without this test `add_rect`'s guard could lose either emptiness
/// check (`||` replaced with `&&` in `Fenwick2D::add_rect`) and still pass: the corner
/// updates of an inverted range then leave `x` on the cells between `i1 + 1` and `i0`.
#[test]
fn fenwick_empty_rectangles_add_nothing() {
    let side = 6;
    for (i0, i1, j0, j1) in [
        (3, 1, 0, 4), // rows inverted
        (0, 4, 3, 1), // columns inverted
        (4, 2, 5, 0), // both inverted
        (5, 4, 0, 0),
        (1, 1, 2, 1),
    ] {
        let mut fw = Fenwick2D::new(side);
        fw.add_rect(i0, i1, j0, j1, 7.0);
        let (got, dense) = cells(&fw, side);
        assert!(
            got.iter().all(|&x| x == 0.0),
            "rect ({i0}, {i1}, {j0}, {j1}): point queries {got:?}"
        );
        assert!(
            dense.iter().all(|&x| x == 0.0),
            "rect ({i0}, {i1}, {j0}, {j1}): table {dense:?}"
        );
        // and a real rectangle next to it is still exact
        fw.add_rect(1, 2, 2, 3, 1.5);
        let (got, dense) = cells(&fw, side);
        for c in 0..side * side {
            let (i, j) = (c / side, c % side);
            let want = if (1..=2).contains(&i) && (2..=3).contains(&j) {
                1.5
            } else {
                0.0
            };
            assert_eq!(got[c], want, "({i}, {j})");
            assert_eq!(dense[c], want, "({i}, {j})");
        }
    }
}

/// Ties between a node's fastest TMPCs go to the first one listed, in the greedy as in the
/// exact knapsack (which tries options by value, then by position, and keeps only strictly
/// better ones). Kills `replace > with >= in knapsack_greedy` (the fastest-option scan): it
/// takes the last of the tied options, so the two solvers return different plans.
#[test]
fn knapsack_ties_go_to_the_first_fastest_option() {
    let items = vec![
        vec![(1.0, 10.0, 7), (1.0, 4.0, 8), (3.0, 1.0, 9)],
        vec![(2.0, 3.0, 4), (2.0, 3.0, 5)],
    ];
    let want = (3.0, vec![7, 4]);
    assert_eq!(knapsack_greedy(&items, 100.0), Some(want.clone()));
    assert_eq!(knapsack_exact(&items, 100.0), Some(want));
}

/// The greedy's hull walk: from each option it steps to the option with the least cost per
/// byte saved, on equal ratios to the one saving the most (collinear options are not hull
/// vertices), and a saving of at most `EPS` is no step. Kills the mutants of that choice
/// (`knapsack_greedy`, line 55: `|| with &&`, `< with ==`, `< with >`, `< with <=`,
/// `&& with ||`, `== with !=`, `< with ==` on the memories; line 53: `> with >=`).
#[test]
fn knapsack_greedy_walks_the_lower_hull() {
    let greedy = |items: Vec<Vec<(f64, f64, usize)>>, cap: f64| knapsack_greedy(&items, cap);
    // node 0: from A the cheapest step per byte is C (0.1), not the first saving B (4); node 1
    // steps at 0.05. Shaving 10 bytes takes node 1's step alone.
    let two = vec![
        vec![(1.0, 10.0, 0), (5.0, 9.0, 1), (2.0, 0.0, 2)],
        vec![(0.0, 10.0, 3), (0.5, 0.0, 4)],
    ];
    assert_eq!(greedy(two, 10.0), Some((1.5, vec![0, 4])));
    // a worse ratio never wins for saving more memory: B (0.2 per byte), then C
    let worse = vec![vec![(0.0, 10.0, 0), (1.0, 5.0, 1), (10.0, 0.0, 2)]];
    assert_eq!(greedy(worse, 5.0), Some((1.0, vec![1])));
    // B and C are collinear from A (0.2 per byte): the walk goes to C, listed last or first
    let last = vec![vec![(0.0, 10.0, 0), (1.0, 5.0, 1), (2.0, 0.0, 2)]];
    assert_eq!(greedy(last, 5.0), Some((2.0, vec![2])));
    let first = vec![vec![(0.0, 10.0, 0), (2.0, 0.0, 2), (1.0, 5.0, 1)]];
    assert_eq!(greedy(first, 5.0), Some((2.0, vec![2])));
    // 1e-9 bytes over the cap is within tolerance: no step
    let eps = vec![vec![(0.0, 1e-9, 0), (1.0, 0.0, 1)]];
    assert_eq!(greedy(eps, 0.0), Some((0.0, vec![0])));
}
