//! The daemon's methods: `status`, `stop`, `listTools` (connect, then page with a deadline per
//! page, the repeated-cursor guard and the page cap) and the fixed-phase methods, which race the
//! absolute operation ceiling.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};

use super::config::{fixed_phase, MAX_PAGES, PROTOCOL_VERSION};
use super::mcp::RESOURCE_URI;
use super::process::Ctx;
use super::upstream::{self, UpstreamError};
use super::wire::{code, Failure, Request};
use crate::emit;
use crate::events::kind;
use crate::seam::Instant;

/// Run one request's work. `admitted` anchors the operation ceiling: a stalled event loop that
/// polls the work late must not push the ceiling out.
pub async fn dispatch(
    ctx: &Rc<Ctx>,
    request: &Request,
    admitted: Instant,
) -> Result<Value, Failure> {
    match request.method.as_str() {
        "status" => Ok(status(ctx)),
        "stop" => stop(ctx, request),
        "listTools" => list_tools(ctx, request).await,
        method if fixed_phase(method) => fixed(ctx, request, admitted).await,
        method => Err(Failure::new(
            code::UNKNOWN_METHOD,
            format!("unknown method {method}"),
        )),
    }
}

/// The number of requests in flight besides the one asking (this request is active too).
fn others(ctx: &Ctx) -> u64 {
    ctx.state.borrow().active
}

/// `status`; a protocol-1 daemon reports neither `protocolVersion` nor `activeRequests`.
fn status(ctx: &Ctx) -> Value {
    let mut status = json!({
        "pid": ctx.pid,
        "startedAt": ctx.started_at,
        "configFingerprint": ctx.fingerprint,
    });
    if ctx.protocol_version >= PROTOCOL_VERSION {
        status["protocolVersion"] = json!(ctx.protocol_version);
        status["activeRequests"] = json!(others(ctx));
    }
    status
}

/// A `stop` addressed to another pid is refused, and so is one sent `ifIdle` while other
/// requests are in flight: the client drained before sending it, but work admitted since its
/// last probe makes that check stale, and only the daemon can check and act at once.
/// Records what the stop found in flight.
fn stop(ctx: &Ctx, request: &Request) -> Result<Value, Failure> {
    let addressed = request.params.get("pid").and_then(Value::as_u64);
    let if_idle = request.params.get("ifIdle").and_then(Value::as_bool) == Some(true);
    let busy = if_idle && others(ctx) > 0;
    let refused = addressed.is_some_and(|pid| pid != ctx.pid) || busy;
    emit!(
        kind::DAEMON_STOP,
        pid = ctx.pid,
        id = %request.id,
        addressed = addressed.unwrap_or(0),
        active = others(ctx),
        refused
    );
    match addressed {
        _ if busy => Err(Failure::new(
            code::RUNTIME_ERROR,
            format!("stop refused: {} other requests in flight", others(ctx)),
        )),
        Some(pid) if refused => Err(Failure::new(
            code::RUNTIME_ERROR,
            format!("stop for pid {pid} refused by pid {}", ctx.pid),
        )),
        _ => {
            ctx.state.borrow_mut().stopping = true;
            Ok(json!({"stopping": ctx.pid}))
        }
    }
}

/// How a failure upstream reaches the client. A timeout is `operation_timeout`: final.
pub fn failure(ctx: &Ctx, error: UpstreamError) -> Failure {
    match error {
        UpstreamError::Timeout(text) if ctx.rules.bugs.operation_timeout_retryable => {
            Failure::new(code::RUNTIME_ERROR, text)
        }
        UpstreamError::Timeout(text) => Failure::new(code::OPERATION_TIMEOUT, text),
        UpstreamError::Failed(text) => Failure::new(code::RUNTIME_ERROR, text),
    }
}

async fn list_tools(ctx: &Rc<Ctx>, request: &Request) -> Result<Value, Failure> {
    let timeout_ms = request.timeout_ms();
    let oauth_bound_ms = ctx.rules.list_oauth_bound_ms(timeout_ms);
    let page_bound_ms = ctx.rules.page_bound_ms(timeout_ms);
    upstream::connect(ctx, &request.id, oauth_bound_ms, Some(page_bound_ms))
        .await
        .map_err(|e| failure(ctx, e))?;
    let mut tools = Vec::new();
    let mut seen = BTreeSet::new();
    let mut cursor: Option<String> = None;
    for page in 1..=MAX_PAGES {
        let params = cursor
            .as_ref()
            .map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let call = upstream::rpc(ctx, &request.id, "tools/list", params, oauth_bound_ms);
        let result = match tokio::time::timeout(Duration::from_millis(page_bound_ms), call).await {
            Ok(result) => result.map_err(|e| failure(ctx, e))?,
            Err(_) => {
                let text = format!("tools/list page {page} timed out after {page_bound_ms} ms");
                return Err(failure(ctx, UpstreamError::Timeout(text)));
            }
        };
        tools.extend(
            result
                .get("tools")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        );
        let Some(next) = result.get("nextCursor").and_then(Value::as_str) else {
            return Ok(json!({"tools": tools}));
        };
        if !ctx.rules.bugs.no_cursor_guard && !seen.insert(next.to_string()) {
            let text = format!("tools/list repeated cursor {next:?} after {page} pages");
            return Err(Failure::new(code::RUNTIME_ERROR, text));
        }
        cursor = Some(next.to_string());
    }
    let text = format!("tools/list exceeded {MAX_PAGES} pages");
    Err(Failure::new(code::RUNTIME_ERROR, text))
}

/// A fixed-phase method: connect (OAuth bounded by `oauth_timeout_ms`), then one upstream call,
/// all under the absolute ceiling.
async fn fixed(ctx: &Rc<Ctx>, request: &Request, admitted: Instant) -> Result<Value, Failure> {
    let work = async {
        if request.method == "closeServer" {
            upstream::close(ctx);
            return Ok(json!({"closed": true}));
        }
        let oauth_bound_ms = ctx.rules.timing.oauth_timeout_ms;
        upstream::connect(ctx, &request.id, oauth_bound_ms, None).await?;
        let (method, params) = upstream_call(request);
        upstream::rpc(ctx, &request.id, method, params, oauth_bound_ms).await
    };
    let Some(ceiling_ms) = ctx.rules.ceiling_ms(request.timeout_ms()) else {
        return work.await.map_err(|e| failure(ctx, e));
    };
    match tokio::time::timeout_at(admitted + Duration::from_millis(ceiling_ms), work).await {
        Ok(result) => result.map_err(|e| failure(ctx, e)),
        Err(_) => {
            let text = format!(
                "{} timed out at its {ceiling_ms} ms operation ceiling",
                request.method
            );
            Err(failure(ctx, UpstreamError::Timeout(text)))
        }
    }
}

/// The upstream MCP request a fixed-phase method makes.
fn upstream_call(request: &Request) -> (&'static str, Value) {
    let param = |name: &str| request.params.get(name).cloned();
    match request.method.as_str() {
        "callTool" => {
            let name = param("tool").unwrap_or_else(|| json!("build"));
            let arguments = param("args").unwrap_or_else(|| json!({}));
            ("tools/call", json!({"name": name, "arguments": arguments}))
        }
        "readResource" => (
            "resources/read",
            json!({"uri": param("uri").unwrap_or_else(|| json!(RESOURCE_URI))}),
        ),
        _ => ("resources/list", json!({})),
    }
}
