//! `McpClient` against `McpService` on 127.0.0.1: the handshake, a JSON answer, a
//! streamed one with progress, a server that closes streams (SEP-1699 polling) and a
//! legacy-only server, each bounded in time; connections reused across calls, and the
//! handshake's timeout against a server that never answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcpwire::ProtocolVersion;
use mcpwire::client::{self, RequestError, Transport};
use mcpwire::server::{Config, LegacyPaths, ResponseMode};
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::app::{self, Tools, text_result};
use mcpwire_tokio::client::{McpClient, ServerMessage};
use mcpwire_tokio::server::{McpService, serve};
use serde_json::{Value, json};

async fn start(config: Config) -> http::Uri {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (service, events) = McpService::new(config, counter_entropy(5));
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
        );
    tokio::spawn(app::run(service.clone(), events, Arc::new(tools)));
    tokio::spawn(serve(listener, service));
    format!("http://{addr}/mcp").parse().unwrap()
}

async fn connect(
    uri: http::Uri,
) -> (
    McpClient,
    tokio::sync::mpsc::UnboundedReceiver<ServerMessage>,
) {
    let config = client::Config::new(uri);
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
    assert_eq!(client.transport(), Transport::StreamableHttp);
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
    assert_eq!(client.transport(), Transport::HttpSse);
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
    let config = client::Config::new(format!("http://{addr}/mcp").parse().unwrap())
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
