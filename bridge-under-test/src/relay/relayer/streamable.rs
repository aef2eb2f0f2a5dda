//! MCP Streamable HTTP (protocol 2025-03-26, 2025-06-18 and 2025-11-25) on one path, `/mcp`, as
//! strictly as the specification asks a server (quotes from `basic/transports` of 2025-11-25).
//!
//! - POST: "The client MUST include an Accept header, listing both application/json and
//!   text/event-stream" (406 otherwise: either may come back). A POST of notifications or
//!   responses only: "the server MUST return HTTP status code 202 Accepted with no body". One
//!   with requests: "the server MUST either return Content-Type: text/event-stream, to initiate
//!   an SSE stream, or Content-Type: application/json, to return one JSON object. The client MUST
//!   support both": the relayer draws the form per POST from its seeded randomness (knob
//!   `response_form` pins it; a POST whose reply a `duplicate_ids` knob will double is answered
//!   with a stream, the only form that can carry two).
//! - Sessions: "A server using the Streamable HTTP transport MAY assign a session ID at
//!   initialization time, by including it in an MCP-Session-Id header on the HTTP response
//!   containing the InitializeResult" (this one always does); "Servers that require a session ID
//!   SHOULD respond to requests without an MCP-Session-Id header (other than initialization)
//!   with HTTP 400 Bad Request"; after the server ends a session "it MUST respond to requests
//!   containing that session ID with HTTP 404 Not Found" (a bounce forgets them all); DELETE
//!   with the session id ends it.
//!   A request before `initialize` therefore meets HTTP 400: without an `initialize` there is no
//!   session id to send, and a request without one is refused before any JSON-RPC is read (the
//!   -32002 refusal of the other transports needs a session that exists uninitialized, which
//!   this transport never has).
//! - "If the server receives a request with an invalid or unsupported MCP-Protocol-Version, it
//!   MUST respond with 400 Bad Request"; "if the server does not receive an MCP-Protocol-Version
//!   header ... the server SHOULD assume protocol version 2025-03-26": absent is allowed.
//! - 2025-06-18 dropped batches ("The body of the POST request MUST be a single JSON-RPC
//!   request, notification, or response"): a session that negotiated 2025-06-18 or later gets
//!   400 for a JSON array; one on 2025-03-26 has its batch served (never an `initialize`).
//! - GET opens the standalone stream ("The client MUST include an Accept header, listing
//!   text/event-stream"); it carries server-initiated notifications (knob `server_notes`), which
//!   wait for one when none is connected. One at a time per session (409 for a second, as the
//!   SDKs' servers answer). "The server MUST NOT send a JSON-RPC response on the stream unless
//!   resuming a stream associated with a previous client request": a reply whose POST stream
//!   was cut stays on that stream, for a GET with `Last-Event-ID` to resume it.
//! - Resumability: every SSE event has an `id:` ("globally unique across all streams within that
//!   session"); a GET with `Last-Event-ID` replays "messages that would have been sent after the
//!   last event ID, on the stream that was disconnected" and resumes that stream (400 for an id
//!   this session never wrote). Sessions on 2025-11-25 get the priming event: "The server SHOULD
//!   immediately send an SSE event consisting of an event ID and an empty data field".
//! - The security warning: "If the Origin header is present and invalid, servers MUST respond
//!   with HTTP 403 Forbidden".
//!
//! Every refusal carries a JSON-RPC error without an id and is logged with its cause
//! (`http.post cause=`, `stream.refused cause=`): `token` (401), `fault` (a `reject_status`
//! knob), `origin` (403), `accept` (406), `content_type` (415), `malformed` (not JSON, 400),
//! `invalid` (not JSON-RPC 2.0, an empty batch or a batched `initialize`, 400), `no_session`
//! (400), `reinitialize` (an `initialize` naming a live session, 400), `unknown` / `gone` (404:
//! a session never issued / ended or lost), `protocol_version` (400), `batch` (400),
//! `last_event_id` (400), `conflict` (409). A DELETE is logged as `http.post method=DELETE`.
//!
//! Faults: the stall, EOF and flap knobs act on the SSE streams (POST responses and GET
//! streams), through the shared writer; a JSON answer is a plain response they leave alone.
//! A reset POST (`reset_posts`) is cut before it is read, or after it was served: then nothing
//! carries its replies (`reply.lost`). Replies go through the reply knobs as on every
//! transport.

