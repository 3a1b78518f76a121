//! Tests of the SliceGraph DP ([`super`]): brute force over cut positions, the segment-cost
//! providers against each other.

use super::*;
use crate::mtpp::fenwick::{build_fenwick, build_naive};
use crate::mtpp::kahn::kahn;
use crate::mtpp::rng::Rng;
use crate::mtpp::tests_common::random_instance;
use crate::mtpp::Memory;

/// Every set of cut positions with at most k segments.
fn brute(n: usize, k: usize, cost: impl Fn(usize, usize) -> f64) -> f64 {
    let mut best = INF;
    for mask in 0u32..1 << (n - 1) {
        if mask.count_ones() as usize + 1 > k {
            continue;
        }
        let mut l = 0;
        let mut worst: f64 = 0.0;
        for r in 0..n {
            if r == n - 1 || mask >> r & 1 == 1 {
                worst = worst.max(cost(l, r));
                l = r + 1;
            }
        }
        best = best.min(worst);
    }
    best
}

#[test]
fn dp_equals_brute_force_over_cut_positions() {
    let mut rng = Rng::new(21);
    for trial in 0..150 {
        let n = 1 + trial % 11;
        let mut inst = random_instance(&mut rng, n, 0.3, trial % 3 == 0);
        if trial % 4 == 1 {
            inst.memory = Memory {
                fast: 12.0,
                reserved: 0.0,
                bandwidth: None,
            };
        }
        let keys: Vec<f64> = (0..n).map(|_| rng.unit()).collect();
        let ctx = OrderCtx::new(&inst, kahn(&inst, &keys));
        let table = build_naive(&ctx);
        let cost = |l: usize, r: usize| ctx.seg_lb(l, r) + table.io(l, r);
        for k in 1..=4 {
            let want = brute(n, k, cost);
            let rf = reference(n, k, cost);
            assert_eq!(rf.objective, want, "trial {trial} k {k}");
            let fw = build_fenwick(&ctx);
            let a = solve(&ctx, &mut TableCosts::new(&fw), k);
            let b = solve(&ctx, &mut ScanCosts::new(&ctx), k);
            assert_eq!(a.objective, want, "table trial {trial} k {k}");
            assert_eq!(b.objective, want, "scan trial {trial} k {k}");
            for cap in [want - 1.0, want, want + 0.5, want + 7.0] {
                let c = solve_capped(&ctx, &mut ScanCosts::new(&ctx), k, cap);
                match c {
                    Some(s) => assert!(want <= cap && s.objective == want),
                    None => assert!(want > cap, "cap {cap} want {want}"),
                }
            }
            if want < INF {
                assert!(a.starts.len() <= k && a.starts[0] == 0);
                // the returned cuts achieve the objective
                let mut worst: f64 = 0.0;
                for (s, blk) in b.starts.iter().zip(b.blocks(&ctx.order)) {
                    worst = worst.max(cost(*s, s + blk.len() - 1));
                }
                assert_eq!(worst, want);
            } else {
                assert!(a.starts.is_empty() && b.starts.is_empty());
            }
        }
    }
}

#[test]
fn scan_costs_equal_the_table() {
    let mut rng = Rng::new(8);
    for trial in 0..40 {
        let inst = random_instance(&mut rng, 2 + trial % 20, 0.2, false);
        let keys: Vec<f64> = (0..inst.n).map(|_| rng.unit()).collect();
        let ctx = OrderCtx::new(&inst, kahn(&inst, &keys));
        let table = build_naive(&ctx);
        let mut sc = ScanCosts::new(&ctx);
        for r in 0..inst.n {
            sc.begin(r);
            for l in (0..=r).rev() {
                assert_eq!(sc.io(l), table.io(l, r));
            }
        }
    }
}
