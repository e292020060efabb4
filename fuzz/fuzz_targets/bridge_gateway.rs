//! `bridge_gateway`: the stdio gateway (`mcpwire::bridge::Gateway`) behind the HTTP
//! server, its children played by the input, under arbitrary sequences of client moves
//! (sessions opened at any 2025 revision, session and 2026-07-28 calls with and without
//! progress tokens and capabilities, answers to the children's questions, retries with
//! `inputResponses` and `requestState`, cancels, dropped connections, DELETE), child
//! moves (`initialize` answered or failed, answers whole or in two chunks, progress,
//! questions asked and given up, garbage lines, responses to unknown ids, exits,
//! stalls) and time steps: the op model of `mcpwire_tests::bridge_ops`, which the
//! `bridge_props` proptest runs too, so a failing input here replays there.
//!
//! Checks, after every op: nothing panics; every line written to a child is one
//! JSON-RPC message (STDIO-1); each HTTP request gets at most one answer, with its own
//! id, and no answer, progress or question reaches another request or session; session
//! ids pass through and 2026-07-28 ids are the child's own, one request per pool child
//! (BRIDGE-1, BRIDGE-2); questions and their answers go where they belong (BRIDGE-3); a
//! child that exits or stalls fails exactly its requests with -32603 (BRIDGE-4); the
//! bounds hold (BRIDGE-5); and once everything is answered and every child exited,
//! `in_flight()` and `children()` are 0.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_tests::bridge_ops;

fuzz_target!(|data: &[u8]| {
    bridge_ops::run_bytes(data);
});
