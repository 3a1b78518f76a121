//! Search over topological orders (Algorithm 2): a chromosome is a vector of random keys in
//! `[0, 1)`, one per unit; the decoder runs Kahn's algorithm with those priorities and then
//! the SliceGraph DP on the resulting order.
//!
//! * random-T: the best of `T` random key vectors;
//! * BRKGA (Goncalves and Resende): elites survive, mutants are fresh random vectors, the rest
//!   are biased crossovers of an elite and a non-elite parent (each key from the elite parent
//!   with probability `rho`);
//! * MLA / MLA-weighted: BRKGA on the linear-arrangement cost of the Kahn order (sum over
//!   edges of the position gap, optionally weighted by the tensor cost), then one SliceGraph
//!   on the best order found.
//!
//! Determinism: every random draw happens on one thread, in a fixed sequence (random-T draws
//! one seed per sample first); only decoding runs in parallel (rayon), and decoding is a pure
//! function. So a seed gives the same answer whatever the number of threads.
//!
//! Cancellation: the `*_with` searches check a [`Cancel`] token after every generation (or
//! batch), and the decoders of `decode_capped_with` poll it inside SliceGraph (a decode stopped
//! midway counts as `INF`, which never enters the elites or the history). A stopped search
//! returns its best so far with `stopped` set; with a deadline the answer depends on the
//! timing, otherwise a seed still gives the same answer.

use rayon::prelude::*;

use super::kahn::kahn;
use super::rng::{splitmix64, Rng};
use super::slicegraph::{self, ScanCosts, Split};
use super::{Instance, OrderCtx};
use crate::cancel::{Cancel, Stop};
use crate::numeric::INF;

#[derive(Debug, Clone)]
pub struct BrkgaParams {
    pub population: usize,
    pub generations: usize,
    pub elite: f64,
    pub mutant: f64,
    pub rho: f64,
    /// Stop once this many chromosomes have been decoded (`None`: no limit).
    pub max_decodes: Option<u64>,
    pub seed: u64,
}

