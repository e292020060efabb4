//! The client's requirements, against the real server core in memory (`Pair`) or fed by
//! hand: HTTP-POST-*, HTTP-GET-*, SESSION-*, VERSION-*, RESUME-*, LEGACY-6, JSONRPC-*.

use std::time::Duration;

use bytes::Bytes;
use mcpwire::Era;
use mcpwire::ProtocolVersion;
use mcpwire::client::{self, Client, RequestError};
use mcpwire::jsonrpc::RawJson;
use mcpwire::resume::{RingLimits, StoreLimits};
use mcpwire::server::{self, LegacyPaths, ResponseMode, SessionMode, Target};
use mcpwire_tests::pair::Pair;
use mcpwire_tests::server::counter_entropy;

fn pair(server: server::Config) -> Pair {
    Pair::new(server, sessions())
}

/// A client of the session era: what these tests are about (the default finds the
/// sessionless revision first, and the default server serves it).
fn sessions() -> client::Config {
    client::Config::new(Pair::endpoint()).with_revision(client::Revision::Era(Era::Sessions))
}

fn header<'a>(head: &'a http::request::Parts, name: &str) -> Option<&'a str> {
    head.headers.get(name).and_then(|v| v.to_str().ok())
}

fn responses(p: &mut Pair) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    p.client_events.retain(|e| match e {
        client::Event::Response(m) => {
            out.push(serde_json::from_str(m.text().as_str()).unwrap());
            false
        }
        _ => true,
    });
    out
}

fn failures(p: &mut Pair) -> Vec<RequestError> {
    let mut out = Vec::new();
    p.client_events.retain(|e| match e {
        client::Event::Failed { error, .. } => {
            out.push(error.clone());
            false
        }
        _ => true,
    });
    out
}

