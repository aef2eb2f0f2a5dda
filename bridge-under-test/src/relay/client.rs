//! A scripted MCP client (an IDE stand-in): writes the script's messages to the bridge's stdin at
//! their virtual times and records every line it reads back.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;

use crate::emit;
use crate::events::kind;
use crate::seam;
use crate::rng::SimRng;
use crate::stdio::{self, ClientEnds};

/// The relayer's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    /// Fast read.
    Recall,
    /// A write: a side effect that must happen at most once.
    Remember,
    /// The slowest tool.
    Analyze,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Recall => "recall",
            Tool::Remember => "remember",
            Tool::Analyze => "analyze",
        }
    }
}

/// One thing the client does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Initialize,
    /// The `notifications/initialized` notification.
    Initialized,
    ListTools,
    Ping,
    /// `tools/call`; the tool works for `work_ms` before answering.
    Call { tool: Tool, work_ms: u64 },
    /// A line that is not JSON.
    Malformed,
    /// A line that is JSON but not a valid JSON-RPC 2.0 message (MCP speaks no batches).
    Invalid { form: InvalidForm },
    /// A client notification (`Cancelled` names the step's id as the request it cancels).
    Notify { note: Note },
}

/// Ways a JSON line fails to be a JSON-RPC 2.0 message an MCP peer accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidForm {
    /// A `ping` request with `"jsonrpc": "1.0"`.
    WrongVersion,
    /// A `ping` request without the `jsonrpc` member.
    NoVersion,
    /// `{"jsonrpc": "2.0", "id": X}`: neither a request nor a response.
    NoMethod,
    /// `{"jsonrpc": "2.0", "id": null}`.
    NullId,
    /// A request whose `method` is a number.
    MethodNotString,
    /// A `ping` request whose id is `true` (MCP ids are strings or integers).
    BoolId,
    /// A JSON number, not an object.
    NonObject,
    /// A batch of one `ping` (MCP 2025-11-25 has no batches).
    Batch,
    /// An empty batch.
    EmptyBatch,
}

impl InvalidForm {
    pub const ALL: &'static [InvalidForm] = &[
        Self::WrongVersion,
        Self::NoVersion,
        Self::NoMethod,
        Self::NullId,
        Self::MethodNotString,
        Self::BoolId,
        Self::NonObject,
        Self::Batch,
        Self::EmptyBatch,
    ];

    /// Whether the line carries a valid id the error reply must echo.
    pub fn carries_id(self) -> bool {
        matches!(self, Self::WrongVersion | Self::NoVersion | Self::NoMethod | Self::MethodNotString)
    }
}

/// The `_meta` key naming the step a client notification was written at.
pub const NOTE_META: &str = "sim.client/note";

/// The `params._meta` key that names the client's own id of a request forwarded under another.
pub const CLIENT_ID_META: &str = "sim.relay/clientId";

/// The step a client notification names in its `_meta`, if it is one.
pub fn note_step(msg: &Value) -> Option<&Value> {
    msg.pointer("/params/_meta")?.get(NOTE_META)
}

/// The notifications a client sends besides `notifications/initialized`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Note {
    Cancelled,
    Progress,
    RootsListChanged,
}

impl Note {
    pub const ALL: &'static [Note] = &[Self::Cancelled, Self::Progress, Self::RootsListChanged];

    pub fn method(self) -> &'static str {
        match self {
            Self::Cancelled => "notifications/cancelled",
            Self::Progress => "notifications/progress",
            Self::RootsListChanged => "notifications/roots/list_changed",
        }
    }
}

/// The JSON-RPC form of a step's id: every form the protocol allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdForm {
    /// `7`
    #[default]
    Int,
    /// `"r7"`
    Str,
    /// `"7"`: a string that looks like an integer (distinct from `7`).
    NumericStr,
    /// `9007199254741000`: beyond 2^53, where a double loses integers.
    Large,
    /// `-8`
    Negative,
    /// `0`, whatever the step's number.
    Zero,
}

impl IdForm {
    pub const ALL: &'static [IdForm] = &[Self::Int, Self::Str, Self::NumericStr, Self::Large, Self::Negative, Self::Zero];

