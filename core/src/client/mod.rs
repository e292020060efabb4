//! The sans-IO client: the mirror of [`server`](crate::server). It finds the best revision
//! a server offers, makes the HTTP requests of that era, reads their responses, correlates
//! every response with its request, resumes broken streams, and falls back to the legacy
//! transport, with no IO.
//!
//! ```text
//! client.connect(now)                         the handshake starts
//! loop:
//!   while let Some(t) = client.poll_transmit() { send it (or abort one exchange) }
//!   response head   -> client.handle_head(now, x, parts)
//!   body chunk      -> client.handle_body(now, x, chunk)
//!   body complete   -> client.handle_body_end(now, x)
//!   broken / reset  -> client.handle_failure(now, x)
//!   while let Some(event) = client.poll_event() { application }
//!   sleep until client.poll_timeout(); then client.handle_timeout(now)
//! ```
//!
//! An adapter that offers an application calls (rather than events) drives the client
//! through [`Calls`], the runtime-neutral table of callers both of mcpwire's adapters
//! share: it routes each call's progress, a listen's notifications and each outcome to
//! the caller's channel, and everything else to the application's receiver of
//! [`ServerMessage`]s, so that no adapter decides anything about the protocol.
//!
//! # Decisions
//!
//! - **Era** ([`Revision`], MODERN-15, MODERN-26): by default `server/discover` at
//!   2026-07-28 first; the sessionless revision is kept on positive modern evidence only
//!   (a `DiscoverResult`, -32020/-32021/-32022 in the body under any status, -32601 under
//!   404), else `initialize` at the best revision the server listed, else the legacy
//!   fallback below. A modern error refusing `initialize` is no legacy server's: the
//!   client speaks the sessionless revision if it may, else fails naming what the
//!   server offered. A `DiscoverResult` with an unknown `resultType` is invalid
//!   (MODERN-23): the handshake fails. A configuration can pin a revision or an era;
//!   [`Client::negotiated`] says what was settled, to hand back next time.
//! - **Handshake** (session eras): `initialize`, then `notifications/initialized`;
//!   [`Event::Connected`] carries the negotiated revision and era. Messages the
//!   application sends before that wait (bounded by the pending limit) and go out in
//!   order once connected (JSONRPC-9).
//! - **Sessionless requests** (MODERN-3…8): each carries the protocol members of `_meta`
//!   spliced into its params, `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and for a
//!   tool whose listed schema mirrors arguments its `Mcp-Param-*` headers (a tool with
//!   invalid annotations is dropped from `tools/list` results and its calls refused:
//!   [`Event::ToolDropped`]). An error answered with a status is the request's answer; an
//!   unknown `resultType` fails it (MODERN-18); cancelling closes its response
//!   (MODERN-11). An `input_required` answer's input requests reach the application as
//!   [`Event::Request`]s, answered with [`Client::respond`], and the call is asked again
//!   under a new id, its answer coming under the application's (MODERN-23).
//! - **Headers**: every POST carries `Accept: application/json, text/event-stream` and
//!   `Content-Type: application/json` (HTTP-POST-3); every request after the handshake
//!   carries its session's `Mcp-Session-Id` (SESSION-5) and `MCP-Protocol-Version`
//!   (VERSION-1). A session id that is not visible ASCII fails the handshake (SESSION-3).
//! - **Responses**: a JSON body or an SSE stream, by `Content-Type` (HTTP-POST-7); every
//!   response is matched by id alone, whatever stream carried it (§14.11), and a second
//!   response to one id is dropped, so the application never sees one twice.
//! - **Resume** (RESUME-4, RESUME-11, RESUME-12): a stream that ends or breaks while it
//!   still owes responses (or the GET stream, which owes everything) is resumed with GET
//!   and `Last-Event-ID` once an id was seen, after the server's `retry` or, when none
//!   came, a capped exponential backoff with jitter from the injected
//!   [`Entropy`]; each stream has a budget of attempts. Without an id a
//!   POST stream cannot be resumed: its requests fail with [`RequestError::StreamLost`].
//!   A refused resume (a gap, §14.3) fails exactly that stream's requests; a 409 (the
//!   server still holds a connection of the stream that broke on this side, HTTP-GET-9)
//!   is tried again, from the same budget.
//! - **Sessions**: 404 to a request that carried a session id ends the session
//!   (SESSION-8): every request in flight fails, and the client re-initializes if
//!   configured to. 405 to GET means no standalone stream, and is not an error (HTTP-GET-3).
//! - **Legacy fallback** (LEGACY-6, MODERN-15): 400, 404 or 405 to `initialize` whose body
//!   is no modern error → GET the same URL,
//!   take the `endpoint` event (resolved against the URL, refused if it names another
//!   origin: §14.14), and POST everything there; responses come over the stream.

