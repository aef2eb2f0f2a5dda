//! The channel bridge (MODEL.md §3.4). One `RefCell<State>` holds both pending maps, the event
//! queue and the sweeper; handlers mutate it synchronously and never hold a borrow across an
//! `await`, so every check-and-remove is atomic. The bookkeeping (tracking, the sweeper, close)
//! is in `bridge_state.rs`, the gateway socket in `bridge_socket.rs`, waiters in `waiter.rs`.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Notify};

use super::config::ChannelConfig;
use super::grammar::{normalize_id, parse_reply};
use super::pending::{approval_expiry, reanchored_expiry, Entry, Map, Pending};
use super::queue::EventQueue;
use super::{spawn_owned, wire, Owned};
use crate::emit;
use crate::events::kind;
use crate::relay::jsonrpc;
use crate::seam;
use crate::stdio::ServerEnds;

/// Run the bridge until stdin reaches EOF, then close and exit. `close` asks for `close()`
/// while the process keeps running (a host shutting the channel down). The sweeper never keeps
/// the process alive: exit does not wait for it.
pub async fn run(
    config: ChannelConfig,
    stdio: ServerEnds,
    close: Rc<Notify>,
) -> Result<(), Box<dyn std::error::Error>> {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let bridge = Rc::new(Bridge::new(config, out_tx));
    bridge.emit_start();
    if bridge.config.bugs.eager_sweeper {
        bridge.ensure_sweeper("construct");
    }
    let writer = tokio::task::spawn_local(write_lines(stdio.stdout, out_rx));
    let socket = spawn_owned(super::bridge_socket::connect_loop(bridge.clone()));
    *bridge.socket.borrow_mut() = Some(socket);
    let closer_bridge = bridge.clone();
    // One close is all a host can ask for (`close()` is idempotent): the closer ends with it,
    // so no task of ours outlives the close.
    let closer = spawn_owned(async move {
        close.notified().await;
        closer_bridge.close();
    });
    let mut lines = BufReader::new(stdio.stdin).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        bridge.on_line(&line);
    }
    drop(closer);
    bridge.close();
    // Every waiter is owed its reply, at stdin EOF too: let each write it before stdout goes.
    let waiters = std::mem::take(&mut *bridge.waiters.borrow_mut());
    for waiter in waiters {
        let _ = waiter.await;
    }
    bridge.exit();
    writer.await?;
    Ok(())
}

/// Copy lines to stdout until every sender is gone.
async fn write_lines(
    mut stdout: tokio::io::DuplexStream,
    mut lines: mpsc::UnboundedReceiver<String>,
) {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        if stdout.write_all(line.as_bytes()).await.is_err() {
            break;
        }
    }
    let _ = stdout.shutdown().await;
}

pub(super) struct State {
    pub(super) pending: Pending,
    pub(super) queue: EventQueue,
    /// The sweep timer, while it exists.
    pub(super) sweeper: Option<Owned>,
    pub(super) closed: bool,
}

pub(super) struct Bridge {
    pub(super) config: ChannelConfig,
    started: seam::Instant,
    pub(super) state: RefCell<State>,
    pub(super) out: RefCell<Option<mpsc::UnboundedSender<String>>>,
    /// Woken when the queue gains events or the bridge closes: waiters re-check.
    pub(super) changed: Notify,
    /// The gateway connection's task, until `close()` ends it.
    pub(super) socket: RefCell<Option<Owned>>,
    /// The waiter tasks not yet seen finished.
    pub(super) waiters: RefCell<Vec<tokio::task::JoinHandle<()>>>,
}

impl Bridge {
    fn new(config: ChannelConfig, out: mpsc::UnboundedSender<String>) -> Self {
        let state = State {
            pending: Pending::default(),
            queue: EventQueue::new(config.queue_limit),
            sweeper: None,
            closed: false,
        };
        Self {
            config,
            started: seam::now(),
            state: RefCell::new(state),
            out: RefCell::new(Some(out)),
            changed: Notify::new(),
            socket: RefCell::new(None),
            waiters: RefCell::new(Vec::new()),
        }
    }

    /// The bridge's wall clock, in ms since the Unix epoch.
    pub(super) fn now_ms(&self) -> u64 {
        self.config.clock_base_ms + seam::ms_since(self.started)
    }

    fn emit_start(&self) {
        let c = &self.config;
        emit!(
            kind::CHANNEL_START,
            permission_ttl_ms = c.permission_ttl_ms,
            approval_default_ttl_ms = c.approval_default_ttl_ms,
            sweep_interval_ms = c.sweep_interval_ms,
            pending_cap = c.pending_cap,
            queue_limit = c.queue_limit,
            clock_base_ms = c.clock_base_ms,
            session = %c.session_key
        );
    }

    pub(super) fn write(&self, msg: &Value) {
        if let Some(out) = self.out.borrow().as_ref() {
            let _ = out.send(msg.to_string());
        }
    }

