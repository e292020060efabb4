//! `mcpwire call` against a server built on the official MCP TypeScript SDK v2 (npm
//! `@modelcontextprotocol/server`, its `createMcpHandler`, served on node:http by
//! `@modelcontextprotocol/node`'s `toNodeHandler`; both pinned exactly in
//! `tests/interop/package.json` and its lockfile): `tests/interop/ts-server-v2.mjs`, which
//! logs every HTTP request it gets and what its tools do. With both clients (tokio, the
//! default, and `--blocking`), it proves:
//!
//! - against the modern-only server (`legacy: 'reject'`), the default `--revision auto`
//!   probes `server/discover` at 2026-07-28 and settles on it, sessionless (MODERN-14,
//!   MODERN-15): on the wire `server/discover`, `tools/list`, `tools/call`, each at
//!   2026-07-28, and nothing else; `echo` returns the server's exact result, and
//!   `slow_count` prints every progress step from the call's own stream, in order, before
//!   the result (MODERN-10);
//! - against the dual-era server (the SDK's default, `legacy: 'stateless'`), auto settles
//!   on 2026-07-28 too, and `--revision 2025-11-25` takes the session era on the same
//!   endpoint (MODERN-25), where the SDK serves every request statelessly: no session id
//!   minted (SESSION-1 is a MAY) and none sent back, its GET answered 405 and taken as
//!   benign (HTTP-GET-3), no DELETE;
//! - a call given up mid-stream (`--timeout-ms`) closes its response stream, which the
//!   SDK takes as the request's cancellation: the tool's abort signal fires and it stops
//!   counting (MODERN-11).
//!
//! (`interop_ts.rs` shows the default `auto` still settling on the session era against
//! the SDK 1.32 servers, and on legacy HTTP+SSE against its SSE server.)
//!
//! Needs Node.js 20 or newer and npm on `PATH`; fails (never skips) without them. Every
//! process is killed when its test ends, every wait is bounded, and everything listens
//! on 127.0.0.1.

mod common;
#[path = "common/npm.rs"]
mod npm;
#[path = "common/ts.rs"]
mod ts;

use std::time::{Duration, Instant};

use common::ADAPTERS;
use serde_json::{Value, json};
use ts::{
    TsServer, connected_line, mcpwire_call_run, mcpwire_call_with, progress_lines, steps,
    text_result,
};

/// The server script.
const SCRIPT: &str = "ts-server-v2.mjs";

/// The `connected` line's tail for `client` (one of [`ADAPTERS`]).
fn connected(revision_and_era: &str, client: &[&str]) -> String {
    let blocking = if client.is_empty() { "" } else { ", blocking" };
    format!("({revision_and_era}{blocking})")
}

/// A 2026-07-28 result of one text content, as the SDK sends it: with its `resultType`
/// (MODERN-18) and its server's identity in `_meta` (MODERN-3).
fn modern_text_result(text: &str) -> Value {
    json!({
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "ts-v2-interop-server", "version": "1.0.0"}},
        "content": [{"type": "text", "text": text}],
        "resultType": "complete",
    })
}

/// Waits until the server has answered a `tools/call` (its response ended), and returns
/// the HTTP requests it logged so far.
fn requests_through_the_call(server: &mut TsServer) -> Vec<Value> {
    server.wait_for("http-closed", |e| e["rpc"] == "tools/call");
    server.seen("http").into_iter().cloned().collect()
}

/// Asserts that the server saw exactly a sessionless 2026-07-28 call: `server/discover`,
/// `tools/list`, `tools/call`, each a POST at 2026-07-28 with no session id, each answered
/// 200 by a modern instance, and nothing else.
fn assert_modern_wire(server: &mut TsServer, what: &str) {
    let requests = requests_through_the_call(server);
    let seen: Vec<(&str, &str, &str)> = requests
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap_or("?"),
                r["rpc"].as_str().unwrap_or("-"),
                r["protocolVersion"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("POST", "server/discover", "2026-07-28"),
            ("POST", "tools/list", "2026-07-28"),
            ("POST", "tools/call", "2026-07-28"),
        ],
        "{what}: {:?}",
        server.events
    );
    assert!(
        requests.iter().all(|r| r["session"].is_null()),
        "{what}: {:?}",
        server.events
    );
    let answers = server.seen("http-closed");
    assert!(
        answers.len() == 3 && answers.iter().all(|a| a["status"] == 200),
        "{what}: {:?}",
        server.events
    );
    let eras: Vec<&Value> = server.seen("instance").iter().map(|e| &e["era"]).collect();
    assert_eq!(eras, ["modern"; 3], "{what}: {:?}", server.events);
}

#[test]
fn modern_15_modern_14_modern_10_auto_settles_on_2026_07_28_with_the_modern_only_ts_v2_server() {
    for client in ADAPTERS {
        let mut server = TsServer::start(SCRIPT, "modern");
        let url = server.url("/mcp");
        let echo = mcpwire_call_with(client, &url, "echo", &json!({"text": "héllo ✓ \"q\""}));
        assert_eq!(
            echo.connected,
            connected("2026-07-28, sessionless", client),
            "{client:?}"
        );
        assert_eq!(
            echo.result,
            modern_text_result("héllo ✓ \"q\""),
            "{client:?}"
        );
        assert!(echo.progress.is_empty(), "{client:?}: {:?}", echo.progress);
        assert_modern_wire(&mut server, &format!("{client:?} echo"));

        server.events.clear();
        let count = mcpwire_call_with(client, &url, "slow_count", &json!({"n": 3, "delay_ms": 50}));
        assert_eq!(
            count.connected,
            connected("2026-07-28, sessionless", client),
            "{client:?}"
        );
        assert_eq!(count.progress, steps(3), "{client:?}");
        assert_eq!(
            count.result,
            modern_text_result("counted to 3"),
            "{client:?}"
        );
        assert_modern_wire(&mut server, &format!("{client:?} slow_count"));
        // Every step the server sent: the progress came on the call's own stream.
        let sent: Vec<&Value> = server.seen("progress").iter().map(|e| &e["step"]).collect();
        assert_eq!(sent, [1, 2, 3], "{client:?}");
    }
}

