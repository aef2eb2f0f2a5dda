//! Time compression: the bridge runs under libfaketime at `K` times real speed, so its own
//! timers (a 60 s request timeout, a close-out sweep) fire `K` times sooner by the wall clock.
//! The harness's side (the scripted client, the mock server, the fault plan) runs the scenario
//! with every duration divided by `K`, by the wall clock, and the trace is stamped in the bridge's
//! time (wall × `K`), so the oracles judge the same durations at every speed.
//!
//! What is not compressed: the CPU the bridge spends (start-up, parsing) and the harness's own
//! scheduling, which look `K` times longer in the bridge's time. The profile's `slack_ms` is
//! wall-clock jitter and is stretched by `K` in the trace; `exit_within_ms` is the bridge's time.
//! The largest `K` at which a bridge's verdicts match `K = 1` is measured per bridge and made the
//! default in its profile (`speed`).

use std::path::PathBuf;

use serde_json::Value;

use crate::relay::profile::check_speed;
use crate::relay::RelayScenario;

/// How much faster than the wall clock the bridge's clock runs: 1 is real time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Speed(u32);

impl Speed {
    pub const REAL: Speed = Speed(1);

    pub fn new(k: u32) -> Result<Self, String> {
        check_speed(k).map(|()| Self(k))
    }

    pub fn factor(self) -> u64 {
        u64::from(self.0)
    }

    /// The libfaketime specification: start at the real time, run `K` times faster.
    pub fn faketime_spec(self) -> String {
        format!("+0 x{}", self.0)
    }

    /// `scenario` as the harness's side runs it by the wall clock: every duration and moment
    /// (each `*_ms` number, wherever it is) divided by `K`, rounded to the nearest millisecond
    /// and never below 1 where it was above 0.
    pub fn harness_side(self, scenario: &RelayScenario) -> RelayScenario {
        if self == Self::REAL {
            return scenario.clone();
        }
        let Ok(mut value) = serde_json::to_value(scenario) else { return scenario.clone() };
        divide_ms(&mut value, self.factor());
        serde_json::from_value(value).unwrap_or_else(|_| scenario.clone())
    }
}

impl std::fmt::Display for Speed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "x{}", self.0)
    }
}

fn divide_ms(value: &mut Value, k: u64) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                match field.as_u64() {
                    Some(ms) if key.ends_with("_ms") => *field = Value::from(scale_down(ms, k)),
                    _ => divide_ms(field, k),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| divide_ms(item, k)),
        _ => {}
    }
}

fn scale_down(ms: u64, k: u64) -> u64 {
    if ms == 0 {
        0
    } else {
        ((ms + k / 2) / k).max(1)
    }
}

/// The `faketime` wrapper, or why there is none.
pub fn faketime() -> Result<PathBuf, String> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("faketime"))
        .find(|candidate| candidate.is_file());
    found.ok_or_else(|| {
        "--speed above 1 runs the bridge under libfaketime, and `faketime` is not on PATH \
         (Debian: apt-get install faketime; .ci/real-bridges installs it)"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harness_side_runs_every_duration_k_times_sooner() {
        let scenario = crate::live::case(7, 3).scenario;
        let fast = Speed::new(10).unwrap().harness_side(&scenario);
        assert_eq!(fast.script.steps.len(), scenario.script.steps.len());
        for (slow, quick) in scenario.script.steps.iter().zip(&fast.script.steps) {
            assert_eq!(quick.at_ms, scale_down(slow.at_ms, 10));
        }
        assert_eq!(fast.script.end_at_ms, scale_down(scenario.script.end_at_ms, 10));
        assert_eq!(fast.timing.keepalive_ms, scale_down(scenario.timing.keepalive_ms, 10));
        assert_eq!(fast.faults.len(), scenario.faults.len());
        let windows = |s: &RelayScenario| s.faults.iter().map(|f| f.window(&s.script)).collect::<Vec<_>>();
        for ((from, until), (quick_from, quick_until)) in windows(&scenario).into_iter().zip(windows(&fast)) {
            assert!(quick_from.abs_diff(from / 10) <= 1, "{from} became {quick_from}");
            assert_eq!(quick_until.is_some(), until.is_some());
        }
        assert_eq!(Speed::REAL.harness_side(&scenario), scenario);
    }

    #[test]
    fn scaling_keeps_moments_apart_and_nothing_below_a_millisecond() {
        assert_eq!(scale_down(0, 50), 0);
        assert_eq!(scale_down(1, 50), 1);
        assert_eq!(scale_down(25, 50), 1);
        assert_eq!(scale_down(75, 50), 2);
        assert_eq!(scale_down(60_000, 50), 1_200);
        assert!(Speed::new(0).is_err());
        assert_eq!(Speed::new(50).unwrap().faketime_spec(), "+0 x50");
    }
}
