//! JSON-RPC 2.0 envelope: classify, correlate and encode MCP messages without parsing
//! their payloads.
//!
//! A server or gateway needs, for every message, only its kind, id and method. The
//! [`Classifier`] validates the whole text as JSON (so malformed input is always a
//! -32700, never forwarded) but decodes only the envelope: `params`, `result` and error
//! `data` come back as [`RawJson`] slices of the input, however large.
//!
//! ```
//! use mcpwire::jsonrpc::{classify, Message, RequestId};
//!
//! let text = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#;
//! let Message::Request(req) = classify(text)? else { unreachable!() };
//! assert_eq!(req.id, RequestId::int(7));
//! assert_eq!(req.method, "tools/call");
//! assert_eq!(req.params.unwrap().as_str(), r#"{"name":"echo"}"#);
//! # Ok::<(), mcpwire::jsonrpc::ParseError>(())
//! ```
//!
//! - [`classify`] takes bytes (an HTTP body) and checks UTF-8; [`classify_str`] takes
//!   text already known to be UTF-8 (an SSE event's data) and does not check it again.
//! - [`Classifier::parse`] also takes batches, by negotiated [`ProtocolVersion`](crate::ProtocolVersion)
//!   (BATCH-1, BATCH-6); [`Classifier::parse_any`] takes them whatever the revision, for
//!   tools that only look.
//! - [`Envelope`] is the owned message, for messages that outlive the input call: it
//!   keeps the input's [`Utf8Bytes`](crate::Utf8Bytes) (no copy) and where the parts lie
//!   in it ([`Classifier::envelope`], [`Classifier::envelopes`] for batches).
//! - [`Outgoing`] describes a message to send and writes it, once, into an HTTP body
//!   ([`Outgoing::write`], [`MessageBuf`]) or straight into an SSE frame
//!   ([`Outgoing::encode_frame`]).
//! - [`Pending`] correlates responses with the client's requests by id; [`InFlight`]
//!   catches a peer reusing an id still in flight on the server side (JSONRPC-3).
//!
//! # Priming events
//!
//! A resumable SSE stream starts with a SEP-1699 priming event: an `id` and empty data.
//! Empty data is not JSON, so [`classify_str`] answers -32700 "unexpected end of json at
//! byte 0" for it. A client skips it with [`Classifier::classify_event`], which answers
//! `Ok(None)` for empty data and classifies any other.
//!
//! # Ids
//!
//! A [`RequestId`] is a string or an `i64` integer. An integer id beyond the `i64` range
//! is refused as [`Shape::IdOutOfRange`] (a JavaScript peer cannot hold integers beyond
//! 2^53 exactly anyway), and a string id or method holding an unpaired surrogate escape
//! (`"\ud800"`, JSON but no Unicode text) as [`Shape::UnpairedSurrogate`].
//!
//! # Names shared with `sse`
//!
//! [`Limits`] and [`EncodeError`] have namesakes in [`sse`](crate::sse) (the decoder's
//! limits, an SSE field that cannot be encoded). Use each through its module path,
//! `jsonrpc::Limits` and `sse::Limits`, and do not import both bare.
//!
//! Why not simd-json's value or tape API on the fast path: both build a node for every
//! value in the document, copy (unescape) every string, and keep no source offsets, so
//! a raw `params` or `result` could not be handed out without re-serializing it. The
//! scanner here validates RFC 8259's grammar (as serde_json does) and skips string
//! bodies eight bytes at a time; the `jsonrpc` bench measures it against simd-json and serde_json side by side.

mod encode;
mod envelope;
mod error;
mod id;
mod message;
mod pending;
pub(crate) mod read;
pub(crate) mod scan;

pub use encode::{EncodeError, Json, MessageBuf, Outgoing, ToJson};
pub use envelope::{Envelope, Envelopes, body_text};
pub use error::{ErrorCode, ParseError, Shape, ShapeError};
pub use id::{INLINE_ID_LEN, RequestId};
pub use message::{
    Classifier, ErrorObject, ErrorResponse, Kind, Limits, Message, Notification, Parsed, RawJson,
    Request, Response, classify, classify_str,
};
pub use pending::{InFlight, InFlightError, Pending, PendingError, Resolution};
pub use scan::{JsonError, JsonErrorKind};
