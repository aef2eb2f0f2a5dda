//! Generation, shrinking and the hunt. A case is a seed: the family's proptest strategy draws
//! the scenario from a ChaCha RNG seeded with it, so the same token always regenerates the same
//! scenario and shrinks along the same path to the same minimal one.

use bridge_under_test::rng::{mix, SimRng};
use proptest::strategy::{BoxedStrategy, Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::runner::run;
use crate::scenario::{Family, FamilyScenario, Scenario};
use crate::token::Token;
use crate::trace::Outcome;

/// The strategy for one case of `token`'s family and switches.
pub fn strategy(token: &Token) -> BoxedStrategy<Scenario> {
    FamilyScenario::strategy(token.family, &token.bugs, token.seed)
}

/// The value tree of a token's case: its current value is the scenario; it can shrink.
pub fn generate(token: &Token) -> Box<dyn ValueTree<Value = Scenario>> {
    let mut rng = SimRng::new(token.seed);
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let config = Config { failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, rng);
    let tree = strategy(token).new_tree(&mut runner).expect("case strategies never reject");
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

/// What to hunt for.
#[derive(Debug, Clone)]
pub struct HuntConfig {
    pub family: Family,
    pub bugs: Vec<String>,
    pub cases: u64,
    pub base_seed: u64,
    /// Stop after this many seconds of wall time, if set.
    pub seconds: Option<u64>,
    /// Runs allowed for shrinking a failure.
    pub shrink_budget: usize,
}

/// The first failure a hunt found.
pub struct Finding {
    pub token: Token,
    /// Cases run up to and including the failing one.
    pub cases: u64,
    pub original: Outcome,
    pub shrunk: Shrunk,
}

/// The outcome of a hunt.
pub struct HuntReport {
    pub cases: u64,
    pub virtual_ms: u64,
    pub finding: Option<Finding>,
}

/// Progress callbacks, for the CLI.
pub trait Progress {
    fn case_done(&mut self, cases: u64, outcome: &Outcome);
    fn shrinking(&mut self, runs: usize, scenario: &Scenario);
}

/// No progress output.
pub struct Quiet;

impl Progress for Quiet {
    fn case_done(&mut self, _: u64, _: &Outcome) {}
    fn shrinking(&mut self, _: usize, _: &Scenario) {}
}

/// Run cases until one fails, the case budget is spent, or time is up.
pub fn hunt(config: &HuntConfig, progress: &mut dyn Progress) -> Result<HuntReport, String> {
    #[allow(clippy::disallowed_methods)] // bounds the hunt's wall time; nothing recorded
    let started = std::time::Instant::now();
    let mut report = HuntReport { cases: 0, virtual_ms: 0, finding: None };
    for index in 0..config.cases {
        if config.seconds.is_some_and(|s| started.elapsed().as_secs() >= s) {
            break;
        }
        let token = Token::new(config.family, &config.bugs, case_seed(config.base_seed, index))?;
        let tree = generate(&token);
        let outcome = run(&tree.current());
        report.cases += 1;
        report.virtual_ms += outcome.stats.virtual_ms;
        progress.case_done(report.cases, &outcome);
        if outcome.failed() {
            let shrunk = shrink(tree, outcome.clone(), config.shrink_budget, |runs, scenario| {
                progress.shrinking(runs, scenario)
            });
            report.finding = Some(Finding { token, cases: report.cases, original: outcome, shrunk });
            break;
        }
    }
    Ok(report)
}
