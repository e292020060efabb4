//! The sans-IO server: every server-side decision of MCP over HTTP, for many concurrent
//! exchanges and sessions, with no IO.
//!
//! One [`Server`] serves the Streamable HTTP endpoint (sessions, the standalone GET
//! stream, resumability and SEP-1699 polling) and, on its own paths, the legacy HTTP+SSE
//! transport. A driver (the tokio or blocking adapter, or a test) moves bytes and time:
//!
//! ```text
//! head arrives     -> let x = server.handle_head(now, parts)
//! body chunk       -> server.handle_body(now, x, chunk)
//! body complete    -> server.handle_body_end(now, x)
//! client went away -> server.handle_disconnect(now, x)
//! then, always:       while let Some(x) = server.poll_ready() {
//!                         while let Some(t) = server.poll_transmit(x) { write t on x }
//!                     }
//!                     while let Some(event) = server.poll_event() { application }
//!                     sleep until server.poll_timeout(); then server.handle_timeout(now)
//! ```
//!
//! The application answers through the server: [`Server::respond`],
//! [`Server::respond_error`], and related or unrelated messages with [`Server::notify`]
//! and [`Server::request`], each naming a [`Target`].
//!
//! ```
//! use std::time::Instant;
//! use bytes::Bytes;
//! use mcpwire::server::{Config, Event, Server, Transmit};
//! use mcpwire::jsonrpc::RawJson;
//!
//! let mut server = Server::new(Config::new(), Box::new(mcpwire::OsEntropy));
//! let now = Instant::now();
//! let head = http::Request::post("/mcp")
//!     .header("host", "127.0.0.1:8080")
//!     .header("accept", "application/json, text/event-stream")
//!     .header("content-type", "application/json")
//!     .body(())?
//!     .into_parts()
//!     .0;
//! let x = server.handle_head(now, head);
//! server.handle_body(now, x, Bytes::from_static(
//!     br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
//! ));
//! server.handle_body_end(now, x);
//! let Some(Event::Request(init)) = server.poll_event() else { panic!() };
//! let result = RawJson::new(r#"{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"demo","version":"1"}}"#)?;
//! server.respond(now, init.handle(), &result)?;
//! assert_eq!(server.poll_ready(), Some(x));
//! let Some(Transmit::Head(head)) = server.poll_transmit(x) else { panic!() };
//! assert_eq!(head.status, 200);
//! assert!(head.headers.contains_key("mcp-session-id"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Decisions
//!
//! - **Eras** ([`Eras`], MODERN-25): the endpoint serves the session era and, when
//!   configured, the sessionless revision 2026-07-28, decided per request: a session or a
//!   session-era version header makes a request session-era whatever its body's `_meta`
//!   says; a modern header, or without one a `_meta` naming a revision, makes it
//!   sessionless. A sessionless request is checked against its headers (MODERN-4…6,
//!   MODERN-20, MODERN-21), a `tools/call` also against its `Mcp-Param-*` headers when
//!   the tool mirrors arguments ([`Config::with_tool_mirrors`], MODERN-7, MODERN-8),
//!   dispatched with no session, answered with its own JSON body
//!   or stream without event ids, its unknown-method error as 404, and cancelled when its
//!   connection goes (MODERN-11).
//! - **Status precedence** (docs/requirements.md §14.13): path 404 → `Host`/`Origin` 403
//!   (SEC-1, SEC-2, SEC-7) → authorization 401/403 (SEC-5) → method 405 → `Accept` 406 →
//!   `Content-Type` 415 → body size 413 (counted as it streams in) → JSON 400/-32700 →
//!   shape 400/-32600 → session 400 (missing) / 404 (unknown) → version 400 → dispatch.
//! - **Response mode** ([`ResponseMode`], §14.6): by default JSON unless the application
//!   sends a related message before its answer, which opens an SSE stream.
//! - **Resumability**: every SSE stream of a session carries event ids (its frames are
//!   kept in the `resume::MemoryStore` ring of that stream), and on
//!   a 2025-11-25 session starts with a priming event carrying `retry` (RESUME-8,
//!   RESUME-10). A live connection is the stream's tail: every frame is appended to the
//!   ring, then handed to the connection; a resume writes the ring's frames after the
//!   id (or, with none, a fresh priming event, §14.4), then the connection becomes the
//!   tail. Both happen within one call of the core,
//!   so a frame cannot be repeated or skipped between replay and live (the races of
//!   rmcp 3.11 and the Python SDK 2.3 cannot be written). A connection whose unsent bytes
//!   pass [`Config::with_max_unsent`] is ended; the client resumes from its last id.
//! - **Resume refusals** (§14.3): a malformed `Last-Event-ID`, or one naming no stream of
//!   the requesting session (another session's, a dropped stream, another epoch, or an
//!   event never issued), is 400 with a JSON-RPC error; one whose frames were evicted is
//!   400 saying how many were lost (never a silent empty replay). Never 404, which
//!   means "session gone".
//! - **A resume wins** (RESUME-14, HTTP-GET-9): a valid `Last-Event-ID` for a stream that
//!   still has a live connection takes the stream over. Connections die silently (NAT
//!   and proxy idle timeouts, a phone changing networks), so the server cannot wait to
//!   learn that the old one is gone: it is cut ([`Transmit::Abort`]), and the new one
//!   gets what followed the id, every message once. Only a GET *without*
//!   `Last-Event-ID` is refused (409) while the session's GET stream has a connection.
//! - **The GET stream** (§14.12): at most one live connection per session (409 for a
//!   second). Messages for it while no connection is live are kept, up to
//!   [`Config::with_max_backlog`], and written when one connects; a send beyond is
//!   refused with [`SendError::BacklogFull`].
//! - **Version header** (§14.9): `MCP-Protocol-Version` must name a served version
//!   (400 with -32000 otherwise); on a session the negotiated version governs; absent,
//!   the session's version applies, else 2025-03-26 (VERSION-3).
//! - **Error codes** in refusal bodies follow the TypeScript SDK: -32000 for transport
//!   refusals, -32001 for an unknown session's 404, -32700 and -32600 for bad JSON and
//!   bad shapes; a 405 names the allowed methods in `Allow`.
//! - **Sessions**: ids are 128 bits of the injected [`Entropy`], as 32 lowercase hex
//!   digits (SESSION-2, SESSION-3). Idle sessions (no open exchange and no request for
//!   [`Config::with_session_idle`]) expire; their id then gets 404 (SESSION-7). One
//!   whose client never came back after `initialize` expires after
//!   [`Config::with_handshake_timeout`] (10 s). A full server makes room for a new
//!   session by evicting the idle one closest to its expiry, so a flood of bare
//!   `initialize` requests evicts its own sessions and never locks out a client with a
//!   stream or a request in flight; with every session active, `initialize` gets 503
//!   and `Retry-After`.
//! - **Clusters** ([`Config::with_node`], [`cluster`]): several servers, each in its own
//!   process behind a load balancer without sticky routing, share their sessions and
//!   resumable streams through a store the driver performs ([`Server::poll_store`],
//!   [`Server::handle_store`]): any node serves any live session, a resume on any node
//!   replays and then follows the stream its writer node still writes, DELETE ends a
//!   session on every node, and responses, cancels, GET-stream messages and the
//!   application's announcements reach the node they concern. A server that is not a
//!   node emits no store work.
//! - **Shards** ([`Config::shards`], [`shard_of`]): one endpoint may be served by several
//!   servers, each behind its own lock in a threaded driver. A session lives on the shard
//!   that minted it, whose index is the first byte of its id; everything a session owns
//!   (streams, the GET stream, resumes, server requests, cancels) is reached through a
//!   request that names it, so it routes there; a request that names none keeps its
//!   state in its own exchange and may go to any shard. The shards give every answer an
//!   unsharded server would, and count their sessions against one bound together.

