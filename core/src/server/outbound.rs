//! The application's sends and everything that writes: JSON bodies, SSE streams and
//! their rings, heartbeats, and the ends of streams, requests and sessions.

use std::time::Instant;

use crate::Era;
use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http::header::{self, HeaderName, HeaderValue};

use super::Server;
use super::check::SESSION_ID;
use super::config::ResponseMode;
use super::ids::{ExchangeId, RequestHandle, SessionId, StreamId};
use super::modern;
use super::output::{CloseReason, Delivery, SendError, Target, Transmit};
use super::refuse::{empty_head, json_head};
use super::state::{Carries, Phase, Stream, StreamKind, Timer};
use crate::ProtocolVersion;
use crate::jsonrpc::{EncodeError, ErrorCode, Outgoing, RequestId, ToJson};
use crate::resume::{EventStore, RingId, StoreError};
use crate::sse::{Encoder, EventFields, EventType};

/// The heartbeat: an empty SSE comment, which every decoder ignores (SSE-PARSE-7).
const HEARTBEAT: &[u8] = b":\n\n";

/// Where a message goes: a stream, or nowhere (the request's connection is gone and its
/// stream was not resumable).
enum Route {
    Stream(StreamId),
    Nowhere,
    /// The session's GET stream, which on a cluster node may be held by another node.
    Elsewhere(SessionId),
}

impl Server {
    /// Answers an open request with `result` (JSONRPC-4): as the JSON body, or an event on
    /// its stream, which ends once it owes nothing more (HTTP-POST-11).
    ///
    /// # Errors
    /// [`SendError::UnknownRequest`] if it is not open (answered, cancelled, or its
    /// session ended); [`SendError::Encode`] if `result` fails to serialize (the request
    /// stays open).
    pub fn respond(
        &mut self,
        now: Instant,
        request: RequestHandle,
        result: &dyn ToJson,
    ) -> Result<Delivery, SendError> {
        let id = self.open_id(request)?;
        self.answer(now, request, &Outgoing::Response { id: &id, result }, None)
    }

    /// Answers an open request with an error response.
    ///
    /// # Errors
    /// As [`respond`](Self::respond).
    pub fn respond_error(
        &mut self,
        now: Instant,
        request: RequestHandle,
        code: ErrorCode,
        message: &str,
        data: Option<&dyn ToJson>,
    ) -> Result<Delivery, SendError> {
        let id = self.open_id(request)?;
        let error = Outgoing::Error {
            id: Some(&id),
            code,
            message,
            data,
        };
        self.answer(now, request, &error, Some(code))
    }

    /// Sends a notification to `target` (HTTP-POST-9, HTTP-GET-4).
    ///
    /// # Errors
    /// [`SendError::UnknownRequest`], [`SendError::UnknownSession`],
    /// [`SendError::NoStream`], [`SendError::BacklogFull`], [`SendError::Encode`].
    pub fn notify(
        &mut self,
        now: Instant,
        target: Target,
        method: &str,
        params: Option<&dyn ToJson>,
    ) -> Result<Delivery, SendError> {
        self.clock(now);
        let route = self.route_target(now, target)?;
        self.emit(now, route, &Outgoing::Notification { method, params })
    }

    /// Sends a server→client request to `target`; its response comes as
    /// [`Event::Response`](super::Event::Response), or
    /// [`Event::RequestTimedOut`](super::Event::RequestTimedOut) once `deadline` passes.
    ///
    /// # Errors
    /// As [`notify`](Self::notify); [`SendError::TooManyRequests`] at the bound;
    /// [`SendError::NoStream`] on a stateless server (a response could not be correlated
    /// without a session).
    pub fn request(
        &mut self,
        now: Instant,
        target: Target,
        method: &str,
        params: Option<&dyn ToJson>,
        deadline: Option<Instant>,
    ) -> Result<RequestId, SendError> {
        self.clock(now);
        let session = match target {
            Target::Request(h) => {
                self.requests
                    .get(&h)
                    .ok_or(SendError::UnknownRequest)?
                    .session
            }
            Target::Session(s) => Some(s),
        };
        let s = session.ok_or(SendError::NoStream)?;
        let route = self.route_target(now, target)?;
        let id = self
            .server_requests
            .register(s, deadline)
            .map_err(|_| SendError::TooManyRequests)?;
        match self.emit(
            now,
            route,
            &Outgoing::Request {
                id: &id,
                method,
                params,
            },
        ) {
            Ok(_) => {
                if let Some(session) = self.sessions.get_mut(&s) {
                    session.server_requests.insert(id.clone());
                }
                Ok(id)
            }
            Err(e) => {
                let _ = self.server_requests.cancel(&id);
                Err(e)
            }
        }
    }

