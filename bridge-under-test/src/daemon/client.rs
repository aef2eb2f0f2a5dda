//! The CLI: the user's invocations, one after another. Each finds (or launches) the daemon,
//! sends one request per connection with the socket idle budget equal to the caller's deadline
//! (re-armed only by frames whose id matches), and after a transport failure restarts the daemon
//! and retries once. `operation_timeout` is final.

use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::config::{
    Rules, SocketBudget, POLL_MS, PROTOCOL_VERSION, READY_WAIT_MS, STATUS_TIMEOUT_MIN_MS,
    STOP_WAIT_MS,
};
use super::knobs::lock;
use super::machine::{Exit, Machine, Metadata};
use super::mcp::RESOURCE_URI;
use super::wire::{self, code, Line, Request};
use super::SERVER_NAME;
use crate::emit;
use crate::events::{host, kind};
use crate::seam::{self, TcpStream};

/// What the user asks the CLI to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Method {
    ListTools,
    /// `callTool` on a tool that works `work_ms`.
    CallTool {
        work_ms: u64,
    },
    ListResources,
    ReadResource,
    CloseServer,
}

impl Method {
    /// The daemon method name.
    pub fn name(&self) -> &'static str {
        match self {
            Method::ListTools => "listTools",
            Method::CallTool { .. } => "callTool",
            Method::ListResources => "listResources",
            Method::ReadResource => "readResource",
            Method::CloseServer => "closeServer",
        }
    }

    fn params(&self, timeout_ms: Option<u64>) -> Value {
        let mut params = match self {
            Method::ListTools => json!({"server": SERVER_NAME, "autoAuthorize": true}),
            Method::CallTool { work_ms } => {
                json!({"server": SERVER_NAME, "tool": "build", "args": {"work_ms": work_ms}})
            }
            Method::ReadResource => json!({"server": SERVER_NAME, "uri": RESOURCE_URI}),
            Method::ListResources | Method::CloseServer => json!({"server": SERVER_NAME}),
        };
        if let Some(timeout_ms) = timeout_ms {
            params["timeoutMs"] = json!(timeout_ms);
        }
        params
    }
}

/// One user invocation, started at `at_ms` or when the previous one ends, whichever is later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    pub at_ms: u64,
    pub method: Method,
    /// The call's `timeoutMs`; `None` leaves the default idle budget.
    pub timeout_ms: Option<u64>,
}

/// The CLI's knobs: caller deadlines a fault overrides, by action (1-based).
#[derive(Debug, Default)]
pub struct CliKnobs {
    pub deadlines: std::collections::BTreeMap<usize, u64>,
}

pub type SharedCliKnobs = Arc<Mutex<CliKnobs>>;

