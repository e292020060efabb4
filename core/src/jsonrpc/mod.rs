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
//! - [`Classifier::parse`] also takes batches, by negotiated [`ProtocolVersion`](crate::ProtocolVersion)
//!   (BATCH-1, BATCH-6).
//! - [`MessageBuf`] encodes requests, notifications, results and errors into a reusable
//!   buffer; its text is one SSE `data:` line or, split off, an HTTP body.
//! - [`Pending`] correlates responses with the client's requests by id; [`InFlight`]
//!   catches a peer reusing an id still in flight on the server side (JSONRPC-3).
//!
//! Why not simd-json's value or tape API on the fast path: both build a node for every
//! value in the document, copy (unescape) every string, and keep no source offsets, so
//! a raw `params` or `result` could not be handed out without re-serializing it. The
//! scanner here validates RFC 8259's grammar (as serde_json does) and skips string
//! bodies eight bytes at a time; the `jsonrpc` bench measures it against simd-json and serde_json side by side.

mod encode;
mod error;
mod id;
mod message;
mod pending;
mod scan;

pub use encode::{EncodeError, Json, MessageBuf, ToJson};
pub use error::{ErrorCode, ParseError, Shape, ShapeError};
pub use id::{INLINE_ID_LEN, RequestId};
pub use message::{
    Classifier, ErrorObject, ErrorResponse, Kind, Limits, Message, Notification, Parsed, RawJson,
    Request, Response, classify,
};
pub use pending::{InFlight, InFlightError, Pending, PendingError, Resolution};
pub use scan::{JsonError, JsonErrorKind};
