//! The stdio-to-SSE bridge (MODEL.md §1.4). One `RefCell<State>` holds all bookkeeping; tasks
//! (stdin reader, stream reader, pump, sweeper, watchdog) mutate it synchronously and never hold
//! a borrow across an `await`, so every check-and-act is atomic.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::config::BridgeConfig;
use crate::net::http::{self, spawn_owned, AbortOnDrop};
use crate::net::jsonrpc::{self, id_key, Shape};
use super::sse::SseParser;
use super::relayer::NOT_INITIALIZED;
use super::state::{ClosedOut, InFlight, Outgoing, State};
use crate::events::kind;
use crate::rng::SimRng;
use crate::seam::{self, ms_since};
use crate::stdio::ServerEnds;
use crate::emit;

/// Run the bridge until stdin reaches EOF; then fail what is owed and exit.
pub async fn run(config: BridgeConfig, stdio: ServerEnds) -> Result<(), Box<dyn std::error::Error>> {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let bridge = Rc::new(Bridge::new(config, out_tx));
    emit!(
        kind::BRIDGE_START,
        call_timeout_ms = bridge.call_timeout_ms,
        sweep_period_ms = bridge.config.sweep_period_ms(),
        sse_idle_ms = bridge.config.sse_idle_ms
    );
    let writer = tokio::task::spawn_local(write_lines(stdio.stdout, out_rx));
    bridge.ensure_connected();
    let sweeper = (!bridge.config.bugs.no_call_deadline).then(|| spawn_owned(sweep(bridge.clone())));
    let watchdog = spawn_owned(watch(bridge.clone()));
    let mut lines = BufReader::new(stdio.stdin).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        bridge.on_line(&line);
    }
    bridge.report(&[("sweeper", sweeper.as_ref()), ("watchdog", Some(&watchdog))]);
    drop((sweeper, watchdog));
    bridge.shutdown();
    writer.await?;
    Ok(())
}

/// Copy reply lines to stdout until every sender is gone.
async fn write_lines(mut stdout: tokio::io::DuplexStream, mut lines: mpsc::UnboundedReceiver<String>) {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        if stdout.write_all(line.as_bytes()).await.is_err() {
            break;
        }
    }
    let _ = stdout.shutdown().await;
}

#[derive(Default)]
struct Tasks {
    connect: Option<AbortOnDrop>,
    stream: Option<AbortOnDrop>,
    pump: Option<AbortOnDrop>,
    /// Restarts the pump for what an `initialize` refused for good left owed (notifications, the
    /// handshake).
    retry: Option<AbortOnDrop>,
}

struct Bridge {
    config: BridgeConfig,
    call_timeout_ms: u64,
    state: RefCell<State>,
    rng: RefCell<SimRng>,
    out: RefCell<Option<mpsc::UnboundedSender<String>>>,
    tasks: RefCell<Tasks>,
    /// The generation the pump is serving, if one is running.
    pumping: RefCell<Option<u64>>,
}

impl Bridge {
    fn new(config: BridgeConfig, out: mpsc::UnboundedSender<String>) -> Self {
        let closed_out = ClosedOut::new(config.closed_out_cap, config.closed_out_retention_ms);
        Self {
            call_timeout_ms: config.call_timeout_ms(),
            state: RefCell::new(State::new(closed_out, seam::now())),
            rng: RefCell::new(SimRng::new(config.seed)),
            out: RefCell::new(Some(out)),
            tasks: RefCell::default(),
            pumping: RefCell::new(None),
            config,
        }
    }

    fn write(&self, msg: &Value) {
        if let Some(out) = self.out.borrow().as_ref() {
            let _ = out.send(msg.to_string());
        }
    }

    /// Write a reply the client is owed and record where it came from.
    fn reply(&self, id: &Value, msg: &Value, source: &str) {
        emit!(kind::CALL_REPLY, id = %id, source);
        self.write(msg);
    }

    // ---- stdin -------------------------------------------------------------------------------

