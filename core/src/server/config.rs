//! [`Config`]: every policy and bound of a [`Server`](super::Server), with defaults safe
//! for a local server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::mirror::ToolMirrors;
use crate::resume::StoreLimits;

/// The `Mcp-Param-*` headers a request's head keeps by default
/// ([`Config::with_max_param_headers`]).
pub const DEFAULT_MAX_PARAM_HEADERS: usize = 64;

/// The table [`Config::tool_mirrors`] reads when none was set.
static NO_MIRRORS: ToolMirrors = ToolMirrors::new();

/// How a request's response is carried (docs/requirements.md §14.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ResponseMode {
    /// JSON when the application answers before it sends anything related to the request;
    /// an SSE stream as soon as it sends a related notification or request first, or
    /// when no answer is ready after [`Config::with_stream_after`] (1 s by default), so
    /// that a slow answer's head, priming event and heartbeats reach a proxy in time
    /// (RESUME-15). The response head waits for whichever comes first.
    #[default]
    Auto,
    /// Always one JSON body (HTTP-POST-7). Messages the application relates to the
    /// request go to the session's GET stream instead, as unrelated ones do.
    Json,
    /// Always an SSE stream, opened at once (and primed, on 2025-11-25). Required for the
    /// SEP-1699 polling mode to close a request's stream early.
    Sse,
}

/// Whether the server keeps sessions (SESSION-*).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SessionMode {
    /// `initialize` mints a session id; every later request must carry it.
    #[default]
    Stateful,
    /// No session ids: every POST stands alone, GET and DELETE get 405, nothing is
    /// resumable (no ids can be scoped to a client without a session, SESSION-9).
    Stateless,
}

/// The eras the MCP endpoint serves, decided per request (MODERN-25). The legacy
/// HTTP+SSE transport has paths of its own and is served when they are set
/// ([`Config::with_legacy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Eras(u8);

impl Eras {
    /// The session era (2025-03-26 … 2025-11-25): `initialize`, `Mcp-Session-Id`, the GET
    /// stream, resumes.
    pub const SESSIONS: Self = Self(1);
    /// The sessionless revision (2026-07-28): every request carries its `_meta`.
    pub const MODERN: Self = Self(2);
    /// Both.
    pub const ALL: Self = Self(3);

    /// Whether `self` holds every era of `other`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The eras of both.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl std::ops::BitOr for Eras {
    type Output = Self;

    fn bitor(self, other: Self) -> Self {
        self.union(other)
    }
}

/// Which `Origin` (SEC-1, SEC-2) or `Host` (SEC-7) values are accepted.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Allow {
    /// Loopback only, the default for a local server: for `Host`, `localhost`,
    /// `127.0.0.1` and `[::1]` with any port; for `Origin`, those hosts with the `http` or
    /// `https` scheme and any port.
    #[default]
    Loopback,
    /// Exactly these values (`Host`: `name[:port]`; `Origin`: `scheme://name[:port]`),
    /// compared ASCII case-insensitively. An entry without a port also accepts any port.
    List(Vec<String>),
    /// No check. For a server behind a proxy that checks, or a public endpoint whose
    /// clients are not browsers; DNS rebinding is then the deployment's concern.
    Any,
}

/// The paths of the legacy HTTP+SSE transport (2024-11-05, LEGACY-1), served beside the
/// Streamable HTTP endpoint (LEGACY-5): the paths clients call, whole, also where a
/// router nests the service and strips its prefix ([`Config::with_endpoint`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyPaths {
    /// The SSE endpoint a legacy client GETs (the SDKs' default is `/sse`).
    pub sse: String,
    /// The POST endpoint announced in the `endpoint` event, with `?sessionId=`, as it
    /// is written here (LEGACY-2).
    pub messages: String,
}

impl Default for LegacyPaths {
    fn default() -> Self {
        Self {
            sse: "/sse".into(),
            messages: "/messages".into(),
        }
    }
}