mod calls;
mod config;
mod modern;
mod output;
mod rounds;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};

pub use crate::app::{CacheHint, CacheScope};
pub use calls::{CallError, CallState, CallUpdate, Calls, Delivery, Progress};
pub use config::{Config, Revision, is_transport_header};
pub use output::{ClientError, Event, ExchangeId, Reached, RequestError, ServerMessage, Transmit};

use crate::jsonrpc::{
    Classifier, Envelope, Envelopes, Kind, Outgoing, Pending, RequestId, ToJson, body_text,
};
use crate::sse::Decoder;
use crate::{Entropy, Era, ProtocolVersion};
use modern::ParamsError;

/// Where the client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    /// `server/discover` is out: the server's answer decides the era (MODERN-15).
    Discovering,
    Initializing,
    Connected,
    Closed,
}

#[derive(Debug)]
enum ExKind {
    /// A POST carrying these requests (possibly none).
    Post {
        ids: Vec<RequestId>,
    },
    /// A GET for this stream (the standalone stream, a resume, or the legacy stream).
    Get {
        stream: u64,
    },
    Delete,
}

#[derive(Debug)]
enum Body {
    /// Waiting for the head.
    Head,
    /// A JSON body, collecting.
    Json(BytesMut),
    /// An error status; the body may hold a JSON-RPC error.
    Error(StatusCode, BytesMut),
    /// An SSE stream.
    Sse(Box<Decoder>, u64),
    /// Nothing to read (202, DELETE).
    Ignore,
}

/// What a request asked, as far as its answer concerns the client itself.
#[derive(Debug)]
enum Asked {
    /// `tools/list`: at 2026-07-28 its tools' `x-mcp-header` annotations are read, and a
    /// tool with invalid ones is dropped (MODERN-7).
    ToolsList,
    /// `tools/call`, `resources/read` or `prompts/get`: at 2026-07-28 the server may
    /// answer `input_required`, and the client asks again (MODERN-23).
    RoundTrip(Box<rounds::Call>),
    /// The `tools/list` the client sent itself after a call's `Mcp-Param-*` headers were
    /// refused (MODERN-7): its answer refreshes the mirrors, and the call goes again.
    Relist(Box<rounds::Relist>),
    /// Anything else.
    Other,
}

impl Asked {
    fn of(method: &str, params: Option<&Bytes>, deadline: Option<Instant>) -> Self {
        match method {
            "tools/list" => Self::ToolsList,
            "tools/call" | "resources/read" | "prompts/get" => Self::RoundTrip(Box::new(
                rounds::Call::new(method, params.cloned(), deadline),
            )),
            _ => Self::Other,
        }
    }
}

/// Whose outcome a handshake's is: `connect`'s, or a re-initialization's after the
/// session expired (which the application must tell apart: the new session knows
/// nothing of the old one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handshake {
    First,
    Again,
}

/// A message of the application's, until it is sent.
#[derive(Debug)]
enum Outbound {
    /// A request (with its id) or a notification, shaped for the era when it leaves:
    /// at 2026-07-28 its params gain the protocol members of `_meta` and its headers
    /// mirror its method and name (MODERN-3, MODERN-6).
    Call {
        id: Option<RequestId>,
        method: Box<str>,
        params: Option<Bytes>,
    },
    /// A message the same in every era that sends it: an answer to a server's request,
    /// `notifications/cancelled`.
    Encoded(Bytes),
}