    pub fn name(self) -> &'static str {
        match self {
            Self::Int => "int",
            Self::Str => "str",
            Self::NumericStr => "numeric_str",
            Self::Large => "large",
            Self::Negative => "negative",
            Self::Zero => "zero",
        }
    }

    /// The form of a wire id (for coverage).
    pub fn of(id: &Value) -> Option<IdForm> {
        match id {
            Value::String(s) if s.parse::<i64>().is_ok() => Some(Self::NumericStr),
            Value::String(_) => Some(Self::Str),
            Value::Number(n) if n.as_u64() == Some(0) => Some(Self::Zero),
            Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => Some(Self::Negative),
            Value::Number(n) if n.as_u64().is_some_and(|n| n > LARGE_ID_BASE / 2) => Some(Self::Large),
            Value::Number(n) if n.as_u64().is_some() => Some(Self::Int),
            _ => None,
        }
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Large ids start just past 2^53.
pub const LARGE_ID_BASE: u64 = (1 << 53) + 1;

/// An operation at a virtual time, with the JSON-RPC id it uses (ids may repeat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub at_ms: u64,
    pub id: u64,
    /// Send the id as a string (`"r7"`) rather than a number.
    #[serde(default)]
    pub string_id: bool,
    /// The id's JSON-RPC form (ignored when `string_id`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub id_form: IdForm,
    /// Send at once, even while an earlier request of this id is still owed (a client that
    /// breaks the protocol's uniqueness rule).
    #[serde(default, skip_serializing_if = "is_default")]
    pub eager: bool,
    /// Send only once every request sent before it has been answered, as an SDK client sends
    /// `notifications/initialized` only after reading the `initialize` result (the live
    /// engine's clients do; the simulation's scripts send at their times).
    #[serde(default, skip_serializing_if = "is_default")]
    pub after_answers: bool,
    pub op: Op,
}

impl Step {
    /// The id as it goes on the wire.
    pub fn wire_id(&self) -> Value {
        if self.string_id {
            return json!(format!("r{}", self.id));
        }
        match self.id_form {
            IdForm::Int => json!(self.id),
            IdForm::Str => json!(format!("r{}", self.id)),
            IdForm::NumericStr => json!(self.id.to_string()),
            IdForm::Large => json!(LARGE_ID_BASE + self.id),
            IdForm::Negative => json!(-(self.id as i64) - 1),
            IdForm::Zero => json!(0),
        }
    }

    /// A step at `at_ms` with id `id` in its plain integer form.
    pub fn new(at_ms: u64, id: u64, op: Op) -> Self {
        Self { at_ms, id, string_id: false, id_form: IdForm::Int, eager: false, after_answers: false, op }
    }

    /// The line this step writes. `action` names the user action (unique per step), so the
    /// relayer can count side effects per action.
    pub fn line(&self, action: usize) -> String {
        let id = self.wire_id();
        let msg = match &self.op {
            Op::Malformed => return format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\""),
            Op::Initialize => request(id, "initialize", json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "sim-client", "version": "1.0.0"}
            })),
            Op::Initialized => json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            Op::ListTools => request(id, "tools/list", json!({})),
            Op::Ping => json!({"jsonrpc": "2.0", "id": id, "method": "ping"}),
            Op::Call { tool, work_ms } => request(id, "tools/call", json!({
                "name": tool.name(),
                "arguments": {"action": format!("a{action}"), "work_ms": work_ms}
            })),
            Op::Invalid { form } => match form {
                InvalidForm::WrongVersion => json!({"jsonrpc": "1.0", "id": id, "method": "ping"}),
                InvalidForm::NoVersion => json!({"id": id, "method": "ping"}),
                InvalidForm::NoMethod => json!({"jsonrpc": "2.0", "id": id}),
                InvalidForm::NullId => json!({"jsonrpc": "2.0", "id": null}),
                InvalidForm::MethodNotString => json!({"jsonrpc": "2.0", "id": id, "method": 7}),
                InvalidForm::BoolId => json!({"jsonrpc": "2.0", "id": true, "method": "ping"}),
                InvalidForm::NonObject => json!(42),
                InvalidForm::Batch => json!([{"jsonrpc": "2.0", "id": id, "method": "ping"}]),
                InvalidForm::EmptyBatch => json!([]),
            },
            // Every notification carries its step in `_meta` (which MCP lets any notification
            // carry and a bridge forwards untouched), so the relayer's log names which one
            // arrived: the order the client wrote them in is judged against it.
            Op::Notify { note } => {
                let meta = json!({ NOTE_META: action });
                match note {
                    Note::Cancelled => json!({"jsonrpc": "2.0", "method": note.method(), "params": {"requestId": id, "reason": "the user cancelled", "_meta": meta}}),
                    Note::Progress => json!({"jsonrpc": "2.0", "method": note.method(), "params": {"progressToken": format!("p{action}"), "progress": 1, "total": 2, "_meta": meta}}),
                    Note::RootsListChanged => json!({"jsonrpc": "2.0", "method": note.method(), "params": {"_meta": meta}}),
                }
            }
        };
        msg.to_string()
    }
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

