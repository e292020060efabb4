//! The deterministic simulation (issue 13): client and server cores over a faulty
//! network, the properties of `mcpwire_tests::sim` checked on every seed.
//!
//! - `cargo test -p mcpwire-tests --test simulation`: seeds 0..1000, every fault on; each
//!   seed draws a session-era, dual-era or 2026-07-28-only server and, per client, the
//!   session era, `Revision::Auto` or 2026-07-28 exactly.
//! - `MCPWIRE_SIM_SEED=<n>`: that seed alone (add `MCPWIRE_SIM_TRACE=1` for every step).
//! - `MCPWIRE_SIM_SEEDS=<n>` and `-- --ignored`: the long sweep, seeds 0..n (100,000 by
//!   default); run it in release.

use mcpwire_tests::sim::{self, Faults, Stats};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs `seeds`, every fault on; panics with every failing seed's report.
fn sweep(seeds: std::ops::Range<u64>) -> Stats {
    let trace = std::env::var_os("MCPWIRE_SIM_TRACE").is_some();
    let mut total = Stats::default();
    let mut failures = Vec::new();
    for seed in seeds {
        let report = sim::run(seed, Faults::ALL, trace);
        total.add(&report.stats);
        if trace {
            for line in &report.trace {
                println!("{line}");
            }
        }
        if let Err(text) = report.check() {
            eprintln!("{text}");
            failures.push(seed);
            if failures.len() >= 10 {
                break;
            }
        }
    }
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
    total
}

#[test]
fn simulation_seeds_0_to_1000_every_fault_on() {
    let seeds = match env_u64("MCPWIRE_SIM_SEED") {
        Some(seed) => seed..seed + 1,
        None => 0..1000,
    };
    let whole = seeds.end - seeds.start > 1;
    let stats = sweep(seeds);
    println!("{stats:?}");
    if whole {
        // Half-open cuts leave the server a connection its client gave up: the sweep
        // must reach the resumes that take such streams over (RESUME-14).
        assert!(stats.superseded > 0, "{stats:?}");
        // Both eras, with the session era's share substantial; at 2026-07-28 the probe,
        // broken exchanges of both kinds, answers with an error, and cancellations the
        // server learns of by the close (MODERN-11).
        assert!(
            stats.session_clients > stats.modern_clients / 2,
            "{stats:?}"
        );
        assert!(
            stats.modern_clients > stats.session_clients / 2,
            "{stats:?}"
        );
        assert!(stats.probes > 0 && stats.error_responses > 0, "{stats:?}");
        assert!(
            stats.broken_server > 0 && stats.broken_unknown > 0,
            "{stats:?}"
        );
        assert!(
            stats.modern_cancelled > 0 && stats.modern_server_cancels > 0,
            "{stats:?}"
        );
    }
}

/// A seed replays exactly: the same trace, step for step, and the same counts.
#[test]
fn simulation_a_seed_replays_exactly() {
    for seed in [7, 42, 399] {
        let a = sim::run(seed, Faults::ALL, true);
        let b = sim::run(seed, Faults::ALL, true);
        assert!(a.trace.len() > 50, "seed {seed}: a trace");
        assert_eq!(a.trace, b.trace, "seed {seed}");
        assert_eq!(a.stats, b.stats, "seed {seed}");
    }
}

/// With only what loses nothing (delays, chunk splits, polling closes, heartbeats,
/// cancellations), nothing may be lost, whatever the fault-touch rule would excuse: every
/// request is answered, times out, was cancelled, or its client was closed by the
/// application.
#[test]
fn simulation_benign_faults_lose_nothing() {
    let benign = Faults {
        delays: true,
        chunks: true,
        polling: true,
        heartbeats: true,
        cancels: true,
        ..Faults::NONE
    };
    let mut total = Stats::default();
    for seed in 0..300 {
        let report = sim::run(seed, benign, false);
        if let Err(text) = report.check() {
            panic!("{text}");
        }
        total.add(&report.stats);
    }
    let lost = (
        total.stream_lost,
        total.resume_failed,
        total.session_expired,
        total.closed,
        total.idless_losses,
        total.broken_server + total.broken_unknown,
    );
    assert_eq!(lost, (0, 0, 0, 0, 0, 0), "{total:?}");
    assert!(total.modern_responses > 0, "{total:?}");
    assert_eq!(
        total.responses + total.timeouts + total.cancelled + total.closed_by_app,
        total.requests,
        "{total:?}"
    );
    assert!(total.responses > total.requests * 9 / 10, "{total:?}");
}

