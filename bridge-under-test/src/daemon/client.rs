//! The CLI: the user's invocations, in lanes (concurrent clients, each running its invocations
//! one after another, each invocation of a protocol version). Each finds, launches or replaces
//! the daemon ([`replace`](super::replace)), sends one request per connection with the socket
//! idle budget equal to the caller's deadline (re-armed only by frames whose id matches), and
//! after a transport failure replaces the daemon through the same guards and retries once.
//! `operation_timeout` and a refusal to replace are final. A protocol-1 client asks for no
//! frames and cannot parse one.

use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::config::{Rules, SocketBudget, MAX_PAGES, PROTOCOL_VERSION};
use super::knobs::lock;
use super::machine::{Machine, Metadata};
use super::mcp::RESOURCE_URI;
use super::replace::{self, Who};
use super::wire::{self, Line, Request};
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
    /// `listPrompts`: a method of a newer CLI that this daemon's protocol does not have. The
    /// daemon must answer `unknown_method` itself, with no upstream work.
    ListPrompts,
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
            Method::ListPrompts => "listPrompts",
        }
    }

    fn params(&self, timeout_ms: Option<u64>) -> Value {
        let mut params = match self {
            Method::ListTools => json!({"server": SERVER_NAME, "autoAuthorize": true}),
            Method::CallTool { work_ms } => {
                json!({"server": SERVER_NAME, "tool": "build", "args": {"work_ms": work_ms}})
            }
            Method::ReadResource => json!({"server": SERVER_NAME, "uri": RESOURCE_URI}),
            Method::ListResources | Method::CloseServer | Method::ListPrompts => {
                json!({"server": SERVER_NAME})
            }
        };
        if let Some(timeout_ms) = timeout_ms {
            params["timeoutMs"] = json!(timeout_ms);
        }
        params
    }
}

/// One user invocation, started at `at_ms` or when the previous one of its lane ends,
/// whichever is later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invocation {
    pub at_ms: u64,
    pub method: Method,
    /// The call's `timeoutMs`; `None` leaves the default idle budget.
    pub timeout_ms: Option<u64>,
    /// The lane (a concurrent client, e.g. another terminal) it runs in.
    #[serde(default)]
    pub client: u32,
    /// The CLI's protocol version.
    #[serde(default = "current_version")]
    pub version: u64,
}

fn current_version() -> u64 {
    PROTOCOL_VERSION
}

