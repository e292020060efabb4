//! `server_requests`: arbitrary sequences of request heads, body chunks, body ends,
//! disconnects, time steps and application sends against one `mcpwire::server::Server`
//! (the op model of `mcpwire_tests::server_ops`, which the `server_props` proptest runs
//! too, so a failing input here replays there).
//!
//! Checks, after every op (see `server_ops`'s docs for the whole list):
//! 1. Nothing panics.
//! 2. Each exchange's transmits are one `Head`, then `Data`, then `End`, and nothing
//!    comes after `End` or after a disconnect.
//! 3. Every message on an exchange carries only the tag of the session the exchange was
//!    admitted to: no frame of one session is written to another (RESUME-6, §14.3).
//! 4. SSE bodies decode cleanly in whole frames, with increasing ids per ring; JSON
//!    bodies parse and match their `Content-Length`.
//! 5. Events agree with the application's view (correlation within a session,
//!    cancellations of open requests, a session closed once).
//! 6. At the end, with every exchange gone and every deadline passed, the server holds no
//!    state (SESSION-7).
//! 7. Revision 2026-07-28 on the same endpoint (POSTs with right and wrong `_meta`,
//!    `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`): refusals have the
//!    status and code the model predicts, notifications get 202, no answer names a
//!    session or carries an event id, every request gets exactly one answer or is
//!    cancelled when its client goes (MODERN-11), and a finished exchange leaves nothing
//!    behind (`exchange_count`, `session_count`, `is_idle`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_tests::server_ops;

fuzz_target!(|data: &[u8]| {
    if let Err(violation) = server_ops::run_bytes(data) {
        panic!("{violation}");
    }
});
