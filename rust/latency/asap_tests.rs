//! Unit tests of [`super`]: small hand-computed schedules, and random DAGs against a
//! fixpoint of the ASAP equations (relaxed until nothing changes).

use super::*;
use crate::cancel::Cancel;
use crate::latency::makespans;
use crate::latency::ProblemData;
use crate::mtpp::rng::Rng;

const INF: f64 = f64::INFINITY;

fn problem(
    n: usize,
    edges: &[(u32, u32)],
    times: Vec<f64>,
    size: Vec<f64>,
    bw: Vec<f64>,
    parallel: Vec<bool>,
) -> Problem {
    Problem::new(ProblemData {
        n,
        edges: edges.to_vec(),
        times,
        size,
        bandwidth: bw,
        parallel,
        ..ProblemData::default()
    })
    .unwrap()
}

/// `d` identical devices with bandwidth 1 (times given once per node).
fn identical(n: usize, edges: &[(u32, u32)], t: &[f64], size: &[f64], d: usize) -> Problem {
    let times = t.iter().flat_map(|&x| std::iter::repeat_n(x, d)).collect();
    problem(
        n,
        edges,
        times,
        size.to_vec(),
        vec![1.0; d * d],
        vec![false; d],
    )
}

fn lists(order: &[Vec<i64>]) -> (Vec<usize>, Vec<i64>) {
    let mut off = vec![0];
    let mut flat = vec![];
    for l in order {
        flat.extend_from_slice(l);
        off.push(flat.len());
    }
    (off, flat)
}

fn eval_lists(p: &Problem, dev: &[i64], order: &[Vec<i64>]) -> CoreResult<f64> {
    let (off, flat) = lists(order);
    Workspace::new(p).evaluate(
        p,
        dev,
        Order::Lists {
            off: &off,
            flat: &flat,
        },
    )
}

#[test]
fn a_chain_on_one_device_takes_the_sum_and_pays_transfers_across() {
    let t = [1.5, 2.0, 4.25, 0.5];
    let p = identical(4, &[(0, 1), (1, 2), (2, 3)], &t, &[3.0; 4], 2);
    let mut ws = Workspace::new(&p);
    for order in [Order::RankRoundRobin, Order::Sequence(&[0, 1, 2, 3])] {
        assert_eq!(ws.evaluate(&p, &[1, 1, 1, 1], order).unwrap(), 8.25);
    }
    assert_eq!(ws.start(), &[0.0, 1.5, 3.5, 7.75]);
    // moving node 2 to the other device costs two transfers of 3
    assert_eq!(
        ws.evaluate(&p, &[1, 1, 0, 1], Order::RankRoundRobin)
            .unwrap(),
        14.25
    );
}

#[test]
fn the_fork_takes_the_cheaper_of_serial_branches_and_one_transfer() {
    // s -> {a, b} -> t, branches of w = 3, p_s = 1, p_t = 2, every cut edge costs tau
    let edges = [(0, 1), (0, 2), (1, 3), (2, 3)];
    for (tau, want) in [(1.0, 7.0), (5.0, 9.0)] {
        let p = identical(4, &edges, &[1.0, 3.0, 3.0, 2.0], &[tau; 4], 2);
        let mut ws = Workspace::new(&p);
        let (mut best_rrr, mut best_seq) = (INF, INF);
        for code in 0..16i64 {
            let dev: Vec<i64> = (0..4).map(|i| (code >> i) & 1).collect();
            best_rrr = best_rrr.min(ws.evaluate(&p, &dev, Order::RankRoundRobin).unwrap());
            for seq in permutations(4) {
                if let Ok(m) = ws.evaluate(&p, &dev, Order::Sequence(&seq)) {
                    best_seq = best_seq.min(m);
                }
            }
        }
        assert_eq!((best_rrr, best_seq), (want, want), "tau = {tau}");
    }
    // on a parallel device the branches overlap
    let p = problem(
        4,
        &edges,
        vec![1.0, 3.0, 3.0, 2.0],
        vec![1.0; 4],
        vec![INF],
        vec![true],
    );
    assert_eq!(
        Workspace::new(&p)
            .evaluate(&p, &[0; 4], Order::RankRoundRobin)
            .unwrap(),
        6.0
    );
}

