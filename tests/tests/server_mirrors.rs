//! `Mcp-Param-{Name}` on the server (MODERN-7, MODERN-8): a 2026-07-28 `tools/call` of a
//! tool that marks arguments with `x-mcp-header` is checked against its headers before
//! the application sees it, with the tools' mirrors the application gives the core
//! (`Config::with_tool_mirrors`, `Server::set_tool_mirrors`).

use std::sync::Arc;

use mcpwire::mirror::ToolMirrors;
use mcpwire::server::{Config, DEFAULT_MAX_PARAM_HEADERS, Era, Eras, ExchangeId};
use mcpwire_tests::server::{Harness, post_head};
use serde_json::{Value, json};

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// The conformance suite's tool (`http-custom-header-server-validation`), and one with an
/// integer.
fn tools() -> ToolMirrors {
    let value = json!({"type": "object", "properties": {
        "value": {"type": "string", "x-mcp-header": "Value"}}, "required": ["value"]});
    let count = json!({"type": "object", "properties": {
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "region": {"type": "string", "x-mcp-header": "Region"}}});
    let plain = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    ToolMirrors::from_schemas([
        ("test_x_mcp_header", &value),
        ("counted", &count),
        ("echo", &plain),
    ])
    .expect("valid annotations")
}

fn harness(config: Config) -> Harness {
    Harness::new(config.with_eras(Eras::ALL))
}

fn mirrored() -> Harness {
    harness(Config::new().with_tool_mirrors(tools()))
}

/// A `tools/call` of `tool` with `arguments` (JSON text), with the headers a conforming
/// client sends and `params` (`Mcp-Param-*`) after them.
fn call(h: &mut Harness, tool: &str, arguments: &str, params: &[(&str, &str)]) -> ExchangeId {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},{META}}}}}"#
    );
    let mut headers = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ];
    headers.extend_from_slice(params);
    h.send(post_head(&headers), Some(&body))
}

/// The call reached the application, sessionless; answered, it is 200.
fn accepted(h: &mut Harness, x: ExchangeId) {
    let request = h.take_request();
    assert_eq!(request.era(), Era::Sessionless);
    h.answer(&request, r#"{"content":[],"resultType":"complete"}"#);
    assert_eq!(h.reply(x).status(), 200);
}

/// The call was refused with 400 and -32020, its id echoed and `header` named, and the
/// application never saw it.
fn refused(h: &mut Harness, x: ExchangeId, header: &str) -> Value {
    let reply = h.reply(x);
    assert_eq!(
        reply.status(),
        400,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
    let body = reply.json();
    assert_eq!(body["error"]["code"], -32020, "{body}");
    assert_eq!(body["id"], 7, "{body}");
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(message.contains(header), "{message}");
    h.drain();
    assert!(h.take_events().is_empty(), "nothing for the application");
    body
}

#[test]
fn modern_7_modern_8_the_conformance_suite_cases() {
    let mut h = mirrored();
    let tool = "test_x_mcp_header";
    let hello = r#"{"value":"Hello"}"#;
    // The sentinel decoded ("Hello").
    let x = call(
        &mut h,
        tool,
        hello,
        &[("mcp-param-value", "=?base64?SGVsbG8=?=")],
    );
    accepted(&mut h, x);
    // Padding missing, characters outside the alphabet: malformed.
    for bad in ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?="] {
        let x = call(&mut h, tool, hello, &[("Mcp-Param-Value", bad)]);
        refused(&mut h, x, "Mcp-Param-Value");
    }
    // Base64 text without the markers, or with one only, is literal.
    let x = call(
        &mut h,
        tool,
        r#"{"value":"SGVsbG8="}"#,
        &[("mcp-param-value", "SGVsbG8=")],
    );
    accepted(&mut h, x);
    let x = call(
        &mut h,
        tool,
        r#"{"value":"=?base64?SGVsbG8="}"#,
        &[("mcp-param-value", "=?base64?SGVsbG8=")],
    );
    accepted(&mut h, x);
    // The body has a value, the header is missing.
    let x = call(&mut h, tool, hello, &[]);
    let body = refused(&mut h, x, "Mcp-Param-Value");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("missing")),
        "{body}"
    );
}

