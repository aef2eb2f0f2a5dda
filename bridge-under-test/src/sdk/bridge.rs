//! The sdk family's bridge: stdio ⇄ Streamable HTTP written the way rmcp's documentation writes
//! one. The stdio side is an rmcp server (`ServerHandler::serve` on the pipes); each request it
//! receives is forwarded through an rmcp client (`().serve(StreamableHttpClientTransport)`) to
//! the remote server, and the answer (or rmcp's error) goes back. The upstream client is made on
//! first use and made again once rmcp reports its service closed. Requests are rmcp's to time
//! out, retry and reconnect. The client's notifications are the bridge's: nobody can be told one
//! was lost, so they wait in an outbox, in the client's order, until the server accepts them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

// Roots and logging are deprecated by SEP-2577 in rmcp 3.11.0, but the 2025-11-25 protocol the
// clients and servers here speak has them, and a proxy owes them passage.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotification, CancelledNotificationParam, ClientNotification,
    ClientRequest, ErrorData, GetMeta, ListToolsRequest, ListToolsResult, NotificationMetaObject, NumberOrString, PaginatedRequestParams, PingRequest, RequestId,
    ProgressNotification, ProgressNotificationParam, RootsListChangedNotification, ServerCapabilities, ServerConfig,
    ServerResult, ToolsCapability, ClientConfig, ClientResult, ListRootsRequest, ListRootsResult, LoggingMessageNotification,
    LoggingMessageNotificationParam, PromptListChangedNotification, ResourceListChangedNotification, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParam, ServerNotification, ServerRequest, ToolListChangedNotification,
};
use rmcp::service::{ClientInitializeError, NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, Peer, RoleClient, RoleServer, ServerHandler, ServiceExt};
use tokio::sync::Mutex;

use super::http_client::{Posted, SessionWatch, SimHttpClient};
use super::shim;
use crate::stdio::ServerEnds;

/// Where the bridge forwards to.
#[derive(Debug, Clone)]
pub struct SdkBridgeConfig {
    /// The server's host and port, and the MCP endpoint's URL on it.
    pub host: String,
    pub port: u16,
    pub url: String,
    /// The bearer token rmcp sends (`auth_header`).
    pub token: Option<String>,
    pub bugs: super::SdkBugs,
}

type Upstream = RunningService<RoleClient, Downstream>;

/// The requests the bridge forwards that change nothing at the server: sent twice, they do no
/// harm.
const EFFECT_FREE: &[&str] = &["ping", "tools/list"];

/// The stdio server: a `ServerHandler` whose every method asks the upstream client.
#[derive(Clone)]
pub struct Proxy {
    config: Arc<SdkBridgeConfig>,
    upstream: Arc<Mutex<Option<Upstream>>>,
    /// The requests the current session's HTTP client began to POST (replaced, under the
    /// `upstream` lock, with each new session).
    posted: Arc<std::sync::Mutex<Posted>>,
    /// The current session's request POSTs in flight (replaced with `posted`).
    watch: Arc<std::sync::Mutex<SessionWatch>>,
    /// Woken as the bridge leaves the current session (replaced with each new one): the requests
    /// rmcp held on it fail in the order they waited, not in the order rmcp's map of pending
    /// requests drops them (a `HashMap`, in the process's random order: two processes answered
    /// the client in two orders, sdk `hashes --seed 1`).
    left: Arc<std::sync::Mutex<Arc<tokio::sync::Notify>>>,
    /// The client's notifications not yet sent upstream, in the order it wrote them. The lock
    /// is also the one place rmcp numbers a request: see [`Proxy::forward`].
    outbox: Arc<Mutex<Outbox>>,
    /// How many messages the client has written so far (requests and notifications): each
    /// takes its place in the client's order from it as its handler starts, in the order rmcp
    /// read them (it spawns a handler per message, run in turn).
    written: Arc<AtomicU64>,
    /// Each forwarded request still waiting, by the client's id (canonical JSON): a client's
    /// cancellation names the request upstream by its own id.
    forwarded: Arc<std::sync::Mutex<BTreeMap<String, Forwarded>>>,
    /// Whether a task is trying the outbox again after a refusal (at most one).
    retrying: Arc<AtomicBool>,
    /// Set once stdin closed: nothing connects again.
    closing: Arc<AtomicBool>,
    /// The stdio client, once its handshake is done: what the server starts goes to it.
    client: Downstream,
}

