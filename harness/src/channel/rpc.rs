//! What the bridge owes each line the agent writes, from the line alone (JSON-RPC 2.0 and the
//! MCP 2025-11-25 schema, read independently of the bridge's code): silence for a notification
//! or a response, the error JSON-RPC gives a line that is no request, or the request to serve.
//!
//! - not JSON: -32700, no `id`;
//! - not an object (a number, a string, a batch — MCP has no batches): -32600, no `id`;
//! - an object with a `method` but a `jsonrpc` other than `"2.0"` or a `method` that is no
//!   string, or with neither `method` nor `result`/`error`: -32600, with its `id` when that is
//!   an MCP `RequestId` (a string or an integer);
//! - a `method` with an `id` that is no `RequestId` (`null`, `true`, `1.5`, an object): -32600,
//!   no `id` (MCP forbids a `null` id, so it cannot be echoed);
//! - a `method` and no `id`: a notification, never answered; `result`/`error` and no `method`:
//!   a response, never answered (the bridge asks the agent nothing);
//! - a request for a method the bridge does not serve: -32601; for one it serves with `params`
//!   that are no object, or a `tools/call` whose `name` is no string or no tool of the bridge's,
//!   or whose `arguments` are given and no object: -32602.

use serde_json::{Map, Value};

/// The methods the bridge serves.
pub const METHODS: &[&str] = &["initialize", "ping", "tools/list", "tools/call"];
/// The bridge's tools.
pub const TOOLS: &[&str] = &["list_pending", "wait_for_event"];

/// What one agent line is, as far as the reply it is owed goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A notification: no reply, ever. `params` as given (`Null` when absent).
    Notification { method: String, params: Value },
    /// A response, or anything else owed silence.
    Response,
    /// The bridge must write this JSON-RPC error itself; `id` absent when `None`.
    Error { id: Option<Value>, code: i64 },
    /// A well-formed request for a method the bridge serves, with well-formed params.
    Request { id: Value, method: String, params: Value },
}

impl Input {
    /// The id a reply to this line carries, if one is owed and has an id.
    pub fn reply_id(&self) -> Option<&Value> {
        match self {
            Input::Error { id, .. } => id.as_ref(),
            Input::Request { id, .. } => Some(id),
            _ => None,
        }
    }

    /// Whether a reply is owed at all.
    pub fn owes_reply(&self) -> bool {
        matches!(self, Input::Error { .. } | Input::Request { .. })
    }

    /// A short name of the input's kind (coverage rows, messages).
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Notification { .. } => "notification",
            Input::Response => "response",
            Input::Error { code: -32700, .. } => "parse_error",
            Input::Error { code: -32600, .. } => "invalid_request",
            Input::Error { code: -32601, .. } => "unknown_method",
            Input::Error { code: -32602, .. } => "invalid_params",
            Input::Error { .. } => "error",
            Input::Request { .. } => "request",
        }
    }
}

/// An MCP `RequestId`: a string or an integer.
pub fn is_request_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// Classify one line the agent wrote.
pub fn classify(text: &str) -> Input {
    let Ok(msg) = serde_json::from_str::<Value>(text) else {
        return Input::Error { id: None, code: -32700 };
    };
    classify_value(msg)
}

/// Classify a parsed line.
pub fn classify_value(msg: Value) -> Input {
    let Value::Object(mut obj) = msg else {
        return Input::Error { id: None, code: -32600 };
    };
    let id = obj.get("id").cloned();
    let good_id = id.clone().filter(is_request_id);
    let version_ok = obj.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    let Some(method) = obj.get("method").cloned() else {
        if obj.contains_key("result") || obj.contains_key("error") {
            return Input::Response;
        }
        return Input::Error { id: good_id, code: -32600 };
    };
    let (Value::String(method), true) = (method, version_ok) else {
        return Input::Error { id: good_id, code: -32600 };
    };
    let params = obj.remove("params");
    match (id, good_id) {
        (None, _) => Input::Notification { method, params: params.unwrap_or(Value::Null) },
        (Some(_), None) => Input::Error { id: None, code: -32600 },
        (Some(_), Some(id)) => request(id, method, params),
    }
}

fn request(id: Value, method: String, params: Option<Value>) -> Input {
    if !METHODS.contains(&method.as_str()) {
        return Input::Error { id: Some(id), code: -32601 };
    }
    let params = match params {
        None => Value::Null,
        Some(Value::Object(p)) => Value::Object(p),
        Some(_) => return Input::Error { id: Some(id), code: -32602 },
    };
    if method == "tools/call" && !call_well_formed(params.as_object()) {
        return Input::Error { id: Some(id), code: -32602 };
    }
    Input::Request { id, method, params }
}

/// A `tools/call`'s params name one of the bridge's tools and carry object `arguments` if any.
fn call_well_formed(params: Option<&Map<String, Value>>) -> bool {
    let Some(params) = params else { return false };
    let named = params
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|name| TOOLS.contains(&name));
    named && params.get("arguments").is_none_or(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(id: Option<Value>, code: i64) -> Input {
        Input::Error { id, code }
    }

    #[test]
    fn every_malformed_line_gets_its_error_from_the_line_alone() {
        assert_eq!(classify("{\"jsonrpc\":\"2.0\",\"id\":1,"), err(None, -32700));
        assert_eq!(classify("[]"), err(None, -32600));
        assert_eq!(classify("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"), err(None, -32600));
        assert_eq!(classify("7"), err(None, -32600));
        assert_eq!(classify(r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#), err(Some(json!("a")), -32600));
        assert_eq!(classify(r#"{"id":3,"method":"ping"}"#), err(Some(json!(3)), -32600));
        assert_eq!(classify(r#"{"jsonrpc":"2.0","id":3,"method":5}"#), err(Some(json!(3)), -32600));
        assert_eq!(classify(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#), err(None, -32600));
        assert_eq!(classify(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#), err(None, -32600));
        assert_eq!(classify(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#), err(None, -32600));
        assert_eq!(classify(r#"{"jsonrpc":"2.0","id":4}"#), err(Some(json!(4)), -32600));
        assert_eq!(classify(r#"{"jsonrpc":"2.0","id":4,"result":{}}"#), Input::Response);
        assert_eq!(classify(r#"{"jsonrpc":"2.0","id":4,"method":"prompts/list"}"#), err(Some(json!(4)), -32601));
        assert_eq!(classify(r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":[]}"#), err(Some(json!(4)), -32602));
        let call = |params: Value| json!({"jsonrpc": "2.0", "id": -2, "method": "tools/call", "params": params}).to_string();
        assert_eq!(classify(&call(json!({"name": "nope"}))), err(Some(json!(-2)), -32602));
        assert_eq!(classify(&call(json!({"arguments": {}}))), err(Some(json!(-2)), -32602));
        assert_eq!(classify(&call(json!({"name": "list_pending", "arguments": [1]}))), err(Some(json!(-2)), -32602));
        assert!(matches!(classify(&call(json!({"name": "list_pending"}))), Input::Request { .. }));
        let note = classify(r#"{"jsonrpc":"2.0","method":"ping"}"#);
        assert!(matches!(note, Input::Notification { .. }) && !note.owes_reply());
    }
}
