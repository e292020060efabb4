//! Refusals and ends: the error answers the server gives at any point (each a status and a
//! JSON-RPC error body), and the heads of the bodies it writes whole.

use std::borrow::Cow;

use bytes::Bytes;
use http::StatusCode;
use http::header::{self, HeaderValue};

use super::Server;
use super::admit::SERVED;
use super::ids::ExchangeId;
use super::modern;
use super::output::{Transmit, error_body};
use super::state::Route;
use crate::ProtocolVersion;
use crate::jsonrpc::{ErrorCode, ParseError, RequestId};
use crate::jsonrpc::{Json, ToJson};

/// A refusal: status, and the JSON-RPC error its body carries.
#[derive(Clone)]
pub(super) struct Refuse {
    status: StatusCode,
    code: ErrorCode,
    message: Cow<'static, str>,
    id: Option<RequestId>,
    /// The error's `data`.
    data: Option<Box<serde_json::Value>>,
    /// `WWW-Authenticate`, for a 401 (SEC-6).
    challenge: Option<String>,
    /// `Allow`, for a 405 (RFC 9110 requires it).
    allow: Option<&'static str>,
}

impl Refuse {
    pub(super) fn new(status: StatusCode, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            status,
            code: BAD_REQUEST,
            message: message.into(),
            id: None,
            data: None,
            challenge: None,
            allow: None,
        }
    }

    pub(super) fn allow(mut self, methods: &'static str) -> Self {
        self.allow = Some(methods);
        self
    }

    pub(super) fn code(mut self, code: ErrorCode) -> Self {
        self.code = code;
        self
    }

    /// The id of the request refused, echoed in the error.
    pub(super) fn id(mut self, id: Option<RequestId>) -> Self {
        self.id = id;
        self
    }

    /// A refused request of the sessionless revision, with its status and code; -32022
    /// names the revisions `served` and the one requested (MODERN-5).
    pub(super) fn modern(invalid: &modern::Invalid, served: &[ProtocolVersion]) -> Self {
        let (status, code) = invalid.status_and_code();
        let mut refuse = Self::new(status, invalid.message()).code(code);
        if let modern::Invalid::Unsupported(requested) = invalid {
            let supported: Vec<&str> = served.iter().map(|v| v.as_str()).collect();
            refuse.data = Some(Box::new(serde_json::json!({
                "supported": supported,
                "requested": requested,
            })));
        }
        refuse
    }

    /// Names the revisions `served` in the error's `data.supported`, as -32022 does
    /// (MODERN-5); an error that has its `data` keeps it. What the sessionless path tells
    /// an `initialize` it refuses, so that a client learns the revisions from any error
    /// to its handshake (MODERN-26).
    pub(super) fn naming(mut self, served: &[ProtocolVersion]) -> Self {
        if self.data.is_none() {
            let supported: Vec<&str> = served.iter().map(|v| v.as_str()).collect();
            self.data = Some(Box::new(serde_json::json!({ "supported": supported })));
        }
        self
    }

    /// The `WWW-Authenticate` challenge of a 401.
    pub(super) fn challenge(mut self, challenge: Option<String>) -> Self {
        self.challenge = challenge;
        self
    }
}

/// -32000, the code the TypeScript SDK gives transport-level refusals ("Bad Request: …").
pub(super) const BAD_REQUEST: ErrorCode = ErrorCode(-32000);

/// -32001, the code the TypeScript SDK gives an unknown session's 404.
pub(super) const SESSION_NOT_FOUND: ErrorCode = ErrorCode(-32001);

/// 400 for a `MCP-Protocol-Version` the endpoint does not serve, naming those it does.
pub(super) fn unsupported_version(requested: &str) -> Refuse {
    let supported: Vec<&str> = SERVED.iter().map(|v| v.as_str()).collect();
    Refuse::new(
        StatusCode::BAD_REQUEST,
        format!(
            "unsupported MCP-Protocol-Version {requested:?} (supported: {})",
            supported.join(", ")
        ),
    )
}

/// 503: the entropy source gave only ids already in use (it is broken).
pub(super) fn no_session_id() -> Refuse {
    Refuse::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "cannot mint a session id: the entropy source repeats",
    )
    .code(ErrorCode::INTERNAL_ERROR)
}

/// 404 for a session id the server does not know (SESSION-7).
pub(super) fn session_not_found() -> Refuse {
    Refuse::new(StatusCode::NOT_FOUND, "session not found").code(SESSION_NOT_FOUND)
}

pub(super) fn parse_refusal(e: &ParseError) -> Refuse {
    Refuse::new(e.status_hint(), e.to_string())
        .code(e.jsonrpc_code())
        .id(e.id().cloned())
}

/// A head with `Content-Type: application/json` and the body's length.
pub(super) fn json_head(status: StatusCode, len: usize) -> http::response::Parts {
    let mut head = empty_head(status);
    head.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    head.headers
        .insert(header::CONTENT_LENGTH, content_length(len));
    head
}

/// `Content-Length`: the digits on the stack, copied once into the value.
pub(super) fn content_length(len: usize) -> HeaderValue {
    HeaderValue::from_str(itoa::Buffer::new().format(len)).unwrap_or(HeaderValue::from_static("0"))
}

/// A head with no body headers.
pub(super) fn empty_head(status: StatusCode) -> http::response::Parts {
    let (mut head, ()) = http::Response::new(()).into_parts();
    head.status = status;
    head
}

impl Server {
    /// Answers `x` with a head and an error body, and ends it.
    pub(super) fn refuse(&mut self, x: ExchangeId, refuse: Refuse) {
        let data = refuse.data.map(|d| Json(*d));
        let body = error_body(
            refuse.id.as_ref(),
            refuse.code,
            &refuse.message,
            data.as_ref().map(|d| d as &dyn ToJson),
        );
        let mut head = json_head(refuse.status, body.len());
        if let Some(challenge) = refuse.challenge
            && let Ok(value) = HeaderValue::from_str(&challenge)
        {
            head.headers.insert(header::WWW_AUTHENTICATE, value);
        }
        if let Some(allow) = refuse.allow {
            head.headers
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        if refuse.status == StatusCode::SERVICE_UNAVAILABLE {
            head.headers
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        self.finish_with(x, head, Some(body));
    }

    /// 503 with `Retry-After`: the server is shutting down.
    pub(super) fn refuse_unavailable(&mut self, x: ExchangeId) {
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.route = Route::Refused;
        }
        self.refuse(
            x,
            Refuse::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is shutting down",
            ),
        );
    }

    /// Queues `head`, the optional body and `End` on `x`.
    pub(super) fn finish_with(
        &mut self,
        x: ExchangeId,
        head: http::response::Parts,
        body: Option<Bytes>,
    ) {
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.responding();
        }
        self.push(x, Transmit::Head(head));
        if let Some(body) = body.filter(|b| !b.is_empty()) {
            self.push(x, Transmit::Data(body));
        }
        self.push(x, Transmit::End);
    }
}
