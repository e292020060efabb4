//! The sans-IO server's cost per call: one `tools/call` POST through the core alone (no
//! sockets, no HTTP parser), on an initialized 2025-11-25 session.
//!
//! - `server_roundtrip/json`: `ResponseMode::Json`. The head, the body in one chunk, its
//!   end, the `Request` event, `respond`, and the transmits (head, JSON body, end).
//! - `server_roundtrip/sse`: `ResponseMode::Sse`. The same call answered on an SSE
//!   stream opened at once: its head, the priming event (id, empty data, `retry`), the
//!   response event, end. The stream is resumable, so its frames go to a replay ring.
//! - `server_roundtrip/modern_json` and `modern_sse`: the same call at revision
//!   2026-07-28, with no session: the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
//!   headers and the body's `_meta` checked against each other (MODERN-4, MODERN-6,
//!   MODERN-20), the request dispatched with no session and answered as JSON or on a
//!   stream of its own without event ids (nothing to replay).
//!
//! Each iteration is one call (`Throughput::Elements(1)`: criterion prints calls/s). The
//! virtual clock moves 61 s before each call and `handle_timeout` runs, as a driver's
//! would: that expires the previous call's lingering stream (60 s) and its stale
//! heartbeat timer, so the server's state stays that of one session and the cost of
//! cleaning up after a call is counted with the call. The request head is cloned outside
//! the timing (an HTTP parser builds it). The allocator counts allocations
//! (`mcpwire_tests::alloc::Counting`, a thread-local add per allocation); before timing,
//! the allocations per call of each mode are printed, over 1,000 calls.
//!
//! Run: `cargo bench -p mcpwire-benches --bench server_roundtrip`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{Config, ResponseMode, Server};
use mcpwire_tests::alloc::{Counting, Meter};
use mcpwire_tests::server::{call_core, counter_entropy, initialize_core, post_head};

#[global_allocator]
static GLOBAL: Counting = Counting;

const V3: &str = "2025-11-25";
const CALL: &str =
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#;
const RESULT: &str = r#"{"content":[{"type":"text","text":"hi"}]}"#;
const MODERN_CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}"#;

/// Which call a row makes.
#[derive(Clone, Copy)]
enum Era {
    /// On an initialized 2025-11-25 session.
    Sessions,
    /// At revision 2026-07-28, sessionless.
    Modern,
}
/// More than the default linger (60 s), less than the idle timeout (30 min).
const STEP: Duration = Duration::from_secs(61);

/// A server in `mode` with, for the session era, one initialized session, and the head
/// of a call.
fn setup(era: Era, mode: ResponseMode) -> (Server, Instant, http::request::Parts) {
    let now = Instant::now();
    let mut server = Server::new(Config::new().with_response_mode(mode), counter_entropy(1));
    let head = match era {
        Era::Sessions => {
            let id = initialize_core(&mut server, now, V3);
            post_head(&[("mcp-session-id", &id), ("mcp-protocol-version", V3)])
        }
        Era::Modern => post_head(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ]),
    };
    (server, now, head)
}

/// One call, after the clock's step; returns the body bytes written.
fn call(era: Era, server: &mut Server, now: &mut Instant, head: http::request::Parts) -> usize {
    *now += STEP;
    server.handle_timeout(*now);
    let result = RawJson::new(RESULT).expect("valid JSON");
    let body = match era {
        Era::Sessions => CALL,
        Era::Modern => MODERN_CALL,
    };
    call_core(
        server,
        *now,
        head,
        Bytes::from_static(body.as_bytes()),
        &result,
    )
    .body_len
}

/// Allocations per call over 1,000 calls, after 10 to reach the steady state.
fn allocations_per_call(era: Era, mode: ResponseMode) -> f64 {
    const CALLS: usize = 1_000;
    let (mut server, mut now, head) = setup(era, mode);
    for _ in 0..10 {
        call(era, &mut server, &mut now, head.clone());
    }
    let heads = vec![head; CALLS];
    let meter = Meter::start();
    for head in heads {
        black_box(call(era, &mut server, &mut now, head));
    }
    meter.allocations() as f64 / CALLS as f64
}

/// The rows: name, era, response mode.
const ROWS: [(&str, Era, ResponseMode); 4] = [
    ("json", Era::Sessions, ResponseMode::Json),
    ("sse", Era::Sessions, ResponseMode::Sse),
    ("modern_json", Era::Modern, ResponseMode::Json),
    ("modern_sse", Era::Modern, ResponseMode::Sse),
];

fn server_roundtrip(c: &mut Criterion) {
    for (name, era, mode) in ROWS {
        println!(
            "server_roundtrip/{name}: {:.2} allocations per call",
            allocations_per_call(era, mode)
        );
    }
    let mut group = c.benchmark_group("server_roundtrip");
    group.throughput(Throughput::Elements(1));
    for (name, era, mode) in ROWS {
        let (mut server, mut now, head) = setup(era, mode);
        group.bench_function(name, |b| {
            b.iter_batched(
                || head.clone(),
                |head| call(era, &mut server, &mut now, head),
                BatchSize::SmallInput,
            );
        });
        let sessions = match era {
            Era::Sessions => 1,
            Era::Modern => 0,
        };
        assert_eq!(server.session_count(), sessions);
    }
    group.finish();
}

criterion_group!(benches, server_roundtrip);
criterion_main!(benches);
