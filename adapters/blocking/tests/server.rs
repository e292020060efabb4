//! The blocking server on 127.0.0.1: raw HTTP/1.1 requests written on a `TcpStream`,
//! responses parsed with `httparse`, `chunked_transfer::Decoder` and `SseReader`. Every
//! socket has a read timeout and every test stops its server, so each test ends by
//! itself.

use std::io::{Cursor, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire::conn::Limits;
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
fn an_absurd_content_length_is_413_and_the_connection_closed() {
    let f = Fixture::start(Config::new(), options());
    // The core refuses the body at its head; the adapter answers and closes the
    // connection without reading (or waiting for) the declared rest.
    let mut stream = TcpStream::connect(f.addr).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: 999999999999999\r\n\r\n{{",
        f.addr
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .expect("the server closes the connection (EOF)");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
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

// ---------------------------------------------------------------------------------------
// Peers that would hold the server: slow heads, idle floods, oversized heads and bodies,
// an fd limit. Each attack runs beside a normal client, which must be served.

/// Log lines collected from [`ServeOptions::with_log`].
type Lines = Arc<Mutex<Vec<String>>>;

/// `options` with a log that collects its lines.
fn logged(options: ServeOptions) -> (ServeOptions, Lines) {
    let lines: Lines = Arc::default();
    let log = Arc::clone(&lines);
    let options = options.with_log(Arc::new(move |line: &str| {
        log.lock().unwrap().push(line.to_owned());
    }));
    (options, lines)
}

/// A raw `initialize` POST with the given `Connection` header.
fn raw_initialize(addr: SocketAddr, connection: &str) -> Vec<u8> {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\nconnection: {connection}\r\ncontent-length: {}\r\n\r\n{INITIALIZE}",
        INITIALIZE.len()
    )
    .into_bytes()
}

/// A normal client: one `initialize` on a fresh connection, `Connection: close`; its
/// status.
fn served(addr: SocketAddr) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&raw_initialize(addr, "close")).unwrap();
    status(&closed_by_server(&mut s))
}

fn status(response: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(response);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"))
}

/// Reads `s` until the server closes it (EOF, or a reset); what it sent before. Panics
/// if it is still open after the timeout.
fn closed_by_server(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("the server did not close the connection: {e}"),
        }
    }
}

#[test]
fn a_head_sent_a_byte_at_a_time_is_closed_at_the_header_timeout_while_others_are_served() {
    let (options, lines) = logged(options().with_header_timeout(Duration::from_millis(400)));
    let f = Fixture::start(Config::new(), options);
    let mut slow = TcpStream::connect(f.addr).unwrap();
    slow.set_nodelay(true).unwrap();
    let mut writer = slow.try_clone().unwrap();
    // Slowloris: a byte every 20 ms of a head that never ends, until the server closes.
    let dripping = std::thread::spawn(move || {
        let deadline = Instant::now() + TIMEOUT;
        let head = b"POST /mcp HTTP/1.1\r\nhost: x\r\nx-slow: ".iter();
        for &b in head.chain(std::iter::repeat(&b'a')) {
            if writer.write_all(&[b]).is_err() || Instant::now() > deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    assert_eq!(served(f.addr), 200, "served during the attack");
    let sent = closed_by_server(&mut slow);
    assert!(sent.is_empty(), "closed without an answer: {sent:?}");
    dripping.join().unwrap();
    assert_eq!(f.handle().connection_stats().header_timeouts, 1);
    let lines = lines.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("1 closed at the header timeout")),
        "{lines:?}"
    );
}

#[test]
fn a_connection_waiting_for_a_request_is_closed_at_the_idle_timeout() {
    let options = options().with_idle_timeout(Duration::from_millis(300));
    let f = Fixture::start(Config::new(), options);
    // One that never sends anything, and one kept alive after its answer.
    let mut silent = TcpStream::connect(f.addr).unwrap();
    let mut kept = TcpStream::connect(f.addr).unwrap();
    kept.write_all(&raw_initialize(f.addr, "keep-alive"))
        .unwrap();
    let answer = closed_by_server(&mut kept);
    assert_eq!(status(&answer), 200);
    assert!(closed_by_server(&mut silent).is_empty());
    assert_eq!(f.handle().connection_stats().idle_timeouts, 2);
}

#[test]
fn at_the_connection_bound_the_oldest_idle_connections_are_shed_and_new_clients_served() {
    let (options, lines) = logged(options().with_max_connections(8));
    let f = Fixture::start(Config::new(), options);
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(TcpStream::connect(f.addr).unwrap());
        // Accepted in this order.
        std::thread::sleep(Duration::from_millis(5));
    }
    // Newcomers beyond the bound, each kept open after its answer: each is served, and
    // each takes the place of the oldest connection not busy.
    let mut kept = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(f.addr).unwrap();
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        s.write_all(&raw_initialize(f.addr, "keep-alive")).unwrap();
        let mut answer = [0; 2048];
        let n = s.read(&mut answer).unwrap();
        assert_eq!(status(&answer[..n]), 200);
        kept.push(s);
        std::thread::sleep(Duration::from_millis(5));
    }
    // The four oldest idle ones went, in order; the newest are still open and served.
    for old in &mut idle[..4] {
        assert!(closed_by_server(old).is_empty());
    }
    let mut newest = idle.pop().unwrap();
    newest.write_all(&raw_initialize(f.addr, "close")).unwrap();
    assert_eq!(status(&closed_by_server(&mut newest)), 200);
    assert_eq!(f.handle().connection_stats().shed, 4);
    let lines = lines.lock().unwrap().clone();
    assert!(
        lines.iter().any(|l| l.contains("4 closed to make room")),
        "counted in a log line: {lines:?}"
    );
}

