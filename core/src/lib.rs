//! # mcpwire
//!
//! A sans-IO protocol core for the Model Context Protocol's HTTP transports: the
//! sessionless revision 2026-07-28, Streamable HTTP with sessions (2025-03-26 …
//! 2025-11-25) and the legacy HTTP+SSE transport (2024-11-05), on one endpoint, the era
//! decided per request.
//!
//! The core never touches a socket, a clock, a thread or a random source. It is fed bytes
//! (and, in the state machines, HTTP heads, the current time and entropy) and answers with
//! bytes, events and deadlines; an adapter (`mcpwire-tokio`, `mcpwire-blocking`) moves
//! them between the network and the core.
//!
//! ## The drive loop
//!
//! Every machine in this crate is driven the same way:
//!
//! 1. Give it input: `push` bytes, `handle_*` calls with plain data and `now`.
//! 2. Drain its output with `poll_*` (`Decoder::poll_item`; the server's `poll_ready`,
//!    `poll_transmit` and `poll_event`) until it returns `None`, which means "need more
//!    input", never an error.
//! 3. Ask `poll_timeout()` for the next deadline, and call `handle_timeout(now)` when it
//!    passes (`server::Server`, `jsonrpc::Pending`, `resume::ReplayRing`,
//!    `resume::EventStore`).
//! 4. Repeat. At end of input call `finish`, then drain once more.
//!
//! ## Modules
//!
//! - [`sse`]: the `text/event-stream` [`Decoder`](sse::Decoder) (WHATWG-exact, zero-copy,
//!   bounded) and [`Encoder`](sse::Encoder).
//! - [`jsonrpc`]: classify JSON-RPC messages without parsing their payloads, encode them,
//!   and correlate responses with requests.
//! - [`resume`]: resumability (SEP-1699): ring-scoped [`EventId`](resume::EventId)s, the
//!   bounded O(1) [`ReplayRing`](resume::ReplayRing) and the
//!   [`EventStore`](resume::EventStore) seam.
//! - [`server`]: the sans-IO [`Server`](server::Server): revision 2026-07-28 (per-request
//!   `_meta` and `Mcp-*` header checks, a response stream per request), Streamable HTTP
//!   with sessions (the GET stream, resumable streams, SEP-1699 polling, heartbeats) and
//!   legacy HTTP+SSE on one state machine, with every status-code and routing decision in
//!   it.
//! - [`client`]: the sans-IO [`Client`](client::Client), the server's mirror.
//! - [`conn`]: connection admission and deadlines for an HTTP/1 server driver (a bound
//!   that sheds the oldest connection not busy, header and idle timeouts), the policy
//!   both adapters' servers run.
//! - [`mirror`]: the values revision 2026-07-28 mirrors into headers (`Mcp-Name`,
//!   `Mcp-Param-*`): their encoding, strict decoding, comparison with the body, and a
//!   tool's `x-mcp-header` annotations read from its `inputSchema`.
//! - [`bridge`]: a stdio MCP server served over HTTP ([`Gateway`](bridge::Gateway): a
//!   child per session, a pool for 2026-07-28 requests, failures reported to exactly the
//!   requests in flight), and a stdio client served by a remote server
//!   ([`Relay`](bridge::Relay)): the decisions of `mcpwire bridge`.
//! - [`stdio`]: newline-delimited JSON-RPC, the framing of the stdio transport: a
//!   bounded [`Decoder`](stdio::Decoder) that reports a bad line and loses no other, and
//!   the one-line encoding.
//! - [`app`]: what a server application answers itself (`initialize`, `ping`,
//!   `server/discover`, `subscriptions/listen`), a tool table for `tools/list` and
//!   `tools/call`, progress, the completion of 2026-07-28 results (`resultType`,
//!   caching hints, sealed `requestState`), and [`app::Dispatcher`], the calls in
//!   flight, their cancellation and their requests to the client: the adapters'
//!   application layers run on it, so they hold no MCP method names.
//!
//! ## Cargo features
//!
//! - `os-entropy` (default): [`OsEntropy`], the operating system's random generator
//!   (through the `getrandom` crate), as an [`Entropy`] for a driver to pass to the state
//!   machines (`Box::new(mcpwire::OsEntropy)`). The machines never draw randomness
//!   themselves; without the feature the crate has no dependency on the operating
//!   system's generator, and the driver passes its own source.
//!
//! ## Unsafe code
//!
//! The workspace denies `unsafe_code`; the only module that allows it, block by block, is
//! `utf8`, where a validated span of input is read as `&str` without validating it twice
//! (the decoder's zero-copy text), and where the decoder lends initialised memory it
//! reuses as room for reads (`Decoder::read_room`) without zeroing it again. Each block states its proof (`clippy::
//! undocumented_unsafe_blocks` is on), the proof is the invariant of a type private to
//! that module, and Miri runs the tests that reach every block. The lint is `deny`, not
//! `forbid`, because `forbid` cannot be overridden at all: the test crates' counting
//! global allocator (`unsafe impl GlobalAlloc`) and this one module need a local
//! `#[allow(unsafe_code)]`, which keeps each exception visible where it is.
//!
//! Requirement ids (SSE-PARSE-3, RESUME-5, §14.2, …) refer to the project's requirements
//! table, [`docs/requirements.md`](https://github.com/mcpwire/mcpwire/blob/main/docs/requirements.md)
//! in the repository: each id, in the project's words, with the MCP specification or
//! WHATWG section it comes from. Tests are named after them.

mod buf;
mod duration;
mod entropy;
mod utf8;
mod version;

pub mod app;
pub mod bridge;
pub mod client;
pub mod conn;
pub mod jsonrpc;
pub mod meta;
pub mod mirror;
pub mod resume;
pub mod server;
pub mod sse;
pub mod stdio;

pub use entropy::Entropy;
#[cfg(feature = "os-entropy")]
pub use entropy::OsEntropy;
pub use utf8::{Utf8Bytes, Utf8Ref};
pub use version::{Era, ProtocolVersion, UnknownVersion};
