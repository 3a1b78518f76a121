//! The latency evaluator against a reference written from the model's definition (the module
//! docs of `stagecut_core::latency`), on both of its paths: with the precomputed transfer table
//! (small problems) and without it (`n * D^2` past `MAX_TRANSFER_TABLE`), for the three kinds
//! of order. The reference is the plainest loop: nodes in a given sequence, each starting when
//! the node before it on its device (unless the device is parallel) has finished and every
//! predecessor's output has arrived.

use stagecut_core::cancel::Cancel;
use stagecut_core::latency::{
    makespans, Order, Problem, ProblemData, Workspace, MAX_TRANSFER_TABLE,
};

/// A small deterministic generator (no dependency): xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, k: u64) -> u64 {
        self.next() % k
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Case {
    n: usize,
    nd: usize,
    edges: Vec<(u32, u32)>,
    times: Vec<f64>,
    size: Vec<f64>,
    bandwidth: Vec<f64>,
    parallel: Vec<bool>,
}

/// A random DAG (edges only forward in node order, a few per node) on `nd` devices with
/// distinct asymmetric bandwidths, some zero sizes and times, and parallel device 0.
fn case(seed: u64, n: usize, nd: usize) -> Case {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut edges = Vec::new();
    for v in 1..n {
        for _ in 0..1 + r.below(3) {
            let u = r.below(v as u64) as u32;
            if !edges.contains(&(u, v as u32)) {
                edges.push((u, v as u32));
            }
        }
    }
    let times = (0..n * nd)
        .map(|_| {
            if r.below(8) == 0 {
                0.0
            } else {
                (1 + r.below(9)) as f64
            }
        })
        .collect();
    let size = (0..n)
        .map(|_| {
            if r.below(4) == 0 {
                0.0
            } else {
                (1 + r.below(20)) as f64
            }
        })
        .collect();
    let bandwidth = (0..nd * nd).map(|_| 0.5 + 4.0 * r.unit()).collect();
    let parallel = (0..nd).map(|d| d == 0).collect();
    Case {
        n,
        nd,
        edges,
        times,
        size,
        bandwidth,
        parallel,
    }
}

fn problem(c: &Case) -> Problem {
    Problem::new(ProblemData {
        n: c.n,
        edges: c.edges.clone(),
        times: c.times.clone(),
        size: c.size.clone(),
        bandwidth: c.bandwidth.clone(),
        parallel: c.parallel.clone(),
        node_names: vec![],
        device_names: vec![],
    })
    .unwrap()
}

/// The makespan of placement `dev` with each device running its nodes in the order of `seq`
/// (a topological order of all nodes), from the definition.
fn reference(c: &Case, dev: &[i64], seq: &[i64]) -> f64 {
    let mut preds = vec![vec![]; c.n];
    for &(u, v) in &c.edges {
        preds[v as usize].push(u as usize);
    }
    let mut finish = vec![f64::NAN; c.n];
    let mut last_on = vec![0.0f64; c.nd];
    let mut makespan = 0.0f64;
    for &i in seq {
        let i = i as usize;
        let d = dev[i] as usize;
        let mut start = if c.parallel[d] { 0.0 } else { last_on[d] };
        for &u in &preds[i] {
            assert!(
                !finish[u].is_nan(),
                "the sequence is not a topological order"
            );
            let du = dev[u] as usize;
            let arrive = if du == d {
                finish[u]
            } else {
                finish[u] + c.size[u] / c.bandwidth[du * c.nd + d]
            };
            start = start.max(arrive);
        }
        finish[i] = start + c.times[i * c.nd + d];
        last_on[d] = finish[i];
        makespan = makespan.max(finish[i]);
    }
    makespan
}

/// A random topological order (nodes are numbered in one): a random ready node each step.
fn random_sequence(c: &Case, r: &mut Rng) -> Vec<i64> {
    let mut indeg = vec![0usize; c.n];
    let mut succ = vec![vec![]; c.n];
    for &(u, v) in &c.edges {
        indeg[v as usize] += 1;
        succ[u as usize].push(v as usize);
    }
    let mut ready: Vec<usize> = (0..c.n).filter(|&v| indeg[v] == 0).collect();
    let mut out = Vec::with_capacity(c.n);
    while !ready.is_empty() {
        let v = ready.swap_remove(r.below(ready.len() as u64) as usize);
        out.push(v as i64);
        for &w in &succ[v] {
            indeg[w] -= 1;
            if indeg[w] == 0 {
                ready.push(w);
            }
        }
    }
    out
}