/// A client that closes a quiet stream (no heartbeats here) is noticed at once by the
/// poller watching its socket: the core is told, and the only worker serves again.
#[test]
fn a_quiet_stream_whose_client_closes_frees_its_worker_without_a_heartbeat() {
    let config = Config::new().with_heartbeat(None);
    let f = Fixture::start(config, options().with_workers(1));
    let reply = retry(&|| f.post(None, INITIALIZE));
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    let _ = reply.messages();
    assert_eq!(retry(&|| f.post(Some(&session), INITIALIZED)).status, 202);
    let stream = retry(&|| f.get(&session, None));
    assert_eq!(stream.status, 200);
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(
        f.post(Some(&session), body).status,
        503,
        "the worker is held"
    );
    drop(stream);
    let reply = retry(&|| f.post(Some(&session), body));
    assert_eq!(reply.status, 200);
    assert_eq!(f.handle().with_server(|s, _| s.exchange_count()), 0);
}

/// A chunked request body (two chunks, an extension, a trailer) and one sent after
/// `Expect: 100-continue` reach the core whole; the connection stays open for the next
/// request.
#[test]
fn chunked_and_100_continue_request_bodies_are_read() {
    let f = Fixture::start(Config::new(), options());
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let (a, b) = INITIALIZE.split_at(20);
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n\
         {:x};ext=1\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\nx-trailer: t\r\n\r\n",
        f.addr,
        a.len(),
        b.len()
    );
    s.write_all(chunked.as_bytes()).unwrap();
    let mut buf = [0; 4096];
    let n = s.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert_eq!(status(&buf[..n]), 200, "{text}");
    assert!(text.contains("protocolVersion"), "{text}");
    // The same connection: a head that asks to continue, then its body.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\nexpect: 100-continue\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n",
        f.addr,
        INITIALIZE.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let n = s.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(INITIALIZE.as_bytes()).unwrap();
    assert_eq!(status(&closed_by_server(&mut s)), 200);
}

