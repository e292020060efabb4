//! Several [`Server`]s serving one endpoint as its shards ([`Config::shards`]), driven as
//! one server, the way a threaded driver routes between them: a request head goes to
//! the shard [`shard_of`] names (else to the next in turn), everything else to the shard
//! that made the exchange, request or session it names. With one shard it is the plain
//! server; the op model ([`server_ops`](crate::server_ops)) runs on it, so every
//! invariant it checks (no frame of one session reaching another among them) is checked
//! over shards too.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use mcpwire::jsonrpc::{ErrorCode, RequestId, ToJson};
use mcpwire::server::{
    Config, Delivery, Event, ExchangeId, RequestHandle, SendError, Server, SessionId, Target,
    Transmit, shard_of,
};

use crate::server::counter_entropy;

/// The shards and where each handle lives.
#[derive(Debug)]
pub struct Shards {
    servers: Vec<Server>,
    /// The endpoint's configuration, for [`shard_of`].
    config: Config,
    /// The shard of the next request head that names no session.
    turn: usize,
    exchanges: BTreeMap<ExchangeId, usize>,
    requests: BTreeMap<RequestHandle, usize>,
    sessions: BTreeMap<SessionId, usize>,
}

impl Shards {
    /// `count` shards of `config`, each with its own entropy seeded from `seed`.
    pub fn new(config: Config, count: usize, seed: u64) -> Self {
        let servers = config
            .clone()
            .shards(count)
            .into_iter()
            .zip(0u64..)
            .map(|(shard, i)| Server::new(shard, counter_entropy(seed + (i << 32))))
            .collect();
        Self {
            servers,
            config,
            turn: 0,
            exchanges: BTreeMap::new(),
            requests: BTreeMap::new(),
            sessions: BTreeMap::new(),
        }
    }

    fn of_exchange(&self, x: ExchangeId) -> usize {
        self.exchanges.get(&x).copied().unwrap_or(0)
    }

    fn of_request(&self, h: RequestHandle) -> usize {
        self.requests.get(&h).copied().unwrap_or(0)
    }

    fn of_session(&self, s: SessionId) -> usize {
        self.sessions.get(&s).copied().unwrap_or(0)
    }

    fn of_target(&self, target: Target) -> usize {
        match target {
            Target::Request(h) => self.of_request(h),
            Target::Session(s) => self.of_session(s),
        }
    }

    /// [`Server::handle_head`] on the shard the head belongs to.
    pub fn handle_head(&mut self, now: Instant, head: http::request::Parts) -> ExchangeId {
        let n = self.servers.len();
        let at = shard_of(&self.config, n, &head).unwrap_or_else(|| {
            self.turn = (self.turn + 1) % n;
            self.turn
        });
        let x = self.servers[at].handle_head(now, head);
        let before = self.exchanges.insert(x, at);
        assert!(before.is_none(), "{x} made by two shards");
        x
    }

    /// [`Server::handle_body`].
    pub fn handle_body(&mut self, now: Instant, x: ExchangeId, chunk: Bytes) {
        let at = self.of_exchange(x);
        self.servers[at].handle_body(now, x, chunk);
    }

    /// [`Server::handle_body_end`].
    pub fn handle_body_end(&mut self, now: Instant, x: ExchangeId) {
        let at = self.of_exchange(x);
        self.servers[at].handle_body_end(now, x);
    }

    /// [`Server::handle_disconnect`].
    pub fn handle_disconnect(&mut self, now: Instant, x: ExchangeId) {
        let at = self.of_exchange(x);
        self.servers[at].handle_disconnect(now, x);
    }

    /// [`Server::poll_ready`] of the first shard with an exchange ready.
    pub fn poll_ready(&mut self) -> Option<ExchangeId> {
        self.servers.iter_mut().find_map(Server::poll_ready)
    }

    /// [`Server::poll_transmit`].
    pub fn poll_transmit(&mut self, x: ExchangeId) -> Option<Transmit> {
        let at = self.of_exchange(x);
        self.servers[at].poll_transmit(x)
    }

    /// [`Server::poll_event`] of the first shard with an event; learns where the
    /// requests and sessions it names live.
    pub fn poll_event(&mut self) -> Option<Event> {
        let (at, event) = self
            .servers
            .iter_mut()
            .enumerate()
            .find_map(|(at, s)| Some((at, s.poll_event()?)))?;
        match &event {
            Event::Request(r) => {
                self.requests.insert(r.handle(), at);
                if let Some(s) = r.session() {
                    self.sessions.insert(s, at);
                }
            }
            Event::Notification {
                session: Some(s), ..
            }
            | Event::Response { session: s, .. }
            | Event::RequestTimedOut { session: s, .. }
            | Event::SessionClosed { session: s, .. } => {
                self.sessions.insert(*s, at);
            }
            Event::Cancelled { request, .. } => {
                self.requests.insert(*request, at);
            }
            _ => {}
        }
        Some(event)
    }

    /// The earliest [`Server::poll_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.servers.iter().filter_map(Server::poll_timeout).min()
    }

    /// [`Server::handle_timeout`] on every shard.
    pub fn handle_timeout(&mut self, now: Instant) {
        for s in &mut self.servers {
            s.handle_timeout(now);
        }
    }

    /// The open exchanges of every shard ([`Server::exchange_count`]).
    pub fn exchange_count(&self) -> usize {
        self.servers.iter().map(Server::exchange_count).sum()
    }

    /// The live sessions of every shard ([`Server::session_count`]).
    pub fn session_count(&self) -> usize {
        self.servers.iter().map(Server::session_count).sum()
    }

    /// Whether every shard is idle.
    pub fn is_idle(&self) -> bool {
        self.servers.iter().all(Server::is_idle)
    }

    /// [`Server::session_header`].
    pub fn session_header(&self, s: SessionId) -> Option<&str> {
        self.servers[self.of_session(s)].session_header(s)
    }

    /// [`Server::close_session`].
    pub fn close_session(&mut self, now: Instant, s: SessionId) -> bool {
        let at = self.of_session(s);
        self.servers[at].close_session(now, s)
    }

    /// [`Server::respond`].
    pub fn respond(
        &mut self,
        now: Instant,
        h: RequestHandle,
        result: &dyn ToJson,
    ) -> Result<Delivery, SendError> {
        let at = self.of_request(h);
        self.servers[at].respond(now, h, result)
    }

    /// [`Server::respond_error`].
    pub fn respond_error(
        &mut self,
        now: Instant,
        h: RequestHandle,
        code: ErrorCode,
        message: &str,
        data: Option<&dyn ToJson>,
    ) -> Result<Delivery, SendError> {
        let at = self.of_request(h);
        self.servers[at].respond_error(now, h, code, message, data)
    }

    /// [`Server::notify`].
    pub fn notify(
        &mut self,
        now: Instant,
        target: Target,
        method: &str,
        params: Option<&dyn ToJson>,
    ) -> Result<Delivery, SendError> {
        let at = self.of_target(target);
        self.servers[at].notify(now, target, method, params)
    }

    /// [`Server::request`].
    pub fn request(
        &mut self,
        now: Instant,
        target: Target,
        method: &str,
        params: Option<&dyn ToJson>,
        deadline: Option<Instant>,
    ) -> Result<RequestId, SendError> {
        let at = self.of_target(target);
        self.servers[at].request(now, target, method, params, deadline)
    }
}
