//! `McpClient` against `McpService` on 127.0.0.1: the handshake, a JSON answer, a
//! streamed one with progress, a server that closes streams (SEP-1699 polling) and a
//! legacy-only server, each bounded in time; connections reused across calls, the
//! handshake's timeout against a server that never answers, and the lifecycle messages
//! the application sees (the expiry, the new session, a refused re-initialization, a
//! GET stream that could not be resumed).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use mcpwire::Era;
use mcpwire::ProtocolVersion;
use mcpwire::client::{self, RequestError};
use mcpwire::resume::{RingLimits, StoreLimits};
use mcpwire::server::{Config, Event, LegacyPaths, ResponseMode, SessionId};
use mcpwire_tests::server::{counter_entropy, notify_session};
use mcpwire_tokio::app::{self, BoxFuture, Call, Handler, Tools, text_result};
use mcpwire_tokio::client::{CallError, McpClient, ServerMessage};
use mcpwire_tokio::server::{McpService, serve};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// A session-era client: these tests are about sessions, resumes and re-initialization
/// (the default finds the sessionless revision first, and the server serves it).
fn sessions(uri: http::Uri) -> client::Config {
    client::Config::new(uri).with_revision(client::Revision::Era(mcpwire::Era::Sessions))
}

const TIMEOUT: Duration = Duration::from_secs(5);

/// The sessions whose `notifications/initialized` the server took, in order.
type Initialized = Arc<Mutex<Vec<SessionId>>>;

/// The tool table, recording in [`Initialized`] each session whose
/// `notifications/initialized` the server took.
struct Watched {
    tools: Tools,
    initialized: Initialized,
}

impl Handler for Watched {
    fn server_info(&self) -> Value {
        self.tools.server_info()
    }

    fn capabilities(&self) -> Value {
        self.tools.capabilities()
    }

    fn observe(&self, event: &Event) {
        if let Event::Notification {
            session: Some(session),
            message,
        } = event
            && message.method() == Some("notifications/initialized")
        {
            self.initialized.lock().unwrap().push(*session);
        }
        self.tools.observe(event);
    }

    fn call(&self, call: Call) -> BoxFuture<Result<Value, app::CallError>> {
        self.tools.call(call)
    }
}

/// A server started by [`start_server`].
struct Server {
    service: McpService,
    uri: http::Uri,
    initialized: Initialized,
    /// How many `until_cancelled` calls stopped because the client gave them up.
    stopped: Arc<AtomicUsize>,
}

impl Server {
    /// The `n`th session (from 1) whose `notifications/initialized` the server took,
    /// once it did. The client sends that notification and its first requests on
    /// separate exchanges, so it may arrive after them: a test that ends the session
    /// waits for it, or it may be the request that meets the 404.
    async fn initialized(&self, n: usize) -> SessionId {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(s) = self.initialized.lock().unwrap().get(n - 1) {
                return *s;
            }
            assert!(Instant::now() < deadline, "session {n} never initialized");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

async fn start(config: Config) -> http::Uri {
    start_server(config).await.uri
}

async fn start_server(config: Config) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (service, events) = McpService::new(config, counter_entropy(5));
    let stopped = Arc::new(AtomicUsize::new(0));
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
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let _ = call.progress(f64::from(i), None);
                }
                Ok(text_result(&n.to_string()))
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
    let initialized = Initialized::default();
    let handler = Watched {
        tools,
        initialized: Arc::clone(&initialized),
    };
    tokio::spawn(app::run(service.clone(), events, Arc::new(handler)));
    tokio::spawn(serve(listener, service.clone()));
    Server {
        service,
        uri: format!("http://{addr}/mcp").parse().unwrap(),
        initialized,
        stopped,
    }
}

async fn connect(uri: http::Uri) -> (McpClient, UnboundedReceiver<ServerMessage>) {
    connect_with(sessions(uri)).await
}

async fn connect_with(config: client::Config) -> (McpClient, UnboundedReceiver<ServerMessage>) {
    tokio::time::timeout(
        Duration::from_secs(5),
        McpClient::connect(config, counter_entropy(6)),
    )
    .await
    .expect("connected in time")
    .expect("connected")
}

