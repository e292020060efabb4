//! The server's Streamable HTTP requirements, one test (or more) per id: HTTP-POST-*,
//! HTTP-GET-*, HTTP-DELETE-*, SESSION-*, VERSION-*, BATCH-*, SEC-*, JSONRPC-* and §14.

use std::time::Duration;

use mcpwire::jsonrpc::{ErrorCode, RawJson, RequestId};
use mcpwire::server::{
    Allow, CloseReason, Config, Delivery, Eras, Event, Refusal, ResponseMode, SendError, SessionId,
    SessionMode, Target,
};
use mcpwire_tests::server::{ACCEPT_BOTH, Harness};

const V3: &str = "2025-11-25";
const V2: &str = "2025-06-18";
const V1: &str = "2025-03-26";
const CALL: &str =
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#;
const RESULT: &str = r#"{"content":[{"type":"text","text":"hi"}]}"#;

fn json(text: &str) -> RawJson<'_> {
    RawJson::new(text).unwrap()
}

fn error_code(reply: &mcpwire_tests::server::Reply) -> i64 {
    reply.json()["error"]["code"]
        .as_i64()
        .expect("a JSON-RPC error body")
}

#[test]
fn http_post_1_only_the_endpoint_path_is_served() {
    let mut h = Harness::new(Config::new());
    let x = h.send(
        Harness::head(
            "POST",
            "/other",
            &[
                ("accept", ACCEPT_BOTH),
                ("content-type", "application/json"),
            ],
        ),
        Some(CALL),
    );
    let reply = h.reply(x);
    assert_eq!(reply.status(), 404);
    assert!(reply.ended);
    assert!(h.take_events().is_empty());
}

#[test]
fn http_post_2_http_post_7_a_request_is_answered_with_one_json_body() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    assert!(h.reply(x).head.is_none(), "the head waits for the answer");
    let request = h.take_request();
    assert_eq!(request.method(), "tools/call");
    assert_eq!(request.id(), &RequestId::int(7));
    h.answer(&request, RESULT);
    let reply = h.reply(x);
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("mcp-session-id"), Some(sid.as_str()));
    assert_eq!(reply.json()["result"]["content"][0]["text"], "hi");
    assert_eq!(reply.json()["id"], 7);
    assert!(reply.ended);
}

#[test]
fn http_post_3_accept_must_list_both_types_and_content_type_must_be_json() {
    let mut h = Harness::new(Config::new().with_sessions(SessionMode::Stateless));
    for (accept, ctype, status) in [
        ("application/json", "application/json", 406),
        ("text/event-stream", "application/json", 406),
        ("text/html", "application/json", 406),
        (ACCEPT_BOTH, "text/plain", 415),
        (ACCEPT_BOTH, "application/json; charset=utf-8", 202),
    ] {
        let x = h.send(
            Harness::head(
                "POST",
                "/mcp",
                &[("accept", accept), ("content-type", ctype)],
            ),
            Some(r#"{"jsonrpc":"2.0","method":"notifications/x"}"#),
        );
        assert_eq!(h.reply(x).status(), status, "{accept} / {ctype}");
    }
}

#[test]
fn http_post_5_notifications_and_responses_get_202_and_no_body() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V3);
    let x = h.post(
        Some(&sid),
        Some(V3),
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
    );
    let reply = h.reply(x);
    assert_eq!(reply.status(), 202);
    assert!(reply.body.is_empty() && reply.ended);
    assert!(matches!(h.take_events()[..], [Event::Notification { .. }]));
    // A response to an id the server never sent: still 202, never a reply (§14.7).
    let x = h.post(
        Some(&sid),
        Some(V3),
        r#"{"jsonrpc":"2.0","id":99,"result":{}}"#,
    );
    assert_eq!(h.reply(x).status(), 202);
    assert!(h.take_events().is_empty());
}

#[test]
fn http_post_6_bad_json_is_400_parse_error_and_a_bad_shape_is_400_invalid_request_with_its_id() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), r#"{"jsonrpc":"2.0","id":1,"method":"#);
    let reply = h.reply(x);
    assert_eq!(reply.status(), 400);
    assert_eq!(error_code(&reply), -32700);
    assert!(reply.json()["id"].is_null());
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("parse error")
    );
    let x = h.post(
        Some(&sid),
        Some(V3),
        r#"{"jsonrpc":"1.0","id":"q","method":"m"}"#,
    );
    let reply = h.reply(x);
    assert_eq!(reply.status(), 400);
    assert_eq!(error_code(&reply), -32600);
    assert_eq!(reply.json()["id"], "q");
    let x = h.post(Some(&sid), Some(V3), "\u{0}\u{ff}");
    assert_eq!(h.reply(x).status(), 400);
    assert!(h.take_events().is_empty());
}

#[test]
fn http_post_body_limit_is_413_from_content_length_or_while_streaming() {
    let mut h = Harness::new(Config::new().with_max_body(64));
    let head = Harness::head(
        "POST",
        "/mcp",
        &[
            ("accept", ACCEPT_BOTH),
            ("content-type", "application/json"),
            ("content-length", "65"),
        ],
    );
    let x = h.server.handle_head(h.now, head);
    h.drain();
    assert_eq!(h.reply(x).status(), 413);
    let head = Harness::head(
        "POST",
        "/mcp",
        &[
            ("accept", ACCEPT_BOTH),
            ("content-type", "application/json"),
        ],
    );
    let x = h.server.handle_head(h.now, head);
    h.server
        .handle_body(h.now, x, bytes::Bytes::from(vec![b' '; 40]));
    h.drain();
    assert!(h.reply(x).head.is_none());
    h.server
        .handle_body(h.now, x, bytes::Bytes::from(vec![b' '; 40]));
    h.drain();
    assert_eq!(
        h.reply(x).status(),
        413,
        "refused as soon as the limit is passed"
    );
    h.server.handle_body_end(h.now, x);
    h.drain();
    assert!(h.take_events().is_empty());
}

