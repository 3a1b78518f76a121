//! BRKGA's operators observed from outside: the fitness function records every chromosome it
//! is given, so the test sees the initial population, the elite and each child, and checks what
//! Goncalves and Resende's biased crossover promises (each key from the elite parent with
//! probability `rho`). A quality check on the final value alone cannot see an inverted bias:
//! the search is only a few percent worse.

use std::sync::Mutex;

use stagecut_core::mtpp::search::{brkga, BrkgaParams};

/// Runs one generation of BRKGA with a single elite and no mutants on `n` keys; returns
/// `(the elite, the children)`.
fn one_generation(n: usize, rho: f64, seed: u64) -> (Vec<f64>, Vec<Vec<f64>>) {
    let seen: Mutex<Vec<(bool, Vec<f64>)>> = Mutex::new(Vec::new());
    let params = BrkgaParams {
        population: 10,
        generations: 1,
        elite: 0.1,
        mutant: 0.0,
        rho,
        max_decodes: None,
        seed,
    };
    // fitness: the sum of the keys (the elite is the initial chromosome of least sum);
    // the first population is decoded without a cap, the children with the elite's value
    let r = brkga(n, &params, |keys, cap| {
        seen.lock()
            .unwrap()
            .push((cap == f64::INFINITY, keys.to_vec()));
        keys.iter().sum()
    });
    assert_eq!(r.decodes, 10 + 9);
    let seen = seen.into_inner().unwrap();
    let initial: Vec<&Vec<f64>> = seen.iter().filter(|s| s.0).map(|s| &s.1).collect();
    let children: Vec<Vec<f64>> = seen.iter().filter(|s| !s.0).map(|s| s.1.clone()).collect();
    assert_eq!((initial.len(), children.len()), (10, 9));
    let sum = |c: &Vec<f64>| c.iter().sum::<f64>();
    let elite = initial
        .iter()
        .min_by(|a, b| sum(a).total_cmp(&sum(b)))
        .map(|c| (*c).clone())
        .unwrap();
    (elite, children)
}

/// Share of the children's keys equal to the elite parent's key at the same position (the
/// other parent's keys are random floats: equal by chance with probability zero).
fn elite_share(elite: &[f64], children: &[Vec<f64>]) -> f64 {
    let same: usize = children
        .iter()
        .map(|c| c.iter().zip(elite).filter(|(a, b)| a == b).count())
        .sum();
    same as f64 / (children.len() * elite.len()) as f64
}

#[test]
fn crossover_takes_the_elite_key_with_probability_rho() {
    for seed in 0..4 {
        let (elite, children) = one_generation(300, 0.7, seed);
        let share = elite_share(&elite, &children);
        // 2700 keys: the standard deviation of the share is under 0.01
        assert!((0.65..0.75).contains(&share), "seed {seed}: share {share}");
    }
    // the extremes: rho = 1 copies the elite, rho = 0 never takes a key from it
    let (elite, children) = one_generation(50, 1.0, 9);
    assert!(children.iter().all(|c| *c == elite));
    let (elite, children) = one_generation(50, 0.0, 9);
    assert_eq!(elite_share(&elite, &children), 0.0);
}

#[test]
fn elites_survive_and_mutants_are_fresh() {
    // two elites, two mutants: the elites come back unchanged in the next population (so the
    // history never rises), and the mutants share no key with any earlier chromosome
    let seen: Mutex<Vec<Vec<f64>>> = Mutex::new(Vec::new());
    let params = BrkgaParams {
        population: 10,
        generations: 3,
        elite: 0.2,
        mutant: 0.2,
        rho: 0.7,
        max_decodes: None,
        seed: 5,
    };
    let r = brkga(40, &params, |keys, _| {
        seen.lock().unwrap().push(keys.to_vec());
        keys.iter().map(|x| (x - 0.25).abs()).sum()
    });
    assert_eq!(r.decodes, 10 + 3 * 8);
    assert_eq!(r.history.len(), 4);
    assert!(r.history.windows(2).all(|w| w[1] <= w[0]));
    let seen = seen.into_inner().unwrap();
    let fresh = seen
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            seen[..*i]
                .iter()
                .all(|p| p.iter().zip(c.iter()).all(|(a, b)| a != b))
        })
        .count();
    // the 10 initial chromosomes and 2 mutants per generation share nothing with the past
    assert_eq!(fresh, 10 + 3 * 2);
    let best = seen
        .iter()
        .map(|c| c.iter().map(|x| (x - 0.25).abs()).sum::<f64>())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(r.best, best);
}