#[test]
#[ignore = "the long sweep: run in release, MCPWIRE_SIM_SEEDS to size it"]
fn simulation_long_sweep() {
    let n = env_u64("MCPWIRE_SIM_SEEDS").unwrap_or(100_000);
    let start = std::time::Instant::now();
    let stats = sweep(0..n);
    println!("{n} seeds in {:?}: {stats:?}", start.elapsed());
}

// ---------------------------------------------------------------------------------------
// Hand-written reproductions of what the simulation found.

use std::time::Duration;

use mcpwire::client::{self, RequestError};
use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{self, ResponseMode};
use mcpwire_tests::pair::Pair;

fn responses_and_failures(p: &mut Pair) -> (usize, Vec<RequestError>) {
    let mut responses = 0;
    let mut failures = Vec::new();
    for e in p.client_events.drain(..) {
        match e {
            client::Event::Response(_) => responses += 1,
            client::Event::Failed { error, .. } => failures.push(error),
            _ => {}
        }
    }
    (responses, failures)
}

/// Seed 42: under SEP-1699 polling a resume that finds nothing new is closed at once; the
/// stream must keep its last event id for the next resume (SSE-PARSE-14: the last event
/// id belongs to the stream, not to one connection), not fail with `StreamLost`.
#[test]
fn resume_4_an_empty_resumed_connection_keeps_the_streams_last_event_id() {
    let server = server::Config::new()
        .with_response_mode(ResponseMode::Sse)
        .with_polling(Some(Duration::ZERO))
        .with_retry(Some(Duration::from_millis(500)));
    let client = client::Config::new(Pair::endpoint())
        .with_revision(client::Revision::Era(mcpwire::Era::Sessions))
        .with_get_stream(false);
    let mut p = Pair::new(server, client);
    p.connect();
    let params = RawJson::new(r#"{"name":"work"}"#).unwrap();
    p.client
        .request(p.now, "tools/call", Some(&params), None)
        .unwrap();
    p.run();
    let request = p.take_server_request();
    // Polled: closed after the priming event; then every resume is up to date, and
    // closed at once again.
    for _ in 0..40 {
        p.advance(Duration::from_millis(100));
    }
    let gets: Vec<bool> = p
        .requests
        .iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.headers.contains_key("last-event-id"))
        .collect();
    assert!(gets.len() >= 3, "{gets:?}");
    assert!(
        gets.iter().all(|&resume| resume),
        "every GET resumes: {gets:?}"
    );
    let result = RawJson::new(r#"{"content":[]}"#).unwrap();
    p.server.respond(p.now, request.handle(), &result).unwrap();
    for _ in 0..20 {
        p.advance(Duration::from_millis(100));
    }
    assert_eq!(responses_and_failures(&mut p), (1, vec![]));
}

/// Seed 308: with `max_unsent` below one frame, the first progress notification (which
/// opens the stream, after the priming event, in one call) ended the connection at once,
/// the priming event thrown away with it: the client saw no id and lost the request. A
/// reader that keeps up is never ended, however large a frame.
#[test]
fn resume_5_a_reader_that_keeps_up_is_not_ended_for_a_frame_larger_than_max_unsent() {
    let server = server::Config::new().with_max_unsent(100);
    let client = client::Config::new(Pair::endpoint())
        .with_revision(client::Revision::Era(mcpwire::Era::Sessions))
        .with_get_stream(false);
    let mut p = Pair::new(server, client);
    p.connect();
    let params = RawJson::new(r#"{"name":"work","_meta":{"progressToken":"t"}}"#).unwrap();
    p.client
        .request(p.now, "tools/call", Some(&params), None)
        .unwrap();
    p.run();
    let request = p.take_server_request();
    let progress = RawJson::new(
        r#"{"progressToken":"t","progress":1,"total":2,"message":"a notification longer than the bound"}"#,
    )
    .unwrap();
    let _ = p
        .server
        .notify(
            p.now,
            server::Target::Request(request.handle()),
            "notifications/progress",
            Some(&progress),
        )
        .unwrap();
    p.run();
    let result = RawJson::new(r#"{"content":[]}"#).unwrap();
    p.server.respond(p.now, request.handle(), &result).unwrap();
    p.run();
    let notes = p
        .client_events
        .iter()
        .filter(|e| matches!(e, client::Event::Notification(_)))
        .count();
    assert_eq!(notes, 1);
    assert_eq!(responses_and_failures(&mut p), (1, vec![]));
}

/// A client fed by hand, its `initialize` exchange open.
fn by_hand() -> (
    mcpwire::client::Client,
    std::time::Instant,
    client::ExchangeId,
) {
    by_hand_reinitializing(false)
}

/// [`by_hand`], re-initializing after its session ends or not.
fn by_hand_reinitializing(
    reinitialize: bool,
) -> (
    mcpwire::client::Client,
    std::time::Instant,
    client::ExchangeId,
) {
    let mut c = mcpwire::client::Client::new(
        client::Config::new(Pair::endpoint())
            .with_revision(client::Revision::Era(mcpwire::Era::Sessions))
            .with_get_stream(false)
            .with_reinitialize(reinitialize)
            .with_backoff(Duration::from_millis(100), Duration::from_millis(100), 3),
        mcpwire_tests::server::counter_entropy(3),
    );
    let now = std::time::Instant::now();
    c.connect(now);
    let Some(client::Transmit::Request { exchange, .. }) = c.poll_transmit() else {
        panic!("the initialize request")
    };
    (c, now, exchange)
}

fn head(status: u16, headers: &[(&str, &str)]) -> http::response::Parts {
    let mut b = http::Response::builder().status(status);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

const SSE: (&str, &str) = ("content-type", "text/event-stream");

/// The next transmit, a request: its exchange and whether it resumes.
fn next_request(c: &mut mcpwire::client::Client) -> Option<(client::ExchangeId, bool)> {
    while let Some(t) = c.poll_transmit() {
        if let client::Transmit::Request { exchange, head, .. } = t {
            return Some((exchange, head.headers.contains_key("last-event-id")));
        }
    }
    None
}

/// Seed 399: the `initialize` response stream broke after its priming event and its
/// resume was refused; the client reported the handshake's own request as an
/// `Event::Failed` (an id the application never sent) and stayed initializing. A refused
/// resume of the handshake's stream fails the handshake.
#[test]
fn resume_12_a_refused_resume_of_the_initialize_stream_fails_the_handshake() {
    let (mut c, mut now, x) = by_hand();
    c.handle_head(now, x, head(200, &[SSE, ("mcp-session-id", "s1")]));
    c.handle_body(now, x, bytes::Bytes::from_static(b"id: e1\ndata:\n\n"));
    c.handle_body_end(now, x);
    now += Duration::from_millis(200);
    c.handle_timeout(now);
    let (g, resume) = next_request(&mut c).expect("a resume");
    assert!(resume);
    let body = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"events after Last-Event-ID are no longer retained"}}"#;
    c.handle_head(now, g, head(400, &[("content-type", "application/json")]));
    c.handle_body(now, g, bytes::Bytes::from_static(body));
    c.handle_body_end(now, g);
    let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
    assert!(
        matches!(
            events.as_slice(),
            [client::Event::ConnectFailed(RequestError::ResumeFailed {
                status: 400,
                ..
            })]
        ),
        "{events:?}"
    );
    assert!(c.is_idle());
}

/// Seed 97, once 2026-07-28 clients joined the mix: the `initialize` response stream
/// broke after its priming event, the server restarted, and the resume was answered 404.
/// The client reported `SessionExpired` for a session the application was never told of,
/// initialized again and reported `Reconnected`, never `Connected` (an adapter's `connect`
/// waits for that one). A session that ends before the first handshake finishes fails
/// the handshake, as a refused resume of its stream does, re-initialization on or off.
#[test]
fn resume_12_session_8_a_404_to_the_resume_of_the_initialize_stream_fails_the_handshake() {
    for reinitialize in [true, false] {
        let (mut c, mut now, x) = by_hand_reinitializing(reinitialize);
        c.handle_head(now, x, head(200, &[SSE, ("mcp-session-id", "s1")]));
        c.handle_body(now, x, bytes::Bytes::from_static(b"id: e1\ndata:\n\n"));
        c.handle_failure(now, x);
        now += Duration::from_millis(200);
        c.handle_timeout(now);
        let (g, resume) = next_request(&mut c).expect("a resume");
        assert!(resume);
        c.handle_head(now, g, head(404, &[]));
        c.handle_body_end(now, g);
        let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
        assert!(
            matches!(
                events.as_slice(),
                [client::Event::ConnectFailed(RequestError::SessionExpired)]
            ),
            "reinitialize {reinitialize}: {events:?}"
        );
        assert!(next_request(&mut c).is_none(), "no second initialize");
        assert!(!c.is_connected());
        assert!(c.is_idle());
    }
}

/// The JSON-RPC method of every request the client has to send now.
fn sent_methods(c: &mut mcpwire::client::Client) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(t) = c.poll_transmit() {
        if let client::Transmit::Request { body, .. } = t {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            out.push(v["method"].as_str().unwrap_or_default().to_owned());
        }
    }
    out
}

/// Seed 151850: an `Auto` client's probe answer broke after its head (no modern
/// evidence), so it tried `initialize`; a call made meanwhile waited for the handshake,
/// and the application cancelled it. The client queued `notifications/cancelled` behind
/// the call, which stayed queued; the server refused `initialize` naming 2026-07-28, and
/// both went out there: the call ran to its answer, the notification cancelling nothing
/// at 2026-07-28 (MODERN-11). A call cancelled before it left is dropped unsent, and
/// nothing is sent for it, in either era.
#[test]
fn modern_11_modern_15_a_call_cancelled_during_the_handshake_is_never_sent() {
    let json = ("content-type", "application/json");
    let params = RawJson::new(r#"{"name":"work","arguments":{}}"#).unwrap();
    // Settled at 2026-07-28 after the fallback to `initialize`.
    let mut c = mcpwire::client::Client::new(
        client::Config::new(Pair::endpoint())
            .with_version(mcpwire::ProtocolVersion::V2025_06_18)
            .with_revision(client::Revision::Auto),
        mcpwire_tests::server::counter_entropy(5),
    );
    let now = std::time::Instant::now();
    c.connect(now);
    let (probe, _) = next_request(&mut c).expect("the probe");
    c.handle_head(now, probe, head(200, &[json]));
    c.handle_body(
        now,
        probe,
        bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"#),
    );
    c.handle_failure(now, probe);
    let (init, _) = next_request(&mut c).expect("the initialize of the fallback");
    let id = c.request(now, "tools/call", Some(&params), None).unwrap();
    assert!(c.cancel(now, &id, Some("enough")));
    c.handle_head(now, init, head(400, &[json]));
    let refused = br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32020,"message":"missing MCP-Protocol-Version header","data":{"supported":["2026-07-28"]}}}"#;
    c.handle_body(now, init, bytes::Bytes::from_static(refused));
    c.handle_body_end(now, init);
    let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
    assert!(
        matches!(
            events.as_slice(),
            [client::Event::Connected {
                era: mcpwire::Era::Sessionless,
                ..
            }]
        ),
        "{events:?}"
    );
    assert_eq!(sent_methods(&mut c), Vec::<String>::new());
    assert!(c.is_idle(), "{c:?}");
    // In the session era: only the handshake's own messages go out.
    let (mut c, now, init) = by_hand();
    let id = c.request(now, "tools/call", Some(&params), None).unwrap();
    assert!(c.cancel(now, &id, None));
    c.handle_head(now, init, head(200, &[json]));
    let result = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#;
    c.handle_body(now, init, bytes::Bytes::from_static(result));
    c.handle_body_end(now, init);
    let (initialized, _) = next_request(&mut c).expect("the initialized notification");
    c.handle_head(now, initialized, head(202, &[]));
    c.handle_body_end(now, initialized);
    assert_eq!(sent_methods(&mut c), Vec::<String>::new());
}

