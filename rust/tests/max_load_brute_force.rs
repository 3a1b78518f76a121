//! The pipeline DP with the max-load cost model against a brute force that shares no code with
//! it: every assignment of units to devices with an acyclic quotient, each block scored from
//! its definition (Table 1 of Tarnawski et al. 2020) by [`naive_block_cost`], not by
//! `MaxLoadCost`. So a wrong cost model (a dropped memory limit, communication counted per
//! edge instead of per producer, a CPU paying communication) fails here as well as a wrong DP.

mod common;

use common::{for_each_assignment, quotient_acyclic, random_dag, Lcg};
use stagecut_core::dag::Dag;
use stagecut_core::ideal_bounds::solve_bounded;
use stagecut_core::ideal_dp::solve;
use stagecut_core::ideals::Ideals;
use stagecut_core::throughput::{MaxLoadCost, OriginalNodes};

const INF: f64 = f64::INFINITY;

/// One random instance: original nodes and edges, units (groups of original nodes that are
/// intervals of a topological order, so the unit graph stays acyclic), device counts, limits.
struct Case {
    orig: OriginalNodes,
    members: Vec<Vec<u32>>,
    unit_edges: Vec<(u32, u32)>,
    accelerators: usize,
    cpus: usize,
    acc_memory: f64,
    cpu_memory: f64,
}

fn random_case(rng: &mut Lcg, trial: usize) -> Case {
    let n = 1 + trial % 7;
    let (edges, topo) = random_dag(rng, n, 0.4);
    let orig = OriginalNodes {
        acc_time: (0..n)
            .map(|_| rng.int(if trial.is_multiple_of(2) { 9 } else { 3 }))
            .collect(),
        cpu_time: (0..n).map(|_| rng.int(25)).collect(),
        size: (0..n).map(|_| rng.int(4)).collect(),
        // heavy tensors (every other trial) make sub-blocks dearer than the blocks holding
        // them: the case the DP's pruning must get right (it may only prune on compute)
        comm: (0..n)
            .map(|_| match trial % 2 {
                0 => rng.int(4),
                _ => [0.0, 1.0, 10.0, 30.0][rng.below(4)],
            })
            .collect(),
        acc_ok: (0..n).map(|_| rng.chance(0.85)).collect(),
        cpu_ok: (0..n).map(|_| rng.chance(0.95)).collect(),
        edges: edges.clone(),
    };
    // units: single nodes, or (every third trial) runs of the topological order
    let mut members: Vec<Vec<u32>> = Vec::new();
    for &v in &topo {
        let extend = trial % 3 == 1 && !members.is_empty() && rng.chance(0.4);
        match members.last_mut() {
            Some(last) if extend => last.push(v),
            _ => members.push(vec![v]),
        }
    }
    let mut unit_of = vec![0u32; n];
    for (u, ms) in members.iter().enumerate() {
        for &v in ms {
            unit_of[v as usize] = u as u32;
        }
    }
    let unit_edges = edges
        .iter()
        .map(|&(a, b)| (unit_of[a as usize], unit_of[b as usize]))
        .filter(|(a, b)| a != b)
        .collect();
    Case {
        orig,
        members,
        unit_edges,
        accelerators: [1, 2, 3, 1, 2, 0][trial % 6],
        cpus: [0, 1, 0, 1, 2, 1][trial % 5],
        acc_memory: [INF, 6.0, 8.0][trial % 3],
        cpu_memory: [INF, INF, 9.0, 12.0][trial % 4],
    }
}

