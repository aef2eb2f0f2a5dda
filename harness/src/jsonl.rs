//! Traces as JSON Lines: one event per line, `{"at_ms", "host", "kind", "fields"}`, so a trace
//! recorded anywhere (a real bridge's log in the same vocabulary) can be checked and drawn, and a
//! simulated one can be kept. `docs/trace-format.md` documents the format;
//! `docs/trace.schema.json` is its JSON Schema.
//!
//! `fields` is a JSON object whose keys keep the order the component wrote them, on writing and
//! on reading: the rendered trace, and so its hash, survive a round trip byte for byte.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::trace::{Trace, TraceEvent};

/// One event as one line of JSON (no trailing newline).
pub fn line(event: &TraceEvent) -> String {
    let mut out = String::with_capacity(64 + event.fields.len() * 24);
    out.push_str("{\"at_ms\":");
    out.push_str(&event.at_ms.to_string());
    out.push_str(",\"host\":");
    out.push_str(&Value::String(event.host.clone()).to_string());
    out.push_str(",\"kind\":");
    out.push_str(&Value::String(event.kind.clone()).to_string());
    out.push_str(",\"fields\":{");
    for (position, (name, value)) in event.fields.iter().enumerate() {
        if position > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(name.clone()).to_string());
        out.push(':');
        out.push_str(&value.to_string());
    }
    out.push_str("}}");
    out
}

/// The whole trace, one line per event, each ending in a newline.
pub fn write(trace: &Trace) -> String {
    let mut out = String::new();
    for event in &trace.events {
        out.push_str(&line(event));
        out.push('\n');
    }
    out
}

/// What was wrong with a JSONL trace, and on which line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Parse a JSONL trace. Every line must be one event; blank lines are refused (a truncated or
/// concatenated file shows up as one), except for the final newline.
pub fn parse(text: &str) -> Result<Trace, LineError> {
    let mut events = Vec::new();
    for (index, text_line) in text.lines().enumerate() {
        let number = index + 1;
        let event = parse_line(text_line).map_err(|message| LineError { line: number, message })?;
        events.push(event);
    }
    if events.is_empty() {
        return Err(LineError { line: 1, message: "empty trace: no event".to_string() });
    }
    Ok(Trace { events })
}

/// One line as an event, or what was wrong with it.
pub fn parse_line(text: &str) -> Result<TraceEvent, String> {
    if text.trim().is_empty() {
        return Err("blank line: expected one event {\"at_ms\", \"host\", \"kind\", \"fields\"}".to_string());
    }
    let raw: RawEvent = serde_json::from_str(text).map_err(|e| format!("not an event: {e}"))?;
    if raw.kind.is_empty() {
        return Err("`kind` is empty".to_string());
    }
    if raw.host.is_empty() {
        return Err("`host` is empty".to_string());
    }
    Ok(TraceEvent { at_ms: raw.at_ms, host: raw.host, kind: raw.kind, fields: raw.fields.0 })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    at_ms: u64,
    host: String,
    kind: String,
    fields: OrderedFields,
}

/// A JSON object read into a list of pairs in document order (`serde_json::Map` sorts its keys).
struct OrderedFields(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for OrderedFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = OrderedFields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of field names to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedFields, A::Error> {
                let mut pairs: Vec<(String, Value)> = Vec::new();
                while let Some((name, value)) = map.next_entry::<String, Value>()? {
                    if pairs.iter().any(|(seen, _)| *seen == name) {
                        return Err(de::Error::custom(format!("field `{name}` appears twice")));
                    }
                    pairs.push((name, value));
                }
                Ok(OrderedFields(pairs))
            }
        }
        deserializer.deserialize_map(Pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Trace {
        Trace {
            events: vec![
                TraceEvent::new(0, "sim", "run.spec", &[("family", json!("relay")), ("call_timeout_ms", json!(1000))]),
                TraceEvent::new(
                    7,
                    "client",
                    "mcp.send",
                    &[("msg", json!("{\"id\":1,\"method\":\"tools/call\"}")), ("malformed", json!(false))],
                ),
                TraceEvent::new(9, "bridge", "call.admit", &[("zeta", json!(1)), ("alpha", json!(null))]),
            ],
        }
    }

    #[test]
    fn round_trip_keeps_field_order_and_hash() {
        let trace = sample();
        let text = write(&trace);
        assert_eq!(text.lines().count(), 3);
        assert!(text.starts_with("{\"at_ms\":0,\"host\":\"sim\",\"kind\":\"run.spec\",\"fields\":{\"family\":\"relay\""));
        let back = parse(&text).expect("parses");
        assert_eq!(back, trace);
        assert_eq!(back.hash(), trace.hash());
    }

    #[test]
    fn bad_lines_name_their_number_and_fault() {
        let good = line(&sample().events[0]);
        let cases = [
            (format!("{good}\n\n{good}\n"), 2, "blank line"),
            (format!("{good}\n{{\"at_ms\":-1,\"host\":\"a\",\"kind\":\"k\",\"fields\":{{}}}}\n"), 2, "not an event"),
            (format!("{{\"at_ms\":1,\"host\":\"a\",\"kind\":\"k\"}}\n"), 1, "missing field `fields`"),
            (format!("{good}\n{good}\n{{\"at_ms\":1,\"host\":\"a\",\"kind\":\"k\",\"fields\":{{}},\"x\":1}}"), 3, "unknown field `x`"),
            ("{\"at_ms\":1,\"host\":\"a\",\"kind\":\"k\",\"fields\":{\"a\":1,\"a\":2}}".to_string(), 1, "appears twice"),
            ("{\"at_ms\":1,\"host\":\"a\",\"kind\":\"\",\"fields\":{}}".to_string(), 1, "`kind` is empty"),
            ("not json".to_string(), 1, "not an event"),
            (String::new(), 1, "empty trace"),
        ];
        for (text, number, needle) in cases {
            let error = parse(&text).expect_err(&text);
            assert_eq!(error.line, number, "{text}: {error}");
            assert!(error.message.contains(needle), "{text}: {error}");
        }
    }
}
