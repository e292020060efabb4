//! The application layer's MCP decisions, runtime-free: what a server answers itself
//! (`initialize`, `ping`), how a tool table serves `tools/list` and `tools/call`, the
//! shape of progress and of a handler's answer, and how a client's response to a
//! server→client request reads.
//!
//! Both adapters' `app` modules (an async function per request on tokio, a handler
//! thread on the blocking adapter) are built on this module, so an application answers
//! the same wherever it runs and the adapters hold no MCP method names: they schedule
//! handlers and carry their answers. [`Dispatcher`] is the state they share: the calls
//! in flight, their cancellation (early cancels included), their server→client
//! requests, the open `subscriptions/listen` streams, and what to do with each event.
//!
//! On the sessionless revision (2026-07-28) the layer also answers `server/discover`
//! (MODERN-14, MODERN-19) and `subscriptions/listen` (MODERN-13) itself, completes every
//! result ([`Responder::complete`]: `resultType`, `serverInfo`, caching hints), gates
//! log messages by the request's `logLevel` (MODERN-21), and seals the `requestState`
//! of multi round-trip answers with an HMAC ([`StateKey`], MODERN-23), so a handler
//! writes the same answer in every era. Not a full SDK: no resources, prompts or schema
//! validation beyond deserializing a tool's arguments.

use serde_json::{Value, json};

use crate::jsonrpc::{ErrorCode, Message};
use crate::server::IncomingRequest;

mod dispatcher;
mod listen;
mod modern;
mod state;

pub use dispatcher::{
    Act, Ask, CallInfo, Cancel, Describe, Dispatcher, Limits, Reply, Settings, Start, Step,
};
pub use listen::{ACKNOWLEDGED, Change};
pub use modern::{
    CLIENT_CAPABILITIES, CacheHint, CacheScope, LOG_LEVEL, LogLevel, Responder, SERVER_INFO,
    SUBSCRIPTION_ID, elicitation_request, input_required, may_ask_input, roots_request,
    sampling_request,
};
pub use state::{MAX_SEALED_STATE, StateError, StateKey};

/// A JSON-RPC error answer, from a handler or from a client.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// The code.
    pub code: ErrorCode,
    /// The message.
    pub message: String,
    /// `error.data`, if any.
    pub data: Option<Value>,
}

impl CallError {
    /// An error of this code and message, without data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with `data`.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32602: the params do not fit the method.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::INVALID_PARAMS, message)
    }

    /// -32601: no such method (or tool).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::METHOD_NOT_FOUND, message)
    }

    /// -32603: the server failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::INTERNAL_ERROR, message)
    }

    /// -32021 (MODERN-20): the request needs client capabilities its `_meta` does not
    /// declare; `required` is a `ClientCapabilities` object (`{"sampling": {}}`). The
    /// 2026-07-28 revision answers it with 400.
    pub fn missing_capability(required: Value) -> Self {
        Self::new(
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "the request needs a client capability it did not declare",
        )
        .with_data(json!({ "requiredCapabilities": required }))
    }

    /// -32603 "the server is busy; try again": a call the server has no room for now.
    pub fn busy() -> Self {
        Self::internal("the server is busy; try again")
    }
}

/// The method of a progress notification.
pub const PROGRESS: &str = "notifications/progress";

/// `serverInfo` when the application names none: this library and its version.
pub fn default_server_info() -> Value {
    json!({"name": "mcpwire", "version": env!("CARGO_PKG_VERSION")})
}

/// The answer to a request the layer answers itself, before any handler: the
/// `InitializeResult` of `initialize` (the negotiated revision, `capabilities()`,
/// `server_info()`), or the empty result of `ping`. `None` for anything else.
pub fn builtin_answer(
    request: &IncomingRequest,
    capabilities: impl FnOnce() -> Value,
    server_info: impl FnOnce() -> Value,
) -> Option<Value> {
    match request.method() {
        "initialize" => Some(json!({
            "protocolVersion": request.version().as_str(),
            "capabilities": capabilities(),
            "serverInfo": server_info(),
        })),
        "ping" => Some(json!({})),
        _ => None,
    }
}

/// `params._meta.progressToken` of a request, if the client asked for progress.
pub fn progress_token(params: Option<&Value>) -> Option<&Value> {
    params?.get("_meta")?.get("progressToken")
}

/// The params of a [`PROGRESS`] notification for `token`.
pub fn progress_params(token: Value, progress: f64, total: Option<f64>) -> Value {
    let mut params = json!({"progressToken": token, "progress": progress});
    if let Some(total) = total {
        params["total"] = json!(total);
    }
    params
}

