//! The ASAP schedule of a placement and an order, on a reusable [`Workspace`].
//!
//! * [`Workspace::evaluate`] with an [`Order`]: per-device lists ([`Order::Lists`], what the
//!   Python reference takes), a global sequence whose restriction to each device is that
//!   device's order ([`Order::Sequence`], the cheap encoding for searches), or
//!   [`Order::RankRoundRobin`]. Each node starts at the latest of the previous node of its
//!   device's order finishing (never on a parallel device) and each predecessor's output
//!   arriving; an order that contradicts the DAG is refused, naming a node it puts before one of
//!   its ancestors. A sequence that is a linear extension of the DAG is timed in one sweep along
//!   it; anything else by Kahn's algorithm over the DAG plus the device chains.
//! * [`Workspace::rank_round_robin`] (in `rrr.rs`): the order QuickP evaluates a placement
//!   with, timed as it is built.
//!
//! Every value is computed with the reference's operations in the reference's order (`finish =
//! start + time`, `start = max(...)` over `finish[u] + size[u] / bandwidth`), so the two agree
//! bit for bit (the transfer times come from a table of those quotients when it is small
//! enough: see [`super::MAX_TRANSFER_TABLE`]).

use super::maxset::MaxSet;
use super::rrr::Ready;
use super::{Problem, NONE};
use crate::error::{CoreError, CoreResult};

/// How the nodes of each device are ordered (see the module docs).
#[derive(Debug, Clone, Copy)]
pub enum Order<'a> {
    /// The rank round-robin order.
    RankRoundRobin,
    /// Per device `d`, its nodes `flat[off[d]..off[d + 1]]` in run order (`off` has `D + 1`
    /// entries).
    Lists { off: &'a [usize], flat: &'a [i64] },
    /// All `n` node positions once; each device runs its nodes in this order.
    Sequence(&'a [i64]),
}

pub(super) fn arg(msg: String) -> CoreError {
    CoreError::InvalidArgument(msg)
}

/// What the sweeps read of a timed node, in one place (one cache access per edge).
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub(super) finish: f64,
    /// Its row of the transfer table if there is one, else its device.
    pub(super) row: u32,
    /// Its position in the sequence being swept (`NONE`: not reached yet).
    pub(super) pos: u32,
}

/// The buffers of one evaluation (see the module docs); reusable for any placement of the
/// [`Problem`] it was made for.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub(super) dev: Vec<u32>,
    pub(super) own: Vec<f64>,
    pub(super) start: Vec<f64>,
    pub(super) slot: Vec<Slot>,
    /// The node before / after each node in its device's order (`NONE`: first / last, or a
    /// parallel device).
    pub(super) prev: Vec<u32>,
    pub(super) next: Vec<u32>,
    pub(super) indeg: Vec<u32>,
    pub(super) stack: Vec<u32>,
    /// Position in the sequence (`NONE`: not listed yet).
    pub(super) pos: Vec<u32>,
    /// Per device: the node listed or picked last.
    pub(super) last: Vec<u32>,
    pub(super) rank: Vec<f64>,
    /// The nodes by increasing priority, and each node's index there.
    pub(super) keys: Vec<Ready>,
    pub(super) prio: Vec<u32>,
    /// Per device, the priorities of its ready nodes.
    pub(super) queues: Vec<MaxSet>,
    pub(super) picks: Vec<u32>,
}

impl Workspace {
    /// Buffers for `p` (allocated here, once).
    pub fn new(p: &Problem) -> Workspace {
        let (n, nd) = (p.len(), p.num_devices());
        Workspace {
            dev: vec![0; n],
            own: vec![0.0; n],
            start: vec![0.0; n],
            slot: vec![
                Slot {
                    finish: 0.0,
                    row: 0,
                    pos: NONE
                };
                n
            ],
            prev: vec![NONE; n],
            next: vec![NONE; n],
            indeg: vec![0; n],
            stack: Vec::with_capacity(n),
            pos: vec![NONE; n],
            last: vec![NONE; nd],
            rank: vec![0.0; n],
            keys: vec![0; n],
            prio: vec![0; n],
            queues: (0..nd).map(|_| MaxSet::new(n)).collect(),
            picks: vec![0; n],
        }
    }

