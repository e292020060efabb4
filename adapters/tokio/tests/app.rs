//! `app::mount`, the in-place dispatcher, on 127.0.0.1: handlers answered on the
//! connection's task, a cancel that reaches a handler still running, a handler that
//! panics (an error answer, and the server goes on), and a server→client request from
//! inside a handler (the dispatcher must not deadlock on the table of pending ones).
//! Every wait is bounded.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcpwire::server::Config;
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::app::{self, CallError, Tools, text_result};
use mcpwire_tokio::client::{CallError as ClientError, McpClient, ServerMessage};
use mcpwire_tokio::server::serve;
use serde_json::{Value, json};
use tokio::sync::Notify;

struct Signals {
    started: Notify,
    cancelled: Notify,
}

async fn start(signals: Arc<Signals>) -> std::net::SocketAddr {
    start_sharded(signals, 1).await.0
}

/// The tools served over `shards` cores; the address and the service.
async fn start_sharded(
    signals: Arc<Signals>,
    shards: usize,
) -> (std::net::SocketAddr, mcpwire_tokio::server::McpService) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tools = Tools::new()
        .with_tool(
            "echo",
            "",
            json!({"type": "object"}),
            |_c, a: Value| async move { Ok(text_result(a["text"].as_str().unwrap_or(""))) },
        )
        .with_tool(
            "wait",
            "",
            json!({"type": "object"}),
            move |call, _a: Value| {
                let signals = Arc::clone(&signals);
                async move {
                    signals.started.notify_one();
                    tokio::time::timeout(Duration::from_secs(5), call.cancelled())
                        .await
                        .map_err(|_| CallError::invalid_params("never cancelled"))?;
                    signals.cancelled.notify_one();
                    Ok(text_result("cancelled"))
                }
            },
        )
        .with_tool(
            "boom",
            "",
            json!({"type": "object"}),
            |_c, _a: Value| async move {
                if true {
                    panic!("a handler bug");
                }
                Ok(text_result("unreachable"))
            },
        )
        .with_tool(
            "ask",
            "",
            json!({"type": "object"}),
            |call, _a: Value| async move {
                let answer = call
                    .request("sampling/createMessage", json!({"messages": []}))
                    .await?;
                Ok(text_result(
                    answer["content"]["text"].as_str().unwrap_or(""),
                ))
            },
        );
    let tools = tools.with_tool(
        "ask_briefly",
        "",
        json!({"type": "object"}),
        |call, _a: Value| async move {
            let asked = call
                .request_with_timeout(
                    "elicitation/create",
                    json!({"message": "?"}),
                    Some(Duration::from_millis(100)),
                )
                .await;
            let text = match asked {
                Ok(answer) => answer.to_string(),
                Err(e) => e.message,
            };
            Ok(text_result(&text))
        },
    );
    let service = app::mount_sharded(shards, Config::new(), counter_entropy(21), Arc::new(tools));
    tokio::spawn(serve(listener, service.clone()));
    (addr, service)
}

async fn post(
    addr: std::net::SocketAddr,
    session: Option<&str>,
    body: String,
) -> (u16, Option<String>, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut b = http::Request::post("/mcp")
        .header("host", addr.to_string())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    let response = send
        .send_request(b.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = tokio::time::timeout(Duration::from_secs(5), response.into_body().collect())
        .await
        .expect("a body in time")
        .unwrap()
        .to_bytes();
    (status, session, String::from_utf8(body.to_vec()).unwrap())
}

fn call_body(id: u32, tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"text":"hi"}}}}}}"#
    )
}

