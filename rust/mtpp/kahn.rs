//! Kahn's algorithm with node priorities (Algorithm 3): among the units whose predecessors
//! are all placed, take the one with the smallest priority (ties: smallest index). Every
//! topological order is the output of some priority vector (e.g. its own positions).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::Instance;

/// Map an `f64` to a `u64` with the same order (total order; NaN never reaches here).
#[inline]
fn key(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// The topological order chosen by the priorities `prio` (one per unit).
pub fn kahn(inst: &Instance, prio: &[f64]) -> Vec<usize> {
    let n = inst.n;
    let mut indeg: Vec<u32> = (0..n).map(|v| inst.dag.preds(v).len() as u32).collect();
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::with_capacity(n);
    for v in 0..n {
        if indeg[v] == 0 {
            heap.push(Reverse((key(prio[v]), v as u32)));
        }
    }
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse((_, v))) = heap.pop() {
        let v = v as usize;
        order.push(v);
        for &w in inst.dag.succs(v) {
            let w = w as usize;
            indeg[w] -= 1;
            if indeg[w] == 0 {
                heap.push(Reverse((key(prio[w]), w as u32)));
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtpp::rng::Rng;
    use crate::mtpp::tests_common::random_instance;

    #[test]
    fn kahn_gives_topological_orders_and_respects_priorities() {
        let mut rng = Rng::new(5);
        for trial in 0..50 {
            let inst = random_instance(&mut rng, 1 + trial % 30, 0.2, false);
            let keys: Vec<f64> = (0..inst.n).map(|_| rng.unit() - 0.5).collect();
            let order = kahn(&inst, &keys);
            inst.check_order(&order).unwrap();
            // the positions of any topological order, as priorities, give that order back
            let mut prio = vec![0.0; inst.n];
            for (i, &u) in order.iter().enumerate() {
                prio[u] = i as f64;
            }
            assert_eq!(kahn(&inst, &prio), order);
            // greedy choice: each step takes the smallest available priority
            let mut placed = vec![false; inst.n];
            for &u in &order {
                for v in 0..inst.n {
                    if !placed[v] && inst.dag.preds(v).iter().all(|&p| placed[p as usize]) {
                        assert!(keys[u] <= keys[v]);
                    }
                }
                placed[u] = true;
            }
        }
    }
}
