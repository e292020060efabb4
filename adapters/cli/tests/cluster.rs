//! Several `mcpwire serve --store redis://…` nodes behind a round-robin TCP proxy: every
//! connection goes to the next node, and with `--no-keep-alive` every request is a new
//! connection, so every request and every reconnect of a session lands on another node.
//! A real `redis-server` of the test's own (`mcpwire_tests::redis_server`, installed from
//! Debian's packages when missing) is shared by the nodes.
//!
//! The clients: the TypeScript SDK 1.32's Streamable HTTP client (`tests/interop/
//! ts-client.mjs`: initialize, tools, `slow_count` with progress, a resume after each
//! SEP-1699 polling close, DELETE and 404 after it) and `mcpwire call`. Every process is
//! killed when its test ends, every wait is bounded, everything is on 127.0.0.1.

mod common;
#[path = "common/npm.rs"]
mod npm;
#[path = "common/ts.rs"]
#[allow(dead_code)] // `mcpwire call` alone of what it shares: no TS server here.
mod ts;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, Server, start};
use mcpwire_tests::redis_server::RedisServer;
use mcpwire_tests::round_robin::RoundRobin;
use npm::{run_bounded, sdk};
use serde_json::{Value, json};
use ts::{RUN, mcpwire_call_with, text_result};

/// `n` nodes sharing `redis`, each with `args`.
fn nodes(redis: &RedisServer, n: u16, args: &[&str]) -> Vec<Server> {
    let url = redis.url();
    (1..=n)
        .map(|id| {
            let id = id.to_string();
            let mut all = vec!["--store", &url, "--node-id", &id, "--no-keep-alive"];
            all.extend_from_slice(args);
            start(&all)
        })
        .collect()
}

/// The round-robin proxy in front of `nodes`.
fn proxy(nodes: &[Server]) -> RoundRobin {
    let upstreams: Vec<SocketAddr> = nodes
        .iter()
        .map(|n| n.addr.parse().expect("a node's address"))
        .collect();
    RoundRobin::start(upstreams)
}

/// Runs `ts-client.mjs URL MODE`; its JSON line.
fn ts_client(url: &str, mode: &str) -> Value {
    let out = run_bounded(
        Command::new("node")
            .arg("ts-client.mjs")
            .args([url, mode])
            .current_dir(sdk()),
        RUN,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the TS client ({mode}) across the nodes failed ({}):\n{}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {stdout}"))
}

/// SESSION-7, RESUME-5, HTTP-DELETE-1 across three nodes: the SDK's client initializes on
/// one node, completes the handshake, lists tools, calls echo and `slow_count` with
/// progress, and DELETEs, each request on the next node; the deleted session is 404 on
/// every node after (the script checks it). With SEP-1699 polling (RESUME-9) every
/// stream is closed after its priming event, so the call resumes with GET +
/// `Last-Event-ID` again and again, each time on another node than the one running the
/// tool: every progress step arrives once, then the result. And RESUME-14: the call's
/// stream dies silently after two steps (the node running the tool still believes it
/// alive); the SDK resumes at once, on another node, which takes it over.
#[test]
fn session_7_resume_9_resume_14_the_ts_client_across_three_nodes() {
    let redis = RedisServer::start();
    for (mode, args) in [
        ("streamable", &[][..]),
        ("polling", &["--poll-ms", "0", "--retry-ms", "50"][..]),
        ("drop", &[][..]),
    ] {
        let nodes = nodes(&redis, 3, args);
        let proxy = proxy(&nodes);
        let got = ts_client(&format!("http://{}/mcp", proxy.addr()), mode);
        assert_eq!(got["protocolVersion"], "2025-11-25", "{mode}: {got}");
        assert_eq!(got["progress"], 4, "{mode}: {got}");
        if mode != "streamable" {
            assert!(got["resumes"].as_u64() >= Some(1), "{mode}: {got}");
        }
        assert!(
            proxy.connections() >= 6,
            "{mode}: every request on a new connection ({} in all)",
            proxy.connections()
        );
    }
}

/// `mcpwire call` at 2025-11-25 across three nodes, every request on the next one, its
/// stream closed after each priming event (RESUME-9): the handshake, then `slow_count`
/// with every progress step once and its result, each resume on another node; with
/// both clients.
#[test]
fn session_7_resume_9_mcpwire_call_across_three_nodes() {
    let redis = RedisServer::start();
    let nodes = nodes(&redis, 3, &["--poll-ms", "0", "--retry-ms", "20"]);
    let proxy = proxy(&nodes);
    let url = format!("http://{}/mcp", proxy.addr());
    for client in [&[][..], &["--blocking"][..]] {
        let options = [&["--revision", "2025-11-25"][..], client].concat();
        let called = mcpwire_call_with(
            &options,
            &url,
            "slow_count",
            &json!({"n": 3, "delay_ms": 50}),
        );
        assert!(
            called.connected.contains("2025-11-25"),
            "{client:?}: {}",
            called.connected
        );
        assert_eq!(called.result, text_result("3"), "{client:?}");
        // `mcpwire serve` counts in floats.
        let steps: Vec<Value> = (1..=3)
            .map(|i| json!({"progress": f64::from(i), "total": 3.0}))
            .collect();
        assert_eq!(called.progress, steps, "{client:?}");
    }
}

/// Redis unreachable at start-up: `mcpwire serve --store` says so and exits non-zero,
/// before it listens.
#[test]
fn session_7_serve_with_an_unreachable_store_exits_with_a_clear_error() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("redis://127.0.0.1:{port}");
    let mut child = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--store", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpwire runs");
    let until = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("waitable") {
            break status;
        }
        assert!(
            Instant::now() < until,
            "serve kept running without its store"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("piped"), &mut stderr)
        .expect("readable");
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("--store"), "{stderr}");
    assert!(stderr.contains(&url), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
}

/// MODERN-13 across nodes: the TypeScript SDK v2 client (2026-07-28) opens a
/// `subscriptions/listen` stream on one node and calls `test_trigger_tool_change` of
/// `serve --conformance` on the next; the change announced there reaches the listen
/// on the first (the script checks the notification and its subscription id).
#[test]
fn modern_13_the_ts_v2_client_hears_on_one_node_a_change_made_on_another() {
    let redis = RedisServer::start();
    let nodes = nodes(&redis, 3, &["--conformance"]);
    let proxy = proxy(&nodes);
    let url = format!("http://{}/mcp", proxy.addr());
    let out = run_bounded(
        Command::new("node")
            .args(["ts-client-v2.mjs", "listen", &url])
            .current_dir(sdk()),
        RUN,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().last() == Some("ok"),
        "the TS v2 client's listen across the nodes failed ({}):\n{}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        proxy.connections() >= 3,
        "the listen and the trigger on different nodes ({} connections)",
        proxy.connections()
    );
}
