//! Piper's DP against a brute force over every plan, with a cost model of its own: every
//! sequence of stages (each prefix of the sequence closed under predecessors), every
//! tensor-parallel and data-parallel degree per stage, every TMPC per node, each stage scored
//! from the formula of the paper (Tarnawski et al., NeurIPS 2021) by [`stage_tps`] and its
//! memory by [`stage_memory`], neither shared with `rust/training`. So a wrong cost model
//! (the memory term with `floor` instead of `ceil`, a dropped memory limit, the incremental
//! knapsack path ignoring the samples in flight) fails here as well as a wrong DP.

mod common;

use std::collections::HashMap;

use common::{close, random_dag, Lcg};
use stagecut_core::training::{plan, Knapsack, PlanOut, Problem, Tmpc};

const INF: f64 = f64::INFINITY;

/// A stage's TPS: `compute / d + (edges / d + 4 (d - 1) / d * params / N) / B`, where `edges`
/// sums `2 (c(u, v) + sync)` over the edges crossing the stage boundary (the sync bytes of the
/// TMPC on the stage side); on a two-level network the sync part moves at the intra-server
/// bandwidth, and so does the all-reduce when the stage's `t d` devices fit in one server.
fn stage_tps(
    p: &Problem,
    in_stage: &[bool],
    pick: &HashMap<usize, usize>,
    t: usize,
    d: usize,
) -> f64 {
    let df = d as f64;
    let (mut compute, mut params, mut comm, mut sync) = (0.0, 0.0, 0.0, 0.0);
    for &id in pick.values() {
        compute += p.tmpcs[id].time;
        params += p.tmpcs[id].param;
    }
    for (e, &(a, b, c)) in p.edges.iter().enumerate() {
        let (a, b) = (a as usize, b as usize);
        if in_stage[a] == in_stage[b] {
            continue;
        }
        comm += 2.0 * c;
        sync += 2.0
            * if in_stage[a] {
                let pos = out_position(p, a, e);
                p.tmpcs[pick[&a]].sbw[pos]
            } else {
                let pos = in_position(p, b, e);
                p.tmpcs[pick[&b]].sfw[pos]
            };
    }
    let allreduce = 4.0 * (df - 1.0) / df * params / p.batch as f64;
    match p.server {
        None => compute / df + (comm / df + sync / df + allreduce) / p.bandwidth,
        Some((g, intra)) => {
            let b_ar = if t * d <= g { intra } else { p.bandwidth };
            compute / df + comm / df / p.bandwidth + sync / df / intra + allreduce / b_ar
        }
    }
}

/// Memory per device: `sum(a) * ceil(s / d) + sum(b)`, `s` the data-parallel degrees of this
/// stage and every later one (the microbatches in flight).
fn stage_memory(p: &Problem, pick: &HashMap<usize, usize>, d: usize, s: usize) -> f64 {
    let y = s.div_ceil(d) as f64;
    pick.values()
        .map(|&id| p.tmpcs[id].a * y + p.tmpcs[id].b)
        .sum()
}

/// Position of edge `e` among the outgoing (incoming) edges of its node, in edge-list order.
fn out_position(p: &Problem, a: usize, e: usize) -> usize {
    p.edges[..e].iter().filter(|x| x.0 as usize == a).count()
}

fn in_position(p: &Problem, b: usize, e: usize) -> usize {
    p.edges[..e].iter().filter(|x| x.1 as usize == b).count()
}

/// The degrees a stage may use: `t` from the TMPCs (at most the devices, dividing the server
/// size), `d` dividing the batch (only 1 without data parallelism).
fn degrees(p: &Problem) -> (Vec<usize>, Vec<usize>) {
    let mut ts: Vec<usize> = p
        .tmpcs
        .iter()
        .map(|x| x.t as usize)
        .filter(|&t| t <= p.devices && p.server.is_none_or(|(g, _)| g.is_multiple_of(t)))
        .collect();
    ts.sort_unstable();
    ts.dedup();
    let ds = (1..=p.batch)
        .filter(|&d| p.batch.is_multiple_of(d) && (p.allow_dp || d == 1))
        .collect();
    (ts, ds)
}

