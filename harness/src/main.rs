//! The harness CLI: `list`, `hunt`, `replay`, `check`, `view`, `bench`, `hashes`. Exit codes: 0 nothing found,
//! 1 a violation, 2 bad input.

mod live_command;
mod progress;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use harness::bench;
use harness::hunt::{self, HuntConfig, HuntReport, Shard};
use harness::runner::run;
use harness::families::{self, FAMILIES};
use harness::family::{Family, Scenario};
use harness::schema::McpSchema;
use harness::token::Token;
use harness::trace::Trace;
use harness::view;

#[derive(Parser)]
#[command(name = "harness", about = "Deterministic simulation testing for MCP bridges and daemons")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct HuntArgs {
    /// The family to hunt in (default: every family, or the family of the --bug switches).
    #[arg(long)]
    family: Option<String>,
    /// Turn on a bug switch (repeatable), e.g. --bug no_call_deadline.
    #[arg(long = "bug")]
    bugs: Vec<String>,
    /// How many cases to run at most, per family (default 256, or no limit with --seconds).
    #[arg(long)]
    cases: Option<u64>,
    /// Stop starting cases after this many seconds (in total); with --cases, whichever comes
    /// first.
    #[arg(long)]
    seconds: Option<u64>,
    /// Print, per 1 000 cases, which cells of the family's coverage tables the cases hit
    /// (fault kind × the phase it hit, each ending the oracles distinguish).
    #[arg(long)]
    coverage: bool,
    /// Base seed (hex with 0x, or decimal); fresh each run when absent.
    #[arg(long)]
    seed: Option<String>,
    /// Runs allowed for shrinking a failure.
    #[arg(long, default_value_t = 300)]
    shrink_budget: usize,
    /// Worker threads (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    /// Collect one shrunk failure per distinct invariant instead of stopping at the first.
    #[arg(long)]
    keep_going: bool,
    /// Run only shard i of n (0-based), e.g. 2/8: disjoint cases per machine.
    #[arg(long)]
    shard: Option<String>,
    /// Run each case twice and report the first divergence between the traces.
    #[arg(long)]
    check_determinism: bool,
    /// No progress bar or progress lines.
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// One line per family: `<family>: <switch> <switch> ...`.
    List,
    /// Generate and run scenarios until a checker finds a violation.
    Hunt(HuntArgs),
    /// Rerun a token exactly (or a scenario JSON file), shrink it, print the trace.
    Replay {
        /// A token printed by `hunt`, or the path of a scenario JSON file.
        token: String,
        /// Print the run as generated, without shrinking.
        #[arg(long)]
        no_shrink: bool,
        /// Also write the (shrunk) scenario JSON to this file, e.g. to commit it as a regression.
        #[arg(long)]
        save: Option<std::path::PathBuf>,
        /// Also draw the trace as a sequence diagram in this self-contained HTML file.
        #[arg(long)]
        html: Option<std::path::PathBuf>,
        /// Also write the trace as JSON Lines to this file (one event per line), for `check`.
        #[arg(long)]
        jsonl: Option<std::path::PathBuf>,
    },
    /// Run a family's checkers on a JSON Lines trace (recorded here or elsewhere): exit 0 clean,
    /// 1 with the violations, 2 for bad input.
    Check {
        /// The trace, one event per line (see docs/trace-format.md).
        trace: std::path::PathBuf,
        /// The family whose checkers judge it (default: the `family` of its run.spec event).
        #[arg(long)]
        family: Option<String>,
    },
    /// Draw a JSON Lines trace as a sequence diagram, its violations marked.
    View {
        /// The trace, one event per line (see docs/trace-format.md).
        trace: std::path::PathBuf,
        /// Where to write the HTML page.
        #[arg(long)]
        html: std::path::PathBuf,
        /// The family whose checkers mark violations (default: from the run.spec event).
        #[arg(long)]
        family: Option<String>,
    },
    /// Measure throughput, acceleration, overhead against bare turmoil, and cases-to-detect.
    Bench {
        /// Only this family.
        #[arg(long)]
        family: Option<String>,
        /// Clean cases per family for throughput.
        #[arg(long, default_value_t = 200)]
        cases: u64,
        /// Base seeds for cases-to-detect (0 skips detection).
        #[arg(long, default_value_t = 5)]
        seeds: u64,
        /// Where to write the figures as JSON.
        #[arg(long, default_value = "target/bench.json")]
        json: std::path::PathBuf,
    },
    /// Run the relay family's scenarios against a real stdio bridge process, in real time.
    Live(live_command::LiveArgs),
    /// Print `<token> <trace-hash>` for cases of every family: compare across processes/machines.
    Hashes {
        #[arg(long)]
        family: Option<String>,
        #[arg(long, default_value_t = 10)]
        cases: u64,
        #[arg(long, default_value = "1")]
        seed: String,
    },
}

