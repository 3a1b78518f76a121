//! The ideal enumeration against a brute force over node subsets (small random DAGs, chains,
//! near-chains, antichains), and the DP with its bounds ([`solve_bounded`]: the greedy bound and
//! the cell filter) against references: an `O(n^2 k)` linear partition on chains, the plain DP
//! (no pruning) on larger near-chains and series-parallel graphs.

mod common;

use common::sum_cost::Sum;
use common::{chain, random_dag, Lcg};
use stagecut_core::dag::Dag;
use stagecut_core::ideal_bounds::{greedy_upper, solve_bounded};
use stagecut_core::ideal_dp::solve;
use stagecut_core::ideals::Ideals;
use stagecut_core::throughput::{MaxLoadCost, OriginalNodes};
use stagecut_core::Cancel;

const INF: f64 = f64::INFINITY;

/// All ideals of a small DAG as bitmasks, by testing every subset.
fn brute_ideals(n: usize, edges: &[(u32, u32)]) -> Vec<u32> {
    (0u32..1 << n)
        .filter(|&m| {
            edges
                .iter()
                .all(|&(a, b)| m >> b & 1 == 0 || m >> a & 1 == 1)
        })
        .collect()
}

fn mask(ids: &Ideals, id: usize) -> u32 {
    ids.members(id).iter().fold(0, |m, &v| m | 1 << v)
}

/// Every property of the enumeration that the solvers rely on, against the brute force.
fn check_against_brute_force(n: usize, edges: &[(u32, u32)], what: &str) {
    let dag = Dag::from_edges(n, edges).unwrap();
    let ids = Ideals::enumerate(&dag, 1 << 20).unwrap();
    let mut want = brute_ideals(n, edges);
    let masks: Vec<u32> = (0..ids.len()).map(|i| mask(&ids, i)).collect();
    let mut got = masks.clone();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "{what}: the ideals");
    let id_of = |m: u32| masks.iter().position(|&x| x == m).unwrap();
    assert_eq!(masks[0], 0, "{what}: id 0 is the empty set");
    assert_eq!(ids.full(), id_of((1u32 << n) - 1), "{what}: the full set");
    let is_pred = |a: usize, b: usize| edges.contains(&(a as u32, b as u32));
    for id in 0..ids.len() {
        let m = masks[id];
        assert_eq!(ids.cardinality(id), m.count_ones() as usize, "{what}");
        if id > 0 {
            assert!(
                ids.cardinality(id - 1) <= ids.cardinality(id),
                "{what}: by size"
            );
        }
        for v in 0..n {
            assert_eq!(ids.contains(id, v), m >> v & 1 == 1, "{what}: contains");
        }
        // immediate subs: I \ {v} for exactly the maximal v, rank descending
        let subs = ids.immediate_subs(id);
        let maximal: Vec<usize> = (0..n)
            .filter(|&v| m >> v & 1 == 1 && (0..n).all(|w| m >> w & 1 == 0 || !is_pred(v, w)))
            .collect();
        assert_eq!(subs.len(), maximal.len(), "{what}: subs of {m:b}");
        for w in subs.windows(2) {
            assert!(
                ids.rank(w[0].0 as usize) > ids.rank(w[1].0 as usize),
                "{what}"
            );
        }
        for &(v, s) in subs {
            assert!(maximal.contains(&(v as usize)), "{what}");
            assert_eq!(
                masks[s as usize],
                m & !(1 << v),
                "{what}: sub of {m:b} by {v}"
            );
            assert!((s as usize) < id, "{what}: subs come first");
        }
        // the canonical parent drops the top, the node of largest rank
        if id > 0 {
            let top = ids.top(id).unwrap();
            assert!((0..n).all(|v| m >> v & 1 == 0 || ids.rank(v) <= ids.rank(top)));
            assert_eq!(masks[ids.parent(id).unwrap()], m & !(1 << top), "{what}");
        }
        // canonical descent: each sub-ideal once; differences by the chains
        let mut seen = Vec::new();
        ids.for_each_subideal(id, |j, _| seen.push(j));
        let total = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), total, "{what}: a sub-ideal twice");
        let expected: Vec<usize> = (0..ids.len()).filter(|&j| masks[j] & !m == 0).collect();
        assert_eq!(seen, expected, "{what}: sub-ideals of {m:b}");
        for &j in &expected {
            let d: Vec<usize> = (0..n).filter(|&v| (m & !masks[j]) >> v & 1 == 1).collect();
            assert_eq!(
                ids.difference(id, j),
                d,
                "{what}: {m:b} minus {:b}",
                masks[j]
            );
        }
    }
}

