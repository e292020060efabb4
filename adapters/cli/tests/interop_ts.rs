//! Interop with the official MCP TypeScript SDK (npm `@modelcontextprotocol/sdk`, pinned
//! exactly in `tests/interop/package.json` and its lockfile).
//!
//! The SDK's clients against `mcpwire serve` (`tests/interop/ts-client.mjs`: its Streamable
//! HTTP client, also through SEP-1699 polling closes, and its legacy SSE client), and
//! `mcpwire call` against servers built on the SDK (`tests/interop/ts-server.mjs`: its
//! Streamable HTTP server transport with its in-memory event store, and its legacy SSE
//! server transport). The scripts assert what the SDK saw; these tests assert what
//! mcpwire and the SDK's servers report.
//!
//! Needs Node.js 18 or newer and npm on `PATH`; fails (never skips) without them. The
//! first test to run does `npm ci` in `tests/interop` once, unless `node_modules` was
//! installed from the same lockfile already. Every process is killed when its test ends,
//! every wait is bounded, and everything listens on 127.0.0.1.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{BIN, start};
use serde_json::{Value, json};

/// How long one scenario (a TS client run, an `mcpwire call`) may take: each takes about
/// a second; the bound is there for a loaded machine and for a hang.
const RUN: Duration = Duration::from_secs(30);

/// How long `npm ci` may take (it downloads the packages on a fresh clone).
const INSTALL: Duration = Duration::from_secs(300);

/// How long a server may take to say it listens, or to log an expected event.
const WAIT: Duration = Duration::from_secs(15);

/// `tests/interop` at the repository root.
fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop")
}

/// Makes sure the pinned SDK is installed, once per test process; panics with the reason
/// when it cannot be.
fn sdk() -> &'static Path {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match READY.get_or_init(install) {
        Ok(dir) => dir,
        Err(message) => panic!("{message}"),
    }
}

