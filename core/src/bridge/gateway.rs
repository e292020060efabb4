//! The gateway's state machine: see the [module docs](super).

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use serde_json::{Map, Value, json};

use super::{Action, ChildId, Config, Exit, Happening, Report, Role};
use crate::Entropy;
use crate::ProtocolVersion;
use crate::app::{
    CallError, CallInfo, Cancel, Change, Describe, Dispatcher, Reply, Responder, Settings, Step,
    input_required, may_ask_input,
};
use crate::jsonrpc::{Envelope, ErrorCode, Json, Message, Outgoing, RawJson, RequestId, ToJson};
use crate::server::{Era, Event, IncomingRequest, RequestHandle, Server, SessionId, Target};
use crate::stdio::{self, Decoder};

/// The revision the gateway initializes pool children with: the newest with a
/// handshake, which every stdio server of the 2025 generation speaks or negotiates down.
const POOL_VERSION: ProtocolVersion = ProtocolVersion::V2025_11_25;

/// The id of the gateway's `initialize` on a pool child; its requests count up from 1.
const INIT_ID: i64 = 0;

/// The keys of a 2026-07-28 request's `_meta` that carry the protocol itself: a pool
/// child speaks a revision with a handshake and learnt them from it (BRIDGE-2).
const PROTOCOL_META: [&str; 4] = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/logLevel",
];

/// The dispatcher's cancel signal: it tells whether a cancel came before the call
/// started; later cancels the gateway forwards itself, from the event.
#[derive(Clone, Debug, Default)]
struct Early(Cell<bool>);

impl Cancel for Early {
    fn cancel(&self) {
        self.0.set(true);
    }
}

/// The dispatcher's reply slot, never made: the gateway relays a child's questions and
/// their answers itself.
#[derive(Debug)]
enum Relayed {}

impl Reply for Relayed {
    fn reply(self, _: Result<Value, CallError>) {
        match self {}
    }
}

/// What the pool children said of the stdio server in their `initialize` answer: what
/// `server/discover` and the 2026-07-28 results tell (MODERN-19, MODERN-3).
#[derive(Debug)]
struct Known {
    capabilities: Value,
    server_info: Value,
}

impl Describe for Known {
    fn capabilities(&self) -> Value {
        self.capabilities.clone()
    }

    fn server_info(&self) -> Value {
        self.server_info.clone()
    }
}

/// Where a child is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// Its `initialize` is not answered yet (the client's, for a session child; the
    /// gateway's, for a pool child).
    Starting,
    /// Serving.
    Ready,
    /// Being ended (STDIO-5): its input is closed; `Terminate`, then `Kill`, follow at
    /// its stop timer.
    Stopping(Stop),
}

/// The step of a child's shutdown done last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    InputClosed,
    Terminated,
    Killed,
}

/// What a pool child runs (BRIDGE-2): one request at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Slot {
    Idle,
    /// The request `wire` (its id on the child's input), for `holder`.
    Runs {
        wire: RequestId,
        holder: Holder,
    },
}

/// Who waits for the request a pool child runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    /// An open HTTP request.
    Call(RequestHandle),
    /// Nobody yet: the child asked the client something, and the answer comes with a
    /// retry bearing this ticket (BRIDGE-3).
    Parked(u64),
}

/// One child process.
#[derive(Debug)]
struct Child {
    role: Role,
    life: Life,
    decoder: Decoder,
    /// Bytes handed out to write and not reported written.
    unwritten: usize,
    /// The later of its last output and the moment it last began to owe an answer.
    quiet_since: Instant,
    /// Whether a stall timer is pending for it.
    stall_armed: bool,
    /// The session's requests in flight on it, oldest first (a session child).
    calls: Vec<RequestHandle>,
    /// What it runs (a pool child).
    slot: Slot,
    /// The id of its next request from the gateway (a pool child).
    next_wire: i64,
}

impl Child {
    fn new(role: Role, lines: stdio::Limits, now: Instant) -> Self {
        Self {
            role,
            life: Life::Starting,
            decoder: Decoder::with_limits(lines),
            unwritten: 0,
            quiet_since: now,
            stall_armed: false,
            calls: Vec::new(),
            slot: Slot::Idle,
            next_wire: INIT_ID + 1,
        }
    }

    /// Whether requests wait on its output.
    fn owes(&self) -> bool {
        match self.life {
            Life::Stopping(_) => false,
            Life::Starting => true,
            Life::Ready => {
                !self.calls.is_empty()
                    || matches!(
                        self.slot,
                        Slot::Runs {
                            holder: Holder::Call(_),
                            ..
                        }
                    )
            }
        }
    }
}

/// How an HTTP request in flight on a child is answered.
#[derive(Debug)]
enum Answer {
    /// A session's `initialize`: with the child's result, its `protocolVersion` the one
    /// the transport negotiated.
    Initialize { version: ProtocolVersion },
    /// Any other request, through the application layer.
    Call {
        info: CallInfo,
        responder: Responder,
    },
}

/// An HTTP request in flight on a child.
#[derive(Debug)]
struct Flight {
    child: ChildId,
    /// Its id on the child's input.
    wire: RequestId,
    answer: Answer,
}

/// A 2026-07-28 request waiting for a pool child.
#[derive(Debug)]
struct Queued {
    info: CallInfo,
    responder: Responder,
}

/// A question a pool child asked the client (BRIDGE-3).
#[derive(Debug)]
struct Question {
    /// Its key in `inputRequests` and `inputResponses`.
    key: String,
    /// Its id on the child's output.
    id: RequestId,
    method: String,
    params: Option<Value>,
}

/// A pool child's request waiting for the retry that brings the client's answers.
#[derive(Debug)]
struct Parked {
    child: ChildId,
    wire: RequestId,
    questions: Vec<Question>,
    /// The questions given a key so far: a new one's key is never one the client saw.
    keys: u32,
    /// The child's answer to `wire`, when it gave one while the request waited (it
    /// stopped waiting for the client): the retry gets it, and the child is free.
    done: Option<Envelope>,
    /// Until when the retry may come.
    until: Instant,
}

/// The gateway's timers; a fired timer checks that it still applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Stall(ChildId),
    Stop(ChildId),
    Parked(u64),
}

