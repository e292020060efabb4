//! The raw scenarios: requests written with ureq, answers checked byte for byte as a
//! reader of the wire sees them (status, MCP headers, JSON-RPC ids and results, SSE
//! items and event ids, their order), on the reference tools `echo` and `slow_count`.

use std::time::{Duration, Instant};

use mcpwire_tests::server::Reply;
use serde_json::{Value, json};

use super::{
    ACCEPT_BOTH, Body, Http, INITIALIZED, Server, TIMEOUT, Transcript, VERSION, initialize,
    sse_items, text, tools_call,
};

/// The version `mcpwire serve` reports as its `serverInfo.version`.
const SERVER_VERSION: &str = "0.1.0";

/// The `initialize` result of `mcpwire serve`.
fn initialize_result() -> Value {
    json!({
        "protocolVersion": VERSION,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "mcpwire", "version": SERVER_VERSION},
    })
}

/// A JSON-RPC result response.
fn result(id: u32, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A tool's text result.
fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// `slow_count`'s progress notification for `step` of `n` under token `token`.
fn progress_note(token: &str, step: u32, n: u32) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": token, "progress": f64::from(step), "total": f64::from(n)},
    })
}

/// A refusal's body: a JSON-RPC error without an id (JSONRPC-5), as the core writes it.
fn refusal(code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
}

/// Asserts `reply` is `status` with a JSON body equal to `body` and no session header.
fn assert_refused(reply: &Reply, status: u16, body: &Value, what: &str) {
    assert_eq!(reply.status(), status, "{what}: {}", text(reply));
    assert_eq!(
        reply.header("content-type"),
        Some("application/json"),
        "{what}"
    );
    assert_eq!(reply.header("mcp-session-id"), None, "{what}");
    assert_eq!(&reply.json(), body, "{what}");
}

/// Asserts `reply` is a 200 SSE stream, with the headers of one (SSE-ENC-1, SSE-ENC-10)
/// and `session`'s id.
fn assert_stream_head(reply: &Reply, session: &str, what: &str) {
    assert_eq!(reply.status(), 200, "{what}: {}", text(reply));
    assert_eq!(
        reply.header("content-type"),
        Some("text/event-stream"),
        "{what}"
    );
    assert_eq!(reply.header("cache-control"), Some("no-cache"), "{what}");
    assert_eq!(reply.header("x-accel-buffering"), Some("no"), "{what}");
    assert_eq!(reply.header("mcp-session-id"), Some(session), "{what}");
}

/// Asserts `reply` is a 200 JSON answer on `session` whose body is `body`.
fn assert_json_answer(reply: &Reply, session: &str, body: &Value, what: &str) {
    assert_eq!(reply.status(), 200, "{what}: {}", text(reply));
    assert_eq!(
        reply.header("content-type"),
        Some("application/json"),
        "{what}"
    );
    assert_eq!(reply.header("mcp-session-id"), Some(session), "{what}");
    assert_eq!(&reply.json(), body, "{what}");
}

/// An event id `epoch:ring:seq` (§14.1; each part lowercase hex) as its stream
/// `epoch:ring` and its sequence number.
fn id_parts(id: &str) -> (String, u64) {
    let (stream, seq) = id.rsplit_once(':').expect("an id ends in :seq");
    let seq = u64::from_str_radix(seq, 16).expect("a hex sequence number");
    (stream.to_owned(), seq)
}

/// Asserts `items` are a priming event (RESUME-8: `retry` first, then an id and empty
/// data) followed by `messages`, each with the next id of the primed stream; returns the
/// priming event's id.
fn assert_primed_then(items: &[Value], retry_ms: u64, messages: &[Value], what: &str) -> String {
    assert_eq!(items.len(), 2 + messages.len(), "{what}: {items:#?}");
    assert_eq!(items[0], json!({ "retry": retry_ms }), "{what}");
    assert_eq!(items[1]["data"], "", "{what}: the priming event");
    let priming = items[1]["id"].as_str().expect("an id").to_owned();
    let (stream, first) = id_parts(&priming);
    for (k, (item, message)) in items[2..].iter().zip(messages).enumerate() {
        let id = format!("{stream}:{:x}", first + 1 + k as u64);
        let expected = json!({"id": id, "event": "message", "data": message});
        assert_eq!(item, &expected, "{what}: item {}", k + 2);
    }
    priming
}