#[test]
fn modern_15_modern_25_dual_era_ts_v2_server_auto_takes_2026_07_28_a_2025_11_25_pin_its_stateless_session_era()
 {
    for client in ADAPTERS {
        let mut server = TsServer::start(SCRIPT, "dual");
        let url = server.url("/mcp");
        let args = json!({"text": "two eras"});

        let auto = mcpwire_call_with(client, &url, "echo", &args);
        assert_eq!(
            auto.connected,
            connected("2026-07-28, sessionless", client),
            "{client:?}"
        );
        assert_eq!(auto.result, modern_text_result("two eras"), "{client:?}");
        assert_modern_wire(&mut server, &format!("{client:?} auto"));

        server.events.clear();
        let pinned = [client, &["--revision", "2025-11-25"]].concat();
        let session = mcpwire_call_with(&pinned, &url, "echo", &args);
        assert_eq!(
            session.connected,
            connected("2025-11-25, Streamable HTTP with sessions", client),
            "{client:?}"
        );
        assert_eq!(session.result, text_result("two eras"), "{client:?}");
        requests_through_the_call(&mut server);
        let what = format!("{client:?} --revision 2025-11-25: {:?}", server.events);
        // The POSTs: the handshake and the call, each served by a fresh legacy instance.
        let posts: Vec<(&str, &str)> = server
            .seen("http")
            .iter()
            .filter(|r| r["method"] == "POST")
            .map(|r| {
                (
                    r["rpc"].as_str().unwrap_or("-"),
                    r["protocolVersion"].as_str().unwrap_or("-"),
                )
            })
            .collect();
        assert_eq!(
            posts,
            [
                // VERSION-5: the initialize POST needs no header.
                ("initialize", "-"),
                ("notifications/initialized", "2025-11-25"),
                ("tools/call", "2025-11-25"),
            ],
            "{what}"
        );
        let eras: Vec<&Value> = server.seen("instance").iter().map(|e| &e["era"]).collect();
        assert_eq!(eras, ["legacy"; 3], "{what}");
        // Stateless: no session id minted, so none sent back; no DELETE to end one.
        assert!(
            server.events.iter().all(|e| e["session"].is_null()),
            "{what}"
        );
        assert!(
            server.seen("http").iter().all(|r| r["method"] != "DELETE"),
            "{what}"
        );
        // A standalone GET, if the client opened one before it closed, got 405, which did
        // not fail the call.
        assert!(
            server
                .seen("http-closed")
                .iter()
                .filter(|r| r["method"] == "GET")
                .all(|r| r["status"] == 405),
            "{what}"
        );
    }
}

#[test]
fn modern_11_a_call_given_up_mid_stream_stops_the_ts_v2_servers_tool() {
    const N: u32 = 50;
    const DELAY_MS: u64 = 100;
    for client in ADAPTERS {
        let mut server = TsServer::start(SCRIPT, "modern");
        let url = server.url("/mcp");
        let started = Instant::now();
        let options = [client, &["--timeout-ms", "1500"]].concat();
        let out = mcpwire_call_run(
            &options,
            &url,
            "slow_count",
            &json!({"n": N, "delay_ms": DELAY_MS}),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !out.status.success() && stdout.trim().is_empty(),
            "{client:?}: the call should have timed out ({}):\n{stderr}\n{stdout}",
            out.status
        );
        assert_eq!(
            connected_line(&stderr),
            connected("2026-07-28, sessionless", client),
            "{client:?}"
        );
        // It gave up mid-stream: some steps came, in order, and not all.
        let progress = progress_lines(&stderr);
        let shown = u32::try_from(progress.len()).expect("few steps");
        assert!(
            (1..N).contains(&shown) && progress == steps(N)[..progress.len()],
            "{client:?}: {stderr}"
        );

        // The server's tool learned it: its request's signal aborted, promptly.
        let aborted = server.wait_for("aborted", |e| e["name"] == "slow_count");
        let logged_after = started.elapsed();
        let step = aborted["step"].as_u64().expect("a step");
        assert!(step < u64::from(N), "{client:?}: {aborted}");
        assert!(
            logged_after < Duration::from_millis(1_500 + 3_000),
            "{client:?}: the abort was logged {logged_after:?} after the call began"
        );
        // The response stream was cut, not ended: the SDK never wrote the result.
        let call = server.wait_for("http-closed", |e| e["rpc"] == "tools/call");
        assert_eq!(call["finished"], false, "{client:?}: {call}");

        // Until well after it would have counted to N: it never did, and sent no more.
        server.read_until(started + Duration::from_millis(u64::from(N) * DELAY_MS + 1_500));
        assert!(
            server.seen("counted").is_empty(),
            "{client:?}: the tool counted to the end: {:?}",
            server.events
        );
        // No step logged as sent after the abort (MODERN-11: nothing more for it).
        let at = server
            .events
            .iter()
            .position(|e| e["event"] == "aborted")
            .expect("the abort was read");
        let late: Vec<&Value> = server.events[at..]
            .iter()
            .filter(|e| e["event"] == "progress")
            .collect();
        assert!(
            late.is_empty(),
            "{client:?}: sent after the abort: {late:?}"
        );
    }
}