#[test]
fn when_every_connection_is_busy_a_new_one_gets_503_and_is_logged() {
    let (options, lines) = logged(options().with_max_connections(1));
    let f = Fixture::start(Config::new(), options);
    // At a bound of one, a client's next connection can come before the server counts
    // its last one idle: that one is refused too, and tried again.
    let reply = retry(&|| f.post(None, INITIALIZE));
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    let _ = reply.messages();
    assert_eq!(retry(&|| f.post(Some(&session), INITIALIZED)).status, 202);
    // The only connection slot: an open GET stream (busy, never shed).
    let stream = retry(&|| f.get(&session, None));
    assert_eq!(stream.status, 200);
    let deadline = Instant::now() + TIMEOUT;
    while f.handle().open_connections() > 1 {
        assert!(
            Instant::now() < deadline,
            "the earlier connections are closed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let refused_before = f.handle().connection_stats().refused;
    let mut refused = TcpStream::connect(f.addr).unwrap();
    let answer = closed_by_server(&mut refused);
    assert_eq!(status(&answer), 503);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains("retry-after: 1\r\n"), "{text}");
    assert_eq!(f.handle().connection_stats().refused, refused_before + 1);
    // The line is logged once the refusal is done, after its 503 left: wait for it.
    let deadline = Instant::now() + TIMEOUT;
    while !lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("refused (all busy)"))
    {
        assert!(Instant::now() < deadline, "{:?}", lines.lock().unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(stream);
}

#[test]
fn an_oversized_head_is_431_and_its_connection_closed() {
    let f = Fixture::start(Config::new(), options().with_max_head(8 << 10));
    let mut s = TcpStream::connect(f.addr).unwrap();
    let big = "x".repeat(64 << 10);
    let head = format!(
        "GET /mcp HTTP/1.1\r\nhost: {}\r\nx-big: {big}\r\n\r\n",
        f.addr
    );
    // The server may close before the whole head is written.
    let _ = s.write_all(head.as_bytes());
    let answer = closed_by_server(&mut s);
    assert_eq!(status(&answer), 431);
    assert_eq!(served(f.addr), 200);
}

/// Header values that are not visible ASCII reach the core, which answers them with a
/// status and a JSON-RPC error, never a closed connection.
#[test]
fn non_ascii_session_and_last_event_id_values_get_a_json_rpc_error() {
    let f = Fixture::start(Config::new(), options());
    let session = f.initialize();
    for (name, status_code) in [("mcp-session-id", 404), ("last-event-id", 400)] {
        let mut s = TcpStream::connect(f.addr).unwrap();
        let mut head = format!(
            "GET /mcp HTTP/1.1\r\nhost: {}\r\naccept: text/event-stream\r\n\
             mcp-protocol-version: {VERSION}\r\nconnection: close\r\n",
            f.addr
        )
        .into_bytes();
        if name == "last-event-id" {
            head.extend_from_slice(format!("mcp-session-id: {session}\r\n").as_bytes());
        }
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": \xff\xfe\xe9t\xc3\r\n\r\n");
        s.write_all(&head).unwrap();
        let answer = closed_by_server(&mut s);
        let text = String::from_utf8_lossy(&answer).into_owned();
        assert_eq!(status(&answer), status_code, "{name}: {text}");
        let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
        let json: Value = serde_json::from_str(body).expect("a JSON-RPC error");
        assert!(json["error"]["message"].is_string(), "{name}: {body}");
    }
}

/// RESUME-14: a resume takes over a stream whose connection the server still holds (it
/// died silently: its client stopped reading, and the server cannot know). The old
/// connection is closed by the server without the chunked body's end, so that it cannot
/// pass for a complete response, and the stream goes on on the new one, every message
/// once.
#[test]
fn resume_14_a_resume_cuts_the_connection_it_takes_over() {
    let config = Config::new().with_response_mode(ResponseMode::Sse);
    let f = Fixture::start(config, options());
    let session = f.initialize();
    let mut old = TcpStream::connect(f.addr).unwrap();
    old.set_read_timeout(Some(TIMEOUT)).unwrap();
    let body = tools_call(5, "slow", json!({"steps": 3}), Some("p"));
    let post = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\nmcp-session-id: {session}\r\n\
         mcp-protocol-version: {VERSION}\r\ncontent-length: {}\r\n\r\n{body}",
        f.addr,
        body.len()
    );
    old.write_all(post.as_bytes()).unwrap();
    // Read up to the first progress message.
    let mut seen = Vec::new();
    let mut buf = [0; 4096];
    while !String::from_utf8_lossy(&seen).contains(r#""progress":0"#) {
        let n = old.read(&mut buf).expect("progress in time");
        assert!(n > 0, "ended early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    let last = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .next_back()
        .expect("event ids")
        .to_owned();
    // From here on nobody reads `old`: progress 1 goes to a connection that looks alive.
    f.acks.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let resumed = f.get(&session, Some(&last));
    assert_eq!(resumed.status, 200, "never 409 (HTTP-GET-9)");
    // The old connection: what was already written, then the server's close, and never
    // the chunked terminator.
    seen.extend_from_slice(&closed_by_server(&mut old));
    let old_text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        !old_text.ends_with("0\r\n\r\n"),
        "cut, not ended: {old_text}"
    );
    // The stream goes on on the new connection: progress 1 replayed, then 2 and the
    // result, each once.
    let mut events = resumed.sse();
    let mut got = Vec::new();
    loop {
        let (message, _) = next_message(&mut events);
        let done = message.get("id").is_some();
        if !done {
            f.acks.send(()).unwrap();
        }
        got.push(message);
        if done {
            break;
        }
    }
    let progress: Vec<_> = got
        .iter()
        .filter_map(|m| m["params"]["progress"].as_f64())
        .collect();
    assert_eq!(progress, [1.0, 2.0], "{got:?}");
    assert_eq!(got.last().unwrap()["result"]["content"][0]["text"], "done");
}

/// Set in the child processes of the tests below.
const CHILD: &str = "MCPWIRE_BLOCKING_CHILD";

/// In a child process (`CHILD` set): a server whose address is printed, serving until
/// stdin closes (at most 60 s), then its log lines on stderr.
#[test]
#[ignore = "run in a child process by out_of_file_descriptors_…"]
fn child_server_until_stdin_closes() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let (options, lines) = logged(options());
    let f = Fixture::start(Config::new(), options);
    println!("{}", f.addr);
    let (done, wait) = channel();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::stdin().read_to_string(&mut rest);
        let _ = done.send(());
    });
    let _ = wait.recv_timeout(Duration::from_secs(60));
    for line in lines.lock().unwrap().iter() {
        eprintln!("{line}");
    }
}