fn permutations(n: usize) -> Vec<Vec<i64>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = vec![];
    for p in permutations(n - 1) {
        for k in 0..=p.len() {
            let mut q = p.clone();
            q.insert(k, (n - 1) as i64);
            out.push(q);
        }
    }
    out
}

#[test]
fn an_order_against_the_dag_is_refused_naming_the_node() {
    let p = identical(3, &[(0, 1), (1, 2)], &[1.0; 3], &[0.0; 3], 2);
    let e = eval_lists(&p, &[0, 1, 0], &[vec![2, 0], vec![1]]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "order: it contradicts the graph's edges on device device 0 (node 0 is put before one of its ancestors)"
    );
    assert!(Workspace::new(&p)
        .evaluate(&p, &[0, 0, 0], Order::Sequence(&[2, 1, 0]))
        .is_err());
    // other bad orders
    let bad = |o: &[Vec<i64>]| eval_lists(&p, &[0, 1, 0], o).unwrap_err().to_string();
    assert!(bad(&[vec![0, 2, 2], vec![1]])
        .contains("lists 2, which is not one of its nodes or is listed twice"));
    assert!(bad(&[vec![0, 1, 2], vec![]]).contains("lists 1"));
    assert!(bad(&[vec![0, -1], vec![1]]).contains("lists -1"));
    assert!(bad(&[vec![0], vec![1]]).contains("node 2 is missing"));
    assert!(bad(&[vec![0, 2]]).contains("expected one list per device (2), got 1"));
    let mut ws = Workspace::new(&p);
    assert!(ws
        .evaluate(&p, &[0, 0, 0], Order::Sequence(&[0, 1]))
        .is_err());
    assert!(ws
        .evaluate(&p, &[0, 0, 0], Order::Sequence(&[0, 1, 1]))
        .is_err());
    assert!(ws
        .evaluate(&p, &[0, 0, 0], Order::Sequence(&[0, 1, 3]))
        .is_err());
}

#[test]
fn bad_placements_and_problems_are_errors_not_panics() {
    let p = problem(
        2,
        &[(0, 1)],
        vec![1.0, INF, 1.0, 1.0],
        vec![0.0; 2],
        vec![INF, 1.0, 1.0, INF],
        vec![false; 2],
    );
    let mut ws = Workspace::new(&p);
    let msg = |r: CoreResult<f64>| r.unwrap_err().to_string();
    assert_eq!(
        msg(ws.evaluate(&p, &[0, 2], Order::RankRoundRobin)),
        "placement: node 1 is on device 2, but there are 2 devices"
    );
    assert_eq!(
        msg(ws.evaluate(&p, &[0, -1], Order::RankRoundRobin)),
        "placement: node 1 is on device -1, but there are 2 devices"
    );
    assert_eq!(
        msg(ws.evaluate(&p, &[1, 0], Order::RankRoundRobin)),
        "placement: node 0 cannot run on device 1"
    );
    assert!(
        msg(ws.evaluate(&p, &[0], Order::RankRoundRobin)).contains("expected 2 device positions")
    );
    let base = ProblemData {
        n: 2,
        edges: vec![(0, 1)],
        times: vec![1.0; 4],
        size: vec![0.0; 2],
        bandwidth: vec![1.0; 4],
        parallel: vec![false; 2],
        ..ProblemData::default()
    };
    let fails = |f: &dyn Fn(&mut ProblemData)| {
        let mut d = base.clone();
        f(&mut d);
        Problem::new(d).unwrap_err()
    };
    assert!(Problem::new(base.clone()).is_ok());
    assert!(fails(&|d| d.times[1] = f64::NAN)
        .to_string()
        .contains("times[0, 1]"));
    assert!(fails(&|d| d.times[2] = -1.0)
        .to_string()
        .contains("times[1, 0]"));
    assert!(fails(&|d| d.times.pop().map_or((), drop))
        .to_string()
        .contains("times"));
    assert!(fails(&|d| d.size[0] = f64::NAN)
        .to_string()
        .contains("size"));
    assert!(fails(&|d| d.size[1] = INF).to_string().contains("size"));
    assert!(fails(&|d| d.bandwidth[1] = 0.0)
        .to_string()
        .contains("bandwidth[0, 1]"));
    assert!(fails(&|d| d.bandwidth[2] = f64::NAN)
        .to_string()
        .contains("bandwidth[1, 0]"));
    assert!(fails(&|d| d.parallel.clear())
        .to_string()
        .contains("at least one device"));
    assert!(fails(&|d| d.edges.push((1, 0)))
        .to_string()
        .contains("cycle"));
    assert!(fails(&|d| d.edges.push((0, 5)))
        .to_string()
        .contains("outside"));
    assert!(fails(&|d| d.node_names = vec!["a".into()])
        .to_string()
        .contains("node_names"));
    // the diagonal of the bandwidths is never read
    let mut d = base.clone();
    d.bandwidth[0] = f64::NAN;
    assert!(Problem::new(d).is_ok());
}

