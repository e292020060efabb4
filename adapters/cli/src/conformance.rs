//! `mcpwire serve --conformance`: the fixture the MCP conformance suite's server scenarios
//! call (after its reference `everything-server`), on either adapter: tools with each
//! content kind, logging and progress during a call, static and templated resources,
//! prompts, `completion/complete`; for the session era `logging/setLevel`,
//! `resources/subscribe` and tools that ask the client for sampling and elicitation
//! (server-to-client requests); for 2026-07-28 the tools of multi round-trip requests
//! (`input_required` with a sealed `requestState`), a tool that needs a client
//! capability, a log tool gated by `logLevel`, triggers of list-changed notifications
//! for `subscriptions/listen`, and a tool with an `x-mcp-header` parameter.
//!
//! The fixture is written once, as synchronous code over [`Ctx`]: the blocking adapter
//! runs it on its handler threads, the tokio adapter on its blocking pool.

use std::sync::Arc;
use std::time::Duration;

use mcpwire::app::{
    CallError, Change, elicitation_request, input_required, roots_request, sampling_request,
    text_result,
};
use serde_json::{Value, json};

/// A 1x1 red PNG.
const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// What the fixture needs of a call, whichever adapter runs it.
pub(crate) trait Ctx {
    /// The method.
    fn method(&self) -> &str;
    /// The params.
    fn params(&self) -> Option<&Value>;
    /// `params._meta.progressToken`.
    fn progress_token(&self) -> Option<&Value>;
    /// A notification on the request's stream (errors ignored, as the reference does).
    fn notify(&self, method: &str, params: Value);
    /// A server→client request, waited for.
    fn request(&self, method: &str, params: Value) -> Result<Value, CallError>;
    /// The client's capabilities of a 2026-07-28 request (`None` in the session era).
    fn client_capabilities(&self) -> Option<&Value>;
    /// `params.inputResponses`.
    fn input_responses(&self) -> Option<&Value>;
    /// The opened `requestState`.
    fn request_state(&self) -> Option<&str>;
    /// Announces a change to the listening clients.
    fn changed(&self, change: &Change);
}

/// The fixture.
#[derive(Debug, Default)]
pub(crate) struct Conformance;

fn empty() -> Value {
    json!({"type": "object", "properties": {}})
}

/// The JSON Schema 2020-12 features SEP-1613 and SEP-2106 look for.
fn schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    })
}

/// Every tool's name and input schema, for the core to check the `Mcp-Param-*` headers
/// of a call of `test_x_mcp_header` (MODERN-7, `Config::with_tool_mirrors`).
pub(crate) fn tool_schemas() -> Vec<(&'static str, Value)> {
    tool_list()
        .into_iter()
        .map(|(name, _, schema)| (name, schema))
        .collect()
}