impl Op {
    /// Whether the bridge owes a reply carrying the step's id.
    pub fn expects_reply(&self) -> bool {
        match self {
            Op::Initialized | Op::Malformed | Op::Notify { .. } => false,
            Op::Invalid { form } => form.carries_id(),
            _ => true,
        }
    }

    /// Whether the line is not a valid JSON-RPC message (the schema does not apply to it).
    pub fn malformed(&self) -> bool {
        matches!(self, Op::Malformed | Op::Invalid { .. })
    }
}

/// Ids the client is waiting on, with how many answers each still owes (an eager step may send
/// an id that is still owed).
#[derive(Default)]
struct Owed {
    ids: RefCell<BTreeMap<String, usize>>,
    changed: Notify,
}

impl Owed {
    fn settle(&self, line: &str) {
        let msg: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        if let Some(id) = msg.get("id").filter(|_| msg.get("method").is_none()) {
            let mut ids = self.ids.borrow_mut();
            let key = id.to_string();
            if let Some(count) = ids.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    ids.remove(&key);
                }
            }
            drop(ids);
            self.changed.notify_waiters();
        }
    }

    fn owe(&self, id: String) {
        *self.ids.borrow_mut().entry(id).or_default() += 1;
    }

    async fn wait_empty(&self) {
        loop {
            let changed = self.changed.notified();
            if self.ids.borrow().is_empty() {
                return;
            }
            changed.await;
        }
    }

    async fn wait_free(&self, id: &str) {
        loop {
            let changed = self.changed.notified();
            if !self.ids.borrow().contains_key(id) {
                return;
            }
            changed.await;
        }
    }
}

/// What the client does over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientScript {
    pub steps: Vec<Step>,
    /// When the client closes stdin if nothing closed it earlier.
    pub end_at_ms: u64,
    /// Every request carries its own id in `params._meta` (the key a rewriting bridge uses),
    /// so the server can tell which client request a bridge forwarded under an id of its own
    /// (an SDK client inside the bridge numbers its requests afresh). The live engine's clients
    /// do; MCP lets any request carry `_meta`, and a bridge forwards params untouched.
    #[serde(default, skip_serializing_if = "is_default")]
    pub stamp_ids: bool,
    /// The client declares the `roots` capability and answers what a server asks it (`ping`,
    /// `roots/list`; anything else is a method it does not have), as an IDE does. The live
    /// engine's clients do; in the simulation no server asks anything.
    #[serde(default, skip_serializing_if = "is_default")]
    pub answers_server: bool,
}

/// The roots the client offers when a server asks (`roots/list`).
pub fn roots() -> Value {
    json!({"roots": [{"uri": "file:///work/project", "name": "project"}]})
}

/// The client's answer to a request the server sent it (`None` for anything but a request).
pub fn answer_server(msg: &Value) -> Option<Value> {
    let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id")) else { return None };
    let body = match method {
        "ping" => json!({"result": {}}),
        "roots/list" => json!({"result": roots()}),
        _ => json!({"error": {"code": -32601, "message": format!("Method not found: {method}")}}),
    };
    let mut answer = json!({"jsonrpc": "2.0", "id": id});
    if let (Some(answer), Some(body)) = (answer.as_object_mut(), body.as_object()) {
        answer.extend(body.clone());
    }
    Some(answer)
}

/// An `initialize` line that declares the `roots` capability.
fn declaring_roots(line: String) -> String {
    let Ok(mut msg) = serde_json::from_str::<Value>(&line) else { return line };
    if msg.get("method").and_then(Value::as_str) != Some("initialize") {
        return line;
    }
    msg["params"]["capabilities"]["roots"] = json!({"listChanged": false});
    msg.to_string()
}

