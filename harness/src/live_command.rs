//! `harness live`: the relay family's scenarios against a real stdio bridge process.

use std::process::ExitCode;

use bridge_under_test::relay::relayer::Transport;
use harness::relay::profile::Profile;
use harness::live::speed::Speed;
use harness::live::{self, Bridge, Case, Judged};
use harness::schema::McpSchema;
use harness::trace::Violation;
use harness::view;
use proptest::strategy::ValueTree;

/// How many of the bridge's last stderr lines a report prints (a Python traceback's cause is
/// its last line, its origin a dozen lines up).
const STDERR_LINES: usize = 20;

#[derive(clap::Args)]
pub struct LiveArgs {
    /// The bridge command, run with `sh -c`; `{url}` is replaced by the mock server's URL (also
    /// in the environment as MCP_SERVER_URL).
    #[arg(long)]
    bridge: String,
    /// The transport the mock server speaks: streamable-http, sse or relayer (default: the
    /// profile's first, else streamable_http).
    #[arg(long)]
    transport: Option<String>,
    /// A bridge profile (JSON): its deadline, its documented promises.
    #[arg(long)]
    profile: Option<String>,
    /// How many cases to run.
    #[arg(long, default_value_t = 20)]
    cases: u64,
    /// Base seed (decimal, or hex with 0x); a fresh one is drawn and printed when absent.
    #[arg(long)]
    seed: Option<String>,
    /// Cases run at once, each on its own ports.
    #[arg(long, default_value_t = 1)]
    concurrency: u64,
    /// Rerun one case instead of hunting: a live token, or a case file `--save` wrote.
    #[arg(long)]
    replay: Option<String>,
    /// With --replay: shrink the case once its runs are done (at most --shrink-budget runs).
    #[arg(long, requires = "replay")]
    shrink: bool,
    /// The oracle shrinking keeps broken (default: the first one the case broke). A replay counts
    /// the runs that broke it (as `--matching` says) and shows and writes the last of them.
    #[arg(long)]
    oracle: Option<String>,
    /// With --shrink: a run keeps the oracle broken only by a verdict whose text contains this
    /// (an oracle broken another way is another finding: "never initialized" is M5's
    /// `sessions_initialized`, "a second time" M6's). Reproduction rates count the same way.
    #[arg(long, requires = "oracle")]
    matching: Option<String>,
    /// Write the case (shrunk, when it was) as a case file `--replay FILE` runs again; in a hunt,
    /// the first failure's.
    #[arg(long)]
    save: Option<std::path::PathBuf>,
    /// How many times a failure (or --replay) is rerun to measure how often it reproduces (0 in
    /// a hunt: not rerun, for a long hunt whose failures are replayed afterwards; reruns are one
    /// at a time, and hold up the hunt).
    #[arg(long, default_value_t = 3)]
    runs: u64,
    /// Shrinking re-runs at most this many candidates (0: a hunt does not shrink).
    #[arg(long, default_value_t = 12)]
    shrink_budget: usize,
    /// Keep hunting after a failure.
    #[arg(long)]
    keep_going: bool,
    /// Write the failing (or replayed) case's trace as JSON Lines here.
    #[arg(long)]
    jsonl: Option<std::path::PathBuf>,
    /// Draw the failing (or replayed) case's trace here.
    #[arg(long)]
    html: Option<std::path::PathBuf>,
    /// In a hunt, append one JSON line per case here as it ends (its index, token, seconds, and
    /// each violation's oracle, time and detail), so a long hunt's verdicts survive an
    /// interruption and can be sorted into classes (docs/findings/classify.py).
    #[arg(long, conflicts_with = "replay")]
    report: Option<std::path::PathBuf>,
    /// Run the bridge's clock K times faster than the wall clock (libfaketime), with the mock
    /// server, the client and the fault plan scaled to match (default: the profile's, else 1).
    #[arg(long)]
    speed: Option<u32>,
}

