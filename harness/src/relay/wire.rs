//! What JSON-RPC 2.0 and MCP prescribe for each line a client writes, predicted from the line
//! alone (ORACLES.md §5): a request is owed a reply under its id; a notification or a client's
//! response gets none; a line that is not JSON gets a parse error, and JSON that is not a valid
//! message an invalid-request error, each under the line's id when it carries a valid one and
//! with no id otherwise (the MCP schema has no `null` id). Written from the specifications, not
//! from the bridge's code.

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::checks::Facts;
use crate::check::{capped, message};
use crate::trace::Violation;
use crate::verdicts;

/// JSON-RPC 2.0's parse error: the line is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0's invalid request: JSON, but not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;

/// The protocol versions a relay server side negotiates (MCP's lifecycle: the client's version
/// when the server supports it, else one it does).
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18"];

/// What a client line calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// A request: one reply under `id` (canonical JSON text).
    Request { id: String, method: String },
    /// A notification or a client's response: no reply at all.
    Silent,
    /// A JSON-RPC error with `code`, under `id` (`None`: the reply has no id).
    Error { code: i64, id: Option<String> },
}

/// An id MCP allows: a string or an integer.
pub fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// What JSON-RPC 2.0 (as MCP 2025-11-25 profiles it: no batches, no `null` ids) prescribes for
/// `line`.
pub fn predict(line: &str) -> Expect {
    let Ok(msg) = serde_json::from_str::<Value>(line) else {
        return Expect::Error { code: PARSE_ERROR, id: None };
    };
    let Some(obj) = msg.as_object() else {
        return Expect::Error { code: INVALID_REQUEST, id: None };
    };
    let id = obj.get("id");
    let invalid = || Expect::Error { code: INVALID_REQUEST, id: id.filter(|id| valid_id(id)).map(Value::to_string) };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid();
    }
    if id.is_some_and(|id| !valid_id(id)) {
        return invalid();
    }
    match (obj.get("method"), id) {
        (Some(Value::String(method)), Some(id)) => Expect::Request { id: id.to_string(), method: method.clone() },
        (Some(Value::String(_)), None) => Expect::Silent,
        (None, Some(_)) if obj.contains_key("result") != obj.contains_key("error") => Expect::Silent,
        _ => invalid(),
    }
}

