//! `mcpwire bridge --stdio` in front of `tests/interop/stdio-fixture.mjs`, a small stdio
//! server with no dependencies, driven by `mcpwire call` in every revision (BRIDGE-1,
//! BRIDGE-2), and its failures: a child that dies mid-call, garbage on a child's output,
//! a child that stalls, a command that cannot start (BRIDGE-4), Ctrl-C (STDIO-5).
//!
//! Needs Node.js on `PATH` (as the interop tests do); every process is killed when its
//! test ends, every wait is bounded, and everything listens on 127.0.0.1.

mod common;
#[allow(dead_code)] // Shared with the interop tests; this file uses a part.
#[path = "common/npm.rs"]
mod npm;
#[allow(dead_code)]
#[path = "common/ts.rs"]
mod ts;

use std::process::Command;
use std::time::Duration;

use common::{BIN, Server, start_command};
use npm::{interop_dir, run_bounded};
use serde_json::{Value, json};
use ts::{RUN, WAIT, mcpwire_call_run, mcpwire_call_with, steps, text_result};

/// The fixture's command line for `--stdio`.
fn fixture() -> String {
    let script = interop_dir().join("stdio-fixture.mjs");
    format!("node '{}'", script.display())
}

/// `mcpwire bridge --stdio FIXTURE` with `args`.
fn bridge(args: &[&str]) -> Server {
    let command = fixture();
    start_command("bridge", &[&["--stdio", command.as_str()], args].concat())
}

/// The text of a tool result's first content.
fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// Whether process `pid` is alive (Linux: its `/proc` entry, not a zombie).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.split(") ").nth(1).unwrap_or_default().starts_with('Z'))
}

#[test]
fn bridge_1_bridge_2_every_revision_reaches_the_stdio_server_with_progress() {
    let server = bridge(&[]);
    let url = format!("http://{}/mcp", server.addr);
    let cases: [(&[&str], &str); 5] = [
        (&["--revision", "2026-07-28"], "(2026-07-28, sessionless)"),
        (
            &["--revision", "2025-11-25"],
            "(2025-11-25, Streamable HTTP with sessions)",
        ),
        (
            &["--revision", "2025-06-18"],
            "(2025-06-18, Streamable HTTP with sessions)",
        ),
        (
            &["--revision", "2025-03-26"],
            "(2025-03-26, Streamable HTTP with sessions)",
        ),
        (&["--legacy"], "(2024-11-05, legacy HTTP+SSE)"),
    ];
    for (options, connected) in cases {
        let url = if options == ["--legacy"] {
            format!("http://{}/sse", server.addr)
        } else {
            url.clone()
        };
        let echo = mcpwire_call_with(options, &url, "echo", &json!({"text": "hi"}));
        assert_eq!(echo.connected, connected, "{options:?}");
        assert_eq!(text_of(&echo.result), "hi", "{options:?}: {}", echo.result);
        let slow = mcpwire_call_with(options, &url, "slow", &json!({"steps": 3, "ms": 20}));
        assert_eq!(slow.progress, steps(3), "{options:?}: every step, in order");
        assert_eq!(text_of(&slow.result), "done");
    }
    assert!(
        server.logs_within("(the 2026-07-28 pool): ready", WAIT),
        "the pool's child is named in the log"
    );
    assert!(
        server.logs_within("stderr: stdio-fixture: started", WAIT),
        "STDIO-4"
    );
}

#[test]
fn bridge_1_each_session_has_its_own_child() {
    let server = bridge(&["--pool", "1"]);
    let url = format!("http://{}/mcp", server.addr);
    let pid = |_| {
        let called = mcpwire_call_with(&["--revision", "2025-11-25"], &url, "pid", &json!({}));
        text_of(&called.result).to_owned()
    };
    let pids: Vec<String> = (0..3).map(pid).collect();
    assert!(
        pids[0] != pids[1] && pids[1] != pids[2] && pids[0] != pids[2],
        "a child per session: {pids:?}"
    );
    // 2026-07-28 requests share the pool's one child.
    let modern = |_| {
        let called = mcpwire_call_with(&["--revision", "2026-07-28"], &url, "pid", &json!({}));
        text_of(&called.result).to_owned()
    };
    let pool: Vec<String> = (0..3).map(modern).collect();
    assert!(
        pool.iter().all(|p| *p == pool[0]),
        "one pool child: {pool:?}"
    );
    assert!(!pids.contains(&pool[0]));
}

