//! Several nodes, one endpoint: what a [`Server`] that is one node of a
//! cluster shares with the others through a store it never touches itself.
//!
//! Behind a load balancer without sticky routing, every request of a session may land on
//! another node. A node configured with [`Config::with_node`](super::Config::with_node)
//! therefore keeps, beside its own state, a durable record of each session in a shared
//! store, and the frames of each resumable stream in that store too. The core still does
//! no IO: the store work is an output, [`StoreOp`], which the driver takes with
//! [`Server::poll_store`](super::Server::poll_store) and performs (on Redis in
//! `mcpwire-redis`, or in a test's map), and what came of it is an input,
//! [`StoreInput`], handed back with [`Server::handle_store`](super::Server::handle_store).
//! A server without a node (the default) emits no store work at all.
//!
//! # What is shared, and how
//!
//! - **Sessions.** A session minted on one node is written to the store as a record
//!   (its protocol version, its transport, whether its client came back after
//!   `initialize`, and its *home*: the node that minted it). A request naming a session
//!   this node does not hold waits while the record is loaded ([`StoreOp::LoadSession`]);
//!   the node then holds a copy and serves it as its own. Only a session gone from the
//!   store is 404 (SESSION-7). The record lives [`Config::with_session_idle`](super::Config::with_session_idle) past the
//!   last request on any node (refreshed by [`StoreOp::TouchSession`], at most every
//!   quarter of that time, and living a quarter longer so it never expires early), or
//!   [`Config::with_handshake_timeout`](super::Config::with_handshake_timeout) while its handshake is pending. A node that lets
//!   its copy go (idle here, or evicted to make room) only forgets the copy. DELETE on any
//!   node ends the session everywhere: its record and rings are deleted
//!   ([`StoreOp::DeleteSession`]) and every node is told.
//! - **Legacy HTTP+SSE sessions** (2024-11-05) have a record too, but their stream cannot
//!   move: the node that minted the session holds it. A POST to the messages path on
//!   another node is parsed there, answered 202, and relayed as a notice to the node
//!   that holds the stream, which handles it as its own POST and answers on the stream
//!   (LEGACY-4). The session ends everywhere when its stream ends.
//! - **Streams.** Every frame of a resumable stream is appended to its ring in the store
//!   too ([`StoreOp::Append`]), in order, as it is written; the node that opened the
//!   stream is the ring's only writer, and event ids carry that node's
//!   [`Epoch`] (the node's number in its top 16 bits: unique across the cluster and
//!   across restarts). A resume naming another node's ring is served by *following*
//!   that ring ([`StoreOp::Follow`]): its frames after the id are replayed from the store,
//!   then the ring's new frames are relayed as the writer appends them, until the ring
//!   is finished ([`StoreOp::Finish`]) or the connection ends. Ids within a ring are
//!   consecutive, so a frame seen twice is dropped and a hole (a write that failed) ends
//!   the connection, and the client's next resume is told of the gap: nothing is replayed
//!   that was half-written, nothing is delivered twice.
//! - **Writes behind.** A node answers before its writes land (a write-through would
//!   cost every request a round trip), so a client's next request, on another node, may
//!   come before them: a session not found, or a ring that does not reach the client's
//!   id, is asked for again (after 25 ms, then twice as long each time) within
//!   [`Config::with_store_grace`](super::Config::with_store_grace), 1 s by default,
//!   before it is taken for gone (404) or never issued (400).
//! - **Notices.** A resume wins over a connection its stream still has (RESUME-14) on
//!   every node: the resuming node publishes a take-over, and whichever node holds a
//!   connection of that ring cuts it. A session ended on one node ends on all.
//!   Notices are opaque bytes ([`StoreOp::Publish`]) that the driver hands to every node
//!   (itself included: a node ignores its own) with [`StoreInput::Notice`].
//!
//! # The driver's contract
//!
//! - Perform the ops in the order they were polled, at least per session, so that a
//!   ring's appends arrive in order and a session's record is written before it is
//!   deleted. Writes need no answer; a failed write is reported by what later reads see
//!   (a hole, a missing record), never repaired by the core.
//! - Answer each [`StoreOp::LoadSession`] with one [`StoreInput::Session`], and each
//!   [`StoreOp::Follow`] with one [`StoreInput::Replayed`] and then, until it ends or
//!   [`StoreOp::Unfollow`] is polled for it, [`StoreInput::Followed`] for the frames as
//!   they come and one [`StoreInput::FollowEnded`] once the ring is finished. Keep each
//!   node's liveness in the store and tell a follower when its ring's writer is gone
//!   ([`StoreInput::WriterGone`]): a node killed mid-stream leaves rings that will never
//!   finish, and their clients must learn it rather than wait.
//! - When the store cannot be reached, answer reads with [`StoreUnavailable`]: the
//!   request that needed it gets 503 with a JSON-RPC error, and nothing else stops.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;

use super::Server;
use super::head::SessionHeader;
use super::ids::{ExchangeId, SessionId, StreamId};
use super::output::{CloseReason, Transmit};
use super::refuse::Refuse;
use super::state::{
    self, Carries, Handshake, Phase, Route, Scope, Shared, Stream, StreamKind, Timer,
};
use crate::ProtocolVersion;
use crate::jsonrpc::Envelope;
use crate::resume::{Epoch, EventId, EventStore, RingId};

/// A node's number in its cluster (`mcpwire serve --node-id`): the top 16 bits of the
/// [`Epoch`] of every event id it issues, so no two nodes issue the same id, whatever
/// their random bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u16);

impl NodeId {
    /// The node numbered `n`.
    pub const fn new(n: u16) -> Self {
        Self(n)
    }

    /// Its number.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// The epoch of this node's ids: its number above 48 random bits (`random`'s low
    /// bits; the rest are dropped).
    pub const fn epoch(self, random: u64) -> Epoch {
        Epoch::new((self.0 as u64) << 48 | (random & ((1 << 48) - 1)))
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}", self.0)
    }
}

/// One ring in a cluster: the [`Epoch`] of the node that writes it and its number there.
/// Written `<epoch>:<ring>` in lowercase hex, as the first two fields of its event ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RingKey {
    /// The writer's epoch.
    pub epoch: Epoch,
    /// The ring's number in that epoch.
    pub ring: RingId,
}

impl RingKey {
    /// The ring of event `id`.
    pub const fn of(id: EventId) -> Self {
        Self {
            epoch: id.epoch(),
            ring: id.ring(),
        }
    }

    /// The id of its event `seq`.
    pub const fn event(self, seq: u64) -> EventId {
        EventId::new(self.epoch, self.ring, seq)
    }
}

impl fmt::Display for RingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}:{:x}", self.epoch.get(), self.ring.get())
    }
}