/// Every tool: name, description, input schema. `test_simple_text` comes first: a
/// header-validation scenario calls the first tool with no arguments.
fn tool_list() -> Vec<(&'static str, &'static str, Value)> {
    let prompt = json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]});
    let message = json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]});
    let mirrored = json!({"type": "object", "properties": {
        "value": {"type": "string", "x-mcp-header": "Value"}}, "required": ["value"]});
    vec![
        (
            "test_simple_text",
            "Tests simple text content response",
            empty(),
        ),
        (
            "test_image_content",
            "Tests image content response",
            empty(),
        ),
        (
            "test_audio_content",
            "Tests audio content response",
            empty(),
        ),
        (
            "test_embedded_resource",
            "Tests embedded resource content response",
            empty(),
        ),
        (
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            empty(),
        ),
        (
            "test_error_handling",
            "Tests error response handling",
            empty(),
        ),
        (
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
            empty(),
        ),
        (
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
            empty(),
        ),
        (
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            schema_2020_12(),
        ),
        (
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            prompt,
        ),
        (
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            message,
        ),
        (
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
            empty(),
        ),
        (
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
            empty(),
        ),
        (
            "test_missing_capability",
            "Needs the client's sampling capability (-32021 without it)",
            empty(),
        ),
        (
            "test_streaming_elicitation",
            "Asks the user through an input_required result",
            empty(),
        ),
        (
            "test_logging_tool",
            "Logs at every level, as the request's logLevel allows",
            empty(),
        ),
        (
            "test_trigger_tool_change",
            "Announces a tools list change to listening clients",
            empty(),
        ),
        (
            "test_trigger_prompt_change",
            "Announces a prompts list change to listening clients",
            empty(),
        ),
        (
            "test_input_required_result_elicitation",
            "Asks the user's name (input_required, elicitation)",
            empty(),
        ),
        (
            "test_input_required_result_sampling",
            "Asks for a completion (input_required, sampling)",
            empty(),
        ),
        (
            "test_input_required_result_list_roots",
            "Asks for the client's roots (input_required, roots)",
            empty(),
        ),
        (
            "test_input_required_result_request_state",
            "Asks a confirmation, with a requestState",
            empty(),
        ),
        (
            "test_input_required_result_multiple_inputs",
            "Asks three questions at once",
            empty(),
        ),
        (
            "test_input_required_result_multi_round",
            "Asks in two rounds, each with its own state",
            empty(),
        ),
        (
            "test_input_required_result_tampered_state",
            "Refuses a requestState it did not hand out",
            empty(),
        ),
        (
            "test_input_required_result_capabilities",
            "Asks only what the client declared it can answer",
            empty(),
        ),
        (
            "test_x_mcp_header",
            "Echoes a parameter mirrored in the Mcp-Param-Value header",
            mirrored,
        ),
    ]
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn arg(params: Option<&Value>, name: &str) -> String {
    params
        .and_then(|p| p.get("arguments"))
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn resource(uri: &str, name: &str, title: &str, description: &str, mime: &str) -> Value {
    json!({"uri": uri, "name": name, "title": title, "description": description, "mimeType": mime})
}

/// The answer under `key` of a retried request, if it is an object (an `ElicitResult`,
/// a `CreateMessageResult`, a `ListRootsResult`).
///
/// # Errors
/// -32602 when `inputResponses` is not an object, or the answer under `key` is present
/// but not an object: malformed answers are errors, missing ones are asked again.
fn answer<'a>(ctx: &'a dyn Ctx, key: &str) -> Result<Option<&'a Value>, CallError> {
    let Some(responses) = ctx.input_responses() else {
        return Ok(None);
    };
    let Some(responses) = responses.as_object() else {
        return Err(CallError::invalid_params(
            "inputResponses must be an object",
        ));
    };
    match responses.get(key) {
        None => Ok(None),
        Some(v) if v.is_object() => Ok(Some(v)),
        Some(_) => Err(CallError::invalid_params(format!(
            "inputResponses.{key} must be an object"
        ))),
    }
}

/// An accepted elicitation's `content`.
fn accepted(answer: &Value) -> Option<&Value> {
    (answer.get("action").and_then(Value::as_str) == Some("accept"))
        .then(|| answer.get("content"))
        .flatten()
}

fn confirm() -> Value {
    elicitation_request(
        "Please confirm",
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
    )
}

fn ask_name(key: &str) -> Value {
    elicitation_request(
        "What is your name?",
        json!({"type": "object", "properties": {key: {"type": "string"}}, "required": [key]}),
    )
}

fn capital_question(max_tokens: u32) -> Value {
    sampling_request(
        json!([user(
            json!({"type": "text", "text": "What is the capital of France?"})
        )]),
        max_tokens,
    )
}

