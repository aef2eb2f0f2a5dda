//! Validates MCP JSON-RPC messages against the official, embedded MCP 2025-11-25 JSON Schema.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};

use jsonschema::Validator;
use serde_json::{Map, Value};

/// The official MCP schema (JSON Schema draft 2020-12), unchanged.
const SCHEMA_TEXT: &str = include_str!("../schema/mcp-2025-11-25.schema.json");

/// The parsed schema document: parsed once per process, it is immutable.
fn document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        serde_json::from_str(SCHEMA_TEXT).expect("embedded MCP schema is not valid JSON")
    })
}

/// Compiled validators and method maps for the MCP 2025-11-25 schema.
///
/// Construction only reads the schema's union defs to build the method maps; the validator for
/// a `$defs` entry is compiled on first use and kept for the lifetime of this value.
pub struct McpSchema {
    /// One slot per `$defs` entry; filled on first use.
    validators: BTreeMap<&'static str, OnceLock<Validator>>,
    /// Method -> request def, for requests a client sends (`ClientRequest`).
    client_requests: BTreeMap<&'static str, &'static str>,
    /// Method -> notification def, for notifications a client sends (`ClientNotification`).
    client_notifications: BTreeMap<&'static str, &'static str>,
    /// Method -> request def, for requests a server sends (`ServerRequest`).
    server_requests: BTreeMap<&'static str, &'static str>,
    /// Method -> notification def, for notifications a server sends (`ServerNotification`).
    server_notifications: BTreeMap<&'static str, &'static str>,
    /// Client request method -> the def its result must satisfy ("XRequest" -> "XResult",
    /// else `EmptyResult`).
    results: BTreeMap<&'static str, &'static str>,
    /// Client request methods whose params accept `task` (task augmentation): their result may be
    /// a `CreateTaskResult` instead.
    task_augmentable: BTreeSet<&'static str>,
    /// Verdicts already reached, by `(def, prefix, instance)`: a simulation sends the same
    /// messages over and over (initialize, the same pages), and validating is the checkers'
    /// largest cost. Cleared when it reaches [`MEMO_CAP`] entries.
    memo: Mutex<BTreeMap<(&'static str, String), Verdict>>,
}

type Verdict = Result<(), String>;

/// The most verdicts [`McpSchema`] keeps.
const MEMO_CAP: usize = 4_096;

impl Default for McpSchema {
    fn default() -> Self {
        Self::new()
    }
}

impl McpSchema {
    /// Compile the embedded 2025-11-25 schema. Panics only if the embedded schema is broken.
    #[must_use]
    pub fn new() -> Self {
        let defs = defs();
        let validators = defs
            .keys()
            .map(|name| (name.as_str(), OnceLock::new()))
            .collect();
        let client_requests = method_map("ClientRequest");
        let results = client_requests
            .iter()
            .map(|(&method, &request)| (method, result_def_for(request)))
            .collect();
        let task_augmentable = client_requests
            .iter()
            .filter(|(_, &request)| params_accept_task(request))
            .map(|(&method, _)| method)
            .collect();
        Self {
            validators,
            client_requests,
            client_notifications: method_map("ClientNotification"),
            server_requests: method_map("ServerRequest"),
            server_notifications: method_map("ServerNotification"),
            results,
            task_augmentable,
            memo: Mutex::new(BTreeMap::new()),
        }
    }

    /// Validate a message an MCP *client* sends (request, notification, or a response to a server request).
    /// Requests must validate against the specific `$defs` entry for their method when the schema has one
    /// (e.g. "initialize" -> InitializeRequest, "tools/list" -> ListToolsRequest, "tools/call" -> CallToolRequest,
    /// "ping" -> PingRequest, "notifications/initialized" -> InitializedNotification, ...; the map is derived
    /// from the schema's ClientRequest / ClientNotification anyOf lists),
    /// falling back to the JSON-RPC envelope for unknown methods.
    ///
    /// # Errors
    ///
    /// One line: `<def name>: <first error message> at <instance path>` (the root is `(root)`).
    pub fn validate_client_message(&self, msg: &Value) -> Result<(), String> {
        let Some(obj) = msg.as_object() else {
            return self.check("JSONRPCMessage", msg, "");
        };
        if obj.contains_key("method") {
            return self.check_call(msg, obj, &self.client_requests, &self.client_notifications);
        }
        // A response to a server request. `ClientResult` includes the open `Result`, so any
        // object result satisfies it: the envelope is the whole check.
        self.check_response_envelope(msg, obj)
    }