/// SESSION-1, SESSION-3, HTTP-POST-5, HTTP-POST-7: `initialize` is answered with one JSON
/// body and a session id of visible ASCII in `Mcp-Session-Id`; `initialized` gets 202
/// with no body; `tools/list` names the two reference tools, under the request's id.
pub(crate) fn initialize_and_list(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let reply = http.post(None, &initialize(0));
    t.reply("initialize", &reply);
    let session = reply
        .header("mcp-session-id")
        .expect("SESSION-1: a session id")
        .to_owned();
    assert_eq!(session.len(), 32, "128 bits in hex: {session}");
    assert!(
        session
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "SESSION-3: {session}"
    );
    assert_json_answer(
        &reply,
        &session,
        &result(0, initialize_result()),
        "initialize",
    );
    let reply = http.post(Some(&session), INITIALIZED);
    t.reply("initialized", &reply);
    assert_eq!(reply.status(), 202, "HTTP-POST-5");
    assert!(reply.body.is_empty(), "HTTP-POST-5: {}", text(&reply));
    assert_eq!(reply.header("content-type"), None);
    let reply = http.post(
        Some(&session),
        r#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#,
    );
    t.reply("tools/list", &reply);
    assert_eq!(reply.status(), 200, "{}", text(&reply));
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["id"], "list", "JSONRPC-4: the request's id, a string");
    let names: Vec<&str> = body["result"]["tools"]
        .as_array()
        .expect("a tool list")
        .iter()
        .map(|tool| tool["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["echo", "slow_count"]);
    t
}

/// HTTP-POST-7 (JSON): in the default mode a call that sends nothing before its answer
/// is answered with one JSON body.
pub(crate) fn tools_call_json(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    let reply = http.post(
        Some(&session),
        &tools_call(2, "echo", json!({"text": "hi there"}), None),
    );
    t.reply("echo", &reply);
    assert_json_answer(
        &reply,
        &session,
        &result(2, text_result("hi there")),
        "echo",
    );
    // A failing call is a JSON-RPC error under the call's id, still one JSON body.
    let reply = http.post(
        Some(&session),
        &tools_call(3, "no_such_tool", json!({}), None),
    );
    t.reply("unknown tool", &reply);
    assert_eq!(reply.status(), 200, "{}", text(&reply));
    assert_eq!(reply.json()["id"], 3);
    assert_eq!(reply.json()["error"]["code"], -32602, "{}", text(&reply));
    assert_eq!(
        reply.json()["error"]["message"],
        "no tool named \"no_such_tool\""
    );
    t
}

/// HTTP-POST-7 (JSON, `--json-response`): even a call with a progress token is answered
/// with one JSON body, the result alone.
pub(crate) fn tools_call_json_mode(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    let call = tools_call(3, "slow_count", json!({"n": 2, "delay_ms": 5}), Some("p"));
    let reply = http.post(Some(&session), &call);
    t.reply("slow_count", &reply);
    assert_json_answer(&reply, &session, &result(3, text_result("2")), "slow_count");
    t
}

/// HTTP-POST-7 (SSE, `--sse-response`), HTTP-POST-8, HTTP-POST-11, HTTP-POST-13: a call
/// is answered on a stream: the priming event with `retry`, the result under the next
/// id, and the end of the stream.
pub(crate) fn tools_call_sse(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    // `initialize` is streamed too.
    let reply = http.post(None, &initialize(0));
    t.reply("initialize", &reply);
    let session = reply
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    assert_stream_head(&reply, &session, "initialize");
    assert_primed_then(
        &sse_items(&reply),
        1000,
        &[result(0, initialize_result())],
        "initialize",
    );
    assert_eq!(http.post(Some(&session), INITIALIZED).status(), 202);
    let reply = http.post(
        Some(&session),
        &tools_call(2, "echo", json!({"text": "hi"}), None),
    );
    t.reply("echo", &reply);
    assert_stream_head(&reply, &session, "echo");
    // Read to its end: the server ended the stream after the response (HTTP-POST-11).
    assert_primed_then(
        &sse_items(&reply),
        1000,
        &[result(2, text_result("hi"))],
        "echo",
    );
    t
}

/// HTTP-POST-9, RESUME-1, RESUME-2: `slow_count` with a progress token: the answer is a
/// stream carrying each progress notification, in order, before the result; every
/// event has an id, one stream's, in sequence.
pub(crate) fn progress(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    let call = tools_call(3, "slow_count", json!({"n": 3, "delay_ms": 5}), Some("p"));
    let reply = http.post(Some(&session), &call);
    t.reply("slow_count", &reply);
    assert_stream_head(&reply, &session, "slow_count");
    assert_primed_then(
        &sse_items(&reply),
        1000,
        &[
            progress_note("p", 1, 3),
            progress_note("p", 2, 3),
            progress_note("p", 3, 3),
            result(3, text_result("3")),
        ],
        "slow_count",
    );
    t
}

/// Every message event of `reply` (priming events left out), with its id.
fn message_events(reply: &Reply) -> Vec<(String, Value)> {
    sse_items(reply)
        .into_iter()
        .filter(|item| item.get("data").is_some_and(|d| d != ""))
        .map(|item| {
            (
                item["id"].as_str().expect("an id").to_owned(),
                item["data"].clone(),
            )
        })
        .collect()
}

/// The last event id of `reply`, priming events included.
fn last_event_id(reply: &Reply) -> Option<String> {
    sse_items(reply)
        .iter()
        .rev()
        .find_map(|item| Some(item.get("id")?.as_str()?.to_owned()))
}

/// Follows a stream that a polling server closes: from the POST's `reply`, resumes with
/// `Last-Event-ID` (RESUME-4) after each close, waiting the `retry` it was given
/// (RESUME-11), until the response to request `id` arrived. Returns every message event
/// in arrival order, with its id, and the number of resumes.
fn follow(
    http: &Http,
    session: &str,
    reply: &Reply,
    id: u32,
    retry: Duration,
) -> (Vec<(String, Value)>, usize) {
    let mut messages = message_events(reply);
    let mut last = last_event_id(reply).expect("RESUME-8: a primed stream");
    let deadline = Instant::now() + TIMEOUT;
    let mut resumes = 0;
    while !messages.iter().any(|(_, m)| m["id"] == id) {
        assert!(
            Instant::now() < deadline,
            "no response to {id} by {TIMEOUT:?}"
        );
        std::thread::sleep(retry);
        let reply = http.get(session, Some(&last));
        assert_stream_head(&reply, session, "a resume");
        resumes += 1;
        messages.extend(message_events(&reply));
        last = last_event_id(&reply).unwrap_or(last);
    }
    (messages, resumes)
}

/// Reads `stream` up to and including the `n`th message event; returns them with the id
/// of the last.
fn read_messages(
    stream: &mut mcpwire_blocking::SseReader<impl std::io::Read>,
    n: usize,
) -> (Vec<Value>, String) {
    let mut messages = Vec::new();
    let mut last = String::new();
    while messages.len() < n {
        let item = stream
            .next()
            .expect("the stream goes on")
            .expect("a well-formed stream");
        if let mcpwire::sse::Item::Event(e) = item {
            last = e.id().to_owned();
            if !e.data().is_empty() {
                messages.push(serde_json::from_str(e.data()).expect("JSON event data"));
            }
        }
    }
    (messages, last)
}

/// RESUME-14, HTTP-GET-9: a resume wins over the connection it resumes. A client reads
/// two progress messages of a `slow_count` stream, then its connection dies: once with a
/// close the server sees, once silently (the test keeps the socket open and never reads
/// it again, as a NAT or proxy timeout leaves it). Either way its `Last-Event-ID` at once
/// gets 200 and the rest of the stream, every message once; never 409. A second GET
/// *without* `Last-Event-ID` while the session's GET stream is live stays 409.
pub(crate) fn resume_takes_over(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    let expected = |id: u32| {
        vec![
            progress_note("p", 3, 4),
            progress_note("p", 4, 4),
            result(id, text_result("4")),
        ]
    };
    for (id, silent) in [(3, false), (4, true)] {
        let what = if silent { "silently dead" } else { "closed" };
        let call = tools_call(
            id,
            "slow_count",
            json!({"n": 4, "delay_ms": 150}),
            Some("p"),
        );
        let headers = [
            ("accept", ACCEPT_BOTH),
            ("content-type", "application/json"),
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", VERSION),
        ];
        let (head, body) = http.open("POST", "/mcp", &headers, Body::Text(&call));
        assert_eq!(head.status, 200, "{what}");
        let mut old = mcpwire_blocking::SseReader::new(body.into_reader());
        let (seen, last) = read_messages(&mut old, 2);
        assert_eq!(
            seen,
            [progress_note("p", 1, 4), progress_note("p", 2, 4)],
            "{what}"
        );
        let old = if silent {
            Some(old)
        } else {
            drop(old);
            None
        };
        // At once: the server may not have noticed the close, and never notices the
        // silent death (until a write fails, which the kernel's buffers put off).
        let reply = http.get(&session, Some(&last));
        t.reply(&format!("a resume of a {what} connection"), &reply);
        assert_stream_head(&reply, &session, what);
        let rest: Vec<Value> = message_events(&reply).into_iter().map(|(_, m)| m).collect();
        assert_eq!(rest, expected(id), "{what}: the rest, each message once");
        drop(old);
    }
    // HTTP-GET-9: the standalone stream; a GET without `Last-Event-ID` is not a resume.
    let headers = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    let (head, _live) = http.open("GET", "/mcp", &headers, Body::None);
    assert_eq!(head.status, 200);
    let reply = http.get(&session, None);
    t.reply("a second GET without Last-Event-ID", &reply);
    assert_refused(
        &reply,
        409,
        &refusal(-32000, "the session already has a GET stream"),
        "HTTP-GET-9",
    );
    t
}

/// RESUME-4, RESUME-5, RESUME-7, RESUME-9, RESUME-10, RESUME-11 (`--poll-ms 0 --retry-ms
/// 20`): the server closes every stream right after its priming event with `retry`; the
/// client comes back with `Last-Event-ID` after the `retry` and gets exactly the
/// messages it missed, once each, in order, under the ids of the stream they belong to.
/// The standalone GET stream is closed the same way (HTTP-GET-6).
pub(crate) fn resume_after_polling_close(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let retry = Duration::from_millis(20);
    // `initialize`: its answer comes on the POST or, if the close came first, on a resume.
    // Which one is the adapters' scheduling, not MCP: the tokio adapter runs a handler in
    // place and answers one that finishes at once before the due close is handled; the
    // blocking adapter's handler threads answer after it. So what is recorded is what
    // arrived, wherever it came.
    let reply = http.post(None, &initialize(0));
    let session = reply
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    assert_stream_head(&reply, &session, "initialize");
    let (messages, _) = follow(&http, &session, &reply, 0, retry);
    let answers: Vec<&Value> = messages.iter().map(|(_, m)| m).collect();
    assert_eq!(answers, [&result(0, initialize_result())], "initialize");
    t.record("initialize", json!(answers));
    assert_eq!(http.post(Some(&session), INITIALIZED).status(), 202);

    // `slow_count` sleeps 100 ms before its first progress: the close, due at once,
    // comes before any of it.
    let call = tools_call(3, "slow_count", json!({"n": 3, "delay_ms": 100}), Some("p"));
    let reply = http.post(Some(&session), &call);
    t.reply("slow_count", &reply);
    assert_stream_head(&reply, &session, "slow_count");
    let priming = assert_primed_then(&sse_items(&reply), 20, &[], "RESUME-9, RESUME-10");
    let (messages, resumes) = follow(&http, &session, &reply, 3, retry);
    assert!(resumes >= 1, "the result came only through a resume");
    let expected = [
        progress_note("p", 1, 3),
        progress_note("p", 2, 3),
        progress_note("p", 3, 3),
        result(3, text_result("3")),
    ];
    let got: Vec<&Value> = messages.iter().map(|(_, m)| m).collect();
    assert_eq!(
        got,
        expected.iter().collect::<Vec<_>>(),
        "each message once"
    );
    // RESUME-6, RESUME-7: the ids are the POST stream's, strictly increasing. (How far
    // apart depends on how many resumes found nothing new and were primed afresh.)
    let (stream, mut previous) = id_parts(&priming);
    for (id, _) in &messages {
        let (of, seq) = id_parts(id);
        assert_eq!(of, stream, "{id}: the POST stream's id");
        assert!(seq > previous, "{id} after {previous}");
        previous = seq;
    }
    t.record("slow_count, resumed", json!(got));
    // A late resume from the last message: nothing is replayed again.
    let (last, _) = messages.last().expect("the result");
    let reply = http.get(&session, Some(last));
    t.reply("a late resume", &reply);
    assert_stream_head(&reply, &session, "a late resume");
    assert!(message_events(&reply).is_empty(), "{}", text(&reply));

    // The standalone GET stream: primed with `retry`, then closed (HTTP-GET-6).
    let reply = http.get(&session, None);
    t.reply("GET", &reply);
    assert_stream_head(&reply, &session, "GET");
    assert_primed_then(&sse_items(&reply), 20, &[], "HTTP-GET-6");
    t
}

/// SESSION-1, a bounded session table (`--max-sessions 1`): an `initialize` beyond the
/// bound while the session is active (its GET stream open, so it cannot be evicted) is
/// 503 with `Retry-After` and mints no session; once the session is deleted, there is
/// room again.
pub(crate) fn max_sessions(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    // Active: its GET stream is open.
    let headers = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    let (head, stream) = http.open("GET", "/mcp", &headers, Body::None);
    assert_eq!(head.status, 200);
    let reply = http.post(None, &initialize(1));
    t.reply("one session too many", &reply);
    assert_eq!(reply.header("retry-after"), Some("5"));
    assert_refused(
        &reply,
        503,
        &refusal(-32603, "too many sessions"),
        "beyond --max-sessions, every session active",
    );
    assert_eq!(server.session_count(), 1);
    drop(stream);
    assert_eq!(http.delete(&session).status(), 200);
    let reply = http.post(None, &initialize(2));
    t.reply("after a DELETE", &reply);
    assert_eq!(reply.status(), 200, "{}", text(&reply));
    assert_ne!(reply.header("mcp-session-id"), Some(session.as_str()));
    t
}

/// HTTP-DELETE-1, HTTP-DELETE-3, SESSION-7, §14.15: DELETE ends the session (200, no
/// body) and its open GET stream; afterwards its id gets 404 on POST, GET and DELETE.
pub(crate) fn delete(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    assert_eq!(server.session_count(), 1);
    // A live standalone stream, held open across the DELETE.
    let headers = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    let (head, mut stream) = http.open("GET", "/mcp", &headers, Body::None);
    assert_eq!(head.status, 200);
    let reply = http.delete(&session);
    t.reply("DELETE", &reply);
    assert_eq!(reply.status(), 200, "{}", text(&reply));
    assert!(reply.body.is_empty(), "{}", text(&reply));
    assert_eq!(server.session_count(), 0);
    // The GET stream ends (within the request bound, else `read_to_vec` fails).
    let rest = stream.read_to_vec().expect("the GET stream ends");
    let ended = Reply {
        head: Some(head),
        body: rest,
        ended: true,
        aborted: false,
    };
    t.reply("the GET stream, ended", &ended);
    // It had carried its priming event only, and ended without another.
    assert_primed_then(&sse_items(&ended), 1000, &[], "the GET stream");
    let gone = refusal(-32001, "session not found");
    let reply = http.post(
        Some(&session),
        r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
    );
    t.reply("POST after DELETE", &reply);
    assert_refused(&reply, 404, &gone, "POST after DELETE");
    let reply = http.get(&session, None);
    t.reply("GET after DELETE", &reply);
    assert_refused(&reply, 404, &gone, "GET after DELETE");
    let reply = http.delete(&session);
    t.reply("DELETE after DELETE", &reply);
    assert_refused(&reply, 404, &gone, "DELETE after DELETE");
    t
}

/// HTTP-POST-3: a POST must accept both JSON and SSE (else 406) and carry JSON (else
/// 415), before anything else is looked at (§14.13).
pub(crate) fn accept_and_content_type(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let body = initialize(0);
    let not_acceptable = "must accept application/json and text/event-stream";
    let not_json = "content-type must be application/json";
    // (Accept, Content-Type), `None` for a header left out; the status; the message.
    let cases = [
        (
            Some("application/json"),
            Some("application/json"),
            406,
            not_acceptable,
        ),
        (
            Some("text/event-stream"),
            Some("application/json"),
            406,
            not_acceptable,
        ),
        (
            Some("text/html"),
            Some("application/json"),
            406,
            not_acceptable,
        ),
        (None, Some("application/json"), 406, not_acceptable),
        (Some(ACCEPT_BOTH), Some("text/plain"), 415, not_json),
        (Some(ACCEPT_BOTH), None, 415, not_json),
        // The order of the checks: a wrong Accept is reported before a wrong type.
        (Some("text/html"), Some("text/plain"), 406, not_acceptable),
    ];
    for (accept, content_type, status, message) in cases {
        let headers: Vec<(&str, &str)> = [("accept", accept), ("content-type", content_type)]
            .into_iter()
            .filter_map(|(name, value)| Some((name, value?)))
            .collect();
        let what = format!("{headers:?}");
        let reply = http.send("POST", "/mcp", &headers, Body::Text(&body));
        t.reply(&what, &reply);
        assert_refused(&reply, status, &refusal(-32000, message), &what);
    }
    assert_eq!(server.session_count(), 0, "nothing was initialized");
    t
}

/// HTTP-POST-6, JSONRPC-5, JSONRPC-8: a body that is not JSON is 400 with a parse error
/// (-32700) and no id; JSON that is no JSON-RPC message is 400 with invalid request
/// (-32600) under the id it carried; bytes that are not UTF-8 are 400 too.
pub(crate) fn malformed_bodies(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    let reply = http.post(Some(&session), r#"{"jsonrpc":"2.0","id":1,"method":"#);
    t.reply("truncated JSON", &reply);
    assert_eq!(reply.status(), 400, "{}", text(&reply));
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], Value::Null, "JSONRPC-5");
    assert_eq!(body["error"]["code"], -32700);
    let reply = http.post(Some(&session), r#"{"jsonrpc":"1.0","id":"q","method":"m"}"#);
    t.reply("not JSON-RPC 2.0", &reply);
    assert_eq!(reply.status(), 400, "{}", text(&reply));
    assert_eq!(reply.json()["id"], "q");
    assert_eq!(reply.json()["error"]["code"], -32600);
    // Not UTF-8, sent chunked: the adapter hands the core the bytes as they come.
    let headers = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    let reply = http.send(
        "POST",
        "/mcp",
        &headers,
        Body::Chunked(vec![b'"', 0xff, b'"']),
    );
    t.reply("not UTF-8", &reply);
    assert_eq!(reply.status(), 400, "{}", text(&reply));
    assert_eq!(reply.json()["id"], Value::Null);
    t
}

/// SESSION-6, SESSION-7: a request without a session id is 400; one with an id the server
/// never issued is 404, on POST, GET and DELETE alike.
pub(crate) fn missing_and_unknown_session(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    http.initialize();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let reply = http.post(None, ping);
    t.reply("POST without a session", &reply);
    assert_refused(
        &reply,
        400,
        &refusal(-32000, "missing Mcp-Session-Id"),
        "SESSION-6",
    );
    let unknown = "0123456789abcdef0123456789abcdef";
    let gone = refusal(-32001, "session not found");
    let reply = http.post(Some(unknown), ping);
    t.reply("POST, unknown session", &reply);
    assert_refused(&reply, 404, &gone, "SESSION-7, POST");
    let reply = http.get(unknown, None);
    t.reply("GET, unknown session", &reply);
    assert_refused(&reply, 404, &gone, "SESSION-7, GET");
    let reply = http.delete(unknown);
    t.reply("DELETE, unknown session", &reply);
    assert_refused(&reply, 404, &gone, "SESSION-7, DELETE");
    assert_eq!(server.session_count(), 1);
    t
}

/// SEC-1, SEC-2, SEC-7: a present `Origin` that is not a loopback one is 403 with an
/// id-less error, and so is a foreign `Host`; a loopback origin passes.
pub(crate) fn foreign_origin_and_host(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let body = initialize(0);
    let post = |extra: (&str, &str)| {
        let headers = [
            ("accept", ACCEPT_BOTH),
            ("content-type", "application/json"),
            extra,
        ];
        http.send("POST", "/mcp", &headers, Body::Text(&body))
    };
    let reply = post(("origin", "http://evil.example"));
    t.reply("a foreign Origin", &reply);
    assert_refused(&reply, 403, &refusal(-32000, "origin not allowed"), "SEC-2");
    let reply = post(("host", "attacker.example:8080"));
    t.reply("a foreign Host", &reply);
    assert_refused(&reply, 403, &refusal(-32000, "host not allowed"), "SEC-7");
    assert_eq!(server.session_count(), 0);
    let reply = post(("origin", "http://localhost:5173"));
    t.reply("a loopback Origin", &reply);
    assert_eq!(reply.status(), 200, "{}", text(&reply));
    assert_eq!(server.session_count(), 1);
    t
}

/// BATCH-6, VERSION-4, SESSION-11: on a 2025-11-25 session a batch is 400 with invalid
/// request; an unsupported `MCP-Protocol-Version` is 400; a second `initialize` on the
/// session is 400 with invalid request under its id.
pub(crate) fn refused_messages(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    let reply = http.post(
        Some(&session),
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
    );
    t.reply("a batch", &reply);
    assert_eq!(reply.status(), 400, "BATCH-6: {}", text(&reply));
    assert_eq!(reply.json()["error"]["code"], -32600);
    assert_eq!(reply.json()["id"], Value::Null);
    let headers = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "1999-01-01"),
    ];
    let reply = http.send(
        "POST",
        "/mcp",
        &headers,
        Body::Text(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
    );
    t.reply("an unsupported version", &reply);
    assert_eq!(reply.status(), 400, "VERSION-4: {}", text(&reply));
    assert_eq!(reply.json()["error"]["code"], -32000);
    let reply = http.post(Some(&session), &initialize(9));
    t.reply("initialize again", &reply);
    assert_eq!(reply.status(), 400, "SESSION-11: {}", text(&reply));
    assert_eq!(reply.json()["id"], 9);
    assert_eq!(reply.json()["error"]["code"], -32600);
    // None of them reached the application or hurt the session.
    let reply = http.post(
        Some(&session),
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    );
    assert_json_answer(&reply, &session, &result(2, json!({})), "ping");
    t
}