#[test]
fn rank_round_robin_ties_and_the_pointer() {
    // 0, 1, 3 on device 0 (time 1), 2 on device 1 (time 5), edge 2 -> 3: ranks 1, 1, 6, 1
    let p = problem(
        4,
        &[(2, 3)],
        vec![1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 1.0, 1.0],
        vec![0.0; 4],
        vec![1.0; 4],
        vec![false; 2],
    );
    let mut ws = Workspace::new(&p);
    let m = ws.rank_round_robin(&p, &[0, 0, 1, 0]).unwrap();
    assert_eq!(ws.picks(), &[0, 2, 1, 3]);
    assert_eq!(ws.device_orders(&p), vec![vec![0, 1, 3], vec![2]]);
    assert_eq!(m, 6.0);
    // a higher rank goes first whatever its position
    let p = problem(
        3,
        &[(1, 2)],
        vec![1.0; 3],
        vec![0.0; 3],
        vec![INF],
        vec![false],
    );
    ws = Workspace::new(&p);
    ws.rank_round_robin(&p, &[0, 0, 0]).unwrap();
    assert_eq!(ws.picks(), &[1, 0, 2]);
}

/// A random DAG (edges forward in a random permutation) on `nd` devices, some parallel, some
/// times infinite (never all of a node's).
fn random_problem(rng: &mut Rng, n: usize, nd: usize) -> Problem {
    let perm = {
        let mut v: Vec<u32> = (0..n as u32).collect();
        for k in (1..n).rev() {
            v.swap(k, rng.below(k + 1));
        }
        v
    };
    let mut edges = vec![];
    for a in 0..n {
        for b in a + 1..n {
            if rng.unit() < 0.3 {
                edges.push((perm[a], perm[b]));
            }
        }
    }
    let mut times = vec![0.0; n * nd];
    for i in 0..n {
        for d in 0..nd {
            times[i * nd + d] = if d > 0 && rng.unit() < 0.2 {
                INF
            } else {
                (rng.below(8) as f64 + 0.5) * 0.7
            };
        }
    }
    let size = (0..n)
        .map(|_| {
            if rng.unit() < 0.2 {
                0.0
            } else {
                rng.unit() * 3.0
            }
        })
        .collect();
    let bw = (0..nd * nd).map(|_| 0.5 + rng.unit() * 2.0).collect();
    let parallel = (0..nd).map(|d| d == 0 && rng.unit() < 0.5).collect();
    problem(n, &edges, times, size, bw, parallel)
}

