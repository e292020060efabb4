//! What the client hands out: HTTP requests for the driver, events for the application,
//! and its errors.

use std::fmt;

use bytes::Bytes;

use crate::jsonrpc::{Envelope, RequestId};
use crate::{Era, ProtocolVersion};

/// One HTTP exchange of the client, from [`Client::poll_transmit`](super::Client::poll_transmit)
/// until its response ends or fails. Never reused by one client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeId(pub(super) u64);

impl ExchangeId {
    /// The number, for logs.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ExchangeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// What the driver does next, from [`Client::poll_transmit`](super::Client::poll_transmit).
#[derive(Debug)]
#[must_use]
// A head is moved out once per request; boxing it would cost an allocation each time to
// save a few hundred bytes in a short queue.
#[allow(clippy::large_enum_variant)]
pub enum Transmit {
    /// Send this request; report its response with `handle_head`, `handle_body`,
    /// `handle_body_end`, or `handle_failure`, under `exchange`.
    Request {
        /// The exchange the response belongs to.
        exchange: ExchangeId,
        /// Method, URI and headers.
        head: http::request::Parts,
        /// The body (empty for GET and DELETE).
        body: Bytes,
    },
    /// Stop this exchange: close its response (the client no longer reads it).
    Abort(ExchangeId),
}

/// Something for the application, from [`Client::poll_event`](super::Client::poll_event).
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// The handshake finished: requests may flow.
    Connected {
        /// The negotiated revision.
        version: ProtocolVersion,
        /// The era it belongs to: the transport and whether there is a session.
        era: Era,
        /// The server's `InitializeResult`, or at 2026-07-28 its `DiscoverResult`
        /// (`None` when the server proved modern without one: MODERN-26).
        result: Option<Envelope>,
    },
    /// The handshake failed; the client is closed (no [`Closed`](Self::Closed) follows).
    ConnectFailed(RequestError),
    /// A new session was initialized after [`SessionExpired`](Self::SessionExpired)
    /// (with [`Config::with_reinitialize`](super::Config::with_reinitialize)): the
    /// [`Connected`](Self::Connected) of a re-initialization, which the application
    /// must tell from the first (the new session knows nothing of the old one).
    Reconnected {
        /// The revision negotiated with the new session.
        version: ProtocolVersion,
        /// Its era.
        era: Era,
        /// The server's `InitializeResult`.
        result: Option<Envelope>,
    },
    /// The re-initialization after [`SessionExpired`](Self::SessionExpired) failed; the
    /// client is closed (no [`Closed`](Self::Closed) follows).
    ReconnectFailed(RequestError),
    /// The response to a request, matched by id (JSONRPC-4).
    Response(Envelope),
    /// A request ended without a response.
    Failed {
        /// Its id.
        id: RequestId,
        /// Why.
        error: RequestError,
    },
    /// A server notification, in stream order.
    Notification(Envelope),
    /// A server→client request: answer with
    /// [`Client::respond`](super::Client::respond) or
    /// [`Client::respond_error`](super::Client::respond_error). (A `ping` is answered
    /// by the client itself, and never comes here.)
    Request(Envelope),
    /// The standalone GET stream could not be resumed (the server refused, or the
    /// attempts ran out): server messages sent since its last event may be lost. A fresh
    /// GET stream is opened after a backoff.
    StreamReset {
        /// Why the resume failed.
        error: RequestError,
    },
    /// The server ended the session (404, SESSION-8); every request in flight failed. The
    /// client re-initializes if configured to, else it is closed.
    SessionExpired,
    /// A tool the server listed at 2026-07-28 was dropped from the `tools/list` result
    /// the application gets: its `x-mcp-header` annotations are invalid, so its calls
    /// could not carry the headers they must (MODERN-7). For the application's log.
    ToolDropped {
        /// The tool's name.
        tool: String,
        /// What is wrong with its annotations.
        reason: String,
    },
    /// The client is closed: after [`Client::close`](super::Client::close), or an expired
    /// session without re-initialization. (A failed handshake closes it too, reported
    /// as [`ConnectFailed`](Self::ConnectFailed) alone.)
    Closed,
}

