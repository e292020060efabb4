//! The blocking `McpClient` on 127.0.0.1 against both adapters' servers (this crate's
//! server on std::net, and `mcpwire-tokio`'s on a runtime started by the test), for what
//! is the blocking client's own: re-initialization after the server forgot the session,
//! the lifecycle messages the application sees (the expiry, the new session, a refused
//! re-initialization, a GET stream that could not be resumed), the legacy fallback, a
//! server→client request answered with `respond`, pooled connections, the handshake's
//! timeout, and the read timeout's resume. Every call, handshake and wait has a deadline
//! and every server is stopped, so each test ends by itself.
//!
//! The handshake, a JSON answer, progress before a streamed result, DELETE on close and
//! resumes through a polling server are in the shared scenario suite
//! (`tests/tests/adapters.rs`), which runs this client and the tokio one against both
//! servers serving `mcpwire serve`'s tools.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire::Era;
use mcpwire::ProtocolVersion;
use mcpwire::client::{self, RequestError};
use mcpwire::resume::{RingLimits, StoreLimits};
use mcpwire::server::{Config, LegacyPaths, ResponseMode, SessionId};
use mcpwire_blocking::client::{CallError, ClientOptions, McpClient, ServerMessage};
use mcpwire_tests::server::{counter_entropy, notify_session};
use serde_json::{Value, json};

/// A session-era client: these tests are about sessions, resumes and re-initialization
/// (the default finds the sessionless revision first, and the server serves it).
fn sessions(uri: http::Uri) -> client::Config {
    client::Config::new(uri).with_revision(client::Revision::Era(mcpwire::Era::Sessions))
}

const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug)]
enum Adapter {
    Blocking,
    Tokio,
}

/// A running server of either adapter; dropping it stops it.
struct Server {
    inner: Inner,
    /// The sessions whose `notifications/initialized` the server took, in order.
    initialized: Initialized,
    /// How many `until_cancelled` calls stopped because the client gave them up.
    stopped: Arc<AtomicUsize>,
}

type Initialized = Arc<Mutex<Vec<SessionId>>>;

/// A tool table that also records, in [`Server::initialized`], each session whose
/// `notifications/initialized` the server took.
struct Watched<T> {
    tools: T,
    initialized: Initialized,
}

impl<T> Watched<T> {
    fn record(&self, event: &mcpwire::server::Event) {
        if let mcpwire::server::Event::Notification {
            session: Some(session),
            message,
        } = event
            && message.method() == Some("notifications/initialized")
        {
            self.initialized.lock().unwrap().push(*session);
        }
    }
}

impl mcpwire_blocking::app::Handler for Watched<mcpwire_blocking::app::Tools> {
    fn server_info(&self) -> Value {
        self.tools.server_info()
    }

    fn capabilities(&self) -> Value {
        // `touch` changes the list: a listen may ask to hear it (MODERN-13).
        json!({"tools": {"listChanged": true}})
    }

    fn observe(&self, event: &mcpwire::server::Event) {
        self.record(event);
        self.tools.observe(event);
    }

    fn call(
        &self,
        call: &mcpwire_blocking::app::Call,
    ) -> Result<Value, mcpwire_blocking::app::CallError> {
        self.tools.call(call)
    }
}

impl mcpwire_tokio::app::Handler for Watched<mcpwire_tokio::app::Tools> {
    fn server_info(&self) -> Value {
        self.tools.server_info()
    }

    fn capabilities(&self) -> Value {
        // `touch` changes the list: a listen may ask to hear it (MODERN-13).
        json!({"tools": {"listChanged": true}})
    }

    fn observe(&self, event: &mcpwire::server::Event) {
        self.record(event);
        self.tools.observe(event);
    }

    fn call(
        &self,
        call: mcpwire_tokio::app::Call,
    ) -> mcpwire_tokio::app::BoxFuture<Result<Value, mcpwire_tokio::app::CallError>> {
        self.tools.call(call)
    }
}

