//! Admission: a request's session and version headers checked (SESSION-5…7,
//! VERSION-1…4), `initialize` negotiated (JSONRPC-11), sessions minted.

use std::time::Instant;

use http::StatusCode;
use http::header::HeaderValue;

use super::Server;
use super::config::SessionMode;
use super::head::{SessionHeader, VersionHeader};
use super::ids::{ExchangeId, SessionId};
use super::refuse::{Refuse, no_session_id, session_not_found, unsupported_version};
use super::state::{Handshake, Session};
use crate::ProtocolVersion;
use crate::jsonrpc::{Envelope, Envelopes, ErrorCode};

/// The versions served on the Streamable HTTP endpoint (with `initialize`).
pub(super) const SERVED: [ProtocolVersion; 4] = [
    ProtocolVersion::V2024_11_05,
    ProtocolVersion::V2025_03_26,
    ProtocolVersion::V2025_06_18,
    ProtocolVersion::V2025_11_25,
];

pub(super) const HEX: &[u8; 16] = b"0123456789abcdef";

/// The version to answer `initialize` with: the client's offer when served, else the
/// newest served (JSONRPC-11).
pub(super) fn negotiate(init: &Envelope) -> ProtocolVersion {
    init.payload()
        .and_then(|params| {
            let value: serde_json::Value = serde_json::from_str(params.as_str()).ok()?;
            value.get("protocolVersion")?.as_str()?.parse().ok()
        })
        .filter(|v| SERVED.contains(v))
        .unwrap_or(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

impl Server {
    /// Validates the exchange's session and version headers (SESSION-5…7, VERSION-1…4)
    /// for a request that is not `initialize`; admits it to the session.
    pub(super) fn admit(
        &mut self,
        x: ExchangeId,
        now: Instant,
    ) -> Result<(Option<SessionId>, ProtocolVersion), Refuse> {
        let e = &self.exchanges[&x];
        let stateless = self.config.sessions == SessionMode::Stateless;
        let session = if stateless {
            None
        } else {
            match e.headers.session {
                SessionHeader::Absent => {
                    return Err(Refuse::new(
                        StatusCode::BAD_REQUEST,
                        "missing Mcp-Session-Id",
                    ));
                }
                SessionHeader::Unknown => return Err(session_not_found()),
                SessionHeader::Known(s) if self.sessions.get(&s).is_none_or(|s| s.legacy) => {
                    return Err(session_not_found());
                }
                SessionHeader::Known(s) => Some(s),
            }
        };
        let negotiated = session.map(|s| self.sessions[&s].version);
        // §14.9: the session's negotiated version governs; a header must name a served
        // version (VERSION-4), as the TypeScript SDK checks.
        let version = match (&e.headers.version, negotiated) {
            (VersionHeader::Known(v), n) if SERVED.contains(v) => n.unwrap_or(*v),
            (VersionHeader::Absent, n) => n.unwrap_or(ProtocolVersion::V2025_03_26),
            (VersionHeader::Known(v), _) => return Err(unsupported_version(v.as_str())),
            (VersionHeader::Unknown(v), _) => return Err(unsupported_version(v)),
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
            let was = std::mem::replace(&mut session.handshake, Handshake::Complete);
            if session.shared.is_some() {
                self.shared_activity(now, s, was);
            }
        }
        Ok((session, version))
    }

    /// `initialize`: mints a session (stateful) and negotiates the version (JSONRPC-11).
    pub(super) fn initialize_session(
        &mut self,
        now: Instant,
        x: ExchangeId,
        envelopes: &Envelopes,
    ) -> Result<(Option<SessionId>, ProtocolVersion), Refuse> {
        let Envelopes::Single(init) = envelopes else {
            unreachable!("initialize is only recognised as a single message");
        };
        let e = &self.exchanges[&x];
        match &e.headers.version {
            VersionHeader::Unknown(v) => return Err(unsupported_version(v)),
            VersionHeader::Known(v) if !SERVED.contains(v) => {
                return Err(unsupported_version(v.as_str()));
            }
            _ => {}
        }
        match e.headers.session {
            SessionHeader::Known(s) if self.sessions.contains_key(&s) => {
                return Err(
                    Refuse::new(StatusCode::BAD_REQUEST, "session already initialized")
                        .code(ErrorCode::INVALID_REQUEST)
                        .id(init.id().cloned()),
                );
            }
            SessionHeader::Known(_) | SessionHeader::Unknown => return Err(session_not_found()),
            SessionHeader::Absent => {}
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
    pub(super) fn mint_session(
        &mut self,
        now: Instant,
        x: ExchangeId,
        version: ProtocolVersion,
        legacy: bool,
    ) -> Result<SessionId, Refuse> {
        let peer = self.exchanges[&x].headers.peer;
        self.make_places(peer)?;
        let Some(s) = self.new_session(now, version, legacy, peer) else {
            self.give_back_session_place();
            return Err(no_session_id());
        };
        let e = self.exchanges.get_mut(&x).expect("exchange exists");
        e.session = Some(s);
        self.sessions.get_mut(&s).expect("new session").exchanges += 1;
        // A legacy session's record tells the other nodes where its POSTs go.
        if self.is_node() {
            self.share_new_session(now, s);
        }
        Ok(s)
    }

    /// Takes a place for one more session, of `peer`: 503 when every one is active.
    pub(super) fn make_places(&mut self, peer: Option<std::net::IpAddr>) -> Result<(), Refuse> {
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
        Ok(())
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
            Some((std::sync::Arc::<str>::from(hex), header))
        })?;
        Some(self.insert_session(now, wire, header, version, legacy, peer))
    }

    /// Holds a session of this id: minted here, or another node's (adopted).
    pub(super) fn insert_session(
        &mut self,
        now: Instant,
        wire: std::sync::Arc<str>,
        header: HeaderValue,
        version: ProtocolVersion,
        legacy: bool,
        peer: Option<std::net::IpAddr>,
    ) -> SessionId {
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
                shared: None,
            },
        );
        s
    }
}
