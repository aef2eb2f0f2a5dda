//! Correlation: which event sent a message and which event received it, by hop and key (the
//! JSON-RPC id, the idempotency key's id, the daemon request id, the pending id, the session).
//! A receive is paired with the earliest unpaired send of the same hop and key before it.

use serde_json::Value;

use crate::check::message;
use crate::trace::{Trace, TraceEvent};

/// The transport a message crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hop {
    /// Client (or agent) to the bridge over stdin.
    StdioIn,
    /// The bridge to the client (or agent) over stdout.
    StdioOut,
    /// An HTTP request: a POST, or the GET that opens the SSE stream.
    HttpPost,
    /// The answer to an HTTP request (its status).
    HttpStatus,
    /// A frame on the relayer's SSE stream.
    Sse,
    /// A request or reply on the daemon's socket; a process launch.
    Socket,
    /// A frame on the channel gateway's WebSocket.
    WebSocket,
    /// Through a bridge that records nothing of its own (the sdk family's rmcp bridge, a real
    /// bridge in live mode): a client's line to the server's POST that carried it, or the
    /// server's reply to the client's line that carried it. See [`through_the_bridge`].
    Bridged,
}

impl Hop {
    pub fn name(self) -> &'static str {
        match self {
            Hop::StdioIn | Hop::StdioOut => "stdio",
            Hop::HttpPost => "http",
            Hop::HttpStatus => "http-status",
            Hop::Sse => "sse",
            Hop::Socket => "socket",
            Hop::WebSocket => "websocket",
            Hop::Bridged => "bridged",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Send,
    Recv,
}

/// One end of a message, as an event shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub hop: Hop,
    pub role: Role,
    pub key: String,
    /// What to write on the arrow (the method, the status), if this end knows it.
    pub label: String,
}

/// A correlated message: an arrow from `send` to `recv` (event indices).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub send: usize,
    pub recv: usize,
    pub hop: Hop,
    pub key: String,
    pub label: String,
}

fn id_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn endpoint(hop: Hop, role: Role, key: impl Into<String>, label: impl Into<String>) -> Endpoint {
    Endpoint { hop, role, key: key.into(), label: label.into() }
}

/// The ends of messages an event shows (an event can receive one message and send the next).
pub fn endpoints(event: &TraceEvent) -> Vec<Endpoint> {
    use Role::{Recv, Send};
    let id = event.text("id");
    match event.kind.as_str() {
        "mcp.send" | "mcp.recv" => stdio_endpoints(event),
        // relay: the bridge admits a request, answers it, POSTs it; the relayer answers.
        "call.admit" => vec![endpoint(Hop::StdioIn, Recv, id, event.text("method"))],
        "call.reply" => {
            let mut out = Vec::new();
            if event.text("source") == "upstream" {
                out.push(endpoint(Hop::Sse, Recv, id.clone(), ""));
            }
            out.push(endpoint(Hop::StdioOut, Send, id, event.text("source")));
            out
        }
        "reply.dropped" => vec![endpoint(Hop::Sse, Recv, id, format!("dropped: {}", event.text("reason")))],
        "post.send" => vec![endpoint(Hop::HttpPost, Send, post_key(event), format!("POST {}", event.text("method")))],
        "http.post" => vec![
            endpoint(Hop::HttpPost, Recv, post_key(event), ""),
            endpoint(Hop::HttpStatus, Send, post_key(event), event.text("status")),
        ],
        "post.status" => vec![endpoint(Hop::HttpStatus, Recv, post_key(event), event.text("status"))],
        "sse.connect" => vec![endpoint(Hop::HttpPost, Send, "GET /sse", "GET /sse")],
        "stream.open" => {
            vec![endpoint(Hop::HttpPost, Recv, "GET /sse", ""), endpoint(Hop::Sse, Send, "endpoint", "endpoint")]
        }
        "sse.endpoint" => vec![endpoint(Hop::Sse, Recv, "endpoint", "")],
        "reply.sent" => vec![endpoint(Hop::Sse, Send, id, "reply")],
        // daemon: the CLI's socket requests, the daemon's replies, launches.
        "cli.send" => {
            let method = message(event).get("method").and_then(Value::as_str).unwrap_or("").to_string();
            vec![endpoint(Hop::Socket, Send, id, method)]
        }
        "daemon.request" => vec![endpoint(Hop::Socket, Recv, id, event.text("method"))],
        "daemon.reply" => {
            let label = if event.text("ok") == "true" { "ok".to_string() } else { event.text("code") };
            vec![endpoint(Hop::Socket, Send, id, label)]
        }
        "cli.reply" => vec![endpoint(Hop::Socket, Recv, id, "")],
        "cli.stop" => vec![endpoint(Hop::Socket, Send, id, "stop")],
        "daemon.stop" => vec![endpoint(Hop::Socket, Recv, id, "stop")],
        "cli.launch" => vec![endpoint(Hop::Socket, Send, format!("pid {}", event.text("pid")), "launch")],
        "daemon.launch" => vec![endpoint(Hop::Socket, Recv, format!("pid {}", event.text("pid")), "launch")],
        // channel: the agent's waits, the gateway's frames, the bridge's decisions.
        "waiter.start" => vec![endpoint(Hop::StdioIn, Recv, id, "")],
        "waiter.end" => vec![endpoint(Hop::StdioOut, Send, id, event.text("outcome"))],
        "pending.add" | "pending.ignored" => {
            let hop = if event.text("map") == "permission" { Hop::StdioIn } else { Hop::WebSocket };
            let key = if hop == Hop::StdioIn { format!("request {id}") } else { id };
            vec![endpoint(hop, Recv, key, "")]
        }
        "gateway.send" if event.text("delivered") != "false" => {
            vec![endpoint(Hop::WebSocket, Send, id, event.text("event"))]
        }
        "gateway.say" if event.text("delivered") != "false" => {
            vec![endpoint(Hop::WebSocket, Send, format!("say {}", event.text("session")), "say")]
        }
        "operator.message" => vec![endpoint(Hop::WebSocket, Recv, format!("say {}", event.text("session")), "")],
        "decision.sent" => vec![endpoint(Hop::StdioOut, Send, format!("request {id}"), event.text("behavior"))],
        _ => Vec::new(),
    }
}

