//! Error codes and the classifier's typed errors.

use std::fmt;

use super::id::RequestId;
use super::scan::JsonError;
use crate::version::ProtocolVersion;

/// A JSON-RPC error code (JSONRPC-6): the standard ones and MCP's own as constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ErrorCode(pub i64);

impl ErrorCode {
    /// -32700: the text is not JSON.
    pub const PARSE_ERROR: Self = Self(-32700);
    /// -32600: JSON, but not a valid request.
    pub const INVALID_REQUEST: Self = Self(-32600);
    /// -32601: the method does not exist or is not available.
    pub const METHOD_NOT_FOUND: Self = Self(-32601);
    /// -32602: invalid method parameters.
    pub const INVALID_PARAMS: Self = Self(-32602);
    /// -32603: internal error.
    pub const INTERNAL_ERROR: Self = Self(-32603);
    /// -32000: the connection closed before the response (SDK convention).
    pub const CONNECTION_CLOSED: Self = Self(-32000);
    /// -32001: the request timed out (SDK convention).
    pub const REQUEST_TIMEOUT: Self = Self(-32001);
    /// -32002: resource not found (`resources/read`, 2025 revisions).
    pub const RESOURCE_NOT_FOUND: Self = Self(-32002);
    /// -32020: HTTP headers disagree with the body (2026-07-28, MODERN-4, MODERN-6).
    pub const HEADER_MISMATCH: Self = Self(-32020);
    /// -32021: a client capability the request needs is missing (2026-07-28, MODERN-15).
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: Self = Self(-32021);
    /// -32022: the server does not serve the requested revision (2026-07-28, MODERN-5).
    pub const UNSUPPORTED_PROTOCOL_VERSION: Self = Self(-32022);
    /// -32042: the request needs a URL-mode elicitation first (2025-11-25).
    pub const URL_ELICITATION_REQUIRED: Self = Self(-32042);

    /// The standard message for the JSON-RPC codes, if this is one of them.
    pub const fn standard_message(self) -> Option<&'static str> {
        match self.0 {
            -32700 => Some("Parse error"),
            -32600 => Some("Invalid Request"),
            -32601 => Some("Method not found"),
            -32602 => Some("Invalid params"),
            -32603 => Some("Internal error"),
            _ => None,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why a JSON value is not a JSON-RPC message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Shape {
    /// The value is not an object.
    NotAnObject,
    /// No `jsonrpc` member.
    MissingVersion,
    /// `jsonrpc` is not the string `"2.0"` (JSONRPC-1).
    WrongVersion,
    /// `id` is neither a string nor an integer (a fraction, an exponent, a boolean, an
    /// object or an array), or is null on a request (JSONRPC-2).
    InvalidId,
    /// `id` is an integer outside the `i64` range. Integer ids are kept as `i64`
    /// ([`RequestId`]); a JavaScript peer cannot hold integers beyond 2^53 exactly anyway.
    IdOutOfRange,
    /// A result response without an `id` (JSONRPC-4).
    MissingId,
    /// `method` is not a string.
    InvalidMethod,
    /// `params` is not an object or an array.
    InvalidParams,
    /// `error` is not an object with an integer `code` and a string `message`
    /// (JSONRPC-4, JSONRPC-6).
    InvalidError,
    /// None of `method`, `result` and `error`.
    NoMethodOrOutcome,
    /// More than one of `method`, `result` and `error` (JSONRPC-4).
    Ambiguous,
    /// An envelope member appears twice; parsers disagree on which one counts.
    DuplicateMember(&'static str),
    /// The string of an envelope member (`"id"` or `"method"`) holds an unpaired
    /// surrogate escape (`"\ud800"`): valid JSON, but no Unicode text, so no Rust (or
    /// JavaScript `TextEncoder`) string can hold it.
    UnpairedSurrogate(&'static str),
    /// `initialize` inside a batch (BATCH-4, JSONRPC-10).
    InitializeInBatch,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAnObject => f.write_str("message is not a json object"),
            Self::MissingVersion => f.write_str("missing \"jsonrpc\" member"),
            Self::WrongVersion => f.write_str("\"jsonrpc\" must be \"2.0\""),
            Self::InvalidId => f.write_str("\"id\" must be a string or an integer"),
            Self::IdOutOfRange => {
                f.write_str("integer \"id\" out of range (ids must fit in 64 signed bits)")
            }
            Self::MissingId => f.write_str("response without \"id\""),
            Self::InvalidMethod => f.write_str("\"method\" must be a string"),
            Self::InvalidParams => f.write_str("\"params\" must be an object or an array"),
            Self::InvalidError => f.write_str(
                "\"error\" must be an object with an integer \"code\" and a string \"message\"",
            ),
            Self::NoMethodOrOutcome => {
                f.write_str("message has no \"method\", \"result\" or \"error\"")
            }
            Self::Ambiguous => {
                f.write_str("message has more than one of \"method\", \"result\" and \"error\"")
            }
            Self::DuplicateMember(name) => write!(f, "duplicate \"{name}\" member"),
            Self::UnpairedSurrogate(name) => write!(
                f,
                "\"{name}\" holds an unpaired surrogate escape, which is not unicode text"
            ),
            Self::InitializeInBatch => f.write_str("\"initialize\" must not be part of a batch"),
        }
    }
}

/// A JSON value that is not a valid JSON-RPC message (code -32600), with the request id
/// when it could still be read, so the error response can carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShapeError {
    /// The id, when the `id` member was a valid id.
    pub id: Option<RequestId>,
    /// What was wrong.
    pub shape: Shape,
}

impl ShapeError {
    pub(crate) const fn new(id: Option<RequestId>, shape: Shape) -> Self {
        Self { id, shape }
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid json-rpc message: {}", self.shape)
    }
}

impl std::error::Error for ShapeError {}

/// Why a body or an event could not be classified.
///
/// Each variant maps to the JSON-RPC error the peer should get ([`ParseError::jsonrpc_code`])
/// and the HTTP status a server should answer with ([`ParseError::status_hint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// Not JSON (or not UTF-8): -32700.
    Json(JsonError),
    /// JSON, but not a JSON-RPC message: -32600.
    Shape(ShapeError),
    /// A batch where a single message was expected ([`Classifier::classify`](super::Classifier::classify)
    /// takes no batches; [`Classifier::parse`](super::Classifier::parse) does, by version): -32600.
    UnexpectedBatch,
    /// A batch under a revision that removed batching (BATCH-6): -32600.
    BatchNotAllowed {
        /// The negotiated revision.
        version: ProtocolVersion,
    },
    /// `[]` (BATCH-5): -32600.
    EmptyBatch,
    /// More messages in one batch than [`Limits::max_batch_len`](super::Limits::max_batch_len): -32600.
    BatchTooLarge {
        /// The configured limit.
        limit: usize,
    },
}

