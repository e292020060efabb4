//! The server under random sequences of client moves, time steps and application sends
//! (`mcpwire_tests::server_ops`, the model the `server_requests` fuzz target runs too): it
//! never panics, keeps every exchange's transmits in order, never writes a message of one
//! session on another session's exchange (RESUME-6, §14.3), and holds no state once every
//! session has expired (SESSION-7). Then the fuzz target's seeds, and the regressions the
//! model found, as plain tests.

use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{Config, Delivery, Event, ResponseMode, SessionMode};
use mcpwire_tests::server::Harness;
use mcpwire_tests::server_ops::{self, Setup};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any setup (response mode, sessions or none, legacy paths, small bounds) and any
    /// op sequence.
    #[test]
    fn session_7_random_ops_keep_sessions_apart_and_leave_no_state(
        data in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        if let Err(e) = server_ops::run_bytes(&data) {
            prop_assert!(false, "{e}");
        }
    }

    /// The default setup, so every case drives the common configuration.
    #[test]
    fn session_7_random_ops_on_the_default_setup(
        data in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut u = arbitrary::Unstructured::new(&data);
        let ops = server_ops::ops(&mut u);
        if let Err(e) = server_ops::run(&Setup::default(), &ops) {
            prop_assert!(false, "{e}");
        }
    }
}

/// The op generator gets past the refusals: over 300 fixed inputs, the runs reach
/// sessions, tagged messages on both body kinds, event ids, resumes (some taking over a
/// live connection, RESUME-14), legacy streams,
/// correlated responses, timeouts, cancellations and expiry, and every refusal status.
/// Without this, the properties above could pass by never reaching what they check.
#[test]
fn server_ops_reach_sessions_streams_resumes_and_expiry() {
    let total = server_ops::coverage_over(0x2545_f491_4f6c_dd1d_u64, 300);
    let c = &total;
    for (what, n) in [
        ("sessions", c.sessions),
        ("requests", c.requests),
        ("tagged messages", c.tagged),
        ("event ids", c.event_ids),
        ("resumes", c.resumes),
        ("connections a resume took over", c.superseded),
        ("legacy streams", c.legacy_streams),
        ("correlated responses", c.responses),
        ("timeouts", c.timeouts),
        ("cancellations", c.cancellations),
        ("expired sessions", c.expired),
    ] {
        assert!(n >= 10, "only {n} {what}: {c:?}");
    }
    for status in [200, 202, 400, 403, 404, 405, 406, 409, 413, 503] {
        assert!(c.statuses.contains_key(&status), "no {status}: {c:?}");
    }
}

/// The `server_requests` fuzz target's committed seeds run clean here too (a crash file
/// copied to `fuzz/corpus/server_requests/seed-…` becomes a test this way).
#[test]
fn server_requests_seeds_run_clean() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/server_requests");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).expect("the seed corpus") {
        let path = entry.expect("a directory entry").path();
        if !path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
        {
            continue;
        }
        let data = std::fs::read(&path).expect("a seed");
        if let Err(e) = server_ops::run_bytes(&data) {
            panic!("{}: {e}", path.display());
        }
        seeds += 1;
    }
    assert!(seeds >= 5, "{seeds} seeds in {}", dir.display());
}

/// Found by the op model: a batch holding a request and its own cancellation. The
/// cancellation settled the request while the body was still being dispatched, before
/// the exchange counted what it owed: an arithmetic overflow (a panic in debug builds, in
/// release an exchange waiting forever for an answer that could not come).
#[test]
fn batch_3_a_batch_that_cancels_its_own_request_is_answered_for_the_rest() {
    let mut h = Harness::new(Config::new());
    let (sid, _) = h.initialize("2025-03-26");
    let x = h.post(
        Some(&sid),
        Some("2025-03-26"),
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]"#,
    );
    assert_eq!(h.reply(x).status(), 202, "nothing is left to answer");
    assert!(matches!(
        h.take_events()[..],
        [Event::Request(_), Event::Cancelled { .. }]
    ));

    let x = h.post(
        Some(&sid),
        Some("2025-03-26"),
        r#"[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}},{"jsonrpc":"2.0","id":3,"method":"ping"}]"#,
    );
    let request = h.take_request();
    let request = match request.id().as_int() {
        Some(2) => h.take_request(),
        _ => request,
    };
    assert_eq!(request.id().as_int(), Some(3));
    assert!(h.reply(x).head.is_none(), "request 3 is still owed");
    h.answer(&request, "{}");
    let reply = h.reply(x);
    assert_eq!(reply.status(), 200);
    assert_eq!(
        reply.json(),
        serde_json::json!([{"jsonrpc":"2.0","id":3,"result":{}}])
    );
}

/// Found by the op model: an answer to a request whose SSE stream was not resumable and
/// went with its connection. `respond` said `NoStream` and left the request open, so a
/// stateless server held it forever. The answer is dropped (the client learns from the
/// broken stream, RESUME-12) and the request settled.
#[test]
fn http_post_12_an_answer_after_its_unresumable_stream_went_is_dropped_and_settles() {
    let mut h = Harness::new(
        Config::new()
            .with_sessions(SessionMode::Stateless)
            .with_response_mode(ResponseMode::Sse),
    );
    let x = h.post(
        None,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}"#,
    );
    let request = h.take_request();
    assert_eq!(h.reply(x).status(), 200, "the SSE stream opened at once");
    h.server.handle_disconnect(h.now, x);
    let result = RawJson::new("{}").unwrap();
    assert_eq!(
        h.server.respond(h.now, request.handle(), &result),
        Ok(Delivery::Dropped)
    );
    h.drain();
    assert!(h.server.is_idle(), "{:?}", h.server);
}