/// A request the bridge is forwarding.
enum Forwarded {
    /// Not yet numbered by rmcp (waiting for a session): the cancellations of it wait here, in
    /// the client's order, and go under its upstream id once it has one. Each is owed delivery:
    /// a second one written meanwhile once replaced the first (sdk_rmcp soak,
    /// `v1.sdk_rmcp.none.f620bace59a57aa4`: the cancellation of step 5 never reached the server).
    Numbering(Vec<Written>),
    /// The id rmcp gave it upstream.
    Upstream(RequestId),
}

impl Proxy {
    pub fn new(config: SdkBridgeConfig) -> Self {
        Self { config: Arc::new(config), upstream: Arc::default(), posted: Arc::default(), watch: Arc::default(), left: Arc::default(), outbox: Arc::default(), written: Arc::default(), forwarded: Arc::default(), retrying: Arc::default(), closing: Arc::default(), client: Downstream::default() }
    }

    /// The upstream peer, connecting (rmcp's `initialize` handshake) when there is none or the
    /// last one closed. One connect at a time: callers wait on the lock.
    async fn peer(&self) -> Result<Peer<RoleClient>, ErrorData> {
        self.connected().await.map(|(peer, ..)| peer)
    }

    /// [`Proxy::peer`], with the ids of the requests its session's client began to POST.
    async fn connected(&self) -> Result<(Peer<RoleClient>, Posted, SessionWatch), ErrorData> {
        let mut slot = self.upstream.lock().await;
        if let Some(service) = slot.as_ref().filter(|s| !s.is_closed()) {
            return Ok((service.peer().clone(), lock(&self.posted).clone(), lock(&self.watch).clone()));
        }
        // A handshake with no answer in `HANDSHAKE_TIMEOUT` is started again on a new
        // connection, until one is answered or stdin closes: its answer was lost, and the
        // requests waiting on it wait for the next (rmcp would wait on the lost one forever).
        // So is one whose answer's stream was cut (rmcp does not resume it), after a backoff.
        let posted = Posted::default();
        let mut cuts = 0;
        let (service, watch) = loop {
            lock(&posted).clear();
            let client = SimHttpClient::new(&self.config.host, self.config.port, self.config.bugs.refusal_without_id, posted.clone());
            let watch = client.watch();
            let mut transport_config = StreamableHttpClientTransportConfig::with_uri(self.config.url.as_str());
            if let Some(token) = &self.config.token {
                transport_config = transport_config.auth_header(token.as_str());
            }
            transport_config = transport_config.reinit_on_expired_session(self.config.bugs.rmcp_session_recovery);
            let handshake = self.client.clone().serve(StreamableHttpClientTransport::with_client(client, transport_config));
            let answered = if self.config.bugs.handshake_without_timeout { Some(handshake.await) } else { tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await.ok() };
            let closing = self.closing.load(Ordering::SeqCst);
            match answered {
                Some(Err(ClientInitializeError::ConnectionClosed(_))) if !self.config.bugs.handshake_stream_not_resumed && !closing => {
                    tokio::time::sleep(backoff(cuts).min(RETRY_CAP)).await;
                    cuts += 1;
                }
                Some(answered) => break (answered, watch),
                None if !closing => {}
                None => return Err(upstream_error("cannot connect to the server", format!("no answer to initialize in {} s", HANDSHAKE_TIMEOUT.as_secs()))),
            }
        };
        let service = service.map_err(|e| upstream_error("cannot connect to the server", e))?;
        let peer = service.peer().clone();
        *slot = Some(service);
        *lock(&self.posted) = posted.clone();
        *lock(&self.watch) = watch.clone();
        *lock(&self.left) = Arc::default();
        // rmcp's own recovery, when it is on, recovers the session itself.
        if !self.config.bugs.forgotten_session_resumed && !self.config.bugs.rmcp_session_recovery {
            self.leave_when_gone(watch.clone(), peer.clone());
        }
        Ok((peer, posted, watch))
    }

