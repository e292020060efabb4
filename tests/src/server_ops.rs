//! An op model of a [`Server`](mcpwire::server::Server)'s life, shared by the `server_props` proptest and the
//! `server_requests` fuzz target: both turn bytes into a [`Setup`] and a list of [`Op`]s
//! ([`scenario`]) and [`run`] them, so a failing fuzz input replays as a test.
//!
//! An [`Op`] is a client's move (a request head with chosen headers, a body chunk, the
//! body's end, a disconnect), a step of the virtual clock, or the application's move
//! (answer, notify, send a request, close a session). References to things that exist
//! only at run time (exchanges, sessions, session ids and event ids seen on the wire,
//! requests handed to the application, ids of server→client requests) are indexes,
//! resolved modulo what exists then, so every op list runs. The server is one to three
//! shards of one endpoint ([`Shards`], by [`Setup::shards`]), driven as one, so every
//! check below holds over shards as well.
//!
//! The application tags every message it sends with the session it believes the message
//! belongs to: `{"s":"<Mcp-Session-Id>"}` as the result, error data or params (on a
//! stateless server, `"x<exchange>"` for the exchange whose body carried the request).
//! [`run`] checks after every op:
//!
//! - per exchange, one `Head`, then `Data`, then `End`, nothing after `End` or after a
//!   disconnect, and no exchange the driver never opened;
//! - every message on an exchange carries only the tag of the session that exchange was
//!   admitted to (its request's `Mcp-Session-Id`, the one its response head names, or the
//!   legacy `endpoint` event's), so no frame of one session reaches another; a response
//!   head never names a session other than the one the request did;
//! - SSE bodies decode cleanly, every `Data` is whole frames, event data is JSON, and the
//!   ids of one ring on one connection increase (after the `Last-Event-ID` on a resume);
//!   JSON bodies parse and match their `Content-Length`; no `Data` is empty (an empty
//!   chunk ends a chunked HTTP/1.1 body);
//! - events agree with the application's view: a client's response completes only a
//!   request sent to its own session, a cancellation names an open request, a session
//!   closes once, and a send to an answered request or a closed session is refused;
//! - after `handle_timeout(now)`, no deadline is left at or before `now`;
//! - at the end, once every exchange is disconnected, every deadline has passed and the
//!   application has answered what it still holds, every shard is idle
//!   ([`Server::is_idle`](mcpwire::server::Server::is_idle)).
//!
//! Revision 2026-07-28 (MODERN-*) runs on the same endpoint ([`Setup::eras`]): an
//! [`Op::Modern`] is a POST with right or wrong `params._meta`, `MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name` (the `=?base64?…?=` sentinel too) and `Mcp-Param-*` headers,
//! a request or a notification; [`Payload::Modern`] puts such a body behind any head, so
//! the era is decided per request (MODERN-25). For these [`run`] also checks:
//!
//! - where the model can compute it (a head otherwise conforming, a whole body within
//!   bounds, an era decided by the headers and `_meta`), the answer: dispatched to the
//!   application without a session, 202 for a notification (MODERN-24), or refused with
//!   the status and code of the first failed check (400 -32020/-32022/-32602, 404
//!   -32601), in the order `modern::check` documents, a repeated `Mcp-Name` refused
//!   (MODERN-6), and, where the tool `echo` mirrors arguments ([`Setup::mirrors`]), its
//!   `Mcp-Param-*` headers checked against them (MODERN-7, MODERN-8: one header each,
//!   plain or in the sentinel, others ignored, no more than the server keeps); a JSON
//!   answer's status follows the application's error code (MODERN-9);
//! - no answer names a session (MODERN-2) and no event on its stream has an id
//!   (MODERN-12); no server→client request is sent on it, and with JSON answers only no
//!   notification either (MODERN-10);
//! - every such request gets exactly one answer on its exchange, which then ends, or is
//!   cancelled ([`Event::Cancelled`](mcpwire::server::Event::Cancelled)) and gets none;
//!   a client that goes away cancels it (MODERN-11), and nothing is written after;
//! - after every op the server holds exactly the exchanges still open on the wire
//!   (`exchange_count`), and while no session was ever made (a 2026-07-28-only run, a
//!   stateless server) no session (`session_count`), and once nothing is open or owed,
//!   nothing at all (`is_idle`): a modern exchange leaves no state behind.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbitrary::Unstructured;
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method};
use mcpwire::jsonrpc::{ErrorCode, RawJson, RequestId};
use mcpwire::resume::{EventId, RingLimits, StoreLimits};
use mcpwire::server::{
    CloseReason, Config, Era, Eras, Event, ExchangeId, LegacyPaths, RequestHandle, ResponseMode,
    SendError, SessionId, SessionMode, Target, Transmit,
};
use mcpwire::sse::{Decoder, Item, Limits};

use crate::shards::Shards;

/// The most ops [`scenario`] makes from one input, so one fuzz input stays fast.
pub const MAX_OPS: usize = 256;

/// The versions a head or an `initialize` may name: the served ones, the sessionless
/// revision, and two that are not versions.
const VERSIONS: [&str; 7] = [
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
    "2026-07-28",
    "2099-01-01",
    "not-a-version",
];

/// The server configuration of one run, as the choices the model needs to know.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Setup {
    /// [`Config::with_response_mode`].
    pub response: ResponseMode,
    /// [`SessionMode::Stateless`] when set.
    pub stateless: bool,
    /// Serve the legacy HTTP+SSE paths (`/sse`, `/messages`).
    pub legacy: bool,
    /// [`Config::with_get_stream`].
    pub get_stream: bool,
    /// [`Config::with_delete`].
    pub delete: bool,
    /// [`Config::with_polling`].
    pub polling: Option<Duration>,
    /// [`Config::with_heartbeat`].
    pub heartbeat: Option<Duration>,
    /// [`Config::with_max_sessions`].
    pub max_sessions: usize,
    /// [`Config::with_max_body`].
    pub max_body: usize,
    /// [`Config::with_max_backlog`].
    pub max_backlog: usize,
    /// [`Config::with_max_unsent`].
    pub max_unsent: usize,
    /// [`Config::with_max_requests_per_session`].
    pub max_requests_per_session: usize,
    /// [`Config::with_max_server_requests`].
    pub max_server_requests: usize,
    /// [`Config::with_session_idle`].
    pub session_idle: Duration,
    /// [`Config::with_linger`].
    pub linger: Duration,
    /// Each ring's [`RingLimits::with_max_events`].
    pub ring_events: usize,
    /// The store's [`StoreLimits::with_max_rings`].
    pub max_rings: usize,
    /// The seed of the session id entropy.
    pub seed: u64,
    /// How many shards serve the endpoint ([`Config::shards`], driven as one by
    /// [`Shards`]): 1 to 3, from the seed's byte, so that older inputs keep the rest of
    /// their meaning.
    pub shards: usize,
    /// [`Config::with_eras`]: mostly both eras, sometimes one alone (from the seed's
    /// byte too).
    pub eras: Eras,
    /// [`Config::with_tool_mirrors`]: the tool `echo` mirrors its `region` (string),
    /// `count` (integer) and `flag` (boolean) arguments into `Mcp-Param-*` headers
    /// (MODERN-7), from the seed's byte.
    pub mirrors: bool,
    /// [`Config::with_max_param_headers`]: 64 or 3 (the most `echo` mirrors), from the
    /// seed's byte.
    pub max_param_headers: usize,
}

impl Default for Setup {
    /// The defaults of [`Config::new`], with a 60 s idle time and a 10 s linger so that
    /// short runs reach them.
    fn default() -> Self {
        Self {
            response: ResponseMode::Auto,
            stateless: false,
            legacy: true,
            get_stream: true,
            delete: true,
            polling: None,
            heartbeat: Some(Duration::from_secs(15)),
            max_sessions: 10_000,
            max_body: 4 << 20,
            max_backlog: 256,
            max_unsent: 4 << 20,
            max_requests_per_session: 1024,
            max_server_requests: 4096,
            session_idle: Duration::from_secs(60),
            linger: Duration::from_secs(10),
            ring_events: 1024,
            max_rings: 1024,
            seed: 1,
            shards: 1,
            eras: Eras::ALL,
            mirrors: false,
            max_param_headers: 64,
        }
    }
}

impl Setup {
    /// The server configuration.
    pub fn config(&self) -> Config {
        let mut config = Config::new();
        if self.mirrors {
            let schema = serde_json::json!({"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "count": {"type": "integer", "x-mcp-header": "Count"},
                "flag": {"type": "boolean", "x-mcp-header": "Flag"}}});
            let tools = mcpwire::mirror::ToolMirrors::from_schemas([("echo", &schema)])
                .expect("a valid schema");
            config = config.with_tool_mirrors(tools);
        }
        config
            .with_max_param_headers(self.max_param_headers)
            .with_response_mode(self.response)
            .with_sessions(if self.stateless {
                SessionMode::Stateless
            } else {
                SessionMode::Stateful
            })
            .with_legacy(self.legacy.then(LegacyPaths::default))
            .with_get_stream(self.get_stream)
            .with_delete(self.delete)
            .with_polling(self.polling)
            .with_heartbeat(self.heartbeat)
            .with_max_sessions(self.max_sessions)
            .with_max_body(self.max_body)
            .with_max_backlog(self.max_backlog)
            .with_max_unsent(self.max_unsent)
            .with_max_requests_per_session(self.max_requests_per_session)
            .with_max_server_requests(self.max_server_requests)
            .with_session_idle(self.session_idle)
            .with_linger(self.linger)
            .with_eras(self.eras)
            .with_store_limits(
                StoreLimits::new()
                    .with_max_rings(self.max_rings)
                    .with_ring(RingLimits::new().with_max_events(self.ring_events)),
            )
    }

    /// A setup chosen by `u`: mostly defaults, with small bounds often enough that
    /// every limit is reached.
    pub fn from_bytes(u: &mut Unstructured<'_>) -> Self {
        let d = Self::default();
        let flags = byte(u);
        let limits = byte(u);
        let mut setup = Self {
            response: [ResponseMode::Auto, ResponseMode::Json, ResponseMode::Sse][below(u, 3)],
            stateless: flags & 7 == 0,
            legacy: flags & 8 != 0,
            get_stream: flags & 0x30 != 0,
            delete: flags & 0xc0 != 0,
            polling: [
                None,
                None,
                Some(Duration::ZERO),
                Some(Duration::from_secs(2)),
            ][below(u, 4)],
            heartbeat: [d.heartbeat, Some(Duration::from_secs(1)), None][below(u, 3)],
            max_sessions: if limits & 1 != 0 { 2 } else { d.max_sessions },
            max_body: if limits & 2 != 0 { 200 } else { d.max_body },
            max_backlog: if limits & 4 != 0 { 2 } else { d.max_backlog },
            max_unsent: if limits & 8 != 0 { 300 } else { d.max_unsent },
            max_requests_per_session: if limits & 16 != 0 { 2 } else { 1024 },
            max_server_requests: if limits & 32 != 0 { 2 } else { 4096 },
            session_idle: [d.session_idle, Duration::from_secs(5)][below(u, 2)],
            linger: [d.linger, Duration::ZERO][below(u, 2)],
            ring_events: if limits & 64 != 0 { 2 } else { d.ring_events },
            max_rings: if limits & 128 != 0 { 3 } else { d.max_rings },
            seed: u64::from(byte(u)),
            shards: 1,
            eras: Eras::ALL,
            mirrors: false,
            max_param_headers: d.max_param_headers,
        };
        setup.shards = 1 + (setup.seed % 3) as usize;
        setup.eras = match (setup.seed >> 3) % 8 {
            0 => Eras::MODERN,
            1 => Eras::SESSIONS,
            _ => Eras::ALL,
        };
        setup.mirrors = setup.seed & 0x40 != 0;
        if setup.seed & 0x80 != 0 {
            setup.max_param_headers = 3;
        }
        setup
    }
}