impl ParseError {
    /// The JSON-RPC error code for the error response.
    pub const fn jsonrpc_code(&self) -> ErrorCode {
        match self {
            Self::Json(_) => ErrorCode::PARSE_ERROR,
            _ => ErrorCode::INVALID_REQUEST,
        }
    }

    /// The HTTP status a server answers a POST body with: always 400 Bad Request
    /// (HTTP-POST, BATCH-6).
    pub const fn status_hint(&self) -> http::StatusCode {
        http::StatusCode::BAD_REQUEST
    }

    /// The id the error response should carry, when the message's id could be read.
    pub const fn id(&self) -> Option<&RequestId> {
        match self {
            Self::Shape(e) => e.id.as_ref(),
            _ => None,
        }
    }

    /// Whether the text is not JSON at all (a syntax error, or bytes that are not UTF-8),
    /// as opposed to JSON that is no valid message or that a limit refused.
    ///
    /// A tool that only looks ([`Classifier::parse_any`](super::Classifier::parse_any),
    /// `mcpwire decode`) says nothing about such text: a priming event's empty data or a
    /// legacy `endpoint` URL is not meant as JSON-RPC. A text nested deeper than
    /// [`Limits::max_depth`](super::Limits::max_depth) is not in this class: it may well
    /// be JSON, and the limit is the reason to give.
    pub const fn is_not_json(&self) -> bool {
        matches!(self, Self::Json(e) if !e.kind.is_limit())
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Json(e) => write!(f, "parse error: {e}"),
            Self::Shape(e) => e.fmt(f),
            Self::UnexpectedBatch => f.write_str("a batch where one message was expected"),
            Self::BatchNotAllowed { version } => {
                write!(f, "batches are not allowed in protocol version {version}")
            }
            Self::EmptyBatch => f.write_str("empty batch"),
            Self::BatchTooLarge { limit } => write!(f, "batch longer than {limit} messages"),
        }
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Json(e) => Some(e),
            Self::Shape(e) => Some(e),
            _ => None,
        }
    }
}

impl From<JsonError> for ParseError {
    fn from(e: JsonError) -> Self {
        Self::Json(e)
    }
}

impl From<ShapeError> for ParseError {
    fn from(e: ShapeError) -> Self {
        Self::Shape(e)
    }
}