    /// Leave `peer`'s session once the server answers 404 to a GET of it: rmcp tries a
    /// resumed stream's GET again on a 404 for ever and never fails the request that waits on
    /// that stream, so without a POST of the bridge's own to meet the 404 the request waits for
    /// good (sdk_rmcp hunt seed 2026, v1.sdk_rmcp.none.a9013d6a3e0026d7: a restart at 23 500 ms,
    /// the first resume refused at 23 600 ms, the call failed only at 32 600 ms, after another
    /// request's POST met a 404). Leaving the session fails what rmcp held, and each request the
    /// server never ran goes on the next session ([`Proxy::send_and_wait`]). It waits for the
    /// request POSTs in flight to settle first: each meets its own 404 and goes on the next.
    fn leave_when_gone(&self, watch: SessionWatch, peer: Peer<RoleClient>) {
        let proxy = self.clone();
        tokio::spawn(async move {
            watch.forgotten().await;
            proxy.expire(&peer).await;
        });
    }

    /// Send what the outbox still holds, then close the upstream session (rmcp's `cancel`), if
    /// there is one.
    pub async fn shutdown(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let live = self.upstream.lock().await.as_ref().filter(|s| !s.is_closed()).map(|s| s.peer().clone());
        if let Some(peer) = live {
            let _ = self.flush(&peer, &mut *self.outbox.lock().await, u64::MAX).await;
        }
        if let Some(service) = self.upstream.lock().await.take() {
            let _ = service.cancel().await;
        }
    }

    /// Send `request` upstream with the client's `_meta` (rmcp moves a request's `_meta` into
    /// `context.meta`), and wait for its answer as rmcp's typed calls do (no timeout).
    async fn forward(&self, request: ClientRequest, context: &RequestContext<RoleServer>, what: &str) -> Result<ServerResult, ErrorData> {
        let place = self.take_place();
        let key = id_key(&context.id);
        lock(&self.forwarded).insert(key.clone(), Forwarded::Numbering(Vec::new()));
        let answer = self.send_and_wait(request, context, &key, what, place).await;
        // A cancellation that waited for a request never numbered (the connect failed) names
        // nothing upstream: it goes as written, judged like any other.
        let unnumbered = lock(&self.forwarded).remove(&key);
        if let Some(Forwarded::Numbering(notes)) = unnumbered {
            let mut outbox = self.outbox.lock().await;
            notes.into_iter().for_each(|note| queue(&mut outbox, note));
        }
        answer
    }