    /// Ends a session as DELETE would: its streams end, its frames go, its id then gets
    /// 404 (SESSION-7). Returns whether it was live.
    pub fn close_session(&mut self, now: Instant, session: SessionId) -> bool {
        self.clock(now);
        let live = self.sessions.contains_key(&session);
        self.close_session_key(session, CloseReason::Closed);
        live
    }

    /// Starts a graceful shutdown: every session ends (its streams end cleanly, its open
    /// requests are answered 503 if still waiting for their head), and every later
    /// request is answered 503 with `Retry-After`. The driver then waits until
    /// [`exchange_count`](Self::exchange_count) is 0 (or its own deadline).
    pub fn shutdown(&mut self, now: Instant) {
        self.clock(now);
        self.shutting_down = true;
        let sessions: Vec<SessionId> = self.sessions.keys().copied().collect();
        for s in sessions {
            self.close_session_key(s, CloseReason::Shutdown);
        }
        let awaiting: Vec<ExchangeId> = self
            .exchanges
            .iter()
            .filter(|(_, e)| {
                e.parked || matches!(e.phase, Phase::Body | Phase::Awaiting | Phase::Parked)
            })
            .map(|(x, _)| *x)
            .collect();
        for x in awaiting {
            self.refuse_unavailable(x);
        }
    }

    fn open_id(&self, request: RequestHandle) -> Result<RequestId, SendError> {
        self.requests
            .get(&request)
            .map(|r| r.id.clone())
            .ok_or(SendError::UnknownRequest)
    }

    /// Records the latest time an input carried (the clock of heartbeats).
    pub(super) fn clock(&mut self, now: Instant) {
        self.now = Some(self.now.map_or(now, |t| t.max(now)));
    }

    /// Writes the answer to open request `h` where it belongs, then settles it.
    fn answer(
        &mut self,
        now: Instant,
        h: RequestHandle,
        message: &Outgoing<'_>,
        error: Option<ErrorCode>,
    ) -> Result<Delivery, SendError> {
        self.clock(now);
        let req = &self.requests[&h];
        let initialize = req.initialize;
        let session = req.session;
        let era = req.era;
        let awaiting = req.exchange.filter(|x| {
            self.exchanges
                .get(x)
                .is_some_and(|e| e.phase == Phase::Awaiting)
        });
        // A stream that went with its connection (not resumable) takes nothing: the
        // answer is dropped and the request settled, not left open.
        let stream = req.stream.filter(|t| self.streams.contains_key(t));
        let delivery = match (stream, awaiting) {
            (Some(t), _) => self.emit(now, Route::Stream(t), message)?,
            (None, Some(x)) => {
                let mut body = BytesMut::with_capacity(message.len_hint());
                message.write(&mut body)?;
                match &mut self
                    .exchanges
                    .get_mut(&x)
                    .expect("awaiting exchange")
                    .carries
                {
                    Carries::Json { parts, status, .. } => {
                        parts.push(body.freeze());
                        if let (Some(code), Era::Sessionless) = (error, era) {
                            *status = modern::error_status(code);
                        }
                        Delivery::Sent
                    }
                    _ => Delivery::Dropped,
                }
            }
            (None, None) => Delivery::Dropped,
        };
        self.settle(now, h);
        if initialize
            && error.is_some()
            && let Some(s) = session
            && !self.sessions.get(&s).is_some_and(|s| s.legacy)
        {
            self.close_session_key(s, CloseReason::InitializeFailed);
        }
        Ok(delivery)
    }