fn call(p: &mut Pair) -> mcpwire::jsonrpc::RequestId {
    let params = RawJson::new(r#"{"name":"echo","arguments":{}}"#).unwrap();
    let id = p
        .client
        .request(p.now, "tools/call", Some(&params), None)
        .unwrap();
    p.run();
    id
}

fn answer(p: &mut Pair, request: &server::IncomingRequest) {
    let result = RawJson::new(r#"{"content":[]}"#).unwrap();
    p.server.respond(p.now, request.handle(), &result).unwrap();
    p.run();
}

fn progress(p: &mut Pair, request: &server::IncomingRequest, n: u32) {
    let params = format!(r#"{{"progressToken":1,"progress":{n}}}"#);
    let params = RawJson::new(&params).unwrap();
    let _ = p
        .server
        .notify(
            p.now,
            Target::Request(request.handle()),
            "notifications/progress",
            Some(&params),
        )
        .unwrap();
    p.run();
}

#[test]
fn jsonrpc_9_jsonrpc_11_http_post_3_http_post_14_http_get_1_http_get_2_http_get_7_session_5_version_1_the_handshake_and_its_headers()
 {
    let mut p = pair(server::Config::new());
    p.connect();
    let connected = p
        .client_events
        .iter()
        .find_map(|e| match e {
            client::Event::Connected { version, era, .. } => Some((*version, *era)),
            _ => None,
        })
        .expect("connected");
    assert_eq!(connected, (ProtocolVersion::V2025_11_25, Era::Sessions));
    let init = &p.requests[0];
    assert_eq!(init.method, "POST");
    assert_eq!(
        header(init, "accept"),
        Some("application/json, text/event-stream")
    );
    assert_eq!(header(init, "content-type"), Some("application/json"));
    assert_eq!(header(init, "mcp-session-id"), None);
    let sid = p.client.session_id().unwrap().to_owned();
    for later in &p.requests[1..] {
        assert_eq!(
            header(later, "mcp-session-id"),
            Some(sid.as_str()),
            "{later:?}"
        );
        assert_eq!(header(later, "mcp-protocol-version"), Some("2025-11-25"));
    }
    // HTTP-GET-1, HTTP-GET-2: the standalone stream is opened, asking for SSE.
    let get = p
        .requests
        .iter()
        .find(|r| r.method == "GET")
        .expect("a GET");
    assert_eq!(header(get, "accept"), Some("text/event-stream"));
}

#[test]
fn http_post_7_json_and_sse_responses_are_both_read() {
    let mut p = pair(server::Config::new());
    p.connect();
    let id = call(&mut p);
    let request = p.take_server_request();
    answer(&mut p, &request);
    let got = responses(&mut p);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0]["id"],
        serde_json::to_value(id.as_int().unwrap()).unwrap()
    );
    // Now as a stream: a progress notification first opens SSE (HTTP-POST-9).
    let _ = call(&mut p);
    let request = p.take_server_request();
    progress(&mut p, &request, 1);
    answer(&mut p, &request);
    let notes: Vec<_> = p
        .client_events
        .iter()
        .filter(|e| matches!(e, client::Event::Notification(_)))
        .collect();
    assert_eq!(notes.len(), 1);
    assert_eq!(responses(&mut p).len(), 1);
}

#[test]
fn resume_8_14_5_priming_events_are_skipped_not_parsed() {
    let mut p = pair(server::Config::new().with_response_mode(ResponseMode::Sse));
    p.connect();
    let _ = call(&mut p);
    let request = p.take_server_request();
    answer(&mut p, &request);
    assert_eq!(responses(&mut p).len(), 1);
    assert!(failures(&mut p).is_empty());
}

#[test]
fn resume_4_resume_11_resume_12_a_polled_stream_is_resumed_after_retry_and_delivers_once() {
    let mut p = pair(
        server::Config::new()
            .with_response_mode(ResponseMode::Sse)
            .with_polling(Some(Duration::ZERO))
            .with_retry(Some(Duration::from_millis(1500))),
    );
    p.connect();
    let _ = call(&mut p);
    let request = p.take_server_request();
    p.advance(Duration::ZERO); // the server closes after the priming event
    let gets_before = p.requests.iter().filter(|r| r.method == "GET").count();
    p.advance(Duration::from_millis(1000));
    let gets = p.requests.iter().filter(|r| r.method == "GET").count();
    assert_eq!(
        gets, gets_before,
        "RESUME-11: not before the server's retry"
    );
    progress(&mut p, &request, 1);
    answer(&mut p, &request);
    p.advance(Duration::from_millis(600));
    let resume = p
        .requests
        .iter()
        .rev()
        .find(|r| r.method == "GET" && r.headers.contains_key("last-event-id"))
        .expect("a resume with Last-Event-ID");
    assert!(header(resume, "mcp-session-id").is_some());
    assert_eq!(responses(&mut p).len(), 1, "exactly once");
    assert_eq!(
        p.client_events
            .iter()
            .filter(|e| matches!(e, client::Event::Notification(_)))
            .count(),
        1
    );
}

#[test]
fn resume_4_a_broken_connection_is_resumed_with_the_last_id() {
    let mut p = pair(server::Config::new().with_response_mode(ResponseMode::Sse));
    p.connect();
    let _ = call(&mut p);
    let request = p.take_server_request();
    progress(&mut p, &request, 1);
    p.cut_all();
    progress(&mut p, &request, 2);
    answer(&mut p, &request);
    p.advance(Duration::from_secs(1));
    let notes = p
        .client_events
        .iter()
        .filter(|e| matches!(e, client::Event::Notification(_)))
        .count();
    assert_eq!(
        notes, 2,
        "progress 1 before the cut, 2 from the replay: none twice"
    );
    assert_eq!(responses(&mut p).len(), 1);
}

#[test]
fn resume_12_a_stream_without_ids_cannot_be_resumed_and_its_request_fails() {
    let mut p = pair(
        server::Config::new()
            .with_sessions(SessionMode::Stateless)
            .with_response_mode(ResponseMode::Sse),
    );
    p.connect();
    let _ = call(&mut p);
    let _request = p.take_server_request();
    p.cut_all();
    assert_eq!(failures(&mut p), [RequestError::StreamLost]);
}

#[test]
fn a_gap_the_server_reports_fails_exactly_the_affected_request() {
    let ring = RingLimits::new().with_max_events(2);
    let mut p = pair(
        server::Config::new()
            .with_response_mode(ResponseMode::Sse)
            .with_store_limits(StoreLimits::new().with_ring(ring)),
    );
    p.connect();
    let _ = call(&mut p);
    let lost = p.take_server_request();
    let _ = call(&mut p);
    let fine = p.take_server_request();
    progress(&mut p, &lost, 0);
    p.cut_all();
    for n in 1..5 {
        progress(&mut p, &lost, n);
    }
    answer(&mut p, &lost);
    answer(&mut p, &fine);
    p.advance(Duration::from_secs(2));
    let failed = failures(&mut p);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        matches!(&failed[0], RequestError::ResumeFailed { status: 400, message } if message.contains("no longer retained"))
    );
    assert_eq!(
        responses(&mut p).len(),
        1,
        "the other request's stream resumed fine"
    );
}

#[test]
fn session_8_a_404_ends_the_session_and_the_client_reinitializes_when_configured() {
    let server = server::Config::new().with_session_idle(Duration::from_secs(10));
    let client = sessions().with_reinitialize(true).with_get_stream(false);
    let mut p = Pair::new(server, client);
    p.connect();
    let old = p.client.session_id().unwrap().to_owned();
    p.advance(Duration::from_secs(11));
    let _ = call(&mut p);
    assert!(
        p.client_events
            .iter()
            .any(|e| matches!(e, client::Event::SessionExpired))
    );
    assert_eq!(failures(&mut p), [RequestError::SessionExpired]);
    p.accept_initialize();
    assert!(p.client.is_connected());
    assert_ne!(p.client.session_id(), Some(old.as_str()));
}

