//! `McpClient` against `McpService` on 127.0.0.1: the handshake, a JSON answer, a
//! streamed one with progress, a server that closes streams (SEP-1699 polling) and a
//! legacy-only server, each bounded in time.

use std::sync::Arc;
use std::time::Duration;

use mcpwire::ProtocolVersion;
use mcpwire::client::{self, Transport};
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