/// One move of the client, the clock or the application.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Op {
    /// A request head arrives: a new exchange.
    Open(Head),
    /// A body chunk for an exchange: `payload` rendered now, fed in pieces cut at
    /// `splits` (offsets modulo its length), one `handle_body` each.
    Body {
        /// Which exchange.
        exchange: Pick,
        /// What to send.
        payload: Payload,
        /// Where to cut it.
        splits: Vec<usize>,
    },
    /// The body of an exchange is complete.
    End(Pick),
    /// The client of an exchange goes away.
    Disconnect(Pick),
    /// The clock moves on; `handle_timeout` runs.
    Advance(Duration),
    /// The clock moves to the next deadline; `handle_timeout` runs.
    NextDeadline,
    /// The application answers a request it was handed (open or not).
    Respond {
        /// Which request (of every request handed out).
        request: Pick,
        /// `respond_error` rather than `respond`.
        error: bool,
    },
    /// The application sends a notification.
    Notify(To),
    /// The application sends a server→client request, with a deadline this far ahead.
    Request(To, Option<Duration>),
    /// The application closes a session.
    CloseSession(Pick),
    /// A POST of the sessionless revision 2026-07-28: its head, then its body cut at
    /// `splits`, then (if `end`) the body's end.
    Modern(Box<ModernCall>),
    /// The application answers a request it was handed with an error of this code (on
    /// the sessionless revision the code picks the status: 404 for -32601, 400 for
    /// -32020/-32021/-32022, else 200).
    Fail {
        /// Which request (of every request handed out).
        request: Pick,
        /// The JSON-RPC error code.
        code: i32,
    },
}

/// A choice among things that exist at run time.
#[derive(Clone, Copy, Debug)]
pub enum Pick {
    /// The newest.
    Latest,
    /// Any, by index (modulo how many there are).
    Index(usize),
}

/// Where the application sends a message.
#[derive(Clone, Copy, Debug)]
pub enum To {
    /// On the stream of a request (of every request handed out).
    Request(Pick),
    /// On a session (of every session the application has seen).
    Session(Pick),
}

/// A request head, as choices.
#[derive(Clone, Debug)]
pub struct Head {
    /// The method.
    pub method: Verb,
    /// The path.
    pub path: Path,
    /// The `Accept` header.
    pub accept: Accept,
    /// The `Content-Type` header.
    pub content_type: ContentType,
    /// The `Mcp-Session-Id` header.
    pub session: SessionRef,
    /// The `MCP-Protocol-Version` header.
    pub version: VersionRef,
    /// The `Last-Event-ID` header.
    pub last_event_id: EventIdRef,
    /// The `Origin` header.
    pub origin: Origin,
    /// The `Host` header.
    pub host: Host,
    /// A `Content-Length` header.
    pub content_length: Option<u64>,
}

/// A request method.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub enum Verb {
    Post,
    Get,
    Delete,
    Put,
}

/// A request path.
#[derive(Clone, Debug)]
pub enum Path {
    /// `/mcp`.
    Endpoint,
    /// A path nothing is served on.
    Other,
    /// The legacy SSE endpoint, `/sse`.
    LegacySse,
    /// The legacy messages endpoint with `?sessionId=` of a session id seen on the wire.
    LegacyMessages(SessionRef),
}

/// An `Accept` header.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub enum Accept {
    Both,
    Json,
    Sse,
    Any,
    SseRefused,
    Absent,
}

/// A `Content-Type` header.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub enum ContentType {
    Json,
    JsonCharset,
    Text,
    Absent,
}

/// An `Mcp-Session-Id` header.
#[derive(Clone, Debug)]
pub enum SessionRef {
    /// None.
    Absent,
    /// A session id seen on the wire (live or not).
    Seen(Pick),
    /// A seen id in upper case (ids are lowercase: no match).
    Upper(Pick),
    /// Two headers with a seen id (ambiguous: refused).
    Twice(Pick),
    /// Text that was never a session id.
    Garbage(String),
}

/// An `MCP-Protocol-Version` header.
#[derive(Clone, Copy, Debug)]
pub enum VersionRef {
    /// None.
    Absent,
    /// The version the model negotiated for the head's session (none if unknown).
    Session,
    /// One of the known texts, by index.
    Fixed(usize),
}

/// A `Last-Event-ID` header.
#[derive(Clone, Debug)]
pub enum EventIdRef {
    /// None.
    Absent,
    /// An event id seen on the wire (of any session).
    Seen(Pick),
    /// A seen id with its sequence number moved by this much (an event not issued, or
    /// evicted).
    Moved(Pick, i8),
    /// Text that is not an event id.
    Garbage(String),
}

/// An `Origin` header.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub enum Origin {
    Absent,
    Loopback,
    Foreign,
    Null,
}

/// A `Host` header.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub enum Host {
    Loopback,
    Foreign,
    Absent,
}

/// A request body, rendered when its op runs.
#[derive(Clone, Debug)]
pub enum Payload {
    /// `initialize` offering `VERSIONS[version]`.
    Initialize {
        /// The id.
        id: ClientId,
        /// Index into the versions.
        version: usize,
    },
    /// A request (`tools/call`, `ping`, …).
    Call {
        /// The id.
        id: ClientId,
        /// Index into the methods.
        method: usize,
    },
    /// `notifications/initialized`.
    Initialized,
    /// `notifications/progress`.
    Progress,
    /// `notifications/cancelled` for a client id.
    Cancel(ClientId),
    /// A client's response (or error) to a server→client request.
    Answer {
        /// Which id.
        id: AnswerId,
        /// An error response.
        error: bool,
    },
    /// A request of the sessionless revision (`params._meta` right or wrong), in a POST
    /// of any head: the era is decided per request (MODERN-25).
    Modern {
        /// The id.
        id: ClientId,
        /// Index into the revision's methods.
        method: usize,
        /// Its `_meta`.
        meta: Meta,
    },
    /// A batch.
    Batch(Vec<Self>),
    /// Bytes as they are.
    Raw(Vec<u8>),
    /// A prefix of a rendering.
    Cut(Box<Self>, usize),
}

/// A client request id.
#[derive(Clone, Copy, Debug)]
pub enum ClientId {
    /// An integer id (small, so ids repeat).
    Int(u8),
    /// A string id.
    Str(u8),
}

/// The id of a client's response.
#[derive(Clone, Copy, Debug)]
pub enum AnswerId {
    /// The id of a server→client request the application sent (of any session).
    Issued(Pick),
    /// An integer.
    Int(u8),
}

/// A POST of the sessionless revision 2026-07-28 (MODERN-*), as choices: its head's
/// headers (mostly conforming), its mirrored headers (`Mcp-Method`, `Mcp-Name`,
/// `Mcp-Param-*`, right or wrong) and its body (`params._meta` right or wrong). The model
/// computes, where it can, the answer it must get: dispatched to the application, 202, or
/// refused with a status and JSON-RPC code.
#[derive(Clone, Debug)]
pub struct ModernCall {
    /// `Accept`, `Content-Type`, `Origin`, `Host`, `Mcp-Session-Id` and the rest; its
    /// `version` is not used (see [`ModernCall::version`]).
    pub head: Head,
    /// The `MCP-Protocol-Version` header.
    pub version: ModernVersion,
    /// A notification rather than a request.
    pub notification: bool,
    /// The request's id.
    pub id: ClientId,
    /// Index into the methods (requests) or the notifications.
    pub method: usize,
    /// `params._meta`.
    pub meta: Meta,
    /// The `Mcp-Method` header.
    pub method_header: MethodHeader,
    /// Index into the names: the body's `params.name` and `params.uri`.
    pub name: usize,
    /// The `Mcp-Name` header.
    pub name_header: NameHeader,
    /// `Mcp-Param-*` headers, indexes into a fixed list of right and wrong ones (the
    /// application's to check against its tool's schema: the transport ignores them).
    pub params: Vec<usize>,
    /// Where the body is cut into chunks.
    pub splits: Vec<usize>,
    /// Whether the body ends in this op.
    pub end: bool,
}

/// The `MCP-Protocol-Version` header of a [`ModernCall`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModernVersion {
    /// `2026-07-28`.
    Modern,
    /// ` 2026-07-28 ` (optional whitespace around it).
    Padded,
    /// None (the `_meta` then decides the era, MODERN-25).
    Absent,
    /// `2025-11-25` (the session era).
    SessionEra,
    /// `v999.0.0`, a revision nobody serves.
    Unsupported,
}

/// The `params._meta` of a [`ModernCall`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meta {
    /// The revision and `clientCapabilities`.
    Full,
    /// Those, `clientInfo` and a `logLevel`.
    WithInfo,
    /// No `_meta`.
    Missing,
    /// No protocol version.
    NoVersion,
    /// No `clientCapabilities`.
    NoCapabilities,
    /// `v999.0.0` as the revision.
    Unsupported,
    /// The revision as a number.
    VersionNotText,
    /// `_meta` a string.
    NotObject,
    /// `params` an array.
    ParamsNotObject,
}

/// The `Mcp-Method` header of a [`ModernCall`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodHeader {
    /// The body's method.
    Right,
    /// None.
    Absent,
    /// The method in upper case (values compare with case, MODERN-6).
    Upper,
    /// Another method.
    Other,
}

/// The `Mcp-Name` header of a [`ModernCall`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameHeader {
    /// The name as a client encodes it (`mirror::encode_str`).
    Encoded,
    /// That with spaces and a tab around it (optional whitespace, MODERN-8).
    Padded,
    /// The name always in the `=?base64?…?=` sentinel (any value may be).
    Sentinel,
    /// The sentinel without base64 padding (strict decoding refuses it when padding was
    /// due).
    Unpadded,
    /// The name's bytes as they are (a match only for plain visible ASCII).
    Literal,
    /// The name in upper case.
    Upper,
    /// The encoded name in two header fields (no value, MODERN-6).
    Twice,
    /// None.
    Absent,
}

/// The methods a [`ModernCall`] request may name: the three that mirror a name, one
/// that does not, an unknown one (the application answers it), removed ones (404,
/// MODERN-21), and a long-lived one.
const MODERN_METHODS: [&str; 8] = [
    "tools/call",
    "prompts/get",
    "resources/read",
    "tools/list",
    "nope/nothing",
    "ping",
    "initialize",
    "subscriptions/listen",
];

/// The methods a [`ModernCall`] notification may name.
const NOTIFICATIONS: [&str; 2] = ["notifications/cancelled", "notifications/progress"];

/// The names (`params.name`, `params.uri`) a [`ModernCall`] carries.
const NAMES: [&str; 7] = [
    "echo",
    "a b",
    " padded",
    "h\u{e9}llo",
    "=?base64?ZWNobw==?=",
    "test://a",
    "",
];

/// `Mcp-Param-*` headers: right, wrong and malformed ones for the arguments every
/// [`ModernCall`] carries (`{"region":"us-west","count":42,"flag":true}`).
const PARAM_HEADERS: [(&str, &str); 9] = [
    ("mcp-param-region", "us-west"),
    ("mcp-param-region", "=?base64?dXMtd2VzdA==?="),
    ("mcp-param-count", "42"),
    ("mcp-param-count", "042"),
    ("mcp-param-flag", "true"),
    ("mcp-param-flag", "TRUE"),
    ("mcp-param-region", "=?base64?!!?="),
    ("mcp-param-region", "  eu-north  "),
    ("mcp-param-missing", "x"),
];

/// The codes [`Op::Fail`] answers with.
const FAIL_CODES: [i32; 5] = [-32001, -32601, -32602, -32020, -32021];

fn byte(u: &mut Unstructured<'_>) -> u8 {
    u.arbitrary().unwrap_or(0)
}