#[test]
fn http_get_3_a_405_to_get_is_benign_and_not_retried() {
    let mut p = pair(server::Config::new().with_get_stream(false));
    p.connect();
    p.advance(Duration::from_secs(120));
    let gets = p.requests.iter().filter(|r| r.method == "GET").count();
    assert_eq!(gets, 1);
    assert!(p.client.is_connected());
    assert!(
        !p.client_events
            .iter()
            .any(|e| matches!(e, client::Event::Failed { .. } | client::Event::Closed))
    );
}

#[test]
fn legacy_6_a_404_to_initialize_falls_back_to_http_sse() {
    let server = server::Config::new()
        .with_endpoint("/streamable")
        .with_legacy(Some(LegacyPaths {
            sse: "/mcp".into(),
            messages: "/messages".into(),
        }));
    let mut p = pair(server);
    p.client.connect(p.now);
    p.run();
    p.accept_initialize();
    assert_eq!(p.client.era(), Era::HttpSse);
    assert!(p.client.is_connected(), "{:?}", p.client_events);
    assert_eq!(p.client.version(), Some(ProtocolVersion::V2024_11_05));
    let _ = call(&mut p);
    let request = p.take_server_request();
    answer(&mut p, &request);
    assert_eq!(responses(&mut p).len(), 1);
    let post = p
        .requests
        .iter()
        .rev()
        .find(|r| r.method == "POST")
        .unwrap();
    assert!(
        post.uri
            .to_string()
            .starts_with("http://127.0.0.1:8080/messages?sessionId=")
    );
}

/// SESSION-8 on the legacy transport, reached by the fallback or spoken from the start:
/// when the server ends the session (its stream ends), the client initializes a new one
/// exactly as it found the first (not by POSTing to the old session's message URI, and
/// reading the new stream's `endpoint` event), and the new session serves calls.
#[test]
fn session_8_legacy_6_an_ended_legacy_session_is_reinitialized_the_way_it_was_found() {
    for legacy_only in [false, true] {
        let server = server::Config::new()
            .with_endpoint("/streamable")
            .with_legacy(Some(LegacyPaths {
                sse: "/mcp".into(),
                messages: "/messages".into(),
            }));
        let client = sessions()
            .with_reinitialize(true)
            .with_legacy_only(legacy_only);
        let mut p = Pair::new(server, client);
        p.connect();
        assert_eq!(p.client.era(), Era::HttpSse);
        let _ = call(&mut p);
        let request = p.take_server_request();
        let old = request.session().expect("a legacy session");
        answer(&mut p, &request);
        assert_eq!(responses(&mut p).len(), 1);
        assert!(p.server.close_session(p.now, old));
        p.run();
        assert!(
            p.client_events
                .iter()
                .any(|e| matches!(e, client::Event::SessionExpired)),
            "{legacy_only}: {:?}",
            p.client_events
        );
        p.client_events.clear();
        p.accept_initialize();
        assert!(
            p.client.is_connected(),
            "{legacy_only}: {:?}",
            p.client_events
        );
        assert_eq!(p.client.era(), Era::HttpSse);
        let _ = call(&mut p);
        let request = p.take_server_request();
        assert_ne!(request.session(), Some(old), "{legacy_only}");
        answer(&mut p, &request);
        assert_eq!(responses(&mut p).len(), 1, "{legacy_only}");
        assert!(failures(&mut p).is_empty(), "{legacy_only}");
    }
}

#[test]
fn http_post_12_requests_time_out_and_are_cancelled_at_the_server() {
    let mut p = pair(server::Config::new());
    p.connect();
    let deadline = p.now + Duration::from_secs(5);
    let id = p
        .client
        .request(p.now, "tools/call", None, Some(deadline))
        .unwrap();
    p.run();
    let request = p.take_server_request();
    p.advance(Duration::from_secs(6));
    assert!(p.client_events.iter().any(
        |e| matches!(e, client::Event::Failed { id: i, error: RequestError::Timeout } if *i == id)
    ));
    assert!(p.server_events.iter().any(
        |e| matches!(e, server::Event::Cancelled { request: r, .. } if *r == request.handle())
    ));
}