enum Inner {
    Blocking(Option<mcpwire_blocking::server::Handle>),
    Tokio {
        /// Dropped with the server: it stops the service's tasks.
        _runtime: tokio::runtime::Runtime,
        service: mcpwire_tokio::server::McpService,
    },
}

impl Server {
    fn with_server<R>(&self, f: impl FnOnce(&mut mcpwire::server::Server, Instant) -> R) -> R {
        match &self.inner {
            Inner::Blocking(h) => h.as_ref().unwrap().with_server(f),
            Inner::Tokio { service, .. } => service.with_server(f),
        }
    }

    fn session_count(&self) -> usize {
        self.with_server(|s, _| s.session_count())
    }

    /// The `n`th session (from 1) whose `notifications/initialized` the server took,
    /// once it did. The client sends that notification and its first requests on
    /// separate exchanges, so it may arrive after them: a test that ends the session
    /// waits for it, or it may be the request that meets the 404.
    fn initialized(&self, n: usize) -> SessionId {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(s) = self.initialized.lock().unwrap().get(n - 1) {
                return *s;
            }
            assert!(Instant::now() < deadline, "session {n} never initialized");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Inner::Blocking(h) = &mut self.inner
            && let Some(h) = h.take()
        {
            h.shutdown(Duration::from_secs(2));
        }
    }
}

fn ask_params() -> Value {
    json!({
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    })
}

