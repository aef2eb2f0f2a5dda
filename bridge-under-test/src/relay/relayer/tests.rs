//! The standard transports in a turmoil simulation: a client speaks HTTP to the relayer with
//! hyper, as a real client would, and the relayer's trace events are captured. Per transport:
//! what a real server refuses, a happy path (initialize, notifications/initialized, tools/list,
//! tools/call, a server notification, the end of the session), and the fault knobs on the
//! streams that carry replies.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use super::{serve_transport, Durable, Transport};
use crate::events::{host, TARGET};
use crate::net::http::{spawn_owned, AbortOnDrop};
use crate::relay::knobs::{lock, RelayerKnobs, ResponseForm, SharedKnobs};
use crate::relay::{RelayerConfig, RELAYER_PORT};
use crate::seam;

// ---- the captured trace ----------------------------------------------------------------------

/// The `mcp_sim` events of a run: kind and fields as text.
#[derive(Clone, Default)]
pub(super) struct Events(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl tracing::Subscriber for Events {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target() == TARGET
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        lock(&self.0).push(fields);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

impl Events {
    /// The events of `kind`.
    pub(super) fn of(&self, kind: &str) -> Vec<BTreeMap<String, String>> {
        lock(&self.0).iter().filter(|e| e.get("kind").map(String::as_str) == Some(kind)).cloned().collect()
    }

    /// The values of `field` on the events of `kind`.
    pub(super) fn field(&self, kind: &str, field: &str) -> Vec<String> {
        self.of(kind).iter().map(|e| e.get(field).cloned().unwrap_or_default()).collect()
    }
}

// ---- the simulation --------------------------------------------------------------------------

/// Serve `transport` on the relayer host and run `client` against it; the events.
pub(super) fn simulate<F>(transport: Transport, auth: bool, knobs: &SharedKnobs, client: impl FnOnce(SharedKnobs) -> F) -> Events
where
    F: Future<Output = turmoil::Result> + 'static,
{
    let events = Events::default();
    let mut sim = turmoil::Builder::new().simulation_duration(Duration::from_secs(120)).build();
    let (served, durable) = (knobs.clone(), Arc::new(Mutex::new(Durable::default())));
    sim.host(host::RELAYER, move || {
        let (knobs, durable) = (served.clone(), durable.clone());
        async move {
            let listener = seam::TcpListener::bind(("0.0.0.0", RELAYER_PORT)).await?;
            serve_transport(listener, RelayerConfig::default(), knobs, durable, transport, auth).await
        }
    });
    sim.client(host::CLIENT, client(knobs.clone()));
    tracing::subscriber::with_default(events.clone(), || sim.run()).expect("the simulation runs");
    events
}

/// Change the knobs and tell the relayer.
pub(super) fn turn(knobs: &SharedKnobs, change: impl FnOnce(&mut RelayerKnobs)) {
    let mut knobs = lock(knobs);
    change(&mut knobs);
    knobs.notify();
}

// ---- an HTTP client --------------------------------------------------------------------------

/// A response: status, headers and the body as it arrives.
pub(super) struct Http {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    body: Incoming,
    sse: Sse,
    _conn: AbortOnDrop,
}

/// Send one request over a connection of its own.
pub(super) async fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> io::Result<Http> {
    let stream = seam::TcpStream::connect((host::RELAYER, RELAYER_PORT)).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(io::Error::other)?;
    let task = spawn_owned(async move {
        let _ = conn.await;
    });
    let mut builder = Request::builder().method(method).uri(path).header("host", format!("{}:{RELAYER_PORT}", host::RELAYER));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder.body(Full::new(Bytes::from(body.to_string()))).map_err(io::Error::other)?;
    let response = sender.send_request(request).await.map_err(io::Error::other)?;
    let (parts, body) = response.into_parts();
    Ok(Http { status: parts.status.as_u16(), headers: parts.headers, body, sse: Sse::default(), _conn: task })
}

impl Http {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
    }

    /// The whole body.
    pub async fn text(self) -> String {
        let bytes = self.body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The whole body as JSON.
    pub async fn json(self) -> Value {
        serde_json::from_str(&self.text().await).unwrap_or(Value::Null)
    }

    /// The next SSE event, or `None` at the end of the stream or after `wait_ms` without one.
    pub async fn event(&mut self, wait_ms: u64) -> Option<Event> {
        let deadline = seam::now() + Duration::from_millis(wait_ms);
        loop {
            if let Some(event) = self.sse.ready.pop_front() {
                return Some(event);
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame()).await.ok()??.ok()?;
            if let Ok(data) = frame.into_data() {
                self.sse.feed(&data);
            }
        }
    }

    /// The next event that carries a JSON-RPC message (skipping priming events).
    pub async fn message(&mut self, wait_ms: u64) -> Option<(Value, String)> {
        loop {
            let event = self.event(wait_ms).await?;
            if !event.data.is_empty() {
                return Some((serde_json::from_str(&event.data).unwrap_or(Value::Null), event.id));
            }
        }
    }

    /// Whether the stream ends within `wait_ms` (no more events).
    pub async fn ends(&mut self, wait_ms: u64) -> bool {
        let deadline = seam::now() + Duration::from_millis(wait_ms);
        loop {
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return false,
                Ok(None | Some(Err(_))) => return true,
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.sse.feed(&data);
                    }
                }
            }
        }
    }
}

