//! Ends: DELETE (HTTP-DELETE-1, HTTP-DELETE-3) and the end of a session with everything
//! it holds.

use std::time::Instant;

use http::StatusCode;

use super::Server;
use super::ids::{ExchangeId, RequestHandle, SessionId};
use super::output::{CloseReason, Event, Transmit};
use super::refuse::{Refuse, empty_head};
use super::state::{Phase, Scope};
use crate::jsonrpc::RequestId;
use crate::resume::EventStore;

impl Server {
    /// DELETE: ends the session (HTTP-DELETE-1, HTTP-DELETE-3).
    pub(super) fn delete(&mut self, now: Instant, x: ExchangeId) {
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

    /// Ends a session and everything it holds; on a cluster node, everywhere when the
    /// reason says so (see [`shared_end`](Self::shared_end)).
    pub(super) fn close_session_key(&mut self, s: SessionId, reason: CloseReason) {
        self.close_session_as(s, reason, true);
    }

    /// Ends a session here only: another node ended it.
    pub(super) fn close_session_here(&mut self, s: SessionId, reason: CloseReason) {
        self.close_session_as(s, reason, false);
    }

    fn close_session_as(&mut self, s: SessionId, reason: CloseReason, spread: bool) {
        let Some(session) = self.sessions.remove(&s) else {
            return;
        };
        self.shared_end(s, &session, reason, spread);
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
            if let Some(stream) = self.streams.get(&t)
                && let Some(conn) = stream.conn
            {
                // A resume still waiting for another node's ring has no head yet.
                if matches!(
                    stream.kind,
                    super::state::StreamKind::Follow { opening: true, .. }
                ) {
                    self.refuse(conn, Refuse::new(StatusCode::NOT_FOUND, "session ended"));
                } else {
                    self.push(conn, Transmit::End);
                }
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