#[test]
fn modern_7_right_and_wrong_header_values() {
    let mut h = mirrored();
    let tool = "test_x_mcp_header";
    let x = call(
        &mut h,
        tool,
        r#"{"value":"eu-west"}"#,
        &[("mcp-param-value", "eu-west")],
    );
    accepted(&mut h, x);
    // Values are case-sensitive; header names are not.
    let x = call(
        &mut h,
        tool,
        r#"{"value":"eu-west"}"#,
        &[("MCP-PARAM-VALUE", "EU-WEST")],
    );
    refused(&mut h, x, "Mcp-Param-Value");
    // MODERN-8: non-ASCII goes in the sentinel ("Hello, 世界").
    let x = call(
        &mut h,
        tool,
        r#"{"value":"Hello, 世界"}"#,
        &[("mcp-param-value", "=?base64?SGVsbG8sIOS4lueVjA==?=")],
    );
    accepted(&mut h, x);
}

#[test]
fn modern_8_integers_compare_as_numbers() {
    let mut h = mirrored();
    for same in ["42", "42.0", " 42 "] {
        let x = call(
            &mut h,
            "counted",
            r#"{"count":42}"#,
            &[("mcp-param-count", same)],
        );
        accepted(&mut h, x);
    }
    for other in ["43", "+42", "042", "4.2e1"] {
        let x = call(
            &mut h,
            "counted",
            r#"{"count":42}"#,
            &[("mcp-param-count", other)],
        );
        refused(&mut h, x, "Mcp-Param-Count");
    }
}

#[test]
fn modern_7_an_absent_or_null_argument_expects_no_header() {
    let mut h = mirrored();
    for arguments in ["{}", r#"{"count":null}"#] {
        let x = call(&mut h, "counted", arguments, &[]);
        accepted(&mut h, x);
    }
    // A header for an argument the body does not have is refused.
    let x = call(&mut h, "counted", "{}", &[("mcp-param-region", "eu")]);
    refused(&mut h, x, "Mcp-Param-Region");
}

#[test]
fn modern_7_an_extra_unrecognised_header_is_ignored_a_repeated_one_refused() {
    let mut h = mirrored();
    let x = call(
        &mut h,
        "counted",
        r#"{"count":1}"#,
        &[("mcp-param-count", "1"), ("mcp-param-zone", "z")],
    );
    accepted(&mut h, x);
    let x = call(
        &mut h,
        "counted",
        r#"{"count":1}"#,
        &[("mcp-param-count", "1"), ("Mcp-Param-Count", "1")],
    );
    let body = refused(&mut h, x, "Mcp-Param-Count");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("more than once")),
        "{body}"
    );
}

/// `n` distinct unrecognised `Mcp-Param-*` names.
fn extra_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("mcp-param-extra{i}")).collect()
}