fn install() -> Result<PathBuf, String> {
    let dir = interop_dir();
    let missing = |tool: &str, why: String| {
        format!(
            "the TypeScript SDK interop tests need Node.js 18 or newer and npm on PATH: \
             `{tool} --version` {why}. Install Node.js (https://nodejs.org, or the \
             system's nodejs and npm packages) and run the tests again."
        )
    };
    for tool in ["node", "npm"] {
        match Command::new(tool).arg("--version").output() {
            Ok(out) if out.status.success() => {
                let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if tool == "node" {
                    let major = version
                        .trim_start_matches('v')
                        .split('.')
                        .next()
                        .and_then(|m| m.parse::<u32>().ok());
                    if major.is_none_or(|m| m < 18) {
                        return Err(missing(tool, format!("printed {version:?}")));
                    }
                }
            }
            Ok(out) => return Err(missing(tool, format!("failed ({})", out.status))),
            Err(e) => return Err(missing(tool, format!("could not run ({e})"))),
        }
    }
    // node_modules is current when it was installed from exactly these two files.
    let manifest = ["package.json", "package-lock.json"]
        .iter()
        .map(|f| fs::read_to_string(dir.join(f)).map_err(|e| format!("tests/interop/{f}: {e}")))
        .collect::<Result<Vec<_>, _>>()?
        .join("\n");
    let stamp = dir.join("node_modules/.mcpwire-installed-from");
    let current = || fs::read_to_string(&stamp).is_ok_and(|s| s == manifest);
    if current() {
        return Ok(dir);
    }
    let _lock = InstallLock::take(&dir)?;
    if current() {
        // Another test process installed it while this one waited.
        return Ok(dir);
    }
    let out = run_bounded(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir),
        INSTALL,
    )?;
    if !out.status.success() {
        return Err(format!(
            "`npm ci` in tests/interop failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    fs::write(&stamp, &manifest).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(dir)
}

/// `tests/interop/.npm-ci.lock`, held while `npm ci` runs, so that test processes side by
/// side (cargo nextest runs one per test) never install over each other. A directory,
/// since creating one is atomic; removed when dropped.
struct InstallLock(PathBuf);

impl InstallLock {
    fn take(dir: &Path) -> Result<Self, String> {
        let path = dir.join(".npm-ci.lock");
        let deadline = Instant::now() + INSTALL;
        loop {
            match fs::create_dir(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // Older than any install can take: left by a process that was killed.
                    let stale = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > INSTALL);
                    if stale {
                        let _ = fs::remove_dir(&path);
                    } else if Instant::now() >= deadline {
                        return Err(format!(
                            "{} is still held after {INSTALL:?}: another `npm ci` hangs, \
                             or the directory is left over; remove it",
                            path.display()
                        ));
                    } else {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

/// Collects a pipe on a thread, so that a child never blocks on a full pipe.
fn collect(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

/// Runs `cmd` to its end; kills it after `limit` and says so, with what it printed.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let stdout = collect(child.stdout.take().expect("piped stdout"));
    let stderr = collect(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + limit;
    let finished = loop {
        match child.try_wait() {
            Ok(Some(_)) => break true,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                break false;
            }
        }
    };
    let output = Output {
        status: child
            .wait()
            .map_err(|e| format!("waiting on {cmd:?}: {e}"))?,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    if finished {
        Ok(output)
    } else {
        Err(format!(
            "{cmd:?} did not finish within {limit:?}; killed.\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Runs `ts-client.mjs URL MODE` and returns its JSON line, failing with its output when
/// it fails.
fn ts_client(url: &str, mode: &str) -> Value {
    let dir = sdk();
    let out = run_bounded(
        Command::new("node")
            .arg("ts-client.mjs")
            .args([url, mode])
            .current_dir(dir),
        RUN,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the TS client ({mode}) against {url} failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {stdout}"))
}

/// `ts-server.mjs` running: killed when dropped.
struct TsServer {
    child: Child,
    /// Held open: the script exits when it reads the end of its input, so an aborted
    /// test process leaves no server behind.
    _stdin: ChildStdin,
    /// The port, then one JSON event per line.
    lines: Receiver<String>,
    /// The events read so far.
    events: Vec<Value>,
    /// What the script wrote on stderr, for the failure messages.
    stderr: Arc<Mutex<String>>,
    port: u16,
}

impl Drop for TsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TsServer {
    fn start(mode: &str) -> Self {
        let dir = sdk();
        let mut child = Command::new("node")
            .args(["ts-server.mjs", "0", mode])
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node runs ts-server.mjs");
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = BufReader::new(child.stderr.take().expect("piped stderr"));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in pipe.lines().map_while(Result::ok) {
                let mut text = sink
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                text.push_str(&line);
                text.push('\n');
            }
        });
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut server = Self {
            child,
            _stdin: stdin,
            lines,
            events: Vec::new(),
            stderr,
            port: 0,
        };
        let first = server.lines.recv_timeout(WAIT).unwrap_or_else(|e| {
            panic!(
                "ts-server.mjs {mode} printed no port within {WAIT:?} ({e}); stderr:\n{}",
                server.stderr_text()
            )
        });
        server.port = first
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("ts-server.mjs printed {first:?}, not a port"));
        server
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Reads events until one named `name` satisfies `check`; returns it.
    fn wait_for(&mut self, name: &str, check: impl Fn(&Value) -> bool) -> Value {
        let matches = |e: &Value| e["event"] == name && check(e);
        if let Some(e) = self.events.iter().find(|e| matches(e)) {
            return e.clone();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let event: Value = serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("ts-server.mjs printed {line:?}: {e}"));
                    self.events.push(event.clone());
                    if matches(&event) {
                        return event;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                    "ts-server.mjs logged no {name:?} event within {WAIT:?}; events: {:?}\nstderr:\n{}",
                    self.events,
                    self.stderr_text()
                ),
            }
        }
    }

    fn stderr_text(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The events named `name` read so far.
    fn seen(&self, name: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == name).collect()
    }
}

/// What `mcpwire call` printed: the result, the `connected (VERSION, TRANSPORT)` line and
/// the progress notifications.
struct Called {
    result: Value,
    connected: String,
    progress: Vec<Value>,
}

/// Runs `mcpwire call URL TOOL ARGS`, which must succeed.
fn mcpwire_call(url: &str, tool: &str, args: &Value) -> Called {
    let timeout_ms = (RUN.as_millis() - 5_000).to_string();
    let out = run_bounded(
        Command::new(BIN).args([
            "call",
            "--timeout-ms",
            &timeout_ms,
            url,
            tool,
            &args.to_string(),
        ]),
        RUN,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mcpwire call {url} {tool} failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    let connected = stderr
        .lines()
        .find_map(|l| l.strip_prefix("mcpwire call: connected "))
        .unwrap_or_else(|| panic!("no connected line: {stderr}"))
        .to_owned();
    let progress = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("mcpwire call: progress "))
        .map(|p| serde_json::from_str(p).unwrap_or_else(|e| panic!("progress {p:?}: {e}")))
        .collect();
    let result = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the result is not JSON ({e}): {stdout}"));
    Called {
        result,
        connected,
        progress,
    }
}

/// The progress `mcpwire call` must print for `slow_count {n}`: every step, in order.
fn steps(n: u32) -> Vec<Value> {
    (1..=n)
        .map(|i| json!({"progressToken": "mcpwire-call", "progress": i, "total": n}))
        .collect()
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// The SDK's Streamable HTTP client against `mcpwire serve`: initialize (2025-11-25), the
/// GET stream opened after the 202 to `notifications/initialized`, `tools/list`, `echo`
/// with non-ASCII text, `slow_count` with every progress step through `onprogress` and a
/// priming event id on its stream, the protocol version header on every request, DELETE
/// (200) and 404 for the deleted session afterwards. The script asserts each of these.
#[test]
fn http_post_7_ts_streamable_client_against_serve() {
    let server = start(&[]);
    let got = ts_client(&format!("http://{}/mcp", server.addr), "streamable");
    assert_eq!(got["protocolVersion"], "2025-11-25", "{got}");
    assert_eq!(got["server"]["name"], "mcpwire", "{got}");
    assert_eq!(got["progress"], 4, "{got}");
    assert_eq!(got["resumes"], 0, "{got}");
}

/// The SDK's Streamable HTTP client against `mcpwire serve --poll-ms 0 --retry-ms 50`:
/// every connection is closed right after it opened, so the SDK must resume the
/// `slow_count` stream with GET + `Last-Event-ID` (one of that stream's ids), get 200 and
/// the replay, and still see every progress step and the result; then DELETE. The steps
/// are 150 ms apart, so some resumes find nothing new: each still carries a fresh priming
/// event, without which SDK 1.32 reconnects with no `Last-Event-ID` at all
/// (typescript-sdk#2499) and the call times out.
#[test]
fn resume_9_ts_streamable_client_resumes_through_serve_polling_closes() {
    let server = start(&["--poll-ms", "0", "--retry-ms", "50"]);
    let got = ts_client(&format!("http://{}/mcp", server.addr), "polling");
    assert!(got["resumes"].as_u64() >= Some(1), "{got}");
    assert_eq!(got["progress"], 4, "{got}");
}

/// The SDK's legacy SSE client against `mcpwire serve`'s `GET /sse`: the `endpoint` event
/// resolved against the SSE URL (same origin), every message POSTed to `/messages` and
/// answered 202, the responses and every progress notification on the SSE stream, in
/// order. (The SDK's `Client` may drop the last step itself when it arrives in one chunk
/// with the result, typescript-sdk#2580; the script checks that only that happens.)
#[test]
fn legacy_3_ts_sse_client_against_serve_legacy_endpoints() {
    let server = start(&[]);
    let got = ts_client(&format!("http://{}/sse", server.addr), "legacy");
    assert_eq!(got["server"]["name"], "mcpwire", "{got}");
    assert_eq!(got["wireProgress"], 4, "{got}");
}

/// `mcpwire call` against the SDK's Streamable HTTP server transport: initialize at
/// 2025-11-25, every progress step and the result, then DELETE, which the SDK's server
/// takes as the end of the session.
#[test]
fn http_delete_1_mcpwire_call_against_ts_streamable_server() {
    let mut server = TsServer::start("streamable");
    let url = server.url("/mcp");
    let echo = mcpwire_call(&url, "echo", &json!({"text": "héllo ✓ \"q\"\nline two"}));
    assert_eq!(echo.result, text_result("héllo ✓ \"q\"\nline two"));
    assert_eq!(echo.connected, "(2025-11-25, StreamableHttp)");
    let count = mcpwire_call(&url, "slow_count", &json!({"n": 3, "delay_ms": 20}));
    assert_eq!(count.result, text_result("3"));
    assert_eq!(count.progress, steps(3));
    for _ in 0..2 {
        let opened = server.wait_for("session-initialized", |_| true);
        assert_eq!(opened["protocolVersion"], "2025-11-25");
        let session = opened["session"].clone();
        server.wait_for("session-closed", |e| e["session"] == session);
        server.events.retain(|e| e["session"] != session);
    }
    assert!(server.seen("resume").is_empty(), "{:?}", server.events);
}

/// `mcpwire call` against the SDK's Streamable HTTP server with its event store, whose
/// `slow_count` closes the request's stream after the first step (SEP-1699,
/// `closeSSEStream`): our client resumes with GET + `Last-Event-ID` after the 50 ms
/// `retry`, the SDK replays from its store, and every step and the result arrive.
#[test]
fn resume_4_mcpwire_call_resumes_from_the_ts_event_store() {
    let mut server = TsServer::start("polling");
    let url = server.url("/mcp");
    let count = mcpwire_call(&url, "slow_count", &json!({"n": 4, "delay_ms": 30}));
    assert_eq!(count.result, text_result("4"));
    assert_eq!(count.progress, steps(4));
    let opened = server.wait_for("session-initialized", |_| true);
    let session = opened["session"].as_str().expect("a session id").to_owned();
    server.wait_for("close-sse-stream", |_| true);
    // The cursor is one the SDK's store gave (`STREAM_SEQ`), of a request's stream, not
    // of the standalone GET stream (`_GET_stream`), which nothing closed.
    let resume = server.wait_for("resume", |_| true);
    assert!(
        resume["lastEventId"]
            .as_str()
            .is_some_and(|id| id.contains('_') && !id.starts_with("_GET_stream")),
        "{resume}"
    );
    server.wait_for("session-closed", |e| e["session"] == session.as_str());
}

/// `mcpwire call` given the SSE URL of the SDK's legacy server: its initialize POST to
/// `/sse` gets 404, so it GETs the same URL, takes the `endpoint` event, POSTs to
/// `/messages?sessionId=` and gets the responses and progress on the stream (2024-11-05).
#[test]
fn legacy_6_mcpwire_call_falls_back_to_the_ts_sse_server() {
    let mut server = TsServer::start("legacy");
    let count = mcpwire_call(
        &server.url("/sse"),
        "slow_count",
        &json!({"n": 3, "delay_ms": 20}),
    );
    assert_eq!(count.result, text_result("3"));
    assert_eq!(count.connected, "(2024-11-05, HttpSse)");
    assert_eq!(count.progress, steps(3));
    server.wait_for("unrouted", |e| e["method"] == "POST" && e["path"] == "/sse");
    let opened = server.wait_for("legacy-open", |_| true);
    let session = opened["session"].clone();
    server.wait_for("legacy-closed", |e| e["session"] == session);
    // initialize, notifications/initialized, tools/call.
    let posts = server
        .seen("legacy-post")
        .iter()
        .filter(|e| e["session"] == session)
        .count();
    assert_eq!(posts, 3, "{:?}", server.events);
}