impl Default for BrkgaParams {
    fn default() -> Self {
        BrkgaParams {
            population: 100,
            generations: 100,
            elite: 0.2,
            mutant: 0.1,
            rho: 0.7,
            max_decodes: None,
            seed: 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct SearchResult {
    pub best_keys: Vec<f64>,
    pub best: f64,
    pub decodes: u64,
    /// Best fitness after the initial population and after each generation (or batch).
    pub history: Vec<f64>,
    /// Set when the search was cut short by its [`Cancel`] token (the rest is its best so far).
    pub stopped: Option<Stop>,
}

fn random_keys(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.unit()).collect()
}

fn order_by_fitness(fit: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..fit.len()).collect();
    idx.sort_by(|&a, &b| fit[a].total_cmp(&fit[b]).then(a.cmp(&b)));
    idx
}

/// BRKGA minimising `fitness` over key vectors of length `n`.
///
/// `fitness(keys, cap)` may return `INF` instead of the exact value when that value exceeds
/// `cap`: the cap passed for a generation's children is the worst elite fitness, and a child
/// above it can enter neither the elite set nor the history, so nothing the search reports
/// changes (non-elite parents are drawn uniformly, whatever their fitness).
pub fn brkga<F: Fn(&[f64], f64) -> f64 + Sync>(
    n: usize,
    p: &BrkgaParams,
    fitness: F,
) -> SearchResult {
    brkga_with(n, p, fitness, &Cancel::never())
}

/// [`brkga`], stopping after the generation during which `cancel` fired.
pub fn brkga_with<F: Fn(&[f64], f64) -> f64 + Sync>(
    n: usize,
    p: &BrkgaParams,
    fitness: F,
    cancel: &Cancel,
) -> SearchResult {
    let pop_size = p.population.max(2);
    let budget = p.max_decodes.unwrap_or(u64::MAX);
    let mut rng = Rng::new(p.seed);
    let first = (pop_size as u64).min(budget.max(1)) as usize;
    let mut pop: Vec<Vec<f64>> = (0..first).map(|_| random_keys(&mut rng, n)).collect();
    let mut fit: Vec<f64> = pop.par_iter().map(|c| fitness(c, INF)).collect();
    let mut decodes = first as u64;
    let idx = order_by_fitness(&fit);
    pop = idx.iter().map(|&i| std::mem::take(&mut pop[i])).collect();
    fit = idx.iter().map(|&i| fit[i]).collect();
    let mut history = vec![fit[0]];
    let ne = elite_count(p.elite, pop_size);
    let nm = ((p.mutant * pop_size as f64).round() as usize).min(pop_size - ne);
    for _ in 0..p.generations {
        if decodes >= budget || pop.len() < 2 || cancel.check().is_err() {
            break;
        }
        let ne_now = ne.min(pop.len() - 1);
        let remaining = (budget - decodes).min(usize::MAX as u64) as usize;
        let n_new = (pop_size - ne_now).min(remaining);
        let mut children: Vec<Vec<f64>> = Vec::with_capacity(n_new);
        for c in 0..n_new {
            if c < nm {
                children.push(random_keys(&mut rng, n));
            } else {
                let a = &pop[rng.below(ne_now)];
                let b = &pop[ne_now + rng.below(pop.len() - ne_now)];
                let child = (0..n)
                    .map(|i| if rng.unit() < p.rho { a[i] } else { b[i] })
                    .collect();
                children.push(child);
            }
        }
        let cap = fit[ne_now - 1];
        let cfit: Vec<f64> = children.par_iter().map(|c| fitness(c, cap)).collect();
        decodes += n_new as u64;
        // next population: elites, the new children, then (only if the budget cut the
        // generation short) the best previous non-elites to keep the size
        let mut npop: Vec<Vec<f64>> = pop[..ne_now].to_vec();
        let mut nfit: Vec<f64> = fit[..ne_now].to_vec();
        npop.extend(children);
        nfit.extend(cfit);
        let mut i = ne_now;
        while npop.len() < pop_size && i < pop.len() {
            npop.push(pop[i].clone());
            nfit.push(fit[i]);
            i += 1;
        }
        let idx = order_by_fitness(&nfit);
        pop = idx.iter().map(|&i| std::mem::take(&mut npop[i])).collect();
        fit = idx.iter().map(|&i| nfit[i]).collect();
        history.push(fit[0]);
    }
    SearchResult {
        best_keys: pop[0].clone(),
        best: fit[0],
        decodes,
        history,
        stopped: cancel.stopped(),
    }
}

/// The elite set's size in a population of `pop_size >= 2`.
fn elite_count(elite: f64, pop_size: usize) -> usize {
    ((elite * pop_size as f64).round() as usize).clamp(1, pop_size - 1)
}

/// Island `i`'s share of a decode budget `b` split over `islands`.
fn island_share(b: u64, islands: usize, i: usize) -> u64 {
    let share = b / islands as u64 + u64::from((i as u64) < b % islands as u64);
    share.max(1)
}

/// How many chromosomes [`brkga_islands`] decodes when nothing stops it (the `total` of its
/// progress): the first population, then `population - elites` children per generation, up to
/// each island's share of the budget.
pub fn planned_decodes(p: &BrkgaParams, islands: usize) -> u64 {
    let one = |budget: u64| -> u64 {
        let pop_size = p.population.max(2);
        let first = (pop_size as u64).min(budget.max(1));
        if first < 2 || first >= budget {
            return first;
        }
        let per_generation = (pop_size - elite_count(p.elite, pop_size)) as u64;
        let rest = per_generation.saturating_mul(p.generations as u64);
        budget.min(first.saturating_add(rest))
    };
    let islands = islands.max(1);
    match p.max_decodes {
        None => one(u64::MAX).saturating_mul(islands as u64),
        Some(_) if islands == 1 => one(p.max_decodes.unwrap_or(u64::MAX)),
        Some(b) => (0..islands)
            .map(|i| one(island_share(b, islands, i)))
            .fold(0u64, u64::saturating_add),
    }
}

/// `islands` independent BRKGA populations sharing the decode budget (each gets an equal
/// share and its own seed derived from `p.seed`; one island is plain [`brkga`] with `p.seed`).
/// Returns the best island; `history` is the best value over the islands after each
/// generation. Independent restarts make the search less prone to settling in one basin.
pub fn brkga_islands<F: Fn(&[f64], f64) -> f64 + Sync>(
    n: usize,
    p: &BrkgaParams,
    islands: usize,
    fitness: F,
    cancel: &Cancel,
) -> SearchResult {
    let islands = islands.max(1);
    if islands == 1 {
        return brkga_with(n, p, fitness, cancel);
    }
    let mut s = p.seed;
    let mut best: Option<SearchResult> = None;
    let mut history: Vec<f64> = Vec::new();
    let mut decodes = 0;
    for i in 0..islands {
        if i > 0 && cancel.check().is_err() {
            break;
        }
        let mut q = p.clone();
        q.seed = splitmix64(&mut s);
        if let Some(b) = p.max_decodes {
            q.max_decodes = Some(island_share(b, islands, i));
        }
        let r = brkga_with(n, &q, &fitness, cancel);
        decodes += r.decodes;
        for (g, &h) in r.history.iter().enumerate() {
            if g < history.len() {
                history[g] = history[g].min(h);
            } else {
                let prev = history.last().copied().unwrap_or(INF);
                history.push(prev.min(h));
            }
        }
        // pad: later generations of shorter islands keep their final value
        let last = *r.history.last().unwrap_or(&INF);
        for h in history.iter_mut().skip(r.history.len()) {
            *h = h.min(last);
        }
        if best.as_ref().is_none_or(|b| r.best < b.best) {
            best = Some(r);
        }
    }
    let mut b = best.expect("at least one island");
    b.decodes = decodes;
    b.history = history;
    b.stopped = cancel.stopped();
    b
}

/// The best of `samples` random key vectors, decoded in batches of `batch` (in parallel within
/// a batch; `fitness(keys, cap)` may return `INF` above `cap`, the best value of the earlier
/// batches). `history` holds the best value after each batch. One seed per sample is drawn in
/// sequence, a batch at a time (so memory is `O(batch)`).
pub fn random_t<F: Fn(&[f64], f64) -> f64 + Sync>(
    n: usize,
    samples: u64,
    batch: usize,
    seed: u64,
    fitness: F,
) -> SearchResult {
    random_t_with(n, samples, batch, seed, fitness, &Cancel::never())
}

/// [`random_t`], checking `cancel` between batches.
pub fn random_t_with<F: Fn(&[f64], f64) -> f64 + Sync>(
    n: usize,
    samples: u64,
    batch: usize,
    seed: u64,
    fitness: F,
    cancel: &Cancel,
) -> SearchResult {
    let samples = samples.max(1);
    let batch = batch.max(1) as u64;
    let mut s = seed;
    let mut history = Vec::new();
    let mut best = INF;
    let mut best_seed = None;
    let mut done = 0u64;
    while done < samples {
        if done > 0 && cancel.check().is_err() {
            break;
        }
        let size = batch.min(samples - done);
        let chunk: Vec<u64> = (0..size).map(|_| splitmix64(&mut s)).collect();
        let cap = best;
        let fit: Vec<f64> = chunk
            .par_iter()
            .map(|&sd| fitness(&random_keys(&mut Rng::new(sd), n), cap))
            .collect();
        for (&f, &sd) in fit.iter().zip(&chunk) {
            // the first sample stands in when no value is finite
            if best_seed.is_none() || f < best {
                best_seed = Some(sd);
            }
            if f < best {
                best = f;
            }
        }
        done += size;
        history.push(best);
    }
    let first = best_seed.unwrap_or(0);
    SearchResult {
        best_keys: random_keys(&mut Rng::new(first), n),
        best,
        decodes: done,
        history,
        stopped: cancel.stopped(),
    }
}

/// Kahn + SliceGraph: the decoder of Algorithm 2.
pub fn decode(inst: &Instance, keys: &[f64], k: usize) -> (Vec<usize>, Split) {
    let order = kahn(inst, keys);
    let ctx = OrderCtx::new(inst, order);
    let split = slicegraph::solve(&ctx, &mut ScanCosts::new(&ctx), k);
    (ctx.order, split)
}

pub fn decode_objective(inst: &Instance, keys: &[f64], k: usize) -> f64 {
    decode(inst, keys, k).1.objective
}

/// The decoder's objective if it is at most `cap`, else `INF`.
pub fn decode_capped(inst: &Instance, keys: &[f64], k: usize, cap: f64) -> f64 {
    decode_capped_with(inst, keys, k, cap, &Cancel::never())
}

/// [`decode_capped`], or `INF` at once when `cancel` has fired (or fires during the decode).
pub fn decode_capped_with(
    inst: &Instance,
    keys: &[f64],
    k: usize,
    cap: f64,
    cancel: &Cancel,
) -> f64 {
    if cancel.stopped().is_some() {
        return INF;
    }
    let ctx = OrderCtx::new(inst, kahn(inst, keys));
    match slicegraph::solve_capped_with(&ctx, &mut ScanCosts::new(&ctx), k, cap, cancel) {
        Ok(Some(s)) => s.objective,
        Ok(None) | Err(_) => INF,
    }
}

/// Linear-arrangement cost of the Kahn order of `keys`.
pub fn arrangement_cost(inst: &Instance, keys: &[f64], weighted: bool) -> f64 {
    let order = kahn(inst, keys);
    let mut pos = vec![0usize; inst.n];
    for (i, &u) in order.iter().enumerate() {
        pos[u] = i;
    }
    let mut s = 0.0;
    if weighted {
        for t in 0..inst.num_tensors() {
            let p = pos[inst.t_prod[t] as usize];
            for &c in inst.consumers(t) {
                s += inst.t_cost[t] * (pos[c as usize] - p) as f64;
            }
        }
    } else {
        for u in 0..inst.n {
            for &v in inst.dag.succs(u) {
                s += (pos[v as usize] - pos[u]) as f64;
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtpp::exact;
    use crate::mtpp::tests_common::random_instance;

    #[test]
    fn planned_decodes_are_the_decodes_of_an_unstopped_search() {
        let mut checked = 0;
        for population in [1, 2, 3, 10, 25] {
            for generations in [0, 1, 7] {
                for budget in [None, Some(0), Some(1), Some(5), Some(26), Some(1000)] {
                    for islands in [1, 2, 3] {
                        let p = BrkgaParams {
                            population,
                            generations,
                            elite: 0.3,
                            max_decodes: budget,
                            ..Default::default()
                        };
                        let r = brkga_islands(4, &p, islands, |c, _| c[0], &Cancel::never());
                        let what = format!("{population} {generations} {budget:?} {islands}");
                        assert_eq!(planned_decodes(&p, islands), r.decodes, "{what}");
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 270);
    }

    #[test]
    fn heuristics_are_at_least_the_optimum_and_seeded() {
        let mut rng = Rng::new(4);
        for trial in 0..12 {
            let inst = random_instance(&mut rng, 5 + trial, 0.3, trial % 2 == 0);
            let k = 2 + trial % 3;
            let opt = exact::solve(&inst, k, 1 << 22, true, f64::INFINITY)
                .unwrap()
                .objective;
            let params = BrkgaParams {
                population: 20,
                generations: 10,
                seed: trial as u64,
                ..Default::default()
            };
            let r = brkga(inst.n, &params, |c, cap| decode_capped(&inst, c, k, cap));
            assert!(r.best >= opt);
            assert_eq!(r.best, decode_objective(&inst, &r.best_keys, k));
            assert!(r.history.windows(2).all(|w| w[1] <= w[0]));
            assert_eq!(r.decodes, 20 + 10 * 16);
            let r2 = random_t(inst.n, 50, 10, 7, |c, cap| decode_capped(&inst, c, k, cap));
            assert!(r2.best >= opt);
            assert_eq!(r2.best, decode_objective(&inst, &r2.best_keys, k));
            // thread count does not change the answer
            let one = rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap();
            let three = rayon::ThreadPoolBuilder::new()
                .num_threads(3)
                .build()
                .unwrap();
            let a =
                one.install(|| brkga(inst.n, &params, |c, cap| decode_capped(&inst, c, k, cap)));
            let b =
                three.install(|| brkga(inst.n, &params, |c, cap| decode_capped(&inst, c, k, cap)));
            assert_eq!(a.best_keys, b.best_keys);
            assert_eq!(a.history, b.history);
            assert_eq!(a.history, r.history);
        }
    }

    #[test]
    fn islands_split_the_budget_and_keep_the_best() {
        let mut rng = Rng::new(2);
        let inst = random_instance(&mut rng, 15, 0.3, false);
        let params = BrkgaParams {
            population: 10,
            generations: 1000,
            max_decodes: Some(103),
            ..Default::default()
        };
        let never = Cancel::never();
        let r = brkga_islands(
            inst.n,
            &params,
            3,
            |c, cap| decode_capped(&inst, c, 3, cap),
            &never,
        );
        assert_eq!(r.decodes, 103);
        assert_eq!(r.best, decode_objective(&inst, &r.best_keys, 3));
        assert_eq!(*r.history.last().unwrap(), r.best);
        assert!(r.history.windows(2).all(|w| w[1] <= w[0]));
    }

    #[test]
    fn a_stopped_search_returns_its_best_so_far() {
        let mut rng = Rng::new(5);
        let inst = random_instance(&mut rng, 40, 0.2, false);
        let params = BrkgaParams {
            population: 20,
            generations: 1 << 40,
            ..Default::default()
        };
        let limit = std::time::Duration::from_millis(100);
        for islands in [1, 3] {
            let c = Cancel::with_limit(Some(limit));
            let fit = |keys: &[f64], cap: f64| decode_capped_with(&inst, keys, 3, cap, &c);
            let t0 = std::time::Instant::now();
            let r = brkga_islands(inst.n, &params, islands, fit, &c);
            assert!(t0.elapsed() < limit * 20, "{:?}", t0.elapsed());
            assert_eq!(r.stopped, Some(Stop::Deadline));
            assert!(r.best.is_finite());
            assert_eq!(r.best, decode_objective(&inst, &r.best_keys, 3));
            assert!(r.history.windows(2).all(|w| w[1] <= w[0]));
        }
        let c = Cancel::with_limit(Some(limit));
        let fit = |keys: &[f64], cap: f64| decode_capped_with(&inst, keys, 3, cap, &c);
        let r = random_t_with(inst.n, u64::MAX, 16, 1, fit, &c);
        assert_eq!(r.stopped, Some(Stop::Deadline));
        assert_eq!(r.best, decode_objective(&inst, &r.best_keys, 3));
        // interrupted before it starts: nothing decoded
        let c = Cancel::never();
        c.interrupt();
        let fit = |keys: &[f64], cap: f64| decode_capped_with(&inst, keys, 3, cap, &c);
        let r = brkga_with(inst.n, &params, fit, &c);
        assert_eq!((r.best, r.stopped), (INF, Some(Stop::Interrupted)));
    }

    #[test]
    fn a_stopped_split_reports_why() {
        let mut rng = Rng::new(3);
        let inst = random_instance(&mut rng, 30, 0.2, false);
        let ctx = OrderCtx::new(&inst, kahn(&inst, &vec![0.5; inst.n]));
        let c = Cancel::never();
        assert!(slicegraph::solve_with(&ctx, &mut ScanCosts::new(&ctx), 4, &c).is_ok());
        c.interrupt();
        let stopped = slicegraph::solve_with(&ctx, &mut ScanCosts::new(&ctx), 4, &c);
        assert_eq!(stopped, Err(Stop::Interrupted));
        let capped = slicegraph::solve_capped_with(&ctx, &mut ScanCosts::new(&ctx), 4, 1e9, &c);
        assert_eq!(capped, Err(Stop::Interrupted));
        let cost = |l: usize, r: usize| ctx.seg_lb(l, r);
        assert_eq!(
            slicegraph::reference_with(30, 4, cost, &c),
            Err(Stop::Interrupted)
        );
        assert_eq!(
            decode_capped_with(&inst, &vec![0.5; inst.n], 4, INF, &c),
            INF
        );
        // the plain versions never stop
        assert!(slicegraph::solve(&ctx, &mut ScanCosts::new(&ctx), 4)
            .objective
            .is_finite());
    }

    #[test]
    fn budget_is_respected() {
        let mut rng = Rng::new(1);
        let inst = random_instance(&mut rng, 12, 0.3, false);
        let params = BrkgaParams {
            population: 10,
            generations: 1000,
            max_decodes: Some(55),
            ..Default::default()
        };
        let r = brkga(inst.n, &params, |c, cap| decode_capped(&inst, c, 3, cap));
        assert_eq!(r.decodes, 55);
    }
}
