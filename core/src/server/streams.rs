//! GET: the legacy HTTP+SSE stream, the standalone GET stream and resumes (RESUME-4…7,
//! RESUME-14, LEGACY-1, LEGACY-2).

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::StatusCode;

use super::Server;
use super::ids::{ExchangeId, SessionId};
use super::output::Transmit;
use super::refuse::Refuse;
use super::state::StreamKind;
use crate::ProtocolVersion;
use crate::resume::{EventId, EventStore, Replay};

impl Server {
    /// GET on the endpoint: a new standalone stream, or a resume (RESUME-4…7).
    pub(super) fn open_get(&mut self, now: Instant, x: ExchangeId) {
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
        match self.exchanges[&x].headers.last_event_id.clone() {
            Some(raw) => self.resume(now, x, s, &raw),
            None => self.attach_get(now, x, s),
        }
    }

    /// GET with `Last-Event-ID`: replays exactly the frames after it, of that stream of
    /// this session, then continues it live.
    pub(super) fn resume(&mut self, now: Instant, x: ExchangeId, s: SessionId, raw: &[u8]) {
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
        let stream = stream.filter(|_| after.epoch() == self.store.epoch());
        if stream.is_none() && self.is_node() {
            // Another node's ring, or one this node no longer holds: the shared store
            // has it, if anyone does.
            return self.follow(x, s, after);
        }
        let Some(t) = stream else {
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
        if let Some(stream) = self.streams.get_mut(&t) {
            stream.since = Some(after.seq());
        }
        self.attach(now, t, x);
        if self.is_node() {
            self.take_over(s, after);
        }
    }

    /// GET without `Last-Event-ID`: connects the session's standalone stream.
    pub(super) fn attach_get(&mut self, now: Instant, x: ExchangeId, s: SessionId) {
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
        if self.is_node() {
            self.get_opened(s);
        }
        self.stream_head(x);
        let stream = self.streams.get_mut(&t).expect("stream exists");
        stream.since = None;
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
    pub(super) fn open_legacy(&mut self, now: Instant, x: ExchangeId) {
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
}
