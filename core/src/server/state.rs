//! The server's records: exchanges, sessions, streams, open requests and timers. Plain
//! data; the decisions are in the modules beside it.

use std::collections::{BTreeSet, VecDeque};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::head::McpHeaders;
use super::ids::{ExchangeId, RequestHandle, SessionId, StreamId};
use super::output::{Era, Transmit};
use crate::ProtocolVersion;
use crate::jsonrpc::RequestId;
use crate::resume::RingId;

/// What an exchange's head asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// POST to the MCP endpoint.
    Post,
    /// GET on the MCP endpoint (a new standalone stream, or a resume).
    Get,
    /// GET on the legacy SSE path: a legacy HTTP+SSE session and its stream.
    LegacyStream,
    /// DELETE on the MCP endpoint.
    Delete,
    /// POST to the legacy messages path, for this session.
    LegacyPost(SessionId),
    /// Already answered at the head (a refusal); the body is ignored.
    Refused,
}

/// Where an exchange is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Taking the request body.
    Body,
    /// The body is complete and its messages are being handed out; answers and
    /// cancellations during this are counted when it ends.
    Dispatching,
    /// The body was dispatched; the head waits for the application (JSON, or the first
    /// related message under `ResponseMode::Auto`).
    Awaiting,
    /// The head is queued; body bytes follow (an SSE stream, or a JSON body and `End`).
    Responding,
}

/// One HTTP exchange.
#[derive(Debug)]
pub(super) struct Exchange {
    pub(super) route: Route,
    pub(super) phase: Phase,
    /// The MCP headers of its head.
    pub(super) headers: McpHeaders,
    /// The session the exchange was admitted to (validated), if any.
    pub(super) session: Option<SessionId>,
    pub(super) body: BytesMut,
    /// Body chunks beyond the first are copied into `body`; the first is kept as is.
    pub(super) first_chunk: Option<Bytes>,
    pub(super) body_len: usize,
    /// The transmits not yet taken by the driver.
    pub(super) out: VecDeque<Transmit>,
    /// Bytes of `Data` in `out`.
    pub(super) unsent: usize,
    /// In the ready queue, or about to be.
    pub(super) readied: bool,
    /// `End` is queued: nothing more is added.
    pub(super) ended: bool,
    /// The SSE stream this exchange is the live connection of.
    pub(super) stream: Option<StreamId>,
    /// Responses owed by this exchange's body that will be written as its JSON body.
    pub(super) json_owed: usize,
    /// The JSON texts collected for the body, in answer order.
    pub(super) json: Vec<Bytes>,
    /// Whether the body was a batch (the JSON body is then an array, BATCH-3).
    pub(super) batch: bool,
    /// The open requests this exchange's body made.
    pub(super) requests: Vec<RequestHandle>,
    pub(super) last_write: Instant,
    /// When an awaiting POST turns into a stream, while its entry is in the timers (it is
    /// taken out as soon as a head is queued, so an answer given at once leaves none).
    pub(super) stream_after: Option<Instant>,
}

impl Exchange {
    pub(super) fn new(route: Route, headers: McpHeaders, now: Instant) -> Self {
        Self {
            route,
            phase: Phase::Body,
            headers,
            session: None,
            body: BytesMut::new(),
            first_chunk: None,
            body_len: 0,
            out: VecDeque::new(),
            unsent: 0,
            readied: false,
            ended: false,
            stream: None,
            json_owed: 0,
            json: Vec::new(),
            batch: false,
            requests: Vec::new(),
            last_write: now,
            stream_after: None,
        }
    }
}

/// Whether a session's client came back after `initialize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Handshake {
    /// Minted by `initialize`; its client has sent nothing on it since. It lives
    /// `Config::with_handshake_timeout` without a request, not the full idle time, so
    /// that bare `initialize` requests cannot hold the session table.
    Pending,
    /// Its client came back (`notifications/initialized`, or any other request), or it
    /// is a legacy session, held by its stream.
    Complete,
}

/// One session.
#[derive(Debug)]
pub(super) struct Session {
    /// The `Mcp-Session-Id` value (32 lowercase hex digits).
    pub(super) wire: Box<str>,
    /// The same id as a header value, made once.
    pub(super) header: http::HeaderValue,
    pub(super) version: ProtocolVersion,
    pub(super) legacy: bool,
    /// `initialize` was received (a second one is refused, SESSION-11).
    pub(super) initialized: bool,
    /// The address of the peer that made it, when the driver said
    /// ([`PeerAddr`](super::PeerAddr)).
    pub(super) peer: Option<std::net::IpAddr>,
    pub(super) handshake: Handshake,
    pub(super) last_active: Instant,
    /// The idle deadline in the timer index, if one is.
    pub(super) idle_timer: Option<Instant>,
    /// Exchanges admitted to the session and not yet ended.
    pub(super) exchanges: usize,
    /// Client requests open (handed to the application, not yet answered).
    pub(super) open_requests: usize,
    /// The session's GET (or legacy) stream.
    pub(super) get: Option<StreamId>,
    /// Every stream of the session.
    pub(super) streams: BTreeSet<StreamId>,
    /// Server→client requests awaiting a response.
    pub(super) server_requests: BTreeSet<RequestId>,
}

/// What kind of SSE stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StreamKind {
    /// A POST's response stream; `owed` responses remain.
    Post { owed: usize },
    /// The session's standalone GET stream.
    Get,
    /// A legacy HTTP+SSE stream (its session's only stream).
    Legacy,
}

/// One SSE stream: the logical stream, which outlives its connections when resumable.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) session: Option<SessionId>,
    pub(super) kind: StreamKind,
    pub(super) ring: Option<RingId>,
    /// The live connection.
    pub(super) conn: Option<ExchangeId>,
    /// Frames for the GET stream not yet handed to any connection (the backlog).
    pub(super) backlog: VecDeque<Bytes>,
    /// Every response it owed was sent: the stream is finished and lingers for resumes.
    pub(super) done: bool,
    /// Whether priming events go on it (2025-11-25 sessions, RESUME-8).
    pub(super) primed: bool,
}

/// Where a request id must be unique (JSONRPC-3): its session, or, with no session,
/// the exchange whose body carried it. Sessions order before exchanges, so a session's
/// requests are one range of the id index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Scope {
    /// The session's requests.
    Session(SessionId),
    /// A request without a session.
    Exchange(ExchangeId),
}

/// An open client request.
#[derive(Debug)]
pub(super) struct OpenRequest {
    /// The session, or for stateless servers none.
    pub(super) session: Option<SessionId>,
    /// The scope its id is unique in.
    pub(super) scope: Scope,
    pub(super) id: RequestId,
    /// The exchange whose body carried it (gone after a disconnect).
    pub(super) exchange: Option<ExchangeId>,
    /// The stream that owes its response, once one is open.
    pub(super) stream: Option<StreamId>,
    pub(super) era: Era,
    pub(super) initialize: bool,
}

/// What a timer entry is for. Entries are checked against the record when they fire,
/// so a stale one is skipped (each record keeps at most one entry of each kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Timer {
    /// A connection's heartbeat (SSE-ENC-7).
    Heartbeat(ExchangeId),
    /// SEP-1699 polling: close a connection (RESUME-9).
    PollClose(ExchangeId),
    /// An awaiting POST is answered as a stream (RESUME-15, `Config::with_stream_after`).
    StreamAfter(ExchangeId),
    /// A session's idle deadline (SESSION-7).
    Idle(SessionId),
    /// A finished stream's frames may go (docs/requirements.md §14.2).
    Linger(StreamId),
}
