//! Enumeration of the ideals (downsets) of a DAG.
//!
//! An ideal is a set of nodes closed under predecessors. Ideals are produced level by level
//! (by cardinality), so ideal ids are sorted by size: id 0 is the empty set, the last id is
//! the full node set, and every strict sub-ideal of `I` has a smaller id than `I`.
//!
//! For each ideal we keep its *immediate sub-ideals*: `I \ {v}` for every maximal `v` of `I`,
//! sorted by the topological rank of `v`, descending. Every sub-ideal `J` of `I` is reached
//! exactly once by a *canonical descent*: remove the nodes of `I \ J` in decreasing rank order
//! (each is maximal when removed). So a DFS from `I` that, from a state reached by removing a
//! node of rank `r`, only removes nodes of rank `< r`, visits each sub-ideal once, and each
//! step grows the difference `I \ J` by one node: solvers keep their block costs incrementally.

use std::collections::HashMap;

use crate::cancel::{self, Cancel};
use crate::dag::Dag;
use crate::error::{CoreError, CoreResult};
use crate::memory;

#[derive(Debug, Clone)]
pub struct Ideals {
    n: usize,
    words: usize,
    bits: Vec<u64>,
    card: Vec<u32>,
    /// Topological rank of each node (position in a fixed topological order).
    rank: Vec<u32>,
    sub_off: Vec<usize>,
    /// `(removed node, sub-ideal id)` pairs, rank of the node descending.
    sub: Vec<(u32, u32)>,
}

impl Ideals {
    /// Enumerate all ideals of `dag`; fails with `TooManyIdeals` as soon as more than
    /// `max_ideals` are found, or at once when the DAG has `max_ideals` nodes or more (so the
    /// cost of a refusal is bounded by the limit).
    pub fn enumerate(dag: &Dag, max_ideals: usize) -> CoreResult<Ideals> {
        Ideals::enumerate_with(dag, max_ideals, &Cancel::never())
    }

    /// [`Ideals::enumerate`], polling `cancel`, and refused (`MemoryLimit`) once the ideals
    /// found so far pass the memory budget (each is a bitset of `n` bits, about twice over
    /// while its level is indexed).
    pub fn enumerate_with(dag: &Dag, max_ideals: usize, cancel: &Cancel) -> CoreResult<Ideals> {
        let n = dag.len();
        // a DAG on n nodes has at least n + 1 ideals (the prefixes of a topological order)
        if n >= max_ideals {
            return Err(CoreError::TooManyIdeals { limit: max_ideals });
        }
        let words = n.div_ceil(64).max(1);
        let order = dag.topo_order()?;
        let mut rank = vec![0u32; n];
        for (i, &v) in order.iter().enumerate() {
            rank[v] = i as u32;
        }
        let mut bits: Vec<u64> = vec![0; words];
        let mut card: Vec<u32> = vec![0];
        // per ideal, its immediate subs (filled as supersets are generated)
        let mut subs: Vec<Vec<(u32, u32)>> = vec![Vec::new()];
        let mut level_start = 0usize;
        let mut level_end = 1usize;
        let mut scratch = vec![0u64; words];
        let per_ideal = (words * 16 + 64) as f64;
        let room = memory::budget()? / per_ideal;
        let mut tick = cancel.ticker((1 << 16) / (n as u32).saturating_add(1));
        while level_start < level_end {
            let mut index: HashMap<Box<[u64]>, u32> = HashMap::new();
            for id in level_start..level_end {
                if let Err(stop) = tick.tick() {
                    // millions of small allocations take a while to free: not on the way out
                    cancel::drop_in_background((index, subs, bits));
                    return Err(stop.into());
                }
                for v in 0..n {
                    let (w, b) = (v / 64, 1u64 << (v % 64));
                    let cur = &bits[id * words..(id + 1) * words];
                    if cur[w] & b != 0 {
                        continue;
                    }
                    if !dag
                        .preds(v)
                        .iter()
                        .all(|&u| cur[u as usize / 64] >> (u % 64) & 1 == 1)
                    {
                        continue;
                    }
                    scratch.copy_from_slice(cur);
                    scratch[w] |= b;
                    let new_id = match index.get(&scratch[..]) {
                        Some(&x) => x as usize,
                        None => {
                            let x = card.len();
                            if x >= max_ideals {
                                return Err(CoreError::TooManyIdeals { limit: max_ideals });
                            }
                            if x as f64 >= room {
                                return Err(too_big(n, x, per_ideal));
                            }
                            index.insert(scratch.clone().into_boxed_slice(), x as u32);
                            bits.extend_from_slice(&scratch);
                            card.push(card[id] + 1);
                            subs.push(Vec::new());
                            x
                        }
                    };
                    subs[new_id].push((v as u32, id as u32));
                }
            }
            level_start = level_end;
            level_end = card.len();
        }
        let mut sub_off = Vec::with_capacity(card.len() + 1);
        let mut sub = Vec::new();
        sub_off.push(0);
        for mut s in subs {
            s.sort_unstable_by_key(|&(v, _)| std::cmp::Reverse(rank[v as usize]));
            sub.extend(s);
            sub_off.push(sub.len());
        }
        Ok(Ideals {
            n,
            words,
            bits,
            card,
            rank,
            sub_off,
            sub,
        })
    }

    /// Number of ideals (including the empty and the full set).
    pub fn len(&self) -> usize {
        self.card.len()
    }

