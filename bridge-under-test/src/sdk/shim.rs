//! What the bridge puts between the client's stdio and rmcp's stdio server: checks rmcp 3.11.0
//! does not make (docs/findings.md), each defect's own off under its switch so its token replays
//! it. A line that is JSON but no message rmcp can read is answered here, with its id; a request
//! whose id is still in flight is refused here. And rmcp never sees an id twice: each request
//! reaches it under an id of the bridge's own, unique in the session, and its answer goes back
//! under the client's. rmcp keeps a request's cancellation token by id (src/service.rs:1652) and
//! takes it away with the first answer of that id (`:1568`): a client that cancels a call and
//! reuses its id at once had the cancelled call's answer written for the new request, and the
//! new request's answer dropped as "response for cancelled request" (sdk soak,
//! `v1.sdk.none.221932b8c51d5232`). Everything else passes as written.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use futures_util::FutureExt;
use tokio::sync::mpsc;

use super::SdkBugs;

/// The client's requests rmcp has not answered yet: the id rmcp knows each by → the client's id.
#[derive(Debug, Default)]
pub struct Flights {
    next: u64,
    ids: BTreeMap<String, Value>,
}

impl Flights {
    /// The id rmcp knows the client's request `id` by, while it is in flight.
    fn rmcp_id(&self, id: &Value) -> Option<String> {
        self.ids.iter().find(|(_, client)| *client == id).map(|(ours, _)| ours.clone())
    }

    /// A fresh id for rmcp: a string no id of ours repeats, and the client's never take.
    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("sdk-bridge:{}", self.next)
    }
}

type InFlight = Arc<Mutex<Flights>>;

/// What to do with one line from the client.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Hand rmcp this line (the client's, its request id or the id its cancellation names
    /// replaced by rmcp's).
    Pass(String),
    /// Answer it with this line instead.
    Answer(String),
}

fn lock(in_flight: &InFlight) -> std::sync::MutexGuard<'_, Flights> {
    in_flight.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A JSON-RPC id as MCP allows it (a string or an integer), else `null` (none).
fn valid_id(line: &Value) -> Value {
    match line.get("id") {
        Some(id @ Value::String(_)) => id.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
        _ => Value::Null,
    }
}

/// An invalid-request error naming `id`, or no id (as the MCP schema has it, which allows no
/// `null`) when the line had none MCP accepts.
fn invalid_request(id: Value) -> String {
    let mut answer = json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid request"}});
    if !id.is_null() {
        answer["id"] = id;
    }
    answer.to_string()
}

/// Judge one line from the client, noting a request as in flight when it passes.
pub fn judge(line: &str, bugs: SdkBugs, in_flight: &InFlight) -> Verdict {
    let pass = || Verdict::Pass(line.to_string());
    let Ok(mut value) = serde_json::from_str::<Value>(line) else { return pass() };
    if serde_json::from_value::<ClientJsonRpcMessage>(value.clone()).is_err() {
        return if bugs.invalid_request_without_id { pass() } else { Verdict::Answer(invalid_request(valid_id(&value))) };
    }
    let is_request = value.get("method").is_some() && value.get("id").is_some();
    let mut flights = lock(in_flight);
    if !is_request {
        // A cancellation names the request by rmcp's id, and frees the client's: rmcp writes no
        // answer for a request the client cancelled.
        if value.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            let named = value.pointer("/params/requestId").cloned().unwrap_or(Value::Null);
            if let Some(ours) = flights.rmcp_id(&named) {
                flights.ids.remove(&ours);
                value["params"]["requestId"] = Value::String(ours);
                return Verdict::Pass(value.to_string());
            }
        }
        return pass();
    }
    let id = valid_id(&value);
    let ours = match flights.rmcp_id(&id) {
        None => flights.fresh(),
        // rmcp's own handling of a reused id, under the switch: the same id twice.
        Some(ours) if bugs.in_flight_id_reuse => ours,
        Some(_) => return Verdict::Answer(invalid_request(id)),
    };
    flights.ids.insert(ours.clone(), id);
    value["id"] = Value::String(ours);
    Verdict::Pass(value.to_string())
}