/// One SSE event with the last event id the stream had set when it was dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    pub event: String,
    pub data: String,
    pub id: String,
}

/// An SSE parser that keeps event ids (the WHATWG algorithm: LF, CRLF or CR line ends, a leading
/// byte-order mark, comments, the last event id buffer), which the bridge's parser ignores.
#[derive(Default)]
struct Sse {
    line: Vec<u8>,
    after_cr: bool,
    started: bool,
    event: Option<String>,
    data: Option<String>,
    id: String,
    ready: std::collections::VecDeque<Event>,
}

impl Sse {
    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            if byte == b'\n' && after_cr {
                continue;
            }
            if byte != b'\n' && byte != b'\r' {
                self.line.push(byte);
                continue;
            }
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
            let line = if std::mem::replace(&mut self.started, true) { line.as_str() } else { line.trim_start_matches('\u{feff}') }.to_string();
            if line.is_empty() {
                let event = self.event.take().unwrap_or_else(|| "message".into());
                if let Some(data) = self.data.take() {
                    self.ready.push_back(Event { event, data, id: self.id.clone() });
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((&line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.event = Some(value.to_string()),
                "data" => match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                },
                "id" if !value.contains('\0') => self.id = value.to_string(),
                _ => {}
            }
        }
    }
}

// ---- MCP messages ----------------------------------------------------------------------------

pub(super) fn initialize(id: u64, version: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1.0.0"}}
    })
    .to_string()
}

pub(super) fn initialized() -> String {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string()
}

pub(super) fn tools_list(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string()
}

pub(super) fn call(id: u64, action: &str, work_ms: u64) -> String {
    let arguments = json!({"action": action, "work_ms": work_ms});
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "recall", "arguments": arguments}}).to_string()
}

pub(super) const BEARER: &str = "Bearer token-0";

/// Check a condition inside a client, failing the simulation with `what`.
pub(super) fn ensure(ok: bool, what: impl std::fmt::Display) -> turmoil::Result {
    if ok {
        Ok(())
    } else {
        Err(what.to_string().into())
    }
}

// ---- Streamable HTTP -------------------------------------------------------------------------

const ACCEPT_BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");
const JSON_BODY: (&str, &str) = ("content-type", "application/json");

/// POST to `/mcp` with the headers a compliant client sends, plus `extra`.
async fn mcp_post(session: Option<&str>, extra: &[(&str, &str)], body: &str) -> io::Result<Http> {
    let mut headers = vec![ACCEPT_BOTH, JSON_BODY, ("authorization", BEARER)];
    if let Some(session) = session {
        headers.push(("mcp-session-id", session));
    }
    headers.extend_from_slice(extra);
    request("POST", "/mcp", &headers, body).await
}

/// The answer to a request POST, JSON or SSE: the one message it carries.
async fn answer(mut response: Http) -> Value {
    if response.header("content-type").is_some_and(|c| c.starts_with("application/json")) {
        return response.json().await;
    }
    response.message(5_000).await.map(|(msg, _)| msg).unwrap_or(Value::Null)
}

/// Initialize a Streamable HTTP session; its id.
async fn mcp_session(version: &str) -> Result<String, Box<dyn std::error::Error>> {
    let response = mcp_post(None, &[], &initialize(1, version)).await?;
    ensure(response.status == 200, format!("initialize: HTTP {}", response.status))?;
    let session = response.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?;
    let reply = answer(response).await;
    ensure(reply["result"]["protocolVersion"] == json!(version), format!("initialize answered {reply}"))?;
    let note = mcp_post(Some(&session), &[("mcp-protocol-version", version)], &initialized()).await?;
    ensure(note.status == 202, format!("notifications/initialized: HTTP {}", note.status))?;
    ensure(note.text().await.is_empty(), "a 202 with a body")?;
    Ok(session)
}

