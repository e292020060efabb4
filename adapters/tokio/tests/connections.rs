//! `serve_with` against peers that would hold the server: slow heads, idle connections,
//! floods beyond the connection bound, oversized heads and bodies. Each attack runs
//! beside a normal client, which must be served throughout. Loopback only; every wait
//! is bounded.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use mcpwire::conn::Limits;
use mcpwire::server::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far above what each step takes; there for a loaded machine and for a hang.
const BOUND: Duration = Duration::from_secs(10);

const INIT: &str =
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;

/// Serves with `limits`; the log lines are collected. Requests other than `initialize`
/// stay open for good: nothing answers them.
async fn start(limits: Limits) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    start_with(Config::new(), limits).await
}

/// [`start`] with the core's `config`.
async fn start_with(config: Config, limits: Limits) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let held = common::start_held(config, limits).await;
    (held.addr, held.log)
}

fn post(addr: SocketAddr, body: &str, connection: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\nconnection: {connection}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A normal client: one `initialize` on a fresh connection; its status.
async fn served(addr: SocketAddr) -> u16 {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(post(addr, INIT, "close").as_bytes())
        .await
        .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(BOUND, s.read_to_end(&mut out))
        .await
        .expect("answered in time")
        .unwrap();
    status(&out)
}

fn status(response: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(response);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"))
}

/// Reads `s` until the server closes it (EOF or reset); what it sent before.
async fn closed_by_server(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match tokio::time::timeout(BOUND, s.read(&mut buf))
            .await
            .expect("the server closes it in time")
        {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_head_is_closed_at_the_header_timeout_while_others_are_served() {
    let limits = Limits::new().with_header_timeout(Duration::from_millis(300));
    let (addr, _) = start(limits).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nhost: ")
        .await
        .unwrap();
    assert_eq!(served(addr).await, 200, "served during the attack");
    let sent = closed_by_server(&mut slow).await;
    assert!(sent.is_empty(), "closed without an answer: {sent:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_waiting_for_a_request_is_closed_at_the_idle_timeout() {
    let limits = Limits::new().with_idle_timeout(Duration::from_millis(300));
    let (addr, _) = start(limits).await;
    // One that never sends anything, and one kept alive after its answer.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut kept = TcpStream::connect(addr).await.unwrap();
    kept.write_all(post(addr, INIT, "keep-alive").as_bytes())
        .await
        .unwrap();
    let answer = closed_by_server(&mut kept).await;
    assert_eq!(status(&answer), 200);
    assert!(closed_by_server(&mut silent).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_bound_the_oldest_idle_connection_makes_room() {
    let limits = Limits::new().with_max_connections(8);
    let (addr, lines) = start(limits).await;
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(TcpStream::connect(addr).await.unwrap());
        // Accepted in this order.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Newcomers beyond the bound, each kept open after its answer: each is served, and
    // each takes the place of the oldest connection not busy.
    let mut kept = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(post(addr, INIT, "keep-alive").as_bytes())
            .await
            .unwrap();
        let mut answer = [0; 2048];
        let n = tokio::time::timeout(BOUND, s.read(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status(&answer[..n]), 200);
        kept.push(s);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The four oldest idle ones went, in order; the newest are still open.
    for old in &mut idle[..4] {
        assert!(closed_by_server(old).await.is_empty());
    }
    let mut newest = idle.pop().unwrap();
    newest
        .write_all(post(addr, INIT, "close").as_bytes())
        .await
        .unwrap();
    assert_eq!(status(&closed_by_server(&mut newest).await), 200);
    let lines = lines.lock().unwrap().clone();
    assert!(
        lines.iter().any(|l| l.contains("4 closed to make room")),
        "counted in a log line: {lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_connection_is_busy_a_new_one_is_refused_and_logged() {
    let limits = Limits::new().with_max_connections(2);
    let (addr, lines) = start(limits).await;
    // Two busy connections: each with a request the application holds.
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"hold"}"#;
    let mut busy = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(post(addr, INIT, "keep-alive").as_bytes())
            .await
            .unwrap();
        let mut head = [0; 1024];
        let n = tokio::time::timeout(BOUND, s.read(&mut head))
            .await
            .unwrap()
            .unwrap();
        let text = String::from_utf8_lossy(&head[..n]).into_owned();
        let sid = text
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .expect("a session")
            .to_owned();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\nmcp-session-id: {sid}\r\nmcp-protocol-version: 2025-11-25\r\ncontent-length: {}\r\n\r\n{call}",
            call.len()
        );
        s.write_all(request.as_bytes()).await.unwrap();
        busy.push(s);
    }
    // Give both calls time to reach the server.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut refused = TcpStream::connect(addr).await.unwrap();
    let _ = refused
        .write_all(post(addr, INIT, "close").as_bytes())
        .await;
    assert!(closed_by_server(&mut refused).await.is_empty());
    // The line is logged once the refusal is done, after its connection closed: wait
    // for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("1 refused (all busy)"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            lines.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_head_is_431_and_an_oversized_body_413_with_the_connection_closed() {
    let (addr, _) = start(Limits::new()).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let big = "x".repeat(64 << 10);
    let head = format!("GET /mcp HTTP/1.1\r\nhost: {addr}\r\nx-big: {big}\r\n\r\n");
    let _ = s.write_all(head.as_bytes()).await;
    assert_eq!(status(&closed_by_server(&mut s).await), 431);
    // A body declared far over the core's limit (4 MiB): 413 at once, and the server
    // closes the connection instead of reading (or leaking) the rest.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\ncontent-length: 100000000000\r\n\r\n{{"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let answer = closed_by_server(&mut s).await;
    assert_eq!(status(&answer), 413);
    assert_eq!(served(addr).await, 200);
}

/// Header values that are not visible ASCII reach the core, which answers them with a
/// status and a JSON-RPC error, never a closed connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_ascii_session_and_last_event_id_values_get_a_json_rpc_error() {
    let (addr, _) = start(Limits::new()).await;
    for (name, status_code) in [("mcp-session-id", 404), ("last-event-id", 400)] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(post(addr, INIT, "keep-alive").as_bytes())
            .await
            .unwrap();
        let mut first = [0; 2048];
        let n = tokio::time::timeout(BOUND, s.read(&mut first))
            .await
            .unwrap()
            .unwrap();
        let text = String::from_utf8_lossy(&first[..n]).into_owned();
        let sid = text
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .expect("a session")
            .to_owned();
        let mut head = format!(
            "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nconnection: close\r\n"
        )
        .into_bytes();
        if name == "last-event-id" {
            head.extend_from_slice(format!("mcp-session-id: {sid}\r\n").as_bytes());
        }
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": \xff\xfe\xe9t\xc3\r\n\r\n");
        s.write_all(&head).await.unwrap();
        let answer = closed_by_server(&mut s).await;
        let text = String::from_utf8_lossy(&answer).into_owned();
        assert_eq!(status(&answer), status_code, "{name}: {text}");
        let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
        let json: serde_json::Value = serde_json::from_str(body).expect("a JSON-RPC error");
        assert!(json["error"]["message"].is_string(), "{name}: {body}");
    }
}

/// Set in the child process of [`out_of_file_descriptors_the_oldest_idle_connection_is_closed_and_accepting_goes_on`].
const CHILD: &str = "MCPWIRE_FEW_FDS_CHILD";

/// The child: a server in a process with a lowered file descriptor limit. Prints its
/// address, logs to stderr, and serves until its stdin closes (at most 60 s).
#[test]
#[ignore = "run by out_of_file_descriptors_… in a child process with a lowered fd limit"]
fn server_with_few_file_descriptors() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (addr, lines) = start(Limits::new()).await;
        println!("{addr}");
        let watch = tokio::task::spawn_blocking(|| {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut rest);
        });
        let _ = tokio::time::timeout(Duration::from_secs(60), watch).await;
        for line in lines.lock().unwrap().iter() {
            eprintln!("{line}");
        }
    });
}

