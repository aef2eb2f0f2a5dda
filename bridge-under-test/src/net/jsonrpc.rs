//! JSON-RPC 2.0 helpers shared by the families: classifying messages, keying ids, and the error
//! envelopes a bridge writes itself (MODEL.md §1.2).

use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, InitializeResult, ProtocolVersion,
    ServerCapabilities, ToolsCapability,
};
use serde_json::{json, Value};

/// What a parsed line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Has `method` and a non-null `id`.
    Request { id: Value, method: String },
    /// Has `method` and no `id`.
    Notification { method: String },
    /// Has `id` and a `result` or an `error`.
    Response { id: Value },
    /// Anything else that is valid JSON.
    Invalid,
}

/// Classify a JSON-RPC message.
pub fn shape(msg: &Value) -> Shape {
    let method = msg.get("method").and_then(Value::as_str).map(str::to_string);
    let id = msg.get("id").filter(|id| !id.is_null()).cloned();
    let is_response = msg.get("result").is_some() || msg.get("error").is_some();
    match (method, id) {
        (Some(method), Some(id)) => Shape::Request { id, method },
        (Some(method), None) => Shape::Notification { method },
        (None, Some(id)) if is_response => Shape::Response { id },
        _ => Shape::Invalid,
    }
}

/// The canonical key of a request id: its JSON text, so `7` and `"7"` stay distinct.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

/// A successful response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A JSON-RPC error response. `id` is omitted when unknown (the MCP schema forbids `null`).
pub fn error(id: Option<&Value>, code: i64, message: &str) -> Value {
    let mut msg = json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}});
    if let Some(id) = id {
        msg["id"] = id.clone();
    }
    msg
}

/// The error the bridge writes for a request it could not complete: a tool result with
/// `isError: true` for `tools/call` (so the model sees it), a -32000 error otherwise.
pub fn failure(id: &Value, method: &str, text: &str) -> Value {
    if method == "tools/call" {
        result(id, tool_result(text, true))
    } else {
        error(Some(id), -32000, text)
    }
}

/// A `CallToolResult` with one text block, as the 2025-11-25 schema expects it.
pub fn tool_result(text: &str, is_error: bool) -> Value {
    let mut result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    // rmcp stamps the 2026-07-28 `resultType`; peers speaking 2025-11-25 never see it.
    result.result_type = None;
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// The `InitializeResult` a relay-side server (the bridge locally, or the relayer) answers with:
/// the client's protocol version when supported, tools enabled.
pub fn initialize_result(request: &Value, server_name: &str, server_version: &str) -> Value {
    let version = match request.pointer("/params/protocolVersion").and_then(Value::as_str) {
        Some("2025-06-18") => ProtocolVersion::V_2025_06_18,
        _ => ProtocolVersion::V_2025_11_25,
    };
    let mut capabilities = ServerCapabilities::default();
    capabilities.tools = Some(ToolsCapability::default());
    let result = InitializeResult::new(capabilities)
        .with_protocol_version(version)
        .with_server_info(Implementation::new(server_name, server_version));
    serde_json::to_value(result).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_told_apart() {
        let req = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        assert_eq!(shape(&req), Shape::Request { id: json!(1), method: "ping".into() });
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(shape(&note), Shape::Notification { method: "notifications/initialized".into() });
        let null_id = json!({"jsonrpc": "2.0", "id": null, "method": "x"});
        assert_eq!(shape(&null_id), Shape::Notification { method: "x".into() });
        assert_eq!(shape(&result(&json!("a"), json!({}))), Shape::Response { id: json!("a") });
        assert_eq!(shape(&json!({"id": 3})), Shape::Invalid);
        assert_ne!(id_key(&json!(7)), id_key(&json!("7")));
    }

    #[test]
    fn failures_take_the_shape_of_the_method() {
        let call = failure(&json!(2), "tools/call", "lost");
        assert_eq!(call["result"]["isError"], json!(true));
        assert_eq!(call["result"]["content"][0]["text"], json!("lost"));
        assert!(call["result"].get("resultType").is_none());
        let other = failure(&json!(2), "tools/list", "lost");
        assert_eq!(other["error"]["code"], json!(-32000));
        assert!(error(None, -32700, "Parse error").get("id").is_none());
    }
}
