//! Corpora and helpers for the mcpwire benches.
//!
//! Everything here is deterministic: the corpora come from a fixed-seed xorshift, so
//! every machine and every run measures the same bytes. Each corpus carries its
//! [`Expected`] results, counted by the generator from the fields it wrote (not by
//! parsing), and the benches assert every decoder's answer against them, so a fast wrong
//! answer fails.
//!
//! - [`Corpus`]: the decode corpora `large`, `tokens` and `mixed`, and
//!   [`Corpus::chunks`] to split one into [`CHUNK_SIZES`] slices before timing.
//! - [`Payloads`]: the encode benches' messages (the same JSON as the `large` and
//!   `tokens` corpora).
//! - [`Message`]: the `jsonrpc` bench's messages (a small request, a progress
//!   notification, a 256 KiB tool result).
//! - [`decode`]: each decoder under test (mcpwire, sse-stream, eventsource-stream) and
//!   the `memchr2` floor, driven over chunks, returning [`Counts`].
//!
//! Bench groups are named `decode/<corpus>/<chunk label>` and `encode/<payloads>`;
//! `bench-report` relies on that to find each group's event count.

mod corpus;
pub mod decode;
mod messages;
mod payload;
mod rng;

pub use corpus::{
    CHUNK_16K, CHUNK_MSS, CHUNK_SIZES, Corpus, Counts, Expected, chunk_label, parse_chunk_label,
};
pub use messages::{LARGE_RESULT_LEN, Message};
pub use payload::{LARGE_PAYLOAD_LEN, LARGE_PAYLOADS, Payloads, TOKENS_FRAMED_LEN};
