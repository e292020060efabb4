//! `McpService` on 127.0.0.1 under hyper: the core's answers reach a real HTTP client,
//! JSON and streamed, and a client that goes away is reported to the core.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{Config, Event, Target};
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::server::{McpService, serve};
use tokio::net::{TcpListener, TcpStream};

/// Serves on an ephemeral loopback port; the application echoes every request's params
/// as its result, sending one progress notification first for `slow`.
async fn start() -> (std::net::SocketAddr, McpService) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (service, mut events) = McpService::new(Config::new(), counter_entropy(9));
    tokio::spawn(serve(listener, service.clone()));
    let app = service.clone();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            let Event::Request(request) = event else {
                continue;
            };
            let result = if request.method() == "initialize" {
                format!(
                    r#"{{"protocolVersion":"{}","capabilities":{{}},"serverInfo":{{"name":"t","version":"1"}}}}"#,
                    request.version()
                )
            } else {
                request
                    .message()
                    .payload()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or("{}".into())
            };
            if request.method() == "slow" {
                app.with_server(|s, now| {
                    s.notify(
                        now,
                        Target::Request(request.handle()),
                        "notifications/progress",
                        None,
                    )
                    .unwrap();
                });
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let result = RawJson::new(&result).unwrap();
            app.with_server(|s, now| s.respond(now, request.handle(), &result).unwrap());
        }
    });
    (addr, service)
}

async fn post(
    addr: std::net::SocketAddr,
    session: Option<&str>,
    body: &'static str,
) -> http::Response<Bytes> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut b = http::Request::post("/mcp")
        .header("host", addr.to_string())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    let response = send
        .send_request(
            b.body(Full::new(Bytes::from_static(body.as_bytes())))
                .unwrap(),
        )
        .await
        .unwrap();
    let (head, body) = response.into_parts();
    let body = tokio::time::timeout(Duration::from_secs(5), body.collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    http::Response::from_parts(head, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_a_json_answer_and_a_streamed_one_over_real_http() {
    let (addr, _service) = tokio::time::timeout(Duration::from_secs(5), start())
        .await
        .unwrap();
    let init = post(addr, None, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#).await;
    assert_eq!(init.status(), 200);
    let sid = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let json: serde_json::Value = serde_json::from_slice(init.body()).unwrap();
    assert_eq!(json["result"]["protocolVersion"], "2025-11-25");

    let echo = post(
        addr,
        Some(&sid),
        r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"hi"}}"#,
    )
    .await;
    assert_eq!(echo.headers()["content-type"], "application/json");
    let json: serde_json::Value = serde_json::from_slice(echo.body()).unwrap();
    assert_eq!(json["result"]["text"], "hi");

    let slow = post(
        addr,
        Some(&sid),
        r#"{"jsonrpc":"2.0","id":2,"method":"slow","params":{"n":1}}"#,
    )
    .await;
    assert_eq!(slow.headers()["content-type"], "text/event-stream");
    assert_eq!(slow.headers()["x-accel-buffering"], "no");
    let text = String::from_utf8(slow.body().to_vec()).unwrap();
    assert!(text.contains("notifications/progress"), "{text}");
    assert!(text.contains(r#""id":2,"result":{"n":1}"#), "{text}");

    let foreign = {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let request = http::Request::post("/mcp")
            .header("host", addr.to_string())
            .header("origin", "http://evil.example")
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(b"{}")))
            .unwrap();
        send.send_request(request).await.unwrap().status()
    };
    assert_eq!(foreign, 403);
}