/// Every simulated message allocates (JSON, HTTP buffers, trace fields); mimalloc spends less on
/// that than glibc's malloc. Only the CLI uses it: the test binaries keep the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `harness hunt ... | head` closes stdout early. End quietly with the status a process killed by
/// SIGPIPE has (141), as Unix tools do, instead of panicking with a backtrace: the standard
/// library ignores SIGPIPE, so `println!` to a closed pipe panics.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload().downcast_ref::<String>().map_or("", String::as_str);
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List => {
            for family in FAMILIES {
                println!("{}: {}", family.name, family.switches.join(" "));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Hunt(args) => hunt_command(args),
        Command::Replay { token, no_shrink, save, html, jsonl } => {
            replay_command(&token, no_shrink, save, Outputs { html, jsonl })
        }
        Command::Check { trace, family } => check_command(&trace, family),
        Command::View { trace, html, family } => view_command(&trace, &html, family),
        Command::Bench { family, cases, seeds, json } => bench_command(family, cases, seeds, &json),
        Command::Hashes { family, cases, seed } => hashes_command(family, cases, &seed),
        Command::Live(args) => live_command::live_command(args, parse_seed, fresh_seed),
    };
    result.unwrap_or_else(|error| {
        eprintln!("error: {error}");
        ExitCode::from(2)
    })
}

fn parse_seed(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("seed `{text}` is not a number (decimal, or hex with 0x)"))
}

fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // The base seed of an unseeded hunt is the one place OS entropy is welcome: it is printed,
    // and every case derives from it.
    #[allow(clippy::disallowed_types)]
    let state = std::collections::hash_map::RandomState::new();
    state.build_hasher().finish()
}

/// Which families a command covers: the one named, the one the switches belong to, or all.
fn families(family: Option<String>, bugs: &[String]) -> Result<Vec<&'static Family>, String> {
    if let Some(name) = family {
        return Ok(vec![families::named(&name)?]);
    }
    if let Some(bug) = bugs.first() {
        let owner = families::owning(bug);
        return owner.map(|f| vec![f]).ok_or_else(|| format!("unknown bug switch `{bug}`; run `list`"));
    }
    Ok(FAMILIES.to_vec())
}

fn summary(scenario: &Scenario) -> String {
    format!("{}, {} ms virtual", scenario.family.summary(), scenario.sim.horizon_ms)
}

fn hunt_command(args: HuntArgs) -> Result<ExitCode, String> {
    let base_seed = match &args.seed {
        Some(text) => parse_seed(text)?,
        None => fresh_seed(),
    };
    let shard = args.shard.as_deref().map(Shard::parse).transpose()?.unwrap_or(Shard::WHOLE);
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let families = families(args.family.clone(), &args.bugs)?;
    for family in &families {
        Token::new(family, &args.bugs, 0)?;
    }
    let bug_text = if args.bugs.is_empty() { "none".to_string() } else { args.bugs.join(" ") };
    // --seconds alone runs until the time is up; otherwise the case budget bounds the hunt.
    let cases = match (args.cases, args.seconds) {
        (Some(cases), _) => cases,
        (None, Some(_)) => u64::MAX,
        (None, None) => 256,
    };
    let budget = match (args.cases, args.seconds) {
        (None, Some(seconds)) => format!("for {seconds} s"),
        (Some(cases), Some(seconds)) => format!("up to {cases} cases per family or {seconds} s"),
        _ => format!("up to {cases} cases per family"),
    };
    println!(
        "hunt: base seed 0x{base_seed:016x}, bugs {bug_text}, {budget}, {threads} thread{}, shard {}/{}",
        if threads == 1 { "" } else { "s" },
        shard.index,
        shard.count
    );
    #[allow(clippy::disallowed_methods)] // the --seconds budget is wall time; nothing recorded
    let started = std::time::Instant::now();
    let mut reports = Vec::new();
    for family in families {
        let deadline = args.seconds.map(|s| Duration::from_secs(s).saturating_sub(started.elapsed()));
        let config = HuntConfig {
            deadline,
            shrink_budget: args.shrink_budget,
            threads,
            keep_going: args.keep_going,
            shard,
            check_determinism: args.check_determinism,
            coverage: args.coverage,
            ..HuntConfig::new(family, &args.bugs, cases, base_seed)
        };
        let mut bar = progress::Bar::new(family.name, cases, args.quiet);
        let report = hunt::hunt(&config, &mut bar)?;
        bar.finish();
        let stop = !report.findings.is_empty() && !args.keep_going;
        reports.push(report);
        if stop {
            break;
        }
    }
    print_table(&reports);
    if args.coverage {
        for report in &reports {
            print!("{}", report.coverage.render(report.family.coverage_tables));
            print!("{}", harness::verdicts::render(&report.coverage));
        }
    }
    let findings: Vec<&hunt::Finding> = reports.iter().flat_map(|r| &r.findings).collect();
    for finding in &findings {
        print_finding(finding);
    }
    if findings.is_empty() {
        println!("no violation in {} cases", reports.iter().map(|r| r.cases).sum::<u64>());
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(1))
    }
}