#[test]
fn http_post_8_http_post_9_http_post_11_resume_1_a_related_message_opens_a_stream_that_ends_after_the_response()
 {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V2);
    let x = h.post(Some(&sid), Some(V2), CALL);
    let request = h.take_request();
    let progress = json(r#"{"progressToken":1,"progress":0.5}"#);
    let d = h
        .server
        .notify(
            h.now,
            Target::Request(request.handle()),
            "notifications/progress",
            Some(&progress),
        )
        .unwrap();
    assert_eq!(d, Delivery::Sent);
    h.drain();
    let reply = h.reply(x);
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
    assert_eq!(reply.header("x-accel-buffering"), Some("no"));
    assert_eq!(reply.header("mcp-session-id"), Some(sid.as_str()));
    assert!(!reply.ended);
    h.answer(&request, RESULT);
    let reply = h.reply(x);
    let messages = reply.messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["method"], "notifications/progress");
    assert_eq!(messages[1]["id"], 7, "the response comes last");
    assert!(
        reply.ended,
        "HTTP-POST-11: the stream ends once it owes nothing"
    );
    // Not 2025-11-25: no priming event (SSE-ENC-9), but ids (RESUME-1).
    let events = reply.events();
    assert!(
        events
            .iter()
            .all(|e| !e.data().is_empty() && !e.id().is_empty())
    );
}

#[test]
fn http_post_13_resume_8_a_2025_11_25_stream_starts_with_a_priming_event_with_retry() {
    let mut h = Harness::new(Config::new().with_response_mode(ResponseMode::Sse));
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let reply = h.reply(x);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let items = reply.items();
    let [
        mcpwire::sse::Item::Retry(retry),
        mcpwire::sse::Item::Event(priming),
    ] = &items[..]
    else {
        panic!("{items:?}");
    };
    assert_eq!(*retry, Duration::from_secs(1));
    assert_eq!(priming.data(), "");
    assert!(!priming.id().is_empty());
    let request = h.take_request();
    h.answer(&request, RESULT);
    let events = h.reply(x).events();
    assert_eq!(events.len(), 2);
    assert_ne!(events[0].id(), events[1].id());
}

/// RESUME-15: under `ResponseMode::Auto`, a POST with no answer and nothing related to
/// it by `stream_after` is answered as a stream then: its head and priming event go out,
/// heartbeats follow while the tool is silent, and the answer ends it.
#[test]
fn resume_15_a_slow_answer_gets_its_stream_head_and_priming_event_after_stream_after() {
    let config = Config::new()
        .with_stream_after(Some(Duration::from_millis(500)))
        .with_heartbeat(Some(Duration::from_secs(2)));
    let mut h = Harness::new(config);
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    h.advance(Duration::from_millis(499));
    assert!(
        h.reply(x).head.is_none(),
        "an answer may still come as JSON"
    );
    h.advance(Duration::from_millis(1));
    let reply = h.reply(x);
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert_eq!(reply.header("mcp-session-id"), Some(sid.as_str()));
    let events = reply.events();
    assert_eq!(events.len(), 1, "the priming event (RESUME-8)");
    assert_eq!(events[0].data(), "");
    assert!(!events[0].id().is_empty());
    // Silent for 5 s: heartbeats keep a proxy's read timeout from cutting it.
    for _ in 0..5 {
        h.advance(Duration::from_secs(1));
    }
    let comments = h
        .reply(x)
        .items()
        .iter()
        .filter(|i| matches!(i, mcpwire::sse::Item::Comment(_)))
        .count();
    assert_eq!(comments, 2);
    h.answer(&request, RESULT);
    let reply = h.reply(x);
    assert_eq!(reply.messages().last().unwrap()["id"], 7);
    assert!(reply.ended);
}

/// RESUME-15 keeps the fast path: an answer given before `stream_after` is one JSON body
/// with its length, and leaves no deadline behind; `None` waits for the answer however
/// long, and `ResponseMode::Json` never streams.
#[test]
fn resume_15_a_quick_answer_stays_json_and_the_deadline_can_be_turned_off() {
    let after = Duration::from_secs(1);
    let mut h = Harness::new(Config::new().with_stream_after(Some(after)));
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    assert_eq!(
        h.server.poll_timeout(),
        Some(h.now + after),
        "the deadline is armed while the answer is awaited"
    );
    h.advance(Duration::from_millis(999));
    h.answer(&request, RESULT);
    let reply = h.reply(x);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.header("content-length"),
        Some(reply.body.len().to_string().as_str())
    );
    assert!(
        h.server.poll_timeout().is_none_or(|t| t > h.now + after),
        "no deadline left behind"
    );
    for config in [
        Config::new().with_stream_after(None),
        Config::new()
            .with_response_mode(ResponseMode::Json)
            .with_stream_after(Some(after)),
    ] {
        let mut h = Harness::new(config);
        let (sid, _) = h.initialize(V3);
        let x = h.post(Some(&sid), Some(V3), CALL);
        let request = h.take_request();
        h.advance(Duration::from_secs(60));
        assert!(h.reply(x).head.is_none());
        h.answer(&request, RESULT);
        assert_eq!(h.reply(x).header("content-type"), Some("application/json"));
    }
}

#[test]
fn http_post_12_a_disconnect_is_not_a_cancellation() {
    let mut h = Harness::new(Config::new().with_response_mode(ResponseMode::Sse));
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    h.server.handle_disconnect(h.now, x);
    h.drain();
    assert!(
        h.take_events().is_empty(),
        "no cancellation reaches the application"
    );
    let result = json(RESULT);
    assert_eq!(
        h.server.respond(h.now, request.handle(), &result),
        Ok(Delivery::Retained)
    );
}