/// What the CLI runs with.
pub struct Cli {
    pub rules: Rules,
    pub machine: Rc<Machine>,
    pub knobs: SharedCliKnobs,
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    Ok,
    Error { code: String, message: String },
    Transport(&'static str),
}

/// Run the invocations in order, then exit.
pub async fn run(cli: Cli, invocations: Vec<Invocation>) -> Result<(), Box<dyn std::error::Error>> {
    let start = seam::now();
    for (index, invocation) in invocations.iter().enumerate() {
        tokio::time::sleep_until(start + Duration::from_millis(invocation.at_ms)).await;
        let action = index + 1;
        let timeout_ms = lock(&cli.knobs)
            .deadlines
            .get(&action)
            .copied()
            .or(invocation.timeout_ms);
        invoke(&cli, action, &invocation.method, timeout_ms).await;
    }
    Ok(())
}

async fn invoke(cli: &Cli, action: usize, method: &Method, timeout_ms: Option<u64>) {
    emit!(
        kind::CLI_ACTION,
        action,
        method = method.name(),
        timeout_ms = timeout_ms.unwrap_or(0)
    );
    let mut attempts = 0;
    let outcome = loop {
        attempts += 1;
        let Some(daemon) = ensure_daemon(cli).await else {
            break "refused".to_string();
        };
        let outcome = attempt(cli, action, attempts, &daemon, method, timeout_ms).await;
        let retry = match &outcome {
            Attempt::Ok => break "ok".to_string(),
            Attempt::Transport(reason) => (attempts == 1).then_some(()).ok_or(reason.to_string()),
            // A wrapper that cannot tell a slow daemon from a dead one retries a runtime error
            // that reads like a timeout; only `operation_timeout` says "final".
            Attempt::Error { code, message } => {
                let timeout_like =
                    code == wire::code::RUNTIME_ERROR && message.contains("timed out");
                (attempts == 1 && timeout_like)
                    .then_some(())
                    .ok_or(code.clone())
            }
        };
        if let Err(outcome) = retry {
            break outcome;
        }
        restart(cli, action, daemon.pid).await;
    };
    emit!(kind::CLI_DONE, action, outcome = %outcome, attempts);
}

/// The live daemon's metadata, launching one when there is none.
async fn ensure_daemon(cli: &Cli) -> Option<Metadata> {
    if let Some(metadata) = cli.machine.metadata() {
        return Some(metadata);
    }
    launch(cli).await
}

/// Launch a daemon under the start lock and wait until its metadata names it.
async fn launch(cli: &Cli) -> Option<Metadata> {
    let own_lock = cli.machine.try_lock("start");
    let pid = own_lock.then(|| cli.machine.request_launch());
    let mut waited = 0;
    let ready = loop {
        let metadata = cli
            .machine
            .metadata()
            .filter(|m| pid.is_none_or(|pid| m.pid == pid));
        if metadata.is_some() || waited >= READY_WAIT_MS {
            break metadata;
        }
        seam::sleep_ms(POLL_MS).await;
        waited += POLL_MS;
    };
    if own_lock {
        cli.machine.unlock("start");
    }
    ready
}

/// Replace the daemon after a transport failure: `stop` addressed to its pid, wait for it to
/// go (killing it if it will not), launch a fresh one.
async fn restart(cli: &Cli, action: usize, pid: u64) {
    emit!(kind::CLI_RESTART, action, pid);
    if let Some(metadata) = cli.machine.metadata().filter(|m| m.pid == pid) {
        let _ = control(&metadata, "stop", json!({"pid": pid})).await;
    }
    let mut waited = 0;
    while cli.machine.alive(pid) && waited < STOP_WAIT_MS {
        seam::sleep_ms(POLL_MS).await;
        waited += POLL_MS;
    }
    if cli.machine.alive(pid) {
        cli.machine.kill(pid, Exit::Kill);
        while cli.machine.alive(pid) {
            seam::sleep_ms(POLL_MS).await;
        }
    }
    launch(cli).await;
}

/// A control request (`stop`, `status`) with the status budget and no frames.
async fn control(daemon: &Metadata, method: &str, params: Value) -> Option<Value> {
    let request = Request {
        id: format!("c{}-{method}", daemon.pid),
        method: method.to_string(),
        params,
        protocol_version: Some(PROTOCOL_VERSION),
        progress_interval_ms: None,
    };
    let exchange = async {
        let mut stream = TcpStream::connect((host::DAEMON, daemon.socket))
            .await
            .ok()?;
        let line = serde_json::to_string(&request).ok()?;
        stream
            .write_all(format!("{line}\n").as_bytes())
            .await
            .ok()?;
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(Line::Response { outcome, .. }) = wire::parse_line(&line) {
                return outcome.ok();
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_millis(STATUS_TIMEOUT_MIN_MS), exchange)
        .await
        .ok()
        .flatten()
}

async fn attempt(
    cli: &Cli,
    action: usize,
    attempt: u32,
    daemon: &Metadata,
    method: &Method,
    timeout_ms: Option<u64>,
) -> Attempt {
    let request = Request {
        id: format!("a{action}.{attempt}"),
        method: method.name().to_string(),
        params: method.params(timeout_ms),
        protocol_version: Some(PROTOCOL_VERSION),
        progress_interval_ms: Some(cli.rules.requested_interval_ms(timeout_ms)),
    };
    let line = serde_json::to_string(&request).unwrap_or_default();
    emit!(kind::CLI_SEND, action, attempt, id = %request.id, msg = %line);
    let budget = cli.rules.socket_budget(method.name(), timeout_ms);
    let outcome = exchange(&request.id, daemon.socket, &line, budget).await;
    match &outcome {
        Attempt::Transport(reason) => emit!(kind::CLI_FAIL, id = %request.id, reason = *reason),
        Attempt::Ok => emit!(kind::CLI_REPLY, id = %request.id, ok = true, code = ""),
        Attempt::Error { code, .. } => {
            emit!(kind::CLI_REPLY, id = %request.id, ok = false, code = %code)
        }
    }
    outcome
}

/// Connect, write the request, read frames until the response or the budget expires.
async fn exchange(id: &str, socket: u16, line: &str, budget: SocketBudget) -> Attempt {
    let (budget_ms, rearm, expired) = match budget {
        SocketBudget::Idle(ms) => (ms, true, "idle"),
        SocketBudget::Fixed(ms) => (ms, false, "budget"),
    };
    let budget = Duration::from_millis(budget_ms);
    let connect = tokio::time::timeout(budget, TcpStream::connect((host::DAEMON, socket))).await;
    let Ok(Ok(mut stream)) = connect else {
        return Attempt::Transport("refused");
    };
    if stream
        .write_all(format!("{line}\n").as_bytes())
        .await
        .is_err()
    {
        return Attempt::Transport("reset");
    }
    let mut lines = BufReader::new(stream).lines();
    let mut deadline = seam::now() + budget;
    loop {
        let next = tokio::select! {
            next = lines.next_line() => next,
            () = tokio::time::sleep_until(deadline) => return Attempt::Transport(expired),
        };
        let Ok(Some(text)) = next else {
            return Attempt::Transport("reset");
        };
        match wire::parse_line(&text) {
            Some(Line::Progress { id: frame }) => {
                let matched = frame == id;
                emit!(kind::CLI_FRAME, id = %frame, matched);
                if matched && rearm {
                    deadline = seam::now() + budget;
                }
            }
            Some(Line::Response {
                id: answered,
                outcome,
            }) if answered == id => {
                return match outcome {
                    Ok(_) => Attempt::Ok,
                    Err((code, message)) => Attempt::Error { code, message },
                };
            }
            _ => return Attempt::Transport("unparseable"),
        }
    }
}

/// `true` for the codes the CLI never retries.
pub fn final_code(error: &str) -> bool {
    error == code::OPERATION_TIMEOUT
}