/// Store work for the driver, in the order it must be done (see the
/// [module docs](self)). Session ids are the `Mcp-Session-Id` values, 32 lowercase hex
/// digits, safe in any key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreOp {
    /// Writes (creates or replaces) `session`'s record, which lives `ttl` unless written
    /// or touched again.
    PutSession {
        /// The session id.
        session: Arc<str>,
        /// The record, opaque to the driver.
        record: Bytes,
        /// How long it lives.
        ttl: Duration,
    },
    /// `session` is in use: its record and its rings live `ttl` more from now.
    TouchSession {
        /// The session id.
        session: Arc<str>,
        /// How long they live from now.
        ttl: Duration,
    },
    /// Reads `session`'s record; answer with [`StoreInput::Session`].
    LoadSession {
        /// The session id.
        session: Arc<str>,
    },
    /// `session` ended: deletes its record and every ring of it.
    DeleteSession {
        /// The session id.
        session: Arc<str>,
    },
    /// Appends event `id`'s frame to its ring ([`RingKey::of`]) of `session`, after the
    /// ring's earlier frames. The driver keeps about `keep` of a ring's newest frames
    /// (more is allowed, never fewer) and lets a ring go `ttl` after its last append.
    /// When `announce`, another node follows the ring: the driver wakes its followers
    /// once the frame is stored (see [`StoreOp::Wake`]).
    Append {
        /// The session id.
        session: Arc<str>,
        /// The event's id: its ring and its place in it.
        id: EventId,
        /// The encoded SSE frame, as written to the socket.
        frame: Bytes,
        /// How many frames a ring keeps.
        keep: usize,
        /// How long a ring lives after its last append.
        ttl: Duration,
        /// Whether another node follows the ring.
        announce: bool,
    },
    /// Another node follows ring `ring` of `session` (it took the ring's stream over):
    /// the driver wakes the ring's followers now, so they read what was stored before
    /// the writer learnt of them, and after every later [`StoreOp::Append`] and
    /// [`StoreOp::Finish`] of it (which then say `announce`).
    Wake {
        /// The session id.
        session: Arc<str>,
        /// The ring.
        ring: RingKey,
    },
    /// Ring `ring` of `session` is finished: `next` is the sequence number after its last
    /// frame. Its followers end once they have handed every frame before it.
    Finish {
        /// The session id.
        session: Arc<str>,
        /// The ring.
        ring: RingKey,
        /// The sequence number after its last frame.
        next: u64,
        /// Whether another node follows the ring.
        announce: bool,
    },
    /// Replays the frames of `after`'s ring of `session` that follow `after`, then
    /// follows the ring: answer with [`StoreInput::Replayed`], then
    /// [`StoreInput::Followed`] and [`StoreInput::FollowEnded`], for `stream`.
    Follow {
        /// Names this follow in the answers.
        stream: StreamId,
        /// The session id.
        session: Arc<str>,
        /// The client's `Last-Event-ID`.
        after: EventId,
    },
    /// Stops following for `stream`: its connection ended. Nothing more is to be handed
    /// for it (any answer that still comes is ignored).
    Unfollow {
        /// The follow.
        stream: StreamId,
    },
    /// Hands `notice` to every node, this one included, with [`StoreInput::Notice`].
    Publish {
        /// The notice, opaque to the driver.
        notice: Bytes,
    },
}

/// The store could not be reached (or answered an error): the read that needed it fails,
/// and the request waiting for it is answered 503.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreUnavailable;

impl fmt::Display for StoreUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the shared store is unavailable")
    }
}

impl std::error::Error for StoreUnavailable {}

/// What came of store work, handed back with
/// [`Server::handle_store`](super::Server::handle_store).
#[derive(Debug)]
pub enum StoreInput<'a> {
    /// The answer to [`StoreOp::LoadSession`]: the record, or `None` when the store has
    /// none (the session ended, expired, or never existed).
    Session {
        /// The session id asked for.
        session: &'a str,
        /// What the store holds.
        record: Result<Option<&'a [u8]>, StoreUnavailable>,
    },
    /// The first answer to [`StoreOp::Follow`]: what follows its id, built with
    /// [`Replay::from_window`](crate::resume::Replay::from_window) from the frames the
    /// store holds after it (the run after the last hole, if there is one), or
    /// [`Replay::UnknownRing`](crate::resume::Replay::UnknownRing) when the store has no
    /// such ring of that session.
    Replayed {
        /// The follow.
        stream: StreamId,
        /// The replay.
        replay: Result<crate::resume::Replay<'a>, StoreUnavailable>,
    },
    /// Frames the writer appended since: `first` is the id of `frames[0]`, the rest follow
    /// it in order. Frames already handed are skipped; a hole ends the connection.
    Followed {
        /// The follow.
        stream: StreamId,
        /// The id of the first frame.
        first: EventId,
        /// The frames.
        frames: &'a [Bytes],
    },
    /// The followed ring is finished ([`StoreOp::Finish`]) before event `next`.
    FollowEnded {
        /// The follow.
        stream: StreamId,
        /// The sequence number after the ring's last frame.
        next: u64,
    },
    /// The node that writes the followed ring is gone (its liveness lapsed in the
    /// store) and the ring is not finished: no frame will follow what is stored. Sent
    /// instead of, or after, [`StoreInput::Replayed`]. Before it, the resume is refused
    /// (400: the requests of that stream have an unknown outcome, and the client must
    /// decide whether to send them again); after it, the connection ends once it has
    /// every stored frame.
    WriterGone {
        /// The follow.
        stream: StreamId,
    },
    /// A notice another node published (or this one: it is ignored).
    Notice(&'a [u8]),
}

/// A session being loaded: the exchanges waiting for it, and how many times it was
/// asked for (a session not found yet is asked again, [`Config::with_store_grace`](super::Config::with_store_grace)).
#[derive(Debug, Default)]
pub(super) struct Loading {
    waiting: Vec<ExchangeId>,
    asked: u32,
}

/// The first wait before asking the store again for what it did not have yet.
const FIRST_WAIT: Duration = Duration::from_millis(25);

/// Why a record or a notice read from the store was refused: it was written by
/// something else, or by a newer version of mcpwire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Malformed;

/// A session as every node knows it: enough for a node that did not mint it to serve its
/// requests. Written as text: `1 <version> <s|l> <p|c> <home epoch hex>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Record {
    pub(super) version: ProtocolVersion,
    /// A legacy HTTP+SSE session.
    pub(super) legacy: bool,
    /// Its client came back after `initialize`.
    pub(super) complete: bool,
    /// The node that minted it.
    pub(super) home: Epoch,
}

impl Record {
    pub(super) fn encode(&self) -> Bytes {
        Bytes::from(format!(
            "1 {} {} {} {:x}",
            self.version.as_str(),
            if self.legacy { 'l' } else { 's' },
            if self.complete { 'c' } else { 'p' },
            self.home.get()
        ))
    }