#[test]
fn server_requests_reach_the_application_and_its_answer_goes_back() {
    let mut p = pair(server::Config::new());
    p.connect();
    let sid = p.client.session_id().unwrap().to_owned();
    let _ = call(&mut p);
    let request = p.take_server_request();
    let handle = request.session().unwrap();
    assert_eq!(p.server.session_header(handle), Some(sid.as_str()));
    let id = p
        .server
        .request(p.now, Target::Session(handle), "roots/list", None, None)
        .unwrap();
    p.run();
    let asked = p
        .client_events
        .iter()
        .find_map(|e| match e {
            client::Event::Request(m) => m.id().cloned(),
            _ => None,
        })
        .expect("the server's request reached the client");
    assert_eq!(asked, id);
    let result = RawJson::new(r#"{"roots":[]}"#).unwrap();
    p.client.respond(p.now, &asked, &result).unwrap();
    p.run();
    assert!(p.server_events.iter().any(
        |e| matches!(e, server::Event::Response { message, .. } if message.id() == Some(&id))
    ));
}

#[test]
fn a_server_ping_is_answered_by_the_client_core_and_an_error_answer_goes_back() {
    let mut p = pair(server::Config::new());
    p.connect();
    let _ = call(&mut p);
    let request = p.take_server_request();
    let handle = request.session().unwrap();
    let ping = p
        .server
        .request(p.now, Target::Session(handle), "ping", None, None)
        .unwrap();
    let roots = p
        .server
        .request(p.now, Target::Session(handle), "roots/list", None, None)
        .unwrap();
    p.run();
    // The ping never reaches the application; its empty result is back at the server.
    let asked: Vec<_> = p
        .client_events
        .iter()
        .filter_map(|e| match e {
            client::Event::Request(m) => m.id().cloned(),
            _ => None,
        })
        .collect();
    assert_eq!(asked, std::slice::from_ref(&roots));
    let ping_answer = p.server_events.iter().find_map(|e| match e {
        server::Event::Response { message, .. } if message.id() == Some(&ping) => {
            Some(message.text().as_str().to_owned())
        }
        _ => None,
    });
    let ping_answer: serde_json::Value =
        serde_json::from_str(&ping_answer.expect("the ping's answer")).unwrap();
    assert_eq!(ping_answer["result"], serde_json::json!({}));
    // The application declines the other one with an error.
    p.client
        .respond_error(
            p.now,
            &roots,
            mcpwire::jsonrpc::ErrorCode::METHOD_NOT_FOUND,
            "no roots here",
        )
        .unwrap();
    p.run();
    let declined = p.server_events.iter().find_map(|e| match e {
        server::Event::Response { message, .. } if message.id() == Some(&roots) => {
            Some(message.text().as_str().to_owned())
        }
        _ => None,
    });
    let declined: serde_json::Value =
        serde_json::from_str(&declined.expect("the error answer")).unwrap();
    assert_eq!(declined["error"]["code"], -32601);
    assert_eq!(declined["error"]["message"], "no roots here");
}

#[test]
fn http_delete_1_close_deletes_the_session() {
    let mut p = pair(server::Config::new());
    p.connect();
    p.client.close(p.now);
    p.run();
    assert_eq!(p.requests.last().unwrap().method, "DELETE");
    assert_eq!(p.server.session_count(), 0);
    assert!(
        p.client_events
            .iter()
            .any(|e| matches!(e, client::Event::Closed))
    );
    assert!(p.client.is_idle());
}

/// A client fed by hand, for responses no conforming server sends.
fn by_hand() -> (Client, std::time::Instant, client::ExchangeId) {
    let mut c = Client::new(sessions().with_get_stream(false), counter_entropy(3));
    let now = std::time::Instant::now();
    c.connect(now);
    let Some(client::Transmit::Request { exchange, .. }) = c.poll_transmit() else {
        panic!()
    };
    (c, now, exchange)
}

fn response_head(status: u16, headers: &[(&str, &str)]) -> http::response::Parts {
    let mut b = http::Response::builder().status(status);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

/// Answers the handshake's POST `x` (from [`by_hand`]) with a JSON `InitializeResult`
/// for `version`, with `session` as its `Mcp-Session-Id` if given.
fn answer_handshake(
    c: &mut Client,
    now: std::time::Instant,
    x: client::ExchangeId,
    session: Option<&str>,
    version: &str,
) {
    let mut headers = vec![("content-type", "application/json")];
    headers.extend(session.map(|s| ("mcp-session-id", s)));
    c.handle_head(now, x, response_head(200, &headers));
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"protocolVersion":"{version}"}}}}"#);
    c.handle_body(now, x, Bytes::from(body));
    c.handle_body_end(now, x);
}

/// A handshake whose request got no response head fails with the driver's cause, so a
/// refused connection reads as one; one whose response broke after its head is a lost
/// stream, as any request's.
#[test]
fn a_handshake_with_no_response_fails_with_the_drivers_cause() {
    let failed = |c: &mut Client| match c.poll_event() {
        Some(client::Event::ConnectFailed(error)) => error,
        other => panic!("not a failed handshake: {other:?}"),
    };
    let (mut c, now, x) = by_hand();
    c.handle_failure_with(now, x, "connection refused");
    let error = failed(&mut c);
    assert_eq!(error, RequestError::Connection("connection refused".into()));
    assert_eq!(
        error.to_string(),
        "no connection to the server: connection refused"
    );
    let (mut c, now, x) = by_hand();
    c.handle_failure(now, x);
    assert!(matches!(failed(&mut c), RequestError::Connection(_)));
    let (mut c, now, x) = by_hand();
    c.handle_head(
        now,
        x,
        response_head(200, &[("content-type", "application/json")]),
    );
    c.handle_body(now, x, Bytes::from_static(b"{\"jsonrpc\""));
    c.handle_failure_with(now, x, "connection reset");
    assert_eq!(failed(&mut c), RequestError::StreamLost);
}

