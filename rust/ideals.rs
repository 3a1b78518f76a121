//! Enumeration of the ideals (downsets) of a DAG.
//!
//! An ideal is a set of nodes closed under predecessors. Ideal ids are sorted by size: id 0 is
//! the empty set, the last id is the full node set, and every strict sub-ideal of `I` has a
//! smaller id than `I`.
//!
//! For each ideal we keep its *immediate sub-ideals*: `I \ {v}` for every maximal `v` of `I`,
//! sorted by the topological rank of `v`, descending. Every sub-ideal `J` of `I` is reached
//! exactly once by a *canonical descent*: remove the nodes of `I \ J` in decreasing rank order
//! (each is maximal when removed). So a DFS from `I` that, from a state reached by removing a
//! node of rank `r`, only removes nodes of rank `< r`, visits each sub-ideal once, and each
//! step grows the difference `I \ J` by one node: solvers keep their block costs incrementally.
//!
//! # Representation: no node sets
//!
//! No ideal is stored as a set of nodes. Each non-empty ideal `I` has a *top*, its node of
//! largest rank (always maximal), and a *canonical parent* `I \ {top}`; the parent links form a
//! tree rooted at the empty set, and membership is recovered by walking it
//! ([`Ideals::members`], [`Ideals::difference`]). Memory is `O(ideals + immediate subs)`, not
//! `O(ideals * n)`.
//!
//! Enumeration is a reverse search over that tree: the children of `I` are `I + {v}` for every
//! *addable* `v` (not in `I`, all its predecessors in `I`) of rank above `I`'s top. A DFS keeps
//! the current ideal incrementally (missing-predecessor counters and the set of addable ranks),
//! so each ideal costs `O(degree)` plus a few bitset searches, whatever `n`.
//!
//! The immediate subs need no lookup table: for `I` with top `t` and parent `P`, the maximal
//! nodes of `I` are `t` and the maximal nodes `m` of `P` that are not predecessors of `t`; and
//! `I \ {m}` is the child of `P \ {m}` (an immediate sub of `P`, known already) by `t`, since
//! `t` is still the largest rank there. Ideals are then renumbered by cardinality (stably, so
//! the result is deterministic).

use crate::cancel::{self, Cancel};
use crate::dag::Dag;
use crate::error::{CoreError, CoreResult};
use crate::memory;
use crate::progress::Phase;

/// "No node / no ideal".
const NONE: u32 = u32::MAX;

/// Estimated bytes per ideal while enumerating: parent, top and cardinality (12), the child
/// lists (8), the sub offsets (12), the renumbering (4) and the renumbered copies (24), rounded
/// up. Each immediate sub costs 8 more.
const BYTES_PER_IDEAL: f64 = 64.0;
const BYTES_PER_SUB: f64 = 8.0;

#[derive(Debug, Clone)]
pub struct Ideals {
    n: usize,
    card: Vec<u32>,
    /// Topological rank of each node (position in a fixed topological order).
    rank: Vec<u32>,
    /// Canonical parent (`I` minus its top); `NONE` for the empty set.
    parent: Vec<u32>,
    /// The node of largest rank; `NONE` for the empty set.
    top: Vec<u32>,
    sub_start: Vec<usize>,
    sub_len: Vec<u32>,
    /// `(removed node, sub-ideal id)` pairs, per ideal rank of the node descending.
    sub: Vec<(u32, u32)>,
}

/// Ranks `0..n` as a two-level bitset: insert, remove, and the next member from a rank.
struct RankSet {
    words: Vec<u64>,
    /// Bit `w` set when `words[w]` is non-zero.
    summary: Vec<u64>,
}

impl RankSet {
    fn new(n: usize) -> RankSet {
        let w = n.div_ceil(64).max(1);
        RankSet {
            words: vec![0; w],
            summary: vec![0; w.div_ceil(64)],
        }
    }

    fn insert(&mut self, r: u32) {
        let w = r as usize / 64;
        self.words[w] |= 1 << (r % 64);
        self.summary[w / 64] |= 1 << (w % 64);
    }

    fn remove(&mut self, r: u32) {
        let w = r as usize / 64;
        self.words[w] &= !(1 << (r % 64));
        if self.words[w] == 0 {
            self.summary[w / 64] &= !(1 << (w % 64));
        }
    }