fn lists(c: &Case, dev: &[i64], seq: &[i64]) -> (Vec<usize>, Vec<i64>) {
    let mut per: Vec<Vec<i64>> = vec![vec![]; c.nd];
    for &v in seq {
        per[dev[v as usize] as usize].push(v);
    }
    let mut off = vec![0usize];
    let mut flat = vec![];
    for l in per {
        flat.extend(l);
        off.push(flat.len());
    }
    (off, flat)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn check(c: &Case, rounds: usize, seed: u64) {
    let p = problem(c);
    let mut ws = Workspace::new(&p);
    let mut r = Rng(seed | 1);
    for _ in 0..rounds {
        let dev: Vec<i64> = (0..c.n).map(|_| r.below(c.nd as u64) as i64).collect();
        let seq = random_sequence(c, &mut r);
        let want = reference(c, &dev, &seq);
        assert!(want > 0.0);
        let got = ws.evaluate(&p, &dev, Order::Sequence(&seq)).unwrap();
        assert!(close(got, want), "sequence: {got} against {want}");
        let (off, flat) = lists(c, &dev, &seq);
        let got = ws
            .evaluate(
                &p,
                &dev,
                Order::Lists {
                    off: &off,
                    flat: &flat,
                },
            )
            .unwrap();
        assert!(close(got, want), "lists: {got} against {want}");
        // the rank round-robin order: its makespan is that of the order it picked
        let got = ws.evaluate(&p, &dev, Order::RankRoundRobin).unwrap();
        let picks: Vec<i64> = ws.picks().iter().map(|&v| v as i64).collect();
        assert_eq!(picks.len(), c.n);
        let want = reference(c, &dev, &picks);
        assert!(close(got, want), "rank round-robin: {got} against {want}");
        // a sequence that is not a topological order but whose restriction to each device
        // is: checked and timed by the other route (Kahn), the same makespan
        let mut by_device = seq.clone();
        by_device.sort_by_key(|&v| dev[v as usize]);
        let got = ws.evaluate(&p, &dev, Order::Sequence(&by_device)).unwrap();
        let want = reference(c, &dev, &seq);
        assert!(
            close(got, want),
            "sequence grouped by device: {got} against {want}"
        );
    }
}

#[test]
fn with_the_transfer_table_the_evaluator_is_the_definition() {
    for seed in 0..20 {
        let c = case(seed, 5 + seed as usize % 30, 1 + seed as usize % 5);
        assert!(c.n * c.nd * c.nd <= MAX_TRANSFER_TABLE);
        check(&c, 10, seed + 100);
    }
}

#[test]
fn without_the_transfer_table_the_evaluator_is_the_definition() {
    // 64 devices: 4,096 transfers per node, so 1,100 nodes are past the 2^22 the table holds
    for seed in 0..2 {
        let c = case(1000 + seed, 1100, 64);
        assert!(c.n * c.nd * c.nd > MAX_TRANSFER_TABLE);
        check(&c, 3, seed + 7);
    }
}

#[test]
fn transfers_on_one_device_are_free_and_between_two_are_size_over_bandwidth() {
    // two nodes, an edge, three devices with distinct bandwidths each way
    let c = Case {
        n: 2,
        nd: 3,
        edges: vec![(0, 1)],
        times: vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
        size: vec![12.0, 0.0],
        bandwidth: vec![0.0, 2.0, 3.0, 4.0, 0.0, 6.0, 1.0, 8.0, 0.0],
        parallel: vec![false; 3],
    };
    let p = problem(&c);
    let mut ws = Workspace::new(&p);
    for (a, b, want) in [
        (0, 0, 1.0 + 8.0),
        (1, 1, 2.0 + 16.0),
        (0, 1, 1.0 + 12.0 / 2.0 + 16.0),
        (1, 0, 2.0 + 12.0 / 4.0 + 8.0),
        (0, 2, 1.0 + 12.0 / 3.0 + 32.0),
        (2, 1, 4.0 + 12.0 / 8.0 + 16.0),
    ] {
        let got = ws.evaluate(&p, &[a, b], Order::Sequence(&[0, 1])).unwrap();
        assert!(close(got, want), "{a} -> {b}: {got} against {want}");
        let tr = if a == b {
            0.0
        } else {
            c.size[0] / c.bandwidth[a as usize * 3 + b as usize]
        };
        assert_eq!(
            p.transfer(0, a as usize, b as usize),
            tr,
            "transfer {a} -> {b}"
        );
    }
}

#[test]
fn many_placements_at_once_equal_the_reference_row_by_row() {
    for (seed, n, nd) in [(3u64, 40usize, 4usize), (4, 1100, 64)] {
        let c = case(seed, n, nd);
        let p = problem(&c);
        assert_eq!((p.len(), p.is_empty(), p.num_devices()), (n, false, nd));
        assert_eq!(p.num_edges(), c.edges.len());
        let mut r = Rng(seed + 11);
        let m = 3;
        let devs: Vec<i64> = (0..m * n).map(|_| r.below(nd as u64) as i64).collect();
        let seqs: Vec<i64> = (0..m).flat_map(|_| random_sequence(&c, &mut r)).collect();
        let got = makespans(&p, m, &devs, Some(&seqs), &Cancel::never()).unwrap();
        for row in 0..m {
            let want = reference(
                &c,
                &devs[row * n..(row + 1) * n],
                &seqs[row * n..(row + 1) * n],
            );
            assert!(
                close(got[row], want),
                "row {row}: {} against {want}",
                got[row]
            );
        }
        assert!(makespans(
            &p,
            m,
            &devs,
            Some(&seqs[..seqs.len() - 1]),
            &Cancel::never()
        )
        .is_err());
    }
}

#[test]
fn a_bad_placement_says_which_node_and_why() {
    let mut c = case(9, 6, 3);
    c.times[2 * 3 + 1] = f64::INFINITY; // node 2 cannot run on device 1
    let p = problem(&c);
    let mut ws = Workspace::new(&p);
    let seq: Vec<i64> = (0..6).collect();
    let e = ws
        .evaluate(&p, &[0, 0, 1, 0, 0, 0], Order::Sequence(&seq))
        .unwrap_err();
    assert!(
        e.to_string().contains("node 2 cannot run on device 1"),
        "{e}"
    );
    let e = ws
        .evaluate(&p, &[0, 0, 0, 3, 0, 0], Order::Sequence(&seq))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("node 3 is on device 3, but there are 3 devices"),
        "{e}"
    );
    assert!(ws
        .evaluate(&p, &[0, 0, 2, 0, 0, 0], Order::Sequence(&seq))
        .is_ok());
}