    pub(super) fn decode(raw: &[u8]) -> Result<Self, Malformed> {
        let text = std::str::from_utf8(raw).map_err(|_| Malformed)?;
        let mut fields = text.split(' ');
        let mut next = || fields.next().ok_or(Malformed);
        if next()? != "1" {
            return Err(Malformed);
        }
        let version = next()?.parse().map_err(|_| Malformed)?;
        let legacy = flag(next()?, "l", "s")?;
        let complete = flag(next()?, "c", "p")?;
        let home = Epoch::new(hex(next()?)?);
        if fields.next().is_some() {
            return Err(Malformed);
        }
        Ok(Self {
            version,
            legacy,
            complete,
            home,
        })
    }
}

fn flag(field: &str, yes: &str, no: &str) -> Result<bool, Malformed> {
    match field {
        f if f == yes => Ok(true),
        f if f == no => Ok(false),
        _ => Err(Malformed),
    }
}

/// A canonical lowercase hex `u64` (no leading zeros, `0` for zero), as in event ids.
fn hex(field: &str) -> Result<u64, Malformed> {
    let canonical = !field.is_empty()
        && field.len() <= 16
        && field
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && (field == "0" || !field.starts_with('0'));
    if !canonical {
        return Err(Malformed);
    }
    u64::from_str_radix(field, 16).map_err(|_| Malformed)
}