use std::collections::{BTreeMap, VecDeque};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::legacy::origin_allowed;
use super::{authorized, header, refusal, reset_connection, writer, App, Session, Sink, SUPPORTED_VERSIONS};
use crate::emit;
use crate::events::kind;
use crate::net::http::ChannelBody;
use crate::net::jsonrpc::{self, id_key, Shape};
use crate::relay::knobs::{lock, ResponseForm};
use crate::relay::sse::{Eol, Style};

/// The MCP endpoint.
pub(super) const PATH: &str = "/mcp";

/// The first protocol version without batches.
const NO_BATCHES: &str = "2025-06-18";
/// The first protocol version whose streams start with a priming event.
const PRIMING: &str = "2025-11-25";

pub(super) fn router(app: App) -> Router {
    Router::new().route(PATH, post(on_post).get(on_get).delete(on_delete)).with_state(app)
}

/// Whether `msg` is one JSON-RPC 2.0 message as MCP profiles it: `"jsonrpc": "2.0"`, an id (when
/// present) that is a string or an integer, and the shape of a request, a notification or a
/// response.
pub(super) fn is_message(msg: &Value) -> bool {
    let id_ok = match msg.get("id") {
        None | Some(Value::String(_)) => true,
        Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
        Some(_) => false,
    };
    msg.get("jsonrpc").and_then(Value::as_str) == Some("2.0") && id_ok && jsonrpc::shape(msg) != Shape::Invalid
}

/// A Streamable HTTP session's streams: the SSE streams it opened (POST responses and GET
/// streams, kept after their connection ends, for resumption) and the JSON answers it owes.
pub(super) struct Streams {
    /// The protocol version negotiated at `initialize`.
    version: &'static str,
    carriers: BTreeMap<u64, Carrier>,
    /// Which carrier owes the response to each request id (canonical JSON), oldest first.
    owed: BTreeMap<String, VecDeque<u64>>,
    next_carrier: u64,
    /// The id of the next SSE event, unique across the session's streams.
    next_event: u64,
    /// The number of the next connection (to tell a stream's connections apart).
    next_conn: u64,
    /// The latest standalone (GET) stream.
    standalone: Option<u64>,
    /// Server notes waiting for a standalone stream to connect.
    waiting_notes: Vec<Value>,
}

/// What carries a POST's responses, or the standalone stream.
enum Carrier {
    Sse(SseStream),
    Json(JsonAnswer),
}

/// One SSE stream: every event it wrote (for `Last-Event-ID`), and its connection, while one is
/// open. A POST stream ends once it has written every response it owes.
struct SseStream {
    label: String,
    style: Style,
    log: Vec<(u64, String)>,
    conn: Option<(u64, mpsc::UnboundedSender<String>)>,
    owes: usize,
}

/// A POST answered with one JSON body: the replies so far, and where the body goes.
struct JsonAnswer {
    label: String,
    owes: usize,
    replies: Vec<Value>,
    answer: Option<oneshot::Sender<Vec<Value>>>,
}

impl SseStream {
    /// Write one event (logged, and sent if connected).
    fn write(&mut self, event: u64, data: &str) {
        let frame = self.style.frame("message", data, Some(event));
        if let Some((_, conn)) = &self.conn {
            let _ = conn.send(frame.clone());
        }
        self.log.push((event, frame));
    }
}

impl Streams {
    fn new(version: &'static str) -> Self {
        Self {
            version,
            carriers: BTreeMap::new(),
            owed: BTreeMap::new(),
            next_carrier: 1,
            next_event: 1,
            next_conn: 1,
            standalone: None,
            waiting_notes: Vec::new(),
        }
    }

