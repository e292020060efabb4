//! The attacks of issue 23 against `mcpwire serve`, on both adapters, each beside a
//! normal client that must be served during the attack, and each followed by a check
//! that the server's threads, file descriptors and resident memory (read from
//! `/proc/PID`) came back near where they were before it: idle and slow connection
//! floods, oversized heads and bodies, a session flood, a resume storm, and a stderr that
//! nobody reads. Loopback only; every attack is bounded in count and time.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ADAPTERS, BIN, Server, start_on};

/// Far above what each step takes; there for a loaded machine and for a hang.
const BOUND: Duration = Duration::from_secs(20);

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// A process's threads, open file descriptors and resident memory.
#[derive(Clone, Copy, Debug)]
struct Usage {
    threads: usize,
    fds: usize,
    rss_kib: usize,
}

fn usage(pid: u32) -> Usage {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| -> usize {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
    };
    Usage {
        threads: field("Threads:"),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
            .expect("/proc fd")
            .count(),
        rss_kib: field("VmRSS:"),
    }
}

/// Waits (bounded) until the server's usage is back within the slack of `before`.
fn back_to(pid: u32, before: Usage, what: &str) {
    let deadline = Instant::now() + BOUND;
    loop {
        let now = usage(pid);
        let near = now.fds <= before.fds + 8
            && now.threads <= before.threads + 8
            && now.rss_kib <= before.rss_kib + 64 * 1024;
        if near {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {now:?} after the attack, against {before:?} before it"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn request(addr: &str, method: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head.push_str(body);
    head.into_bytes()
}

const JSON: [(&str, &str); 2] = [
    ("accept", "application/json, text/event-stream"),
    ("content-type", "application/json"),
];

/// Reads `s` until the server closes it (EOF, or a reset); panics if it stays open for
/// [`BOUND`].
fn until_closed(s: &mut TcpStream, what: &str) -> String {
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "{what}: not closed by the server ({e}): {}",
                String::from_utf8_lossy(&out)
            ),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Sends `bytes` on a fresh connection and reads the answer to its end.
fn exchange(addr: &str, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(BOUND)).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer:?}"))
}

fn session_of(answer: &str) -> String {
    answer
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session: {answer}"))
}

/// A normal client: initialize, then `echo` on its session; panics unless both work.
fn normal_client(addr: &str) {
    let answer = exchange(addr, &request(addr, "POST", &JSON, INIT));
    assert_eq!(status(&answer), 200, "{answer}");
    let session = session_of(&answer);
    let mut headers = JSON.to_vec();
    headers.push(("mcp-session-id", &session));
    headers.push(("mcp-protocol-version", "2025-11-25"));
    let answer = exchange(addr, &request(addr, "POST", &headers, INITIALIZED));
    assert_eq!(status(&answer), 202, "{answer}");
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}"#;
    let answer = exchange(addr, &request(addr, "POST", &headers, call));
    assert_eq!(status(&answer), 200, "{answer}");
    assert!(answer.contains("still here"), "{answer}");
}

fn pid(server: &Server) -> u32 {
    server.child.id()
}

#[test]
fn idle_and_slow_connection_floods_are_shed_and_timed_out() {
    for adapter in ADAPTERS {
        let args = [
            "--max-connections",
            "64",
            "--header-timeout-ms",
            "500",
            "--idle-timeout-ms",
            "1000",
        ];
        let server = start_on(adapter, &args);
        let addr = server.addr.clone();
        normal_client(&addr);
        let before = usage(pid(&server));
        let mut held = Vec::new();
        // Idle connections, far beyond the bound, then half-sent heads (slowloris).
        for n in 0..400 {
            let mut s = TcpStream::connect(&addr).expect("connects");
            if n % 2 == 1 {
                let _ = s.write_all(b"POST /mcp HTTP/1.1\r\nhost: ");
            }
            held.push(s);
        }
        normal_client(&addr);
        // No thread per connection: the server's threads stay where they were.
        let during = usage(pid(&server));
        assert!(
            during.threads <= before.threads + 2,
            "{adapter:?}: {during:?} during the flood, {before:?} before it"
        );
        // The server closes what it holds of them, though the peer keeps them open.
        back_to(
            pid(&server),
            before,
            &format!("{adapter:?}: connection flood"),
        );
        normal_client(&addr);
        drop(held);
    }
}