/// Table 1 from the definition: on an accelerator, compute plus `comm[u]` once for every
/// producer `u` with an edge across the block boundary (either way), infeasible over the memory
/// or with a node the accelerator does not support; on a CPU, compute only.
fn naive_block_cost(c: &Case, in_block: &[bool], accelerator: bool) -> f64 {
    let o = &c.orig;
    let nodes: Vec<usize> = (0..in_block.len()).filter(|&v| in_block[v]).collect();
    let size: f64 = nodes.iter().map(|&v| o.size[v]).sum();
    if accelerator {
        if size > c.acc_memory || nodes.iter().any(|&v| !o.acc_ok[v]) {
            return INF;
        }
        let mut cost: f64 = nodes.iter().map(|&v| o.acc_time[v]).sum();
        for u in 0..in_block.len() {
            let crosses = o
                .edges
                .iter()
                .any(|&(a, b)| a as usize == u && in_block[u] != in_block[b as usize]);
            if crosses {
                cost += o.comm[u];
            }
        }
        cost
    } else {
        if size > c.cpu_memory || nodes.iter().any(|&v| !o.cpu_ok[v]) {
            return INF;
        }
        nodes.iter().map(|&v| o.cpu_time[v]).sum()
    }
}

/// Original-node membership of a set of units.
fn block_mask(c: &Case, units: &[usize]) -> Vec<bool> {
    let mut mask = vec![false; c.orig.acc_time.len()];
    for &u in units {
        for &v in &c.members[u] {
            mask[v as usize] = true;
        }
    }
    mask
}

/// The best max block cost over every assignment of units to the devices (accelerators first)
/// whose quotient graph is acyclic.
fn brute_force(c: &Case) -> f64 {
    let nu = c.members.len();
    let slots = c.accelerators + c.cpus;
    if slots == 0 {
        return INF;
    }
    let mut best = INF;
    for_each_assignment(nu, slots, |a| {
        if !quotient_acyclic(a, slots, &c.unit_edges) {
            return;
        }
        let mut worst: f64 = 0.0;
        for s in 0..slots {
            let units: Vec<usize> = (0..nu).filter(|&u| a[u] == s).collect();
            if !units.is_empty() {
                worst = worst.max(naive_block_cost(
                    c,
                    &block_mask(c, &units),
                    s < c.accelerators,
                ));
            }
        }
        best = best.min(worst);
    });
    best
}

#[test]
fn max_load_dp_equals_an_independent_brute_force() {
    let mut rng = Lcg(2024);
    let mut finite = 0;
    for trial in 0..240 {
        let c = random_case(&mut rng, trial);
        let nu = c.members.len();
        let dag = Dag::from_edges(nu, &c.unit_edges).unwrap();
        let ideals = Ideals::enumerate(&dag, 1 << 16).unwrap();
        let cost = MaxLoadCost::new(&c.orig, &c.members, c.acc_memory, c.cpu_memory).unwrap();
        let want = brute_force(&c);
        finite += usize::from(want.is_finite());
        for prune in [false, true] {
            let sol = solve(&ideals, &cost, c.accelerators, c.cpus, prune, INF).unwrap();
            assert_eq!(sol.objective, want, "trial {trial} prune {prune}");
            // with the greedy bound and the cell filter of the Python entry point
            let never = stagecut_core::Cancel::never();
            let bounded =
                solve_bounded(&ideals, &cost, c.accelerators, c.cpus, INF, &never).unwrap();
            assert_eq!(bounded.objective, want, "trial {trial}: bounded");
            if want.is_finite() {
                let tight = solve(&ideals, &cost, c.accelerators, c.cpus, prune, want).unwrap();
                assert_eq!(tight.objective, want, "trial {trial} upper = optimum");
            } else {
                assert!(sol.blocks.is_empty());
                continue;
            }
            // the blocks: every unit once, in pipeline order, within the device counts, and
            // each block's independent cost at most the objective (the largest equal to it)
            let mut block_of = vec![usize::MAX; nu];
            let mut worst: f64 = 0.0;
            for (b, blk) in sol.blocks.iter().enumerate() {
                for &u in &blk.nodes {
                    assert_eq!(block_of[u], usize::MAX, "trial {trial}: unit {u} twice");
                    block_of[u] = b;
                }
                worst = worst.max(naive_block_cost(
                    &c,
                    &block_mask(&c, &blk.nodes),
                    blk.accelerator,
                ));
            }
            assert!(block_of.iter().all(|&b| b != usize::MAX), "trial {trial}");
            assert!(c
                .unit_edges
                .iter()
                .all(|&(a, b)| block_of[a as usize] <= block_of[b as usize]));
            let accs = sol.blocks.iter().filter(|b| b.accelerator).count();
            assert!(accs <= c.accelerators && sol.blocks.len() - accs <= c.cpus);
            assert_eq!(
                worst, want,
                "trial {trial}: the blocks do not score the objective"
            );
        }
    }
    assert!(finite > 150, "too few feasible cases: {finite}");
}