    pub fn is_empty(&self) -> bool {
        self.card.is_empty()
    }

    /// Number of nodes of the underlying DAG.
    pub fn num_nodes(&self) -> usize {
        self.n
    }

    /// Id of the full node set.
    pub fn full(&self) -> usize {
        self.card.len() - 1
    }

    pub fn cardinality(&self, id: usize) -> usize {
        self.card[id] as usize
    }

    pub fn rank(&self, v: usize) -> u32 {
        self.rank[v]
    }

    pub fn contains(&self, id: usize, v: usize) -> bool {
        self.bits[id * self.words + v / 64] >> (v % 64) & 1 == 1
    }

    /// The ideal as a bitset of `ceil(n / 64)` words.
    pub fn bits(&self, id: usize) -> &[u64] {
        &self.bits[id * self.words..(id + 1) * self.words]
    }

    /// Nodes of the ideal, ascending.
    pub fn members(&self, id: usize) -> Vec<usize> {
        (0..self.n).filter(|&v| self.contains(id, v)).collect()
    }

    /// `(v, id of I \ {v})` for each maximal node `v` of ideal `id`, rank of `v` descending.
    pub fn immediate_subs(&self, id: usize) -> &[(u32, u32)] {
        &self.sub[self.sub_off[id]..self.sub_off[id + 1]]
    }

    /// Ranges of ideal ids with equal cardinality, in increasing cardinality.
    pub fn levels(&self) -> Vec<std::ops::Range<usize>> {
        let mut out = Vec::new();
        let mut start = 0;
        for id in 1..=self.card.len() {
            if id == self.card.len() || self.card[id] != self.card[start] {
                out.push(start..id);
                start = id;
            }
        }
        out
    }

    /// Visit every sub-ideal `J` of `id` (including `id` itself and the empty set) once, by
    /// canonical descent; `f(J, removed)` gets the node just removed (`None` for `J = I`).
    /// Convenience for tests and small inputs; solvers run their own pruned descent.
    pub fn for_each_subideal(&self, id: usize, mut f: impl FnMut(usize, Option<usize>)) {
        f(id, None);
        let mut stack: Vec<(usize, u32)> = vec![(id, u32::MAX)];
        while let Some((k, r)) = stack.pop() {
            for &(v, s) in self.immediate_subs(k) {
                if self.rank[v as usize] < r {
                    f(s as usize, Some(v as usize));
                    stack.push((s as usize, self.rank[v as usize]));
                }
            }
        }
    }
}

/// The refusal of an enumeration that passed the memory budget at `count` ideals.
fn too_big(n: usize, count: usize, per_ideal: f64) -> CoreError {
    let what = format!("enumerating the ideals of this {n}-node graph ({count} found so far)");
    let hint = "lower max_ideals, or use a method that does not enumerate ideals";
    let limit = memory::budget().unwrap_or(memory::DEFAULT_BUDGET);
    memory::refusal(count as f64 * per_ideal, limit, &what, hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_ideals(n: usize, edges: &[(u32, u32)]) -> usize {
        (0u32..1 << n)
            .filter(|&m| {
                edges
                    .iter()
                    .all(|&(a, b)| m >> b & 1 == 0 || m >> a & 1 == 1)
            })
            .count()
    }

    #[test]
    fn counts_match_brute_force() {
        let cases: Vec<(usize, Vec<(u32, u32)>)> = vec![
            (1, vec![]),
            (4, vec![]),
            (4, vec![(0, 1), (1, 2), (2, 3)]),
            (5, vec![(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)]),
            (6, vec![(0, 2), (1, 2), (2, 3), (2, 4), (4, 5)]),
        ];
        for (n, e) in cases {
            let d = Dag::from_edges(n, &e).unwrap();
            let ids = Ideals::enumerate(&d, 1 << 20).unwrap();
            assert_eq!(ids.len(), brute_ideals(n, &e));
            assert_eq!(ids.cardinality(ids.full()), n);
            // every ideal's sub-ideals, by canonical descent, are each visited exactly once
            for id in 0..ids.len() {
                let mut seen = Vec::new();
                ids.for_each_subideal(id, |j, _| seen.push(j));
                let total = seen.len();
                seen.sort();
                seen.dedup();
                assert_eq!(seen.len(), total);
                let expected = (0..ids.len())
                    .filter(|&j| (0..n).all(|v| !ids.contains(j, v) || ids.contains(id, v)))
                    .count();
                assert_eq!(total, expected);
            }
        }
    }

    #[test]
    fn limit_is_enforced() {
        let d = Dag::from_edges(10, &[]).unwrap();
        let err = Ideals::enumerate(&d, 100).unwrap_err();
        assert_eq!(err, CoreError::TooManyIdeals { limit: 100 });
        // a chain of n nodes has exactly n + 1 ideals
        let chain = Dag::from_edges(4, &[(0, 1), (1, 2), (2, 3)]).unwrap();
        assert_eq!(Ideals::enumerate(&chain, 5).unwrap().len(), 5);
        assert_eq!(
            Ideals::enumerate(&chain, 4).unwrap_err(),
            CoreError::TooManyIdeals { limit: 4 }
        );
        let empty = Dag::from_edges(0, &[]).unwrap();
        assert_eq!(Ideals::enumerate(&empty, 1).unwrap().len(), 1);
        assert!(Ideals::enumerate(&empty, 0).is_err());
    }
}
