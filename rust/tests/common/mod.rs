//! Pieces shared by the integration tests: a seeded generator of their own (so the oracles
//! share no code with the crate), random DAGs, set partitions and an acyclicity check.
//!
//! Nothing here calls the crate (but [`sum_cost`], a toy cost model fed to the ideal DP): the
//! brute forces built on it are independent of the code under test, cost model included.

#![allow(dead_code)] // each test crate uses a different part

pub mod sum_cost;

/// A 64-bit LCG (Knuth's MMIX constants); the high bits are good enough for test inputs.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.next() as f64 / (1u64 << 31) as f64
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A small non-negative integer as a float (sums stay exact).
    pub fn int(&mut self, hi: usize) -> f64 {
        self.below(hi + 1) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// A random DAG on `n` nodes: edges `(perm[a], perm[b])` for `a < b` with probability `p`, so
/// node indices are not in topological order. Returns the edges and `perm`, a topological order.
pub fn random_dag(rng: &mut Lcg, n: usize, p: f64) -> (Vec<(u32, u32)>, Vec<u32>) {
    let mut perm: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        perm.swap(i, rng.below(i + 1));
    }
    let mut edges = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            if rng.chance(p) {
                edges.push((perm[a], perm[b]));
            }
        }
    }
    (edges, perm)
}

/// The chain `0 -> 1 -> ... -> n - 1`.
pub fn chain(n: usize) -> Vec<(u32, u32)> {
    (1..n as u32).map(|i| (i - 1, i)).collect()
}

/// Is the graph on `0..n` with these edges acyclic (Kahn's algorithm, self-loops ignored)?
pub fn is_acyclic(n: usize, edges: &[(usize, usize)]) -> bool {
    let mut indeg = vec![0usize; n];
    let mut succ = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a != b {
            indeg[b] += 1;
            succ[a].push(b);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    let mut seen = 0;
    while let Some(v) = ready.pop() {
        seen += 1;
        for &w in &succ[v] {
            indeg[w] -= 1;
            if indeg[w] == 0 {
                ready.push(w);
            }
        }
    }
    seen == n
}

/// Is the partition `block_of` (node -> block in `0..nblocks`) of the DAG `edges` a valid
/// pipeline, i.e. is its quotient graph acyclic?
pub fn quotient_acyclic(block_of: &[usize], nblocks: usize, edges: &[(u32, u32)]) -> bool {
    let q: Vec<(usize, usize)> = edges
        .iter()
        .map(|&(a, b)| (block_of[a as usize], block_of[b as usize]))
        .collect();
    is_acyclic(nblocks, &q)
}

/// Calls `f` with every map `0..n -> 0..m` (all `m^n` of them).
pub fn for_each_assignment(n: usize, m: usize, mut f: impl FnMut(&[usize])) {
    let mut a = vec![0usize; n];
    loop {
        f(&a);
        let mut i = 0;
        while i < n {
            a[i] += 1;
            if a[i] < m {
                break;
            }
            a[i] = 0;
            i += 1;
        }
        if i == n {
            return;
        }
    }
}

/// Relative closeness for costs computed in different orders.
pub fn close(a: f64, b: f64) -> bool {
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}
