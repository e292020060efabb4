//! The blocking server on 127.0.0.1: raw HTTP/1.1 requests written on a `TcpStream`,
//! responses parsed with `httparse`, `chunked_transfer::Decoder` and `SseReader`. Every
//! socket has a read timeout and every test stops its server, so each test ends by
//! itself.

use std::io::{Cursor, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{Config, Event, LegacyPaths, ResponseMode, SessionId, Target};
use mcpwire::sse::Item;
use mcpwire_blocking::SseReader;
use mcpwire_blocking::app::{Call, CallError, Handler, Tools, text_result};
use mcpwire_blocking::server::{Handle, ServeOptions, serve};
use mcpwire_tests::server::counter_entropy;
use serde_json::{Value, json};

const VERSION: &str = "2025-11-25";
const TIMEOUT: Duration = Duration::from_secs(5);
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The application: a tool table, and the sessions it saw (from `observe`).
struct Probe {
    tools: Tools,
    sessions: Mutex<Vec<SessionId>>,
}

impl Handler for Probe {
    fn server_info(&self) -> Value {
        self.tools.server_info()
    }

    fn capabilities(&self) -> Value {
        self.tools.capabilities()
    }

    fn observe(&self, event: &Event) {
        if let Event::Notification {
            session: Some(s), ..
        } = event
        {
            self.sessions.lock().unwrap().push(*s);
        }
    }

    fn call(&self, call: &Call) -> Result<Value, CallError> {
        self.tools.call(call)
    }
}

#[derive(serde::Deserialize)]
struct Echo {
    text: String,
}

#[derive(serde::Deserialize)]
struct Ask {
    timeout_ms: u64,
}

#[derive(serde::Deserialize)]
struct Slow {
    steps: u32,
}

/// A running server and the test's side of its `slow` tool: each progress it sends
/// waits for an ack on `acks` before the next step.
struct Fixture {
    handle: Option<Handle>,
    probe: Arc<Probe>,
    addr: SocketAddr,
    acks: Sender<()>,
    /// What the `until_cancelled` tool reports: "started", then "cancelled".
    reports: Receiver<&'static str>,
}

impl Fixture {
    fn start(config: Config, options: ServeOptions) -> Self {
        let (acks, wait): (Sender<()>, Receiver<()>) = channel();
        let wait = Mutex::new(wait);
        let (report, reports) = channel();
        let report = Mutex::new(report);
        let tools = Tools::new()
            .with_server_info("blocking-test", "1")
            .with_tool(
                "echo",
                "Returns its text",
                json!({"type": "object"}),
                |_: &Call, a: Echo| Ok(text_result(&a.text)),
            )
            .with_tool(
                "slow",
                "Sends `steps` progress notifications, each acknowledged, then answers",
                json!({"type": "object"}),
                move |call: &Call, a: Slow| {
                    for step in 0..a.steps {
                        call.progress(f64::from(step), Some(f64::from(a.steps)))
                            .map_err(|e| CallError::internal(e.to_string()))?;
                        // The client acknowledges each progress it read: the handler
                        // goes on only once the frame reached the socket.
                        wait.lock()
                            .unwrap()
                            .recv_timeout(TIMEOUT)
                            .map_err(|_| CallError::internal("no ack"))?;
                    }
                    Ok(text_result("done"))
                },
            )
            .with_tool(
                "ask",
                "Asks the client for a name (elicitation) and returns it",
                json!({"type": "object"}),
                |call: &Call, a: Ask| {
                    let params = json!({
                        "message": "Your name?",
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
                    });
                    let timeout = Duration::from_millis(a.timeout_ms);
                    let answer = call.request("elicitation/create", params, Some(timeout))?;
                    Ok(text_result(answer["content"]["name"].as_str().unwrap_or("?")))
                },
            )
            .with_tool(
                "until_cancelled",
                "Waits (at most 5 s) for the client to cancel it",
                json!({"type": "object"}),
                move |call: &Call, _: Value| {
                    let report = |what| report.lock().unwrap().send(what).unwrap();
                    report("started");
                    let deadline = Instant::now() + TIMEOUT;
                    while !call.is_cancelled() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    if call.is_cancelled() {
                        report("cancelled");
                    }
                    Ok(text_result("too late"))
                },
            );
        let probe = Arc::new(Probe {
            tools,
            sessions: Mutex::new(Vec::new()),
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = serve(
            listener,
            config,
            counter_entropy(7),
            Arc::clone(&probe) as Arc<dyn Handler>,
            options.with_grace(Duration::from_secs(2)),
        )
        .unwrap();
        Self {
            handle: Some(handle),
            probe,
            addr,
            acks,
            reports,
        }
    }

    fn handle(&self) -> &Handle {
        self.handle.as_ref().unwrap()
    }

    /// POSTs `body` to `/mcp`, with the session when given.
    fn post(&self, session: Option<&str>, body: &str) -> Reply {
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", VERSION),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        request(self.addr, "POST", &headers, body)
    }

    /// GETs the session's stream, resuming after `last` when given.
    fn get(&self, session: &str, last: Option<&str>) -> Reply {
        let mut headers = vec![
            ("Accept", "text/event-stream"),
            ("MCP-Protocol-Version", VERSION),
            ("Mcp-Session-Id", session),
        ];
        if let Some(last) = last {
            headers.push(("Last-Event-ID", last));
        }
        request(self.addr, "GET", &headers, "")
    }

    /// `initialize` then `notifications/initialized`: the session id.
    fn initialize(&self) -> String {
        let reply = self.post(None, INITIALIZE);
        assert_eq!(reply.status, 200);
        let session = reply
            .header("mcp-session-id")
            .expect("a session id")
            .to_owned();
        let _ = reply.messages();
        assert_eq!(self.post(Some(&session), INITIALIZED).status, 202);
        session
    }

    /// The session the server saw last (from `notifications/initialized`).
    fn last_session(&self) -> SessionId {
        *self.probe.sessions.lock().unwrap().last().unwrap()
    }

    /// Sends a notification to the session's GET stream.
    fn notify_session(&self, session: SessionId, n: u32) {
        let params = format!(r#"{{"level":"info","data":"n{n}"}}"#);
        let raw = RawJson::new(&params).unwrap();
        self.handle()
            .with_server(|s, now| {
                s.notify(
                    now,
                    Target::Session(session),
                    "notifications/message",
                    Some(&raw),
                )
            })
            .unwrap();
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.shutdown(Duration::from_secs(2));
        }
    }
}

/// One response: its status and headers, and its body as it arrives.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Box<dyn Read + Send>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn is_sse(&self) -> bool {
        self.header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
    }

    fn sse(self) -> SseReader<Box<dyn Read + Send>> {
        assert!(self.is_sse(), "{:?}", self.headers);
        SseReader::new(self.body)
    }

    fn text(mut self) -> String {
        let mut text = String::new();
        self.body.read_to_string(&mut text).unwrap();
        text
    }

    /// The JSON-RPC messages of a JSON body or of an SSE stream read to its end.
    fn messages(self) -> Vec<Value> {
        if self.is_sse() {
            self.sse()
                .map(|item| item.expect("a clean stream"))
                .filter_map(|item| match item {
                    Item::Event(e) if !e.data().is_empty() => {
                        Some(serde_json::from_str(e.data()).unwrap())
                    }
                    _ => None,
                })
                .collect()
        } else {
            vec![serde_json::from_str(&self.text()).unwrap()]
        }
    }
}

/// Writes one raw HTTP/1.1 request and reads the response head; the body is read from
/// what `Reply::body` returns (de-chunked, or limited to its length).
fn request(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    request_to(addr, method, "/mcp", headers, body)
}

/// As [`request`], to another path.
fn request_to(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let stream = TcpStream::connect(addr).unwrap();
    request_on(stream, addr, method, path, headers, body)
}

/// As [`request`], on a connection with a small receive buffer: a client that does not
/// read soon stops the server's writes.
fn request_small_window(addr: SocketAddr, method: &str, headers: &[(&str, &str)]) -> Reply {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    request_on(socket.into(), addr, method, "/mcp", headers, "")
}

fn request_on(
    mut stream: TcpStream,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    // The head and the body go in two writes: without this the body waits for the
    // server's delayed ACK of the head.
    stream.set_nodelay(true).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        let n = stream
            .read(&mut chunk)
            .expect("a response within the timeout");
        assert!(n > 0, "the server closed before a response head");
        buf.extend_from_slice(&chunk[..n]);
        let mut slots = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut slots);
        if let httparse::Status::Complete(len) = response.parse(&buf).unwrap() {
            let status = response.code.unwrap();
            let headers: Vec<(String, String)> = response
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_owned(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect();
            let rest = Cursor::new(buf[len..].to_vec()).chain(stream);
            let reply = Reply {
                status,
                headers,
                body: Box::new(std::io::empty()),
            };
            let body: Box<dyn Read + Send> = if reply
                .header("transfer-encoding")
                .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
            {
                Box::new(chunked_transfer::Decoder::new(rest))
            } else {
                let len = reply
                    .header("content-length")
                    .map_or(0, |l| l.parse().unwrap());
                Box::new(rest.take(len))
            };
            return Reply { body, ..reply };
        }
    }
}