#[test]
fn oversized_heads_and_bodies_are_refused_and_their_connections_closed() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &[]);
        let addr = server.addr.clone();
        normal_client(&addr);
        let before = usage(pid(&server));
        let big = "x".repeat(1 << 20);
        for _ in 0..8 {
            let head = format!("GET /mcp HTTP/1.1\r\nhost: {addr}\r\nx-big: {big}\r\n\r\n");
            let answer = exchange(&addr, head.as_bytes());
            assert_eq!(status(&answer), 431, "{adapter:?}: {answer}");
        }
        for _ in 0..8 {
            let head = format!(
                "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\ncontent-length: 100000000000\r\n\r\n{{"
            );
            let answer = exchange(&addr, head.as_bytes());
            assert_eq!(status(&answer), 413, "{adapter:?}: {answer}");
        }
        normal_client(&addr);
        back_to(
            pid(&server),
            before,
            &format!("{adapter:?}: oversized requests"),
        );
    }
}

/// A flood of bare `initialize` requests at the session bound evicts its own sessions:
/// a client with a GET stream open keeps its session and is served.
#[test]
fn a_session_flood_locks_out_no_active_client() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &["--max-sessions", "50"]);
        let addr = server.addr.clone();
        let answer = exchange(&addr, &request(&addr, "POST", &JSON, INIT));
        let session = session_of(&answer);
        let mut headers = JSON.to_vec();
        headers.push(("mcp-session-id", &session));
        headers.push(("mcp-protocol-version", "2025-11-25"));
        assert_eq!(
            status(&exchange(
                &addr,
                &request(&addr, "POST", &headers, INITIALIZED)
            )),
            202
        );
        // Its GET stream stays open through the flood.
        let mut stream = TcpStream::connect(&addr).unwrap();
        let get = format!(
            "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nmcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n"
        );
        stream.write_all(get.as_bytes()).unwrap();
        let before = usage(pid(&server));
        for _ in 0..1000 {
            let answer = exchange(&addr, &request(&addr, "POST", &JSON, INIT));
            assert_eq!(status(&answer), 200, "{adapter:?}: {answer}");
        }
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"kept"}}}"#;
        let answer = exchange(&addr, &request(&addr, "POST", &headers, call));
        assert_eq!(status(&answer), 200, "{adapter:?}: {answer}");
        normal_client(&addr);
        back_to(pid(&server), before, &format!("{adapter:?}: session flood"));
        drop(stream);
    }
}

