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
//! Needs Node.js 20 or newer and npm on `PATH`; fails (never skips) without them. The
//! first test to run does `npm ci` in `tests/interop` once, unless `node_modules` was
//! installed from the same lockfile already. Every process is killed when its test ends,
//! every wait is bounded, and everything listens on 127.0.0.1.

mod common;
#[path = "common/npm.rs"]
mod npm;
#[path = "common/pki.rs"]
mod pki;
#[path = "common/ts.rs"]
mod ts;

use std::process::Command;

use common::{ADAPTERS, start_on};
use npm::{run_bounded, sdk};
use serde_json::{Value, json};
use ts::{RUN, TsServer, mcpwire_call, mcpwire_call_with, steps, text_result};

/// Runs `ts-client.mjs URL MODE` and returns its JSON line, failing with its output when
/// it fails.
fn ts_client(url: &str, mode: &str) -> Value {
    ts_client_with(url, mode, &[])
}

/// [`ts_client`] with more environment variables for node.
fn ts_client_with(url: &str, mode: &str, env: &[(&str, &str)]) -> Value {
    let dir = sdk();
    let out = run_bounded(
        Command::new("node")
            .arg("ts-client.mjs")
            .args([url, mode])
            .envs(env.iter().copied())
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

/// The SDK's Streamable HTTP client against `mcpwire serve`: initialize (2025-11-25), the
/// GET stream opened after the 202 to `notifications/initialized`, `tools/list`, `echo`
/// with non-ASCII text, `slow_count` with every progress step through `onprogress` and a
/// priming event id on its stream, the protocol version header on every request, DELETE
/// (200) and 404 for the deleted session afterwards. The script asserts each of these.
/// On both adapters.
#[test]
fn http_post_7_ts_streamable_client_against_serve() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &[]);
        let got = ts_client(&format!("http://{}/mcp", server.addr), "streamable");
        assert_eq!(got["protocolVersion"], "2025-11-25", "{adapter:?} {got}");
        assert_eq!(got["server"]["name"], "mcpwire", "{adapter:?} {got}");
        assert_eq!(got["progress"], 4, "{adapter:?} {got}");
        assert_eq!(got["resumes"], 0, "{adapter:?} {got}");
    }
}

/// The SDK's Streamable HTTP client (fetch on Node's OpenSSL) over https against
/// `mcpwire serve --tls-cert --tls-key` (rustls), trusting the test's CA through
/// `NODE_EXTRA_CA_CERTS`: the same scenario as over http (HTTP-POST-1: an `https`
/// endpoint).
#[test]
fn http_post_1_ts_streamable_client_over_https_against_serve_tls() {
    let pki = pki::Pki::new("ts-tls");
    let (cert, key) = (pki.path("cert.pem"), pki.path("key.pem"));
    let server = start_on(&[], &["--tls-cert", &cert, "--tls-key", &key]);
    let url = format!("https://{}/mcp", server.addr);
    let got = ts_client_with(
        &url,
        "streamable",
        &[("NODE_EXTRA_CA_CERTS", &pki.path("ca.pem"))],
    );
    assert_eq!(got["protocolVersion"], "2025-11-25", "{got}");
    assert_eq!(got["progress"], 4, "{got}");
}

/// The SDK's Streamable HTTP client against `mcpwire serve --poll-ms 0 --retry-ms 50`:
/// every connection is closed right after it opened, so the SDK must resume the
/// `slow_count` stream with GET + `Last-Event-ID` (one of that stream's ids), get 200 and
/// the replay, and still see every progress step and the result; then DELETE. The steps
/// are 150 ms apart, so some resumes find nothing new: each still carries a fresh priming
/// event, without which SDK 1.32 reconnects with no `Last-Event-ID` at all
/// (typescript-sdk#2499) and the call times out. On both adapters.
#[test]
fn resume_9_ts_streamable_client_resumes_through_serve_polling_closes() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &["--poll-ms", "0", "--retry-ms", "50"]);
        let got = ts_client(&format!("http://{}/mcp", server.addr), "polling");
        assert!(got["resumes"].as_u64() >= Some(1), "{adapter:?} {got}");
        assert_eq!(got["progress"], 4, "{adapter:?} {got}");
    }
}

/// RESUME-14: the SDK's Streamable HTTP client loses the `slow_count` stream after two
/// progress steps, as a connection killed by a NAT or proxy timeout: its reader gets an
/// error, and the socket is left open and unread, so the server still believes it alive.
/// The SDK resumes at once with GET + `Last-Event-ID`; the server takes the stream over
/// (200, never 409) and the call ends with every step once and its result. On both
/// adapters (before RESUME-14, the blocking server answered 409 every time and the call
/// hung to its timeout).
#[test]
fn resume_14_ts_streamable_client_resumes_a_silently_dead_stream() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &[]);
        let got = ts_client(&format!("http://{}/mcp", server.addr), "drop");
        assert!(got["resumes"].as_u64() >= Some(1), "{adapter:?} {got}");
        assert_eq!(got["progress"], 4, "{adapter:?} {got}");
        assert_eq!(got["wireProgress"], 4, "{adapter:?} {got}");
    }
}