mod admit;
mod check;
pub mod cluster;
mod config;
mod dispatch;
mod head;
mod ids;
mod modern;
mod outbound;
mod output;
mod refuse;
mod route;
mod shard;
mod state;
mod streams;
mod teardown;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use bytes::BytesMut;

pub use crate::Era;
pub use cluster::{NodeId, RingKey, StoreInput, StoreOp, StoreUnavailable};
pub use config::{
    Allow, Config, DEFAULT_MAX_PARAM_HEADERS, Eras, LegacyPaths, ResponseMode, SessionMode,
};
pub use ids::{ExchangeId, PeerAddr, RequestHandle, SessionId, StreamId};
pub use output::{
    CloseReason, Delivery, Event, IncomingRequest, Refusal, SendError, Target, Transmit,
};
pub use shard::shard_of;

use crate::Entropy;
use crate::jsonrpc::{Classifier, Pending, RequestId};
use crate::resume::{Epoch, EventStore, MemoryStore};
use state::{Exchange, OpenRequest, Scope, Session, Stream, Timer};

/// The event queue capacity kept once it drains: enough for the usual few events per
/// input, so only a burst beyond it is allocated again.
const EVENTS_KEPT: usize = 64;

/// The authorization hook: sees every request head, and refuses with a [`Refusal`].
pub type Authorizer = Box<dyn FnMut(&http::request::Parts) -> Result<(), Refusal> + Send>;