    /// Number and send the request under the outbox's lock, after the notifications the client
    /// wrote before it (`place` is the request's in the client's order), and only those: one
    /// written after it waits for it, not it for one (sdk hunt seed 0x17c0ffee,
    /// `v1.sdk.none.e15e8432b67aa731`: a ping that waited for the session failed "not sent, to
    /// keep the client's order" behind a progress note the client wrote 40 ms after it). rmcp
    /// fails its own pending request of an id as soon as a cancellation naming that id has been
    /// sent (src/service.rs:1547-1553): deciding what a cancellation names and rmcp numbering a
    /// request must not interleave, or a cancellation sent as written names the request rmcp
    /// numbers meanwhile (docs/findings.md, K2).
    async fn send_and_wait(
        &self,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
        key: &str,
        what: &str,
        place: u64,
    ) -> Result<ServerResult, ErrorData> {
        let mut reconnected = false;
        loop {
            let (peer, posted, watch) = self.connected().await?;
            let mut outbox = self.outbox.lock().await;
            // The session may have been left while this waited for the outbox (a notification's
            // 404): a request, or a cancellation waiting for it, sent on it is lost.
            if !self.is_current(&peer).await {
                continue;
            }
            // The client's order holds: a request goes after the notifications written before
            // it. One the server still refuses after the retries keeps the request unsent, and
            // the request fails saying so, rather than wait on a refusal that may be for good.
            // A session the server forgot is left, and the request goes on the next.
            match self.flush(&peer, &mut outbox, place).await {
                Err(Refusal::Expired(_)) if !reconnected => {
                    reconnected = true;
                    continue;
                }
                Err(refused) => {
                    drop(outbox);
                    self.retry_later();
                    let text = format!("{what}: not sent, to keep the client's order: the server refused a notification the client wrote before it ({refused})");
                    return Err(ErrorData::internal_error(text, None));
                }
                Ok(()) => {}
            }
            let options = PeerRequestOptions::no_options().with_meta(context.meta.clone());
            let handle = peer.send_request_with_option(request.clone(), options).await.map_err(|e| upstream_error(what, e))?;
            let upstream_id = serde_json::to_value(&handle.id).map(|id| id.to_string()).unwrap_or_default();
            let numbered = Forwarded::Upstream(handle.id.clone());
            let waited = lock(&self.forwarded).insert(key.to_string(), numbered);
            // The cancellations that waited for its id go now; one the session does not take
            // goes back to the outbox, to be sent as written once it can.
            if let Some(Forwarded::Numbering(notes)) = waited {
                for written in notes {
                    if peer.send_notification(renamed(written.note.clone(), handle.id.clone())).await.is_err() {
                        queue(&mut outbox, written);
                        self.retry_later();
                    }
                }
            }
            drop(outbox);
            // The server forgot the session before it read the request (404: nothing ran):
            // the bridge leaves the session and sends the request once more on a new one, as
            // rmcp's own recovery would, without that recovery's hazards (switch
            // `rmcp_session_recovery`).
            let left = lock(&self.left).clone();
            let answer = tokio::select! {
                biased;
                answer = handle.await_response() => answer,
                () = left.notified() => Err(rmcp::ServiceError::TransportClosed),
            };
            match answer {
                // The other request POSTs in flight on the session settle first, as when a GET
                // meets the 404 (`leave_when_gone`): each meets its own 404 and goes on the next
                // session too. Left at once, a POST that had its connection but not yet its 404
                // was cut by the bridge's own leaving, and its request failed as one that may
                // have run (sdk_rmcp hunt seed 0x64c14a7, v1.sdk_rmcp.none.40160a32c31959c2: after
                // a restart, call 17's POST met the 404 as call 0's connected; call 0 was failed
                // "Transport closed" with no POST of it at the server).
                Err(expired) if !reconnected && expired.to_string().contains(SESSION_EXPIRED) => {
                    watch.settled().await;
                    self.expire(&peer).await;
                    reconnected = true;
                    if let Some(entry @ Forwarded::Upstream(_)) = lock(&self.forwarded).get_mut(key) {
                        *entry = Forwarded::Numbering(Vec::new());
                    }
                }
                // The bridge left the session (another request's 404) while rmcp still held
                // this one: cancelling the session's service failed it. If nothing ran, it goes
                // on the next session too (sdk soak, v1.sdk.none.be691cc82da877e9: a call
                // answered "Transport closed" with no POST, the server back): its POST never
                // got a connection while the server knew the session, or it has no effect to
                // repeat (sdk_rmcp soak, v1.sdk_rmcp.none.64d69833f680f520: a ping). A call
                // whose POST may have run is answered as rmcp answered it.
                Err(_) if !reconnected && !self.is_current(&peer).await && (!lock(&posted).contains(&upstream_id) || EFFECT_FREE.contains(&what)) => {
                    reconnected = true;
                    if let Some(entry @ Forwarded::Upstream(_)) = lock(&self.forwarded).get_mut(key) {
                        *entry = Forwarded::Numbering(Vec::new());
                    }
                }
                answer => return answer.map_err(|e| upstream_error(what, e)),
            }
        }
    }