/// Three nodes in a chain, one accelerator per block at most: the memory limit decides the
/// split (a limit the cost model dropped would put everything on one device).
#[test]
fn memory_limit_forces_a_split() {
    let c = Case {
        orig: OriginalNodes {
            acc_time: vec![1.0, 1.0, 1.0],
            cpu_time: vec![50.0; 3],
            size: vec![4.0, 4.0, 4.0],
            comm: vec![2.0, 2.0, 0.0],
            acc_ok: vec![true; 3],
            cpu_ok: vec![true; 3],
            edges: vec![(0, 1), (1, 2)],
        },
        members: vec![vec![0], vec![1], vec![2]],
        unit_edges: vec![(0, 1), (1, 2)],
        accelerators: 3,
        cpus: 0,
        acc_memory: 8.0,
        cpu_memory: INF,
    };
    let dag = Dag::from_edges(3, &c.unit_edges).unwrap();
    let ideals = Ideals::enumerate(&dag, 100).unwrap();
    let cost = MaxLoadCost::new(&c.orig, &c.members, c.acc_memory, INF).unwrap();
    for prune in [false, true] {
        // {0, 1} | {2}: 2 + comm of 1 (2) = 4 and 1 + 2 = 3; everything on one device needs 12
        let sol = solve(&ideals, &cost, 3, 0, prune, INF).unwrap();
        assert_eq!(sol.objective, 4.0);
        assert_eq!(brute_force(&c), 4.0);
        // one accelerator cannot hold the 12 bytes
        assert_eq!(
            solve(&ideals, &cost, 1, 0, prune, INF).unwrap().objective,
            INF
        );
    }
}

/// All orderings of `0..n` (Heap's algorithm is overkill for n = 4: recursive insertion).
fn permutations(n: usize) -> Vec<Vec<u32>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n as u32 - 1);
            out.push(q);
        }
    }
    out
}

/// Two chains `x1 -> x2`, `y1 -> y2` with `y1 -> x2`, and a heavy tensor out of `x1`: the
/// block `{x2}` alone costs 31, more than the whole graph on one device (4), yet `{x1, x2}`
/// costs 2, and the optimal split `{y1, y2} | {x1, x2}` (2) is reached only by growing
/// `{x2}`. Pruning on a block's full cost (not monotone: communication falls as the block
/// grows) instead of its compute cuts that branch. Every labelling, so every descent order.
#[test]
fn pruning_keeps_a_branch_whose_first_block_is_dear() {
    for perm in permutations(4) {
        let (x1, y1, x2, y2) = (perm[0], perm[1], perm[2], perm[3]);
        let mut comm = vec![0.0; 4];
        comm[x1 as usize] = 30.0;
        let edges = vec![(x1, x2), (y1, x2), (y1, y2)];
        let c = Case {
            orig: OriginalNodes {
                acc_time: vec![1.0; 4],
                cpu_time: vec![100.0; 4],
                size: vec![0.0; 4],
                comm,
                acc_ok: vec![true; 4],
                cpu_ok: vec![true; 4],
                edges: edges.clone(),
            },
            members: (0..4).map(|v| vec![v]).collect(),
            unit_edges: edges.clone(),
            accelerators: 2,
            cpus: 0,
            acc_memory: INF,
            cpu_memory: INF,
        };
        assert_eq!(brute_force(&c), 2.0);
        let dag = Dag::from_edges(4, &edges).unwrap();
        let ideals = Ideals::enumerate(&dag, 100).unwrap();
        let cost = MaxLoadCost::new(&c.orig, &c.members, INF, INF).unwrap();
        for upper in [INF, 2.0, 3.0] {
            let sol = solve(&ideals, &cost, 2, 0, true, upper).unwrap();
            assert_eq!(sol.objective, 2.0, "labels {perm:?}, upper {upper}");
        }
    }
}

