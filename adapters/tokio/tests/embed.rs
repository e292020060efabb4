//! `McpService` embedded in an axum app, beside an ordinary route, over 127.0.0.1 with a
//! real HTTP client: mounted with `nest_service("/mcp", …)` (axum strips the prefix, so
//! the service is handed `/`) and with `route_service("/mcp", …)` (it is handed `/mcp`),
//! both with the default endpoint (HTTP-POST-1). A session-era `initialize` and
//! `tools/call`, a 2026-07-28 request, and the legacy GET stream, whose `endpoint` event
//! names the path clients call (LEGACY-2). Only the adapter crate's re-exports are used
//! for `mcpwire`, `http` and `serde_json`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::app::{self, Call, Tools, text_result};
use mcpwire_tokio::mcpwire::server::{Config, LegacyPaths};
use mcpwire_tokio::mcpwire::sse::Item;
use mcpwire_tokio::serde_json::{self, Value, json};
use mcpwire_tokio::{SseBodyStream, http};
use tokio::net::{TcpListener, TcpStream};

/// Every wait of these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(5);

/// How the service is mounted in the axum app.
#[derive(Clone, Copy, Debug)]
enum Mount {
    /// `nest_service("/mcp", …)`; the legacy paths, if any, nested with it
    /// (`/mcp/sse`, `/mcp/messages`).
    Nested,
    /// `nest_service("/mcp", …)`; the default legacy paths `/sse` and `/messages`
    /// mounted with `route_service` beside it.
    NestedLegacyBeside,
    /// `route_service` on `/mcp` (and on `/sse` and `/messages`).
    Routed,
}

const MOUNTS: [Mount; 3] = [Mount::Nested, Mount::NestedLegacyBeside, Mount::Routed];

impl Mount {
    /// The legacy paths clients call, as configured.
    fn legacy(self) -> LegacyPaths {
        match self {
            Self::Nested => LegacyPaths {
                sse: "/mcp/sse".into(),
                messages: "/mcp/messages".into(),
            },
            Self::NestedLegacyBeside | Self::Routed => LegacyPaths::default(),
        }
    }
}

/// An axum app on an ephemeral loopback port: `GET /health` beside the MCP service
/// (tool `echo`), mounted as `mount` says, with the legacy paths served.
async fn start(mount: Mount) -> std::net::SocketAddr {
    let tools = Tools::new().with_tool(
        "echo",
        "Echoes its text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        |_: Call, arguments: Value| async move {
            Ok(text_result(arguments["text"].as_str().unwrap_or_default()))
        },
    );
    let config = Config::new().with_legacy(Some(mount.legacy()));
    let mcp = app::mount(config, counter_entropy(7), Arc::new(tools));
    let router = axum::Router::new().route("/health", axum::routing::get(|| async { "ok" }));
    let router = match mount {
        Mount::Nested => router.nest_service("/mcp", mcp),
        Mount::NestedLegacyBeside => router
            .nest_service("/mcp", mcp.clone())
            .route_service("/sse", mcp.clone())
            .route_service("/messages", mcp),
        Mount::Routed => router
            .route_service("/mcp", mcp.clone())
            .route_service("/sse", mcp.clone())
            .route_service("/messages", mcp),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// Sends `request` on a connection of its own; the response, its body not yet read.
async fn send(
    addr: std::net::SocketAddr,
    request: http::request::Builder,
    body: &str,
) -> http::Response<hyper::body::Incoming> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let request = request
        .header("host", addr.to_string())
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    tokio::time::timeout(BOUND, sender.send_request(request))
        .await
        .expect("the response head in time")
        .unwrap()
}

/// A JSON POST to `path`, with `headers`; its status, its session id (if any) and its
/// body.
async fn post(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (http::StatusCode, Option<String>, Bytes) {
    let mut request = http::Request::post(path)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    for &(name, value) in headers {
        request = request.header(name, value);
    }
    let response = send(addr, request, body).await;
    let status = response.status();
    let session = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = tokio::time::timeout(BOUND, response.into_body().collect())
        .await
        .expect("the body in time")
        .unwrap()
        .to_bytes();
    (status, session, body)
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)))
}