    /// Queue a notification and send the outbox once there is a session. A notification written
    /// while the connect fails waits for the next session instead of being dropped
    /// (docs/findings.md, K3), and the outbox tries again on its backoff: a client that writes
    /// nothing more is owed it all the same (sdk soak, `v1.sdk.none.7633f1b72d33f45a`: three
    /// notifications written while every handshake was refused waited 250 s, until stdin closed).
    async fn notify(&self, notification: ClientNotification) {
        let written = Written { place: self.take_place(), note: notification };
        queue(&mut *self.outbox.lock().await, written);
        let sent = match self.peer().await {
            Ok(peer) => self.flush(&peer, &mut *self.outbox.lock().await, u64::MAX).await.is_ok(),
            Err(_) => false,
        };
        if !sent {
            self.retry_later();
        }
    }

    /// Send the outbox in order, up to the notifications written at `before` or later, each
    /// notification tried again after a refusal
    /// (`NOTE_RETRIES` times, backing off). One still refused stays first, for the next flush:
    /// the error is the last refusal. A session that ended ends the flush at once (the next
    /// request connects again). A session the server forgot (HTTP 404) is left at once: rmcp
    /// recovers a session for a request only, never for a notification ("Control POSTs ... are
    /// not retried", src/transport/streamable_http_client.rs:2220-2228, and a progress or roots
    /// notification gets the same 404 unrecovered), so a bridge that kept it sent the client's
    /// notifications into a dead session until stdin closed, and failed every request behind
    /// them (sdk hunt seed 2026, `v1.sdk.none.f5d785d4575a1a18`).
    async fn flush(&self, peer: &Peer<RoleClient>, outbox: &mut Outbox, before: u64) -> Result<(), Refusal> {
        while let Some(written) = outbox.front().filter(|written| written.place < before).cloned() {
            let Some(routed) = self.route(written) else {
                outbox.pop_front();
                continue;
            };
            let mut attempt = 0;
            while let Err(refused) = peer.send_notification(routed.clone()).await {
                let text = refused.to_string();
                if text.contains(SESSION_EXPIRED) {
                    // The request POSTs in flight on the session settle first, as when a
                    // request's or a GET's 404 leaves it: each meets its own 404 and goes on the
                    // next session. Left at once, one whose connection was up was cut by the
                    // leaving and failed as one that may have run (sdk hunt seed 0x64c14a7,
                    // v1.sdk.none.62ec13de855a51b8: after a restart, a roots notification's 404
                    // left the session as calls 0 and 10 waited for theirs; both failed
                    // "Transport closed", never run).
                    let watch = lock(&self.watch).clone();
                    if self.is_current(peer).await {
                        watch.settled().await;
                    }
                    self.expire(peer).await;
                    return Err(Refusal::Expired(text));
                }
                if attempt == NOTE_RETRIES || peer.is_transport_closed() {
                    return Err(Refusal::Refused(text));
                }
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            outbox.pop_front();
        }
        Ok(())
    }

    /// The next place in the client's order: taken by each message's handler before its first
    /// wait.
    fn take_place(&self) -> u64 {
        self.written.fetch_add(1, Ordering::SeqCst)
    }

    /// Whether `peer` still speaks for the bridge's upstream session.
    async fn is_current(&self, peer: &Peer<RoleClient>) -> bool {
        self.upstream.lock().await.as_ref().is_some_and(|service| same_session(service, peer))
    }

    /// Leave the upstream session `peer` speaks for, if it is still the bridge's (another task
    /// may have connected anew since): the next send connects.
    async fn expire(&self, peer: &Peer<RoleClient>) {
        let mut slot = self.upstream.lock().await;
        if let Some(service) = slot.take_if(|service| same_session(service, peer)) {
            lock(&self.left).notify_waiters();
            // Each request numbered on it is numbered anew if it is sent again, and its id
            // upstream names nothing meanwhile (rmcp numbers each session from 0: a
            // cancellation under the old id would name another request on the new session).
            for entry in lock(&self.forwarded).values_mut() {
                if matches!(entry, Forwarded::Upstream(_)) {
                    *entry = Forwarded::Numbering(Vec::new());
                }
            }
            tokio::spawn(async move {
                let _ = service.cancel().await;
            });
        }
    }

    /// Keep trying the outbox after a refusal, on a backoff capped at `RETRY_CAP`, until
    /// it is empty or the bridge shuts down: a client that writes nothing more is owed its
    /// notifications all the same. One such task at a time.
    fn retry_later(&self) {
        if self.retrying.swap(true, Ordering::SeqCst) {
            return;
        }
        let proxy = self.clone();
        tokio::spawn(async move {
            let mut attempt = 0;
            loop {
                tokio::time::sleep(backoff(NOTE_RETRIES + attempt).min(RETRY_CAP)).await;
                attempt += 1;
                if proxy.closing.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(peer) = proxy.peer().await else { continue };
                let mut outbox = proxy.outbox.lock().await;
                if outbox.is_empty() || proxy.flush(&peer, &mut outbox, u64::MAX).await.is_ok() {
                    break;
                }
            }
            proxy.retrying.store(false, Ordering::SeqCst);
        });
    }

    /// What a notification names upstream. A cancellation of a request rmcp has numbered names
    /// its upstream id; of one not yet numbered, waits for it; any other goes as written, unless
    /// that would name another request rmcp numbered the same (rmcp would fail it at once): then
    /// it names the id's string form, which rmcp never issues, so it still reaches the server
    /// (the client's notification is owed delivery, MODEL.md §4.10) and cancels nothing there,
    /// as the client's id named nothing upstream (soak token v1.sdk.none.061b87839e741ca2: the
    /// bridge dropped it). Called under the outbox's lock, where no request is being numbered.
    fn route(&self, written: Written) -> Option<ClientNotification> {
        let note = written.note.clone();
        let ClientNotification::CancelledNotification(cancel) = &note else { return Some(note) };
        let Some(named) = cancel.params.request_id.clone() else { return Some(note) };
        let mut forwarded = lock(&self.forwarded);
        let collides = forwarded.values().any(|f| matches!(f, Forwarded::Upstream(up) if *up == named));
        // One that named nothing when written is never routed to a request of its id since.
        let entry = if cancel.extensions.get::<NamesNothing>().is_some() { None } else { forwarded.get_mut(&id_key(&named)) };
        match entry {
            Some(Forwarded::Upstream(upstream)) => Some(renamed(note, upstream.clone())),
            Some(Forwarded::Numbering(waiting)) => {
                waiting.push(written);
                None
            }
            None if collides => Some(renamed(note, unnumbered(&named))),
            None => Some(note),
        }
    }
}

/// Whether `peer` speaks for `service`'s session (its handshake's answer is the same one).
fn same_session(service: &Upstream, peer: &Peer<RoleClient>) -> bool {
    service.peer().peer_info().zip(peer.peer_info()).is_some_and(|(a, b)| Arc::ptr_eq(&a, &b))
}

/// How rmcp's error for an HTTP 404 to a POST with a session id reads
/// (`StreamableHttpError::SessionExpired`, src/transport/streamable_http_client.rs:257).
const SESSION_EXPIRED: &str = "Session expired (HTTP 404)";

/// A client's notification waiting to go upstream, with its place in the client's order.
#[derive(Clone)]
struct Written {
    place: u64,
    note: ClientNotification,
}

/// The client's notifications not yet sent, by place: the order the client wrote them in.
type Outbox = VecDeque<Written>;

/// Put `written` back in the outbox at its place (a cancellation that waited for its request,
/// one its session did not take): the outbox stays in the client's order.
fn queue(outbox: &mut Outbox, written: Written) {
    let at = outbox.partition_point(|queued| queued.place < written.place);
    outbox.insert(at, written);
}

/// Why the outbox could not be sent: the server forgot the session (the bridge has left it),
/// or refused a notification past the retries.
enum Refusal {
    Expired(String),
    Refused(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Expired(text) | Self::Refused(text) => f.write_str(text),
        }
    }
}