/// Runs the ignored test `name` of this binary in a child process (under `prlimit`
/// with `prlimit` arguments when given), with stdin, stdout and stderr piped.
fn child(name: &str, prlimit: Option<&str>) -> std::process::Child {
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().unwrap();
    let mut command = match prlimit {
        Some(limit) => {
            let mut c = Command::new("prlimit");
            c.arg(limit).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    command
        .args([
            "--ignored",
            "--exact",
            name,
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child runs (prlimit is util-linux's)")
}

/// The first line of `child`'s stdout whose end parses as a `T` (the test harness may
/// print the test's name at the start of the line).
fn read_from_child<T: std::str::FromStr>(child: &mut std::process::Child) -> T {
    use std::io::BufRead;
    let stdout = child.stdout.as_mut().unwrap();
    let mut stdout = std::io::BufReader::new(stdout);
    loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the child printed nothing"
        );
        let words: Vec<&str> = line.split_whitespace().collect();
        for start in 0..words.len() {
            if let Ok(value) = words[start..].join(" ").parse() {
                return value;
            }
        }
    }
}

/// Out of file descriptors (`EMFILE`: a child process whose limit `prlimit` lowers to
/// 96, and 200 idle connections from this one), the server does not stop accepting: it
/// closes the oldest idle connection to free one, says so in its log, and a new client
/// is served.
#[test]
fn out_of_file_descriptors_the_oldest_idle_connection_is_closed_and_accepting_goes_on() {
    let mut child = child("child_server_until_stdin_closes", Some("--nofile=96:96"));
    let addr: SocketAddr = read_from_child(&mut child);
    // Far more idle connections than the child has descriptors for.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(addr).unwrap());
    }
    assert_eq!(served(addr), 200, "a new client is served");
    // The oldest idle connection was closed by the server.
    assert!(closed_by_server(&mut idle[0]).is_empty());
    drop(child.stdin.take());
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{log}");
    assert!(
        log.contains("Too many open files") && log.contains("closed idle connection"),
        "{log}"
    );
}

/// The number of threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// In a child process: a server with 4 workers and 2 handler threads, then 600 idle
/// connections and 50 half-sent heads to it; prints the process's thread counts
/// (before the server, serving, under the flood), and whether a client was served.
#[test]
#[ignore = "run in a child process by idle_connections_…"]
fn child_thread_counts_under_a_flood() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let options = options().with_workers(4).with_handlers(2, 16);
    let bound = options.max_threads();
    let before = threads();
    let f = Fixture::start(Config::new(), options);
    let serving = threads();
    let mut held = Vec::new();
    for i in 0..650 {
        let mut s = TcpStream::connect(f.addr).unwrap();
        if i % 13 == 0 {
            s.write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\n").unwrap();
        }
        held.push(s);
    }
    std::thread::sleep(Duration::from_millis(200));
    let flooded = threads();
    let status = served(f.addr);
    let after = threads();
    println!("{before} {serving} {flooded} {after} {bound} {status}");
}

/// 650 connections that hold no request (600 idle, 50 half-sent heads): the server's
/// threads stay the ones its options set (acceptor, poller, timer, workers, handler
/// threads), and a client is served.
#[test]
fn idle_connections_and_half_sent_heads_add_no_thread() {
    let mut child = child("child_thread_counts_under_a_flood", None);
    let line: String = read_from_child::<Counts>(&mut child).0;
    let counts: Vec<usize> = line.split(' ').map(|n| n.parse().unwrap()).collect();
    let [before, serving, flooded, after, bound, status] = counts[..] else {
        panic!("{line}")
    };
    assert!(child.wait().unwrap().success());
    assert_eq!(status, 200, "served during the flood");
    assert!(serving - before <= bound, "{line}");
    assert!(flooded <= serving && after <= serving, "{line}");
}

/// The child's line of counts.
struct Counts(String);

impl std::str::FromStr for Counts {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        let all_counts = s.split(' ').all(|w| w.parse::<usize>().is_ok());
        (all_counts && s.split(' ').count() == 6)
            .then(|| Self(s.to_owned()))
            .ok_or(())
    }
}

