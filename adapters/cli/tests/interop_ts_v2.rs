//! Interop with the official MCP TypeScript SDK v2 client (npm
//! `@modelcontextprotocol/client`, pinned exactly beside the v1 SDK in
//! `tests/interop/package.json` and its lockfile), against `mcpwire serve` on both
//! adapters (`tests/interop/ts-client-v2.mjs`):
//!
//! - with `versionNegotiation: {mode: 'auto'}` its `server/discover` probe negotiates
//!   2026-07-28 (MODERN-14, MODERN-15); `tools/list`; `tools/call` with progress on the
//!   request's own stream (MODERN-10); a call aborted by closing its stream, which the
//!   server learns as a cancellation (MODERN-11);
//! - against `serve --conformance`, `subscriptions/listen` hears the tools list change a
//!   tool announces (MODERN-13);
//! - with the default negotiation (`initialize`, 2025-11-25) the session era still works
//!   on the same endpoint (MODERN-25).
//!
//! Needs Node.js 20 or newer and npm on `PATH`; fails (never skips) without them. Every
//! process is killed when its test ends, every wait is bounded, and everything listens
//! on 127.0.0.1.

mod common;
#[path = "common/npm.rs"]
mod npm;

use std::process::Command;
use std::time::Duration;

use common::{ADAPTERS, Server, start_on};
use npm::{run_bounded, sdk};

/// How long one client run may take: about a second; the bound is there for a loaded
/// machine and for a hang.
const RUN: Duration = Duration::from_secs(60);

/// How long the server may take to log what the client did.
const WAIT: Duration = Duration::from_secs(15);

/// Runs `ts-client-v2.mjs MODE` against `server`, failing with its output unless it
/// ends with `ok`; returns its output.
fn ts_client_v2(server: &Server, mode: &str) -> String {
    let url = format!("http://{}/mcp", server.addr);
    let out = run_bounded(
        Command::new("node")
            .args(["ts-client-v2.mjs", mode, &url])
            .current_dir(sdk()),
        RUN,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().last() == Some("ok"),
        "the TS v2 client ({mode}) against {url} failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    stdout
}

#[test]
fn modern_14_modern_11_ts_v2_client_negotiates_2026_07_28_calls_and_cancels() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &[]);
        let seen = ts_client_v2(&server, "auto");
        assert!(
            seen.contains("negotiated 2026-07-28"),
            "{adapter:?}: {seen}"
        );
        assert!(
            server.logs_within("cancelled", WAIT),
            "{adapter:?}: the server never learned that the aborted call's stream closed"
        );
    }
}

#[test]
fn modern_13_ts_v2_client_listens_and_hears_a_tools_list_change() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &["--conformance"]);
        let seen = ts_client_v2(&server, "listen");
        assert!(seen.contains("subscription id"), "{adapter:?}: {seen}");
    }
}

#[test]
fn modern_25_ts_v2_client_pinned_to_2025_11_25_uses_the_session_era() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &[]);
        let seen = ts_client_v2(&server, "legacy");
        assert!(
            seen.contains("negotiated 2025-11-25"),
            "{adapter:?}: {seen}"
        );
    }
}
