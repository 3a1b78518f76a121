//! The rank round-robin order (`stagecut.latency.model.evaluate.rank_round_robin`, exactly) and its
//! ASAP schedule, on a [`Workspace`]: rank = own time + the largest successor rank; each device
//! serves its ready nodes by largest rank (ties: lower position first); a pointer visits the
//! devices round-robin, skipping those with nothing ready, and moves on after every pick. The
//! picks are a linear extension, so each node is timed when it is picked. Each node's place in
//! the queues (rank, then position) is fixed by one sort; the queues are then bit sets
//! ([`super::maxset::MaxSet`]).

use super::asap::{Slot, Workspace};
use super::{Problem, NONE};
use crate::error::{CoreError, CoreResult};

/// A node's priority in the ready queues, as one integer key: the largest rank first, then the
/// lower position. Ranks are sums of non-negative times and `+0.0`, never `-0.0` or NaN, so
/// their bit patterns order like the numbers.
pub(super) type Ready = u128;

#[inline]
fn ready(rank: f64, pos: usize) -> Ready {
    (u128::from(rank.to_bits()) << 32) | u128::from(!(pos as u32))
}

#[inline]
fn ready_pos(r: Ready) -> usize {
    !(r as u32) as usize
}

impl Workspace {
    /// The rank round-robin order of placement `dev` (see the module docs; read it with
    /// [`Workspace::picks`] or [`Workspace::device_orders`]) and its ASAP schedule; returns the
    /// makespan.
    ///
    /// Errors (`InvalidArgument`): a bad placement (see [`Workspace::evaluate`]).
    pub fn rank_round_robin(&mut self, p: &Problem, dev: &[i64]) -> CoreResult<f64> {
        self.place(p, dev)?;
        if p.has_table() {
            self.round_robin::<true>(p)
        } else {
            self.round_robin::<false>(p)
        }
    }

    fn round_robin<const TABLE: bool>(&mut self, p: &Problem) -> CoreResult<f64> {
        let (n, nd) = (p.len(), p.num_devices());
        // local slices of known lengths (fewer bounds checks: see `sweep`)
        let Workspace {
            dev,
            own,
            start,
            slot,
            indeg,
            last,
            rank,
            keys,
            prio,
            queues,
            picks,
            ..
        } = self;
        let (dev, own, start, slot) = (&dev[..n], &own[..n], &mut start[..n], &mut slot[..n]);
        let (indeg, rank, keys, prio) = (
            &mut indeg[..n],
            &mut rank[..n],
            &mut keys[..n],
            &mut prio[..n],
        );
        let (last, queues, picks) = (&mut last[..nd], &mut queues[..nd], &mut picks[..n]);
        let (pred_off, pred) = (&p.pred_off[..n + 1], &p.pred[..]);
        let (succ_off, succ) = (&p.succ_off[..n + 1], &p.succ[..]);
        let parallel = &p.parallel[..nd];
        for &i in p.topo().iter().rev() {
            let i = i as usize;
            let ss = &succ[succ_off[i] as usize..succ_off[i + 1] as usize];
            let mut r = ss.first().map_or(0.0, |&s| rank[s as usize]);
            for &s in ss {
                let x = rank[s as usize];
                if x > r {
                    r = x;
                }
            }
            rank[i] = own[i] + r;
        }
        for (i, (key, &r)) in keys.iter_mut().zip(rank.iter()).enumerate() {
            *key = ready(r, i);
        }
        keys.sort_unstable();
        for (k, &key) in keys.iter().enumerate() {
            prio[ready_pos(key)] = k as u32;
        }
        for q in queues.iter_mut() {
            q.clear();
        }
        for i in 0..n {
            let k = pred_off[i + 1] - pred_off[i];
            indeg[i] = k;
            if k == 0 {
                queues[dev[i] as usize].insert(prio[i] as usize);
            }
        }
        last.fill(NONE);
        let mut makespan = 0.0f64;
        let mut d = 0usize;
        for pick in picks.iter_mut() {
            let mut skipped = 0usize;
            while queues[d].is_empty() {
                d += 1;
                if d == nd {
                    d = 0;
                }
                skipped += 1;
                if skipped > nd {
                    return Err(CoreError::Internal(
                        "rank round-robin: no node is ready in an acyclic graph".into(),
                    ));
                }
            }
            let i = match queues[d].pop_max() {
                Some(k) => ready_pos(keys[k]),
                None => return Err(CoreError::Internal("rank round-robin: empty queue".into())),
            };
            *pick = i as u32;
            // time i: the previous pick of its device and every predecessor are timed
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
                let t = if TABLE {
                    su.finish + p.tr[su.row as usize + d]
                } else {
                    su.finish + p.transfer(u as usize, su.row as usize, d)
                };
                if t > s {
                    s = t;
                }
            }
            let f = s + own[i];
            start[i] = s;
            // the table has at most MAX_TRANSFER_TABLE entries: its rows fit in u32
            let row = if TABLE { (i * nd + d) * nd } else { d };
            slot[i] = Slot {
                finish: f,
                row: row as u32,
                pos: NONE,
            };
            if f > makespan {
                makespan = f;
            }
            for &s in &succ[succ_off[i] as usize..succ_off[i + 1] as usize] {
                let s = s as usize;
                indeg[s] -= 1;
                if indeg[s] == 0 {
                    queues[dev[s] as usize].insert(prio[s] as usize);
                }
            }
            d += 1;
            if d == nd {
                d = 0;
            }
        }
        Ok(makespan)
    }
}
