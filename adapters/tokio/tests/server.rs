//! `McpService` on 127.0.0.1 under hyper: the core's answers reach a real HTTP client,
//! JSON and streamed, and a client that goes away is reported to the core.

use std::time::Duration;

mod common;

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

/// Reads `socket` until what was read holds `what`; panics if it ends first or takes
/// longer than 5 s.
async fn read_until(socket: &mut TcpStream, seen: &mut Vec<u8>, what: &str) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0; 4096];
    while !String::from_utf8_lossy(seen).contains(what) {
        let n = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut buf))
            .await
            .expect("in time")
            .unwrap();
        assert!(n > 0, "ended early: {}", String::from_utf8_lossy(seen));
        seen.extend_from_slice(&buf[..n]);
    }
}

/// RESUME-14: a resume takes over a stream whose connection the server still holds (it
/// died silently: its client stopped reading, and the server cannot know). The old
/// connection is closed by the server without the chunked body's end, so that it cannot
/// pass for a complete response, and the stream goes on on the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_14_a_resume_cuts_the_connection_it_takes_over() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let common::Held {
        addr,
        service,
        requests: mut held,
        ..
    } = common::start_held(Config::new(), mcpwire::conn::Limits::new()).await;
    let progress = |n: u32| {
        let params = format!(r#"{{"progressToken":1,"progress":{n}}}"#);
        move |s: &mut mcpwire::server::Server, now, request| {
            let params = RawJson::new(&params).unwrap();
            s.notify(
                now,
                Target::Request(request),
                "notifications/progress",
                Some(&params),
            )
            .unwrap()
        }
    };
    let init = post(addr, None, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#).await;
    let sid = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    // The call's POST on a raw socket, read up to its first progress message.
    let mut old = TcpStream::connect(addr).await.unwrap();
    let body = r#"{"jsonrpc":"2.0","id":5,"method":"hold","params":{"_meta":{"progressToken":1}}}"#;
    let post = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\nmcp-session-id: {sid}\r\nmcp-protocol-version: 2025-11-25\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    old.write_all(post.as_bytes()).await.unwrap();
    let request = tokio::time::timeout(Duration::from_secs(5), held.recv())
        .await
        .unwrap()
        .unwrap();
    service.with_server(|s, now| progress(1)(s, now, request));
    let mut seen = Vec::new();
    read_until(&mut old, &mut seen, r#""progress":1"#).await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    let last = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .next_back()
        .expect("event ids")
        .to_owned();
    // From here on nobody reads `old`: progress 2 goes to a connection that looks alive.
    service.with_server(|s, now| progress(2)(s, now, request));
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let resume = http::Request::get("/mcp")
        .header("host", addr.to_string())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", &last)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resumed = send.send_request(resume).await.unwrap();
    assert_eq!(resumed.status(), 200, "never 409 (HTTP-GET-9)");
    // The old connection: what was already written, then the server's close, and never
    // the chunked terminator.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), old.read_to_end(&mut rest)).await;
    assert!(
        closed.is_ok(),
        "the server closes the connection it took the stream from"
    );
    seen.extend_from_slice(&rest);
    let old_text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        !old_text.ends_with("0\r\n\r\n"),
        "cut, not ended: {old_text}"
    );
    // The stream goes on on the new connection: progress 2 replayed, then 3 and the end.
    service.with_server(|s, now| {
        progress(3)(s, now, request);
        s.respond(now, request, &RawJson::new("{}").unwrap())
            .unwrap();
    });
    let body = tokio::time::timeout(Duration::from_secs(5), resumed.into_body().collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(!text.contains(r#""progress":1"#), "{text}");
    for n in [2, 3] {
        let note = format!(r#""progress":{n}"#);
        assert_eq!(text.matches(&note).count(), 1, "{text}");
    }
    assert!(text.contains(r#""id":5,"result":{}"#), "{text}");
    assert!(!old_text.contains(r#""progress":3"#), "{old_text}");
}