#[test]
fn json_response_mode_sends_related_messages_to_the_get_stream() {
    let mut h = Harness::new(Config::new().with_response_mode(ResponseMode::Json));
    let (sid, _) = h.initialize(V3);
    let g = h.get(&sid, None);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    h.server
        .notify(
            h.now,
            Target::Request(request.handle()),
            "notifications/progress",
            None,
        )
        .unwrap();
    h.answer(&request, RESULT);
    assert_eq!(h.reply(x).header("content-type"), Some("application/json"));
    let on_get = h.reply(g).messages();
    assert_eq!(on_get.len(), 1);
    assert_eq!(on_get[0]["method"], "notifications/progress");
}

#[test]
fn http_get_1_http_get_3_http_get_4_http_get_5_http_get_7_http_get_8_unrelated_messages_go_on_the_get_stream_only()
 {
    let mut h = Harness::new(Config::new());
    let (sid, session) = h.initialize(V3);
    let g = h.get(&sid, None);
    let reply = h.reply(g);
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    h.server
        .notify(
            h.now,
            Target::Request(request.handle()),
            "notifications/progress",
            None,
        )
        .unwrap();
    h.server
        .notify(
            h.now,
            Target::Session(session),
            "notifications/tools/list_changed",
            None,
        )
        .unwrap();
    h.drain();
    let on_get = h.reply(g).messages();
    let on_post = h.reply(x).messages();
    assert_eq!(on_get.len(), 1);
    assert_eq!(on_get[0]["method"], "notifications/tools/list_changed");
    assert_eq!(on_post.len(), 1);
    assert_eq!(on_post[0]["method"], "notifications/progress");
    // HTTP-GET-5: the response goes on the POST stream, never on the GET stream.
    h.answer(&request, RESULT);
    assert!(
        h.reply(g)
            .messages()
            .iter()
            .all(|m| m.get("result").is_none())
    );
    assert_eq!(h.reply(x).messages().last().unwrap()["id"], 7);
}

#[test]
fn http_get_2_http_get_3_accept_and_405_where_disabled_or_stateless() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V3);
    let x = h.send(
        Harness::head("GET", "/mcp", &[("mcp-session-id", &sid)]),
        None,
    );
    assert_eq!(h.reply(x).status(), 406);
    let mut h = Harness::new(Config::new().with_get_stream(false));
    let (sid, _) = h.initialize(V3);
    let x = h.get(&sid, None);
    assert_eq!(h.reply(x).status(), 405);
    assert_eq!(
        h.reply(x).header("allow"),
        Some("POST, DELETE"),
        "RFC 9110: 405 names what is allowed"
    );
    let mut h = Harness::new(Config::new().with_sessions(SessionMode::Stateless));
    let x = h.send(
        Harness::head("GET", "/mcp", &[("accept", "text/event-stream")]),
        None,
    );
    assert_eq!(h.reply(x).status(), 405);
}

#[test]
fn http_get_9_a_second_live_get_stream_is_409() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V3);
    let g = h.get(&sid, None);
    assert_eq!(h.reply(g).status(), 200);
    let again = h.get(&sid, None);
    assert_eq!(h.reply(again).status(), 409);
    h.server.handle_disconnect(h.now, g);
    let third = h.get(&sid, None);
    assert_eq!(
        h.reply(third).status(),
        200,
        "allowed once the first is gone"
    );
}

#[test]
fn get_backlog_keeps_messages_until_a_stream_connects_and_refuses_beyond_its_bound() {
    let mut h = Harness::new(Config::new().with_max_backlog(2));
    let (sid, session) = h.initialize(V3);
    for n in 0..2 {
        let params = json(if n == 0 { r#"{"n":0}"# } else { r#"{"n":1}"# });
        h.server
            .notify(
                h.now,
                Target::Session(session),
                "notifications/message",
                Some(&params),
            )
            .unwrap();
    }
    assert_eq!(
        h.server.notify(
            h.now,
            Target::Session(session),
            "notifications/message",
            None
        ),
        Err(SendError::BacklogFull)
    );
    let g = h.get(&sid, None);
    let messages = h.reply(g).messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["params"]["n"], 0);
    assert_eq!(messages[1]["params"]["n"], 1);
}

#[test]
fn http_delete_1_http_delete_3_session_7_delete_ends_the_session_and_its_streams() {
    let mut h = Harness::new(Config::new());
    let (sid, session) = h.initialize(V3);
    let g = h.get(&sid, None);
    let x = h.send(
        Harness::head(
            "DELETE",
            "/mcp",
            &[("mcp-session-id", &sid), ("mcp-protocol-version", V3)],
        ),
        None,
    );
    assert_eq!(h.reply(x).status(), 200);
    assert!(h.reply(g).ended, "its streams close");
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        Event::SessionClosed { session: s, reason: CloseReason::Deleted } if *s == session
    )));
    let later = h.post(Some(&sid), Some(V3), CALL);
    assert_eq!(h.reply(later).status(), 404);
    assert!(h.server.is_idle());
}

#[test]
fn http_delete_2_delete_may_be_refused_with_405() {
    let mut h = Harness::new(Config::new().with_delete(false));
    let (sid, _) = h.initialize(V3);
    let x = h.send(
        Harness::head("DELETE", "/mcp", &[("mcp-session-id", &sid)]),
        None,
    );
    assert_eq!(h.reply(x).status(), 405);
    let again = h.post(Some(&sid), Some(V3), r#"{"jsonrpc":"2.0","method":"n"}"#);
    assert_eq!(h.reply(again).status(), 202, "the session lives on");
}

#[test]
fn session_1_session_2_session_3_ids_are_minted_on_initialize_from_the_entropy_and_visible_ascii() {
    let mut a = Harness::new(Config::new());
    let mut b = Harness::new(Config::new());
    let (one, _) = a.initialize(V3);
    let (two, _) = a.initialize(V3);
    assert_ne!(one, two);
    assert_eq!(one.len(), 32, "128 bits");
    assert!(one.bytes().all(|c| (0x21..=0x7e).contains(&c)));
    // Same entropy, same ids: the core draws no randomness of its own.
    assert_eq!(b.initialize(V3).0, one);
}

#[test]
fn session_5_session_6_session_7_a_missing_id_is_400_an_unknown_one_404() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V3);
    let x = h.post(None, Some(V3), CALL);
    assert_eq!(h.reply(x).status(), 400);
    let x = h.post(Some("0123456789abcdef0123456789abcdef"), Some(V3), CALL);
    assert_eq!(h.reply(x).status(), 404);
    assert_eq!(error_code(&h.reply(x)), -32001);
    let x = h.post(Some(&sid), Some(V3), CALL);
    assert!(
        h.reply(x).head.is_none(),
        "accepted, awaiting the application"
    );
}

