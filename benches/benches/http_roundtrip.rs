//! One `tools/call` over real HTTP/1.1 on 127.0.0.1, beside the same exchange on a bare
//! hyper server, so the core's cost per call (`server_roundtrip`) can be read against the
//! cost of the HTTP round trip it sits in.
//!
//! - `http_roundtrip/mcpwire-json`: `mcpwire_tokio::server::McpService` (JSON mode) with
//!   the `app::Tools` layer answering `echo` in place (`app::mount`, as `mcpwire serve`
//!   does), on an initialized 2025-11-25 session.
//! - `http_roundtrip/bare-hyper`: a hyper service that answers every POST with a fixed
//!   JSON body, after reading the request body: the floor, with no MCP work.
//!
//! Both are measured with one keep-alive connection of hyper's HTTP/1.1 client, one call
//! at a time (latency, not throughput under concurrency: that is the end-to-end bench's
//! job), client and server on one two-worker tokio runtime.
//!
//! Run: `cargo bench -p mcpwire-benches --bench http_roundtrip`.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use mcpwire::server::{Config, ResponseMode};
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::app::{self, Tools, text_result};
use mcpwire_tokio::server::serve;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
const FIXED: &str =
    r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}"#;

async fn connect(addr: std::net::SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    send
}

fn post(
    addr: std::net::SocketAddr,
    session: Option<&str>,
    body: &'static str,
) -> http::Request<Full<Bytes>> {
    let mut b = http::Request::post("/mcp")
        .header("host", addr.to_string())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if let Some(s) = session {
        b = b
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    b.body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("a request")
}

async fn round_trip(
    send: &mut SendRequest<Full<Bytes>>,
    request: http::Request<Full<Bytes>>,
) -> Bytes {
    send.ready().await.expect("ready");
    let response = send.send_request(request).await.expect("a response");
    response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes()
}

async fn mcpwire_server() -> (std::net::SocketAddr, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let config = Config::new().with_response_mode(ResponseMode::Json);
    let tools = Tools::new().with_tool(
        "echo",
        "",
        json!({"type": "object"}),
        |_c, a: Value| async move { Ok(text_result(a["text"].as_str().unwrap_or(""))) },
    );
    let service = app::mount(config, counter_entropy(1), Arc::new(tools));
    tokio::spawn(serve(listener, service));
    let mut send = connect(addr).await;
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}"#;
    send.ready().await.expect("ready");
    let response = send
        .send_request(post(addr, None, init))
        .await
        .expect("initialize");
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let _ = response.into_body().collect().await;
    (addr, session)
}

async fn bare_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.expect("accept");
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    |request: http::Request<hyper::body::Incoming>| async move {
                        let _ = request.into_body().collect().await;
                        let response = http::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from_static(FIXED.as_bytes())))
                            .expect("a response");
                        Ok::<_, Infallible>(response)
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

fn http_roundtrip(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (mcp_addr, session) = runtime.block_on(mcpwire_server());
    let bare_addr = runtime.block_on(bare_server());
    let mut mcp = runtime.block_on(connect(mcp_addr));
    let mut bare = runtime.block_on(connect(bare_addr));
    // The answers are what they should be, before anything is timed.
    let answer = runtime.block_on(round_trip(&mut mcp, post(mcp_addr, Some(&session), CALL)));
    assert!(answer.windows(4).any(|w| w == b"\"hi\""), "{answer:?}");
    let answer = runtime.block_on(round_trip(&mut bare, post(bare_addr, None, CALL)));
    assert_eq!(&answer[..], FIXED.as_bytes());

    let mut group = c.benchmark_group("http_roundtrip");
    group.throughput(Throughput::Elements(1));
    group.bench_function("mcpwire-json", |b| {
        b.iter(|| runtime.block_on(round_trip(&mut mcp, post(mcp_addr, Some(&session), CALL))));
    });
    group.bench_function("bare-hyper", |b| {
        b.iter(|| runtime.block_on(round_trip(&mut bare, post(bare_addr, None, CALL))));
    });
    group.finish();
}

criterion_group!(benches, http_roundtrip);
criterion_main!(benches);