    fn on_line(self: &Rc<Self>, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            emit!(kind::CALL_REPLY, id = "", source = "parse_error");
            self.write(&jsonrpc::error(None, -32700, "Parse error: the line is not valid JSON"));
            return;
        };
        // JSON-RPC 2.0 as MCP profiles it: `"jsonrpc": "2.0"` and an id that is a string or an
        // integer (never null, never a batch); anything else is an invalid request, answered
        // under its id only when that id is valid.
        let valid_id = |id: &Value| id.is_string() || id.is_i64() || id.is_u64();
        let envelope = msg.get("jsonrpc").and_then(Value::as_str) == Some("2.0") && msg.get("id").is_none_or(valid_id);
        let shape = if envelope { jsonrpc::shape(&msg) } else { Shape::Invalid };
        match shape {
            Shape::Request { id, method } if method == "initialize" => self.initialize(&id, msg),
            Shape::Request { id, method } => self.admit(id, method, msg),
            // The upstream handshake is the bridge's own: each session gets its
            // `notifications/initialized` once, from the pump, never the client's as well.
            Shape::Notification { method } if method == "notifications/initialized" => {
                self.state.borrow_mut().client_initialized = true;
            }
            Shape::Notification { method } => {
                let msg = if method == "notifications/cancelled" { self.cancel_upstream(msg) } else { msg };
                self.enqueue_note(msg);
            }
            Shape::Response { .. } => self.enqueue_note(msg),
            Shape::Invalid => {
                let id = msg.get("id").filter(|id| valid_id(id));
                emit!(kind::CALL_REPLY, id = "", source = "invalid");
                self.write(&jsonrpc::error(id, -32600, "Invalid Request: not a JSON-RPC message"));
            }
        }
        self.kick();
    }

    /// Answer `initialize` at once. Its params go upstream in the bridge's own `initialize` of
    /// every session (under the bridge's own id, whose reply is suppressed), never under the
    /// client's id: a suppression keyed by the client's id would swallow the genuine reply of a
    /// later request that reuses it. A live session the bridge initialized with made-up params
    /// (something had to go before the client spoke) is given up for a new one: the server must
    /// serve the client that is really there, with its name, version and capabilities.
    fn initialize(self: &Rc<Self>, id: &Value, msg: Value) {
        let result = jsonrpc::initialize_result(&msg, "relay-bridge", env!("CARGO_PKG_VERSION"));
        self.reply(id, &jsonrpc::result(id, result), "local");
        let params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
        let made_up = {
            let mut state = self.state.borrow_mut();
            state.init_params = Some(params);
            let gen = state.gen;
            state.made_up_gen.take().filter(|made_up| *made_up == gen)
        };
        if let Some(gen) = made_up {
            self.close_stream(gen, "reinitialize");
        }
    }

    fn admit(&self, id: Value, method: String, msg: Value) {
        let key = id_key(&id);
        let mut state = self.state.borrow_mut();
        if state.closing {
            return;
        }
        if state.inflight.contains_key(&key) {
            drop(state);
            let text = "Invalid Request: a request with this id is still in flight";
            emit!(kind::CALL_REPLY, id = %id, source = "invalid");
            self.write(&jsonrpc::error(Some(&id), -32600, text));
            return;
        }
        let idempotency_key = self.rng.borrow_mut().hex(16);
        let seq = state.take_seq();
        let upstream = json!(format!("relay-{seq}"));
        emit!(kind::CALL_ADMIT, id = %id, method = %method, key = %idempotency_key, upstream = %upstream);
        let msg = upstream_message(msg, &upstream, &id);
        let entry = InFlight {
            seq,
            started_at: seam::now(),
            id,
            upstream,
            method,
            msg,
            key: idempotency_key,
            posted_gen: None,
            sent: false,
            accepted: false,
        };
        state.inflight.insert(key, entry);
    }

    /// The relayer knows each request by the bridge's own id: a cancellation of a request still
    /// owed names that id upstream. (One of a request no longer owed goes as written: the relayer
    /// ignores an id it does not know.)
    fn cancel_upstream(&self, mut msg: Value) -> Value {
        let state = self.state.borrow();
        let owed = msg.pointer("/params/requestId").and_then(|id| state.inflight.get(&id_key(id)));
        if let Some(upstream) = owed.map(|entry| entry.upstream.clone()) {
            msg["params"]["requestId"] = upstream;
        }
        msg
    }

    fn enqueue_note(&self, msg: Value) {
        let mut state = self.state.borrow_mut();
        let seq = state.take_seq();
        state.notes.insert(seq, msg);
    }

    // ---- the pump: POSTs in admission order to the live session --------------------------------

    /// Start the pump for the live session unless one is already serving it.
    fn kick(self: &Rc<Self>) {
        let gen = {
            let state = self.state.borrow();
            if state.session.is_none() || state.closing {
                return;
            }
            state.gen
        };
        if *self.pumping.borrow() == Some(gen) {
            return;
        }
        *self.pumping.borrow_mut() = Some(gen);
        self.tasks.borrow_mut().pump = Some(spawn_owned(self.clone().pump(gen)));
    }

    async fn pump(self: Rc<Self>, gen: u64) {
        loop {
            if self.state.borrow().initialized_gen != Some(gen) {
                // Nothing to send before the client's own `initialize`: wait for it, so the
                // session is initialized with the client's params rather than made-up ones.
                let idle = {
                    let state = self.state.borrow();
                    state.init_params.is_none() && state.next_outgoing(gen).is_none()
                };
                if idle || !self.init_session(gen).await {
                    break;
                }
            }
            if self.note_owed(gen) && !self.send_initialized(gen).await {
                break;
            }
            let next = {
                let state = self.state.borrow();
                if state.gen != gen || state.session.is_none() {
                    None
                } else {
                    state.next_outgoing(gen)
                }
            };
            match next {
                Some(Outgoing::Request(key)) => self.post_request(gen, &key).await,
                Some(Outgoing::Note(seq)) => {
                    if !self.post_note(gen, seq).await {
                        self.retry_after(self.refused_retry_ms());
                        break;
                    }
                }
                None => break,
            }
        }
        let mut pumping = self.pumping.borrow_mut();
        if *pumping == Some(gen) {
            *pumping = None;
        }
    }

    /// Initialize the session of `gen` as the MCP lifecycle requires, before anything else goes
    /// to it: the bridge's own `initialize` (the client's params, its reply suppressed), then
    /// `notifications/initialized` once the client has sent its own. `false`: stop pumping.
    async fn init_session(self: &Rc<Self>, gen: u64) -> bool {
        let (id, msg) = {
            let mut state = self.state.borrow_mut();
            if state.gen != gen || state.session.is_none() {
                return false;
            }
            let id = json!(format!("relay-init-{gen}"));
            state.suppressed.insert(id_key(&id), seam::now());
            let params = state.init_params.clone().unwrap_or_else(|| {
                state.made_up_gen = Some(gen);
                default_init_params()
            });
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params});
            (id, msg)
        };
        emit!(kind::SESSION_INIT, gen, id = %id);
        for attempt in 0..=self.config.post_retries {
            let Some(path) = self.current_path(gen) else { return false };
            emit!(kind::POST_SEND, id = %id, method = "initialize", key = "", gen, replay = false, tracked = false, attempt);
            let status = self.post(&path, None, msg.to_string()).await;
            emit!(kind::POST_STATUS, id = %id, status, attempt);
            match status {
                200..=299 => {
                    self.state.borrow_mut().initialized_gen = Some(gen);
                    break;
                }
                404 => {
                    self.close_stream(gen, "expired");
                    return false;
                }
                status if self.retries_left(status, attempt) => backoff(attempt).await,
                // Past the retries, nothing goes to a session not known to be initialized: a
                // request sent anyway comes back "not initialized" after later ones were
                // accepted, and is sent again behind them (soak token
                // v1.relay.none.ea8736bbeaf3a30c: a0 replayed after a1).
                //
                // No answer (a reset, a held link) passes: the requests wait, as for a session
                // not yet up, and the initialize is tried again after the next step of the retry
                // backoff, not the cap, so the replays the relayer owes are not held past their
                // deadlines.
                0 => {
                    self.retry_after(self.past_retries_ms());
                    return false;
                }
                // Refused for good (401/403, or 429/5xx after the retries): the requests not
                // accepted are answered with the refusal. The replays the relayer owes (requests
                // it accepted on an earlier session) wait on this one: as after no answer, the
                // initialize is tried again after the retry backoff's next step, not the cap, so
                // a refusal that ends is not followed by a wait past their deadlines (hunt seed
                // 0x64c14a7, v1.relay.none.cef2e51424f96120: a ping and a call accepted before a
                // stall, their stream closed by the watchdog, the new session refused 3.5 s, then
                // both closed out 4 s after the refusal ended, never replayed).
                status => {
                    self.reject_unaccepted(status, attempt + 1);
                    self.retry_after(self.refused_retry_ms());
                    return false;
                }
            }
        }
        // Read now, not before the `initialize`: the client's note may have come meanwhile.
        let note = self.state.borrow().client_initialized;
        !note || self.send_initialized(gen).await
    }

    /// When the session's `initialize`, or a notification, is refused for good (or past its
    /// retries), notifications wait in the outbox and the handshake the client completed
    /// (`notifications/initialized`) is owed to the session, as are the replays of requests the
    /// relayer accepted. A later message from the client asks again; failing that, the pump tries
    /// again after `after_ms`, so a brief revocation never strands them.
    fn retry_after(self: &Rc<Self>, after_ms: u64) {
        let owed = {
            let state = self.state.borrow();
            !state.notes.is_empty() || state.client_initialized || !state.inflight.is_empty()
        };
        if !owed {
            return;
        }
        let bridge = self.clone();
        let retry = async move {
            seam::sleep_ms(after_ms).await;
            bridge.kick();
        };
        self.tasks.borrow_mut().retry = Some(spawn_owned(retry));
    }

    /// Whether the session of `gen` is owed the bridge's `notifications/initialized`: the
    /// client has sent its own, and this session was initialized without it.
    fn note_owed(&self, gen: u64) -> bool {
        let state = self.state.borrow();
        state.client_initialized && state.initialized_gen == Some(gen) && state.noted_gen != Some(gen)
    }

    /// POST the bridge's `notifications/initialized` to the session of `gen`, once, under the
    /// shared retry policy. The MCP lifecycle puts it before any request (a strict server refuses
    /// requests until it has it), so until the relayer accepts it nothing else goes: refused for
    /// good or past its retries, it stays owed and the pump stops (`false`) to try again later,
    /// as for any notification (`post_note`).
    async fn send_initialized(self: &Rc<Self>, gen: u64) -> bool {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
        for attempt in 0..=self.config.post_retries {
            let Some(path) = self.current_path(gen) else { return false };
            emit!(kind::POST_SEND, id = "", method = "notifications/initialized", key = "", gen, replay = false, tracked = false, attempt);
            let status = self.post(&path, None, note.clone()).await;
            emit!(kind::POST_STATUS, id = "", status, attempt);
            match status {
                200..=299 => {
                    self.state.borrow_mut().noted_gen = Some(gen);
                    return true;
                }
                404 => {
                    self.close_stream(gen, "expired");
                    return false;
                }
                status if self.retries_left(status, attempt) => backoff(attempt).await,
                _ => break,
            }
        }
        self.retry_after(self.refused_retry_ms());
        false
    }

    /// The retry backoff's next step once the retries are spent: when a handshake that got no
    /// answer, or a refusal with replays owed, is tried again.
    fn past_retries_ms(&self) -> u64 {
        RETRY_BASE_MS << self.config.post_retries
    }

    /// When what a refusal for good stopped (the session's `initialize`, its
    /// `notifications/initialized`, a notification) is tried again: after the retry backoff's
    /// next step while requests wait on it, whose deadlines run (replays the relayer owes, or
    /// requests queued behind a notification in the client's order), and after the cap when
    /// only notifications wait. Relay hunt seed 0x64c14a7, v1.relay.none.dd2b59cf609397da: a
    /// call written behind a notification a 401 window refused until 3 651 ms waited for the
    /// cap's retry (15 s) and was closed out unsent at 10 930 ms.
    fn refused_retry_ms(&self) -> u64 {
        if self.state.borrow().inflight.is_empty() {
            refusal_retry_ms()
        } else {
            self.past_retries_ms()
        }
    }

    /// Whether a POST answered `status` (0: a network error) on `attempt` is tried again: a
    /// transient refusal, while retries are left.
    fn retries_left(&self, status: u16, attempt: u32) -> bool {
        matches!(status, 0 | 429 | 500..=599) && attempt < self.config.post_retries
    }

    /// The session path, if `gen` is still the live session.
    fn current_path(&self, gen: u64) -> Option<String> {
        let state = self.state.borrow();
        if state.gen != gen {
            return None;
        }
        state.session.clone()
    }

    /// POST a waiting notification. It stays in the outbox until the relayer accepts it: a POST
    /// cut short by a reconnect, or answered 404, is sent again on the next session; a transient
    /// refusal is retried. Nobody can be told that a notification was lost, so a refusal for
    /// good, or the retries spent, does not drop it either: the pump stops (`false`) and tries
    /// again after the reconnect backoff's cap, or when the client writes again, the note still
    /// first in the client's order.
    async fn post_note(self: &Rc<Self>, gen: u64, seq: u64) -> bool {
        for attempt in 0..=self.config.post_retries {
            let Some(msg) = self.state.borrow().notes.get(&seq).cloned() else { return true };
            let Some(path) = self.current_path(gen) else { return true };
            let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
            let id = msg.get("id").map(Value::to_string).unwrap_or_default();
            emit!(kind::POST_SEND, id = %id, method, key = "", gen, replay = false, tracked = false, attempt);
            let status = self.post(&path, None, msg.to_string()).await;
            emit!(kind::POST_STATUS, id = %id, status, attempt);
            match status {
                200..=299 => {
                    self.state.borrow_mut().notes.remove(&seq);
                    return true;
                }
                404 => {
                    self.close_stream(gen, "expired");
                    return true;
                }
                status if self.retries_left(status, attempt) => backoff(attempt).await,
                _ => break,
            }
        }
        false
    }

    /// POST one in-flight request, re-checking just before each attempt that it is still owed.
    async fn post_request(self: &Rc<Self>, gen: u64, key: &str) {
        // The request this send is for: answered during a backoff, its id may already name the
        // client's next request, which must wait its own turn.
        let Some(seq) = self.state.borrow().inflight.get(key).map(|entry| entry.seq) else { return };
        for attempt in 0..=self.config.post_retries {
            let Some((body, header_key, id, path)) = self.claim(gen, key, seq, attempt) else { return };
            let status = self.post(&path, header_key.as_deref(), body).await;
            emit!(kind::POST_STATUS, id = %id, status, attempt);
            if status == 404 {
                return self.close_stream(gen, "expired");
            }
            // Answered while its POST was out (a replay the relayer answered from its log), its
            // id may already name the client's next request: this status is not that one's
            // (soak token v1.relay.none.bd50eed5fc16b1eb).
            if !self.owed(key, seq) {
                return;
            }
            match status {
                200..=299 => {
                    if let Some(entry) = self.state.borrow_mut().inflight.get_mut(key) {
                        entry.accepted = true;
                    }
                    return;
                }
                status if self.retries_left(status, attempt) => backoff(attempt).await,
                // A network error on a request the relayer already accepted says nothing about
                // the work: it stays owed, for the next session's replay (answered from the
                // execution log) or an honest close-out. Failing it would tell the client it
                // failed although the relayer ran it and answered.
                0 if self.accepted(key) => return,
                status => return self.reject(key, &rejection_text(status, attempt + 1)),
            }
        }
    }

    /// Whether request `seq` is still in flight under `key`.
    fn owed(&self, key: &str, seq: u64) -> bool {
        self.state.borrow().inflight.get(key).is_some_and(|entry| entry.seq == seq)
    }

    /// Whether the relayer accepted a POST of the request.
    fn accepted(&self, key: &str) -> bool {
        self.state.borrow().inflight.get(key).is_some_and(|entry| entry.accepted)
    }

    /// Mark request `seq` as posted to `gen` and return what to send, or `None` if it is no
    /// longer in flight or the session changed.
    fn claim(&self, gen: u64, key: &str, seq: u64, attempt: u32) -> Option<(String, Option<String>, Value, String)> {
        let mut state = self.state.borrow_mut();
        if state.gen != gen {
            return None;
        }
        let path = state.session.clone()?;
        let bugs = self.config.bugs;
        let entry = state.inflight.get_mut(key).filter(|entry| entry.seq == seq)?;
        let replay = entry.posted_gen.is_some_and(|posted| posted != gen);
        if replay && bugs.refresh_deadline_on_replay {
            entry.started_at = seam::now();
        }
        entry.posted_gen = Some(gen);
        entry.sent = true;
        let header_key = (!(replay && bugs.no_idempotency_key)).then(|| entry.key.clone());
        emit!(
            kind::POST_SEND,
            id = %entry.id,
            method = %entry.method,
            key = header_key.as_deref().unwrap_or(""),
            gen,
            replay,
            tracked = true,
            attempt
        );
        Some((entry.msg.to_string(), header_key, entry.id.clone(), path))
    }

    /// POST to the session path; the HTTP status, or 0 for a network error.
    async fn post(&self, path: &str, key: Option<&str>, body: String) -> u16 {
        let target = (self.config.relayer.as_str(), self.config.relayer_port);
        http::post_json(target, path, &self.config.token, key, body).await.unwrap_or(0)
    }

    /// The session's `initialize` was refused for good: answer every request the relayer has
    /// not accepted with that refusal, saying whether it was ever sent. A request the relayer
    /// accepted stays owed (its work may run: it is replayed or closed out honestly), and the
    /// notifications stay in the outbox for the next session. A later request asks again.
    fn reject_unaccepted(&self, status: u16, attempts: u32) {
        let waiting: Vec<(String, bool)> = {
            let state = self.state.borrow();
            let unaccepted = state.inflight.iter().filter(|(_, entry)| !entry.accepted);
            unaccepted.map(|(key, entry)| (key.clone(), entry.sent)).collect()
        };
        let refusal = rejection_text(status, attempts);
        for (key, sent) in waiting {
            let what = if sent {
                "the relayer never confirmed receiving the request. If it arrived it may run: check \
                 its effect before retrying a write."
            } else {
                "the request was never sent to the relayer."
            };
            self.reject(&key, &format!("the session's initialize failed: {refusal}; {what}"));
        }
    }

    /// Answer a request the relayer definitively refused, naming the cause.
    fn reject(&self, key: &str, text: &str) {
        let Some(entry) = self.state.borrow_mut().inflight.remove(key) else { return };
        self.reply(&entry.id, &jsonrpc::failure(&entry.id, &entry.method, text), "rejected");
    }

    // ---- the stream -------------------------------------------------------------------------

    /// Start a connect loop unless one is running or the stream is up (single flight).
    fn ensure_connected(self: &Rc<Self>) {
        {
            let mut state = self.state.borrow_mut();
            if state.connecting || state.session.is_some() || state.closing {
                return;
            }
            state.connecting = true;
        }
        self.tasks.borrow_mut().connect = Some(spawn_owned(self.clone().connect()));
    }

    async fn connect(self: Rc<Self>) {
        loop {
            let (gen, attempt) = {
                let mut state = self.state.borrow_mut();
                state.gen += 1;
                (state.gen, state.attempt)
            };
            if attempt > 0 {
                seam::sleep_ms(BridgeConfig::backoff_ms(attempt - 1)).await;
            }
            emit!(kind::SSE_CONNECT, gen, attempt);
            let target = (self.config.relayer.as_str(), self.config.relayer_port);
            match http::get_stream(target, &self.config.sse_path, &self.config.token).await {
                Ok(stream) => {
                    let mut state = self.state.borrow_mut();
                    state.last_activity = seam::now();
                    state.opened_at = seam::now();
                    state.stream_open = true;
                    drop(state);
                    let reader = spawn_owned(self.clone().read(gen, stream));
                    self.tasks.borrow_mut().stream = Some(reader);
                    return;
                }
                Err(_) => {
                    self.state.borrow_mut().attempt += 1;
                    emit!(kind::SSE_CLOSED, gen, reason = "error");
                }
            }
        }
    }

    async fn read(self: Rc<Self>, gen: u64, mut stream: http::Stream) {
        let mut parser = SseParser::default();
        let reason = loop {
            match stream.next_chunk().await {
                Some(Ok(bytes)) => {
                    self.touch(gen);
                    for event in parser.feed(&bytes) {
                        self.on_event(gen, &event.event, &event.data);
                    }
                }
                Some(Err(_)) => break "error",
                None => break "eof",
            }
        };
        self.close_stream(gen, reason);
    }

    fn touch(&self, gen: u64) {
        let mut state = self.state.borrow_mut();
        if state.gen == gen {
            state.last_activity = seam::now();
        }
    }

    fn on_event(self: &Rc<Self>, gen: u64, event: &str, data: &str) {
        if self.state.borrow().gen != gen {
            return;
        }
        match event {
            "endpoint" => {
                let mut state = self.state.borrow_mut();
                state.session = Some(data.to_string());
                state.connecting = false;
                state.orphan_streak = 0;
                state.session_since = seam::now();
                drop(state);
                emit!(kind::SSE_ENDPOINT, gen, session = data);
                self.kick();
            }
            "message" => match serde_json::from_str::<Value>(data) {
                Ok(msg) => self.on_upstream(msg),
                Err(_) => emit!(kind::REPLY_DROPPED, id = "", reason = "unparseable"),
            },
            _ => {}
        }
    }

    /// Close the stream of generation `gen` (if still current) and reconnect.
    fn close_stream(self: &Rc<Self>, gen: u64, reason: &str) {
        {
            let mut state = self.state.borrow_mut();
            if state.gen != gen || !(state.stream_open || state.session.is_some()) {
                return;
            }
            // A stream that ended soon after it opened, before or after its endpoint, counts
            // as a failed attempt: the next connect backs off, so a relayer that keeps accepting
            // and dropping streams never sees a reconnect storm. A stream the bridge closed
            // itself after its endpoint arrived, a second or more after it opened, did not fail:
            // the connect had succeeded, and the backoff starts over.
            let lived = ms_since(state.opened_at);
            let chosen = state.session.is_some() && BRIDGE_CHOSEN_CLOSES.contains(&reason) && lived >= CHOSEN_CLOSE_MIN_MS;
            if chosen || (state.stream_open && lived >= STABLE_STREAM_MS) {
                state.attempt = 0;
            } else {
                state.attempt += 1;
            }
            state.session = None;
            state.stream_open = false;
            state.connecting = false;
            state.orphan_streak = 0;
            state.initialized_gen = None;
        }
        emit!(kind::SSE_CLOSED, gen, reason);
        let stale = {
            let mut tasks = self.tasks.borrow_mut();
            (tasks.stream.take(), tasks.pump.take())
        };
        *self.pumping.borrow_mut() = None;
        drop(stale);
        self.ensure_connected();
    }

    /// A message from the relayer: a reply is forwarded, under the client's id, only if its
    /// request is still owed.
    fn on_upstream(self: &Rc<Self>, msg: Value) {
        let Shape::Response { id } = jsonrpc::shape(&msg) else {
            self.write(&msg);
            return;
        };
        let key = id_key(&id);
        let mut state = self.state.borrow_mut();
        if state.suppressed.remove(&key).is_some() {
            drop(state);
            emit!(kind::REPLY_DROPPED, id = %id, reason = "suppressed");
            return;
        }
        let owner = state.inflight.iter().find(|(_, entry)| id_key(&entry.upstream) == key).map(|(k, _)| k.clone());
        if let Some(owner) = owner {
            // The relayer refused it because the session was not initialized: initialize it
            // and send the request again. Nothing ran: until a later POST is accepted, the
            // request is not one whose work may have completed.
            if msg.pointer("/error/code").and_then(Value::as_i64) == Some(NOT_INITIALIZED) {
                if let Some(entry) = state.inflight.get_mut(&owner) {
                    entry.posted_gen = None;
                    entry.accepted = false;
                }
                state.initialized_gen = None;
                drop(state);
                emit!(kind::REPLY_DROPPED, id = %id, reason = "not_initialized");
                return self.kick_again();
            }
            let Some(entry) = state.inflight.remove(&owner) else { return };
            state.orphan_streak = 0;
            drop(state);
            return self.reply(&entry.id, &with_id(msg, &entry.id), "upstream");
        }
        let client = state.closed_out.client_id(&key).cloned();
        let reason = if client.is_some() { "closed_out" } else { "unknown" };
        drop(state);
        if self.config.bugs.no_closed_out_filter {
            let client = client.unwrap_or(id);
            return self.reply(&client, &with_id(msg, &client), "upstream");
        }
        emit!(kind::REPLY_DROPPED, id = %id, reason);
    }

    /// Restart the pump for the live session (it may be running past the request to resend).
    fn kick_again(self: &Rc<Self>) {
        let running = self.pumping.borrow().is_some();
        if !running {
            self.kick();
        }
    }

    // ---- timers -----------------------------------------------------------------------------

    /// Close out every request older than the call deadline; reconnect after repeated orphans.
    fn sweep_once(self: &Rc<Self>) {
        let now = seam::now();
        let expired: Vec<String> = {
            let state = self.state.borrow();
            let mut old: Vec<&InFlight> = state
                .inflight
                .values()
                .filter(|entry| ms_since(entry.started_at) > self.call_timeout_ms)
                .collect();
            old.sort_by_key(|entry| entry.seq);
            old.iter().map(|entry| id_key(&entry.id)).collect()
        };
        for key in expired {
            self.close_out(&key);
        }
        let mut state = self.state.borrow_mut();
        state.closed_out.expire(now);
        let timeout = self.call_timeout_ms;
        state.suppressed.retain(|_, at| now.saturating_duration_since(*at).as_millis() <= u128::from(timeout));
        let orphaned = state.orphan_streak >= 2 && state.session.is_some();
        let gen = state.gen;
        drop(state);
        if orphaned {
            self.close_stream(gen, "orphans");
        }
    }

    fn close_out(&self, key: &str) {
        let mut state = self.state.borrow_mut();
        let Some(entry) = state.inflight.remove(key) else { return };
        state.closed_out.insert_for(id_key(&entry.upstream), seam::now(), entry.id.clone());
        let remembered = state.closed_out.len();
        let stream_up = state.session.is_some();
        // An orphan of this session: admitted while it was up, so its whole deadline ran here. A
        // call that waited out most of its deadline for a stream and reached this one just
        // before it expired says nothing about the session, and closing a working session for
        // it would fail the calls still waiting behind it (soak token v1.relay.none.edb32a14ee4e18eb).
        if stream_up && entry.started_at >= state.session_since {
            state.orphan_streak += 1;
        }
        drop(state);
        let age_ms = ms_since(entry.started_at);
        let stream = if stream_up { "up" } else { "down" };
        emit!(kind::CALL_CLOSED_OUT, id = %entry.id, method = %entry.method, age_ms, stream, remembered);
        let text = self.close_out_text(stream_up, &entry);
        self.reply(&entry.id, &jsonrpc::failure(&entry.id, &entry.method, &text), "close_out");
    }

    /// What a close-out says, by what the bridge knows happened to the request: accepted by
    /// the relayer (the work may have completed), sent but never confirmed, or never sent.
    fn close_out_text(&self, stream_up: bool, entry: &InFlight) -> String {
        if self.config.bugs.relayer_unavailable_wording {
            return "relayer unavailable, retry".to_string();
        }
        let timeout = self.call_timeout_ms;
        let stream = if stream_up { "" } else { " while the relayer stream was down" };
        if entry.accepted {
            let what = if stream_up { " although the relayer stream was healthy: the reply was lost" } else { stream };
            return format!(
                "no reply within {timeout} ms{what}. The work may have completed: check its effect \
                 before retrying a write."
            );
        }
        if entry.sent {
            return format!(
                "no reply within {timeout} ms{stream}: the relayer never confirmed receiving the \
                 request. If it still arrives it may run: check its effect before retrying a write."
            );
        }
        format!("no reply within {timeout} ms{stream}: the request was never sent to the relayer.")
    }

    fn check_idle(self: &Rc<Self>) {
        let state = self.state.borrow();
        let idle = state.stream_open && ms_since(state.last_activity) > self.config.sse_idle_ms;
        let gen = state.gen;
        drop(state);
        if idle {
            self.close_stream(gen, "idle");
        }
    }

    // ---- shutdown ---------------------------------------------------------------------------

    /// The end-of-run resource report, at stdin EOF before anything is failed: what the
    /// bookkeeping holds and which tasks are alive.
    fn report(&self, timers: &[(&str, Option<&AbortOnDrop>)]) {
        let now = seam::now();
        let age = |at: Option<seam::Instant>| at.map_or(0, |at| now.saturating_duration_since(at).as_millis() as u64);
        let state = self.state.borrow();
        let tasks = self.tasks.borrow();
        let alive = |task: Option<&AbortOnDrop>| task.is_some_and(|task| !task.0.is_finished());
        let named = [
            ("connect", tasks.connect.as_ref()),
            ("stream", tasks.stream.as_ref()),
            ("pump", tasks.pump.as_ref()),
            ("retry", tasks.retry.as_ref()),
        ];
        let live: Vec<&str> = named.iter().chain(timers).filter(|(_, task)| alive(*task)).map(|(name, _)| *name).collect();
        emit!(
            kind::BRIDGE_REPORT,
            inflight = state.inflight.len(),
            notes = state.notes.len(),
            suppressed = state.suppressed.len(),
            closed_out = state.closed_out.len(),
            suppressed_age_ms = age(state.suppressed.values().min().copied()),
            closed_out_age_ms = age(state.closed_out.oldest()),
            session = state.session.is_some(),
            tasks = %live.join("+")
        );
    }

    /// stdin reached EOF: fail everything owed with an error, stop every task, close stdout.
    fn shutdown(&self) {
        let owed: Vec<InFlight> = {
            let mut state = self.state.borrow_mut();
            state.closing = true;
            state.notes.clear();
            let mut owed: Vec<InFlight> = std::mem::take(&mut state.inflight).into_values().collect();
            owed.sort_by_key(|entry| entry.seq);
            owed
        };
        for entry in &owed {
            let text = if entry.accepted {
                "the bridge is shutting down (stdin closed) before the reply arrived. The work may \
                 have completed: check its effect before retrying a write."
            } else if entry.sent {
                "the bridge is shutting down (stdin closed); the relayer never confirmed receiving \
                 the request. If it still arrives it may run: check its effect before retrying a write."
            } else {
                "the bridge is shutting down (stdin closed); the request was never sent to the relayer."
            };
            self.reply(&entry.id, &jsonrpc::failure(&entry.id, &entry.method, text), "shutdown");
        }
        emit!(kind::BRIDGE_EXIT, failed = owed.len());
        *self.tasks.borrow_mut() = Tasks::default();
        self.out.borrow_mut().take();
    }
}