#[test]
fn session_3_a_session_id_that_is_not_visible_ascii_fails_the_handshake() {
    let (mut c, now, x) = by_hand();
    let head = response_head(
        200,
        &[
            ("content-type", "application/json"),
            ("mcp-session-id", "a b"),
        ],
    );
    c.handle_head(now, x, head);
    let event = c.poll_event();
    assert!(
        matches!(
            event,
            Some(client::Event::ConnectFailed(RequestError::BadResponse(_)))
        ),
        "{event:?}"
    );
}

#[test]
fn json_rpc_a_second_response_to_one_id_is_never_delivered() {
    let (mut c, now, x) = by_hand();
    answer_handshake(&mut c, now, x, None, "2025-06-18");
    assert!(matches!(
        c.poll_event(),
        Some(client::Event::Connected { .. })
    ));
    let id = c.request(now, "tools/call", None, None).unwrap();
    // The initialized notification, answered, then the request.
    let Some(client::Transmit::Request { exchange, .. }) = c.poll_transmit() else {
        panic!()
    };
    c.handle_head(now, exchange, response_head(202, &[]));
    c.handle_body_end(now, exchange);
    let Some(client::Transmit::Request { exchange, .. }) = c.poll_transmit() else {
        panic!()
    };
    c.handle_head(
        now,
        exchange,
        response_head(200, &[("content-type", "text/event-stream")]),
    );
    let answer = format!("id: e1\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n\n");
    c.handle_body(now, exchange, Bytes::from(answer.clone()));
    c.handle_body(now, exchange, Bytes::from(answer));
    c.handle_body_end(now, exchange);
    let mut got = 0;
    while let Some(e) = c.poll_event() {
        got += usize::from(matches!(e, client::Event::Response(_)));
    }
    assert_eq!(got, 1);
}

