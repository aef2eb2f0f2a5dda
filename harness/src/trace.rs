//! The recorded trace and what a run returns: events in virtual time, violations, outcome.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One recorded event: virtual time first, the host it happened on, its kind, its fields in the
/// order the component wrote them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    pub at_ms: u64,
    pub host: String,
    pub kind: String,
    pub fields: Vec<(String, Value)>,
}

impl TraceEvent {
    /// An event built by hand (checker tests): `new(at_ms, host, kind, &[("id", json!("1"))])`.
    pub fn new(at_ms: u64, host: &str, kind: &str, fields: &[(&str, Value)]) -> Self {
        let fields = fields.iter().map(|(name, value)| ((*name).to_string(), value.clone())).collect();
        Self { at_ms, host: host.to_string(), kind: kind.to_string(), fields }
    }

    /// A field's value, if present.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// A field as text (strings unquoted, other values as JSON); empty when absent.
    pub fn text(&self, name: &str) -> String {
        match self.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }

    /// A field as a number; 0 when absent or not a number.
    pub fn num(&self, name: &str) -> u64 {
        match self.get(name) {
            Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
            Some(Value::String(s)) => s.parse().unwrap_or(0),
            _ => 0,
        }
    }

    /// One line: `<at_ms> <host> <kind> k=v ...`, fields in recorded order.
    pub fn line(&self) -> String {
        let mut out = format!("{:>9} {:<8} {}", self.at_ms, self.host, self.kind);
        for (name, value) in &self.fields {
            match value {
                Value::String(s) => write!(out, " {name}={s}"),
                other => write!(out, " {name}={other}"),
            }
            .expect("writing to a String cannot fail");
        }
        out
    }
}

/// Everything recorded in one run, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub events: Vec<TraceEvent>,
}

impl Trace {
    /// A violation of `invariant` at event `index`, stamped with that event's time.
    pub fn violation(&self, invariant: &str, index: usize, detail: String) -> Violation {
        let at_ms = self.events.get(index).map_or(0, |e| e.at_ms);
        Violation { invariant: invariant.to_string(), at_ms, event_index: index, detail }
    }

    /// The whole trace, one line per event.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for event in &self.events {
            out.push_str(&event.line());
            out.push('\n');
        }
        out
    }

    /// FNV-1a over the rendered trace: equal hashes mean byte-identical traces.
    pub fn hash(&self) -> u64 {
        crate::seed::fnv1a(self.render().as_bytes())
    }

    /// Events of one kind, with their index in the trace.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = (usize, &'a TraceEvent)> + 'a {
        self.events.iter().enumerate().filter(move |(_, e)| e.kind == kind)
    }

    /// The first event of a kind.
    pub fn first(&self, kind: &str) -> Option<&TraceEvent> {
        self.events.iter().find(|e| e.kind == kind)
    }
}

/// A broken invariant, found by a checker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The checker's name, e.g. `one_reply_per_id`.
    pub invariant: String,
    pub at_ms: u64,
    /// Index of the event that shows it (into `Trace::events`).
    pub event_index: usize,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] at {} ms (event #{}): {}", self.invariant, self.at_ms, self.event_index, self.detail)
    }
}

/// Counters about a run, for progress and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub steps: u64,
    pub virtual_ms: u64,
    pub events: u64,
    /// Hosts in the simulation (clients included).
    pub hosts: usize,
}

/// What [`run`](crate::runner::run) returns.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub trace: Trace,
    pub violations: Vec<Violation>,
    pub stats: Stats,
}

impl Outcome {
    pub fn failed(&self) -> bool {
        !self.violations.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_and_hash_are_stable() {
        let event = TraceEvent {
            at_ms: 1200,
            host: "bridge".into(),
            kind: "sse.closed".into(),
            fields: vec![("gen".into(), json!(2)), ("reason".into(), json!("idle"))],
        };
        assert_eq!(event.line(), "     1200 bridge   sse.closed gen=2 reason=idle");
        assert_eq!(event.num("gen"), 2);
        assert_eq!(event.text("reason"), "idle");
        let trace = Trace { events: vec![event.clone()] };
        let mut other = trace.clone();
        assert_eq!(trace.hash(), other.hash());
        other.events[0].at_ms += 1;
        assert_ne!(trace.hash(), other.hash());
    }
}
