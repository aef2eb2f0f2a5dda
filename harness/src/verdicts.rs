//! Excuse accounting (ORACLES.md §8): every oracle counts, per run, the verdicts it made — held
//! (judged, and the system passed), excused (not judged, by the mechanism the excuse names) and
//! failed — so an oracle that excuses most of what it sees shows as a blind spot in
//! `hunt --coverage` instead of hiding behind a clean hunt.
//!
//! A checker stays a pure function of the trace: it calls [`held`] or [`excused`] where it
//! decides, and the family's runner ([`run`]) names the oracle and counts its violations as
//! failed. Outside [`counting`] (a checker's unit test, say) the calls do nothing.
//!
//! Every oracle that ran is listed, judged or not: [`run`] leaves a [`RAN`] marker for each, so an
//! oracle that judged nothing shows as `never judged` (a blind spot of the generator, or a
//! promise its bridge does not make) rather than vanishing from the table like one that counts
//! nothing at all.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::coverage::{Cell, Coverage};
use crate::trace::Violation;

/// The coverage table the verdicts are counted in: one row per oracle.
pub const TABLE: &str = "verdicts";
/// The column of a verdict the system passed.
pub const HELD: &str = "held";
/// The column of a verdict the system failed.
pub const FAILED: &str = "failed";
/// The column of the marker an oracle leaves once per case it ran in: no verdict, only its
/// presence, so that an oracle that judged nothing still has a row.
pub const RAN: &str = "ran";
/// The prefix of an excused verdict's column: `excused: <mechanism>`.
const EXCUSED: &str = "excused: ";
/// How the table flags an oracle that ran and recorded no verdict.
pub const NEVER_JUDGED: &str = "never judged";
/// An oracle that excuses more than this share of its verdicts is flagged in the report.
pub const BLIND_SHARE: f64 = 0.25;

/// `(oracle, column)` → count, for the run being checked.
type Counts = BTreeMap<(&'static str, &'static str), u64>;

struct Ledger {
    oracle: &'static str,
    counts: Counts,
}

thread_local! {
    static LEDGER: RefCell<Option<Ledger>> = const { RefCell::new(None) };
}

fn add(column: &'static str, n: u64) {
    LEDGER.with(|ledger| {
        if let Some(ledger) = ledger.borrow_mut().as_mut() {
            *ledger.counts.entry((ledger.oracle, column)).or_default() += n;
        }
    });
}

/// The oracle being run judged one case of its property, and the system held it.
pub fn held() {
    add(HELD, 1);
}

/// The oracle being run judged `n` cases of its property at once, and the system held each (a
/// checker that finds only the wrong ones among many, the replies paired with a request say).
pub fn held_n(n: usize) {
    add(HELD, n as u64);
}

/// The oracle being run judged one case of its property: `violation` is what it found wrong,
/// if anything (counted as failed once it is reported); none counts as held. Returns it.
pub fn judging<T>(violation: Option<T>) -> Option<T> {
    if violation.is_none() {
        held();
    }
    violation
}

/// The oracle being run did not judge one case of its property: `mechanism` says which
/// observed effect of which fault forced the outcome (a reset of this connection, this reply
/// swallowed, this process killed). A `&'static str`, so a mechanism is a fixed phrase, never a
/// detail of one run.
pub fn excused(mechanism: &'static str) {
    add(mechanism, 1);
}

