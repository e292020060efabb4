//! What the server hands out: [`Transmit`]s for the driver, [`Event`]s for the
//! application, and the errors of the application's sends.

use std::fmt;

use bytes::Bytes;

use super::ids::{RequestHandle, SessionId};
use crate::Era;
use crate::ProtocolVersion;
use crate::jsonrpc::{self, Envelope, RequestId};

/// The next thing the driver writes for one exchange, from
/// [`Server::poll_transmit`](super::Server::poll_transmit), in order: one `Head`, then
/// `Data` until `End` (or `Abort`).
#[derive(Debug)]
#[must_use]
pub enum Transmit {
    /// The response head (status and headers). Fixed before any body byte, so
    /// `Mcp-Session-Id` always precedes the first event (docs/requirements.md §14.8).
    Head(http::response::Parts),
    /// Body bytes: a JSON body, or one or more whole SSE frames. Write them as they come
    /// and flush: an SSE frame is not buffered in the core (SSE-ENC-10).
    Data(Bytes),
    /// The body is complete: end the response. The exchange is then forgotten.
    End,
    /// The response is cut: close its connection without ending the body (no chunked
    /// terminator, no keep-alive), so that neither the client nor a proxy takes it for
    /// a complete response. A resume took its stream over (RESUME-14): the connection
    /// is presumed dead, and if it is not, its client must not read on. After the head,
    /// if one was queued. The exchange is then forgotten.
    Abort,
}

/// Something for the application, from [`Server::poll_event`](super::Server::poll_event).
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// A client request: answer it with [`Server::respond`](super::Server::respond) or
    /// [`Server::respond_error`](super::Server::respond_error).
    Request(IncomingRequest),
    /// A client notification (`notifications/initialized` included;
    /// `notifications/cancelled` of an open request comes as [`Event::Cancelled`]).
    Notification {
        /// Its session, if the server keeps sessions.
        session: Option<SessionId>,
        /// The message.
        message: Envelope,
    },
    /// The client's response to a request the application sent with
    /// [`Server::request`](super::Server::request), correlated by id within its session.
    Response {
        /// The session the request was sent in.
        session: SessionId,
        /// The response or error response.
        message: Envelope,
    },
    /// A request sent with [`Server::request`](super::Server::request) got no response by
    /// its deadline; a late response is then dropped.
    RequestTimedOut {
        /// The session it was sent in.
        session: SessionId,
        /// Its id.
        id: RequestId,
    },
    /// The client cancelled an open request (`notifications/cancelled`). The server sends
    /// nothing more for it: a later answer is dropped, and its stream no longer waits.
    Cancelled {
        /// The request.
        request: RequestHandle,
        /// The client's reason, if it gave one.
        reason: Option<String>,
    },
    /// A session ended; its open requests are gone (their answers are dropped).
    SessionClosed {
        /// The session.
        session: SessionId,
        /// Why.
        reason: CloseReason,
    },
    /// Another node of the cluster's application announced this
    /// ([`Server::announce`](super::Server::announce)).
    Announced {
        /// What it announced, as it was given.
        payload: Bytes,
    },
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The client sent DELETE (HTTP-DELETE-1).
    Deleted,
    /// No request for the configured idle time (SESSION-7).
    Expired,
    /// The legacy HTTP+SSE stream that carried it disconnected.
    Disconnected,
    /// The application ended it ([`Server::close_session`](super::Server::close_session)).
    Closed,
    /// Its `initialize` was answered with an error.
    InitializeFailed,
    /// The server is shutting down ([`Server::shutdown`](super::Server::shutdown)).
    Shutdown,
    /// The endpoint was full and the session was idle: its place went to a new one
    /// ([`Config::with_max_sessions`](super::Config::with_max_sessions)). Its client gets
    /// 404 and initializes again (SESSION-8).
    Evicted,
}

/// A client request for the application.
#[derive(Debug)]
pub struct IncomingRequest {
    pub(super) handle: RequestHandle,
    pub(super) session: Option<SessionId>,
    pub(super) version: ProtocolVersion,
    pub(super) era: Era,
    pub(super) id: RequestId,
    pub(super) message: Envelope,
}

impl IncomingRequest {
    /// What to answer it with.
    pub fn handle(&self) -> RequestHandle {
        self.handle
    }

    /// Its session, if the server keeps sessions.
    pub fn session(&self) -> Option<SessionId> {
        self.session
    }

    /// The protocol version of the exchange. For `initialize` it is the negotiated one
    /// (JSONRPC-11: the client's offer when supported, else the newest the server
    /// serves): the application's `InitializeResult` must carry it as `protocolVersion`.
    pub fn version(&self) -> ProtocolVersion {
        self.version
    }

    /// The era of the exchange.
    pub fn era(&self) -> Era {
        self.era
    }

    /// The request's method.
    pub fn method(&self) -> &str {
        self.message.method().unwrap_or_default()
    }

