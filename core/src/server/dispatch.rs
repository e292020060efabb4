//! Dispatch: the messages of a body handed to the application or the correlation table,
//! and what the POST is answered with (HTTP-POST-5…12, BATCH-3, LEGACY-3, LEGACY-4).

use std::time::Instant;

use bytes::Bytes;
use http::StatusCode;

use super::Server;
use super::admit::SERVED;
use super::admit::negotiate;
use super::config::Eras;
use super::config::ResponseMode;
use super::head::{SessionHeader, VersionHeader};
use super::ids::{ExchangeId, RequestHandle, SessionId};
use super::modern;
use super::output::{Event, IncomingRequest, error_body};
use super::refuse::{Refuse, empty_head, parse_refusal, session_not_found};
use super::state::{Carries, OpenRequest, Phase, Scope};
use crate::Era;
use crate::ProtocolVersion;
use crate::jsonrpc::{Envelope, Envelopes, ErrorCode, Kind, RequestId, body_text};

/// `{"requestId": …, "reason": …}` of `notifications/cancelled`.
pub(super) fn cancelled_params(params: &str) -> Option<(RequestId, Option<String>)> {
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

impl Server {
    /// A POST body on the MCP endpoint: parsed, its era decided (MODERN-25), then
    /// admitted and dispatched as that era does.
    pub(super) fn post(&mut self, now: Instant, x: ExchangeId, body: Bytes) {
        let headers = &self.exchanges[&x].headers;
        // The version the body is parsed under: the session's, else the header's.
        let session_hint = match headers.session {
            SessionHeader::Known(s) => self.sessions.get(&s).map(|s| s.version),
            _ => None,
        };
        let parse_version = match (&headers.version, session_hint) {
            (_, Some(v)) => v,
            (VersionHeader::Known(v), None) => *v,
            _ => ProtocolVersion::V2025_03_26,
        };
        let parsed =
            body_text(body).and_then(|text| self.classifier.envelopes(text, parse_version));
        let envelopes = match parsed {
            Ok(envelopes) => envelopes,
            Err(e) => return self.refuse(x, parse_refusal(&e)),
        };
        let era = self.exchanges[&x]
            .headers
            .era(self.config.eras, Some(&envelopes));
        if era == Era::Sessionless {
            return self.sessionless(now, x, envelopes);
        }
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
        self.dispatch(now, x, session, version, era, envelopes);
    }

    /// A POST of the sessionless revision: checked ([`modern::check`], each failure its
    /// own error; a `tools/call` against the tools' mirrors too, MODERN-7), then dispatched with no session: its answer is JSON or a stream of its
    /// own without event ids (MODERN-10, MODERN-12). A refused `initialize` is told the
    /// revisions served (MODERN-26). Where the endpoint does not serve
    /// the revision, a request that passes its checks is answered 400 with -32022 naming
    /// the revisions served (MODERN-5), which a dual-era client takes as the signal to
    /// fall back to `initialize` (MODERN-15).
    fn sessionless(&mut self, now: Instant, x: ExchangeId, envelopes: Envelopes) {
        let served: &[ProtocolVersion] = if self.config.eras.contains(Eras::MODERN) {
            &[ProtocolVersion::V2026_07_28]
        } else {
            &[]
        };
        let message = match envelopes {
            Envelopes::Single(message) => message,
            Envelopes::Batch(_) => {
                let refuse = Refuse::modern(&modern::Invalid::NotOneMessage, &self.supported());
                return self.refuse(x, refuse);
            }
        };
        let headers = &self.exchanges[&x].headers;
        match modern::check(headers, &message, served, self.config.tool_mirrors()) {
            Ok(checked) => self.dispatch(
                now,
                x,
                None,
                checked.version,
                Era::Sessionless,
                Envelopes::Single(message),
            ),
            Err(invalid) => {
                let supported = self.supported();
                let mut refuse = Refuse::modern(&invalid, &supported).id(message.id().cloned());
                // MODERN-26: any error to an `initialize` names the revisions served, so a
                // client that tried the handshake here learns what to speak instead.
                if message.kind() == Kind::Request && message.method() == Some("initialize") {
                    refuse = refuse.naming(&supported);
                }
                self.refuse(x, refuse);
            }
        }
    }

    /// Every revision the endpoint serves, for -32022 (MODERN-5) and `server/discover`
    /// (MODERN-19): the sessionless one first, then the session era's, newest first.
    pub(super) fn supported(&self) -> Vec<ProtocolVersion> {
        let mut all = Vec::with_capacity(SERVED.len() + 1);
        if self.config.eras.contains(Eras::MODERN) {
            all.push(ProtocolVersion::V2026_07_28);
        }
        if self.config.eras.contains(Eras::SESSIONS) {
            all.extend(SERVED.iter().rev());
        }
        all
    }

    /// Every revision this endpoint serves, as `server/discover` lists them (MODERN-19) and
    /// -32022 names them (MODERN-5).
    pub fn supported_versions(&self) -> Vec<ProtocolVersion> {
        self.supported()
    }

    /// Whether `request` is one of this server's: with [`Config::shards`](super::Config::shards), each shard
    /// numbers its requests apart, so a message for a request reaches it only through
    /// its own shard.
    pub fn owns(&self, request: RequestHandle) -> bool {
        let (index, count) = self.config.shard;
        request.0 >= 1 && (request.0 - 1) % count.max(1) as u64 == index as u64
    }

    /// A POST to the legacy messages path: 202 once parsed; everything the server
    /// answers goes on the session's stream (LEGACY-3, LEGACY-4). On a cluster node that
    /// holds a copy of another node's legacy session, the message goes to the node that
    /// holds its stream ([`Notice::LegacyPost`](super::cluster)).
    pub(super) fn legacy_post(&mut self, now: Instant, x: ExchangeId, s: SessionId, body: Bytes) {
        // The body as it came, kept only for a session whose stream is elsewhere.
        let raw = self
            .sessions
            .get(&s)
            .is_some_and(|s| s.get.is_none() && s.shared.is_some())
            .then(|| body.clone());
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
        let Envelopes::Single(message) = envelopes else {
            return self.refuse(
                x,
                Refuse::new(StatusCode::BAD_REQUEST, "batches are not allowed"),
            );
        };
        match raw {
            Some(raw) => self.relay_legacy(s, raw),
            None => self.legacy_message(now, Some(x), s, message),
        }
        self.finish_with(x, empty_head(StatusCode::ACCEPTED), None);
    }

    /// One message of a legacy session's client, handled by the node that holds its
    /// stream: POSTed here (`x`), or to another node, which relayed it.
    pub(super) fn legacy_message(
        &mut self,
        now: Instant,
        x: Option<ExchangeId>,
        s: SessionId,
        message: Envelope,
    ) {
        let Some(session) = self.sessions.get_mut(&s) else {
            return;
        };
        session.last_active = now;
        let version = session.version;
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
    }

    /// Hands every message of a body to the application (or the correlation table) and
    /// decides the response: 202, or the responses owed.
    pub(super) fn dispatch(
        &mut self,
        now: Instant,
        x: ExchangeId,
        session: Option<SessionId>,
        version: ProtocolVersion,
        era: Era,
        envelopes: Envelopes,
    ) {
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
                        None,
                    ));
                    continue;
                }
            };
            match message.kind() {
                Kind::Request => {
                    if let Err(body) =
                        self.open_request(Some(x), session, scope, version, era, message)
                    {
                        immediate.push(body);
                    }
                }
                Kind::Notification => self.notification(now, session, scope, message),
                Kind::Response | Kind::Error => self.client_response(session, message),
            }
        }
        let e = self.exchanges.get_mut(&x).expect("exchange exists");
        e.phase = Phase::Awaiting;
        // The requests still open: a batch may have cancelled one of its own.
        let owed = e.requests.len();
        if owed == 0 && immediate.is_empty() {
            // HTTP-POST-5: only notifications and responses.
            let head = empty_head(StatusCode::ACCEPTED);
            return self.finish_with(x, head, None);
        }
        e.carries = Carries::Json {
            owed,
            parts: immediate,
            batch,
            status: StatusCode::OK,
        };
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
    /// response to write for it at once. `x` is the POST that carried it (none for a
    /// legacy message another node relayed: its answer goes on the stream all the same).
    pub(super) fn open_request(
        &mut self,
        x: Option<ExchangeId>,
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
                None,
            ));
        }
        if let Some(s) = session {
            let session = self.sessions.get_mut(&s).expect("admitted session exists");
            if session.open_requests >= self.config.max_requests_per_session {
                return Err(error_body(
                    Some(&id),
                    ErrorCode::INVALID_REQUEST,
                    "too many open requests",
                    None,
                ));
            }
            if initialize && session.legacy && session.initialized {
                return Err(error_body(
                    Some(&id),
                    ErrorCode::INVALID_REQUEST,
                    "session already initialized",
                    None,
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
                exchange: x.filter(|_| legacy_stream.is_none()),
                stream: legacy_stream,
                era,
                initialize,
            },
        );
        if legacy_stream.is_none()
            && let Some(e) = x.and_then(|x| self.exchanges.get_mut(&x))
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

    pub(super) fn notification(
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
        if let (Scope::Session(s), Some("notifications/cancelled")) = (scope, message.method()) {
            // The request may run on another node of the cluster.
            self.spread_cancel(s, &message);
        }
        self.events
            .push_back(Event::Notification { session, message });
    }

    /// A client's response to a server→client request: correlated by id within the
    /// session (a response from another session cannot complete it); unknown ids are
    /// dropped (docs/requirements.md §14.7).
    pub(super) fn client_response(&mut self, session: Option<SessionId>, message: Envelope) {
        let Some(s) = session else {
            return;
        };
        let Some(id) = message.id() else {
            return;
        };
        if self.server_requests.token(id) != Some(&s) {
            if !self.server_requests.issued(id) {
                // Another node of the cluster may have asked.
                self.spread_response(s, &message);
            }
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
}
