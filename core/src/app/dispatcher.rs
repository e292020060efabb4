//! The application layer's bookkeeping, runtime-free: which calls run, which are
//! cancelled (a cancel that came before its call started included), which server→client
//! requests wait for their client's response, and what the layer answers itself.
//!
//! Both adapters keep one [`Dispatcher`] behind a lock, feed it the core's events and act
//! on the [`Step`] each returns: answer a request, or run its handler (a task on tokio, a
//! handler thread on the blocking adapter). The only runtime-specific pieces are the
//! signal a running call watches for its cancellation ([`Cancel`]) and the slot a
//! waiting [`request`](Dispatcher::request) is answered through ([`Reply`]): the
//! dispatcher holds the adapter's and fires them, as the server draws from an injected
//! `Entropy`. It reads no clock (time comes in with each input that needs it), spawns
//! nothing and holds no lock; every table in it is bounded by its [`Limits`].

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::listen::{self, Change, Filter};
use super::modern::{
    CLIENT_CAPABILITIES, CacheHint, Identity, LOG_LEVEL, LogLevel, Method, Responder, Seal, Shape,
    discover,
};
use super::state::{StateError, StateKey};
use super::{CallError, builtin_answer, client_answer, progress_params, progress_token};
use crate::jsonrpc::{RawJson, RequestId};
use crate::mirror;
use crate::server::{
    Era, Event, IncomingRequest, RequestHandle, SendError, Server, SessionId, Target,
};

/// The method of a log message (MODERN-21).
const LOG_MESSAGE: &str = "notifications/message";

/// How a running call learns that it was cancelled: the adapter's signal (a watch
/// channel on tokio, an atomic flag on the blocking adapter). The dispatcher makes one
/// per call, hands a clone to the adapter with the call, and fires it on a cancel.
pub trait Cancel: Clone + Default {
    /// Marks the call cancelled and wakes whatever waits on it. Called under the
    /// adapter's lock on the dispatcher: must not block.
    fn cancel(&self);
}

/// Where the client's answer to a server→client request goes: the adapter's one-shot
/// channel to the waiting call. Dropping it unanswered (the request timed out, its
/// session ended, its call finished) tells the waiter no answer will come.
pub trait Reply {
    /// Hands over the client's answer. Called under the adapter's lock on the
    /// dispatcher: must not block.
    fn reply(self, answer: Result<Value, CallError>);
}

/// What the `InitializeResult` says about the application: its handler's.
pub trait Describe {
    /// `capabilities`.
    fn capabilities(&self) -> Value;
    /// `serverInfo`.
    fn server_info(&self) -> Value;
    /// The caching hint of `method`'s complete results (MODERN-22): asked for
    /// `server/discover` and the five list and read methods of the 2026-07-28 revision.
    /// By default [`CacheHint::NONE`].
    fn cache_hint(&self, method: &str) -> CacheHint {
        let _ = method;
        CacheHint::NONE
    }
}

/// The bounds of a [`Dispatcher`]'s tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    calls: usize,
    early_cancels: usize,
    requests: usize,
    listens: usize,
    listen_uris: usize,
}

impl Limits {
    /// The defaults: 16,384 calls in flight, 64 early cancels, 16,384 server→client
    /// requests awaiting their response, 4,096 open `subscriptions/listen` streams of
    /// at most 256 resources each.
    pub const fn new() -> Self {
        Self {
            calls: 16_384,
            early_cancels: 64,
            requests: 16_384,
            listens: 4_096,
            listen_uris: 256,
        }
    }

    /// The most calls whose handler has not finished; one more is answered -32603
    /// ([`CallError::busy`]) at once.
    #[must_use]
    pub const fn with_max_calls(mut self, calls: usize) -> Self {
        self.calls = calls;
        self
    }

    /// The most cancels remembered for calls not started yet (the oldest is forgotten
    /// first). Events of inputs on different connections may be handled at the same
    /// time, so a cancel can be handled before its request (HTTP-POST-12); one for a
    /// request that just finished is remembered too, hence the bound.
    #[must_use]
    pub const fn with_max_early_cancels(mut self, cancels: usize) -> Self {
        self.early_cancels = cancels;
        self
    }

    /// The most server→client requests of the calls awaiting their response; one more
    /// fails without being sent.
    #[must_use]
    pub const fn with_max_requests(mut self, requests: usize) -> Self {
        self.requests = requests;
        self
    }

    /// The most open `subscriptions/listen` streams (MODERN-13); one more is answered
    /// -32603 ([`CallError::busy`]).
    #[must_use]
    pub const fn with_max_listens(mut self, listens: usize) -> Self {
        self.listens = listens;
        self
    }

    /// The most resources one listen may subscribe to (`resourceSubscriptions`); more
    /// is -32602.
    #[must_use]
    pub const fn with_max_listen_resources(mut self, uris: usize) -> Self {
        self.listen_uris = uris;
        self
    }

    /// See [`with_max_listens`](Self::with_max_listens).
    pub const fn max_listens(&self) -> usize {
        self.listens
    }

    /// See [`with_max_listen_resources`](Self::with_max_listen_resources).
    pub const fn max_listen_resources(&self) -> usize {
        self.listen_uris
    }

    /// See [`with_max_calls`](Self::with_max_calls).
    pub const fn max_calls(&self) -> usize {
        self.calls
    }

    /// See [`with_max_early_cancels`](Self::with_max_early_cancels).
    pub const fn max_early_cancels(&self) -> usize {
        self.early_cancels
    }

    /// See [`with_max_requests`](Self::with_max_requests).
    pub const fn max_requests(&self) -> usize {
        self.requests
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}

/// What the adapter does with an event, as [`Dispatcher::handle_event`] decided.
#[derive(Debug)]
#[must_use]
pub enum Step<C> {
    /// Nothing more.
    Done,
    /// [`apply`](Act::apply) this to the server: an answer the layer gives itself
    /// (`initialize`, `ping`, `server/discover`, a refusal; no call was started), or a
    /// listen's acknowledgement.
    Act(Act),
    /// Run the handler for this call, then [`finish`](Dispatcher::finish) it.
    Run(Start<C>),
}

/// Messages the layer sends on its own, for the adapter to hand to the server under its
/// lock ([`apply`](Self::apply)). With several shards, each message goes through the
/// shard of its request: the adapter applies the act to each shard until it
/// [`is_empty`](Self::is_empty).
#[derive(Debug, Default)]
#[must_use]
pub struct Act(Vec<Deed>);

#[derive(Debug)]
enum Deed {
    Answer(Responder, Result<Value, CallError>),
    Discover(Responder, Value),
    Notify {
        request: RequestHandle,
        method: &'static str,
        params: Value,
    },
    /// A change told the other nodes of the cluster (by any one shard).
    Announce(Vec<u8>),
}

impl Deed {
    fn request(&self) -> Option<RequestHandle> {
        match self {
            Self::Answer(r, _) | Self::Discover(r, _) => Some(r.handle()),
            Self::Notify { request, .. } => Some(*request),
            Self::Announce(_) => None,
        }
    }
}

impl Act {
    fn one(deed: Deed) -> Self {
        Self(vec![deed])
    }

    /// Whether there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many notifications it sends to clients here (an announcement to the other
    /// nodes of a cluster and answers are not counted).
    pub fn notifications(&self) -> usize {
        self.0
            .iter()
            .filter(|d| matches!(d, Deed::Notify { .. }))
            .count()
    }

