//! The op model's 2026-07-28 ops (`mcpwire_tests::server_ops`, which the
//! `server_requests` fuzz target runs) get past the refusals: over fixed random inputs the
//! runs reach sessionless requests answered as JSON and on SSE streams, notifications
//! answered 202, refusals whose status and code the model predicted, and requests
//! cancelled because their client went (MODERN-10, MODERN-11, MODERN-24), and calls of a
//! tool with `Mcp-Param-*` mirrors both passing and failing their check (MODERN-7). Without this the
//! model's modern checks could pass by never being reached.

use mcpwire_tests::server_ops::{self, Coverage};

#[test]
fn server_ops_reach_the_2026_revision() {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut total = Coverage::default();
    for _ in 0..300 {
        let len = (next() % 2048) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let (setup, ops) = server_ops::scenario(&data);
        match server_ops::run_counted(&setup, &ops) {
            Ok(coverage) => total.add(&coverage),
            Err(e) => panic!("{e}"),
        }
    }
    let c = &total;
    for (what, n) in [
        ("2026-07-28 requests", c.modern_requests),
        ("predicted refusals", c.modern_refusals),
        ("SSE answers", c.modern_streams),
        ("notifications answered 202", c.modern_accepted),
        (
            "requests cancelled with their connection",
            c.modern_cancelled,
        ),
        ("requests answered once", c.modern_answered),
        ("mirrored calls dispatched", c.mirrored_dispatched),
        ("mirrored calls refused", c.mirrored_refused),
    ] {
        assert!(n >= 10, "only {n} {what}: {c:?}");
    }
}
