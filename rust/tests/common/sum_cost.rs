//! A toy block cost for the ideal DP tests: the sum of the nodes' weights on an accelerator,
//! three times that on a CPU. Unlike the rest of `common`, it implements the crate's
//! [`BlockCost`] trait: it is an input to the code under test, not an oracle.

use stagecut_core::ideal_dp::{BlockCost, Costs};

/// Block cost = sum of node weights; on a CPU three times that. With `node_bounds`, each node's
/// own costs are its [`BlockCost::node_lb`] (exact for this additive cost); without, the
/// trait's default (zeros, which filter nothing).
pub struct Sum {
    pub weights: Vec<f64>,
    pub node_bounds: bool,
}

impl Sum {
    /// Without per-node bounds.
    pub fn new(weights: Vec<f64>) -> Sum {
        Sum {
            weights,
            node_bounds: false,
        }
    }

    /// With per-node bounds (what the bounded DP's cell filter and greedy bound read).
    pub fn with_node_bounds(weights: Vec<f64>) -> Sum {
        Sum {
            weights,
            node_bounds: true,
        }
    }
}

impl BlockCost for Sum {
    type State = Vec<f64>;
    fn new_state(&self) -> Vec<f64> {
        vec![0.0]
    }
    fn push(&self, st: &mut Vec<f64>, v: usize) {
        let last = *st.last().unwrap();
        st.push(last + self.weights[v]);
    }
    fn pop(&self, st: &mut Vec<f64>, _v: usize) {
        st.pop();
    }
    fn eval(&self, st: &Vec<f64>) -> Costs {
        let s = *st.last().unwrap();
        Costs {
            acc: s,
            cpu: 3.0 * s,
            acc_lb: s,
            cpu_lb: 3.0 * s,
        }
    }
    fn node_lb(&self, v: usize) -> (f64, f64) {
        if self.node_bounds {
            (self.weights[v], 3.0 * self.weights[v])
        } else {
            (0.0, 0.0)
        }
    }
}
