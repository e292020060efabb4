//! The legacy HTTP+SSE transport (2024-11-05) served beside Streamable HTTP: LEGACY-*.

use mcpwire::server::{CloseReason, Config, Era, Event, LegacyPaths, Target};
use mcpwire_tests::server::Harness;

fn legacy() -> Harness {
    Harness::new(Config::new().with_legacy(Some(LegacyPaths::default())))
}

/// Opens the legacy stream; returns it and the POST URI from the `endpoint` event.
fn open(h: &mut Harness) -> (mcpwire::server::ExchangeId, String) {
    let g = h.send(
        Harness::head("GET", "/sse", &[("accept", "text/event-stream")]),
        None,
    );
    let reply = h.reply(g);
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    assert_eq!(events[0].event_type(), "endpoint");
    (g, events[0].data().to_owned())
}

fn post(h: &mut Harness, uri: &str, body: &str) -> u16 {
    let x = h.send(
        Harness::head("POST", uri, &[("content-type", "application/json")]),
        Some(body),
    );
    h.reply(x).status()
}

#[test]
fn legacy_1_legacy_2_the_sse_endpoint_announces_the_post_uri_with_the_session() {
    let mut h = legacy();
    let (_, endpoint) = open(&mut h);
    let id = endpoint
        .strip_prefix("/messages?sessionId=")
        .expect(&endpoint);
    assert_eq!(id.len(), 32);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
}

#[test]
fn legacy_3_legacy_4_posts_get_202_and_responses_travel_on_the_stream_as_message_events() {
    let mut h = legacy();
    let (g, endpoint) = open(&mut h);
    let status = post(
        &mut h,
        &endpoint,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}"#,
    );
    assert_eq!(status, 202);
    let init = h.take_request();
    assert_eq!(init.era(), Era::HttpSse);
    assert_eq!(init.version(), mcpwire::ProtocolVersion::V2024_11_05);
    h.answer(&init, r#"{"protocolVersion":"2024-11-05"}"#);
    let events = h.reply(g).events();
    let last = events.last().unwrap();
    assert_eq!(last.event_type(), "message");
    assert!(last.id().is_empty(), "no resumability in 2024-11-05");
    let message: serde_json::Value = serde_json::from_str(last.data()).unwrap();
    assert_eq!(message["id"], 1);
    let session = init.session().unwrap();
    h.server
        .notify(
            h.now,
            Target::Session(session),
            "notifications/message",
            None,
        )
        .unwrap();
    h.drain();
    assert_eq!(
        h.reply(g).messages().last().unwrap()["method"],
        "notifications/message"
    );
    assert_eq!(post(&mut h, &endpoint, "{"), 400);
}

#[test]
fn legacy_an_unknown_session_is_404_and_the_session_ends_with_its_stream() {
    let mut h = legacy();
    assert_eq!(
        post(
            &mut h,
            "/messages?sessionId=nope",
            r#"{"jsonrpc":"2.0","method":"n"}"#
        ),
        404
    );
    let (g, endpoint) = open(&mut h);
    h.server.handle_disconnect(h.now, g);
    h.drain();
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        Event::SessionClosed {
            reason: CloseReason::Disconnected,
            ..
        }
    )));
    assert_eq!(
        post(&mut h, &endpoint, r#"{"jsonrpc":"2.0","method":"n"}"#),
        404
    );
    assert!(h.server.is_idle());
}

#[test]
fn legacy_5_one_server_serves_both_transports_and_keeps_them_apart() {
    let mut h = legacy();
    let (_, endpoint) = open(&mut h);
    let (sid, _) = h.initialize("2025-11-25");
    // A Streamable session id is not a legacy one, and the reverse.
    let legacy_id = endpoint.rsplit('=').next().unwrap().to_owned();
    assert_eq!(
        post(
            &mut h,
            &format!("/messages?sessionId={sid}"),
            r#"{"jsonrpc":"2.0","method":"n"}"#
        ),
        404
    );
    let x = h.post(Some(&legacy_id), None, r#"{"jsonrpc":"2.0","method":"n"}"#);
    assert_eq!(h.reply(x).status(), 404);
}

#[test]
fn legacy_paths_are_not_served_unless_configured() {
    let mut h = Harness::new(Config::new());
    let g = h.send(
        Harness::head("GET", "/sse", &[("accept", "text/event-stream")]),
        None,
    );
    assert_eq!(h.reply(g).status(), 404);
}
