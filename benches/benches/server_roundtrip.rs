//! The sans-IO server's cost per call: one `tools/call` POST through the core alone (no
//! sockets, no HTTP parser), on an initialized 2025-11-25 session.
//!
//! - `server_roundtrip/json`: `ResponseMode::Json`. The head, the body in one chunk, its
//!   end, the `Request` event, `respond`, and the transmits (head, JSON body, end).
//! - `server_roundtrip/sse`: `ResponseMode::Sse`. The same call answered on an SSE
//!   stream opened at once: its head, the priming event (id, empty data, `retry`), the
//!   response event, end. The stream is resumable, so its frames go to a replay ring.
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
/// More than the default linger (60 s), less than the idle timeout (30 min).
const STEP: Duration = Duration::from_secs(61);

/// A server in `mode` with one initialized session, and the head of a call on it.
fn setup(mode: ResponseMode) -> (Server, Instant, http::request::Parts) {
    let now = Instant::now();
    let mut server = Server::new(Config::new().with_response_mode(mode), counter_entropy(1));
    let id = initialize_core(&mut server, now, V3);
    let head = post_head(&[("mcp-session-id", &id), ("mcp-protocol-version", V3)]);
    (server, now, head)
}

/// One call, after the clock's step; returns the body bytes written.
fn call(server: &mut Server, now: &mut Instant, head: http::request::Parts) -> usize {
    *now += STEP;
    server.handle_timeout(*now);
    let result = RawJson::new(RESULT).expect("valid JSON");
    call_core(
        server,
        *now,
        head,
        Bytes::from_static(CALL.as_bytes()),
        &result,
    )
    .body_len
}

/// Allocations per call over 1,000 calls, after 10 to reach the steady state.
fn allocations_per_call(mode: ResponseMode) -> f64 {
    const CALLS: usize = 1_000;
    let (mut server, mut now, head) = setup(mode);
    for _ in 0..10 {
        call(&mut server, &mut now, head.clone());
    }
    let heads = vec![head; CALLS];
    let meter = Meter::start();
    for head in heads {
        black_box(call(&mut server, &mut now, head));
    }
    meter.allocations() as f64 / CALLS as f64
}

fn server_roundtrip(c: &mut Criterion) {
    for (name, mode) in [("json", ResponseMode::Json), ("sse", ResponseMode::Sse)] {
        println!(
            "server_roundtrip/{name}: {:.2} allocations per call",
            allocations_per_call(mode)
        );
    }
    let mut group = c.benchmark_group("server_roundtrip");
    group.throughput(Throughput::Elements(1));
    for (name, mode) in [("json", ResponseMode::Json), ("sse", ResponseMode::Sse)] {
        let (mut server, mut now, head) = setup(mode);
        group.bench_function(name, |b| {
            b.iter_batched(
                || head.clone(),
                |head| call(&mut server, &mut now, head),
                BatchSize::SmallInput,
            );
        });
        assert_eq!(server.session_count(), 1);
    }
    group.finish();
}

criterion_group!(benches, server_roundtrip);
criterion_main!(benches);