    /// The smallest member `>= r`.
    fn next_from(&self, r: u32) -> Option<u32> {
        let w = r as usize / 64;
        if w >= self.words.len() {
            return None;
        }
        let here = self.words[w] & (!0u64 << (r % 64));
        if here != 0 {
            return Some((w * 64) as u32 + here.trailing_zeros());
        }
        let w = w + 1;
        let mut s = w / 64;
        if s >= self.summary.len() {
            return None;
        }
        let mut bits = self.summary[s] & (!0u64 << (w % 64));
        loop {
            if bits != 0 {
                let word = s * 64 + bits.trailing_zeros() as usize;
                return Some((word * 64) as u32 + self.words[word].trailing_zeros());
            }
            s += 1;
            if s >= self.summary.len() {
                return None;
            }
            bits = self.summary[s];
        }
    }
}

/// The canonical tree found by the reverse search, ids in DFS preorder.
struct Tree {
    parent: Vec<u32>,
    top: Vec<u32>,
    card: Vec<u32>,
    /// Total number of immediate subs (maximal nodes summed over the ideals).
    subs: usize,
}

impl Ideals {
    /// Enumerate all ideals of `dag`; fails with `TooManyIdeals` as soon as more than
    /// `max_ideals` are found, or at once when the DAG has `max_ideals` nodes or more (so the
    /// cost of a refusal is bounded by the limit).
    pub fn enumerate(dag: &Dag, max_ideals: usize) -> CoreResult<Ideals> {
        Ideals::enumerate_with(dag, max_ideals, &Cancel::never())
    }

    /// [`Ideals::enumerate`], polling `cancel`, and refused (`MemoryLimit`) as soon as the
    /// ideals found so far pass the memory budget: about 64 bytes per ideal and 8 per
    /// immediate sub (never `n` bits per ideal), counted before the sub lists are built.
    pub fn enumerate_with(dag: &Dag, max_ideals: usize, cancel: &Cancel) -> CoreResult<Ideals> {
        let n = dag.len();
        // a DAG on n nodes has at least n + 1 ideals (the prefixes of a topological order)
        if n >= max_ideals {
            return Err(CoreError::TooManyIdeals { limit: max_ideals });
        }
        let order = dag.topo_order()?;
        let mut rank = vec![0u32; n];
        for (i, &v) in order.iter().enumerate() {
            rank[v] = i as u32;
        }
        let tree = reverse_search(dag, &order, &rank, max_ideals, cancel)?;
        let (sub_start, sub_len, sub) = immediate_subs(dag, &rank, &tree, cancel)?;
        Ok(renumber(n, rank, tree, sub_start, sub_len, sub))
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

    /// The canonical parent of a non-empty ideal (`I` minus its top), `None` for the empty set.
    pub fn parent(&self, id: usize) -> Option<usize> {
        (self.parent[id] != NONE).then_some(self.parent[id] as usize)
    }

    /// The node of largest rank of a non-empty ideal (`None` for the empty set).
    pub fn top(&self, id: usize) -> Option<usize> {
        (self.top[id] != NONE).then_some(self.top[id] as usize)
    }

    /// Nodes of the ideal by rank, descending (the tops along the canonical parent chain).
    fn chain(&self, id: usize) -> impl Iterator<Item = usize> + '_ {
        let mut k = id;
        std::iter::from_fn(move || {
            let t = self.top[k];
            (t != NONE).then(|| {
                k = self.parent[k] as usize;
                t as usize
            })
        })
    }

    /// Whether `v` is in ideal `id`: `O(|I|)` (a walk up the canonical parent chain), for tests
    /// and small inputs.
    pub fn contains(&self, id: usize, v: usize) -> bool {
        let r = self.rank[v];
        self.chain(id)
            .take_while(|&t| self.rank[t] >= r)
            .any(|t| t == v)
    }

    /// Nodes of the ideal, ascending: `O(|I| log |I|)`.
    pub fn members(&self, id: usize) -> Vec<usize> {
        let mut out: Vec<usize> = self.chain(id).collect();
        out.sort_unstable();
        out
    }

    /// Nodes of `I \ J` ascending, for a sub-ideal `J` of `I`: `O(|I|)` (both canonical chains
    /// list their nodes by rank, descending, so one merge finds the difference).
    pub fn difference(&self, i: usize, j: usize) -> Vec<usize> {
        let mut inner = self.chain(j).peekable();
        let mut out = Vec::new();
        for v in self.chain(i) {
            if inner.peek() == Some(&v) {
                inner.next();
            } else {
                out.push(v);
            }
        }
        debug_assert!(inner.next().is_none(), "J is not a sub-ideal of I");
        out.sort_unstable();
        out
    }