/// Whether `id` has the form of a session id a node mints (32 lowercase hex digits): only
/// such an id is looked up in the store.
pub(super) fn is_session_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What one node tells the others. Written as text: `<from epoch hex> <kind> …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Notice {
    /// A session ended on node `from`, for this reason.
    Ended {
        session: Arc<str>,
        reason: CloseReason,
    },
    /// A client resumed ring `ring` of `session` after event `after`: a connection of
    /// that ring anywhere else is cut (RESUME-14).
    TakeOver {
        session: Arc<str>,
        ring: RingKey,
        after: u64,
    },
    /// A client's response (the JSON text) that no request of node `from` awaits: the
    /// node whose server→client request it answers takes it.
    Response { session: Arc<str>, message: Bytes },
    /// A client's `notifications/cancelled` (the JSON text) for a request not open on
    /// node `from`: the node that runs it cancels it.
    Cancel { session: Arc<str>, message: Bytes },
    /// What node `from`'s application announced to every node's
    /// ([`Server::announce`]).
    Announce { payload: Bytes },
    /// A message (the JSON text) for `session`'s GET stream, which node `from` does not
    /// hold: the node that holds it writes it.
    Deliver { session: Arc<str>, message: Bytes },
    /// A message (the JSON text) a legacy HTTP+SSE client of `session` POSTed to node
    /// `from`, which does not hold the session's stream: the node that holds it handles
    /// it as if POSTed there, and answers on the stream (LEGACY-4).
    LegacyPost { session: Arc<str>, message: Bytes },
    /// `session`'s client opened a GET stream on node `from`: any other GET stream of
    /// the session is ended (a session has one, HTTP-GET-3; the newest wins, as a resume
    /// does, RESUME-14).
    GetOpened { session: Arc<str> },
}

/// A notice and the node that sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Sent {
    pub(super) from: Epoch,
    pub(super) notice: Notice,
}

impl Sent {
    pub(super) fn encode(&self) -> Bytes {
        let from = self.from.get();
        Bytes::from(match &self.notice {
            Notice::Ended { session, reason } => {
                format!("{from:x} ended {session} {}", reason_name(*reason)).into_bytes()
            }
            Notice::TakeOver {
                session,
                ring,
                after,
            } => format!("{from:x} takeover {session} {ring} {after:x}").into_bytes(),
            Notice::GetOpened { session } => format!("{from:x} get {session}").into_bytes(),
            Notice::Response { session, message }
            | Notice::Cancel { session, message }
            | Notice::Deliver { session, message }
            | Notice::LegacyPost { session, message } => {
                let kind = match self.notice {
                    Notice::Response { .. } => "response",
                    Notice::Cancel { .. } => "cancel",
                    Notice::LegacyPost { .. } => "legacy",
                    _ => "deliver",
                };
                let mut text = format!("{from:x} {kind} {session} ").into_bytes();
                text.extend_from_slice(message);
                text
            }
            Notice::Announce { payload } => {
                let mut text = format!("{from:x} announce ").into_bytes();
                text.extend_from_slice(payload);
                text
            }
        })
    }

    pub(super) fn decode(raw: &[u8]) -> Result<Self, Malformed> {
        let text = std::str::from_utf8(raw).map_err(|_| Malformed)?;
        // A message is the rest of the text, whatever it holds.
        let mut parts = text.splitn(4, ' ');
        let mut next = || parts.next().ok_or(Malformed);
        let from = Epoch::new(hex(next()?)?);
        let kind = next()?;
        if kind == "announce" {
            let payload = text.splitn(3, ' ').nth(2).ok_or(Malformed)?;
            let payload = Bytes::copy_from_slice(payload.as_bytes());
            return Ok(Self {
                from,
                notice: Notice::Announce { payload },
            });
        }
        let session = next()?;
        if !is_session_id(session) {
            return Err(Malformed);
        }
        let session: Arc<str> = session.into();
        let rest = parts.next();
        if let ("response" | "cancel" | "deliver" | "legacy", Some(message)) = (kind, rest) {
            let message = Bytes::copy_from_slice(message.as_bytes());
            let notice = match kind {
                "response" => Notice::Response { session, message },
                "cancel" => Notice::Cancel { session, message },
                "legacy" => Notice::LegacyPost { session, message },
                _ => Notice::Deliver { session, message },
            };
            return Ok(Self { from, notice });
        }
        if (kind, rest) == ("get", None) {
            return Ok(Self {
                from,
                notice: Notice::GetOpened { session },
            });
        }
        let mut fields = rest.unwrap_or_default().split(' ');
        let mut next = || fields.next().ok_or(Malformed);
        let notice = match kind {
            "ended" => Notice::Ended {
                session,
                reason: reason_named(next()?)?,
            },
            "takeover" => {
                let (epoch, ring) = next()?.split_once(':').ok_or(Malformed)?;
                let ring = RingKey {
                    epoch: Epoch::new(hex(epoch)?),
                    ring: RingId::new(hex(ring)?),
                };
                Notice::TakeOver {
                    session,
                    ring,
                    after: hex(next()?)?,
                }
            }
            _ => return Err(Malformed),
        };
        if fields.next().is_some() {
            return Err(Malformed);
        }
        Ok(Self { from, notice })
    }
}

const REASONS: [(CloseReason, &str); 7] = [
    (CloseReason::Deleted, "deleted"),
    (CloseReason::Expired, "expired"),
    (CloseReason::Disconnected, "disconnected"),
    (CloseReason::Closed, "closed"),
    (CloseReason::InitializeFailed, "initialize-failed"),
    (CloseReason::Shutdown, "shutdown"),
    (CloseReason::Evicted, "evicted"),
];

fn reason_name(reason: CloseReason) -> &'static str {
    REASONS
        .iter()
        .find(|(r, _)| *r == reason)
        .map_or("closed", |(_, name)| name)
}

fn reason_named(name: &str) -> Result<CloseReason, Malformed> {
    REASONS
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(r, _)| *r)
        .ok_or(Malformed)
}

impl Server {
    /// The next store work for the driver (cluster nodes only; see the
    /// [module docs](self)). Poll it after every input, with the transmits and events.
    #[must_use]
    pub fn poll_store(&mut self) -> Option<StoreOp> {
        self.store_ops.pop_front()
    }

    /// The epoch of this server's event ids: on a cluster node, its number in the top
    /// 16 bits ([`NodeId::epoch`]). A store driver keeps the node's liveness under it,
    /// so that a follower of one of its rings learns when it is gone
    /// ([`StoreInput::WriterGone`]).
    #[must_use]
    pub fn epoch(&self) -> Epoch {
        self.store.epoch()
    }

    /// Whether [`poll_store`](Self::poll_store) has work to give.
    #[must_use]
    pub fn has_store_work(&self) -> bool {
        !self.store_ops.is_empty()
    }

    /// What came of store work, or a notice of another node (see [`StoreInput`]). An
    /// answer for something no longer waiting (its client went away) is ignored.
    pub fn handle_store(&mut self, now: Instant, input: StoreInput<'_>) {
        self.clock(now);
        match input {
            StoreInput::Session { session, record } => self.session_loaded(now, session, record),
            StoreInput::Replayed { stream, replay } => self.replayed(now, stream, replay),
            StoreInput::Followed {
                stream,
                first,
                frames,
            } => self.followed(stream, first, frames),
            StoreInput::FollowEnded { stream, .. } => self.follow_ended(stream),
            StoreInput::WriterGone { stream } => self.writer_gone(stream),
            StoreInput::Notice(raw) => self.noticed(now, raw),
        }
    }

    /// Whether this server is a node of a cluster.
    pub(super) fn is_node(&self) -> bool {
        self.config.node.is_some()
    }

    /// How long a session's record lives unless touched: its idle time and a quarter
    /// more, since touches come at most every quarter (so it never expires early).
    fn record_ttl(&self, handshake: Handshake) -> Duration {
        match handshake {
            Handshake::Pending => self.config.handshake_timeout.min(self.config.session_idle),
            Handshake::Complete => self.config.session_idle + self.config.session_idle / 4,
        }
    }

    /// How often a session in use here has its record touched.
    fn touch_every(&self) -> Duration {
        (self.config.session_idle / 4).max(Duration::from_millis(1))
    }

    /// Exchange `x` names `wire`, a session this node does not hold: it waits while the
    /// record is loaded (one load for every exchange naming it meanwhile).
    pub(super) fn park_for_session(&mut self, x: ExchangeId, wire: Arc<str>) {
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.parked = true;
        }
        let loading = self.loading.entry(wire.clone()).or_default();
        loading.waiting.push(x);
        if loading.waiting.len() == 1 && loading.asked == 0 {
            self.store_ops
                .push_back(StoreOp::LoadSession { session: wire });
        }
    }

    /// How long to wait before asking the store again for something it did not have,
    /// asked `asked` times so far: 25 ms, then twice as long each time, while the waits
    /// add up to no more than [`Config::with_store_grace`](super::Config::with_store_grace);
    /// `None` once they would.
    fn grace_wait(&self, asked: u32) -> Option<Duration> {
        let waited = FIRST_WAIT.checked_mul((1u32 << asked.min(20)) - 1)?;
        let wait = FIRST_WAIT.checked_mul(1 << asked.min(20))?;
        (waited + wait <= self.config.store_grace).then_some(wait)
    }

    /// A session not found in the store is asked for again (`Timer::Reload`).
    pub(super) fn reload(&mut self, key: u64) {
        if let Some(wire) = self.reloads.remove(&key)
            && self.loading.contains_key(&wire)
        {
            self.store_ops
                .push_back(StoreOp::LoadSession { session: wire });
        }
    }

    /// A followed ring that did not reach the client's id is asked for again
    /// (`Timer::Refollow`).
    pub(super) fn refollow(&mut self, t: StreamId) {
        let Some(stream) = self.streams.get(&t) else {
            return;
        };
        let (
            StreamKind::Follow {
                ring,
                next,
                opening: true,
                ..
            },
            Some(s),
            Some(_),
        ) = (stream.kind, stream.session, stream.conn)
        else {
            return;
        };
        let Some(session) = self.sessions.get(&s) else {
            return;
        };
        self.store_ops.push_back(StoreOp::Follow {
            stream: t,
            session: session.wire.clone(),
            after: ring.event(next.saturating_sub(1)),
        });
    }

    /// The answer to a load: the session is adopted (or known to be gone), and every
    /// exchange that waited for it goes on.
    fn session_loaded(
        &mut self,
        now: Instant,
        wire: &str,
        record: Result<Option<&[u8]>, StoreUnavailable>,
    ) {
        let Some(loading) = self.loading.remove(wire) else {
            return;
        };
        let waiting: Vec<ExchangeId> = loading
            .waiting
            .into_iter()
            .filter(|x| {
                self.exchanges.get(x).is_some_and(|e| {
                    e.parked && e.route != Route::Refused && e.phase != Phase::Ended
                })
            })
            .collect();
        let Some(&first) = waiting.first() else {
            return;
        };
        // A record this version cannot read names no session it can serve: 404, and
        // the client initializes again (SESSION-8).
        let found = match record {
            // Not there yet, perhaps: the node that minted it answered `initialize`
            // before its write landed. Asked again within the grace.
            Ok(None) if let Some(wait) = self.grace_wait(loading.asked) => {
                let key = self.key();
                let wire: Arc<str> = wire.into();
                self.reloads.insert(key, wire.clone());
                self.timers.insert((now + wait, Timer::Reload(key)));
                self.loading.insert(
                    wire,
                    Loading {
                        waiting,
                        asked: loading.asked + 1,
                    },
                );
                return;
            }
            Ok(raw) => raw.and_then(|raw| Record::decode(raw).ok()),
            Err(StoreUnavailable) => {
                for x in waiting {
                    self.unpark(x);
                    self.refuse(x, store_unavailable());
                }
                return;
            }
        };
        // A legacy session's record serves the legacy POSTs that name it; a session-era
        // request naming it is refused when admitted, as on the node that holds it.
        let session = match found {
            Some(record) => match self.adopt(now, first, wire, record) {
                Ok(s) => Some(s),
                Err(refuse) => {
                    for x in waiting {
                        self.unpark(x);
                        self.refuse(x, refuse.clone());
                    }
                    return;
                }
            },
            None => None,
        };
        for x in waiting {
            // An earlier one (a DELETE) may have ended what this one waited for, never
            // the exchange itself; checked all the same.
            let Some(e) = self.exchanges.get_mut(&x) else {
                continue;
            };
            e.parked = false;
            e.headers.session = session.map_or(SessionHeader::Unknown, SessionHeader::Known);
            match e.route {
                Route::Get => self.open_get(now, x),
                Route::Delete => self.delete(now, x),
                Route::LegacyUnseen => self.legacy_loaded(now, x, session),
                // A body still coming is dispatched at its end, as any other.
                Route::Post if e.phase == Phase::Parked => {
                    e.phase = Phase::Dispatching;
                    let body = e.body.take();
                    self.post(now, x, body);
                }
                _ => {}
            }
        }
    }

    /// A legacy POST that waited for the record of the session it names: served as any
    /// legacy POST (once its body is complete), or 404 unless the record was a legacy
    /// session's.
    fn legacy_loaded(&mut self, now: Instant, x: ExchangeId, session: Option<SessionId>) {
        let legacy = session.filter(|s| self.sessions.get(s).is_some_and(|s| s.legacy));
        let Some(s) = legacy else {
            return self.refuse(x, super::refuse::session_not_found());
        };
        let Some(e) = self.exchanges.get_mut(&x) else {
            return;
        };
        e.route = Route::LegacyPost(s);
        // A body still coming is handled at its end, as any other.
        if e.phase == Phase::Parked {
            e.phase = Phase::Dispatching;
            let body = e.body.take();
            self.legacy_post(now, x, s, body);
        }
    }

    fn unpark(&mut self, x: ExchangeId) {
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.parked = false;
            if e.phase == Phase::Parked {
                e.phase = Phase::Dispatching;
            }
        }
    }

    /// Holds a copy of a session another node minted, as this node holds its own; a
    /// place is made as for a new session (an idle copy may go).
    fn adopt(
        &mut self,
        now: Instant,
        x: ExchangeId,
        wire: &str,
        record: Record,
    ) -> Result<SessionId, Refuse> {
        if let Some(&s) = self.session_ids.get(wire) {
            return Ok(s);
        }
        let peer = self.exchanges[&x].headers.peer;
        self.make_places(peer)?;
        // Loaded only in the form of a minted id, so always a header value.
        let Ok(header) = http::HeaderValue::from_str(wire) else {
            return Err(super::refuse::session_not_found());
        };
        let handshake = if record.complete {
            Handshake::Complete
        } else {
            Handshake::Pending
        };
        let s = self.insert_session(
            now,
            wire.into(),
            header,
            record.version,
            record.legacy,
            peer,
        );
        let session = self.sessions.get_mut(&s).expect("adopted session");
        session.handshake = handshake;
        session.shared = Some(Box::new(Shared {
            home: record.home,
            touched: now,
            touch_timer: None,
        }));
        // A stream held here keeps the record alive, as on the node that minted it.
        self.arm_touch(now, s);
        Ok(s)
    }

    /// A session minted here is shared: its record is written.
    pub(super) fn share_new_session(&mut self, now: Instant, s: SessionId) {
        let home = self.store.epoch();
        if let Some(session) = self.sessions.get_mut(&s) {
            session.shared = Some(Box::new(Shared {
                home,
                touched: now,
                touch_timer: None,
            }));
        }
        self.put_record(now, s);
    }

    /// Writes `s`'s record as it is now.
    pub(super) fn put_record(&mut self, now: Instant, s: SessionId) {
        let Some(session) = self.sessions.get_mut(&s) else {
            return;
        };
        let Some(shared) = session.shared.as_mut() else {
            return;
        };
        shared.touched = now;
        let record = Record {
            version: session.version,
            legacy: session.legacy,
            complete: session.handshake == Handshake::Complete,
            home: shared.home,
        };
        let (wire, handshake) = (session.wire.clone(), session.handshake);
        let ttl = self.record_ttl(handshake);
        self.store_ops.push_back(StoreOp::PutSession {
            session: wire,
            record: record.encode(),
            ttl,
        });
        self.arm_touch(now, s);
    }

    /// A request came on shared session `s`: its handshake completes (the record is
    /// written again) or, at most every quarter of the idle time, its record is touched.
    pub(super) fn shared_activity(&mut self, now: Instant, s: SessionId, was: Handshake) {
        if was == Handshake::Pending {
            return self.put_record(now, s);
        }
        let every = self.touch_every();
        let due = self
            .sessions
            .get(&s)
            .and_then(|session| session.shared.as_ref())
            .is_some_and(|shared| now >= shared.touched + every);
        if due {
            self.touch(now, s);
        }
    }

    fn touch(&mut self, now: Instant, s: SessionId) {
        let ttl = self.record_ttl(Handshake::Complete);
        let Some(session) = self.sessions.get_mut(&s) else {
            return;
        };
        let Some(shared) = session.shared.as_mut() else {
            return;
        };
        shared.touched = now;
        let (wire, handshake) = (session.wire.clone(), session.handshake);
        let ttl = if handshake == Handshake::Complete {
            ttl
        } else {
            self.record_ttl(handshake)
        };
        self.store_ops
            .push_back(StoreOp::TouchSession { session: wire, ttl });
    }

    /// Keeps a touch deadline in the timers while `s` is shared here.
    fn arm_touch(&mut self, now: Instant, s: SessionId) {
        let at = now + self.touch_every();
        let Some(shared) = self
            .sessions
            .get_mut(&s)
            .and_then(|session| session.shared.as_mut())
        else {
            return;
        };
        if shared.touch_timer.is_some() {
            return;
        }
        shared.touch_timer = Some(at);
        self.timers.insert((at, Timer::Touch(s)));
    }

    /// The touch deadline of `s` passed: a session in use here (an exchange open, a
    /// request in flight) has its record touched, so it outlives a long stream with no
    /// request; an idle one is left to expire.
    pub(super) fn touch_due(&mut self, now: Instant, s: SessionId) {
        let Some(session) = self.sessions.get_mut(&s) else {
            return;
        };
        let in_use = session.exchanges > 0 || session.open_requests > 0;
        let Some(shared) = session.shared.as_mut() else {
            return;
        };
        shared.touch_timer = None;
        if in_use {
            self.touch(now, s);
            self.arm_touch(now, s);
        }
    }

    /// The end of shared session `s` (already forgotten here) as the cluster learns it:
    /// everywhere for a DELETE or an application's close, unless the end came from
    /// another node (`spread` false); for what concerns this node's copy only (idle
    /// here, evicted, the node shutting down), here alone.
    pub(super) fn shared_end(
        &mut self,
        s: SessionId,
        session: &state::Session,
        reason: CloseReason,
        spread: bool,
    ) {
        let Some(shared) = session.shared.as_ref() else {
            return;
        };
        if let Some(at) = shared.touch_timer {
            self.timers.remove(&(at, Timer::Touch(s)));
        }
        // A legacy session lives as long as its stream: whatever ends it on the node
        // that holds the stream (the one that minted it) ends it everywhere.
        let everywhere = matches!(
            reason,
            CloseReason::Deleted | CloseReason::Closed | CloseReason::InitializeFailed
        ) || (session.legacy && shared.home == self.store.epoch());
        if !(spread && everywhere) {
            return;
        }
        self.store_ops.push_back(StoreOp::DeleteSession {
            session: session.wire.clone(),
        });
        self.publish(Notice::Ended {
            session: session.wire.clone(),
            reason,
        });
    }

    fn publish(&mut self, notice: Notice) {
        let sent = Sent {
            from: self.store.epoch(),
            notice,
        };
        self.store_ops.push_back(StoreOp::Publish {
            notice: sent.encode(),
        });
    }

    /// Frame `id` of a ring of `s` was retained here: it goes to the shared ring too.
    pub(super) fn share_frame(&mut self, s: SessionId, id: EventId, frame: &Bytes) {
        let Some(session) = self.sessions.get(&s).filter(|s| s.shared.is_some()) else {
            return;
        };
        self.store_ops.push_back(StoreOp::Append {
            session: session.wire.clone(),
            id,
            frame: frame.clone(),
            keep: self.config.store.ring().max_events(),
            ttl: self.record_ttl(Handshake::Complete),
            announce: self.followed.contains(&id.ring()),
        });
    }

    /// Ring `ring` of `s` is finished: its followers end after its last frame.
    pub(super) fn share_finish(&mut self, s: SessionId, ring: RingId) {
        let Some(session) = self.sessions.get(&s).filter(|s| s.shared.is_some()) else {
            return;
        };
        let Ok(next) = self.store.next_id(&s, ring) else {
            return;
        };
        self.store_ops.push_back(StoreOp::Finish {
            session: session.wire.clone(),
            ring: RingKey::of(next),
            next: next.seq(),
            announce: self.followed.contains(&ring),
        });
    }

    /// A client of `s` resumed after `after` here: a connection of that ring on any
    /// other node is cut (RESUME-14).
    pub(super) fn take_over(&mut self, s: SessionId, after: EventId) {
        self.publish_about(s, |session| Notice::TakeOver {
            session,
            ring: RingKey::of(after),
            after: after.seq(),
        });
    }

    /// A legacy client's message (`raw`, one JSON-RPC message, parsed already) for
    /// session `s`, whose stream another node holds: that node handles it.
    pub(super) fn relay_legacy(&mut self, s: SessionId, raw: Bytes) {
        self.publish_about(s, |session| Notice::LegacyPost {
            session,
            message: raw,
        });
    }

    /// Publishes the notice `notice` makes of shared session `s`'s id; nothing for a
    /// session this node does not share.
    fn publish_about(&mut self, s: SessionId, notice: impl FnOnce(Arc<str>) -> Notice) {
        let Some(session) = self.sessions.get(&s).filter(|s| s.shared.is_some()) else {
            return;
        };
        let notice = notice(session.wire.clone());
        self.publish(notice);
    }

    /// GET with `Last-Event-ID` naming a ring this node does not write (another node's,
    /// or one it no longer holds): the frames after it come from the shared store, then
    /// the ring is followed as its writer appends.
    pub(super) fn follow(&mut self, x: ExchangeId, s: SessionId, after: EventId) {
        let Some(session) = self.sessions.get(&s) else {
            return;
        };
        let wire = session.wire.clone();
        let primed = session.version >= ProtocolVersion::V2025_11_25;
        let t = StreamId(self.key());
        self.streams.insert(
            t,
            Stream {
                session: Some(s),
                kind: StreamKind::Follow {
                    ring: RingKey::of(after),
                    next: after.seq().saturating_add(1),
                    opening: true,
                    asked: 0,
                },
                ring: None,
                conn: Some(x),
                backlog: Default::default(),
                done: false,
                primed,
                since: Some(after.seq()),
            },
        );
        if let Some(session) = self.sessions.get_mut(&s) {
            session.streams.insert(t);
        }
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.carries = Carries::Stream(t);
        }
        self.store_ops.push_back(StoreOp::Follow {
            stream: t,
            session: wire,
            after,
        });
        self.take_over(s, after);
    }

    /// The replay of a followed ring: written, and the connection goes live; or refused
    /// as a local resume would be.
    fn replayed(
        &mut self,
        now: Instant,
        t: StreamId,
        replay: Result<crate::resume::Replay<'_>, StoreUnavailable>,
    ) {
        use crate::resume::Replay;
        let Some(stream) = self.streams.get(&t) else {
            return;
        };
        let (StreamKind::Follow { opening, asked, .. }, Some(x)) = (stream.kind, stream.conn)
        else {
            return;
        };
        if !opening {
            return;
        }
        // A ring that does not reach the id (or is not there at all) may only be behind:
        // its writer answered the client before its appends landed. Asked again within
        // the grace; a ring of another session or an id never issued is refused after it.
        if let Ok(Replay::UnknownRing | Replay::NotIssued) = replay
            && let Some(wait) = self.grace_wait(asked)
        {
            if let Some(StreamKind::Follow { asked, .. }) =
                self.streams.get_mut(&t).map(|s| &mut s.kind)
            {
                *asked += 1;
            }
            self.timers.insert((now + wait, Timer::Refollow(t)));
            return;
        }
        let Some(StreamKind::Follow { next, opening, .. }) =
            self.streams.get_mut(&t).map(|s| &mut s.kind)
        else {
            return;
        };
        *opening = false;
        let frames: Vec<Bytes> = match replay {
            Ok(Replay::Frames(frames)) => {
                if let Some(first) = frames.first_id() {
                    *next = first.seq() + frames.len() as u64;
                }
                frames.cloned().collect()
            }
            Ok(Replay::UpToDate) => Vec::new(),
            Ok(Replay::Gap { .. }) => {
                self.remove_stream(t);
                return self.refuse(
                    x,
                    Refuse::new(
                        StatusCode::BAD_REQUEST,
                        "events after Last-Event-ID are no longer retained",
                    ),
                );
            }
            Ok(Replay::UnknownRing | Replay::NotIssued | Replay::Pending) => {
                self.remove_stream(t);
                return self.refuse(
                    x,
                    Refuse::new(
                        StatusCode::BAD_REQUEST,
                        "Last-Event-ID names no event of this session",
                    ),
                );
            }
            Err(StoreUnavailable) => {
                self.remove_stream(t);
                return self.refuse(x, store_unavailable());
            }
        };
        self.stream_head(x);
        // With nothing replayed, the connection still starts as a fresh priming event
        // would (RESUME-8, RESUME-10): `retry`, and on a primed stream the id the client
        // resumed after, which this node cannot add to (it writes no frame of the ring),
        // so a client that keeps the last priming id (the TypeScript SDK) resumes
        // from the same place again.
        if frames.is_empty() {
            self.prime_follower(t, x);
        }
        for frame in frames {
            self.push(x, Transmit::Data(frame));
        }
        self.attach(now, t, x);
    }

    /// The start of a follower's connection that replays nothing: `retry`, with the id
    /// the client resumed after on a primed stream.
    fn prime_follower(&mut self, t: StreamId, x: ExchangeId) {
        let Some(stream) = self.streams.get(&t) else {
            return;
        };
        let StreamKind::Follow { ring, next, .. } = stream.kind else {
            return;
        };
        let (Some(seq), true) = (next.checked_sub(1), stream.primed) else {
            return self.push_retry(x);
        };
        let id = ring.event(seq).encode();
        crate::sse::Encoder::new().encode_priming(
            id.sse_id(),
            self.config.retry,
            &mut self.scratch,
        );
        let frame = self.scratch.split().freeze();
        self.push(x, Transmit::Data(frame));
    }

    /// New frames of a followed ring: each handed on once, in order; a hole ends the
    /// connection, and the client's next resume learns what was lost.
    fn followed(&mut self, t: StreamId, first: EventId, frames: &[Bytes]) {
        let Some(stream) = self.streams.get(&t) else {
            return;
        };
        let (
            StreamKind::Follow {
                ring,
                next,
                opening,
                ..
            },
            Some(x),
        ) = (stream.kind, stream.conn)
        else {
            return;
        };
        if opening || RingKey::of(first) != ring {
            return;
        }
        let mut at = next;
        for (seq, frame) in (first.seq()..).zip(frames) {
            if seq < at {
                continue;
            }
            if seq > at {
                return self.end_exchange(x);
            }
            at += 1;
            if let Some(StreamKind::Follow { next, .. }) =
                self.streams.get_mut(&t).map(|s| &mut s.kind)
            {
                *next = at;
            }
            self.push_data(x, frame.clone());
            if !self.streams.contains_key(&t) {
                // A reader too slow was let go; it resumes from its last frame.
                return;
            }
        }
    }

    /// The followed ring is finished: the connection ends after what it was handed.
    fn follow_ended(&mut self, t: StreamId) {
        let Some(stream) = self.streams.get_mut(&t) else {
            return;
        };
        if !matches!(stream.kind, StreamKind::Follow { opening: false, .. }) {
            return;
        }
        stream.done = true;
        if let Some(x) = stream.conn {
            self.end_exchange(x);
        }
    }

    /// Hands `payload` to the application of every other node of the cluster, as
    /// [`Event::Announced`](super::Event::Announced): what one node's application tells
    /// the others (a changed tool list, for their `subscriptions/listen` streams). Does
    /// nothing on a server that is not a node ([`Config::with_node`](super::Config::with_node)).
    pub fn announce(&mut self, now: Instant, payload: &[u8]) {
        self.clock(now);
        if self.is_node() {
            self.publish(Notice::Announce {
                payload: Bytes::copy_from_slice(payload),
            });
        }
    }

    /// A client's response to a server→client request this node never issued: on a
    /// cluster node, the node that did takes it.
    pub(super) fn spread_response(&mut self, s: SessionId, message: &Envelope) {
        let message = message.text().clone().into();
        self.publish_about(s, |session| Notice::Response { session, message });
    }

    /// A client's cancel for a request not open here: on a cluster node, the node that
    /// runs it cancels it.
    pub(super) fn spread_cancel(&mut self, s: SessionId, message: &Envelope) {
        let message = message.text().clone().into();
        self.publish_about(s, |session| Notice::Cancel { session, message });
    }

    /// A message for shared session `s`'s GET stream, which this node does not hold:
    /// the node that does writes it.
    pub(super) fn deliver_elsewhere(&mut self, s: SessionId, message: Bytes) {
        self.publish_about(s, |session| Notice::Deliver { session, message });
    }

    /// The client of shared session `s` opened a GET stream here: any other node's ends.
    pub(super) fn get_opened(&mut self, s: SessionId) {
        self.publish_about(s, |session| Notice::GetOpened { session });
    }

    /// The node writing a followed ring is gone: a resume not yet answered is refused,
    /// a live one ends (its client's next resume is refused).
    fn writer_gone(&mut self, t: StreamId) {
        let Some(stream) = self.streams.get(&t) else {
            return;
        };
        let (StreamKind::Follow { opening, .. }, Some(x)) = (stream.kind, stream.conn) else {
            return;
        };
        if !opening {
            return self.end_exchange(x);
        }
        self.remove_stream(t);
        self.refuse(
            x,
            Refuse::new(
                StatusCode::BAD_REQUEST,
                "the node that served this stream stopped: what its requests did is \
                 unknown; send them again if they are safe to repeat",
            ),
        );
    }

    /// A notice of another node.
    fn noticed(&mut self, now: Instant, raw: &[u8]) {
        let Ok(sent) = Sent::decode(raw) else {
            return;
        };
        if sent.from == self.store.epoch() {
            return;
        }
        match sent.notice {
            Notice::Ended { session, reason } => {
                if let Some(&s) = self.session_ids.get(&*session) {
                    self.close_session_here(s, reason);
                }
            }
            Notice::TakeOver {
                session,
                ring,
                after,
            } => {
                let Some(&s) = self.session_ids.get(&*session) else {
                    return;
                };
                let own = ring.epoch == self.store.epoch();
                let mut written = false;
                let cut: Vec<ExchangeId> = self.sessions[&s]
                    .streams
                    .iter()
                    .filter_map(|t| self.streams.get(t))
                    .filter(|t| match t.kind {
                        StreamKind::Follow { ring: r, .. } => r == ring,
                        _ => own && t.ring == Some(ring.ring),
                    })
                    .filter_map(|t| {
                        written |= !matches!(t.kind, StreamKind::Follow { .. });
                        // A follow still opening has sent nothing to cut, and a
                        // connection that resumed from as far is as new as the notice's:
                        // only an older connection goes.
                        let opening = matches!(t.kind, StreamKind::Follow { opening: true, .. });
                        let older = t.since.is_none_or(|since| since < after);
                        t.conn.filter(|_| older && !opening)
                    })
                    .collect();
                for x in cut {
                    self.supersede(x);
                }
                // This node writes the ring: its frames are announced from now on.
                if written && self.followed.insert(ring.ring) {
                    self.store_ops.push_back(StoreOp::Wake { session, ring });
                }
            }
            // Every shard of a node hears every notice; the application, one for them
            // all, hears an announcement once: through the first shard.
            Notice::Announce { payload } if self.config.shard.0 == 0 => {
                self.events.push_back(super::Event::Announced { payload });
            }
            Notice::Announce { .. } => {}
            Notice::Deliver { session, message } => {
                let get = self
                    .session_ids
                    .get(&*session)
                    .and_then(|s| self.sessions.get(s))
                    .and_then(|s| s.get);
                if let (Some(t), Ok(text)) = (get, std::str::from_utf8(&message)) {
                    self.write_frame(now, t, text);
                }
            }
            Notice::LegacyPost { session, message } => {
                let (Some(&s), Some(envelope)) =
                    (self.session_ids.get(&*session), self.envelope_of(message))
                else {
                    return;
                };
                // Only the node that holds the stream (no echo back).
                let holds = self.sessions.get(&s);
                if holds.is_some_and(|s| s.legacy && s.get.is_some()) {
                    self.legacy_message(now, None, s, envelope);
                }
            }
            Notice::GetOpened { session } => {
                let get = self
                    .session_ids
                    .get(&*session)
                    .and_then(|s| self.sessions.get(s))
                    .and_then(|s| s.get);
                if let Some(t) = get {
                    if let Some(x) = self.streams.get(&t).and_then(|t| t.conn) {
                        self.supersede(x);
                    }
                    self.remove_stream(t);
                }
            }
            Notice::Response { session, message } => {
                let (Some(&s), Some(envelope)) =
                    (self.session_ids.get(&*session), self.envelope_of(message))
                else {
                    return;
                };
                // Only a response to a request this node issued (no echo back).
                let issued = envelope
                    .id()
                    .is_some_and(|id| self.server_requests.token(id) == Some(&s));
                if issued {
                    self.client_response(Some(s), envelope);
                }
            }
            Notice::Cancel { session, message } => {
                let (Some(&s), Some(envelope)) =
                    (self.session_ids.get(&*session), self.envelope_of(message))
                else {
                    return;
                };
                let open = envelope
                    .payload()
                    .and_then(|p| super::dispatch::cancelled_params(p.as_str()))
                    .and_then(|(id, reason)| {
                        Some((*self.by_id.get(&(Scope::Session(s), id))?, reason))
                    });
                if let Some((h, reason)) = open {
                    self.settle(now, h);
                    self.events
                        .push_back(super::Event::Cancelled { request: h, reason });
                }
            }
        }
    }
}

impl Server {
    /// A message another node forwarded, as this node's classifier reads it.
    fn envelope_of(&self, text: Bytes) -> Option<Envelope> {
        let text = crate::jsonrpc::body_text(text).ok()?;
        self.classifier.envelope(text).ok()
    }
}

/// 503 with a JSON-RPC error: what needed the shared store could not reach it.
fn store_unavailable() -> Refuse {
    Refuse::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the shared session store is unavailable; try again",
    )
    .code(crate::jsonrpc::ErrorCode::INTERNAL_ERROR)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_node_id_is_the_top_of_its_epoch() {
        let epoch = NodeId::new(3).epoch(u64::MAX);
        assert_eq!(epoch.get(), 0x0003_ffff_ffff_ffff);
        assert_eq!(NodeId::new(0xffff).epoch(0).get(), 0xffff_0000_0000_0000);
    }

    #[test]
    fn records_round_trip_and_refuse_anything_else() {
        let record = Record {
            version: ProtocolVersion::V2025_11_25,
            legacy: false,
            complete: true,
            home: Epoch::new(0x9c41),
        };
        let text = record.encode();
        assert_eq!(&text[..], b"1 2025-11-25 s c 9c41");
        assert_eq!(Record::decode(&text), Ok(record));
        for bad in [
            &b""[..],
            b"2 2025-11-25 s c 9c41",
            b"1 2025-11-25 s c 9c41 extra",
            b"1 2025-11-25 x c 9c41",
            b"1 2025-11-25 s c 09c41",
            b"1 2025-11-25 s c 9C41",
            b"1 1999-01-01 s c 9c41",
            b"1 2025-11-25 s c",
            b"1  2025-11-25 s c 9c41",
            b"\xff",
        ] {
            assert_eq!(Record::decode(bad), Err(Malformed), "{bad:?}");
        }
    }

    #[test]
    fn notices_round_trip_and_refuse_anything_else() {
        let sent = [
            Sent {
                from: Epoch::new(0x0001_0000_0000_00aa),
                notice: Notice::Ended {
                    session: S.into(),
                    reason: CloseReason::Deleted,
                },
            },
            Sent {
                from: Epoch::new(7),
                notice: Notice::TakeOver {
                    session: S.into(),
                    ring: RingKey {
                        epoch: Epoch::new(0x2_0000_0000_0001),
                        ring: RingId::new(0x1f),
                    },
                    after: 0,
                },
            },
        ];
        let sent = sent.into_iter().chain([
            Sent {
                from: Epoch::new(1),
                notice: Notice::Response {
                    session: S.into(),
                    message: Bytes::from_static(
                        b"{\"jsonrpc\":\"2.0\", \"id\": 1,\n\"result\":{}}",
                    ),
                },
            },
            Sent {
                from: Epoch::new(1),
                notice: Notice::Cancel {
                    session: S.into(),
                    message: Bytes::from_static(b"{ }"),
                },
            },
            Sent {
                from: Epoch::new(1),
                notice: Notice::Announce {
                    payload: Bytes::from_static(b"resource file:///a b"),
                },
            },
            Sent {
                from: Epoch::new(1),
                notice: Notice::Deliver {
                    session: S.into(),
                    message: Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}"),
                },
            },
            Sent {
                from: Epoch::new(1),
                notice: Notice::GetOpened { session: S.into() },
            },
            Sent {
                from: Epoch::new(1),
                notice: Notice::LegacyPost {
                    session: S.into(),
                    message: Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}"),
                },
            },
        ]);
        for s in sent {
            assert_eq!(Sent::decode(&s.encode()), Ok(s));
        }
        for bad in [
            "7 ended 0123 deleted",
            "7 ended 0123456789abcdef0123456789abcdef gone",
            "7 ended 0123456789abcdef0123456789abcdef deleted x",
            "7 takeover 0123456789abcdef0123456789abcdef 2:1f",
            "7 takeover 0123456789abcdef0123456789abcdef 21f 0",
            "7 hello 0123456789abcdef0123456789abcdef",
            "7 legacy 0123456789abcdef0123456789abcdef",
            "07 ended 0123456789abcdef0123456789abcdef deleted",
        ] {
            assert_eq!(Sent::decode(bad.as_bytes()), Err(Malformed), "{bad:?}");
        }
    }

    #[test]
    fn session_ids_are_looked_up_only_in_their_form() {
        assert!(is_session_id(S));
        assert!(!is_session_id(&S.to_uppercase()));
        assert!(!is_session_id("*"));
        assert!(!is_session_id(&S[1..]));
    }
}