impl Conformance {
    /// The capabilities the fixture declares, in both eras.
    pub(crate) fn capabilities() -> Value {
        json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
        })
    }

    /// `serverInfo`.
    pub(crate) fn server_info() -> Value {
        json!({"name": "mcp-conformance-test-server", "version": "1.0.0"})
    }

    /// Answers one request.
    pub(crate) fn answer(&self, ctx: &dyn Ctx) -> Result<Value, CallError> {
        let params = ctx.params();
        let name = params
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        match ctx.method() {
            "tools/list" => {
                let tools: Vec<Value> = tool_list()
                    .into_iter()
                    .map(|(name, description, schema)| {
                        json!({"name": name, "description": description, "inputSchema": schema})
                    })
                    .collect();
                Ok(json!({"tools": tools}))
            }
            "tools/call" => self.tool(ctx, name),
            "resources/list" => Ok(json!({"resources": [
                resource("test://static-text", "static-text", "Static Text Resource", "A static text resource for testing", "text/plain"),
                resource("test://static-binary", "static-binary", "Static Binary Resource", "A static binary resource (image) for testing", "image/png"),
                resource("test://watched-resource", "watched-resource", "Watched Resource", "A resource that auto-updates every 3 seconds", "text/plain"),
            ]})),
            "resources/templates/list" => Ok(json!({"resourceTemplates": [{
                "uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template",
                "description": "A resource template with parameter substitution", "mimeType": "application/json",
            }]})),
            "resources/read" => read(params),
            "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel" => Ok(json!({})),
            "completion/complete" => {
                Ok(json!({"completion": {"values": [], "total": 0, "hasMore": false}}))
            }
            "prompts/list" => Ok(json!({"prompts": [
                {"name": "test_simple_prompt", "title": "Simple Test Prompt", "description": "A simple prompt without arguments"},
                {"name": "test_prompt_with_arguments", "title": "Prompt With Arguments", "description": "A prompt with required arguments", "arguments": [
                    {"name": "arg1", "description": "First test argument", "required": true},
                    {"name": "arg2", "description": "Second test argument", "required": true}]},
                {"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource", "description": "A prompt that includes an embedded resource", "arguments": [
                    {"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]},
                {"name": "test_prompt_with_image", "title": "Prompt With Image", "description": "A prompt that includes image content"},
                {"name": "test_input_required_result_prompt", "title": "Prompt With Input", "description": "A prompt that asks the user for context first"},
            ]})),
            "prompts/get" => prompt(ctx, name),
            other => Err(CallError::not_found(format!("method {other:?} not found"))),
        }
    }

    fn tool(&self, ctx: &dyn Ctx, name: &str) -> Result<Value, CallError> {
        let params = ctx.params();
        let pause = || std::thread::sleep(Duration::from_millis(50));
        Ok(match name {
            "test_simple_text" => text_result("This is a simple text response for testing."),
            "test_image_content" => {
                json!({"content": [{"type": "image", "data": IMAGE, "mimeType": "image/png"}]})
            }
            "test_audio_content" => {
                json!({"content": [{"type": "audio", "data": AUDIO, "mimeType": "audio/wav"}]})
            }
            "test_embedded_resource" => json!({"content": [{"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain",
                "text": "This is an embedded resource content."}}]}),
            "test_multiple_content_types" => json!({"content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": IMAGE, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}
            ]}),
            "test_error_handling" => json!({"content": [{"type": "text",
                "text": "This tool intentionally returns an error for testing"}], "isError": true}),
            "test_tool_with_logging" => {
                for (i, data) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .iter()
                .enumerate()
                {
                    if i > 0 {
                        pause();
                    }
                    ctx.notify(
                        "notifications/message",
                        json!({"level": "info", "data": data}),
                    );
                }
                text_result("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => {
                let token = ctx.progress_token().cloned().unwrap_or(json!(0));
                for (i, step) in [0, 50, 100].into_iter().enumerate() {
                    if i > 0 {
                        pause();
                    }
                    ctx.notify(
                        "notifications/progress",
                        json!({"progressToken": token, "progress": step, "total": 100,
                               "message": format!("Completed step {step} of 100")}),
                    );
                }
                text_result(
                    &token
                        .as_str()
                        .map_or_else(|| token.to_string(), str::to_owned),
                )
            }
            "json_schema_2020_12_tool" => {
                let args = params.and_then(|p| p.get("arguments")).cloned();
                let args = args.unwrap_or_else(|| json!({}));
                text_result(&format!("JSON Schema 2020-12 tool called with: {args}"))
            }
            "test_sampling" => {
                let prompt = arg(params, "prompt");
                let asked = ctx.request(
                    "sampling/createMessage",
                    json!({"messages": [user(json!({"type": "text", "text": prompt}))], "maxTokens": 100}),
                );
                text_result(&match asked {
                    Ok(r) => {
                        let reply = r
                            .pointer("/content/text")
                            .or_else(|| r.pointer("/message/content/text"))
                            .and_then(Value::as_str)
                            .unwrap_or("No response");
                        format!("LLM response: {reply}")
                    }
                    Err(e) => format!("Sampling not supported or error: {}", e.message),
                })
            }
            "test_elicitation" => elicit(
                ctx,
                "User response",
                json!({
                    "message": arg(params, "message"),
                    "requestedSchema": {"type": "object", "properties": {"response": {"type": "string", "description": "User's response"}}, "required": ["response"]},
                }),
            ),
            "test_elicitation_sep1034_defaults" => elicit(
                ctx,
                "Elicitation completed",
                json!({
                    "message": "Please review and update the form fields with defaults",
                    "requestedSchema": {"type": "object", "properties": {
                        "name": {"type": "string", "description": "User name", "default": "John Doe"},
                        "age": {"type": "integer", "description": "User age", "default": 30},
                        "score": {"type": "number", "description": "User score", "default": 95.5},
                        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "description": "Verification status", "default": true},
                    }, "required": []},
                }),
            ),
            "test_elicitation_sep1330_enums" => elicit(
                ctx,
                "Elicitation completed",
                json!({
                    "message": "Please select options from the enum fields",
                    "requestedSchema": {"type": "object", "properties": {
                        "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                            {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
                        "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}},
                    }, "required": []},
                }),
            ),
            "test_missing_capability" => {
                require(ctx, "sampling")?;
                text_result("The client can sample.")
            }
            "test_streaming_elicitation" => match answer(ctx, "user_name")?.and_then(accepted) {
                Some(content) => text_result(&format!(
                    "Hello, {}!",
                    content.get("name").and_then(Value::as_str).unwrap_or("you")
                )),
                None => input_required(json!({"user_name": ask_name("name")}), None),
            },
            "test_logging_tool" => {
                for level in ["debug", "info", "warning", "error"] {
                    ctx.notify(
                        "notifications/message",
                        json!({"level": level, "logger": "conformance", "data": format!("a {level} message")}),
                    );
                }
                text_result("Logged at every level the request allows.")
            }
            "test_trigger_tool_change" => {
                ctx.changed(&Change::Tools);
                text_result("The tools list changed.")
            }
            "test_trigger_prompt_change" => {
                ctx.changed(&Change::Prompts);
                text_result("The prompts list changed.")
            }
            "test_x_mcp_header" => text_result(&arg(params, "value")),
            round_trip => return self.round_trip(ctx, round_trip),
        })
    }

    /// The multi round-trip tools (MODERN-23).
    fn round_trip(&self, ctx: &dyn Ctx, name: &str) -> Result<Value, CallError> {
        let state = ctx.request_state();
        match name {
            "test_input_required_result_elicitation" => {
                require(ctx, "elicitation")?;
                let name = answer(ctx, "user_name")?
                    .and_then(accepted)
                    .and_then(|c| c.get("name")?.as_str());
                Ok(match name {
                    Some(name) => text_result(&format!("Hello, {name}!")),
                    None => input_required(json!({"user_name": ask_name("name")}), None),
                })
            }
            "test_input_required_result_sampling" => Ok(match answer(ctx, "capital_question")? {
                Some(reply) => {
                    let text = reply
                        .pointer("/content/text")
                        .and_then(Value::as_str)
                        .unwrap_or("No response");
                    text_result(&format!("LLM response: {text}"))
                }
                None => input_required(json!({"capital_question": capital_question(100)}), None),
            }),
            "test_input_required_result_list_roots" => {
                let roots = answer(ctx, "client_roots")?.and_then(|r| r.get("roots")?.as_array());
                Ok(match roots {
                    Some(roots) => text_result(&format!("Found {} root(s)", roots.len())),
                    None => input_required(json!({"client_roots": roots_request()}), None),
                })
            }
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => {
                let confirmed = answer(ctx, "confirm")?.and_then(accepted).is_some();
                Ok(if confirmed && state == Some(name) {
                    text_result("state-ok: the state came back as it was handed out")
                } else {
                    input_required(json!({"confirm": confirm()}), Some(name))
                })
            }
            "test_input_required_result_multiple_inputs" => {
                let all = ["user_name", "greeting", "client_roots"];
                let mut answered = 0;
                for key in all {
                    answered += usize::from(answer(ctx, key)?.is_some());
                }
                Ok(if answered == all.len() && state == Some("multiple") {
                    text_result("All three answers arrived.")
                } else {
                    input_required(
                        json!({"user_name": ask_name("name"), "greeting": capital_question(50), "client_roots": roots_request()}),
                        Some("multiple"),
                    )
                })
            }
            "test_input_required_result_multi_round" => {
                let step1 = || input_required(json!({"step1": ask_name("name")}), Some("round=1"));
                Ok(match state {
                    Some("round=1") => match answer(ctx, "step1")?.and_then(accepted) {
                        Some(content) => {
                            let who = content.get("name").and_then(Value::as_str).unwrap_or("you");
                            let color = elicitation_request(
                                "What is your favourite colour?",
                                json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}),
                            );
                            input_required(
                                json!({"step2": color}),
                                Some(&format!("round=2;name={who}")),
                            )
                        }
                        None => step1(),
                    },
                    Some(s) if s.starts_with("round=2;name=") => {
                        match answer(ctx, "step2")?.and_then(accepted) {
                            Some(_) => {
                                text_result(&format!("Done, {}.", &s["round=2;name=".len()..]))
                            }
                            None => step1(),
                        }
                    }
                    _ => step1(),
                })
            }
            "test_input_required_result_capabilities" => {
                if ctx.input_responses().is_some() {
                    return Ok(text_result("Thanks for the answers."));
                }
                let mut asked = serde_json::Map::new();
                if supports(ctx, "elicitation") {
                    asked.insert("user_name".into(), ask_name("name"));
                }
                if supports(ctx, "sampling") {
                    asked.insert("capital_question".into(), capital_question(100));
                }
                if supports(ctx, "roots") {
                    asked.insert("client_roots".into(), roots_request());
                }
                Ok(if asked.is_empty() {
                    text_result("The client can answer nothing: nothing asked.")
                } else {
                    input_required(Value::Object(asked), Some("capabilities"))
                })
            }
            other => Err(CallError::invalid_params(format!(
                "no tool named {other:?}"
            ))),
        }
    }
}

