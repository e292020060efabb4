//! Several `mcpwire serve --store redis://…` nodes behind a round-robin TCP proxy: every
//! connection goes to the next node, and with `--no-keep-alive` every request is a new
//! connection, so every request and every reconnect of a session lands on another node.
//! A real `redis-server` of the test's own (`mcpwire_tests::redis_server`, installed from
//! Debian's packages when missing) is shared by the nodes.
//!
//! The clients: the TypeScript SDK 1.32's Streamable HTTP client (`tests/interop/
//! ts-client.mjs`: initialize, tools, `slow_count` with progress, a resume after each
//! SEP-1699 polling close, DELETE and 404 after it), the v2 client at 2026-07-28, `mcpwire
//! call`, and raw requests for a multi round-trip retry on another node and for Redis
//! stopped and started again under the nodes. Every process is killed when its test
//! ends, every wait is bounded, everything is on 127.0.0.1.

mod common;
#[path = "common/npm.rs"]
mod npm;
#[path = "common/ts.rs"]
#[allow(dead_code)] // `mcpwire call` alone of what it shares: no TS server here.
mod ts;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
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

/// LEGACY-3, LEGACY-4 across three nodes: the SDK's HTTP+SSE client (2024-11-05) holds
/// its stream on one node and POSTs each message on the next; every POST is 202 where
/// it lands, the node that holds the stream handles it, and every answer (initialize,
/// tools/list, echo, `slow_count` with its progress) arrives on the stream. The nodes
/// answer over one connection each (no keep-alive), so no POST lands where the stream is
/// held but by turn.
#[test]
fn legacy_3_legacy_4_the_ts_sse_client_across_three_nodes() {
    let redis = RedisServer::start();
    let nodes = nodes(&redis, 3, &[]);
    let proxy = proxy(&nodes);
    let got = ts_client(&format!("http://{}/sse", proxy.addr()), "legacy");
    // The script checks the five POSTs were 202 and the one stream 200.
    assert_eq!(got["mode"], "legacy", "{got}");
    assert_eq!(got["exchanges"], 6, "{got}");
    assert!(got["progress"].as_u64() >= Some(3), "{got}");
    assert_eq!(got["wireProgress"], 4, "{got}");
    assert!(
        proxy.connections() >= 6,
        "the stream and five POSTs, each on a new connection ({} in all)",
        proxy.connections()
    );
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

/// One request over HTTP/1.0 (the connection ends with the response), with the JSON
/// body `body` and the extra `headers`: its status and the JSON-RPC messages of its
/// body (the body itself, or each SSE event's data).
fn post(addr: &str, headers: &[(&str, &str)], body: &Value) -> (u16, Vec<Value>) {
    let body = body.to_string();
    let mut head = format!(
        "POST /mcp HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let mut stream = TcpStream::connect(addr).expect("the node accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    stream
        .write_all(format!("{head}\r\n{body}").as_bytes())
        .expect("the request is sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("the response, within 10 s");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("a head and a body: {response:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"));
    let session = head.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .strip_prefix("mcp-session-id: ")
            .map(str::to_owned)
    });
    let messages = if head.to_ascii_lowercase().contains("text/event-stream") {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter(|data| !data.trim().is_empty())
            .map(|data| serde_json::from_str(data.trim()).expect("an event's data is JSON"))
            .collect()
    } else if body.is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(body).unwrap_or_else(|e| panic!("a JSON body ({e}): {body}"))]
    };
    // The session id, for the caller that initialized, as a last message.
    let mut messages = messages;
    if let Some(session) = session {
        messages.push(json!({"session": session.trim()}));
    }
    (status, messages)
}

/// A 2026-07-28 `tools/call` of `name` (its `_meta`, its headers), with the id `id`
/// and the extra params `more`; the status and the response.
fn modern_call(addr: &str, id: u64, name: &str, more: &Value) -> (u16, Value) {
    let mut params = json!({
        "name": name,
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        },
    });
    for (key, value) in more.as_object().into_iter().flatten() {
        params[key] = value.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", name),
    ];
    let (status, messages) = post(addr, &headers, &body);
    let response = messages
        .into_iter()
        .find(|m| m["id"] == id)
        .unwrap_or(Value::Null);
    (status, response)
}