fn tools_call(id: u32, name: &str, arguments: Value, token: Option<&str>) -> String {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(token) = token {
        params["_meta"] = json!({"progressToken": token});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

/// Options light enough for many servers at once on a small machine.
fn options() -> ServeOptions {
    ServeOptions::new().with_workers(8).with_handlers(2, 64)
}

/// Sends until the answer is not 503 (or the timeout passed): with one worker, it may
/// still be finishing the previous response when the next request comes.
fn retry(send: &dyn Fn() -> Reply) -> Reply {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let reply = send();
        if reply.status != 503 || Instant::now() > deadline {
            return reply;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The next event, data or not (skipping comments and `retry` frames).
fn next_event(reader: &mut SseReader<Box<dyn Read + Send>>) -> mcpwire::sse::Event {
    for item in reader.by_ref() {
        if let Item::Event(e) = item.expect("a clean stream") {
            return e;
        }
    }
    panic!("the stream ended before an event")
}

/// The next event with data (skipping comments, `retry` frames and priming events).
fn next_message(reader: &mut SseReader<Box<dyn Read + Send>>) -> (Value, String) {
    for item in reader.by_ref() {
        if let Item::Event(e) = item.expect("a clean stream") {
            if !e.data().is_empty() {
                return (serde_json::from_str(e.data()).unwrap(), e.id().to_owned());
            }
        }
    }
    panic!("the stream ended before a message")
}

#[test]
fn session_1_initialize_answers_with_mcp_session_id() {
    let f = Fixture::start(Config::new(), options());
    let reply = f.post(None, INITIALIZE);
    assert_eq!(reply.status, 200);
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    assert_eq!(session.len(), 32, "SESSION-2: 128 bits as hex");
    assert!(session.bytes().all(|b| b.is_ascii_hexdigit()), "SESSION-3");
    assert!(reply.header("content-length").is_some(), "a JSON answer");
    let messages = reply.messages();
    assert_eq!(messages[0]["id"], 1);
    assert_eq!(messages[0]["result"]["protocolVersion"], VERSION);
    assert_eq!(messages[0]["result"]["serverInfo"]["name"], "blocking-test");
}

#[test]
fn http_post_5_initialized_notification_gets_202() {
    let f = Fixture::start(Config::new(), options());
    let reply = f.post(None, INITIALIZE);
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    let reply = f.post(Some(&session), INITIALIZED);
    assert_eq!(reply.status, 202);
    assert_eq!(reply.text(), "");
}

#[test]
fn http_post_7_tools_call_in_json_mode() {
    let config = Config::new().with_response_mode(ResponseMode::Json);
    let f = Fixture::start(config, options());
    let session = f.initialize();
    let reply = f.post(
        Some(&session),
        &tools_call(2, "echo", json!({"text": "hi"}), None),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let messages = reply.messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["id"], 2);
    assert_eq!(messages[0]["result"]["content"][0]["text"], "hi");
    // A tool's own error, and bad arguments, are JSON-RPC errors.
    let reply = f.post(Some(&session), &tools_call(3, "echo", json!({}), None));
    assert_eq!(reply.messages()[0]["error"]["code"], -32602);
}

#[test]
fn http_post_9_tools_call_in_sse_mode_streams_progress_before_the_result() {
    let config = Config::new().with_response_mode(ResponseMode::Sse);
    let f = Fixture::start(config, options());
    let session = f.initialize();
    let reply = f.post(
        Some(&session),
        &tools_call(2, "slow", json!({"steps": 3}), Some("p")),
    );
    assert_eq!(reply.status, 200);
    assert!(reply.header("content-length").is_none());
    let mut events = reply.sse();
    // HTTP-POST-13: a priming event (an id and empty data) comes first.
    let priming = next_event(&mut events);
    assert!(priming.data().is_empty() && !priming.id().is_empty());
    assert!(events.retry().is_some(), "RESUME-10: with a retry");
    for step in 0..3 {
        // Each progress is read while the handler still runs: it waits for this ack.
        let (progress, _) = next_message(&mut events);
        assert_eq!(progress["method"], "notifications/progress");
        assert_eq!(progress["params"]["progressToken"], "p");
        assert_eq!(progress["params"]["progress"], f64::from(step));
        f.acks.send(()).unwrap();
    }
    let (result, _) = next_message(&mut events);
    assert_eq!(result["id"], 2);
    assert_eq!(result["result"]["content"][0]["text"], "done");
    // HTTP-POST-11: the stream ends after the response, with its terminating chunk.
    assert!(events.next().is_none());
}

#[test]
fn session_7_unknown_session_gets_404() {
    let f = Fixture::start(Config::new(), options());
    let _ = f.initialize();
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let reply = f.post(Some("0123456789abcdef0123456789abcdef"), body);
    assert_eq!(reply.status, 404);
    assert_eq!(reply.messages()[0]["error"]["code"], -32001);
}

#[test]
fn jsonrpc_1_bad_json_gets_400_with_parse_error() {
    let f = Fixture::start(Config::new(), options());
    let session = f.initialize();
    let reply = f.post(Some(&session), r#"{"jsonrpc":"2.0","id":2,"method""#);
    assert_eq!(reply.status, 400);
    assert_eq!(reply.messages()[0]["error"]["code"], -32700);
}

#[test]
fn http_get_4_get_stream_carries_a_server_notification_and_sse_enc_7_heartbeats() {
    let config = Config::new().with_heartbeat(Some(Duration::from_millis(50)));
    let f = Fixture::start(config, options());
    let session = f.initialize();
    let id = f.last_session();
    let reply = f.get(&session, None);
    assert_eq!(reply.status, 200);
    let mut events = reply.sse();
    f.notify_session(id, 1);
    let (mut notified, mut heartbeats) = (false, 0);
    for item in events.by_ref().take(50) {
        match item.expect("a live stream") {
            Item::Event(e) if !e.data().is_empty() => {
                let message: Value = serde_json::from_str(e.data()).unwrap();
                assert_eq!(message["method"], "notifications/message");
                assert_eq!(message["params"]["data"], "n1");
                notified = true;
            }
            Item::Comment(_) => heartbeats += 1,
            _ => {}
        }
        if notified && heartbeats >= 2 {
            break;
        }
    }
    assert!(notified, "the notification came");
    assert!(heartbeats >= 2, "heartbeats came while the stream was idle");
}

#[test]
fn resume_9_polling_close_then_last_event_id_delivers_exactly_the_missed_messages() {
    let config = Config::new().with_polling(Some(Duration::ZERO));
    let f = Fixture::start(config, options());
    let session = f.initialize();
    let id = f.last_session();
    // The GET stream is primed and then closed at once (RESUME-8, RESUME-9).
    let mut events = f.get(&session, None).sse();
    let items: Vec<Item> = events.by_ref().map(|i| i.expect("a clean close")).collect();
    assert!(
        items
            .iter()
            .all(|i| !matches!(i, Item::Event(e) if !e.data().is_empty())),
        "{items:?}"
    );
    let primed = events.last_event_id().to_owned();
    assert!(!primed.is_empty(), "RESUME-10: an id before the close");
    assert!(
        events.retry().is_some(),
        "RESUME-10: a retry before the close"
    );
    // Sent while no connection is live: kept for the resume.
    f.notify_session(id, 1);
    f.notify_session(id, 2);
    let reply = f.get(&session, Some(&primed));
    assert_eq!(reply.status, 200);
    let mut events = reply.sse();
    let got: Vec<Value> = events
        .by_ref()
        .map(|i| i.expect("a clean close"))
        .filter_map(|i| match i {
            Item::Event(e) if !e.data().is_empty() => Some(serde_json::from_str(e.data()).unwrap()),
            _ => None,
        })
        .collect();
    let data: Vec<&Value> = got.iter().map(|m| &m["params"]["data"]).collect();
    assert_eq!(data, ["n1", "n2"]);
    let after_two = events.last_event_id().to_owned();
    assert_ne!(after_two, primed);
    // RESUME-7: the ids are a cursor; resuming after n2 gives n3 alone.
    f.notify_session(id, 3);
    let got = f.get(&session, Some(&after_two)).messages();
    let data: Vec<&Value> = got.iter().map(|m| &m["params"]["data"]).collect();
    assert_eq!(data, ["n3"]);
}

#[test]
fn http_delete_1_delete_ends_the_session_and_later_requests_get_404() {
    let f = Fixture::start(Config::new(), options());
    let session = f.initialize();
    let reply = request(
        f.addr,
        "DELETE",
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", VERSION),
        ],
        "",
    );
    assert!((200..300).contains(&reply.status), "{}", reply.status);
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(f.post(Some(&session), body).status, 404, "SESSION-7");
}

#[test]
fn a_full_pool_answers_503_with_retry_after() {
    // A client that leaves an idle stream is noticed when the next heartbeat fails.
    let config = Config::new().with_heartbeat(Some(Duration::from_millis(20)));
    let f = Fixture::start(config, options().with_workers(1));
    let reply = retry(&|| f.post(None, INITIALIZE));
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    let _ = reply.messages();
    assert_eq!(retry(&|| f.post(Some(&session), INITIALIZED)).status, 202);
    // The GET stream holds the only worker for as long as it is open.
    let stream = retry(&|| f.get(&session, None));
    assert_eq!(stream.status, 200);
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let busy = f.post(Some(&session), body);
    assert_eq!(busy.status, 503);
    assert_eq!(busy.header("retry-after"), Some("1"));
    // Once the stream is gone (noticed at a heartbeat) the worker serves again.
    drop(stream);
    let reply = retry(&|| f.post(Some(&session), body));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.messages()[0]["result"]["tools"][0]["name"], "echo");
}

#[test]
fn graceful_shutdown_ends_an_open_get_stream() {
    let mut f = Fixture::start(Config::new(), options());
    let session = f.initialize();
    let mut events = f.get(&session, None).sse();
    let priming = next_event(&mut events);
    assert!(priming.data().is_empty());
    let handle = f.handle.take().unwrap();
    let stopping = std::thread::spawn(move || handle.shutdown(TIMEOUT));
    // The stream ends cleanly: the terminating chunk, not a cut connection.
    for item in events.by_ref() {
        item.expect("a clean end");
    }
    assert!(events.is_finished());
    assert!(
        stopping.join().unwrap(),
        "every exchange ended within the grace"
    );
}

#[test]
fn http_post_12_notifications_cancelled_reaches_the_running_handler() {
    let config = Config::new().with_response_mode(ResponseMode::Sse);
    let f = Fixture::start(config, options());
    let session = f.initialize();
    let call = f.post(
        Some(&session),
        &tools_call(5, "until_cancelled", json!({}), None),
    );
    assert_eq!(call.status, 200);
    assert_eq!(f.reports.recv_timeout(TIMEOUT), Ok("started"));
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"test"}}"#;
    assert_eq!(f.post(Some(&session), cancel).status, 202);
    assert_eq!(f.reports.recv_timeout(TIMEOUT), Ok("cancelled"));
    // The late answer is dropped: the stream ends without a response.
    let messages = call.messages();
    assert!(
        messages.iter().all(|m| m.get("id").is_none()),
        "{messages:?}"
    );
}

#[test]
fn http_get_9_a_second_get_stream_gets_409_until_the_first_client_is_gone() {
    // The first client's departure is noticed when a heartbeat to it fails.
    let config = Config::new().with_heartbeat(Some(Duration::from_millis(20)));
    let f = Fixture::start(config, options());
    let session = f.initialize();
    let first = f.get(&session, None);
    assert_eq!(first.status, 200);
    assert_eq!(f.get(&session, None).status, 409);
    drop(first);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let again = f.get(&session, None);
        if again.status == 200 {
            break;
        }
        assert_eq!(again.status, 409);
        assert!(
            Instant::now() < deadline,
            "the disconnect never reached the core"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_client_that_stops_reading_frees_its_worker_after_the_write_timeout() {
    // Unsent bytes are not bounded here, so only the write timeout can end the stall.
    let config = Config::new().with_max_unsent(64 << 20);
    let options = options()
        .with_workers(1)
        .with_write_timeout(Some(Duration::from_secs(1)));
    let f = Fixture::start(config, options);
    let reply = retry(&|| f.post(None, INITIALIZE));
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    let _ = reply.messages();
    assert_eq!(retry(&|| f.post(Some(&session), INITIALIZED)).status, 202);
    let id = f.last_session();
    let headers = [
        ("Accept", "text/event-stream"),
        ("MCP-Protocol-Version", VERSION),
        ("Mcp-Session-Id", session.as_str()),
    ];
    let stalled = retry(&|| request_small_window(f.addr, "GET", &headers));
    assert_eq!(stalled.status, 200);
    // 8 MiB for a client that reads nothing more: the socket's buffers fill and the
    // worker blocks in `write`.
    let big = format!(r#"{{"level":"info","data":"{}"}}"#, "x".repeat(32 << 10));
    let raw = RawJson::new(&big).unwrap();
    for _ in 0..256 {
        let _ = f.handle().with_server(|s, now| {
            s.notify(
                now,
                Target::Session(id),
                "notifications/message",
                Some(&raw),
            )
        });
    }
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(
        f.post(Some(&session), body).status,
        503,
        "the worker is stuck"
    );
    // The write times out, the worker abandons the connection and serves again.
    let reply = retry(&|| f.post(Some(&session), body));
    assert_eq!(reply.status, 200);
    drop(stalled);
}

#[test]
fn an_absurd_content_length_is_413_and_does_not_abort_the_server() {
    let f = Fixture::start(Config::new(), options());
    // tiny_http would allocate the declared rest of the body at once when the refused
    // request is dropped (and abort on failing to); the adapter must not drop it.
    let mut stream = TcpStream::connect(f.addr).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: 999999999999999\r\n\r\n{{",
        f.addr
    );
    stream.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    // Still serving.
    let reply = f.post(None, INITIALIZE);
    assert_eq!(reply.status, 200);
    // A body the client cut short is no request: the core forgets it.
    let mut cut = TcpStream::connect(f.addr).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{}",
        f.addr,
        &INITIALIZE[..INITIALIZE.len() - 1]
    );
    cut.write_all(head.as_bytes()).unwrap();
    drop(cut);
    let deadline = Instant::now() + TIMEOUT;
    while f.handle().with_server(|s, _| s.exchange_count()) > 0 {
        assert!(Instant::now() < deadline, "the cut request is still open");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(f.handle().with_server(|s, _| s.session_count()), 1);
    drop(stream);
}

#[test]
fn legacy_2_endpoint_event_then_legacy_4_answers_on_the_stream() {
    let config = Config::new().with_legacy(Some(LegacyPaths::default()));
    let f = Fixture::start(config, options());
    let stream = request_to(
        f.addr,
        "GET",
        "/sse",
        &[("Accept", "text/event-stream")],
        "",
    );
    assert_eq!(stream.status, 200);
    let mut events = stream.sse();
    let endpoint = next_event(&mut events);
    assert_eq!(endpoint.event_type(), "endpoint");
    let post_path = endpoint.data().to_owned();
    assert!(post_path.starts_with("/messages?sessionId="), "{post_path}");
    let post = |body: &str| {
        let headers = [("Content-Type", "application/json")];
        request_to(f.addr, "POST", &post_path, &headers, body)
    };
    let init = INITIALIZE.replace("2025-11-25", "2024-11-05");
    assert_eq!(post(&init).status, 202);
    let (answer, _) = next_message(&mut events);
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(post(INITIALIZED).status, 202);
    assert_eq!(
        post(&tools_call(2, "echo", json!({"text": "legacy"}), None)).status,
        202
    );
    let (answer, _) = next_message(&mut events);
    assert_eq!(answer["result"]["content"][0]["text"], "legacy");
}

#[test]
fn http_post_9_a_handler_asks_the_client_on_the_request_stream_and_gets_its_answer() {
    let f = Fixture::start(Config::new(), options());
    let session = f.initialize();
    let call = tools_call(2, "ask", json!({"timeout_ms": 5000}), None);
    let reply = f.post(Some(&session), &call);
    assert_eq!(reply.status, 200);
    // ResponseMode::Auto: the related request opens an SSE stream.
    let mut events = reply.sse();
    let (ask, _) = next_message(&mut events);
    assert_eq!(ask["method"], "elicitation/create");
    let answer = json!({
        "jsonrpc": "2.0",
        "id": ask["id"],
        "result": {"action": "accept", "content": {"name": "Ada"}},
    });
    assert_eq!(f.post(Some(&session), &answer.to_string()).status, 202);
    let (result, _) = next_message(&mut events);
    assert_eq!(result["id"], 2);
    assert_eq!(result["result"]["content"][0]["text"], "Ada");
    // Unanswered, the request times out in the core and the handler gets an error.
    let call = tools_call(3, "ask", json!({"timeout_ms": 50}), None);
    let mut events = f.post(Some(&session), &call).sse();
    let (ask, _) = next_message(&mut events);
    assert_eq!(ask["method"], "elicitation/create");
    let (result, _) = next_message(&mut events);
    assert_eq!(result["id"], 3);
    assert_eq!(result["error"]["code"], -32603, "{result}");
}

#[test]
fn http_post_2_requests_and_streams_share_one_keep_alive_connection() {
    let config = Config::new().with_response_mode(ResponseMode::Sse);
    let f = Fixture::start(config, options());
    let conn = TcpStream::connect(f.addr).unwrap();
    let post = |session: Option<&str>, body: &str| {
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", VERSION),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        request_on(
            conn.try_clone().unwrap(),
            f.addr,
            "POST",
            "/mcp",
            &headers,
            body,
        )
    };
    let reply = post(None, INITIALIZE);
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    assert_eq!(reply.messages()[0]["result"]["protocolVersion"], VERSION);
    let reply = post(Some(&session), INITIALIZED);
    assert_eq!(reply.status, 202);
    assert_eq!(reply.text(), "");
    // Streamed responses (chunked, through the raw writer) end cleanly, one after
    // another, on the same connection.
    for id in 2..5 {
        let call = tools_call(id, "echo", json!({"text": format!("t{id}")}), None);
        let reply = post(Some(&session), &call);
        assert!(reply.is_sse());
        let messages = reply.messages();
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert_eq!(
            messages[0]["result"]["content"][0]["text"],
            format!("t{id}")
        );
    }
}
