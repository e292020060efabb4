//! The client scenarios: `mcpwire-blocking`'s client and `mcpwire-tokio`'s against a
//! server of either adapter, through the same calls: the handshake, `tools/list`, a JSON
//! answer, a JSON-RPC error, a call with progress, and DELETE on close; and against a
//! polling server, calls whose every message comes through resumes.

use std::time::{Duration, Instant};

use mcpwire::Era;
use mcpwire::ProtocolVersion;
use mcpwire::client;
use mcpwire_tests::server::counter_entropy;
use serde_json::{Value, json};

use super::{Server, TIMEOUT, Transcript};

/// The seed of the clients' entropy.
const CLIENT_SEED: u64 = 6;

/// `tools/call` params for `name` with `arguments`, and a progress token if asked.
fn call_params(name: &str, arguments: Value, progress: bool) -> Value {
    let mut params = json!({"name": name, "arguments": arguments});
    if progress {
        params["_meta"] = json!({"progressToken": "t"});
    }
    params
}

/// The client's configuration for `server`, the handshake bounded.
/// A session-era client (what these scenarios exercise: sessions, progress on the
/// session's streams, DELETE); the sessionless revision has its own tests.
fn config(server: &Server) -> client::Config {
    client::Config::new(server.url().parse().expect("a URI"))
        .with_revision(client::Revision::Era(Era::Sessions))
        .with_connect_timeout(TIMEOUT)
}

/// The progress values among the notifications `texts` (JSON-RPC messages as text).
fn progress_of(texts: impl IntoIterator<Item = String>) -> Vec<f64> {
    texts
        .into_iter()
        .map(|text| serde_json::from_str::<Value>(&text).expect("a JSON-RPC message"))
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_f64().expect("a progress value"))
        .collect()
}