#[test]
fn session_7_an_idle_session_expires_and_leaves_no_state() {
    let mut h = Harness::new(Config::new().with_session_idle(Duration::from_secs(60)));
    let (sid, session) = h.initialize(V3);
    h.advance(Duration::from_secs(30));
    let x = h.post(Some(&sid), Some(V3), r#"{"jsonrpc":"2.0","method":"n"}"#);
    assert_eq!(h.reply(x).status(), 202);
    h.advance(Duration::from_secs(45));
    assert_eq!(h.server.session_count(), 1, "the request renewed it");
    h.advance(Duration::from_secs(20));
    assert_eq!(h.server.session_count(), 0);
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        Event::SessionClosed { session: s, reason: CloseReason::Expired } if *s == session
    )));
    let x = h.post(Some(&sid), Some(V3), CALL);
    assert_eq!(h.reply(x).status(), 404);
    assert!(h.server.is_idle());
}

#[test]
fn session_7_a_session_with_a_live_stream_does_not_expire() {
    let mut h = Harness::new(
        Config::new()
            .with_session_idle(Duration::from_secs(60))
            .with_heartbeat(None),
    );
    let (sid, _) = h.initialize(V3);
    let g = h.get(&sid, None);
    h.advance(Duration::from_secs(600));
    assert_eq!(h.server.session_count(), 1);
    h.server.handle_disconnect(h.now, g);
    h.advance(Duration::from_secs(61));
    assert_eq!(h.server.session_count(), 0);
}

#[test]
fn session_9_jsonrpc_3_request_ids_are_scoped_to_their_session() {
    let mut h = Harness::new(Config::new());
    let (a, _) = h.initialize(V3);
    let (b, _) = h.initialize(V3);
    let xa = h.post(Some(&a), Some(V3), CALL);
    let xb = h.post(Some(&b), Some(V3), CALL);
    let ra = h.take_request();
    let rb = h.take_request();
    assert_ne!(ra.handle(), rb.handle());
    // The same id again in session a while in flight: -32600 for it, the first unharmed.
    let dup = h.post(Some(&a), Some(V3), CALL);
    assert_eq!(error_code(&h.reply(dup)), -32600);
    h.answer(&rb, r#"{"who":"b"}"#);
    h.answer(&ra, r#"{"who":"a"}"#);
    assert_eq!(h.reply(xa).json()["result"]["who"], "a");
    assert_eq!(h.reply(xb).json()["result"]["who"], "b");
}

#[test]
fn session_11_a_second_initialize_on_a_session_is_refused() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V3);
    let x = h.post(
        Some(&sid),
        Some(V3),
        r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
    );
    let reply = h.reply(x);
    assert_eq!(reply.status(), 400);
    assert_eq!(error_code(&reply), -32600);
    assert_eq!(reply.json()["id"], 5);
}

#[test]
fn sessions_are_bounded_with_503_and_retry_after_when_every_one_is_active() {
    let mut h = Harness::new(Config::new().with_max_sessions(1));
    let (sid, _) = h.initialize(V3);
    let g = h.get(&sid, None);
    assert_eq!(
        h.reply(g).status(),
        200,
        "a live GET stream: an active session"
    );
    let x = h.post(
        None,
        None,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
    );
    let reply = h.reply(x);
    assert_eq!(reply.status(), 503);
    assert!(reply.header("retry-after").is_some());
}

/// A bare `initialize`: the session it mints, whose client never comes back.
fn bare_initialize(h: &mut Harness) -> String {
    let x = h.post(
        None,
        None,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
    );
    let request = h.take_request();
    h.answer(&request, r#"{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"h","version":"1"}}"#);
    let reply = h.reply(x);
    assert_eq!(
        reply.status(),
        200,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.header("mcp-session-id").unwrap().to_owned()
}

fn ping(h: &mut Harness, sid: &str) -> u16 {
    let x = h.post(
        Some(sid),
        Some(V3),
        r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#,
    );
    if h.reply(x).head.is_none() {
        let request = h.take_request();
        h.answer(&request, "{}");
    }
    h.reply(x).status()
}

fn evicted(h: &mut Harness) -> Vec<SessionId> {
    h.take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::SessionClosed {
                session,
                reason: CloseReason::Evicted,
            } => Some(session),
            _ => None,
        })
        .collect()
}

/// A session whose client never came back after `initialize` expires after the
/// handshake timeout; once its client came back, the idle time applies (SESSION-7).
#[test]
fn session_7_a_session_whose_handshake_never_completes_expires_after_the_handshake_timeout() {
    let config = Config::new().with_handshake_timeout(Duration::from_secs(10));
    let mut h = Harness::new(config);
    let bare = bare_initialize(&mut h);
    let (complete, _) = h.initialize(V3);
    h.advance(Duration::from_secs(9));
    assert_eq!(h.server.session_count(), 2);
    h.advance(Duration::from_secs(2));
    assert_eq!(h.server.session_count(), 1);
    assert_eq!(ping(&mut h, &bare), 404);
    assert_eq!(ping(&mut h, &complete), 200);
}