/// The ordinary route beside the service answers as axum routes it.
async fn assert_health(addr: std::net::SocketAddr) {
    let response = send(addr, http::Request::get("/health"), "").await;
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_post_1_initialize_and_tools_call_nested_and_routed() {
    for mount in MOUNTS {
        let addr = start(mount).await;
        assert_health(addr).await;
        let (status, session, body) = post(
            addr,
            "/mcp",
            &[],
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        )
        .await;
        assert_eq!(status, 200, "{mount:?}: {}", String::from_utf8_lossy(&body));
        assert_eq!(
            json_of(&body)["result"]["protocolVersion"],
            "2025-11-25",
            "{mount:?}"
        );
        let session = session.expect("a session id");
        let headers = [
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        let (status, _, _) = post(
            addr,
            "/mcp",
            &headers,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .await;
        assert_eq!(status, 202, "{mount:?}");
        let (status, _, body) = post(
            addr,
            "/mcp",
            &headers,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
        )
        .await;
        assert_eq!(status, 200, "{mount:?}");
        assert_eq!(
            json_of(&body)["result"]["content"][0]["text"],
            "hi",
            "{mount:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_3_a_2026_07_28_request_nested_and_routed() {
    for mount in MOUNTS {
        let addr = start(mount).await;
        let (status, session, body) = post(
            addr,
            "/mcp",
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "echo"),
            ],
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        )
        .await;
        assert_eq!(status, 200, "{mount:?}: {}", String::from_utf8_lossy(&body));
        assert_eq!(session, None, "{mount:?}: no session on 2026-07-28");
        let result = &json_of(&body)["result"];
        assert_eq!(result["content"][0]["text"], "hi", "{mount:?}");
        assert_eq!(result["resultType"], "complete", "{mount:?}");
    }
}

/// The next event of `events`, within the bound.
async fn next_event(
    events: &mut SseBodyStream<hyper::body::Incoming>,
) -> mcpwire_tokio::mcpwire::sse::Event {
    loop {
        match tokio::time::timeout(BOUND, events.next()).await {
            Ok(Some(Ok(Item::Event(event)))) => return event,
            Ok(Some(Ok(_))) => {}
            other => panic!("no event: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_2_the_endpoint_event_names_the_path_clients_call() {
    for mount in MOUNTS {
        let addr = start(mount).await;
        let legacy = mount.legacy();
        let stream = send(
            addr,
            http::Request::get(&legacy.sse).header("accept", "text/event-stream"),
            "",
        )
        .await;
        assert_eq!(stream.status(), 200, "{mount:?}");
        let mut events = SseBodyStream::new(stream.into_body());
        let endpoint = next_event(&mut events).await;
        assert_eq!(endpoint.event_type(), "endpoint", "{mount:?}");
        let announced = endpoint.data().to_owned();
        let prefix = format!("{}?sessionId=", legacy.messages);
        assert!(announced.starts_with(&prefix), "{mount:?}: {announced}");
        // The client POSTs to that path, and is answered on the stream (LEGACY-3, LEGACY-4).
        let (status, _, _) = post(
            addr,
            &announced,
            &[],
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        )
        .await;
        assert_eq!(status, 202, "{mount:?}");
        let answer = next_event(&mut events).await;
        let answer = json_of(answer.data().as_bytes());
        assert_eq!(answer["id"], 0, "{mount:?}");
        assert_eq!(
            answer["result"]["protocolVersion"], "2024-11-05",
            "{mount:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_post_1_another_path_under_the_nest_is_told_the_endpoint() {
    let addr = start(Mount::NestedLegacyBeside).await;
    let (status, _, body) = post(addr, "/mcp/other", &[], "{}").await;
    assert_eq!(status, 404);
    let message = String::from_utf8_lossy(&body);
    assert!(
        message.contains("this server's is /mcp (legacy HTTP+SSE: GET /sse)"),
        "{message}"
    );
}