/// Whether a 2026-07-28 client declared `capability`; the session era's client is
/// taken at its word (its capabilities came with `initialize`).
fn supports(ctx: &dyn Ctx, capability: &str) -> bool {
    ctx.client_capabilities()
        .is_none_or(|c| c.get(capability).is_some_and(|v| !v.is_null()))
}

/// -32021 unless the client declared `capability` (MODERN-20).
fn require(ctx: &dyn Ctx, capability: &str) -> Result<(), CallError> {
    if supports(ctx, capability) {
        Ok(())
    } else {
        Err(CallError::missing_capability(json!({capability: {}})))
    }
}

/// Sends `elicitation/create` and reports the client's answer as the reference does.
fn elicit(ctx: &dyn Ctx, label: &str, params: Value) -> Value {
    let text = match ctx.request("elicitation/create", params) {
        Ok(r) => format!(
            "{label}: action={}, content={}",
            r.get("action").and_then(Value::as_str).unwrap_or_default(),
            r.get("content").cloned().unwrap_or_else(|| json!({}))
        ),
        Err(e) => format!("Elicitation not supported or error: {}", e.message),
    };
    text_result(&text)
}

fn read(params: Option<&Value>) -> Result<Value, CallError> {
    let uri = params
        .and_then(|p| p.get("uri"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    match uri {
        "test://static-text" => Ok(
            json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}]}),
        ),
        "test://static-binary" => {
            Ok(json!({"contents": [{"uri": uri, "mimeType": "image/png", "blob": IMAGE}]}))
        }
        "test://watched-resource" => Ok(
            json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"}]}),
        ),
        other => {
            match other
                .strip_prefix("test://template/")
                .and_then(|r| r.strip_suffix("/data"))
            {
                Some(id) if !id.is_empty() && !id.contains('/') => {
                    let text = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string();
                    Ok(
                        json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}),
                    )
                }
                // SEP-2164: -32602 naming the resource (never an empty `contents`).
                _ => Err(
                    CallError::invalid_params(format!("Resource {other} not found"))
                        .with_data(json!({"uri": other})),
                ),
            }
        }
    }
}