/// A stdio MCP server behind a [`Server`]: see the [module docs](super).
///
/// Drive it like every machine of the crate: hand it the server's events
/// ([`handle_event`](Self::handle_event)), each child's output
/// ([`child_output`](Self::child_output)), written bytes
/// ([`child_wrote`](Self::child_wrote)) and end ([`child_exited`](Self::child_exited)),
/// and the time ([`handle_timeout`](Self::handle_timeout) at
/// [`poll_timeout`](Self::poll_timeout)); then do its [`poll_action`](Self::poll_action)s
/// and drain the server. The calls that take a `&mut Server` act on it directly.
#[derive(Debug)]
pub struct Gateway {
    config: Config,
    dispatcher: Dispatcher<Early, Relayed>,
    children: HashMap<ChildId, Child>,
    next_child: u64,
    /// Each session's child.
    sessions: HashMap<SessionId, ChildId>,
    flights: HashMap<RequestHandle, Flight>,
    by_wire: HashMap<(ChildId, RequestId), RequestHandle>,
    /// Pool children that run nothing, in the order they became free.
    idle: VecDeque<ChildId>,
    /// Pool children alive, starting ones included.
    pool: usize,
    /// 2026-07-28 requests waiting for a pool child, oldest first.
    queue: VecDeque<Queued>,
    /// 2026-07-28 requests that came before any pool child described the server.
    early: VecDeque<IncomingRequest>,
    known: Option<Arc<Known>>,
    /// What is told before `known`.
    unknown: Arc<Known>,
    parked: HashMap<u64, Parked>,
    next_ticket: u64,
    /// A session child's questions to its client: the server's id → the child's.
    asks: HashMap<(SessionId, RequestId), (ChildId, RequestId)>,
    timers: BTreeSet<(Instant, Timer)>,
    actions: VecDeque<Action>,
    shutting_down: bool,
}

