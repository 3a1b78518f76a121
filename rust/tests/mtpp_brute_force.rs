//! MTPP against oracles that share no code with the crate: block costs straight from the
//! definition ([`naive_cost`], not `Instance::block_cost`), every set partition with an
//! acyclic quotient for the exact optimum, every set of cut positions for SliceGraph on a
//! fixed order. Heavy tensors (costs far above the work) make sub-blocks dearer than the
//! blocks that contain them, the case where pruning on anything but work + overflow is wrong.

mod common;

use common::{is_acyclic, quotient_acyclic, random_dag, Lcg};
use stagecut_core::mtpp::fenwick::build_fenwick;
use stagecut_core::mtpp::kahn::kahn;
use stagecut_core::mtpp::search::{brkga, brkga_islands, decode, BrkgaParams};
use stagecut_core::mtpp::slicegraph::{self, ScanCosts, TableCosts};
use stagecut_core::mtpp::{exact, Instance, Memory, OrderCtx, Tensor};
use stagecut_core::Cancel;

const INF: f64 = f64::INFINITY;

/// The instance as plain data, for the oracles.
struct Raw {
    work: Vec<f64>,
    params: Vec<f64>,
    /// `(cost, producer, consumers)`; consumers may repeat or include the producer.
    tensors: Vec<(f64, usize, Vec<usize>)>,
    memory: Memory,
    edges: Vec<(u32, u32)>,
}

fn random_raw(rng: &mut Lcg, trial: usize) -> Raw {
    let n = 1 + trial % 7;
    let (edges, _) = random_dag(rng, n, 0.4);
    let heavy = trial % 2 == 1;
    let mut tensors = Vec::new();
    for u in 0..n {
        let mut cons: Vec<usize> = edges
            .iter()
            .filter(|e| e.0 as usize == u)
            .map(|e| e.1 as usize)
            .collect();
        if cons.is_empty() {
            continue;
        }
        if rng.chance(0.2) {
            cons.push(cons[0]); // a repeated consumer counts once
            cons.push(u); // so does an internal one (never)
        }
        let cost = if heavy {
            [0.0, 1.0, 20.0, 40.0][rng.below(4)]
        } else {
            rng.int(5)
        };
        tensors.push((cost, u, cons));
    }
    let memory = match trial % 4 {
        0 | 1 => Memory::default(),
        2 => Memory {
            fast: 7.0,
            reserved: 0.0,
            bandwidth: None,
        },
        _ => Memory {
            fast: 6.0,
            reserved: 1.0,
            bandwidth: Some(0.5),
        },
    };
    Raw {
        work: (0..n).map(|_| rng.int(if heavy { 4 } else { 9 })).collect(),
        params: (0..n).map(|_| rng.int(4)).collect(),
        tensors,
        memory,
        edges,
    }
}

fn instance(r: &Raw) -> Instance {
    let tensors: Vec<Tensor> = r
        .tensors
        .iter()
        .map(|(c, p, cs)| Tensor {
            cost: *c,
            producer: *p as u32,
            consumers: cs.iter().map(|&x| x as u32).collect(),
        })
        .collect();
    Instance::new(r.work.clone(), r.params.clone(), &tensors, r.memory).unwrap()
}

/// `f(S)` from the definition: tensors entering plus work plus tensors leaving (each tensor
/// once), plus the parameter overflow streamed at the bandwidth (no bandwidth: a hard limit).
fn naive_cost(r: &Raw, in_block: &[bool]) -> f64 {
    let n = r.work.len();
    let work: f64 = (0..n).filter(|&u| in_block[u]).map(|u| r.work[u]).sum();
    let params: f64 = (0..n).filter(|&u| in_block[u]).map(|u| r.params[u]).sum();
    let mut io = 0.0;
    for (cost, p, cons) in &r.tensors {
        let leaves = in_block[*p] && cons.iter().any(|&c| !in_block[c]);
        let enters = !in_block[*p] && cons.iter().any(|&c| in_block[c]);
        if leaves || enters {
            io += cost;
        }
    }
    let m = r.memory;
    let over = params + m.reserved - m.fast;
    let overflow = if over <= 0.0 {
        0.0
    } else {
        m.bandwidth.map_or(INF, |b| over / b)
    };
    work + io + overflow
}