#[derive(Debug)]
struct Exchange {
    kind: ExKind,
    body: Body,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StreamKind {
    Post,
    Get,
    Legacy,
}

#[derive(Debug)]
struct Stream {
    kind: StreamKind,
    /// Responses it still owes.
    owed: BTreeSet<RequestId>,
    /// The last event id seen (SSE-PARSE-14); empty: none.
    last_id: String,
    retry: Option<Duration>,
    attempts: u32,
    conn: Option<u64>,
}

/// The client state machine. See the [module docs](self).
pub struct Client {
    config: Config,
    entropy: Box<dyn Entropy + Send>,
    classifier: Classifier,
    phase: Phase,
    era: Era,
    session: Option<HeaderValue>,
    version: Option<ProtocolVersion>,
    /// The legacy POST URI, once the `endpoint` event named it.
    legacy_post: Option<http::Uri>,
    init_id: Option<RequestId>,
    /// Which handshake is (or was last) under way.
    handshake: Handshake,
    /// The `server/discover` probe's id, while it is out.
    probe: Option<RequestId>,
    /// The protocol members of every sessionless request's `_meta`, once connected.
    meta: String,
    pending: Pending<Asked>,
    /// The `x-mcp-header` mirrors of the tools the server listed (MODERN-7), for the
    /// `Mcp-Param-*` headers of sessionless `tools/call`s.
    mirrors: crate::mirror::ToolMirrors,
    /// The tools dropped from a listing for invalid annotations: their calls are
    /// refused here, since they could not carry the headers they must (MODERN-7).
    dropped: BTreeSet<String>,
    /// Multi round-trip calls waiting for the application's input (MODERN-23).
    rounds: rounds::Rounds,
    /// What the application sent before the handshake ended, in order.
    waiting: VecDeque<Outbound>,
    /// The exchange carrying `notifications/initialized`, until its response head (or
    /// its failure): the waiting messages go out after it, so that a server sees the
    /// handshake end before the first request (servers such as the Python SDK's refuse
    /// a request that comes first), as the TypeScript SDK's client does.
    acknowledging: Option<u64>,
    next: u64,
    exchanges: BTreeMap<u64, Exchange>,
    streams: BTreeMap<u64, Stream>,
    // INVARIANT: `owed_by` maps exactly the ids in the `owed` sets of `streams`.
    owed_by: BTreeMap<RequestId, u64>,
    timers: BTreeSet<(Instant, u64)>,
    out: VecDeque<Transmit>,
    events: VecDeque<Event>,
    get_stream: Option<u64>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("phase", &self.phase)
            .field("era", &self.era)
            .field("version", &self.version)
            .field("pending", &self.pending.len())
            .field("exchanges", &self.exchanges.len())
            .field("streams", &self.streams.len())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client; `entropy` jitters its reconnection delays.
    pub fn new(config: Config, entropy: Box<dyn Entropy + Send>) -> Self {
        let pending = Pending::new(config.max_pending);
        let classifier = Classifier::default();
        let era = modern::first_era(config.revision);
        Self {
            config,
            entropy,
            classifier,
            phase: Phase::Idle,
            era,
            session: None,
            version: None,
            legacy_post: None,
            acknowledging: None,
            init_id: None,
            handshake: Handshake::First,
            probe: None,
            meta: String::new(),
            mirrors: crate::mirror::ToolMirrors::new(),
            dropped: BTreeSet::new(),
            rounds: rounds::Rounds::default(),
            pending,
            waiting: VecDeque::new(),
            next: 1,
            exchanges: BTreeMap::new(),
            streams: BTreeMap::new(),
            owed_by: BTreeMap::new(),
            timers: BTreeSet::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            get_stream: None,
        }
    }

    /// The negotiated revision, once connected.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.version
    }

    /// The era the client is in: the one it is trying until connected, then the one it
    /// settled on.
    pub fn era(&self) -> Era {
        self.era
    }

    /// What the handshake settled on, once connected: hand it back in
    /// [`Config::with_revision`] to skip finding it again with this server
    /// (MODERN-26: cache the era per origin).
    pub fn negotiated(&self) -> Option<Revision> {
        if self.phase != Phase::Connected {
            return None;
        }
        match self.era {
            Era::HttpSse => Some(Revision::Era(Era::HttpSse)),
            _ => self.version.map(Revision::Exactly),
        }
    }

    /// Sets the header `name` of every later request to `value` (replacing every value
    /// it had), or removes it (`None`): a refreshed `Authorization` token after a call
    /// failed with [`RequestError::Unauthorized`], say. Requests already sent keep what
    /// they had; a stream resumed from now on carries the new value. As with
    /// [`Config::with_header`], a header the transport decides itself
    /// ([`is_transport_header`]) is not taken.
    pub fn set_header(&mut self, name: http::HeaderName, value: Option<HeaderValue>) {
        if is_transport_header(&name) {
            return;
        }
        match value {
            Some(value) => {
                self.config.headers.insert(name, value);
            }
            None => {
                self.config.headers.remove(name);
            }
        }
    }

