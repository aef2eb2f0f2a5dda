//! The sdk family's bridge: stdio ⇄ Streamable HTTP written the way rmcp's documentation writes
//! one. The stdio side is an rmcp server (`ServerHandler::serve` on the pipes); each request it
//! receives is forwarded through an rmcp client (`().serve(StreamableHttpClientTransport)`) to
//! the remote server, and the answer (or rmcp's error) goes back. The upstream client is made on
//! first use and made again once rmcp reports its service closed. Nothing here times anything
//! out, retries or reconnects: every such decision is rmcp's.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotification, CancelledNotificationParam, ClientNotification,
    ClientRequest, ErrorData, GetMeta, ListToolsRequest, ListToolsResult, NotificationMetaObject, PaginatedRequestParams, PingRequest, RequestId,
    ProgressNotification, ProgressNotificationParam, RootsListChangedNotification, ServerCapabilities, ServerConfig,
    ServerResult, ToolsCapability,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{Peer, RoleClient, RoleServer, ServerHandler, ServiceExt};
use tokio::sync::Mutex;

use super::http_client::SimHttpClient;
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

type Upstream = RunningService<RoleClient, ()>;

/// The stdio server: a `ServerHandler` whose every method asks the upstream client.
#[derive(Clone)]
pub struct Proxy {
    config: Arc<SdkBridgeConfig>,
    upstream: Arc<Mutex<Option<Upstream>>>,
    /// The upstream id rmcp gave each forwarded request still waiting, by the client's id
    /// (canonical JSON): a client's cancellation names the request upstream by its own id.
    forwarded: Arc<std::sync::Mutex<BTreeMap<String, RequestId>>>,
}

impl Proxy {
    pub fn new(config: SdkBridgeConfig) -> Self {
        Self { config: Arc::new(config), upstream: Arc::new(Mutex::new(None)), forwarded: Arc::default() }
    }

    /// The upstream peer, connecting (rmcp's `initialize` handshake) when there is none or the
    /// last one closed. One connect at a time: callers wait on the lock.
    async fn peer(&self) -> Result<Peer<RoleClient>, ErrorData> {
        let mut slot = self.upstream.lock().await;
        if let Some(service) = slot.as_ref().filter(|s| !s.is_closed()) {
            return Ok(service.peer().clone());
        }
        let client = SimHttpClient::new(&self.config.host, self.config.port);
        let mut transport_config = StreamableHttpClientTransportConfig::with_uri(self.config.url.as_str());
        if let Some(token) = &self.config.token {
            transport_config = transport_config.auth_header(token.as_str());
        }
        let transport = StreamableHttpClientTransport::with_client(client, transport_config);
        let service = ().serve(transport).await.map_err(|e| upstream_error("cannot connect to the server", e))?;
        let peer = service.peer().clone();
        *slot = Some(service);
        Ok(peer)
    }

    /// Close the upstream session (rmcp's `cancel`), if there is one.
    pub async fn shutdown(&self) {
        if let Some(service) = self.upstream.lock().await.take() {
            let _ = service.cancel().await;
        }
    }

    /// Send `request` upstream with the client's `_meta` (rmcp moves a request's `_meta` into
    /// `context.meta`), and wait for its answer as rmcp's typed calls do (no timeout).
    async fn forward(&self, request: ClientRequest, context: &RequestContext<RoleServer>, what: &str) -> Result<ServerResult, ErrorData> {
        let peer = self.peer().await?;
        let options = PeerRequestOptions::no_options().with_meta(context.meta.clone());
        let handle = peer.send_request_with_option(request, options).await.map_err(|e| upstream_error(what, e))?;
        let key = id_key(&context.id);
        lock(&self.forwarded).insert(key.clone(), handle.id.clone());
        let answer = handle.await_response().await;
        lock(&self.forwarded).remove(&key);
        answer.map_err(|e| upstream_error(what, e))
    }

    async fn notify(&self, notification: ClientNotification) {
        if let Ok(peer) = self.peer().await {
            let _ = peer.send_notification(notification).await;
        }
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

    async fn on_cancelled(&self, mut params: CancelledNotificationParam, context: NotificationContext<RoleServer>) {
        let Ok(peer) = self.peer().await else { return };
        // A request still waiting is named by the id rmcp gave it upstream; any other
        // cancellation goes as the client wrote it, unless that would name another request that
        // rmcp numbered the same: rmcp fails its own request of that id at once
        // (src/service.rs:1606-1611). Decided once connected, when the numbering is known.
        let (upstream, collides) = {
            let forwarded = lock(&self.forwarded);
            let named = params.request_id.as_ref();
            let upstream = named.and_then(|id| forwarded.get(&id_key(id)).cloned());
            (upstream, named.is_some_and(|id| forwarded.values().any(|up| up == id)))
        };
        match upstream {
            Some(upstream) => params.request_id = Some(upstream),
            None if collides => return,
            None => {}
        }
        let note = ClientNotification::CancelledNotification(CancelledNotification::new(params));
        let _ = peer.send_notification(self.with_meta(note, &context)).await;
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