    /// Sends what belongs to `server` (every message, without shards) and keeps the
    /// rest. A message for a request no longer open is dropped, as the core drops it.
    pub fn apply(&mut self, server: &mut Server, now: Instant) {
        let (mine, rest): (Vec<Deed>, Vec<Deed>) = std::mem::take(&mut self.0)
            .into_iter()
            .partition(|d| d.request().is_none_or(|r| server.owns(r)));
        self.0 = rest;
        for deed in mine {
            match deed {
                Deed::Answer(responder, result) => responder.answer(server, now, result),
                Deed::Discover(responder, capabilities) => {
                    let result = discover(server, capabilities);
                    responder.answer(server, now, Ok(result));
                }
                Deed::Notify {
                    request,
                    method,
                    params,
                } => {
                    let text = params.to_string();
                    if let Ok(raw) = RawJson::new(&text) {
                        let _ = server.notify(now, Target::Request(request), method, Some(&raw));
                    }
                }
                Deed::Announce(payload) => server.announce(now, &payload),
            }
        }
    }
}

/// What a 2026-07-28 call needs beyond its request, fixed when it starts.
#[derive(Debug)]
struct Modern {
    method: Method,
    cache: CacheHint,
    server_info: Arc<Identity>,
    key: Arc<StateKey>,
}

/// A call to start: its request and its cancel signal (fired already if the cancel came
/// first).
#[derive(Debug)]
pub struct Start<C> {
    request: IncomingRequest,
    cancel: C,
    modern: Option<Box<Modern>>,
}

impl<C> Start<C> {
    /// The request's handle.
    pub fn handle(&self) -> RequestHandle {
        self.request.handle()
    }

    /// The call, with its params parsed (done here rather than in
    /// [`handle_event`](Dispatcher::handle_event), so outside the adapter's lock), its
    /// cancel signal, and how to answer it.
    ///
    /// # Errors
    /// A 2026-07-28 request the layer refuses before any handler sees it, with how to
    /// answer it: an invalid `logLevel` (-32602, MODERN-21), or a `requestState` this
    /// server did not hand out for this request (-32602, MODERN-23). The adapter answers
    /// it as a finished call ([`Dispatcher::finish`], then the [`Responder`]).
    pub fn begin(self) -> Result<(CallInfo, C, Responder), (Responder, CallError)> {
        let handle = self.request.handle();
        let mut params: Option<Value> = self
            .request
            .message()
            .payload()
            .and_then(|p| serde_json::from_str(p.as_str()).ok());
        let method = self.request.method();
        let mut info = CallInfo {
            handle,
            session: self.request.session(),
            method: method.to_owned(),
            params: None,
            logs: Logs::Open,
            state: None,
        };
        let Some(modern) = self.modern else {
            info.params = params;
            return Ok((info, self.cancel, Responder::plain(handle)));
        };
        let name = mirror::name_member(method)
            .and_then(|member| params.as_ref()?.get(member)?.as_str())
            .unwrap_or_default();
        let seal = modern.method.is_round_trip().then(|| Seal {
            key: Arc::clone(&modern.key),
            method: method.into(),
            name: name.into(),
        });
        let opened = match (&seal, params.as_ref().and_then(|p| p.get("requestState"))) {
            (_, None) => Ok(None),
            (Some(seal), Some(Value::String(sealed))) => {
                seal.key.open(&seal.method, &seal.name, sealed).map(Some)
            }
            (None, Some(_)) => Ok(None),
            (Some(_), Some(_)) => Err(StateError::NotText),
        };
        let retried = params
            .as_ref()
            .is_some_and(|p| p.get("requestState").is_some() || p.get("inputResponses").is_some());
        let shape = Shape {
            method: modern.method,
            cache: if retried {
                CacheHint::NONE
            } else {
                modern.cache
            },
            server_info: modern.server_info,
            seal,
        };
        let responder = Responder::modern(handle, shape);
        let state = match opened {
            Ok(state) => state,
            Err(e) => return Err((responder, CallError::invalid_params(e.to_string()))),
        };
        if let (Some(state), Some(p)) = (&state, params.as_mut()) {
            p["requestState"] = Value::from(state.as_str());
        }
        let level = params.as_ref().and_then(|p| p.get("_meta")?.get(LOG_LEVEL));
        info.logs = match level {
            None => Logs::Closed,
            Some(level) => match level.as_str().and_then(LogLevel::parse) {
                Some(level) => Logs::AtLeast(level),
                None => {
                    let e = CallError::invalid_params(format!(
                        "_meta[\"{LOG_LEVEL}\"] is not a log level"
                    ));
                    return Err((responder, e));
                }
            },
        };
        info.params = params;
        info.state = state;
        Ok((info, self.cancel, responder))
    }
}

/// Which `notifications/message` a call may send (MODERN-21).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Logs {
    /// Every one: the session eras, where `logging/setLevel` governs.
    Open,
    /// None: a 2026-07-28 request without `logLevel`.
    Closed,
    /// At this level or above.
    AtLeast(LogLevel),
}

/// What a handler knows of its request, and how it speaks on that request's stream:
/// the part of the adapters' `Call` that needs no runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct CallInfo {
    handle: RequestHandle,
    session: Option<SessionId>,
    method: String,
    params: Option<Value>,
    logs: Logs,
    state: Option<String>,
}

impl CallInfo {
    /// The request's handle.
    pub fn handle(&self) -> RequestHandle {
        self.handle
    }

    /// The method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The params, if any (and if they are JSON). On a retried 2026-07-28 request,
    /// `requestState` is already opened: the handler's own text.
    pub fn params(&self) -> Option<&Value> {
        self.params.as_ref()
    }

    /// The session, if the server keeps sessions.
    pub fn session(&self) -> Option<SessionId> {
        self.session
    }

    /// `params._meta.progressToken`, if the client asked for progress.
    pub fn progress_token(&self) -> Option<&Value> {
        progress_token(self.params.as_ref())
    }

    /// The client's capabilities, from a 2026-07-28 request's `_meta` (MODERN-3):
    /// before a handler asks for input (`elicitation`, `sampling`, `roots`), it checks
    /// the client declared it (MODERN-23), or answers
    /// [`CallError::missing_capability`]. `None` in the session eras.
    pub fn client_capabilities(&self) -> Option<&Value> {
        if self.logs == Logs::Open {
            return None;
        }
        self.params.as_ref()?.get("_meta")?.get(CLIENT_CAPABILITIES)
    }

    /// Whether the client declared the capability `name` (`"sampling"`, …) in a
    /// 2026-07-28 request.
    pub fn client_supports(&self, name: &str) -> bool {
        self.client_capabilities()
            .and_then(|c| c.get(name))
            .is_some_and(|c| !c.is_null())
    }

    /// The answers to an earlier `input_required` ([`input_required`](super::input_required)),
    /// keyed as it asked: `params.inputResponses` of a retried request (MODERN-23).
    pub fn input_responses(&self) -> Option<&Value> {
        self.params.as_ref()?.get("inputResponses")
    }

    /// The `requestState` the handler handed out with its `input_required`, opened and
    /// verified: only ever a state this server sealed for this method and name.
    pub fn request_state(&self) -> Option<&str> {
        self.state.as_deref()
    }

    /// Sends a notification related to this request, on its stream (HTTP-POST-9). A
    /// `notifications/message` of a 2026-07-28 request is sent only at or above the
    /// request's `logLevel`, and never without one (MODERN-21): below it, this does
    /// nothing.
    ///
    /// # Errors
    /// [`SendError`] from the core (the request is no longer open, …).
    pub fn notify(
        &self,
        server: &mut Server,
        now: Instant,
        method: &str,
        params: &Value,
    ) -> Result<(), SendError> {
        if method == LOG_MESSAGE && !self.logs_at(params) {
            return Ok(());
        }
        let params = params.to_string();
        let raw = RawJson::new(&params).map_err(|_| SendError::NoStream)?;
        server
            .notify(now, Target::Request(self.handle), method, Some(&raw))
            .map(|_| ())
    }