    fn event_id(&mut self) -> u64 {
        self.next_event += 1;
        self.next_event - 1
    }

    /// Write the response to request `id` on what carries it (`copies` times where it can):
    /// the carrier's label and the copies written, or `None` when nothing carries it any more
    /// (its POST was reset, or its JSON answer's client hung up).
    pub(super) fn deliver(&mut self, id: &str, msg: &Value, copies: usize) -> Option<(String, usize)> {
        let queue = self.owed.get_mut(id)?;
        let number = queue.pop_front()?;
        if queue.is_empty() {
            self.owed.remove(id);
        }
        let (label, copies, finished) = match self.carriers.get_mut(&number)? {
            Carrier::Sse(stream) => {
                for _ in 0..copies {
                    self.next_event += 1;
                    stream.write(self.next_event - 1, &stream.style.json(msg));
                }
                stream.owes = stream.owes.saturating_sub(1);
                if stream.owes == 0 {
                    // Its last response: the stream ends once the writer has sent it.
                    stream.conn = None;
                }
                (stream.label.clone(), copies, false)
            }
            Carrier::Json(json) if json.answer.as_ref().is_some_and(|a| !a.is_closed()) => {
                json.replies.push(msg.clone());
                json.owes = json.owes.saturating_sub(1);
                if json.owes == 0 {
                    let replies = std::mem::take(&mut json.replies);
                    json.answer.take().map(|answer| answer.send(replies));
                }
                (json.label.clone(), 1, json.owes == 0)
            }
            Carrier::Json(_) => {
                self.carriers.remove(&number);
                return None;
            }
        };
        if finished {
            self.carriers.remove(&number);
        }
        Some((label, copies))
    }

    /// Send a server note on the standalone stream: its label, or `None` when it waits for one
    /// to connect.
    pub(super) fn note(&mut self, msg: &Value) -> Option<String> {
        if !self.standalone_connected() {
            self.waiting_notes.push(msg.clone());
            return None;
        }
        let event = self.event_id();
        let Some(Carrier::Sse(stream)) = self.standalone.and_then(|number| self.carriers.get_mut(&number)) else { return None };
        stream.write(event, &stream.style.json(msg));
        Some(stream.label.clone())
    }

    /// Register a carrier of `owes` responses to `ids`; its number and label.
    fn add(&mut self, prefix: &str, ids: &[String], make: impl FnOnce(String) -> Carrier) -> (u64, String) {
        let number = self.next_carrier;
        self.next_carrier += 1;
        let label = format!("{prefix}-{number}");
        self.carriers.insert(number, make(label.clone()));
        for id in ids {
            self.owed.entry(id.clone()).or_default().push_back(number);
        }
        (number, label)
    }

    /// The stream that wrote event `event`.
    fn stream_of(&self, event: u64) -> Option<u64> {
        self.carriers.iter().find_map(|(number, carrier)| match carrier {
            Carrier::Sse(stream) if stream.log.iter().any(|(id, _)| *id == event) => Some(*number),
            _ => None,
        })
    }

    /// Whether a standalone stream is connected.
    fn standalone_connected(&self) -> bool {
        let stream = self.standalone.and_then(|number| self.carriers.get(&number));
        matches!(stream, Some(Carrier::Sse(stream)) if stream.conn.is_some())
    }

    /// End every stream and answer (the session ends).
    fn end(&mut self) {
        for carrier in self.carriers.values_mut() {
            match carrier {
                Carrier::Sse(stream) => stream.conn = None,
                Carrier::Json(json) => json.answer = None,
            }
        }
    }
}

/// The bytes that open every SSE response body in `style`: the byte-order mark and the `retry:`
/// line, when the style writes them.
fn prelude(style: &Style) -> String {
    let eol = match style.eol {
        Eol::Lf => "\n",
        Eol::CrLf => "\r\n",
        Eol::Cr => "\r",
    };
    let mut out = String::new();
    if style.bom {
        out.push('\u{feff}');
    }
    if style.retry {
        out.push_str(&format!("retry:{}3000{eol}", if style.space { " " } else { "" }));
    }
    out
}

