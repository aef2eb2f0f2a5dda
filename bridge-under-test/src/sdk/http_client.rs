//! rmcp's `StreamableHttpClient` over hyper (HTTP/1.1) on the seam's TCP: what an author who
//! builds on rmcp writes to run its Streamable HTTP client transport on their own connector.
//! Modelled on rmcp's own hyper client (`transport/common/unix_socket.rs` in rmcp 3.11.0): one
//! connection per request, `sse-stream` for event streams (as rmcp's `bounded_sse_stream`),
//! the same mapping of statuses to `StreamableHttpError`s. Two differences for determinism:
//! custom headers are applied in name order (rmcp hands them over in a `HashMap`, whose order
//! is random), and nothing here reads a clock or draws randomness. One workaround (R2 in
//! docs/findings.md, switch `refusal_without_id`): a refusal's id-less JSON-RPC error gets the
//! request's id, and a notification refused by a 5xx fails its send.

// rmcp's trait hands headers over in a `HashMap`: they are put in name order before use.
#![allow(clippy::disallowed_types)]

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

use crate::seam;

const SESSION_ID: &str = "Mcp-Session-Id";
const LAST_EVENT_ID: &str = "Last-Event-Id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// What can go wrong below HTTP: the connection, or a request hyper would not build.
#[derive(Debug)]
pub enum ClientError {
    Io(std::io::Error),
    Hyper(hyper::Error),
    Http(http::Error),
    Json(serde_json::Error),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "io: {e}"),
            Self::Hyper(e) => write!(f, "hyper: {e}"),
            Self::Http(e) => write!(f, "http: {e}"),
            Self::Json(e) => write!(f, "json: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

type Result<T> = std::result::Result<T, StreamableHttpError<ClientError>>;

fn client(error: ClientError) -> StreamableHttpError<ClientError> {
    StreamableHttpError::Client(error)
}

/// The client: every request opens a connection to `host:port` (the URI's authority names the
/// same server for the `Host` header).
#[derive(Clone, Debug)]
pub struct SimHttpClient {
    host: Arc<str>,
    port: u16,
    /// Pass a refusal's id-less JSON-RPC error to rmcp as it came (`SdkBugs::refusal_without_id`).
    raw_refusals: bool,
    /// The ids (canonical JSON) of the requests whose POST got a connection to the server
    /// while the server still knew the session.
    posted: Posted,
    /// The server answered 404 to this session (it forgot it; sessions do not come back): a
    /// request POSTed from then on cannot run, whatever its connection did.
    forgotten: Arc<std::sync::atomic::AtomicBool>,
    /// Told once the server answers 404 to a GET of the session (a POST's 404 fails that
    /// request, which the bridge sees; a GET's only makes rmcp try again).
    gone: Arc<tokio::sync::Notify>,
    /// Requests whose POST has not had its response head yet, and a wake-up as each settles.
    in_flight: Arc<(std::sync::atomic::AtomicUsize, tokio::sync::Notify)>,
}

/// What the bridge waits for before leaving a session a GET found forgotten: the 404, then every
/// request POST in flight settled (each meets its own 404, and goes on the next session, rather
/// than being failed as the session is left: sdk soak, v1.sdk.none.3c27f38271de073a).
#[derive(Clone, Default)]
pub struct SessionWatch {
    gone: Arc<tokio::sync::Notify>,
    in_flight: Arc<(std::sync::atomic::AtomicUsize, tokio::sync::Notify)>,
}

impl SessionWatch {
    pub async fn forgotten(self) {
        self.gone.notified().await;
        self.settled().await;
    }

    /// Every request POST in flight has had its response head (or failed).
    pub async fn settled(&self) {
        loop {
            let settled = self.in_flight.1.notified();
            if self.in_flight.0.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            settled.await;
        }
    }
}

/// Counts one request POST in flight until dropped.
struct InFlight(Arc<(std::sync::atomic::AtomicUsize, tokio::sync::Notify)>);

impl InFlight {
    fn new(count: &Arc<(std::sync::atomic::AtomicUsize, tokio::sync::Notify)>) -> Self {
        count.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0 .1.notify_waiters();
    }
}

/// The ids of the requests a client's POST got a connection for: one set per session's client,
/// so the bridge can tell a request the server never saw from one that may have run.
pub type Posted = Arc<std::sync::Mutex<BTreeSet<String>>>;

impl SimHttpClient {
    pub fn new(host: &str, port: u16, raw_refusals: bool, posted: Posted) -> Self {
        Self { host: host.into(), port, raw_refusals, posted, forgotten: Arc::default(), gone: Arc::default(), in_flight: Arc::default() }
    }

    /// What tells the bridge that a GET found this client's session forgotten.
    pub fn watch(&self) -> SessionWatch {
        SessionWatch { gone: self.gone.clone(), in_flight: self.in_flight.clone() }
    }

    /// The server forgot the session: requests POSTed from now on cannot run.
    fn forget(&self) {
        self.forgotten.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> std::result::Result<http::Response<Incoming>, ClientError> {
        self.send_request(request, None).await
    }

    /// Send `request`; a JSON-RPC request's id (`carrying`) goes into `posted` once the
    /// connection is up, the first moment the server could read it.
    async fn send_request(&self, request: Request<Full<Bytes>>, carrying: Option<String>) -> std::result::Result<http::Response<Incoming>, ClientError> {
        let _in_flight = carrying.as_ref().map(|_| InFlight::new(&self.in_flight));
        let stream = seam::TcpStream::connect((&*self.host, self.port)).await.map_err(ClientError::Io)?;
        if let Some(id) = carrying.filter(|_| !self.forgotten.load(std::sync::atomic::Ordering::SeqCst)) {
            self.posted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id);
        }
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(ClientError::Hyper)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        sender.send_request(request).await.map_err(ClientError::Hyper)
    }

    fn builder(&self, method: Method, uri: &str, auth: Option<String>, custom: HashMap<HeaderName, HeaderValue>) -> http::request::Builder {
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::HOST, format!("{}:{}", self.host, self.port));
        if let Some(auth) = auth {
            builder = builder.header(http::header::AUTHORIZATION, format!("Bearer {auth}"));
        }
        // In name order: the map's own order is random per process.
        let ordered: BTreeMap<String, (HeaderName, HeaderValue)> =
            custom.into_iter().map(|(name, value)| (name.as_str().to_string(), (name, value))).collect();
        for (_, (name, value)) in ordered {
            builder = builder.header(name, value);
        }
        builder
    }
}