    /// Whether a `notifications/message` with these params passes the request's gate.
    fn logs_at(&self, params: &Value) -> bool {
        match self.logs {
            Logs::Open => true,
            Logs::Closed => false,
            Logs::AtLeast(least) => params
                .get("level")
                .and_then(Value::as_str)
                .and_then(LogLevel::parse)
                .is_some_and(|level| level >= least),
        }
    }

    /// Sends [`PROGRESS`](super::PROGRESS) if the client gave a progress token; a no-op
    /// otherwise.
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub fn progress(
        &self,
        server: &mut Server,
        now: Instant,
        progress: f64,
        total: Option<f64>,
    ) -> Result<(), SendError> {
        let Some(token) = self.progress_token().cloned() else {
            return Ok(());
        };
        let params = progress_params(token, progress, total);
        self.notify(server, now, super::PROGRESS, &params)
    }
}

/// A server→client request a call sends ([`Dispatcher::request`]).
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// The method (`sampling/createMessage`, `elicitation/create`, …).
    pub method: &'a str,
    /// The params.
    pub params: &'a Value,
    /// How long to wait for the response (`None`: until the call or its session ends).
    /// The core times it out ([`Event::RequestTimedOut`]) and drops a late response.
    pub timeout: Option<Duration>,
}

/// One call whose handler has not finished.
#[derive(Debug)]
struct Flight<C> {
    session: Option<SessionId>,
    cancelled: bool,
    cancel: C,
    /// How many of `Dispatcher::requests` are this call's.
    requests: usize,
}

/// One server→client request awaiting its response.
#[derive(Debug)]
struct Waiting<W> {
    call: RequestHandle,
    reply: W,
}

/// The application layer's state machine: fed the server's events and the calls'
/// doings, it keeps the calls in flight and their server→client requests, and says
/// what to do with each request. `C` is the adapter's cancel signal, `W` its reply slot.
///
/// One dispatcher may serve several shards: request handles and session ids are unique
/// across them.
#[derive(Debug)]
pub struct Dispatcher<C, W> {
    limits: Limits,
    calls: HashMap<RequestHandle, Flight<C>>,
    /// Cancels handled before their request, oldest first.
    early: VecDeque<RequestHandle>,
    requests: HashMap<(SessionId, RequestId), Waiting<W>>,
    /// The open `subscriptions/listen` streams.
    listens: HashMap<RequestHandle, Listen>,
    key: Arc<StateKey>,
    /// `serverInfo`, asked of the application once.
    server_info: Option<Arc<Identity>>,
}

/// One open `subscriptions/listen`.
#[derive(Debug)]
struct Listen {
    /// Its subscription id: the request's id.
    id: Value,
    filter: Filter,
    responder: Responder,
}

/// How an application layer is set up: its [`Limits`], and the key that seals
/// `requestState` (MODERN-23).
#[derive(Clone, Debug, Default)]
pub struct Settings {
    limits: Limits,
    state_key: Option<StateKey>,
}

impl Settings {
    /// The defaults: [`Limits::new`], a key drawn when the layer starts.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bounds of the layer's tables.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The key that seals `requestState`. Every server a client's retry may reach must
    /// hold the same one; without it each layer draws its own from the entropy it is
    /// given, so a retry must come back to the same process.
    #[must_use]
    pub fn with_state_key(mut self, key: StateKey) -> Self {
        self.state_key = Some(key);
        self
    }

    /// See [`with_limits`](Self::with_limits).
    pub fn limits(&self) -> Limits {
        self.limits
    }
}

impl<C: Cancel, W: Reply> Dispatcher<C, W> {
    /// An empty dispatcher; its state key is the configured one, else drawn from
    /// `entropy`.
    pub fn new(settings: &Settings, entropy: &mut dyn crate::Entropy) -> Self {
        let key = match &settings.state_key {
            Some(key) => key.clone(),
            None => StateKey::from_entropy(entropy),
        };
        Self {
            limits: settings.limits,
            calls: HashMap::new(),
            early: VecDeque::new(),
            requests: HashMap::new(),
            listens: HashMap::new(),
            key: Arc::new(key),
            server_info: None,
        }
    }

    /// The open `subscriptions/listen` streams.
    pub fn listens(&self) -> usize {
        self.listens.len()
    }

    /// Its bounds.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The calls in flight (started, not finished).
    pub fn calls(&self) -> usize {
        self.calls.len()
    }

    /// The cancels remembered for calls not started.
    pub fn early_cancels(&self) -> usize {
        self.early.len()
    }

    /// The server→client requests awaiting their response.
    pub fn pending_requests(&self) -> usize {
        self.requests.len()
    }

    /// Acts on one event of the server: a request is answered at once (`initialize`,
    /// `ping`, or -32603 when [`Limits::max_calls`] are in flight) or started; a
    /// client's response goes to the call that asked; a cancel, or the end of a
    /// session, fires the cancel signal of the calls concerned (or is remembered for a
    /// call not started yet); a server→client request that timed out, or whose session
    /// ended, has its reply slot dropped. `describe` is asked only for `initialize`.
    pub fn handle_event(&mut self, event: Event, describe: &dyn Describe) -> Step<C> {
        match event {
            Event::Request(request) => return self.start(request, describe),
            Event::Response { session, message } => {
                let Some(id) = message.id().cloned() else {
                    return Step::Done;
                };
                if let Some(waiting) = self.take_request(session, id) {
                    waiting.reply.reply(client_answer(&message.message()));
                }
            }
            Event::RequestTimedOut { session, id } => {
                drop(self.take_request(session, id));
            }
            Event::Cancelled { request, .. } => self.cancel(request),
            Event::Announced { payload } => {
                if let Some(change) = Change::decode(&payload) {
                    return Step::Act(self.listeners_of(&change));
                }
            }
            Event::SessionClosed { session, .. } => {
                for flight in self.calls.values_mut() {
                    if flight.session == Some(session) {
                        flight.cancelled = true;
                        flight.cancel.cancel();
                        // A call's requests are sent in its session.
                        flight.requests = 0;
                    }
                }
                self.requests.retain(|(s, _), _| *s != session);
            }
            _ => {}
        }
        Step::Done
    }