    /// The request's id.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The whole message (`params` as raw JSON through [`Envelope::payload`]).
    pub fn message(&self) -> &Envelope {
        &self.message
    }

    /// The message, owned.
    pub fn into_message(self) -> Envelope {
        self.message
    }
}

/// Where a message the application sends goes (docs/requirements.md §14.12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// On the stream of this open request (HTTP-POST-9). Under
    /// [`ResponseMode::Json`](super::ResponseMode::Json) it goes to the session's GET
    /// stream instead.
    Request(RequestHandle),
    /// On the session's standalone GET stream (HTTP-GET-4), or its legacy stream; kept
    /// (bounded) while no GET stream is connected.
    Session(SessionId),
}

/// Why the server did not take a message the application sent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The request is not open: answered, cancelled, or its session ended.
    UnknownRequest,
    /// The session ended or never existed.
    UnknownSession,
    /// There is no stream for it: stateless mode has no session stream, and a JSON
    /// response cannot carry a related message.
    NoStream,
    /// The session's GET stream is not connected and its backlog is full
    /// ([`Config::with_max_backlog`](super::Config::with_max_backlog)).
    BacklogFull,
    /// Too many server→client requests await their response
    /// ([`Config::with_max_server_requests`](super::Config::with_max_server_requests)).
    TooManyRequests,
    /// The revision does not allow it (server→client requests in the sessionless
    /// revision, MODERN-10).
    NotAllowed,
    /// A payload failed to serialize; nothing was sent.
    Encode(jsonrpc::EncodeError),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownRequest => f.write_str("the request is not open"),
            Self::UnknownSession => f.write_str("no such session"),
            Self::NoStream => f.write_str("no stream can carry this message"),
            Self::BacklogFull => f.write_str("the session's GET stream backlog is full"),
            Self::TooManyRequests => f.write_str("too many server requests in flight"),
            Self::NotAllowed => f.write_str("not allowed in this protocol revision"),
            Self::Encode(e) => write!(f, "cannot encode the message: {e}"),
        }
    }
}

impl std::error::Error for SendError {}

impl From<jsonrpc::EncodeError> for SendError {
    fn from(e: jsonrpc::EncodeError) -> Self {
        Self::Encode(e)
    }
}

/// The authorization hook's refusal (SEC-4, SEC-5): the request is answered with its
/// status and, for 401, `WWW-Authenticate` (SEC-6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub(super) status: http::StatusCode,
    pub(super) challenge: Option<String>,
}

impl Refusal {
    /// 401 with `WWW-Authenticate: Bearer resource_metadata="<url>"` (RFC 9728) and, when
    /// given, `scope="<scope>"` (SEC-6). Quotes and backslashes in the values are escaped.
    pub fn unauthorized(resource_metadata: &str, scope: Option<&str>) -> Self {
        let mut challenge = format!(
            "Bearer resource_metadata=\"{}\"",
            quote_escape(resource_metadata)
        );
        if let Some(scope) = scope {
            challenge.push_str(&format!(", scope=\"{}\"", quote_escape(scope)));
        }
        Self {
            status: http::StatusCode::UNAUTHORIZED,
            challenge: Some(challenge),
        }
    }

    /// 403: authenticated, but not allowed (insufficient scope, SEC-5).
    pub fn forbidden() -> Self {
        Self {
            status: http::StatusCode::FORBIDDEN,
            challenge: None,
        }
    }

    /// The status the request is answered with.
    pub fn status(&self) -> http::StatusCode {
        self.status
    }
}

fn quote_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().filter(|c| !c.is_control()) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What the application's response bytes become, reported by
/// [`Server::respond`](super::Server::respond).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// Written (or queued) on a live connection, or collected for a JSON body.
    Sent,
    /// Retained in the stream's replay ring for a client that will resume (RESUME-5).
    Retained,
    /// Nowhere to go: the connection is gone and the stream is not resumable. The client
    /// cannot get it (it learns from the broken stream, RESUME-12).
    Dropped,
    /// Handed to the other nodes of the cluster: the session's GET stream is held by
    /// another node, which writes it (a message for a session whose client holds no GET
    /// stream on any node is dropped there).
    Forwarded,
}

/// The body of one JSON-RPC error as the server writes it into 4xx responses.
pub(super) fn error_body(
    id: Option<&RequestId>,
    code: jsonrpc::ErrorCode,
    message: &str,
    data: Option<&dyn jsonrpc::ToJson>,
) -> Bytes {
    let mut buf = bytes::BytesMut::with_capacity(96 + message.len());
    let outgoing = jsonrpc::Outgoing::Error {
        id,
        code,
        message,
        data,
    };
    // A message without a payload cannot fail to encode; a `data` that fails is left out.
    if outgoing.write(&mut buf).is_err() {
        buf.clear();
        let bare = jsonrpc::Outgoing::Error {
            id,
            code,
            message,
            data: None,
        };
        let _ = bare.write(&mut buf);
    }
    buf.freeze()
}