/// SESSION-8: at the session bound, an `initialize` evicts the idle session closest to
/// its expiry (never-completed handshakes first, then the least recently active); its
/// client gets 404 and initializes again. Sessions with a stream or a request in flight
/// are never evicted.
#[test]
fn session_8_a_full_server_evicts_the_idle_session_closest_to_its_expiry() {
    let mut h = Harness::new(Config::new().with_max_sessions(3));
    let (older, _) = h.initialize(V3);
    h.advance(Duration::from_secs(1));
    let (newer, _) = h.initialize(V3);
    h.advance(Duration::from_secs(1));
    let bare = bare_initialize(&mut h);
    h.take_events();
    // Full: the bare session goes first, though it is the newest.
    let fourth = bare_initialize(&mut h);
    assert_eq!(evicted(&mut h).len(), 1);
    assert_eq!(ping(&mut h, &bare), 404);
    // Then the least recently active: `older`, unless it was used since.
    assert_eq!(ping(&mut h, &older), 200);
    h.advance(Duration::from_secs(1));
    assert_eq!(ping(&mut h, &fourth), 200, "its handshake completes");
    let _fifth = bare_initialize(&mut h);
    assert_eq!(evicted(&mut h).len(), 1);
    assert_eq!(ping(&mut h, &newer), 404, "the least recently active went");
    assert_eq!(ping(&mut h, &older), 200);
    assert_eq!(ping(&mut h, &fourth), 200);
}

/// A flood of bare `initialize` requests at the bound evicts its own sessions: clients
/// with a stream, with a request in flight, or merely idle after their handshake keep
/// theirs.
#[test]
fn session_8_a_flood_of_bare_initializes_locks_out_no_client() {
    let mut h = Harness::new(Config::new().with_max_sessions(10));
    let (streaming, session) = h.initialize(V3);
    let g = h.get(&streaming, None);
    let (calling, _) = h.initialize(V3);
    let call = h.post(Some(&calling), Some(V3), CALL);
    let in_flight = h.take_request();
    let (idle, _) = h.initialize(V3);
    for n in 1..=1000 {
        bare_initialize(&mut h);
        assert_eq!(h.server.session_count(), (3 + n).min(10));
    }
    h.server
        .notify(
            h.now,
            Target::Session(session),
            "notifications/message",
            None,
        )
        .unwrap();
    h.drain();
    assert_eq!(h.reply(g).messages().len(), 1, "the stream still serves");
    h.answer(&in_flight, RESULT);
    assert_eq!(h.reply(call).json()["id"], 7);
    assert_eq!(ping(&mut h, &idle), 200);
    assert_eq!(ping(&mut h, &calling), 200);
}

