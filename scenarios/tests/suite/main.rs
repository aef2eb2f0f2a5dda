//! The test suite, one integration binary: scripted scenarios with trace snapshots, generated
//! runs, the regression suite (every bug switch is found), determinism, committed regressions.

mod channel;
mod committed;
mod daemon;
mod daemon_lifecycle;
mod determinism;
mod generated;
mod regressions;
mod scripted;

/// Cases for generated runs: `PROPTEST_CASES` raises them.
pub fn cases(default: u64) -> u64 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