#[test]
fn bridge_4_a_child_that_dies_fails_its_call_only_and_the_next_session_starts_a_fresh_one() {
    let server = bridge(&[]);
    let url = format!("http://{}/mcp", server.addr);
    // A call in flight in another session, all the while.
    let slow = std::thread::spawn({
        let url = url.clone();
        move || {
            mcpwire_call_with(
                &["--revision", "2025-11-25"],
                &url,
                "slow",
                &json!({"steps": 5, "ms": 200}),
            )
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let died = mcpwire_call_run(&["--revision", "2025-11-25"], &url, "die", &json!({}));
    let stderr = String::from_utf8_lossy(&died.stderr);
    assert!(!died.status.success(), "{stderr}");
    assert!(
        stderr.contains("-32603") && stderr.contains("exited with status 3"),
        "a JSON-RPC error naming the exit: {stderr}"
    );
    let slow = slow.join().expect("the other call");
    assert_eq!(
        text_of(&slow.result),
        "done",
        "the other session's call ran on"
    );
    assert_eq!(slow.progress.len(), 5);
    assert!(
        server.logs_within("exited with status 3; 1 request(s) in flight failed", WAIT),
        "the exit is logged with its session"
    );
    let after = mcpwire_call_with(
        &["--revision", "2025-11-25"],
        &url,
        "echo",
        &json!({"text": "again"}),
    );
    assert_eq!(
        after.result,
        text_result("again"),
        "a new session, a fresh child"
    );
}

#[test]
fn bridge_4_garbage_on_a_childs_output_is_reported_and_loses_nothing() {
    let server = bridge(&[]);
    let url = format!("http://{}/mcp", server.addr);
    for revision in ["2025-11-25", "2026-07-28"] {
        let called = mcpwire_call_with(&["--revision", revision], &url, "garbage", &json!({}));
        assert_eq!(text_of(&called.result), "after garbage", "{revision}");
    }
    assert!(
        server.logs_within("bad output, ignored: line", WAIT)
            && server.logs_within("\"this is not JSON-RPC\"", WAIT),
        "STDIO-6: each bad line is reported"
    );
}

#[test]
fn bridge_4_a_child_that_stalls_fails_the_call_in_flight() {
    // Long enough for a node child to start on a loaded machine: its `initialize` counts.
    let server = bridge(&["--stall-ms", "2000"]);
    let url = format!("http://{}/mcp", server.addr);
    let stalled = mcpwire_call_run(
        &["--revision", "2025-11-25"],
        &url,
        "slow",
        &json!({"steps": 1, "ms": 6000}),
    );
    let stderr = String::from_utf8_lossy(&stalled.stderr);
    assert!(!stalled.status.success(), "{stderr}");
    assert!(stderr.contains("stalled"), "{stderr}");
    // Progress is output: a call slower than the stall timeout that reports keeps its
    // child.
    let reporting = mcpwire_call_with(
        &["--revision", "2025-11-25"],
        &url,
        "slow",
        &json!({"steps": 3, "ms": 1200}),
    );
    assert_eq!(text_of(&reporting.result), "done");
}

#[test]
fn bridge_4_a_command_that_cannot_start_is_a_clear_failure() {
    let out = run_bounded(
        Command::new(BIN).args([
            "bridge",
            "--addr",
            "127.0.0.1:0",
            "--stdio",
            "/nonexistent/mcp-server --flag",
        ]),
        RUN,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("did not start"), "{stderr}");
    assert!(
        stderr.contains("cannot start /nonexistent/mcp-server"),
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
fn stdio_5_ctrl_c_ends_every_child() {
    let mut server = bridge(&[]);
    let url = format!("http://{}/mcp", server.addr);
    let mut pids: Vec<String> = (0..2)
        .map(|_| {
            let called = mcpwire_call_with(&["--revision", "2025-11-25"], &url, "pid", &json!({}));
            text_of(&called.result).to_owned()
        })
        .collect();
    let pool = mcpwire_call_with(&["--revision", "2026-07-28"], &url, "pid", &json!({}));
    pids.push(text_of(&pool.result).to_owned());
    // The sessions' clients ended their sessions (DELETE): only the pool child lives on.
    assert!(alive(&pids[2]), "the pool child runs");
    let status = Command::new("kill")
        .args(["-INT", &server.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let until = std::time::Instant::now() + WAIT;
    let exited = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(std::time::Instant::now() < until, "the bridge did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exited.success(), "{exited}");
    for pid in &pids {
        assert!(!alive(pid), "child {pid} outlived the bridge");
    }
}