    /// Validate a message an MCP *server side* sends to the client. `answering` is the method of the client request
    /// this message responds to, if it is a response. A result must validate against both the JSONRPCResultResponse
    /// envelope and the method's result def ("XRequest" -> "XResult", else EmptyResult; a task-augmentable
    /// request whose result carries `task` -> CreateTaskResult). Error responses validate against
    /// JSONRPCErrorResponse. Server notifications/requests against the ServerNotification/ServerRequest
    /// specific defs, falling back to the JSON-RPC envelope for unknown methods.
    ///
    /// # Errors
    ///
    /// One line: `<def name>: <first error message> at <instance path>` (the root is `(root)`).
    pub fn validate_server_message(
        &self,
        msg: &Value,
        answering: Option<&str>,
    ) -> Result<(), String> {
        let Some(obj) = msg.as_object() else {
            return self.check("JSONRPCMessage", msg, "");
        };
        if obj.contains_key("method") {
            return self.check_call(msg, obj, &self.server_requests, &self.server_notifications);
        }
        self.check_response_envelope(msg, obj)?;
        let (Some(result), Some(method)) = (obj.get("result"), answering) else {
            return Ok(());
        };
        let Some(&def) = self.results.get(method) else {
            return Ok(());
        };
        let def = if self.task_augmentable.contains(method)
            && result.get("task").is_some()
            && self.validators.contains_key("CreateTaskResult")
        {
            "CreateTaskResult"
        } else {
            def
        };
        self.check(def, result, "/result")
    }

    /// A request or notification: the specific def for a known method, else the envelope.
    fn check_call(
        &self,
        msg: &Value,
        obj: &Map<String, Value>,
        requests: &BTreeMap<&'static str, &'static str>,
        notifications: &BTreeMap<&'static str, &'static str>,
    ) -> Result<(), String> {
        let method = obj.get("method").and_then(Value::as_str);
        let known = method.and_then(|m| requests.get(m).or_else(|| notifications.get(m)));
        let def = match known {
            Some(&def) => def,
            None if obj.contains_key("id") => "JSONRPCRequest",
            None => "JSONRPCNotification",
        };
        self.check(def, msg, "")
    }

    /// A response: the result or error envelope, plus the JSON-RPC 2.0 rule the schema does not
    /// encode (its response defs are open objects) that a response never has both members.
    fn check_response_envelope(&self, msg: &Value, obj: &Map<String, Value>) -> Result<(), String> {
        let has_result = obj.contains_key("result");
        let has_error = obj.contains_key("error");
        if has_result && has_error {
            return Err(
                "JSONRPCResponse: a response must not contain both \"result\" and \"error\" \
                 (JSON-RPC 2.0) at (root)"
                    .to_owned(),
            );
        }
        let def = if has_error {
            "JSONRPCErrorResponse"
        } else if has_result {
            "JSONRPCResultResponse"
        } else {
            // Neither a call nor a response: the union reports it.
            "JSONRPCMessage"
        };
        self.check(def, msg, "")
    }

    /// Validate `instance` (found at `prefix` inside the message) against `$defs/<def>`.
    fn check(&self, def: &str, instance: &Value, prefix: &str) -> Result<(), String> {
        let (def, _) = self.validators.get_key_value(def).unwrap_or_else(|| no_def(def));
        let key = (*def, format!("{prefix}\u{0}{instance}"));
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(verdict) = memo.get(&key) {
            return verdict.clone();
        }
        let verdict = self.validate(def, instance, prefix);
        if memo.len() >= MEMO_CAP {
            memo.clear();
        }
        memo.insert(key, verdict.clone());
        verdict
    }

    /// [`Self::check`] without the memo.
    fn validate(&self, def: &str, instance: &Value, prefix: &str) -> Result<(), String> {
        let validator = self.validator(def);
        // `is_valid` skips the error bookkeeping: several times faster on the valid messages
        // that are nearly all of them.
        if validator.is_valid(instance) {
            return Ok(());
        }
        match validator.validate(instance) {
            Ok(()) => Ok(()),
            Err(error) => {
                let path = format!("{prefix}{}", error.instance_path().as_str());
                let path = if path.is_empty() {
                    "(root)"
                } else {
                    path.as_str()
                };
                let message: String = error
                    .to_string()
                    .chars()
                    .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
                    .collect();
                Err(format!("{def}: {message} at {path}"))
            }
        }
    }