/// How long the `initialize` handshake may take before the connect fails (rmcp gives it no
/// limit; docs/findings.md, "No timeout on the handshake").
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How often a refused notification is tried again before the request behind it fails.
const NOTE_RETRIES: u32 = 3;
/// The longest wait between the outbox's later tries, and between handshakes cut short.
const RETRY_CAP: std::time::Duration = std::time::Duration::from_secs(5);

/// The wait before try `attempt + 1` of a refused notification or a cut handshake: 100 ms,
/// doubling.
fn backoff(attempt: u32) -> std::time::Duration {
    std::time::Duration::from_millis(100 << attempt.min(10))
}

/// A cancellation naming `id` instead.
fn renamed(mut note: ClientNotification, id: RequestId) -> ClientNotification {
    if let ClientNotification::CancelledNotification(cancel) = &mut note {
        cancel.params.request_id = Some(id);
    }
    note
}

/// Marks a client's cancellation that named no request in flight when it was written.
#[derive(Debug, Clone, Copy)]
struct NamesNothing;

/// An id no request rmcp numbers can carry: rmcp numbers with integers, so the number's string.
fn unnumbered(id: &RequestId) -> RequestId {
    match id {
        NumberOrString::Number(n) => NumberOrString::String(n.to_string().into()),
        other => other.clone(),
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn id_key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

fn upstream_error(what: &str, error: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(format!("{what}: {error}"), None)
}

impl Proxy {
    /// The notification with the client's `_meta` carried along. rmcp 3.11.0 hands a handler
    /// an empty `context.meta` and leaves the meta in `context.extensions`
    /// (src/service.rs:1775-1776); switch `notification_context_meta` reads it where the API
    /// says it is.
    fn with_meta(&self, mut notification: ClientNotification, context: &NotificationContext<RoleServer>) -> ClientNotification {
        let meta = match context.extensions.get::<NotificationMetaObject>() {
            Some(meta) if !self.config.bugs.notification_context_meta => meta.clone(),
            _ => context.meta.clone(),
        };
        *notification.get_meta_mut() = meta;
        notification
    }
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        capabilities.tools = Some(ToolsCapability::default());
        ServerConfig::new(capabilities)
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let request = ClientRequest::PingRequest(PingRequest::default());
        match self.forward(request, &context, "ping").await? {
            ServerResult::EmptyResult(_) => Ok(()),
            _ => Err(ErrorData::internal_error("unexpected answer to ping", None)),
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(request.unwrap_or_default()));
        match self.forward(request, &context, "tools/list").await? {
            ServerResult::ListToolsResult(result) => Ok(result),
            _ => Err(ErrorData::internal_error("unexpected answer to tools/list", None)),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(request));
        match self.forward(request, &context, "tools/call").await? {
            ServerResult::CallToolResult(result) => Ok(CallToolResponse::Complete(result)),
            _ => Err(ErrorData::internal_error("unexpected answer to tools/call", None)),
        }
    }

    /// The client's handshake is done: open the upstream session now rather than at its first
    /// request, as MODEL.md §1.4 has a bridge forward `initialize` at once. The server then hears
    /// the client arrive (rmcp ends its handshake with its own `notifications/initialized`)
    /// however long the first request is in coming: sdk hunt seed 2026,
    /// `v1.sdk.none.d85e7cf264ecf8af`, a client that wrote only a malformed line after its
    /// handshake, and a server that heard nothing of it for 252 s. A connect that fails is tried
    /// again on the outbox's backoff.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        *lock(&self.client.0) = Some(context.peer.clone());
        let proxy = self.clone();
        tokio::spawn(async move {
            if proxy.peer().await.is_err() {
                proxy.retry_later();
            }
        });
    }

    async fn on_cancelled(&self, params: CancelledNotificationParam, context: NotificationContext<RoleServer>) {
        // What it names upstream is decided when it is sent (`route`). One naming no request in
        // flight as the client writes it names nothing, even if the client sends a request of
        // that id before it goes (it may wait in the outbox): it is marked now (soak token
        // v1.sdk.none.283fcbb2f0122276: it cancelled the client's next call 2).
        let unbound = params.request_id.as_ref().is_some_and(|id| !lock(&self.forwarded).contains_key(&id_key(id)));
        let note = ClientNotification::CancelledNotification(CancelledNotification::new(params));
        let mut note = self.with_meta(note, &context);
        if let (true, ClientNotification::CancelledNotification(cancel)) = (unbound, &mut note) {
            cancel.extensions.insert(NamesNothing);
        }
        self.notify(note).await;
    }

    async fn on_progress(&self, params: ProgressNotificationParam, context: NotificationContext<RoleServer>) {
        let note = ClientNotification::ProgressNotification(ProgressNotification::new(params));
        self.notify(self.with_meta(note, &context)).await;
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        let note = ClientNotification::RootsListChangedNotification(RootsListChangedNotification::default());
        self.notify(self.with_meta(note, &context)).await;
    }
}