/// The server state machine. See the [module docs](self).
pub struct Server {
    config: Config,
    entropy: Box<dyn Entropy + Send>,
    authorizer: Option<Authorizer>,
    classifier: Classifier,
    store: MemoryStore<SessionId>,
    /// One counter for every record, so no two records share a key; it counts in steps
    /// of the shard count from `1 + index`, so no two shards share one either.
    next: u64,
    exchanges: BTreeMap<ExchangeId, Exchange>,
    sessions: BTreeMap<SessionId, Session>,
    // INVARIANT: `session_ids` maps exactly the `wire` of every session in `sessions`.
    session_ids: BTreeMap<std::sync::Arc<str>, SessionId>,
    // INVARIANT: `peers` counts the sessions of each peer address, and holds no zero.
    peers: BTreeMap<std::net::IpAddr, usize>,
    streams: BTreeMap<StreamId, Stream>,
    requests: BTreeMap<RequestHandle, OpenRequest>,
    // INVARIANT: `by_id` maps (scope, id) of exactly the entries of `requests`.
    by_id: BTreeMap<(Scope, RequestId), RequestHandle>,
    server_requests: Pending<SessionId>,
    timers: BTreeSet<(Instant, Timer)>,
    ready: VecDeque<ExchangeId>,
    events: VecDeque<Event>,
    scratch: BytesMut,
    /// The latest time an input carried: when a write happened, for heartbeats.
    now: Option<Instant>,
    /// [`Server::shutdown`] was called: every new exchange gets 503.
    shutting_down: bool,
    /// Store work for the driver (cluster nodes only, [`Config::with_node`]).
    store_ops: VecDeque<StoreOp>,
    /// The sessions being loaded from the shared store, with the exchanges waiting.
    loading: BTreeMap<std::sync::Arc<str>, cluster::Loading>,
    /// The loads asked again later, by their key (`Timer::Reload`).
    reloads: BTreeMap<u64, std::sync::Arc<str>>,
    /// The rings this node writes that another node follows (their appends announced).
    followed: BTreeSet<crate::resume::RingId>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("exchanges", &self.exchanges.len())
            .field("sessions", &self.sessions.len())
            .field("streams", &self.streams.len())
            .field("requests", &self.requests.len())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server with this configuration; `entropy` makes session ids and the event
    /// store's [`Epoch`] (8 bytes, drawn now).
    pub fn new(config: Config, mut entropy: Box<dyn Entropy + Send>) -> Self {
        let mut epoch = [0; 8];
        entropy.fill(&mut epoch);
        let random = u64::from_le_bytes(epoch);
        let epoch = config
            .node
            .map_or(Epoch::new(random), |node| node.epoch(random));
        let store = MemoryStore::new(epoch, config.store);
        // A cluster node's server→client request ids carry its number above bit 36, so
        // no two nodes issue one id to a session (2^52 at most: exact in JavaScript).
        let first = config
            .node
            .map_or(1, |node| (i64::from(node.get()) << 36) + 1);
        let server_requests = Pending::starting_at(config.max_server_requests, first);
        let next = 1 + config.shard.0 as u64;
        Self {
            config,
            entropy,
            authorizer: None,
            classifier: Classifier::default(),
            store,
            next,
            exchanges: BTreeMap::new(),
            sessions: BTreeMap::new(),
            session_ids: BTreeMap::new(),
            peers: BTreeMap::new(),
            streams: BTreeMap::new(),
            requests: BTreeMap::new(),
            by_id: BTreeMap::new(),
            server_requests,
            timers: BTreeSet::new(),
            ready: VecDeque::new(),
            events: VecDeque::new(),
            scratch: BytesMut::new(),
            now: None,
            shutting_down: false,
            store_ops: VecDeque::new(),
            loading: BTreeMap::new(),
            reloads: BTreeMap::new(),
            followed: BTreeSet::new(),
        }
    }

