//! The blocking `McpClient` on 127.0.0.1 against both adapters' servers (this crate's
//! tiny_http server, and `mcpwire-tokio`'s on a runtime started by the test), for what
//! is the blocking client's own: re-initialization after the server forgot the session,
//! the legacy fallback, a server→client request answered with `respond`, pooled
//! connections, the handshake's timeout, and the read timeout's resume. Every call and
//! handshake has a deadline and every server is stopped, so each test ends by itself.
//!
//! The handshake, a JSON answer, progress before a streamed result, DELETE on close and
//! resumes through a polling server are in the shared scenario suite
//! (`tests/tests/adapters.rs`), which runs this client and the tokio one against both
//! servers serving `mcpwire serve`'s tools.

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use mcpwire::ProtocolVersion;
use mcpwire::client::{self, RequestError, Transport};
use mcpwire::server::{Config, LegacyPaths, ResponseMode};
use mcpwire_blocking::client::{CallError, ClientOptions, McpClient, ServerMessage};
use mcpwire_tests::server::counter_entropy;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug)]
enum Adapter {
    Blocking,
    Tokio,
}

/// A running server of either adapter; dropping it stops it.
enum Server {
    Blocking(Option<mcpwire_blocking::server::Handle>),
    Tokio {
        /// Dropped with the server: it stops the service's tasks.
        _runtime: tokio::runtime::Runtime,
        service: mcpwire_tokio::server::McpService,
    },
}

impl Server {
    fn session_count(&self) -> usize {
        match self {
            Self::Blocking(h) => h.as_ref().unwrap().with_server(|s, _| s.session_count()),
            Self::Tokio { service, .. } => service.with_server(|s, _| s.session_count()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Self::Blocking(h) = self
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
/// then answers `n`; `ask` asks the client for a name (elicitation) and returns it.
fn start(adapter: Adapter, config: Config) -> (Server, http::Uri) {
    match adapter {
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
                );
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
                Arc::new(tools),
                options,
            )
            .unwrap();
            (
                Server::Blocking(Some(handle)),
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
                );
            // `mount` spawns the service's driver task: inside the runtime.
            let service = {
                let _runtime = rt.enter();
                app::mount(config, counter_entropy(5), Arc::new(tools))
            };
            let listener = rt
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .unwrap();
            let addr = listener.local_addr().unwrap();
            rt.spawn(mcpwire_tokio::server::serve(listener, service.clone()));
            (
                Server::Tokio {
                    _runtime: rt,
                    service,
                },
                format!("http://{addr}/mcp").parse().unwrap(),
            )
        }
    }
}

fn connect_with(config: client::Config) -> (McpClient, Receiver<ServerMessage>) {
    McpClient::connect(config.with_connect_timeout(TIMEOUT), counter_entropy(6)).expect("connected")
}

fn connect(uri: http::Uri) -> (McpClient, Receiver<ServerMessage>) {
    connect_with(client::Config::new(uri))
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
    let (client, _messages) = connect_with(
        client::Config::new(uri)
            .with_get_stream(false)
            .with_reinitialize(true),
    );
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
    assert_eq!(client.transport(), Transport::HttpSse);
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
    let config = client::Config::new(format!("http://{addr}/mcp").parse().unwrap())
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
    let client_config = client::Config::new(uri).with_connect_timeout(TIMEOUT);
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