#[test]
fn ideals_match_the_brute_force() {
    let mut rng = Lcg(77);
    for trial in 0..120 {
        let n = 1 + trial % 11;
        let p = [0.1, 0.3, 0.6][trial % 3];
        let (edges, _) = random_dag(&mut rng, n, p);
        check_against_brute_force(n, &edges, &format!("random trial {trial}"));
    }
    for n in [0, 1, 2, 9] {
        check_against_brute_force(n, &chain(n), "chain");
    }
    // near-chains: a chain with side nodes hanging off it, or two chains side by side
    let mut side = chain(8);
    side.extend([(2, 8), (5, 9), (9, 6)]);
    check_against_brute_force(10, &side, "chain with side nodes");
    let mut two = chain(5);
    two.extend((6..10u32).map(|i| (i - 1, i)));
    two.push((2, 7));
    check_against_brute_force(10, &two, "two linked chains");
    for n in [3, 8, 11] {
        check_against_brute_force(n, &[], "antichain");
    }
}

#[test]
fn large_chains_and_antichains_are_counted_in_linear_space() {
    // a chain of 50,000: 50,001 ideals, one immediate sub each (the old bitsets needed 300 MB)
    let n = 50_000;
    let ids = Ideals::enumerate(&Dag::from_edges(n, &chain(n)).unwrap(), n + 1).unwrap();
    assert_eq!(ids.len(), n + 1);
    assert_eq!(ids.levels().len(), n + 1);
    assert!((1..=n).all(|i| ids.immediate_subs(i) == [((i - 1) as u32, (i - 1) as u32)]));
    assert_eq!(ids.difference(n, n / 2), (n / 2..n).collect::<Vec<_>>());
    // an antichain of 16: 2^16 ideals; the level of size 8 holds C(16, 8) of them
    let ids = Ideals::enumerate(&Dag::from_edges(16, &[]).unwrap(), 1 << 17).unwrap();
    assert_eq!(ids.len(), 1 << 16);
    assert_eq!(ids.levels()[8].len(), 12_870);
    let subs: usize = (0..ids.len()).map(|i| ids.immediate_subs(i).len()).sum();
    assert_eq!(subs, 16 << 15);
}

/// The best split of a chain into at most `k` accelerator and `l` CPU intervals: `O(n^2 k l)`.
fn linear_partition(w: &[f64], k: usize, l: usize) -> f64 {
    let n = w.len();
    let mut pre = vec![0.0; n + 1];
    for i in 0..n {
        pre[i + 1] = pre[i] + w[i];
    }
    // best[i][a][c]: the first i nodes on a accelerators and c CPUs (each used at most once)
    let mut best = vec![vec![vec![INF; l + 1]; k + 1]; n + 1];
    for row in best[0].iter_mut() {
        row.fill(0.0);
    }
    for i in 1..=n {
        for a in 0..=k {
            for c in 0..=l {
                let mut b = INF;
                for j in 0..i {
                    let s = pre[i] - pre[j];
                    if a > 0 {
                        b = b.min(best[j][a - 1][c].max(s));
                    }
                    if c > 0 {
                        b = b.min(best[j][a][c - 1].max(3.0 * s));
                    }
                }
                best[i][a][c] = b;
            }
        }
    }
    best[n][k][l]
}

#[test]
fn chains_equal_the_linear_partition() {
    let mut rng = Lcg(5);
    let never = Cancel::never();
    for trial in 0..60 {
        let n = 1 + trial * 3 % 70;
        let w: Vec<f64> = (0..n)
            .map(|_| if rng.chance(0.2) { 0.0 } else { rng.int(20) })
            .collect();
        let (k, l) = ([1, 2, 3, 5, 8][trial % 5], [0, 0, 1, 2][trial % 4]);
        let want = linear_partition(&w, k, l);
        let ids = Ideals::enumerate(&Dag::from_edges(n, &chain(n)).unwrap(), n + 2).unwrap();
        let cost = Sum::with_node_bounds(w.clone());
        let plain = solve(&ids, &cost, k, l, false, INF).unwrap();
        let bounded = solve_bounded(&ids, &cost, k, l, INF, &never).unwrap();
        assert_eq!(plain.objective, want, "trial {trial}: plain");
        assert_eq!(bounded.objective, want, "trial {trial}: bounded");
        assert!(bounded.pairs <= plain.pairs);
        // the greedy bound is a real split: never below the optimum
        let g = greedy_upper(&ids, &cost, k, l, &never).unwrap();
        assert!(
            g >= want,
            "trial {trial}: greedy {g} below the optimum {want}"
        );
        let covered: usize = bounded.blocks.iter().map(|b| b.nodes.len()).sum();
        assert_eq!(covered, n, "trial {trial}");
    }
}