/// The upstream client's handler: what the server starts (its notifications, its requests to
/// the client) goes on to the stdio client, as a proxy owes it (`server_messages_delivered`).
/// rmcp's `()` handler drops every notification and answers `roots/list` itself with no roots
/// (src/handler/client.rs:107-111, :221-226). A `ping` checks the bridge, which answers it
/// (rmcp's default). The handshake declares the client's own capabilities.
#[derive(Clone, Default)]
pub struct Downstream(Arc<std::sync::Mutex<Option<Peer<RoleServer>>>>);

impl Downstream {
    fn client(&self) -> Option<Peer<RoleServer>> {
        lock(&self.0).clone()
    }

    async fn notify(&self, notification: ServerNotification) {
        if let Some(client) = self.client() {
            let _ = client.send_notification(notification).await;
        }
    }
}

#[allow(deprecated)]
impl ClientHandler for Downstream {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        if let Some(declared) = self.client().and_then(|client| client.peer_info()) {
            info.capabilities = declared.capabilities.clone();
        }
        info
    }

    async fn list_roots(&self, context: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        let client = self.client().ok_or_else(|| ErrorData::internal_error("roots/list: the client has not initialized", None))?;
        let options = PeerRequestOptions::no_options().with_meta(context.meta.clone());
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        let handle = client.send_request_with_option(request, options).await.map_err(|e| upstream_error("roots/list", e))?;
        match handle.await_response().await.map_err(|e| upstream_error("roots/list", e))? {
            ClientResult::ListRootsResult(roots) => Ok(roots),
            _ => Err(ErrorData::internal_error("unexpected answer to roots/list", None)),
        }
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _context: NotificationContext<RoleClient>) {
        self.notify(ServerNotification::LoggingMessageNotification(LoggingMessageNotification::new(params))).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(ServerNotification::ToolListChangedNotification(ToolListChangedNotification::default())).await;
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(ServerNotification::ResourceListChangedNotification(ResourceListChangedNotification::default())).await;
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(ServerNotification::PromptListChangedNotification(PromptListChangedNotification::default())).await;
    }

    async fn on_resource_updated(&self, params: ResourceUpdatedNotificationParam, _context: NotificationContext<RoleClient>) {
        self.notify(ServerNotification::ResourceUpdatedNotification(ResourceUpdatedNotification::new(params))).await;
    }
}