/// `Config::with_max_sessions_per_peer`: at a peer's cap, its idle session closest to
/// expiry makes room; with every one of its sessions active it gets 503; other peers,
/// and requests whose driver names no peer, are not held to it.
#[test]
fn session_8_a_peer_at_its_cap_evicts_its_own_idle_session_only() {
    use mcpwire::server::PeerAddr;
    let mut h = Harness::new(Config::new().with_max_sessions_per_peer(Some(2)));
    let init = |h: &mut Harness, peer: Option<[u8; 4]>| {
        let mut head = mcpwire_tests::server::post_head(&[]);
        if let Some(ip) = peer {
            head.extensions.insert(PeerAddr(ip.into()));
        }
        let x = h.send(
            head,
            Some(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#),
        );
        if h.reply(x).head.is_none() {
            let request = h.take_request();
            h.answer(&request, r#"{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"h","version":"1"}}"#);
        }
        let reply = h.reply(x);
        (
            reply.status(),
            reply.header("mcp-session-id").map(str::to_owned),
        )
    };
    let a = Some([10, 0, 0, 1]);
    let (_, streaming) = init(&mut h, a);
    let streaming = streaming.unwrap();
    let g = h.get(&streaming, None);
    let (_, idle) = init(&mut h, a);
    let (_, other) = init(&mut h, Some([10, 0, 0, 2]));
    h.take_events();
    let (status, third) = init(&mut h, a);
    assert_eq!(status, 200, "the peer's idle session made room");
    assert_eq!(evicted(&mut h).len(), 1);
    assert_eq!(ping(&mut h, &idle.unwrap()), 404);
    assert_eq!(ping(&mut h, &other.unwrap()), 200, "another peer's is kept");
    // Both of its sessions active now: one streams, one has a call in flight.
    let x = h.post(third.as_deref(), Some(V3), CALL);
    let _held = h.take_request();
    let (status, _) = init(&mut h, a);
    assert_eq!(status, 503, "every session of the peer is active");
    assert!(h.reply(g).head.is_some() && h.reply(x).head.is_none());
    assert_eq!(
        init(&mut h, Some([10, 0, 0, 2])).0,
        200,
        "others still get in"
    );
    // A driver that names no peer is not held to the cap.
    for _ in 0..3 {
        assert_eq!(init(&mut h, None).0, 200);
    }
}

#[test]
fn an_initialize_answered_with_an_error_ends_its_session() {
    let mut h = Harness::new(Config::new());
    let x = h.post(
        None,
        None,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
    );
    let request = h.take_request();
    h.server
        .respond_error(
            h.now,
            request.handle(),
            ErrorCode::INVALID_PARAMS,
            "no",
            None,
        )
        .unwrap();
    h.drain();
    assert_eq!(error_code(&h.reply(x)), -32602);
    assert_eq!(h.server.session_count(), 0);
}

#[test]
fn stateless_mode_mints_no_session_and_answers_every_post() {
    let mut h = Harness::new(Config::new().with_sessions(SessionMode::Stateless));
    let x = h.post(None, None, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#);
    let init = h.take_request();
    assert_eq!(init.session(), None);
    h.answer(&init, r#"{"protocolVersion":"2025-06-18"}"#);
    assert!(h.reply(x).header("mcp-session-id").is_none());
    let x = h.post(None, Some(V2), CALL);
    let call = h.take_request();
    h.answer(&call, RESULT);
    assert_eq!(h.reply(x).json()["id"], 7);
    assert_eq!(
        h.server.request(
            h.now,
            Target::Request(call.handle()),
            "roots/list",
            None,
            None
        ),
        Err(SendError::UnknownRequest)
    );
    assert!(h.server.is_idle());
}

#[test]
fn version_1_version_2_version_4_the_header_must_name_a_served_version() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V2);
    // §14.9: any served version is taken (the conformance suite 0.1.16 sends 2025-03-26
    // on every session); the negotiated one still governs.
    for (version, status) in [
        (Some(V3), 202),
        (Some(V1), 202),
        (Some("2025-13-01"), 400),
        (Some(V2), 202),
        (None, 202),
    ] {
        let x = h.post(Some(&sid), version, r#"{"jsonrpc":"2.0","method":"n"}"#);
        let reply = h.reply(x);
        assert_eq!(reply.status(), status, "{version:?}");
        if status == 400 {
            assert_eq!(error_code(&reply), -32000);
            let message = reply.json()["error"]["message"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(
                message.contains("2025-13-01") && message.contains(V3),
                "{message}"
            );
        }
    }
    // The negotiated 2025-06-18 governs whatever the header says: no batches.
    let x = h.post(Some(&sid), Some(V1), r#"[{"jsonrpc":"2.0","method":"n"}]"#);
    assert_eq!(h.reply(x).status(), 400);
}

#[test]
fn version_3_an_absent_header_means_the_sessions_version_else_2025_03_26() {
    let batch = r#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]"#;
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V2);
    let x = h.post(Some(&sid), None, batch);
    assert_eq!(h.reply(x).status(), 400, "2025-06-18 has no batches");
    let mut h = Harness::new(Config::new().with_sessions(SessionMode::Stateless));
    let x = h.post(None, None, batch);
    assert_eq!(
        h.reply(x).status(),
        202,
        "2025-03-26 assumed: batches allowed"
    );
}

#[test]
fn version_5_jsonrpc_11_initialize_needs_no_header_and_negotiates() {
    let mut h = Harness::new(Config::new());
    let x = h.post(None, None, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#);
    let init = h.take_request();
    assert_eq!(
        init.version(),
        mcpwire::ProtocolVersion::LATEST_WITH_INITIALIZE
    );
    h.answer(&init, r#"{}"#);
    assert_eq!(h.reply(x).status(), 200);
    let _ = h.post(None, None, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#);
    assert_eq!(
        h.take_request().version(),
        mcpwire::ProtocolVersion::V2025_03_26
    );
}

/// A tools/call of revision 2026-07-28 with its `_meta` (MODERN-3).
const MODERN_CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

fn modern_post(
    h: &mut Harness,
    headers: &[(&str, &str)],
    body: &str,
) -> mcpwire_tests::server::Reply {
    let x = h.send(mcpwire_tests::server::post_head(headers), Some(body));
    h.reply(x)
}

#[test]
fn modern_5_a_2026_07_28_post_is_told_the_supported_versions_with_its_id_and_revision() {
    // A server of the session era alone (the default serves both).
    let mut h = Harness::new(Config::new().with_eras(Eras::SESSIONS));
    let reply = modern_post(
        &mut h,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ],
        MODERN_CALL,
    );
    assert_eq!(reply.status(), 400);
    assert_eq!(error_code(&reply), -32022);
    assert_eq!(reply.json()["id"], 7, "the request's id is echoed");
    let supported = reply.json()["error"]["data"]["supported"].clone();
    assert!(supported.as_array().unwrap().iter().any(|v| v == V3));
    assert_eq!(reply.json()["error"]["data"]["requested"], "2026-07-28");
}

#[test]
fn modern_4_modern_20_a_2026_07_28_post_gets_the_error_of_its_first_fault() {
    let mut h = Harness::new(Config::new().with_eras(Eras::SESSIONS));
    let all = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];
    // No `_meta`: -32602 before any header comparison.
    let reply = modern_post(&mut h, &all, CALL);
    assert_eq!((reply.status(), error_code(&reply)), (400, -32602));
    assert_eq!(reply.json()["id"], 7);
    // Header and `_meta` name different revisions: -32020, before the revision is
    // looked at (MODERN-4). The checks after it (a served revision, `Mcp-Method`,
    // `Mcp-Name`, removed methods) are proved in the core's unit tests: while the
    // revision is not served, -32022 comes first.
    let v999 = MODERN_CALL.replace("\"2026-07-28\"", "\"v999\"");
    let reply = modern_post(&mut h, &all, &v999);
    assert_eq!((reply.status(), error_code(&reply)), (400, -32020));
}

#[test]
fn http_post_4_batch_1_batch_2_batch_3_a_2025_03_26_batch_is_answered_with_an_array() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V1);
    let x = h.post(
        Some(&sid),
        None,
        r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":2,"method":"b"}]"#,
    );
    let first = h.take_request();
    let second = h.take_request();
    h.answer(&second, r#"{"n":2}"#);
    assert!(h.reply(x).head.is_none(), "waits for every response");
    h.answer(&first, r#"{"n":1}"#);
    let body = h.reply(x).json();
    let array = body.as_array().expect("an array");
    assert_eq!(array.len(), 2);
    assert_eq!(array[0]["id"], 2);
    assert_eq!(array[1]["id"], 1);
    let x = h.post(Some(&sid), None, r#"[{"jsonrpc":"2.0","method":"n"}]"#);
    assert_eq!(h.reply(x).status(), 202, "BATCH-3: no requests, 202");
}

#[test]
fn batch_5_an_empty_batch_is_one_invalid_request_and_a_bad_element_its_own_error() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V1);
    let x = h.post(Some(&sid), None, "[]");
    let reply = h.reply(x);
    assert_eq!(reply.status(), 400);
    assert_eq!(error_code(&reply), -32600);
    let x = h.post(
        Some(&sid),
        None,
        r#"[{"jsonrpc":"2.0","id":"bad"},{"jsonrpc":"2.0","id":3,"method":"ok"}]"#,
    );
    let ok = h.take_request();
    h.answer(&ok, "{}");
    let body = h.reply(x).json();
    let array = body.as_array().unwrap();
    assert_eq!(array.len(), 2);
    assert_eq!(array[0]["error"]["code"], -32600);
    assert_eq!(array[0]["id"], "bad");
    assert_eq!(array[1]["id"], 3);
}

#[test]
fn batch_4_batch_6_initialize_in_a_batch_and_batches_after_2025_03_26_are_refused() {
    let mut h = Harness::new(Config::new());
    let x = h.post(
        None,
        None,
        r#"[{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}]"#,
    );
    let reply = h.reply(x);
    assert_eq!(
        reply.status(),
        400,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), r#"[{"jsonrpc":"2.0","method":"n"}]"#);
    assert_eq!(h.reply(x).status(), 400);
    assert_eq!(error_code(&h.reply(x)), -32600);
}

#[test]
fn sec_1_sec_2_a_present_foreign_origin_is_403_an_absent_one_passes() {
    let mut h = Harness::new(Config::new());
    let headers = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
        ("origin", "http://evil.example"),
    ];
    let x = h.send(Harness::head("POST", "/mcp", &headers), Some(CALL));
    let reply = h.reply(x);
    assert_eq!(reply.status(), 403);
    assert!(reply.json()["id"].is_null());
    let headers = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
        ("origin", "http://localhost:5173"),
    ];
    let x = h.send(
        Harness::head("POST", "/mcp", &headers),
        Some(r#"{"jsonrpc":"2.0","method":"n"}"#),
    );
    assert_eq!(
        h.reply(x).status(),
        400,
        "past the origin check: no session header"
    );
    let mut h =
        Harness::new(Config::new().with_origins(Allow::List(vec!["https://app.example".into()])));
    let headers = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
        ("origin", "http://localhost"),
    ];
    let x = h.send(Harness::head("POST", "/mcp", &headers), Some(CALL));
    assert_eq!(h.reply(x).status(), 403);
}

#[test]
fn sec_7_a_foreign_host_is_403_against_dns_rebinding() {
    let mut h = Harness::new(Config::new());
    let head = http::Request::post("/mcp")
        .header("host", "attacker.example:8080")
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let x = h.send(head, Some(CALL));
    assert_eq!(h.reply(x).status(), 403);
    assert!(h.take_events().is_empty());
}

#[test]
fn sec_4_sec_5_sec_6_the_authorizer_refuses_with_401_and_www_authenticate() {
    let mut h = Harness::new(Config::new());
    h.server
        .set_authorizer(Some(Box::new(|head: &http::request::Parts| {
            match head.headers.get("authorization") {
                Some(v) if v == "Bearer good" => Ok(()),
                Some(_) => Err(Refusal::forbidden()),
                None => Err(Refusal::unauthorized(
                    "https://mcp.example/.well-known/oauth-protected-resource",
                    Some("tools"),
                )),
            }
        })));
    let x = h.post(None, None, CALL);
    let reply = h.reply(x);
    assert_eq!(reply.status(), 401);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(
            r#"Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource", scope="tools""#
        )
    );
    let headers = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
        ("authorization", "Bearer bad"),
    ];
    let x = h.send(Harness::head("POST", "/mcp", &headers), Some(CALL));
    assert_eq!(h.reply(x).status(), 403);
    let headers = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
        ("authorization", "Bearer good"),
    ];
    let x = h.send(
        Harness::head("POST", "/mcp", &headers),
        Some(r#"{"jsonrpc":"2.0","method":"n"}"#),
    );
    assert_eq!(
        h.reply(x).status(),
        400,
        "authorized; then the missing session"
    );
}