/// MODERN-23 across nodes: a `requestState` sealed by one node opens on another, since
/// every node of a cluster seals with the key stored in Redis (`{p}:state-key`). Redis
/// then restarts without its data, and a node started after it still shares the key:
/// the running nodes write it back.
#[test]
fn modern_23_a_request_state_sealed_on_one_node_opens_on_any_other() {
    const TOOL: &str = "test_input_required_result_request_state";
    let confirmed = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let mut redis = RedisServer::start();
    let nodes = nodes(&redis, 2, &["--conformance"]);
    let (first, second) = (&nodes[0].addr, &nodes[1].addr);
    let (status, asked) = modern_call(first, 1, TOOL, &json!({}));
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].clone();
    assert!(state.is_string(), "a sealed state: {asked}");
    let retry = json!({"inputResponses": confirmed, "requestState": state});
    let (status, done) = modern_call(second, 2, TOOL, &retry);
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "state-ok: the state came back as it was handed out",
        "the retry on the other node: {done}"
    );
    // A tampered state is still refused there.
    let mut tampered = state.as_str().expect("a string").to_owned();
    tampered.insert(0, 'x');
    let (_, refused) = modern_call(
        second,
        3,
        TOOL,
        &json!({"inputResponses": confirmed, "requestState": tampered}),
    );
    assert!(refused["error"].is_object(), "{refused}");

    // Redis restarts empty; the nodes put the key back at once.
    redis.restart();
    let until = Instant::now() + Duration::from_secs(10);
    while redis.command(&["EXISTS", "mcpwire:state-key"]) != "1" {
        assert!(Instant::now() < until, "the nodes never wrote the key back");
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = redis.url();
    let third = start(&["--store", &url, "--node-id", "3", "--conformance"]);
    let (status, done) = modern_call(&third.addr, 4, TOOL, &retry);
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "state-ok: the state came back as it was handed out",
        "the retry on a node started after Redis lost its data: {done}"
    );
}

/// Redis stopped under running `mcpwire serve` nodes, then started again: a request that
/// needs it (a session the node does not hold) is answered 503 with a JSON-RPC error at
/// once; a session the node holds, and 2026-07-28 requests, go on; each node says in its
/// log that the store is unavailable and then available again; once Redis is back a new
/// session minted on one node is served by the other, with nothing restarted.
#[test]
fn session_7_redis_stopped_under_serve_nodes_is_503_then_service_resumes() {
    let mut redis = RedisServer::start();
    let nodes = nodes(&redis, 2, &["--json-response"]);
    let (first, second) = (&nodes[0].addr, &nodes[1].addr);
    let session = |addr: &str| {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "cluster-test", "version": "1"}}});
        let (status, messages) = post(addr, &[], &init);
        assert_eq!(status, 200, "{messages:?}");
        let sid = messages
            .iter()
            .find_map(|m| m["session"].as_str())
            .expect("a session id")
            .to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _) = post(addr, &session_headers(&sid), &initialized);
        assert_eq!(status, 202);
        sid
    };
    let echo = |addr: &str, sid: &str, id: u64| {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}}});
        let (status, messages) = post(addr, &session_headers(sid), &call);
        (status, messages.into_iter().next().unwrap_or(Value::Null))
    };
    let held = session(first);
    let (status, _) = echo(first, &held, 1);
    assert_eq!(status, 200);

    redis.stop();
    // The second node never held the session and cannot load it: 503, at once.
    let t = Instant::now();
    let (status, refused) = echo(second, &held, 2);
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "503 took {:?}",
        t.elapsed()
    );
    assert!(
        nodes[1].logs_within("store: unavailable", Duration::from_secs(10)),
        "the node says the store is lost"
    );
    // What needs no store goes on: the session the first node holds, and 2026-07-28.
    let (status, answer) = echo(first, &held, 3);
    assert_eq!(
        (status, &answer["result"]["content"][0]["text"]),
        (200, &json!("hi"))
    );
    let (status, answer) = modern_call(second, 4, "echo", &json!({"arguments": {"text": "hi"}}));
    assert_eq!(
        (status, &answer["result"]["content"][0]["text"]),
        (200, &json!("hi")),
        "{answer}"
    );

    redis.restart();
    for node in &nodes {
        assert!(
            node.logs_within("store: available again", Duration::from_secs(15)),
            "{}: the node says the store is back",
            node.addr
        );
    }
    let fresh = session(first);
    let (status, answer) = echo(second, &fresh, 5);
    assert_eq!(
        status, 200,
        "a session minted after the outage, on the other node: {answer}"
    );
    assert_eq!(answer["result"]["content"][0]["text"], "hi");
}

/// The headers of a request in session `sid` at 2025-11-25.
fn session_headers(sid: &str) -> [(&'static str, &str); 2] {
    [
        ("Mcp-Session-Id", sid),
        ("MCP-Protocol-Version", "2025-11-25"),
    ]
}