/// Waits, within [`TIMEOUT`], until the server holds no session.
fn wait_for_no_session(server: &Server) {
    let deadline = Instant::now() + TIMEOUT;
    while server.session_count() > 0 {
        assert!(
            Instant::now() < deadline,
            "HTTP-DELETE-1: the session stayed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What both clients are asked, in order: the tool names, the echo result, the error of
/// an unknown method, the `slow_count` result and the progress seen before it.
fn assert_answers(t: &Transcript) {
    let expected = [
        ("tools", json!(["echo", "slow_count"])),
        ("echo", json!({"content": [{"type": "text", "text": "hi"}]})),
        ("unknown method", json!({"code": -32601})),
        (
            "slow_count",
            json!({"content": [{"type": "text", "text": "3"}]}),
        ),
        ("progress before the result", json!([1.0, 2.0, 3.0])),
    ];
    let got: Vec<(&str, &Value)> = t.0.iter().map(|(l, v)| (l.as_str(), v)).collect();
    let expected: Vec<(&str, &Value)> = expected.iter().map(|(l, v)| (*l, v)).collect();
    assert_eq!(got, expected);
}

/// SESSION-1, HTTP-POST-9, HTTP-DELETE-1: the blocking client's handshake, calls, a call
/// with progress (every notification on the channel before the result returns), and
/// `close`, which deletes the session.
pub(crate) fn blocking_client(server: &Server) -> Transcript {
    use mcpwire_blocking::client::{CallError, McpClient, ServerMessage};
    let mut t = Transcript::default();
    let (client, messages) =
        McpClient::connect(config(server), counter_entropy(CLIENT_SEED)).expect("connected");
    assert_eq!(client.version(), ProtocolVersion::V2025_11_25);
    assert_eq!(client.era(), Era::Sessions);
    assert!(client.session_id().is_some(), "SESSION-1");
    assert_eq!(server.session_count(), 1);
    let tools = client
        .call_timeout("tools/list", None, TIMEOUT)
        .expect("tools");
    let names: Vec<&Value> = tools["tools"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|tool| &tool["name"])
        .collect();
    t.record("tools", json!(names));
    let echo = client
        .call_timeout(
            "tools/call",
            Some(call_params("echo", json!({"text": "hi"}), false)),
            TIMEOUT,
        )
        .expect("echo");
    t.record("echo", echo);
    let error = client
        .call_timeout("no/such/method", None, TIMEOUT)
        .expect_err("an unknown method");
    let CallError::Rpc { code, .. } = error else {
        panic!("a JSON-RPC error: {error:?}");
    };
    t.record("unknown method", json!({ "code": code }));
    let params = call_params("slow_count", json!({"n": 3, "delay_ms": 5}), true);
    let counted = client
        .call_timeout("tools/call", Some(params), TIMEOUT)
        .expect("slow_count");
    t.record("slow_count", counted);
    // Dispatched in stream order, before the result reached this thread.
    let notes = messages.try_iter().filter_map(|m| match m {
        ServerMessage::Notification(n) => Some(n.text().as_str().to_owned()),
        _ => None,
    });
    t.record("progress before the result", json!(progress_of(notes)));
    assert_answers(&t);
    let started = Instant::now();
    client.close();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "close waited out its bound"
    );
    // The DELETE was answered before `close` returned: the session is gone.
    assert_eq!(server.session_count(), 0, "HTTP-DELETE-1");
    // The last clone went with `close`: the receiver has ended already (a reader
    // thread can be joined), not once the client's threads have wound down.
    assert_eq!(
        messages.try_recv().err(),
        Some(std::sync::mpsc::TryRecvError::Disconnected),
        "the receiver outlived the client"
    );
    t
}

/// [`blocking_client`] with `mcpwire-tokio`'s client, on a runtime of its own.
pub(crate) fn tokio_client(server: &Server) -> Transcript {
    use mcpwire_tokio::client::{CallError, McpClient, ServerMessage};
    let runtime = client_runtime();
    let t = runtime.block_on(async {
        let mut t = Transcript::default();
        let (client, mut messages) = within(
            "connect",
            McpClient::connect(config(server), counter_entropy(CLIENT_SEED)),
        )
        .await
        .expect("connected");
        assert_eq!(client.version(), ProtocolVersion::V2025_11_25);
        assert_eq!(client.era(), Era::Sessions);
        assert_eq!(server.session_count(), 1, "SESSION-1");
        let tools = within("tools/list", client.call("tools/list", None))
            .await
            .expect("tools");
        let names: Vec<&Value> = tools["tools"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|tool| &tool["name"])
            .collect();
        t.record("tools", json!(names));
        let params = call_params("echo", json!({"text": "hi"}), false);
        let echo = within("echo", client.call("tools/call", Some(params)))
            .await
            .expect("echo");
        t.record("echo", echo);
        let error = within("no/such/method", client.call("no/such/method", None))
            .await
            .expect_err("an unknown method");
        let CallError::Rpc { code, .. } = error else {
            panic!("a JSON-RPC error: {error:?}");
        };
        t.record("unknown method", json!({ "code": code }));
        let params = call_params("slow_count", json!({"n": 3, "delay_ms": 5}), true);
        let counted = within("slow_count", client.call("tools/call", Some(params)))
            .await
            .expect("slow_count");
        t.record("slow_count", counted);
        let mut notes = Vec::new();
        while let Ok(m) = messages.try_recv() {
            if let ServerMessage::Notification(n) = m {
                notes.push(n.text().as_str().to_owned());
            }
        }
        t.record("progress before the result", json!(progress_of(notes)));
        assert_answers(&t);
        client.close().await;
        // With the last clone gone, the driver stops and the receiver ends.
        let end = within("the receiver's end", messages.recv()).await;
        assert!(end.is_none(), "a message after close: {end:?}");
        t
    });
    drop(runtime);
    wait_for_no_session(server);
    t
}

/// `future`'s output, or a failure naming `what` after [`TIMEOUT`].
async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer in {TIMEOUT:?}"))
}

/// A runtime for the tokio client, apart from the server's.
fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// How many calls each resume scenario makes, one after the other on one session.
const RESUMED_CALLS: u32 = 2;

/// RESUME-4, RESUME-9, RESUME-11 (`--poll-ms 0 --retry-ms 20`): the server closes every
/// stream after its priming event; the blocking client resumes with `Last-Event-ID`
/// after each `retry`, and each call's five progress notifications and result arrive
/// exactly once.
pub(crate) fn blocking_client_resumes(server: &Server) -> Transcript {
    use mcpwire_blocking::client::{McpClient, ServerMessage};
    let mut t = Transcript::default();
    let (client, messages) =
        McpClient::connect(config(server), counter_entropy(CLIENT_SEED)).expect("connected");
    for call in 0..RESUMED_CALLS {
        let params = call_params("slow_count", json!({"n": 5, "delay_ms": 5}), true);
        let counted = client
            .call_timeout("tools/call", Some(params), TIMEOUT)
            .expect("slow_count");
        t.record(&format!("call {call}"), counted.clone());
        assert_eq!(counted["content"][0]["text"], "5");
        let notes = messages.try_iter().filter_map(|m| match m {
            ServerMessage::Notification(n) => Some(n.text().as_str().to_owned()),
            _ => None,
        });
        let progress = progress_of(notes);
        assert_eq!(progress, [1.0, 2.0, 3.0, 4.0, 5.0], "each once, in order");
        t.record(&format!("call {call}, progress"), json!(progress));
    }
    client.close();
    wait_for_no_session(server);
    t
}

/// [`blocking_client_resumes`] with `mcpwire-tokio`'s client.
pub(crate) fn tokio_client_resumes(server: &Server) -> Transcript {
    use mcpwire_tokio::client::{McpClient, ServerMessage};
    let runtime = client_runtime();
    let t = runtime.block_on(async {
        let mut t = Transcript::default();
        let (client, mut messages) = within(
            "connect",
            McpClient::connect(config(server), counter_entropy(CLIENT_SEED)),
        )
        .await
        .expect("connected");
        for call in 0..RESUMED_CALLS {
            let params = call_params("slow_count", json!({"n": 5, "delay_ms": 5}), true);
            let counted = within("slow_count", client.call("tools/call", Some(params)))
                .await
                .expect("slow_count");
            t.record(&format!("call {call}"), counted.clone());
            assert_eq!(counted["content"][0]["text"], "5");
            let mut notes = Vec::new();
            while let Ok(m) = messages.try_recv() {
                if let ServerMessage::Notification(n) = m {
                    notes.push(n.text().as_str().to_owned());
                }
            }
            let progress = progress_of(notes);
            assert_eq!(progress, [1.0, 2.0, 3.0, 4.0, 5.0], "each once, in order");
            t.record(&format!("call {call}, progress"), json!(progress));
        }
        client.close().await;
        t
    });
    drop(runtime);
    wait_for_no_session(server);
    t
}
