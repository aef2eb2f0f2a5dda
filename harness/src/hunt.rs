//! Generation, shrinking and the hunt. A case is a seed: the family's proptest strategy draws
//! the scenario from a ChaCha RNG seeded with it, so the same token always regenerates the same
//! scenario and shrinks along the same path to the same minimal one.
//!
//! The hunt runs cases on every core, one simulation per worker thread (each run installs its
//! own recorder), and stays deterministic: it reports the failing case with the lowest index, and
//! every lower index has been run, exactly as a sequential hunt would.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use bridge_under_test::rng::{mix, SimRng};
use proptest::strategy::{BoxedStrategy, Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::coverage::{Cell, Coverage};
use crate::runner::{run, run_with, RunOptions};
use crate::family::{Family, Scenario};
use crate::token::Token;
use crate::trace::{Outcome, Trace, Violation};

/// The strategy for one case of `token`'s family and switches.
pub fn strategy(token: &Token) -> BoxedStrategy<Scenario> {
    (token.family.strategy)(&token.bugs, token.seed)
}

/// The value tree of a token's case: its current value is the scenario; it can shrink.
pub fn generate(token: &Token) -> Box<dyn ValueTree<Value = Scenario>> {
    tree_of(token.seed, strategy(token))
}

/// The value tree `strategy` draws from the RNG of `seed`.
pub fn tree_of<T: std::fmt::Debug + 'static>(seed: u64, strategy: BoxedStrategy<T>) -> Box<dyn ValueTree<Value = T>> {
    let mut rng = SimRng::new(seed);
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let config = Config { failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, rng);
    let tree = strategy.new_tree(&mut runner).expect("case strategies never reject");
    Box::new(tree)
}

/// The seed of case `index` under `base`.
pub fn case_seed(base: u64, index: u64) -> u64 {
    mix(base ^ mix(index.wrapping_add(0x5EED)))
}

/// A shrunk failure.
pub struct Shrunk {
    pub scenario: Scenario,
    pub outcome: Outcome,
    /// Runs spent shrinking.
    pub runs: usize,
}

/// Shrink a failing case to a minimal scenario that still breaks the same invariant. Bounded by
/// `budget` runs; deterministic for a given tree.
pub fn shrink(
    mut tree: Box<dyn ValueTree<Value = Scenario>>,
    failure: Outcome,
    budget: usize,
    mut progress: impl FnMut(usize, &Scenario),
) -> Shrunk {
    let invariant = failure.violations[0].invariant.clone();
    let mut best = Shrunk { scenario: tree.current(), outcome: failure, runs: 0 };
    if !tree.simplify() {
        return best;
    }
    while best.runs < budget {
        let candidate = tree.current();
        let outcome = run(&candidate);
        best.runs += 1;
        let same = outcome.violations.iter().any(|v| v.invariant == invariant);
        let more = if same {
            progress(best.runs, &candidate);
            best.scenario = candidate;
            best.outcome = outcome;
            tree.simplify()
        } else {
            tree.complicate()
        };
        if !more {
            break;
        }
    }
    best
}

/// A slice of the case space: shard `index` of `count` runs case indices `index + k·count`, so
/// shards on different machines never overlap and every token is valid anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parse `i/n` (0-based `i`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("--shard `{text}` must be i/n with 0 <= i < n, e.g. 0/4");
        let (index, count) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) = (index.parse().map_err(|_| bad())?, count.parse().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }

    /// The case index of this shard's `k`-th case.
    pub fn case_index(self, k: u64) -> u64 {
        self.index + k * self.count
    }
}

/// What to hunt for, in one family.
#[derive(Debug, Clone)]
pub struct HuntConfig {
    pub family: &'static Family,
    pub bugs: Vec<String>,
    /// Cases to run at most (in this shard).
    pub cases: u64,
    pub base_seed: u64,
    /// Stop starting cases after this much wall time.
    pub deadline: Option<Duration>,
    /// Runs allowed for shrinking a failure.
    pub shrink_budget: usize,
    /// Worker threads (one simulation each).
    pub threads: usize,
    /// Collect one failure per distinct invariant instead of stopping at the first.
    pub keep_going: bool,
    pub shard: Shard,
    /// Run every case twice and report the first divergence.
    pub check_determinism: bool,
    /// A case slower than this is reported as a runaway (`watchdog`).
    pub case_wall_limit: Duration,
    /// Count the family's coverage cells over every case run.
    pub coverage: bool,
}

impl HuntConfig {
    /// One family, one thread, stop at the first failure: the test suite's defaults.
    pub fn new(family: &'static Family, bugs: &[String], cases: u64, base_seed: u64) -> Self {
        Self {
            family,
            bugs: bugs.to_vec(),
            cases,
            base_seed,
            deadline: None,
            shrink_budget: 300,
            threads: 1,
            keep_going: false,
            shard: Shard::WHOLE,
            check_determinism: false,
            case_wall_limit: Duration::from_secs(60),
            coverage: false,
        }
    }
}