    /// The validator for `$defs/<def>`, compiled on first use.
    fn validator(&self, def: &str) -> &Validator {
        let slot = self.validators.get(def).unwrap_or_else(|| no_def(def));
        slot.get_or_init(|| compile_def(def))
    }
}

fn no_def(def: &str) -> ! {
    panic!("MCP schema has no $defs entry {def:?}")
}

/// The schema's `$defs` object.
fn defs() -> &'static Map<String, Value> {
    document()
        .get("$defs")
        .and_then(Value::as_object)
        .expect("embedded MCP schema has no $defs object")
}

/// Compile the whole schema document with a root `"$ref": "#/$defs/<def>"` added.
fn compile_def(def: &str) -> Validator {
    let mut wrapper = document().clone();
    wrapper
        .as_object_mut()
        .expect("embedded MCP schema is not an object")
        .insert("$ref".to_owned(), Value::String(format!("#/$defs/{def}")));
    jsonschema::validator_for(&wrapper).unwrap_or_else(|error| {
        panic!("embedded MCP schema: $defs/{def} does not compile: {error}")
    })
}

/// The def name a `"#/$defs/<name>"` reference points at.
fn ref_target(schema: &'static Value) -> Option<&'static str> {
    schema.get("$ref")?.as_str()?.strip_prefix("#/$defs/")
}

/// Method -> def for every branch of the union def `union` (its `anyOf` list), read from each
/// branch's `properties.method.const`.
fn method_map(union: &str) -> BTreeMap<&'static str, &'static str> {
    let defs = defs();
    let branches = defs
        .get(union)
        .and_then(|u| u.get("anyOf"))
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("embedded MCP schema: {union} has no anyOf list"));
    branches
        .iter()
        .map(|branch| {
            let name = ref_target(branch).unwrap_or_else(|| {
                panic!("embedded MCP schema: {union} branch is not a $defs ref")
            });
            let (name, def) = defs
                .get_key_value(name)
                .unwrap_or_else(|| panic!("embedded MCP schema: {union} refers to missing {name}"));
            let method = def
                .pointer("/properties/method/const")
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("embedded MCP schema: {name} has no method const"));
            (method, name.as_str())
        })
        .collect()
}

/// The result def for request def `request`: "XRequest" -> "XResult" when the schema has it,
/// else `EmptyResult` (ping, resources/subscribe, logging/setLevel, ...), else `Result`.
fn result_def_for(request: &str) -> &'static str {
    let defs = defs();
    let named = request
        .strip_suffix("Request")
        .map(|stem| format!("{stem}Result"))
        .and_then(|name| defs.get_key_value(name.as_str()));
    let fallback = || {
        defs.get_key_value("EmptyResult")
            .or_else(|| defs.get_key_value("Result"))
    };
    named
        .or_else(fallback)
        .map(|(name, _)| name.as_str())
        .expect("embedded MCP schema has neither EmptyResult nor Result")
}

/// Whether request def `request` has params (inline or a `$defs` ref) with a `task` property.
fn params_accept_task(request: &str) -> bool {
    let defs = defs();
    let Some(params) = defs
        .get(request)
        .and_then(|d| d.pointer("/properties/params"))
    else {
        return false;
    };
    let params = ref_target(params)
        .and_then(|name| defs.get(name))
        .unwrap_or(params);
    params.pointer("/properties/task").is_some()
}

#[cfg(test)]
mod tests {
    use super::{McpSchema, MEMO_CAP};
    use serde_json::json;

    fn assert_err_names(result: Result<(), String>, def: &str) {
        match result {
            Ok(()) => panic!("expected an error naming {def}, got Ok"),
            Err(error) => {
                assert!(error.contains(def), "expected {def} in {error:?}");
                assert!(!error.contains('\n'), "error is not one line: {error:?}");
            }
        }
    }

