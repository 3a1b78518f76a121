//! Compact directed acyclic graph in CSR form (predecessor and successor lists), and the
//! crate's CSR builder [`csr`].

use crate::error::{CoreError, CoreResult};

#[derive(Debug, Clone)]
pub struct Dag {
    n: usize,
    pred_off: Vec<usize>,
    pred: Vec<u32>,
    succ_off: Vec<usize>,
    succ: Vec<u32>,
}

/// Compressed sparse rows from `(row, value)` pairs: `out[off[a]..off[a + 1]]` holds the values
/// of row `a`, in the order the pairs come (a stable counting sort). Every `row` must be `< n`.
/// The one CSR builder of the crate (DAG adjacency, MTPP tensor lists, original predecessors of
/// the max-load cost).
pub fn csr(n: usize, pairs: impl Iterator<Item = (usize, u32)> + Clone) -> (Vec<usize>, Vec<u32>) {
    let mut off = vec![0usize; n + 1];
    for (a, _) in pairs.clone() {
        off[a + 1] += 1;
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut fill = off.clone();
    let mut out = vec![0u32; off[n]];
    for (a, b) in pairs {
        out[fill[a]] = b;
        fill[a] += 1;
    }
    (off, out)
}

impl Dag {
    /// Build from an edge list over nodes `0..n`. Duplicate edges are merged; self-loops,
    /// out-of-range endpoints, more nodes than `u32` ids and cycles are errors. Each node's
    /// predecessors and successors are listed in increasing order.
    pub fn from_edges(n: usize, edges: &[(u32, u32)]) -> CoreResult<Dag> {
        if n > u32::MAX as usize {
            return Err(CoreError::InvalidInput(format!(
                "{n} nodes: at most {} are supported",
                u32::MAX
            )));
        }
        let mut e: Vec<(u32, u32)> = Vec::with_capacity(edges.len());
        for &(a, b) in edges {
            if a as usize >= n || b as usize >= n {
                return Err(CoreError::InvalidInput(format!(
                    "edge ({a}, {b}) has an endpoint outside 0..{n}"
                )));
            }
            if a == b {
                return Err(CoreError::Cycle {
                    cycle: vec![a as usize],
                });
            }
            e.push((a, b));
        }
        // sorted and deduplicated, so the stable CSR rows come out sorted
        e.sort_unstable();
        e.dedup();
        let (succ_off, succ) = csr(n, e.iter().map(|&(a, b)| (a as usize, b)));
        let (pred_off, pred) = csr(n, e.iter().map(|&(a, b)| (b as usize, a)));
        let dag = Dag {
            n,
            pred_off,
            pred,
            succ_off,
            succ,
        };
        dag.check_acyclic()?;
        Ok(dag)
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn num_edges(&self) -> usize {
        self.succ.len()
    }

    pub fn preds(&self, v: usize) -> &[u32] {
        &self.pred[self.pred_off[v]..self.pred_off[v + 1]]
    }

    pub fn succs(&self, v: usize) -> &[u32] {
        &self.succ[self.succ_off[v]..self.succ_off[v + 1]]
    }

    /// Kahn's algorithm, smallest index first; `Err(Cycle)` with one cycle if there is one.
    pub fn topo_order(&self) -> CoreResult<Vec<usize>> {
        let mut indeg: Vec<usize> = (0..self.n).map(|v| self.preds(v).len()).collect();
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..self.n)
            .filter(|&v| indeg[v] == 0)
            .map(std::cmp::Reverse)
            .collect();
        let mut order = Vec::with_capacity(self.n);
        while let Some(std::cmp::Reverse(v)) = heap.pop() {
            order.push(v);
            for &w in self.succs(v) {
                let w = w as usize;
                indeg[w] -= 1;
                if indeg[w] == 0 {
                    heap.push(std::cmp::Reverse(w));
                }
            }
        }
        if order.len() == self.n {
            return Ok(order);
        }
        // Walk predecessors among the unprocessed nodes until one repeats: that is a cycle.
        let mut start = (0..self.n).find(|&v| indeg[v] > 0).unwrap_or(0);
        let mut seen = vec![usize::MAX; self.n];
        let mut path = Vec::new();
        loop {
            if seen[start] != usize::MAX {
                let mut cycle = path[seen[start]..].to_vec();
                cycle.reverse();
                return Err(CoreError::Cycle { cycle });
            }
            seen[start] = path.len();
            path.push(start);
            start = self
                .preds(start)
                .iter()
                .map(|&u| u as usize)
                .find(|&u| indeg[u] > 0)
                .unwrap_or(start);
        }
    }

    fn check_acyclic(&self) -> CoreResult<()> {
        self.topo_order().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_cycle() {
        let err = Dag::from_edges(3, &[(0, 1), (1, 2), (2, 1)]).unwrap_err();
        match err {
            CoreError::Cycle { mut cycle } => {
                cycle.sort();
                assert_eq!(cycle, vec![1, 2]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn topo_and_csr() {
        let d = Dag::from_edges(4, &[(2, 3), (0, 2), (1, 2), (0, 2)]).unwrap();
        assert_eq!(d.num_edges(), 3);
        assert_eq!(d.preds(2), &[0, 1]);
        assert_eq!(d.topo_order().unwrap(), vec![0, 1, 2, 3]);
    }
}