/// An answer rmcp wrote, under the client's id, ending its flight; `None` for an answer to a
/// request the client cancelled (rmcp drops those itself, unless it wrote it as the cancellation
/// came). Every other line as written.
pub fn answered(line: String, in_flight: &InFlight) -> Option<String> {
    let Ok(mut value) = serde_json::from_str::<Value>(&line) else { return Some(line) };
    let Some(ours) = value.get("id").filter(|_| value.get("method").is_none()).and_then(Value::as_str) else {
        return Some(line);
    };
    let ours = ours.to_string();
    let client = lock(in_flight).ids.remove(&ours)?;
    // The line as rmcp wrote it, its field order kept: rmcp writes `jsonrpc`, then `id`, so the
    // first `"id":` with our id is the answer's own.
    let written = format!("\"id\":{}", Value::String(ours));
    if line.contains(&written) {
        return Some(line.replacen(&written, &format!("\"id\":{client}"), 1));
    }
    value["id"] = client;
    Some(value.to_string())
}

/// Copy the client's lines to rmcp (`to_rmcp`) through [`judge`], answering refused ones on
/// `out`; ends (closing rmcp's stdin) at the client's EOF.
pub async fn inbound(stdin: DuplexStream, mut to_rmcp: DuplexStream, out: mpsc::UnboundedSender<String>, bugs: SdkBugs, in_flight: InFlight) {
    let mut lines = BufReader::new(stdin).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match judge(&line, bugs, &in_flight) {
            Verdict::Pass(line) => {
                if to_rmcp.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                    break;
                }
            }
            Verdict::Answer(answer) => {
                let _ = out.send(answer);
            }
        }
    }
    let _ = to_rmcp.shutdown().await;
}

/// Copy rmcp's lines to `out`, ending their ids' flight. Lines rmcp writes together (in one
/// turn of the runtime: the same virtual instant) go out as a batch with its answers in id
/// order: rmcp 3.11.0 fails the requests pending on a re-initialized session by iterating a
/// `HashSet` (src/transport/streamable_http_client.rs:865-866), whose order is random per
/// process, and that order would otherwise reach the client's stdout and the trace.
pub async fn outbound(from_rmcp: DuplexStream, out: mpsc::UnboundedSender<String>, in_flight: InFlight) {
    let mut lines = BufReader::new(from_rmcp).lines();
    let mut open = true;
    while open {
        let Ok(Some(first)) = lines.next_line().await else { break };
        let mut batch = vec![first];
        // Let every task the same event woke write its line first.
        for _ in 0..BATCH_YIELDS {
            tokio::task::yield_now().await;
        }
        // `next_line` is cancel safe: a line not complete yet stays buffered.
        while let Some(next) = lines.next_line().now_or_never() {
            match next {
                Ok(Some(line)) => batch.push(line),
                _ => {
                    open = false;
                    break;
                }
            }
        }
        let mut batch: Vec<String> = batch.into_iter().filter_map(|line| answered(line, &in_flight)).collect();
        answers_in_id_order(&mut batch);
        for line in batch {
            if out.send(line).is_err() {
                return;
            }
        }
    }
}

/// How often the outbound copy yields before taking what rmcp wrote at the same instant.
const BATCH_YIELDS: usize = 8;

/// Put the answers (lines with an id and no method) of a batch in id order, in the places
/// answers held; every other line keeps its place.
pub fn answers_in_id_order(batch: &mut [String]) {
    let answer_id = |line: &String| -> Option<String> {
        let value = serde_json::from_str::<Value>(line).ok()?;
        value.get("method").is_none().then(|| value.get("id").map(Value::to_string)).flatten()
    };
    let places: Vec<usize> = (0..batch.len()).filter(|&i| answer_id(&batch[i]).is_some()).collect();
    let mut answers: Vec<String> = places.iter().map(|&i| batch[i].clone()).collect();
    answers.sort_by_key(|line| answer_id(line));
    for (place, answer) in places.into_iter().zip(answers) {
        batch[place] = answer;
    }
}

/// Write every line to the client's stdout until all senders are gone.
pub async fn write_out(mut stdout: DuplexStream, mut lines: mpsc::UnboundedReceiver<String>) {
    while let Some(line) = lines.recv().await {
        if stdout.write_all(format!("{line}\n").as_bytes()).await.is_err() {
            break;
        }
    }
    let _ = stdout.shutdown().await;
}