    #[test]
    fn schema_maps_are_derived_from_the_unions() {
        let schema = McpSchema::new();
        assert_eq!(
            schema.client_requests.get("initialize"),
            Some(&"InitializeRequest")
        );
        assert_eq!(
            schema.client_requests.get("tools/list"),
            Some(&"ListToolsRequest")
        );
        assert_eq!(
            schema.client_requests.get("tools/call"),
            Some(&"CallToolRequest")
        );
        assert_eq!(schema.client_requests.get("ping"), Some(&"PingRequest"));
        assert_eq!(
            schema.client_notifications.get("notifications/initialized"),
            Some(&"InitializedNotification")
        );
        assert_eq!(
            schema.server_requests.get("roots/list"),
            Some(&"ListRootsRequest")
        );
        assert_eq!(
            schema
                .server_notifications
                .get("notifications/tools/list_changed"),
            Some(&"ToolListChangedNotification")
        );
        assert_eq!(schema.results.get("initialize"), Some(&"InitializeResult"));
        assert_eq!(schema.results.get("tools/list"), Some(&"ListToolsResult"));
        assert_eq!(schema.results.get("tools/call"), Some(&"CallToolResult"));
        assert_eq!(schema.results.get("ping"), Some(&"EmptyResult"));
        assert!(schema.task_augmentable.contains("tools/call"));
        assert!(!schema.task_augmentable.contains("tools/list"));
    }

    #[test]
    fn schema_every_mapped_def_compiles() {
        let schema = McpSchema::new();
        let maps = [
            &schema.client_requests,
            &schema.client_notifications,
            &schema.server_requests,
            &schema.server_notifications,
            &schema.results,
        ];
        for def in maps.iter().flat_map(|m| m.values()) {
            let _ = schema.validator(def);
        }
        for def in [
            "JSONRPCMessage",
            "JSONRPCRequest",
            "JSONRPCNotification",
            "JSONRPCResultResponse",
            "JSONRPCErrorResponse",
            "CreateTaskResult",
        ] {
            let _ = schema.validator(def);
        }
    }