fn mask(n: usize, nodes: &[usize]) -> Vec<bool> {
    let mut m = vec![false; n];
    for &u in nodes {
        m[u] = true;
    }
    m
}

/// Max block cost of a partition given as blocks of units.
fn naive_objective(r: &Raw, blocks: &[Vec<usize>]) -> f64 {
    let n = r.work.len();
    blocks
        .iter()
        .map(|b| naive_cost(r, &mask(n, b)))
        .fold(0.0, f64::max)
}

/// Every partition into at most `k` blocks (restricted growth strings) with an acyclic quotient.
fn brute_force(r: &Raw, k: usize) -> f64 {
    fn rec(r: &Raw, k: usize, a: &mut Vec<usize>, used: usize, best: &mut f64) {
        let n = r.work.len();
        if a.len() == n {
            if quotient_acyclic(a, used, &r.edges) {
                let blocks: Vec<Vec<usize>> = (0..used)
                    .map(|b| (0..n).filter(|&u| a[u] == b).collect())
                    .collect();
                *best = best.min(naive_objective(r, &blocks));
            }
            return;
        }
        for b in 0..(used + 1).min(k) {
            a.push(b);
            rec(r, k, a, used.max(b + 1), best);
            a.pop();
        }
    }
    let mut best = INF;
    rec(r, k, &mut Vec::new(), 0, &mut best);
    best
}

/// Every split of `order` into at most `k` contiguous segments.
fn cut_brute_force(r: &Raw, order: &[usize], k: usize) -> f64 {
    let n = order.len();
    let mut best = INF;
    for cuts in 0u32..1 << (n - 1) {
        if cuts.count_ones() as usize + 1 > k {
            continue;
        }
        let mut blocks = vec![vec![order[0]]];
        for (i, &u) in order.iter().enumerate().skip(1) {
            if cuts >> (i - 1) & 1 == 1 {
                blocks.push(Vec::new());
            }
            blocks.last_mut().unwrap().push(u);
        }
        best = best.min(naive_objective(r, &blocks));
    }
    best
}

/// Blocks in pipeline order: each unit once, every edge forward or inside a block.
fn assert_pipeline(r: &Raw, blocks: &[Vec<usize>], what: &str) {
    let mut block_of = vec![usize::MAX; r.work.len()];
    for (b, blk) in blocks.iter().enumerate() {
        for &u in blk {
            assert_eq!(block_of[u], usize::MAX, "{what}: unit {u} twice");
            block_of[u] = b;
        }
    }
    assert!(
        block_of.iter().all(|&b| b != usize::MAX),
        "{what}: a unit is missing"
    );
    let ok = r
        .edges
        .iter()
        .all(|&(a, b)| block_of[a as usize] <= block_of[b as usize]);
    assert!(ok, "{what}: blocks not in pipeline order");
}

#[test]
fn exact_dp_equals_an_independent_brute_force() {
    let mut rng = Lcg(77);
    for trial in 0..280 {
        let r = random_raw(&mut rng, trial);
        let inst = instance(&r);
        for k in 1..=3 {
            let want = brute_force(&r, k);
            for prune in [false, true] {
                for upper in [INF, want] {
                    let sol = exact::solve(&inst, k, 1 << 16, prune, upper).unwrap();
                    let what = format!("trial {trial} k {k} prune {prune} upper {upper}");
                    assert_eq!(sol.objective, want, "{what}");
                    if want.is_finite() {
                        assert!(sol.blocks.len() <= k, "{what}");
                        assert_pipeline(&r, &sol.blocks, &what);
                        assert_eq!(naive_objective(&r, &sol.blocks), want, "{what}: blocks");
                    }
                }
            }
            if want.is_finite() {
                assert!(
                    inst.lower_bound(k) <= want,
                    "trial {trial} k {k}: lower bound"
                );
            }
        }
    }
}