/// What an adapter's client hands its application besides answers: what the server sent
/// on its own (a notification, a server→client request), and what became of the session
/// and of its standalone GET stream, in the order the core reported them. Both adapters'
/// `McpClient`s send these on the receiver their `connect` returns.
///
/// The lifecycle variants are the core's events, forwarded: the adapter decides nothing.
/// [`SessionExpired`](Self::SessionExpired) and [`StreamReset`](Self::StreamReset) say
/// that the server forgot something the application may have set up or missed, so the
/// application can do it again.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerMessage {
    /// A notification (progress, logging, list changes, …).
    Notification(Envelope),
    /// A server→client request: answer it with the client's `respond` or
    /// `respond_error` (a `ping` is answered by the client core, and never comes here).
    Request(Envelope),
    /// The server ended the session: a request that carried its id was answered 404
    /// (SESSION-8), or, on the legacy transport, the session's stream ended.
    ///
    /// Every call in flight when it ended was answered with
    /// [`RequestError::SessionExpired`] before this was sent (a waiting caller is woken
    /// with it); the messages before this one came from the ended session.
    ///
    /// With [`Config::with_reinitialize`](super::Config::with_reinitialize) the client
    /// initializes a new session at once, and exactly one of
    /// [`Reconnected`](Self::Reconnected) and [`ReconnectFailed`](Self::ReconnectFailed)
    /// follows (unless the application closes the client first). Calls made after the
    /// session ended wait for that handshake and go out on the new session as soon as it
    /// is initialized, possibly before `Reconnected` is received. The new session knows
    /// nothing of the old one (subscriptions, the log level, anything the application set
    /// up): do that again on `Reconnected`. Without re-initialization the client is
    /// closed: later calls fail as calls on a closed client do.
    SessionExpired,
    /// A new session was initialized after [`SessionExpired`](Self::SessionExpired)
    /// (never for the handshake of `connect`). The client's `version` and `era`
    /// return these from now on.
    #[non_exhaustive]
    Reconnected {
        /// The revision negotiated with the new session.
        version: ProtocolVersion,
        /// The era of the new session.
        era: Era,
    },
    /// The re-initialization after [`SessionExpired`](Self::SessionExpired) failed, with
    /// the error `connect` would have returned; the client is closed. The calls that
    /// waited for it were answered with [`RequestError::Closed`] before this was sent;
    /// later calls fail as calls on a closed client do.
    ReconnectFailed(RequestError),
    /// The standalone GET stream broke and could not be resumed: the server refused the
    /// resume ([`RequestError::ResumeFailed`] with its status, e.g. 400 when the events
    /// after the last id received are no longer retained), or the attempts ran out
    /// (`ResumeFailed` with status 0). Server messages sent on it since the last one
    /// received may be lost: re-sync what depends on them (list resources, tools or
    /// prompts again, …). The session goes on; the client opens a fresh GET stream after
    /// a backoff, and what that stream carries arrives after this. (A POST stream that
    /// cannot be resumed fails its own calls instead.)
    StreamReset(RequestError),
    /// A tool listed at 2026-07-28 was dropped from the `tools/list` result: its
    /// `x-mcp-header` annotations are invalid (MODERN-7), and its calls are refused. For
    /// the application's log.
    ToolDropped {
        /// The tool's name.
        tool: String,
        /// What is wrong with its annotations.
        reason: String,
    },
}

