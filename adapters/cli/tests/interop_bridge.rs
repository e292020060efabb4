//! `mcpwire bridge --stdio` in front of the official reference server
//! `@modelcontextprotocol/server-everything` (npm, pinned exactly in
//! `tests/interop/package.json` and its lockfile) in stdio mode, driven by the official
//! TypeScript SDK clients (`tests/interop/ts-bridge-client.mjs`): SDK 1.32's Streamable
//! HTTP client in a session (also through SEP-1699 polling closes) and its legacy SSE
//! client, each session with a child of its own that got the client's `initialize`
//! (BRIDGE-1); and the SDK v2 client on 2026-07-28, served by the bridge's pool
//! (BRIDGE-2), the child's questions asked as `input_required` results (BRIDGE-3,
//! MODERN-23). In every era: progress, and the server's sampling, elicitation and roots
//! requests answered by the client's handlers. The script asserts what the SDK saw;
//! these tests assert what it reports and what the bridge logged.
//!
//! Needs Node.js 20 or newer and npm on `PATH`; fails (never skips) without them. The
//! first test to run does `npm ci` in `tests/interop` once, unless `node_modules` was
//! installed from the same lockfile already. Every process is killed when its test ends
//! (the bridge, and with it its children, which exit at the end of their input), every
//! wait is bounded, and everything listens on 127.0.0.1.

mod common;
#[allow(dead_code)] // Shared with the interop tests; this file uses a part.
#[path = "common/npm.rs"]
mod npm;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, start_command};
use npm::{run_bounded, sdk};
use serde_json::Value;

/// How long one client run may take: each takes 2 to 4 s (the long-running operation
/// alone is 1 s); the script gives up by itself after 30 s and says where it was.
const RUN: Duration = Duration::from_secs(45);

/// How long the bridge may take to log what a finished run implies.
const LOG_WAIT: Duration = Duration::from_secs(5);

/// `server-everything`'s `serverInfo`, as its `initialize` result gives it.
const EVERYTHING: &str =
    r#"{"name":"mcp-servers/everything","title":"Everything Reference Server","version":"2.0.0"}"#;

/// `mcpwire bridge --stdio "node .../server-everything/dist/index.js stdio"` with `args`
/// (`tests/interop` installed first).
fn bridge(args: &[&str]) -> Server {
    let dir = sdk();
    let script = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let script = script
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    let command = format!("node '{}' stdio", script.display());
    start_command("bridge", &[&["--stdio", command.as_str()], args].concat())
}

/// Runs `ts-bridge-client.mjs MODE URL` and returns its JSON line, failing with its
/// output when it fails.
fn ts_bridge_client(mode: &str, url: &str) -> Value {
    let dir = sdk();
    let started = Instant::now();
    let out = run_bounded(
        Command::new("node")
            .args(["ts-bridge-client.mjs", mode, url])
            .current_dir(dir),
        RUN,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the TS client ({mode}) against {url} failed ({}) after {:?}:\n{stderr}\n{stdout}",
        out.status,
        started.elapsed()
    );
    let mut lines = stdout.lines().rev();
    assert_eq!(lines.next(), Some("ok"), "{stdout}");
    let line = lines.next().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {stdout}"))
}

/// Asserts that the bridge logged a line containing `needle`.
fn logged(server: &Server, needle: &str) {
    assert!(
        server.logs_within(needle, LOG_WAIT),
        "the bridge logged no line with {needle:?} within {LOG_WAIT:?}"
    );
}

/// The bridge's children running `server-everything` (Linux: from `/proc`).
fn children(server: &Server) -> usize {
    let bridge = server.child.id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // `PID (COMM) STATE PPID ...`, COMM possibly holding spaces.
            let mut rest = stat
                .rsplit_once(") ")
                .map(|(_, r)| r)
                .unwrap_or_default()
                .split(' ');
            let state = rest.next().unwrap_or("Z");
            state != "Z" && rest.next() == Some(bridge.as_str())
        })
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("server-everything"))
        })
        .count()
}

