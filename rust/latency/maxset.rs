//! [`MaxSet`]: a set of integers below a fixed capacity, as a hierarchy of 64-bit words, with
//! insert, remove and "take the largest" in a few word operations each (no comparisons that a
//! branch predictor could miss, unlike a binary heap). The ready queues of the rank round-robin
//! order: each node gets its priority index once per evaluation (a sort), then every queue
//! operation is a bit operation.

/// A set of `usize` below its capacity (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct MaxSet {
    /// `levels[0]`: one bit per element; `levels[k + 1]`: one bit per non-zero word of
    /// `levels[k]`; the last level is one word.
    levels: Vec<Vec<u64>>,
}

impl MaxSet {
    /// An empty set for the elements `0..capacity`.
    pub(crate) fn new(capacity: usize) -> MaxSet {
        let mut levels = Vec::new();
        let mut len = capacity.max(1);
        loop {
            let words = len.div_ceil(64);
            levels.push(vec![0u64; words]);
            if words == 1 {
                break;
            }
            len = words;
        }
        MaxSet { levels }
    }

    /// Remove every element.
    pub(crate) fn clear(&mut self) {
        for l in &mut self.levels {
            l.fill(0);
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.levels.last().is_none_or(|top| top[0] == 0)
    }

    /// Add `i` (below the capacity).
    #[inline]
    pub(crate) fn insert(&mut self, mut i: usize) {
        for l in &mut self.levels {
            let w = i / 64;
            let was = l[w];
            l[w] = was | (1u64 << (i % 64));
            if was != 0 {
                break;
            }
            i = w;
        }
    }

    /// Remove and return the largest element.
    #[inline]
    pub(crate) fn pop_max(&mut self) -> Option<usize> {
        if self.is_empty() {
            return None;
        }
        let mut i = 0usize;
        for l in self.levels.iter().rev() {
            let w = l[i];
            i = i * 64 + (63 - w.leading_zeros() as usize);
        }
        let top = i;
        for l in &mut self.levels {
            let w = i / 64;
            l[w] &= !(1u64 << (i % 64));
            if l[w] != 0 {
                break;
            }
            i = w;
        }
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtpp::rng::Rng;
    use std::collections::BTreeSet;

    #[test]
    fn behaves_like_an_ordered_set() {
        let mut rng = Rng::new(5);
        for cap in [1usize, 2, 63, 64, 65, 200, 4096, 4097, 300_000] {
            let mut s = MaxSet::new(cap);
            let mut want = BTreeSet::new();
            assert!(s.is_empty() && s.pop_max().is_none());
            for _ in 0..2000 {
                if rng.unit() < 0.6 {
                    let x = rng.below(cap);
                    s.insert(x);
                    want.insert(x);
                } else {
                    assert_eq!(s.pop_max(), want.pop_last(), "capacity {cap}");
                }
                assert_eq!(s.is_empty(), want.is_empty());
            }
            s.clear();
            assert!(s.is_empty());
        }
    }
}