/// The happy path in one response form: initialize, notifications/initialized (202),
/// tools/list, tools/call; a server notification on the GET stream; DELETE ends the session.
fn streamable_happy_path(form: ResponseForm) -> Events {
    let knobs = RelayerKnobs::shared();
    turn(&knobs, |k| k.response_form = Some(form));
    simulate(Transport::StreamableHttp, true, &knobs, |knobs| async move {
        let session = mcp_session("2025-11-25").await?;
        let version = ("mcp-protocol-version", "2025-11-25");
        let list = mcp_post(Some(&session), &[version], &tools_list(2)).await?;
        ensure(list.status == 200, format!("tools/list: HTTP {}", list.status))?;
        let expected = match form {
            ResponseForm::Json => "application/json",
            ResponseForm::Sse => "text/event-stream",
        };
        ensure(list.header("content-type").as_deref() == Some(expected), format!("tools/list came as {:?}", list.header("content-type")))?;
        ensure(list.header("mcp-session-id").as_deref() == Some(session.as_str()), "tools/list: no session id")?;
        let tools = answer(list).await;
        let names: Vec<_> = tools["result"]["tools"].as_array().into_iter().flatten().map(|t| t["name"].clone()).collect();
        ensure(names == [json!("recall"), json!("remember"), json!("analyze")], format!("tools/list answered {tools}"))?;
        let reply = answer(mcp_post(Some(&session), &[version], &call(3, "a1", 200)).await?).await;
        ensure(reply["id"] == json!(3) && reply["result"]["content"][0]["text"] == json!("recall a1: done"), format!("tools/call answered {reply}"))?;
        // The standalone stream: a server notification comes on it.
        let mut get = request("GET", "/mcp", &[("accept", "text/event-stream"), ("authorization", BEARER), ("mcp-session-id", &session), version], "").await?;
        ensure(get.status == 200, format!("GET: HTTP {}", get.status))?;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        turn(&knobs, |k| k.push_server_note(note.clone()));
        let got = get.message(2_000).await.map(|(msg, _)| msg);
        ensure(got.as_ref() == Some(&note), format!("the GET stream carried {got:?}"))?;
        // A second standalone stream while one is connected: 409.
        let second = request("GET", "/mcp", &[("accept", "text/event-stream"), ("authorization", BEARER), ("mcp-session-id", &session)], "").await?;
        ensure(second.status == 409, format!("a second GET: HTTP {}", second.status))?;
        // DELETE ends the session: its stream ends, and it is 404 from then on.
        let delete = request("DELETE", "/mcp", &[("authorization", BEARER), ("mcp-session-id", &session)], "").await?;
        ensure(delete.status == 200, format!("DELETE: HTTP {}", delete.status))?;
        ensure(get.ends(1_000).await, "the GET stream outlived its session")?;
        let after = mcp_post(Some(&session), &[version], &tools_list(4)).await?;
        ensure(after.status == 404, format!("after DELETE: HTTP {}", after.status))?;
        Ok(())
    })
}

#[test]
fn streamable_happy_path_as_json() {
    let events = streamable_happy_path(ResponseForm::Json);
    let streams = events.field("reply.sent", "stream");
    assert!(streams.iter().take(3).all(|s| s.starts_with("json-")), "{streams:?}");
    assert_eq!(events.field("http.post", "status"), ["200", "202", "200", "200", "200", "404"]);
    assert_eq!(events.field("http.post", "method"), ["initialize", "notifications/initialized", "tools/list", "tools/call", "DELETE", "tools/list"]);
    assert_eq!(events.field("http.post", "cause").last().map(String::as_str), Some("gone"));
    assert_eq!(events.field("stream.refused", "cause"), ["conflict"]);
}

#[test]
fn streamable_happy_path_as_sse() {
    let events = streamable_happy_path(ResponseForm::Sse);
    let opened = events.field("stream.open", "stream");
    assert_eq!(opened, ["post-1", "post-2", "post-3", "get-4"]);
    let sent = events.field("reply.sent", "stream");
    assert_eq!(sent, ["post-1", "post-2", "post-3", "get-4"]);
    // Each POST stream ends once it carried its response; DELETE ends the GET stream.
    assert_eq!(events.field("stream.close", "stream"), ["post-1", "post-2", "post-3", "get-4"]);
    assert!(events.field("stream.open", "session").iter().all(|s| s.starts_with("b1-s1-")));
}

