//! The local socket's wire (MODEL.md §2.2): one JSON request per connection, then newline-
//! delimited frames from the daemon: progress frames, one response, end of connection.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Daemon error codes.
pub mod code {
    /// A deadline of the operation itself expired: final, never retried.
    pub const OPERATION_TIMEOUT: &str = "operation_timeout";
    pub const RUNTIME_ERROR: &str = "runtime_error";
    pub const UNKNOWN_METHOD: &str = "unknown_method";
    pub const INVALID_JSON: &str = "invalid_json";
}

/// What a client writes. `protocolVersion` is absent on version 1; `progressIntervalMs` asks
/// for frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub id: String,
    pub method: String,
    #[serde(default)]
    pub params: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_interval_ms: Option<u64>,
}

impl Request {
    /// `params.timeoutMs`, the caller's deadline.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.params.get("timeoutMs").and_then(Value::as_u64)
    }
}

/// A daemon error: a code and a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: &'static str,
    pub message: String,
}

impl Failure {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// One line the daemon writes.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    Progress {
        id: String,
    },
    Response {
        id: String,
        outcome: Result<Value, (String, String)>,
    },
}

/// A progress frame.
pub fn progress(id: &str) -> String {
    json!({"type": "progress", "id": id}).to_string()
}

/// The response frame.
pub fn response(id: &str, outcome: &Result<Value, Failure>) -> String {
    match outcome {
        Ok(result) => json!({"id": id, "ok": true, "result": result}),
        Err(failure) => json!({
            "id": id,
            "ok": false,
            "error": {"code": failure.code, "message": failure.message}
        }),
    }
    .to_string()
}

/// Parse a line the daemon wrote; `None` when it is neither a frame nor a response.
pub fn parse_line(line: &str) -> Option<Line> {
    let msg: Value = serde_json::from_str(line).ok()?;
    let id = msg.get("id")?.as_str()?.to_string();
    if msg.get("type").and_then(Value::as_str) == Some("progress") {
        return Some(Line::Progress { id });
    }
    let outcome = match msg.get("ok")?.as_bool()? {
        true => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
        false => {
            let text = |name: &str| {
                msg.pointer(&format!("/error/{name}"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            Err((text("code"), text("message")))
        }
    };
    Some(Line::Response { id, outcome })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        assert_eq!(
            parse_line(&progress("a1")),
            Some(Line::Progress { id: "a1".into() })
        );
        let ok = response("a1", &Ok(json!({"tools": []})));
        assert_eq!(
            parse_line(&ok),
            Some(Line::Response {
                id: "a1".into(),
                outcome: Ok(json!({"tools": []}))
            })
        );
        let failure = Failure::new(code::OPERATION_TIMEOUT, "late");
        let err = parse_line(&response("a2", &Err(failure))).unwrap();
        let expected = Err(("operation_timeout".to_string(), "late".to_string()));
        assert_eq!(
            err,
            Line::Response {
                id: "a2".into(),
                outcome: expected
            }
        );
        assert_eq!(parse_line("{\"id\":"), None);
        let request: Request = serde_json::from_str(r#"{"id":"x","method":"status"}"#).unwrap();
        assert_eq!(
            (request.protocol_version, request.timeout_ms()),
            (None, None)
        );
    }
}
