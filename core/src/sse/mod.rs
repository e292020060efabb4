//! Server-sent events: the `text/event-stream` decoder and encoder.
//!
//! Every MCP message over HTTP that is not a plain JSON body travels as an SSE event:
//! the legacy HTTP+SSE stream, a POST response stream, the standalone GET stream and a
//! resumed stream. [`Decoder`] implements the WHATWG parsing and interpretation rules
//! exactly (TRANSPORT.md SSE-PARSE-*); [`Encoder`] writes frames that every such decoder
//! reads back unchanged (SSE-ENC-*).

mod decoder;
mod encoder;
mod limits;
mod line_end;

pub use decoder::{DecodeError, Decoder, Event, EventRef, FinishedError, Item, ItemRef};
pub use encoder::{Comment, EncodeError, Encoder, EventFields, EventType, Id};
pub use limits::Limits;
