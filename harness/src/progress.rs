//! Hunt and live progress: an indicatif bar on a terminal, a plain line every hundred cases
//! otherwise (CI logs), nothing with `--quiet`.

use std::io::IsTerminal;

use harness::hunt::Progress;
use harness::token::Token;
use harness::trace::Outcome;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bar {
    bar: Option<ProgressBar>,
    plain: bool,
    /// What the cases are of: a family, or a bridge.
    prefix: String,
    total: u64,
    /// Hundreds of cases reported by the last plain line.
    last_line: u64,
}

impl Bar {
    pub fn new(prefix: &str, total: u64, quiet: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            // A hunt bounded only by --seconds has no case count to fill a bar with.
            let bounded = total != u64::MAX;
            let bar = ProgressBar::with_draw_target(bounded.then_some(total), ProgressDrawTarget::stderr());
            let template = if bounded {
                "{prefix} [{bar:30}] {pos}/{len} cases {per_sec} {msg} ({elapsed})"
            } else {
                "{prefix} {pos} cases {per_sec} {msg} ({elapsed})"
            };
            let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style.progress_chars("=> "));
            bar.set_prefix(prefix.to_string());
            bar.set_message("0 violations");
            bar
        });
        Self { bar, plain: !quiet && !terminal, prefix: prefix.to_string(), total, last_line: 0 }
    }

    /// `cases` done, `failed` of them with violations.
    pub fn tick(&mut self, cases: u64, failed: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(cases);
            bar.set_message(format!("{failed} violations"));
        }
        if self.plain && (cases.is_multiple_of(100) || cases == self.total) && cases / 100 != self.last_line {
            self.last_line = cases / 100;
            let of = if self.total == u64::MAX { String::new() } else { format!("/{}", self.total) };
            eprintln!("  {} {cases}{of} cases, {failed} violations", self.prefix);
        }
    }

    /// A line of its own, above the bar when there is one.
    pub fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn case_done(&mut self, cases: u64, failed: u64, _: &Outcome) {
        self.tick(cases, failed);
    }

    fn shrinking(&mut self, token: &Token) {
        match &self.bar {
            Some(bar) => bar.set_message(format!("shrinking {token}")),
            None if self.plain => eprintln!("  shrinking {token}"),
            None => {}
        }
    }
}