/// JSONRPC-9: the handshake ends with `notifications/initialized`, and the server sees
/// it before any request: what the application sends meanwhile goes out only once the
/// notification's POST is answered (or failed), in the order it was sent.
#[test]
fn jsonrpc_9_requests_wait_until_the_server_has_the_initialized_notification() {
    for answered in [true, false] {
        let (mut c, now, x) = by_hand();
        answer_handshake(&mut c, now, x, None, "2025-06-18");
        let first = c.request(now, "tools/list", None, None).unwrap();
        let second = c.request(now, "tools/call", None, None).unwrap();
        let mut bodies = Vec::new();
        let mut initialized = None;
        while let Some(t) = c.poll_transmit() {
            if let client::Transmit::Request {
                exchange,
                head,
                body,
            } = t
            {
                if head.method == http::Method::POST {
                    bodies.push(String::from_utf8(body.to_vec()).unwrap());
                    initialized.get_or_insert(exchange);
                }
            }
        }
        assert_eq!(bodies.len(), 1, "only the notification: {bodies:?}");
        assert!(bodies[0].contains("notifications/initialized"));
        let initialized = initialized.unwrap();
        if answered {
            c.handle_head(now, initialized, response_head(202, &[]));
        } else {
            c.handle_failure(now, initialized);
        }
        let mut later = Vec::new();
        while let Some(t) = c.poll_transmit() {
            if let client::Transmit::Request { head, body, .. } = t {
                if head.method == http::Method::POST {
                    later.push(String::from_utf8(body.to_vec()).unwrap());
                }
            }
        }
        assert_eq!(later.len(), 2, "{later:?}");
        assert!(later[0].contains(&format!(r#""id":{first}"#)), "{later:?}");
        assert!(later[1].contains(&format!(r#""id":{second}"#)), "{later:?}");
        // Once the server has it, a request goes out at once.
        let third = c.request(now, "ping", None, None).unwrap();
        let Some(client::Transmit::Request { body, .. }) = c.poll_transmit() else {
            panic!("sent at once")
        };
        assert!(
            String::from_utf8(body.to_vec())
                .unwrap()
                .contains(&format!(r#""id":{third}"#))
        );
    }
}

#[test]
fn jsonrpc_11_a_server_offering_an_unknown_version_fails_the_handshake() {
    let (mut c, now, x) = by_hand();
    answer_handshake(&mut c, now, x, None, "1999-01-01");
    assert!(matches!(
        c.poll_event(),
        Some(client::Event::ConnectFailed(_))
    ));
}

/// Connects a hand-fed client whose server answers `initialize` as JSON.
fn connected_by_hand(version: &str) -> (Client, std::time::Instant) {
    let (mut c, now, x) = by_hand();
    answer_handshake(&mut c, now, x, Some("s-1"), version);
    assert!(matches!(
        c.poll_event(),
        Some(client::Event::Connected { .. })
    ));
    // The initialized notification.
    let Some(client::Transmit::Request { exchange, .. }) = c.poll_transmit() else {
        panic!()
    };
    c.handle_head(now, exchange, response_head(202, &[]));
    c.handle_body_end(now, exchange);
    (c, now)
}

/// Sends one request; returns its id and the exchange carrying it.
fn request_by_hand(
    c: &mut Client,
    now: std::time::Instant,
) -> (mcpwire::jsonrpc::RequestId, client::ExchangeId) {
    let id = c.request(now, "tools/call", None, None).unwrap();
    let Some(client::Transmit::Request { exchange, .. }) = c.poll_transmit() else {
        panic!()
    };
    (id, exchange)
}

#[test]
fn legacy_6_14_14_an_endpoint_event_naming_another_origin_is_refused() {
    for (endpoint, ok) in [
        ("/messages?sessionId=1", true),
        ("messages?sessionId=1", true),
        ("http://127.0.0.1:8080/messages?sessionId=1", true),
        ("http://evil.example/messages?sessionId=1", false),
        ("https://127.0.0.1:8080/messages", false),
    ] {
        let (mut c, now, x) = by_hand();
        // The refusal's body is read first: it holds no modern error (MODERN-15).
        c.handle_head(now, x, response_head(404, &[]));
        c.handle_body_end(now, x);
        let Some(client::Transmit::Request {
            exchange: g, head, ..
        }) = c.poll_transmit()
        else {
            panic!()
        };
        assert_eq!(head.method, "GET");
        c.handle_head(
            now,
            g,
            response_head(200, &[("content-type", "text/event-stream")]),
        );
        c.handle_body(
            now,
            g,
            Bytes::from(format!("event: endpoint\ndata: {endpoint}\n\n")),
        );
        let next = c.poll_transmit();
        if ok {
            let Some(client::Transmit::Request { head, body, .. }) = next else {
                panic!("{endpoint}: {next:?}")
            };
            assert_eq!(head.uri.host(), Some("127.0.0.1"), "{endpoint}");
            assert!(head.uri.path().ends_with("messages"), "{endpoint}");
            assert!(String::from_utf8_lossy(&body).contains("initialize"));
        } else {
            let event = c.poll_event();
            assert!(
                matches!(
                    event,
                    Some(client::Event::ConnectFailed(RequestError::BadResponse(_)))
                ),
                "{endpoint}: {event:?}"
            );
        }
    }
}

#[test]
fn sse_parse_20_last_event_id_is_omitted_when_empty_and_a_reset_id_stops_resumes() {
    let (mut c, now) = connected_by_hand("2025-11-25");
    let (_, x) = request_by_hand(&mut c, now);
    c.handle_head(
        now,
        x,
        response_head(200, &[("content-type", "text/event-stream")]),
    );
    // An id, then `id` reset to empty (SSE-PARSE-12): no id to resume from.
    c.handle_body(
        now,
        x,
        Bytes::from_static(b"id: 5\ndata:\n\nid\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n"),
    );
    c.handle_failure(now, x);
    let mut failed = false;
    while let Some(e) = c.poll_event() {
        failed |= matches!(
            e,
            client::Event::Failed {
                error: RequestError::StreamLost,
                ..
            }
        );
    }
    assert!(failed, "no id left: the request fails instead of resuming");
}

#[test]
fn resume_11_14_10_the_servers_retry_is_honoured_up_to_the_clients_cap() {
    let (mut c, now) = connected_by_hand("2025-11-25");
    let (_, x) = request_by_hand(&mut c, now);
    c.handle_head(
        now,
        x,
        response_head(200, &[("content-type", "text/event-stream")]),
    );
    c.handle_body(
        now,
        x,
        Bytes::from_static(b"retry: 86400000\nid: a:1:0\ndata:\n\n"),
    );
    c.handle_body_end(now, x);
    assert_eq!(
        c.poll_timeout(),
        Some(now + Duration::from_secs(300)),
        "a day is capped at 5 minutes"
    );
    c.handle_timeout(now + Duration::from_secs(300));
    let Some(client::Transmit::Request { head, .. }) = c.poll_transmit() else {
        panic!()
    };
    assert_eq!(head.method, "GET");
    assert_eq!(header(&head, "last-event-id"), Some("a:1:0"));
}

#[test]
fn resume_12_the_retry_budget_runs_out_and_the_request_fails_clearly() {
    let (mut c, now) = connected_by_hand("2025-11-25");
    let (id, x) = request_by_hand(&mut c, now);
    c.handle_head(
        now,
        x,
        response_head(200, &[("content-type", "text/event-stream")]),
    );
    c.handle_body(now, x, Bytes::from_static(b"id: a:1:0\ndata:\n\n"));
    c.handle_failure(now, x);
    let mut t = now;
    let mut attempts = 0;
    while let Some(at) = c.poll_timeout() {
        t = at;
        c.handle_timeout(t);
        let Some(client::Transmit::Request { exchange, .. }) = c.poll_transmit() else {
            break;
        };
        attempts += 1;
        c.handle_failure(t, exchange);
    }
    assert_eq!(attempts, 5, "the configured budget");
    let failed = std::iter::from_fn(|| c.poll_event())
        .any(|e| matches!(e, client::Event::Failed { id: i, error: RequestError::ResumeFailed { status: 0, .. } } if i == id));
    assert!(failed);
    assert!(
        t - now >= Duration::from_secs(1 + 2 + 4 + 8) / 2,
        "backoff doubled, jitter at most halves"
    );
}

#[test]
fn jsonrpc_3_http_post_2_version_2_every_message_is_its_own_post_with_a_fresh_id() {
    let (mut c, now) = connected_by_hand("2025-06-18");
    let mut ids = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let (id, _) = request_by_hand(&mut c, now);
        assert!(ids.insert(id));
    }
    c.notify(now, "notifications/progress", None).unwrap();
    let Some(client::Transmit::Request { head, body, .. }) = c.poll_transmit() else {
        panic!()
    };
    assert_eq!(head.method, "POST");
    assert_eq!(header(&head, "mcp-session-id"), Some("s-1"));
    assert_eq!(
        header(&head, "mcp-protocol-version"),
        Some("2025-06-18"),
        "VERSION-2: the negotiated one"
    );
    assert_eq!(
        &body[..],
        br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#
    );
}

#[test]
fn legacy_6_a_refused_legacy_stream_fails_the_connection_clearly() {
    let (mut c, now, x) = by_hand();
    c.handle_head(now, x, response_head(405, &[]));
    c.handle_body_end(now, x);
    let Some(client::Transmit::Request { exchange: g, .. }) = c.poll_transmit() else {
        panic!()
    };
    c.handle_head(
        now,
        g,
        response_head(404, &[("content-type", "application/json")]),
    );
    c.handle_body_end(now, g);
    let event = c.poll_event();
    assert!(
        matches!(
            event,
            Some(client::Event::ConnectFailed(RequestError::Http {
                status: 404,
                ..
            }))
        ),
        "{event:?}"
    );
}

#[test]
fn the_handshake_times_out() {
    let (mut c, now, x) = by_hand();
    c.handle_head(now, x, response_head(202, &[]));
    assert_eq!(c.poll_timeout(), Some(now + Duration::from_secs(30)));
    c.handle_timeout(now + Duration::from_secs(30));
    assert!(matches!(
        c.poll_event(),
        Some(client::Event::ConnectFailed(RequestError::Timeout))
    ));
}

#[test]
fn sec_5_sec_6_a_401_fails_the_handshake_with_the_servers_challenge() {
    let mut p = pair(server::Config::new());
    p.server
        .set_authorizer(Some(Box::new(|_: &http::request::Parts| {
            Err(server::Refusal::unauthorized(
                "https://as.example/.well-known/oauth-protected-resource",
                None,
            ))
        })));
    p.client.connect(p.now);
    p.run();
    let failed = p.client_events.iter().find_map(|e| match e {
        client::Event::ConnectFailed(RequestError::Unauthorized { challenge }) => challenge.clone(),
        _ => None,
    });
    assert_eq!(
        failed.as_deref(),
        Some(
            r#"Bearer resource_metadata="https://as.example/.well-known/oauth-protected-resource""#
        )
    );
}

#[test]
fn session_4_the_session_id_is_not_printed_by_debug() {
    let (c, _) = connected_by_hand("2025-11-25");
    assert_eq!(c.session_id(), Some("s-1"));
    let debug = format!("{c:?}");
    assert!(!debug.contains("s-1"), "{debug}");
}

#[test]
fn resume_12_a_resumed_connection_that_brings_no_event_keeps_the_id_to_resume_from() {
    let (mut c, now) = connected_by_hand("2025-11-25");
    let (_, x) = request_by_hand(&mut c, now);
    c.handle_head(
        now,
        x,
        response_head(200, &[("content-type", "text/event-stream")]),
    );
    c.handle_body(
        now,
        x,
        Bytes::from_static(b"retry: 10\nid: a:1:0\ndata:\n\n"),
    );
    c.handle_body_end(now, x);
    let mut t = now;
    for _ in 0..3 {
        t = c.poll_timeout().expect("a resume is scheduled");
        c.handle_timeout(t);
        let Some(client::Transmit::Request { exchange, head, .. }) = c.poll_transmit() else {
            panic!()
        };
        assert_eq!(header(&head, "last-event-id"), Some("a:1:0"));
        // The server (polling) closes the resumed connection before anything new.
        c.handle_head(
            t,
            exchange,
            response_head(200, &[("content-type", "text/event-stream")]),
        );
        c.handle_body_end(t, exchange);
    }
    assert!(
        std::iter::from_fn(|| c.poll_event()).all(|e| !matches!(e, client::Event::Failed { .. }))
    );
    let _ = t;
}

#[test]
fn a_refused_resume_of_the_get_stream_is_reported_and_a_fresh_one_opened() {
    let (mut c, now) = {
        let mut c = Client::new(sessions(), counter_entropy(3));
        let now = std::time::Instant::now();
        c.connect(now);
        let Some(client::Transmit::Request { exchange: x, .. }) = c.poll_transmit() else {
            panic!()
        };
        answer_handshake(&mut c, now, x, Some("s-1"), "2025-11-25");
        (c, now)
    };
    let mut gets = Vec::new();
    while let Some(t) = c.poll_transmit() {
        if let client::Transmit::Request { exchange, head, .. } = t
            && head.method == "GET"
        {
            gets.push(exchange);
        }
    }
    let g = gets[0];
    c.handle_head(
        now,
        g,
        response_head(200, &[("content-type", "text/event-stream")]),
    );
    c.handle_body(now, g, Bytes::from_static(b"id: a:1:0\ndata:\n\n"));
    c.handle_failure(now, g);
    let at = c.poll_timeout().unwrap();
    c.handle_timeout(at);
    let Some(client::Transmit::Request {
        exchange: r, head, ..
    }) = c.poll_transmit()
    else {
        panic!()
    };
    assert_eq!(header(&head, "last-event-id"), Some("a:1:0"));
    c.handle_head(
        at,
        r,
        response_head(400, &[("content-type", "application/json")]),
    );
    c.handle_body(at, r, Bytes::from_static(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"events after Last-Event-ID are no longer retained"}}"#));
    c.handle_body_end(at, r);
    let reset = std::iter::from_fn(|| c.poll_event()).find_map(|e| match e {
        client::Event::StreamReset { error } => Some(error),
        _ => None,
    });
    assert!(
        matches!(reset, Some(RequestError::ResumeFailed { status: 400, .. })),
        "{reset:?}"
    );
    let at = c.poll_timeout().expect("a fresh GET is scheduled");
    c.handle_timeout(at);
    let Some(client::Transmit::Request { head, .. }) = c.poll_transmit() else {
        panic!()
    };
    assert_eq!(head.method, "GET");
    assert_eq!(header(&head, "last-event-id"), None, "a fresh stream");
}

#[test]
fn sec_5_configured_headers_go_on_every_request_and_set_header_changes_the_later_ones() {
    use http::header::{AUTHORIZATION, HeaderName, HeaderValue};
    use std::sync::{Arc, Mutex};
    let key = HeaderName::from_static("x-api-key");
    let config = sessions()
        .with_header(AUTHORIZATION, HeaderValue::from_static("Bearer one"))
        .with_header(key.clone(), HeaderValue::from_static("k"))
        // The transport's own headers are not taken: not where it sets one (Accept), nor
        // where it sets none (no session yet, no resume).
        .with_header(http::header::ACCEPT, HeaderValue::from_static("text/plain"))
        .with_header(
            HeaderName::from_static("mcp-session-id"),
            HeaderValue::from_static("forged"),
        )
        .with_header(
            HeaderName::from_static("last-event-id"),
            HeaderValue::from_static("forged"),
        );
    let mut p = Pair::new(server::Config::new(), config);
    // The server takes the one token it currently accepts.
    let accepted = Arc::new(Mutex::new("Bearer one"));
    p.server.set_authorizer(Some(Box::new({
        let accepted = Arc::clone(&accepted);
        move |head: &http::request::Parts| {
            let want = *accepted.lock().unwrap();
            if header(head, "authorization") == Some(want) {
                Ok(())
            } else {
                Err(server::Refusal::unauthorized(
                    "https://as.example/prm",
                    None,
                ))
            }
        }
    })));
    p.connect();
    assert!(
        p.requests.iter().any(|r| r.method == "GET"),
        "the GET stream"
    );
    for head in &p.requests {
        assert_eq!(
            header(head, "authorization"),
            Some("Bearer one"),
            "{head:?}"
        );
        assert_eq!(header(head, "x-api-key"), Some("k"), "{head:?}");
        let accept = header(head, "accept").unwrap_or_default();
        assert!(accept.contains("event-stream"), "{head:?}");
        assert_ne!(header(head, "mcp-session-id"), Some("forged"), "{head:?}");
        assert_eq!(header(head, "last-event-id"), None, "{head:?}");
    }
    assert_eq!(
        header(&p.requests[0], "mcp-session-id"),
        None,
        "the initialize POST"
    );
    // The token expires: a call fails with the server's challenge (SEC-6)…
    *accepted.lock().unwrap() = "Bearer two";
    call(&mut p);
    assert!(
        matches!(
            failures(&mut p)[..],
            [RequestError::Unauthorized { challenge: Some(_) }]
        ),
        "{:?}",
        p.client_events
    );
    // …and the next one, sent with the refreshed token, goes through.
    p.client
        .set_header(AUTHORIZATION, Some(HeaderValue::from_static("Bearer two")));
    p.client.set_header(key, None);
    p.client.set_header(
        HeaderName::from_static("mcp-protocol-version"),
        Some(HeaderValue::from_static("1999-01-01")),
    );
    let sent = p.requests.len();
    call(&mut p);
    let request = p.take_server_request();
    answer(&mut p, &request);
    assert_eq!(responses(&mut p).len(), 1, "{:?}", p.client_events);
    let later = &p.requests[sent];
    assert_eq!(header(later, "authorization"), Some("Bearer two"));
    assert_eq!(header(later, "x-api-key"), None);
    assert_eq!(header(later, "mcp-protocol-version"), Some("2025-11-25"));
    assert_eq!(later.headers.get_all(AUTHORIZATION).iter().count(), 1);
}
