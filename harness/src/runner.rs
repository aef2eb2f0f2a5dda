//! One run: build the turmoil simulation from a scenario with every builder option explicit, own
//! the step loop (faults between steps, a heal phase, a wall-clock watchdog), record the trace,
//! run the checkers.

use std::cell::OnceCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, UNIX_EPOCH};

use bridge_under_test::emit;
use bridge_under_test::events::kind;

use crate::family::{self, Scenario};
use crate::recorder::Recorder;
use crate::schema::McpSchema;
use crate::seed::derive;
use crate::trace::{Outcome, Stats, Trace, Violation};

/// A fixed epoch: turmoil's default reads the wall clock. (2026-01-01T00:00:00Z)
const EPOCH_SECS: u64 = 1_767_225_600;

/// Knobs of a run that are not part of the scenario.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Wall-clock budget: a runaway simulation becomes a `watchdog` finding, not a hung hunt.
    pub wall_limit: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self { wall_limit: Duration::from_secs(30) }
    }
}

thread_local! {
    /// The compiled MCP schema, built once per thread: compiling it per run would dominate.
    static SCHEMA: OnceCell<McpSchema> = const { OnceCell::new() };
}

/// Run a scenario with default options.
pub fn run(scenario: &Scenario) -> Outcome {
    run_with(scenario, RunOptions::default())
}

/// Run a scenario: simulate, then check the trace.
pub fn run_with(scenario: &Scenario, options: RunOptions) -> Outcome {
    let recorder = Recorder::default();
    let subscriber = recorder.subscriber();
    let (mut stats, failure) = tracing::subscriber::with_default(subscriber, || {
        simulate(scenario, &recorder, options)
    });
    let trace = Trace { events: recorder.take() };
    stats.events = trace.events.len() as u64;
    stats.hosts = recorder.hosts();
    let mut violations = check(scenario, &trace);
    violations.extend(failure);
    Outcome { trace, violations, stats }
}

/// Only the simulation of a scenario (hosts, faults, heal), with nothing recorded and no checker:
/// what the harness adds on top of the simulated software is `run` minus this.
pub fn simulate_unrecorded(scenario: &Scenario) -> Stats {
    simulate(scenario, &Recorder::default(), RunOptions::default()).0
}

/// Run the family's checkers over a trace (also usable on a saved trace).
pub fn check(scenario: &Scenario, trace: &Trace) -> Vec<Violation> {
    SCHEMA.with(|cell| {
        let schema = cell.get_or_init(McpSchema::new);
        (scenario.family().check)(trace, schema)
    })
}

/// The simulation a scenario runs in, before any host is added.
pub fn build_sim<'a>(scenario: &Scenario) -> turmoil::Sim<'a> {
    let params = &scenario.sim;
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(derive(scenario.seed, "turmoil"))
        .epoch(UNIX_EPOCH + Duration::from_secs(EPOCH_SECS))
        .tick_duration(Duration::from_millis(params.tick_ms))
        .simulation_duration(Duration::from_millis(params.horizon_ms + 10 * params.tick_ms))
        .min_message_latency(Duration::ZERO)
        .max_message_latency(Duration::from_millis(params.latency_max_ms))
        .fail_rate(0.0)
        .repair_rate(1.0);
    if params.random_order {
        builder.enable_random_order();
    }
    builder.build()
}

/// The owned step loop. Returns the stats and, if the simulation itself failed (a host returned
/// an error, panicked, or the watchdog fired), that failure as a violation.
fn simulate(scenario: &Scenario, recorder: &Recorder, options: RunOptions) -> (Stats, Option<Violation>) {
    let params = scenario.sim;
    let mut sim = build_sim(scenario);
    let driver = scenario.family.setup(scenario.seed, &mut sim);
    driver.emit_spec(&params);
    let mut pending = family::Pending::new(driver.schedule());
    let mut healed = false;
    let mut stats = Stats::default();
    #[allow(clippy::disallowed_methods)] // the watchdog measures wall time; nothing is recorded from it
    let started = std::time::Instant::now();
    loop {
        let now_ms = u64::try_from(sim.elapsed().as_millis()).unwrap_or(u64::MAX);
        recorder.set_loop_ms(now_ms);
        while let Some(scheduled) = pending.next_due(now_ms, |s| driver.anchor_met(s)) {
            driver.apply(&scheduled, &mut sim);
        }
        if !healed && pending.is_empty() {
            healed = true;
            emit!(kind::FAULT_INJECTED, fault = "heal", phase = "start", detail = "");
            driver.heal(&mut sim);
        }
        stats.virtual_ms = now_ms;
        if now_ms >= params.horizon_ms {
            return (stats, None);
        }
        let failure = match catch_unwind(AssertUnwindSafe(|| sim.step())) {
            Ok(Ok(true)) => return (stats, None),
            Ok(Ok(false)) => None,
            Ok(Err(error)) => Some(format!("a host failed: {error}")),
            Err(panic) => Some(format!("a host panicked: {}", panic_text(&panic))),
        };
        stats.steps += 1;
        if let Some(detail) = failure {
            return (stats, Some(sim_violation("host_failure", now_ms, detail)));
        }
        if stats.steps % 1024 == 0 && started.elapsed() > options.wall_limit {
            let detail = format!("run exceeded {:?} of wall time at virtual {now_ms} ms", options.wall_limit);
            return (stats, Some(sim_violation("watchdog", now_ms, detail)));
        }
    }
}

fn sim_violation(invariant: &str, at_ms: u64, detail: String) -> Violation {
    Violation { invariant: invariant.to_string(), at_ms, event_index: 0, detail }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".to_string())
}