/// The SDK's legacy SSE client against `mcpwire serve`'s `GET /sse`: the `endpoint` event
/// resolved against the SSE URL (same origin), every message POSTed to `/messages` and
/// answered 202, the responses and every progress notification on the SSE stream, in
/// order. (The SDK's `Client` may drop the last step itself when it arrives in one chunk
/// with the result, typescript-sdk#2580; the script checks that only that happens.)
/// On both adapters.
#[test]
fn legacy_3_ts_sse_client_against_serve_legacy_endpoints() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &[]);
        let got = ts_client(&format!("http://{}/sse", server.addr), "legacy");
        assert_eq!(got["server"]["name"], "mcpwire", "{adapter:?} {got}");
        assert_eq!(got["wireProgress"], 4, "{adapter:?} {got}");
    }
}

/// `mcpwire call` against the SDK's Streamable HTTP server transport: initialize at
/// 2025-11-25, every progress step and the result, then DELETE, which the SDK's server
/// takes as the end of the session.
#[test]
fn http_delete_1_mcpwire_call_against_ts_streamable_server() {
    let mut server = TsServer::start("ts-server.mjs", "streamable");
    let url = server.url("/mcp");
    let echo = mcpwire_call(&url, "echo", &json!({"text": "héllo ✓ \"q\"\nline two"}));
    assert_eq!(echo.result, text_result("héllo ✓ \"q\"\nline two"));
    assert_eq!(
        echo.connected,
        "(2025-11-25, Streamable HTTP with sessions)"
    );
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
    let mut server = TsServer::start("ts-server.mjs", "polling");
    let url = server.url("/mcp");
    let count = mcpwire_call(&url, "slow_count", &json!({"n": 4, "delay_ms": 30}));
    assert_eq!(count.result, text_result("4"));
    // The default, `--revision auto`: the SDK 1.32 server refuses the 2026-07-28 probe,
    // and the call settles on the session era.
    assert_eq!(
        count.connected,
        "(2025-11-25, Streamable HTTP with sessions)"
    );
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
    let mut server = TsServer::start("ts-server.mjs", "legacy");
    let count = mcpwire_call(
        &server.url("/sse"),
        "slow_count",
        &json!({"n": 3, "delay_ms": 20}),
    );
    assert_eq!(count.result, text_result("3"));
    assert_eq!(count.connected, "(2024-11-05, legacy HTTP+SSE)");
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

/// `mcpwire call --blocking` (the client core on mcpwire-blocking's ureq client) against
/// the SDK's three servers: Streamable HTTP (HTTP-DELETE-1 ends the session), the one
/// that closes a request's stream (RESUME-4: resumed from its event store), and the
/// legacy one (LEGACY-6: found by the fallback).
#[test]
fn resume_4_legacy_6_mcpwire_call_blocking_against_the_ts_servers() {
    for (mode, path) in [
        ("streamable", "/mcp"),
        ("polling", "/mcp"),
        ("legacy", "/sse"),
    ] {
        let mut server = TsServer::start("ts-server.mjs", mode);
        let url = server.url(path);
        let args = json!({"n": 3, "delay_ms": 30});
        let count = mcpwire_call_with(&["--blocking"], &url, "slow_count", &args);
        assert_eq!(count.result, text_result("3"), "{mode}");
        assert_eq!(count.progress, steps(3), "{mode}");
        match mode {
            "legacy" => {
                assert_eq!(count.connected, "(2024-11-05, legacy HTTP+SSE, blocking)");
                let opened = server.wait_for("legacy-open", |_| true);
                let session = opened["session"].clone();
                server.wait_for("legacy-closed", |e| e["session"] == session);
            }
            _ => {
                assert_eq!(
                    count.connected,
                    "(2025-11-25, Streamable HTTP with sessions, blocking)"
                );
                let opened = server.wait_for("session-initialized", |_| true);
                let session = opened["session"].clone();
                if mode == "polling" {
                    server.wait_for("resume", |_| true);
                }
                server.wait_for("session-closed", |e| e["session"] == session);
            }
        }
    }
}

/// A call given up mid-stream stops the TypeScript SDK 1.32 servers' tool: `mcpwire call`
/// (each client) times out, and the core tells the server with `notifications/cancelled`
/// (HTTP-POST-12: a dropped connection is no cancellation; on the legacy transport too),
/// which aborts the tool's signal: it stops partway and never counts to the end.
#[test]
fn http_post_12_a_call_given_up_mid_stream_stops_the_ts_servers_tool() {
    const N: u64 = 50;
    const DELAY_MS: u64 = 100;
    for client in ADAPTERS {
        for (mode, path) in [("streamable", "/mcp"), ("legacy", "/sse")] {
            let mut server = TsServer::start("ts-server.mjs", mode);
            let url = server.url(path);
            let started = std::time::Instant::now();
            let options = [client, &["--timeout-ms", "1500"]].concat();
            let args = json!({"n": N, "delay_ms": DELAY_MS});
            let out = ts::mcpwire_call_run(&options, &url, "slow_count", &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && stderr.contains("the request timed out"),
                "{client:?} {mode}: the call should have timed out: {stderr}"
            );
            let progress = ts::progress_lines(&stderr);
            assert!(!progress.is_empty(), "{client:?} {mode}: it ran: {stderr}");
            let aborted = server.wait_for("aborted", |e| e["name"] == "slow_count");
            assert!(
                aborted["step"].as_u64().is_some_and(|s| s < N),
                "{client:?} {mode}: {aborted}"
            );
            assert!(
                started.elapsed() < std::time::Duration::from_millis(1_500 + 3_000),
                "{client:?} {mode}: the abort came late"
            );
            server.read_until(started + std::time::Duration::from_millis(N * DELAY_MS + 1_500));
            assert!(
                server.seen("counted").is_empty(),
                "{client:?} {mode}: the tool counted to the end"
            );
        }
    }
}