    /// Whether handlers must ignore input: closed, unless the regression lets them run.
    pub(super) fn guarded(&self) -> bool {
        self.state.borrow().closed && !self.config.bugs.no_closed_guard
    }

    // ---- stdin -------------------------------------------------------------------------------

    /// One line from the agent: a request is answered, a notification never is, a response
    /// (the bridge asks nothing) is dropped, and anything else gets the JSON-RPC 2.0 error for
    /// it: -32700 for a line that is not JSON, -32600 for a value that is no request (not an
    /// object, a batch, a version other than "2.0", a method that is no string, an id that is
    /// no MCP `RequestId`), with the id only when it is one.
    fn on_line(self: &Rc<Self>, line: &str) {
        emit!(kind::CHANNEL_LINE, now_ms = self.now_ms());
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            self.write(&jsonrpc::error(
                None,
                -32700,
                "Parse error: the line is not valid JSON",
            ));
            return;
        };
        match envelope(&msg) {
            Envelope::Request { id, method } => self.on_request(id, method, &msg),
            Envelope::Notification { method } if method == wire::PERMISSION_REQUEST => {
                self.on_permission_request(msg.get("params").unwrap_or(&Value::Null));
            }
            Envelope::Notification { .. } | Envelope::Response => {}
            Envelope::Invalid { id } => {
                self.write(&jsonrpc::error(id, -32600, "Invalid Request"));
            }
        }
    }

    fn on_request(self: &Rc<Self>, id: &Value, method: &str, msg: &Value) {
        let params = msg.get("params");
        if !matches!(method, "initialize" | "ping" | "tools/list" | "tools/call") {
            return self.write(&jsonrpc::error(Some(id), -32601, "Method not found"));
        }
        if params.is_some_and(|p| !p.is_object()) {
            let text = "Invalid params: params must be an object";
            return self.write(&jsonrpc::error(Some(id), -32602, text));
        }
        let reply = match method {
            "initialize" => jsonrpc::result(id, wire::initialize_result(msg)),
            "ping" => jsonrpc::result(id, json!({})),
            "tools/list" => jsonrpc::result(id, wire::tools_list()),
            _ => return self.on_call(id, params.unwrap_or(&Value::Null)),
        };
        self.write(&reply);
    }

    /// `tools/call`: a string `name` naming one of the two tools, and `arguments`, when given,
    /// an object; otherwise -32602 (MCP: unknown tools and malformed calls are protocol errors).
    fn on_call(self: &Rc<Self>, id: &Value, params: &Value) {
        let name = params.get("name").and_then(Value::as_str);
        let arguments = params.get("arguments");
        if arguments.is_some_and(|a| !a.is_object()) {
            let text = "Invalid params: arguments must be an object";
            return self.write(&jsonrpc::error(Some(id), -32602, text));
        }
        match name {
            Some(wire::TOOL_LIST_PENDING) => {
                let text = self.read_pending().to_string();
                self.write(&jsonrpc::result(id, jsonrpc::tool_result(&text, false)));
            }
            Some(wire::TOOL_WAIT_FOR_EVENT) => {
                self.start_waiter(id.clone(), arguments.unwrap_or(&Value::Null));
            }
            Some(name) => {
                let text = format!("Unknown tool: {name}");
                self.write(&jsonrpc::error(Some(id), -32602, &text));
            }
            None => {
                let text = "Invalid params: name must be a string";
                self.write(&jsonrpc::error(Some(id), -32602, text));
            }
        }
    }

    /// Permission request: ignored after close; otherwise tracked with its receipt time.
    fn on_permission_request(self: &Rc<Self>, params: &Value) {
        let raw = params
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(id) = normalize_id(raw) else {
            emit!(
                kind::PENDING_IGNORED,
                map = "permission",
                id = raw,
                reason = "invalid"
            );
            return;
        };
        if self.guarded() {
            emit!(kind::PENDING_IGNORED, map = "permission", id = %id, reason = "closed");
            return;
        }
        let now_ms = self.now_ms();
        let entry = Entry {
            tracked_at_ms: now_ms,
            expires_at_ms: now_ms + self.config.permission_ttl_ms,
            created_at_ms: None,
            has_expiry: false,
            seq: 0,
        };
        self.track(Map::Permissions, &id, entry, None);
        let tool = params.get("tool_name").cloned().unwrap_or(Value::Null);
        self.enqueue(json!({"type": "permission_request", "request_id": id, "tool_name": tool}));
    }

    // ---- the gateway -------------------------------------------------------------------------

    /// One gateway frame: approval requested / resolved, or an operator message.
    pub(super) fn on_frame(self: &Rc<Self>, text: &str) {
        emit!(kind::CHANNEL_FRAME, now_ms = self.now_ms(), text);
        let Ok(frame) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let event = frame.get("event").and_then(Value::as_str).unwrap_or("");
        let payload = frame.get("payload").unwrap_or(&Value::Null);
        if event.ends_with(".approval.requested") {
            self.on_approval_requested(event, payload);
        } else if event.ends_with(".approval.resolved") {
            // Only the removal of a live approval is news: a resolved frame for an unknown,
            // expired or already resolved id (a re-broadcast, an event missed while the socket
            // was down) tells the agent nothing it could ever have listed.
            let id = payload.get("id").and_then(Value::as_str).unwrap_or("");
            if !self.guarded() && self.take_live(Map::Approvals, id, "resolved") {
                self.enqueue(json!({"type": event, "id": id}));
            }
        } else if event == wire::SESSION_MESSAGE {
            self.on_message(payload);
        }
    }

    /// Approval requested: tracked once; a repeat keeps its first entry.
    fn on_approval_requested(self: &Rc<Self>, event: &str, payload: &Value) {
        let Some(id) = payload
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
        else {
            return;
        };
        if self.guarded() {
            emit!(
                kind::PENDING_IGNORED,
                map = "approval",
                id,
                reason = "closed"
            );
            return;
        }
        let now_ms = self.now_ms();
        let created = wire::int_field(payload, "createdAtMs");
        let raw = wire::int_field(payload, "expiresAtMs");
        let c = &self.config;
        let expires_at_ms = if c.bugs.reanchor_fallback_ttl && raw.is_none() {
            reanchored_expiry(now_ms, created, c.approval_default_ttl_ms)
        } else {
            approval_expiry(now_ms, raw, c.permission_ttl_ms, c.approval_default_ttl_ms)
        };
        if expires_at_ms <= now_ms && !c.bugs.no_ttl {
            // Expired on arrival (a gateway clock behind ours, an absurd stamp): never
            // listable, so neither tracked nor announced to the agent.
            emit!(
                kind::PENDING_IGNORED,
                map = "approval",
                id,
                reason = "expired"
            );
            return;
        }
        let entry = Entry {
            tracked_at_ms: now_ms,
            expires_at_ms,
            created_at_ms: created,
            has_expiry: raw.is_some(),
            seq: 0,
        };
        if self.track(Map::Approvals, id, entry, raw) {
            self.enqueue(json!({"type": event, "id": id}));
        }
    }

    /// Operator chat: the owner's whole-message `yes <id>` / `no <id>` decides a permission
    /// (check-and-remove in one borrow); anything else is an ordinary message.
    fn on_message(&self, payload: &Value) {
        let session = payload
            .get("sessionKey")
            .and_then(Value::as_str)
            .unwrap_or("");
        let text = payload.get("message").and_then(Value::as_str).unwrap_or("");
        let owner = payload
            .get("senderIsOwner")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let outcome = if session != self.config.session_key {
            "other_session"
        } else if self.guarded() {
            "closed"
        } else {
            match parse_reply(text) {
                Some((behavior, id)) if owner || self.config.bugs.no_owner_check => {
                    if self.take_permission(&id) {
                        self.write(&wire::permission(&id, behavior.wire()));
                        emit!(kind::DECISION_SENT, id = %id, behavior = behavior.wire(), owner);
                        "decision"
                    } else {
                        "unknown"
                    }
                }
                _ => {
                    self.enqueue(json!({"type": "message", "text": text, "owner": owner}));
                    "ordinary"
                }
            }
        };
        emit!(kind::OPERATOR_MESSAGE, session, owner, outcome);
    }

    /// Remove a live (unexpired) permission; whether it was there.
    fn take_permission(&self, id: &str) -> bool {
        self.take_live(Map::Permissions, id, "reply")
    }

    /// Remove `id` from `map` for `reason` if it is live; an expired leftover is removed as
    /// expired. Whether a live entry was taken.
    fn take_live(&self, map: Map, id: &str, reason: &str) -> bool {
        let now_ms = self.now_ms();
        let no_ttl = self.config.bugs.no_ttl;
        let live = {
            let state = self.state.borrow();
            match state.pending.map(map).get(id) {
                None => return false,
                Some(e) => no_ttl || !e.expired(now_ms),
            }
        };
        self.remove(map, id, if live { reason } else { "expired" }) && live
    }
}

/// A parsed line as JSON-RPC 2.0 with MCP's ids reads it.
enum Envelope<'a> {
    Request { id: &'a Value, method: &'a str },
    Notification { method: &'a str },
    /// A `result` or `error` without a `method`: never answered.
    Response,
    /// No request; `id` is the line's id when it is a valid one.
    Invalid { id: Option<&'a Value> },
}

fn envelope(msg: &Value) -> Envelope<'_> {
    let Some(obj) = msg.as_object() else {
        return Envelope::Invalid { id: None };
    };
    let id = obj.get("id");
    let valid_id = id.filter(|id| id.is_string() || id.is_i64() || id.is_u64());
    let version = obj.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    match obj.get("method") {
        None if obj.contains_key("result") || obj.contains_key("error") => Envelope::Response,
        Some(Value::String(method)) if version => match (id, valid_id) {
            (None, _) => Envelope::Notification { method },
            (Some(_), Some(id)) => Envelope::Request { id, method },
            (Some(_), None) => Envelope::Invalid { id: None },
        },
        _ => Envelope::Invalid { id: valid_id },
    }
}