async fn call(client: &McpClient, name: &str, args: Value, progress: bool) -> Value {
    let mut params = json!({"name": name, "arguments": args});
    if progress {
        params["_meta"] = json!({"progressToken": "t"});
    }
    tokio::time::timeout(
        Duration::from_secs(5),
        client.call("tools/call", Some(params)),
    )
    .await
    .expect("answered in time")
    .expect("a result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_call_and_stream_progress_over_real_http() {
    let uri = start(Config::new()).await;
    let (client, mut messages) = connect(uri).await;
    assert_eq!(client.version(), ProtocolVersion::V2025_11_25);
    assert_eq!(client.era(), Era::Sessions);
    let result = call(&client, "echo", json!({"text": "hi"}), false).await;
    assert_eq!(result["content"][0]["text"], "hi");
    let result = call(&client, "count", json!({"n": 3}), true).await;
    assert_eq!(result["content"][0]["text"], "3");
    let mut progress = Vec::new();
    while let Ok(ServerMessage::Notification(n)) = messages.try_recv() {
        let v: Value = serde_json::from_str(n.text().as_str()).unwrap();
        progress.push(v["params"]["progress"].as_f64().unwrap());
    }
    assert_eq!(progress, [1.0, 2.0, 3.0]);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polling_server_closes_streams_and_the_client_resumes() {
    let config = Config::new()
        .with_response_mode(ResponseMode::Sse)
        .with_polling(Some(Duration::ZERO))
        .with_retry(Some(Duration::from_millis(20)));
    let uri = start(config).await;
    let (client, _messages) = connect(uri).await;
    let result = call(&client, "count", json!({"n": 3}), true).await;
    assert_eq!(result["content"][0]["text"], "3");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_only_server_is_reached_by_the_fallback() {
    let config = Config::new()
        .with_endpoint("/streamable")
        .with_legacy(Some(LegacyPaths {
            sse: "/mcp".into(),
            messages: "/messages".into(),
        }));
    let uri = start(config).await;
    let (client, _messages) = connect(uri).await;
    assert_eq!(client.era(), Era::HttpSse);
    let result = call(&client, "echo", json!({"text": "old"}), false).await;
    assert_eq!(result["content"][0]["text"], "old");
    client.close().await;
}

/// A TCP front for `upstream` on 127.0.0.1 that counts the connections it accepts and
/// copies each one's bytes both ways.
async fn counting_front(upstream: http::Uri) -> (http::Uri, Arc<AtomicUsize>) {
    let authority = upstream.authority().unwrap().to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let authority = authority.clone();
            tokio::spawn(async move {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(authority).await else {
                    return;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (format!("http://{addr}/mcp").parse().unwrap(), accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_calls_reuse_pooled_connections() {
    let (uri, accepted) = counting_front(start(Config::new()).await).await;
    let (client, _messages) = connect(uri).await;
    for i in 0..20 {
        let text = format!("call {i}");
        let result = call(&client, "echo", json!({ "text": text }), false).await;
        assert_eq!(result["content"][0]["text"], text);
    }
    let accepted = accepted.load(Ordering::SeqCst);
    eprintln!("20 calls after the handshake: {accepted} TCP connections accepted");
    // The handshake's POST, the GET stream, and at most one more: the calls reuse.
    assert!(
        accepted <= 3,
        "{accepted} connections for 20 sequential calls"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connect_timeout_ends_a_handshake_the_server_never_answers() {
    // Accepts, reads nothing, answers nothing, keeps the sockets open.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let config = sessions(format!("http://{addr}/mcp").parse().unwrap())
        .with_connect_timeout(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(5),
        McpClient::connect(config, counter_entropy(7)),
    )
    .await
    .expect("the handshake ended in time");
    assert!(matches!(outcome, Err(RequestError::Timeout)), "{outcome:?}");
    assert!(started.elapsed() >= Duration::from_millis(200));
}

/// The next message that is not a notification (those before it are dropped).
async fn next_lifecycle(messages: &mut UnboundedReceiver<ServerMessage>) -> ServerMessage {
    let next = async {
        loop {
            match messages.recv().await {
                Some(ServerMessage::Notification(_)) => {}
                Some(m) => return m,
                None => panic!("the channel closed"),
            }
        }
    };
    tokio::time::timeout(TIMEOUT, next)
        .await
        .expect("a lifecycle message in time")
}

/// Asserts that the channel holds nothing but notifications now.
fn no_lifecycle(messages: &mut UnboundedReceiver<ServerMessage>) {
    while let Ok(m) = messages.try_recv() {
        assert!(matches!(m, ServerMessage::Notification(_)), "{m:?}");
    }
}

/// `params.data` of the next message, which must be a notification.
async fn next_data(messages: &mut UnboundedReceiver<ServerMessage>) -> String {
    match tokio::time::timeout(TIMEOUT, messages.recv()).await {
        Ok(Some(ServerMessage::Notification(n))) => {
            let v: Value = serde_json::from_str(n.text().as_str()).unwrap();
            v["params"]["data"].as_str().unwrap().to_owned()
        }
        other => panic!("a notification: {other:?}"),
    }
}

/// The application sees the server end the session, after the call in flight failed,
/// then the new session, on which calls succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_8_the_application_sees_the_expiry_then_the_new_session() {
    // Priming events carry a 20 ms `retry`: the streams the server ends are resumed at
    // once, and the resume meets the 404.
    let server = start_server(Config::new().with_retry(Some(Duration::from_millis(20)))).await;
    let (client, mut messages) = connect_with(
        sessions(server.uri.clone())
            .with_reinitialize(true)
            .with_backoff(Duration::from_millis(20), Duration::from_millis(100), 5),
    )
    .await;
    let first = server.initialized(1).await;
    let first_id = client.session_id().expect("a session id");
    assert_eq!(first_id.len(), 32, "{first_id}");
    // The handshake of `connect` is no `Reconnected`.
    no_lifecycle(&mut messages);
    // A call in flight on its SSE stream: polled until its first progress arrived.
    let params = json!({
        "name": "count",
        "arguments": {"n": 100},
        "_meta": {"progressToken": "t"},
    });
    let mut in_flight = Box::pin(client.call("tools/call", Some(params)));
    let progress = async {
        tokio::select! {
            r = &mut in_flight => panic!("the call ended early: {r:?}"),
            m = messages.recv() => match m {
                Some(ServerMessage::Notification(_)) => {}
                other => panic!("the call's progress: {other:?}"),
            },
        }
    };
    tokio::time::timeout(TIMEOUT, progress)
        .await
        .expect("progress in time");
    assert!(
        server
            .service
            .with_server(|s, now| s.close_session(now, first))
    );
    // Not polling the call meanwhile.
    let m = next_lifecycle(&mut messages).await;
    assert!(matches!(m, ServerMessage::SessionExpired), "{m:?}");
    // Its answer was handed over before `SessionExpired` was sent: ready at the first
    // poll now (unconstrained: no cooperative budget can make that poll wait).
    let polled = tokio::task::unconstrained(std::future::poll_fn(|cx| {
        Poll::Ready(in_flight.as_mut().poll(cx))
    }))
    .await;
    let Poll::Ready(outcome) = polled else {
        panic!("the call in flight was not answered before SessionExpired");
    };
    assert_eq!(
        outcome.unwrap_err(),
        CallError::Request(RequestError::SessionExpired)
    );
    drop(in_flight);
    let m = next_lifecycle(&mut messages).await;
    let ServerMessage::Reconnected { version, era, .. } = m else {
        panic!("Reconnected: {m:?}");
    };
    assert_eq!(version, ProtocolVersion::V2025_11_25);
    assert_eq!(era, Era::Sessions);
    assert_eq!(client.version(), version);
    let new_id = client.session_id().expect("a new session id");
    assert_ne!(new_id, first_id);
    // The next calls go to a new session.
    let result = call(&client, "echo", json!({"text": "after"}), false).await;
    assert_eq!(result["content"][0]["text"], "after");
    assert_ne!(server.initialized(2).await, first);
    no_lifecycle(&mut messages);
    client.close().await;
}

async fn list_tools(client: &McpClient) -> Result<Value, CallError> {
    tokio::time::timeout(TIMEOUT, client.call("tools/list", None))
        .await
        .expect("answered in time")
}

/// A re-initialization the server refuses is reported, and the client is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_8_a_refused_re_initialization_is_reported() {
    let server = start_server(Config::new().with_max_sessions(1)).await;
    let (client, mut messages) = connect_with(
        sessions(server.uri.clone())
            .with_get_stream(false)
            .with_reinitialize(true),
    )
    .await;
    let session = server.initialized(1).await;
    assert!(
        server
            .service
            .with_server(|s, now| s.close_session(now, session))
    );
    // Another client takes the one place and holds it active with its GET stream (an
    // idle one would be evicted to make room, SESSION-8): the re-initialization will
    // find the server full (503).
    let (other, _other_messages) = connect_with(sessions(server.uri.clone())).await;
    tokio::time::timeout(TIMEOUT, async {
        while server.service.with_server(|s, _| s.exchange_count()) == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the other client's GET stream");
    let err = list_tools(&client).await.unwrap_err();
    assert_eq!(err, CallError::Request(RequestError::SessionExpired));
    let m = next_lifecycle(&mut messages).await;
    assert!(matches!(m, ServerMessage::SessionExpired), "{m:?}");
    let m = next_lifecycle(&mut messages).await;
    assert!(
        matches!(
            m,
            ServerMessage::ReconnectFailed(RequestError::Http { status: 503, .. })
        ),
        "{m:?}"
    );
    assert_eq!(list_tools(&client).await.unwrap_err(), CallError::Closed);
    other.close().await;
    client.close().await;
}

/// The standalone GET stream's resume (RESUME-4) is refused as a gap: the application
/// sees `StreamReset`, then the messages of the fresh stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_4_a_refused_get_stream_resume_is_reported_as_a_stream_reset() {
    // No frame is retained for replay, so a resume from any id but the newest is a gap
    // (§14.2); a connection that has an unsent byte when the next frame comes is ended;
    // no heartbeat writes in between.
    let config = Config::new()
        .with_retry(Some(Duration::from_millis(20)))
        .with_heartbeat(None)
        .with_max_unsent(0)
        .with_store_limits(StoreLimits::new().with_ring(RingLimits::new().with_max_events(0)));
    let server = start_server(config).await;
    let (client, mut messages) = connect_with(sessions(server.uri.clone()).with_backoff(
        Duration::from_millis(20),
        Duration::from_millis(100),
        5,
    ))
    .await;
    let session = server.initialized(1).await;
    // Once this arrived, the GET stream is connected and its connection took every
    // frame it was handed.
    server
        .service
        .with_server(|s, now| notify_session(s, now, session, "probe"));
    assert_eq!(next_data(&mut messages).await, "probe");
    // In one step of the server: the first frame is queued on the connection, the
    // second finds it behind and ends it, so the client sees neither. Its resume after
    // the probe's id is refused: neither frame was retained.
    server.service.with_server(|s, now| {
        notify_session(s, now, session, "one");
        notify_session(s, now, session, "two");
    });
    let m = tokio::time::timeout(TIMEOUT, messages.recv())
        .await
        .expect("a message in time");
    let Some(ServerMessage::StreamReset(RequestError::ResumeFailed { status, message })) = m else {
        panic!("StreamReset: {m:?}");
    };
    assert_eq!(status, 400);
    assert_eq!(message, "events after Last-Event-ID are no longer retained");
    // The fresh GET stream gets what no connection was handed (§14.12), after the reset.
    assert_eq!(next_data(&mut messages).await, "one");
    assert_eq!(next_data(&mut messages).await, "two");
    // The session goes on.
    let result = call(&client, "echo", json!({"text": "still"}), false).await;
    assert_eq!(result["content"][0]["text"], "still");
    assert_eq!(server.service.with_server(|s, _| s.session_count()), 1);
    no_lifecycle(&mut messages);
    client.close().await;
}

/// The call an application makes (issue 25): `start_tool_call` hands each call its own
/// progress, then its result, in every era; a call given up mid-stream (dropped) stops
/// the server's tool: at 2026-07-28 by closing its response (MODERN-11), before with
/// `notifications/cancelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_11_call_tool_with_progress_in_every_era() {
    let server = start_server(Config::new().with_legacy(Some(LegacyPaths {
        sse: "/sse".into(),
        messages: "/messages".into(),
    })))
    .await;
    let uri = server.uri.clone();
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
        let (client, _messages) = connect_with(config).await;
        assert_eq!(client.era(), era);
        let mut call = client
            .start_tool_call("count", json!({"n": 3}), Some(TIMEOUT))
            .unwrap();
        let mut steps = Vec::new();
        while let Some(step) = call.progress().await {
            steps.push(step.progress);
        }
        assert_eq!(steps, [1.0, 2.0, 3.0], "{era}");
        let result = call.result().await.unwrap();
        assert_eq!(result["content"][0]["text"], "3", "{era}");
        let echoed = client.call_tool("echo", json!({"text": "hi"})).await;
        assert_eq!(echoed.unwrap()["content"][0]["text"], "hi", "{era}");
        let before = server.stopped.load(Ordering::SeqCst);
        let mut call = client
            .start_tool_call("until_cancelled", json!({}), None)
            .unwrap();
        assert!(call.progress().await.is_some(), "{era}: the tool runs");
        drop(call);
        let deadline = Instant::now() + TIMEOUT;
        while server.stopped.load(Ordering::SeqCst) == before {
            assert!(Instant::now() < deadline, "{era}: the tool never stopped");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        client.close().await;
    }
}