/// What a real server refuses, each with its status and logged cause.
#[test]
fn streamable_refuses_what_a_server_refuses() {
    let knobs = RelayerKnobs::shared();
    let events = simulate(Transport::StreamableHttp, true, &knobs, |_| async move {
        let expect = |what: &str, response: Http, status: u16| ensure(response.status == status, format!("{what}: HTTP {} (expected {status})", response.status));
        // A request before initialize: no session to name, so HTTP 400.
        expect("tools/list before initialize", mcp_post(None, &[], &tools_list(1)).await?, 400)?;
        expect("an unknown session", mcp_post(Some("b1-s9-000000"), &[], &tools_list(1)).await?, 404)?;
        let token = request("POST", "/mcp", &[ACCEPT_BOTH, JSON_BODY], &initialize(1, "2025-11-25")).await?;
        ensure(token.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")), "401 without WWW-Authenticate")?;
        expect("no token", token, 401)?;
        let wrong = request("POST", "/mcp", &[ACCEPT_BOTH, JSON_BODY, ("authorization", "Bearer nope")], &initialize(1, "2025-11-25")).await?;
        expect("a wrong token", wrong, 401)?;
        let json_only = request("POST", "/mcp", &[("accept", "application/json"), JSON_BODY, ("authorization", BEARER)], &initialize(1, "2025-11-25")).await?;
        expect("accepting JSON only", json_only, 406)?;
        let text = request("POST", "/mcp", &[ACCEPT_BOTH, ("content-type", "text/plain"), ("authorization", BEARER)], &initialize(1, "2025-11-25")).await?;
        expect("a text/plain body", text, 415)?;
        let parse = mcp_post(None, &[], "{not json").await?;
        ensure(parse.status == 400, "not JSON")?;
        ensure(parse.json().await["error"]["code"] == json!(-32700), "not JSON: no parse error")?;
        let session = mcp_session("2025-11-25").await?;
        let s = Some(session.as_str());
        expect("an unsupported protocol version", mcp_post(s, &[("mcp-protocol-version", "1999-01-01")], &tools_list(2)).await?, 400)?;
        // Absent, the version is taken as 2025-03-26: allowed.
        expect("no protocol version header", mcp_post(s, &[], &tools_list(3)).await?, 200)?;
        let batch = format!("[{},{}]", tools_list(4), tools_list(5));
        expect("a batch on 2025-11-25", mcp_post(s, &[], &batch).await?, 400)?;
        expect("initialize on a live session", mcp_post(s, &[], &initialize(6, "2025-11-25")).await?, 400)?;
        expect("no jsonrpc envelope", mcp_post(s, &[], r#"{"id": 7, "method": "ping"}"#).await?, 400)?;
        expect("an Origin not its own", mcp_post(s, &[("origin", "http://evil.example")], &tools_list(8)).await?, 403)?;
        let get = |headers: Vec<(&'static str, String)>| async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            request("GET", "/mcp", &headers, "").await
        };
        let sse = ("accept", "text/event-stream".to_string());
        let auth = ("authorization", BEARER.to_string());
        expect("GET without a session", get(vec![sse.clone(), auth.clone()]).await?, 400)?;
        expect("GET for an unknown session", get(vec![sse.clone(), auth.clone(), ("mcp-session-id", "x".into())]).await?, 404)?;
        expect("GET not accepting SSE", get(vec![("accept", "application/json".into()), auth.clone(), ("mcp-session-id", session.clone())]).await?, 406)?;
        expect("GET without a token", get(vec![sse.clone(), ("mcp-session-id", session.clone())]).await?, 401)?;
        expect("GET resuming an event never written", get(vec![sse.clone(), auth.clone(), ("mcp-session-id", session.clone()), ("last-event-id", "999".into())]).await?, 400)?;
        let delete = request("DELETE", "/mcp", &[("authorization", BEARER), ("mcp-session-id", &session)], "").await?;
        expect("DELETE", delete, 200)?;
        expect("a request to an ended session", mcp_post(s, &[], &tools_list(9)).await?, 404)?;
        // The client must initialize again without the ended session's id.
        expect("initialize naming an ended session", mcp_post(s, &[], &initialize(10, "2025-11-25")).await?, 404)?;
        mcp_session("2025-06-18").await?;
        Ok(())
    });
    let causes = events.field("http.post", "cause");
    let expected = [
        "no_session", "unknown", "token", "token", "accept", "content_type", "malformed", "accepted", "accepted", "protocol_version",
        "accepted", "batch", "batch", "reinitialize", "invalid", "origin", "accepted", "gone", "gone", "accepted", "accepted",
    ];
    assert_eq!(causes, expected);
    let refused: Vec<_> = events.of("stream.refused").iter().map(|e| format!("{} {}", e["status"], e["cause"])).collect();
    assert_eq!(refused, ["400 no_session", "404 unknown", "406 accept", "401 token", "400 last_event_id"]);
    assert_eq!(events.field("rpc.initialize", "session").len(), 2);
}

/// A POST stream cut by a stream EOF is resumed with GET and `Last-Event-ID`: the reply the
/// tool finished meanwhile comes on it; duplicated replies come twice on the stream.
#[test]
fn streamable_resumes_a_cut_stream_and_doubles_a_reply() {
    let knobs = RelayerKnobs::shared();
    turn(&knobs, |k| k.response_form = Some(ResponseForm::Sse));
    let events = simulate(Transport::StreamableHttp, false, &knobs, |knobs| async move {
        let session = mcp_session("2025-11-25").await?;
        let mut post = mcp_post(Some(&session), &[], &call(2, "slow", 1_000)).await?;
        let priming = post.event(1_000).await.ok_or("no priming event")?;
        ensure(priming.data.is_empty() && !priming.id.is_empty(), format!("the first event was {priming:?}"))?;
        turn(&knobs, |k| k.eof_epoch += 1);
        ensure(post.ends(500).await, "the stream outlived the EOF")?;
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let headers = [("accept", "text/event-stream"), ("mcp-session-id", session.as_str()), ("last-event-id", priming.id.as_str())];
        let mut resumed = request("GET", "/mcp", &headers, "").await?;
        ensure(resumed.status == 200, format!("resume: HTTP {}", resumed.status))?;
        let reply = resumed.message(1_000).await.map(|(msg, _)| msg);
        ensure(reply.as_ref().is_some_and(|r| r["id"] == json!(2) && r.get("result").is_some()), format!("resumed with {reply:?}"))?;
        ensure(resumed.ends(1_000).await, "the resumed stream did not end after its reply")?;
        // A doubled reply: twice on its stream, under two event ids.
        turn(&knobs, |k| {
            k.duplicate_ids.insert("3".into());
        });
        let mut post = mcp_post(Some(&session), &[], &tools_list(3)).await?;
        let first = post.message(1_000).await.ok_or("no reply")?;
        let second = post.message(1_000).await.ok_or("no second copy")?;
        ensure(first.0 == second.0 && first.1 != second.1, format!("copies {first:?} and {second:?}"))?;
        Ok(())
    });
    assert_eq!(events.field("stream.open", "last_event_id")[2], "3");
    assert_eq!(events.field("stream.open", "stream"), ["post-1", "post-2", "post-2", "post-3"]);
    assert_eq!(events.field("fault.fired", "fault"), ["stream_eof", "duplicate_reply"]);
    let sent: Vec<_> = events.of("reply.sent").iter().map(|e| format!("{} {}", e["id"], e["stream"])).collect();
    assert_eq!(sent, ["1 post-1", "2 post-2", "3 post-3"]);
}

/// A 2025-03-26 session has its batches served; JSON answers them with an array.
#[test]
fn streamable_serves_batches_on_2025_03_26() {
    let knobs = RelayerKnobs::shared();
    turn(&knobs, |k| k.response_form = Some(ResponseForm::Json));
    simulate(Transport::StreamableHttp, true, &knobs, |_| async move {
        let session = mcp_session("2025-03-26").await?;
        let batch = format!("[{},{}]", tools_list(2), call(3, "b", 100));
        let replies = mcp_post(Some(&session), &[], &batch).await?.json().await;
        let mut ids: Vec<_> = replies.as_array().into_iter().flatten().map(|r| r["id"].clone()).collect();
        ids.sort_by_key(Value::to_string);
        ensure(ids == [json!(2), json!(3)], format!("the batch was answered {replies}"))?;
        Ok(())
    });
}

/// A withheld reply leaves the JSON POST unanswered; a swallowed one too; both are logged lost.
#[test]
fn streamable_reply_knobs_act_on_json_answers() {
    let knobs = RelayerKnobs::shared();
    turn(&knobs, |k| k.response_form = Some(ResponseForm::Json));
    let events = simulate(Transport::StreamableHttp, true, &knobs, |knobs| async move {
        let session = mcp_session("2025-11-25").await?;
        turn(&knobs, |k| {
            k.swallow_ids.insert("2".into());
        });
        let swallowed = tokio::time::timeout(Duration::from_secs(2), async { mcp_post(Some(&session), &[], &tools_list(2)).await?.json().await; io::Result::Ok(()) }).await;
        ensure(swallowed.is_err(), "a swallowed reply was answered")?;
        turn(&knobs, |k| {
            k.late_ids.insert("3".into(), 1_000);
        });
        let started = seam::now();
        let late = mcp_post(Some(&session), &[], &tools_list(3)).await?.json().await;
        ensure(late["id"] == json!(3) && seam::now() - started >= Duration::from_millis(1_000), "the late reply came early")?;
        Ok(())
    });
    assert_eq!(events.field("fault.fired", "fault"), ["swallow_reply", "late_reply"]);
    assert_eq!(events.field("reply.lost", "id"), ["2"]);
}

/// The POST and stream knobs on Streamable HTTP: a rejection, resets before and after serving,
/// a flap (the POST stream dropped after its priming event: the reply is resumed with GET), a
/// stall (the GET stream writes nothing, not even keep-alives, until it ends), withheld replies.
#[test]
fn streamable_post_and_stream_knobs() {
    let knobs = RelayerKnobs::shared();
    turn(&knobs, |k| k.response_form = Some(ResponseForm::Sse));
    let events = simulate(Transport::StreamableHttp, true, &knobs, |knobs| async move {
        let session = mcp_session("2025-11-25").await?;
        let s = Some(session.as_str());
        turn(&knobs, |k| k.reject_status = Some(503));
        ensure(mcp_post(s, &[], &tools_list(2)).await?.status == 503, "a rejected POST")?;
        turn(&knobs, |k| k.reject_status = None);
        turn(&knobs, |k| k.reset_posts = Some(false));
        ensure(mcp_post(s, &[], &tools_list(3)).await.is_err(), "a POST reset before it was read was answered")?;
        turn(&knobs, |k| k.reset_posts = Some(true));
        ensure(mcp_post(s, &[], &call(4, "r", 100)).await.is_err(), "a POST reset after it was served was answered")?;
        turn(&knobs, |k| k.reset_posts = None);
        // A flap drops the POST stream right after its priming event; GET resumes it.
        turn(&knobs, |k| k.flap = Some(true));
        let mut post = mcp_post(s, &[], &tools_list(5)).await?;
        let priming = post.event(500).await.ok_or("no priming event")?;
        ensure(post.ends(500).await, "the flapped stream went on")?;
        turn(&knobs, |k| k.flap = None);
        let resume = [("accept", "text/event-stream"), ("authorization", BEARER), ("mcp-session-id", session.as_str()), ("last-event-id", priming.id.as_str())];
        let mut resumed = request("GET", "/mcp", &resume, "").await?;
        let reply = resumed.message(1_000).await.map(|(msg, _)| msg);
        ensure(reply.as_ref().is_some_and(|r| r["id"] == json!(5)), format!("resumed with {reply:?}"))?;
        // A stall holds the standalone stream: the note waits for its end.
        let mut get = request("GET", "/mcp", &[("accept", "text/event-stream"), ("authorization", BEARER), ("mcp-session-id", session.as_str())], "").await?;
        get.event(300).await.ok_or("no priming event on the GET stream")?;
        turn(&knobs, |k| k.set_stall((0, 2_000), true));
        let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        turn(&knobs, |k| k.push_server_note(note.clone()));
        ensure(get.event(1_500).await.is_none(), "a stalled stream wrote")?;
        turn(&knobs, |k| k.set_stall((0, 2_000), false));
        let got = get.message(1_000).await.map(|(msg, _)| msg);
        ensure(got.as_ref() == Some(&note), format!("after the stall: {got:?}"))?;
        // Withheld replies: the stream stays open, its keep-alives flow, the reply never comes.
        turn(&knobs, |k| k.withhold_replies = true);
        let mut post = mcp_post(s, &[], &tools_list(6)).await?;
        ensure(post.message(4_000).await.is_none() && !post.ends(10).await, "a withheld reply came, or its stream ended")?;
        Ok(())
    });
    let posts: Vec<_> = events.of("http.post").iter().map(|e| format!("{} {} {}", e["id"], e["status"], e["cause"])).collect();
    assert_eq!(posts[2..], ["2 503 fault", "3 0 reset", "4 200 accepted", "5 200 accepted", "6 200 accepted"]);
    assert_eq!(events.field("fault.fired", "fault"), ["post_reset", "post_reset", "stream_flap", "withhold_replies"]);
    assert_eq!(events.field("reply.lost", "id"), ["4", "6"]);
    assert_eq!(events.field("tool.exec", "id"), ["4"]);
}

// ---- HTTP+SSE (2024-11-05) -------------------------------------------------------------------

/// Open an HTTP+SSE stream; it and the POST path its endpoint event names.
async fn sse_open(headers: &[(&str, &str)]) -> Result<(Http, String), Box<dyn std::error::Error>> {
    let mut stream = request("GET", "/sse", headers, "").await?;
    ensure(stream.status == 200, format!("GET /sse: HTTP {}", stream.status))?;
    let endpoint = stream.event(1_000).await.ok_or("no endpoint event")?;
    ensure(endpoint.event == "endpoint", format!("the first event was {endpoint:?}"))?;
    let path = endpoint.data.strip_prefix(&format!("http://{}:{RELAYER_PORT}", host::RELAYER)).unwrap_or(&endpoint.data).to_string();
    Ok((stream, path))
}

async fn sse_post(path: &str, extra: &[(&str, &str)], body: &str) -> io::Result<Http> {
    let mut headers = vec![JSON_BODY];
    headers.extend_from_slice(extra);
    request("POST", path, &headers, body).await
}

#[test]
fn sse_happy_path_without_auth() {
    let knobs = RelayerKnobs::shared();
    let events = simulate(Transport::Sse, false, &knobs, |knobs| async move {
        let (mut stream, path) = sse_open(&[("accept", "text/event-stream")]).await?;
        ensure(path.starts_with("/messages?sessionId="), format!("endpoint {path}"))?;
        let posted = sse_post(&path, &[], &initialize(1, "2024-11-05")).await?;
        ensure(posted.status == 202, format!("initialize: HTTP {}", posted.status))?;
        ensure(posted.text().await == "Accepted", "a 202 without its text")?;
        let reply = stream.message(1_000).await.map(|(msg, _)| msg).unwrap_or_default();
        ensure(reply["result"]["protocolVersion"] == json!("2024-11-05"), format!("initialize answered {reply}"))?;
        ensure(sse_post(&path, &[], &initialized()).await?.status == 202, "notifications/initialized")?;
        ensure(sse_post(&path, &[], &tools_list(2)).await?.status == 202, "tools/list")?;
        let tools = stream.message(1_000).await.map(|(msg, _)| msg).unwrap_or_default();
        ensure(tools["result"]["tools"].as_array().is_some_and(|t| t.len() == 3), format!("tools/list answered {tools}"))?;
        ensure(sse_post(&path, &[], &call(3, "a1", 300)).await?.status == 202, "tools/call")?;
        let reply = stream.message(2_000).await.map(|(msg, _)| msg).unwrap_or_default();
        ensure(reply["result"]["content"][0]["text"] == json!("recall a1: done"), format!("tools/call answered {reply}"))?;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hello"}});
        turn(&knobs, |k| k.push_server_note(note.clone()));
        let got = stream.message(1_000).await.map(|(msg, _)| msg);
        ensure(got.as_ref() == Some(&note), format!("the stream carried {got:?}"))?;
        // A stream EOF ends the session: its POSTs are 404 from then on.
        turn(&knobs, |k| k.eof_epoch += 1);
        ensure(stream.ends(1_000).await, "the stream outlived the EOF")?;
        ensure(sse_post(&path, &[], &tools_list(4)).await?.status == 404, "a POST to the ended session")?;
        Ok(())
    });
    assert_eq!(events.field("http.post", "cause"), ["accepted", "accepted", "accepted", "accepted", "gone"]);
    assert_eq!(events.field("reply.sent", "id"), ["1", "2", "3", ""]);
    assert_eq!(events.field("stream.close", "by"), ["relayer"]);
}

#[test]
fn sse_refuses_what_a_server_refuses() {
    let knobs = RelayerKnobs::shared();
    turn(&knobs, |k| k.stream_style = Some(crate::relay::sse::Style::PLAIN));
    let events = simulate(Transport::Sse, true, &knobs, |_| async move {
        let expect = |what: &str, response: Http, status: u16| ensure(response.status == status, format!("{what}: HTTP {} (expected {status})", response.status));
        expect("GET without a token", request("GET", "/sse", &[("accept", "text/event-stream")], "").await?, 401)?;
        let auth = ("authorization", BEARER);
        let (mut stream, path) = sse_open(&[("accept", "text/event-stream"), auth]).await?;
        // A request before initialize: the session exists, so the lifecycle refuses it (-32002).
        expect("tools/list before initialize", sse_post(&path, &[auth], &tools_list(1)).await?, 202)?;
        let refusal = stream.message(1_000).await.map(|(msg, _)| msg).unwrap_or_default();
        ensure(refusal["error"]["code"] == json!(-32002), format!("before initialize: {refusal}"))?;
        expect("no sessionId", sse_post("/messages", &[auth], &tools_list(2)).await?, 400)?;
        expect("an unknown session", sse_post("/messages?sessionId=nope", &[auth], &tools_list(2)).await?, 404)?;
        expect("a wrong token", sse_post(&path, &[("authorization", "Bearer nope")], &tools_list(2)).await?, 401)?;
        expect("no token", sse_post(&path, &[], &tools_list(2)).await?, 401)?;
        let batch = format!("[{}]", tools_list(2));
        expect("a batch", sse_post(&path, &[auth], &batch).await?, 400)?;
        expect("text/plain", request("POST", &path, &[("content-type", "text/plain"), auth], &tools_list(2)).await?, 415)?;
        expect("initialize", sse_post(&path, &[auth], &initialize(3, "2025-06-18")).await?, 202)?;
        expect("an unsupported protocol version", sse_post(&path, &[auth, ("mcp-protocol-version", "1999-01-01")], &tools_list(4)).await?, 400)?;
        expect("a supported protocol version", sse_post(&path, &[auth, ("mcp-protocol-version", "2025-06-18")], &tools_list(5)).await?, 202)?;
        Ok(())
    });
    let causes = events.field("http.post", "cause");
    assert_eq!(causes, ["accepted", "no_session", "unknown", "token", "token", "batch", "content_type", "accepted", "protocol_version", "accepted"]);
    assert_eq!(events.field("rpc.refused", "reason"), ["not_initialized"]);
    assert_eq!(events.field("stream.refused", "cause"), ["token"]);
    assert_eq!(events.field("stream.open", "style"), ["lf"]);
}

// ---- the real network ------------------------------------------------------------------------

/// The live engine's path: the relayer on a real loopback port (the seam's real network), a
/// Streamable HTTP session initialized over real TCP.
#[test]
fn streamable_serves_real_tcp() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    tokio::task::LocalSet::new().block_on(&runtime, async {
        seam::use_real_network();
        let listener = seam::TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
        let port = listener.port().expect("port");
        let knobs = RelayerKnobs::shared();
        let durable = Arc::new(Mutex::new(Durable::default()));
        tokio::task::spawn_local(serve_transport(listener, RelayerConfig::default(), knobs, durable, Transport::StreamableHttp, false));
        let reply = crate::net::http::fetch(
            ("127.0.0.1", port),
            "POST",
            "/mcp",
            &[("accept", ACCEPT_BOTH.1.to_string()), ("content-type", "application/json".to_string())],
            initialize(1, "2025-06-18"),
        )
        .await
        .expect("initialize");
        assert_eq!(reply.status, 200);
        let msg = if reply.body.trim_start().starts_with('{') {
            serde_json::from_str(&reply.body).expect("JSON")
        } else {
            let mut sse = Sse::default();
            sse.feed(reply.body.as_bytes());
            let event = sse.ready.into_iter().find(|e| !e.data.is_empty()).expect("an event with the reply");
            serde_json::from_str::<Value>(&event.data).expect("JSON")
        };
        assert_eq!(msg["result"]["protocolVersion"], json!("2025-06-18"));
    });
}

#[test]
fn transports_parse_by_name_as_the_specification_spells_them() {
    assert_eq!("streamable-http".parse::<Transport>(), Ok(Transport::StreamableHttp));
    assert_eq!("streamable_http".parse::<Transport>(), Ok(Transport::StreamableHttp));
    assert_eq!("sse".parse::<Transport>(), Ok(Transport::Sse));
    assert_eq!("relayer".parse::<Transport>(), Ok(Transport::Relayer));
    assert!("websocket".parse::<Transport>().unwrap_err().contains("one of relayer"));
}

/// A client that hangs up on a stalled stream is gone at once, as a real server learns from its
/// socket: a new standalone GET is served, not refused 409 as if the old one were still there.
#[test]
fn streamable_frees_a_stalled_stream_its_client_hung_up() {
    let knobs = RelayerKnobs::shared();
    let events = simulate(Transport::StreamableHttp, true, &knobs, |knobs| async move {
        let session = mcp_session("2025-11-25").await?;
        let get_headers = [("accept", "text/event-stream"), ("authorization", BEARER), ("mcp-session-id", session.as_str())];
        let mut get = request("GET", "/mcp", &get_headers, "").await?;
        get.event(300).await.ok_or("no priming event on the GET stream")?;
        turn(&knobs, |k| k.set_stall((0, 20_000), true));
        drop(get);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let again = request("GET", "/mcp", &get_headers, "").await?;
        ensure(again.status == 200, format!("a GET after the client hung up on the stalled one: HTTP {}", again.status))?;
        // With that one connected, a second standalone GET is refused as a real server does (the
        // TypeScript SDK's 409); a resumption names the event it asked for in the refusal.
        let second = request("GET", "/mcp", &get_headers, "").await?;
        ensure(second.status == 409, format!("a second standalone GET: HTTP {}", second.status))?;
        let unknown = [get_headers.as_slice(), &[("last-event-id", "999")]].concat();
        let resumed = request("GET", "/mcp", &unknown, "").await?;
        ensure(resumed.status == 400, format!("a resumption of an event never written: HTTP {}", resumed.status))?;
        Ok(())
    });
    assert_eq!(events.field("stream.refused", "cause"), ["conflict", "last_event_id"]);
    assert_eq!(events.field("stream.refused", "last_event_id"), ["", "999"]);
    // The initialize's stream completed; the stalled GET's was closed by its client.
    assert_eq!(events.field("stream.close", "by"), ["complete", "client"]);
}
