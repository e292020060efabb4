//! The op model's 2026-07-28 ops (`mcpwire_tests::server_ops`, which the
//! `server_requests` fuzz target runs) get past the refusals: over fixed random inputs the
//! runs reach sessionless requests answered as JSON and on SSE streams, notifications
//! answered 202, refusals whose status and code the model predicted, and requests
//! cancelled because their client went (MODERN-10, MODERN-11, MODERN-24), and calls of a
//! tool with `Mcp-Param-*` mirrors both passing and failing their check (MODERN-7). Without this the
//! model's modern checks could pass by never being reached.

use mcpwire_tests::server_ops;

#[test]
fn server_ops_reach_the_2026_revision() {
    let total = server_ops::coverage_over(0x9e37_79b9_7f4a_7c15_u64, 300);
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