pub fn live_command(args: LiveArgs, parse_seed: fn(&str) -> Result<u64, String>, fresh_seed: fn() -> u64) -> Result<ExitCode, String> {
    let profile = match &args.profile {
        Some(path) => Profile::load(path)?,
        None => Profile::unknown(),
    };
    let transport = match &args.transport {
        Some(name) => name.parse()?,
        None => profile.transports.first().copied().unwrap_or(Transport::StreamableHttp),
    };
    if !profile.transports.is_empty() && !profile.transports.contains(&transport) {
        let spoken: Vec<&str> = profile.transports.iter().map(|t| t.name()).collect();
        return Err(format!("profile {} speaks {}, not {transport}", profile.name, spoken.join(", ")));
    }
    if args.concurrency == 0 || (args.runs == 0 && args.replay.is_some()) {
        return Err("--concurrency (and --runs with --replay) must be at least 1".to_string());
    }
    let speed = Speed::new(args.speed.unwrap_or(profile.speed))?;
    if speed != Speed::REAL {
        live::speed::faketime()?;
    }
    // The release the command runs, read from its install: the profile may describe another.
    let installed = live::package::installed(&args.bridge);
    if let Some(note) = installed.as_deref().and_then(|release| live::package::mismatch(&profile.name, release)) {
        println!("{note}");
    }
    let name = installed.unwrap_or_else(|| profile.name.clone());
    let bridge = Bridge { command: args.bridge.clone(), profile, transport, speed };
    let schema = McpSchema::new();
    if let Some(input) = &args.replay {
        return replay(&read_case(input)?, &bridge, &args, &schema);
    }
    let base = match &args.seed {
        Some(text) => parse_seed(text)?,
        None => fresh_seed(),
    };
    println!(
        "live: bridge `{}` ({name}, profile {}), transport {transport}, speed {speed}, base seed {base:#018x}, {} cases, {} at once",
        bridge.command, bridge.profile.name, args.cases, args.concurrency
    );
    check_startup(base, &bridge, &schema)?;
    let mut bar = crate::progress::Bar::new(&name, args.cases, false);
    #[allow(clippy::disallowed_methods)] // the run's own wall time; nothing recorded
    let started = std::time::Instant::now();
    let mut tally = Tally::default();
    let mut failed = Vec::new();
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut case_report = match &args.report {
        Some(path) => Some(CaseReport::create(path)?),
        None => None,
    };
    run_rolling(base, &args, &bridge, |done| {
        if let Some(case_report) = case_report.as_mut() {
            case_report.write(&done);
        }
        tally.cases += 1;
        tally.case_ms += done.judged.wall_ms;
        tally.bridge_ms += done.judged.trace.events.last().map_or(0, |e| e.at_ms);
        let verdict = if done.judged.violations.is_empty() { "ok".to_string() } else { format!("[{}]", oracles(&done.judged.violations).join(", ")) };
        // Every case on a log; on a terminal, the bar and the failures.
        if !done.judged.violations.is_empty() || !terminal {
            bar.line(&format!("case {:>4} {} {:>6.1} s {verdict}", done.index, done.case.token(), done.judged.wall_ms as f64 / 1000.0));
        }
        if !done.judged.violations.is_empty() {
            tally.failed += 1;
            failed.push(done);
        }
        bar.tick(tally.cases, tally.failed);
    })?;
    bar.finish();
    if let Some(case_report) = case_report {
        case_report.finish()?;
    }
    let wall_s = started.elapsed().as_secs_f64().max(1e-9);
    failed.sort_by_key(|done| done.index);
    if !args.keep_going {
        failed.truncate(1);
    }
    for (index, done) in failed.into_iter().enumerate() {
        report(&done.case, done.judged, &bridge, &args, &schema, index == 0)?;
    }
    print_table(&name, &bridge, &tally, wall_s);
    let per_slot = if tally.case_ms == 0 { 0.0 } else { tally.cases as f64 * 1000.0 / tally.case_ms as f64 };
    println!(
        "live: {} cases, {} with violations, {:.1} s of cases, {per_slot:.2} cases/s per slot",
        tally.cases,
        tally.failed,
        tally.case_ms as f64 / 1000.0
    );
    Ok(if tally.failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// What a live run counted.
#[derive(Default)]
struct Tally {
    cases: u64,
    failed: u64,
    /// Wall time of the cases, summed over slots.
    case_ms: u64,
    /// The bridge's time of the cases (the trace's clock), summed.
    bridge_ms: u64,
}

/// Run the start-up check ([`live::startup_case`]) before a hunt: a bridge that exits before
/// answering the handshake, with no fault injected, is an error to fix before hunting (every
/// case would only report it again), shown with its exit and stderr.
fn check_startup(base: u64, bridge: &Bridge, schema: &McpSchema) -> Result<(), String> {
    let judged = live::run(&live::startup_case(base), bridge, schema).map_err(|e| e.0)?;
    if !live::failed_to_start(&judged) {
        println!("start-up check: the handshake alone, no faults: {:.1} s, the bridge stayed up", judged.wall_ms as f64 / 1000.0);
        return Ok(());
    }
    print_stderr(&judged);
    let exit = judged.trace.events.iter().find(|e| e.kind == bridge_under_test::events::kind::PROCESS_EXIT);
    let status = exit.map_or_else(String::new, |e| format!(" (exit code {}, at {} ms)", e.text("code"), e.at_ms));
    Err(format!(
        "the bridge exited before answering `initialize`{status} in a run with no faults and stdin open: it does not run here. Its stderr ends with the lines above; check the command `{}` and its install",
        bridge.command
    ))
}

/// The summary table, as `hunt` prints one per family.
fn print_table(name: &str, bridge: &Bridge, tally: &Tally, wall_s: f64) {
    println!("{:<16} {:<16} {:>6} {:>8} {:>10} {:>9} {:>10} {:>12}", "bridge", "transport", "speed", "cases", "violations", "wall s", "cases/s", "bridge:wall");
    println!(
        "{:<16} {:<16} {:>6} {:>8} {:>10} {:>9.1} {:>10.2} {:>11.1}x",
        name,
        bridge.transport.name(),
        bridge.speed.to_string(),
        tally.cases,
        tally.failed,
        wall_s,
        tally.cases as f64 / wall_s,
        tally.bridge_ms as f64 / 1000.0 / wall_s
    );
}

/// A case run and judged.
struct Done {
    index: u64,
    case: Case,
    judged: Judged,
}

/// `--report`: one JSON line per case, written and flushed as the case ends.
struct CaseReport {
    path: std::path::PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    /// The first write that failed; the hunt goes on, and the command fails at its end.
    error: Option<String>,
}

impl CaseReport {
    fn create(path: &std::path::Path) -> Result<Self, String> {
        let file = std::fs::File::create(path).map_err(|e| format!("--report {}: {e}", path.display()))?;
        Ok(Self { path: path.to_path_buf(), file: std::io::BufWriter::new(file), error: None })
    }

    fn write(&mut self, done: &Done) {
        use std::io::Write;
        let violations: Vec<serde_json::Value> = done
            .judged
            .violations
            .iter()
            .map(|v| serde_json::json!({"oracle": v.invariant, "at_ms": v.at_ms, "detail": v.detail}))
            .collect();
        let line = serde_json::json!({
            "index": done.index,
            "token": done.case.token(),
            "wall_s": done.judged.wall_ms as f64 / 1000.0,
            "oracles": oracles(&done.judged.violations),
            "violations": violations,
        });
        let written = writeln!(self.file, "{line}").and_then(|()| self.file.flush());
        if let Err(e) = written {
            self.error.get_or_insert_with(|| format!("--report {}: {e}", self.path.display()));
        }
    }

    fn finish(self) -> Result<(), String> {
        self.error.map_or(Ok(()), Err)
    }
}

/// Run cases `0..args.cases` under `base`, `args.concurrency` at a time, each slot taking the
/// next case as soon as its last one ends; `each` sees every case as it ends. Without
/// `--keep-going`, no case starts after the first failure (those under way finish).
fn run_rolling(base: u64, args: &LiveArgs, bridge: &Bridge, mut each: impl FnMut(Done)) -> Result<(), String> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let (next, stop) = (AtomicU64::new(0), AtomicBool::new(false));
    let (sender, receiver) = std::sync::mpsc::channel::<Result<Done, String>>();
    std::thread::scope(|scope| {
        for _ in 0..args.concurrency.min(args.cases) {
            let (sender, next, stop) = (sender.clone(), &next, &stop);
            scope.spawn(move || {
                let schema = McpSchema::new();
                while !stop.load(Ordering::SeqCst) {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    if index >= args.cases {
                        break;
                    }
                    let case = live::case(base, index);
                    let done = live::run(&case, bridge, &schema).map(|judged| Done { index, case, judged }).map_err(|e| e.0);
                    if sender.send(done).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        let mut error = None;
        for done in receiver {
            match done {
                Ok(done) => {
                    if !done.judged.violations.is_empty() && !args.keep_going {
                        stop.store(true, Ordering::SeqCst);
                    }
                    each(done);
                }
                Err(why) => {
                    stop.store(true, Ordering::SeqCst);
                    error.get_or_insert(why);
                }
            }
        }
        error.map_or(Ok(()), Err)
    })
}

/// A failure: its violations, how often it reproduces, its shrunk form, and the files.
fn report(case: &Case, judged: Judged, bridge: &Bridge, args: &LiveArgs, schema: &McpSchema, save: bool) -> Result<(), String> {
    println!("violation in {}:", case.token());
    print_violations(&judged.violations);
    let invariant = shrink_oracle(args, &judged.violations)?;
    if args.runs > 0 {
        let (reproduced, _) = reproduce(case, bridge, args.runs, &invariant, schema)?;
        println!("reproduced {reproduced} of {} runs", args.runs);
    }
    let kept = shrink_and_measure(case, bridge, args, &invariant, schema)?;
    println!("token: {}", case.token());
    println!("replay: harness live {} --replay {} --runs 10", bridge_flags(bridge, args), case.token());
    if save {
        save_case(kept.as_ref().unwrap_or(case), args)?;
    }
    write_outputs(case, &judged, args)?;
    print_stderr(&judged);
    Ok(())
}

/// What a shrink keeps broken: an oracle, and with `--matching`, a verdict of it that says so.
struct Kept {
    oracle: String,
    matching: Option<String>,
}

impl Kept {
    fn broken_by(&self, violations: &[Violation]) -> bool {
        violations.iter().any(|v| v.invariant == self.oracle && self.matching.as_deref().is_none_or(|text| v.detail.contains(text)))
    }
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.matching {
            Some(text) => write!(f, "{} (a verdict saying {text:?})", self.oracle),
            None => write!(f, "{}", self.oracle),
        }
    }
}

/// What a shrink keeps broken: `--oracle` (and `--matching`), which a run of the case must have
/// broken so, else the first oracle broken.
fn shrink_oracle(args: &LiveArgs, violations: &[Violation]) -> Result<Kept, String> {
    kept_broken(args.oracle.as_deref(), args.matching.as_deref(), violations)
}

fn kept_broken(oracle: Option<&str>, matching: Option<&str>, violations: &[Violation]) -> Result<Kept, String> {
    let broken = oracles(violations);
    let oracle = oracle.map_or_else(|| broken[0].clone(), str::to_string);
    let kept = Kept { oracle, matching: matching.map(str::to_string) };
    if kept.broken_by(violations) {
        return Ok(kept);
    }
    let said = |v: &&Violation| v.invariant == kept.oracle;
    match violations.iter().find(said) {
        Some(other) => Err(format!("--matching {:?}: no verdict of {} says it (one says: {})", kept.matching.as_deref().unwrap_or(""), kept.oracle, other.detail)),
        None => Err(format!("--oracle {}: the case did not break it (it broke {})", kept.oracle, broken.join(", "))),
    }
}

/// Shrink `case` by `invariant` within the budget, print the smaller case and how often it
/// reproduces; the smaller case, when one failed.
fn shrink_and_measure(case: &Case, bridge: &Bridge, args: &LiveArgs, invariant: &Kept, schema: &McpSchema) -> Result<Option<Case>, String> {
    if args.shrink_budget == 0 {
        return Ok(None);
    }
    eprintln!("shrinking by {invariant} (at most {} runs)...", args.shrink_budget);
    let mut tried = 0;
    let shrunk = live::shrink::shrink(case, args.shrink_budget, |candidate| {
        tried += 1;
        let judged = live::run(candidate, bridge, schema).map_err(|e| e.0)?;
        let failed = invariant.broken_by(&judged.violations);
        eprintln!(
            "  shrink run: {} steps, {} faults: {}",
            candidate.scenario.script.steps.len(),
            candidate.scenario.faults.len(),
            if failed { "still fails, kept" } else { "passes" }
        );
        Ok::<_, String>(failed.then_some(judged))
    })?;
    let Some(shrunk) = shrunk else {
        // A saved case offers only its fault entries to drop, so the budget may not be spent.
        println!("shrinking: no smaller case failed in {tried} runs (budget {})", args.shrink_budget);
        return Ok(None);
    };
    let (again, _) = reproduce(&shrunk.case, bridge, args.runs.max(1), invariant, schema)?;
    println!(
        "shrunk in {} runs from {} steps, {} faults to {} steps, {} faults; it reproduces {again} of {} runs:",
        shrunk.runs,
        case.scenario.script.steps.len(),
        case.scenario.faults.len(),
        shrunk.case.scenario.script.steps.len(),
        shrunk.case.scenario.faults.len(),
        args.runs.max(1)
    );
    print_violations(&shrunk.failed.violations);
    println!("--- shrunk case");
    print!("{}", shrunk.case.to_json());
    Ok(Some(shrunk.case))
}

/// The case `--replay` names: a token, or a case file.
fn read_case(input: &str) -> Result<Case, String> {
    if crate::names_a_file(input) || std::path::Path::new(input).is_file() {
        let text = std::fs::read_to_string(input).map_err(|e| format!("cannot read {input}: {e} (--replay takes a live token or a case file)"))?;
        return Case::from_json(&text).map_err(|e| format!("{input}: {e}"));
    }
    let seed = live::parse_token(input)?;
    Ok(Case { seed, scenario: live::generate(seed).current() })
}

fn save_case(case: &Case, args: &LiveArgs) -> Result<(), String> {
    if let Some(path) = &args.save {
        std::fs::write(path, case.to_json()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("saved: {} (run it again with --replay {})", path.display(), path.display());
    }
    Ok(())
}

/// The last lines the bridge wrote on stderr in `judged`'s run (its own account of an exit).
fn print_stderr(judged: &Judged) {
    let stderr = String::from_utf8_lossy(&judged.stderr);
    if !stderr.trim().is_empty() {
        println!("--- bridge stderr (last lines)");
        for line in stderr.lines().rev().take(STDERR_LINES).collect::<Vec<_>>().into_iter().rev() {
            println!("  {line}");
        }
    }
}

/// Rerun `case` `runs` times: how many runs broke `invariant`, and the last run.
fn reproduce(case: &Case, bridge: &Bridge, runs: u64, invariant: &Kept, schema: &McpSchema) -> Result<(u64, Option<Judged>), String> {
    let mut hits = 0;
    let mut last = None;
    for _ in 0..runs {
        let judged = live::run(case, bridge, schema).map_err(|e| e.0)?;
        if invariant.broken_by(&judged.violations) {
            hits += 1;
        }
        last = Some(judged);
    }
    Ok((hits, last))
}

fn replay(case: &Case, bridge: &Bridge, args: &LiveArgs, schema: &McpSchema) -> Result<ExitCode, String> {
    println!("live replay: {}{} against `{}`, speed {}, {} runs", case.token(), if case.scenario == live::generate(case.seed).current() { "" } else { " (a saved case, not the token's own)" }, bridge.command, bridge.speed, args.runs);
    let mut tally: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    let mut failed = 0;
    // The run shown and written: the last that broke `--oracle` (as `--matching` says), else the
    // last that failed, else the last (a failure that reproduces 1 run in 3 is read from its own
    // trace, not from a clean run's, nor from a run that failed another way).
    let wanted = args.oracle.as_ref().map(|oracle| Kept { oracle: oracle.clone(), matching: args.matching.clone() });
    let mut wanted_hits = 0;
    let mut shown: Option<(u64, Judged)> = None;
    // Every run's violations, in order: what the shrink may keep broken.
    let mut broken = Vec::new();
    for run in 1..=args.runs {
        let judged = live::run(case, bridge, schema).map_err(|e| e.0)?;
        let names = oracles(&judged.violations);
        eprintln!("run {run}: {:.1} s, {}", judged.wall_ms as f64 / 1000.0, if names.is_empty() { "ok".to_string() } else { names.join(", ") });
        if !names.is_empty() {
            failed += 1;
            broken.extend(judged.violations.iter().cloned());
        }
        for name in names {
            *tally.entry(name).or_default() += 1;
        }
        wanted_hits += u64::from(wanted.as_ref().is_some_and(|w| w.broken_by(&judged.violations)));
        shown = Some(shown_run(shown, run, judged, wanted.as_ref()));
    }
    println!("failed {failed} of {} runs", args.runs);
    for (name, count) in &tally {
        println!("  {name}: {count} of {} runs", args.runs);
    }
    if let Some(wanted) = &wanted {
        println!("  --oracle {wanted}: {wanted_hits} of {} runs", args.runs);
    }
    let Some((run, judged)) = shown else { return Ok(ExitCode::SUCCESS) };
    let which = match &wanted {
        Some(wanted) if wanted.broken_by(&judged.violations) => format!("run {run}'s trace, the last that broke {wanted}"),
        _ if judged.violations.is_empty() => "the last run's trace".to_string(),
        _ => format!("run {run}'s trace, the last that failed"),
    };
    println!("--- {which} ({} events)", judged.trace.events.len());
    print!("{}", judged.trace.render());
    print_violations(&judged.violations);
    write_outputs(case, &judged, args)?;
    print_stderr(&judged);
    let mut kept = None;
    if args.shrink {
        if broken.is_empty() {
            println!("shrinking: no run failed, nothing to shrink");
        } else {
            let invariant = shrink_oracle(args, &broken)?;
            kept = shrink_and_measure(case, bridge, args, &invariant, schema)?;
        }
    }
    save_case(kept.as_ref().unwrap_or(case), args)?;
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Of a replay's runs, the one to show: the last that broke `wanted` (when given), else the last
/// that failed, else the last.
fn shown_run(kept: Option<(u64, Judged)>, run: u64, judged: Judged, wanted: Option<&Kept>) -> (u64, Judged) {
    let rank = |judged: &Judged| match wanted {
        Some(wanted) if wanted.broken_by(&judged.violations) => 2,
        _ => u8::from(!judged.violations.is_empty()),
    };
    match kept {
        Some(kept) if rank(&judged) < rank(&kept.1) => kept,
        _ => (run, judged),
    }
}

/// The flags that select `bridge` again: command, profile, transport, speed.
fn bridge_flags(bridge: &Bridge, args: &LiveArgs) -> String {
    let mut flags = format!("--bridge {:?}", bridge.command);
    if let Some(profile) = &args.profile {
        flags.push_str(&format!(" --profile {profile}"));
    }
    flags.push_str(&format!(" --transport {} --speed {}", bridge.transport, bridge.speed.factor()));
    flags
}

/// The oracles `violations` broke, each once, in the order they were first broken.
fn oracles(violations: &[Violation]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for violation in violations {
        if !names.contains(&violation.invariant) {
            names.push(violation.invariant.clone());
        }
    }
    names
}

fn print_violations(violations: &[Violation]) {
    for violation in violations {
        println!("  {violation}");
    }
}

fn write_outputs(case: &Case, judged: &Judged, args: &LiveArgs) -> Result<(), String> {
    let write = |path: &std::path::Path, text: &str| std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()));
    if let Some(path) = &args.jsonl {
        write(path, &harness::jsonl::write(&judged.trace))?;
        println!("jsonl: {} ({} events)", path.display(), judged.trace.events.len());
    }
    if let Some(path) = &args.html {
        let summary = format!("live, bridge `{}`, {} steps, {} faults", args.bridge, case.scenario.script.steps.len(), case.scenario.faults.len());
        let header = view::Header { title: case.token(), summary, hash: judged.trace.hash() };
        write(path, &view::page(&judged.trace, &judged.violations, &header))?;
        println!("html: {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(violations: Vec<Violation>) -> Judged {
        Judged { trace: harness::trace::Trace { events: Vec::new() }, violations, stderr: Vec::new(), wall_ms: 2_500 }
    }

    // A replay shows (and writes) the last run that failed: a failure that reproduces 1 run in 3
    // is read from its own trace, not from the clean run after it.
    #[test]
    fn a_replay_shows_the_last_failing_run() {
        let broken = || vec![Violation { invariant: "reply_accounting".to_string(), at_ms: 1, event_index: 0, detail: String::new() }];
        let runs = |failing: &[bool]| {
            let mut shown = None;
            for (run, failed) in (1..).zip(failing) {
                shown = Some(shown_run(shown, run, judged(if *failed { broken() } else { Vec::new() }), None));
            }
            shown.map(|(run, _)| run)
        };
        assert_eq!(runs(&[true, false, false]), Some(1));
        assert_eq!(runs(&[true, false, true, false]), Some(3));
        assert_eq!(runs(&[false, false, false]), Some(3));
        assert_eq!(runs(&[false, true]), Some(2));
    }

    // With `--oracle` (and `--matching`), a replay shows the last run that broke it so: M5's
    // verdict came 1 run in 3, and the other runs failed other oracles (or the same oracle
    // another way, M6's "a second time"), whose traces are another finding's.
    #[test]
    fn a_replay_with_an_oracle_shows_the_last_run_that_broke_it_so() {
        let verdict = |oracle: &str, detail: &str| Violation { invariant: oracle.to_string(), at_ms: 1, event_index: 0, detail: detail.to_string() };
        let wanted = Kept { oracle: "sessions_initialized".to_string(), matching: Some("never initialized".to_string()) };
        let runs = |verdicts: Vec<Vec<Violation>>| {
            let mut shown = None;
            for (run, violations) in (1..).zip(verdicts) {
                shown = Some(shown_run(shown, run, judged(violations), Some(&wanted)));
            }
            shown.map(|(run, _)| run)
        };
        let m5 = || vec![verdict("sessions_initialized", "tools/call id 7 on session s, which was never initialized")];
        let m6 = || vec![verdict("sessions_initialized", "received notifications/initialized on session s a second time")];
        let other = || vec![verdict("one_reply_per_id", "a second reply for id 0")];
        assert_eq!(runs(vec![m5(), other(), m6()]), Some(1), "a later run that failed another way is not shown");
        assert_eq!(runs(vec![other(), m5(), m5(), Vec::new()]), Some(3));
        assert_eq!(runs(vec![m6(), other(), Vec::new()]), Some(2), "with no run breaking it so, the last that failed");
    }

    // A hunt's report holds one line per case as it ended, each violation's oracle and detail
    // with it, and is on disk before the hunt ends.
    #[test]
    fn a_hunts_report_holds_each_case_as_it_ends() {
        let path = std::env::temp_dir().join(format!("live-report-{}.jsonl", std::process::id()));
        let violation = Violation { invariant: "user_outcomes".to_string(), at_ms: 1_200, event_index: 7, detail: "call 3 never answered".to_string() };
        let done = |index: u64, violations: Vec<Violation>| Done {
            index,
            case: live::case(7, index),
            judged: judged(violations),
        };
        let mut report = CaseReport::create(&path).expect("the report opens");
        report.write(&done(1, vec![violation.clone(), violation]));
        let first = std::fs::read_to_string(&path).expect("the report is written");
        report.write(&done(0, Vec::new()));
        report.finish().expect("every line was written");
        let text = std::fs::read_to_string(&path).expect("the report is written");
        std::fs::remove_file(&path).ok();
        assert_eq!(first.lines().count(), 1, "the first case is on disk before the next ends");
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("one JSON value per line")).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["index"], 1);
        assert_eq!(lines[0]["token"], live::case(7, 1).token());
        assert_eq!(lines[0]["wall_s"], 2.5);
        assert_eq!(lines[0]["oracles"], serde_json::json!(["user_outcomes"]));
        assert_eq!(lines[0]["violations"][1]["detail"], "call 3 never answered");
        assert_eq!(lines[0]["violations"][1]["at_ms"], 1_200);
        assert_eq!(lines[1]["oracles"], serde_json::json!([]));
        assert!(CaseReport::create(std::path::Path::new("/nonexistent-dir/r.jsonl")).is_err_and(|e| e.starts_with("--report /nonexistent-dir/r.jsonl")));
    }

    // `--matching` keeps one finding's path: a case that broke the oracle another way is not it,
    // and a candidate counts only if a verdict of the oracle says the text.
    #[test]
    fn a_shrink_keeps_the_verdict_it_was_asked_for() {
        let said = |detail: &str| Violation { invariant: "sessions_initialized".to_string(), at_ms: 1, event_index: 0, detail: detail.to_string() };
        let twice = vec![said("received notifications/initialized on session s a second time")];
        let never = vec![said("tools/call on session s, which was never initialized")];
        let kept = kept_broken(Some("sessions_initialized"), Some("never initialized"), &never).expect("the case broke it so");
        assert!(kept.broken_by(&never));
        assert!(!kept.broken_by(&twice), "another path to the same oracle is another finding");
        let refused = kept_broken(Some("sessions_initialized"), Some("never initialized"), &twice).err().expect("refused");
        assert!(refused.contains("no verdict of sessions_initialized says it"), "{refused}");
        let any = kept_broken(None, None, &twice).expect("the first oracle broken");
        assert!(any.broken_by(&twice) && any.broken_by(&never));
    }
}