    /// The `Mcp-Session-Id` the server issued, if any.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_ref().and_then(|v| v.to_str().ok())
    }

    /// Whether the handshake finished and the client is not closed.
    pub fn is_connected(&self) -> bool {
        self.phase == Phase::Connected
    }

    /// Whether the client holds nothing: no request in flight, no exchange, no stream,
    /// nothing queued.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
            && self.exchanges.is_empty()
            && self.streams.is_empty()
            && self.owed_by.is_empty()
            && self.waiting.is_empty()
            && self.out.is_empty()
            && self.rounds.is_empty()
    }

    /// Starts the handshake: `server/discover` is the first transmit (or, for a
    /// configuration that names an older era, `initialize` or the legacy GET; for one
    /// that names a sessionless revision, nothing: the client is connected at once, and
    /// its first request is the first word). A no-op unless idle.
    pub fn connect(&mut self, now: Instant) {
        if self.phase != Phase::Idle {
            return;
        }
        match (
            self.config.revision,
            modern::first_era(self.config.revision),
        ) {
            (Revision::Exactly(version), Era::Sessionless) => {
                // A revision known already (pinned, or handed back from an earlier
                // connection): nothing to find, the first request goes as it.
                if self.set_meta(version) {
                    self.modern_connected(version, None);
                }
            }
            (_, Era::Sessionless) => self.discover(now),
            (_, Era::HttpSse) => self.initialize(now, ProtocolVersion::V2024_11_05, true),
            (_, Era::Sessions) => self.initialize(now, self.config.version, false),
        }
    }

    /// The probe (MODERN-15): `server/discover` at the newest revision allowed.
    fn discover(&mut self, now: Instant) {
        let offered = match self.config.revision {
            Revision::Exactly(v) if !v.uses_initialize() => v,
            _ => ProtocolVersion::LATEST,
        };
        if !self.set_meta(offered) {
            return;
        }
        let deadline = now + self.config.connect_timeout;
        let Ok(id) = self.pending.register(Asked::Other, Some(deadline)) else {
            return;
        };
        self.era = Era::Sessionless;
        self.version = Some(offered);
        self.phase = Phase::Discovering;
        self.probe = Some(id.clone());
        // Its params are `_meta` alone (MODERN-19), spliced in as it leaves.
        self.send_outbound(Outbound::Call {
            id: Some(id),
            method: "server/discover".into(),
            params: None,
        });
    }

    /// Renders the `_meta` members of `version`; false (and the client closed) when the
    /// configured capabilities are not a JSON object.
    fn set_meta(&mut self, version: ProtocolVersion) -> bool {
        let capabilities = self.config.capabilities.trim();
        if !capabilities.starts_with('{') || crate::jsonrpc::RawJson::new(capabilities).is_err() {
            self.capabilities_unusable();
            return false;
        }
        self.meta = modern::protocol_members(
            version,
            capabilities,
            &self.config.client_name,
            &self.config.client_version,
        );
        true
    }

    /// The handshake cannot start: the configured capabilities are not a JSON object,
    /// so no request could carry them.
    fn capabilities_unusable(&mut self) {
        self.connect_failed(RequestError::BadResponse(
            "the configured capabilities are not a JSON object".into(),
        ));
    }

    /// Opens a session: `initialize` offering `version`, POSTed to the endpoint, or with
    /// `legacy` to the URI the legacy stream's `endpoint` event names.
    fn initialize(&mut self, now: Instant, version: ProtocolVersion, legacy: bool) {
        let deadline = now + self.config.connect_timeout;
        let Ok(id) = self.pending.register(Asked::Other, Some(deadline)) else {
            return;
        };
        let Some(body) = self.initialize_body(&id, version) else {
            // The configured capabilities are not JSON: nothing sensible can be sent.
            let _ = self.pending.cancel(&id);
            return self.capabilities_unusable();
        };
        self.era = Era::Sessions;
        self.version = None;
        self.init_id = Some(id.clone());
        self.phase = Phase::Initializing;
        if legacy {
            // `initialize` goes to the URI the stream's `endpoint` event names.
            return self.open_legacy_stream();
        }
        self.send_post(body, vec![id], &[]);
    }

    /// The body of the `initialize` request `id` offering `version`, with the configured
    /// capabilities and client info; `None` when the capabilities are not JSON.
    pub(super) fn initialize_body(
        &self,
        id: &RequestId,
        version: ProtocolVersion,
    ) -> Option<Bytes> {
        let params = format!(
            r#"{{"protocolVersion":"{}","capabilities":{},"clientInfo":{{"name":{},"version":{}}}}}"#,
            version,
            self.config.capabilities,
            json_string(&self.config.client_name),
            json_string(&self.config.client_version),
        );
        let raw = crate::jsonrpc::RawJson::new(&params).ok()?;
        let mut body = BytesMut::new();
        Outgoing::Request {
            id,
            method: "initialize",
            params: Some(&raw),
        }
        .write(&mut body)
        .ok()?;
        Some(body.freeze())
    }

    /// Sends a request; its response comes as [`Event::Response`], or
    /// [`Event::Failed`] (a timeout at `deadline`, a lost stream, an expired session).
    ///
    /// # Errors
    /// [`ClientError::TooMany`] at the pending bound; [`ClientError::NotConnected`] once
    /// closed; [`ClientError::Encode`].
    pub fn request(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&dyn ToJson>,
        deadline: Option<Instant>,
    ) -> Result<RequestId, ClientError> {
        let _ = now;
        if self.phase == Phase::Closed {
            return Err(ClientError::NotConnected);
        }
        let params = self.params_text(params)?;
        let id = self
            .pending
            .register(Asked::of(method, params.as_ref(), deadline), deadline)
            .map_err(|_| ClientError::TooMany)?;
        self.send_or_wait(Outbound::Call {
            id: Some(id.clone()),
            method: method.into(),
            params,
        });
        Ok(id)
    }

    /// The text of a message's params. (What the sessionless revision splices into them
    /// is checked when the message leaves, in the era it leaves in: a request that cannot
    /// be sent fails with [`RequestError::Unsendable`].)
    fn params_text(&self, params: Option<&dyn ToJson>) -> Result<Option<Bytes>, ClientError> {
        let Some(params) = params else {
            return Ok(None);
        };
        let mut text = BytesMut::new();
        params.write_json(&mut text)?;
        Ok(Some(text.freeze()))
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// [`ClientError::NotConnected`] once closed; [`ClientError::Encode`], and at
    /// 2026-07-28 params that are not an object or set a protocol key of `_meta`
    /// (MODERN-3). (A notification has no answer to fail later, so this is checked
    /// now; one queued in another era that cannot be sent in this one is dropped.)
    pub fn notify(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&dyn ToJson>,
    ) -> Result<(), ClientError> {
        let _ = now;
        if self.phase == Phase::Closed {
            return Err(ClientError::NotConnected);
        }
        let params = self.params_text(params)?;
        if self.era == Era::Sessionless
            && let Some(text) = &params
        {
            let checked = std::str::from_utf8(text)
                .map_err(|_| ParamsError::NotObject)
                .and_then(|t| modern::read_params(t).map(drop));
            if let Err(e) = checked {
                let e = crate::jsonrpc::EncodeError::Serialize(e.to_string());
                return Err(ClientError::Encode(e));
            }
        }
        self.send_or_wait(Outbound::Call {
            id: None,
            method: method.into(),
            params,
        });
        Ok(())
    }

    /// Answers a server→client request (its [`Event::Request`]) with `result`.
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub fn respond(
        &mut self,
        now: Instant,
        id: &RequestId,
        result: &dyn ToJson,
    ) -> Result<(), ClientError> {
        if let Some(answered) = self.input_answer(now, id, Ok(result)) {
            return answered;
        }
        self.send_message(&Outgoing::Response { id, result })
    }

    /// Answers a server→client request with an error.
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub fn respond_error(
        &mut self,
        now: Instant,
        id: &RequestId,
        code: crate::jsonrpc::ErrorCode,
        message: &str,
    ) -> Result<(), ClientError> {
        let refused = RequestError::InputRefused {
            code: code.0,
            message: message.to_owned(),
        };
        if let Some(answered) = self.input_answer(now, id, Err(refused)) {
            return answered;
        }
        self.send_message(&Outgoing::Error {
            id: Some(id),
            code,
            message,
            data: None,
        })
    }

    /// Gives up on a request: it is forgotten (a late response is dropped) and the server
    /// is told: `notifications/cancelled` in the session eras, its response closed at
    /// 2026-07-28 (MODERN-11). A request still waiting for the handshake is dropped
    /// unsent, and nothing is sent for it. Returns whether it was in flight.
    pub fn cancel(&mut self, now: Instant, id: &RequestId, reason: Option<&str>) -> bool {
        let _ = now;
        // A call waiting for the application's input has nothing at the server.
        let Some(wire) = self.cancel_rounds(id) else {
            return true;
        };
        if self.pending.cancel(&wire).is_none() {
            return false;
        }
        self.rounds.origin(&wire);
        self.forget_owed(&wire);
        self.cancel_at_server(&wire, reason);
        true
    }

    /// Tells the server a request is given up: at 2026-07-28 by closing its response
    /// (MODERN-11: nothing else cancels it, and the server sends nothing more for it),
    /// or one that never left is dropped; in the session eras with
    /// `notifications/cancelled`.
    fn cancel_at_server(&mut self, id: &RequestId, reason: Option<&str>) {
        // One that never left (it waits for the handshake) is dropped, in any era: the
        // server never hears of it. A cancellation queued behind it instead would go out
        // with it, and in the era the handshake settles, which may be 2026-07-28, where
        // the notification cancels nothing (MODERN-11) and the call would run.
        let waiting = self.waiting.len();
        self.waiting
            .retain(|o| !matches!(o, Outbound::Call { id: Some(i), .. } if i == id));
        if self.waiting.len() != waiting {
            return;
        }
        if self.era != Era::Sessionless {
            let _ = self.send_message(&Outgoing::Cancelled {
                request: id,
                reason,
            });
            return;
        }
        self.abort_carrying(id);
    }

    /// Ends the session: DELETE (HTTP-DELETE-1), every exchange aborted, every request in
    /// flight failed with [`RequestError::Closed`]; then [`Event::Closed`].
    pub fn close(&mut self, now: Instant) {
        let _ = now;
        if self.phase == Phase::Closed {
            return;
        }
        self.phase = Phase::Closed;
        self.fail_all(RequestError::Closed);
        self.probe = None;
        self.drop_streams();
        for x in std::mem::take(&mut self.exchanges).into_keys() {
            self.out.push_back(Transmit::Abort(ExchangeId(x)));
        }
        self.waiting.clear();
        self.timers.clear();
        if self.session.is_some() && self.era == Era::Sessions {
            let head = self.head(Method::DELETE, self.config.endpoint.clone());
            self.transmit(ExKind::Delete, head, Bytes::new());
        } else {
            self.events.push_back(Event::Closed);
        }
    }

    /// The next request to send, or exchange to abort.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// The next event for the application.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next deadline: a reconnection, or a request's timeout (one in flight, or one
    /// waiting for the application's input: MODERN-23).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.timers.first().map(|(at, _)| *at),
            self.pending.poll_timeout(),
            self.rounds.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Acts on every deadline at or before `now`: reconnections, and requests past their
    /// deadline (failed with [`RequestError::Timeout`], and cancelled at the server if
    /// they were there).
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, t)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            self.reconnect(t);
        }
        self.pending.handle_timeout(now);
        while let Some((id, _)) = self.pending.poll_expired() {
            self.forget_owed(&id);
            if self.init_id.as_ref() == Some(&id) {
                self.connect_failed(RequestError::Timeout);
                continue;
            }
            if self.probe.as_ref() == Some(&id) {
                self.connect_failed(RequestError::Timeout);
                continue;
            }
            self.push_failed(id.clone(), RequestError::Timeout);
            self.cancel_at_server(&id, Some("timeout"));
        }
        self.expire_gathering(now);
    }

    /// The response head of exchange `x` arrived.
    pub fn handle_head(&mut self, now: Instant, x: ExchangeId, head: http::response::Parts) {
        self.response_head(now, x, head);
        self.acknowledged(x.0);
    }

    fn response_head(&mut self, now: Instant, x: ExchangeId, head: http::response::Parts) {
        let Some(e) = self.exchanges.get(&x.0) else {
            return;
        };
        let status = head.status;
        let media = media_type(&head.headers);
        if status == StatusCode::UNAUTHORIZED {
            return self.unauthorized(now, x.0, &head.headers);
        }
        match &e.kind {
            ExKind::Post { ids } => {
                let ids = ids.clone();
                let initialize = self.init_id.as_ref().is_some_and(|i| ids.contains(i));
                let probe = self.probe.as_ref().is_some_and(|p| ids.contains(p));
                if probe
                    && (status == StatusCode::ACCEPTED
                        || status.is_success()
                            && !matches!(&*media, "application/json" | "text/event-stream"))
                {
                    // An answer with no JSON-RPC message: nothing modern about it.
                    self.exchanges.remove(&x.0);
                    self.out.push_back(Transmit::Abort(x));
                    return self.probe_answered(now, status.as_u16(), None);
                }
                if initialize && status.is_success() && self.era == Era::Sessions {
                    if let Some(value) = head.headers.get("mcp-session-id") {
                        if !value.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b))
                            || value.is_empty()
                        {
                            return self.connect_failed(RequestError::BadResponse(
                                "Mcp-Session-Id is not visible ASCII".into(),
                            ));
                        }
                        self.session = Some(value.clone());
                    }
                }
                let body = if status == StatusCode::ACCEPTED {
                    Body::Ignore
                } else if status.is_success() && media == "application/json" {
                    Body::Json(BytesMut::new())
                } else if status.is_success() && media == "text/event-stream" {
                    let t = self.new_stream(StreamKind::Post, &ids);
                    self.streams.get_mut(&t).expect("new stream").conn = Some(x.0);
                    Body::Sse(Box::new(Decoder::new(self.config.sse)), t)
                } else if status.is_success() {
                    self.fail_ids(
                        now,
                        &ids,
                        RequestError::BadResponse(format!("content type {media:?}")),
                    );
                    Body::Ignore
                } else if probe {
                    // Its body says what the status means (MODERN-15).
                    Body::Error(status, BytesMut::new())
                } else if status == StatusCode::NOT_FOUND && self.session.is_some() && !initialize {
                    return self.session_expired(now);
                } else {
                    Body::Error(status, BytesMut::new())
                };
                if let Some(e) = self.exchanges.get_mut(&x.0) {
                    e.body = body;
                }
            }
            ExKind::Get { stream } => {
                let t = *stream;
                let body = if status.is_success() && media == "text/event-stream" {
                    if let Some(s) = self.streams.get_mut(&t) {
                        s.conn = Some(x.0);
                        s.attempts = 0;
                    }
                    Body::Sse(Box::new(Decoder::new(self.config.sse)), t)
                } else if status == StatusCode::NOT_FOUND && self.session.is_some() {
                    return self.session_expired(now);
                } else if status == StatusCode::METHOD_NOT_ALLOWED
                    && self
                        .streams
                        .get(&t)
                        .is_some_and(|s| s.kind == StreamKind::Get && s.last_id.is_empty())
                {
                    // HTTP-GET-3: no standalone stream; not an error.
                    self.remove_stream(t);
                    Body::Ignore
                } else {
                    Body::Error(status, BytesMut::new())
                };
                if let Some(e) = self.exchanges.get_mut(&x.0) {
                    e.body = body;
                }
            }
            ExKind::Delete => {
                self.exchanges.get_mut(&x.0).expect("exchange").body = Body::Ignore;
            }
        }
    }

    /// 401 (SEC-5, SEC-6): the request fails with the server's `WWW-Authenticate`
    /// challenge, for the application to obtain a token and connect again.
    fn unauthorized(&mut self, now: Instant, x: u64, headers: &http::HeaderMap) {
        let challenge = headers
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let error = RequestError::Unauthorized { challenge };
        let Some(e) = self.exchanges.get_mut(&x) else {
            return;
        };
        e.body = Body::Ignore;
        match &e.kind {
            ExKind::Post { ids } => {
                let ids = ids.clone();
                if self.init_id.as_ref().is_some_and(|i| ids.contains(i))
                    || self.probe.as_ref().is_some_and(|p| ids.contains(p))
                {
                    return self.connect_failed(error);
                }
                self.fail_ids(now, &ids, error);
            }
            ExKind::Get { stream } => {
                let t = *stream;
                if self
                    .streams
                    .get(&t)
                    .is_some_and(|s| s.kind == StreamKind::Legacy)
                {
                    return self.connect_failed(error);
                }
                self.stream_failed(now, t, error);
            }
            ExKind::Delete => {}
        }
    }

    /// A chunk of exchange `x`'s response body.
    pub fn handle_body(&mut self, now: Instant, x: ExchangeId, chunk: Bytes) {
        let max = self.config.max_body;
        let Some(e) = self.exchanges.get_mut(&x.0) else {
            return;
        };
        match &mut e.body {
            Body::Json(buf) | Body::Error(_, buf) => {
                if buf.len() + chunk.len() > max {
                    let ExKind::Post { ids } = &e.kind else {
                        return;
                    };
                    let ids = ids.clone();
                    e.body = Body::Ignore;
                    if self.probe.as_ref().is_some_and(|p| ids.contains(p)) {
                        self.out.push_back(Transmit::Abort(x));
                        self.exchanges.remove(&x.0);
                        return self.probe_answered(now, 200, None);
                    }
                    self.fail_ids(
                        now,
                        &ids,
                        RequestError::BadResponse("response body too large".into()),
                    );
                    self.out.push_back(Transmit::Abort(x));
                    self.exchanges.remove(&x.0);
                    return;
                }
                buf.extend_from_slice(&chunk);
            }
            Body::Sse(decoder, t) => {
                let t = *t;
                if decoder.push(chunk).is_err() {
                    return;
                }
                self.drain_stream(now, x.0, t);
            }
            Body::Head | Body::Ignore => {}
        }
    }

    /// Exchange `x`'s response body is complete.
    pub fn handle_body_end(&mut self, now: Instant, x: ExchangeId) {
        let Some(e) = self.exchanges.remove(&x.0) else {
            return;
        };
        match (e.kind, e.body) {
            (ExKind::Post { ids }, Body::Json(buf)) => self.json_body(now, &ids, buf.freeze()),
            (ExKind::Post { ids }, Body::Error(status, buf)) => {
                let envelope = body_text(buf.clone().freeze())
                    .ok()
                    .and_then(|text| self.classifier.envelope(text).ok());
                if self.probe.as_ref().is_some_and(|p| ids.contains(p)) {
                    return self.probe_answered(now, status.as_u16(), envelope.as_ref());
                }
                let error = RequestError::Http {
                    status: status.as_u16(),
                    message: error_message(&buf),
                };
                if self.init_id.as_ref().is_some_and(|i| ids.contains(i)) {
                    // Its body says whether a modern server refused it (MODERN-15).
                    return self.initialize_refused(status.as_u16(), envelope.as_ref(), error);
                }
                if self.era == Era::Sessionless
                    && let Some(envelope) = envelope.filter(|e| {
                        e.kind() == Kind::Error && e.id().is_some_and(|id| ids.contains(id))
                    })
                {
                    // A sessionless server answers its errors with a status (MODERN-5,
                    // MODERN-9): the request's answer is the JSON-RPC error all the same.
                    return self.message(now, envelope);
                }
                self.fail_ids(now, &ids, error);
            }
            (ExKind::Get { stream }, Body::Error(StatusCode::CONFLICT, _)) => {
                // HTTP-GET-9: the server still holds a connection of the stream, one this
                // client lost (the server has not noticed yet): try again, within budget.
                self.stream_ended(now, stream, x.0);
            }
            (ExKind::Get { stream }, Body::Error(status, buf)) => {
                let legacy = self
                    .streams
                    .get(&stream)
                    .is_some_and(|s| s.kind == StreamKind::Legacy);
                let (status, message) = (status.as_u16(), error_message(&buf));
                if legacy {
                    // The legacy stream is the session: without it nothing can connect.
                    self.remove_stream(stream);
                    return self.connect_failed(RequestError::Http { status, message });
                }
                self.stream_failed(now, stream, RequestError::ResumeFailed { status, message });
            }
            (_, Body::Sse(mut decoder, t)) => {
                decoder.finish();
                self.exchanges.insert(
                    x.0,
                    Exchange {
                        kind: ExKind::Delete,
                        body: Body::Sse(decoder, t),
                    },
                );
                self.drain_stream(now, x.0, t);
                self.exchanges.remove(&x.0);
                self.stream_ended(now, t, x.0);
            }
            (ExKind::Delete, _) => self.events.push_back(Event::Closed),
            (ExKind::Post { ids }, Body::Head) => {
                self.fail_ids(
                    now,
                    &ids,
                    RequestError::BadResponse("no response head".into()),
                );
            }
            (_, Body::Ignore | Body::Head | Body::Json(_)) => {}
        }
    }

    /// Exchange `x` failed: the connection broke or was reset before its response ended.
    /// [`handle_failure_with`](Self::handle_failure_with) says why, for the application.
    pub fn handle_failure(&mut self, now: Instant, x: ExchangeId) {
        self.handle_failure_with(now, x, "the connection closed before a response");
    }

    /// [`handle_failure`](Self::handle_failure), with the driver's `cause` (its IO
    /// error, as text): a handshake whose request got no response head fails with
    /// [`RequestError::Connection`] carrying it, so that "connection refused" reads as
    /// such. What a failure means otherwise (a resume, a lost stream) does not depend
    /// on the cause.
    pub fn handle_failure_with(&mut self, now: Instant, x: ExchangeId, cause: &str) {
        self.failure(now, x, cause);
        self.acknowledged(x.0);
    }

    fn failure(&mut self, now: Instant, x: ExchangeId, cause: &str) {
        let Some(e) = self.exchanges.remove(&x.0) else {
            return;
        };
        match (e.kind, e.body) {
            (_, Body::Sse(_, t)) => self.stream_ended(now, t, x.0),
            (ExKind::Post { ids }, body @ (Body::Head | Body::Json(_) | Body::Error(..))) => {
                if self.probe.as_ref().is_some_and(|p| ids.contains(p)) {
                    return match body {
                        Body::Head => {
                            self.connect_failed(RequestError::Connection(cause.to_owned()))
                        }
                        _ => self.probe_answered(now, 200, None),
                    };
                }
                if self.init_id.as_ref().is_some_and(|i| ids.contains(i)) {
                    return self.connect_failed(match body {
                        Body::Head => RequestError::Connection(cause.to_owned()),
                        _ => RequestError::StreamLost,
                    });
                }
                let error = match (self.era, body) {
                    (Era::Sessionless, Body::Head) => RequestError::Broken {
                        reached: output::Reached::Unknown,
                    },
                    (Era::Sessionless, _) => RequestError::Broken {
                        reached: output::Reached::Server,
                    },
                    _ => RequestError::StreamLost,
                };
                self.fail_ids(now, &ids, error);
            }
            (ExKind::Get { stream }, _) => self.stream_ended(now, stream, x.0),
            (ExKind::Delete, _) => self.events.push_back(Event::Closed),
            (ExKind::Post { .. }, Body::Ignore) => {}
        }
    }
}

mod exchange;

/// The media type of `Content-Type`, lowercased, without parameters.
fn media_type(headers: &http::HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// The JSON-RPC error message of an error body, or its text.
fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error")?.get("message")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned())
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The messages of a body or event, one or a batch's (malformed elements dropped).
fn split(envelopes: Envelopes) -> Vec<Envelope> {
    match envelopes {
        Envelopes::Single(m) => vec![m],
        Envelopes::Batch(items) => items.into_iter().filter_map(Result::ok).collect(),
    }
}
