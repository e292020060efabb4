//! The sessionless revision (2026-07-28) on the server: MODERN-* requirements, served
//! beside the session era on one endpoint and decided per request (MODERN-25).

use mcpwire::jsonrpc::{ErrorCode, RawJson};
use mcpwire::server::{Config, Era, Eras, Event, Target};
use mcpwire_tests::server::{Harness, post_head};

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

fn call(id: u32) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{}},{META}}}}}"#
    )
}

const CALL_HEADERS: [(&str, &str); 3] = [
    ("mcp-protocol-version", "2026-07-28"),
    ("mcp-method", "tools/call"),
    ("mcp-name", "echo"),
];

fn both() -> Harness {
    Harness::new(Config::new().with_eras(Eras::ALL))
}

fn post(h: &mut Harness, headers: &[(&str, &str)], body: &str) -> mcpwire::server::ExchangeId {
    h.send(post_head(headers), Some(body))
}

#[test]
fn modern_3_modern_10_a_request_is_dispatched_without_a_session_and_answered_as_json() {
    let mut h = both();
    let x = post(&mut h, &CALL_HEADERS, &call(1));
    let request = h.take_request();
    assert_eq!(request.era(), Era::Sessionless);
    assert_eq!(request.session(), None);
    assert_eq!(request.version(), mcpwire::ProtocolVersion::V2026_07_28);
    h.answer(&request, r#"{"content":[],"resultType":"complete"}"#);
    let reply = h.reply(x);
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.header("mcp-session-id"), None, "MODERN-2: no session");
    assert_eq!(reply.json()["id"], 1);
    assert_eq!(reply.json()["result"]["resultType"], "complete");
    assert_eq!(h.server.session_count(), 0);
}