/// Seeds 11, 53, …: the client lost a connection the server had not noticed yet
/// (half-open); its resume got 409 (HTTP-GET-9) and the request failed at once, though
/// nothing was lost. A 409 is tried again, from the stream's budget of attempts.
#[test]
fn resume_4_http_get_9_a_409_to_a_resume_is_tried_again_within_the_budget() {
    let (mut c, mut now, x) = by_hand();
    c.handle_head(now, x, head(200, &[("content-type", "application/json")]));
    c.handle_body(
        now,
        x,
        bytes::Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}"#,
        ),
    );
    c.handle_body_end(now, x);
    let id = c.request(now, "tools/call", None, None).unwrap();
    // The initialized notification, answered; the request goes out after it (JSONRPC-9).
    let (initialized, _) = next_request(&mut c).expect("the initialized notification");
    c.handle_head(now, initialized, head(202, &[]));
    c.handle_body_end(now, initialized);
    let (post, _) = next_request(&mut c).expect("the request");
    c.handle_head(now, post, head(200, &[SSE]));
    c.handle_body(now, post, bytes::Bytes::from_static(b"id: e1\ndata:\n\n"));
    c.handle_failure(now, post);
    for _ in 0..2 {
        now += Duration::from_millis(200);
        c.handle_timeout(now);
        let (g, resume) = next_request(&mut c).expect("a resume");
        assert!(resume);
        c.handle_head(now, g, head(409, &[("content-type", "application/json")]));
        c.handle_body_end(now, g);
        assert!(
            !std::iter::from_fn(|| c.poll_event())
                .any(|e| matches!(e, client::Event::Failed { .. })),
            "a 409 is not a failure while attempts remain"
        );
    }
    now += Duration::from_millis(200);
    c.handle_timeout(now);
    let (g, _) = next_request(&mut c).expect("a third resume");
    c.handle_head(now, g, head(200, &[SSE]));
    let answer = format!("id: e2\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n\n");
    c.handle_body(now, g, bytes::Bytes::from(answer));
    let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
    assert!(
        matches!(events.as_slice(), [client::Event::Response(_)]),
        "{events:?}"
    );
}