fn content_type_is(response: &http::Response<Incoming>, expected: &str) -> bool {
    let value = response.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    value.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case(expected)
}

fn session_of(response: &http::Response<Incoming>) -> Option<String> {
    response.headers().get(SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn body_bytes(response: http::Response<Incoming>) -> Result<Bytes> {
    Ok(response.into_body().collect().await.map_err(|e| client(ClientError::Hyper(e)))?.to_bytes())
}

fn sse(response: http::Response<Incoming>) -> BoxStream<'static, std::result::Result<Sse, SseError>> {
    SseStream::from_bytes_stream(response.into_body().into_data_stream()).boxed()
}

impl StreamableHttpClient for SimHttpClient {
    type Error = ClientError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        let body = serde_json::to_string(&message).map_err(|e| client(ClientError::Json(e)))?;
        let mut builder = self
            .builder(Method::POST, &uri, auth_header, custom_headers)
            .header(http::header::CONTENT_TYPE, JSON)
            .header(http::header::ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        let attached = session_id.is_some();
        if let Some(session) = session_id {
            builder = builder.header(SESSION_ID, session.as_ref());
        }
        let carrying = match &message {
            JsonRpcMessage::Request(request) => serde_json::to_value(&request.id).ok().map(|id| id.to_string()),
            _ => None,
        };
        let request = builder.body(Full::new(Bytes::from(body))).map_err(|e| client(ClientError::Http(e)))?;
        let response = self.send_request(request, carrying.clone()).await.map_err(client)?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && attached {
            self.forget();
            // The server did not know the session when it read this request: it never ran,
            // although its connection came up before the bridge knew (sdk_rmcp hunt seed
            // 0x64c14a7, v1.sdk_rmcp.none.40160a32c31959c2: call 0 connected as call 17's 404
            // arrived).
            if let Some(id) = &carrying {
                self.posted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(id);
            }
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = session_of(&response);
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        if !status.is_success() {
            let is_json = content_type_is(&response, JSON);
            // A rate limit, and a server error without JSON, are a failed send whatever the body
            // says, as rmcp's own client classifies them before reading it
            // (`transport/common/reqwest/streamable_http_client.rs:83-93, 335-343`): the sender
            // learns its message was not taken and may send it again.
            // A notification (or a response) refused by a server error was not taken, whatever
            // the body says: the sender must learn it (rmcp would report it sent).
            let lost_note = status.is_server_error() && awaits_nothing && !self.raw_refusals;
            if status == StatusCode::TOO_MANY_REQUESTS || (status.is_server_error() && !is_json) || lost_note {
                let retry_after = response.headers().get(http::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_owned);
                return Err(StreamableHttpError::HttpStatus(HttpStatusError::new(status.as_u16(), retry_after)));
            }
            // A JSON-RPC error in the body is the server's answer (as rmcp's clients read it).
            let body = body_bytes(response).await?;
            if is_json && !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                if let Ok(JsonRpcMessage::Error(mut error)) = serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    // The refusal answers the request this POST carried: it gets that id when
                    // the server gave none (Streamable HTTP allows none; rmcp drops an error
                    // without one, and the request would wait forever).
                    if let (None, ClientJsonRpcMessage::Request(request), false) = (&error.id, &message, self.raw_refusals) {
                        error.id = Some(request.id.clone());
                    }
                    return Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), session));
                }
            }
            let text = String::from_utf8_lossy(&body[..body.len().min(4_096)]).into_owned();
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("HTTP {status}: {text}"))));
        }
        if content_type_is(&response, EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(sse(response), session));
        }
        if content_type_is(&response, JSON) {
            let body = body_bytes(response).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session)),
                Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("bad JSON: {e}")))),
            };
        }
        if awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let kind = response.headers().get(http::header::CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        Err(StreamableHttpError::UnexpectedContentType(kind))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        let request = self
            .builder(Method::DELETE, &uri, auth_header, custom_headers)
            .header(SESSION_ID, session_id.as_ref())
            .body(Full::new(Bytes::new()))
            .map_err(|e| client(ClientError::Http(e)))?;
        let response = self.send(request).await.map_err(client)?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED || status.is_success() {
            return Ok(());
        }
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("delete_session returned {status}"))))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, std::result::Result<Sse, SseError>>> {
        let mut builder = self
            .builder(Method::GET, &uri, auth_header, custom_headers)
            .header(http::header::ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        let attached = session_id.is_some();
        if let Some(session) = session_id {
            builder = builder.header(SESSION_ID, session.as_ref());
        }
        if let Some(last) = last_event_id {
            builder = builder.header(LAST_EVENT_ID, last);
        }
        let request = builder.body(Full::new(Bytes::new())).map_err(|e| client(ClientError::Http(e)))?;
        let response = self.send(request).await.map_err(client)?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if status == StatusCode::NOT_FOUND && attached {
            self.forget();
            self.gone.notify_one();
        }
        if !status.is_success() {
            let body = body_bytes(response).await.unwrap_or_default();
            let text = String::from_utf8_lossy(&body[..body.len().min(4_096)]).into_owned();
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("HTTP {status}: {text}"))));
        }
        if !content_type_is(&response, EVENT_STREAM) {
            let kind = response.headers().get(http::header::CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            return Err(StreamableHttpError::UnexpectedContentType(kind));
        }
        Ok(sse(response))
    }
}
