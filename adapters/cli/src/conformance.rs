//! `mcpwire serve --conformance`: the fixture the MCP conformance suite's server scenarios
//! call (after its reference `everything-server`): tools with each content kind, logging
//! and progress during a call, static and templated resources, prompts, `logging/setLevel`
//! and `completion/complete`, and tools that ask the client for sampling and elicitation
//! (server-to-client requests, through [`Call::request`]).

use std::time::Duration;

use mcpwire_tokio::app::{BoxFuture, Call, CallError, Handler, Tools, text_result};
use serde_json::{Value, json};

/// A 1x1 red PNG.
const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// The fixture: its tool table, and the other methods answered beside it.
pub(crate) struct Conformance {
    tools: Tools,
}

fn empty() -> Value {
    json!({"type": "object", "properties": {}})
}

fn fixed(
    result: Value,
) -> impl Fn(Call, Value) -> BoxFuture<Result<Value, CallError>> + Send + Sync {
    move |_call, _args| {
        let result = result.clone();
        Box::pin(async move { Ok(result) })
    }
}

impl Conformance {
    pub(crate) fn new() -> Self {
        let tools = Tools::new()
            .with_server_info("mcp-conformance-test-server", "1.0.0")
            .with_tool("test_simple_text", "Tests simple text content response", empty(),
                fixed(text_result("This is a simple text response for testing.")))
            .with_tool("test_image_content", "Tests image content response", empty(),
                fixed(json!({"content": [{"type": "image", "data": IMAGE, "mimeType": "image/png"}]})))
            .with_tool("test_audio_content", "Tests audio content response", empty(),
                fixed(json!({"content": [{"type": "audio", "data": AUDIO, "mimeType": "audio/wav"}]})))
            .with_tool("test_embedded_resource", "Tests embedded resource content response", empty(),
                fixed(json!({"content": [{"type": "resource", "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]})))
            .with_tool("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)", empty(),
                fixed(json!({"content": [
                    {"type": "text", "text": "Multiple content types test:"},
                    {"type": "image", "data": IMAGE, "mimeType": "image/png"},
                    {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}
                ]})))
            .with_tool("test_error_handling", "Tests error response handling", empty(),
                fixed(json!({"content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}], "isError": true})))
            .with_tool("test_tool_with_logging", "Tests tool that emits log messages during execution", empty(),
                |call: Call, _args: Value| async move {
                    for (i, data) in ["Tool execution started", "Tool processing data", "Tool execution completed"].iter().enumerate() {
                        if i > 0 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        let _ = call.notify("notifications/message", json!({"level": "info", "data": data}));
                    }
                    Ok(text_result("Tool with logging executed successfully"))
                })
            .with_tool("test_tool_with_progress", "Tests tool that reports progress notifications", empty(),
                |call: Call, _args: Value| async move {
                    let token = call.progress_token().cloned().unwrap_or(json!(0));
                    for (i, step) in [0, 50, 100].into_iter().enumerate() {
                        if i > 0 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        let _ = call.notify("notifications/progress", json!({
                            "progressToken": token, "progress": step, "total": 100,
                            "message": format!("Completed step {step} of 100"),
                        }));
                    }
                    let text = token.as_str().map_or_else(|| token.to_string(), str::to_owned);
                    Ok(text_result(&text))
                });
        let tools = tools
            .with_tool(
                "json_schema_2020_12_tool",
                "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                    "additionalProperties": false,
                }),
                |_call: Call, args: Value| async move {
                    Ok(text_result(&format!("JSON Schema 2020-12 tool called with: {args}")))
                },
            )
            .with_tool("test_sampling", "Tests server-initiated sampling (LLM completion request)",
                json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
                |call: Call, args: Value| async move {
                    let prompt = args.get("prompt").and_then(Value::as_str).unwrap_or_default().to_owned();
                    let text = match call.request("sampling/createMessage", json!({
                        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                        "maxTokens": 100,
                    })).await {
                        Ok(r) => {
                            let reply = r.pointer("/content/text").or_else(|| r.pointer("/message/content/text"))
                                .and_then(Value::as_str).unwrap_or("No response");
                            format!("LLM response: {reply}")
                        }
                        Err(e) => format!("Sampling not supported or error: {}", e.message),
                    };
                    Ok(text_result(&text))
                })
            .with_tool("test_elicitation", "Tests server-initiated elicitation (user input request)",
                json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
                |call: Call, args: Value| async move {
                    let message = args.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
                    elicit(&call, "User response", json!({
                        "message": message,
                        "requestedSchema": {"type": "object", "properties": {"response": {"type": "string", "description": "User's response"}}, "required": ["response"]},
                    })).await
                })
            .with_tool("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034", empty(),
                |call: Call, _args: Value| async move {
                    elicit(&call, "Elicitation completed", json!({
                        "message": "Please review and update the form fields with defaults",
                        "requestedSchema": {"type": "object", "properties": {
                            "name": {"type": "string", "description": "User name", "default": "John Doe"},
                            "age": {"type": "integer", "description": "User age", "default": 30},
                            "score": {"type": "number", "description": "User score", "default": 95.5},
                            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                            "verified": {"type": "boolean", "description": "Verification status", "default": true},
                        }, "required": []},
                    })).await
                })
            .with_tool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330", empty(),
                |call: Call, _args: Value| async move {
                    elicit(&call, "Elicitation completed", json!({
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
                    })).await
                });
        Self { tools }
    }
}

/// Sends `elicitation/create` and reports the client's answer as the reference does.
async fn elicit(call: &Call, label: &str, params: Value) -> Result<Value, CallError> {
    let text = match call.request("elicitation/create", params).await {
        Ok(r) => format!(
            "{label}: action={}, content={}",
            r.get("action").and_then(Value::as_str).unwrap_or_default(),
            r.get("content").cloned().unwrap_or_else(|| json!({}))
        ),
        Err(e) => format!("Elicitation not supported or error: {}", e.message),
    };
    Ok(text_result(&text))
}

fn resource(uri: &str, name: &str, title: &str, description: &str, mime: &str) -> Value {
    json!({"uri": uri, "name": name, "title": title, "description": description, "mimeType": mime})
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

impl Handler for Conformance {
    fn server_info(&self) -> Value {
        self.tools.server_info()
    }

    fn capabilities(&self) -> Value {
        json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
        })
    }

    fn call(&self, call: Call) -> BoxFuture<Result<Value, CallError>> {
        let params = call.params().cloned();
        let uri = params
            .as_ref()
            .and_then(|p| p.get("uri"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let result = match call.method() {
            "tools/list" | "tools/call" => return self.tools.call(call),
            "resources/list" => Ok(json!({"resources": [
                resource("test://static-text", "static-text", "Static Text Resource", "A static text resource for testing", "text/plain"),
                resource("test://static-binary", "static-binary", "Static Binary Resource", "A static binary resource (image) for testing", "image/png"),
                resource("test://watched-resource", "watched-resource", "Watched Resource", "A resource that auto-updates every 3 seconds", "text/plain"),
            ]})),
            "resources/templates/list" => Ok(json!({"resourceTemplates": [{
                "uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template",
                "description": "A resource template with parameter substitution", "mimeType": "application/json",
            }]})),
            "resources/read" => match uri.as_str() {
                "test://static-text" => Ok(
                    json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}]}),
                ),
                "test://static-binary" => {
                    Ok(json!({"contents": [{"uri": uri, "mimeType": "image/png", "blob": IMAGE}]}))
                }
                "test://watched-resource" => Ok(
                    json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"}]}),
                ),
                other => match other
                    .strip_prefix("test://template/")
                    .and_then(|r| r.strip_suffix("/data"))
                {
                    Some(id) if !id.is_empty() && !id.contains('/') => {
                        let text = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string();
                        Ok(
                            json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}),
                        )
                    }
                    _ => Err(CallError::invalid_params(format!(
                        "Resource {other} not found"
                    ))),
                },
            },
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
            ]})),
            "prompts/get" => {
                let p = params.as_ref();
                match p
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                {
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
                    other => Err(CallError::invalid_params(format!(
                        "Prompt {other} not found"
                    ))),
                }
            }
            other => Err(CallError::not_found(format!("method {other:?} not found"))),
        };
        Box::pin(async move { result })
    }
}