/// Waits until the bridge has `n` children, within [`LOG_WAIT`].
fn children_become(server: &Server, n: usize, why: &str) {
    let until = Instant::now() + LOG_WAIT;
    while children(server) != n {
        assert!(
            Instant::now() < until,
            "{why}: {} children, not {n}, after {LOG_WAIT:?}",
            children(server)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The facts every session run shares: the child's `serverInfo` and the four progress
/// steps on the wire; the child's own `roots/list` (350 ms after `initialized`, while a
/// call of the client runs) answered by the client before `get-roots-list`, which then
/// shows the cached answer without asking again; the session's child logged, and ended
/// with its session, leaving the pool's one child.
fn session_facts(got: &Value, server: &Server) {
    let everything: Value = serde_json::from_str(EVERYTHING).expect("JSON");
    assert_eq!(got["server"], everything, "{got}");
    assert_eq!(got["wireProgress"], 4, "{got}");
    assert_eq!(got["rootsBefore"], 1, "the child's own roots/list: {got}");
    assert_eq!(got["rootsAsked"], 1, "{got}");
    logged(server, "(session s");
    logged(server, &format!("): ready: {EVERYTHING}"));
    logged(server, ") stderr: Starting default (STDIO) server...");
    children_become(server, 1, "the session's child ends with its session");
}

/// The SDK's Streamable HTTP client, declaring sampling, elicitation and roots: its
/// `initialize` reaches the session's own child (2025-11-25, the child's `serverInfo` and
/// instructions, and the tools it registers only for those capabilities), `echo`,
/// `trigger-long-running-operation` with progress 1..4 in order then the result,
/// sampling and elicitation round trips through the client's handlers during a call,
/// `get-roots-list`, DELETE (200) and 404 for the session afterwards.
#[test]
fn bridge_1_bridge_3_ts_sdk_streamable_http_through_server_everything() {
    let server = bridge(&[]);
    let got = ts_bridge_client("streamable", &format!("http://{}/mcp", server.addr));
    assert_eq!(got["protocolVersion"], "2025-11-25", "{got}");
    assert_eq!(got["progress"], 4, "{got}");
    assert_eq!(got["resumes"], 0, "{got}");
    session_facts(&got, &server);
}

/// The same against `bridge --poll-ms 0 --retry-ms 50`: every stream is closed right
/// after its priming event, so the SDK resumes each with GET + `Last-Event-ID` (200) and
/// still gets every progress step of the long-running operation once, in order, then
/// its result; the sampling and elicitation questions and their answers cross the
/// polled streams too.
#[test]
fn bridge_1_resume_9_ts_sdk_resumes_after_polling_closes_through_the_bridge() {
    let server = bridge(&["--poll-ms", "0", "--retry-ms", "50"]);
    let got = ts_bridge_client("polling", &format!("http://{}/mcp", server.addr));
    assert_eq!(got["protocolVersion"], "2025-11-25", "{got}");
    assert_eq!(got["progress"], 4, "{got}");
    assert!(got["resumes"].as_u64() >= Some(1), "{got}");
    session_facts(&got, &server);
}

/// The SDK's legacy SSE client on `GET /sse`: every message POSTed to `/messages` (202),
/// the session's own child initialized with the client's `initialize`, tools/list,
/// `echo`, the long-running operation with its four progress steps on the stream before
/// the result (the SDK's `Client` may drop the last one itself when it comes in one
/// chunk with the result, typescript-sdk#2580; the script checks that only that
/// happens), and sampling, elicitation and roots round trips on the SSE stream.
#[test]
fn bridge_1_legacy_3_ts_sdk_sse_client_through_server_everything() {
    let server = bridge(&[]);
    let got = ts_bridge_client("legacy", &format!("http://{}/sse", server.addr));
    assert!(got["progress"].as_u64() >= Some(3), "{got}");
    session_facts(&got, &server);
}

/// The SDK v2 client with `versionNegotiation: auto`: `server/discover` negotiates
/// 2026-07-28 with the `serverInfo` of the pool's first child, tools/list, `echo`, the
/// long-running operation with progress 1..4 in order; then the child's elicitation,
/// sampling and roots requests, each answered `input_required`, fulfilled by the
/// client's handlers and carried back to the waiting child by the retry's
/// `inputResponses` (a POST each, no session, no GET stream).
#[test]
fn bridge_2_bridge_3_modern_23_ts_sdk_v2_2026_07_28_input_required_through_server_everything() {
    let server = bridge(&[]);
    let got = ts_bridge_client("v2", &format!("http://{}/mcp", server.addr));
    assert_eq!(got["protocolVersion"], "2026-07-28", "{got}");
    let everything: Value = serde_json::from_str(EVERYTHING).expect("JSON");
    assert_eq!(got["server"], everything, "{got}");
    assert_eq!(got["progress"], 4, "{got}");
    // Five calls, and one retry for each of the three questions.
    assert_eq!(got["toolCalls"], 8, "{got}");
    logged(
        &server,
        &format!("(the 2026-07-28 pool): ready: {EVERYTHING}"),
    );
    assert!(
        !server.logs_within("(session", Duration::ZERO),
        "a 2026-07-28 client started no session"
    );
    // The pool's children, within its default bound (BRIDGE-5).
    let pool = children(&server);
    assert!((1..=4).contains(&pool), "{pool} pool children");
}
