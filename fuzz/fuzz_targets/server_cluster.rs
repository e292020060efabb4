//! `server_cluster`: several nodes of one cluster over a shared store kept in memory,
//! under arbitrary sequences of client moves (initialize, call, lose and resume a stream
//! on any node, DELETE), application sends, store outages, slow notices, a killed node,
//! time steps and garbage where the store's bytes arrive (notices, session records): the
//! op model of `mcpwire_tests::cluster_ops`, which the `cluster_props` proptest runs
//! too, so a failing input here replays there.
//!
//! Checks, after every op: nothing panics; every SSE body decodes; for every call, what
//! its client read over all its connections in order has its progress steps increasing
//! and never twice, and its answer at most once; once the answer came, every step sent
//! before it came too (RESUME-5, RESUME-14).

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_tests::cluster_ops;

fuzz_target!(|data: &[u8]| {
    if let Err(violation) = cluster_ops::run_bytes(data) {
        panic!("{violation}");
    }
});