#[test]
fn modern_10_modern_12_related_notifications_open_a_stream_without_event_ids() {
    let mut h = both();
    let x = post(&mut h, &CALL_HEADERS, &call(2));
    let request = h.take_request();
    let params = RawJson::new(r#"{"progressToken":"p","progress":1}"#).unwrap();
    h.server
        .notify(
            h.now,
            Target::Request(request.handle()),
            "notifications/progress",
            Some(&params),
        )
        .unwrap();
    h.answer(&request, r#"{"content":[],"resultType":"complete"}"#);
    let reply = h.reply(x);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    assert_eq!(
        events.len(),
        2,
        "the progress, then the response: {events:?}"
    );
    assert!(
        events.iter().all(|e| e.id().is_empty()),
        "no event ids: {events:?}"
    );
    assert!(reply.ended, "the stream ends with its response");
}

#[test]
fn modern_10_no_server_to_client_request_is_sent_on_the_revision() {
    let mut h = both();
    let _ = post(&mut h, &CALL_HEADERS, &call(3));
    let request = h.take_request();
    let sent = h.server.request(
        h.now,
        Target::Request(request.handle()),
        "sampling/createMessage",
        None,
        None,
    );
    assert!(sent.is_err(), "{sent:?}");
}

#[test]
fn modern_9_an_unknown_method_answered_by_the_application_is_404() {
    let mut h = both();
    let body = format!(r#"{{"jsonrpc":"2.0","id":4,"method":"nope/nothing","params":{{{META}}}}}"#);
    let x = post(
        &mut h,
        &[CALL_HEADERS[0], ("mcp-method", "nope/nothing")],
        &body,
    );
    let request = h.take_request();
    h.server
        .respond_error(
            h.now,
            request.handle(),
            ErrorCode::METHOD_NOT_FOUND,
            "no",
            None,
        )
        .unwrap();
    h.drain();
    let reply = h.reply(x);
    assert_eq!(reply.status(), 404);
    assert_eq!(reply.json()["error"]["code"], -32601);
    // A tool's own error stays 200.
    let x = post(&mut h, &CALL_HEADERS, &call(5));
    let request = h.take_request();
    h.server
        .respond_error(
            h.now,
            request.handle(),
            ErrorCode::INVALID_PARAMS,
            "bad",
            None,
        )
        .unwrap();
    h.drain();
    assert_eq!(h.reply(x).status(), 200);
}

#[test]
fn modern_11_closing_the_response_stream_cancels_the_request() {
    let mut h = both();
    let x = post(&mut h, &CALL_HEADERS, &call(6));
    let request = h.take_request();
    h.server.handle_disconnect(h.now, x);
    h.drain();
    let cancelled = h
        .take_events()
        .into_iter()
        .any(|e| matches!(e, Event::Cancelled { request: r, .. } if r == request.handle()));
    assert!(cancelled, "the application is told");
    let late = RawJson::new(r#"{"content":[]}"#).unwrap();
    assert!(
        h.server.respond(h.now, request.handle(), &late).is_err(),
        "nothing more is sent for it"
    );
}

#[test]
fn modern_24_a_notification_is_accepted_without_mcp_headers() {
    let mut h = both();
    let x = post(
        &mut h,
        &[CALL_HEADERS[0]],
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#,
    );
    assert_eq!(h.reply(x).status(), 202);
}

#[test]
fn modern_25_session_era_clients_are_served_beside_modern_ones() {
    let mut h = both();
    let (sid, _) = h.initialize("2025-11-25");
    // A session-era request whose body carries modern `_meta` keys stays session-era.
    let x = h.post(Some(&sid), Some("2025-11-25"), &call(7));
    let request = h.take_request();
    assert_eq!(request.era(), Era::Sessions);
    assert!(request.session().is_some());
    h.answer(&request, r#"{"content":[]}"#);
    assert_eq!(h.reply(x).status(), 200);
    // And a modern one beside it.
    let _ = post(&mut h, &CALL_HEADERS, &call(8));
    assert_eq!(h.take_request().era(), Era::Sessionless);
}

#[test]
fn modern_21_initialize_under_a_modern_header_is_a_removed_method() {
    let mut h = both();
    let body = format!(r#"{{"jsonrpc":"2.0","id":9,"method":"initialize","params":{{{META}}}}}"#);
    let x = post(
        &mut h,
        &[CALL_HEADERS[0], ("mcp-method", "initialize")],
        &body,
    );
    let reply = h.reply(x);
    assert_eq!(reply.status(), 404);
    assert_eq!(reply.json()["error"]["code"], -32601);
    assert_eq!(reply.json()["id"], 9);
    assert_eq!(h.server.session_count(), 0);
}

#[test]
fn modern_5_modern_19_an_unsupported_revision_lists_every_revision_served() {
    let mut h = both();
    let body = call(10).replace("2026-07-28", "v999.0.0");
    let x = post(
        &mut h,
        &[
            ("mcp-protocol-version", "v999.0.0"),
            CALL_HEADERS[1],
            CALL_HEADERS[2],
        ],
        &body,
    );
    let reply = h.reply(x);
    assert_eq!(reply.status(), 400);
    assert_eq!(reply.json()["error"]["code"], -32022);
    assert_eq!(reply.json()["error"]["data"]["requested"], "v999.0.0");
    let supported = reply.json()["error"]["data"]["supported"].clone();
    assert_eq!(supported[0], "2026-07-28");
    assert!(
        supported
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "2025-11-25")
    );
}

#[test]
fn modern_2_a_modern_only_server_refuses_get_and_delete_and_ignores_session_ids() {
    let mut h = Harness::new(Config::new().with_eras(Eras::MODERN));
    let get = h.send(
        Harness::head(
            "GET",
            "/mcp",
            &[("accept", "text/event-stream"), ("mcp-session-id", "abc")],
        ),
        None,
    );
    assert_eq!(h.reply(get).status(), 405);
    assert_eq!(h.reply(get).header("allow"), Some("POST"));
    let delete = h.send(
        Harness::head("DELETE", "/mcp", &[("mcp-session-id", "abc")]),
        None,
    );
    assert_eq!(h.reply(delete).status(), 405);
    let mut headers = CALL_HEADERS.to_vec();
    headers.push(("mcp-session-id", "abc"));
    let _ = post(&mut h, &headers, &call(11));
    assert_eq!(h.take_request().era(), Era::Sessionless);
    // A session-era `initialize` is checked as the revision it is not: no header → -32020.
    let init = r#"{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;
    let x = post(&mut h, &[], init);
    assert_eq!(h.reply(x).status(), 400);
    assert_eq!(h.reply(x).json()["error"]["code"], -32020);
}

/// MODERN-13: a long-lived response stream (a `subscriptions/listen`'s) is kept alive
/// through proxies: its head says `X-Accel-Buffering: no`, and a stream quiet for the
/// heartbeat interval gets a comment, which no client reads as an event.
#[test]
fn modern_13_a_quiet_response_stream_gets_heartbeats_and_no_buffering() {
    let mut h = Harness::new(
        Config::new()
            .with_eras(Eras::ALL)
            .with_heartbeat(Some(std::time::Duration::from_secs(2))),
    );
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{{"notifications":{{}},{META}}}}}"#
    );
    let x = post(
        &mut h,
        &[CALL_HEADERS[0], ("mcp-method", "subscriptions/listen")],
        &body,
    );
    let request = h.take_request();
    let ack = RawJson::new(r#"{"notifications":{}}"#).unwrap();
    h.server
        .notify(
            h.now,
            Target::Request(request.handle()),
            "notifications/subscriptions/acknowledged",
            Some(&ack),
        )
        .unwrap();
    h.drain();
    assert_eq!(h.reply(x).header("x-accel-buffering"), Some("no"));
    let before = h.reply(x).items().len();
    for _ in 0..3 {
        h.advance(std::time::Duration::from_secs(2));
    }
    let items = h.reply(x).items();
    let comments = items[before..]
        .iter()
        .filter(|i| matches!(i, mcpwire::sse::Item::Comment(_)))
        .count();
    assert_eq!(comments, 3, "a heartbeat per quiet interval: {items:?}");
    assert_eq!(
        h.reply(x).events().len(),
        1,
        "only the acknowledgement is an event"
    );
    assert!(!h.reply(x).ended);
}
