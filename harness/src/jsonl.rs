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
    // First the shape, for a message that names the field; then the fields in their order.
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not an event: not JSON: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err(format!("not an event: expected an object {{\"at_ms\", \"host\", \"kind\", \"fields\"}}, found {}", clip(&value)));
    };
    for name in ["at_ms", "host", "kind", "fields"] {
        if !object.contains_key(name) {
            return Err(format!("not an event: missing field `{name}`"));
        }
    }
    if let Some(extra) = object.keys().find(|k| !["at_ms", "host", "kind", "fields"].contains(&k.as_str())) {
        return Err(format!("not an event: unknown field `{extra}` (expected at_ms, host, kind, fields)"));
    }
    if object["at_ms"].as_u64().is_none() {
        return Err(format!("not an event: `at_ms` must be a whole number of milliseconds ≥ 0, found {}", clip(&object["at_ms"])));
    }
    for name in ["host", "kind"] {
        match object[name].as_str() {
            None => return Err(format!("not an event: `{name}` must be a string, found {}", clip(&object[name]))),
            Some("") => return Err(format!("`{name}` is empty")),
            Some(_) => {}
        }
    }
    if !object["fields"].is_object() {
        return Err(format!("not an event: `fields` must be an object, found {}", clip(&object["fields"])));
    }
    let raw: RawEvent = serde_json::from_str(text).map_err(|e| format!("not an event: {e}"))?;
    Ok(TraceEvent { at_ms: raw.at_ms, host: raw.host, kind: raw.kind, fields: raw.fields.0 })
}

fn clip(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 40 {
        text.chars().take(40).collect::<String>() + "…"
    } else {
        text
    }
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
            ("{\"at_ms\":1,\"host\":\"a\",\"kind\":\"k\"}\n".to_string(), 1, "missing field `fields`"),
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

    /// The kinds `bridge-under-test/src/events.rs` declares in its `kind` module, read from the
    /// source, so a kind added there is seen here without anyone listing it.
    fn kinds_in_events_rs() -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../bridge-under-test/src/events.rs");
        let source = std::fs::read_to_string(path).expect("events.rs is readable");
        let start = source.find("pub mod kind").expect("events.rs has a `kind` module");
        let body = &source[start..];
        let end = body.find("\n}").expect("the `kind` module ends");
        let mut kinds = Vec::new();
        for text in body[..end].lines().map(str::trim) {
            let Some(rest) = text.strip_prefix("pub const ") else { continue };
            let Some((_, value)) = rest.split_once("= \"") else { continue };
            let Some((kind, _)) = value.split_once('"') else { continue };
            if !kinds.iter().any(|k| k == kind) {
                kinds.push(kind.to_string());
            }
        }
        kinds
    }

    fn schema() -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/trace.schema.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("docs/trace.schema.json is readable")).expect("JSON")
    }

    #[test]
    fn schema_names_exactly_the_kinds_of_events_rs() {
        let declared = kinds_in_events_rs();
        assert!(declared.len() > 50, "read only {} kinds from events.rs: is the parser stale?", declared.len());
        let schema = schema();
        let listed: Vec<&str> = schema
            .pointer("/properties/kind/enum")
            .and_then(Value::as_array)
            .expect("the schema lists kinds at properties.kind.enum")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let missing: Vec<&str> = declared.iter().map(String::as_str).filter(|k| !listed.contains(k)).collect();
        let stale: Vec<&str> = listed.iter().copied().filter(|k| !declared.iter().any(|d| d == k)).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "docs/trace.schema.json is out of step with bridge-under-test/src/events.rs: \
             missing from properties.kind.enum: [{}]; listed but no longer in events.rs: [{}] \
             (also document them in docs/trace-format.md)",
            missing.join(", "),
            stale.join(", ")
        );
    }

    #[test]
    fn every_line_of_a_simulated_trace_validates_against_the_schema() {
        let validator = jsonschema::validator_for(&schema()).expect("the trace schema compiles");
        let mut kinds_seen = std::collections::BTreeSet::new();
        for token in ["v1.relay.none.0000000000000001", "v1.channel.none.0000000000000001", "v1.daemon.none.0000000000000001"] {
            let token = crate::token::Token::parse(token).expect("token");
            let outcome = crate::runner::run(&crate::hunt::generate(&token).current());
            for (number, text) in write(&outcome.trace).lines().enumerate() {
                let value: Value = serde_json::from_str(text).expect("a written line is JSON");
                let errors: Vec<String> = validator.iter_errors(&value).map(|e| e.to_string()).collect();
                assert!(errors.is_empty(), "{token} line {}: {text}: {errors:?}", number + 1);
                kinds_seen.insert(outcome.trace.events[number].kind.clone());
            }
        }
        assert!(kinds_seen.len() > 20, "the three traces show only {} kinds", kinds_seen.len());
        // And the schema refuses what `parse` refuses.
        for bad in [r#"{"at_ms":1,"host":"a","kind":"mcp.send"}"#, r#"{"at_ms":1,"host":"a","kind":"no.such","fields":{}}"#] {
            let value: Value = serde_json::from_str(bad).expect("JSON");
            assert!(!validator.is_valid(&value), "{bad}");
        }
    }
}
