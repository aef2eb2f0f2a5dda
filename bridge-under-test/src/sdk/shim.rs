//! What the bridge puts between the client's stdio and rmcp's stdio server: two checks rmcp
//! 3.11.0 does not make (docs/findings.md), each off under its switch so the defect's token
//! replays it. A line that is JSON but no message rmcp can read is answered here, with its id;
//! a request whose id is still in flight is refused here. Everything else passes as written,
//! and every line rmcp writes passes back (its answers end their id's flight).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use futures_util::FutureExt;
use tokio::sync::mpsc;

use super::SdkBugs;

/// The ids of the client's requests rmcp has not answered yet (canonical JSON).
type InFlight = Arc<Mutex<BTreeSet<String>>>;

/// What to do with one line from the client.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Hand it to rmcp.
    Pass,
    /// Answer it with this line instead.
    Answer(String),
}

fn lock(in_flight: &InFlight) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
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

/// Judge one line from the client, noting a request's id as in flight when it passes.
pub fn judge(line: &str, bugs: SdkBugs, in_flight: &InFlight) -> Verdict {
    let Ok(value) = serde_json::from_str::<Value>(line) else { return Verdict::Pass };
    if serde_json::from_value::<ClientJsonRpcMessage>(value.clone()).is_err() {
        return if bugs.invalid_request_without_id { Verdict::Pass } else { Verdict::Answer(invalid_request(valid_id(&value))) };
    }
    let is_request = value.get("method").is_some() && value.get("id").is_some();
    if !is_request {
        // rmcp writes no answer for a request the client cancelled: its id is free again.
        if value.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            if let Some(id) = value.pointer("/params/requestId") {
                lock(in_flight).remove(&id.to_string());
            }
        }
        return Verdict::Pass;
    }
    let id = valid_id(&value).to_string();
    let fresh = lock(in_flight).insert(id.clone());
    if !fresh && !bugs.in_flight_id_reuse {
        return Verdict::Answer(invalid_request(valid_id(&value)));
    }
    Verdict::Pass
}

/// Note an answer rmcp wrote: its id is no longer in flight.
pub fn answered(line: &str, in_flight: &InFlight) {
    let Ok(value) = serde_json::from_str::<Value>(line) else { return };
    if value.get("method").is_none() {
        if let Some(id) = value.get("id") {
            lock(in_flight).remove(&id.to_string());
        }
    }
}

/// Copy the client's lines to rmcp (`to_rmcp`) through [`judge`], answering refused ones on
/// `out`; ends (closing rmcp's stdin) at the client's EOF.
pub async fn inbound(stdin: DuplexStream, mut to_rmcp: DuplexStream, out: mpsc::UnboundedSender<String>, bugs: SdkBugs, in_flight: InFlight) {
    let mut lines = BufReader::new(stdin).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match judge(&line, bugs, &in_flight) {
            Verdict::Pass => {
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
        answers_in_id_order(&mut batch);
        for line in batch {
            answered(&line, &in_flight);
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

/// A fresh in-flight set.
pub fn in_flight() -> InFlight {
    Arc::new(Mutex::new(BTreeSet::new()))
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
        assert_eq!(judge("not json", bugs, &flight), Verdict::Pass);
        let ping = r#"{"id":"a","jsonrpc":"2.0","method":"ping"}"#;
        assert_eq!(judge(ping, bugs, &flight), Verdict::Pass);
        assert_eq!(judge(ping, bugs, &flight), Verdict::Answer(invalid_request(json!("a"))));
        answered(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#, &flight);
        assert_eq!(judge(ping, bugs, &flight), Verdict::Pass);
        let mut off = SdkBugs::default();
        off.enable("invalid_request_without_id").unwrap();
        off.enable("in_flight_id_reuse").unwrap();
        assert_eq!(judge(r#"{"id":4,"jsonrpc":"2.0","method":7}"#, off, &flight), Verdict::Pass);
        assert_eq!(judge(ping, off, &flight), Verdict::Pass);
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
