//! The benchmark: per family, scenarios per second, virtual:wall acceleration, and our throughput
//! against a bare turmoil simulation with the same number of hosts, the same tick and the same
//! virtual duration, measured side by side in one process (the engine is the physical limit).
//! Also cases-to-detect for every bug switch over several base seeds.

use std::time::Duration;

use serde::Serialize;

use crate::hunt::{self, case_seed, generate, HuntConfig, Quiet};
use crate::runner::{build_sim, run, simulate_unrecorded};
use crate::family::{Family, Scenario};
use crate::token::Token;

/// One family's throughput figures.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    pub family: String,
    pub cases: u64,
    pub wall_s: f64,
    pub virtual_s: f64,
    pub bare_wall_s: f64,
    pub scenarios_per_s: f64,
    /// Virtual seconds simulated per wall second.
    pub acceleration: f64,
    /// Our scenarios per second over bare turmoil's for the same shapes (1.0 = no overhead).
    pub bare_ratio: f64,
    /// Wall seconds of the same scenarios' simulations alone: the same hosts, software and
    /// faults, with nothing recorded and nothing checked.
    pub software_wall_s: f64,
    /// Our scenarios per second over that of the simulations alone: the share of a run that is
    /// the simulated software and the engine, not the harness (generation, recording, checking).
    pub harness_ratio: f64,
}

/// Cases-to-detect for one switch over several base seeds (`None`: not found in the budget).
#[derive(Debug, Clone, Serialize)]
pub struct Detection {
    pub family: String,
    pub switch: String,
    pub cases: Vec<Option<u64>>,
    pub median: Option<u64>,
    pub max: Option<u64>,
}

/// Run `f`, adding the wall time it took to `total`.
#[allow(clippy::disallowed_methods)] // a benchmark measures wall time; nothing is recorded
fn timed<T>(total: &mut Duration, f: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let out = f();
    *total += started.elapsed();
    out
}

/// Run `cases` clean cases (generation and checking included), each followed at once by a bare
/// simulation of the same shape and by its simulation alone, so that drift in the machine's
/// speed weighs on all three alike.
pub fn throughput(family: &'static Family, cases: u64, base_seed: u64) -> Throughput {
    let (mut wall, mut bare_wall, mut software_wall) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut virtual_ms = 0;
    for index in 0..cases {
        let (scenario, outcome) = timed(&mut wall, || {
            let token = Token::new(family, &[], case_seed(base_seed, index)).expect("no switches");
            let scenario = generate(&token).current();
            let outcome = run(&scenario);
            (scenario, outcome)
        });
        timed(&mut bare_wall, || bare(&scenario, outcome.stats.hosts, outcome.stats.virtual_ms));
        timed(&mut software_wall, || simulate_unrecorded(&scenario));
        virtual_ms += outcome.stats.virtual_ms;
    }
    let wall_s = wall.as_secs_f64().max(1e-9);
    Throughput {
        family: family.name.to_string(),
        cases,
        wall_s,
        virtual_s: virtual_ms as f64 / 1000.0,
        bare_wall_s: bare_wall.as_secs_f64(),
        scenarios_per_s: cases as f64 / wall_s,
        acceleration: virtual_ms as f64 / 1000.0 / wall_s,
        bare_ratio: bare_wall.as_secs_f64() / wall_s,
        software_wall_s: software_wall.as_secs_f64(),
        harness_ratio: software_wall.as_secs_f64() / wall_s,
    }
}

/// A bare turmoil simulation: the scenario's own simulation (same builder: tick, latency, host
/// order), with `hosts` idle hosts stepped for `virtual_ms`, and no recorder.
fn bare(scenario: &Scenario, hosts: usize, virtual_ms: u64) {
    let mut sim = build_sim(scenario);
    for host in 0..hosts {
        sim.host(format!("h{host}"), || async {
            loop {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
            }
        });
    }
    while sim.elapsed() < Duration::from_millis(virtual_ms) {
        if sim.step().is_err() {
            break;
        }
    }
}

/// Cases-to-detect for every switch of `family`, over `seeds` base seeds.
/// `seeds == 0` measures nothing and returns no rows.
pub fn detection(family: &'static Family, seeds: u64, budget: u64, threads: usize) -> Vec<Detection> {
    if seeds == 0 {
        return Vec::new();
    }
    family
        .switches
        .iter()
        .map(|switch| {
            let cases: Vec<Option<u64>> = (1..=seeds)
                .map(|seed| {
                    let mut config = HuntConfig::new(family, &[switch.to_string()], budget, seed);
                    config.shrink_budget = 0;
                    config.threads = threads;
                    let report = hunt::hunt(&config, &mut Quiet).expect("valid switches");
                    report.findings.first().map(|f| f.index + 1)
                })
                .collect();
            let mut found: Vec<u64> = cases.iter().flatten().copied().collect();
            found.sort_unstable();
            let median = (found.len() == cases.len()).then(|| found[found.len() / 2]);
            Detection {
                family: family.name.to_string(),
                switch: switch.to_string(),
                max: median.and(found.last().copied()),
                median,
                cases,
            }
        })
        .collect()
}