    /// Start of each node in the last evaluation.
    pub fn start(&self) -> &[f64] {
        &self.start
    }

    /// Finish of each node in the last evaluation.
    pub fn finish(&self) -> Vec<f64> {
        self.slot.iter().map(|s| s.finish).collect()
    }

    /// The nodes in the order the last [`Workspace::rank_round_robin`] picked them.
    pub fn picks(&self) -> &[u32] {
        &self.picks
    }

    /// The last rank round-robin order, as one list per device.
    pub fn device_orders(&self, p: &Problem) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); p.num_devices()];
        for &i in &self.picks {
            out[self.dev[i as usize] as usize].push(i as usize);
        }
        out
    }

    /// Check `dev` (a device position per node) and record each node's device and own time.
    /// Errors name the first node out of range, then the first on a device that cannot run it.
    pub(super) fn place(&mut self, p: &Problem, dev: &[i64]) -> CoreResult<()> {
        let (n, nd) = (p.len(), p.num_devices());
        if dev.len() != n {
            return Err(arg(format!(
                "placement: expected {n} device positions, got {}",
                dev.len()
            )));
        }
        for (i, &d) in dev.iter().enumerate() {
            let t = if d >= 0 && (d as u64) < nd as u64 {
                p.time(i, d as usize)
            } else {
                f64::INFINITY
            };
            if !t.is_finite() {
                return Err(p.placement_error(dev));
            }
            self.dev[i] = d as u32;
            self.own[i] = t;
        }
        Ok(())
    }

    /// When predecessor `u` (timed) delivers its output to device `di`: its finish plus the
    /// transfer (from the table when there is one: the same number).
    #[inline(always)]
    fn arrival<const TABLE: bool>(&self, p: &Problem, u: usize, di: usize) -> f64 {
        let s = self.slot[u];
        if TABLE {
            s.finish + p.table(s.row as usize + di)
        } else {
            s.finish + p.transfer(u, s.row as usize, di)
        }
    }

    /// The earliest start of node `i` once its device predecessor `before` (or `NONE`) and its
    /// DAG predecessors are timed.
    #[inline(always)]
    fn earliest<const TABLE: bool>(&self, p: &Problem, i: usize, before: u32) -> f64 {
        let di = self.dev[i] as usize;
        let mut s = if before != NONE {
            self.slot[before as usize].finish
        } else {
            0.0
        };
        for &u in p.preds(i) {
            let t = self.arrival::<TABLE>(p, u as usize, di);
            if t > s {
                s = t;
            }
        }
        s
    }

    /// Node `i` starts at `s`: record its start, finish (returned) and transfer-table row.
    #[inline(always)]
    fn set_start<const TABLE: bool>(&mut self, p: &Problem, i: usize, s: f64) -> f64 {
        let (d, t, pos) = (self.dev[i] as usize, self.own[i], self.slot[i].pos);
        self.record::<TABLE>(p, i, d, t, s, pos)
    }

    /// Node `i`, on device `d` for time `t`, starts at `s`: record it (its sequence position is
    /// `pos`); returns its finish.
    #[inline(always)]
    fn record<const TABLE: bool>(
        &mut self,
        p: &Problem,
        i: usize,
        d: usize,
        t: f64,
        s: f64,
        pos: u32,
    ) -> f64 {
        let finish = s + t;
        self.start[i] = s;
        // the table has at most MAX_TRANSFER_TABLE entries: its rows fit in u32
        let row = if TABLE {
            p.table_row(i, d) as u32
        } else {
            d as u32
        };
        self.slot[i] = Slot { finish, row, pos };
        finish
    }

    /// The ASAP schedule of placement `dev` under `order`: fills [`Workspace::start`] and
    /// [`Workspace::finish`] and returns the makespan (0 for an empty graph).
    ///
    /// Errors (`InvalidArgument`): a placement of the wrong length, a device out of range, a
    /// node on a device that cannot run it; an order that lists a node that is not its
    /// device's or lists one twice, misses one, or contradicts the DAG.
    pub fn evaluate(&mut self, p: &Problem, dev: &[i64], order: Order<'_>) -> CoreResult<f64> {
        match order {
            Order::RankRoundRobin => self.rank_round_robin(p, dev),
            Order::Lists { off, flat } => {
                self.place(p, dev)?;
                self.chain_lists(p, off, flat)?;
                self.kahn_any(p)
            }
            Order::Sequence(seq) => {
                let swept = if p.has_table() {
                    self.sweep::<true>(p, dev, seq)
                } else {
                    self.sweep::<false>(p, dev, seq)
                };
                if let Some(m) = swept {
                    return Ok(m);
                }
                // not a linear extension, or bad input: check everything in the reference's
                // order (placement first), then Kahn
                self.place(p, dev)?;
                self.chain_sequence(p, seq)?;
                self.kahn_any(p)
            }
        }
    }

    /// Link each node to the one before it in its device's list.
    fn chain_lists(&mut self, p: &Problem, off: &[usize], flat: &[i64]) -> CoreResult<()> {
        let (n, nd) = (p.len(), p.num_devices());
        if off.len() != nd + 1 {
            return Err(arg(format!(
                "order: expected one list per device ({nd}), got {}",
                off.len().saturating_sub(1)
            )));
        }
        if off[0] != 0 || off.windows(2).any(|w| w[0] > w[1]) || off[nd] != flat.len() {
            return Err(arg(
                "order: the list offsets are not a valid CSR offset array".into(),
            ));
        }
        self.pos.fill(NONE);
        for d in 0..nd {
            let chained = !p.is_parallel(d);
            let mut last = NONE;
            for &x in &flat[off[d]..off[d + 1]] {
                let ok = x >= 0 && (x as u64) < n as u64;
                let i = x as usize;
                if !ok || self.pos[i] != NONE || self.dev[i] as usize != d {
                    return Err(arg(format!(
                        "order: device {} lists {x}, which is not one of its nodes or is listed twice",
                        p.device_name(d)
                    )));
                }
                self.pos[i] = 0;
                self.next[i] = NONE;
                if chained {
                    self.prev[i] = last;
                    if last != NONE {
                        self.next[last as usize] = i as u32;
                    }
                    last = i as u32;
                } else {
                    self.prev[i] = NONE;
                }
            }
        }
        if let Some(i) = self.pos.iter().position(|&k| k == NONE) {
            return Err(arg(format!(
                "order: node {} is missing from its device's order",
                p.node_name(i)
            )));
        }
        Ok(())
    }

    /// Link each node to the one before it on its device in `seq`; record positions in `seq`.
    fn chain_sequence(&mut self, p: &Problem, seq: &[i64]) -> CoreResult<()> {
        let n = p.len();
        if seq.len() != n {
            return Err(arg(format!(
                "order: expected a sequence of the {n} node positions, got {} entries",
                seq.len()
            )));
        }
        self.pos.fill(NONE);
        self.last.fill(NONE);
        for (k, &x) in seq.iter().enumerate() {
            if x < 0 || x as u64 >= n as u64 || self.pos[x as usize] != NONE {
                return Err(arg(format!(
                    "order: {x} is not a node position or is listed twice"
                )));
            }
            let i = x as usize;
            let d = self.dev[i] as usize;
            self.pos[i] = k as u32;
            self.next[i] = NONE;
            if p.is_parallel(d) {
                self.prev[i] = NONE;
            } else {
                let last = self.last[d];
                self.prev[i] = last;
                if last != NONE {
                    self.next[last as usize] = i as u32;
                }
                self.last[d] = i as u32;
            }
        }
        Ok(())
    }

    /// Place, chain and time the nodes in one pass along `seq`, if it is a linear extension of
    /// the DAG and `dev` and `seq` are valid (the makespan); else `None`, leaving the buffers for
    /// the full checks to redo.
    fn sweep<const TABLE: bool>(&mut self, p: &Problem, dev: &[i64], seq: &[i64]) -> Option<f64> {
        let (n, nd) = (p.len(), p.num_devices());
        if dev.len() != n || seq.len() != n {
            return None;
        }
        // local slices of known lengths: once `i < n` is checked, the compiler drops the bounds
        // checks of every per-node access
        let slot = &mut self.slot[..n];
        let start = &mut self.start[..n];
        let last = &mut self.last[..nd];
        let times = &p.times[..n * nd];
        let parallel = &p.parallel[..nd];
        let pred_off = &p.pred_off[..n + 1];
        let pred = &p.pred[..];
        for sl in slot.iter_mut() {
            sl.pos = NONE;
        }
        last.fill(NONE);
        let mut makespan = 0.0f64;
        for (k, &x) in seq.iter().enumerate() {
            let i = x as u64 as usize; // a negative x wraps past n
            if i >= n || slot[i].pos != NONE {
                return None;
            }
            let d = dev[i] as u64 as usize;
            if d >= nd {
                return None;
            }
            let t = times[i * nd + d];
            if !t.is_finite() {
                return None;
            }
            slot[i].pos = k as u32;
            let mut s = 0.0;
            if !parallel[d] {
                let before = last[d];
                if before != NONE {
                    s = slot[before as usize].finish;
                }
                last[d] = i as u32;
            }
            for &u in &pred[pred_off[i] as usize..pred_off[i + 1] as usize] {
                let su = slot[u as usize];
                if su.pos == NONE {
                    return None;
                }
                let t = if TABLE {
                    su.finish + p.tr[su.row as usize + d]
                } else {
                    su.finish + p.transfer(u as usize, su.row as usize, d)
                };
                if t > s {
                    s = t;
                }
            }
            let f = s + t;
            start[i] = s;
            // the table has at most MAX_TRANSFER_TABLE entries: its rows fit in u32
            let row = if TABLE { (i * nd + d) * nd } else { d };
            slot[i] = Slot {
                finish: f,
                row: row as u32,
                pos: k as u32,
            };
            if f > makespan {
                makespan = f;
            }
        }
        Some(makespan)
    }

    fn kahn_any(&mut self, p: &Problem) -> CoreResult<f64> {
        if p.has_table() {
            self.kahn::<true>(p)
        } else {
            self.kahn::<false>(p)
        }
    }

    /// Kahn's algorithm over the DAG plus the device chains (`prev` / `next`).
    fn kahn<const TABLE: bool>(&mut self, p: &Problem) -> CoreResult<f64> {
        let n = p.len();
        self.stack.clear();
        for i in 0..n {
            let d = p.preds(i).len() as u32 + u32::from(self.prev[i] != NONE);
            self.indeg[i] = d;
            if d == 0 {
                self.stack.push(i as u32);
            }
        }
        let mut count = 0usize;
        let mut makespan = 0.0f64;
        while let Some(i) = self.stack.pop() {
            let i = i as usize;
            count += 1;
            let s = self.earliest::<TABLE>(p, i, self.prev[i]);
            let f = self.set_start::<TABLE>(p, i, s);
            if f > makespan {
                makespan = f;
            }
            for &j in p.succs(i) {
                let j = j as usize;
                self.indeg[j] -= 1;
                if self.indeg[j] == 0 {
                    self.stack.push(j as u32);
                }
            }
            let j = self.next[i];
            if j != NONE {
                self.indeg[j as usize] -= 1;
                if self.indeg[j as usize] == 0 {
                    self.stack.push(j);
                }
            }
        }
        if count < n {
            // a cycle through a device chain: name its first node (by position) that waits on
            // the node before it on its device, as the reference does
            let i = (0..n)
                .find(|&i| self.indeg[i] > 0 && self.prev[i] != NONE)
                .ok_or_else(|| {
                    CoreError::Internal(
                        "ASAP: a DAG plus device chains with a cycle but no chain edge".into(),
                    )
                })?;
            return Err(arg(format!(
                "order: it contradicts the graph's edges on device {} (node {} is put before one of its ancestors)",
                p.device_name(self.dev[i] as usize),
                p.node_name(i)
            )));
        }
        Ok(makespan)
    }
}

#[cfg(test)]
#[path = "asap_tests.rs"]
mod tests;