    /// A request comes: answered here, or started.
    fn start(&mut self, request: IncomingRequest, describe: &dyn Describe) -> Step<C> {
        let handle = request.handle();
        let modern = request.era() == Era::Sessionless;
        if !modern {
            let builtin = builtin_answer(
                &request,
                || describe.capabilities(),
                || describe.server_info(),
            );
            if let Some(result) = builtin {
                return Step::Act(Act::one(Deed::Answer(Responder::plain(handle), Ok(result))));
            }
        }
        let early = self.early.iter().position(|h| *h == handle);
        let cancelled = early.and_then(|at| self.early.remove(at)).is_some();
        let modern = modern.then(|| {
            let method = request.method();
            let server_info = Arc::clone(
                self.server_info
                    .get_or_insert_with(|| Arc::new(Identity::new(describe.server_info()))),
            );
            let kind = Method::of(method);
            Box::new(Modern {
                method: kind,
                cache: if kind.is_cacheable() {
                    describe.cache_hint(method)
                } else {
                    CacheHint::NONE
                },
                server_info,
                key: Arc::clone(&self.key),
            })
        });
        if let Some(m) = &modern {
            let shape = || Shape {
                method: m.method,
                cache: m.cache,
                server_info: Arc::clone(&m.server_info),
                seal: None,
            };
            match request.method() {
                "server/discover" => {
                    let responder = Responder::modern(handle, shape());
                    return Step::Act(Act::one(Deed::Discover(responder, describe.capabilities())));
                }
                "subscriptions/listen" if cancelled => return Step::Done,
                "subscriptions/listen" => {
                    let responder = Responder::modern(handle, shape());
                    return Step::Act(self.listen(&request, responder, describe));
                }
                _ => {}
            }
        }
        if self.calls.len() >= self.limits.calls {
            return Step::Act(Act::one(Deed::Answer(
                Responder::plain(handle),
                Err(CallError::busy()),
            )));
        }
        let cancel = C::default();
        if cancelled {
            cancel.cancel();
        }
        let flight = Flight {
            session: request.session(),
            cancelled,
            cancel: cancel.clone(),
            requests: 0,
        };
        self.calls.insert(handle, flight);
        Step::Run(Start {
            request,
            cancel,
            modern,
        })
    }

    /// A `subscriptions/listen` comes (MODERN-13): kept, and acknowledged on its stream
    /// with the filter the server honours; refused when its filter is invalid or
    /// [`Limits::max_listens`] are open.
    fn listen(
        &mut self,
        request: &IncomingRequest,
        responder: Responder,
        describe: &dyn Describe,
    ) -> Act {
        if self.listens.len() >= self.limits.listens {
            return Act::one(Deed::Answer(responder, Err(CallError::busy())));
        }
        let params: Option<Value> = request
            .message()
            .payload()
            .and_then(|p| serde_json::from_str(p.as_str()).ok());
        let filter = match Filter::honoured(
            params.as_ref(),
            &describe.capabilities(),
            self.limits.listen_uris,
        ) {
            Ok(filter) => filter,
            Err(e) => return Act::one(Deed::Answer(responder, Err(e))),
        };
        let id = listen::subscription_id(request.id());
        let ack = listen::acknowledgement(&id, &filter);
        let handle = request.handle();
        self.listens.insert(
            handle,
            Listen {
                id,
                filter,
                responder,
            },
        );
        Act::one(Deed::Notify {
            request: handle,
            method: listen::ACKNOWLEDGED,
            params: ack,
        })
    }

    /// The application announces a change: the notification for every open listen that
    /// asked for it, tagged with its subscription id (MODERN-13); on a node of a
    /// cluster, every other node's listens hear of it too ([`Event::Announced`]).
    pub fn changed(&self, change: &Change) -> Act {
        let mut act = self.listeners_of(change);
        act.0.push(Deed::Announce(change.encode()));
        act
    }

    /// The notification of `change` for every open listen here that asked for it.
    fn listeners_of(&self, change: &Change) -> Act {
        let method = change.method();
        Act(self
            .listens
            .iter()
            .filter(|(_, l)| l.filter.wants(change))
            .map(|(request, l)| Deed::Notify {
                request: *request,
                method,
                params: change.params(&l.id),
            })
            .collect())
    }

    /// Ends every open listen gracefully, with its result (MODERN-13): for a server
    /// that stops, before it closes its connections.
    pub fn end_listens(&mut self) -> Act {
        Act(self
            .listens
            .drain()
            .map(|(_, l)| Deed::Answer(l.responder, Ok(listen::ended(&l.id))))
            .collect())
    }

    /// A cancel comes: fires its call's signal, or remembers it for a call not started.
    fn cancel(&mut self, request: RequestHandle) {
        if self.listens.remove(&request).is_some() {
            return;
        }
        if let Some(flight) = self.calls.get_mut(&request) {
            flight.cancelled = true;
            flight.cancel.cancel();
            return;
        }
        if self.limits.early_cancels == 0 {
            return;
        }
        if self.early.len() >= self.limits.early_cancels {
            self.early.pop_front();
        }
        self.early.push_back(request);
    }

    fn take_request(&mut self, session: SessionId, id: RequestId) -> Option<Waiting<W>> {
        let waiting = self.requests.remove(&(session, id))?;
        if let Some(flight) = self.calls.get_mut(&waiting.call) {
            flight.requests = flight.requests.saturating_sub(1);
        }
        Some(waiting)
    }

    /// The call's handler finished: forgets the call and the reply slots of its
    /// server→client requests. Returns whether to send its answer: `false` when it was
    /// cancelled or its session ended (the core would drop the answer), or when it is
    /// not in flight.
    pub fn finish(&mut self, call: RequestHandle) -> bool {
        let Some(flight) = self.calls.remove(&call) else {
            return false;
        };
        if flight.requests > 0 {
            self.requests.retain(|_, w| w.call != call);
        }
        !flight.cancelled
    }

    /// Sends a server→client request on `call`'s stream (HTTP-POST-9) and keeps `reply`
    /// for its response; the response, a timeout or the end of the session or of the
    /// call answers or drops it. Call it under the same lock as
    /// [`handle_event`](Self::handle_event), with the server's events held back until
    /// the lock is released, so that the response cannot be handled before `reply` is
    /// kept.
    ///
    /// # Errors
    /// -32603 when the call is not in flight or has no session, the params are not
    /// JSON, [`Limits::max_requests`] are waiting already, or the core refuses to send.
    pub fn request(
        &mut self,
        server: &mut Server,
        now: Instant,
        call: RequestHandle,
        ask: Ask<'_>,
        reply: W,
    ) -> Result<(), CallError> {
        let method = ask.method;
        let Some(flight) = self.calls.get_mut(&call) else {
            return Err(CallError::internal(format!(
                "cannot send {method}: the call is over"
            )));
        };
        let session = flight.session.ok_or_else(|| {
            CallError::internal(format!(
                "cannot send {method}: requests to the client need a session; the \
                 2026-07-28 revision asks with an input_required result (MODERN-10)"
            ))
        })?;
        let text = ask.params.to_string();
        let raw = RawJson::new(&text).map_err(|_| CallError::internal("params are not JSON"))?;
        if self.requests.len() >= self.limits.requests {
            return Err(CallError::internal(format!(
                "cannot send {method}: too many requests await their response"
            )));
        }
        let deadline = ask.timeout.and_then(|t| now.checked_add(t));
        let id = server
            .request(now, Target::Request(call), method, Some(&raw), deadline)
            .map_err(|e| CallError::internal(format!("cannot send {method}: {e}")))?;
        flight.requests += 1;
        self.requests.insert((session, id), Waiting { call, reply });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::ErrorCode;
    use crate::server::{Config, ExchangeId, Transmit};
    use bytes::Bytes;
    use serde_json::json;
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::mpsc;

    /// A cancel signal a test reads.
    #[derive(Clone, Default, Debug)]
    struct Flag(Rc<Cell<bool>>);

    impl Flag {
        fn get(&self) -> bool {
            self.0.get()
        }
    }

    impl Cancel for Flag {
        fn cancel(&self) {
            self.0.set(true);
        }
    }

    /// A reply slot a test reads; dropped unanswered, its receiver sees it closed.
    #[derive(Debug)]
    struct Slot(mpsc::Sender<Result<Value, CallError>>);

    impl Reply for Slot {
        fn reply(self, answer: Result<Value, CallError>) {
            let _ = self.0.send(answer);
        }
    }

    struct Info;

    impl Describe for Info {
        fn capabilities(&self) -> Value {
            json!({"tools": {}})
        }
        fn server_info(&self) -> Value {
            json!({"name": "test", "version": "1"})
        }
    }

    /// A server on a virtual clock whose events the test hands to a dispatcher.
    struct Rig {
        server: Server,
        now: Instant,
        app: Dispatcher<Flag, Slot>,
        session: Option<String>,
        /// How to answer each started call.
        responders: HashMap<RequestHandle, Responder>,
    }

    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}"#;