/// A failure a hunt found.
pub struct Finding {
    pub token: Token,
    /// The case's index in the whole case space.
    pub index: u64,
    pub original: Outcome,
    pub shrunk: Shrunk,
}

impl Finding {
    /// The invariant that failed first.
    pub fn invariant(&self) -> &str {
        self.original.violations.first().map_or("", |v| v.invariant.as_str())
    }
}

/// The outcome of a hunt in one family.
pub struct HuntReport {
    pub family: &'static Family,
    pub cases: u64,
    /// Cases with at least one violation (each failure counted, shrunk or not).
    pub failed: u64,
    pub virtual_ms: u64,
    pub wall: Duration,
    /// Sorted by case index; with `keep_going`, one per distinct invariant.
    pub findings: Vec<Finding>,
    /// The cells the cases hit (empty unless `HuntConfig::coverage`).
    pub coverage: Coverage,
}

/// Progress callbacks, called on the coordinating thread.
pub trait Progress {
    fn case_done(&mut self, cases: u64, failed: u64, outcome: &Outcome);
    fn shrinking(&mut self, token: &Token);
}

/// No progress output.
pub struct Quiet;

impl Progress for Quiet {
    fn case_done(&mut self, _: u64, _: u64, _: &Outcome) {}
    fn shrinking(&mut self, _: &Token) {}
}

enum Message {
    Started { worker: usize, token: Token },
    Done { worker: usize, index: u64, outcome: Outcome, cells: Vec<Cell> },
    Shrinking(Token),
    Found(Box<Finding>),
}

/// Shared between the coordinator and the workers.
struct Pool {
    config: HuntConfig,
    next: AtomicU64,
    /// Cases with an index at or above this are not started (a failure was found below it).
    stop_at: AtomicU64,
    /// Invariants already shrunk (with `keep_going`).
    seen: Mutex<BTreeSet<String>>,
    started: std::time::Instant,
}

/// Run cases until one fails, the case budget is spent, or time is up.
pub fn hunt(config: &HuntConfig, progress: &mut dyn Progress) -> Result<HuntReport, String> {
    Token::new(config.family, &config.bugs, 0)?;
    #[allow(clippy::disallowed_methods)] // the hunt's own wall time; nothing recorded
    let started = std::time::Instant::now();
    let pool = Arc::new(Pool {
        config: config.clone(),
        next: AtomicU64::new(0),
        stop_at: AtomicU64::new(u64::MAX),
        seen: Mutex::new(BTreeSet::new()),
        started,
    });
    let (sender, receiver) = mpsc::channel();
    let mut workers = Vec::new();
    for worker in 0..config.threads.max(1) {
        let (pool, sender) = (pool.clone(), sender.clone());
        // Worker threads each run whole simulations; no thread ever enters a simulation's hosts.
        let spawned = std::thread::Builder::new()
            .name(format!("hunt-{worker}"))
            .spawn(move || work(&pool, worker, &sender))
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        workers.push(spawned);
    }
    drop(sender);
    let mut report = HuntReport {
        family: config.family,
        cases: 0,
        failed: 0,
        virtual_ms: 0,
        wall: Duration::ZERO,
        findings: Vec::new(),
        coverage: Coverage::default(),
    };
    coordinate(&pool, &receiver, &mut report, progress);
    for worker in workers {
        worker.join().map_err(|_| "a worker thread panicked".to_string())?;
    }
    report.findings.sort_by_key(|f| f.index);
    if !config.keep_going {
        report.findings.truncate(1);
    }
    report.wall = started.elapsed();
    Ok(report)
}