/// A number below `n` (0 when `n` is 0 or the input ran out).
fn below(u: &mut Unstructured<'_>, n: usize) -> usize {
    let v: u16 = u.arbitrary().unwrap_or(0);
    if n == 0 { 0 } else { usize::from(v) % n }
}

/// Visible ASCII text of up to `max` bytes.
fn text(u: &mut Unstructured<'_>, max: usize) -> String {
    let len = below(u, max + 1);
    (0..len)
        .map(|_| char::from(0x21 + byte(u) % 0x5e))
        .collect()
}

fn pick(u: &mut Unstructured<'_>) -> Pick {
    match byte(u) {
        0..=159 => Pick::Latest,
        b => Pick::Index(usize::from(b)),
    }
}

/// The setup and ops of one input.
pub fn scenario(data: &[u8]) -> (Setup, Vec<Op>) {
    let mut u = Unstructured::new(data);
    let setup = Setup::from_bytes(&mut u);
    (setup, ops(&mut u))
}

/// Ops chosen by `u` until it runs out (at most [`MAX_OPS`]). Whole requests (head, body,
/// end, often the application's answer) are likelier than single moves, so a short input
/// reaches sessions, streams and resumes.
pub fn ops(u: &mut Unstructured<'_>) -> Vec<Op> {
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < MAX_OPS {
        script(u, &mut ops);
    }
    ops.truncate(MAX_OPS);
    ops
}

fn script(u: &mut Unstructured<'_>, ops: &mut Vec<Op>) {
    match below(u, 26) {
        0..=2 => {
            // initialize, usually answered, then notifications/initialized.
            let mut head = post_head(u);
            head.session = SessionRef::Absent;
            head.version = if byte(u) < 200 {
                VersionRef::Absent
            } else {
                VersionRef::Fixed(below(u, VERSIONS.len()))
            };
            ops.push(Op::Open(head));
            let version = if byte(u) < 224 {
                below(u, 4)
            } else {
                below(u, VERSIONS.len())
            };
            let payload = Payload::Initialize {
                id: client_id(u),
                version,
            };
            ops.push(body(u, payload));
            ops.push(Op::End(Pick::Latest));
            if byte(u) < 230 {
                ops.push(Op::Respond {
                    request: Pick::Latest,
                    error: byte(u) < 16,
                });
                if byte(u) < 180 {
                    ops.push(Op::Open(post_head(u)));
                    ops.push(body(u, Payload::Initialized));
                    ops.push(Op::End(Pick::Latest));
                }
            }
        }
        3..=6 => {
            // A request (or notification, response, batch) on a session.
            ops.push(Op::Open(post_head(u)));
            let p = payload(u, 0);
            ops.push(body(u, p));
            ops.push(Op::End(Pick::Latest));
            match byte(u) {
                0..=99 => ops.push(Op::Respond {
                    request: Pick::Latest,
                    error: byte(u) < 32,
                }),
                100..=149 => ops.push(Op::Notify(To::Request(Pick::Latest))),
                150..=179 => ops.push(Op::Request(To::Request(Pick::Latest), duration(u))),
                _ => {}
            }
        }
        7..=8 => {
            // GET: the standalone stream, or a resume.
            let mut head = post_head(u);
            head.method = Verb::Get;
            head.accept = if byte(u) < 240 {
                Accept::Sse
            } else {
                accept(u)
            };
            head.content_type = ContentType::Absent;
            head.last_event_id = if byte(u) < 128 {
                EventIdRef::Absent
            } else {
                event_id_ref(u)
            };
            ops.push(Op::Open(head));
            if byte(u) < 128 {
                ops.push(Op::End(Pick::Latest));
            }
        }
        9 => {
            let mut head = post_head(u);
            head.method = Verb::Delete;
            head.accept = Accept::Absent;
            head.content_type = ContentType::Absent;
            ops.push(Op::Open(head));
            ops.push(Op::End(Pick::Latest));
        }
        10 => {
            // Legacy HTTP+SSE: the stream, or a POST to its messages path.
            let mut head = post_head(u);
            if byte(u) < 100 {
                head.method = Verb::Get;
                head.path = Path::LegacySse;
                head.accept = Accept::Sse;
                head.content_type = ContentType::Absent;
                head.session = SessionRef::Absent;
                ops.push(Op::Open(head));
            } else {
                head.path = Path::LegacyMessages(session_ref(u));
                head.session = SessionRef::Absent;
                head.version = VersionRef::Absent;
                ops.push(Op::Open(head));
                let p = payload(u, 0);
                ops.push(body(u, p));
                ops.push(Op::End(Pick::Latest));
            }
        }
        11 => {
            // Any head at all, maybe a body.
            ops.push(Op::Open(random_head(u)));
            if byte(u) < 128 {
                let p = payload(u, 0);
                ops.push(body(u, p));
            }
            if byte(u) < 128 {
                ops.push(Op::End(Pick::Latest));
            }
        }
        12 => {
            let exchange = pick(u);
            let p = payload(u, 0);
            match byte(u) % 3 {
                0 => ops.push(Op::Body {
                    exchange,
                    payload: p,
                    splits: splits(u),
                }),
                _ => ops.push(Op::End(exchange)),
            }
        }
        13 => ops.push(Op::Disconnect(pick(u))),
        14 => ops.push(match byte(u) % 8 {
            0..=3 => Op::NextDeadline,
            4 => Op::Advance(Duration::from_millis(1)),
            5 => Op::Advance(Duration::from_secs(1)),
            6 => Op::Advance(Duration::from_secs(16)),
            _ => Op::Advance(Duration::from_secs(61)),
        }),
        15 => ops.push(Op::Respond {
            request: pick(u),
            error: byte(u) < 64,
        }),
        16 => ops.push(Op::Notify(to(u))),
        17 => ops.push(Op::Request(to(u), duration(u))),
        18 => ops.push(Op::CloseSession(pick(u))),
        19 => {
            // A server→client request, and the client's answer.
            ops.push(Op::Request(To::Session(pick(u)), duration(u)));
            ops.push(Op::Open(post_head(u)));
            let answer = Payload::Answer {
                id: AnswerId::Issued(Pick::Latest),
                error: byte(u) < 64,
            };
            ops.push(body(u, answer));
            ops.push(Op::End(Pick::Latest));
        }
        20 => {
            // A stream's connection drops, and the client resumes it; or it died
            // silently, the server still holds it, and the resume takes it over
            // (RESUME-14).
            if byte(u) < 128 {
                ops.push(Op::Disconnect(pick(u)));
            }
            let mut head = post_head(u);
            head.method = Verb::Get;
            head.accept = Accept::Sse;
            head.content_type = ContentType::Absent;
            head.last_event_id = EventIdRef::Seen(pick(u));
            ops.push(Op::Open(head));
        }
        21 => {
            // A request, then its cancellation.
            let id = client_id(u);
            for payload in [
                Payload::Call {
                    id,
                    method: below(u, METHODS.len()),
                },
                Payload::Cancel(id),
            ] {
                ops.push(Op::Open(post_head(u)));
                ops.push(body(u, payload));
                ops.push(Op::End(Pick::Latest));
            }
        }
        23..=25 => modern_script(u, ops),
        _ => {
            // A POST whose body comes in several ops, split anywhere.
            ops.push(Op::Open(post_head(u)));
            let p = payload(u, 0);
            for _ in 0..=below(u, 3) {
                ops.push(Op::Body {
                    exchange: Pick::Latest,
                    payload: Payload::Cut(Box::new(p.clone()), usize::from(byte(u))),
                    splits: splits(u),
                });
            }
            ops.push(Op::End(Pick::Latest));
        }
    }
}

/// A request or notification of the sessionless revision, then what becomes of it:
/// answered (as JSON, or after a related notification on an SSE stream of its own),
/// failed with a code, a server→client request tried on it, its stream closed by the
/// client (MODERN-11), or left to later ops.
fn modern_script(u: &mut Unstructured<'_>, ops: &mut Vec<Op>) {
    let call = modern_call(u);
    let notification = call.notification;
    ops.push(Op::Modern(Box::new(call)));
    if notification {
        return;
    }
    match byte(u) {
        0..=79 => ops.push(Op::Respond {
            request: Pick::Latest,
            error: byte(u) < 32,
        }),
        80..=129 => {
            ops.push(Op::Notify(To::Request(Pick::Latest)));
            if byte(u) < 200 {
                ops.push(Op::Respond {
                    request: Pick::Latest,
                    error: false,
                });
            }
        }
        130..=164 => {
            if byte(u) < 160 {
                ops.push(Op::Notify(To::Request(Pick::Latest)));
            }
            ops.push(Op::Disconnect(Pick::Latest));
            if byte(u) < 128 {
                ops.push(Op::Respond {
                    request: Pick::Latest,
                    error: false,
                });
            }
        }
        165..=189 => ops.push(Op::Fail {
            request: Pick::Latest,
            code: FAIL_CODES[below(u, FAIL_CODES.len())],
        }),
        190..=204 => ops.push(Op::Request(To::Request(Pick::Latest), duration(u))),
        _ => {}
    }
}

fn modern_call(u: &mut Unstructured<'_>) -> ModernCall {
    let mut head = post_head(u);
    head.session = if byte(u) < 24 {
        session_ref(u)
    } else {
        SessionRef::Absent
    };
    head.version = VersionRef::Absent;
    let notification = byte(u) < 40;
    let version = match byte(u) {
        0..=199 => ModernVersion::Modern,
        200..=211 => ModernVersion::Padded,
        212..=229 => ModernVersion::Absent,
        230..=241 => ModernVersion::SessionEra,
        _ => ModernVersion::Unsupported,
    };
    let method = if notification {
        below(u, NOTIFICATIONS.len())
    } else if byte(u) < 170 {
        below(u, 3)
    } else {
        below(u, MODERN_METHODS.len())
    };
    let meta = match byte(u) {
        0..=159 => Meta::Full,
        160..=189 => Meta::WithInfo,
        _ => [
            Meta::Missing,
            Meta::NoVersion,
            Meta::NoCapabilities,
            Meta::Unsupported,
            Meta::VersionNotText,
            Meta::NotObject,
            Meta::ParamsNotObject,
        ][below(u, 7)],
    };
    let headers = !notification || byte(u) < 32;
    let method_header = match byte(u) {
        _ if !headers => MethodHeader::Absent,
        0..=219 => MethodHeader::Right,
        220..=231 => MethodHeader::Absent,
        232..=243 => MethodHeader::Upper,
        _ => MethodHeader::Other,
    };
    let name = if byte(u) < 128 {
        0
    } else {
        below(u, NAMES.len())
    };
    let name_header = match byte(u) {
        _ if !headers => NameHeader::Absent,
        0..=127 => NameHeader::Encoded,
        128..=159 => NameHeader::Sentinel,
        160..=183 => NameHeader::Padded,
        184..=207 => NameHeader::Literal,
        208..=223 => NameHeader::Unpadded,
        224..=239 => NameHeader::Upper,
        240..=247 => NameHeader::Twice,
        _ => NameHeader::Absent,
    };
    let params = match byte(u) {
        _ if !headers => Vec::new(),
        // What a client of the `echo` tool sends (the region plain or in the sentinel),
        // maybe with a header no annotation names.
        0..=143 => {
            let mut right = vec![usize::from(byte(u) >= 200), 2, 4];
            if byte(u) < 64 {
                right.push(8);
            }
            let by = below(u, right.len());
            right.rotate_left(by);
            right
        }
        144..=223 => (0..=below(u, 4))
            .map(|_| below(u, PARAM_HEADERS.len()))
            .collect(),
        _ => Vec::new(),
    };
    ModernCall {
        head,
        version,
        notification,
        id: client_id(u),
        method,
        meta,
        method_header,
        name,
        name_header,
        params,
        splits: splits(u),
        end: byte(u) < 240,
    }
}

