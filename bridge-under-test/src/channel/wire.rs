//! The channel family's wire shapes (MODEL.md §3.2): the agent's and the bridge's MCP messages
//! and the gateway's WebSocket frames, in one place so every peer builds them alike.

use serde_json::{json, Value};

use crate::relay::jsonrpc;

/// Agent → bridge: a tool wants permission.
pub const PERMISSION_REQUEST: &str = "notifications/claude/channel/permission_request";
/// Bridge → agent: the operator's decision.
pub const PERMISSION: &str = "notifications/claude/channel/permission";
/// The bridge's tools: a read of both maps, and the event waiter.
pub const TOOL_LIST_PENDING: &str = "list_pending";
pub const TOOL_WAIT_FOR_EVENT: &str = "wait_for_event";

/// `notifications/claude/channel/permission_request`.
pub fn permission_request(request_id: &str, tool_name: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": PERMISSION_REQUEST,
        "params": {
            "request_id": request_id,
            "tool_name": tool_name,
            "description": format!("{tool_name} wants to run"),
            "input_preview": "{}"
        }
    })
}

/// `notifications/claude/channel/permission`.
pub fn permission(request_id: &str, behavior: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": PERMISSION,
        "params": {"request_id": request_id, "behavior": behavior}
    })
}

/// A `tools/call` request (`id` a number or a string: JSON-RPC allows both).
pub fn call_tool(id: Value, name: &str, arguments: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments}
    })
}

/// The agent's `initialize` request.
pub fn initialize(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "sim-agent", "version": "1.0.0"}
        }
    })
}

/// The bridge's `initialize` result: tools, plus the experimental channel capability that
/// tells the agent it may send permission requests.
pub fn initialize_result(request: &Value) -> Value {
    let mut result =
        jsonrpc::initialize_result(request, "channel-bridge", env!("CARGO_PKG_VERSION"));
    result["capabilities"]["experimental"] = json!({"claude/channel": {}});
    result
}

/// The bridge's `tools/list` result.
pub fn tools_list() -> Value {
    let schema = json!({"type": "object"});
    let tool =
        |name: &str, text: &str| json!({"name": name, "description": text, "inputSchema": schema});
    json!({"tools": [
        tool(TOOL_LIST_PENDING, "Pending permissions and approvals"),
        tool(TOOL_WAIT_FOR_EVENT, "Wait for channel events")
    ]})
}

/// A gateway frame: `{"event": ..., "payload": ...}`.
pub fn frame(event: &str, payload: Value) -> String {
    json!({"event": event, "payload": payload}).to_string()
}

/// The approval event names: `exec.*` or `plugin.*`.
pub fn approval_event(plugin: bool, resolved: bool) -> &'static str {
    match (plugin, resolved) {
        (false, false) => "exec.approval.requested",
        (true, false) => "plugin.approval.requested",
        (false, true) => "exec.approval.resolved",
        (true, true) => "plugin.approval.resolved",
    }
}

pub const SESSION_MESSAGE: &str = "session.message";

/// An integer field of a frame payload: `None` when absent or not an integer (a non-numeric
/// `expiresAtMs` counts as absent).
pub fn int_field(payload: &Value, name: &str) -> Option<i64> {
    let value = payload.get(name)?;
    value
        .as_i64()
        .or_else(|| value.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
}