/// Collect results; a case that runs past the wall limit is a runaway: report it and exit,
/// since a simulation stuck inside one step cannot be interrupted.
fn coordinate(pool: &Pool, receiver: &mpsc::Receiver<Message>, report: &mut HuntReport, progress: &mut dyn Progress) {
    let mut running: Vec<Option<(Token, Duration)>> = vec![None; pool.config.threads.max(1)];
    loop {
        match receiver.recv_timeout(Duration::from_millis(500)) {
            Ok(Message::Started { worker, token }) => running[worker] = Some((token, pool.started.elapsed())),
            Ok(Message::Done { worker, index, outcome, cells }) => {
                if let (true, Some((token, _))) = (pool.config.coverage, running[worker].take()) {
                    report.coverage.add_named_case(index, &token.to_string(), cells);
                }
                running[worker] = None;
                report.cases += 1;
                report.failed += u64::from(outcome.failed());
                report.virtual_ms += outcome.stats.virtual_ms;
                progress.case_done(report.cases, report.failed, &outcome);
            }
            Ok(Message::Shrinking(token)) => progress.shrinking(&token),
            Ok(Message::Found(finding)) => report.findings.push(*finding),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        let now = pool.started.elapsed();
        let runaway = running.iter().flatten().find(|(_, since)| now - *since > pool.config.case_wall_limit);
        if let Some((token, _)) = runaway {
            println!("watchdog: case {token} ran past {:?} of wall time (a runaway simulation)", pool.config.case_wall_limit);
            println!("token: {token}");
            println!("replay: just replay {token}");
            std::process::exit(1);
        }
    }
}

fn work(pool: &Pool, worker: usize, sender: &mpsc::Sender<Message>) {
    let config = &pool.config;
    loop {
        let k = pool.next.fetch_add(1, Ordering::SeqCst);
        let out_of_time = config.deadline.is_some_and(|d| pool.started.elapsed() >= d);
        if k >= config.cases || k >= pool.stop_at.load(Ordering::SeqCst) || out_of_time {
            return;
        }
        let index = config.shard.case_index(k);
        let token = Token::new(config.family, &config.bugs, case_seed(config.base_seed, index))
            .expect("validated before the workers started");
        let _ = sender.send(Message::Started { worker, token: token.clone() });
        let tree = generate(&token);
        let options = RunOptions { wall_limit: config.case_wall_limit / 2 };
        let scenario = tree.current();
        let mut outcome = run_with(&scenario, options);
        if config.check_determinism {
            let again = run_with(&scenario, options);
            outcome.violations.extend(divergence(&outcome.trace, &again.trace));
        }
        let cells = if config.coverage {
            // The run's cells, then its oracles' verdicts (counted by checking the trace again).
            let mut cells = (scenario.family().observe)(&outcome.trace);
            cells.extend(crate::verdicts::counting(|| crate::runner::check(&scenario, &outcome.trace)).1);
            cells
        } else {
            Vec::new()
        };
        let _ = sender.send(Message::Done { worker, index, outcome: summary_of(&outcome), cells });
        if !outcome.failed() || !claim(pool, k, &outcome) {
            continue;
        }
        let _ = sender.send(Message::Shrinking(token.clone()));
        let shrunk = shrink(tree, outcome.clone(), config.shrink_budget, |_, _| {});
        let finding = Finding { token, index, original: outcome, shrunk };
        let _ = sender.send(Message::Found(Box::new(finding)));
    }
}

/// Whether this failure is worth shrinking: the first at its index (stop mode), or the first of
/// its invariant (keep-going mode).
fn claim(pool: &Pool, k: u64, outcome: &Outcome) -> bool {
    if !pool.config.keep_going {
        pool.stop_at.fetch_min(k, Ordering::SeqCst);
        return true;
    }
    let invariant = outcome.violations[0].invariant.clone();
    pool.seen.lock().unwrap_or_else(|e| e.into_inner()).insert(invariant)
}

/// What the coordinator needs of an outcome (traces stay on the worker).
fn summary_of(outcome: &Outcome) -> Outcome {
    Outcome { trace: Trace::default(), violations: outcome.violations.clone(), stats: outcome.stats }
}

/// The first event where two runs of one scenario differ, as a violation.
pub fn divergence(first: &Trace, second: &Trace) -> Option<Violation> {
    if first.hash() == second.hash() {
        return None;
    }
    let index = (0..first.events.len().max(second.events.len()))
        .find(|&i| first.events.get(i) != second.events.get(i))
        .unwrap_or(0);
    let line = |trace: &Trace| trace.events.get(index).map_or("(end of trace)".to_string(), |e| e.line());
    Some(Violation {
        invariant: "determinism".to_string(),
        at_ms: first.events.get(index).map_or(0, |e| e.at_ms),
        event_index: index,
        detail: format!("two runs diverge at event #{index}: `{}` vs `{}`", line(first), line(second)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceEvent;

    #[test]
    fn shards_partition_the_case_space() {
        let shard = Shard::parse("2/4").unwrap();
        assert_eq!((0..3).map(|k| shard.case_index(k)).collect::<Vec<_>>(), [2, 6, 10]);
        for bad in ["4/4", "1", "a/b", "0/0"] {
            assert!(Shard::parse(bad).unwrap_err().contains("i/n"), "{bad}");
        }
    }

    #[test]
    fn divergence_names_the_first_differing_event() {
        let event = |at_ms| TraceEvent { at_ms, host: "bridge".into(), kind: "x".into(), fields: vec![] };
        let first = Trace { events: vec![event(1), event(2)] };
        let mut second = first.clone();
        assert_eq!(divergence(&first, &second), None);
        second.events[1].at_ms = 3;
        let found = divergence(&first, &second).unwrap();
        assert_eq!((found.invariant.as_str(), found.event_index), ("determinism", 1));
    }

    #[test]
    fn parallel_hunts_report_the_same_first_failure_as_sequential_ones() {
        let bugs = ["no_closed_out_filter".to_string()];
        let mut config = HuntConfig::new(&crate::relay::RELAY, &bugs, 64, 9);
        config.shrink_budget = 0;
        let sequential = hunt(&config, &mut Quiet).unwrap();
        config.threads = 3;
        let parallel = hunt(&config, &mut Quiet).unwrap();
        let index = |r: &HuntReport| r.findings.first().map(|f| f.index);
        assert!(index(&sequential).is_some());
        assert_eq!(index(&sequential), index(&parallel));
    }
}