fn prompt(ctx: &dyn Ctx, name: &str) -> Result<Value, CallError> {
    let p = ctx.params();
    match name {
        "test_simple_prompt" => Ok(
            json!({"messages": [user(json!({"type": "text", "text": "This is a simple prompt for testing."}))]}),
        ),
        "test_prompt_with_arguments" => {
            let text = format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg(p, "arg1"),
                arg(p, "arg2")
            );
            Ok(json!({"messages": [user(json!({"type": "text", "text": text}))]}))
        }
        "test_prompt_with_embedded_resource" => Ok(json!({"messages": [
            user(json!({"type": "resource", "resource": {"uri": arg(p, "resourceUri"), "mimeType": "text/plain", "text": "Embedded resource content for testing."}})),
            user(json!({"type": "text", "text": "Please process the embedded resource above."})),
        ]})),
        "test_prompt_with_image" => Ok(json!({"messages": [
            user(json!({"type": "image", "data": IMAGE, "mimeType": "image/png"})),
            user(json!({"type": "text", "text": "Please analyze the image above."})),
        ]})),
        "test_input_required_result_prompt" => {
            let context = answer(ctx, "user_context")?
                .and_then(accepted)
                .and_then(|c| c.get("context")?.as_str());
            Ok(match context {
                Some(context) => {
                    json!({"messages": [user(json!({"type": "text", "text": format!("Prompt with context: {context}")}))]})
                }
                None => input_required(
                    json!({"user_context": elicitation_request(
                        "What context should the prompt use?",
                        json!({"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}),
                    )}),
                    None,
                ),
            })
        }
        other => Err(CallError::invalid_params(format!(
            "Prompt {other} not found"
        ))),
    }
}

/// The fixture on the tokio adapter: run on the blocking pool, a server→client request
/// waited for on the runtime.
pub(crate) mod on_tokio {
    use super::{Arc, Conformance, Ctx, Value};
    use mcpwire::app::{CacheHint, CallError, Change};
    use mcpwire_tokio::app::{BoxFuture, Call, Handler};

    struct Tokio {
        call: Call,
        runtime: tokio::runtime::Handle,
    }

    impl Ctx for Tokio {
        fn method(&self) -> &str {
            self.call.method()
        }
        fn params(&self) -> Option<&Value> {
            self.call.params()
        }
        fn progress_token(&self) -> Option<&Value> {
            self.call.progress_token()
        }
        fn notify(&self, method: &str, params: Value) {
            let _ = self.call.notify(method, params);
        }
        fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
            self.runtime.block_on(self.call.request(method, params))
        }
        fn client_capabilities(&self) -> Option<&Value> {
            self.call.client_capabilities()
        }
        fn input_responses(&self) -> Option<&Value> {
            self.call.input_responses()
        }
        fn request_state(&self) -> Option<&str> {
            self.call.request_state()
        }
        fn changed(&self, change: &Change) {
            self.call.changed(change);
        }
    }

    /// The fixture as a tokio [`Handler`].
    pub(crate) struct Fixture(pub(crate) Arc<Conformance>);

    impl Handler for Fixture {
        fn server_info(&self) -> Value {
            Conformance::server_info()
        }

        fn capabilities(&self) -> Value {
            Conformance::capabilities()
        }

        fn cache_hint(&self, _method: &str) -> CacheHint {
            CacheHint::NONE
        }

        fn call(&self, call: Call) -> BoxFuture<Result<Value, CallError>> {
            let fixture = Arc::clone(&self.0);
            let runtime = tokio::runtime::Handle::current();
            Box::pin(async move {
                let ctx = Tokio { call, runtime };
                tokio::task::spawn_blocking(move || fixture.answer(&ctx))
                    .await
                    .unwrap_or_else(|_| Err(CallError::internal("the fixture panicked")))
            })
        }
    }
}

