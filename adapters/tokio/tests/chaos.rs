//! Chaos over real sockets: many `McpClient`s call `McpService` through a TCP proxy that
//! cuts connections at random points, in either direction, while the server closes
//! streams early (SEP-1699 polling). Every call must end with its one result, or a clear
//! error when a cut left nothing to resume from (then it is called again, as an
//! application would); no call's result is reported for another, no progress twice; and
//! the server's state returns to its baseline once the clients are gone.
//!
//! Scale: `MCPWIRE_CHAOS_CLIENTS` × `MCPWIRE_CHAOS_CALLS` (default 50 × 200). Bounded in
//! time: the whole run must finish within two minutes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpwire::client::{self, RequestError};
use mcpwire::server::{Config, ResponseMode};
use mcpwire_tests::cutting_proxy::{self, Cuts};
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::app::{self, Tools, text_result};
use mcpwire_tokio::client::{CallError, McpClient, ServerMessage};
use mcpwire_tokio::server::serve;
use serde_json::{Value, json};
use tokio::net::TcpListener;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_every_call_gets_exactly_its_one_result() {
    let clients = env("MCPWIRE_CHAOS_CLIENTS", 50);
    let calls = env("MCPWIRE_CHAOS_CALLS", 200);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    let config = Config::new()
        .with_response_mode(ResponseMode::Sse)
        .with_polling(Some(Duration::from_millis(3)))
        .with_retry(Some(Duration::from_millis(5)))
        .with_max_sessions(clients * 4)
        // Short, so that what cut DELETEs leave behind is gone soon after the run.
        .with_session_idle(Duration::from_secs(1))
        .with_linger(Duration::from_secs(2));
    let tools = Tools::new().with_tool(
        "count",
        "",
        json!({"type": "object"}),
        |call, a: Value| async move {
            let n = a["n"].as_u64().unwrap_or(0);
            for i in 1..=n {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _ = call.progress(i as f64, None);
            }
            Ok(text_result(a["tag"].as_str().unwrap_or("")))
        },
    );
    // Mounted in place and sharded, as `mcpwire serve` runs it.
    let service = app::mount_sharded(4, config, counter_entropy(11), Arc::new(tools));
    tokio::spawn(serve(listener, service.clone()));
    let cuts = Arc::new(AtomicU64::new(0));
    // The client pools its connections, so one connection carries many exchanges: a
    // wide window spreads the cuts over all of them.
    let cutting = Cuts {
        one_in: 1,
        window: 8_192,
    };
    let addr = cutting_proxy::start(upstream, cutting, Arc::clone(&cuts)).await;
    let uri: http::Uri = format!("http://{addr}/mcp").parse().unwrap();

    let retried = Arc::new(AtomicU64::new(0));
    let run = async {
        let mut tasks = Vec::new();
        for c in 0..clients {
            let uri = uri.clone();
            let retried = Arc::clone(&retried);
            tasks.push(tokio::spawn(async move {
                let mut made = 0;
                while made < calls {
                    // A handshake cut by the proxy fails clearly; connect again.
                    let config = client::Config::new(uri.clone())
                        .with_revision(client::Revision::Era(mcpwire::Era::Sessions))
                        .with_get_stream(false)
                        .with_backoff(Duration::from_millis(5), Duration::from_millis(50), 20);
                    let Ok((client, mut messages)) = McpClient::connect(config, counter_entropy(100 + c as u64)).await else {
                        retried.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    while made < calls {
                        let tag = format!("c{c}-{made}");
                        // Every other call is answered at the handler's first poll, in
                        // place; the rest wait, in tasks of their own.
                        let n = if made % 2 == 0 { 0 } else { 3 };
                        let params = json!({"name": "count", "arguments": {"n": n, "tag": tag}, "_meta": {"progressToken": tag}});
                        match client.call("tools/call", Some(params)).await {
                            Ok(result) => {
                                assert_eq!(result["content"][0]["text"], tag, "a result for another call");
                                made += 1;
                            }
                            // Cut before any id reached the client: nothing to resume.
                            Err(CallError::Request(RequestError::StreamLost | RequestError::ResumeFailed { status: 0, .. })) => {
                                retried.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(CallError::Request(RequestError::SessionExpired) | CallError::Closed) => {
                                retried.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                            Err(e) => panic!("call {tag}: {e}"),
                        }
                        // Progress of this client's calls: per token, never repeated.
                        let mut seen = std::collections::BTreeSet::new();
                        while let Ok(ServerMessage::Notification(n)) = messages.try_recv() {
                            let v: Value = serde_json::from_str(n.text().as_str()).unwrap();
                            let key = (v["params"]["progressToken"].to_string(), v["params"]["progress"].to_string());
                            assert!(seen.insert(key.clone()), "progress {key:?} delivered twice");
                        }
                    }
                    client.close().await;
                }
                made
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.expect("a client task");
        }
        total
    };
    let total = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the chaos run finished in time");
    assert_eq!(total, clients * calls);
    eprintln!(
        "chaos: {total} calls, {} connections cut, {} calls or handshakes repeated after a cut left no id",
        cuts.load(Ordering::Relaxed),
        retried.load(Ordering::Relaxed)
    );
    // Back to baseline: every session is deleted or expires (a cut DELETE leaves its
    // session to the idle timeout), every exchange ends, every ring goes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (idle, exchanges, sessions) = service
            .shards()
            .map(|shard| {
                shard.with_server(|s, _| (s.is_idle(), s.exchange_count(), s.session_count()))
            })
            .fold((true, 0, 0), |(i, x, s), (si, sx, ss)| {
                (i && si, x + sx, s + ss)
            });
        if idle {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "server state left: {exchanges} exchanges, {sessions} sessions"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