#[test]
fn modern_7_too_many_param_headers_are_refused_for_a_tool_with_mirrors() {
    let names = extra_names(DEFAULT_MAX_PARAM_HEADERS);
    let mut params: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "x")).collect();
    params.push(("mcp-param-value", "a"));
    let mut h = mirrored();
    let x = call(&mut h, "test_x_mcp_header", r#"{"value":"a"}"#, &params);
    let body = refused(&mut h, x, "Mcp-Param-*");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("65") && message.contains("64"),
        "{message}"
    );
    // At the bound exactly, it is served.
    params.remove(0);
    let x = call(&mut h, "test_x_mcp_header", r#"{"value":"a"}"#, &params);
    accepted(&mut h, x);
    // A tool without mirrors ignores them all, however many.
    params.push(("mcp-param-one-more", "x"));
    let x = call(&mut h, "echo", r#"{"text":"a"}"#, &params);
    accepted(&mut h, x);
}

#[test]
fn modern_7_the_bound_is_configurable_and_never_below_the_widest_tool() {
    let config = Config::new().with_max_param_headers(1);
    assert_eq!(config.max_param_headers(), 1);
    let mut h = harness(config.with_tool_mirrors(tools()));
    // `counted` mirrors two arguments: both headers are kept although the bound is 1.
    let both = [("mcp-param-count", "1"), ("mcp-param-region", "eu")];
    let x = call(&mut h, "counted", r#"{"count":1,"region":"eu"}"#, &both);
    accepted(&mut h, x);
    let three = [
        ("mcp-param-count", "1"),
        ("mcp-param-region", "eu"),
        ("mcp-param-extra", "x"),
    ];
    let x = call(&mut h, "counted", r#"{"count":1,"region":"eu"}"#, &three);
    refused(&mut h, x, "Mcp-Param-*");
}

#[test]
fn modern_7_a_tool_without_mirrors_is_not_checked() {
    let mut h = mirrored();
    // Not in the table (it mirrors nothing): its headers mean nothing, even malformed.
    let x = call(
        &mut h,
        "echo",
        r#"{"text":"a"}"#,
        &[("mcp-param-text", "=?base64?!?=")],
    );
    accepted(&mut h, x);
    // Nor is any tool of a server given no table.
    let mut bare = harness(Config::new());
    let x = call(&mut bare, "test_x_mcp_header", r#"{"value":"a"}"#, &[]);
    accepted(&mut bare, x);
}

#[test]
fn modern_7_the_table_is_replaced_at_run_time() {
    let mut h = harness(Config::new());
    let tool = "test_x_mcp_header";
    let x = call(&mut h, tool, r#"{"value":"a"}"#, &[]);
    accepted(&mut h, x);
    h.server.set_tool_mirrors(tools());
    assert_eq!(h.server.config().tool_mirrors().len(), 2);
    let x = call(&mut h, tool, r#"{"value":"a"}"#, &[]);
    refused(&mut h, x, "Mcp-Param-Value");
    // The tool's mirrors changed: the new table decides.
    let renamed = json!({"type": "object", "properties": {
        "value": {"type": "string", "x-mcp-header": "Other"}}});
    let table = ToolMirrors::from_schemas([(tool, &renamed)]).expect("valid");
    h.server.set_tool_mirrors(Arc::new(table));
    let x = call(
        &mut h,
        tool,
        r#"{"value":"a"}"#,
        &[("mcp-param-value", "a")],
    );
    refused(&mut h, x, "Mcp-Param-Other");
    let x = call(
        &mut h,
        tool,
        r#"{"value":"a"}"#,
        &[("mcp-param-other", "a")],
    );
    accepted(&mut h, x);
    h.server.set_tool_mirrors(ToolMirrors::new());
    assert!(h.server.config().tool_mirrors().is_empty());
    let x = call(&mut h, tool, r#"{"value":"a"}"#, &[]);
    accepted(&mut h, x);
}

#[test]
fn modern_7_shards_share_one_table() {
    let table = Arc::new(tools());
    let shards = Config::new()
        .with_tool_mirrors(Arc::clone(&table))
        .shards(3);
    for shard in &shards {
        assert!(
            std::ptr::eq(shard.tool_mirrors(), &*table),
            "shared, not copied"
        );
    }
}

#[test]
fn modern_7_the_first_invalid_tool_is_named() {
    let good = json!({"type": "object", "properties": {
        "a": {"type": "string", "x-mcp-header": "A"}}});
    let nested = json!({"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}}});
    let e = ToolMirrors::from_schemas([("good", &good), ("nested", &nested)]).unwrap_err();
    assert_eq!(e.tool, "nested");
    assert_eq!(e.error.location, "/properties/list/items");
    assert!(e.to_string().contains("\"nested\""), "{e}");
}

#[test]
fn modern_24_a_notification_is_never_refused_for_its_mcp_param_headers() {
    let mut h = mirrored();
    let x = h.send(
        post_head(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-param-value", "=?base64?!!?="),
        ]),
        Some(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#),
    );
    assert_eq!(h.reply(x).status(), 202);
}

#[test]
fn modern_7_modern_25_a_session_era_call_is_not_checked() {
    let mut h = mirrored();
    let (sid, _) = h.initialize("2025-11-25");
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_x_mcp_header","arguments":{"value":"a"}}}"#;
    let x = h.post(Some(&sid), Some("2025-11-25"), body);
    let request = h.take_request();
    assert_eq!(request.era(), Era::Sessions);
    h.answer(&request, r#"{"content":[]}"#);
    assert_eq!(h.reply(x).status(), 200);
}