/// RESUME-14 under a storm: many resumes of one stream, each taking it over from the
/// last; the last gets the rest of the stream once, and every connection it took the
/// stream from is closed by the server.
#[test]
fn resume_14_a_resume_storm_leaves_one_connection_and_loses_nothing() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &[]);
        let addr = server.addr.clone();
        let answer = exchange(&addr, &request(&addr, "POST", &JSON, INIT));
        let session = session_of(&answer);
        let mut headers = JSON.to_vec();
        headers.push(("mcp-session-id", &session));
        headers.push(("mcp-protocol-version", "2025-11-25"));
        exchange(&addr, &request(&addr, "POST", &headers, INITIALIZED));
        let before = usage(pid(&server));
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_count","arguments":{"n":3,"delay_ms":1500},"_meta":{"progressToken":"p"}}}"#;
        let mut post = TcpStream::connect(&addr).unwrap();
        post.set_read_timeout(Some(BOUND)).unwrap();
        let mut bytes = request(&addr, "POST", &headers, call);
        // Keep-alive: the server must cut this one itself.
        let text = String::from_utf8(bytes)
            .unwrap()
            .replace("connection: close\r\n", "");
        bytes = text.into_bytes();
        post.write_all(&bytes).unwrap();
        // Up to the priming event: its id is where every resume starts.
        let mut seen = Vec::new();
        let mut buf = [0; 4096];
        while !String::from_utf8_lossy(&seen).contains("\nretry:") {
            let n = post.read(&mut buf).unwrap();
            assert!(n > 0, "{adapter:?}: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&seen).into_owned();
        let id = text
            .lines()
            .find_map(|l| l.strip_prefix("id: ").or_else(|| l.strip_prefix("id:")))
            .expect("a priming event id")
            .to_owned();
        let mut resumes: Vec<TcpStream> = Vec::new();
        for _ in 0..50 {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(BOUND)).unwrap();
            let get = format!(
                "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nmcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\nlast-event-id: {id}\r\nconnection: close\r\n\r\n"
            );
            s.write_all(get.as_bytes()).unwrap();
            // Its head came: the server took the stream over for it; the next one
            // takes it from this one.
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf[..1]).unwrap();
                assert!(n > 0, "{adapter:?}: {}", String::from_utf8_lossy(&head));
                head.push(buf[0]);
            }
            assert!(
                head.starts_with(b"HTTP/1.1 200"),
                "{adapter:?}: {}",
                String::from_utf8_lossy(&head)
            );
            resumes.push(s);
        }
        // Each earlier connection is cut by the next resume: it ends without the
        // chunked terminator.
        let last = resumes.pop().unwrap();
        for (n, mut s) in std::iter::once(post).chain(resumes).enumerate() {
            let text = until_closed(&mut s, &format!("{adapter:?} #{n}"));
            assert!(
                !text.ends_with("\r\n0\r\n\r\n"),
                "{adapter:?} #{n}: not cut: {text}"
            );
            assert!(
                !text.contains(r#""id":1,"result""#),
                "{adapter:?} #{n}: {text}"
            );
        }
        let mut last = last;
        let text = until_closed(&mut last, &format!("{adapter:?}: the last resume"));
        for step in 1..=3 {
            let note = format!(r#""progress":{step}"#);
            assert_eq!(text.matches(&note).count(), 1, "{adapter:?}: {text}");
        }
        assert_eq!(
            text.matches(r#""id":1,"result""#).count(),
            1,
            "{adapter:?}: {text}"
        );
        normal_client(&addr);
        back_to(pid(&server), before, &format!("{adapter:?}: resume storm"));
    }
}

/// `mcpwire serve` with a stderr nobody reads (a stalled log driver) keeps serving: its
/// log lines wait in a bounded queue and are dropped beyond it, never written on the
/// serving path; once stderr is read again, it says how many were dropped.
#[test]
fn a_stderr_nobody_reads_does_not_stall_serving() {
    for adapter in ADAPTERS {
        let mut child: Child = Command::new(BIN)
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(adapter.iter())
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpwire runs");
        let mut stderr = child.stderr.take().unwrap();
        // The first line, with the address, then nothing more is read.
        let mut first = Vec::new();
        let mut byte = [0; 1];
        while !first.ends_with(b"\n") {
            assert_eq!(stderr.read(&mut byte).unwrap(), 1, "the address line");
            first.push(byte[0]);
        }
        let line = String::from_utf8(first).unwrap();
        let addr = line
            .split("://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .expect("an address")
            .to_owned();
        // Each session logs a line; 4,000 fill the pipe (64 KiB) and the queue.
        for n in 0..4000 {
            let answer = exchange(&addr, &request(&addr, "POST", &JSON, INIT));
            assert_eq!(status(&answer), 200, "{adapter:?} #{n}: {answer}");
        }
        normal_client(&addr);
        // Read again: the log catches up and says what it dropped.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut chunk = [0; 8192];
            while let Ok(n) = stderr.read(&mut chunk) {
                if n == 0 || tx.send(chunk[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let mut rest = Vec::new();
        let deadline = Instant::now() + BOUND;
        while !String::from_utf8_lossy(&rest).contains("log lines dropped") {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(chunk) => rest.extend_from_slice(&chunk),
                Err(_) => break,
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        let rest = String::from_utf8_lossy(&rest);
        assert!(
            rest.contains("log lines dropped"),
            "{adapter:?}: {}",
            &rest[rest.len().saturating_sub(500)..]
        );
    }
}