/// A POST is known by its JSON-RPC id, or by its method when it is a notification.
fn post_key(event: &TraceEvent) -> String {
    let id = event.text("id");
    if id.is_empty() {
        event.text("method")
    } else {
        id
    }
}

/// A stdio line: a request (by id), a response (by id), or a notification about a pending
/// request (by `params.request_id`).
fn stdio_endpoints(event: &TraceEvent) -> Vec<Endpoint> {
    let msg = message(event);
    let sending = event.kind == "mcp.send";
    let (hop, role) = if sending { (Hop::StdioIn, Role::Send) } else { (Hop::StdioOut, Role::Recv) };
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    if let Some(id) = id_text(msg.get("id")) {
        let label = if !method.is_empty() {
            method.to_string()
        } else if msg.get("error").is_some() {
            "error".to_string()
        } else if msg.pointer("/result/isError") == Some(&Value::Bool(true)) {
            "result (isError)".to_string()
        } else {
            "result".to_string()
        };
        return vec![endpoint(hop, role, id, label)];
    }
    match id_text(msg.pointer("/params/request_id")) {
        Some(request) => vec![endpoint(hop, role, format!("request {request}"), short_method(method))],
        None => Vec::new(),
    }
}

fn short_method(method: &str) -> String {
    method.rsplit('/').next().unwrap_or(method).to_string()
}

/// Whether the trace's bridge records nothing of its own while its client and server do: the
/// sdk family (rmcp's internals are not instrumented) and the live engine (a real process).
/// Then the only arrows are those [`through_the_bridge`] draws between the two boundaries.
pub fn opaque_bridge(trace: &Trace) -> bool {
    let has = |host: &str| trace.events.iter().any(|e| e.host == host);
    !has("bridge") && has("client") && has("relayer")
}