/// The best TPS of stage `nodes` at `(t, d)` with `s` microbatches in flight over every TMPC
/// choice that fits in memory (`INF` if none does, or a node has no TMPC of degree `t`).
fn stage_best(p: &Problem, nodes: &[usize], t: usize, d: usize, s: usize) -> f64 {
    let opts: Vec<Vec<usize>> = nodes
        .iter()
        .map(|&v| {
            (0..p.tmpcs.len())
                .filter(|&i| p.tmpcs[i].node == v && p.tmpcs[i].t as usize == t)
                .collect()
        })
        .collect();
    if opts.iter().any(|o| o.is_empty()) {
        return INF;
    }
    let mut in_stage = vec![false; p.n];
    for &v in nodes {
        in_stage[v] = true;
    }
    let mut best = INF;
    let mut idx = vec![0usize; nodes.len()];
    loop {
        let pick: HashMap<usize, usize> = nodes
            .iter()
            .zip(&idx)
            .zip(&opts)
            .map(|((&v, &i), o)| (v, o[i]))
            .collect();
        if stage_memory(p, &pick, d, s) <= p.memory {
            best = best.min(stage_tps(p, &in_stage, &pick, t, d));
        }
        let mut i = 0;
        while i < idx.len() {
            idx[i] += 1;
            if idx[i] < opts[i].len() {
                break;
            }
            idx[i] = 0;
            i += 1;
        }
        if i == idx.len() {
            return best;
        }
    }
}

/// `{(devices used, sum of d): best max-stage TPS}` over every plan.
fn brute_force(p: &Problem) -> HashMap<(usize, usize), f64> {
    let (ts, ds) = degrees(p);
    let mut seqs: Vec<Vec<Vec<usize>>> = Vec::new();
    sequences(p, &mut vec![false; p.n], &mut Vec::new(), &mut seqs);
    let mut out: HashMap<(usize, usize), f64> = HashMap::new();
    for seq in &seqs {
        // degrees from the last stage back: s (the suffix's sum of d) is known at each stage
        assign(p, seq, seq.len(), 0, 0, 0.0, &ts, &ds, &mut out);
    }
    out
}

