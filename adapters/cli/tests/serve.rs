//! `mcpwire serve` and `mcpwire call` as a user runs them: the binary on an ephemeral
//! loopback port, its usage errors, `mcpwire call`'s output against it (on both adapters,
//! tokio and `--blocking`), and Ctrl-C. The process is killed at the end of each test,
//! and every read is bounded.
//!
//! What the server answers on the wire is tested once, for both adapters, by the shared
//! scenario suite (`tests/tests/adapters.rs`), which starts `mcpwire serve`'s
//! configuration and tools in-process (`mcpwire_cli::reference`).

mod common;

#[cfg(unix)]
use std::io::{Read, Write};
#[cfg(unix)]
use std::net::TcpStream;
use std::process::Command;
#[cfg(unix)]
use std::time::Duration;

use common::{ADAPTERS, BIN, Server, start, start_on};

/// One request; returns the head (lowercased names) and the body.
#[cfg(unix)]
fn request(server: &Server, method: &str, session: Option<&str>, body: &str) -> (String, String) {
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut req = format!(
        "{method} /mcp HTTP/1.0\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        server.addr,
        body.len()
    );
    if let Some(s) = session {
        req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    (head.to_ascii_lowercase(), body.to_owned())
}

/// The status code of a response head.
#[cfg(unix)]
fn status(head: &str) -> u16 {
    head.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"))
}

#[cfg(unix)]
fn session_of(head: &str) -> String {
    head.lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("Mcp-Session-Id")
        .trim()
        .to_owned()
}

#[cfg(unix)]
const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

#[test]
fn serve_rejects_bad_usage() {
    let out = Command::new(BIN)
        .args(["serve", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown option '--bogus'"));
}

fn call(server: &Server, args: &[&str]) -> std::process::Output {
    let url = format!("http://{}/mcp", server.addr);
    Command::new(BIN)
        .args(["call", "--timeout-ms", "20000", &url])
        .args(args)
        .output()
        .expect("mcpwire call runs")
}

#[test]
fn call_against_serve_prints_progress_and_the_result_also_through_polling_closes() {
    for (adapter, extra) in ADAPTERS.into_iter().flat_map(|a| {
        [
            (a, &[][..]),
            (a, &["--poll-ms", "0", "--retry-ms", "20"][..]),
        ]
    }) {
        let server = start_on(adapter, extra);
        let out = call(&server, &["slow_count", r#"{"n":3,"delay_ms":30}"#]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{adapter:?} {extra:?}: {stderr}");
        assert!(stdout.contains(r#""text":"3""#), "{stdout}");
        assert_eq!(stderr.matches("progress {").count(), 3, "{stderr}");
    }
}

/// `call URL` with no tool lists the server's tools (`tools/list`), with each client
/// against each adapter's server.
#[test]
fn call_without_a_tool_lists_the_tools() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &[]);
        for client in [&[][..], &["--blocking"][..]] {
            let out = call(&server, client);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{adapter:?} {client:?}: {stderr}");
            let list: serde_json::Value =
                serde_json::from_slice(&out.stdout).expect("the result as JSON");
            let names: Vec<&str> = list["tools"]
                .as_array()
                .expect("a tool list")
                .iter()
                .filter_map(|t| t["name"].as_str())
                .collect();
            assert_eq!(names, ["echo", "slow_count"], "{adapter:?} {client:?}");
        }
    }
}

/// A server's request to `call` (here `sampling/createMessage`, from the conformance
/// fixture's `test_sampling` tool) is answered -32601 at once, by each client, so the
/// tool goes on and the call ends with its result instead of waiting for its timeout.
/// At 2025-11-25: the sessionless revision has no server→client requests (MODERN-10).
#[test]
fn call_answers_a_servers_request_with_an_error_and_the_call_completes() {
    let server = start(&["--conformance"]);
    for client in [&[][..], &["--blocking"][..]] {
        let args: Vec<&str> = client
            .iter()
            .copied()
            .chain([
                "--revision",
                "2025-11-25",
                "test_sampling",
                r#"{"prompt":"hi"}"#,
            ])
            .collect();
        let out = call(&server, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{client:?}: {stderr}");
        assert!(
            stdout.contains("Sampling not supported or error: mcpwire call answers no requests"),
            "{client:?}: {stdout}"
        );
    }
}

/// `call --blocking`: the blocking client (mcpwire-blocking on ureq) against both
/// servers, directly and through SEP-1699 polling closes (RESUME-9, RESUME-11), a failing
/// call, and the legacy transport (LEGACY-3).
#[test]
fn call_blocking_prints_progress_and_the_result_against_both_adapters() {
    for (adapter, extra) in ADAPTERS.into_iter().flat_map(|a| {
        [
            (a, &[][..]),
            (a, &["--poll-ms", "0", "--retry-ms", "20"][..]),
        ]
    }) {
        let server = start_on(adapter, extra);
        let out = call(
            &server,
            &["--blocking", "slow_count", r#"{"n":3,"delay_ms":30}"#],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{adapter:?} {extra:?}: {stderr}");
        assert!(stderr.contains("blocking"), "{stderr}");
        assert!(stdout.contains(r#""text":"3""#), "{stdout}");
        assert_eq!(stderr.matches("progress {").count(), 3, "{stderr}");
        let out = call(&server, &["--blocking", "no_such_tool"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("no tool"));
        let url = format!("http://{}/sse", server.addr);
        let out = Command::new(BIN)
            .args([
                "call",
                "--blocking",
                "--legacy",
                "--timeout-ms",
                "20000",
                &url,
            ])
            .args(["echo", r#"{"text":"old"}"#])
            .output()
            .expect("mcpwire call runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{adapter:?}: {stderr}");
        assert!(stderr.contains("legacy HTTP+SSE"), "{stderr}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(r#""text":"old""#));
    }
}

#[test]
fn call_reports_a_failing_call_with_status_1() {
    let server = start(&[]);
    let out = call(&server, &["no_such_tool"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no tool"));
}

/// A server that is not there reads as such, on either client: the IO error's own words,
/// not a lost stream.
#[test]
fn call_names_a_refused_connection() {
    // A port just freed: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    for client in [&[][..], &["--blocking"][..]] {
        let out = Command::new(BIN)
            .arg("call")
            .args(client)
            .args(["--timeout-ms", "5000", &url, "echo"])
            .output()
            .expect("mcpwire call runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{client:?}: {stderr}");
        assert!(
            stderr.contains("no connection to the server") && stderr.contains("refused"),
            "{client:?}: {stderr}"
        );
        // And what to do.
        assert!(
            stderr.contains(&format!(
                "nothing listens at 127.0.0.1:{port}: start the server (mcpwire serve listens \
                 on 127.0.0.1:8080), or check the URL's host and port"
            )),
            "{client:?}: {stderr}"
        );
    }
}

#[test]
fn call_legacy_speaks_http_sse_from_the_start() {
    let server = start(&[]);
    let url = format!("http://{}/sse", server.addr);
    let out = Command::new(BIN)
        .args([
            "call",
            "--legacy",
            "--timeout-ms",
            "20000",
            &url,
            "echo",
            r#"{"text":"old"}"#,
        ])
        .output()
        .expect("mcpwire call runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("legacy HTTP+SSE"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(r#""text":"old""#));
}

/// Ctrl-C: the open standalone stream ends cleanly, a new request gets 503 meanwhile or
/// a refused connection, and the process exits with status 0 within the drain bound.
#[cfg(unix)]
#[test]
fn serve_shuts_down_gracefully_on_sigint() {
    for adapter in ADAPTERS {
        shuts_down_gracefully_on_sigint(start_on(adapter, &[]));
    }
}

#[cfg(unix)]
fn shuts_down_gracefully_on_sigint(mut server: Server) {
    let (head, _) = request(&server, "POST", None, INIT);
    let sid = session_of(&head);
    let mut get = TcpStream::connect(&server.addr).unwrap();
    get.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "GET /mcp HTTP/1.0\r\nHost: {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n",
        server.addr
    );
    get.write_all(req.as_bytes()).unwrap();
    let mut first = [0u8; 12];
    get.read_exact(&mut first).unwrap();
    assert_eq!(status(&String::from_utf8_lossy(&first)), 200);
    // A 2026-07-28 listen stream, open at the shutdown too.
    let mut listen = TcpStream::connect(&server.addr).unwrap();
    listen
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let body = r#"{"jsonrpc":"2.0","id":"bye","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let req = format!(
        "POST /mcp HTTP/1.0\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        server.addr,
        body.len()
    );
    listen.write_all(req.as_bytes()).unwrap();
    let mut acked = Vec::new();
    while !String::from_utf8_lossy(&acked).contains("acknowledged") {
        let mut chunk = [0u8; 512];
        let n = listen.read(&mut chunk).unwrap();
        assert!(n > 0, "the listen ended before its acknowledgement");
        acked.extend_from_slice(&chunk[..n]);
    }
    let pid = server.child.id().to_string();
    let status = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(status.success());
    // The stream ends: the server closes it, so reading reaches the end.
    let mut rest = Vec::new();
    get.read_to_end(&mut rest).unwrap();
    // MODERN-13: the listen ends gracefully, with its result, before the connection.
    let mut ended = Vec::new();
    listen.read_to_end(&mut ended).unwrap();
    let ended = String::from_utf8_lossy(&ended);
    assert!(
        ended.contains(r#""id":"bye","result""#),
        "the listen's result before the end: {ended}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = server.child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit:?}");
}