/// HTTP-POST-6, the body limit (configured at 1 KiB here): a longer body is 413, told by
/// its `Content-Length` or, sent chunked, counted as it streams in.
pub(crate) fn oversized_body(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2048)
    );
    let headers = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    let too_large = refusal(-32000, "request body too large");
    let reply = http.send("POST", "/mcp", &headers, Body::Text(&long));
    t.reply("Content-Length", &reply);
    assert_refused(&reply, 413, &too_large, "by Content-Length");
    let reply = http.send("POST", "/mcp", &headers, Body::Chunked(long.into_bytes()));
    t.reply("chunked", &reply);
    assert_refused(&reply, 413, &too_large, "chunked");
    t
}

/// HTTP-POST-1, HTTP-GET-2, HTTP-GET-9: only the endpoint path is served (404 elsewhere);
/// other methods get 405 naming the allowed ones; a GET must accept SSE (406); a second
/// standalone stream while one is live is 409.
pub(crate) fn paths_methods_and_streams(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let session = http.initialize();
    let json = [
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
    ];
    let reply = http.send("POST", "/other", &json, Body::Text(&initialize(0)));
    t.reply("another path", &reply);
    assert_refused(
        &reply,
        404,
        &refusal(
            -32000,
            "not an MCP endpoint: this server's is /mcp (legacy HTTP+SSE: GET /sse)",
        ),
        "HTTP-POST-1",
    );
    let reply = http.send("PUT", "/mcp", &json, Body::Text(&initialize(0)));
    t.reply("PUT", &reply);
    assert_eq!(reply.status(), 405, "{}", text(&reply));
    assert_eq!(reply.header("allow"), Some("GET, POST, DELETE"));
    let headers = [
        ("accept", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    let reply = http.send("GET", "/mcp", &headers, Body::None);
    t.reply("GET accepting JSON only", &reply);
    assert_refused(
        &reply,
        406,
        &refusal(-32000, "must accept text/event-stream"),
        "HTTP-GET-2",
    );
    let headers = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    let (head, live) = http.open("GET", "/mcp", &headers, Body::None);
    assert_eq!(head.status, 200);
    let reply = http.get(&session, None);
    t.reply("a second GET", &reply);
    assert_refused(
        &reply,
        409,
        &refusal(-32000, "the session already has a GET stream"),
        "HTTP-GET-9",
    );
    drop(live);
    t
}

/// RESUME-6, §14.3: a `Last-Event-ID` of another session's stream, or one that is not an
/// event id at all, is 400 and replays nothing (never 404, which would end the session).
pub(crate) fn foreign_last_event_id(server: &Server) -> Transcript {
    let http = server.http();
    let mut t = Transcript::default();
    let first = http.initialize();
    let call = tools_call(3, "slow_count", json!({"n": 1}), Some("p"));
    let reply = http.post(Some(&first), &call);
    let id = last_event_id(&reply).expect("an event id");
    let second = http.initialize();
    assert_ne!(first, second);
    let reply = http.get(&second, Some(&id));
    t.reply("another session's id", &reply);
    assert_refused(
        &reply,
        400,
        &refusal(-32000, "Last-Event-ID names no stream of this session"),
        "RESUME-6",
    );
    let reply = http.get(&second, Some("not an id"));
    t.reply("no id at all", &reply);
    assert_refused(
        &reply,
        400,
        &refusal(-32000, "malformed Last-Event-ID"),
        "§14.3",
    );
    t
}
