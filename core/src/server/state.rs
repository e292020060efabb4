//! The server's records: exchanges, sessions, streams, open requests and timers. Plain
//! data; the decisions are in the modules beside it.

use std::collections::{BTreeSet, VecDeque};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::head::McpHeaders;
use super::ids::{ExchangeId, RequestHandle, SessionId, StreamId};
use super::output::Transmit;
use crate::Era;
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
    /// POST to the legacy messages path naming a session this node does not hold
    /// (cluster nodes): parked while its record is loaded, then a `LegacyPost`.
    LegacyUnseen,
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
    /// `End` or `Abort` is queued: nothing more is added.
    Ended,
    /// The body is complete, kept while the session it names is loaded from the shared
    /// store ([`Exchange::parked`]); dispatched when the answer comes.
    Parked,
}

/// A request body as it arrives.
#[derive(Debug, Default)]
pub(super) enum Body {
    /// No byte yet.
    #[default]
    Empty,
    /// One chunk, kept as it came (the usual body: no copy).
    One(Bytes),
    /// Several chunks, copied into one buffer.
    Gathered(BytesMut),
}

impl Body {
    /// Adds a chunk.
    pub(super) fn push(&mut self, chunk: Bytes) {
        *self = match std::mem::take(self) {
            Self::Empty => Self::One(chunk),
            Self::One(first) => {
                let mut all = BytesMut::with_capacity(first.len() + chunk.len());
                all.extend_from_slice(&first);
                all.extend_from_slice(&chunk);
                Self::Gathered(all)
            }
            Self::Gathered(mut all) => {
                all.extend_from_slice(&chunk);
                Self::Gathered(all)
            }
        };
    }

    /// The whole body, leaving none.
    pub(super) fn take(&mut self) -> Bytes {
        match std::mem::take(self) {
            Self::Empty => Bytes::new(),
            Self::One(one) => one,
            Self::Gathered(all) => all.freeze(),
        }
    }
}

/// What an exchange's response carries.
#[derive(Debug, Default)]
pub(super) enum Carries {
    /// Nothing that is still being written for it: not yet decided, a whole body, or a
    /// stream connection that was let go.
    #[default]
    Nothing,
    /// A JSON body, written when `owed` reaches 0: the answers so far, in answer order;
    /// an array when the request was a batch (BATCH-3); under `status` (200, or the
    /// status a sessionless request's error calls for, MODERN-9).
    Json {
        owed: usize,
        parts: Vec<Bytes>,
        batch: bool,
        status: http::StatusCode,
    },
    /// The SSE stream this exchange is the live connection of.
    Stream(StreamId),
}

impl Carries {
    /// The stream it is the live connection of, if any.
    pub(super) fn stream(&self) -> Option<StreamId> {
        match self {
            Self::Stream(t) => Some(*t),
            _ => None,
        }
    }

    /// Lets go of the stream it is the connection of, if any.
    pub(super) fn take_stream(&mut self) -> Option<StreamId> {
        let t = self.stream()?;
        *self = Self::Nothing;
        Some(t)
    }
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
    pub(super) body: Body,
    /// Bytes of body so far, against `Config::with_max_body`.
    pub(super) body_len: usize,
    /// The transmits not yet taken by the driver.
    pub(super) out: VecDeque<Transmit>,
    /// Bytes of `Data` in `out`.
    pub(super) unsent: usize,
    /// In the ready queue, or about to be.
    pub(super) readied: bool,
    /// What its response carries.
    pub(super) carries: Carries,
    /// The open requests this exchange's body made.
    pub(super) requests: Vec<RequestHandle>,
    pub(super) last_write: Instant,
    /// When an awaiting POST turns into a stream, while its entry is in the timers (it is
    /// taken out as soon as a head is queued, so an answer given at once leaves none).
    pub(super) stream_after: Option<Instant>,
    /// Its stream's next heartbeat and polling close, while their entries are in the
    /// timers: taken out with the exchange, so a gone exchange leaves no deadline.
    pub(super) beats: Beats,
    /// It names a session this node does not hold, which is being loaded from the shared
    /// store: its head is served once the answer comes (cluster nodes only).
    pub(super) parked: bool,
}

/// The deadlines a streaming exchange holds in the timers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Beats {
    pub(super) heartbeat: Option<Instant>,
    pub(super) poll_close: Option<Instant>,
}

impl Exchange {
    /// Its head is about to be queued (an exchange already ended stays so).
    pub(super) fn responding(&mut self) {
        if self.phase != Phase::Ended {
            self.phase = Phase::Responding;
        }
    }

    pub(super) fn new(route: Route, headers: McpHeaders, now: Instant) -> Self {
        Self {
            route,
            phase: Phase::Body,
            headers,
            session: None,
            body: Body::Empty,
            body_len: 0,
            out: VecDeque::new(),
            unsent: 0,
            readied: false,
            carries: Carries::Nothing,
            requests: Vec::new(),
            last_write: now,
            stream_after: None,
            beats: Beats::default(),
            parked: false,
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

/// What a cluster node keeps of a session it shares (see [`super::cluster`]).
#[derive(Debug)]
pub(super) struct Shared {
    /// The node that minted it.
    pub(super) home: crate::resume::Epoch,
    /// When its record was last written or touched.
    pub(super) touched: Instant,
    /// Its touch deadline in the timer index, if one is.
    pub(super) touch_timer: Option<Instant>,
}

/// One session.
#[derive(Debug)]
pub(super) struct Session {
    /// The `Mcp-Session-Id` value (32 lowercase hex digits).
    pub(super) wire: std::sync::Arc<str>,
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
    /// On a cluster node, a session it shares (boxed: alone, a server pays a word).
    pub(super) shared: Option<Box<Shared>>,
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
    /// Another node's ring, followed through the shared store for a resume (see
    /// [`super::cluster`]): `next` is the sequence number of the next frame to hand on;
    /// `opening` until the replay came.
    Follow {
        ring: super::cluster::RingKey,
        next: u64,
        opening: bool,
        /// How many times the ring was asked for (`Config::with_store_grace`).
        asked: u32,
    },
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
    /// The sequence number its live connection resumed after (`None`: the connection it
    /// began with). A cluster's take-over of the ring from an earlier point is stale and
    /// does not cut it.
    pub(super) since: Option<u64>,
}

impl Stream {
    /// Finished, read by no connection, its frames kept for a resume (until its linger
    /// passes, or a newer stream needs its place).
    pub(super) fn lingers(&self) -> bool {
        self.done && self.conn.is_none() && self.ring.is_some()
    }
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
    /// A shared session's record is touched while it is in use here (cluster nodes).
    Touch(SessionId),
    /// A session not found in the store is asked for again (`Config::with_store_grace`);
    /// the number keys the load.
    Reload(u64),
    /// A followed ring that did not reach the client's id is asked for again.
    Refollow(StreamId),
}
