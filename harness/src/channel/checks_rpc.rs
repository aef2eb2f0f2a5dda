//! The channel checker that judges every line the agent reads against JSON-RPC 2.0 and what
//! the agent's own lines call for ([`super::super::rpc::classify`]): the bridge's own error
//! replies — their codes, their ids, their promptness — and silence for notifications and
//! responses.

use std::collections::{BTreeMap, VecDeque};

use bridge_under_test::events::kind;
use serde_json::Value;

use super::super::rpc::{is_request_id, Input};
use super::{Facts, PERMISSION};
use crate::check::capped;
use crate::trace::Violation;
use crate::verdicts;

/// A reply owed: the line's event index and time, and the error code it calls for (`None`: a
/// request the bridge serves, owed a result).
type Owed = (usize, u64, Option<i64>);

/// Every line the agent reads is a JSON-RPC 2.0 message (`jsonrpc` "2.0"; a response has an
/// `id` that is an MCP `RequestId` or none, and exactly one of `result` and `error`, an error a
/// numeric `code` and a string `message`), and every response answers a line the agent wrote
/// that was owed one, as that line calls for: the error JSON-RPC gives a malformed line or an
/// unknown method or tool (its code, the line's `id` exactly when it had a valid one), within the
/// scheduling slack; a result for a well-formed request. Nothing answers a notification or a
/// response, and nothing a line calls for is left unwritten. The bridge sends the agent no
/// request and no notification but its decisions.
pub fn replies_follow_jsonrpc(facts: &Facts<'_>) -> Vec<Violation> {
    let mut owed: BTreeMap<String, Owed> = BTreeMap::new();
    let mut anonymous: VecDeque<Owed> = VecDeque::new();
    let mut found = Vec::new();
    let slack = facts.slack_ms;
    for (index, event) in facts.agent_events() {
        if let Some(input) = facts.input(index) {
            match input {
                Input::Error { id: Some(id), code } => {
                    owed.insert(id.to_string(), (index, event.at_ms, Some(*code)));
                }
                Input::Error { id: None, code } => {
                    anonymous.push_back((index, event.at_ms, Some(*code)));
                }
                Input::Request { id, .. } => {
                    owed.insert(id.to_string(), (index, event.at_ms, None));
                }
                Input::Notification { .. } | Input::Response => {}
            }
            continue;
        }
        if event.kind != kind::MCP_RECV {
            continue;
        }
        let detail = match facts.json(index) {
            Some(msg) => judge(msg, event.at_ms, slack, &mut owed, &mut anonymous),
            None => Some(format!("the agent read a line that is not JSON: {}", event.text("msg"))),
        };
        if let Some(detail) = verdicts::judging(detail) {
            found.push(facts.violation("replies_follow_jsonrpc", index, detail));
        }
    }
    let unwritten = owed
        .values()
        .filter(|(_, _, code)| code.is_some())
        .chain(anonymous.iter());
    for (index, at_ms, code) in unwritten {
        let code = code.unwrap_or(0);
        let detail = format!("the line the agent wrote at {at_ms} ms calls for error {code}; the bridge never wrote it");
        found.push(facts.violation("replies_follow_jsonrpc", *index, detail));
    }
    capped(found)
}

/// One line the agent read: what is wrong with it, if anything.
fn judge(
    msg: &Value,
    at_ms: u64,
    slack: u64,
    owed: &mut BTreeMap<String, Owed>,
    anonymous: &mut VecDeque<Owed>,
) -> Option<String> {
    let Some(obj) = msg.as_object() else {
        return Some(format!("the agent read {msg}, which is no JSON-RPC object"));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(format!("the agent read {msg}, whose jsonrpc is not \"2.0\""));
    }
    if let Some(method) = obj.get("method") {
        let decision = method.as_str() == Some(PERMISSION) && !obj.contains_key("id");
        return (!decision).then(|| format!("the bridge sent the agent {msg}: it makes no request and no notification but its decisions"));
    }
    let id = obj.get("id");
    if let Some(id) = id.filter(|id| !is_request_id(id)) {
        return Some(format!("a reply with id {id}, which is no RequestId (a string or an integer)"));
    }
    let (result, error) = (obj.get("result"), obj.get("error"));
    let code = match (result, error) {
        (Some(_), None) => None,
        (None, Some(error)) => {
            let code = error.get("code").and_then(Value::as_i64);
            let message = error.get("message").and_then(Value::as_str);
            let (Some(code), Some(_)) = (code, message) else {
                return Some(format!("an error without an integer code and a string message: {msg}"));
            };
            Some(code)
        }
        _ => return Some(format!("a reply with not exactly one of result and error: {msg}")),
    };
    let owing = match id {
        Some(id) => owed.remove(&id.to_string()),
        None => anonymous.pop_front(),
    };
    let shown = id.map_or("no id".to_string(), |id| format!("id {id}"));
    let got = code.map_or("a result".to_string(), |c| format!("error {c}"));
    let Some((_, sent_ms, want)) = owing else {
        return Some(format!("{got} with {shown}, but no line the agent wrote is owed one (a notification, a response, or already answered)"));
    };
    if code != want {
        let want = want.map_or("a result".to_string(), |c| format!("error {c}"));
        return Some(format!("{got} with {shown} for the line the agent wrote at {sent_ms} ms, which calls for {want}"));
    }
    (want.is_some() && at_ms > sent_ms + slack).then(|| {
        format!("error {} with {shown} came {} ms after its line; the bridge writes it at once", want.unwrap_or(0), at_ms - sent_ms)
    })
}