    #[test]
    fn schema_initialize_request_passes() {
        let msg = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test-client", "version": "1.0.0"}
            }
        });
        assert_eq!(McpSchema::new().validate_client_message(&msg), Ok(()));
    }

    #[test]
    fn schema_tools_list_request_passes() {
        let msg = json!({"jsonrpc": "2.0", "id": "a-2", "method": "tools/list"});
        assert_eq!(McpSchema::new().validate_client_message(&msg), Ok(()));
    }

    #[test]
    fn schema_tools_call_request_with_arguments_passes() {
        let msg = json!({
            "jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi", "n": 2}}
        });
        assert_eq!(McpSchema::new().validate_client_message(&msg), Ok(()));
    }

    #[test]
    fn schema_initialized_notification_passes() {
        let msg = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(McpSchema::new().validate_client_message(&msg), Ok(()));
    }

    #[test]
    fn schema_initialize_result_passes() {
        let msg = json!({
            "jsonrpc": "2.0", "id": 1,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "test-server", "version": "0.1.0"}
            }
        });
        assert_eq!(
            McpSchema::new().validate_server_message(&msg, Some("initialize")),
            Ok(())
        );
    }

    #[test]
    fn schema_list_tools_result_passes() {
        let msg = json!({
            "jsonrpc": "2.0", "id": 2,
            "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        });
        assert_eq!(
            McpSchema::new().validate_server_message(&msg, Some("tools/list")),
            Ok(())
        );
    }

    #[test]
    fn schema_call_tool_result_with_is_error_passes() {
        let msg = json!({
            "jsonrpc": "2.0", "id": 3,
            "result": {"content": [{"type": "text", "text": "x"}], "isError": true}
        });
        assert_eq!(
            McpSchema::new().validate_server_message(&msg, Some("tools/call")),
            Ok(())
        );
    }

    #[test]
    fn schema_ping_result_passes() {
        let msg = json!({"jsonrpc": "2.0", "id": 4, "result": {}});
        assert_eq!(
            McpSchema::new().validate_server_message(&msg, Some("ping")),
            Ok(())
        );
    }

    #[test]
    fn schema_error_response_without_id_passes() {
        let msg = json!({
            "jsonrpc": "2.0",
            "error": {"code": -32700, "message": "Parse error"}
        });
        let schema = McpSchema::new();
        assert_eq!(schema.validate_server_message(&msg, None), Ok(()));
        assert_eq!(schema.validate_client_message(&msg), Ok(()));
    }

    #[test]
    fn schema_request_with_null_id_fails() {
        let schema = McpSchema::new();
        let known = json!({"jsonrpc": "2.0", "id": null, "method": "tools/list"});
        assert_err_names(schema.validate_client_message(&known), "ListToolsRequest");
        let unknown = json!({"jsonrpc": "2.0", "id": null, "method": "x/unknown"});
        assert_err_names(schema.validate_client_message(&unknown), "JSONRPCRequest");
    }

    #[test]
    fn schema_error_response_with_null_id_fails() {
        let msg = json!({
            "jsonrpc": "2.0", "id": null,
            "error": {"code": -32700, "message": "Parse error"}
        });
        let error = McpSchema::new().validate_server_message(&msg, None);
        assert_err_names(error.clone(), "JSONRPCErrorResponse");
        assert!(error.unwrap_err().ends_with(" at /id"));
    }

    #[test]
    fn schema_call_tool_result_content_without_type_fails() {
        let msg = json!({
            "jsonrpc": "2.0", "id": 3,
            "result": {"content": [{"text": "x"}]}
        });
        let error = McpSchema::new().validate_server_message(&msg, Some("tools/call"));
        assert_err_names(error.clone(), "CallToolResult");
        assert!(error.unwrap_err().ends_with(" at /result/content/0"));
    }

    #[test]
    fn schema_initialize_request_without_protocol_version_fails() {
        let msg = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "capabilities": {},
                "clientInfo": {"name": "test-client", "version": "1.0.0"}
            }
        });
        let error = McpSchema::new().validate_client_message(&msg);
        assert_err_names(error.clone(), "InitializeRequest");
        assert!(error.unwrap_err().contains("protocolVersion"));
    }

    #[test]
    fn schema_memo_gives_the_first_verdict_again_and_stays_bounded() {
        let schema = McpSchema::new();
        let request = |id: usize, version: Option<&str>| {
            let mut params = json!({"capabilities": {}, "clientInfo": {"name": "c", "version": "1"}});
            if let Some(version) = version {
                params["protocolVersion"] = json!(version);
            }
            json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params})
        };
        let bad = request(1, None);
        let first = schema.validate_client_message(&bad);
        assert!(first.is_err());
        assert_eq!(schema.validate_client_message(&bad), first, "a remembered failure passed");
        let good = request(1, Some("2025-11-25"));
        assert_eq!(schema.validate_client_message(&good), Ok(()));
        assert_eq!(schema.validate_client_message(&good), Ok(()));
        for id in 0..=MEMO_CAP {
            assert_eq!(schema.validate_client_message(&request(id, Some("2025-11-25"))), Ok(()));
        }
        assert!(schema.memo.lock().unwrap().len() <= MEMO_CAP);
        assert_eq!(schema.validate_client_message(&bad), first, "a failure forgotten and retold differs");
    }

    #[test]
    fn schema_response_with_result_and_error_fails() {
        let msg = json!({
            "jsonrpc": "2.0", "id": 5,
            "result": {},
            "error": {"code": -32603, "message": "Internal error"}
        });
        let schema = McpSchema::new();
        assert_err_names(
            schema.validate_server_message(&msg, Some("ping")),
            "JSONRPCResponse",
        );
        assert_err_names(schema.validate_client_message(&msg), "JSONRPCResponse");
    }

    #[test]
    fn schema_request_method_without_id_fails() {
        let msg = json!({"jsonrpc": "2.0", "method": "tools/list"});
        assert_err_names(
            McpSchema::new().validate_client_message(&msg),
            "ListToolsRequest",
        );
    }

    #[test]
    fn schema_task_augmented_call_tool_result_passes() {
        let msg = json!({
            "jsonrpc": "2.0", "id": 6,
            "result": {"task": {
                "taskId": "t1", "status": "working", "ttl": null,
                "createdAt": "2025-11-25T00:00:00Z", "lastUpdatedAt": "2025-11-25T00:00:00Z"
            }}
        });
        assert_eq!(
            McpSchema::new().validate_server_message(&msg, Some("tools/call")),
            Ok(())
        );
    }
}