/// Every sequence of stages: each stage a non-empty set of unplaced nodes whose predecessors
/// are placed or in the stage.
fn sequences(
    p: &Problem,
    placed: &mut Vec<bool>,
    seq: &mut Vec<Vec<usize>>,
    out: &mut Vec<Vec<Vec<usize>>>,
) {
    let rest: Vec<usize> = (0..p.n).filter(|&v| !placed[v]).collect();
    if rest.is_empty() {
        out.push(seq.clone());
        return;
    }
    for mask in 1u32..1 << rest.len() {
        let stage: Vec<usize> = (0..rest.len())
            .filter(|&i| mask >> i & 1 == 1)
            .map(|i| rest[i])
            .collect();
        let closed = p.edges.iter().all(|&(a, b, _)| {
            !stage.contains(&(b as usize)) || placed[a as usize] || stage.contains(&(a as usize))
        });
        if !closed {
            continue;
        }
        for &v in &stage {
            placed[v] = true;
        }
        seq.push(stage);
        sequences(p, placed, seq, out);
        let stage = seq.pop().unwrap();
        for v in stage {
            placed[v] = false;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn assign(
    p: &Problem,
    seq: &[Vec<usize>],
    i: usize,
    dev: usize,
    s: usize,
    worst: f64,
    ts: &[usize],
    ds: &[usize],
    out: &mut HashMap<(usize, usize), f64>,
) {
    if i == 0 {
        let e = out.entry((dev, s)).or_insert(INF);
        *e = e.min(worst);
        return;
    }
    for &t in ts {
        for &d in ds {
            if dev + t * d > p.devices || s + d > p.batch {
                continue;
            }
            let c = stage_best(p, &seq[i - 1], t, d, s + d);
            if c < INF {
                assign(p, seq, i - 1, dev + t * d, s + d, worst.max(c), ts, ds, out);
            }
        }
    }
}

/// The DP's table: best on at most `k` devices with the sum of d at most `s` (exactly `s` in
/// exact-batch mode).
fn table_of(p: &Problem, bf: &HashMap<(usize, usize), f64>, cols: usize) -> Vec<f64> {
    let mut tab = vec![INF; (p.devices + 1) * cols];
    for k in 0..=p.devices {
        for s in 0..cols {
            for (&(dev, tot), &v) in bf {
                let fits = if p.exact_batch { tot == s } else { tot <= s };
                if dev <= k && fits {
                    tab[k * cols + s] = tab[k * cols + s].min(v);
                }
            }
        }
    }
    tab
}

/// The plan re-scored by the independent model: valid stages and degrees, memory within the
/// limit at the microbatches in flight, and its value.
fn rescore(p: &Problem, r: &PlanOut) -> f64 {
    let (ts, ds) = degrees(p);
    let mut placed = vec![false; p.n];
    let (mut dev, mut tot) = (0, 0);
    for st in &r.stages {
        assert!(ts.contains(&(st.t as usize)) && ds.contains(&(st.d as usize)));
        dev += (st.t * st.d) as usize;
        tot += st.d as usize;
        for &v in &st.nodes {
            assert!(!placed[v], "node {v} in two stages");
        }
        for &(a, b, _) in &p.edges {
            let (a, b) = (a as usize, b as usize);
            assert!(
                !st.nodes.contains(&b) || placed[a] || st.nodes.contains(&a),
                "edge {a} -> {b} goes back"
            );
        }
        for &v in &st.nodes {
            placed[v] = true;
        }
    }
    assert!(placed.iter().all(|&x| x), "a node has no stage");
    assert!(dev <= p.devices && tot <= p.batch);
    if p.exact_batch {
        assert_eq!(tot, p.batch);
    }
    let mut worst: f64 = 0.0;
    let mut s = tot;
    for st in &r.stages {
        let pick: HashMap<usize, usize> = st
            .nodes
            .iter()
            .copied()
            .zip(st.tmpcs.iter().copied())
            .collect();
        for (&v, &id) in &pick {
            assert!(
                p.tmpcs[id].node == v && p.tmpcs[id].t == st.t,
                "TMPC {id} is not node {v}'s"
            );
        }
        let mem = stage_memory(p, &pick, st.d as usize, s);
        assert!(
            mem <= p.memory,
            "stage {:?} needs {mem} > {}",
            st.nodes,
            p.memory
        );
        let mut in_stage = vec![false; p.n];
        for &v in &st.nodes {
            in_stage[v] = true;
        }
        let tps = stage_tps(p, &in_stage, &pick, st.t as usize, st.d as usize);
        assert!(
            close(tps, st.tps),
            "stage {:?}: {tps} vs the DP's {}",
            st.nodes,
            st.tps
        );
        worst = worst.max(tps);
        s -= st.d as usize;
    }
    worst
}

const NUM: [f64; 6] = [0.0, 1.0, 2.0, 3.0, 5.0, 8.0];

/// A random problem; with `fast`, at most two TMPCs per node and degree, equal in parameters
/// and sync bytes (the case of the incremental knapsack path).
fn random_problem(rng: &mut Lcg, trial: usize, fast: bool) -> Problem {
    let n = 1 + trial % 4;
    let (dag, _) = random_dag(rng, n, 0.5);
    let edges: Vec<(u32, u32, f64)> = dag
        .iter()
        .map(|&(a, b)| (a, b, NUM[rng.below(6)]))
        .collect();
    let mut tmpcs = Vec::new();
    for v in 0..n {
        let nin = edges.iter().filter(|e| e.1 as usize == v).count();
        let nout = edges.iter().filter(|e| e.0 as usize == v).count();
        for t in 1..=2u32 {
            if t == 2 && rng.chance(0.5) {
                continue;
            }
            let k = 1 + rng.below(if fast { 2 } else { 3 });
            let base_fw: Vec<f64> = (0..nin).map(|_| NUM[rng.below(6)]).collect();
            let base_bw: Vec<f64> = (0..nout).map(|_| NUM[rng.below(6)]).collect();
            let param = NUM[rng.below(6)];
            for _ in 0..k {
                tmpcs.push(Tmpc {
                    node: v,
                    t,
                    time: 1.0 + NUM[rng.below(6)],
                    param: if fast { param } else { NUM[rng.below(6)] },
                    a: NUM[rng.below(6)],
                    b: NUM[rng.below(6)],
                    sfw: if fast {
                        base_fw.clone()
                    } else {
                        (0..nin).map(|_| NUM[rng.below(6)]).collect()
                    },
                    sbw: if fast {
                        base_bw.clone()
                    } else {
                        (0..nout).map(|_| NUM[rng.below(6)]).collect()
                    },
                });
            }
        }
    }
    Problem {
        n,
        edges,
        tmpcs,
        devices: 1 + rng.below(4),
        memory: [6.0, 10.0, 16.0, 30.0, 100.0][rng.below(5)],
        bandwidth: [1.0, 4.0][rng.below(2)],
        batch: [1, 2, 3, 4, 6][rng.below(5)],
        exact_batch: trial % 5 == 3,
        allow_dp: trial % 7 != 6,
        knapsack: Knapsack::Exact { max_nodes: 99 },
        max_ideals: 1 << 16,
        server: [None, None, Some((1, 2.0)), Some((2, 10.0))][rng.below(4)],
    }
}

#[test]
fn dp_with_exact_knapsack_equals_an_independent_brute_force() {
    let mut rng = Lcg(11);
    let mut feasible = 0;
    for trial in 0..300 {
        let p = random_problem(&mut rng, trial, false);
        let r = plan(&p).unwrap();
        let bf = brute_force(&p);
        let want = table_of(&p, &bf, r.cols);
        assert_eq!(r.cols, p.batch.min(p.devices) + 1);
        for (i, (&a, &b)) in r.table.iter().zip(&want).enumerate() {
            assert!(
                close(a, b),
                "trial {trial} cell (k {}, s {}): DP {a}, brute force {b}",
                i / r.cols,
                i % r.cols
            );
        }
        let best = if p.exact_batch {
            bf.iter()
                .filter(|(k, _)| k.1 == p.batch)
                .map(|(_, &v)| v)
                .fold(INF, f64::min)
        } else {
            bf.values().copied().fold(INF, f64::min)
        };
        assert!(
            close(r.objective, best),
            "trial {trial}: {} vs {best}",
            r.objective
        );
        if best.is_finite() {
            feasible += 1;
            assert!(
                close(rescore(&p, &r), r.objective),
                "trial {trial}: the stages"
            );
        } else {
            assert!(r.stages.is_empty());
        }
    }
    assert!(feasible > 150, "only {feasible} feasible problems");
}

#[test]
fn greedy_plans_are_real_plans_and_the_fast_path_is_the_greedy() {
    let mut rng = Lcg(12);
    for trial in 0..300usize {
        let fast = trial.is_multiple_of(2);
        let mut p = random_problem(&mut rng, trial, fast);
        let exact = plan(&p).unwrap();
        p.knapsack = Knapsack::Heuristic;
        let heur = plan(&p).unwrap();
        p.knapsack = Knapsack::GenericHeuristic;
        let generic = plan(&p).unwrap();
        // the greedy reaches the lowest-memory TMPCs: it proves infeasibility like the exact
        assert_eq!(
            heur.objective.is_finite(),
            exact.objective.is_finite(),
            "trial {trial}"
        );
        assert!(
            heur.objective >= exact.objective * (1.0 - 1e-12),
            "trial {trial}"
        );
        for r in [&heur, &generic] {
            if r.objective.is_finite() {
                assert!(
                    close(rescore(&p, r), r.objective),
                    "trial {trial}: a greedy plan"
                );
            }
        }
        if fast {
            // the incremental path is an implementation of the same greedy
            for (a, b) in heur.table.iter().zip(&generic.table) {
                assert!(close(*a, *b), "trial {trial}: fast {a} vs generic {b}");
            }
        }
    }
}

/// Two stages on a chain, one microbatch per stage and two in flight on the first: its
/// vanilla TMPC (fast, 4 bytes per microbatch) does not fit in 5 bytes there, the recompute
/// one (slow, 1 byte) does. A memory term that ignored the microbatches in flight, or
/// rounded `s / d` down, would keep vanilla on both stages.
#[test]
fn memory_counts_the_microbatches_in_flight() {
    let node = |v: usize, sfw: Vec<f64>, sbw: Vec<f64>| {
        [(1.0, 4.0), (1.5, 1.0)].map(|(time, a)| Tmpc {
            node: v,
            t: 1,
            time,
            param: 8.0,
            a,
            b: 0.0,
            sfw: sfw.clone(),
            sbw: sbw.clone(),
        })
    };
    let mut tmpcs: Vec<Tmpc> = node(0, vec![], vec![0.0]).into();
    tmpcs.extend(node(1, vec![0.0], vec![]));
    for knapsack in [
        Knapsack::Heuristic,
        Knapsack::GenericHeuristic,
        Knapsack::Exact { max_nodes: 9 },
    ] {
        let p = Problem {
            n: 2,
            edges: vec![(0, 1, 0.0)],
            tmpcs: tmpcs.clone(),
            devices: 2,
            memory: 5.0,
            bandwidth: 1.0,
            batch: 2,
            exact_batch: false,
            allow_dp: true,
            knapsack,
            max_ideals: 100,
            server: None,
        };
        let r = plan(&p).unwrap();
        // one stage (d = 1, one microbatch in flight) needs one recompute: 2.5; two stages:
        // the first holds 2 microbatches (vanilla 8 > 5 bytes: recompute, 1.5), the second 1
        // (vanilla, 1)
        assert_eq!(r.objective, 1.5, "{knapsack:?}");
        assert_eq!(r.stages.len(), 2);
        assert_eq!(r.stages[0].tmpcs, vec![1]);
        assert_eq!(r.stages[1].tmpcs, vec![2]);
        assert!(close(rescore(&p, &r), 1.5));
    }
}