/// A `CallToolResult` with one text item.
pub fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// A client's response to a server→client request: its `result`, or its error.
///
/// # Errors
/// The client's error response; -32603 when `message` is no response or its result is
/// not JSON.
pub fn client_answer(message: &Message<'_>) -> Result<Value, CallError> {
    match message {
        Message::Response(r) => {
            serde_json::from_str(r.result.as_str()).map_err(|e| CallError::internal(e.to_string()))
        }
        Message::Error(e) => Err(CallError {
            code: e.error.code,
            message: e.error.message.to_string(),
            data: e
                .error
                .data
                .as_ref()
                .and_then(|d| serde_json::from_str(d.as_str()).ok()),
        }),
        _ => Err(CallError::internal("not a response")),
    }
}

/// Deserializes a tool's `arguments` as `A`.
///
/// # Errors
/// -32602 with serde's message when they do not fit.
pub fn tool_arguments<A: serde::de::DeserializeOwned>(arguments: Value) -> Result<A, CallError> {
    serde_json::from_value(arguments).map_err(|e| CallError::invalid_params(e.to_string()))
}

/// One tool of a [`ToolTable`].
#[derive(Debug)]
struct Tool<F> {
    name: String,
    description: String,
    input_schema: Value,
    run: F,
}

/// A tool table: serves `tools/list` and routes `tools/call` to the tool it names. `F`
/// is how an adapter runs a tool (a boxed function, sync or async).
#[derive(Debug)]
pub struct ToolTable<F> {
    info: Option<Value>,
    tools: Vec<Tool<F>>,
    cache: CacheHint,
}

impl<F> Default for ToolTable<F> {
    fn default() -> Self {
        Self {
            info: None,
            tools: Vec::new(),
            cache: CacheHint::NONE,
        }
    }
}

/// Where [`ToolTable::route`] sends a request.
#[derive(Debug)]
pub enum Route<'a, F> {
    /// The table answers it: the tool list, or an error (no such tool or method).
    Answer(Result<Value, CallError>),
    /// Run this tool with these `arguments` (`{}` when the call gave none).
    Run(&'a F, Value),
}