/// A fresh in-flight map.
pub fn in_flight() -> InFlight {
    InFlight::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_answers_what_rmcp_answers_without_an_id_and_refuses_reuse_in_flight() {
        let (bugs, flight) = (SdkBugs::default(), in_flight());
        let answer = judge(r#"{"id":4,"jsonrpc":"2.0","method":7}"#, bugs, &flight);
        assert_eq!(answer, Verdict::Answer(invalid_request(json!(4))));
        assert_eq!(judge(r#"{"id":true,"jsonrpc":"2.0","method":"ping"}"#, bugs, &flight), Verdict::Answer(invalid_request(Value::Null)));
        assert_eq!(judge("not json", bugs, &flight), Verdict::Pass("not json".into()));
        let ping = r#"{"id":"a","jsonrpc":"2.0","method":"ping"}"#;
        assert_eq!(judge(ping, bugs, &flight), Verdict::Pass(r#"{"id":"sdk-bridge:1","jsonrpc":"2.0","method":"ping"}"#.into()));
        assert_eq!(judge(ping, bugs, &flight), Verdict::Answer(invalid_request(json!("a"))));
        let back = answered(r#"{"jsonrpc":"2.0","id":"sdk-bridge:1","result":{}}"#.into(), &flight);
        assert_eq!(back.as_deref(), Some(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#));
        assert_eq!(judge(ping, bugs, &flight), Verdict::Pass(r#"{"id":"sdk-bridge:2","jsonrpc":"2.0","method":"ping"}"#.into()));
        let mut off = SdkBugs::default();
        off.enable("invalid_request_without_id").unwrap();
        off.enable("in_flight_id_reuse").unwrap();
        let invalid = r#"{"id":4,"jsonrpc":"2.0","method":7}"#;
        assert_eq!(judge(invalid, off, &flight), Verdict::Pass(invalid.into()));
        // Under the switch, rmcp sees the reused id twice, as it would without the shim.
        assert_eq!(judge(ping, off, &flight), Verdict::Pass(r#"{"id":"sdk-bridge:2","jsonrpc":"2.0","method":"ping"}"#.into()));
    }

    // Soak token v1.sdk.none.221932b8c51d5232: the client cancelled call 1 and sent another
    // request 1 at once. rmcp, which keys a request's cancellation token by id, wrote the
    // cancelled call's answer for the new request and dropped the new request's answer. Under ids
    // of the bridge's own, the two never meet in rmcp: the cancellation names the first, and an
    // answer to it (were rmcp to write one) goes nowhere.
    #[test]
    fn a_request_reusing_a_cancelled_id_reaches_rmcp_under_a_fresh_id() {
        let (bugs, flight) = (SdkBugs::default(), in_flight());
        let call = r#"{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"name":"remember"}}"#;
        let Verdict::Pass(first) = judge(call, bugs, &flight) else { panic!("the call passes") };
        assert!(first.contains(r#""id":"sdk-bridge:1""#), "{first}");
        let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
        let Verdict::Pass(cancel) = judge(cancel, bugs, &flight) else { panic!("the cancellation passes") };
        assert!(cancel.contains(r#""requestId":"sdk-bridge:1""#), "it names rmcp's id: {cancel}");
        let list = r#"{"id":1,"jsonrpc":"2.0","method":"tools/list"}"#;
        let Verdict::Pass(second) = judge(list, bugs, &flight) else { panic!("the id is free again") };
        assert!(second.contains(r#""id":"sdk-bridge:2""#), "{second}");
        assert_eq!(answered(r#"{"jsonrpc":"2.0","id":"sdk-bridge:1","error":{"code":-1,"message":"cancelled"}}"#.into(), &flight), None);
        let reply = answered(r#"{"jsonrpc":"2.0","id":"sdk-bridge:2","result":{"tools":[]}}"#.into(), &flight);
        assert_eq!(reply.as_deref(), Some(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#));
        // A cancellation naming nothing in flight, a server's request and a client's answer to
        // one pass as written.
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#,
            r#"{"jsonrpc":"2.0","id":"srv-1","result":{}}"#,
        ] {
            assert_eq!(judge(line, bugs, &flight), Verdict::Pass(line.into()));
        }
        let ping = r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#;
        assert_eq!(answered(ping.into(), &flight).as_deref(), Some(ping));
    }

    #[test]
    fn a_batch_puts_its_answers_in_id_order_and_leaves_other_lines_in_place() {
        let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#.to_string();
        let answer = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        let mut batch = vec![answer("6"), note.clone(), answer("2"), answer("\"r1\"")];
        answers_in_id_order(&mut batch);
        assert_eq!(batch, vec![answer("\"r1\""), note, answer("2"), answer("6")]);
    }
}