/// The ends of messages that cross an opaque bridge, as its two boundaries show them:
/// - a client request (by its id as JSON and its method; not `initialize`, which a bridge answers
///   or sends on its own) ends at the server's `http.post` of that `client_id` (the id the
///   client stamps in `params._meta`, which the server logs) and method;
/// - a client notification ends at the server's `http.post` of the `note` it stamps;
/// - a server reply ends at a client line with that client id *and the same result or error*,
///   compared as JSON values: a bridge that renumbers, re-serializes or reorders keys still pairs,
///   while an error the bridge wrote itself never borrows the server's reply.
///
/// The server falls back to the upstream id when a request carries no stamp (a bridge's own
/// request), which the method and the result keep apart.
pub fn through_the_bridge(event: &TraceEvent) -> Vec<Endpoint> {
    use Role::{Recv, Send};
    let request = |id: &str, method: &str| format!("request {id} {method}");
    let reply = |id: &str, answer: &Value| format!("reply {id} {answer}");
    let answer = |msg: &Value| msg.get("result").or_else(|| msg.get("error")).cloned();
    match (event.host.as_str(), event.kind.as_str()) {
        ("client", "mcp.send") => {
            let msg = message(event);
            let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
            match msg.get("id") {
                Some(id) if method != "initialize" && !method.is_empty() => {
                    vec![endpoint(Hop::Bridged, Send, request(&id.to_string(), method), method)]
                }
                Some(_) => Vec::new(),
                None => match msg.pointer("/params/_meta/sim.client~1note") {
                    Some(note) => vec![endpoint(Hop::Bridged, Send, format!("note {note}"), short_method(method))],
                    None => Vec::new(),
                },
            }
        }
        ("client", "mcp.recv") => {
            let msg = message(event);
            match (msg.get("id"), answer(&msg), msg.get("method")) {
                (Some(id), Some(answer), None) => vec![endpoint(Hop::Bridged, Recv, reply(&id.to_string(), &answer), "")],
                _ => Vec::new(),
            }
        }
        ("relayer", "http.post") => {
            let (client, note, method) = (event.text("client_id"), event.text("note"), event.text("method"));
            if !client.is_empty() && method != "initialize" {
                vec![endpoint(Hop::Bridged, Recv, request(&client, &method), "")]
            } else if !note.is_empty() {
                vec![endpoint(Hop::Bridged, Recv, format!("note {note}"), "")]
            } else {
                Vec::new()
            }
        }
        ("relayer", "reply.sent") => {
            let msg = message(event);
            let client = event.text("client_id");
            match answer(&msg) {
                Some(answer) if !client.is_empty() => {
                    let label = if msg.get("error").is_some() { "error" } else { "result" };
                    vec![endpoint(Hop::Bridged, Send, reply(&client, &answer), label)]
                }
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// Every correlated message of a trace, in the order of their receiving events.
pub fn messages(trace: &Trace) -> Vec<Message> {
    let ends: fn(&TraceEvent) -> Vec<Endpoint> = if opaque_bridge(trace) { through_the_bridge } else { endpoints };
    // Unpaired sends per (hop, key), oldest first: a Vec of small queues, scanned linearly per
    // key would be quadratic on 10 000 events, so keep them in a BTreeMap.
    let mut open: std::collections::BTreeMap<(Hop, String), std::collections::VecDeque<(usize, String)>> =
        std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for (index, event) in trace.events.iter().enumerate() {
        for end in ends(event) {
            let slot = (end.hop, end.key.clone());
            match end.role {
                Role::Send => open.entry(slot).or_default().push_back((index, end.label)),
                Role::Recv => {
                    let Some((send, label)) = open.get_mut(&slot).and_then(|q| q.pop_front()) else { continue };
                    if trace.events[send].host == event.host {
                        continue;
                    }
                    let label = if label.is_empty() { end.label } else { label };
                    out.push(Message { send, recv: index, hop: end.hop, key: end.key, label });
                }
            }
        }
    }
    out
}

/// The request id an event is about, for the page's filter: its `id`, its message's id, the
/// daemon request it serves, or the pending request it names.
pub fn request_id(event: &TraceEvent) -> String {
    for name in ["id", "request"] {
        let text = event.text(name);
        if !text.is_empty() {
            return text;
        }
    }
    if event.get("msg").is_some() {
        let msg = message(event);
        if let Some(id) = id_text(msg.get("id")) {
            return id;
        }
        if let Some(id) = id_text(msg.pointer("/params/_meta/daemonRequest")) {
            return id;
        }
        if let Some(id) = id_text(msg.pointer("/params/request_id")) {
            return id;
        }
    }
    String::new()
}