/// HTTP-POST-12 (a `notifications/cancelled` reaches the running handler), and a
/// handler's panic becomes a -32603 answer while the server goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_post_12_mount_delivers_a_cancel_to_a_running_handler_and_survives_a_panic() {
    let signals = Arc::new(Signals {
        started: Notify::new(),
        cancelled: Notify::new(),
    });
    let addr = start(Arc::clone(&signals)).await;
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (status, session, _) = post(addr, None, init.into()).await;
    assert_eq!(status, 200);
    let session = session.expect("a session");

    let (_, _, echo) = post(addr, Some(&session), call_body(1, "echo")).await;
    assert!(echo.contains(r#""text":"hi""#), "{echo}");

    let waiting = tokio::spawn({
        let session = session.clone();
        async move { post(addr, Some(&session), call_body(5, "wait")).await }
    });
    tokio::time::timeout(Duration::from_secs(5), signals.started.notified())
        .await
        .expect("the handler started");
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#;
    let (status, _, _) = post(addr, Some(&session), cancel.into()).await;
    assert_eq!(status, 202);
    tokio::time::timeout(Duration::from_secs(5), signals.cancelled.notified())
        .await
        .expect("the handler saw the cancel");
    waiting.abort();

    let (status, _, boom) = post(addr, Some(&session), call_body(6, "boom")).await;
    assert_eq!(status, 200);
    assert!(
        boom.contains("-32603") && boom.contains("panicked"),
        "{boom}"
    );
    let (_, _, echo) = post(addr, Some(&session), call_body(7, "echo")).await;
    assert!(echo.contains(r#""text":"hi""#), "{echo}");
}

/// HTTP-POST-9: a server→client request sent from inside a handler reaches the client
/// on the request's stream, and the client's answer reaches the handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_post_9_mount_a_handler_asks_the_client_and_gets_its_answer() {
    let signals = Arc::new(Signals {
        started: Notify::new(),
        cancelled: Notify::new(),
    });
    let addr = start(signals).await;
    let uri: http::Uri = format!("http://{addr}/mcp").parse().unwrap();
    let (client, mut messages) = tokio::time::timeout(
        Duration::from_secs(5),
        McpClient::connect(
            mcpwire::client::Config::new(uri)
                .with_revision(mcpwire::client::Revision::Era(mcpwire::Era::Sessions)),
            counter_entropy(22),
        ),
    )
    .await
    .expect("connected in time")
    .expect("connected");
    let answering = tokio::spawn({
        let client = client.clone();
        async move {
            while let Some(message) = messages.recv().await {
                if let ServerMessage::Request(request) = message {
                    let id = request.id().cloned().expect("a request id");
                    client
                        .respond(&id, json!({"role": "assistant", "content": {"type": "text", "text": "from the client"}}))
                        .unwrap();
                }
            }
        }
    });
    let result: Result<Value, ClientError> = tokio::time::timeout(
        Duration::from_secs(5),
        client.call("tools/call", Some(json!({"name": "ask", "arguments": {}}))),
    )
    .await
    .expect("answered in time");
    assert_eq!(result.unwrap()["content"][0]["text"], "from the client");
    answering.abort();
    client.close().await;
}

/// HTTP-POST-9: a server→client request given a timeout fails once it passes without an
/// answer (the core's deadline), and the handler goes on to answer its own request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_post_9_a_request_to_a_client_that_never_answers_times_out() {
    let signals = Arc::new(Signals {
        started: Notify::new(),
        cancelled: Notify::new(),
    });
    let addr = start(signals).await;
    let uri: http::Uri = format!("http://{addr}/mcp").parse().unwrap();
    let (client, mut messages) = tokio::time::timeout(
        Duration::from_secs(5),
        McpClient::connect(
            mcpwire::client::Config::new(uri)
                .with_revision(mcpwire::client::Revision::Era(mcpwire::Era::Sessions)),
            counter_entropy(24),
        ),
    )
    .await
    .expect("connected in time")
    .expect("connected");
    // Reads the server's messages and answers none.
    let ignoring = tokio::spawn(async move { while messages.recv().await.is_some() {} });
    let result: Result<Value, ClientError> = tokio::time::timeout(
        Duration::from_secs(5),
        client.call(
            "tools/call",
            Some(json!({"name": "ask_briefly", "arguments": {}})),
        ),
    )
    .await
    .expect("answered in time");
    assert_eq!(
        result.unwrap()["content"][0]["text"],
        "elicitation/create: no response"
    );
    ignoring.abort();
    client.close().await;
}

/// HTTP-POST-8, HTTP-POST-11, RESUME-8: under `ResponseMode::Sse`, a handler that answers
/// at its first poll has answered before the connection's task takes the response head,
/// so the whole stream (priming event and answer) goes out as one body of known length,
/// not as chunks; a handler that waits gets a streamed (chunked) response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_post_8_an_sse_answer_given_at_once_leaves_with_its_head_and_length() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tools = Tools::new()
        .with_tool(
            "echo",
            "",
            json!({"type": "object"}),
            |_c, a: Value| async move { Ok(text_result(a["text"].as_str().unwrap_or(""))) },
        )
        .with_tool(
            "later",
            "",
            json!({"type": "object"}),
            |_c, _a: Value| async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(text_result("later"))
            },
        );
    let config = Config::new().with_response_mode(mcpwire::server::ResponseMode::Sse);
    let service = app::mount(config, counter_entropy(23), Arc::new(tools));
    tokio::spawn(serve(listener, service));

    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut session: Option<String> = None;
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    for (body, expect_length) in [
        (init.to_owned(), true),
        (call_body(1, "echo"), true),
        (call_body(2, "later"), false),
    ] {
        let mut b = http::Request::post("/mcp")
            .header("host", addr.to_string())
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(s) = &session {
            b = b.header("mcp-session-id", s);
        }
        let response = tokio::time::timeout(
            Duration::from_secs(5),
            send.send_request(b.body(Full::new(Bytes::from(body))).unwrap()),
        )
        .await
        .expect("answered in time")
        .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        if let Some(s) = response.headers().get("mcp-session-id") {
            session = Some(s.to_str().unwrap().to_owned());
        }
        let length = response
            .headers()
            .get("content-length")
            .map(|v| v.to_str().unwrap().parse::<usize>().unwrap());
        let chunked = response.headers().get("transfer-encoding").is_some();
        let text = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(text.to_vec()).unwrap();
        assert!(text.starts_with("id: "), "a priming event first: {text}");
        assert!(text.contains(r#""result""#), "{text}");
        if expect_length {
            assert_eq!(length, Some(text.len()), "{text}");
            assert!(!chunked);
        } else {
            assert_eq!(length, None);
            assert!(chunked, "a handler that waits gets a streamed response");
        }
        send.ready().await.unwrap();
    }
}

/// SESSION-5, HTTP-POST-9, HTTP-DELETE-3 over a sharded service: sessions are minted in
/// turn by each of its 4 cores, and every later request of a session (its calls, the
/// client's answer to a server request, DELETE) reaches the core that minted it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_5_a_sharded_service_serves_every_request_of_a_session_from_its_shard() {
    const SHARDS: usize = 4;
    let signals = Arc::new(Signals {
        started: Notify::new(),
        cancelled: Notify::new(),
    });
    let (addr, service) = start_sharded(signals, SHARDS).await;
    let uri: http::Uri = format!("http://{addr}/mcp").parse().unwrap();
    let mut clients = Vec::new();
    for c in 0..2 * SHARDS as u64 {
        let (client, mut messages) = tokio::time::timeout(
            Duration::from_secs(5),
            McpClient::connect(
                mcpwire::client::Config::new(uri.clone())
                    .with_revision(mcpwire::client::Revision::Era(mcpwire::Era::Sessions)),
                counter_entropy(30 + c),
            ),
        )
        .await
        .expect("connected in time")
        .expect("connected");
        let answering = tokio::spawn({
            let client = client.clone();
            async move {
                while let Some(message) = messages.recv().await {
                    if let ServerMessage::Request(request) = message {
                        let id = request.id().cloned().expect("a request id");
                        let text = format!("client {c}");
                        client
                            .respond(&id, json!({"content": {"type": "text", "text": text}}))
                            .unwrap();
                    }
                }
            }
        });
        clients.push((client, answering));
    }
    // Minted in turn: two sessions on each core.
    let held: Vec<usize> = service
        .shards()
        .map(|shard| shard.with_server(|s, _| s.session_count()))
        .collect();
    assert_eq!(held, vec![2; SHARDS]);
    let calls: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(c, (client, _))| {
            let client = client.clone();
            tokio::spawn(async move {
                let asked = client
                    .call("tools/call", Some(json!({"name": "ask", "arguments": {}})))
                    .await
                    .unwrap();
                assert_eq!(asked["content"][0]["text"], format!("client {c}"));
                let text = c.to_string();
                let echoed = client
                    .call(
                        "tools/call",
                        Some(json!({"name": "echo", "arguments": {"text": text}})),
                    )
                    .await
                    .unwrap();
                assert_eq!(echoed["content"][0]["text"], c.to_string());
            })
        })
        .collect();
    for call in calls {
        tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("every call answered in time")
            .expect("every call as expected");
    }
    for (client, answering) in clients {
        client.close().await;
        answering.abort();
    }
    // Every DELETE reached its session's core.
    let held: usize = service
        .shards()
        .map(|shard| shard.with_server(|s, _| s.session_count()))
        .sum();
    assert_eq!(held, 0);
}