    /// Sets the authorization hook (SEC-4): every request head passes through it after
    /// the `Host` and `Origin` checks; a refusal answers the request.
    pub fn set_authorizer(&mut self, authorizer: Option<Authorizer>) {
        self.authorizer = authorizer;
    }

    /// Replaces the tools' mirrored arguments (MODERN-7,
    /// [`Config::with_tool_mirrors`]), for an application whose tools change: requests
    /// checked from now on are checked against `tools`. With shards, set it on each (one
    /// [`Arc`](std::sync::Arc) shared by all).
    pub fn set_tool_mirrors(
        &mut self,
        tools: impl Into<std::sync::Arc<crate::mirror::ToolMirrors>>,
    ) {
        self.config.set_tool_mirrors(tools.into());
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The `Mcp-Session-Id` value of a live session.
    pub fn session_header(&self, session: SessionId) -> Option<&str> {
        self.sessions.get(&session).map(|s| &*s.wire)
    }

    /// The negotiated protocol version of a live session.
    pub fn session_version(&self, session: SessionId) -> Option<crate::ProtocolVersion> {
        self.sessions.get(&session).map(|s| s.version)
    }

    /// How many sessions are live.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// How many exchanges are open (head received, `End` not yet taken).
    pub fn exchange_count(&self) -> usize {
        self.exchanges.len()
    }

    /// Whether the server holds no state for any session, exchange, stream or request
    /// (what remains after every session expired and every exchange ended).
    pub fn is_idle(&self) -> bool {
        self.exchanges.is_empty()
            && self.sessions.is_empty()
            && self.session_ids.is_empty()
            && self.peers.is_empty()
            && self.streams.is_empty()
            && self.requests.is_empty()
            && self.by_id.is_empty()
            && self.server_requests.is_empty()
            && self.store.ring_count() == 0
            && self.events.is_empty()
            && self.store_ops.is_empty()
            && self.loading.is_empty()
            && self.reloads.is_empty()
            && self.followed.is_empty()
    }

    /// The next exchange with something to write (a head, body bytes or its end), each
    /// reported once until [`poll_transmit`](Self::poll_transmit) has taken all it has.
    #[must_use]
    pub fn poll_ready(&mut self) -> Option<ExchangeId> {
        while let Some(x) = self.ready.pop_front() {
            if self.exchanges.get(&x).is_some_and(|e| !e.out.is_empty()) {
                return Some(x);
            }
            if let Some(e) = self.exchanges.get_mut(&x) {
                e.readied = false;
            }
        }
        None
    }

    /// The next thing to write on `exchange`: pull when its connection can take more, so
    /// a slow reader keeps its bytes here (bounded) rather than in the driver. After
    /// [`Transmit::End`] or [`Transmit::Abort`] the exchange is forgotten.
    ///
    /// A head taken when its whole body is already queued (an SSE stream whose every
    /// message was answered before the driver asked, the common in-place answer) carries
    /// that body's `Content-Length`: the driver then frames it as one known-length body
    /// instead of chunks and a terminating chunk. So a driver that takes the head as late
    /// as it can (after running the application on the request) writes less.
    #[must_use]
    pub fn poll_transmit(&mut self, exchange: ExchangeId) -> Option<Transmit> {
        let x = exchange;
        let e = self.exchanges.get_mut(&x)?;
        let Some(mut t) = e.out.pop_front() else {
            e.readied = false;
            return None;
        };
        match &mut t {
            Transmit::Data(bytes) => e.unsent -= bytes.len(),
            Transmit::End | Transmit::Abort => self.forget_exchange(x),
            Transmit::Head(head) => {
                if e.phase == state::Phase::Ended
                    && e.unsent > 0
                    && !head.headers.contains_key(http::header::CONTENT_LENGTH)
                {
                    head.headers.insert(
                        http::header::CONTENT_LENGTH,
                        refuse::content_length(e.unsent),
                    );
                }
            }
        }
        Some(t)
    }

    /// The next event for the application.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        let event = self.events.pop_front();
        if event.is_none() && self.events.capacity() > EVENTS_KEPT {
            // A burst (10,000 sessions expiring at once) is not kept as capacity.
            self.events.shrink_to(EVENTS_KEPT);
        }
        event
    }