/// `line` with its id in `params._meta`, when it is a request.
fn stamped(line: String) -> String {
    let Ok(mut msg) = serde_json::from_str::<Value>(&line) else { return line };
    let Some(id) = msg.get("id").filter(|_| msg.get("method").is_some()).cloned() else { return line };
    if !msg.get("params").is_none_or(Value::is_object) {
        return line;
    }
    msg["params"]["_meta"][CLIENT_ID_META] = id;
    msg.to_string()
}

/// Run the script. `close_stdin` closes stdin early (a fault: the IDE went away mid-call);
/// `seed` decides where lines are cut into several writes.
pub async fn run(
    script: ClientScript,
    ends: ClientEnds,
    close_stdin: Arc<Notify>,
    seed: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut rng = SimRng::new(seed);
    let ClientEnds { stdin, stdout } = ends;
    // Shared with the reader, which answers the server's requests; an uncontended lock is ready
    // at once, so a client that never answers runs exactly as if it owned stdin alone.
    let stdin = Rc::new(futures_util::lock::Mutex::new(stdin));
    let owed = Rc::new(Owed::default());
    let reader_owed = owed.clone();
    let (reader_stdin, answers) = (stdin.clone(), script.answers_server);
    let mut reader_rng = SimRng::new(seed ^ 0x5e4e_e2a5);
    let reader = tokio::task::spawn_local(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            emit!(kind::MCP_RECV, msg = %line);
            reader_owed.settle(&line);
            let answer = serde_json::from_str::<Value>(&line).ok().filter(|_| answers).and_then(|msg| answer_server(&msg));
            if let Some(answer) = answer {
                let text = answer.to_string();
                emit!(kind::MCP_SEND, msg = %text, malformed = false);
                let mut stdin = reader_stdin.lock().await;
                if stdio::write_chopped(&mut stdin, format!("{text}\n").as_bytes(), &mut reader_rng).await.is_err() {
                    break;
                }
            }
        }
    });
    let start = seam::now();
    let at = |ms: u64| start + std::time::Duration::from_millis(ms);
    let mut reason = "end";
    'script: for (action, step) in script.steps.iter().enumerate() {
        tokio::select! {
            () = tokio::time::sleep_until(at(step.at_ms)) => {}
            () = close_stdin.notified() => { reason = "fault"; break 'script; }
        }
        if step.after_answers {
            tokio::select! {
                () = owed.wait_empty() => {}
                () = close_stdin.notified() => { reason = "fault"; break 'script; }
            }
        }
        if step.op.expects_reply() {
            // A client never reuses an id that is still in flight: wait for its answer.
            let id = step.wire_id().to_string();
            if !step.eager {
                tokio::select! {
                    () = owed.wait_free(&id) => {}
                    () = close_stdin.notified() => { reason = "fault"; break 'script; }
                }
            }
            owed.owe(id);
        }
        let line = step.line(action);
        let line = if script.stamp_ids && !step.op.malformed() { stamped(line) } else { line };
        let line = if script.answers_server { declaring_roots(line) } else { line };
        emit!(kind::MCP_SEND, msg = %line, malformed = step.op.malformed());
        stdio::write_chopped(&mut *stdin.lock().await, format!("{line}\n").as_bytes(), &mut rng).await?;
    }
    if reason == "end" {
        tokio::select! {
            () = tokio::time::sleep_until(at(script.end_at_ms)) => {}
            () = close_stdin.notified() => reason = "fault",
        }
    }
    emit!(kind::CLIENT_EOF, reason);
    stdin.lock().await.shutdown().await?;
    // Closing stdin: the reader's handle stays until it ends, so end it through the lock's
    // owner (the reader answers nothing once stdin is shut down).
    drop(stdin);
    reader.await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_request_names_its_id_and_nothing_else_changes() {
        let call = r#"{"id":7,"jsonrpc":"2.0","method":"tools/call","params":{"name":"recall"}}"#;
        let msg: Value = serde_json::from_str(&stamped(call.to_string())).unwrap();
        assert_eq!(msg["params"]["_meta"][CLIENT_ID_META], json!(7));
        assert_eq!(msg["params"]["name"], json!("recall"));
        let ping: Value = serde_json::from_str(&stamped(r#"{"id":"p","jsonrpc":"2.0","method":"ping"}"#.into())).unwrap();
        assert_eq!(ping["params"]["_meta"][CLIENT_ID_META], json!("p"));
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(stamped(note.to_string()), note, "a notification has no id to name");
    }
}