/// A conforming POST on the newest session, with a field now and then replaced.
fn post_head(u: &mut Unstructured<'_>) -> Head {
    let mut head = Head {
        method: Verb::Post,
        path: Path::Endpoint,
        accept: Accept::Both,
        content_type: ContentType::Json,
        session: SessionRef::Seen(Pick::Latest),
        version: VersionRef::Session,
        last_event_id: EventIdRef::Absent,
        origin: Origin::Absent,
        host: Host::Loopback,
        content_length: None,
    };
    if byte(u) < 40 {
        head.session = session_ref(u);
    }
    if byte(u) < 24 {
        head.version = version_ref(u);
    }
    if byte(u) < 16 {
        head.origin = origin(u);
    }
    if byte(u) < 8 {
        head.accept = accept(u);
    }
    head
}

fn random_head(u: &mut Unstructured<'_>) -> Head {
    Head {
        method: [Verb::Post, Verb::Get, Verb::Delete, Verb::Put][below(u, 4)],
        path: match below(u, 5) {
            0 | 1 => Path::Endpoint,
            2 => Path::Other,
            3 => Path::LegacySse,
            _ => Path::LegacyMessages(session_ref(u)),
        },
        accept: accept(u),
        content_type: [
            ContentType::Json,
            ContentType::JsonCharset,
            ContentType::Text,
            ContentType::Absent,
        ][below(u, 4)],
        session: session_ref(u),
        version: version_ref(u),
        last_event_id: event_id_ref(u),
        origin: origin(u),
        host: [Host::Loopback, Host::Foreign, Host::Absent][below(u, 3)],
        content_length: match byte(u) {
            0..=199 => None,
            200..=227 => Some(u64::from(byte(u))),
            _ => Some(u64::MAX),
        },
    }
}

fn accept(u: &mut Unstructured<'_>) -> Accept {
    [
        Accept::Both,
        Accept::Json,
        Accept::Sse,
        Accept::Any,
        Accept::SseRefused,
        Accept::Absent,
    ][below(u, 6)]
}

fn origin(u: &mut Unstructured<'_>) -> Origin {
    [
        Origin::Absent,
        Origin::Loopback,
        Origin::Foreign,
        Origin::Null,
    ][below(u, 4)]
}

fn session_ref(u: &mut Unstructured<'_>) -> SessionRef {
    match below(u, 8) {
        0 => SessionRef::Absent,
        1 => SessionRef::Upper(pick(u)),
        2 => SessionRef::Twice(pick(u)),
        3 => SessionRef::Garbage(text(u, 40)),
        _ => SessionRef::Seen(pick(u)),
    }
}

fn version_ref(u: &mut Unstructured<'_>) -> VersionRef {
    match below(u, 3) {
        0 => VersionRef::Absent,
        1 => VersionRef::Session,
        _ => VersionRef::Fixed(below(u, VERSIONS.len())),
    }
}

fn event_id_ref(u: &mut Unstructured<'_>) -> EventIdRef {
    match below(u, 6) {
        0 => EventIdRef::Absent,
        1 => EventIdRef::Moved(pick(u), u.arbitrary().unwrap_or(0)),
        2 => EventIdRef::Garbage(text(u, 48)),
        _ => EventIdRef::Seen(pick(u)),
    }
}

fn to(u: &mut Unstructured<'_>) -> To {
    if byte(u) < 128 {
        To::Request(pick(u))
    } else {
        To::Session(pick(u))
    }
}

fn duration(u: &mut Unstructured<'_>) -> Option<Duration> {
    match byte(u) % 4 {
        0 => None,
        1 => Some(Duration::ZERO),
        2 => Some(Duration::from_secs(1)),
        _ => Some(Duration::from_secs(30)),
    }
}

fn client_id(u: &mut Unstructured<'_>) -> ClientId {
    let b = byte(u);
    if b < 192 {
        ClientId::Int(b % 6)
    } else {
        ClientId::Str(b % 4)
    }
}

fn payload(u: &mut Unstructured<'_>, depth: u8) -> Payload {
    match below(u, 13) {
        0 => Payload::Initialize {
            id: client_id(u),
            version: below(u, VERSIONS.len()),
        },
        1..=4 => Payload::Call {
            id: client_id(u),
            method: below(u, METHODS.len()),
        },
        5 => Payload::Initialized,
        6 => Payload::Progress,
        7 => Payload::Cancel(client_id(u)),
        8 => Payload::Answer {
            id: if byte(u) < 200 {
                AnswerId::Issued(pick(u))
            } else {
                AnswerId::Int(byte(u))
            },
            error: byte(u) < 64,
        },
        9 if depth == 0 => {
            Payload::Batch((0..below(u, 4)).map(|_| payload(u, depth + 1)).collect())
        }
        10 => Payload::Cut(Box::new(payload(u, depth + 1)), usize::from(byte(u))),
        11 => Payload::Modern {
            id: client_id(u),
            method: below(u, MODERN_METHODS.len()),
            meta: [Meta::Full, Meta::Full, Meta::NoCapabilities, Meta::Missing][below(u, 4)],
        },
        _ => {
            let len = below(u, 64);
            Payload::Raw((0..len).map(|_| byte(u)).collect())
        }
    }
}

fn splits(u: &mut Unstructured<'_>) -> Vec<usize> {
    (0..below(u, 4)).map(|_| usize::from(byte(u))).collect()
}

fn body(u: &mut Unstructured<'_>, payload: Payload) -> Op {
    Op::Body {
        exchange: Pick::Latest,
        payload,
        splits: splits(u),
    }
}

const METHODS: [&str; 4] = ["tools/call", "ping", "tools/list", "resources/read"];

/// Runs `ops` against a server built from `setup`, checking the invariants of the
/// [module docs](self) after every op and at the end.
///
/// # Errors
/// The first invariant that failed, with the index of the op it failed after.
pub fn run(setup: &Setup, ops: &[Op]) -> Result<(), String> {
    run_counted(setup, ops).map(|_| ())
}

/// What `runs` scenarios reach together, each drawn from a fixed xorshift stream seeded
/// with `seed` (inputs up to 2 KiB, as the fuzz target's): what the coverage tests
/// assert, so that the model's checks cannot pass by never being reached.
///
/// # Panics
/// On the first run whose checks fail, with its error.
pub fn coverage_over(seed: u64, runs: usize) -> Coverage {
    let mut state = seed;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut total = Coverage::default();
    for _ in 0..runs {
        let len = (next() % 2048) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let (setup, ops) = scenario(&data);
        match run_counted(&setup, &ops) {
            Ok(coverage) => total.add(&coverage),
            Err(e) => panic!("{e}"),
        }
    }
    total
}

/// [`run`], also saying what the run reached.
///
/// # Errors
/// As [`run`].
pub fn run_counted(setup: &Setup, ops: &[Op]) -> Result<Coverage, String> {
    let mut model = Model::new(setup);
    for (i, op) in ops.iter().enumerate() {
        model
            .step(op)
            .and_then(|()| model.drain(None))
            .and_then(|()| model.check_modern())
            .and_then(|()| model.check_state())
            .map_err(|e| format!("after op {i} ({op:?}): {e}"))?;
    }
    model.finish().map_err(|e| format!("at the end: {e}"))?;
    Ok(model.coverage)
}

/// What runs reached, so a test can show that the generator gets past the refusals to
/// sessions, streams, resumes and expiry (a property that is never exercised cannot fail).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Coverage {
    /// Response heads by status.
    pub statuses: BTreeMap<u16, usize>,
    /// Sessions handed to the application.
    pub sessions: usize,
    /// Requests handed to the application.
    pub requests: usize,
    /// Tagged messages checked on the wire (in JSON bodies and SSE events).
    pub tagged: usize,
    /// SSE events with an id.
    pub event_ids: usize,
    /// Resumes (a GET with a valid `Last-Event-ID` answered 200).
    pub resumes: usize,
    /// Connections cut because a resume took their stream over (RESUME-14).
    pub superseded: usize,
    /// Legacy `endpoint` events.
    pub legacy_streams: usize,
    /// Client responses correlated to the application's requests.
    pub responses: usize,
    /// Server→client requests that timed out.
    pub timeouts: usize,
    /// Client cancellations.
    pub cancellations: usize,
    /// Sessions that expired (SESSION-7).
    pub expired: usize,
    /// Requests of the sessionless revision handed to the application.
    pub modern_requests: usize,
    /// Refusals of a 2026-07-28 POST whose code the model predicted and checked.
    pub modern_refusals: usize,
    /// SSE answers to 2026-07-28 requests.
    pub modern_streams: usize,
    /// 2026-07-28 notifications answered 202 as the model predicted.
    pub modern_accepted: usize,
    /// 2026-07-28 requests cancelled because their connection went (MODERN-11).
    pub modern_cancelled: usize,
    /// 2026-07-28 requests answered exactly once on their exchange.
    pub modern_answered: usize,
    /// Calls of a tool with `Mcp-Param-*` mirrors the model predicted dispatched.
    pub mirrored_dispatched: usize,
    /// Calls of a tool with mirrors the model predicted refused.
    pub mirrored_refused: usize,
}

impl Coverage {
    /// Adds another run's counts.
    pub fn add(&mut self, other: &Self) {
        for (status, n) in &other.statuses {
            *self.statuses.entry(*status).or_default() += n;
        }
        self.sessions += other.sessions;
        self.requests += other.requests;
        self.tagged += other.tagged;
        self.event_ids += other.event_ids;
        self.resumes += other.resumes;
        self.superseded += other.superseded;
        self.legacy_streams += other.legacy_streams;
        self.responses += other.responses;
        self.timeouts += other.timeouts;
        self.cancellations += other.cancellations;
        self.expired += other.expired;
        self.modern_requests += other.modern_requests;
        self.modern_refusals += other.modern_refusals;
        self.modern_streams += other.modern_streams;
        self.modern_accepted += other.modern_accepted;
        self.modern_cancelled += other.modern_cancelled;
        self.modern_answered += other.modern_answered;
        self.mirrored_dispatched += other.mirrored_dispatched;
        self.mirrored_refused += other.mirrored_refused;
    }
}

/// [`scenario`] then [`run`]: the whole check of one input.
///
/// # Errors
/// As [`run`].
pub fn run_bytes(data: &[u8]) -> Result<(), String> {
    let (setup, ops) = scenario(data);
    run(&setup, &ops)
}

/// One exchange, as its client sees it.
struct Wire {
    id: ExchangeId,
    /// The tag every message on it must carry, once known.
    tag: Option<String>,
    /// The `Last-Event-ID` its request carried, if it parses.
    resumed_after: Option<EventId>,
    head: bool,
    ended: bool,
    gone: bool,
    status: u16,
    content_length: Option<usize>,
    /// Body bytes taken so far (an SSE body's bytes go to its decoder, not to `body`).
    body_len: usize,
    sse: Option<Decoder>,
    body: Vec<u8>,
    /// The last sequence number seen per (epoch, ring).
    seqs: BTreeMap<(u64, u64), u64>,
    /// It carried a [`ModernCall`], or a request of the sessionless revision was
    /// dispatched from it.
    modern: bool,
    /// What a [`ModernCall`] must get, as far as the model can tell.
    expect: Expect,
    /// A request of the sessionless revision was dispatched from it.
    dispatched: bool,
    /// Responses (an id with a result or an error) written on it, counted on modern
    /// exchanges.
    responses: u32,
    /// The status a JSON answer to its sessionless request must have, from the code the
    /// application answered with.
    answer_status: Option<u16>,
}

/// What a [`ModernCall`] must get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// The model cannot tell (a head or body the session-era rules decide, a cut body).
    Unknown,
    /// Its request is handed to the application, sessionless.
    Dispatch,
    /// 202, an empty body (MODERN-24).
    Accepted,
    /// Refused with this status and JSON-RPC code.
    Refused(u16, i32),
}

