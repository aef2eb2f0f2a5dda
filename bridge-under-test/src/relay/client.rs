//! A scripted MCP client (an IDE stand-in): writes the script's messages to the bridge's stdin at
//! their virtual times and records every line it reads back.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

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
}

/// An operation at a virtual time, with the JSON-RPC id it uses (ids may repeat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub at_ms: u64,
    pub id: u64,
    /// Send the id as a string (`"r7"`) rather than a number.
    #[serde(default)]
    pub string_id: bool,
    pub op: Op,
}

impl Step {
    /// The id as it goes on the wire.
    pub fn wire_id(&self) -> Value {
        if self.string_id {
            json!(format!("r{}", self.id))
        } else {
            json!(self.id)
        }
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
        !matches!(self, Op::Initialized | Op::Malformed)
    }
}

/// Ids the client is waiting on.
#[derive(Default)]
struct Owed {
    ids: RefCell<BTreeSet<String>>,
    changed: Notify,
}

impl Owed {
    fn settle(&self, line: &str) {
        let msg: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        if let Some(id) = msg.get("id").filter(|_| msg.get("method").is_none()) {
            self.ids.borrow_mut().remove(&id.to_string());
            self.changed.notify_waiters();
        }
    }

    async fn wait_free(&self, id: &str) {
        loop {
            let changed = self.changed.notified();
            if !self.ids.borrow().contains(id) {
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
}

/// Run the script. `close_stdin` closes stdin early (a fault: the IDE went away mid-call);
/// `seed` decides where lines are cut into several writes.
pub async fn run(
    script: ClientScript,
    ends: ClientEnds,
    close_stdin: Rc<Notify>,
    seed: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut rng = SimRng::new(seed);
    let ClientEnds { mut stdin, stdout } = ends;
    let owed = Rc::new(Owed::default());
    let reader_owed = owed.clone();
    let reader = tokio::task::spawn_local(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            emit!(kind::MCP_RECV, msg = %line);
            reader_owed.settle(&line);
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
        if step.op.expects_reply() {
            // A client never reuses an id that is still in flight: wait for its answer.
            let id = step.wire_id().to_string();
            tokio::select! {
                () = owed.wait_free(&id) => {}
                () = close_stdin.notified() => { reason = "fault"; break 'script; }
            }
            owed.ids.borrow_mut().insert(id);
        }
        let line = step.line(action);
        emit!(kind::MCP_SEND, msg = %line, malformed = matches!(step.op, Op::Malformed));
        stdio::write_chopped(&mut stdin, format!("{line}\n").as_bytes(), &mut rng).await?;
    }
    if reason == "end" {
        tokio::select! {
            () = tokio::time::sleep_until(at(script.end_at_ms)) => {}
            () = close_stdin.notified() => reason = "fault",
        }
    }
    emit!(kind::CLIENT_EOF, reason);
    stdin.shutdown().await?;
    drop(stdin);
    reader.await?;
    Ok(())
}