#[test]
fn status_precedence_14_13_origin_before_accept_before_content_type_before_parse() {
    let mut h = Harness::new(Config::new());
    type Headers<'a> = &'a [(&'a str, &'a str)];
    let cases: [(Headers<'_>, &str, u16); 4] = [
        (
            &[("origin", "http://evil.example"), ("accept", "text/html")],
            "{",
            403,
        ),
        (
            &[("accept", "text/html"), ("content-type", "text/plain")],
            "{",
            406,
        ),
        (
            &[("accept", ACCEPT_BOTH), ("content-type", "text/plain")],
            "{",
            415,
        ),
        (
            &[
                ("accept", ACCEPT_BOTH),
                ("content-type", "application/json"),
            ],
            "{",
            400,
        ),
    ];
    for (headers, body, status) in cases {
        let x = h.send(Harness::head("POST", "/mcp", headers), Some(body));
        assert_eq!(h.reply(x).status(), status, "{headers:?}");
    }
}

#[test]
fn server_requests_are_correlated_within_their_session_and_time_out() {
    let mut h = Harness::new(Config::new());
    let (a, sa) = h.initialize(V3);
    let (b, _) = h.initialize(V3);
    let g = h.get(&a, None);
    let deadline = h.now + Duration::from_secs(5);
    let id = h
        .server
        .request(
            h.now,
            Target::Session(sa),
            "roots/list",
            None,
            Some(deadline),
        )
        .unwrap();
    h.drain();
    let sent = h.reply(g).messages();
    assert_eq!(sent[0]["method"], "roots/list");
    let response = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"roots":[]}}}}"#,
        sent[0]["id"]
    );
    // From another session: not correlated (strict isolation).
    let x = h.post(Some(&b), Some(V3), &response);
    assert_eq!(h.reply(x).status(), 202);
    assert!(h.take_events().is_empty());
    let x = h.post(Some(&a), Some(V3), &response);
    assert_eq!(h.reply(x).status(), 202);
    let events = h.take_events();
    let [Event::Response { session, message }] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(*session, sa);
    assert_eq!(message.id(), Some(&id));
    // One that gets no answer times out.
    let late = h
        .server
        .request(h.now, Target::Session(sa), "ping", None, Some(deadline))
        .unwrap();
    h.advance(Duration::from_secs(6));
    let events = h.take_events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::RequestTimedOut { id, .. } if *id == late))
    );
}