    /// Which stream carries a message for `target`; may open the request's SSE stream
    /// (`ResponseMode::Auto`) or the session's GET stream (detached, with a backlog).
    fn route_target(&mut self, now: Instant, target: Target) -> Result<Route, SendError> {
        let session = match target {
            Target::Session(s) => s,
            Target::Request(h) => {
                let req = self.requests.get(&h).ok_or(SendError::UnknownRequest)?;
                if req.era == Era::HttpSse {
                    return req.stream.map(Route::Stream).ok_or(SendError::NoStream);
                }
                if self.config.response != ResponseMode::Json {
                    if let Some(t) = req.stream {
                        return Ok(Route::Stream(t));
                    }
                    let awaiting = req.exchange.filter(|x| {
                        self.exchanges
                            .get(x)
                            .is_some_and(|e| e.phase == Phase::Awaiting)
                    });
                    return Ok(match awaiting {
                        Some(x) => Route::Stream(self.open_post_stream(now, x)),
                        None => Route::Nowhere,
                    });
                }
                req.session.ok_or(SendError::NoStream)?
            }
        };
        let s = self
            .sessions
            .get(&session)
            .ok_or(SendError::UnknownSession)?;
        if let Some(t) = s.get {
            return Ok(Route::Stream(t));
        }
        if !self.config.get_stream {
            return Err(SendError::NoStream);
        }
        if s.shared.is_some() && !s.legacy {
            return Ok(Route::Elsewhere(session));
        }
        Ok(Route::Stream(
            self.new_stream(Some(session), StreamKind::Get),
        ))
    }

    /// Encodes `message` as the next frame of its stream and hands it on.
    fn emit(
        &mut self,
        now: Instant,
        route: Route,
        message: &Outgoing<'_>,
    ) -> Result<Delivery, SendError> {
        match route {
            Route::Stream(t) => {
                self.emit_with(now, t, |fields, dst| message.encode_frame(fields, dst))
            }
            Route::Nowhere => Ok(Delivery::Dropped),
            Route::Elsewhere(s) => {
                let mut text = BytesMut::with_capacity(message.len_hint());
                message.write(&mut text)?;
                self.deliver_elsewhere(s, text.freeze());
                Ok(Delivery::Forwarded)
            }
        }
    }

    /// Writes JSON text that is already encoded (an immediate error) as a frame of `t`.
    pub(super) fn write_frame(&mut self, now: Instant, t: StreamId, text: &str) {
        let _ = self.emit_with(now, t, |fields, dst| {
            Encoder::new().encode_event(fields, text, dst);
            Ok(())
        });
    }