#[test]
fn bad_original_edges_and_units_are_refused() {
    let orig = |edges: Vec<(u32, u32)>| OriginalNodes {
        acc_time: vec![1.0; 3],
        cpu_time: vec![1.0; 3],
        size: vec![0.0; 3],
        comm: vec![1.0; 3],
        acc_ok: vec![true; 3],
        cpu_ok: vec![true; 3],
        edges,
    };
    let units: Vec<Vec<u32>> = (0..3).map(|v| vec![v]).collect();
    let ok = MaxLoadCost::new(&orig(vec![(0, 1), (1, 2)]), &units, INF, INF).unwrap();
    assert_eq!(ok.num_units(), 3);
    let two = MaxLoadCost::new(&orig(vec![(0, 1)]), &[vec![0, 1], vec![2]], INF, INF).unwrap();
    assert_eq!(two.num_units(), 2);
    for edges in [
        vec![(3, 1)],
        vec![(0, 3)],
        vec![(1, 1)],
        vec![(0, 1), (7, 9)],
    ] {
        assert!(
            MaxLoadCost::new(&orig(edges.clone()), &units, INF, INF).is_err(),
            "{edges:?}"
        );
    }
    // a node in two units, a member out of range, a NaN limit
    assert!(MaxLoadCost::new(&orig(vec![]), &[vec![0, 1], vec![1, 2]], INF, INF).is_err());
    assert!(MaxLoadCost::new(&orig(vec![]), &[vec![0, 5]], INF, INF).is_err());
    assert!(MaxLoadCost::new(&orig(vec![]), &units, f64::NAN, INF).is_err());
}

/// `z -> a -> c`, `z` CPU-only and free: the optimum puts `{z, a}` on the CPU (6) and `c` on
/// the accelerator (6). Growing the CPU block from `{a}` (6, already at the bound) to
/// `{z, a}` (still 6) must go on with an upper bound equal to the optimum: only blocks
/// strictly above the bound can be cut.
#[test]
fn an_upper_bound_at_the_optimum_keeps_it() {
    let c = Case {
        orig: OriginalNodes {
            acc_time: vec![0.0, 10.0, 6.0],
            cpu_time: vec![0.0, 6.0, 100.0],
            size: vec![0.0; 3],
            comm: vec![0.0; 3],
            acc_ok: vec![false, true, true],
            cpu_ok: vec![true; 3],
            edges: vec![(0, 1), (1, 2)],
        },
        members: (0..3).map(|v| vec![v]).collect(),
        unit_edges: vec![(0, 1), (1, 2)],
        accelerators: 1,
        cpus: 1,
        acc_memory: INF,
        cpu_memory: INF,
    };
    assert_eq!(brute_force(&c), 6.0);
    let dag = Dag::from_edges(3, &c.unit_edges).unwrap();
    let ideals = Ideals::enumerate(&dag, 100).unwrap();
    let cost = MaxLoadCost::new(&c.orig, &c.members, INF, INF).unwrap();
    for upper in [INF, 6.0] {
        assert_eq!(
            solve(&ideals, &cost, 1, 1, true, upper).unwrap().objective,
            6.0
        );
    }
}