/// A request handed to the application.
struct Req {
    handle: RequestHandle,
    tag: String,
    session: Option<SessionId>,
    open: bool,
    /// Of the sessionless revision: its exchange (a wire index), and whether the
    /// model has checked how it ended.
    modern: Option<usize>,
    cancelled: bool,
    checked: bool,
}

/// A server→client request the application sent.
struct Issued {
    id: RequestId,
    session: SessionId,
    settled: bool,
}

struct Model {
    server: Shards,
    now: Instant,
    stateless: bool,
    eras: Eras,
    response: ResponseMode,
    max_body: usize,
    mirrors: bool,
    max_param_headers: usize,
    /// Requests of the sessionless revision whose end is not checked yet.
    modern_pending: Vec<usize>,
    wires: Vec<Wire>,
    by_exchange: BTreeMap<ExchangeId, usize>,
    /// Session ids seen on the wire (response heads and `endpoint` events).
    session_ids: Vec<String>,
    /// The version negotiated for a session id.
    versions: BTreeMap<String, String>,
    /// Sessions the application saw, and whether each has closed.
    sessions: Vec<(SessionId, bool)>,
    requests: Vec<Req>,
    event_ids: Vec<String>,
    issued: Vec<Issued>,
    coverage: Coverage,
}

fn resolve<T>(items: &[T], pick: Pick) -> Option<usize> {
    match (pick, items.len()) {
        (_, 0) => None,
        (Pick::Latest, n) => Some(n - 1),
        (Pick::Index(i), n) => Some(i % n),
    }
}

fn tag_json(tag: &str) -> String {
    serde_json::json!({ "s": tag }).to_string()
}

/// The tag a message carries: `result.s`, `params.s` or `error.data.s`.
fn tag_of(message: &serde_json::Value) -> Option<&str> {
    message
        .get("result")
        .or_else(|| message.get("params"))
        .or_else(|| message.get("error").and_then(|e| e.get("data")))
        .and_then(|v| v.get("s"))
        .and_then(|s| s.as_str())
}