impl<F> ToolTable<F> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `serverInfo` (`{"name": …, "version": …}`).
    pub fn set_server_info(&mut self, name: &str, version: &str) {
        self.info = Some(json!({"name": name, "version": version}));
    }

    /// Adds a tool.
    ///
    /// # Panics
    /// When its `inputSchema` marks parameters with invalid `x-mcp-header` annotations
    /// (MODERN-7): clients drop such a tool, and the server could not check its calls'
    /// `Mcp-Param-*` headers. A schema is the program's own, so this is a bug to fix.
    pub fn push(&mut self, name: &str, description: &str, input_schema: Value, run: F) {
        if let Err(e) = crate::mirror::Mirrors::from_input_schema(&input_schema) {
            panic!("tool {name:?}: invalid x-mcp-header annotations in its inputSchema: {e}");
        }
        self.tools.push(Tool {
            name: name.into(),
            description: description.into(),
            input_schema,
            run,
        });
    }

    /// Sets the caching hint of `tools/list` (MODERN-22; by default
    /// [`CacheHint::NONE`]).
    pub fn set_cache_hint(&mut self, hint: CacheHint) {
        self.cache = hint;
    }

    /// The caching hint of `method`'s results: the table's for `tools/list`, else
    /// [`CacheHint::NONE`].
    pub fn cache_hint(&self, method: &str) -> CacheHint {
        if method == "tools/list" {
            self.cache
        } else {
            CacheHint::NONE
        }
    }

    /// What the tools mirror into `Mcp-Param-*` headers, for the core to check
    /// ([`Config::with_tool_mirrors`](crate::server::Config::with_tool_mirrors),
    /// MODERN-7).
    pub fn mirrors(&self) -> crate::mirror::ToolMirrors {
        crate::mirror::ToolMirrors::from_schemas(
            self.tools
                .iter()
                .map(|t| (t.name.as_str(), &t.input_schema)),
        )
        .expect("every schema was checked when its tool was added")
    }

    /// The tools' names, in the order they were added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.name.as_str())
    }

    /// `serverInfo`: the one set, else [`default_server_info`].
    pub fn server_info(&self) -> Value {
        self.info.clone().unwrap_or_else(default_server_info)
    }

    /// `capabilities`: tools.
    pub fn capabilities(&self) -> Value {
        json!({"tools": {}})
    }

    /// Routes a request: `tools/list` is answered with the table, `tools/call` goes to
    /// the tool named by `params.name` (-32602 if there is none), any other method is
    /// -32601.
    pub fn route(&self, method: &str, params: Option<&Value>) -> Route<'_, F> {
        match method {
            "tools/list" => {
                let tools: Vec<Value> = self
                    .tools
                    .iter()
                    .map(|t| {
                        json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema})
                    })
                    .collect();
                Route::Answer(Ok(json!({"tools": tools})))
            }
            "tools/call" => {
                let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
                let Some(tool) = self.tools.iter().find(|t| Some(t.name.as_str()) == name) else {
                    let message = match name {
                        Some(name) => format!("no tool named {name:?}"),
                        None => "tools/call needs the tool's name in params.name".into(),
                    };
                    return Route::Answer(Err(CallError::invalid_params(message)));
                };
                let arguments = params
                    .and_then(|p| p.get("arguments"))
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                Route::Run(&tool.run, arguments)
            }
            other => Route::Answer(Err(CallError::not_found(format!(
                "method {other:?} not found"
            )))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> ToolTable<&'static str> {
        let mut table = ToolTable::new();
        table.push("echo", "Echoes.", json!({"type": "object"}), "echo's run");
        table
    }

    fn answer_of(route: Route<'_, &str>) -> Result<Value, CallError> {
        match route {
            Route::Answer(answer) => answer,
            Route::Run(run, _) => panic!("routed to {run}"),
        }
    }

    #[test]
    fn modern_7_a_tables_mirrors_are_its_tools_annotations() {
        let mut table = table();
        assert!(table.mirrors().is_empty());
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}});
        table.push("deploy", "", schema, "deploy's run");
        let mirrors = table.mirrors();
        assert_eq!(mirrors.len(), 1);
        assert!(mirrors.get("deploy").is_some());
    }

    #[test]
    #[should_panic(expected = "invalid x-mcp-header")]
    fn modern_7_a_tool_with_invalid_annotations_is_refused() {
        let schema = json!({"type": "object", "properties": {
            "deep": {"type": "object", "x-mcp-header": "Deep"}}});
        table().push("bad", "", schema, "run");
    }

    #[test]
    fn tools_list_lists_every_tool_with_its_schema() {
        let list = answer_of(table().route("tools/list", None)).unwrap();
        assert_eq!(
            list,
            json!({"tools": [{"name": "echo", "description": "Echoes.", "inputSchema": {"type": "object"}}]})
        );
    }

    #[test]
    fn tools_call_routes_by_name_with_the_arguments_or_an_empty_object() {
        let table = table();
        let params = json!({"name": "echo", "arguments": {"text": "hi"}});
        let Route::Run(run, arguments) = table.route("tools/call", Some(&params)) else {
            panic!("not routed to the tool");
        };
        assert_eq!((*run, arguments), ("echo's run", json!({"text": "hi"})));
        let params = json!({"name": "echo"});
        let Route::Run(_, arguments) = table.route("tools/call", Some(&params)) else {
            panic!("not routed to the tool");
        };
        assert_eq!(arguments, json!({}));
    }

    #[test]
    fn an_unknown_tool_or_method_is_an_error_naming_it() {
        let table = table();
        let params = json!({"name": "nope"});
        let e = answer_of(table.route("tools/call", Some(&params))).unwrap_err();
        assert_eq!(e, CallError::invalid_params("no tool named \"nope\""));
        let e = answer_of(table.route("tools/call", None)).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        let e = answer_of(table.route("resources/list", None)).unwrap_err();
        assert_eq!(
            e,
            CallError::not_found("method \"resources/list\" not found")
        );
    }

    #[test]
    fn progress_reads_the_token_and_builds_the_params() {
        let params = json!({"_meta": {"progressToken": 7}});
        assert_eq!(progress_token(Some(&params)), Some(&json!(7)));
        assert_eq!(progress_token(Some(&json!({}))), None);
        assert_eq!(progress_token(None), None);
        assert_eq!(
            progress_params(json!(7), 1.0, Some(3.0)),
            json!({"progressToken": 7, "progress": 1.0, "total": 3.0})
        );
        assert_eq!(
            progress_params(json!("t"), 2.0, None),
            json!({"progressToken": "t", "progress": 2.0})
        );
    }

    #[test]
    fn a_client_answer_is_its_result_or_its_error() {
        use crate::jsonrpc::classify;
        let ok = classify(br#"{"jsonrpc":"2.0","id":1,"result":{"a":1}}"#).unwrap();
        assert_eq!(client_answer(&ok), Ok(json!({"a": 1})));
        let err = classify(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}"#);
        let expected = CallError::new(ErrorCode(-1), "no");
        assert_eq!(client_answer(&err.unwrap()), Err(expected));
        let note = classify(br#"{"jsonrpc":"2.0","method":"x"}"#).unwrap();
        let e = client_answer(&note).unwrap_err();
        assert_eq!(e.code, ErrorCode::INTERNAL_ERROR);
    }

    #[test]
    fn tool_arguments_that_do_not_fit_are_invalid_params() {
        type Strings = std::collections::HashMap<String, String>;
        let fits = tool_arguments::<Strings>(json!({"text": "hi"})).unwrap();
        assert_eq!(fits["text"], "hi");
        let e = tool_arguments::<Strings>(json!({"text": 1})).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert!(e.message.contains("invalid type"), "{}", e.message);
    }
}
