//! The harness CLI: `list`, `hunt`, `replay`. Exit codes: 0 nothing found, 1 a violation, 2 bad
//! input.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use harness::hunt::{self, HuntConfig, Progress};
use harness::runner::run;
use harness::scenario::{Family, Scenario};
use harness::token::Token;
use harness::trace::Outcome;

#[derive(Parser)]
#[command(name = "harness", about = "Deterministic simulation testing for MCP bridges and daemons")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One line per family: `<family>: <switch> <switch> ...`.
    List,
    /// Generate and run scenarios until a checker finds a violation.
    Hunt {
        /// The family to hunt in (default: every family, or the family of the --bug switches).
        #[arg(long)]
        family: Option<String>,
        /// Turn on a bug switch (repeatable), e.g. --bug no_call_deadline.
        #[arg(long = "bug")]
        bugs: Vec<String>,
        /// How many cases to run at most.
        #[arg(long, default_value_t = 256)]
        cases: u64,
        /// Stop after this many seconds.
        #[arg(long)]
        seconds: Option<u64>,
        /// Base seed (hex or decimal); fresh each run when absent.
        #[arg(long)]
        seed: Option<String>,
        /// Runs allowed for shrinking a failure.
        #[arg(long, default_value_t = 300)]
        shrink_budget: usize,
    },
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
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List => {
            for family in Family::ALL {
                println!("{}: {}", family.name(), family.switches().join(" "));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Hunt { family, bugs, cases, seconds, seed, shrink_budget } => {
            hunt_command(family, bugs, cases, seconds, seed, shrink_budget)
        }
        Command::Replay { token, no_shrink, save } => replay_command(&token, no_shrink, save),
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
    parsed.map_err(|_| format!("--seed `{text}` is not a number (decimal, or hex with 0x)"))
}

fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // The base seed of an unseeded hunt is the one place OS entropy is welcome: it is printed,
    // and every case derives from it.
    #[allow(clippy::disallowed_types)]
    let state = std::collections::hash_map::RandomState::new();
    state.build_hasher().finish()
}

/// Which families a hunt covers: the one named, the one the switches belong to, or all.
fn families(family: Option<String>, bugs: &[String]) -> Result<Vec<Family>, String> {
    if let Some(name) = family {
        return Ok(vec![Family::parse(&name)?]);
    }
    if let Some(bug) = bugs.first() {
        let owner = Family::ALL.iter().find(|f| f.switches().contains(&bug.as_str()));
        return owner.map(|f| vec![*f]).ok_or_else(|| format!("unknown bug switch `{bug}`; run `list`"));
    }
    Ok(Family::ALL.to_vec())
}

struct Printer {
    total: u64,
    violations: u64,
    #[allow(clippy::disallowed_types)]
    started: std::time::Instant,
    last_print: u64,
}

impl Progress for Printer {
    fn case_done(&mut self, cases: u64, outcome: &Outcome) {
        self.violations += u64::from(outcome.failed());
        let secs = self.started.elapsed().as_secs_f64();
        if secs as u64 > self.last_print || cases == self.total {
            self.last_print = secs as u64;
            let rate = cases as f64 / secs.max(1e-9);
            eprintln!("  {cases}/{} cases, {rate:.1} cases/s, {} violations", self.total, self.violations);
        }
    }

    fn shrinking(&mut self, runs: usize, scenario: &Scenario) {
        eprintln!("  shrinking: run {runs}, {}", summary(scenario));
    }
}

fn summary(scenario: &Scenario) -> String {
    format!("{}, {} ms virtual", scenario.family.summary(), scenario.sim.horizon_ms)
}

fn hunt_command(
    family: Option<String>,
    bugs: Vec<String>,
    cases: u64,
    seconds: Option<u64>,
    seed: Option<String>,
    shrink_budget: usize,
) -> Result<ExitCode, String> {
    let base_seed = match seed {
        Some(text) => parse_seed(&text)?,
        None => fresh_seed(),
    };
    let mut total_cases = 0;
    for family in families(family, &bugs)? {
        Token::new(family, &bugs, 0)?;
        let bug_text = if bugs.is_empty() { "none".to_string() } else { bugs.join(" ") };
        println!("hunt: family {} bugs {bug_text} base seed 0x{base_seed:016x}, up to {cases} cases", family.name());
        let config = HuntConfig { family, bugs: bugs.clone(), cases, base_seed, seconds, shrink_budget };
        #[allow(clippy::disallowed_methods)] // progress display only
        let started = std::time::Instant::now();
        let mut printer = Printer { total: cases, violations: 0, started, last_print: 0 };
        let report = hunt::hunt(&config, &mut printer)?;
        total_cases += report.cases;
        if let Some(finding) = report.finding {
            print_finding(&finding);
            return Ok(ExitCode::from(1));
        }
        let secs = started.elapsed().as_secs_f64().max(1e-9);
        println!(
            "{}: {} cases, {:.1} cases/s, virtual:wall {:.0}x",
            family.name(),
            report.cases,
            report.cases as f64 / secs,
            report.virtual_ms as f64 / 1000.0 / secs
        );
    }
    println!("no violation in {total_cases} cases");
    Ok(ExitCode::SUCCESS)
}

fn print_finding(finding: &hunt::Finding) {
    println!("violation after {} cases:", finding.cases);
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

fn replay_command(input: &str, no_shrink: bool, save: Option<std::path::PathBuf>) -> Result<ExitCode, String> {
    let (scenario, outcome) = if std::path::Path::new(input).is_file() {
        let text = std::fs::read_to_string(input).map_err(|e| format!("cannot read {input}: {e}"))?;
        let scenario = Scenario::from_json(&text)?;
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
            let shrunk = hunt::shrink(tree, outcome, 300, |_, _| {});
            println!("shrunk in {} runs", shrunk.runs);
            (shrunk.scenario, shrunk.outcome)
        } else {
            (scenario, outcome)
        }
    };
    println!("--- trace ({} events)", outcome.trace.events.len());
    print!("{}", outcome.trace.render());
    println!("--- violations ({})", outcome.violations.len());
    for violation in &outcome.violations {
        println!("  {violation}");
    }
    println!("--- scenario");
    println!("{}", scenario.to_json());
    if let Some(path) = save {
        std::fs::write(&path, scenario.to_json() + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("saved: {}", path.display());
    }
    println!("trace-hash: {:016x}", outcome.trace.hash());
    Ok(if outcome.failed() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