    /// The one writer of message frames: the id from the stream's ring (if resumable),
    /// retained before it is written (SSE-ENC-11), then handed to the live connection or
    /// the backlog.
    fn emit_with<F>(&mut self, now: Instant, t: StreamId, encode: F) -> Result<Delivery, SendError>
    where
        F: FnOnce(&EventFields<'_>, &mut BytesMut) -> Result<(), EncodeError>,
    {
        let stream = self.streams.get(&t).ok_or(SendError::NoStream)?;
        let backlogged = stream.conn.is_none() && matches!(stream.kind, StreamKind::Get);
        if backlogged && stream.backlog.len() >= self.config.max_backlog {
            return Err(SendError::BacklogFull);
        }
        let mut fields = EventFields::new();
        if stream.kind == StreamKind::Legacy {
            // V0 names the event type (SSE-ENC-8).
            fields = fields.with_event(EventType::new("message").expect("a valid event type"));
        }
        let ring = stream.ring.zip(stream.session);
        let frame = match ring {
            Some((ring, s)) => {
                let id = self
                    .store
                    .next_id(&s, ring)
                    .map_err(|_| SendError::NoStream)?;
                let text = id.encode();
                encode(&fields.with_id(text.sse_id()), &mut self.scratch)?;
                let frame = self.scratch.split().freeze();
                // A ring that cannot take it (its own bounds) still sends it live.
                let _ = self.store.append(now, &s, id, frame.clone());
                if self.is_node() {
                    self.share_frame(s, id, &frame);
                }
                frame
            }
            None => {
                encode(&fields, &mut self.scratch)?;
                self.scratch.split().freeze()
            }
        };
        Ok(self.hand_on(t, frame))
    }

    /// Gives a frame to `t`'s live connection, else its backlog (GET streams), else
    /// leaves it in the ring.
    fn hand_on(&mut self, t: StreamId, frame: Bytes) -> Delivery {
        let stream = self.streams.get_mut(&t).expect("stream exists");
        if let Some(x) = stream.conn {
            self.push_data(x, frame);
            return Delivery::Sent;
        }
        if stream.kind == StreamKind::Get {
            stream.backlog.push_back(frame);
            return Delivery::Sent;
        }
        if stream.ring.is_some() {
            Delivery::Retained
        } else {
            Delivery::Dropped
        }
    }

    /// Queues body bytes on a connection; a reader already more than `max_unsent` behind
    /// when the next frame comes is ended instead (its stream stays resumable from the
    /// last frame it was handed). The check is on what is already queued, so a frame
    /// larger than the bound still goes to a reader that keeps up, and frames queued in
    /// the same call as it (a priming event) are not thrown away with it.
    pub(super) fn push_data(&mut self, x: ExchangeId, frame: Bytes) {
        let Some(e) = self.exchanges.get_mut(&x) else {
            return;
        };
        if e.unsent <= self.config.max_unsent {
            return self.push(x, Transmit::Data(frame));
        }
        let head = match e.out.front() {
            Some(Transmit::Head(_)) => e.out.pop_front(),
            _ => None,
        };
        let mut untaken = std::mem::replace(&mut e.out, head.into_iter().collect());
        untaken.push_back(Transmit::Data(frame));
        e.unsent = 0;
        if let Some(t) = e.carries.take_stream() {
            self.keep_untaken(t, x, untaken);
            self.detach(t, x);
        }
        self.push(x, Transmit::End);
    }

    /// `x`, the live connection of `t`, goes with transmits the driver never took. On a
    /// GET stream their frames go back to the backlog: no reader saw them, so the next
    /// connection gets them, as a fresh GET gets what no connection took (a resume
    /// replays them from the ring anyway). Heartbeats are dropped.
    pub(super) fn keep_untaken(
        &mut self,
        t: StreamId,
        x: ExchangeId,
        untaken: std::collections::VecDeque<Transmit>,
    ) {
        let Some(stream) = self.streams.get_mut(&t) else {
            return;
        };
        if stream.conn != Some(x) || stream.kind != StreamKind::Get {
            return;
        }
        for t in untaken.into_iter().rev() {
            if let Transmit::Data(frame) = t
                && frame != HEARTBEAT
            {
                stream.backlog.push_front(frame);
            }
        }
    }

    /// A request is answered or cancelled: forget it and let its stream or JSON body go
    /// on.
    pub(super) fn settle(&mut self, now: Instant, h: RequestHandle) {
        let Some(req) = self.close_request(h) else {
            return;
        };
        if let Some(t) = req.stream {
            if let Some(stream) = self.streams.get_mut(&t)
                && let StreamKind::Post { owed } = &mut stream.kind
            {
                *owed -= 1;
                if *owed == 0 {
                    self.stream_done(now, t);
                }
            }
            return;
        }
        if let Some(x) = req.exchange
            && let Some(e) = self.exchanges.get_mut(&x)
            && e.phase == Phase::Awaiting
            // Not yet JSON while its body is being dispatched: `dispatch` counts what is
            // owed after.
            && let Carries::Json { owed, .. } = &mut e.carries
            && *owed > 0
        {
            *owed -= 1;
            if *owed == 0 {
                self.finish_json(x);
            }
        }
    }

    /// Forgets open request `h` (bookkeeping only).
    pub(super) fn close_request(&mut self, h: RequestHandle) -> Option<super::state::OpenRequest> {
        let req = self.requests.remove(&h)?;
        self.by_id.remove(&(req.scope, req.id.clone()));
        if let Some(s) = req.session
            && let Some(session) = self.sessions.get_mut(&s)
        {
            session.open_requests -= 1;
        }
        if let Some(x) = req.exchange
            && let Some(e) = self.exchanges.get_mut(&x)
        {
            e.requests.retain(|r| *r != h);
        }
        Some(req)
    }

    /// Writes the collected JSON body (an array for a batch, BATCH-3), or 202 if nothing
    /// remains to say (every request was cancelled).
    pub(super) fn finish_json(&mut self, x: ExchangeId) {
        let Some(e) = self.exchanges.get_mut(&x) else {
            return;
        };
        let (parts, batch, status) = match std::mem::take(&mut e.carries) {
            Carries::Json {
                parts,
                batch,
                status,
                ..
            } => (parts, batch, status),
            other => {
                e.carries = other;
                (Vec::new(), false, StatusCode::OK)
            }
        };
        let session = e.session;
        if parts.is_empty() {
            return self.finish_with(x, empty_head(StatusCode::ACCEPTED), None);
        }
        let body = if batch || parts.len() > 1 {
            let mut body =
                BytesMut::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 1);
            body.extend_from_slice(b"[");
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    body.extend_from_slice(b",");
                }
                body.extend_from_slice(part);
            }
            body.extend_from_slice(b"]");
            body.freeze()
        } else {
            parts.into_iter().next().expect("one part")
        };
        let mut head = json_head(status, body.len());
        self.session_header_on(&mut head, session);
        self.finish_with(x, head, Some(body));
    }

    fn session_header_on(&self, head: &mut http::response::Parts, session: Option<SessionId>) {
        if let Some(s) = session.and_then(|s| self.sessions.get(&s))
            && !s.legacy
        {
            // The value was made once with the session: a clone shares its bytes.
            head.headers
                .insert(HeaderName::from_static(SESSION_ID), s.header.clone());
        }
    }

    /// Turns an awaiting POST into an SSE stream: the head, the priming event, any
    /// answers already collected, then live frames.
    pub(super) fn open_post_stream(&mut self, now: Instant, x: ExchangeId) -> StreamId {
        let e = self.exchanges.get_mut(&x).expect("awaiting exchange");
        let session = e.session;
        let immediate = match std::mem::take(&mut e.carries) {
            Carries::Json { parts, .. } => parts,
            _ => Vec::new(),
        };
        let requests = e.requests.clone();
        let owed = requests
            .iter()
            .filter(|r| self.requests.contains_key(r))
            .count();
        let t = self.new_stream(session, StreamKind::Post { owed });
        for r in &requests {
            if let Some(req) = self.requests.get_mut(r) {
                req.stream = Some(t);
            }
        }
        self.stream_head(x);
        let stream = &self.streams[&t];
        if stream.primed
            && let (Some(ring), Some(s)) = (stream.ring, session)
        {
            self.prime(now, s, ring, x);
        }
        self.attach(now, t, x);
        for body in immediate {
            if let Ok(text) = std::str::from_utf8(&body) {
                self.write_frame(now, t, text);
            }
        }
        if owed == 0 {
            self.stream_done(now, t);
        }
        t
    }

    /// A new stream of `session` (resumable when the session has one and the store takes
    /// its ring; primed on 2025-11-25).
    pub(super) fn new_stream(&mut self, session: Option<SessionId>, kind: StreamKind) -> StreamId {
        let t = StreamId(self.key());
        let mut ring = None;
        let mut primed = false;
        if let Some(s) = session
            && let Some(sess) = self.sessions.get(&s)
            && !sess.legacy
        {
            primed = sess.version >= ProtocolVersion::V2025_11_25;
            ring = self.open_ring(s);
        }
        if let Some(s) = session
            && let Some(sess) = self.sessions.get_mut(&s)
        {
            sess.streams.insert(t);
            if matches!(kind, StreamKind::Get | StreamKind::Legacy) {
                sess.get = Some(t);
            }
        }
        self.streams.insert(
            t,
            Stream {
                session,
                kind,
                ring,
                conn: None,
                backlog: Default::default(),
                done: false,
                primed: primed && ring.is_some(),
                since: None,
            },
        );
        t
    }

    /// A ring for a new stream of `s`. At the store's bounds the oldest finished stream
    /// that no connection reads gives its ring up first (of `s` at the session's bound,
    /// of any session at the store's): a stream just opened is far likelier to be
    /// resumed than one that ended long ago, whose client most likely read it all.
    /// `None` (the stream is not resumable) only when every ring is still in use.
    fn open_ring(&mut self, s: SessionId) -> Option<RingId> {
        // At most one eviction per bound: the session's, then the store's.
        for _ in 0..3 {
            let oldest = match self.store.open_ring(&s) {
                Ok(ring) => return Some(ring),
                Err(StoreError::TooManySessionRings { .. }) => {
                    let session = self.sessions.get(&s)?;
                    session
                        .streams
                        .iter()
                        .copied()
                        .find(|t| self.streams.get(t).is_some_and(Stream::lingers))
                }
                Err(StoreError::TooManyRings { .. }) => self
                    .streams
                    .iter()
                    .find(|(_, stream)| stream.lingers())
                    .map(|(t, _)| *t),
                Err(_) => None,
            };
            self.remove_stream(oldest?);
        }
        None
    }

    /// The SSE response head (SSE-ENC-1, SSE-ENC-10).
    pub(super) fn stream_head(&mut self, x: ExchangeId) {
        let session = self.exchanges.get(&x).and_then(|e| e.session);
        let mut head = empty_head(StatusCode::OK);
        let h = &mut head.headers;
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        self.session_header_on(&mut head, session);
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.responding();
        }
        self.push(x, Transmit::Head(head));
    }

    /// The priming event (RESUME-8): the ring's next id, empty data, and `retry`.
    pub(super) fn prime(&mut self, now: Instant, s: SessionId, ring: RingId, x: ExchangeId) {
        let Ok(id) = self.store.next_id(&s, ring) else {
            return;
        };
        let text = id.encode();
        Encoder::new().encode_priming(text.sse_id(), self.config.retry, &mut self.scratch);
        let frame = self.scratch.split().freeze();
        let _ = self.store.append(now, &s, id, frame.clone());
        if self.is_node() {
            self.share_frame(s, id, &frame);
        }
        self.push(x, Transmit::Data(frame));
    }

    /// A `retry` block (no event) at the start of a connection whose first frames are
    /// not a priming event.
    pub(super) fn push_retry(&mut self, x: ExchangeId) {
        if let Some(retry) = self.config.retry {
            Encoder::new().encode_retry(retry, &mut self.scratch);
            let frame = self.scratch.split().freeze();
            self.push(x, Transmit::Data(frame));
        }
    }

    /// Makes `x` the live connection of `t`, with its heartbeat and polling timers.
    pub(super) fn attach(&mut self, now: Instant, t: StreamId, x: ExchangeId) {
        let stream = self.streams.get_mut(&t).expect("stream exists");
        stream.conn = Some(x);
        let done = stream.done;
        let polls = stream.primed;
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.carries = Carries::Stream(t);
            e.last_write = now;
        }
        if done {
            self.push(x, Transmit::End);
            return;
        }
        if let Some(every) = self.config.heartbeat {
            self.arm_heartbeat(x, now + every);
        }
        if polls && let Some(after) = self.config.polling {
            let at = now + after;
            if let Some(e) = self.exchanges.get_mut(&x) {
                if let Some(old) = e.beats.poll_close.replace(at) {
                    self.timers.remove(&(old, Timer::PollClose(x)));
                }
                self.timers.insert((at, Timer::PollClose(x)));
            }
        }
    }

    /// Puts `x`'s next heartbeat in the timers at `at`, in place of any earlier one.
    fn arm_heartbeat(&mut self, x: ExchangeId, at: Instant) {
        if let Some(e) = self.exchanges.get_mut(&x) {
            if let Some(old) = e.beats.heartbeat.replace(at) {
                self.timers.remove(&(old, Timer::Heartbeat(x)));
            }
            self.timers.insert((at, Timer::Heartbeat(x)));
        }
    }

    /// `x` is no longer `t`'s connection. A stream nothing can resume goes with it.
    pub(super) fn detach(&mut self, t: StreamId, x: ExchangeId) {
        let Some(stream) = self.streams.get_mut(&t) else {
            return;
        };
        if stream.conn != Some(x) {
            return;
        }
        stream.conn = None;
        // A followed ring is another node's: nothing here outlives the connection.
        let gone = stream.ring.is_none()
            && matches!(
                stream.kind,
                StreamKind::Post { .. } | StreamKind::Follow { .. }
            )
            || stream.done && stream.ring.is_none();
        let linger = stream.done && stream.ring.is_some();
        if gone {
            self.remove_stream(t);
        } else if linger && let Some(now) = self.now {
            // A resume of a finished stream just ended: its frames linger again from now.
            self.timers
                .insert((now + self.config.linger, Timer::Linger(t)));
        }
    }

    /// A POST stream owes nothing more: it ends (HTTP-POST-11); its frames linger for
    /// resumes (docs/requirements.md §14.2).
    fn stream_done(&mut self, now: Instant, t: StreamId) {
        let Some(stream) = self.streams.get_mut(&t) else {
            return;
        };
        stream.done = true;
        let conn = stream.conn;
        let resumable = stream.ring.is_some();
        if let (Some(ring), Some(s), true) = (stream.ring, stream.session, self.is_node()) {
            self.share_finish(s, ring);
        }
        if let Some(x) = conn {
            self.push(x, Transmit::End);
        }
        if resumable {
            let at = now + self.config.linger;
            self.timers.insert((at, Timer::Linger(t)));
        } else if conn.is_none() {
            self.remove_stream(t);
        }
    }

    /// Forgets stream `t` and its ring.
    pub(super) fn remove_stream(&mut self, t: StreamId) {
        let Some(stream) = self.streams.remove(&t) else {
            return;
        };
        if let Some(x) = stream.conn
            && let Some(e) = self.exchanges.get_mut(&x)
        {
            e.carries = Carries::Nothing;
        }
        if let StreamKind::Follow { .. } = stream.kind {
            self.store_ops
                .push_back(super::StoreOp::Unfollow { stream: t });
        }
        if let Some(s) = stream.session {
            if let Some(ring) = stream.ring {
                self.store.drop_ring(&s, ring);
                self.followed.remove(&ring);
            }
            if let Some(session) = self.sessions.get_mut(&s) {
                session.streams.remove(&t);
                if session.get == Some(t) {
                    session.get = None;
                }
            }
        }
    }

    /// Cuts `x`, the live connection of a stream that a resume takes over (RESUME-14):
    /// what it was not yet given is dropped (the resume replays it from the ring), and
    /// the driver closes its connection with the response unfinished
    /// ([`Transmit::Abort`]), so that neither the client nor a proxy takes it for a
    /// complete stream. An untaken head stays, so the driver still sees one first.
    pub(super) fn supersede(&mut self, x: ExchangeId) {
        let Some(e) = self.exchanges.get_mut(&x) else {
            return;
        };
        let head = match e.out.front() {
            Some(Transmit::Head(_)) => e.out.pop_front(),
            _ => None,
        };
        e.out = head.into_iter().collect();
        e.unsent = 0;
        // An `End` it had not taken (a finished stream) was dropped with the rest.
        e.phase = Phase::Responding;
        if let Some(t) = e.carries.take_stream() {
            self.detach(t, x);
        }
        self.push(x, Transmit::Abort);
    }

    /// Ends `x`'s response (polling, or a reader too slow).
    pub(super) fn end_exchange(&mut self, x: ExchangeId) {
        if let Some(t) = self
            .exchanges
            .get_mut(&x)
            .and_then(|e| e.carries.take_stream())
        {
            self.detach(t, x);
        }
        self.push(x, Transmit::End);
    }

    /// A heartbeat is due on `x` if it wrote nothing for an interval (SSE-ENC-7).
    /// Its entry has left the timers already.
    pub(super) fn heartbeat(&mut self, now: Instant, x: ExchangeId) {
        let Some(e) = self.exchanges.get_mut(&x) else {
            return;
        };
        e.beats.heartbeat = None;
        let Some(every) = self.config.heartbeat else {
            return;
        };
        if e.phase == Phase::Ended || e.carries.stream().is_none() {
            return;
        }
        let due = e.last_write + every;
        if due > now {
            self.arm_heartbeat(x, due);
            return;
        }
        self.push_data(x, Bytes::from_static(HEARTBEAT));
        self.arm_heartbeat(x, now + every);
    }
}