/// Out of file descriptors (`EMFILE`, with the limit lowered to 96 by `prlimit`), the
/// server does not stop accepting: it closes the oldest idle connection to free one, says
/// so in its log, and a new client is served, however many idle connections a peer holds.
#[test]
fn out_of_file_descriptors_the_oldest_idle_connection_is_closed_and_accepting_goes_on() {
    use std::io::{BufRead, Read, Write};
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("prlimit")
        .arg("--nofile=96:96")
        .arg(&exe)
        .args([
            "--ignored",
            "--exact",
            "server_with_few_file_descriptors",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prlimit (util-linux) runs the child");
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let addr: SocketAddr = loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the child printed no address"
        );
        if let Ok(addr) = line.trim().parse() {
            break addr;
        }
    };
    // Far more idle connections than the child has descriptors for.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(std::net::TcpStream::connect(addr).unwrap());
    }
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    s.write_all(post(addr, INIT, "close").as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert_eq!(status(&answer), 200, "a new client is served");
    // The oldest idle connection was closed by the server.
    idle[0].set_read_timeout(Some(BOUND)).unwrap();
    let mut buf = [0; 16];
    let read = idle[0].read(&mut buf);
    assert!(
        matches!(&read, Ok(0))
            || matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?}"
    );
    drop(child.stdin.take());
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{log}");
    assert!(
        log.contains("Too many open files") && log.contains("closed idle connection"),
        "{log}"
    );
}

/// The server tells the core each request's peer address, so a per-peer session cap
/// holds: a second `initialize` from 127.0.0.1 at a cap of one takes the place of the
/// first, idle, session, whose id then gets 404 (SESSION-8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_peer_session_cap_sees_the_peer_address() {
    let config = Config::new().with_max_sessions_per_peer(Some(1));
    let (addr, _) = start_with(config, Limits::new()).await;
    let session = |answer: &[u8]| {
        String::from_utf8_lossy(answer)
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .map(str::to_owned)
    };
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(post(addr, INIT, "close").as_bytes())
            .await
            .unwrap();
        let answer = closed_by_server(&mut s).await;
        assert_eq!(status(&answer), 200);
        ids.push(session(&answer).expect("a session"));
    }
    let ping = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let mut statuses = Vec::new();
    for id in &ids {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\nmcp-session-id: {id}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{ping}",
            ping.len()
        );
        s.write_all(request.as_bytes()).await.unwrap();
        statuses.push(status(&closed_by_server(&mut s).await));
    }
    assert_eq!(statuses[0], 404, "the first session was evicted");
    assert_eq!(statuses[1], 202, "the second lives");
}