async fn sweep(bridge: Rc<Bridge>) {
    let mut tick = interval_ms(bridge.config.sweep_period_ms());
    loop {
        tick.tick().await;
        bridge.sweep_once();
    }
}

async fn watch(bridge: Rc<Bridge>) {
    let mut tick = interval_ms(bridge.config.watchdog_period_ms());
    loop {
        tick.tick().await;
        bridge.check_idle();
    }
}

fn interval_ms(ms: u64) -> tokio::time::Interval {
    let period = std::time::Duration::from_millis(ms);
    tokio::time::interval_at(seam::now() + period, period)
}

/// A stream that stays open this long counts as a success for the reconnect backoff.
const STABLE_STREAM_MS: u64 = 2_000;
/// Why the bridge closes a working stream itself: replies stopped reaching it although the stream
/// is alive, or the client's own `initialize` replaced the one it made up.
const BRIDGE_CHOSEN_CLOSES: [&str; 2] = ["orphans", "reinitialize"];
/// A stream the bridge closed itself counts as a success only if it lived this long: a shorter
/// one may have been dropped by the relayer just before the bridge read the EOF, and a flap must
/// still back off.
const CHOSEN_CLOSE_MIN_MS: u64 = 1_000;

/// The first wait before retrying a POST refused transiently; each further retry waits twice
/// as long (250·2^attempt ms).
const RETRY_BASE_MS: u64 = 250;