// ---------------------------------------------------------------------------------------
// Framing, deadlines and disconnects the adapter itself owns.

/// The head of a JSON POST to `/mcp`, with `extra` header lines (each ending in CRLF).
fn post_head(addr: SocketAddr, extra: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\n{extra}\r\n"
    )
}

/// `bytes` on a fresh connection, and all the server sent until it closed it.
fn answers(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    // The server may answer and close before it read everything.
    let _ = s.write_all(bytes);
    String::from_utf8_lossy(&closed_by_server(&mut s)).into_owned()
}

/// The number of responses in `text`.
fn responses(text: &str) -> usize {
    text.matches("HTTP/1.1 ").count()
}

/// `what` as a chunked body: one chunk, then the end.
fn chunked(what: &str) -> String {
    format!("{:x}\r\n{what}\r\n0\r\n\r\n", what.len())
}

/// The JSON-RPC error body of a refusal the adapter wrote itself.
fn refusal_error(text: &str) -> Value {
    let body = text.split("\r\n\r\n").nth(1).expect("a body");
    let error: Value = serde_json::from_str(body).unwrap();
    assert_eq!(error["jsonrpc"], "2.0", "{text}");
    error
}

#[test]
fn a_body_sent_a_byte_at_a_time_gets_408_at_the_body_timeout_and_frees_its_worker() {
    let options = options()
        .with_workers(1)
        .with_body_timeout(Some(Duration::from_millis(600)));
    let f = Fixture::start(Config::new(), options);
    let mut slow = TcpStream::connect(f.addr).unwrap();
    slow.set_nodelay(true).unwrap();
    slow.write_all(post_head(f.addr, "content-length: 1000\r\n").as_bytes())
        .unwrap();
    let mut writer = slow.try_clone().unwrap();
    // Each byte well within the header timeout (10 s): only the whole body's deadline
    // can end this.
    let dripping = std::thread::spawn(move || {
        let deadline = Instant::now() + TIMEOUT;
        while Instant::now() < deadline && writer.write_all(b" ").is_ok() {
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let start = Instant::now();
    let text = String::from_utf8_lossy(&closed_by_server(&mut slow)).into_owned();
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(status(text.as_bytes()), 408, "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
    assert!(refusal_error(&text)["error"]["code"].is_i64(), "{text}");
    assert_eq!(retry(&|| f.post(None, INITIALIZE)).status, 200);
    assert_eq!(f.handle().with_server(|s, _| s.exchange_count()), 0);
    dripping.join().unwrap();
}

#[test]
fn a_client_reading_a_little_at_a_time_frees_its_worker_at_the_write_deadline() {
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
    let trickle = retry(&|| request_small_window(f.addr, "GET", &headers));
    assert_eq!(trickle.status, 200);
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
    // 8 KiB every 0.5 s: every write makes a little progress within the 1 s timeout,
    // but no batch of 64 KiB is taken within it.
    let mut body = trickle.body;
    let reading = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(8);
        let mut buf = [0; 8 << 10];
        while Instant::now() < deadline {
            match body.read(&mut buf) {
                Ok(n) if n > 0 => std::thread::sleep(Duration::from_millis(500)),
                _ => return,
            }
        }
    });
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let start = Instant::now();
    let reply = retry(&|| f.post(Some(&session), body));
    assert_eq!(reply.status, 200, "the worker is still held");
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    reading.join().unwrap();
}

#[test]
fn an_http_1_0_keep_alive_request_answered_with_a_stream_is_closed_at_its_end() {
    let config = Config::new().with_response_mode(ResponseMode::Sse);
    let f = Fixture::start(config, options());
    let request = format!(
        "POST /mcp HTTP/1.0\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\nconnection: keep-alive\r\ncontent-length: {}\r\n\r\n\
         {INITIALIZE}",
        f.addr,
        INITIALIZE.len()
    );
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    // The idle timeout is 60 s: only the end of the stream closes this in time.
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut text = Vec::new();
    s.read_to_end(&mut text)
        .expect("the connection closed at the stream's end");
    let text = String::from_utf8_lossy(&text);
    assert_eq!(status(text.as_bytes()), 200, "{text}");
    assert!(text.contains("text/event-stream"), "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
    assert!(text.contains("protocolVersion"), "{text}");
}

#[test]
fn an_empty_signed_or_listed_empty_content_length_is_400_and_the_body_never_a_request() {
    let f = Fixture::start(Config::new(), options());
    // Each body is a whole request of its own: read as one, it would be answered too.
    let smuggled = format!("GET /nope HTTP/1.1\r\nhost: {}\r\n\r\n", f.addr);
    for value in ["", ",", "+5", "-5", "5 5", "0x5", "99999999999999999999999"] {
        let head = post_head(f.addr, &format!("content-length: {value}\r\n"));
        let text = answers(f.addr, format!("{head}{smuggled}").as_bytes());
        assert_eq!(status(text.as_bytes()), 400, "{value:?}: {text}");
        assert_eq!(responses(&text), 1, "{value:?}: {text}");
        assert!(text.contains("connection: close\r\n"), "{text}");
        refusal_error(&text);
    }
    assert_eq!(served(f.addr), 200);
}

#[test]
fn differing_content_lengths_are_400_and_identical_repeats_are_served() {
    let f = Fixture::start(Config::new(), options());
    let n = INITIALIZE.len();
    for lengths in [
        format!("content-length: {n}, {}\r\n", n + 1),
        format!("content-length: {n}\r\ncontent-length: {}\r\n", n + 1),
    ] {
        let head = post_head(f.addr, &lengths);
        let text = answers(f.addr, format!("{head}{INITIALIZE}").as_bytes());
        assert_eq!(status(text.as_bytes()), 400, "{lengths:?}: {text}");
    }
    for lengths in [
        format!("content-length: {n}, {n}\r\nconnection: close\r\n"),
        format!("content-length: {n}\r\ncontent-length: {n}\r\nconnection: close\r\n"),
    ] {
        let head = post_head(f.addr, &lengths);
        let text = answers(f.addr, format!("{head}{INITIALIZE}").as_bytes());
        assert_eq!(status(text.as_bytes()), 200, "{lengths:?}: {text}");
        assert!(text.contains("protocolVersion"), "{text}");
    }
}

#[test]
fn a_transfer_encoding_other_than_one_chunked_is_501_and_closed() {
    let f = Fixture::start(Config::new(), options());
    let body = chunked(INITIALIZE);
    for coding in [
        "transfer-encoding: gzip, chunked\r\n",
        "transfer-encoding: chunked, chunked\r\n",
        "transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n",
        "transfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n",
        "transfer-encoding: identity\r\n",
        "transfer-encoding: chunked;q=1\r\n",
        "transfer-encoding: \r\n",
    ] {
        let text = answers(
            f.addr,
            format!("{}{body}", post_head(f.addr, coding)).as_bytes(),
        );
        assert_eq!(status(text.as_bytes()), 501, "{coding:?}: {text}");
        assert_eq!(responses(&text), 1, "{coding:?}: {text}");
        assert!(text.contains("connection: close\r\n"), "{text}");
        refusal_error(&text);
    }
    // Any case, spaces around: served.
    let head = post_head(
        f.addr,
        "transfer-encoding:  Chunked \r\nconnection: close\r\n",
    );
    let text = answers(f.addr, format!("{head}{body}").as_bytes());
    assert_eq!(status(text.as_bytes()), 200, "{text}");
}

#[test]
fn with_both_framings_chunked_wins_the_length_never_reaches_the_core_and_the_connection_closes() {
    let f = Fixture::start(Config::new(), options());
    // Were this length passed on, the core would refuse it at the head (413).
    let head = post_head(
        f.addr,
        "content-length: 999999999999999\r\ntransfer-encoding: chunked\r\n",
    );
    let next = format!("GET /nope HTTP/1.1\r\nhost: {}\r\n\r\n", f.addr);
    let text = answers(
        f.addr,
        format!("{head}{}{next}", chunked(INITIALIZE)).as_bytes(),
    );
    assert_eq!(status(text.as_bytes()), 200, "{text}");
    assert!(text.contains("protocolVersion"), "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
    assert_eq!(
        responses(&text),
        1,
        "nothing more on this connection: {text}"
    );
}

#[test]
fn an_http_1_0_request_with_transfer_encoding_is_served_then_closed() {
    let f = Fixture::start(Config::new(), options());
    let head = format!(
        "POST /mcp HTTP/1.0\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\nconnection: keep-alive\r\n\
         transfer-encoding: chunked\r\n\r\n",
        f.addr
    );
    let text = answers(f.addr, format!("{head}{}", chunked(INITIALIZE)).as_bytes());
    assert_eq!(status(text.as_bytes()), 200, "{text}");
    assert!(text.contains("protocolVersion"), "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
}

#[test]
fn a_broken_chunked_body_is_400_and_closed() {
    let f = Fixture::start(Config::new(), options());
    let head = post_head(f.addr, "transfer-encoding: chunked\r\n");
    for body in [
        "zz\r\n{}\r\n0\r\n\r\n",
        "+2\r\n{}\r\n0\r\n\r\n",
        " 2\r\n{}\r\n0\r\n\r\n",
        "2 \r\n{}\r\n0\r\n\r\n",
        "0x2\r\n{}\r\n0\r\n\r\n",
        // 72 bits and more.
        "1000000000000000000\r\n{}\r\n0\r\n\r\n",
        // Data without its CRLF.
        "2\r\n{}xx0\r\n\r\n",
        "\r\n",
    ] {
        let text = answers(f.addr, format!("{head}{body}").as_bytes());
        assert_eq!(status(text.as_bytes()), 400, "{body:?}: {text}");
        assert!(text.contains("connection: close\r\n"), "{text}");
        refusal_error(&text);
    }
    assert_eq!(f.handle().with_server(|s, _| s.exchange_count()), 0);
    // An extension after the size (spaces before its `;` allowed) is not an error.
    let body = format!("{:x} ;ext=1\r\n{INITIALIZE}\r\n0\r\n\r\n", INITIALIZE.len());
    let head = post_head(
        f.addr,
        "transfer-encoding: chunked\r\nconnection: close\r\n",
    );
    let text = answers(f.addr, format!("{head}{body}").as_bytes());
    assert_eq!(status(text.as_bytes()), 200, "{text}");
}

#[test]
fn bodyless_requests_answered_at_their_head_keep_the_connection_for_the_next() {
    let f = Fixture::start(Config::new(), options());
    let pipelined = format!(
        "GET /nope HTTP/1.1\r\nhost: {0}\r\n\r\nDELETE /mcp HTTP/1.1\r\nhost: {0}\r\n\r\n\
         GET /nope HTTP/1.1\r\nhost: {0}\r\nconnection: close\r\n\r\n",
        f.addr
    );
    let text = answers(f.addr, pipelined.as_bytes());
    assert_eq!(responses(&text), 3, "{text}");
    let heads: Vec<&str> = text
        .split("HTTP/1.1 ")
        .skip(1)
        .map(|r| r.split("\r\n\r\n").next().unwrap())
        .collect();
    assert!(!heads[0].contains("connection: close"), "{text}");
    assert!(!heads[1].contains("connection: close"), "{text}");
    assert!(heads[2].contains("connection: close"), "{text}");
}

#[test]
fn the_limits_max_head_bounds_the_request_head() {
    let options = options().with_limits(Limits::new().with_max_head(1024));
    let f = Fixture::start(Config::new(), options);
    let big = "x".repeat(2048);
    let head = format!(
        "GET /mcp HTTP/1.1\r\nhost: {}\r\nx-big: {big}\r\n\r\n",
        f.addr
    );
    let text = answers(f.addr, head.as_bytes());
    assert_eq!(status(text.as_bytes()), 431, "{text}");
    assert_eq!(served(f.addr), 200);
}

#[test]
fn a_second_host_header_is_400() {
    let f = Fixture::start(Config::new(), options());
    let head = post_head(
        f.addr,
        &format!(
            "host: {}\r\ncontent-length: {}\r\n",
            f.addr,
            INITIALIZE.len()
        ),
    );
    let text = answers(f.addr, format!("{head}{INITIALIZE}").as_bytes());
    assert_eq!(status(text.as_bytes()), 400, "{text}");
    refusal_error(&text);
}

#[test]
fn a_client_gone_before_its_json_answer_frees_its_worker_at_once() {
    let config = Config::new()
        .with_response_mode(ResponseMode::Json)
        .with_stream_after(None);
    let f = Fixture::start(config, options().with_workers(1));
    let reply = retry(&|| f.post(None, INITIALIZE));
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    let _ = reply.messages();
    assert_eq!(retry(&|| f.post(Some(&session), INITIALIZED)).status, 202);
    let call = tools_call(2, "until_cancelled", json!({}), None);
    let head = post_head(
        f.addr,
        &format!(
            "mcp-protocol-version: {VERSION}\r\nmcp-session-id: {session}\r\n\
             content-length: {}\r\n",
            call.len()
        ),
    );
    let mut gone = TcpStream::connect(f.addr).unwrap();
    gone.write_all(format!("{head}{call}").as_bytes()).unwrap();
    assert_eq!(
        f.reports.recv_timeout(TIMEOUT).unwrap(),
        "started",
        "the tool runs"
    );
    drop(gone);
    // The tool runs 5 s unless cancelled; the only worker is free well before.
    let start = Instant::now();
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
    assert_eq!(retry(&|| f.post(Some(&session), body)).status, 200);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}