/// Why a request (or the handshake) got no response.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// Its deadline passed; `notifications/cancelled` was sent.
    Timeout,
    /// The application cancelled it.
    Cancelled,
    /// The session ended (SESSION-8).
    SessionExpired,
    /// Its stream broke before the response, with no event id to resume from (RESUME-12):
    /// the server took the request and may have run it.
    StreamLost,
    /// At 2026-07-28, where nothing resumes a response (MODERN-11, MODERN-12), the
    /// request's exchange broke (or the server ended it) before its answer: the request is
    /// lost, and `reached` says whether it may have run. The client never sends it again
    /// by itself: re-issue it, under a new id, where running it twice is safe.
    Broken {
        /// How far the request got.
        reached: Reached,
    },
    /// Its stream could not be resumed: the server refused the resume (a gap: the
    /// messages are no longer retained, or another refusal), or the attempts ran out.
    ResumeFailed {
        /// The HTTP status of the refusal (0 when the attempts ran out).
        status: u16,
        /// The server's message, if it gave one.
        message: String,
    },
    /// 401: the server wants authorization (SEC-5); `challenge` is its
    /// `WWW-Authenticate` value (SEC-6: `Bearer resource_metadata="…"`), where the
    /// application learns how to obtain a token.
    Unauthorized {
        /// The `WWW-Authenticate` header, if the server sent one.
        challenge: Option<String>,
    },
    /// The server answered the POST with an error status.
    Http {
        /// The status.
        status: u16,
        /// The JSON-RPC error message of the body, if it had one.
        message: String,
    },
    /// The server's answer could not be read (not JSON, not the announced type, too
    /// large, no response for the request in a JSON body).
    BadResponse(String),
    /// The client was closed.
    Closed,
    /// The application answered one of the server's input requests for this call
    /// with an error (MODERN-23): the call cannot go on without that input.
    InputRefused {
        /// The error's code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// The request could not be sent as its revision needs (a mirrored argument whose
    /// value no header can carry, say: MODERN-7); nothing was sent.
    Unsendable(String),
    /// The server speaks no revision this client may: it listed `offered` (empty when
    /// it answered with nothing a revision could be read from, such as a session-era
    /// server's answer to a client pinned to 2026-07-28).
    NoCommonRevision {
        /// The revisions the server listed, as it wrote them.
        offered: Vec<String>,
    },
    /// The handshake's request got no response at all: the connection could not be made
    /// or broke first (refused, reset, unreachable). The text is the driver's cause
    /// ([`Client::handle_failure_with`](super::Client::handle_failure_with)).
    Connection(String),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("the request timed out"),
            Self::Cancelled => f.write_str("the request was cancelled"),
            Self::SessionExpired => f.write_str("the session expired"),
            Self::StreamLost => f.write_str(
                "the stream broke before the response, with no event id to resume from (the \
                 server may have run the request)",
            ),
            Self::Broken {
                reached: Reached::Server,
            } => f.write_str(
                "the response broke off before the answer: the server took the request and may \
                 have run it (re-issue it only if running it twice is safe)",
            ),
            Self::Broken {
                reached: Reached::Unknown,
            } => f.write_str(
                "the connection broke before the server answered: the request may not have \
                 reached it, or may have run (re-issue it only if running it twice is safe)",
            ),
            Self::ResumeFailed { status: 0, .. } => {
                f.write_str("the stream could not be resumed: attempts exhausted")
            }
            Self::ResumeFailed { status, message } => {
                write!(f, "the server refused the resume ({status}): {message}")
            }
            Self::Unauthorized { challenge: Some(c) } => write!(f, "unauthorized: {c}"),
            Self::Unauthorized { challenge: None } => f.write_str("unauthorized"),
            Self::Http { status, message } => write!(f, "http {status}: {message}"),
            Self::BadResponse(why) => write!(f, "unreadable response: {why}"),
            Self::Closed => f.write_str("the client is closed"),
            Self::InputRefused { code, message } => {
                write!(
                    f,
                    "the server's input request was answered with error {code}: {message}"
                )
            }
            Self::Unsendable(why) => write!(f, "the request could not be sent: {why}"),
            Self::NoCommonRevision { offered } if offered.is_empty() => {
                f.write_str("the server does not speak the revision this client is limited to")
            }
            Self::NoCommonRevision { offered } => write!(
                f,
                "the server offers no revision this client speaks: it offered {}",
                offered.join(", ")
            ),
            Self::Connection(cause) => write!(f, "no connection to the server: {cause}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// How far a request got before its exchange broke ([`RequestError::Broken`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reached {
    /// No response head came: the request may not have reached the server, or it may have
    /// been received and run.
    Unknown,
    /// The server answered with a head (its response had begun): it took the request, and
    /// may have run it, in part or in whole.
    Server,
}

/// Why the client did not take a message from the application.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// Too many requests in flight.
    TooMany,
    /// Not connected yet (notifications and answers wait for the handshake) or closed.
    NotConnected,
    /// A payload failed to serialize.
    Encode(crate::jsonrpc::EncodeError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooMany => f.write_str("too many requests in flight"),
            Self::NotConnected => f.write_str("not connected"),
            Self::Encode(e) => write!(f, "cannot encode the message: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<crate::jsonrpc::EncodeError> for ClientError {
    fn from(e: crate::jsonrpc::EncodeError) -> Self {
        Self::Encode(e)
    }
}