/// Serve the client on `stdio` until it closes stdin, then close the upstream session. rmcp's
/// server reads and writes through the shim (`shim.rs`).
pub async fn run(config: SdkBridgeConfig, stdio: ServerEnds) -> Result<(), Box<dyn std::error::Error>> {
    let bugs = config.bugs;
    let proxy = Proxy::new(config);
    let (to_rmcp, rmcp_stdin) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_stdout, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (out_tx, out_rx) = tokio::sync::mpsc::unbounded_channel();
    let in_flight = shim::in_flight();
    let writer = tokio::spawn(shim::write_out(stdio.stdout, out_rx));
    tokio::spawn(shim::inbound(stdio.stdin, to_rmcp, out_tx.clone(), bugs, in_flight.clone()));
    let outbound = tokio::spawn(shim::outbound(from_rmcp, out_tx, in_flight));
    // rmcp's server refuses a first message other than `initialize` by ending the service.
    if let Ok(service) = proxy.clone().serve((rmcp_stdin, rmcp_stdout)).await {
        let _ = service.waiting().await;
    }
    proxy.shutdown().await;
    let _ = outbound.await;
    let _ = writer.await;
    Ok(())
}

/// The capacity of the pipes between the shim and rmcp.
const PIPE_BYTES: usize = 1 << 16;
