//! `mcpwire bridge --remote` (BRIDGE-6): the official TypeScript SDK 1.32 client over
//! stdio (`StdioClientTransport`, `tests/interop/ts-remote-client.mjs`) spawns the bridge
//! as its server, and the bridge reaches `mcpwire serve` in every revision, and the SDK's
//! own Streamable HTTP server with SEP-1699 closes (`ts-server.mjs polling`), whose
//! `ask` tool sends an elicitation through the bridge to the stdio client and back.
//!
//! Needs Node.js 20 or newer and npm (`tests/interop` is installed with `npm ci` once);
//! every process is killed when its test ends, every wait is bounded, and everything
//! listens on 127.0.0.1.

mod common;
#[path = "common/npm.rs"]
mod npm;
#[allow(dead_code)] // Shared with the other interop tests; this file uses a part.
#[path = "common/ts.rs"]
mod ts;

use std::process::Command;

use common::{BIN, start};
use npm::{run_bounded, sdk};
use ts::{RUN, TsServer};

/// Runs `ts-remote-client.mjs BIN URL SERVER-NAME ARGS...`, which must print `ok`;
/// returns what it checked.
fn stdio_client(url: &str, server_name: &str, bridge_args: &[&str]) -> String {
    let out = run_bounded(
        Command::new("node")
            .arg("ts-remote-client.mjs")
            .args([BIN, url, server_name])
            .args(bridge_args)
            .current_dir(sdk()),
        RUN,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().last() == Some("ok"),
        "the stdio client through `mcpwire bridge --remote {url} {bridge_args:?}` failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    stdout
}

/// The SDK's stdio client, through the bridge, to `mcpwire serve` in each revision the
/// client core speaks: the remote's description answers `initialize`, tools/list, a
/// call, every progress step before its result on the bridge's output, a cancelled call
/// given up, and the bridge exits when its input closes.
#[test]
fn bridge_6_ts_stdio_client_reaches_mcpwire_serve_in_every_revision() {
    let server = start(&[]);
    let mcp = format!("http://{}/mcp", server.addr);
    let sse = format!("http://{}/sse", server.addr);
    for (url, args) in [
        (&mcp, &[][..]),
        (&mcp, &["--revision", "2026-07-28"][..]),
        (&mcp, &["--revision", "2025-11-25"][..]),
        (&mcp, &["--revision", "2025-03-26"][..]),
        (&sse, &["--revision", "legacy"][..]),
    ] {
        let checked = stdio_client(url, "mcpwire", args);
        assert!(
            checked.contains("every progress step once, in order, before the result (1,2,3)"),
            "{args:?}: {checked}"
        );
    }
}

/// The SDK's stdio client, through the bridge, to the SDK's Streamable HTTP server whose
/// `slow_count` closes its stream after the first step (SEP-1699): the bridge's client
/// core resumes with GET + `Last-Event-ID`, and every step reaches the stdio client
/// before the result; the server's `ask` elicits through the bridge and gets the stdio
/// client's answer.
#[test]
fn bridge_6_resume_4_ts_stdio_client_reaches_the_ts_server_through_polling_closes() {
    let mut server = TsServer::start("ts-server.mjs", "polling");
    let checked = stdio_client(&server.url("/mcp"), "ts-interop-server", &[]);
    assert!(checked.contains("the answer went back"), "{checked}");
    server.wait_for("close-sse-stream", |_| true);
    server.wait_for("resume", |_| true);
}