/// Seeds 7, 1476: a slow reader of the standalone stream was ended at the unsent bound
/// before it took its first frame; the frames it never took were thrown away, so the
/// client, which saw no id, reconnected with a fresh GET and never got them. Frames no
/// reader took go back to the backlog, as the backlog's rule says (HTTP-GET-4): the next
/// connection gets them. Likewise when the connection goes with frames untaken.
#[test]
fn http_get_4_frames_a_gone_or_slow_reader_never_took_go_to_the_next_get() {
    use mcpwire::server::{Target, Transmit};
    use mcpwire_tests::server::Harness;
    for slow in [true, false] {
        let config = server::Config::new()
            .with_max_unsent(100)
            .with_heartbeat(None);
        let mut h = Harness::new(config);
        let (sid, session) = h.initialize("2025-06-18");
        let get = Harness::head(
            "GET",
            "/mcp",
            &[("accept", "text/event-stream"), ("mcp-session-id", &sid)],
        );
        let g = h.server.handle_head(h.now, get);
        // The driver takes nothing while the server writes.
        for k in 1..=3 {
            let text = format!(r#"{{"k":{k}}}"#);
            let params = RawJson::new(&text).unwrap();
            let _ = h
                .server
                .notify(
                    h.now,
                    Target::Session(session),
                    "notifications/message",
                    Some(&params),
                )
                .unwrap();
        }
        if slow {
            let mut taken = Vec::new();
            while let Some(t) = h.server.poll_transmit(g) {
                taken.push(matches!(t, Transmit::Data(_)));
            }
            assert_eq!(taken, [false, false], "ended at the bound: head, end");
        } else {
            h.server.handle_disconnect(h.now, g);
        }
        h.drain();
        let fresh = h.get(&sid, None);
        let ks: Vec<_> = h
            .reply(fresh)
            .messages()
            .iter()
            .map(|m| m["params"]["k"].as_i64().unwrap())
            .collect();
        assert_eq!(ks, [1, 2, 3], "slow {slow}");
    }
}