/// How long the pump waits to try again after a refusal for good: the reconnect backoff's cap.
fn refusal_retry_ms() -> u64 {
    BridgeConfig::backoff_ms(u32::MAX)
}

/// Wait out the backoff before retry `attempt + 1` of a refused POST.
async fn backoff(attempt: u32) {
    seam::sleep_ms(RETRY_BASE_MS << attempt).await;
}

/// The request as it goes upstream: under the bridge's own `upstream` id, the client's id in
/// `params._meta` (for the relayer's logs).
fn upstream_message(mut msg: Value, upstream: &Value, client: &Value) -> Value {
    msg["id"] = upstream.clone();
    if !msg.get("params").is_some_and(Value::is_object) {
        msg["params"] = json!({});
    }
    msg["params"]["_meta"]["sim.relay/clientId"] = client.clone();
    msg
}

/// A reply with its id replaced by the client's.
fn with_id(mut msg: Value, id: &Value) -> Value {
    msg["id"] = id.clone();
    msg
}

/// The params of the bridge's own `initialize` before the client has sent one.
fn default_init_params() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "relay-bridge", "version": env!("CARGO_PKG_VERSION")}
    })
}

/// The error text for a definitive POST rejection; it always names the status.
fn rejection_text(status: u16, attempts: u32) -> String {
    match status {
        0 => format!(
            "network error: the relayer did not answer the request's POST ({attempts} attempts). If \
             it arrived it may run: check its effect before retrying a write."
        ),
        401 | 403 => format!(
            "the relayer rejected the credentials (HTTP {status}): check the account's token"
        ),
        429 => format!("rate limited by the relayer (HTTP 429) after {attempts} attempts"),
        500..=599 => format!("the relayer failed (HTTP {status}) after {attempts} attempts"),
        _ => format!("the relayer answered HTTP {status}"),
    }
}