/// The CLI's knobs: caller deadlines a fault overrides, by action (1-based); and counters of
/// the moments a fault may anchor to.
#[derive(Debug, Default)]
pub struct CliKnobs {
    pub deadlines: std::collections::BTreeMap<usize, u64>,
    /// Counter: requests written to a daemon (each is before dispatch for a moment).
    pub sends: u64,
    /// Counter: actions restarting after a transport failure.
    pub restarts: u64,
    /// Set once every invocation has run: no moment a fault waits for comes after it.
    pub finished: bool,
    /// Set when the run's faults have all ended and healed: the end-of-run report waits for it.
    pub healed: bool,
    /// Woken when `healed` is set.
    pub heal: Arc<tokio::sync::Notify>,
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

/// Run every lane concurrently, each lane's invocations in order (actions numbered in the
/// order given), then, no earlier than `report_after_ms` from the start (when the run's faults
/// have all healed) and not before the harness says they have, the end-of-run report, then exit. A report taken while a fault is still
/// active would judge the fault, not the daemon.
pub async fn run(
    cli: Cli,
    invocations: Vec<Invocation>,
    report_after_ms: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let start = seam::now();
    let mut lanes: std::collections::BTreeMap<u32, Vec<(usize, &Invocation)>> =
        std::collections::BTreeMap::new();
    for (index, invocation) in invocations.iter().enumerate() {
        lanes
            .entry(invocation.client)
            .or_default()
            .push((index + 1, invocation));
    }
    let lanes = lanes.into_values().map(|lane| run_lane(&cli, start, lane));
    futures_util::future::join_all(lanes).await;
    lock(&cli.knobs).finished = true;
    let waited = seam::ms_since(start);
    if waited < report_after_ms {
        seam::sleep_ms(report_after_ms - waited).await;
    }
    // A fault whose onset waits for a moment of the workload may end later than planned.
    loop {
        let heal = lock(&cli.knobs).heal.clone();
        let healed = heal.notified();
        if lock(&cli.knobs).healed {
            break;
        }
        healed.await;
    }
    replace::report(&cli).await;
    Ok(())
}

async fn run_lane(cli: &Cli, start: seam::Instant, lane: Vec<(usize, &Invocation)>) {
    for (action, invocation) in lane {
        tokio::time::sleep_until(start + Duration::from_millis(invocation.at_ms)).await;
        let timeout_ms = lock(&cli.knobs)
            .deadlines
            .get(&action)
            .copied()
            .or(invocation.timeout_ms);
        let who = Who {
            cli,
            pid: cli.machine.begin_cli(),
            action,
            version: invocation.version,
            seq: std::cell::Cell::new(0),
        };
        invoke(&who, invocation, timeout_ms).await;
        cli.machine.end_cli(who.pid);
    }
}

async fn invoke(who: &Who<'_>, invocation: &Invocation, timeout_ms: Option<u64>) {
    let (action, method) = (who.action, &invocation.method);
    emit!(
        kind::CLI_ACTION,
        action,
        method = method.name(),
        timeout_ms = timeout_ms.unwrap_or(0),
        client = invocation.client,
        version = who.version
    );
    let mut attempts = 0;
    let outcome = loop {
        attempts += 1;
        let daemon = match replace::ensure_daemon(who).await {
            Ok(daemon) => daemon,
            Err(message) => break refusal(&message),
        };
        let outcome = attempt(who, attempts, &daemon, method, timeout_ms).await;
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
        emit!(kind::CLI_RESTART, action, pid = daemon.pid);
        lock(&who.cli.knobs).restarts += 1;
        if let Err(message) = replace::replace(who, daemon.pid, "transport").await {
            break refusal(&message);
        }
    };
    emit!(kind::CLI_DONE, action, outcome = %outcome, attempts);
}

/// The outcome of an invocation the lifecycle guards refused: final, with the reason.
fn refusal(message: &str) -> String {
    if message.contains("in flight") {
        "daemon_busy".to_string()
    } else {
        "refused".to_string()
    }
}

async fn attempt(
    who: &Who<'_>,
    attempt: u32,
    daemon: &Metadata,
    method: &Method,
    timeout_ms: Option<u64>,
) -> Attempt {
    let (cli, action) = (who.cli, who.action);
    let modern = who.version >= PROTOCOL_VERSION;
    let request = Request {
        id: format!("a{action}.{attempt}"),
        method: method.name().to_string(),
        params: method.params(timeout_ms),
        protocol_version: modern.then_some(who.version),
        progress_interval_ms: modern.then(|| cli.rules.requested_interval_ms(timeout_ms)),
    };
    let line = serde_json::to_string(&request).unwrap_or_default();
    emit!(kind::CLI_SEND, action, attempt, id = %request.id, pid = daemon.pid, msg = %line);
    lock(&cli.knobs).sends += 1;
    // A daemon of protocol 1 writes no frames: wait for the whole operation, as a v1 client does.
    let budget = if modern && daemon.protocol_version >= PROTOCOL_VERSION {
        cli.rules.socket_budget(method.name(), timeout_ms)
    } else {
        SocketBudget::Fixed(v1_budget_ms(&cli.rules, timeout_ms))
    };
    let outcome = exchange(&request.id, daemon.socket, &line, (budget, modern)).await;
    match &outcome {
        Attempt::Transport(reason) => emit!(kind::CLI_FAIL, id = %request.id, reason = *reason),
        Attempt::Ok => emit!(kind::CLI_REPLY, id = %request.id, ok = true, code = ""),
        Attempt::Error { code, .. } => {
            emit!(kind::CLI_REPLY, id = %request.id, ok = false, code = %code)
        }
    }
    outcome
}

/// A protocol-1 client hears nothing until the reply, so it waits out the whole operation: the
/// OAuth wait plus every page (or the ceiling's call).
fn v1_budget_ms(rules: &Rules, timeout_ms: Option<u64>) -> u64 {
    let call_ms = timeout_ms.unwrap_or(rules.timing.sdk_request_timeout_ms);
    rules.timing.oauth_timeout_ms + (u64::from(MAX_PAGES) + 1) * call_ms
}

/// Connect, write the request, read frames until the response or the budget expires. A
/// protocol-1 client (`modern` false) cannot parse a progress frame.
async fn exchange(id: &str, socket: u16, line: &str, budget: (SocketBudget, bool)) -> Attempt {
    let (budget, modern) = budget;
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
            Some(Line::Progress { .. }) if !modern => return Attempt::Transport("unparseable"),
            Some(Line::Progress { id: frame }) => {
                let matched = frame == id;
                emit!(kind::CLI_FRAME, id = %frame, on = %id, matched);
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