#[test]
fn slicegraph_equals_cut_brute_force_on_random_orders() {
    let mut rng = Lcg(5);
    for trial in 0..200 {
        let r = random_raw(&mut rng, trial);
        let inst = instance(&r);
        let keys: Vec<f64> = (0..inst.n).map(|_| rng.unit()).collect();
        let order = kahn(&inst, &keys);
        let pos_edges: Vec<(usize, usize)> = r
            .edges
            .iter()
            .map(|&(a, b)| (a as usize, b as usize))
            .collect();
        assert!(is_acyclic(inst.n, &pos_edges));
        let mut pos = vec![0; inst.n];
        for (i, &u) in order.iter().enumerate() {
            pos[u] = i;
        }
        assert!(
            pos_edges.iter().all(|&(a, b)| pos[a] < pos[b]),
            "kahn: not topological"
        );
        let ctx = OrderCtx::new(&inst, order.clone());
        let table = build_fenwick(&ctx);
        for l in 0..inst.n {
            for rr in l..inst.n {
                let seg = &order[l..=rr];
                let want = naive_cost(&r, &mask(inst.n, seg));
                assert_eq!(
                    ctx.seg_lb(l, rr) + table.io(l, rr),
                    want,
                    "trial {trial} [{l}, {rr}]"
                );
            }
        }
        for k in 1..=4 {
            let want = cut_brute_force(&r, &order, k);
            let scan = slicegraph::solve(&ctx, &mut ScanCosts::new(&ctx), k);
            let tab = slicegraph::solve(&ctx, &mut TableCosts::new(&table), k);
            assert_eq!(scan.objective, want, "trial {trial} k {k} scan");
            assert_eq!(tab.objective, want, "trial {trial} k {k} table");
            if want.is_finite() {
                let blocks = scan.blocks(&order);
                assert!(blocks.len() <= k);
                assert_eq!(
                    naive_objective(&r, &blocks),
                    want,
                    "trial {trial} k {k} cuts"
                );
            } else {
                assert!(scan.starts.is_empty());
            }
            for cap in [want - 1.0, want, want + 0.5] {
                let capped = slicegraph::solve_capped(&ctx, &mut ScanCosts::new(&ctx), k, cap);
                match capped {
                    Some(s) => assert!(want <= cap && s.objective == want, "trial {trial}"),
                    None => assert!(want > cap, "trial {trial} k {k} cap {cap}"),
                }
            }
        }
    }
}

#[test]
fn searches_never_beat_the_optimum_and_report_what_they_decode() {
    let mut rng = Lcg(31);
    for trial in 0..40 {
        let r = random_raw(&mut rng, trial + 3);
        let inst = instance(&r);
        let k = 2 + trial % 2;
        let opt = brute_force(&r, k);
        let params = BrkgaParams {
            population: 12,
            generations: 6,
            seed: trial as u64,
            ..Default::default()
        };
        let fit =
            |c: &[f64], cap: f64| stagecut_core::mtpp::search::decode_capped(&inst, c, k, cap);
        let islands = BrkgaParams {
            max_decodes: Some(50),
            ..params.clone()
        };
        for res in [
            brkga(inst.n, &params, fit),
            brkga_islands(inst.n, &islands, 3, fit, &Cancel::never()),
        ] {
            assert!(res.best >= opt, "trial {trial}");
            let (order, split) = decode(&inst, &res.best_keys, k);
            assert_eq!(split.objective, res.best);
            if res.best.is_finite() {
                let blocks = split.blocks(&order);
                assert_pipeline(&r, &blocks, "search");
                assert_eq!(naive_objective(&r, &blocks), res.best, "trial {trial}");
            }
        }
    }
}

/// Theorem 4.3 of Archer et al.: Kahn's order with priority = block index of an optimal
/// partition, split by SliceGraph, is optimal.
#[test]
fn theorem_4_3_on_heavy_tensors() {
    let mut rng = Lcg(3);
    for trial in 0..120 {
        let r = random_raw(&mut rng, 2 * trial + 1);
        let inst = instance(&r);
        for k in 2..=3 {
            let sol = exact::solve(&inst, k, 1 << 16, true, INF).unwrap();
            if !sol.objective.is_finite() {
                continue;
            }
            let mut prio = vec![0.0; inst.n];
            for (b, blk) in sol.blocks.iter().enumerate() {
                for &u in blk {
                    prio[u] = b as f64;
                }
            }
            let ctx = OrderCtx::new(&inst, kahn(&inst, &prio));
            let split = slicegraph::solve(&ctx, &mut ScanCosts::new(&ctx), k);
            assert_eq!(split.objective, sol.objective, "trial {trial} k {k}");
        }
    }
}