/// A stream style for this transport (the knob's, else the one drawn): every event carries its
/// `id:` (resumption needs them), and no bare `id` line (it would reset the client's last event
/// id).
fn stream_style(app: &App, bits: u64) -> Style {
    let style = lock(&app.0.knobs).stream_style.unwrap_or(Style::from_bits(bits));
    Style { event_ids: true, extra_fields: false, absolute_endpoint: false, ..style }
}

/// Whether the `Accept` header lists `media` (exactly, as `type/*` or `*/*`, with a non-zero q).
fn accepts(headers: &HeaderMap, media: &str) -> bool {
    let Some(accept) = header(headers, "accept") else { return false };
    let family = media.split('/').next().unwrap_or("");
    accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = parts.any(|p| p.trim().strip_prefix("q=").is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)));
        !refused && (name == media || name == format!("{family}/*") || name == "*/*")
    })
}

/// A refusal: status, logged cause, JSON-RPC error code and text.
type Refused = (StatusCode, &'static str, i64, String);

fn refused(status: StatusCode, cause: &'static str, text: impl Into<String>) -> Refused {
    let code = if status == StatusCode::NOT_FOUND { -32001 } else { -32000 };
    (status, cause, code, text.into())
}

/// A response for `session`: its id in `Mcp-Session-Id`.
fn with_session(mut response: Response, session: &str) -> Response {
    if let Ok(value) = session.parse() {
        response.headers_mut().insert("mcp-session-id", value);
    }
    response
}

fn sse_response(body: mpsc::UnboundedReceiver<Bytes>, session: &str) -> Response {
    let response = Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::new(ChannelBody(body)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    with_session(response, session)
}

/// Log one message of a POST.
fn log_post(session: &str, msg: &Value, key: Option<&str>, status: u16, cause: &str) {
    let id = msg.get("id").map(Value::to_string).unwrap_or_default();
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let note = crate::relay::client::note_step(msg).map(Value::to_string).unwrap_or_default();
    emit!(
        kind::HTTP_POST,
        session = %session,
        id = %id,
        client_id = %super::stamped_client(msg),
        note,
        method,
        action = %super::action_of(msg),
        key = key.unwrap_or(""),
        status,
        cause
    );
}

fn log_reset(session: &str, msg: &Value) {
    let id = msg.get("id").map(Value::to_string).unwrap_or_default();
    let (client_id, action) = (super::stamped_client(msg), super::action_of(msg));
    emit!(kind::FAULT_FIRED, fault = "post_reset", id = %id, client_id = %client_id, action = %action, session = %session);
}

/// Where an admitted POST goes.
enum Admitted {
    /// An `initialize` without a session id: a new session.
    New,
    /// A live session.
    Session(String),
}

impl App {
    /// The checks common to every method, in a real server's order: the bearer token, the
    /// `Origin`, what the client accepts, the session and its protocol version. `fault`: whether
    /// a `reject_status` knob refuses it (POSTs only).
    fn check(&self, headers: &HeaderMap, fault: bool, accept: &[&str]) -> Result<(), Refused> {
        if self.0.auth && !authorized(&self.0.config, headers) {
            return Err(refused(StatusCode::UNAUTHORIZED, "token", "Unauthorized: missing or wrong bearer token"));
        }
        if let Some(status) = lock(&self.0.knobs).reject_status.filter(|_| fault) {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return Err(refused(status, "fault", format!("Refused: HTTP {}", status.as_u16())));
        }
        if !origin_allowed(self, headers) {
            return Err(refused(StatusCode::FORBIDDEN, "origin", "Forbidden: Origin not allowed"));
        }
        if !accept.iter().all(|media| accepts(headers, media)) {
            let text = format!("Not Acceptable: Client must accept {}", accept.join(" and "));
            return Err(refused(StatusCode::NOT_ACCEPTABLE, "accept", text));
        }
        Ok(())
    }

    /// The live session a request names (400 without one, 404 for one not live), after checking
    /// its `MCP-Protocol-Version`.
    fn session_of(&self, headers: &HeaderMap) -> Result<String, Refused> {
        let Some(session) = header(headers, "mcp-session-id") else {
            return Err(refused(StatusCode::BAD_REQUEST, "no_session", "Bad Request: Mcp-Session-Id header is required"));
        };
        if !self.knows(session) {
            let cause = if lock(&self.0.durable).issued.contains(session) { "gone" } else { "unknown" };
            return Err(refused(StatusCode::NOT_FOUND, cause, "Session not found"));
        }
        match header(headers, "mcp-protocol-version") {
            Some(version) if !SUPPORTED_VERSIONS.contains(&version) => {
                let text = format!("Bad Request: Unsupported protocol version: {version} (supported: {})", SUPPORTED_VERSIONS.join(", "));
                Err(refused(StatusCode::BAD_REQUEST, "protocol_version", text))
            }
            _ => Ok(session.to_string()),
        }
    }

    /// Admit a POST of `messages` (a batch when `batch`), or say why not.
    fn admit_post(&self, headers: &HeaderMap, parsed: Option<&Value>, messages: &[Value], batch: bool) -> Result<Admitted, Refused> {
        self.check(headers, true, &["application/json", "text/event-stream"])?;
        if !header(headers, "content-type").is_some_and(|v| v.starts_with("application/json")) {
            return Err(refused(StatusCode::UNSUPPORTED_MEDIA_TYPE, "content_type", "Unsupported Media Type: Content-Type must be application/json"));
        }
        if parsed.is_none() {
            return Err((StatusCode::BAD_REQUEST, "malformed", -32700, "Parse error: the body is not JSON".into()));
        }
        if messages.is_empty() || !messages.iter().all(is_message) {
            return Err((StatusCode::BAD_REQUEST, "invalid", -32600, "Invalid Request: not a JSON-RPC 2.0 message".into()));
        }
        let initialize = messages.iter().any(|msg| msg.get("method").and_then(Value::as_str) == Some("initialize"));
        if initialize && batch {
            return Err((StatusCode::BAD_REQUEST, "invalid", -32600, "Invalid Request: initialize must not be part of a batch".into()));
        }
        if initialize {
            return match header(headers, "mcp-session-id") {
                None => Ok(Admitted::New),
                Some(_) => match self.session_of(headers) {
                    Ok(_) => Err(refused(StatusCode::BAD_REQUEST, "reinitialize", "Invalid Request: Server already initialized")),
                    Err(refusal) => Err(refusal),
                },
            };
        }
        let session = self.session_of(headers)?;
        let version = match &lock(&self.0.live).sessions.get(&session).map(|s| &s.sink) {
            Some(Sink::Streamable(streams)) => streams.version,
            _ => NO_BATCHES,
        };
        if batch && version >= NO_BATCHES {
            let text = format!("Invalid Request: protocol {version} has no batches");
            return Err((StatusCode::BAD_REQUEST, "batch", -32600, text));
        }
        Ok(Admitted::Session(session))
    }

    /// A new session for `initialize`.
    fn open_session(&self, initialize: &Value) -> String {
        let (notes_seen, epoch) = (self.notes_now(), self.epoch_now());
        let streams = Box::new(Streams::new(super::negotiate(initialize)));
        let session = {
            let mut live = lock(&self.0.live);
            let session = live.new_session_id(self.0.boot);
            live.sessions.insert(session.clone(), Session { sink: Sink::Streamable(streams), initialized: false, notes_seen, epoch });
            session
        };
        lock(&self.0.durable).issued.insert(session.clone());
        session
    }

    /// Run `f` on a live Streamable HTTP session's streams.
    fn streams<T>(&self, session: &str, f: impl FnOnce(&mut Streams) -> T) -> Option<T> {
        let mut live = lock(&self.0.live);
        match live.sessions.get_mut(session).map(|s| &mut s.sink) {
            Some(Sink::Streamable(streams)) => Some(f(streams)),
            _ => None,
        }
    }
}

async fn on_post(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let batch = parsed.as_ref().is_some_and(Value::is_array);
    let messages = match &parsed {
        Some(Value::Array(items)) => items.clone(),
        Some(msg) => vec![msg.clone()],
        None => vec![Value::Null],
    };
    let key = header(&headers, "idempotency-key").map(str::to_string);
    let named = header(&headers, "mcp-session-id").unwrap_or("").to_string();
    let reset = lock(&app.0.knobs).reset_posts;
    if reset == Some(false) {
        for msg in &messages {
            log_post(&named, msg, key.as_deref(), 0, "reset");
            log_reset(&named, msg);
        }
        return reset_connection();
    }
    let session = match app.admit_post(&headers, parsed.as_ref(), &messages, batch) {
        Err((status, cause, code, text)) => {
            for msg in &messages {
                log_post(&named, msg, key.as_deref(), status.as_u16(), cause);
                if reset.is_some() {
                    log_reset(&named, msg);
                }
            }
            return if reset.is_some() { reset_connection() } else { refusal(status, code, &text) };
        }
        Ok(Admitted::Session(session)) => session,
        Ok(Admitted::New) if !super::initialize_params_valid(&messages[0]) => {
            // No session for an `initialize` that initializes nothing.
            let msg = &messages[0];
            let id = msg.get("id").cloned().unwrap_or(Value::Null);
            log_post("", msg, key.as_deref(), 200, "accepted");
            let (client, action) = (super::stamped_client(msg), super::action_of(msg));
            emit!(kind::RPC_REFUSED, id = %id, client_id = %client, method = "initialize", action = %action, session = "", reason = "invalid_params");
            if reset.is_some() {
                log_reset("", msg);
                return reset_connection();
            }
            let body = super::invalid_initialize(&id).to_string();
            return (StatusCode::OK, [("content-type", "application/json")], body).into_response();
        }
        Ok(Admitted::New) => app.open_session(&messages[0]),
    };
    serve_post(&app, &session, messages, batch, key, reset).await
}

/// Serve an admitted POST on `session`: 202 for notifications and responses, else the replies
/// as JSON or as an SSE stream.
async fn serve_post(app: &App, session: &str, messages: Vec<Value>, batch: bool, key: Option<String>, reset: Option<bool>) -> Response {
    let requests: Vec<(String, String)> = messages
        .iter()
        .filter_map(|msg| match jsonrpc::shape(msg) {
            Shape::Request { id, .. } => Some((id_key(&id), super::ClientKeys::of(msg).knob)),
            _ => None,
        })
        .collect();
    let status = if requests.is_empty() { 202 } else { 200 };
    for msg in &messages {
        log_post(session, msg, key.as_deref(), status, "accepted");
    }
    if requests.is_empty() || reset.is_some() {
        for msg in messages {
            let copy = reset.map(|_| msg.clone());
            app.dispatch(session, msg, key.clone());
            if let Some(msg) = copy {
                log_reset(session, &msg);
            }
        }
        return if reset.is_some() { reset_connection() } else { with_session(StatusCode::ACCEPTED.into_response(), session) };
    }
    let ids: Vec<String> = requests.iter().map(|(id, _)| id.clone()).collect();
    let form = {
        let knobs = lock(&app.0.knobs);
        let doubled = requests.iter().any(|(_, client)| knobs.duplicate_ids.contains(client));
        match knobs.response_form {
            _ if doubled => ResponseForm::Sse,
            Some(form) => form,
            None if lock(&app.0.live).rng.below(2) == 0 => ResponseForm::Json,
            None => ResponseForm::Sse,
        }
    };
    if form == ResponseForm::Json {
        let (answer, answered) = oneshot::channel();
        let owes = ids.len();
        let make = |label| Carrier::Json(JsonAnswer { label, owes, replies: Vec::new(), answer: Some(answer) });
        app.streams(session, |streams| streams.add("json", &ids, make));
        for msg in messages {
            app.dispatch(session, msg, key.clone());
        }
        return match answered.await {
            Ok(mut replies) => {
                let body = if batch { Value::Array(replies) } else { replies.pop().unwrap_or(Value::Null) };
                let response = (StatusCode::OK, [("content-type", "application/json")], body.to_string()).into_response();
                with_session(response, session)
            }
            Err(_) => refusal(StatusCode::NOT_FOUND, -32001, "Session not found: it ended before the answer"),
        };
    }
    let bits = lock(&app.0.live).rng.next_u64();
    let style = stream_style(app, bits);
    let (items, items_rx) = mpsc::unbounded_channel();
    let opened = app.streams(session, |streams| {
        let serial = streams.next_conn;
        streams.next_conn += 1;
        let priming = (streams.version >= PRIMING).then(|| streams.event_id());
        let owes = ids.len();
        let make = |label| Carrier::Sse(SseStream { label, style, log: Vec::new(), conn: Some((serial, items)), owes });
        let (number, label) = streams.add("post", &ids, make);
        let mut backlog = VecDeque::from([prelude(&style)]);
        if let (Some(event), Some(Carrier::Sse(stream))) = (priming, streams.carriers.get_mut(&number)) {
            stream.log.push((event, style.frame("message", "", Some(event))));
            backlog.extend(stream.log.iter().map(|(_, frame)| frame.clone()));
        }
        (number, serial, label, backlog)
    });
    let Some((number, serial, label, backlog)) = opened else {
        return refusal(StatusCode::NOT_FOUND, -32001, "Session not found");
    };
    emit!(kind::STREAM_OPEN, session = %session, stream = %label, style = %style.label(), last_event_id = "", ids = %format!("[{}]", ids.join(",")));
    let (body, body_rx) = mpsc::unbounded_channel();
    let conn = Conn { session: session.to_string(), number, serial, label, style };
    tokio::task::spawn_local(stream(app.clone(), conn, backlog, items_rx, body));
    for msg in messages {
        app.dispatch(session, msg, key.clone());
    }
    sse_response(body_rx, session)
}

/// One connection of a stream.
struct Conn {
    session: String,
    number: u64,
    serial: u64,
    label: String,
    style: Style,
}

/// Write one connection of a stream; when it ends, the stream keeps its log for resumption.
async fn stream(app: App, conn: Conn, backlog: VecDeque<String>, items: mpsc::UnboundedReceiver<String>, body: mpsc::UnboundedSender<Bytes>) {
    let by = writer::write(&app, &conn.session, conn.style, backlog, items, &body).await;
    app.streams(&conn.session, |streams| {
        if let Some(Carrier::Sse(stream)) = streams.carriers.get_mut(&conn.number) {
            if stream.conn.as_ref().is_some_and(|(serial, _)| *serial == conn.serial) {
                stream.conn = None;
            }
        }
    });
    emit!(kind::STREAM_CLOSE, session = %conn.session, stream = %conn.label, by);
}

async fn on_get(State(app): State<App>, headers: HeaderMap) -> Response {
    let last = header(&headers, "last-event-id").map(str::to_string);
    let opened = app.check(&headers, false, &["text/event-stream"]).and_then(|()| app.session_of(&headers)).and_then(|session| {
        open_get(&app, &session, last.as_deref()).map(|opened| (session, opened))
    });
    let (session, (conn, backlog, items_rx, notes)) = match opened {
        Ok(opened) => opened,
        Err((status, cause, code, text)) => {
            emit!(kind::STREAM_REFUSED, status = status.as_u16(), cause, last_event_id = last.as_deref().unwrap_or(""));
            return refusal(status, code, &text);
        }
    };
    emit!(kind::STREAM_OPEN, session = %session, stream = %conn.label, style = %conn.style.label(), last_event_id = last.as_deref().unwrap_or(""), ids = "");
    for note in notes {
        emit!(kind::REPLY_SENT, id = "", client_id = "", action = "", session = %session, msg = %note, stream = %conn.label);
    }
    let (body, body_rx) = mpsc::unbounded_channel();
    tokio::task::spawn_local(stream(app.clone(), conn, backlog, items_rx, body));
    sse_response(body_rx, &session)
}

/// What a GET opens: the connection, its first bytes, its queue, and the waiting notes it took.
type Opened = (Conn, VecDeque<String>, mpsc::UnboundedReceiver<String>, Vec<String>);

/// Open the standalone stream, or resume the stream that wrote event `last`.
fn open_get(app: &App, session: &str, last: Option<&str>) -> Result<Opened, Refused> {
    let bits = lock(&app.0.live).rng.next_u64();
    let opened = app.streams(session, |streams| {
        let serial = streams.next_conn;
        let (items, items_rx) = mpsc::unbounded_channel();
        let number = match last {
            Some(last) => {
                let event = last.trim().parse::<u64>().ok();
                let Some(number) = event.and_then(|event| streams.stream_of(event)) else {
                    return Err(refused(StatusCode::BAD_REQUEST, "last_event_id", format!("Bad Request: no event {last} on this session")));
                };
                number
            }
            None => {
                if streams.standalone_connected() {
                    return Err(refused(StatusCode::CONFLICT, "conflict", "Conflict: only one standalone SSE stream is allowed per session"));
                }
                let priming = (streams.version >= PRIMING).then(|| streams.event_id());
                let style = stream_style(app, bits);
                let make = |label| Carrier::Sse(SseStream { label, style, log: Vec::new(), conn: None, owes: 0 });
                let (number, _) = streams.add("get", &[], make);
                if let (Some(event), Some(Carrier::Sse(stream))) = (priming, streams.carriers.get_mut(&number)) {
                    stream.log.push((event, style.frame("message", "", Some(event))));
                }
                streams.standalone = Some(number);
                number
            }
        };
        let after = last.and_then(|last| last.trim().parse::<u64>().ok()).unwrap_or(0);
        let Some(Carrier::Sse(stream)) = streams.carriers.get_mut(&number) else {
            return Err(refused(StatusCode::BAD_REQUEST, "last_event_id", "Bad Request: that stream is gone"));
        };
        if stream.conn.is_some() {
            return Err(refused(StatusCode::CONFLICT, "conflict", "Conflict: that stream is already connected"));
        }
        streams.next_conn += 1;
        let mut backlog = VecDeque::from([prelude(&stream.style)]);
        backlog.extend(stream.log.iter().filter(|(id, _)| *id > after).map(|(_, frame)| frame.clone()));
        let standalone = streams.standalone == Some(number);
        let (label, style) = (stream.label.clone(), stream.style);
        // A POST stream with nothing left to answer ends after its replay.
        if standalone || stream.owes > 0 {
            stream.conn = Some((serial, items));
        }
        let mut notes = Vec::new();
        if standalone {
            for note in std::mem::take(&mut streams.waiting_notes) {
                let event = streams.event_id();
                if let Some(Carrier::Sse(stream)) = streams.carriers.get_mut(&number) {
                    stream.write(event, &style.json(&note));
                }
                notes.push(note.to_string());
            }
        }
        let conn = Conn { session: session.to_string(), number, serial, label, style };
        Ok((conn, backlog, items_rx, notes))
    });
    opened.unwrap_or_else(|| Err(refused(StatusCode::NOT_FOUND, "gone", "Session not found")))
}

async fn on_delete(State(app): State<App>, headers: HeaderMap) -> Response {
    let named = header(&headers, "mcp-session-id").unwrap_or("").to_string();
    let ended = app.check(&headers, false, &[]).and_then(|()| app.session_of(&headers)).inspect(|session| {
        if let Some(mut entry) = lock(&app.0.live).sessions.remove(session) {
            if let Sink::Streamable(streams) = &mut entry.sink {
                streams.end();
            }
        }
    });
    let (status, cause, response) = match ended {
        Ok(session) => (200, "accepted", with_session(StatusCode::OK.into_response(), &session)),
        Err((status, cause, code, text)) => (status.as_u16(), cause, refusal(status, code, &text)),
    };
    emit!(kind::HTTP_POST, session = %named, id = "", client_id = "", note = "", method = "DELETE", action = "", key = "", status, cause);
    response
}