/// Wire conformance, judged from the client's stdio alone: every line that calls for a JSON-RPC
/// error (not JSON, not a valid message, an id sent while a request of that id is still owed)
/// gets exactly that error, at once, under the line's id or with none; notifications get no
/// reply (an id-less reply nobody called for is `reply_answers_outstanding`'s); and the client's
/// `initialize` is answered at once by the bridge itself, once, with the protocol version
/// negotiated as the lifecycle prescribes — never with the relayer's answer to it. (That every
/// line the client reads is JSON-RPC 2.0 valid under the MCP schema is `schema_valid`'s.)
pub fn wire_conformance(facts: &Facts<'_>) -> Vec<Violation> {
    let bound = 2 * facts.slack_ms + 100;
    let relayer_inits: Vec<Value> = facts
        .trace
        .events
        .iter()
        .filter(|e| e.host == host::RELAYER && e.kind == kind::REPLY_SENT)
        .map(message)
        .filter(|msg| msg.pointer("/result/protocolVersion").is_some())
        .collect();
    let mut found = Vec::new();
    for (n, request) in facts.requests.iter().enumerate() {
        let line = facts.trace.events[request.index].text("msg");
        let due = request.at_ms + bound <= facts.horizon_ms;
        if let Some(code) = request.local {
            // An id sent twice meets the earlier request's answer on the way: if that answer
            // came within the bound, the bridge may have admitted this one as new.
            let raced = request.dup
                && facts.requests[..n].iter().any(|r| r.id == request.id && r.answered.as_ref().is_some_and(|a| a.at_ms <= request.at_ms + bound));
            let got = request.answered.as_ref();
            let problem = match got {
                _ if raced => continue,
                None if !due => continue,
                None => "the client never read it".to_string(),
                Some(a) if a.msg.pointer("/error/code").and_then(Value::as_i64) != Some(code) => format!("the client read {}", a.msg),
                Some(a) if a.at_ms > request.at_ms + bound => format!("it came only after {} ms", a.at_ms - request.at_ms),
                Some(_) => {
                    verdicts::held();
                    continue;
                }
            };
            let under = request.id.as_deref().map_or("with no id".to_string(), |id| format!("under id {id}"));
            let why = if request.dup { " (its id was still in flight)" } else { "" };
            let detail = format!("the line {line}{why} calls for JSON-RPC error {code} {under}, but {problem}");
            let index = got.map_or(request.index, |a| a.index);
            found.push(facts.violation("wire_conformance", index, detail));
            continue;
        }
        if request.method != "initialize" || request.dup {
            continue;
        }
        let asked = message(&facts.trace.events[request.index]);
        let asked = asked.pointer("/params/protocolVersion").and_then(Value::as_str).unwrap_or("").to_string();
        let got = request.answered.as_ref();
        let version = got.and_then(|a| a.msg.pointer("/result/protocolVersion")).and_then(Value::as_str);
        let problem = match (got, version) {
            (None, _) if !due => continue,
            (None, _) => "it was never answered".to_string(),
            (Some(a), None) => format!("it was answered {}", a.msg),
            (Some(a), _) if a.at_ms > request.at_ms + bound => format!("it was answered only after {} ms", a.at_ms - request.at_ms),
            (Some(a), _) if relayer_inits.iter().any(|sent| sent.get("result") == a.msg.get("result")) => {
                "it was answered with the relayer's reply (forwarded, not answered locally)".to_string()
            }
            (Some(_), Some(v)) if SUPPORTED_VERSIONS.contains(&asked.as_str()) && v != asked => {
                format!("the client asked for {asked}, which the bridge supports, and got {v}")
            }
            (Some(_), Some(v)) if !SUPPORTED_VERSIONS.contains(&v) => format!("it negotiated {v}, which the bridge does not speak"),
            _ => {
                verdicts::held();
                continue;
            }
        };
        let index = got.map_or(request.index, |a| a.index);
        let id = request.id.as_deref().unwrap_or("");
        found.push(facts.violation("wire_conformance", index, format!("initialize id {id}: {problem}")));
    }
    capped(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predictions_follow_json_rpc() {
        let err = |code, id: Option<&str>| Expect::Error { code, id: id.map(str::to_string) };
        assert_eq!(predict(r#"{"jsonrpc":"2.0","id":1,"method""#), err(PARSE_ERROR, None));
        assert_eq!(predict("42"), err(INVALID_REQUEST, None));
        assert_eq!(predict("[]"), err(INVALID_REQUEST, None));
        assert_eq!(predict(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#), err(INVALID_REQUEST, None));
        assert_eq!(predict(r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#), err(INVALID_REQUEST, Some("\"a\"")));
        assert_eq!(predict(r#"{"id":3,"method":"ping"}"#), err(INVALID_REQUEST, Some("3")));
        assert_eq!(predict(r#"{"jsonrpc":"2.0","id":3}"#), err(INVALID_REQUEST, Some("3")));
        assert_eq!(predict(r#"{"jsonrpc":"2.0","id":null}"#), err(INVALID_REQUEST, None));
        assert_eq!(predict(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#), err(INVALID_REQUEST, None));
        assert_eq!(predict(r#"{"jsonrpc":"2.0","id":-4,"method":7}"#), err(INVALID_REQUEST, Some("-4")));
        assert_eq!(predict(r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#), Expect::Silent);
        assert_eq!(predict(r#"{"jsonrpc":"2.0","id":"7","result":{}}"#), Expect::Silent);
        let request = Expect::Request { id: "9007199254741000".into(), method: "ping".into() };
        assert_eq!(predict(r#"{"jsonrpc":"2.0","id":9007199254741000,"method":"ping"}"#), request);
    }
}