#[test]
fn a_long_chain_visits_few_pairs() {
    // 3,000 nodes on 8 accelerators: the unbounded DP visits about n^2 / k pairs; with the
    // greedy bound and the cell filter only the ideals near each j * total / 8 get a descent
    let n = 3000;
    let mut rng = Lcg(9);
    let w: Vec<f64> = (0..n).map(|_| 1.0 + rng.int(9)).collect();
    let ids = Ideals::enumerate(&Dag::from_edges(n, &chain(n)).unwrap(), n + 2).unwrap();
    let cost = Sum::with_node_bounds(w.clone());
    let sol = solve_bounded(&ids, &cost, 8, 0, INF, &Cancel::never()).unwrap();
    assert_eq!(sol.objective, linear_partition(&w, 8, 0));
    assert!(sol.pairs < 40 * n as u64, "{} pairs", sol.pairs);
    let rows = solve(&ids, &cost, 8, 0, true, INF).unwrap();
    assert_eq!(rows.objective, sol.objective);
    assert!(
        rows.pairs > 50 * sol.pairs,
        "{} vs {}",
        rows.pairs,
        sol.pairs
    );
}

/// A max-load instance on `n` single-node units: random times, tensors, memory and kinds.
fn max_load_case(rng: &mut Lcg, n: usize, edges: &[(u32, u32)], mem: f64) -> MaxLoadCost {
    let orig = OriginalNodes {
        acc_time: (0..n).map(|_| rng.int(9)).collect(),
        cpu_time: (0..n).map(|_| rng.int(30)).collect(),
        size: (0..n).map(|_| rng.int(3)).collect(),
        comm: (0..n).map(|_| [0.0, 1.0, 6.0][rng.below(3)]).collect(),
        acc_ok: (0..n).map(|_| rng.chance(0.95)).collect(),
        cpu_ok: (0..n).map(|_| rng.chance(0.9)).collect(),
        edges: edges.to_vec(),
    };
    let members: Vec<Vec<u32>> = (0..n as u32).map(|v| vec![v]).collect();
    MaxLoadCost::new(&orig, &members, mem, INF).unwrap()
}

#[test]
fn bounded_dp_equals_the_plain_dp_on_near_chains_and_series_parallel_graphs() {
    let mut rng = Lcg(31);
    let never = Cancel::never();
    let mut finite = 0;
    for trial in 0..90 {
        let n = 8 + trial % 30;
        let mut edges = chain(n);
        match trial % 3 {
            // near-chain: a few nodes moved beside the chain
            0 => {
                edges.retain(|&(a, _)| a % 7 != 3);
                for a in (3..n as u32 - 1).step_by(7) {
                    edges.push((a - 1, a + 1));
                }
            }
            // series-parallel: diamonds a -> {b, c} -> d
            1 => {
                edges.clear();
                for a in (0..n as u32 - 3).step_by(3) {
                    edges.extend([(a, a + 1), (a, a + 2), (a + 1, a + 3), (a + 2, a + 3)]);
                }
            }
            _ => {}
        }
        let dag = Dag::from_edges(n, &edges).unwrap();
        let ids = Ideals::enumerate(&dag, 1 << 20).unwrap();
        let mem = [INF, 40.0, 16.0][trial % 3];
        let cost = max_load_case(&mut rng, n, &edges, mem);
        let (k, l) = ([1, 2, 3, 4, 6][trial % 5], [0, 1, 0, 2][trial % 4]);
        let plain = solve(&ids, &cost, k, l, false, INF).unwrap();
        let bounded = solve_bounded(&ids, &cost, k, l, INF, &never).unwrap();
        assert_eq!(bounded.objective, plain.objective, "trial {trial}");
        if plain.objective.is_finite() {
            finite += 1;
            let tight = solve(&ids, &cost, k, l, true, plain.objective).unwrap();
            assert_eq!(
                tight.objective, plain.objective,
                "trial {trial}: upper = optimum"
            );
            assert!(tight.pairs <= plain.pairs);
        }
    }
    assert!(finite > 45, "too few feasible cases: {finite}");
}