/// The ASAP equations relaxed `n + 1` times from zero: `Some(finish)` if they settled.
fn fixpoint(p: &Problem, dev: &[i64], order: &[Vec<i64>]) -> Option<Vec<f64>> {
    let n = p.len();
    let mut prev = vec![None; n];
    for (d, l) in order.iter().enumerate() {
        if !p.is_parallel(d) {
            for w in l.windows(2) {
                prev[w[1] as usize] = Some(w[0] as usize);
            }
        }
    }
    let mut finish = vec![0.0; n];
    for _ in 0..=n + 1 {
        let mut changed = false;
        for i in 0..n {
            let mut s = prev[i].map_or(0.0, |j| finish[j]);
            for &u in p.preds(i) {
                let u = u as usize;
                s = f64::max(
                    s,
                    finish[u] + p.transfer(u, dev[u] as usize, dev[i] as usize),
                );
            }
            let f = s + p.time(i, dev[i] as usize);
            changed |= f != finish[i];
            finish[i] = f;
        }
        if !changed {
            return Some(finish);
        }
    }
    None
}

#[test]
fn random_dags_match_the_fixpoint_in_every_order_form() {
    let mut rng = Rng::new(7);
    let (mut rejected, mut swept) = (0, 0);
    for case in 0..300 {
        let (n, nd) = (1 + rng.below(12), 1 + rng.below(4));
        let p = random_problem(&mut rng, n, nd);
        let mut ws = Workspace::new(&p);
        let dev: Vec<i64> = (0..n)
            .map(|i| loop {
                let d = rng.below(nd);
                if p.time(i, d).is_finite() {
                    break d as i64;
                }
            })
            .collect();
        // rank round-robin: a linear extension, timed as the fixpoint of its device orders
        let m = ws.rank_round_robin(&p, &dev).unwrap();
        let picks = ws.picks().to_vec();
        let mut at = vec![0; n];
        for (k, &i) in picks.iter().enumerate() {
            at[i as usize] = k;
        }
        assert!(
            (0..n).all(|i| p.preds(i).iter().all(|&u| at[u as usize] < at[i])),
            "case {case}"
        );
        let rrr: Vec<Vec<i64>> = ws
            .device_orders(&p)
            .iter()
            .map(|l| l.iter().map(|&x| x as i64).collect())
            .collect();
        let want = fixpoint(&p, &dev, &rrr).unwrap();
        assert_eq!(ws.finish(), want, "case {case}");
        assert_eq!(m, want.iter().cloned().fold(0.0, f64::max));
        // random sequences (some consistent, some not), as a sequence and as lists
        for _ in 0..5 {
            let mut seq: Vec<i64> = (0..n as i64).collect();
            for k in (1..n).rev() {
                seq.swap(k, rng.below(k + 1));
            }
            let mut per: Vec<Vec<i64>> = vec![vec![]; nd];
            for &x in &seq {
                per[dev[x as usize] as usize].push(x);
            }
            let want = fixpoint(&p, &dev, &per);
            let got = ws
                .evaluate(&p, &dev, Order::Sequence(&seq))
                .map(|_| ws.finish().to_vec());
            let got_lists = eval_lists(&p, &dev, &per);
            match want {
                Some(f) => {
                    assert_eq!(got.unwrap(), f, "case {case}");
                    assert_eq!(got_lists.unwrap(), f.iter().cloned().fold(0.0, f64::max));
                    swept += usize::from((0..n).all(|i| {
                        p.preds(i).iter().all(|&u| {
                            seq.iter().position(|&x| x == u as i64)
                                < seq.iter().position(|&x| x == i as i64)
                        })
                    }));
                }
                None => {
                    rejected += 1;
                    assert!(got
                        .unwrap_err()
                        .to_string()
                        .contains("contradicts the graph's edges"));
                    assert!(got_lists.is_err());
                }
            }
        }
    }
    assert!(
        rejected > 50 && swept > 50,
        "rejected {rejected}, linear extensions {swept}"
    );
}