impl Gateway {
    /// A gateway with `config`, its application layer set up by `settings` (its
    /// bounds, the key that seals `requestState`). With a pool, the first pool child
    /// starts at once: 2026-07-28 requests wait until it has described the server.
    pub fn new(
        config: Config,
        settings: &Settings,
        entropy: &mut dyn Entropy,
        now: Instant,
    ) -> Self {
        let mut gateway = Self {
            dispatcher: Dispatcher::new(settings, entropy),
            config,
            children: HashMap::new(),
            next_child: 1,
            sessions: HashMap::new(),
            flights: HashMap::new(),
            by_wire: HashMap::new(),
            idle: VecDeque::new(),
            pool: 0,
            queue: VecDeque::new(),
            early: VecDeque::new(),
            known: None,
            unknown: Arc::new(Known {
                capabilities: json!({}),
                server_info: crate::app::default_server_info(),
            }),
            parked: HashMap::new(),
            next_ticket: 1,
            asks: HashMap::new(),
            timers: BTreeSet::new(),
            actions: VecDeque::new(),
            shutting_down: false,
        };
        if gateway.config.pool > 0 {
            gateway.spawn_pool(now);
        }
        gateway
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether a pool child has described the stdio server (always `false` without a
    /// pool): 2026-07-28 requests are served from then on.
    pub fn is_ready(&self) -> bool {
        self.known.is_some()
    }

    /// The children alive (being ended included).
    pub fn children(&self) -> usize {
        self.children.len()
    }

    /// What `child` serves, while it lives: to name it in its standard error's log
    /// lines (STDIO-4).
    pub fn role(&self, child: ChildId) -> Option<Role> {
        self.children.get(&child).map(|c| c.role)
    }

    /// The requests in flight on children, and those waiting for a pool child.
    pub fn in_flight(&self) -> usize {
        self.flights.len() + self.queue.len() + self.early.len()
    }

    /// The next thing for the adapter to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|(at, _)| *at)
    }

    // ---- The server's side -------------------------------------------------------

    /// Acts on one of the server's events (all of them come here: the gateway is the
    /// server's application).
    pub fn handle_event(&mut self, server: &mut Server, now: Instant, event: Event) {
        match event {
            Event::Request(request) => self.request(server, now, request),
            Event::Notification { session, message } => {
                // `notifications/initialized`, roots changed, a cancel of a request the
                // server no longer holds: the session's child takes them as they are.
                if let Some(child) = session.and_then(|s| self.sessions.get(&s).copied()) {
                    self.write_text(child, message.text().as_str());
                }
            }
            Event::Response { session, message } => {
                let Some(id) = message.id().cloned() else {
                    return;
                };
                if let Some((child, wire)) = self.asks.remove(&(session, id)) {
                    self.write_answer(child, &wire, &message);
                }
            }
            Event::RequestTimedOut { session, id } => {
                if let Some((child, wire)) = self.asks.remove(&(session, id)) {
                    self.write_error(child, &wire, "the client did not answer in time");
                }
            }
            Event::Cancelled { request, reason } => {
                self.cancelled(server, now, request, reason.as_deref());
                let step = self
                    .dispatcher
                    .handle_event(Event::Cancelled { request, reason }, &*self.described());
                self.step(server, now, step, None);
            }
            Event::SessionClosed { session, reason } => {
                let step = self
                    .dispatcher
                    .handle_event(Event::SessionClosed { session, reason }, &*self.described());
                self.step(server, now, step, None);
                self.session_closed(now, session);
            }
            event @ Event::Announced { .. } => {
                let step = self.dispatcher.handle_event(event, &*self.described());
                self.step(server, now, step, None);
            }
        }
    }

    /// What the application layer is told of the server: the pool's description, or,
    /// before it (and without a pool), nothing but this library's name.
    fn described(&self) -> Arc<Known> {
        Arc::clone(self.known.as_ref().unwrap_or(&self.unknown))
    }

    /// Does what the application layer decided; a request it starts is forwarded, its
    /// id and text (`forward`, taken before the layer had it) as they came.
    fn step(
        &mut self,
        server: &mut Server,
        now: Instant,
        step: Step<Early>,
        forward: Option<(RequestId, crate::Utf8Bytes)>,
    ) {
        match step {
            Step::Done => {}
            Step::Act(mut act) => act.apply(server, now),
            Step::Run(start) => {
                let handle = start.handle();
                match start.begin() {
                    Ok((info, early, responder)) => {
                        if early.0.get() {
                            // Cancelled before it started: the core drops any answer.
                            self.dispatcher.finish(handle);
                            return;
                        }
                        match (info.session(), forward) {
                            (Some(session), Some((id, text))) => {
                                self.forward_to_session(
                                    server,
                                    now,
                                    session,
                                    (id, text),
                                    info,
                                    responder,
                                );
                            }
                            _ => self.forward_to_pool(server, now, info, responder),
                        }
                    }
                    Err((responder, refusal)) => {
                        self.dispatcher.finish(handle);
                        responder.answer(server, now, Err(refusal));
                    }
                }
            }
        }
    }

    /// A client request.
    fn request(&mut self, server: &mut Server, now: Instant, request: IncomingRequest) {
        if request.era() == Era::Sessionless {
            if self.config.pool == 0 {
                let _ = server.respond_error(
                    now,
                    request.handle(),
                    ErrorCode::INTERNAL_ERROR,
                    "this bridge serves no 2026-07-28 requests",
                    None,
                );
                return;
            }
            if self.known.is_none() {
                // BRIDGE-2: the server is described by the pool's first `initialize`.
                if self.early.len() >= self.config.max_waiting {
                    let _ = server.respond_error(
                        now,
                        request.handle(),
                        ErrorCode::INTERNAL_ERROR,
                        &CallError::busy().message,
                        None,
                    );
                    return;
                }
                if self.pool == 0 {
                    self.spawn_pool(now);
                }
                self.early.push_back(request);
                return;
            }
        } else if request.method() == "initialize" {
            return self.initialize(server, now, &request);
        }
        let forward = request
            .session()
            .map(|_| (request.id().clone(), request.message().text().clone()));
        let step = self
            .dispatcher
            .handle_event(Event::Request(request), &*self.described());
        self.step(server, now, step, forward);
    }

    /// A session's `initialize` (BRIDGE-1): its own child, which answers it.
    fn initialize(&mut self, server: &mut Server, now: Instant, request: &IncomingRequest) {
        let handle = request.handle();
        let fail = |server: &mut Server, message: &str| {
            let _ = server.respond_error(now, handle, ErrorCode::INTERNAL_ERROR, message, None);
        };
        let Some(session) = request.session() else {
            return fail(server, "initialize without a session");
        };
        if self.shutting_down {
            return fail(server, "the bridge is shutting down");
        }
        if self.sessions.contains_key(&session) {
            return fail(server, "this session is initialized already");
        }
        // Children being ended (their sessions are over) do not count.
        if self.sessions.len() >= self.config.max_children {
            return fail(
                server,
                "too many sessions: no room for another stdio server",
            );
        }
        let version = request.version();
        let mut params: Value = request
            .message()
            .payload()
            .and_then(|p| serde_json::from_str(p.as_str()).ok())
            .unwrap_or_else(|| json!({}));
        if let Some(object) = params.as_object_mut() {
            object.insert("protocolVersion".into(), version.as_str().into());
        }
        let child = self.spawn(Role::Session(session), now);
        self.sessions.insert(session, child);
        let wire = request.id().clone();
        self.write_message(
            child,
            &Outgoing::Request {
                id: &wire,
                method: "initialize",
                params: Some(&Json(&params)),
            },
        );
        self.board(
            now,
            handle,
            Flight {
                child,
                wire,
                answer: Answer::Initialize { version },
            },
        );
    }

    /// A session-era request: to the session's child, its id as it is.
    fn forward_to_session(
        &mut self,
        server: &mut Server,
        now: Instant,
        session: SessionId,
        (wire, text): (RequestId, crate::Utf8Bytes),
        info: CallInfo,
        responder: Responder,
    ) {
        let handle = info.handle();
        let child = self.sessions.get(&session).copied();
        let Some(child) = child.filter(|c| self.is_serving(*c)) else {
            self.dispatcher.finish(handle);
            return responder.answer(
                server,
                now,
                Err(CallError::internal(
                    "this session's stdio server is gone; start a new session",
                )),
            );
        };
        // The line is the text and its line feed.
        if !self.has_room(child, text.len() + 1) {
            self.dispatcher.finish(handle);
            return responder.answer(server, now, Err(CallError::busy()));
        }
        self.write_text(child, text.as_str());
        self.board(
            now,
            handle,
            Flight {
                child,
                wire,
                answer: Answer::Call { info, responder },
            },
        );
    }

    /// Whether a child takes requests.
    fn is_serving(&self, child: ChildId) -> bool {
        self.children
            .get(&child)
            .is_some_and(|c| !matches!(c.life, Life::Stopping(_)))
    }

    /// Whether `bytes` more fit in what the child has to write (BRIDGE-5).
    fn has_room(&self, child: ChildId, bytes: usize) -> bool {
        self.children
            .get(&child)
            .is_some_and(|c| c.unwritten + bytes <= self.config.max_unwritten)
    }

    /// Keeps a request in flight on its child.
    fn board(&mut self, now: Instant, handle: RequestHandle, flight: Flight) {
        let child = flight.child;
        self.by_wire.insert((child, flight.wire.clone()), handle);
        if let Some(c) = self.children.get_mut(&child)
            && let Role::Session(_) = c.role
        {
            let owed = c.owes();
            c.calls.push(handle);
            if !owed {
                self.owing(now, child);
            }
        }
        self.flights.insert(handle, flight);
    }

    /// Takes a request off its child: it was answered, failed or cancelled.
    fn unboard(&mut self, handle: RequestHandle) -> Option<Flight> {
        let flight = self.flights.remove(&handle)?;
        self.by_wire.remove(&(flight.child, flight.wire.clone()));
        if let Some(c) = self.children.get_mut(&flight.child) {
            c.calls.retain(|h| *h != handle);
        }
        Some(flight)
    }

    /// A 2026-07-28 request: to a free pool child, else queued (BRIDGE-2); a retry that
    /// answers a child's questions to the child that asked them (BRIDGE-3).
    fn forward_to_pool(
        &mut self,
        server: &mut Server,
        now: Instant,
        info: CallInfo,
        responder: Responder,
    ) {
        if let Some(ticket) = info.request_state().and_then(ticket_of) {
            return self.resume(server, now, ticket, info, responder);
        }
        if let Some(child) = self.idle.pop_front() {
            return self.run(server, now, child, Queued { info, responder });
        }
        if self.queue.len() >= self.config.max_waiting {
            self.dispatcher.finish(info.handle());
            return responder.answer(server, now, Err(CallError::busy()));
        }
        self.queue.push_back(Queued { info, responder });
        if self.pool < self.config.pool && !self.shutting_down {
            self.spawn_pool(now);
        }
    }

    /// Runs a 2026-07-28 request on a free pool child: its id and progress token
    /// replaced by the child's next id, the protocol's `_meta` keys left out.
    fn run(&mut self, server: &mut Server, now: Instant, child: ChildId, call: Queued) {
        let Queued { info, responder } = call;
        let handle = info.handle();
        let Some(c) = self.children.get_mut(&child) else {
            return;
        };
        let wire = RequestId::int(c.next_wire);
        c.next_wire += 1;
        let mut params = info.params().cloned().unwrap_or_else(|| json!({}));
        if let Some(object) = params.as_object_mut() {
            object.remove("requestState");
            object.remove("inputResponses");
            if let Some(Value::Object(meta)) = object.get_mut("_meta") {
                for key in PROTOCOL_META {
                    meta.remove(key);
                }
                if meta.contains_key("progressToken") {
                    meta.insert("progressToken".into(), wire_token(&wire));
                }
                if meta.is_empty() {
                    object.remove("_meta");
                }
            }
        }
        let line = encode_line(&Outgoing::Request {
            id: &wire,
            method: info.method(),
            params: Some(&Json(&params)),
        });
        if !self.has_room(child, line.len()) {
            self.idle.push_front(child);
            self.dispatcher.finish(handle);
            return responder.answer(server, now, Err(CallError::busy()));
        }
        self.write(child, line);
        self.runs(now, child, wire, info, responder);
    }

    /// Pool child `child` runs its request `wire` for the HTTP request of `info`.
    fn runs(
        &mut self,
        now: Instant,
        child: ChildId,
        wire: RequestId,
        info: CallInfo,
        responder: Responder,
    ) {
        let handle = info.handle();
        self.set_slot(
            now,
            child,
            Slot::Runs {
                wire: wire.clone(),
                holder: Holder::Call(handle),
            },
        );
        self.board(
            now,
            handle,
            Flight {
                child,
                wire,
                answer: Answer::Call { info, responder },
            },
        );
    }

    /// A retry with a `requestState` the gateway handed out (BRIDGE-3): the answers it
    /// brings go to the child that asked, and the retry waits for what the child does
    /// next.
    fn resume(
        &mut self,
        server: &mut Server,
        now: Instant,
        ticket: u64,
        info: CallInfo,
        responder: Responder,
    ) {
        let handle = info.handle();
        let Some(mut parked) = self.parked.remove(&ticket) else {
            self.dispatcher.finish(handle);
            return responder.answer(
                server,
                now,
                Err(CallError::invalid_params(
                    "requestState: the request it continues is over; send it anew",
                )),
            );
        };
        if let Some(done) = parked.done.take() {
            // The child answered without the client's input: that is the answer.
            if self.dispatcher.finish(handle) {
                responder.answer(server, now, answer_value(&done));
            }
            return;
        }
        let responses = info.input_responses();
        let mut open = Vec::new();
        for question in parked.questions.drain(..) {
            match responses.and_then(|r| r.get(&question.key)) {
                Some(result) => {
                    self.write_message(
                        parked.child,
                        &Outgoing::Response {
                            id: &question.id,
                            result: &Json(result),
                        },
                    );
                }
                None => open.push(question),
            }
        }
        if !open.is_empty() {
            parked.questions = open;
            return self.park(server, now, ticket, parked, handle, responder);
        }
        self.runs(now, parked.child, parked.wire, info, responder);
    }

    /// Answers `handle` with the questions still open and keeps the child's request
    /// parked under `ticket` until the retry.
    fn park(
        &mut self,
        server: &mut Server,
        now: Instant,
        ticket: u64,
        mut parked: Parked,
        handle: RequestHandle,
        responder: Responder,
    ) {
        let requests: Map<String, Value> = parked
            .questions
            .iter()
            .map(|q| {
                let mut request = json!({"method": q.method});
                if let Some(params) = &q.params {
                    request["params"] = params.clone();
                }
                (q.key.clone(), request)
            })
            .collect();
        parked.until = now + self.config.input_wait;
        self.timers.insert((parked.until, Timer::Parked(ticket)));
        let child = parked.child;
        self.set_slot(
            now,
            child,
            Slot::Runs {
                wire: parked.wire.clone(),
                holder: Holder::Parked(ticket),
            },
        );
        self.parked.insert(ticket, parked);
        let state = format!("bridge:{ticket}");
        if self.dispatcher.finish(handle) {
            responder.answer(
                server,
                now,
                Ok(input_required(Value::Object(requests), Some(&state))),
            );
        }
    }

    /// The client cancelled a request (or closed its 2026-07-28 stream): the child
    /// running it is told (`notifications/cancelled` with its own id); a pool child is
    /// free again at once.
    fn cancelled(
        &mut self,
        server: &mut Server,
        now: Instant,
        request: RequestHandle,
        reason: Option<&str>,
    ) {
        if let Some(at) = self.queue.iter().position(|q| q.info.handle() == request) {
            self.queue.remove(at);
            self.dispatcher.finish(request);
            return;
        }
        let Some(flight) = self.unboard(request) else {
            return;
        };
        self.dispatcher.finish(request);
        if matches!(flight.answer, Answer::Initialize { .. }) {
            // An `initialize` cannot be cancelled; its session ends with it.
            return;
        }
        self.write_message(
            flight.child,
            &Outgoing::Cancelled {
                request: &flight.wire,
                reason,
            },
        );
        self.pool_request_over(server, now, flight.child);
    }

    /// A session ended: its child ends (STDIO-5), its questions are forgotten.
    fn session_closed(&mut self, now: Instant, session: SessionId) {
        self.asks.retain(|(s, _), _| *s != session);
        let Some(child) = self.sessions.remove(&session) else {
            return;
        };
        let handles: Vec<RequestHandle> = self
            .children
            .get(&child)
            .map(|c| c.calls.clone())
            .unwrap_or_default();
        for handle in handles {
            // The core dropped them with the session; the dispatcher forgot them.
            self.unboard(handle);
            self.dispatcher.finish(handle);
        }
        self.stop(now, child);
    }

    // ---- The children's side ----------------------------------------------------

    /// `bytes` came on `child`'s standard output.
    pub fn child_output(
        &mut self,
        server: &mut Server,
        now: Instant,
        child: ChildId,
        bytes: &[u8],
    ) {
        let Some(c) = self.children.get_mut(&child) else {
            return;
        };
        c.quiet_since = now;
        c.decoder.push(bytes);
        self.drain_output(server, now, child);
    }

    fn drain_output(&mut self, server: &mut Server, now: Instant, child: ChildId) {
        while let Some(item) = self
            .children
            .get_mut(&child)
            .and_then(|c| c.decoder.poll_item())
        {
            match item {
                Ok(message) => self.child_message(server, now, child, &message),
                Err(e) => self.report(child, Happening::BadLine(e)),
            }
        }
    }

    /// The adapter wrote `bytes` of what [`Action::Write`] gave it.
    pub fn child_wrote(&mut self, child: ChildId, bytes: usize) {
        if let Some(c) = self.children.get_mut(&child) {
            c.unwritten = c.unwritten.saturating_sub(bytes);
        }
    }

    /// `child` ended (after its standard output reached its end): the rest of its
    /// output is read, then every request in flight on it fails (BRIDGE-4); a session
    /// child's session ends, so that its client starts a new one with a fresh child.
    pub fn child_exited(&mut self, server: &mut Server, now: Instant, child: ChildId, exit: Exit) {
        if let Some(c) = self.children.get_mut(&child) {
            c.decoder.finish();
        }
        self.drain_output(server, now, child);
        let Some(c) = self.children.get(&child) else {
            return;
        };
        let role = c.role;
        let stopping = matches!(c.life, Life::Stopping(_));
        let failed = self.fail_child(server, now, child, &format!("the stdio server {exit}"));
        self.children.remove(&child);
        if !stopping || failed > 0 {
            self.report_as(child, role, Happening::Exited { exit, failed });
        }
        self.after_pool_loss(server, now, role);
    }

    /// Fails every request waiting on `child`, takes it out of service, and ends its
    /// session. Returns how many requests failed.
    fn fail_child(
        &mut self,
        server: &mut Server,
        now: Instant,
        child: ChildId,
        why: &str,
    ) -> usize {
        let Some(c) = self.children.get_mut(&child) else {
            return 0;
        };
        let role = c.role;
        let was_starting = c.life == Life::Starting;
        let slot = std::mem::replace(&mut c.slot, Slot::Idle);
        let mut handles = std::mem::take(&mut c.calls);
        if let Slot::Runs { holder, .. } = slot {
            match holder {
                Holder::Call(handle) => handles.push(handle),
                Holder::Parked(ticket) => {
                    self.parked.remove(&ticket);
                }
            }
        }
        let message = format!("{why}; the request failed");
        let mut failed = 0;
        for handle in handles {
            let Some(flight) = self.unboard(handle) else {
                continue;
            };
            failed += 1;
            match flight.answer {
                Answer::Initialize { .. } => {
                    let _ = server.respond_error(
                        now,
                        handle,
                        ErrorCode::INTERNAL_ERROR,
                        &message,
                        None,
                    );
                }
                Answer::Call { responder, .. } => {
                    if self.dispatcher.finish(handle) {
                        responder.answer(server, now, Err(CallError::internal(message.clone())));
                    }
                }
            }
        }
        self.asks.retain(|_, (c, _)| *c != child);
        self.idle.retain(|c| *c != child);
        match role {
            Role::Session(session) => {
                if self.sessions.get(&session) == Some(&child) {
                    self.sessions.remove(&session);
                    server.close_session(now, session);
                }
            }
            Role::Pool => {
                if was_starting && self.known.is_none() {
                    self.fail_early(server, now, why);
                }
            }
        }
        failed
    }

    /// A pool child is gone: one more starts if requests wait and there is room.
    fn after_pool_loss(&mut self, server: &mut Server, now: Instant, role: Role) {
        if role != Role::Pool {
            return;
        }
        self.pool = self.pool.saturating_sub(1);
        if self.shutting_down {
            return;
        }
        if (!self.queue.is_empty() || !self.early.is_empty()) && self.pool < self.config.pool {
            self.spawn_pool(now);
        } else if self.pool == 0 && !self.queue.is_empty() {
            self.fail_queue(server, now, "no stdio server is running");
        }
    }

    /// The 2026-07-28 requests that waited for the pool's first description fail.
    fn fail_early(&mut self, server: &mut Server, now: Instant, why: &str) {
        let message = format!("{why}; the request failed");
        for request in self.early.drain(..) {
            let _ = server.respond_error(
                now,
                request.handle(),
                ErrorCode::INTERNAL_ERROR,
                &message,
                None,
            );
        }
    }

    fn fail_queue(&mut self, server: &mut Server, now: Instant, why: &str) {
        for queued in std::mem::take(&mut self.queue) {
            let handle = queued.info.handle();
            if self.dispatcher.finish(handle) {
                queued
                    .responder
                    .answer(server, now, Err(CallError::internal(why)));
            }
        }
    }

    /// One message from a child.
    fn child_message(
        &mut self,
        server: &mut Server,
        now: Instant,
        child: ChildId,
        message: &Envelope,
    ) {
        match message.message() {
            Message::Response(_) | Message::Error(_) => {
                let Some(id) = message.id() else {
                    return self.report(
                        child,
                        Happening::Dropped {
                            what: "response without an id".into(),
                        },
                    );
                };
                let pool_init = self.children.get(&child).is_some_and(|c| {
                    c.role == Role::Pool
                        && c.life == Life::Starting
                        && *id == RequestId::int(INIT_ID)
                });
                if pool_init {
                    return self.pool_initialized(server, now, child, message);
                }
                if let Some(ticket) = self.parked_on(child, id) {
                    return self.parked_answered(server, now, child, ticket, message);
                }
                match self.by_wire.get(&(child, id.clone())).copied() {
                    Some(handle) => self.answered(server, now, handle, message),
                    None => self.report(
                        child,
                        Happening::Dropped {
                            what: "response".into(),
                        },
                    ),
                }
            }
            Message::Request(request) => {
                let params = request.params.map(|p| p.as_str());
                self.child_asks(server, now, child, &request.id, &request.method, params);
            }
            Message::Notification(note) => {
                let params = note.params.map(|p| p.as_str());
                self.child_notifies(server, now, child, &note.method, params);
            }
        }
    }

    /// The ticket of the request `wire` that `child` runs while it waits for a retry.
    fn parked_on(&self, child: ChildId, wire: &RequestId) -> Option<u64> {
        match &self.children.get(&child)?.slot {
            Slot::Runs {
                wire: running,
                holder: Holder::Parked(ticket),
            } if running == wire => Some(*ticket),
            _ => None,
        }
    }

    /// A pool child answered the request it runs while that request waited for the
    /// client's retry (it gave up asking): the answer is kept for the retry, and the
    /// child is free for the next request.
    fn parked_answered(
        &mut self,
        server: &mut Server,
        now: Instant,
        child: ChildId,
        ticket: u64,
        message: &Envelope,
    ) {
        if let Some(parked) = self.parked.get_mut(&ticket) {
            parked.done = Some(message.clone());
            parked.questions.clear();
        }
        if let Some(c) = self.children.get_mut(&child) {
            c.slot = Slot::Idle;
        }
        self.pool_request_over(server, now, child);
    }

    /// A child answered the request `handle`.
    fn answered(
        &mut self,
        server: &mut Server,
        now: Instant,
        handle: RequestHandle,
        message: &Envelope,
    ) {
        let Some(flight) = self.unboard(handle) else {
            return;
        };
        let child = flight.child;
        match flight.answer {
            Answer::Initialize { version } => {
                self.session_initialized(server, now, handle, child, version, message);
            }
            Answer::Call { info, responder } => {
                if self.dispatcher.finish(handle) {
                    if info.session().is_some() {
                        // The child's answer as it is (BRIDGE-1).
                        drop(responder);
                        relay_answer(server, now, handle, message);
                    } else {
                        responder.answer(server, now, answer_value(message));
                    }
                }
                self.pool_request_over(server, now, child);
            }
        }
    }

    /// A session child answered the client's `initialize`.
    fn session_initialized(
        &mut self,
        server: &mut Server,
        now: Instant,
        handle: RequestHandle,
        child: ChildId,
        version: ProtocolVersion,
        message: &Envelope,
    ) {
        let Message::Response(response) = message.message() else {
            // An error: the core ends the session (InitializeFailed), and the child
            // with it.
            if let Message::Error(e) = message.message() {
                self.report(child, Happening::InitializeFailed(e.error.message.into()));
            }
            relay_answer(server, now, handle, message);
            return;
        };
        let mut result: Value =
            serde_json::from_str(response.result.as_str()).unwrap_or_else(|_| json!({}));
        let said = result.get("protocolVersion").and_then(Value::as_str);
        if said != Some(version.as_str()) {
            let child_said = said.unwrap_or("nothing").to_owned();
            self.report(
                child,
                Happening::VersionDiffers {
                    negotiated: version,
                    child: child_said,
                },
            );
            if let Some(object) = result.as_object_mut() {
                object.insert("protocolVersion".into(), version.as_str().into());
            }
        }
        let server_info = result.get("serverInfo").cloned().unwrap_or(Value::Null);
        if let Some(c) = self.children.get_mut(&child) {
            c.life = Life::Ready;
        }
        self.report(child, Happening::Ready { server_info });
        let _ = server.respond(now, handle, &Json(&result));
    }

    /// A pool child answered the gateway's `initialize`.
    fn pool_initialized(
        &mut self,
        server: &mut Server,
        now: Instant,
        child: ChildId,
        message: &Envelope,
    ) {
        let result: Option<Value> = match message.message() {
            Message::Response(r) => serde_json::from_str(r.result.as_str()).ok(),
            _ => None,
        };
        let Some(result) = result.filter(Value::is_object) else {
            let why = match message.message() {
                Message::Error(e) => e.error.message.into_owned(),
                _ => "its result is not an object".to_owned(),
            };
            self.report(child, Happening::InitializeFailed(why.clone()));
            let failed = format!("the stdio server's initialize failed ({why})");
            self.fail_child(server, now, child, &failed);
            self.stop(now, child);
            return;
        };
        self.write_message(
            child,
            &Outgoing::Notification {
                method: "notifications/initialized",
                params: None,
            },
        );
        let server_info = result.get("serverInfo").cloned().unwrap_or(Value::Null);
        if self.known.is_none() {
            let mut capabilities = result
                .get("capabilities")
                .cloned()
                .unwrap_or_else(|| json!({}));
            // Listens are not relayed as `resources/subscribe` (BRIDGE-2).
            if let Some(resources) = capabilities
                .get_mut("resources")
                .and_then(Value::as_object_mut)
            {
                resources.remove("subscribe");
            }
            self.known = Some(Arc::new(Known {
                capabilities,
                server_info: server_info.clone(),
            }));
        }
        if let Some(c) = self.children.get_mut(&child) {
            c.life = Life::Ready;
        }
        self.report(child, Happening::Ready { server_info });
        for request in std::mem::take(&mut self.early) {
            self.request(server, now, request);
        }
        self.pool_request_over(server, now, child);
    }

    /// A pool child is free (or was just started): it takes the oldest waiting
    /// request, or waits.
    fn pool_request_over(&mut self, server: &mut Server, now: Instant, child: ChildId) {
        let Some(c) = self.children.get(&child) else {
            return;
        };
        if c.role != Role::Pool || c.life != Life::Ready {
            return;
        }
        if let Slot::Runs {
            holder: Holder::Parked(_),
            ..
        } = c.slot
        {
            return;
        }
        self.set_slot(now, child, Slot::Idle);
        match self.queue.pop_front() {
            Some(next) => self.run(server, now, child, next),
            None => self.idle.push_back(child),
        }
    }

    fn set_slot(&mut self, now: Instant, child: ChildId, slot: Slot) {
        if let Some(c) = self.children.get_mut(&child) {
            let owed = c.owes();
            c.slot = slot;
            if !owed {
                self.owing(now, child);
            }
        }
    }

    /// A child asked the client something (BRIDGE-3).
    fn child_asks(
        &mut self,
        server: &mut Server,
        now: Instant,
        child: ChildId,
        id: &RequestId,
        method: &str,
        params: Option<&str>,
    ) {
        let Some(c) = self.children.get(&child) else {
            return;
        };
        if method == "ping" {
            return self.write_message(
                child,
                &Outgoing::Response {
                    id,
                    result: &RawJson::new("{}").expect("JSON"),
                },
            );
        }
        match (c.role, c.slot.clone()) {
            (Role::Session(session), _) => {
                let raw = params.and_then(|p| RawJson::new(p).ok());
                let params = raw.as_ref().map(|p| p as &dyn ToJson);
                // The stream of the one request in flight, which is the one asking;
                // with several, nothing tells which: the session's stream.
                let target = match c.calls.as_slice() {
                    [only] => Target::Request(*only),
                    _ => Target::Session(session),
                };
                let sent = server
                    .request(now, target, method, params, None)
                    .or_else(|_| {
                        server.request(now, Target::Session(session), method, params, None)
                    });
                match sent {
                    Ok(server_id) => {
                        self.asks.insert((session, server_id), (child, id.clone()));
                    }
                    Err(e) => {
                        self.write_error(child, id, &format!("cannot reach the client: {e}"));
                    }
                }
            }
            (Role::Pool, Slot::Runs { wire, holder }) => {
                let params: Option<Value> = params.and_then(|p| serde_json::from_str(p).ok());
                let question = |key: String| Question {
                    key,
                    id: id.clone(),
                    method: method.to_owned(),
                    params,
                };
                match holder {
                    Holder::Parked(ticket) => {
                        if let Some(parked) = self.parked.get_mut(&ticket) {
                            parked.keys += 1;
                            let key = format!("q{}", parked.keys);
                            parked.questions.push(question(key));
                        }
                    }
                    Holder::Call(handle) => {
                        let Some(Flight {
                            answer: Answer::Call { info, .. },
                            ..
                        }) = self.flights.get(&handle)
                        else {
                            return;
                        };
                        if let Some(refusal) = refuse_question(info, method) {
                            return self.write_error_code(
                                child,
                                id,
                                ErrorCode::METHOD_NOT_FOUND,
                                &refusal,
                            );
                        }
                        let Some(Flight {
                            answer: Answer::Call { responder, .. },
                            ..
                        }) = self.unboard(handle)
                        else {
                            return;
                        };
                        let ticket = self.next_ticket;
                        self.next_ticket += 1;
                        let parked = Parked {
                            child,
                            wire,
                            questions: vec![question("q1".into())],
                            keys: 1,
                            done: None,
                            until: now,
                        };
                        self.park(server, now, ticket, parked, handle, responder);
                    }
                }
            }
            (Role::Pool, Slot::Idle) => {
                self.write_error(child, id, "no request is running to ask for");
            }
        }
    }

    /// A child's notification: progress to the request whose token it names, log
    /// messages to the request that runs, list changes to the session or to the
    /// 2026-07-28 listens.
    fn child_notifies(
        &mut self,
        server: &mut Server,
        now: Instant,
        child: ChildId,
        method: &str,
        params: Option<&str>,
    ) {
        let Some(c) = self.children.get(&child) else {
            return;
        };
        let role = c.role;
        let calls = c.calls.clone();
        let slot = c.slot.clone();
        match role {
            Role::Session(session) => {
                let into = |server: &mut Server, target: Target| {
                    let raw = params.and_then(|p| RawJson::new(p).ok());
                    let params = raw.as_ref().map(|p| p as &dyn ToJson);
                    let _ = server.notify(now, target, method, params);
                };
                let target = match method {
                    crate::app::PROGRESS => {
                        let token = params
                            .and_then(|p| serde_json::from_str::<Value>(p).ok())
                            .and_then(|p| p.get("progressToken").cloned());
                        let call = calls.iter().copied().find(|h| {
                            self.info_of(*h).and_then(CallInfo::progress_token) == token.as_ref()
                        });
                        match call {
                            Some(handle) => Target::Request(handle),
                            None => {
                                return self.report(
                                    child,
                                    Happening::Dropped {
                                        what: method.to_owned(),
                                    },
                                );
                            }
                        }
                    }
                    "notifications/message" => match calls.as_slice() {
                        [only] => Target::Request(*only),
                        _ => Target::Session(session),
                    },
                    "notifications/cancelled" => {
                        return self.child_cancels_session_ask(server, now, child, session, params);
                    }
                    _ => Target::Session(session),
                };
                into(server, target);
            }
            Role::Pool => {
                let params: Option<Value> = params.and_then(|p| serde_json::from_str(p).ok());
                if let Some(change) = Change::of_notification(method, params.as_ref()) {
                    let mut act = self.dispatcher.changed(&change);
                    return act.apply(server, now);
                }
                let running = match &slot {
                    Slot::Runs {
                        wire,
                        holder: Holder::Call(handle),
                    } => Some((wire, *handle)),
                    _ => None,
                };
                let delivered = match (method, running, params) {
                    (crate::app::PROGRESS, Some((wire, handle)), Some(mut params)) => {
                        let token = params.get("progressToken");
                        let info = self.info_of(handle);
                        match (info.and_then(CallInfo::progress_token), token) {
                            (Some(theirs), Some(ours)) if *ours == wire_token(wire) => {
                                params["progressToken"] = theirs.clone();
                                info.is_some_and(|i| i.notify(server, now, method, &params).is_ok())
                            }
                            _ => false,
                        }
                    }
                    ("notifications/cancelled", _, Some(params)) => {
                        self.child_cancels_question(child, &params);
                        true
                    }
                    (_, Some((_, handle)), Some(params)) => self
                        .info_of(handle)
                        .is_some_and(|i| i.notify(server, now, method, &params).is_ok()),
                    _ => false,
                };
                if !delivered && method != "notifications/message" {
                    self.report(
                        child,
                        Happening::Dropped {
                            what: method.to_owned(),
                        },
                    );
                }
            }
        }
    }

    fn info_of(&self, handle: RequestHandle) -> Option<&CallInfo> {
        match &self.flights.get(&handle)?.answer {
            Answer::Call { info, .. } => Some(info),
            Answer::Initialize { .. } => None,
        }
    }

    /// A session child gave up a question it asked the client: the client is told,
    /// with the server's id for it.
    fn child_cancels_session_ask(
        &mut self,
        server: &mut Server,
        now: Instant,
        child: ChildId,
        session: SessionId,
        params: Option<&str>,
    ) {
        let Some(params) = params.and_then(|p| serde_json::from_str::<Value>(p).ok()) else {
            return;
        };
        let Some(theirs) = params.get("requestId").and_then(request_id_of) else {
            return;
        };
        let ours = self
            .asks
            .iter()
            .find(|((s, _), (c, id))| *s == session && *c == child && *id == theirs)
            .map(|((_, ours), _)| ours.clone());
        if let Some(ours) = ours {
            self.asks.remove(&(session, ours.clone()));
            let mut buf = BytesMut::new();
            let _ = Outgoing::Cancelled {
                request: &ours,
                reason: params.get("reason").and_then(Value::as_str),
            }
            .write(&mut buf);
            if let Ok(text) = std::str::from_utf8(&buf)
                && let Ok(message) = serde_json::from_str::<Value>(text)
                && let Some(params) = message.get("params")
            {
                let _ = server.notify(
                    now,
                    Target::Session(session),
                    "notifications/cancelled",
                    Some(&Json(params)),
                );
            }
        }
    }

    /// A pool child gave up a question not answered yet: it is no longer asked (ids
    /// are the child's own, so only its questions are looked at).
    fn child_cancels_question(&mut self, child: ChildId, params: &Value) {
        let Some(theirs) = params.get("requestId").and_then(request_id_of) else {
            return;
        };
        for parked in self.parked.values_mut().filter(|p| p.child == child) {
            parked.questions.retain(|q| q.id != theirs);
        }
    }

    // ---- Time, shutdown, children's lives ---------------------------------------

    /// Acts on what is due at `now`: stalled children (BRIDGE-4), the steps of a
    /// child's shutdown (STDIO-5), questions whose retry did not come (BRIDGE-3).
    pub fn handle_timeout(&mut self, server: &mut Server, now: Instant) {
        while let Some(&(at, timer)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            match timer {
                Timer::Stall(child) => self.check_stall(server, now, child),
                Timer::Stop(child) => self.next_stop(now, child),
                Timer::Parked(ticket) => self.abandon(server, now, ticket),
            }
        }
    }

    fn check_stall(&mut self, server: &mut Server, now: Instant, child: ChildId) {
        let stall = self.config.stall;
        let Some(c) = self.children.get_mut(&child) else {
            return;
        };
        c.stall_armed = false;
        if !c.owes() {
            return;
        }
        let due = c.quiet_since + stall;
        if due > now {
            c.stall_armed = true;
            self.timers.insert((due, Timer::Stall(child)));
            return;
        }
        let role = c.role;
        let failed = self.fail_child(
            server,
            now,
            child,
            &format!(
                "the stdio server stalled ({} ms without output)",
                stall.as_millis()
            ),
        );
        self.report_as(
            child,
            role,
            Happening::Stalled {
                after: stall,
                failed,
            },
        );
        self.stop(now, child);
    }

    /// A child began to owe an answer: its stall timer runs from now.
    fn owing(&mut self, now: Instant, child: ChildId) {
        let stall = self.config.stall;
        if let Some(c) = self.children.get_mut(&child)
            && c.owes()
        {
            c.quiet_since = now;
            if !c.stall_armed {
                c.stall_armed = true;
                self.timers.insert((now + stall, Timer::Stall(child)));
            }
        }
    }

    /// A question's retry did not come in time: the child's request is cancelled.
    fn abandon(&mut self, server: &mut Server, now: Instant, ticket: u64) {
        let Some(parked) = self.parked.get(&ticket) else {
            return;
        };
        if parked.until > now {
            return;
        }
        let Some(parked) = self.parked.remove(&ticket) else {
            return;
        };
        if parked.done.is_some() {
            // The child answered already and is free; the answer is forgotten.
            return;
        }
        self.write_message(
            parked.child,
            &Outgoing::Cancelled {
                request: &parked.wire,
                reason: Some("the client did not come back with its answer"),
            },
        );
        self.report(parked.child, Happening::InputAbandoned);
        if let Some(c) = self.children.get_mut(&parked.child) {
            c.slot = Slot::Idle;
        }
        self.pool_request_over(server, now, parked.child);
    }

    /// Begins to end a child (STDIO-5): its input closes now; SIGTERM and SIGKILL
    /// follow, a grace apart, unless it exits first.
    fn stop(&mut self, now: Instant, child: ChildId) {
        let Some(c) = self.children.get_mut(&child) else {
            return;
        };
        if matches!(c.life, Life::Stopping(_)) {
            return;
        }
        c.life = Life::Stopping(Stop::InputClosed);
        c.slot = Slot::Idle;
        self.idle.retain(|i| *i != child);
        self.actions.push_back(Action::CloseInput { child });
        self.timers
            .insert((now + self.config.grace, Timer::Stop(child)));
    }

    fn next_stop(&mut self, now: Instant, child: ChildId) {
        let Some(c) = self.children.get_mut(&child) else {
            return;
        };
        match c.life {
            Life::Stopping(Stop::InputClosed) => {
                c.life = Life::Stopping(Stop::Terminated);
                self.actions.push_back(Action::Terminate { child });
                self.timers
                    .insert((now + self.config.grace, Timer::Stop(child)));
            }
            Life::Stopping(Stop::Terminated) => {
                c.life = Life::Stopping(Stop::Killed);
                self.actions.push_back(Action::Kill { child });
            }
            _ => {}
        }
    }

    /// Ends everything: listens get their result (MODERN-13), requests waiting for a
    /// pool child fail, every child is ended (STDIO-5). The adapter then waits for
    /// [`children`](Self::children) to reach 0.
    pub fn shutdown(&mut self, server: &mut Server, now: Instant) {
        self.shutting_down = true;
        let mut act = self.dispatcher.end_listens();
        act.apply(server, now);
        self.fail_early(server, now, "the bridge is shutting down");
        self.fail_queue(server, now, "the bridge is shutting down");
        let children: Vec<ChildId> = self.children.keys().copied().collect();
        for child in children {
            self.stop(now, child);
        }
    }

    fn spawn(&mut self, role: Role, now: Instant) -> ChildId {
        let child = ChildId(self.next_child);
        self.next_child += 1;
        self.children
            .insert(child, Child::new(role, self.config.lines, now));
        self.actions.push_back(Action::Spawn { child, role });
        self.owing(now, child);
        child
    }

    /// Starts a pool child and sends it the gateway's `initialize` (BRIDGE-2): the
    /// newest revision with a handshake, every client capability a question needs.
    fn spawn_pool(&mut self, now: Instant) {
        self.pool += 1;
        let child = self.spawn(Role::Pool, now);
        let params = json!({
            "protocolVersion": POOL_VERSION.as_str(),
            "capabilities": {"sampling": {}, "elicitation": {}, "roots": {}},
            "clientInfo": self.config.client_info,
        });
        self.write_message(
            child,
            &Outgoing::Request {
                id: &RequestId::int(INIT_ID),
                method: "initialize",
                params: Some(&Json(&params)),
            },
        );
    }

    // ---- Writing to children ----------------------------------------------------

    fn write(&mut self, child: ChildId, line: bytes::Bytes) {
        if let Some(c) = self.children.get_mut(&child) {
            if matches!(c.life, Life::Stopping(_)) {
                return;
            }
            c.unwritten += line.len();
            self.actions.push_back(Action::Write { child, bytes: line });
        }
    }

    /// A client's message as it is, on one line (STDIO-1); dropped when the child has
    /// no room (BRIDGE-5).
    fn write_text(&mut self, child: ChildId, text: &str) {
        if !self.has_room(child, text.len() + 1) {
            return;
        }
        let mut line = BytesMut::with_capacity(text.len() + 1);
        stdio::encode_text(text, &mut line);
        self.write(child, line.freeze());
    }

    fn write_message(&mut self, child: ChildId, message: &Outgoing<'_>) {
        self.write(child, encode_line(message));
    }

    /// The client's answer to a child's question, with the child's id.
    fn write_answer(&mut self, child: ChildId, id: &RequestId, message: &Envelope) {
        let line = match message.message() {
            Message::Response(r) => encode_line(&Outgoing::Response {
                id,
                result: &r.result,
            }),
            Message::Error(e) => encode_line(&Outgoing::Error {
                id: Some(id),
                code: e.error.code,
                message: &e.error.message,
                data: e.error.data.as_ref().map(|d| d as &dyn ToJson),
            }),
            _ => return,
        };
        self.write(child, line);
    }

    fn write_error(&mut self, child: ChildId, id: &RequestId, message: &str) {
        self.write_error_code(child, id, ErrorCode::INTERNAL_ERROR, message);
    }

    fn write_error_code(&mut self, child: ChildId, id: &RequestId, code: ErrorCode, message: &str) {
        self.write_message(
            child,
            &Outgoing::Error {
                id: Some(id),
                code,
                message,
                data: None,
            },
        );
    }

    fn report(&mut self, child: ChildId, what: Happening) {
        if let Some(role) = self.role(child) {
            self.report_as(child, role, what);
        }
    }

    fn report_as(&mut self, child: ChildId, role: Role, what: Happening) {
        self.actions
            .push_back(Action::Report(Report { child, role, what }));
    }
}

/// The progress token a pool child is given for the request `wire`: the id itself.
fn wire_token(wire: &RequestId) -> Value {
    wire.as_int().map_or_else(
        || Value::from(wire.as_str().unwrap_or_default()),
        Value::from,
    )
}

/// The ticket of a `requestState` the gateway handed out (`bridge:<n>`); the layer has
/// verified its seal, so no other state comes here from a client.
fn ticket_of(state: &str) -> Option<u64> {
    state.strip_prefix("bridge:")?.parse().ok()
}

fn request_id_of(value: &Value) -> Option<RequestId> {
    match value {
        Value::String(s) => Some(RequestId::string(s)),
        Value::Number(n) => n.as_i64().map(RequestId::int),
        _ => None,
    }
}

/// Why a pool child may not put `method` to the client of `info`'s request, if it may
/// not: a question needs a request that may be answered `input_required` and a client
/// that declared the capability (MODERN-20, MODERN-23).
fn refuse_question(info: &CallInfo, method: &str) -> Option<String> {
    let capability = match method {
        "sampling/createMessage" => "sampling",
        "elicitation/create" => "elicitation",
        "roots/list" => "roots",
        _ => {
            return Some(format!(
                "{method}: not a question a 2026-07-28 client answers"
            ));
        }
    };
    if !may_ask_input(info.method()) {
        return Some(format!(
            "{method}: a 2026-07-28 {} cannot ask the client",
            info.method()
        ));
    }
    if !info.client_supports(capability) {
        return Some(format!(
            "{method}: the client did not declare the {capability} capability"
        ));
    }
    None
}

/// A message as one line.
fn encode_line(message: &Outgoing<'_>) -> bytes::Bytes {
    let mut line = BytesMut::with_capacity(message.len_hint() + 1);
    // What the gateway writes is made of values it holds as JSON: it encodes.
    let _ = stdio::encode(message, &mut line);
    line.freeze()
}

/// A child's answer to a session's request, relayed as it is.
fn relay_answer(server: &mut Server, now: Instant, handle: RequestHandle, message: &Envelope) {
    let _ = match message.message() {
        Message::Response(r) => server.respond(now, handle, &r.result),
        Message::Error(e) => server.respond_error(
            now,
            handle,
            e.error.code,
            &e.error.message,
            e.error.data.as_ref().map(|d| d as &dyn ToJson),
        ),
        _ => return,
    };
}

/// A child's answer as the application layer completes it for 2026-07-28.
fn answer_value(message: &Envelope) -> Result<Value, CallError> {
    match message.message() {
        Message::Response(r) => serde_json::from_str(r.result.as_str())
            .map_err(|_| CallError::internal("the stdio server's result is not JSON")),
        Message::Error(e) => {
            let mut error = CallError::new(e.error.code, e.error.message);
            if let Some(data) = e
                .error
                .data
                .and_then(|d| serde_json::from_str(d.as_str()).ok())
            {
                error = error.with_data(data);
            }
            Err(error)
        }
        _ => Err(CallError::internal("not an answer")),
    }
}