/// The fixture on the blocking adapter's handler threads.
pub(crate) mod on_blocking {
    use super::{Conformance, Ctx, Value};
    use mcpwire::app::{CallError, Change};
    use mcpwire_blocking::app::{Call, Handler};

    struct Blocking<'a>(&'a Call);

    impl Ctx for Blocking<'_> {
        fn method(&self) -> &str {
            self.0.method()
        }
        fn params(&self) -> Option<&Value> {
            self.0.params()
        }
        fn progress_token(&self) -> Option<&Value> {
            self.0.progress_token()
        }
        fn notify(&self, method: &str, params: Value) {
            let _ = self.0.notify(method, params);
        }
        fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
            self.0.request(method, params, None)
        }
        fn client_capabilities(&self) -> Option<&Value> {
            self.0.client_capabilities()
        }
        fn input_responses(&self) -> Option<&Value> {
            self.0.input_responses()
        }
        fn request_state(&self) -> Option<&str> {
            self.0.request_state()
        }
        fn changed(&self, change: &Change) {
            self.0.changed(change);
        }
    }

    /// The fixture as a blocking [`Handler`].
    pub(crate) struct Fixture(pub(crate) Conformance);

    impl Handler for Fixture {
        fn server_info(&self) -> Value {
            Conformance::server_info()
        }

        fn capabilities(&self) -> Value {
            Conformance::capabilities()
        }

        fn call(&self, call: &Call) -> Result<Value, CallError> {
            self.0.answer(&Blocking(call))
        }
    }
}