#[test]
fn batches_equal_single_evaluations_and_stop_when_interrupted() {
    let mut rng = Rng::new(3);
    let p = random_problem(&mut rng, 30, 3);
    let m = 40;
    let mut devs = vec![];
    for _ in 0..m {
        for i in 0..30 {
            devs.push(if p.time(i, 1).is_finite() && rng.unit() < 0.5 {
                1
            } else {
                0
            });
        }
    }
    let seqs: Vec<i64> = (0..m)
        .flat_map(|_| p.topo().iter().map(|&x| x as i64))
        .collect();
    let mut ws = Workspace::new(&p);
    let got = makespans(&p, m, &devs, None, &Cancel::never()).unwrap();
    let got_seq = makespans(&p, m, &devs, Some(&seqs), &Cancel::never()).unwrap();
    for r in 0..m {
        let dev = &devs[r * 30..(r + 1) * 30];
        assert_eq!(got[r], ws.evaluate(&p, dev, Order::RankRoundRobin).unwrap());
        assert_eq!(
            got_seq[r],
            ws.evaluate(&p, dev, Order::Sequence(&seqs[r * 30..(r + 1) * 30]))
                .unwrap()
        );
    }
    let mut bad = devs.clone();
    bad[5 * 30 + 2] = 9;
    bad[7 * 30] = 9;
    let e = makespans(&p, m, &bad, None, &Cancel::never()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("row 5: placement: node 2 is on device 9"),
        "{e}"
    );
    assert!(makespans(&p, m + 1, &devs, None, &Cancel::never()).is_err());
    let c = Cancel::never();
    c.interrupt();
    assert_eq!(
        makespans(&p, m, &devs, None, &c),
        Err(CoreError::Interrupted)
    );
}

/// Timing only (`cargo test --release -- --ignored sweep_speed --nocapture`): evaluations per
/// second of the sequence sweep on the benchmark's shape (1,000 nodes, 3,000 edges, 4 devices),
/// a distinct placement and linear extension per evaluation.
#[test]
#[ignore]
fn sweep_speed() {
    let (n, m, nd, rows) = (1000usize, 3000usize, 4usize, 1000usize);
    let mut rng = Rng::new(7);
    let mut perm: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        perm.swap(i, rng.below(i + 1));
    }
    let mut set = std::collections::BTreeSet::new();
    while set.len() < m {
        let (a, b) = (rng.below(n), rng.below(n));
        if a != b {
            set.insert((perm[a.min(b)], perm[a.max(b)]));
        }
    }
    let edges: Vec<(u32, u32)> = set.into_iter().collect();
    let times = (0..n * nd)
        .map(|k| 0.5 + (k % 7) as f64 / (1.0 + (k % nd) as f64))
        .collect();
    let size = (0..n).map(|i| (i % 100) as f64).collect();
    let bw = (0..nd * nd)
        .map(|k| if k / nd / 2 == k % nd / 2 { 50.0 } else { 20.0 })
        .collect();
    let p = problem(n, &edges, times, size, bw, vec![false; nd]);
    let mut succ = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for &(a, b) in &edges {
        succ[a as usize].push(b as usize);
        indeg[b as usize] += 1;
    }
    let mut devs = Vec::new();
    let mut seqs = Vec::new();
    for _ in 0..rows {
        devs.push((0..n).map(|_| rng.below(nd) as i64).collect::<Vec<_>>());
        let mut deg = indeg.clone();
        let mut ready: Vec<usize> = (0..n).filter(|&i| deg[i] == 0).collect();
        let mut seq = Vec::new();
        while !ready.is_empty() {
            let i = ready.swap_remove(rng.below(ready.len()));
            seq.push(i as i64);
            for &j in &succ[i] {
                deg[j] -= 1;
                if deg[j] == 0 {
                    ready.push(j);
                }
            }
        }
        seqs.push(seq);
    }
    // this thread's CPU time (Linux), so that a loaded machine does not skew the figure
    let cpu = || -> f64 {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        s.split_whitespace()
            .next()
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1e9
    };
    let mut ws = Workspace::new(&p);
    let mut total = 0.0;
    let (t0, c0) = (std::time::Instant::now(), cpu());
    for _ in 0..5 {
        for (d, s) in devs.iter().zip(&seqs) {
            total += ws.evaluate(&p, d, Order::Sequence(s)).unwrap();
        }
    }
    let (dt, dc) = (t0.elapsed().as_secs_f64(), cpu() - c0);
    let evals = 5.0 * rows as f64;
    println!(
        "sweep: {:.0} evaluations/s wall, {:.0} per CPU second (checksum {total})",
        evals / dt,
        evals / dc
    );
}