impl Model {
    fn new(setup: &Setup) -> Self {
        Self {
            server: Shards::new(setup.config(), setup.shards, setup.seed),
            now: Instant::now(),
            stateless: setup.stateless,
            eras: setup.eras,
            response: setup.response,
            max_body: setup.max_body,
            mirrors: setup.mirrors,
            max_param_headers: setup.max_param_headers,
            modern_pending: Vec::new(),
            wires: Vec::new(),
            by_exchange: BTreeMap::new(),
            session_ids: Vec::new(),
            versions: BTreeMap::new(),
            sessions: Vec::new(),
            requests: Vec::new(),
            event_ids: Vec::new(),
            issued: Vec::new(),
            coverage: Coverage::default(),
        }
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        let now = self.now;
        match op {
            Op::Open(head) => self.open(head, &[], Expect::Unknown).map(|_| ()),
            Op::Modern(call) => self.modern(call),
            Op::Fail { request, code } => {
                if let Some(r) = resolve(&self.requests, *request) {
                    self.respond_with(r, Some(ErrorCode(i64::from(*code))))?;
                }
                Ok(())
            }
            Op::Body {
                exchange,
                payload,
                splits,
            } => {
                let Some(w) = resolve(&self.wires, *exchange) else {
                    return Ok(());
                };
                // More body than the model rendered: it no longer knows the answer.
                self.wires[w].expect = Expect::Unknown;
                let x = self.wires[w].id;
                let bytes = Bytes::from(self.render(payload));
                let mut cuts: Vec<usize> = splits
                    .iter()
                    .map(|s| s % (bytes.len() + 1))
                    .chain([0, bytes.len()])
                    .collect();
                cuts.sort_unstable();
                for pair in cuts.windows(2) {
                    self.server
                        .handle_body(now, x, bytes.slice(pair[0]..pair[1]));
                }
                Ok(())
            }
            Op::End(exchange) => {
                if let Some(w) = resolve(&self.wires, *exchange) {
                    let x = self.wires[w].id;
                    self.server.handle_body_end(now, x);
                    return self.drain(Some(x));
                }
                Ok(())
            }
            Op::Disconnect(exchange) => {
                if let Some(w) = resolve(&self.wires, *exchange) {
                    self.disconnect(w);
                }
                Ok(())
            }
            Op::Advance(d) => {
                self.now += *d;
                self.timeout()
            }
            Op::NextDeadline => {
                if let Some(at) = self.server.poll_timeout() {
                    self.now = self.now.max(at);
                }
                self.timeout()
            }
            Op::Respond { request, error } => {
                if let Some(r) = resolve(&self.requests, *request) {
                    self.respond(r, *error)?;
                }
                Ok(())
            }
            Op::Notify(to) => self.send(*to, None),
            Op::Request(to, deadline) => self.send(*to, Some(*deadline)),
            Op::CloseSession(session) => {
                if let Some(i) = resolve(&self.sessions, *session) {
                    let (s, closed) = self.sessions[i];
                    let live = self.server.close_session(now, s);
                    if live == closed {
                        return Err(format!(
                            "close_session({s}) said live={live}, but the session {}",
                            if closed { "closed" } else { "is open" }
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    fn disconnect(&mut self, w: usize) {
        let wire = &mut self.wires[w];
        if !wire.ended {
            wire.gone = true;
        }
        self.server.handle_disconnect(self.now, wire.id);
    }

    fn timeout(&mut self) -> Result<(), String> {
        self.server.handle_timeout(self.now);
        match self.server.poll_timeout() {
            Some(at) if at <= self.now => Err(format!(
                "a deadline {:?} at or before now is left after handle_timeout(now)",
                self.now - at
            )),
            _ => Ok(()),
        }
    }

    fn session_id(&self, pick: Pick) -> Option<&str> {
        resolve(&self.session_ids, pick).map(|i| self.session_ids[i].as_str())
    }

    /// Sends `head` with `extra` headers besides its own; returns its wire.
    fn open(
        &mut self,
        head: &Head,
        extra: &[(&'static str, &[u8])],
        expect: Expect,
    ) -> Result<usize, String> {
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts.method = match head.method {
            Verb::Post => Method::POST,
            Verb::Get => Method::GET,
            Verb::Delete => Method::DELETE,
            Verb::Put => Method::PUT,
        };
        let path = match &head.path {
            Path::Endpoint => "/mcp".to_owned(),
            Path::Other => "/other".to_owned(),
            Path::LegacySse => "/sse".to_owned(),
            Path::LegacyMessages(session) => {
                let id = match session {
                    SessionRef::Absent => String::new(),
                    SessionRef::Seen(p) | SessionRef::Twice(p) => {
                        self.session_id(*p).unwrap_or_default().to_owned()
                    }
                    SessionRef::Upper(p) => self.session_id(*p).unwrap_or_default().to_uppercase(),
                    SessionRef::Garbage(g) => {
                        g.chars().filter(char::is_ascii_alphanumeric).collect()
                    }
                };
                format!("/messages?sessionId={id}")
            }
        };
        parts.uri = path
            .parse()
            .map_err(|e| format!("a bad test uri {path}: {e}"))?;
        let mut headers = Vec::<(&str, String)>::new();
        match head.host {
            Host::Loopback => headers.push(("host", "127.0.0.1:8080".into())),
            Host::Foreign => headers.push(("host", "rebind.example:8080".into())),
            Host::Absent => {}
        }
        match head.origin {
            Origin::Absent => {}
            Origin::Loopback => headers.push(("origin", "http://localhost:3000".into())),
            Origin::Foreign => headers.push(("origin", "https://evil.example".into())),
            Origin::Null => headers.push(("origin", "null".into())),
        }
        let accept = match head.accept {
            Accept::Both => Some(crate::server::ACCEPT_BOTH),
            Accept::Json => Some("application/json"),
            Accept::Sse => Some("text/event-stream"),
            Accept::Any => Some("*/*"),
            Accept::SseRefused => Some("application/json, text/event-stream;q=0"),
            Accept::Absent => None,
        };
        if let Some(a) = accept {
            headers.push(("accept", a.into()));
        }
        let ctype = match head.content_type {
            ContentType::Json => Some("application/json"),
            ContentType::JsonCharset => Some("application/json; charset=utf-8"),
            ContentType::Text => Some("text/plain"),
            ContentType::Absent => None,
        };
        if let Some(c) = ctype {
            headers.push(("content-type", c.into()));
        }
        let mut claimed = None;
        match &head.session {
            SessionRef::Absent => {}
            SessionRef::Seen(p) => {
                if let Some(id) = self.session_id(*p) {
                    claimed = Some(id.to_owned());
                    headers.push(("mcp-session-id", id.to_owned()));
                }
            }
            SessionRef::Upper(p) => {
                if let Some(id) = self.session_id(*p) {
                    let upper = id.to_uppercase();
                    if upper != id {
                        claimed = Some(upper.clone());
                    }
                    headers.push(("mcp-session-id", upper));
                }
            }
            SessionRef::Twice(p) => {
                if let Some(id) = self.session_id(*p) {
                    headers.push(("mcp-session-id", id.to_owned()));
                    headers.push(("mcp-session-id", id.to_owned()));
                }
            }
            SessionRef::Garbage(g) => {
                claimed = Some(g.trim().to_owned());
                headers.push(("mcp-session-id", g.clone()));
            }
        }
        match head.version {
            VersionRef::Absent => {}
            VersionRef::Session => {
                if let Some(v) = claimed.as_ref().and_then(|c| self.versions.get(c)) {
                    headers.push(("mcp-protocol-version", v.clone()));
                }
            }
            VersionRef::Fixed(i) => {
                headers.push(("mcp-protocol-version", VERSIONS[i % VERSIONS.len()].into()))
            }
        }
        let last_event_id = match &head.last_event_id {
            EventIdRef::Absent => None,
            EventIdRef::Seen(p) => resolve(&self.event_ids, *p).map(|i| self.event_ids[i].clone()),
            EventIdRef::Moved(p, by) => {
                resolve(&self.event_ids, *p).map(|i| match EventId::parse(&self.event_ids[i]) {
                    Ok(id) => {
                        let seq = id.seq().wrapping_add_signed(i64::from(*by));
                        EventId::new(id.epoch(), id.ring(), seq)
                            .encode()
                            .to_string()
                    }
                    Err(_) => self.event_ids[i].clone(),
                })
            }
            EventIdRef::Garbage(g) => Some(g.clone()),
        };
        let resumed_after = last_event_id
            .as_deref()
            .and_then(|id| EventId::parse(id.trim()).ok());
        if let Some(id) = last_event_id {
            headers.push(("last-event-id", id));
        }
        if let Some(len) = head.content_length {
            headers.push(("content-length", len.to_string()));
        }
        for (name, value) in headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                parts.headers.append(HeaderName::from_static(name), value);
            }
        }
        for &(name, value) in extra {
            if let Ok(value) = HeaderValue::from_bytes(value) {
                parts.headers.append(HeaderName::from_static(name), value);
            }
        }
        let x = self.server.handle_head(self.now, parts);
        if self.by_exchange.contains_key(&x) {
            return Err(format!("handle_head returned {x} a second time"));
        }
        self.by_exchange.insert(x, self.wires.len());
        self.wires.push(Wire {
            id: x,
            // A stateless server's requests are tagged with their exchange; a legacy
            // stream learns its session from its `endpoint` event.
            tag: match head.path {
                Path::Endpoint if self.stateless => Some(format!("{x}")),
                Path::Endpoint | Path::Other => claimed,
                Path::LegacySse | Path::LegacyMessages(_) => None,
            },
            resumed_after,
            head: false,
            ended: false,
            gone: false,
            status: 0,
            content_length: None,
            body_len: 0,
            sse: None,
            body: Vec::new(),
            seqs: BTreeMap::new(),
            modern: expect != Expect::Unknown,
            expect,
            dispatched: false,
            responses: 0,
            answer_status: None,
        });
        self.drain(Some(x))?;
        Ok(self.wires.len() - 1)
    }

    fn render(&self, payload: &Payload) -> Vec<u8> {
        let id = |id: &ClientId| match id {
            ClientId::Int(n) => n.to_string(),
            ClientId::Str(n) => format!("\"r{n}\""),
        };
        match payload {
            Payload::Initialize { id: i, version } => format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"initialize","params":{{"protocolVersion":"{}","capabilities":{{}},"clientInfo":{{"name":"ops","version":"1"}}}}}}"#,
                id(i),
                VERSIONS[version % VERSIONS.len()]
            )
            .into_bytes(),
            Payload::Call { id: i, method } => format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"{}","params":{{"name":"echo","arguments":{{}}}}}}"#,
                id(i),
                METHODS[method % METHODS.len()]
            )
            .into_bytes(),
            Payload::Initialized => {
                br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec()
            }
            Payload::Progress => {
                br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#.to_vec()
            }
            Payload::Cancel(i) => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"r"}}}}"#,
                id(i)
            )
            .into_bytes(),
            Payload::Answer { id: a, error } => {
                let id = match a {
                    AnswerId::Issued(p) => resolve(&self.issued, *p)
                        .map_or_else(|| "1".to_owned(), |i| self.issued[i].id.to_string()),
                    AnswerId::Int(n) => n.to_string(),
                };
                if *error {
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-1,"message":"no"}}}}"#)
                } else {
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
                }
                .into_bytes()
            }
            Payload::Batch(items) => {
                let mut out = b"[".to_vec();
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend(self.render(item));
                }
                out.push(b']');
                out
            }
            Payload::Modern { id: i, method, meta } => {
                let mut out = Vec::new();
                modern_body(&mut out, false, i, MODERN_METHODS[method % MODERN_METHODS.len()], *meta, NAMES[0]);
                out
            }
            Payload::Raw(bytes) => bytes.clone(),
            Payload::Cut(inner, at) => {
                let mut bytes = self.render(inner);
                bytes.truncate(at % (bytes.len() + 1));
                bytes
            }
        }
    }

    fn respond(&mut self, r: usize, error: bool) -> Result<(), String> {
        self.respond_with(r, error.then_some(ErrorCode(-32001)))
    }

    /// Answers request `r` with a result, or an error of `code`.
    fn respond_with(&mut self, r: usize, code: Option<ErrorCode>) -> Result<(), String> {
        let req = &self.requests[r];
        if let Some(w) = req.modern
            && req.open
        {
            // MODERN-9, MODERN-20: the code picks the status of a JSON answer.
            self.wires[w].answer_status = Some(match code.map(|c| c.0) {
                Some(-32601) => 404,
                Some(-32022..=-32020) => 400,
                _ => 200,
            });
        }
        let json = tag_json(&req.tag);
        let raw = RawJson::new(&json).expect("a tag is JSON");
        let result = if let Some(code) = code {
            self.server
                .respond_error(self.now, req.handle, code, "failed", Some(&raw))
        } else {
            self.server.respond(self.now, req.handle, &raw)
        };
        match (req.open, result) {
            (true, Ok(_)) | (false, Err(SendError::UnknownRequest)) => {}
            (open, result) => {
                return Err(format!(
                    "respond to a request the application holds as {}: {result:?}",
                    if open { "open" } else { "settled" }
                ));
            }
        }
        self.requests[r].open = false;
        Ok(())
    }

    /// A notification (`request` None) or a server→client request with its deadline.
    fn send(&mut self, to: To, request: Option<Option<Duration>>) -> Result<(), String> {
        let (target, tag, session, refused) = match to {
            To::Request(p) => {
                let Some(r) = resolve(&self.requests, p) else {
                    return Ok(());
                };
                let req = &self.requests[r];
                // MODERN-10: no server→client request on the revision; with JSON
                // answers only, no stream for a notification either (no session to
                // carry it).
                let refused = if !req.open {
                    Some(SendError::UnknownRequest)
                } else if req.modern.is_some()
                    && (request.is_some() || self.response == ResponseMode::Json)
                {
                    Some(SendError::NoStream)
                } else {
                    None
                };
                (
                    Target::Request(req.handle),
                    req.tag.clone(),
                    req.session,
                    refused,
                )
            }
            To::Session(p) => {
                let Some(i) = resolve(&self.sessions, p) else {
                    return Ok(());
                };
                let (s, closed) = self.sessions[i];
                let tag = self.server.session_header(s).unwrap_or("closed").to_owned();
                let refused = closed.then_some(SendError::UnknownSession);
                (Target::Session(s), tag, Some(s), refused)
            }
        };
        let json = tag_json(&tag);
        let raw = RawJson::new(&json).expect("a tag is JSON");
        let sent = match request {
            None => self
                .server
                .notify(self.now, target, "notifications/message", Some(&raw))
                .map(|_| None),
            Some(deadline) => self
                .server
                .request(
                    self.now,
                    target,
                    "sampling/createMessage",
                    Some(&raw),
                    deadline.map(|d| self.now + d),
                )
                .map(Some),
        };
        match (refused, sent) {
            (Some(expected), Err(e)) if e == expected => Ok(()),
            (Some(expected), result) => Err(format!(
                "a send to {target:?} should be refused with {expected:?}: {result:?}"
            )),
            (None, Ok(Some(id))) => {
                let Some(session) = session else {
                    return Err(format!("a request without a session was sent: {id}"));
                };
                self.issued.push(Issued {
                    id,
                    session,
                    settled: false,
                });
                Ok(())
            }
            (None, _) => Ok(()),
        }
    }

    /// Takes every transmit and event. `current` is the exchange whose input ran, whose
    /// body carried any request handed out now (what a stateless request is tagged with).
    fn drain(&mut self, current: Option<ExchangeId>) -> Result<(), String> {
        while let Some(x) = self.server.poll_ready() {
            while let Some(t) = self.server.poll_transmit(x) {
                self.transmit(x, t)?;
            }
        }
        while let Some(event) = self.server.poll_event() {
            self.event(event, current)?;
        }
        Ok(())
    }

    fn transmit(&mut self, x: ExchangeId, t: Transmit) -> Result<(), String> {
        let Some(&w) = self.by_exchange.get(&x) else {
            return Err(format!("a transmit for {x}, which was never opened"));
        };
        let wire = &mut self.wires[w];
        if wire.gone {
            return Err(format!("{t:?} on {x} after its client disconnected"));
        }
        if wire.ended {
            return Err(format!("{t:?} on {x} after its End"));
        }
        match t {
            Transmit::Head(head) => {
                if wire.head {
                    return Err(format!("a second head on {x}"));
                }
                wire.head = true;
                wire.status = head.status.as_u16();
                *self.coverage.statuses.entry(wire.status).or_default() += 1;
                if wire.status == 200 && wire.resumed_after.is_some() {
                    self.coverage.resumes += 1;
                }
                let header = |name: &str| head.headers.get(name).and_then(|v| v.to_str().ok());
                let sse = header("content-type") == Some("text/event-stream");
                let expected = match wire.expect {
                    Expect::Unknown => None,
                    Expect::Accepted => Some(202),
                    Expect::Refused(status, _) => Some(status),
                    Expect::Dispatch if sse => Some(200),
                    Expect::Dispatch => Some(wire.answer_status.unwrap_or(200)),
                };
                if let Some(status) = expected
                    && status != wire.status
                {
                    return Err(format!(
                        "{x}: a 2026-07-28 POST expected {:?} got {}",
                        wire.expect, wire.status
                    ));
                }
                if wire.expect == Expect::Accepted {
                    self.coverage.modern_accepted += 1;
                }
                if wire.modern && head.headers.contains_key("mcp-session-id") {
                    return Err(format!(
                        "{x}: a 2026-07-28 answer names a session (MODERN-2)"
                    ));
                }
                if let Some(answered) = header("mcp-session-id") {
                    if self.stateless {
                        return Err(format!("{x}: a stateless server named session {answered}"));
                    }
                    if let Some(tag) = &wire.tag
                        && tag != answered
                    {
                        return Err(format!(
                            "{x}: the response names session {answered}, the request {tag}"
                        ));
                    }
                    wire.tag = Some(answered.to_owned());
                    if !self.session_ids.iter().any(|s| s == answered) {
                        self.session_ids.push(answered.to_owned());
                    }
                }
                if sse {
                    wire.sse = Some(Decoder::new(Limits::default()));
                    if wire.modern {
                        self.coverage.modern_streams += 1;
                    }
                }
                wire.content_length = header("content-length").and_then(|v| v.parse().ok());
            }
            Transmit::Data(bytes) => {
                if !wire.head {
                    return Err(format!("Data before the head on {x}"));
                }
                if bytes.is_empty() {
                    return Err(format!("an empty Data on {x}"));
                }
                wire.body_len += bytes.len();
                if wire.sse.is_some() {
                    self.sse_data(w, bytes)?;
                } else {
                    wire.body.extend_from_slice(&bytes);
                }
            }
            Transmit::Abort => {
                // RESUME-14: only a stream's connection is cut, after whole frames.
                if !wire.head {
                    return Err(format!("Abort before the head on {x}"));
                }
                if wire.sse.is_none() {
                    return Err(format!("Abort on {x}, which is not an SSE stream"));
                }
                wire.ended = true;
                self.coverage.superseded += 1;
            }
            Transmit::End => {
                if !wire.head {
                    return Err(format!("End before the head on {x}"));
                }
                wire.ended = true;
                if let Some(len) = wire.content_length
                    && len != wire.body_len
                {
                    return Err(format!(
                        "{x}: Content-Length {len}, body {} bytes",
                        wire.body_len
                    ));
                }
                if wire.status == 202 && !wire.body.is_empty() {
                    return Err(format!("{x}: a 202 with a body"));
                }
                if let Some(decoder) = &mut wire.sse {
                    decoder.finish();
                } else if !wire.body.is_empty() {
                    let body: serde_json::Value = serde_json::from_slice(&wire.body)
                        .map_err(|e| format!("{x}: a JSON body that does not parse: {e}"))?;
                    let messages = match body {
                        serde_json::Value::Array(items) => items,
                        one => vec![one],
                    };
                    if let Expect::Refused(_, code) = wire.expect {
                        let got = messages
                            .first()
                            .and_then(|m| m.get("error")?.get("code")?.as_i64());
                        if messages.len() != 1 || got != Some(i64::from(code)) {
                            return Err(format!(
                                "{x}: a 2026-07-28 POST expected error {code}: {messages:?}"
                            ));
                        }
                        self.coverage.modern_refusals += 1;
                    }
                    for m in &messages {
                        self.coverage.tagged += usize::from(check_tag(x, wire.tag.as_deref(), m)?);
                        if wire.modern && is_response(m) {
                            wire.responses += 1;
                        }
                    }
                    if wire.responses > 1 {
                        return Err(format!("{x}: {} answers to one request", wire.responses));
                    }
                }
            }
        }
        Ok(())
    }

    fn sse_data(&mut self, w: usize, bytes: Bytes) -> Result<(), String> {
        let wire = &mut self.wires[w];
        let x = wire.id;
        let decoder = wire.sse.as_mut().expect("an SSE exchange");
        decoder
            .push(bytes)
            .map_err(|e| format!("{x}: SSE after the end: {e}"))?;
        loop {
            let item = decoder
                .poll_item()
                .map_err(|e| format!("{x}: the SSE body does not decode: {e}"))?;
            let Some(item) = item else { break };
            let Item::Event(event) = item else { continue };
            if wire.modern && !event.id().is_empty() {
                // MODERN-12: no resumability on the revision.
                return Err(format!(
                    "{x}: event id {:?} on a 2026-07-28 stream",
                    event.id()
                ));
            }
            if !event.id().is_empty() {
                let id = EventId::parse(event.id())
                    .map_err(|e| format!("{x}: event id {:?}: {e}", event.id()))?;
                let key = (id.epoch().get(), id.ring().get());
                let after = wire.seqs.get(&key).copied().or_else(|| {
                    wire.resumed_after
                        .filter(|a| (a.epoch().get(), a.ring().get()) == key)
                        .map(|a| a.seq())
                });
                if after.is_some_and(|a| id.seq() <= a) {
                    return Err(format!(
                        "{x}: event {id} after {after:?} of its ring (a repeat)"
                    ));
                }
                wire.seqs.insert(key, id.seq());
                self.coverage.event_ids += 1;
                if !self.event_ids.iter().any(|e| e == event.id()) {
                    self.event_ids.push(event.id().to_owned());
                }
            }
            if event.event_type() == "endpoint" {
                let Some((_, session)) = event.data().split_once("?sessionId=") else {
                    return Err(format!("{x}: an endpoint event {:?}", event.data()));
                };
                if wire.tag.as_deref().is_some_and(|t| t != session) {
                    return Err(format!("{x}: a second endpoint, {session}"));
                }
                wire.tag = Some(session.to_owned());
                self.coverage.legacy_streams += 1;
                if !self.session_ids.iter().any(|s| s == session) {
                    self.session_ids.push(session.to_owned());
                }
                self.versions
                    .insert(session.to_owned(), "2024-11-05".to_owned());
                continue;
            }
            if event.data().is_empty() {
                continue; // a priming event
            }
            let message: serde_json::Value = serde_json::from_str(event.data())
                .map_err(|e| format!("{x}: event data is not JSON: {e}"))?;
            self.coverage.tagged += usize::from(check_tag(x, wire.tag.as_deref(), &message)?);
            if wire.modern && is_response(&message) {
                wire.responses += 1;
                if wire.responses > 1 {
                    return Err(format!("{x}: {} answers to one request", wire.responses));
                }
            }
        }
        if decoder.buffered_len() != 0 {
            return Err(format!("{x}: a Data that is not whole SSE frames"));
        }
        Ok(())
    }

    fn event(&mut self, event: Event, current: Option<ExchangeId>) -> Result<(), String> {
        match event {
            Event::Request(r) => {
                let session = r.session();
                let sessionless = r.era() == Era::Sessionless;
                let tag = match session {
                    Some(s) if sessionless => {
                        return Err(format!("a 2026-07-28 request in session {s}"));
                    }
                    Some(s) => self
                        .server
                        .session_header(s)
                        .ok_or_else(|| format!("a request of {s}, which has no id"))?
                        .to_owned(),
                    None => match current {
                        Some(x) if self.stateless || sessionless => format!("{x}"),
                        _ => return Err("a request without a session or an exchange".into()),
                    },
                };
                let mut modern = None;
                if let Some(&w) = current.and_then(|x| self.by_exchange.get(&x)) {
                    let wire = &mut self.wires[w];
                    match wire.expect {
                        Expect::Unknown => {}
                        Expect::Dispatch if sessionless => {}
                        expect => {
                            return Err(format!(
                                "{}: a 2026-07-28 POST expected {expect:?}, its request was \
                                 dispatched ({:?})",
                                wire.id,
                                r.era()
                            ));
                        }
                    }
                    if sessionless {
                        // Its own exchange is its whole world: the messages on it carry
                        // the exchange's tag, whatever session id its head named.
                        wire.modern = true;
                        wire.dispatched = true;
                        wire.tag = Some(tag.clone());
                        modern = Some(w);
                        self.coverage.modern_requests += 1;
                        self.modern_pending.push(self.requests.len());
                    }
                }
                if sessionless && modern.is_none() {
                    return Err("a 2026-07-28 request from no exchange".into());
                }
                if let Some(s) = session {
                    self.saw_session(s);
                    if r.method() == "initialize" {
                        self.versions.insert(tag.clone(), r.version().to_string());
                    }
                }
                if self.requests.iter().any(|q| q.handle == r.handle()) {
                    return Err(format!(
                        "request handle {} handed out twice",
                        r.handle().get()
                    ));
                }
                self.coverage.requests += 1;
                self.requests.push(Req {
                    handle: r.handle(),
                    tag,
                    session,
                    open: true,
                    modern,
                    cancelled: false,
                    checked: false,
                });
            }
            Event::Notification {
                session: Some(s), ..
            } => self.saw_session(s),
            Event::Response { session, message } => {
                // Ids are unique within a session (SESSION-9), and over shards no more:
                // a response is matched in its own session only, so one to another
                // session's request is an id this session never sent.
                let id = message.id().cloned();
                let issued = self
                    .issued
                    .iter_mut()
                    .find(|i| i.session == session && Some(&i.id) == id.as_ref());
                match issued {
                    Some(i) if !i.settled => {
                        i.settled = true;
                        self.coverage.responses += 1;
                    }
                    Some(i) => {
                        return Err(format!(
                            "a second response in {session} to request {}",
                            i.id
                        ));
                    }
                    None => return Err(format!("a response in {session} to an id it never sent")),
                }
            }
            Event::RequestTimedOut { session, id } => {
                match self
                    .issued
                    .iter_mut()
                    .find(|i| i.session == session && i.id == id)
                {
                    Some(i) if !i.settled => {
                        i.settled = true;
                        self.coverage.timeouts += 1;
                    }
                    _ => return Err(format!("request {id} of {session} timed out unexpectedly")),
                }
            }
            Event::Cancelled { request, .. } => {
                match self.requests.iter_mut().find(|r| r.handle == request) {
                    Some(r) if r.open => {
                        r.open = false;
                        r.cancelled = true;
                        self.coverage.cancellations += 1;
                    }
                    _ => return Err(format!("a cancellation of request {}", request.get())),
                }
            }
            Event::SessionClosed { session, reason } => {
                self.saw_session(session);
                if reason == CloseReason::Expired {
                    self.coverage.expired += 1;
                }
                let entry = self
                    .sessions
                    .iter_mut()
                    .find(|(s, _)| *s == session)
                    .expect("just seen");
                if entry.1 {
                    return Err(format!("{session} closed twice"));
                }
                entry.1 = true;
                for r in &mut self.requests {
                    if r.session == Some(session) {
                        r.open = false;
                    }
                }
                for i in &mut self.issued {
                    if i.session == session {
                        i.settled = true;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A [`ModernCall`]: its head with its mirrored headers, its body in chunks, its end.
    fn modern(&mut self, call: &ModernCall) -> Result<(), String> {
        let method = if call.notification {
            NOTIFICATIONS[call.method % NOTIFICATIONS.len()]
        } else {
            MODERN_METHODS[call.method % MODERN_METHODS.len()]
        };
        let name = NAMES[call.name % NAMES.len()];
        let mut body = Vec::with_capacity(320);
        modern_body(
            &mut body,
            call.notification,
            &call.id,
            method,
            call.meta,
            name,
        );
        let expect = self.expect(call, method, name, body.len());
        if self.mirrors && method == "tools/call" && name == "echo" {
            match expect {
                Expect::Dispatch => self.coverage.mirrored_dispatched += 1,
                Expect::Refused(..) => self.coverage.mirrored_refused += 1,
                _ => {}
            }
        }
        let mut scratch = [Vec::new(), Vec::new()];
        let mut extra: Vec<(&'static str, &[u8])> = Vec::with_capacity(8);
        let version: Option<&[u8]> = match call.version {
            ModernVersion::Modern => Some(b"2026-07-28"),
            ModernVersion::Padded => Some(b" 2026-07-28 "),
            ModernVersion::Absent => None,
            ModernVersion::SessionEra => Some(b"2025-11-25"),
            ModernVersion::Unsupported => Some(b"v999.0.0"),
        };
        if let Some(v) = version {
            extra.push(("mcp-protocol-version", v));
        }
        let [upper_method, name_value] = &mut scratch;
        match call.method_header {
            MethodHeader::Right => extra.push(("mcp-method", method.as_bytes())),
            MethodHeader::Absent => {}
            MethodHeader::Upper => {
                upper_method.extend(method.bytes().map(|b| b.to_ascii_uppercase()));
                extra.push(("mcp-method", upper_method));
            }
            MethodHeader::Other => extra.push(("mcp-method", b"tools/list-changed")),
        }
        let present = name_header(name_value, call.name_header, name);
        if present {
            extra.push(("mcp-name", name_value));
            if call.name_header == NameHeader::Twice {
                extra.push(("mcp-name", name_value));
            }
        }
        for &p in &call.params {
            let (header, value) = PARAM_HEADERS[p % PARAM_HEADERS.len()];
            extra.push((header, value.as_bytes()));
        }
        let w = self.open(&call.head, &extra, expect)?;
        let x = self.wires[w].id;
        let body = Bytes::from(body);
        let mut cuts = [0usize; 6];
        let n = call.splits.len().min(4);
        for (cut, s) in cuts.iter_mut().zip(&call.splits[..n]) {
            *cut = s % (body.len() + 1);
        }
        cuts[n] = 0;
        cuts[n + 1] = body.len();
        let cuts = &mut cuts[..n + 2];
        cuts.sort_unstable();
        for pair in cuts.windows(2) {
            self.server
                .handle_body(self.now, x, body.slice(pair[0]..pair[1]));
        }
        if !call.end {
            return Ok(());
        }
        self.server.handle_body_end(self.now, x);
        self.drain(Some(x))?;
        let wire = &self.wires[w];
        match wire.expect {
            Expect::Dispatch if !wire.dispatched => Err(format!(
                "{x}: a 2026-07-28 request expected to be dispatched was not (status {})",
                wire.status
            )),
            Expect::Accepted | Expect::Refused(..) if !wire.ended => Err(format!(
                "{x}: a 2026-07-28 POST expected {:?} is not answered",
                wire.expect
            )),
            _ => Ok(()),
        }
    }

    /// What a [`ModernCall`] must get, where the model can tell: its head otherwise
    /// conforming, its body whole and within bounds, its era decided by its headers and
    /// `_meta` alone (MODERN-25); then the checks in the order the conformance suite
    /// fixes (MODERN-4, -20, -4, -5, -6, -6, -21).
    fn expect(&self, call: &ModernCall, method: &str, name: &str, body_len: usize) -> Expect {
        let head = &call.head;
        let conforming = matches!(head.method, Verb::Post)
            && matches!(head.path, Path::Endpoint)
            && matches!(head.accept, Accept::Both)
            && matches!(
                head.content_type,
                ContentType::Json | ContentType::JsonCharset
            )
            && matches!(head.origin, Origin::Absent | Origin::Loopback)
            && matches!(head.host, Host::Loopback)
            && head.content_length.is_none()
            && call.splits.len() <= 4
            && body_len <= self.max_body;
        let sessions = self.eras.contains(Eras::SESSIONS);
        let served = self.eras.contains(Eras::MODERN);
        if !conforming || (sessions && !matches!(head.session, SessionRef::Absent)) {
            return Expect::Unknown;
        }
        let header = match call.version {
            ModernVersion::Modern | ModernVersion::Padded => Some("2026-07-28"),
            ModernVersion::Absent => None,
            ModernVersion::SessionEra if sessions => return Expect::Unknown,
            ModernVersion::SessionEra => Some("2025-11-25"),
            ModernVersion::Unsupported => Some("v999.0.0"),
        };
        let meta_version = match call.meta {
            Meta::Full | Meta::WithInfo | Meta::NoCapabilities => Some("2026-07-28"),
            Meta::Unsupported => Some("v999.0.0"),
            _ => None,
        };
        let sessionless = !sessions
            || header == Some("2026-07-28")
            || (header != Some("2025-11-25") && meta_version.is_some());
        if !sessionless {
            return Expect::Unknown;
        }
        let (mismatch, unsupported) = ((400, -32020), (400, -32022));
        let Some(header) = header else {
            return Expect::Refused(mismatch.0, mismatch.1);
        };
        if call.notification {
            return if served && header == "2026-07-28" {
                Expect::Accepted
            } else {
                Expect::Refused(unsupported.0, unsupported.1)
            };
        }
        let meta_version = match call.meta {
            Meta::NoCapabilities
            | Meta::Missing
            | Meta::NoVersion
            | Meta::VersionNotText
            | Meta::NotObject
            | Meta::ParamsNotObject => return Expect::Refused(400, -32602),
            Meta::Full | Meta::WithInfo | Meta::Unsupported => meta_version.expect("a version"),
        };
        if meta_version != header {
            return Expect::Refused(mismatch.0, mismatch.1);
        }
        if !served || meta_version != "2026-07-28" {
            return Expect::Refused(unsupported.0, unsupported.1);
        }
        if call.method_header != MethodHeader::Right {
            return Expect::Refused(mismatch.0, mismatch.1);
        }
        let named = matches!(method, "tools/call" | "prompts/get" | "resources/read");
        if named && !name_agrees(call.name_header, name) {
            return Expect::Refused(mismatch.0, mismatch.1);
        }
        if method == "tools/call" && self.mirrors && name == "echo" && !self.params_agree(call) {
            return Expect::Refused(mismatch.0, mismatch.1);
        }
        if matches!(method, "ping" | "initialize") {
            return Expect::Refused(404, -32601);
        }
        Expect::Dispatch
    }

    /// Whether the `Mcp-Param-*` headers of a call of `echo` pass its mirrors (MODERN-7,
    /// MODERN-8): no more fields than the server keeps (at least the 3 `echo` mirrors),
    /// and each mirrored argument in exactly one header, carrying its value (`us-west`
    /// plain or in the sentinel, `42`, `true`); other `Mcp-Param-*` names are ignored.
    fn params_agree(&self, call: &ModernCall) -> bool {
        if call.params.len() > self.max_param_headers.max(3) {
            return false;
        }
        let sent = || {
            call.params
                .iter()
                .map(|&p| PARAM_HEADERS[p % PARAM_HEADERS.len()])
        };
        [
            ("mcp-param-region", ["us-west", "=?base64?dXMtd2VzdA==?="]),
            ("mcp-param-count", ["42", "42"]),
            ("mcp-param-flag", ["true", "true"]),
        ]
        .iter()
        .all(|(header, right)| {
            let mut values = sent().filter(|(h, _)| h == header).map(|(_, v)| v);
            matches!((values.next(), values.next()), (Some(v), None) if right.contains(&v))
        })
    }

    /// Every request of the sessionless revision whose exchange is done got exactly one
    /// answer on it, or was cancelled and got none (MODERN-10, MODERN-11); one answered
    /// while its exchange is live ended it.
    fn check_modern(&mut self) -> Result<(), String> {
        let mut i = 0;
        while i < self.modern_pending.len() {
            let r = self.modern_pending[i];
            let req = &self.requests[r];
            let w = req.modern.expect("a modern request");
            let wire = &self.wires[w];
            let x = wire.id;
            let done = if req.cancelled {
                if wire.responses != 0 {
                    return Err(format!("{x}: a cancelled 2026-07-28 request was answered"));
                }
                self.coverage.modern_cancelled += 1;
                true
            } else if wire.gone {
                return Err(format!(
                    "{x}: its client went, its 2026-07-28 request was not cancelled (MODERN-11)"
                ));
            } else if wire.ended {
                if req.open {
                    return Err(format!(
                        "{x}: ended with its 2026-07-28 request neither answered nor cancelled"
                    ));
                }
                if wire.responses != 1 {
                    return Err(format!(
                        "{x}: {} answers to its 2026-07-28 request",
                        wire.responses
                    ));
                }
                self.coverage.modern_answered += 1;
                true
            } else if !req.open {
                return Err(format!(
                    "{x}: its 2026-07-28 request was answered, the exchange did not end"
                ));
            } else {
                false
            };
            if done {
                self.requests[r].checked = true;
                self.modern_pending.swap_remove(i);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// The server holds exactly the exchanges still open on the wire; while no session
    /// was ever made (a 2026-07-28 client, or a stateless server), it holds none, and
    /// once nothing is open or owed, nothing at all.
    fn check_state(&self) -> Result<(), String> {
        let open = self.wires.iter().filter(|w| !w.ended && !w.gone).count();
        let held = self.server.exchange_count();
        if held != open {
            return Err(format!("{held} exchanges held, {open} open on the wire"));
        }
        if !self.sessions.is_empty() || !self.session_ids.is_empty() {
            return Ok(());
        }
        if self.server.session_count() != 0 {
            return Err(format!(
                "{} sessions held, none seen",
                self.server.session_count()
            ));
        }
        let owed = self.requests.iter().any(|r| r.open) || self.issued.iter().any(|i| !i.settled);
        if open == 0 && !owed && !self.server.is_idle() {
            return Err(format!(
                "state left with nothing open and no session: {:?}",
                self.server
            ));
        }
        Ok(())
    }

    fn saw_session(&mut self, s: SessionId) {
        if !self.sessions.iter().any(|(t, _)| *t == s) {
            self.coverage.sessions += 1;
            self.sessions.push((s, false));
        }
    }

    /// Disconnects every exchange, runs every deadline, answers what is still open, and
    /// checks that nothing is left.
    fn finish(&mut self) -> Result<(), String> {
        for w in 0..self.wires.len() {
            if !self.wires[w].ended {
                self.disconnect(w);
            }
        }
        self.drain(None)?;
        self.check_modern()?;
        self.check_state()?;
        self.run_out_the_clock()?;
        for r in 0..self.requests.len() {
            if self.requests[r].open {
                self.respond(r, false)?;
            }
        }
        self.drain(None)?;
        self.run_out_the_clock()?;
        if !self.server.is_idle() {
            return Err(format!(
                "state left after every session expired: {:?}",
                self.server
            ));
        }
        Ok(())
    }

    fn run_out_the_clock(&mut self) -> Result<(), String> {
        for _ in 0..10_000 {
            let Some(at) = self.server.poll_timeout() else {
                return Ok(());
            };
            self.now = self.now.max(at);
            self.timeout()?;
            self.drain(None)?;
        }
        Err("deadlines keep coming with nothing connected".into())
    }
}

/// Whether `message` is a response (an id with a result or an error).
fn is_response(message: &serde_json::Value) -> bool {
    message.get("id").is_some()
        && (message.get("result").is_some() || message.get("error").is_some())
}

/// Writes the body of a 2026-07-28 request or notification with this `_meta`.
fn modern_body(
    out: &mut Vec<u8>,
    notification: bool,
    id: &ClientId,
    method: &str,
    meta: Meta,
    name: &str,
) {
    use std::io::Write as _;
    let _ = write!(out, r#"{{"jsonrpc":"2.0","#);
    if !notification {
        let _ = match id {
            ClientId::Int(n) => write!(out, r#""id":{n},"#),
            ClientId::Str(n) => write!(out, r#""id":"r{n}","#),
        };
    }
    let _ = write!(out, r#""method":"{method}","params":"#);
    if meta == Meta::ParamsNotObject {
        out.extend_from_slice(b"[1]}");
        return;
    }
    if notification {
        out.extend_from_slice(br#"{"requestId":1,"progressToken":1,"progress":1"#);
    } else {
        let _ = write!(
            out,
            r#"{{"name":"{name}","uri":"{name}","arguments":{{"region":"us-west","count":42,"flag":true}}"#
        );
    }
    const V: &str = r#""io.modelcontextprotocol/protocolVersion""#;
    const C: &str = r#""io.modelcontextprotocol/clientCapabilities":{}"#;
    let _ = match meta {
        Meta::Full => write!(out, r#","_meta":{{{V}:"2026-07-28",{C}}}"#),
        Meta::WithInfo => write!(
            out,
            r#","_meta":{{{V}:"2026-07-28",{C},"io.modelcontextprotocol/clientInfo":{{"name":"ops","version":"1"}},"io.modelcontextprotocol/logLevel":"info"}}"#
        ),
        Meta::Missing | Meta::ParamsNotObject => Ok(()),
        Meta::NoVersion => write!(out, r#","_meta":{{{C}}}"#),
        Meta::NoCapabilities => write!(out, r#","_meta":{{{V}:"2026-07-28"}}"#),
        Meta::Unsupported => write!(out, r#","_meta":{{{V}:"v999.0.0",{C}}}"#),
        Meta::VersionNotText => write!(out, r#","_meta":{{{V}:7,{C}}}"#),
        Meta::NotObject => write!(out, r#","_meta":"x""#),
    };
    out.extend_from_slice(b"}}");
}

/// Writes the `Mcp-Name` value of `how` for `name` into `out`; false for none.
fn name_header(out: &mut Vec<u8>, how: NameHeader, name: &str) -> bool {
    match how {
        NameHeader::Absent => return false,
        NameHeader::Encoded | NameHeader::Twice => {
            out.extend_from_slice(mcpwire::mirror::encode_str(name).as_bytes());
        }
        NameHeader::Padded => {
            out.extend_from_slice(b"  ");
            out.extend_from_slice(mcpwire::mirror::encode_str(name).as_bytes());
            out.push(b'\t');
        }
        NameHeader::Sentinel | NameHeader::Unpadded => {
            out.extend_from_slice(b"=?base64?");
            base64(out, name.as_bytes());
            if how == NameHeader::Unpadded {
                while out.last() == Some(&b'=') {
                    out.pop();
                }
            }
            out.extend_from_slice(b"?=");
        }
        NameHeader::Literal => out.extend_from_slice(name.as_bytes()),
        NameHeader::Upper => out.extend(name.bytes().map(|b| b.to_ascii_uppercase())),
    }
    true
}

/// Whether `Mcp-Name` written as `how` names `name` (MODERN-6, MODERN-8), by the rules
/// rather than by the decoder: an encoded value always does; the sentinel unpadded only
/// when no padding was due; the bytes as they are only when they are plain text (visible
/// ASCII, inner spaces, no whitespace at the ends, not shaped as the sentinel); upper
/// case only when that changes nothing.
fn name_agrees(how: NameHeader, name: &str) -> bool {
    let visible = name
        .bytes()
        .all(|b| b == b' ' || (0x21..=0x7e).contains(&b));
    let padded = name.starts_with([' ', '\t']) || name.ends_with([' ', '\t']);
    let sentinel = name.starts_with("=?base64?") && name.ends_with("?=") && name.len() >= 11;
    let plain = visible && !padded && !sentinel;
    match how {
        NameHeader::Encoded | NameHeader::Padded | NameHeader::Sentinel => true,
        NameHeader::Unpadded => name.len() % 3 == 0,
        NameHeader::Literal => plain,
        NameHeader::Upper => plain && !name.bytes().any(|b| b.is_ascii_lowercase()),
        NameHeader::Twice | NameHeader::Absent => false,
    }
}

/// RFC 4648 base64 with padding, written here so the model does not share the code it
/// checks.
fn base64(out: &mut Vec<u8>, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

/// Whether `message` carries a tag, which must be `expected`'s.
fn check_tag(
    x: ExchangeId,
    expected: Option<&str>,
    message: &serde_json::Value,
) -> Result<bool, String> {
    match (tag_of(message), expected) {
        (None, _) => Ok(false),
        (Some(tag), Some(expected)) if tag == expected => Ok(true),
        (Some(tag), expected) => Err(format!(
            "{x}, of session {expected:?}, carried a message of {tag}: {message}"
        )),
    }
}
