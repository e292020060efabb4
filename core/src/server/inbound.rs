//! The inputs: request heads, bodies and disconnects, and every decision about them.

use std::borrow::Cow;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode};

use super::Server;
use super::check::{self, LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID};
use super::config::{ResponseMode, SessionMode};
use super::ids::{ExchangeId, PeerAddr, RequestHandle, SessionId};
use super::output::{CloseReason, Era, Event, IncomingRequest, Transmit, error_body};
use super::state::{Exchange, Handshake, OpenRequest, Phase, Route, Scope, Session, StreamKind};
use crate::ProtocolVersion;
use crate::jsonrpc::{Envelope, Envelopes, ErrorCode, Kind, ParseError, RequestId, body_text};
use crate::resume::{EventId, EventStore, Replay};

/// The versions served on the Streamable HTTP endpoint (with `initialize`).
const SERVED: [ProtocolVersion; 4] = [
    ProtocolVersion::V2024_11_05,
    ProtocolVersion::V2025_03_26,
    ProtocolVersion::V2025_06_18,
    ProtocolVersion::V2025_11_25,
];

/// A refusal: status, and the JSON-RPC error its body carries.
pub(super) struct Refuse {
    status: StatusCode,
    code: ErrorCode,
    message: Cow<'static, str>,
    id: Option<RequestId>,
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
            challenge: None,
            allow: None,
        }
    }

    fn allow(mut self, methods: &'static str) -> Self {
        self.allow = Some(methods);
        self
    }

    fn code(mut self, code: ErrorCode) -> Self {
        self.code = code;
        self
    }
}

/// -32000, the code the TypeScript SDK gives transport-level refusals ("Bad Request: …").
const BAD_REQUEST: ErrorCode = ErrorCode(-32000);
/// -32001, the code the TypeScript SDK gives an unknown session's 404.
const SESSION_NOT_FOUND: ErrorCode = ErrorCode(-32001);

/// 400 for a `MCP-Protocol-Version` the endpoint does not serve, naming those it does.
fn unsupported_version(requested: &str) -> Refuse {
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
fn no_session_id() -> Refuse {
    Refuse::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "cannot mint a session id: the entropy source repeats",
    )
    .code(ErrorCode::INTERNAL_ERROR)
}

/// 404 for a session id the server does not know (SESSION-7).
fn session_not_found() -> Refuse {
    Refuse::new(StatusCode::NOT_FOUND, "session not found").code(SESSION_NOT_FOUND)
}

impl Server {
    /// A request head arrived: returns the exchange it opens. The head may be answered
    /// at once (a refusal, 202 or a GET stream); the body, if any, follows with
    /// [`handle_body`](Self::handle_body) and [`handle_body_end`](Self::handle_body_end).
    pub fn handle_head(&mut self, now: Instant, head: http::request::Parts) -> ExchangeId {
        self.clock(now);
        let x = ExchangeId(self.key());
        if self.shutting_down {
            self.exchanges
                .insert(x, Exchange::new(Route::Refused, Era::Sessions, now));
            self.refuse_unavailable(x);
            return x;
        }
        let (route, era) = match self.route(&head) {
            Ok(r) => r,
            Err(refuse) => {
                self.exchanges
                    .insert(x, Exchange::new(Route::Refused, Era::Sessions, now));
                self.refuse(x, refuse);
                return x;
            }
        };
        let mut exchange = Exchange::new(route, era, now);
        exchange.peer = head.extensions.get::<PeerAddr>().map(|p| p.0);
        exchange.session_header = match check::single(&head.headers, SESSION_ID) {
            Ok(Some(v)) => Some(self.session_ids.get(v).copied().ok_or(())),
            Ok(None) => None,
            Err(()) => Some(Err(())),
        };
        exchange.version_header = match check::single(&head.headers, PROTOCOL_VERSION) {
            Ok(Some(v)) => Some(v.parse().map_err(|_| v.to_owned())),
            Ok(None) => None,
            Err(()) => Some(Err(String::new())),
        };
        exchange.last_event_id = head
            .headers
            .get(LAST_EVENT_ID)
            .map(|v| Bytes::copy_from_slice(v.as_bytes()));
        if let Some(len) = head
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            && len > self.config.max_body as u64
        {
            exchange.route = Route::Refused;
            self.exchanges.insert(x, exchange);
            self.refuse(
                x,
                Refuse::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
            );
            return x;
        }
        self.exchanges.insert(x, exchange);
        match route {
            Route::Get => self.open_get(now, x),
            Route::Delete => self.delete(now, x),
            Route::LegacyPost(_) | Route::Post | Route::Refused => {}
        }
        x
    }