/// Everything a [`Server`](super::Server) decides by policy. Built with `Config::new()` and
/// the `with_*` methods; every bound has a default, and every default is documented.
#[derive(Clone, Debug)]
#[must_use]
pub struct Config {
    pub(super) endpoint: String,
    pub(super) sessions: SessionMode,
    pub(super) response: ResponseMode,
    pub(super) get_stream: bool,
    pub(super) delete: bool,
    pub(super) legacy: Option<LegacyPaths>,
    pub(super) eras: Eras,
    pub(super) origins: Allow,
    pub(super) hosts: Allow,
    pub(super) max_body: usize,
    pub(super) max_sessions: usize,
    pub(super) max_sessions_per_peer: Option<usize>,
    pub(super) session_idle: Duration,
    pub(super) handshake_timeout: Duration,
    pub(super) max_requests_per_session: usize,
    pub(super) max_server_requests: usize,
    pub(super) max_backlog: usize,
    pub(super) max_unsent: usize,
    pub(super) heartbeat: Option<Duration>,
    pub(super) stream_after: Option<Duration>,
    pub(super) retry: Option<Duration>,
    pub(super) polling: Option<Duration>,
    pub(super) linger: Duration,
    pub(super) store: StoreLimits,
    /// This server's node in a cluster ([`Config::with_node`]); `None`: alone.
    pub(super) node: Option<super::NodeId>,
    /// [`Config::with_store_grace`].
    pub(super) store_grace: Duration,
    /// This server's shard and how many there are ([`Config::shards`]).
    pub(super) shard: (usize, usize),
    /// The sessions held by every shard of the endpoint, when there are several.
    pub(super) budget: Option<SessionBudget>,
    /// Every tool's mirrored arguments (MODERN-7), shared by the shards; `None`: none.
    tool_mirrors: Option<Arc<ToolMirrors>>,
    /// The most arguments one tool of `tool_mirrors` mirrors ([`ToolMirrors::widest`]).
    widest_mirrors: usize,
    /// [`Config::with_max_param_headers`].
    max_param_headers: usize,
}

/// The sessions the shards of one endpoint hold together, so that
/// [`Config::with_max_sessions`] bounds the endpoint, not each shard.
#[derive(Clone, Debug, Default)]
pub(super) struct SessionBudget(Arc<AtomicUsize>);