    impl Rig {
        /// A rig serving every era, with no session: for 2026-07-28 requests.
        fn modern(limits: Limits) -> Self {
            let settings = Settings::new().with_limits(limits);
            Self {
                server: Server::new(
                    Config::new().with_eras(crate::server::Eras::ALL),
                    Box::new(|dst: &mut [u8]| dst.fill(3)),
                ),
                now: Instant::now(),
                app: Dispatcher::new(&settings, &mut |dst: &mut [u8]| dst.fill(1)),
                session: None,
                responders: HashMap::new(),
            }
        }

        /// POSTs a 2026-07-28 request: `params` are members before `_meta`, which
        /// gets `meta_extra` members after the protocol keys.
        fn post_modern(
            &mut self,
            id: &str,
            method: &str,
            name: Option<&str>,
            params: &str,
            meta_extra: &str,
        ) -> (ExchangeId, Vec<Event>) {
            let mut b = http::Request::builder()
                .method("POST")
                .uri("/mcp")
                .header("host", "127.0.0.1:8080")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", method);
            if let Some(name) = name {
                b = b.header("mcp-name", name);
            }
            let head = b.body(()).unwrap().into_parts().0;
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params}{META}{meta_extra}}}}}"#
            );
            let x = self.server.handle_head(self.now, head);
            self.server
                .handle_body(self.now, x, Bytes::copy_from_slice(body.as_bytes()));
            self.server.handle_body_end(self.now, x);
            (x, self.events())
        }

        /// Posts a 2026-07-28 `tools/call` of tool `t` and starts it.
        fn modern_call(
            &mut self,
            id: u32,
            params: &str,
            meta_extra: &str,
        ) -> (ExchangeId, CallInfo) {
            let params = format!(r#""name":"t",{params}"#);
            let (x, mut events) = self.post_modern(
                &id.to_string(),
                "tools/call",
                Some("t"),
                &params,
                meta_extra,
            );
            assert_eq!(events.len(), 1, "{events:?}");
            let (call, _) = self.run(events.remove(0));
            (x, call)
        }

        fn new(limits: Limits) -> Self {
            let mut n = 0u8;
            let entropy = Box::new(move |dst: &mut [u8]| {
                for b in dst {
                    n = n.wrapping_add(1);
                    *b = n;
                }
            });
            let settings = Settings::new().with_limits(limits);
            let mut rig = Self {
                server: Server::new(Config::new(), entropy),
                now: Instant::now(),
                app: Dispatcher::new(&settings, &mut |dst: &mut [u8]| dst.fill(1)),
                session: None,
                responders: HashMap::new(),
            };
            rig.initialize();
            rig
        }

        fn head(&self, method: &str) -> http::request::Parts {
            let mut b = http::Request::builder()
                .method(method)
                .uri("/mcp")
                .header("host", "127.0.0.1:8080")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json");
            if let Some(s) = &self.session {
                b = b
                    .header("mcp-session-id", s.as_str())
                    .header("mcp-protocol-version", "2025-11-25");
            }
            b.body(()).unwrap().into_parts().0
        }

        /// POSTs `body`: its exchange, and the events it caused.
        fn post(&mut self, body: &str) -> (ExchangeId, Vec<Event>) {
            let x = self.server.handle_head(self.now, self.head("POST"));
            self.server
                .handle_body(self.now, x, Bytes::copy_from_slice(body.as_bytes()));
            self.server.handle_body_end(self.now, x);
            (x, self.events())
        }

        /// POSTs a request and returns its exchange and its event (not dispatched).
        fn call(&mut self, id: u32) -> (ExchangeId, Event) {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t","_meta":{{"progressToken":"p"}}}}}}"#
            );
            let (x, mut events) = self.post(&body);
            assert_eq!(events.len(), 1, "{events:?}");
            (x, events.remove(0))
        }

        /// POSTs the cancel of request `id` and returns its event (not dispatched).
        fn cancel_of(&mut self, id: u32) -> Event {
            let body = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
            );
            let (_, events) = self.post(&body);
            let cancel = events
                .into_iter()
                .find(|e| matches!(e, Event::Cancelled { .. }));
            cancel.expect("the core reports the cancel")
        }

        fn events(&mut self) -> Vec<Event> {
            std::iter::from_fn(|| self.server.poll_event()).collect()
        }

        /// The body bytes written to `x` so far.
        fn written(&mut self, x: ExchangeId) -> String {
            let mut out = Vec::new();
            while let Some(t) = self.server.poll_transmit(x) {
                if let Transmit::Data(d) = t {
                    out.extend_from_slice(&d);
                }
            }
            String::from_utf8(out).unwrap()
        }

        /// The JSON messages in what was written to `x` (SSE `data:` lines or a body).
        fn messages(&mut self, x: ExchangeId) -> Vec<Value> {
            let text = self.written(x);
            let lines: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect();
            if lines.is_empty() && !text.is_empty() {
                return vec![serde_json::from_str(&text).unwrap()];
            }
            lines
                .iter()
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        }

        /// Feeds `event` to the dispatcher, applying a [`Step::Act`] as the adapters
        /// do; returns any other step.
        fn dispatch(&mut self, event: Event) -> Step<Flag> {
            match self.app.handle_event(event, &Info) {
                Step::Act(act) => {
                    let mut act = act;
                    act.apply(&mut self.server, self.now);
                    Step::Done
                }
                step => step,
            }
        }

        /// Feeds `event`, which must start a call.
        fn run(&mut self, event: Event) -> (CallInfo, Flag) {
            match self.dispatch(event) {
                Step::Run(start) => {
                    let (info, flag, responder) = start.begin().expect("begins");
                    self.responders.insert(info.handle(), responder);
                    (info, flag)
                }
                other => panic!("not started: {other:?}"),
            }
        }

        /// Answers a started call as the adapters do once it finished.
        fn answer(&mut self, call: RequestHandle, result: Result<Value, CallError>) {
            let responder = self.responders.remove(&call).expect("a started call");
            responder.answer(&mut self.server, self.now, result);
        }

        fn initialize(&mut self) {
            let (x, events) = self.post(
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            );
            let mut session = None;
            for e in events {
                if let Event::Request(r) = &e {
                    session = r.session();
                }
                assert!(matches!(self.dispatch(e), Step::Done));
            }
            let session = session.expect("initialize opens a session");
            self.session = self.server.session_header(session).map(str::to_owned);
            let init = self.messages(x);
            assert_eq!(
                init[0]["result"],
                json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "test", "version": "1"},
                })
            );
            let (_, events) =
                self.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
            for e in events {
                assert!(matches!(self.dispatch(e), Step::Done));
            }
        }

        /// Sends a server→client request on `call` (`timeout` from now).
        fn ask(
            &mut self,
            call: &CallInfo,
            timeout: Option<Duration>,
        ) -> (
            Result<(), CallError>,
            mpsc::Receiver<Result<Value, CallError>>,
        ) {
            let (tx, rx) = mpsc::channel();
            let ask = Ask {
                method: "elicitation/create",
                params: &json!({"message": "?"}),
                timeout,
            };
            let sent = self
                .app
                .request(&mut self.server, self.now, call.handle(), ask, Slot(tx));
            (sent, rx)
        }
    }

    #[test]
    fn initialize_and_ping_are_answered_without_a_call() {
        // `Rig::new` checked the InitializeResult: the negotiated revision, the
        // handler's capabilities and serverInfo.
        let mut rig = Rig::new(Limits::new());
        let (x, events) = rig.post(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        for e in events {
            assert!(matches!(rig.dispatch(e), Step::Done));
        }
        assert_eq!(rig.messages(x)[0]["result"], json!({}));
        assert_eq!(rig.app.calls(), 0);
    }

    #[test]
    fn a_request_starts_a_call_with_its_method_params_and_progress_token() {
        let mut rig = Rig::new(Limits::new());
        let (x, request) = rig.call(3);
        let (call, flag) = rig.run(request);
        assert_eq!(call.method(), "tools/call");
        assert_eq!(call.params().unwrap()["name"], "t");
        assert_eq!(call.progress_token(), Some(&json!("p")));
        assert!(call.session().is_some());
        assert!(!flag.get());
        assert_eq!(rig.app.calls(), 1);
        call.progress(&mut rig.server, rig.now, 1.0, Some(2.0))
            .unwrap();
        assert!(rig.app.finish(call.handle()), "a live call is answered");
        rig.answer(call.handle(), Ok(json!({"ok": 1})));
        let messages = rig.messages(x);
        assert_eq!(messages[0]["method"], "notifications/progress");
        assert_eq!(
            messages[0]["params"],
            json!({"progressToken": "p", "progress": 1.0, "total": 2.0})
        );
        assert_eq!(messages[1]["result"], json!({"ok": 1}));
        assert_eq!(rig.app.calls(), 0);
    }

    /// HTTP-POST-12: events of different inputs may be handled at the same time, so a
    /// cancel can be handled before its request: the call then starts cancelled, and
    /// the cancel is not kept.
    #[test]
    fn http_post_12_a_cancel_before_its_request_starts_the_call_cancelled() {
        let mut rig = Rig::new(Limits::new());
        let (x, request) = rig.call(5);
        let cancel = rig.cancel_of(5);
        assert!(matches!(rig.dispatch(cancel), Step::Done));
        assert_eq!(rig.app.early_cancels(), 1);
        let (call, flag) = rig.run(request);
        assert!(flag.get(), "the call starts cancelled");
        assert_eq!(rig.app.early_cancels(), 0);
        assert!(!rig.app.finish(call.handle()), "its answer is not sent");
        assert!(rig.messages(x).iter().all(|m| m.get("result").is_none()));
    }

    /// HTTP-POST-12: `notifications/cancelled` for a running call fires its signal, and
    /// the answer it gives after is dropped.
    #[test]
    fn http_post_12_a_cancel_during_a_call_fires_its_signal_and_drops_its_answer() {
        let mut rig = Rig::new(Limits::new());
        let (x, request) = rig.call(6);
        let (call, flag) = rig.run(request);
        assert!(!flag.get());
        let cancel = rig.cancel_of(6);
        assert!(matches!(rig.dispatch(cancel), Step::Done));
        assert!(flag.get(), "the running call sees the cancel");
        assert_eq!(rig.app.early_cancels(), 0);
        assert!(
            !rig.app.finish(call.handle()),
            "the answer after the cancel is dropped"
        );
        assert!(rig.messages(x).iter().all(|m| m.get("result").is_none()));
        assert_eq!(rig.app.calls(), 0);
    }

    #[test]
    fn early_cancels_are_bounded_forgetting_the_oldest() {
        let mut rig = Rig::new(Limits::new().with_max_early_cancels(2));
        let requests: Vec<Event> = (10..13).map(|id| rig.call(id).1).collect();
        for id in 10..13 {
            let cancel = rig.cancel_of(id);
            assert!(matches!(rig.dispatch(cancel), Step::Done));
        }
        assert_eq!(rig.app.early_cancels(), 2);
        let flags: Vec<bool> = requests.into_iter().map(|r| rig.run(r).1.get()).collect();
        assert_eq!(
            flags,
            [false, true, true],
            "the oldest cancel was forgotten"
        );
        assert_eq!(rig.app.early_cancels(), 0);
    }

    #[test]
    fn calls_beyond_the_bound_are_answered_busy_and_not_started() {
        let mut rig = Rig::new(Limits::new().with_max_calls(1));
        let (_, first) = rig.call(1);
        let (first, _) = rig.run(first);
        let (x, second) = rig.call(2);
        assert!(matches!(rig.dispatch(second), Step::Done));
        let busy = &rig.messages(x)[0];
        assert_eq!(busy["error"]["code"], ErrorCode::INTERNAL_ERROR.0);
        assert_eq!(rig.app.calls(), 1);
        assert!(rig.app.finish(first.handle()));
        let (_, third) = rig.call(3);
        let _ = rig.run(third);
    }

    /// HTTP-POST-9: a call's request to the client goes out on its stream, and the
    /// client's response reaches the call that asked.
    #[test]
    fn http_post_9_a_clients_response_reaches_the_call_that_asked() {
        let mut rig = Rig::new(Limits::new());
        let (x, request) = rig.call(7);
        let (call, _) = rig.run(request);
        let (sent, rx) = rig.ask(&call, None);
        sent.unwrap();
        assert_eq!(rig.app.pending_requests(), 1);
        let asked = rig.messages(x);
        assert_eq!(asked[0]["method"], "elicitation/create");
        let body = json!({"jsonrpc": "2.0", "id": asked[0]["id"], "result": {"action": "accept"}});
        let (_, events) = rig.post(&body.to_string());
        for e in events {
            assert!(matches!(rig.dispatch(e), Step::Done));
        }
        assert_eq!(rx.try_recv().unwrap(), Ok(json!({"action": "accept"})));
        assert_eq!(rig.app.pending_requests(), 0);
    }

    /// A server→client request's timeout is the core's deadline, on the time the
    /// inputs carry: before it nothing happens; after it the waiter learns no answer
    /// will come.
    #[test]
    fn a_request_timeout_fires_at_the_injected_time_and_drops_the_waiter() {
        let mut rig = Rig::new(Limits::new());
        let (_, request) = rig.call(8);
        let (call, _) = rig.run(request);
        let (sent, rx) = rig.ask(&call, Some(Duration::from_secs(1)));
        sent.unwrap();
        let due = rig.server.poll_timeout().expect("a deadline");
        assert!(due <= rig.now + Duration::from_secs(1));
        rig.server
            .handle_timeout(rig.now + Duration::from_millis(500));
        for e in rig.events() {
            assert!(matches!(rig.dispatch(e), Step::Done));
        }
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Empty));
        rig.now += Duration::from_secs(1);
        rig.server.handle_timeout(rig.now);
        let events = rig.events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::RequestTimedOut { .. }))
        );
        for e in events {
            assert!(matches!(rig.dispatch(e), Step::Done));
        }
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
        assert_eq!(rig.app.pending_requests(), 0);
        assert!(rig.app.finish(call.handle()), "the call itself goes on");
    }

    #[test]
    fn the_end_of_a_session_cancels_its_calls_and_drops_their_waiters() {
        let mut rig = Rig::new(Limits::new());
        let (_, request) = rig.call(9);
        let (call, flag) = rig.run(request);
        let (sent, rx) = rig.ask(&call, None);
        sent.unwrap();
        let head = rig.head("DELETE");
        let x = rig.server.handle_head(rig.now, head);
        rig.server.handle_body_end(rig.now, x);
        let events = rig.events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::SessionClosed { .. }))
        );
        for e in events {
            assert!(matches!(rig.dispatch(e), Step::Done));
        }
        assert!(flag.get());
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
        assert!(!rig.app.finish(call.handle()));
    }

    #[test]
    fn a_finished_call_forgets_its_waiters_and_cannot_ask_again() {
        let mut rig = Rig::new(Limits::new().with_max_requests(1));
        let (_, request) = rig.call(4);
        let (call, _) = rig.run(request);
        let (sent, rx) = rig.ask(&call, None);
        sent.unwrap();
        let (full, _) = rig.ask(&call, None);
        assert!(full.unwrap_err().message.contains("too many requests"));
        assert!(rig.app.finish(call.handle()));
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
        assert_eq!(rig.app.pending_requests(), 0);
        let (over, _) = rig.ask(&call, None);
        assert!(over.unwrap_err().message.contains("the call is over"));
    }

    #[test]
    fn modern_14_modern_19_server_discover_is_answered_by_the_layer() {
        let mut rig = Rig::modern(Limits::new());
        let (x, events) = rig.post_modern("1", "server/discover", None, "", "}");
        for e in events {
            assert!(matches!(rig.dispatch(e), Step::Done));
        }
        let result = &rig.messages(x)[0]["result"];
        assert_eq!(result["resultType"], "complete");
        assert_eq!(
            result["supportedVersions"][0], "2026-07-28",
            "every revision served, the sessionless one first: {result}"
        );
        assert!(result["supportedVersions"].as_array().unwrap().len() > 1);
        assert_eq!(result["capabilities"], json!({"tools": {}}));
        assert_eq!(
            (result["ttlMs"].clone(), result["cacheScope"].clone()),
            (json!(0), json!("private"))
        );
        assert_eq!(
            result["_meta"][crate::app::SERVER_INFO],
            json!({"name": "test", "version": "1"})
        );
        assert_eq!(rig.app.calls(), 0);
    }

    #[test]
    fn modern_18_modern_3_a_handlers_result_is_completed_for_the_revision() {
        let mut rig = Rig::modern(Limits::new());
        let (x, call) = rig.modern_call(2, r#""arguments":{},"#, "}");
        assert!(call.session().is_none());
        assert_eq!(call.client_capabilities(), Some(&json!({"sampling": {}})));
        assert!(call.client_supports("sampling") && !call.client_supports("elicitation"));
        assert!(rig.app.finish(call.handle()));
        rig.answer(call.handle(), Ok(json!({"content": []})));
        let result = &rig.messages(x)[0]["result"];
        assert_eq!(result["resultType"], "complete");
        assert_eq!(result["_meta"][crate::app::SERVER_INFO]["name"], "test");
        assert!(result.get("ttlMs").is_none(), "tools/call is not cacheable");
    }

    #[test]
    fn modern_21_log_messages_pass_only_at_or_above_the_requests_log_level() {
        let mut rig = Rig::modern(Limits::new());
        let message = |level: &str| json!({"level": level, "data": level});
        // No logLevel: nothing.
        let (x, call) = rig.modern_call(3, "", "}");
        call.notify(&mut rig.server, rig.now, LOG_MESSAGE, &message("emergency"))
            .unwrap();
        assert!(rig.app.finish(call.handle()));
        rig.answer(call.handle(), Ok(json!({})));
        let sent = rig.messages(x);
        assert_eq!(sent.len(), 1, "only the result: {sent:?}");
        // logLevel warning: warning and above.
        let (x, call) = rig.modern_call(4, "", r#","io.modelcontextprotocol/logLevel":"warning"}"#);
        for level in ["debug", "info", "warning", "error"] {
            call.notify(&mut rig.server, rig.now, LOG_MESSAGE, &message(level))
                .unwrap();
        }
        assert!(rig.app.finish(call.handle()));
        rig.answer(call.handle(), Ok(json!({})));
        let levels: Vec<Value> = rig
            .messages(x)
            .iter()
            .filter(|m| m["method"] == LOG_MESSAGE)
            .map(|m| m["params"]["level"].clone())
            .collect();
        assert_eq!(levels, [json!("warning"), json!("error")]);
    }

    #[test]
    fn modern_21_an_invalid_log_level_is_refused_before_the_handler() {
        let mut rig = Rig::modern(Limits::new());
        let (x, mut events) = rig.post_modern(
            "5",
            "tools/call",
            Some("t"),
            r#""name":"t","#,
            r#","io.modelcontextprotocol/logLevel":"loud"}"#,
        );
        let Step::Run(start) = rig.dispatch(events.remove(0)) else {
            panic!("a call");
        };
        let (responder, e) = start.begin().unwrap_err();
        assert_eq!(e.code, crate::jsonrpc::ErrorCode::INVALID_PARAMS);
        assert!(rig.app.finish(responder.handle()));
        responder.answer(&mut rig.server, rig.now, Err(e));
        assert_eq!(rig.messages(x)[0]["error"]["code"], -32602);
    }

    #[test]
    fn modern_23_request_state_round_trips_sealed_and_a_tampered_one_is_refused() {
        let mut rig = Rig::modern(Limits::new());
        let (x, call) = rig.modern_call(6, "", "}");
        assert!(rig.app.finish(call.handle()));
        let asked =
            crate::app::input_required(json!({"q": crate::app::roots_request()}), Some("round=1"));
        rig.answer(call.handle(), Ok(asked));
        let result = rig.messages(x)[0]["result"].clone();
        assert_eq!(result["resultType"], "input_required");
        let sealed = result["requestState"].as_str().unwrap().to_owned();
        assert_ne!(sealed, "round=1", "the client sees it sealed");
        // The retry: the handler reads its own text.
        let retry =
            format!(r#""requestState":"{sealed}","inputResponses":{{"q":{{"roots":[]}}}},"#);
        let (_, call) = rig.modern_call(7, &retry, "}");
        assert_eq!(call.request_state(), Some("round=1"));
        assert_eq!(call.params().unwrap()["requestState"], "round=1");
        assert_eq!(call.input_responses(), Some(&json!({"q": {"roots": []}})));
        assert!(rig.app.finish(call.handle()));
        // A tampered state never reaches a handler.
        let tampered = format!(r#""requestState":"{sealed}-TAMPERED","#);
        let params = format!(r#""name":"t",{tampered}"#);
        let (x, mut events) = rig.post_modern("8", "tools/call", Some("t"), &params, "}");
        let Step::Run(start) = rig.dispatch(events.remove(0)) else {
            panic!("a call");
        };
        let (responder, e) = start.begin().unwrap_err();
        assert!(e.message.contains("requestState"), "{}", e.message);
        assert!(rig.app.finish(responder.handle()));
        responder.answer(&mut rig.server, rig.now, Err(e));
        assert_eq!(rig.messages(x)[0]["error"]["code"], -32602);
    }

    #[test]
    fn modern_10_a_modern_call_cannot_send_a_request_to_the_client() {
        let mut rig = Rig::modern(Limits::new());
        let (_, call) = rig.modern_call(9, "", "}");
        let (sent, _) = rig.ask(&call, None);
        assert!(sent.unwrap_err().message.contains("input_required"));
    }

    /// Posts a listen with `filter` and returns its exchange after dispatching it.
    fn listen(rig: &mut Rig, id: &str, filter: &str) -> ExchangeId {
        let params = format!(r#""notifications":{filter},"#);
        let (x, events) = rig.post_modern(id, "subscriptions/listen", None, &params, "}");
        for e in events {
            assert!(matches!(rig.dispatch(e), Step::Done));
        }
        x
    }

    struct Listening;

    impl Describe for Listening {
        fn capabilities(&self) -> Value {
            json!({"tools": {"listChanged": true}, "prompts": {"listChanged": true}})
        }
        fn server_info(&self) -> Value {
            json!({"name": "test", "version": "1"})
        }
    }

    #[test]
    fn modern_13_a_change_announced_by_another_node_reaches_the_listens_here() {
        let mut rig = Rig::modern(Limits::new());
        let params = r#""notifications":{"toolsListChanged":true},"#;
        let (tools, events) = rig.post_modern("1", "subscriptions/listen", None, params, "}");
        for e in events {
            match rig.app.handle_event(e, &Listening) {
                Step::Act(mut act) => act.apply(&mut rig.server, rig.now),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(rig.messages(tools).len(), 1, "the acknowledgement");
        // What another node's application announced comes as an event.
        let announced = Event::Announced {
            payload: Change::Tools.encode().into(),
        };
        match rig.app.handle_event(announced, &Listening) {
            Step::Act(mut act) => act.apply(&mut rig.server, rig.now),
            other => panic!("{other:?}"),
        }
        let heard = rig.messages(tools);
        assert_eq!(heard.len(), 1);
        assert_eq!(heard[0]["method"], "notifications/tools/list_changed");
        // Garbage announced is nothing to hear.
        let garbage = Event::Announced {
            payload: bytes::Bytes::from_static(b"\xff tools"),
        };
        assert!(matches!(
            rig.app.handle_event(garbage, &Listening),
            Step::Done
        ));
        // A change made here is told to the other nodes too, once, by any shard.
        let act = rig.app.changed(&Change::Prompts);
        assert!(
            !act.is_empty(),
            "the announcement, with no listen for prompts"
        );
        assert_eq!(act.notifications(), 0);
        for change in [
            Change::Tools,
            Change::Prompts,
            Change::Resources,
            Change::Resource("file:///a b".into()),
        ] {
            assert_eq!(Change::decode(&change.encode()), Some(change));
        }
    }

    #[test]
    fn modern_13_listen_is_acknowledged_and_hears_only_what_it_asked_for() {
        let mut rig = Rig::modern(Limits::new());
        let post = |rig: &mut Rig, id: &str, filter: &str| {
            let params = format!(r#""notifications":{filter},"#);
            let (x, events) = rig.post_modern(id, "subscriptions/listen", None, &params, "}");
            for e in events {
                match rig.app.handle_event(e, &Listening) {
                    Step::Act(mut act) => act.apply(&mut rig.server, rig.now),
                    other => panic!("{other:?}"),
                }
            }
            x
        };
        let tools = post(&mut rig, r#""listen:0""#, r#"{"toolsListChanged":true}"#);
        let prompts = post(
            &mut rig,
            "17",
            r#"{"promptsListChanged":true,"resourcesListChanged":true}"#,
        );
        assert_eq!(rig.app.listens(), 2);
        let ack = &rig.messages(tools)[0];
        assert_eq!(ack["method"], crate::app::ACKNOWLEDGED);
        assert_eq!(
            ack["params"],
            json!({"_meta": {crate::app::SUBSCRIPTION_ID: "listen:0"}, "notifications": {"toolsListChanged": true}})
        );
        let ack = &rig.messages(prompts)[0];
        assert_eq!(
            ack["params"]["notifications"],
            json!({"promptsListChanged": true}),
            "resources.listChanged is not offered"
        );
        assert_eq!(ack["params"]["_meta"][crate::app::SUBSCRIPTION_ID], 17);
        rig.app
            .changed(&Change::Tools)
            .apply(&mut rig.server, rig.now);
        let heard = rig.messages(tools);
        assert_eq!(heard.len(), 1);
        assert_eq!(heard[0]["method"], "notifications/tools/list_changed");
        assert_eq!(
            heard[0]["params"]["_meta"][crate::app::SUBSCRIPTION_ID],
            "listen:0"
        );
        assert!(
            rig.messages(prompts).is_empty(),
            "MODERN-13: the filter is honoured"
        );
        // The graceful end is the listen's result.
        rig.app.end_listens().apply(&mut rig.server, rig.now);
        let end = &rig.messages(tools)[0];
        assert_eq!(end["id"], "listen:0");
        assert_eq!(
            end["result"]["_meta"][crate::app::SUBSCRIPTION_ID],
            "listen:0"
        );
        assert_eq!(end["result"]["resultType"], "complete");
        assert_eq!(rig.app.listens(), 0);
    }

    #[test]
    fn modern_11_a_closed_listen_stream_is_forgotten_and_listens_are_bounded() {
        let mut rig = Rig::modern(Limits::new().with_max_listens(1));
        let first = listen(&mut rig, "1", r#"{"toolsListChanged":true}"#);
        assert_eq!(rig.app.listens(), 1);
        let second = listen(&mut rig, "2", r#"{"toolsListChanged":true}"#);
        assert_eq!(rig.messages(second)[0]["error"]["code"], -32603, "busy");
        rig.server.handle_disconnect(rig.now, first);
        for e in rig.events() {
            assert!(matches!(rig.dispatch(e), Step::Done));
        }
        assert_eq!(rig.app.listens(), 0);
        // Nothing for a listen here (the other nodes of a cluster are still told).
        assert_eq!(rig.app.changed(&Change::Tools).notifications(), 0);
        let bad = listen(&mut rig, "3", "true");
        assert_eq!(rig.messages(bad)[0]["error"]["code"], -32602);
    }

    #[test]
    fn an_act_goes_to_the_shard_of_each_request() {
        let configs = Config::new().shards(2);
        let mut servers: Vec<Server> = configs
            .into_iter()
            .map(|c| Server::new(c, Box::new(|dst: &mut [u8]| dst.fill(5))))
            .collect();
        let mut app: Dispatcher<Flag, Slot> =
            Dispatcher::new(&Settings::new(), &mut |dst: &mut [u8]| dst.fill(1));
        let now = Instant::now();
        let mut exchanges = Vec::new();
        for (n, server) in servers.iter_mut().enumerate() {
            let head = http::Request::post("/mcp")
                .header("host", "127.0.0.1:8080")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "subscriptions/listen")
                .body(())
                .unwrap()
                .into_parts()
                .0;
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{n},"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}}}"#
            );
            let x = server.handle_head(now, head);
            server.handle_body(now, x, Bytes::from(body));
            server.handle_body_end(now, x);
            let event = server.poll_event().expect("the listen");
            let Step::Act(mut ack) = app.handle_event(event, &Listening) else {
                panic!("acknowledged by the layer");
            };
            ack.apply(server, now);
            assert!(ack.is_empty(), "the ack goes to its own shard");
            exchanges.push(x);
        }
        let mut change = app.changed(&Change::Tools);
        change.apply(&mut servers[1], now);
        assert!(!change.is_empty(), "shard 0's listen is left for shard 0");
        change.apply(&mut servers[0], now);
        assert!(change.is_empty());
        for (server, x) in servers.iter_mut().zip(exchanges) {
            let mut text = Vec::new();
            while let Some(t) = server.poll_transmit(x) {
                if let Transmit::Data(d) = t {
                    text.extend_from_slice(&d);
                }
            }
            let text = String::from_utf8(text).unwrap();
            assert!(text.contains("notifications/tools/list_changed"), "{text}");
        }
    }
}