#[test]
fn cancelled_reaches_the_application_and_the_stream_no_longer_waits() {
    let mut h = Harness::new(Config::new().with_response_mode(ResponseMode::Sse));
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    let c = h.post(
        Some(&sid),
        Some(V3),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}"#,
    );
    assert_eq!(h.reply(c).status(), 202);
    let events = h.take_events();
    let [Event::Cancelled { request: r, reason }] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(*r, request.handle());
    assert_eq!(reason.as_deref(), Some("user"));
    assert!(h.reply(x).ended, "the stream owes nothing more");
    let result = json(RESULT);
    assert_eq!(
        h.server.respond(h.now, request.handle(), &result),
        Err(SendError::UnknownRequest)
    );
}

#[test]
fn heartbeats_are_comments_on_idle_streams() {
    let mut h = Harness::new(Config::new().with_heartbeat(Some(Duration::from_secs(15))));
    let (sid, session) = h.initialize(V3);
    let g = h.get(&sid, None);
    h.advance(Duration::from_secs(10));
    h.server
        .notify(h.now, Target::Session(session), "n", None)
        .unwrap();
    h.advance(Duration::from_secs(10));
    let comments = |h: &Harness| {
        h.reply(g)
            .items()
            .iter()
            .filter(|i| matches!(i, mcpwire::sse::Item::Comment(_)))
            .count()
    };
    assert_eq!(comments(&h), 0, "a write 10 s ago: not idle yet");
    h.advance(Duration::from_secs(6));
    assert_eq!(comments(&h), 1);
    h.advance(Duration::from_secs(15));
    assert_eq!(comments(&h), 2);
}

#[test]
fn http_get_10_modern_2_a_2026_07_28_get_or_delete_is_405() {
    let mut h = Harness::new(Config::new());
    for method in ["GET", "DELETE"] {
        let headers = [
            ("accept", "text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
        ];
        let x = h.send(Harness::head(method, "/mcp", &headers), None);
        assert_eq!(h.reply(x).status(), 405, "{method}");
    }
}

#[test]
fn batch_a_request_cancelled_in_its_own_batch_is_not_owed() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize(V1);
    let x = h.post(
        Some(&sid),
        None,
        r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}},{"jsonrpc":"2.0","id":2,"method":"b"}]"#,
    );
    let events = h.take_events();
    assert!(matches!(
        events[..],
        [
            Event::Request(_),
            Event::Cancelled { .. },
            Event::Request(_)
        ]
    ));
    let Event::Request(second) = &events[2] else {
        unreachable!()
    };
    h.answer(second, "{}");
    let body = h.reply(x).json();
    assert_eq!(body.as_array().unwrap().len(), 1);
    assert_eq!(body[0]["id"], 2);
}

#[test]
fn session_2_an_entropy_source_that_repeats_gets_503_not_a_hang_and_never_a_shared_id() {
    let mut h = Harness::new(Config::new());
    h.server = mcpwire::server::Server::new(Config::new(), Box::new(|b: &mut [u8]| b.fill(7)));
    let (first, _) = h.initialize(V3);
    let x = h.post(
        None,
        None,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
    );
    let reply = h.reply(x);
    assert_eq!(reply.status(), 503);
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("entropy")
    );
    assert_eq!(h.server.session_count(), 1);
    let x = h.post(
        Some(&first),
        Some(V3),
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert!(h.reply(x).head.is_none(), "the first session is unharmed");
    assert_eq!(h.take_request().method(), "ping");
}

/// HTTP-POST-8, HTTP-POST-11: a driver that takes an SSE response's head only after the
/// application answered (as `mcpwire-tokio` does for a handler that finishes at once)
/// gets the whole stream with its length, so it is framed as one known-length body; a
/// head taken while the stream is still open has none, and the body is streamed.
#[test]
fn http_post_8_http_post_11_a_head_taken_after_the_whole_stream_carries_its_length() {
    use mcpwire::server::Transmit;
    use mcpwire_tests::server::{counter_entropy, initialize_core, post_head};

    let config = Config::new().with_response_mode(ResponseMode::Sse);
    let mut server = mcpwire::server::Server::new(config, counter_entropy(1));
    let now = std::time::Instant::now();
    let sid = initialize_core(&mut server, now, V3);
    let headers = [
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", V3),
    ];

    for answer_first in [true, false] {
        let x = server.handle_head(now, post_head(&headers));
        server.handle_body(now, x, bytes::Bytes::from_static(CALL.as_bytes()));
        server.handle_body_end(now, x);
        let Some(Event::Request(request)) = server.poll_event() else {
            panic!("the request reaches the application");
        };
        let mut transmits = Vec::new();
        if !answer_first {
            // The head (and the priming event) are ready before the answer.
            assert_eq!(server.poll_ready(), Some(x));
            transmits.extend(server.poll_transmit(x));
        }
        server
            .respond(now, request.handle(), &json(RESULT))
            .expect("answered");
        while let Some(t) = server.poll_transmit(x) {
            transmits.push(t);
        }
        let Some(Transmit::Head(head)) = transmits.first() else {
            panic!("the head comes first: {transmits:?}");
        };
        assert_eq!(head.headers["content-type"], "text/event-stream");
        let body: Vec<u8> = transmits
            .iter()
            .filter_map(|t| match t {
                Transmit::Data(bytes) => Some(bytes.to_vec()),
                _ => None,
            })
            .flatten()
            .collect();
        assert!(matches!(transmits.last(), Some(Transmit::End)));
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(text.contains(r#""text":"hi""#), "{text}");
        let length = head.headers.get("content-length");
        if answer_first {
            assert_eq!(
                length.map(|v| v.to_str().unwrap().parse::<usize>().unwrap()),
                Some(body.len())
            );
        } else {
            assert_eq!(length, None, "a stream still open has no length");
        }
    }
}