/// Run named checkers over `facts`: each one's verdicts are counted under its name, its
/// violations as failed.
pub fn run<F, C: Fn(&F) -> Vec<Violation>>(checkers: &[(&'static str, C)], facts: &F) -> Vec<Violation> {
    let mut found = Vec::new();
    for (name, checker) in checkers {
        LEDGER.with(|ledger| {
            if let Some(ledger) = ledger.borrow_mut().as_mut() {
                ledger.oracle = name;
            }
        });
        let violations = checker(facts);
        add(RAN, 1);
        add(FAILED, violations.len() as u64);
        found.extend(violations);
    }
    found
}

/// Run `check` with the ledger open: its result and the verdicts counted, as cells of [`TABLE`].
pub fn counting<R>(check: impl FnOnce() -> R) -> (R, Vec<Cell>) {
    LEDGER.with(|ledger| *ledger.borrow_mut() = Some(Ledger { oracle: "", counts: Counts::new() }));
    let result = check();
    let counts = LEDGER.with(|ledger| ledger.borrow_mut().take()).map(|l| l.counts).unwrap_or_default();
    let mut cells = Vec::new();
    for ((oracle, column), n) in counts {
        let column = if [HELD, FAILED, RAN].contains(&column) { column.to_string() } else { format!("{EXCUSED}{column}") };
        for _ in 0..n {
            cells.push(Cell::new(TABLE, oracle, column.clone()));
        }
    }
    (result, cells)
}

/// One oracle's totals over the cases counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    pub held: u64,
    pub failed: u64,
    /// Excused verdicts by mechanism.
    pub excused: BTreeMap<String, u64>,
}

impl Totals {
    pub fn excused_total(&self) -> u64 {
        self.excused.values().sum()
    }

    pub fn seen(&self) -> u64 {
        self.held + self.failed + self.excused_total()
    }

    /// The share of its verdicts the oracle excused (0 when it saw nothing).
    pub fn excused_share(&self) -> f64 {
        self.excused_total() as f64 / self.seen().max(1) as f64
    }
}

/// Every oracle's totals in a coverage report: each one that ran, with zeros if it judged
/// nothing (its [`RAN`] markers are no verdicts).
pub fn totals(coverage: &Coverage) -> BTreeMap<String, Totals> {
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    for (cell, n) in coverage.cells(TABLE) {
        let totals = out.entry(cell.row.clone()).or_default();
        match cell.col.as_str() {
            RAN => {}
            HELD => totals.held += n,
            FAILED => totals.failed += n,
            other => *totals.excused.entry(other.trim_start_matches(EXCUSED).to_string()).or_default() += n,
        }
    }
    out
}

/// The excuse-accounting table: per oracle, per 1 000 cases, its verdicts held, failed and
/// excused, the excused share (flagged `!` above [`BLIND_SHARE`]) and each mechanism; an oracle
/// that ran and judged nothing is flagged `never judged`.
pub fn render(coverage: &Coverage) -> String {
    let mut out = String::new();
    let scale = 1000.0 / coverage.cases.max(1) as f64;
    let totals = totals(coverage);
    let width = totals.keys().map(String::len).max().unwrap_or(6).max(6);
    let _ = writeln!(out, "verdicts: per oracle, per 1 000 cases ({} cases run)", coverage.cases);
    let _ = writeln!(out, "  {:<width$} {:>8} {:>8} {:>8} {:>8}  excused by mechanism", "oracle", "held", "failed", "excused", "share");
    for (oracle, t) in &totals {
        if t.seen() == 0 {
            let _ = writeln!(out, "  {oracle:<width$} {:>8} {:>8} {:>8} {:>8}  {NEVER_JUDGED}", 0, 0, 0, "-");
            continue;
        }
        let flag = if t.excused_share() > BLIND_SHARE { "!" } else { " " };
        let mechanisms: Vec<String> = t.excused.iter().map(|(m, n)| format!("{m} {:.0}", *n as f64 * scale)).collect();
        let _ = writeln!(
            out,
            "  {oracle:<width$} {:>8.0} {:>8.0} {:>8.0} {:>7.1}%{flag} {}",
            t.held as f64 * scale,
            t.failed as f64 * scale,
            t.excused_total() as f64 * scale,
            100.0 * t.excused_share(),
            mechanisms.join("; ")
        );
    }
    // One case to replay per excuse, so a mechanism's label can be read against a trace.
    let examples: Vec<String> = coverage
        .cells(TABLE)
        .filter(|(cell, _)| cell.col.starts_with(EXCUSED))
        .filter_map(|(cell, _)| coverage.example(cell).map(|token| format!("  {} / {}: {token}", cell.row, cell.col.trim_start_matches(EXCUSED))))
        .collect();
    if !examples.is_empty() {
        let _ = writeln!(out, "verdicts: the first case each excuse was made in (replay it to read the mechanism)");
        for line in examples {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// For a checker's unit test: run `checker` as the oracle `name` over `facts` with the ledger
/// open. Its violations, and the columns of the verdicts it counted (the [`RAN`] marker is none).
#[cfg(test)]
pub(crate) fn judged<F>(name: &'static str, checker: impl Fn(&F) -> Vec<Violation>, facts: &F) -> (Vec<Violation>, Vec<String>) {
    let (found, cells) = counting(|| run(&[(name, checker)], facts));
    (found, cells.into_iter().map(|cell| cell.col).filter(|col| col != RAN).collect())
}

/// For each family's test: hunt `cases` generated cases of `family` (every switch off, coverage
/// on) and assert that each of its `checkers` ran and recorded at least one verdict, but for
/// those `never` names with the reason it judges nothing by default. Those must record none (a
/// stale entry hides a blind spot as well as a missing one).
#[cfg(test)]
pub(crate) fn assert_every_oracle_judged<C>(
    family: &'static crate::family::Family,
    checkers: &[(&'static str, C)],
    never: &[(&str, &str)],
    cases: u64,
    base_seed: u64,
) {
    let mut config = crate::hunt::HuntConfig::new(family, &[], cases, base_seed);
    (config.coverage, config.keep_going, config.shrink_budget) = (true, true, 0);
    let report = crate::hunt::hunt(&config, &mut crate::hunt::Quiet).expect("no switches");
    let totals = totals(&report.coverage);
    let mut wrong = Vec::new();
    for (name, _) in checkers {
        let reason = never.iter().find(|(oracle, _)| oracle == name).map(|(_, reason)| *reason);
        match (totals.get(*name).map(Totals::seen), reason) {
            (None, _) => wrong.push(format!("{name} never ran")),
            (Some(0), None) => wrong.push(format!("{name} judged nothing in {cases} cases")),
            (Some(seen), Some(reason)) if seen > 0 => wrong.push(format!("{name} recorded {seen} verdicts, yet is listed as never judged: {reason}")),
            _ => {}
        }
    }
    for (oracle, _) in never.iter().filter(|(oracle, _)| !checkers.iter().any(|(name, _)| name == oracle)) {
        wrong.push(format!("{oracle} is listed as never judged but is no checker of {}", family.name));
    }
    assert!(wrong.is_empty(), "{}:\n{}\n{}", family.name, wrong.join("\n"), render(&report.coverage));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge_two(facts: &u64) -> Vec<Violation> {
        held();
        excused("this reply swallowed");
        if *facts > 1 {
            vec![Violation { invariant: "two".into(), at_ms: 0, event_index: 0, detail: String::new() }]
        } else {
            Vec::new()
        }
    }

    fn judge_one(_: &u64) -> Vec<Violation> {
        excused("this connection reset");
        excused("this connection reset");
        Vec::new()
    }

    type Checker = fn(&u64) -> Vec<Violation>;
    const CHECKERS: &[(&str, Checker)] = &[("two", judge_two), ("one", judge_one)];

    #[test]
    fn verdicts_are_counted_per_oracle_and_mechanism() {
        let (found, cells) = counting(|| run(CHECKERS, &2));
        assert_eq!(found.len(), 1);
        let mut coverage = Coverage::default();
        coverage.add_case(cells);
        let (_, again) = counting(|| run(CHECKERS, &1));
        coverage.add_case(again);
        let totals = totals(&coverage);
        assert_eq!(totals["two"], Totals { held: 2, failed: 1, excused: [("this reply swallowed".to_string(), 2)].into() });
        assert_eq!(totals["one"].excused_total(), 4);
        assert_eq!(totals["one"].excused_share(), 1.0);
        let text = render(&coverage);
        assert!(text.contains("100.0%!"), "the blind oracle is flagged: {text}");
        assert!(text.contains("this connection reset 2000"), "{text}");
        assert!(text.contains(" 40.0%!"), "two: 2 of 5 excused, flagged: {text}");
        assert!(!text.contains("the first case each excuse"), "unnamed cases give no examples: {text}");
        let mut named = Coverage::default();
        named.add_named_case(4, "v1.relay.none.0000000000000004", counting(|| run(CHECKERS, &1)).1);
        let text = render(&named);
        assert!(text.contains("  one / this connection reset: v1.relay.none.0000000000000004"), "{text}");
        assert!(!text.contains("held: v1"), "only excuses get examples: {text}");
        let quarter = Totals { held: 3, failed: 0, excused: [("this reply swallowed".to_string(), 1)].into() };
        assert!(quarter.excused_share() <= BLIND_SHARE, "a quarter is not flagged");
    }

    fn judge_nothing(_: &u64) -> Vec<Violation> {
        Vec::new()
    }

    fn judge_many(facts: &u64) -> Vec<Violation> {
        held_n(*facts as usize);
        Vec::new()
    }

    #[test]
    fn an_oracle_that_ran_and_judged_nothing_is_listed() {
        const RUNS: &[(&str, Checker)] = &[("silent", judge_nothing), ("many", judge_many), ("two", judge_two)];
        let mut coverage = Coverage::default();
        for facts in [3, 1] {
            coverage.add_case(counting(|| run(RUNS, &facts)).1);
        }
        assert_eq!(coverage.count(TABLE, "silent", RAN), 2, "the marker is counted once per case");
        let totals = totals(&coverage);
        assert_eq!(totals["silent"], Totals::default(), "the marker is no verdict");
        assert_eq!(totals["many"], Totals { held: 4, ..Totals::default() });
        assert_eq!(totals["two"], Totals { held: 2, failed: 1, excused: [("this reply swallowed".to_string(), 2)].into() });
        let text = render(&coverage);
        let line = |oracle: &str| text.lines().find(|l| l.trim_start().starts_with(oracle)).unwrap_or_default().to_string();
        assert_eq!(line("silent").split_whitespace().collect::<Vec<_>>(), ["silent", "0", "0", "0", "-", "never", "judged"], "{text}");
        assert!(!line("many").contains(NEVER_JUDGED), "{text}");
        assert!(line("many").contains(" 2000 "), "4 held in 2 cases: {text}");
        assert!(!text.contains("ran"), "the marker is no column: {text}");
    }

    #[test]
    fn an_oracle_that_did_not_run_is_not_listed() {
        let (_, cells) = counting(|| run(&CHECKERS[..1], &1));
        let mut coverage = Coverage::default();
        coverage.add_case(cells);
        assert_eq!(totals(&coverage).keys().collect::<Vec<_>>(), ["two"]);
    }

    #[test]
    fn outside_counting_nothing_is_recorded() {
        held();
        excused("this connection reset");
        let (_, cells) = counting(|| ());
        assert!(cells.is_empty());
        assert_eq!(run(CHECKERS, &2).len(), 1, "the checkers still run");
    }
}
