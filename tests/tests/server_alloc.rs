//! Heap use of the sans-IO server, measured with a counting global allocator (this test
//! binary only), through the core alone: no driver, no sockets. Request heads are built
//! before each measurement (a driver's HTTP parser builds them) and every transmit is
//! dropped as it is taken (a driver writes it and lets it go).
//!
//! - A JSON-mode `tools/call` round trip on an initialized session makes exactly
//!   [`ROUND_TRIP_ALLOCATIONS`] allocations, each accounted for below.
//! - An idle initialized session costs at most 1 KiB of live heap, over 10,000 of them;
//!   once they expire (SESSION-7) the live heap is back where it was.
//!
//! Counters are per thread, so the test harness running tests in parallel does not mix
//! their counts.

use std::time::{Duration, Instant};

use bytes::Bytes;
use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{Config, Event, ResponseMode, Server};
use mcpwire_tests::alloc::{Counting, Meter};
use mcpwire_tests::server::{call_core, counter_entropy, initialize_core, post_head};

#[global_allocator]
static GLOBAL: Counting = Counting;

const V3: &str = "2025-11-25";
const CALL: &str =
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#;
const RESULT: &str = r#"{"content":[{"type":"text","text":"hi"}]}"#;

/// The allocations of one JSON-mode `tools/call` round trip in the steady state:
///
/// `handle_head` and `handle_body` make none (the exchange's queues and buffers start
/// empty; the first body chunk is kept as the `Bytes` it came in). `handle_body_end`:
///
/// 1. `open_request`: the exchange's `Vec` of the requests its body opened (the body's
///    one message is dispatched without collecting it).
///
/// `poll_event` makes none. `respond`:
///
/// 2. The JSON response is written into a `BytesMut` sized once from the message's
///    length hint (`Outgoing::len_hint`, the raw result's length plus the envelope).
/// 3. Freezing it: `Bytes::from(Vec)` with spare capacity allocates its shared header.
/// 4. The exchange's `Vec` of collected JSON texts.
/// 5. and 6. The response head's `HeaderMap`: its index table and its entries.
/// 7. `Content-Length`: the digits, formatted on the stack, copied into the value.
/// 8. The exchange's transmit queue (`VecDeque`), on its first push.
///
/// `Mcp-Session-Id` costs none: the session keeps its value, and a clone shares it; the
/// header name is a static one. `poll_ready` and `poll_transmit` make none; taking
/// `End` frees the exchange. This test pins the count so any change to it is deliberate.
const ROUND_TRIP_ALLOCATIONS: usize = 8;

/// The most live heap one idle initialized session may hold (the issue's bound).
const IDLE_SESSION_MAX_BYTES: isize = 1024;

fn json_round_trip_allocations(mode: ResponseMode) {
    let now = Instant::now();
    let mut server = Server::new(Config::new().with_response_mode(mode), counter_entropy(1));
    let id = initialize_core(&mut server, now, V3);
    let call_head = post_head(&[("mcp-session-id", &id), ("mcp-protocol-version", V3)]);
    let result = RawJson::new(RESULT).unwrap();
    let call = || Bytes::from_static(CALL.as_bytes());
    // Warm up: the server's maps, ready queue and event queue reach their steady size.
    for _ in 0..2 {
        call_core(&mut server, now, call_head.clone(), call(), &result);
    }
    for round in 0..100 {
        let before_head = Meter::start();
        let head = call_head.clone();
        let meter = Meter::start();
        call_core(&mut server, now, head, call(), &result);
        assert!(server.poll_event().is_none());
        assert_eq!(
            meter.allocations(),
            ROUND_TRIP_ALLOCATIONS,
            "allocations of round trip {round} ({mode:?})"
        );
        // The server drops the head it was handed, and keeps nothing of the call.
        assert_eq!(
            before_head.live_growth(),
            0,
            "round trip {round} keeps nothing"
        );
    }
    assert_eq!(server.exchange_count(), 0);
}

#[test]
fn a_json_mode_tools_call_round_trip_allocates_exactly_8_times() {
    json_round_trip_allocations(ResponseMode::Json);
}

#[test]
fn an_auto_mode_call_answered_at_once_allocates_as_json_mode() {
    json_round_trip_allocations(ResponseMode::Auto);
}

/// Opens `n` idle initialized sessions, then expires them; returns the live heap growth
/// with all of them idle and after they expired.
fn sessions_then_expiry(server: &mut Server, now: &mut Instant, n: usize) -> (isize, isize) {
    let meter = Meter::start();
    for _ in 0..n {
        drop(initialize_core(server, *now, V3));
    }
    assert_eq!(server.session_count(), n);
    let idle = meter.live_growth();
    *now += Duration::from_secs(30 * 60 + 1);
    server.handle_timeout(*now);
    let mut expired = 0;
    while let Some(event) = server.poll_event() {
        assert!(matches!(event, Event::SessionClosed { .. }), "{event:?}");
        expired += 1;
    }
    assert_eq!(expired, n);
    assert!(server.is_idle(), "{server:?}");
    (idle, meter.live_growth())
}

/// SESSION-7: 10,000 idle sessions hold at most 1 KiB each; once they expire, the live
/// heap is back at the baseline.
///
/// The baseline is taken after one session came and went: the first insert into each of
/// the server's maps allocates its root node and each queue its first capacity, which an
/// emptied map or queue keeps (so every later round starts from them). The only slack is
/// the event queue: it takes the 10,000 `SessionClosed` events of the expiry at once and,
/// drained, keeps capacity for 64 (`EVENTS_KEPT`, core/src/server/mod.rs), so at most 64
/// events' worth stays after the first burst. A second burst then returns to it exactly.
#[test]
fn session_7_idle_sessions_cost_under_1_kib_each_and_expiry_returns_the_heap() {
    const N: usize = 10_000;
    let mut now = Instant::now();
    let mut server = Server::new(Config::new(), counter_entropy(7));
    sessions_then_expiry(&mut server, &mut now, 1);
    let (idle, left) = sessions_then_expiry(&mut server, &mut now, N);
    let (idle_again, left_again) = sessions_then_expiry(&mut server, &mut now, N);
    let per_session = idle / N as isize;
    println!(
        "{N} idle sessions: {idle} bytes, {per_session} per session; {left} bytes left after \
         they expired; again: {idle_again} bytes, {left_again} left"
    );
    assert!(
        per_session <= IDLE_SESSION_MAX_BYTES,
        "{per_session} bytes per idle session"
    );
    assert!(idle_again / N as isize <= IDLE_SESSION_MAX_BYTES);
    let kept_events = 64 * std::mem::size_of::<Event>() as isize;
    assert!(
        (0..=kept_events).contains(&left),
        "{left} bytes left after expiry (at most the event queue's kept capacity, {kept_events})"
    );
    assert_eq!(left_again, 0, "the heap returns to the baseline exactly");
}