    /// Path, security and method checks, in the documented precedence.
    fn route(&mut self, head: &http::request::Parts) -> Result<(Route, Era), Refuse> {
        let path = head.uri.path();
        let legacy = self.config.legacy.as_ref();
        let endpoint = path == self.config.endpoint;
        let legacy_sse = legacy.is_some_and(|l| path == l.sse);
        let legacy_post = legacy.is_some_and(|l| path == l.messages);
        if !endpoint && !legacy_sse && !legacy_post {
            return Err(Refuse::new(StatusCode::NOT_FOUND, self.not_found_message()));
        }
        if !check::host_allowed(&head.headers, &head.uri, &self.config.hosts) {
            return Err(Refuse::new(StatusCode::FORBIDDEN, "host not allowed"));
        }
        if !check::origin_allowed(&head.headers, &self.config.origins) {
            return Err(Refuse::new(StatusCode::FORBIDDEN, "origin not allowed"));
        }
        if let Some(authorize) = self.authorizer.as_mut()
            && let Err(refusal) = authorize(head)
        {
            let message = if refusal.status == StatusCode::UNAUTHORIZED {
                "unauthorized"
            } else {
                "forbidden"
            };
            let mut refuse = Refuse::new(refusal.status, message);
            refuse.challenge = refusal.challenge;
            return Err(refuse);
        }
        let headers = &head.headers;
        let sse = check::accepts(headers, "text", "event-stream");
        if legacy_sse {
            if head.method != Method::GET {
                return Err(
                    Refuse::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").allow("GET"),
                );
            }
            if headers.contains_key(header::ACCEPT) && !sse {
                return Err(Refuse::new(
                    StatusCode::NOT_ACCEPTABLE,
                    "must accept text/event-stream",
                ));
            }
            return Ok((Route::Get, Era::HttpSse));
        }
        if legacy_post {
            if head.method != Method::POST {
                return Err(
                    Refuse::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").allow("POST"),
                );
            }
            if !check::is_json_body(headers) {
                return Err(Refuse::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "content-type must be application/json",
                ));
            }
            let session = head
                .uri
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("sessionId=")))
                .and_then(|id| self.session_ids.get(id).copied())
                .filter(|s| self.sessions.get(s).is_some_and(|s| s.legacy));
            return match session {
                Some(s) => Ok((Route::LegacyPost(s), Era::HttpSse)),
                None => Err(session_not_found()),
            };
        }
        let stateless = self.config.sessions == SessionMode::Stateless;
        let sessionless = head
            .headers
            .get(PROTOCOL_VERSION)
            .is_some_and(|v| v.as_bytes() == ProtocolVersion::V2026_07_28.as_str().as_bytes());
        let era = if sessionless {
            Era::Sessionless
        } else {
            Era::Sessions
        };
        let allow = match (
            stateless || sessionless,
            self.config.get_stream,
            self.config.delete,
        ) {
            (false, true, true) => "GET, POST, DELETE",
            (false, true, false) => "GET, POST",
            (false, false, true) => "POST, DELETE",
            _ => "POST",
        };
        match head.method {
            Method::POST => {
                if !(sse && check::accepts(headers, "application", "json")) {
                    return Err(Refuse::new(
                        StatusCode::NOT_ACCEPTABLE,
                        "must accept application/json and text/event-stream",
                    ));
                }
                if !check::is_json_body(headers) {
                    return Err(Refuse::new(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        "content-type must be application/json",
                    ));
                }
                Ok((Route::Post, era))
            }
            Method::GET if stateless || !self.config.get_stream || sessionless => Err(Refuse::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "no standalone stream",
            )
            .allow(allow)),
            Method::GET => {
                if !sse {
                    return Err(Refuse::new(
                        StatusCode::NOT_ACCEPTABLE,
                        "must accept text/event-stream",
                    ));
                }
                Ok((Route::Get, era))
            }
            Method::DELETE if stateless || !self.config.delete || sessionless => Err(Refuse::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "sessions cannot be deleted",
            )
            .allow(allow)),
            Method::DELETE => Ok((Route::Delete, era)),
            _ => {
                Err(Refuse::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").allow(allow))
            }
        }
    }

    /// What a request for another path is told: the paths this server serves, so that a
    /// newcomer who guessed the path learns the right one.
    fn not_found_message(&self) -> String {
        let endpoint = &self.config.endpoint;
        match &self.config.legacy {
            Some(l) => format!(
                "not an MCP endpoint: this server's is {endpoint} (legacy HTTP+SSE: GET {})",
                l.sse
            ),
            None => format!("not an MCP endpoint: this server's is {endpoint}"),
        }
    }

    /// A chunk of `exchange`'s body. Counted against the body limit as it arrives (413
    /// at once when passed); ignored once the exchange was answered.
    pub fn handle_body(&mut self, now: Instant, exchange: ExchangeId, chunk: Bytes) {
        self.clock(now);
        let max = self.config.max_body;
        let Some(e) = self.exchanges.get_mut(&exchange) else {
            return;
        };
        if e.phase != Phase::Body || e.route == Route::Refused || chunk.is_empty() {
            return;
        }
        e.body_len = e.body_len.saturating_add(chunk.len());
        if e.body_len > max {
            e.route = Route::Refused;
            e.body = BytesMut::new();
            e.first_chunk = None;
            self.refuse(
                exchange,
                Refuse::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
            );
            return;
        }
        match e.first_chunk.take() {
            None if e.body.is_empty() => e.first_chunk = Some(chunk),
            None => e.body.extend_from_slice(&chunk),
            Some(first) => {
                e.body.reserve(first.len() + chunk.len());
                e.body.extend_from_slice(&first);
                e.body.extend_from_slice(&chunk);
            }
        }
    }

    /// `exchange`'s body is complete: the message is parsed and dispatched.
    pub fn handle_body_end(&mut self, now: Instant, exchange: ExchangeId) {
        self.clock(now);
        let x = exchange;
        let Some(e) = self.exchanges.get_mut(&x) else {
            return;
        };
        if e.phase != Phase::Body {
            return;
        }
        e.phase = Phase::Dispatching;
        let body = match e.first_chunk.take() {
            Some(first) => first,
            None => std::mem::take(&mut e.body).freeze(),
        };
        match e.route {
            Route::Post => self.post(now, x, body),
            Route::LegacyPost(s) => self.legacy_post(now, x, s, body),
            Route::Get | Route::Delete | Route::Refused => {}
        }
    }

    /// The client went away (the connection closed or the request was reset). Not a
    /// cancellation (HTTP-POST-12): open requests stay open, and a resumable stream keeps
    /// its frames for a resume. A legacy session ends with its stream.
    pub fn handle_disconnect(&mut self, now: Instant, exchange: ExchangeId) {
        self.clock(now);
        self.forget_exchange(exchange);
    }

    /// Answers `x` with a head and an error body, and ends it.
    fn refuse(&mut self, x: ExchangeId, refuse: Refuse) {
        let body = error_body(refuse.id.as_ref(), refuse.code, &refuse.message);
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
            e.phase = Phase::Responding;
        }
        self.push(x, Transmit::Head(head));
        if let Some(body) = body.filter(|b| !b.is_empty()) {
            self.push(x, Transmit::Data(body));
        }
        self.push(x, Transmit::End);
    }

    /// Validates the exchange's session and version headers (SESSION-5…7, VERSION-1…4)
    /// for a request that is not `initialize`; admits it to the session.
    fn admit(
        &mut self,
        x: ExchangeId,
        now: Instant,
    ) -> Result<(Option<SessionId>, ProtocolVersion), Refuse> {
        let e = &self.exchanges[&x];
        let stateless = self.config.sessions == SessionMode::Stateless;
        let session = if stateless {
            None
        } else {
            match e.session_header {
                None => {
                    return Err(Refuse::new(
                        StatusCode::BAD_REQUEST,
                        "missing Mcp-Session-Id",
                    ));
                }
                Some(Err(())) => {
                    return Err(session_not_found());
                }
                Some(Ok(s)) if self.sessions.get(&s).is_none_or(|s| s.legacy) => {
                    return Err(session_not_found());
                }
                Some(Ok(s)) => Some(s),
            }
        };
        let negotiated = session.map(|s| self.sessions[&s].version);
        // §14.9: the session's negotiated version governs; a header must name a served
        // version (VERSION-4), as the TypeScript SDK checks.
        let version = match (&e.version_header, negotiated) {
            (Some(Ok(v)), n) if SERVED.contains(v) => n.unwrap_or(*v),
            (None, n) => n.unwrap_or(ProtocolVersion::V2025_03_26),
            (Some(Ok(v)), _) => return Err(unsupported_version(v.as_str())),
            (Some(Err(v)), _) => return Err(unsupported_version(v)),
        };
        if let Some(s) = session {
            let e = self
                .exchanges
                .get_mut(&x)
                .expect("admitted exchange exists");
            e.session = Some(s);
            let session = self.sessions.get_mut(&s).expect("validated session exists");
            session.exchanges += 1;
            session.last_active = now;
            session.handshake = Handshake::Complete;
        }
        Ok((session, version))
    }

    /// A POST body on the MCP endpoint.
    fn post(&mut self, now: Instant, x: ExchangeId, body: Bytes) {
        let era = self.exchanges[&x].era;
        if era == Era::Sessionless {
            return self.unsupported_revision(x);
        }
        // The version the body is parsed under: the header's, else the session's.
        let session_hint = match self.exchanges[&x].session_header {
            Some(Ok(s)) => self.sessions.get(&s).map(|s| s.version),
            _ => None,
        };
        let parse_version = match (&self.exchanges[&x].version_header, session_hint) {
            (_, Some(v)) => v,
            (Some(Ok(v)), None) => *v,
            _ => ProtocolVersion::V2025_03_26,
        };
        let parsed =
            body_text(body).and_then(|text| self.classifier.envelopes(text, parse_version));
        let envelopes = match parsed {
            Ok(envelopes) => envelopes,
            Err(e) => return self.refuse(x, parse_refusal(&e)),
        };
        let initialize = match &envelopes {
            Envelopes::Single(m) => m.kind() == Kind::Request && m.method() == Some("initialize"),
            Envelopes::Batch(_) => false,
        };
        let admitted = if initialize {
            self.initialize_session(now, x, &envelopes)
        } else {
            self.admit(x, now)
        };
        let (session, version) = match admitted {
            Ok(v) => v,
            Err(refuse) => return self.refuse(x, refuse),
        };
        self.dispatch(now, x, session, version, envelopes);
    }

    /// `initialize`: mints a session (stateful) and negotiates the version (JSONRPC-11).
    fn initialize_session(
        &mut self,
        now: Instant,
        x: ExchangeId,
        envelopes: &Envelopes,
    ) -> Result<(Option<SessionId>, ProtocolVersion), Refuse> {
        let Envelopes::Single(init) = envelopes else {
            unreachable!("initialize is only recognised as a single message");
        };
        let e = &self.exchanges[&x];
        match &e.version_header {
            Some(Err(v)) => return Err(unsupported_version(v)),
            Some(Ok(v)) if !SERVED.contains(v) => return Err(unsupported_version(v.as_str())),
            _ => {}
        }
        match e.session_header {
            Some(Ok(s)) if self.sessions.contains_key(&s) => {
                let mut r = Refuse::new(StatusCode::BAD_REQUEST, "session already initialized")
                    .code(ErrorCode::INVALID_REQUEST);
                r.id = init.id().cloned();
                return Err(r);
            }
            Some(_) => return Err(session_not_found()),
            None => {}
        }
        let version = negotiate(init);
        if self.config.sessions == SessionMode::Stateless {
            return Ok((None, version));
        }
        let s = self.mint_session(now, x, version, false)?;
        Ok((Some(s), version))
    }

    /// A new session for exchange `x`, admitted to it: a place is made (evicting an idle
    /// session at the bounds, [`make_session_place`](Self::make_session_place)), then an id
    /// minted. Refused 503 when every session is active, overall or of this peer.
    fn mint_session(
        &mut self,
        now: Instant,
        x: ExchangeId,
        version: ProtocolVersion,
        legacy: bool,
    ) -> Result<SessionId, Refuse> {
        let peer = self.exchanges[&x].peer;
        if !self.make_peer_place(peer) {
            return Err(Refuse::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many sessions from this address",
            )
            .code(ErrorCode::INTERNAL_ERROR));
        }
        if !self.make_session_place() {
            return Err(
                Refuse::new(StatusCode::SERVICE_UNAVAILABLE, "too many sessions")
                    .code(ErrorCode::INTERNAL_ERROR),
            );
        }
        let Some(s) = self.new_session(now, version, legacy, peer) else {
            self.give_back_session_place();
            return Err(no_session_id());
        };
        let e = self.exchanges.get_mut(&x).expect("exchange exists");
        e.session = Some(s);
        self.sessions.get_mut(&s).expect("new session").exchanges += 1;
        Ok(s)
    }

    /// Creates a session with a fresh id from the entropy source.
    pub(super) fn new_session(
        &mut self,
        now: Instant,
        version: ProtocolVersion,
        legacy: bool,
        peer: Option<std::net::IpAddr>,
    ) -> Option<SessionId> {
        // A repeat means a broken entropy source: never hand out one id twice, and never
        // spin on a source that repeats forever.
        let (wire, header) = (0..4).find_map(|_| {
            let mut raw = [0u8; 16];
            self.entropy.fill(&mut raw);
            let (index, count) = self.config.shard;
            if count > 1 {
                // The shard's stamp, which `shard_of` reads back (`Config::shards`: <= 256).
                raw[0] = index as u8;
            }
            let mut hex = String::with_capacity(32);
            for b in raw {
                hex.push(char::from(HEX[usize::from(b >> 4)]));
                hex.push(char::from(HEX[usize::from(b & 15)]));
            }
            if self.session_ids.contains_key(hex.as_str()) {
                return None;
            }
            let header = HeaderValue::from_str(&hex).ok()?;
            Some((hex.into_boxed_str(), header))
        })?;
        let s = SessionId(self.key());
        self.session_ids.insert(wire.clone(), s);
        if let Some(ip) = peer {
            *self.peers.entry(ip).or_default() += 1;
        }
        self.sessions.insert(
            s,
            Session {
                wire,
                header,
                version,
                legacy,
                initialized: !legacy,
                peer,
                handshake: if legacy {
                    Handshake::Complete
                } else {
                    Handshake::Pending
                },
                last_active: now,
                idle_timer: None,
                exchanges: 0,
                open_requests: 0,
                get: None,
                streams: Default::default(),
                server_requests: Default::default(),
            },
        );
        Some(s)
    }

    /// Hands every message of a body to the application (or the correlation table) and
    /// decides the response: 202, or the responses owed.
    fn dispatch(
        &mut self,
        now: Instant,
        x: ExchangeId,
        session: Option<SessionId>,
        version: ProtocolVersion,
        envelopes: Envelopes,
    ) {
        let era = self.exchanges[&x].era;
        // One message or a batch's, without collecting the one into a Vec.
        let (mut single, mut many);
        let (items, batch): (&mut dyn Iterator<Item = Result<Envelope, _>>, bool) = match envelopes
        {
            Envelopes::Single(m) => {
                single = std::iter::once(Ok(m));
                (&mut single, false)
            }
            Envelopes::Batch(items) => {
                many = items.into_iter();
                (&mut many, true)
            }
        };
        let scope = session.map_or(Scope::Exchange(x), Scope::Session);
        let mut immediate = Vec::new();
        for item in items {
            let message = match item {
                Ok(m) => m,
                Err(shape) => {
                    let message = shape.to_string();
                    immediate.push(error_body(
                        shape.id.as_ref(),
                        ErrorCode::INVALID_REQUEST,
                        &message,
                    ));
                    continue;
                }
            };
            match message.kind() {
                Kind::Request => {
                    if let Err(body) = self.open_request(x, session, scope, version, era, message) {
                        immediate.push(body);
                    }
                }
                Kind::Notification => self.notification(now, session, scope, message),
                Kind::Response | Kind::Error => self.client_response(session, message),
            }
        }
        let e = self.exchanges.get_mut(&x).expect("exchange exists");
        e.batch = batch;
        e.phase = Phase::Awaiting;
        // The requests still open: a batch may have cancelled one of its own.
        let owed = e.requests.len();
        if owed == 0 && immediate.is_empty() {
            // HTTP-POST-5: only notifications and responses.
            let head = empty_head(StatusCode::ACCEPTED);
            return self.finish_with(x, head, None);
        }
        e.json_owed = owed;
        e.json = immediate;
        if owed == 0 {
            return self.finish_json(x);
        }
        match (self.config.response, self.config.stream_after) {
            (ResponseMode::Sse, _) => {
                self.open_post_stream(now, x);
            }
            (ResponseMode::Auto, Some(after)) => {
                let at = now + after;
                self.exchanges
                    .get_mut(&x)
                    .expect("exchange exists")
                    .stream_after = Some(at);
                self.timers
                    .insert((at, super::state::Timer::StreamAfter(x)));
            }
            _ => {}
        }
    }

    /// Registers one client request and hands it to the application; `Err` is the error
    /// response to write for it at once.
    fn open_request(
        &mut self,
        x: ExchangeId,
        session: Option<SessionId>,
        scope: Scope,
        version: ProtocolVersion,
        era: Era,
        message: Envelope,
    ) -> Result<(), Bytes> {
        let id = message.id().cloned().expect("a request has an id");
        let initialize = message.method() == Some("initialize");
        if self.by_id.contains_key(&(scope, id.clone())) {
            // JSONRPC-3: an id still in flight in this session.
            return Err(error_body(
                Some(&id),
                ErrorCode::INVALID_REQUEST,
                "request id already in flight",
            ));
        }
        if let Some(s) = session {
            let session = self.sessions.get_mut(&s).expect("admitted session exists");
            if session.open_requests >= self.config.max_requests_per_session {
                return Err(error_body(
                    Some(&id),
                    ErrorCode::INVALID_REQUEST,
                    "too many open requests",
                ));
            }
            if initialize && session.legacy && session.initialized {
                return Err(error_body(
                    Some(&id),
                    ErrorCode::INVALID_REQUEST,
                    "session already initialized",
                ));
            }
            if initialize {
                session.initialized = true;
                if session.legacy {
                    session.version = negotiate(&message);
                }
            }
            session.open_requests += 1;
        }
        let version = match session {
            Some(s) => self.sessions[&s].version,
            None if initialize => negotiate(&message),
            None => version,
        };
        let h = RequestHandle(self.key());
        self.by_id.insert((scope, id.clone()), h);
        // A legacy request's answer travels on the session's stream (LEGACY-4); the POST
        // that carried it is answered 202 at once.
        let legacy_stream = match era {
            Era::HttpSse => session.and_then(|s| self.sessions[&s].get),
            _ => None,
        };
        self.requests.insert(
            h,
            OpenRequest {
                session,
                scope,
                id: id.clone(),
                exchange: legacy_stream.is_none().then_some(x),
                stream: legacy_stream,
                era,
                initialize,
            },
        );
        if legacy_stream.is_none()
            && let Some(e) = self.exchanges.get_mut(&x)
        {
            e.requests.push(h);
        }
        self.events.push_back(Event::Request(IncomingRequest {
            handle: h,
            session,
            version,
            era,
            id,
            message,
        }));
        Ok(())
    }

    fn notification(
        &mut self,
        now: Instant,
        session: Option<SessionId>,
        scope: Scope,
        message: Envelope,
    ) {
        if message.method() == Some("notifications/cancelled")
            && let Some(params) = message.payload()
            && let Some((id, reason)) = cancelled_params(params.as_str())
            && let Some(&h) = self.by_id.get(&(scope, id))
        {
            self.settle(now, h);
            self.events
                .push_back(Event::Cancelled { request: h, reason });
            return;
        }
        self.events
            .push_back(Event::Notification { session, message });
    }

    /// A client's response to a server→client request: correlated by id within the
    /// session (a response from another session cannot complete it); unknown ids are
    /// dropped (docs/requirements.md §14.7).
    fn client_response(&mut self, session: Option<SessionId>, message: Envelope) {
        let Some(s) = session else {
            return;
        };
        let Some(id) = message.id() else {
            return;
        };
        if self.server_requests.token(id) != Some(&s) {
            return;
        }
        let _ = self.server_requests.resolve(id);
        if let Some(session) = self.sessions.get_mut(&s) {
            session.server_requests.remove(id);
        }
        self.events.push_back(Event::Response {
            session: s,
            message,
        });
    }

    /// 400 with -32022 and the supported versions (MODERN-5).
    fn unsupported_revision(&mut self, x: ExchangeId) {
        let mut body = BytesMut::new();
        body.extend_from_slice(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32022,"message":"unsupported protocol version","data":{"supported":["#);
        for (i, v) in SERVED.iter().enumerate() {
            if i > 0 {
                body.extend_from_slice(b",");
            }
            body.extend_from_slice(b"\"");
            body.extend_from_slice(v.as_str().as_bytes());
            body.extend_from_slice(b"\"");
        }
        body.extend_from_slice(br#"],"requested":"2026-07-28"}}}"#);
        let body = body.freeze();
        let head = json_head(StatusCode::BAD_REQUEST, body.len());
        self.finish_with(x, head, Some(body));
    }

    /// DELETE: ends the session (HTTP-DELETE-1, HTTP-DELETE-3).
    fn delete(&mut self, now: Instant, x: ExchangeId) {
        match self.admit(x, now) {
            Ok((Some(s), _)) => {
                self.close_session_key(s, CloseReason::Deleted);
                self.finish_with(x, empty_head(StatusCode::OK), None);
            }
            Ok((None, _)) => {
                self.refuse(x, Refuse::new(StatusCode::METHOD_NOT_ALLOWED, "no session"))
            }
            Err(refuse) => self.refuse(x, refuse),
        }
    }

    /// GET: a legacy stream, a new standalone stream, or a resume (RESUME-4…7).
    fn open_get(&mut self, now: Instant, x: ExchangeId) {
        if self.exchanges[&x].era == Era::HttpSse {
            return self.open_legacy(now, x);
        }
        let (s, _) = match self.admit(x, now) {
            Ok((Some(s), v)) => (s, v),
            Ok((None, _)) => {
                return self.refuse(
                    x,
                    Refuse::new(StatusCode::METHOD_NOT_ALLOWED, "no standalone stream"),
                );
            }
            Err(refuse) => return self.refuse(x, refuse),
        };
        match self.exchanges[&x].last_event_id.clone() {
            Some(raw) => self.resume(now, x, s, &raw),
            None => self.attach_get(now, x, s),
        }
    }

    /// GET with `Last-Event-ID`: replays exactly the frames after it, of that stream of
    /// this session, then continues it live.
    fn resume(&mut self, now: Instant, x: ExchangeId, s: SessionId, raw: &[u8]) {
        let Ok(after) = EventId::parse_bytes(raw) else {
            return self.refuse(
                x,
                Refuse::new(StatusCode::BAD_REQUEST, "malformed Last-Event-ID"),
            );
        };
        let stream = self
            .sessions
            .get(&s)
            .into_iter()
            .flat_map(|session| session.streams.iter())
            .copied()
            .find(|t| {
                self.streams
                    .get(t)
                    .is_some_and(|t| t.ring == Some(after.ring()))
            });
        let Some(t) = stream.filter(|_| after.epoch() == self.store.epoch()) else {
            return self.refuse(
                x,
                Refuse::new(
                    StatusCode::BAD_REQUEST,
                    "Last-Event-ID names no stream of this session",
                ),
            );
        };
        let frames: Vec<Bytes> = match self.store.replay_after(now, &s, after) {
            Replay::Frames(frames) => frames.cloned().collect(),
            Replay::UpToDate => Vec::new(),
            Replay::Gap { .. } => {
                return self.refuse(
                    x,
                    Refuse::new(
                        StatusCode::BAD_REQUEST,
                        "events after Last-Event-ID are no longer retained",
                    ),
                );
            }
            Replay::UnknownRing | Replay::NotIssued | Replay::Pending => {
                return self.refuse(
                    x,
                    Refuse::new(
                        StatusCode::BAD_REQUEST,
                        "Last-Event-ID names no event of this session",
                    ),
                );
            }
        };
        // RESUME-14: the resume wins over a connection the stream still has. That one
        // died silently (a NAT or proxy timeout) or its client gave it up: it is cut, and
        // what it was not yet given is in the replay above.
        if let Some(old) = self.streams[&t].conn {
            self.supersede(old);
        }
        self.stream_head(x);
        let stream = self.streams.get_mut(&t).expect("stream exists");
        // The backlog's frames are in the ring too, so the replay covers them.
        drop(std::mem::take(&mut stream.backlog));
        // With nothing to replay, an unfinished primed stream gets a fresh priming event
        // (§14.4), so that this connection too hands the client an id and a `retry`
        // before a polling close can end it (RESUME-8, RESUME-10).
        let prime = frames.is_empty() && stream.primed && !stream.done;
        let ring = stream.ring;
        for frame in frames {
            self.push(x, Transmit::Data(frame));
        }
        if prime && let Some(ring) = ring {
            self.prime(now, s, ring, x);
        }
        self.attach(now, t, x);
    }

    /// GET without `Last-Event-ID`: connects the session's standalone stream.
    fn attach_get(&mut self, now: Instant, x: ExchangeId, s: SessionId) {
        let existing = self.sessions[&s].get;
        let t = match existing {
            Some(t) if self.streams[&t].conn.is_some() => {
                return self.refuse(
                    x,
                    Refuse::new(StatusCode::CONFLICT, "the session already has a GET stream"),
                );
            }
            Some(t) => t,
            None => self.new_stream(Some(s), StreamKind::Get),
        };
        self.stream_head(x);
        let stream = self.streams.get_mut(&t).expect("stream exists");
        let backlog = std::mem::take(&mut stream.backlog);
        let prime = backlog.is_empty() && stream.primed;
        let ring = stream.ring;
        if !backlog.is_empty() && stream.primed {
            self.push_retry(x);
        }
        for frame in backlog {
            self.push(x, Transmit::Data(frame));
        }
        if prime && let Some(ring) = ring {
            self.prime(now, s, ring, x);
        }
        self.attach(now, t, x);
    }

    /// The legacy HTTP+SSE stream: a session of its own, announced by the `endpoint`
    /// event (LEGACY-1, LEGACY-2).
    fn open_legacy(&mut self, now: Instant, x: ExchangeId) {
        let s = match self.mint_session(now, x, ProtocolVersion::V2024_11_05, true) {
            Ok(s) => s,
            Err(refuse) => return self.refuse(x, refuse),
        };
        let wire = self.sessions[&s].wire.clone();
        let t = self.new_stream(Some(s), StreamKind::Legacy);
        self.sessions.get_mut(&s).expect("new session").get = Some(t);
        self.stream_head(x);
        let messages = self
            .config
            .legacy
            .as_ref()
            .map(|l| l.messages.as_str())
            .unwrap_or("/messages");
        let endpoint = format!("{messages}?sessionId={wire}");
        let mut frame = BytesMut::new();
        crate::sse::Encoder::new().encode_event(
            &crate::sse::EventFields::new()
                .with_event(crate::sse::EventType::new("endpoint").expect("a valid event type")),
            &endpoint,
            &mut frame,
        );
        self.push(x, Transmit::Data(frame.freeze()));
        self.attach(now, t, x);
    }

    /// A POST to the legacy messages path: 202 once parsed; everything the server
    /// answers goes on the session's stream (LEGACY-3, LEGACY-4).
    fn legacy_post(&mut self, now: Instant, x: ExchangeId, s: SessionId, body: Bytes) {
        let parsed = body_text(body).and_then(|text| {
            self.classifier
                .envelopes(text, ProtocolVersion::V2024_11_05)
        });
        let envelopes = match parsed {
            Ok(envelopes) => envelopes,
            Err(e) => return self.refuse(x, parse_refusal(&e)),
        };
        let Some(session) = self.sessions.get_mut(&s) else {
            return self.refuse(x, session_not_found());
        };
        session.last_active = now;
        let version = session.version;
        let Envelopes::Single(message) = envelopes else {
            return self.refuse(
                x,
                Refuse::new(StatusCode::BAD_REQUEST, "batches are not allowed"),
            );
        };
        match message.kind() {
            Kind::Request => {
                if let Err(body) = self.open_request(
                    x,
                    Some(s),
                    Scope::Session(s),
                    version,
                    Era::HttpSse,
                    message,
                ) && let Some(t) = self.sessions[&s].get
                    && let Ok(text) = std::str::from_utf8(&body)
                {
                    self.write_frame(now, t, text);
                }
            }
            Kind::Notification => self.notification(now, Some(s), Scope::Session(s), message),
            Kind::Response | Kind::Error => self.client_response(Some(s), message),
        }
        self.finish_with(x, empty_head(StatusCode::ACCEPTED), None);
    }

    /// Ends a session and everything it holds.
    pub(super) fn close_session_key(&mut self, s: SessionId, reason: CloseReason) {
        let Some(session) = self.sessions.remove(&s) else {
            return;
        };
        self.give_back_session_place();
        self.session_ids.remove(&session.wire);
        if let Some(ip) = session.peer
            && let Some(n) = self.peers.get_mut(&ip)
        {
            *n -= 1;
            if *n == 0 {
                self.peers.remove(&ip);
            }
        }
        if let Some(at) = session.idle_timer {
            self.timers.remove(&(at, super::state::Timer::Idle(s)));
        }
        for t in session.streams {
            if let Some(conn) = self.streams.get(&t).and_then(|t| t.conn) {
                self.push(conn, Transmit::End);
            }
            self.remove_stream(t);
        }
        for id in session.server_requests {
            let _ = self.server_requests.cancel(&id);
        }
        // The session's open requests are the `by_id` entries scoped to it (ids order from
        // the least integer up).
        let open: Vec<RequestHandle> = self
            .by_id
            .range((Scope::Session(s), RequestId::int(i64::MIN))..)
            .take_while(|((scope, _), _)| *scope == Scope::Session(s))
            .map(|(_, h)| *h)
            .collect();
        for h in open {
            let exchange = self.requests.get(&h).and_then(|r| r.exchange);
            self.close_request(h);
            if let Some(x) = exchange
                && self
                    .exchanges
                    .get(&x)
                    .is_some_and(|e| e.phase == Phase::Awaiting)
            {
                self.refuse(x, Refuse::new(StatusCode::NOT_FOUND, "session ended"));
            }
        }
        // Exchanges still naming `s` find it gone: session keys are never reused.
        self.store.drop_session(&s);
        self.events
            .push_back(Event::SessionClosed { session: s, reason });
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The version to answer `initialize` with: the client's offer when served, else the
/// newest served (JSONRPC-11).
fn negotiate(init: &Envelope) -> ProtocolVersion {
    init.payload()
        .and_then(|params| {
            let value: serde_json::Value = serde_json::from_str(params.as_str()).ok()?;
            value.get("protocolVersion")?.as_str()?.parse().ok()
        })
        .filter(|v| SERVED.contains(v))
        .unwrap_or(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// `{"requestId": …, "reason": …}` of `notifications/cancelled`.
fn cancelled_params(params: &str) -> Option<(RequestId, Option<String>)> {
    let value: serde_json::Value = serde_json::from_str(params).ok()?;
    let id = match value.get("requestId")? {
        serde_json::Value::String(s) => RequestId::string(s),
        serde_json::Value::Number(n) => RequestId::int(n.as_i64()?),
        _ => return None,
    };
    let reason = value
        .get("reason")
        .and_then(|r| r.as_str())
        .map(str::to_owned);
    Some((id, reason))
}

fn parse_refusal(e: &ParseError) -> Refuse {
    let mut refuse = Refuse::new(e.status_hint(), e.to_string()).code(e.jsonrpc_code());
    refuse.id = e.id().cloned();
    refuse
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
