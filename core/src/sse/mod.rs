//! Server-sent events: the `text/event-stream` decoder and encoder.
//!
//! Every MCP message over HTTP that is not a plain JSON body travels as an SSE event:
//! the legacy HTTP+SSE stream, a POST response stream, the standalone GET stream and a
//! resumed stream. [`Decoder`] implements the WHATWG parsing and interpretation rules
//! exactly (TRANSPORT.md SSE-PARSE-*); [`Encoder`] writes frames that every such decoder
//! reads back unchanged (SSE-ENC-*).
//!
//! - Decoding: [`Decoder::poll_item`] (owned items) or [`Decoder::poll_item_ref`]
//!   (borrowed, no reference count); see [`Decoder`] for which to use.
//! - Encoding: [`Encoder::encode_event`] with the event's [`EventFields`] (`id`, `event`,
//!   `retry`) beside its data, or [`Encoder::encode_event_with`] to write the data in
//!   place. A *frame* is always the encoded bytes of one event, comment or `retry` block,
//!   as written to the socket and retained for replay (`resume`).
//!
//! [`Limits`] and [`EncodeError`] share their names with `jsonrpc`'s: use them through
//! the module path (`sse::Limits`, `sse::EncodeError`), as the crate's own code does.

mod decoder;
mod encoder;
mod limits;
mod line_end;

pub use decoder::{DecodeError, Decoder, Event, EventRef, FinishedError, Item, ItemRef};
pub use encoder::{Comment, EncodeError, Encoder, EventFields, EventType, Id};
pub use limits::Limits;
