//! The per-stage TMPC choice of Piper: a multiple-choice knapsack (one TMPC per node, total
//! memory under the device limit, least total cost). [`knapsack_greedy`] is the paper's
//! bang-per-buck heuristic, [`knapsack_exact`] a branch and bound for small stages. Both return
//! `(total value, chosen TMPC id per node)`, or `None` when no choice fits.
//!
//! These are the generic (from scratch) solvers; the incremental fast path of the common
//! two-TMPC case lives in `training::work`.

use crate::numeric::{EPS, INF};

/// One option of one node: `(value, memory, TMPC id)`.
pub type Choice = (f64, f64, usize);

/// Knapsack items of a stage: per node, its options.
pub type Items = Vec<Vec<Choice>>;

/// The authors' fast greedy, generalized to any number of TMPCs per node by walking each node's
/// lower convex hull from its fastest TMPC: start from the fastest TMPC everywhere; if that fits,
/// done; if even the lowest-memory choice does not fit, infeasible; else apply memory-saving
/// steps by increasing cost per byte saved (ties by node) until the memory fits.
pub fn knapsack_greedy(items: &[Vec<Choice>], cap: f64) -> Option<(f64, Vec<usize>)> {
    let n = items.len();
    let mut h: Vec<usize> = vec![0; n];
    for (i, it) in items.iter().enumerate() {
        for l in 1..it.len() {
            if it[h[i]].0 > it[l].0 {
                h[i] = l;
            }
        }
    }
    let mem_fast: f64 = (0..n).map(|i| items[i][h[i]].1).sum();
    if mem_fast <= cap {
        let v = (0..n).map(|i| items[i][h[i]].0).sum();
        return Some((v, (0..n).map(|i| items[i][h[i]].2).collect()));
    }
    let low: f64 = items
        .iter()
        .map(|it| it.iter().map(|x| x.1).fold(INF, f64::min))
        .sum();
    if low > cap {
        return None;
    }
    // hull steps: (ratio, node, step index, target option)
    let mut steps: Vec<(f64, usize, usize, usize)> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let mut cur = h[i];
        let mut k = 0;
        loop {
            // next hull point: among options with less memory, the least cost per byte saved
            let mut best: Option<(f64, usize)> = None;
            for (l, x) in it.iter().enumerate() {
                let sav = it[cur].1 - x.1;
                if sav > EPS {
                    let r = (x.0 - it[cur].0) / sav;
                    if best.is_none_or(|(br, bl)| r < br || (r == br && x.1 < it[bl].1)) {
                        best = Some((r, l));
                    }
                }
            }
            match best {
                Some((r, l)) => {
                    steps.push((r, i, k, l));
                    cur = l;
                    k += 1;
                }
                None => break,
            }
        }
    }
    steps.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut shave = mem_fast - cap;
    for &(_, i, _, l) in &steps {
        shave -= items[i][h[i]].1 - items[i][l].1;
        h[i] = l;
        if shave < EPS {
            break;
        }
    }
    let v = (0..n).map(|i| items[i][h[i]].0).sum();
    Some((v, (0..n).map(|i| items[i][h[i]].2).collect()))
}

/// Exact multiple-choice knapsack by depth-first branch and bound (small stages only).
pub fn knapsack_exact(items: &[Vec<Choice>], cap: f64) -> Option<(f64, Vec<usize>)> {
    let n = items.len();
    // suffix minima of value and memory
    let mut min_v = vec![0.0; n + 1];
    let mut min_m = vec![0.0; n + 1];
    for i in (0..n).rev() {
        min_v[i] = min_v[i + 1] + items[i].iter().map(|x| x.0).fold(INF, f64::min);
        min_m[i] = min_m[i + 1] + items[i].iter().map(|x| x.1).fold(INF, f64::min);
    }
    if min_m[0] > cap {
        return None;
    }
    struct S<'b> {
        items: &'b [Vec<Choice>],
        min_v: Vec<f64>,
        min_m: Vec<f64>,
        cap: f64,
        best: f64,
        best_pick: Vec<usize>,
        pick: Vec<usize>,
    }
    fn rec(s: &mut S<'_>, i: usize, val: f64, mem: f64) {
        if i == s.items.len() {
            if val < s.best {
                s.best = val;
                s.best_pick.clone_from(&s.pick);
            }
            return;
        }
        let mut idx: Vec<usize> = (0..s.items[i].len()).collect();
        idx.sort_by(|&a, &b| s.items[i][a].0.total_cmp(&s.items[i][b].0).then(a.cmp(&b)));
        for l in idx {
            let (v, m, _) = s.items[i][l];
            if val + v + s.min_v[i + 1] >= s.best || mem + m + s.min_m[i + 1] > s.cap {
                continue;
            }
            s.pick[i] = l;
            rec(s, i + 1, val + v, mem + m);
        }
    }
    let mut s = S {
        items,
        min_v,
        min_m,
        cap,
        best: INF,
        best_pick: vec![0; n],
        pick: vec![0; n],
    };
    rec(&mut s, 0, 0.0, 0.0);
    if s.best == INF {
        return None;
    }
    // report the value as a plain sum in node order (the evaluator's order)
    let v = (0..n).map(|i| items[i][s.best_pick[i]].0).sum();
    Some((v, (0..n).map(|i| items[i][s.best_pick[i]].2).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_and_exact_agree_on_easy_cases() {
        let items = vec![
            vec![(1.0, 10.0, 0), (2.0, 4.0, 1)],
            vec![(1.0, 10.0, 2), (1.5, 5.0, 3)],
        ];
        assert_eq!(knapsack_greedy(&items, 100.0).unwrap().0, 2.0);
        assert_eq!(knapsack_exact(&items, 100.0).unwrap().0, 2.0);
        // must save 6: node 1 (0.1 per byte) first, saving 5, then node 0
        assert_eq!(knapsack_greedy(&items, 14.0).unwrap().0, 3.5);
        assert_eq!(knapsack_exact(&items, 14.0).unwrap().0, 3.0); // node 0 alone saves 6
        assert_eq!(knapsack_greedy(&items, 15.0).unwrap().0, 2.5);
        assert!(knapsack_greedy(&items, 8.0).is_none());
        assert!(knapsack_exact(&items, 8.0).is_none());
    }

    #[test]
    fn greedy_gap_example() {
        // greedy takes the cheapest per byte (node 0), overshooting; exact takes node 1 only
        let items = vec![
            vec![(0.0, 10.0, 0), (1.0, 0.0, 1)],
            vec![(0.0, 3.0, 2), (0.5, 0.0, 3)],
        ];
        assert_eq!(knapsack_exact(&items, 10.0).unwrap().0, 0.5);
        assert_eq!(knapsack_greedy(&items, 10.0).unwrap().0, 1.0);
    }
}