    /// `(v, id of I \ {v})` for each maximal node `v` of ideal `id`, rank of `v` descending.
    pub fn immediate_subs(&self, id: usize) -> &[(u32, u32)] {
        let s = self.sub_start[id];
        &self.sub[s..s + self.sub_len[id] as usize]
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

/// The reverse search: every ideal once, as a child of its canonical parent, ids in DFS
/// preorder (children in increasing rank of the added node). Counts the immediate subs and
/// checks the limit and the memory estimate at each new ideal.
fn reverse_search(
    dag: &Dag,
    order: &[usize],
    rank: &[u32],
    max_ideals: usize,
    cancel: &Cancel,
) -> CoreResult<Tree> {
    let n = dag.len();
    let max_ideals = max_ideals.min(NONE as usize);
    let room = memory::budget()?;
    // predecessors not yet in the current ideal; successors in it
    let mut missing: Vec<u32> = (0..n).map(|v| dag.preds(v).len() as u32).collect();
    let mut succ_in = vec![0u32; n];
    let mut addable = RankSet::new(n);
    for (v, &m) in missing.iter().enumerate() {
        if m == 0 {
            addable.insert(rank[v]);
        }
    }
    let mut maximal = 0usize;
    let mut t = Tree {
        parent: vec![NONE],
        top: vec![NONE],
        card: vec![0],
        subs: 0,
    };
    let mut tick = cancel.ticker(1 << 12);
    cancel.progress().begin(Phase::Ideals, 0);
    // (ideal, smallest rank its next child may add)
    let mut stack: Vec<(u32, u32)> = vec![(0, 0)];
    while let Some(&(id, from)) = stack.last() {
        if let Err(stop) = tick.tick_at(|| t.parent.len() as u64) {
            cancel::drop_in_background(t);
            return Err(stop.into());
        }
        let Some(r) = addable.next_from(from) else {
            stack.pop();
            if id != 0 {
                let v = t.top[id as usize] as usize;
                // v leaves the ideal: its successors miss it again, it is addable again
                for &s in dag.succs(v) {
                    if missing[s as usize] == 0 {
                        addable.remove(rank[s as usize]);
                    }
                    missing[s as usize] += 1;
                }
                addable.insert(rank[v]);
                for &u in dag.preds(v) {
                    succ_in[u as usize] -= 1;
                    maximal += usize::from(succ_in[u as usize] == 0);
                }
                maximal -= 1;
            }
            continue;
        };
        stack.last_mut().expect("non-empty").1 = r + 1;
        let x = t.parent.len();
        if x >= max_ideals {
            return Err(CoreError::TooManyIdeals { limit: max_ideals });
        }
        let v = order[r as usize];
        addable.remove(r);
        for &s in dag.succs(v) {
            missing[s as usize] -= 1;
            if missing[s as usize] == 0 {
                addable.insert(rank[s as usize]);
            }
        }
        // v is maximal (no successor of a node outside an ideal is in it); its preds may stop
        maximal += 1;
        for &u in dag.preds(v) {
            succ_in[u as usize] += 1;
            maximal -= usize::from(succ_in[u as usize] == 1);
        }
        t.subs += maximal;
        let bytes = (x + 1) as f64 * BYTES_PER_IDEAL + t.subs as f64 * BYTES_PER_SUB;
        if bytes > room {
            return Err(too_big(n, x + 1, bytes, room));
        }
        t.parent.push(id);
        t.top.push(v as u32);
        t.card.push(t.card[id as usize] + 1);
        stack.push((x as u32, r + 1));
    }
    cancel.progress().reach(t.parent.len() as u64);
    Ok(t)
}

/// Sub lists `(start, len, entries)` indexed by preorder id: `I`'s are `(top, parent)` and,
/// for each `(m, S)` of the parent's with `m` not a predecessor of the top, `(m, child of S
/// by the top)`; so they come out rank-descending.
type SubLists = (Vec<usize>, Vec<u32>, Vec<(u32, u32)>);

fn immediate_subs(dag: &Dag, rank: &[u32], t: &Tree, cancel: &Cancel) -> CoreResult<SubLists> {
    let m = t.parent.len();
    // children of each ideal, in preorder: increasing rank of the added node
    let mut child_off = vec![0u32; m + 1];
    for &p in &t.parent[1..] {
        child_off[p as usize + 1] += 1;
    }
    for i in 0..m {
        child_off[i + 1] += child_off[i];
    }
    let mut fill = child_off.clone();
    let mut children = vec![0u32; m - 1];
    for x in 1..m {
        let p = t.parent[x] as usize;
        children[fill[p] as usize] = x as u32;
        fill[p] += 1;
    }
    drop(fill);
    let child_by = |s: usize, v: u32| -> u32 {
        let cs = &children[child_off[s] as usize..child_off[s + 1] as usize];
        let want = rank[v as usize];
        let at = cs.partition_point(|&c| rank[t.top[c as usize] as usize] < want);
        debug_assert_eq!(t.top[cs[at] as usize], v);
        cs[at]
    };
    let mut sub_start = vec![0usize; m];
    let mut sub_len = vec![0u32; m];
    let mut sub: Vec<(u32, u32)> = Vec::with_capacity(t.subs);
    let mut is_pred = vec![false; dag.len()];
    let mut tick = cancel.ticker(1 << 12);
    cancel.progress().begin(Phase::IdealLinks, m as u64);
    for x in 1..m {
        tick.tick_at(|| x as u64)?;
        let (p, v) = (t.parent[x] as usize, t.top[x]);
        let start = sub.len();
        sub.push((v, p as u32));
        for &u in dag.preds(v as usize) {
            is_pred[u as usize] = true;
        }
        for i in sub_start[p]..sub_start[p] + sub_len[p] as usize {
            let (w, s) = sub[i];
            if !is_pred[w as usize] {
                sub.push((w, child_by(s as usize, v)));
            }
        }
        for &u in dag.preds(v as usize) {
            is_pred[u as usize] = false;
        }
        sub_start[x] = start;
        sub_len[x] = (sub.len() - start) as u32;
    }
    debug_assert_eq!(sub.len(), t.subs);
    cancel.progress().reach(m as u64);
    Ok((sub_start, sub_len, sub))
}

/// Renumber by cardinality (stable: preorder within a level), mapping every stored id.
fn renumber(
    n: usize,
    rank: Vec<u32>,
    t: Tree,
    sub_start: Vec<usize>,
    sub_len: Vec<u32>,
    mut sub: Vec<(u32, u32)>,
) -> Ideals {
    let m = t.parent.len();
    let mut next = vec![0u32; n + 2];
    for &c in &t.card {
        next[c as usize + 1] += 1;
    }
    for c in 0..=n {
        next[c + 1] += next[c];
    }
    let mut new_id = vec![0u32; m];
    for (x, &c) in t.card.iter().enumerate() {
        new_id[x] = next[c as usize];
        next[c as usize] += 1;
    }
    let mut ids = Ideals {
        n,
        card: vec![0; m],
        rank,
        parent: vec![NONE; m],
        top: vec![NONE; m],
        sub_start: vec![0; m],
        sub_len: vec![0; m],
        sub: Vec::new(),
    };
    for x in 0..m {
        let y = new_id[x] as usize;
        ids.card[y] = t.card[x];
        ids.top[y] = t.top[x];
        if t.parent[x] != NONE {
            ids.parent[y] = new_id[t.parent[x] as usize];
        }
        ids.sub_start[y] = sub_start[x];
        ids.sub_len[y] = sub_len[x];
    }
    for e in sub.iter_mut() {
        e.1 = new_id[e.1 as usize];
    }
    ids.sub = sub;
    ids
}

/// The refusal of an enumeration that passed the memory budget at `count` ideals.
fn too_big(n: usize, count: usize, bytes: f64, limit: f64) -> CoreError {
    let what = format!("enumerating the ideals of this {n}-node graph ({count} found so far)");
    let hint = "lower max_ideals, or use a method that does not enumerate ideals";
    memory::refusal(bytes, limit, &what, hint)
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
    fn rank_sets_find_the_next_member() {
        let mut s = RankSet::new(10_000);
        assert_eq!(s.next_from(0), None);
        for r in [3, 64, 4095, 4096, 9999] {
            s.insert(r);
        }
        assert_eq!(s.next_from(0), Some(3));
        assert_eq!(s.next_from(4), Some(64));
        assert_eq!(s.next_from(65), Some(4095));
        assert_eq!(s.next_from(4096), Some(4096));
        assert_eq!(s.next_from(4097), Some(9999));
        s.remove(9999);
        assert_eq!(s.next_from(4097), None);
        assert_eq!(s.next_from(20_000), None);
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