/// `echo` returns its text; `count` sends `n` progress notifications (`delay_ms`, 10 by
/// default, apart),
/// then answers `n`; `ask` asks the client for a name (elicitation) and returns it;
/// `until_cancelled` sends progress every 10 ms until the client gives the call up, and
/// counts that in [`Server::stopped`]; `touch` announces a change of the tool list.
fn start(adapter: Adapter, config: Config) -> (Server, http::Uri) {
    let initialized = Initialized::default();
    let stopped = Arc::new(AtomicUsize::new(0));
    let (inner, uri) = match adapter {
        Adapter::Blocking => {
            use mcpwire_blocking::app::{Call, Tools, text_result};
            use mcpwire_blocking::server::{ServeOptions, serve};
            let tools = Tools::new()
                .with_tool(
                    "echo",
                    "",
                    json!({"type": "object"}),
                    |_: &Call, a: Value| Ok(text_result(a["text"].as_str().unwrap_or(""))),
                )
                .with_tool(
                    "count",
                    "",
                    json!({"type": "object"}),
                    |call: &Call, a: Value| {
                        let n = a["n"].as_u64().unwrap_or(0) as u32;
                        for i in 1..=n {
                            std::thread::sleep(Duration::from_millis(
                                a["delay_ms"].as_u64().unwrap_or(10),
                            ));
                            let _ = call.progress(f64::from(i), None);
                        }
                        Ok(text_result(&n.to_string()))
                    },
                )
                .with_tool(
                    "ask",
                    "",
                    json!({"type": "object"}),
                    |call: &Call, _: Value| {
                        let answer =
                            call.request("elicitation/create", ask_params(), Some(TIMEOUT))?;
                        Ok(text_result(
                            answer["content"]["name"].as_str().unwrap_or("?"),
                        ))
                    },
                )
                .with_tool(
                    "touch",
                    "",
                    json!({"type": "object"}),
                    |call: &Call, _: Value| {
                        call.changed(&mcpwire_blocking::app::Change::Tools);
                        Ok(text_result("touched"))
                    },
                )
                .with_tool("until_cancelled", "", json!({"type": "object"}), {
                    let stopped = Arc::clone(&stopped);
                    move |call: &Call, _: Value| {
                        let started = Instant::now();
                        let mut i = 0_u32;
                        while !call.is_cancelled() && started.elapsed() < TIMEOUT {
                            i += 1;
                            let _ = call.progress(f64::from(i), None);
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        if call.is_cancelled() {
                            stopped.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(text_result("never given up"))
                    }
                });
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let options = ServeOptions::new()
                .with_workers(8)
                .with_handlers(2, 64)
                .with_grace(Duration::from_secs(2));
            let handle = serve(
                listener,
                config,
                counter_entropy(5),
                Arc::new(Watched {
                    tools,
                    initialized: Arc::clone(&initialized),
                }),
                options,
            )
            .unwrap();
            (
                Inner::Blocking(Some(handle)),
                format!("http://{addr}/mcp").parse().unwrap(),
            )
        }
        Adapter::Tokio => {
            use mcpwire_tokio::app::{self, Tools, text_result};
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let tools = Tools::new()
                .with_tool(
                    "echo",
                    "",
                    json!({"type": "object"}),
                    |_c, a: Value| async move { Ok(text_result(a["text"].as_str().unwrap_or(""))) },
                )
                .with_tool(
                    "count",
                    "",
                    json!({"type": "object"}),
                    |call, a: Value| async move {
                        let n = a["n"].as_u64().unwrap_or(0) as u32;
                        for i in 1..=n {
                            let ms = a["delay_ms"].as_u64().unwrap_or(10);
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            let _ = call.progress(f64::from(i), None);
                        }
                        Ok(text_result(&n.to_string()))
                    },
                )
                .with_tool(
                    "ask",
                    "",
                    json!({"type": "object"}),
                    |call, _a: Value| async move {
                        let answer = call.request("elicitation/create", ask_params()).await?;
                        Ok(text_result(
                            answer["content"]["name"].as_str().unwrap_or("?"),
                        ))
                    },
                )
                .with_tool(
                    "touch",
                    "",
                    json!({"type": "object"}),
                    |call, _a: Value| async move {
                        call.changed(&mcpwire_tokio::app::Change::Tools);
                        Ok(text_result("touched"))
                    },
                )
                .with_tool("until_cancelled", "", json!({"type": "object"}), {
                    let stopped = Arc::clone(&stopped);
                    move |call, _a: Value| {
                        let stopped = Arc::clone(&stopped);
                        async move {
                            let started = Instant::now();
                            let mut i = 0_u32;
                            while !call.is_cancelled() && started.elapsed() < TIMEOUT {
                                i += 1;
                                let _ = call.progress(f64::from(i), None);
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            if call.is_cancelled() {
                                stopped.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok(text_result("never given up"))
                        }
                    }
                });
            // `mount` spawns the service's driver task: inside the runtime.
            let service = {
                let _runtime = rt.enter();
                let handler = Watched {
                    tools,
                    initialized: Arc::clone(&initialized),
                };
                app::mount(config, counter_entropy(5), Arc::new(handler))
            };
            let listener = rt
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .unwrap();
            let addr = listener.local_addr().unwrap();
            rt.spawn(mcpwire_tokio::server::serve(listener, service.clone()));
            (
                Inner::Tokio {
                    _runtime: rt,
                    service,
                },
                format!("http://{addr}/mcp").parse().unwrap(),
            )
        }
    };
    (
        Server {
            inner,
            initialized,
            stopped,
        },
        uri,
    )
}

fn connect_with(config: client::Config) -> (McpClient, Receiver<ServerMessage>) {
    McpClient::connect(config.with_connect_timeout(TIMEOUT), counter_entropy(6)).expect("connected")
}

fn connect(uri: http::Uri) -> (McpClient, Receiver<ServerMessage>) {
    connect_with(sessions(uri))
}

fn tools_call(client: &McpClient, name: &str, args: Value, progress: bool) -> Value {
    let mut params = json!({"name": name, "arguments": args});
    if progress {
        params["_meta"] = json!({"progressToken": "t"});
    }
    client
        .call_timeout("tools/call", Some(params), TIMEOUT)
        .expect("a result")
}

/// The progress values on the channel now.
fn progress(messages: &Receiver<ServerMessage>) -> Vec<f64> {
    let mut got = Vec::new();
    while let Ok(m) = messages.try_recv() {
        if let ServerMessage::Notification(n) = m {
            let v: Value = serde_json::from_str(n.text().as_str()).unwrap();
            if v["method"] == "notifications/progress" {
                got.push(v["params"]["progress"].as_f64().unwrap());
            }
        }
    }
    got
}

fn session_8_reinitialize(adapter: Adapter) {
    // A session with no open exchange is forgotten after 200 ms (SESSION-7).
    let config = Config::new().with_session_idle(Duration::from_millis(200));
    let (server, uri) = start(adapter, config);
    let (client, _messages) =
        connect_with(sessions(uri).with_get_stream(false).with_reinitialize(true));
    let first = client.session_id().unwrap();
    let result = tools_call(&client, "echo", json!({"text": "before"}), false);
    assert_eq!(result["content"][0]["text"], "before");
    let deadline = Instant::now() + TIMEOUT;
    while server.session_count() > 0 {
        assert!(Instant::now() < deadline, "the session never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The request that met the 404 fails; the core re-initializes at once.
    let err = client
        .call_timeout("tools/list", None, TIMEOUT)
        .unwrap_err();
    assert_eq!(err, CallError::Request(RequestError::SessionExpired));
    let result = tools_call(&client, "echo", json!({"text": "after"}), false);
    assert_eq!(result["content"][0]["text"], "after");
    let second = client.session_id().unwrap();
    assert_ne!(first, second, "a new session");
    client.close();
}

#[test]
fn session_8_a_forgotten_session_is_initialized_again_blocking_server() {
    session_8_reinitialize(Adapter::Blocking);
}

#[test]
fn session_8_a_forgotten_session_is_initialized_again_tokio_server() {
    session_8_reinitialize(Adapter::Tokio);
}

fn legacy_6_fallback(adapter: Adapter) {
    let config = Config::new()
        .with_endpoint("/streamable")
        .with_legacy(Some(LegacyPaths {
            sse: "/mcp".into(),
            messages: "/messages".into(),
        }));
    let (_server, uri) = start(adapter, config);
    let (client, messages) = connect(uri);
    assert_eq!(client.era(), Era::HttpSse);
    assert_eq!(client.version(), ProtocolVersion::V2024_11_05);
    let result = tools_call(&client, "echo", json!({"text": "old"}), false);
    assert_eq!(result["content"][0]["text"], "old");
    // LEGACY-4: everything comes over the one stream, progress too.
    let result = tools_call(&client, "count", json!({"n": 2}), true);
    assert_eq!(result["content"][0]["text"], "2");
    assert_eq!(progress(&messages), [1.0, 2.0]);
    client.close();
}

#[test]
fn legacy_6_a_legacy_only_server_is_reached_by_the_fallback_blocking_server() {
    legacy_6_fallback(Adapter::Blocking);
}

#[test]
fn legacy_6_a_legacy_only_server_is_reached_by_the_fallback_tokio_server() {
    legacy_6_fallback(Adapter::Tokio);
}

#[test]
fn the_connect_timeout_ends_a_handshake_the_server_never_answers() {
    // Accepts, reads nothing, answers nothing, keeps the sockets open until the test ends.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let held = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(1));
        drop(stream);
    });
    let config = sessions(format!("http://{addr}/mcp").parse().unwrap())
        .with_connect_timeout(Duration::from_millis(200));
    let started = Instant::now();
    let outcome = McpClient::connect(config, counter_entropy(7));
    assert!(matches!(outcome, Err(RequestError::Timeout)), "{outcome:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < TIMEOUT,
        "{took:?}"
    );
    held.join().unwrap();
}

fn http_post_9_server_request(adapter: Adapter) {
    let (_server, uri) = start(adapter, Config::new());
    let (client, messages) = connect(uri);
    // The answering side: a clone of the client on another thread, while this one waits
    // in `call`.
    let answerer = {
        let client = client.clone();
        std::thread::spawn(move || {
            let Ok(ServerMessage::Request(r)) = messages.recv_timeout(TIMEOUT) else {
                panic!("no server request");
            };
            assert_eq!(r.method(), Some("elicitation/create"));
            let result = json!({"action": "accept", "content": {"name": "Ada"}});
            client.respond(r.id().unwrap(), result).unwrap();
        })
    };
    let result = tools_call(&client, "ask", json!({}), false);
    assert_eq!(result["content"][0]["text"], "Ada");
    answerer.join().unwrap();
    client.close();
}

#[test]
fn http_post_9_a_server_request_is_answered_with_respond_blocking_server() {
    http_post_9_server_request(Adapter::Blocking);
}

#[test]
fn http_post_9_a_server_request_is_answered_with_respond_tokio_server() {
    http_post_9_server_request(Adapter::Tokio);
}

/// A TCP front on 127.0.0.1 that counts the connections it accepts and copies each
/// one's bytes both ways; dropping it stops its accept loop.
struct CountingFront {
    uri: http::Uri,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CountingFront {
    fn new(upstream: &http::Uri) -> Self {
        let authority = upstream.authority().unwrap().to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, stopped) = (Arc::clone(&accepted), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                let Ok((inbound, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                inbound.set_nonblocking(false).unwrap();
                let outbound = TcpStream::connect(&authority).unwrap();
                for (mut from, mut to) in [
                    (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                    (outbound, inbound),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Self {
            uri: format!("http://{addr}/mcp").parse().unwrap(),
            accepted,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for CountingFront {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn http_post_2_pooled(adapter: Adapter) {
    let (_server, uri) = start(adapter, Config::new());
    let front = CountingFront::new(&uri);
    let (client, _messages) = connect(front.uri.clone());
    for i in 0..20 {
        let text = format!("call {i}");
        let result = tools_call(&client, "echo", json!({ "text": text }), false);
        assert_eq!(result["content"][0]["text"], text);
    }
    let accepted = front.accepted.load(Ordering::SeqCst);
    // The POSTs share ureq's keep-alive pool; the GET stream has its own connection.
    assert!(
        accepted <= 3,
        "{accepted} connections for 20 sequential calls"
    );
    client.close();
}

#[test]
fn http_post_2_sequential_calls_reuse_pooled_connections_blocking_server() {
    http_post_2_pooled(Adapter::Blocking);
}

#[test]
fn http_post_2_sequential_calls_reuse_pooled_connections_tokio_server() {
    http_post_2_pooled(Adapter::Tokio);
}

fn read_timeout_resumes(adapter: Adapter) {
    // Every stream is primed (an id to resume from) and then quiet for 300 ms at a time.
    // A server learns that the client dropped a connection only when it next writes to
    // it (300 ms later, the blocking server); until then a resume gets 409 (HTTP-GET-9)
    // and the core tries again after `retry`, from a budget of 5 attempts: 150 ms apart,
    // they outlast that.
    let config = Config::new()
        .with_response_mode(ResponseMode::Sse)
        .with_retry(Some(Duration::from_millis(150)));
    let (_server, uri) = start(adapter, config);
    let client_config = sessions(uri).with_connect_timeout(TIMEOUT);
    let options = ClientOptions::new().with_read_timeout(Some(Duration::from_millis(100)));
    let (client, messages) =
        McpClient::connect_with(client_config, counter_entropy(6), options).expect("connected");
    let args = json!({"n": 2, "delay_ms": 300});
    let result = tools_call(&client, "count", args, true);
    assert_eq!(result["content"][0]["text"], "2");
    assert_eq!(progress(&messages), [1.0, 2.0]);
    client.close();
}

/// The idle watchdog breaks a quiet stream; the core resumes it with `Last-Event-ID`
/// (RESUME-4) and nothing is lost or repeated.
#[test]
fn resume_4_the_read_timeout_breaks_a_quiet_stream_and_the_core_resumes_it_blocking_server() {
    read_timeout_resumes(Adapter::Blocking);
}

#[test]
fn resume_4_the_read_timeout_breaks_a_quiet_stream_and_the_core_resumes_it_tokio_server() {
    read_timeout_resumes(Adapter::Tokio);
}

/// The next message that is not a notification (those before it are dropped).
fn next_lifecycle(messages: &Receiver<ServerMessage>) -> ServerMessage {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match messages.recv_timeout(left) {
            Ok(ServerMessage::Notification(_)) => {}
            Ok(m) => return m,
            Err(e) => panic!("no lifecycle message in time: {e:?}"),
        }
    }
}

/// Asserts that the channel holds nothing but notifications now.
fn no_lifecycle(messages: &Receiver<ServerMessage>) {
    for m in messages.try_iter() {
        assert!(matches!(m, ServerMessage::Notification(_)), "{m:?}");
    }
}

/// `params.data` of the next message, which must be a notification.
fn next_data(messages: &Receiver<ServerMessage>) -> String {
    match messages.recv_timeout(TIMEOUT) {
        Ok(ServerMessage::Notification(n)) => {
            let v: Value = serde_json::from_str(n.text().as_str()).unwrap();
            v["params"]["data"].as_str().unwrap().to_owned()
        }
        other => panic!("a notification: {other:?}"),
    }
}

fn session_8_expiry_then_reconnected(adapter: Adapter) {
    // Priming events carry a 20 ms `retry`: the streams the server ends are resumed at
    // once, and the resume meets the 404.
    let config = Config::new().with_retry(Some(Duration::from_millis(20)));
    let (server, uri) = start(adapter, config);
    let (client, messages) = connect_with(sessions(uri).with_reinitialize(true).with_backoff(
        Duration::from_millis(20),
        Duration::from_millis(100),
        5,
    ));
    let first = server.initialized(1);
    // The handshake of `connect` is no `Reconnected`.
    no_lifecycle(&messages);
    // A call in flight on its SSE stream: its first progress arrived.
    let caller = {
        let client = client.clone();
        let params = json!({
            "name": "count",
            "arguments": {"n": 40, "delay_ms": 25},
            "_meta": {"progressToken": "t"},
        });
        std::thread::spawn(move || client.call_timeout("tools/call", Some(params), TIMEOUT))
    };
    match messages.recv_timeout(TIMEOUT) {
        Ok(ServerMessage::Notification(_)) => {}
        other => panic!("the call's progress: {other:?}"),
    }
    assert!(server.with_server(|s, now| s.close_session(now, first)));
    let m = next_lifecycle(&messages);
    assert!(matches!(m, ServerMessage::SessionExpired), "{m:?}");
    // The call in flight failed; the core dispatched that before `SessionExpired`.
    let outcome = caller.join().unwrap();
    assert_eq!(
        outcome.unwrap_err(),
        CallError::Request(RequestError::SessionExpired)
    );
    let m = next_lifecycle(&messages);
    let ServerMessage::Reconnected { version, era, .. } = m else {
        panic!("Reconnected: {m:?}");
    };
    assert_eq!(version, ProtocolVersion::V2025_11_25);
    assert_eq!(era, Era::Sessions);
    assert_eq!(client.version(), version);
    // The next calls go to a new session.
    let result = tools_call(&client, "echo", json!({"text": "after"}), false);
    assert_eq!(result["content"][0]["text"], "after");
    assert_ne!(server.initialized(2), first);
    no_lifecycle(&messages);
    client.close();
}

/// The application sees the server end the session (after the call in flight failed),
/// then the new session, on which calls succeed.
#[test]
fn session_8_the_application_sees_the_expiry_then_the_new_session_blocking_server() {
    session_8_expiry_then_reconnected(Adapter::Blocking);
}

#[test]
fn session_8_the_application_sees_the_expiry_then_the_new_session_tokio_server() {
    session_8_expiry_then_reconnected(Adapter::Tokio);
}

fn session_8_reconnect_failed(adapter: Adapter) {
    let config = Config::new().with_max_sessions(1);
    let (server, uri) = start(adapter, config);
    let (client, messages) = connect_with(
        sessions(uri.clone())
            .with_get_stream(false)
            .with_reinitialize(true),
    );
    let session = server.initialized(1);
    assert!(server.with_server(|s, now| s.close_session(now, session)));
    // Another client takes the one place and holds it active with its GET stream (an
    // idle one would be evicted to make room, SESSION-8): the re-initialization will
    // find the server full (503).
    let (other, _other_messages) = connect_with(sessions(uri));
    let deadline = std::time::Instant::now() + TIMEOUT;
    while server.with_server(|s, _| s.exchange_count()) == 0 {
        assert!(std::time::Instant::now() < deadline, "no GET stream");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let err = client
        .call_timeout("tools/list", None, TIMEOUT)
        .unwrap_err();
    assert_eq!(err, CallError::Request(RequestError::SessionExpired));
    let m = next_lifecycle(&messages);
    assert!(matches!(m, ServerMessage::SessionExpired), "{m:?}");
    let m = next_lifecycle(&messages);
    assert!(
        matches!(
            m,
            ServerMessage::ReconnectFailed(RequestError::Http { status: 503, .. })
        ),
        "{m:?}"
    );
    let err = client
        .call_timeout("tools/list", None, TIMEOUT)
        .unwrap_err();
    assert_eq!(err, CallError::Closed);
    other.close();
    client.close();
}

/// A re-initialization the server refuses is reported, and the client is closed.
#[test]
fn session_8_a_refused_re_initialization_is_reported_blocking_server() {
    session_8_reconnect_failed(Adapter::Blocking);
}

#[test]
fn session_8_a_refused_re_initialization_is_reported_tokio_server() {
    session_8_reconnect_failed(Adapter::Tokio);
}

fn stream_reset(adapter: Adapter) {
    // No frame is retained for replay, so a resume from any id but the newest is a gap
    // (§14.2); a connection that has an unsent byte when the next frame comes is ended;
    // no heartbeat writes in between.
    let config = Config::new()
        .with_retry(Some(Duration::from_millis(20)))
        .with_heartbeat(None)
        .with_max_unsent(0)
        .with_store_limits(StoreLimits::new().with_ring(RingLimits::new().with_max_events(0)));
    let (server, uri) = start(adapter, config);
    let (client, messages) = connect_with(sessions(uri).with_backoff(
        Duration::from_millis(20),
        Duration::from_millis(100),
        5,
    ));
    let session = server.initialized(1);
    // Once this arrived, the GET stream is connected and its connection took every
    // frame it was handed.
    server.with_server(|s, now| notify_session(s, now, session, "probe"));
    assert_eq!(next_data(&messages), "probe");
    // In one step of the server: the first frame is queued on the connection, the
    // second finds it behind and ends it, so the client sees neither. Its resume after
    // the probe's id is refused: neither frame was retained.
    server.with_server(|s, now| {
        notify_session(s, now, session, "one");
        notify_session(s, now, session, "two");
    });
    let m = messages.recv_timeout(TIMEOUT).expect("a message");
    let ServerMessage::StreamReset(RequestError::ResumeFailed { status, message }) = m else {
        panic!("StreamReset: {m:?}");
    };
    assert_eq!(status, 400);
    assert_eq!(message, "events after Last-Event-ID are no longer retained");
    // The fresh GET stream gets what no connection was handed (§14.12), after the reset.
    assert_eq!(next_data(&messages), "one");
    assert_eq!(next_data(&messages), "two");
    // The session goes on.
    let result = tools_call(&client, "echo", json!({"text": "still"}), false);
    assert_eq!(result["content"][0]["text"], "still");
    assert_eq!(server.session_count(), 1);
    no_lifecycle(&messages);
    client.close();
}

/// The standalone GET stream's resume (RESUME-4) is refused as a gap: the application
/// sees `StreamReset`, then the messages of the fresh stream.
#[test]
fn resume_4_a_refused_get_stream_resume_is_reported_as_a_stream_reset_blocking_server() {
    stream_reset(Adapter::Blocking);
}

#[test]
fn resume_4_a_refused_get_stream_resume_is_reported_as_a_stream_reset_tokio_server() {
    stream_reset(Adapter::Tokio);
}

/// The call an application makes (issue 25): `start_tool_call` hands each call its own
/// progress, then its result, in every era; a call given up mid-stream (dropped) stops
/// the server's tool: at 2026-07-28 by closing its response (MODERN-11), before with
/// `notifications/cancelled`.
fn call_tool_in_every_era(adapter: Adapter) {
    let config = Config::new().with_legacy(Some(LegacyPaths {
        sse: "/sse".into(),
        messages: "/messages".into(),
    }));
    let (server, uri) = start(adapter, config);
    let sse: http::Uri = format!("http://{}/sse", uri.authority().unwrap())
        .parse()
        .unwrap();
    let configs = [
        (client::Config::new(uri.clone()), Era::Sessionless),
        (sessions(uri), Era::Sessions),
        (
            client::Config::new(sse).with_revision(client::Revision::Era(Era::HttpSse)),
            Era::HttpSse,
        ),
    ];
    for (config, era) in configs {
        let (client, _messages) = connect_with(config);
        assert_eq!(client.era(), era);
        let mut call = client
            .start_tool_call("count", json!({"n": 3}), Some(TIMEOUT))
            .unwrap();
        let mut steps = Vec::new();
        while let Some(step) = call.progress() {
            steps.push(step.progress);
        }
        assert_eq!(steps, [1.0, 2.0, 3.0], "{era}");
        assert_eq!(call.result().unwrap()["content"][0]["text"], "3", "{era}");
        let echoed = client.call_tool("echo", json!({"text": "hi"})).unwrap();
        assert_eq!(echoed["content"][0]["text"], "hi", "{era}");
        let before = server.stopped.load(Ordering::SeqCst);
        let mut call = client
            .start_tool_call("until_cancelled", json!({}), None)
            .unwrap();
        assert!(call.progress().is_some(), "{era}: the tool runs");
        drop(call);
        let deadline = Instant::now() + TIMEOUT;
        while server.stopped.load(Ordering::SeqCst) == before {
            assert!(Instant::now() < deadline, "{era}: the tool never stopped");
            std::thread::sleep(Duration::from_millis(5));
        }
        client.close();
    }
}

#[test]
fn modern_11_call_tool_with_progress_in_every_era_blocking_server() {
    call_tool_in_every_era(Adapter::Blocking);
}

#[test]
fn modern_11_call_tool_with_progress_in_every_era_tokio_server() {
    call_tool_in_every_era(Adapter::Tokio);
}

/// The client's side of a listen (MODERN-13): the `Call` of `McpClient::listen` yields the
/// acknowledgement, then the tool list's changes; dropping it closes the stream, and a
/// session-era client has no such request.
fn listen(adapter: Adapter) {
    let (_server, uri) = start(adapter, Config::new());
    let (client, _messages) = connect_with(client::Config::new(uri.clone()));
    assert_eq!(client.era(), Era::Sessionless);
    let mut listen = client.listen(json!({"toolsListChanged": true})).unwrap();
    let mut next = || {
        let n = listen.notification().expect("a notification");
        serde_json::from_str::<Value>(n.text().as_str()).unwrap()
    };
    let ack = next();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    for _ in 0..2 {
        let touched = client.call_tool("touch", json!({})).unwrap();
        assert_eq!(touched["content"][0]["text"], "touched");
        assert_eq!(next()["method"], "notifications/tools/list_changed");
    }
    drop(listen);
    client.close();
    let (client, _messages) = connect(uri);
    assert!(matches!(
        client.listen(json!({"toolsListChanged": true})),
        Err(CallError::Request(RequestError::Unsendable(_)))
    ));
    client.close();
}

#[test]
fn modern_13_the_client_listens_blocking_server() {
    listen(Adapter::Blocking);
}

#[test]
fn modern_13_the_client_listens_tokio_server() {
    listen(Adapter::Tokio);
}