fn print_table(reports: &[HuntReport]) {
    println!("{:<8} {:>8} {:>10} {:>12} {:>9} {:>10} {:>13}", "family", "cases", "violations", "virtual s", "wall s", "cases/s", "virtual:wall");
    for r in reports {
        let wall = r.wall.as_secs_f64().max(1e-9);
        let virtual_s = r.virtual_ms as f64 / 1000.0;
        println!(
            "{:<8} {:>8} {:>10} {:>12.0} {:>9.1} {:>10.1} {:>12.0}x",
            r.family.name,
            r.cases,
            r.failed,
            virtual_s,
            wall,
            r.cases as f64 / wall,
            virtual_s / wall
        );
    }
}

fn print_finding(finding: &hunt::Finding) {
    println!("violation in case {} ({}):", finding.index, finding.token);
    for violation in &finding.original.violations {
        println!("  {violation}");
    }
    let shrunk = &finding.shrunk;
    println!("shrunk in {} runs to {}:", shrunk.runs, summary(&shrunk.scenario));
    for violation in &shrunk.outcome.violations {
        println!("  {violation}");
    }
    println!("token: {}", finding.token);
    println!("replay: just replay {}", finding.token);
    println!("   (or: cargo run --release -p harness -- replay {})", finding.token);
}

/// The files `replay` writes besides its text, when asked.
struct Outputs {
    html: Option<std::path::PathBuf>,
    jsonl: Option<std::path::PathBuf>,
}

