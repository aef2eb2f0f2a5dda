//! The agent (a Claude Code stand-in): an MCP client on the bridge's stdio. It initialises,
//! sends permission requests at their virtual times, reads the pending lists, waits for events,
//! and records every line it reads back (among them the operator's decisions).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Notify};

use super::wire;
use crate::emit;
use crate::events::kind;
use crate::seam;
use crate::stdio::ClientEnds;

/// One thing the agent does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AgentOp {
    /// `notifications/claude/channel/permission_request`.
    PermissionRequest {
        request_id: String,
        tool_name: String,
    },
    /// A read: the `list_pending` tool.
    ListPending,
    /// `waitForEvent`: the `wait_for_event` tool with a raw (unclamped) timeout.
    WaitForEvent { timeout_ms: i64, limit: u64 },
    /// One line exactly as given (no newline in it): what a buggy or foreign peer may write —
    /// a truncated message, a batch, a bad envelope, an unknown method or tool, a response
    /// nobody asked for. The bridge owes each the reply JSON-RPC 2.0 gives it, or silence.
    Line { line: String },
}

/// An operation at a virtual time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStep {
    pub at_ms: u64,
    #[serde(flatten)]
    pub op: AgentOp,
}

/// What the agent does over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentScript {
    pub steps: Vec<AgentStep>,
    /// A read every this many ms, from the first period until the end (a polling UI).
    pub read_every_ms: Option<u64>,
    /// When the agent closes stdin.
    pub end_at_ms: u64,
}

/// Fault knobs: bursts of permission requests the harness injects between steps.
#[derive(Debug, Default)]
pub struct AgentKnobs {
    pub bursts: RefCell<VecDeque<Vec<String>>>,
    pub changed: Notify,
}

/// Lines to write, in order, with the id counter.
struct Out {
    tx: mpsc::UnboundedSender<String>,
    next_id: Cell<u64>,
}

impl Out {
    fn send(&self, msg: Value) {
        let _ = self.tx.send(msg.to_string());
    }

    fn call(&self, name: &str, arguments: Value) {
        let n = self.next_id.get();
        self.next_id.set(n + 1);
        // Request ids in both JSON-RPC forms: every third a string, the others numbers.
        let id = if n % 3 == 2 { json!(format!("call-{n}")) } else { json!(n) };
        self.send(wire::call_tool(id, name, arguments));
    }

    fn op(&self, op: &AgentOp) {
        match op {
            AgentOp::PermissionRequest {
                request_id,
                tool_name,
            } => {
                self.send(wire::permission_request(request_id, tool_name));
            }
            AgentOp::ListPending => self.call(wire::TOOL_LIST_PENDING, json!({})),
            AgentOp::WaitForEvent { timeout_ms, limit } => {
                self.call(
                    wire::TOOL_WAIT_FOR_EVENT,
                    json!({"timeout_ms": timeout_ms, "limit": limit}),
                );
            }
            AgentOp::Line { line } => {
                // One line per message: a newline inside would make two.
                let _ = self.tx.send(line.replace(['\n', '\r'], " "));
            }
        }
    }
}

/// Run the script, then close stdin and read until the bridge closes stdout.
pub async fn run(
    script: AgentScript,
    ends: ClientEnds,
    knobs: Rc<AgentKnobs>,
) -> Result<(), Box<dyn std::error::Error>> {
    let ClientEnds { stdin, stdout } = ends;
    let reader = tokio::task::spawn_local(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            emit!(kind::MCP_RECV, msg = %line);
        }
    });
    let (tx, rx) = mpsc::unbounded_channel();
    let writer = tokio::task::spawn_local(write_lines(stdin, rx));
    let out = Rc::new(Out {
        tx,
        next_id: Cell::new(1),
    });
    out.send(wire::initialize(0));
    out.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let start = seam::now();
    let at = move |ms: u64| start + std::time::Duration::from_millis(ms);
    let tasks = [
        tokio::task::spawn_local(steps(script.steps.clone(), out.clone(), start)),
        tokio::task::spawn_local(poll(
            script.read_every_ms,
            script.end_at_ms,
            out.clone(),
            start,
        )),
        tokio::task::spawn_local(bursts(knobs, out.clone())),
    ];
    tokio::time::sleep_until(at(script.end_at_ms)).await;
    for task in &tasks {
        task.abort();
    }
    drop((tasks, out));
    emit!(kind::CLIENT_EOF, reason = "end");
    writer.await?;
    reader.await?;
    Ok(())
}

/// Write each message as a line, recording it, until every sender is gone; then close stdin.
async fn write_lines(mut stdin: tokio::io::DuplexStream, mut rx: mpsc::UnboundedReceiver<String>) {
    while let Some(line) = rx.recv().await {
        emit!(kind::MCP_SEND, msg = %line);
        if stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .is_err()
        {
            break;
        }
    }
    let _ = stdin.shutdown().await;
}

async fn steps(steps: Vec<AgentStep>, out: Rc<Out>, start: seam::Instant) {
    for step in steps {
        tokio::time::sleep_until(start + std::time::Duration::from_millis(step.at_ms)).await;
        out.op(&step.op);
    }
}

async fn poll(every_ms: Option<u64>, end_at_ms: u64, out: Rc<Out>, start: seam::Instant) {
    let Some(every_ms) = every_ms.filter(|ms| *ms > 0) else {
        return;
    };
    let mut at_ms = every_ms;
    while at_ms < end_at_ms {
        tokio::time::sleep_until(start + std::time::Duration::from_millis(at_ms)).await;
        out.op(&AgentOp::ListPending);
        at_ms += every_ms;
    }
}

async fn bursts(knobs: Rc<AgentKnobs>, out: Rc<Out>) {
    loop {
        let changed = knobs.changed.notified();
        let burst = knobs.bursts.borrow_mut().pop_front();
        match burst {
            Some(ids) => {
                for id in ids {
                    out.op(&AgentOp::PermissionRequest {
                        request_id: id,
                        tool_name: "Bash".into(),
                    });
                }
            }
            None => changed.await,
        }
    }
}