impl SessionBudget {
    /// Takes a place for one more session, unless `max` are held.
    pub(super) fn take(&self, max: usize) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < max).then_some(held + 1)
            })
            .is_ok()
    }

    /// Gives back the place of a session that ended (or was never made).
    pub(super) fn give_back(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Config {
    /// The defaults: endpoint `/mcp`, sessions on, [`ResponseMode::Auto`], GET stream and
    /// DELETE allowed, no legacy paths, loopback `Origin` and `Host` only, 4 MiB bodies,
    /// 10,000 sessions idle for at most 30 minutes, 1,024 open requests per session, 4,096
    /// server→client requests in flight, 256 messages queued for an absent GET stream,
    /// 4 MiB unsent per connection, a heartbeat every 15 s, a slow answer streamed after
    /// 1 s, `retry` 1 s in priming events, no polling, and a finished stream's frames kept
    /// 60 s for late resumes.
    pub fn new() -> Self {
        Self {
            endpoint: "/mcp".into(),
            sessions: SessionMode::Stateful,
            response: ResponseMode::Auto,
            get_stream: true,
            delete: true,
            legacy: None,
            eras: Eras::ALL,
            origins: Allow::Loopback,
            hosts: Allow::Loopback,
            max_body: 4 << 20,
            max_sessions: 10_000,
            max_sessions_per_peer: None,
            session_idle: Duration::from_secs(30 * 60),
            handshake_timeout: Duration::from_secs(10),
            max_requests_per_session: 1024,
            max_server_requests: 4096,
            max_backlog: 256,
            max_unsent: 4 << 20,
            heartbeat: Some(Duration::from_secs(15)),
            stream_after: Some(Duration::from_secs(1)),
            retry: Some(Duration::from_secs(1)),
            polling: None,
            linger: Duration::from_secs(60),
            store: StoreLimits::new(),
            node: None,
            store_grace: Duration::from_secs(1),
            shard: (0, 1),
            budget: None,
            tool_mirrors: None,
            widest_mirrors: 0,
            max_param_headers: DEFAULT_MAX_PARAM_HEADERS,
        }
    }

    /// The path of the Streamable HTTP endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The path of the Streamable HTTP endpoint (HTTP-POST-1); requests to any other
    /// path (and not to the legacy paths) get 404.
    ///
    /// This and the [legacy paths](Self::with_legacy) are the paths clients call, and
    /// the service answers them where a router nests it too: a request may name one of
    /// them by a tail of whole segments, what a router that strips the prefix it nests
    /// the service under passes on (axum's `nest_service("/mcp", …)` hands `/mcp` on as
    /// `/`, `/mcp/sse` as `/sse`; `route_service("/mcp", …)` hands on `/mcp`). So the
    /// default `/mcp` serves `nest_service("/mcp", …)` and `route_service("/mcp", …)`
    /// alike. A path one of them has whole wins; then the endpoint's tail, the legacy
    /// SSE path's, the messages path's (on a server of its own, `/` is the endpoint too).
    pub fn with_endpoint(mut self, path: impl Into<String>) -> Self {
        self.endpoint = path.into();
        self
    }

    /// The eras the endpoint serves. By default [`Eras::ALL`]: the session era and the
    /// sessionless revision, decided per request (MODERN-25), the application answering
    /// `server/discover` among the latter (MODERN-14; the [`app`](crate::app) layer
    /// does). With [`Eras::SESSIONS`] alone a request of the sessionless revision is
    /// told, with -32022, which revisions are served, so a dual-era client falls back to
    /// `initialize` (MODERN-15). With [`Eras::MODERN`] alone, GET and DELETE get 405 and
    /// `Mcp-Session-Id` and `Last-Event-ID` are ignored (MODERN-2).
    pub fn with_eras(mut self, eras: Eras) -> Self {
        self.eras = eras;
        self
    }

    /// The eras the endpoint serves.
    pub fn eras(&self) -> Eras {
        self.eras
    }

    /// Sessions or none; see [`SessionMode`].
    pub fn with_sessions(mut self, mode: SessionMode) -> Self {
        self.sessions = mode;
        self
    }

    /// How responses are carried; see [`ResponseMode`].
    pub fn with_response_mode(mut self, mode: ResponseMode) -> Self {
        self.response = mode;
        self
    }

    /// Whether GET opens a standalone stream; `false` answers GET with 405 (HTTP-GET-3).
    pub fn with_get_stream(mut self, enabled: bool) -> Self {
        self.get_stream = enabled;
        self
    }

    /// Whether DELETE ends a session; `false` answers it with 405 (HTTP-DELETE-2).
    pub fn with_delete(mut self, enabled: bool) -> Self {
        self.delete = enabled;
        self
    }

    /// Also serve the legacy HTTP+SSE transport on these paths (LEGACY-5).
    pub fn with_legacy(mut self, paths: Option<LegacyPaths>) -> Self {
        self.legacy = paths;
        self
    }

    /// The legacy HTTP+SSE paths served, if any.
    pub fn legacy(&self) -> Option<&LegacyPaths> {
        self.legacy.as_ref()
    }

    /// The accepted `Origin` values (SEC-1).
    pub fn with_origins(mut self, allow: Allow) -> Self {
        self.origins = allow;
        self
    }

    /// The accepted `Host` values (SEC-7).
    pub fn with_hosts(mut self, allow: Allow) -> Self {
        self.hosts = allow;
        self
    }

    /// The largest request body, in bytes; a longer one gets 413, counted as it streams in.
    pub fn with_max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The most sessions at once. At the bound, an `initialize` evicts the idle session
    /// closest to its expiry (one whose handshake was never completed first, then the
    /// least recently active; never one with an open stream or a request in flight), and
    /// gets 503 with `Retry-After` only when every session is active.
    pub fn with_max_sessions(mut self, sessions: usize) -> Self {
        self.max_sessions = sessions;
        self
    }

    /// The most sessions one peer address holds at once ([`PeerAddr`](super::PeerAddr),
    /// which the driver puts in each request head); at the cap its idle session closest
    /// to expiry is evicted, and with every one active its `initialize` gets 503. For a
    /// server reached directly: behind a proxy every client has the proxy's address.
    /// `None` (the default): no cap. With shards, each shard holds a peer to its share of
    /// the cap (rounded up).
    pub fn with_max_sessions_per_peer(mut self, sessions: Option<usize>) -> Self {
        self.max_sessions_per_peer = sessions.map(|n| n.max(1));
        self
    }

    /// How long a session with no open exchange lives without a request (SESSION-7).
    pub fn with_session_idle(mut self, idle: Duration) -> Self {
        self.session_idle = crate::duration::bounded(idle);
        self
    }

    /// How long a session minted by `initialize` lives without a request before its
    /// client comes back (with `notifications/initialized` or any request on it): bare
    /// `initialize` requests, a flood's or an abandoned client's, then hold no place for
    /// the full idle time. At most [`with_session_idle`](Self::with_session_idle).
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = crate::duration::bounded(timeout);
        self
    }

    /// When `session`, with no open exchange, expires: its last request plus the idle
    /// time, or the handshake timeout while its client has not come back.
    pub(super) fn idle_due(&self, session: &super::state::Session) -> std::time::Instant {
        let idle = match session.handshake {
            super::state::Handshake::Complete => self.session_idle,
            super::state::Handshake::Pending => self.handshake_timeout.min(self.session_idle),
        };
        session.last_active + idle
    }

    /// The most client requests of one session the application holds unanswered; one
    /// more is answered -32600 at once (the same id while in flight, too: JSONRPC-3).
    pub fn with_max_requests_per_session(mut self, requests: usize) -> Self {
        self.max_requests_per_session = requests;
        self
    }

    /// The most server→client requests awaiting their response, over all sessions.
    pub fn with_max_server_requests(mut self, requests: usize) -> Self {
        self.max_server_requests = requests;
        self
    }

    /// The most messages kept for a session's GET stream while none is open; a send
    /// beyond is refused with [`SendError::BacklogFull`](super::SendError::BacklogFull).
    pub fn with_max_backlog(mut self, messages: usize) -> Self {
        self.max_backlog = messages;
        self
    }

    /// The most bytes one connection may have queued and not yet taken by the driver. A
    /// reader more than this far behind when the next frame comes is closed (its stream
    /// stays resumable from the last event it was handed), so a slow reader costs at most
    /// this much, plus one frame, beyond the ring; a reader that keeps up is never closed,
    /// however large a frame.
    pub fn with_max_unsent(mut self, bytes: usize) -> Self {
        self.max_unsent = bytes;
        self
    }

    /// The SSE comment sent on a stream idle this long (SSE-ENC-7); `None`: never.
    pub fn with_heartbeat(mut self, interval: Option<Duration>) -> Self {
        self.heartbeat = interval.map(crate::duration::bounded);
        self
    }

    /// Under [`ResponseMode::Auto`], how long a POST waits for its answer, or for a
    /// message related to it, before it is answered as an SSE stream anyway: its head and
    /// priming event go out then, and heartbeats keep it alive (RESUME-15). Without this
    /// a proxy waiting for the head of a slow tool's answer gives up (nginx answers 504
    /// after its `proxy_read_timeout`), and heartbeats cannot help a head not yet sent.
    /// Keep it below the proxies' read timeouts. An answer ready sooner still goes out as
    /// one JSON body. `None`: wait for the answer however long it takes.
    pub fn with_stream_after(mut self, after: Option<Duration>) -> Self {
        self.stream_after = after.map(crate::duration::bounded);
        self
    }

    /// The `retry` sent in priming events (RESUME-10, RESUME-11); `None`: none.
    pub fn with_retry(mut self, retry: Option<Duration>) -> Self {
        self.retry = retry.map(crate::duration::bounded);
        self
    }

    /// SEP-1699 polling (2025-11-25 sessions): close a resumable stream's connection this
    /// long after it opened (`Duration::ZERO`: right after the priming event); the client
    /// comes back by GET with `Last-Event-ID` after `retry` (RESUME-9). `None`: keep open.
    pub fn with_polling(mut self, after: Option<Duration>) -> Self {
        self.polling = after.map(crate::duration::bounded);
        self
    }

    /// How long a finished stream's frames stay resumable (docs/requirements.md §14.2).
    pub fn with_linger(mut self, linger: Duration) -> Self {
        self.linger = crate::duration::bounded(linger);
        self
    }

    /// The mirrored arguments of the tools the application serves (MODERN-7, MODERN-8):
    /// a 2026-07-28 `tools/call` of a tool in `tools` must carry each argument the tool
    /// marks with `x-mcp-header` in its `Mcp-Param-{Name}` header, or is answered 400 with
    /// -32020. A tool not in the table is checked for `Mcp-Name` alone. None by default.
    /// The table is shared, not copied, by [`shards`](Self::shards); an application whose
    /// tools change replaces it with [`Server::set_tool_mirrors`](super::Server::set_tool_mirrors).
    pub fn with_tool_mirrors(mut self, tools: impl Into<Arc<ToolMirrors>>) -> Self {
        self.set_tool_mirrors(tools.into());
        self
    }

    /// The tools' mirrored arguments the server checks calls against.
    pub fn tool_mirrors(&self) -> &ToolMirrors {
        self.tool_mirrors.as_deref().unwrap_or(&NO_MIRRORS)
    }

    /// Replaces the table (and the widest tool it holds, read once here).
    pub(super) fn set_tool_mirrors(&mut self, tools: Arc<ToolMirrors>) {
        self.widest_mirrors = tools.widest();
        self.tool_mirrors = (!tools.is_empty()).then_some(tools);
    }

    /// The most `Mcp-Param-*` header fields a request's head keeps (a repeated field
    /// counts once per value), [`DEFAULT_MAX_PARAM_HEADERS`] (64) by default, so a head
    /// cannot make the server hold more than this many. Raised, if need be, to the most
    /// arguments one tool of [`with_tool_mirrors`](Self::with_tool_mirrors) mirrors, so
    /// a conforming call is never refused. Only a request whose `Mcp-Method` is
    /// `tools/call` keeps them at all. A 2026-07-28 `tools/call` of a tool with mirrors
    /// that carries more is answered 400 with -32020: the header its check needs could be
    /// among those not kept. Any other request ignores them, as it ignores every
    /// `Mcp-Param-*` header (intermediaries may add some).
    pub fn with_max_param_headers(mut self, headers: usize) -> Self {
        self.max_param_headers = headers;
        self
    }

    /// The most `Mcp-Param-*` header fields a request's head keeps, as configured.
    pub fn max_param_headers(&self) -> usize {
        self.max_param_headers
    }

    /// The bound heads are read with: the configured one, or the widest tool's count.
    pub(super) fn param_header_limit(&self) -> usize {
        self.max_param_headers.max(self.widest_mirrors)
    }

    /// Makes this server node `node` of a cluster that shares its sessions and resumable
    /// streams through a store the driver performs (see [`super::cluster`]): sessions
    /// minted here are written to it, sessions minted elsewhere are loaded from it, every
    /// frame of a resumable stream is appended to it, and a resume of another node's
    /// stream follows that stream there. Every node of one cluster needs its own number
    /// (the top 16 bits of its event ids). `None` (the default): the server is alone and
    /// emits no store work.
    pub fn with_node(mut self, node: Option<super::NodeId>) -> Self {
        self.node = node;
        self
    }

    /// How long a cluster node waits for another node's writes to reach the store before
    /// it takes a session it cannot find for gone (404), or a `Last-Event-ID` its ring
    /// does not reach for never issued (400) (default 1 s). Nodes answer before their
    /// writes land (a write-through would cost every request a round trip), so a
    /// client's next request, on another node, may come before them: it is asked again,
    /// after 25 ms, then twice as long each time, until this has passed.
    pub fn with_store_grace(mut self, grace: Duration) -> Self {
        self.store_grace = crate::duration::bounded(grace);
        self
    }

    /// The node this server is in its cluster, if it is one ([`with_node`](Self::with_node)).
    pub fn node(&self) -> Option<super::NodeId> {
        self.node
    }

    /// The event store's bounds (rings, the byte budget, each ring's retention).
    pub fn with_store_limits(mut self, limits: StoreLimits) -> Self {
        self.store = limits;
        self
    }

    /// The configurations of `count` servers that split one endpoint's sessions
    /// between them, each behind its own lock, so that requests of different sessions
    /// never wait for each other: shard `i` is the `i`th. A driver builds one
    /// [`Server`](super::Server) from each and hands each request head to the one
    /// [`shard_of`](super::shard_of) names, or to any when it names none. Call it last:
    /// the shards' bounds are derived from this configuration's.
    ///
    /// Each shard stamps its index into the first byte of the session ids it mints (120
    /// random bits remain), and numbers its handles apart from every other shard's, so
    /// [`SessionId`](super::SessionId) and [`RequestHandle`](super::RequestHandle) values
    /// are unique over all shards. [`with_max_sessions`](Self::with_max_sessions) stays
    /// exact: the shards count their sessions together, in one shared atomic counter
    /// (the only state they share). The other whole-endpoint bounds are divided, rounded
    /// up: [`with_max_server_requests`](Self::with_max_server_requests) and the store's
    /// rings and bytes; the rest are per session or per connection already.
    ///
    /// # Panics
    ///
    /// Unless `1 <= count <= 256`: a driver's mistake, not input.
    pub fn shards(self, count: usize) -> Vec<Self> {
        assert!((1..=256).contains(&count), "{count} shards: from 1 to 256");
        let budget = (count > 1).then(SessionBudget::default);
        (0..count)
            .map(|index| {
                let mut shard = self.clone().shard_share(count);
                shard.shard = (index, count);
                shard.budget.clone_from(&budget);
                shard
            })
            .collect()
    }

    /// This server's shard and the number of shards: `(0, 1)` for a server that is not
    /// one of several ([`shards`](Self::shards)).
    pub fn shard(&self) -> (usize, usize) {
        self.shard
    }

    /// The bounds one of `count` shards keeps: the whole endpoint's, divided.
    fn shard_share(mut self, count: usize) -> Self {
        if count > 1 {
            self.max_server_requests = self.max_server_requests.div_ceil(count);
            self.max_sessions_per_peer = self.max_sessions_per_peer.map(|n| n.div_ceil(count));
            self.store = self
                .store
                .with_max_rings(self.store.max_rings().div_ceil(count))
                .with_max_bytes(self.store.max_bytes().div_ceil(count));
        }
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}