    /// Whether [`poll_event`](Self::poll_event) has an event to give.
    #[must_use]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next deadline: a heartbeat, a polling close, a session's idle expiry, a
    /// finished stream's linger, a server→client request's timeout, or the store's.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.timers.first().map(|(at, _)| *at),
            self.server_requests.poll_timeout(),
            self.store.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Acts on every deadline at or before `now`. An early call is a no-op.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock(now);
        while let Some(&(at, timer)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            self.fire(now, timer);
        }
        self.server_requests.handle_timeout(now);
        while let Some((id, session)) = self.server_requests.poll_expired() {
            if let Some(s) = self.sessions.get_mut(&session) {
                s.server_requests.remove(&id);
            }
            self.events
                .push_back(Event::RequestTimedOut { session, id });
        }
        self.store.handle_timeout(now);
    }

    fn fire(&mut self, now: Instant, timer: Timer) {
        match timer {
            Timer::Heartbeat(x) => self.heartbeat(now, x),
            Timer::StreamAfter(x) => {
                // RESUME-15: no answer yet; its head goes out now, as a stream's.
                if let Some(e) = self.exchanges.get_mut(&x)
                    && e.stream_after.take().is_some()
                    && e.phase == state::Phase::Awaiting
                {
                    self.open_post_stream(now, x);
                }
            }
            Timer::PollClose(x) => {
                if let Some(e) = self.exchanges.get_mut(&x) {
                    e.beats.poll_close = None;
                }
                let live = self
                    .exchanges
                    .get(&x)
                    .and_then(|e| e.carries.stream())
                    .and_then(|t| self.streams.get(&t))
                    .is_some_and(|t| t.conn == Some(x));
                if live {
                    self.end_exchange(x);
                }
            }
            Timer::Idle(s) => {
                let Some(session) = self.sessions.get_mut(&s) else {
                    return;
                };
                session.idle_timer = None;
                let due = self.config.idle_due(session);
                if session.exchanges > 0 {
                    // Active: looked at again when its last exchange ends (a shared
                    // session's record is touched meanwhile, `Timer::Touch`).
                } else if due > now {
                    session.idle_timer = Some(due);
                    self.timers.insert((due, Timer::Idle(s)));
                } else {
                    self.close_session_key(s, CloseReason::Expired);
                }
            }
            Timer::Touch(s) => self.touch_due(now, s),
            Timer::Reload(key) => self.reload(key),
            Timer::Refollow(t) => self.refollow(t),
            Timer::Linger(t) => {
                if self.streams.get(&t).is_some_and(state::Stream::lingers) {
                    self.remove_stream(t);
                }
            }
        }
    }

    /// Takes a place for one more session: `false` when the endpoint holds its most
    /// (over all shards, when there are several).
    fn take_session_place(&self) -> bool {
        match &self.config.budget {
            None => self.sessions.len() < self.config.max_sessions,
            Some(budget) => budget.take(self.config.max_sessions),
        }
    }

    /// Takes a place for one more session, evicting an idle one when the endpoint is full
    /// (`Config::with_max_sessions`): the one whose idle deadline comes first, so sessions
    /// whose handshake was never completed go before any other, and then the least
    /// recently active. A session with an open exchange or a request in flight (either
    /// way) is never evicted; its client is active. An evicted session's client gets 404
    /// at its next request and initializes again (SESSION-8). `false` when the endpoint
    /// is full of active sessions. With shards, a shard evicts among its own sessions
    /// only (each behind its own lock): new sessions go to the shards in turn, so a flood
    /// leaves evictable sessions on every shard, but at a bound smaller than the shard
    /// count an idle session on one shard does not make room on another.
    fn make_session_place(&mut self) -> bool {
        if self.take_session_place() {
            return true;
        }
        self.evict_idle_session(None) && self.take_session_place()
    }

    /// Makes room for one more session of `peer` under
    /// [`Config::with_max_sessions_per_peer`]: at its cap, the peer's idle session closest
    /// to its expiry is evicted, as at the overall bound; `false` when every one of its
    /// sessions is active. Always `true` without a cap or an address.
    fn make_peer_place(&mut self, peer: Option<std::net::IpAddr>) -> bool {
        let (Some(cap), Some(ip)) = (self.config.max_sessions_per_peer, peer) else {
            return true;
        };
        self.peers.get(&ip).is_none_or(|&n| n < cap) || self.evict_idle_session(Some(ip))
    }

    /// Closes the evictable session whose idle deadline comes first, of peer `of` if
    /// given (see
    /// [`make_session_place`](Self::make_session_place)); `false` if there is none. Walks
    /// the idle deadlines in order: each session without an open exchange has one, and a
    /// deadline found stale (the session was active since) is moved to where it belongs
    /// and met again later in the walk.
    fn evict_idle_session(&mut self, of: Option<std::net::IpAddr>) -> bool {
        use std::ops::Bound::{Excluded, Unbounded};
        let mut after: Option<(Instant, Timer)> = None;
        loop {
            let next = match after {
                None => self.timers.first().copied(),
                Some(key) => self
                    .timers
                    .range((Excluded(key), Unbounded))
                    .next()
                    .copied(),
            };
            let Some((at, timer)) = next else {
                return false;
            };
            after = Some((at, timer));
            let Timer::Idle(s) = timer else {
                continue;
            };
            let Some(session) = self.sessions.get_mut(&s) else {
                continue;
            };
            if session.exchanges > 0
                || session.open_requests > 0
                || !session.server_requests.is_empty()
                || of.is_some_and(|ip| session.peer != Some(ip))
            {
                continue;
            }
            let due = self.config.idle_due(session);
            if due > at {
                self.timers.remove(&(at, timer));
                self.timers.insert((due, timer));
                session.idle_timer = Some(due);
                continue;
            }
            self.close_session_key(s, CloseReason::Evicted);
            return true;
        }
    }

    /// Gives back the place of a session that ended, or of one not made after all.
    fn give_back_session_place(&self) {
        if let Some(budget) = &self.config.budget {
            budget.give_back();
        }
    }

    /// The next number for a record's key (see `next`).
    fn key(&mut self) -> u64 {
        let id = self.next;
        self.next += self.config.shard.1 as u64;
        id
    }

    /// Queues `t` on exchange `x` and reports it ready.
    fn push(&mut self, x: ExchangeId, t: Transmit) {
        let Some(e) = self.exchanges.get_mut(&x) else {
            return;
        };
        if e.phase == state::Phase::Ended {
            return;
        }
        match &t {
            Transmit::Data(bytes) => {
                e.unsent += bytes.len();
                if let Some(now) = self.now {
                    e.last_write = now;
                }
            }
            Transmit::End | Transmit::Abort => e.phase = state::Phase::Ended,
            Transmit::Head(_) => {
                if let Some(at) = e.stream_after.take() {
                    self.timers.remove(&(at, Timer::StreamAfter(x)));
                }
            }
        }
        e.out.push_back(t);
        if !e.readied {
            e.readied = true;
            self.ready.push_back(x);
        }
    }

    /// Forgets exchange `x`: it ended or its client went away.
    fn forget_exchange(&mut self, x: ExchangeId) {
        let Some(e) = self.exchanges.remove(&x) else {
            return;
        };
        if let Some(at) = e.stream_after {
            self.timers.remove(&(at, Timer::StreamAfter(x)));
        }
        if let Some(at) = e.beats.heartbeat {
            self.timers.remove(&(at, Timer::Heartbeat(x)));
        }
        if let Some(at) = e.beats.poll_close {
            self.timers.remove(&(at, Timer::PollClose(x)));
        }
        for r in &e.requests {
            if let Some(req) = self.requests.get_mut(r) {
                req.exchange = None;
            }
        }
        if let Some(t) = e.carries.stream() {
            self.keep_untaken(t, x, e.out);
            self.detach(t, x);
        }
        // MODERN-11: a sessionless request whose response went with its connection is
        // cancelled; nothing more is sent for it, and the application is told.
        for &h in &e.requests {
            if self
                .requests
                .get(&h)
                .is_some_and(|r| r.era == Era::Sessionless)
            {
                self.close_request(h);
                self.events.push_back(Event::Cancelled {
                    request: h,
                    reason: Some("the client closed the response stream".into()),
                });
            }
        }
        if let Some(s) = e.session {
            self.exchange_left_session(s);
            // A legacy session lives exactly as long as its stream.
            if e.route == state::Route::LegacyStream {
                self.close_session_key(s, CloseReason::Disconnected);
            }
        }
    }

    /// A session lost one of its exchanges: with none left, its idle clock runs.
    fn exchange_left_session(&mut self, s: SessionId) {
        let Some(session) = self.sessions.get_mut(&s) else {
            return;
        };
        session.exchanges -= 1;
        if session.exchanges == 0 && session.idle_timer.is_none() {
            let due = self.config.idle_due(session);
            session.idle_timer = Some(due);
            self.timers.insert((due, Timer::Idle(s)));
        }
    }
}