fn write_file(path: &std::path::Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn print_violations(violations: &[harness::trace::Violation]) {
    println!("--- violations ({})", violations.len());
    for violation in violations {
        println!("  {violation}");
    }
}

/// Read a JSON Lines trace and the family that judges it: `Err` (exit 2) names the line.
fn read_trace(path: &std::path::Path, family: Option<String>) -> Result<(Trace, Result<&'static Family, String>), String> {
    if !path.exists() {
        return Err(format!("no such file: {}", path.display()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let trace = harness::jsonl::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let family = match family {
        Some(name) => families::named(&name),
        None => families::of_trace(&trace),
    };
    Ok((trace, family))
}

/// A trace's verdicts: a live run's by the live oracles (what its run reported), a simulated
/// run's by its family's checkers.
fn judge(trace: &Trace, family: &Family) -> Vec<harness::trace::Violation> {
    if harness::relay::oracles::is_live(trace) {
        harness::relay::oracles::judge(trace, &McpSchema::new())
    } else {
        (family.check)(trace, &McpSchema::new())
    }
}

fn check_command(path: &std::path::Path, family: Option<String>) -> Result<ExitCode, String> {
    let (trace, family) = read_trace(path, family)?;
    let family = family?;
    let violations = judge(&trace, family);
    println!("check: {} ({} events, family {})", path.display(), trace.events.len(), family.name);
    print_violations(&violations);
    println!("trace-hash: {:016x}", trace.hash());
    Ok(if violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn view_command(path: &std::path::Path, html: &std::path::Path, family: Option<String>) -> Result<ExitCode, String> {
    let (trace, family) = read_trace(path, family)?;
    let (violations, summary) = match family {
        Ok(family) => (judge(&trace, family), spec_summary(&trace, family.name)),
        Err(why) => {
            eprintln!("note: drawing without checkers: {why}");
            (Vec::new(), format!("{} events, family unknown", trace.events.len()))
        }
    };
    let header = view::Header { title: path.display().to_string(), summary, hash: trace.hash() };
    let page = view::page(&trace, &violations, &header);
    write_file(html, &page)?;
    println!("html: {} ({} bytes, {} violations marked)", html.display(), page.len(), violations.len());
    Ok(ExitCode::SUCCESS)
}

/// A trace's own summary, from its run.spec: family, events, horizon, switches.
fn spec_summary(trace: &Trace, family: &str) -> String {
    let spec = trace.first(bridge_under_test::events::kind::RUN_SPEC);
    let field = |name: &str| spec.map(|e| e.text(name)).unwrap_or_default();
    let bugs = field("bugs");
    format!(
        "{family}, {} events, horizon {} ms, bugs {}",
        trace.events.len(),
        field("horizon_ms"),
        if bugs.is_empty() { "none".to_string() } else { bugs }
    )
}

/// Whether a replay's argument names a file rather than a token.
fn names_a_file(input: &str) -> bool {
    input.ends_with(".json") || input.contains('/')
}

fn replay_command(
    input: &str,
    no_shrink: bool,
    save: Option<std::path::PathBuf>,
    outputs: Outputs,
) -> Result<ExitCode, String> {
    if names_a_file(input) && !std::path::Path::new(input).exists() {
        return Err(format!("no such file: {input} (replay takes a token or a scenario JSON file)"));
    }
    let (scenario, outcome) = if std::path::Path::new(input).is_file() {
        let text = std::fs::read_to_string(input).map_err(|e| format!("cannot read {input}: {e}"))?;
        let scenario = Scenario::from_json(&text, FAMILIES).map_err(|e| {
            let live = text.contains("\"token\"") && text.contains("live.v1.");
            if live { format!("{input}: a live case: run it with `harness live --bridge CMD --replay {input}`") } else { format!("{input}: {e}") }
        })?;
        let outcome = run(&scenario);
        (scenario, outcome)
    } else {
        let token = Token::parse(input)?;
        let tree = hunt::generate(&token);
        let scenario = tree.current();
        let outcome = run(&scenario);
        println!("token: {token}");
        println!("generated: {}; {} violations", summary(&scenario), outcome.violations.len());
        if outcome.failed() && !no_shrink {
            eprintln!("shrinking (at most 300 runs)...");
            let shrunk = hunt::shrink(tree, outcome, 300, |runs, scenario| {
                eprintln!("  run {runs}: still failing with {}", summary(scenario));
            });
            println!("shrunk in {} runs", shrunk.runs);
            (shrunk.scenario, shrunk.outcome)
        } else {
            (scenario, outcome)
        }
    };
    println!("--- trace ({} events)", outcome.trace.events.len());
    print!("{}", outcome.trace.render());
    print_violations(&outcome.violations);
    println!("--- scenario");
    println!("{}", scenario.to_json());
    if let Some(path) = save {
        std::fs::write(&path, scenario.to_json() + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("saved: {}", path.display());
    }
    if let Some(path) = &outputs.jsonl {
        write_file(path, &harness::jsonl::write(&outcome.trace))?;
        println!("jsonl: {} ({} events)", path.display(), outcome.trace.events.len());
    }
    if let Some(path) = &outputs.html {
        let header = view::Header { title: input.to_string(), summary: summary(&scenario), hash: outcome.trace.hash() };
        let page = view::page(&outcome.trace, &outcome.violations, &header);
        write_file(path, &page)?;
        println!("html: {} ({} bytes)", path.display(), page.len());
    }
    println!("trace-hash: {:016x}", outcome.trace.hash());
    Ok(if outcome.failed() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn bench_command(family: Option<String>, cases: u64, seeds: u64, json: &std::path::Path) -> Result<ExitCode, String> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let mut figures = Vec::new();
    let mut detections = Vec::new();
    for family in families(family, &[])? {
        let figure = bench::throughput(family, cases, 0xBE4C);
        println!(
            "bench {} scenarios_per_s={:.1} acceleration={:.0}x bare_ratio={:.2} harness_ratio={:.2}",
            figure.family,
            figure.scenarios_per_s,
            figure.acceleration,
            figure.bare_ratio,
            figure.harness_ratio
        );
        figures.push(figure);
        for detection in bench::detection(family, seeds, 256, threads) {
            let show = |v: Option<u64>| v.map_or("miss".to_string(), |v| v.to_string());
            let each: Vec<String> = detection.cases.iter().map(|c| show(*c)).collect();
            println!(
                "detect {} {} median={} max={} cases=[{}]",
                detection.family,
                detection.switch,
                show(detection.median),
                show(detection.max),
                each.join(" ")
            );
            detections.push(detection);
        }
    }
    let report = serde_json::json!({"throughput": figures, "detection": detections, "threads": threads});
    if let Some(dir) = json.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&report).unwrap_or_default();
    std::fs::write(json, text + "\n").map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    println!("wrote {}", json.display());
    Ok(ExitCode::SUCCESS)
}

fn hashes_command(family: Option<String>, cases: u64, seed: &str) -> Result<ExitCode, String> {
    let base = parse_seed(seed)?;
    for family in families(family, &[])? {
        for index in 0..cases {
            let token = Token::new(family, &[], hunt::case_seed(base, index))?;
            let outcome = run(&hunt::generate(&token).current());
            println!("{token} {:016x}", outcome.trace.hash());
        }
    }
    Ok(ExitCode::SUCCESS)
}
