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
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{CallError, builtin_answer, client_answer, progress_params, progress_token};
use crate::jsonrpc::{RawJson, RequestId};
use crate::server::{Event, IncomingRequest, RequestHandle, SendError, Server, SessionId, Target};

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
}

/// The bounds of a [`Dispatcher`]'s tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    calls: usize,
    early_cancels: usize,
    requests: usize,
}

impl Limits {
    /// The defaults: 16,384 calls in flight, 64 early cancels, 16,384 server→client
    /// requests awaiting their response.
    pub const fn new() -> Self {
        Self {
            calls: 16_384,
            early_cancels: 64,
            requests: 16_384,
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
    /// Answer this request with this ([`answer`](super::answer)): a builtin answer
    /// (`initialize`, `ping`), or a refusal. Its call was never started.
    Answer(RequestHandle, Result<Value, CallError>),
    /// Run the handler for this call, then [`finish`](Dispatcher::finish) it.
    Run(Start<C>),
}

/// A call to start: its request and its cancel signal (fired already if the cancel came
/// first).
#[derive(Debug)]
pub struct Start<C> {
    request: IncomingRequest,
    cancel: C,
}

impl<C> Start<C> {
    /// The request's handle.
    pub fn handle(&self) -> RequestHandle {
        self.request.handle()
    }

    /// The call, with its params parsed (done here rather than in
    /// [`handle_event`](Dispatcher::handle_event), so outside the adapter's lock), and
    /// its cancel signal.
    pub fn into_parts(self) -> (CallInfo, C) {
        let params = self
            .request
            .message()
            .payload()
            .and_then(|p| serde_json::from_str(p.as_str()).ok());
        let info = CallInfo {
            handle: self.request.handle(),
            session: self.request.session(),
            method: self.request.method().to_owned(),
            params,
        };
        (info, self.cancel)
    }
}

/// What a handler knows of its request, and how it speaks on that request's stream:
/// the part of the adapters' `Call` that needs no runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct CallInfo {
    handle: RequestHandle,
    session: Option<SessionId>,
    method: String,
    params: Option<Value>,
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

    /// The params, if any (and if they are JSON).
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

    /// Sends a notification related to this request, on its stream (HTTP-POST-9).
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
        let params = params.to_string();
        let raw = RawJson::new(&params).map_err(|_| SendError::NoStream)?;
        server
            .notify(now, Target::Request(self.handle), method, Some(&raw))
            .map(|_| ())
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
}

impl<C: Cancel, W: Reply> Dispatcher<C, W> {
    /// An empty dispatcher.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            calls: HashMap::new(),
            early: VecDeque::new(),
            requests: HashMap::new(),
        }
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
        let builtin = builtin_answer(
            &request,
            || describe.capabilities(),
            || describe.server_info(),
        );
        if let Some(result) = builtin {
            return Step::Answer(handle, Ok(result));
        }
        let early = self.early.iter().position(|h| *h == handle);
        let cancelled = early.and_then(|at| self.early.remove(at)).is_some();
        if self.calls.len() >= self.limits.calls {
            return Step::Answer(handle, Err(CallError::busy()));
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
        Step::Run(Start { request, cancel })
    }

    /// A cancel comes: fires its call's signal, or remembers it for a call not started.
    fn cancel(&mut self, request: RequestHandle) {
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
        let session = flight
            .session
            .ok_or_else(|| CallError::internal("server requests need a session"))?;
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
    }

    impl Rig {
        fn new(limits: Limits) -> Self {
            let mut n = 0u8;
            let entropy = Box::new(move |dst: &mut [u8]| {
                for b in dst {
                    n = n.wrapping_add(1);
                    *b = n;
                }
            });
            let mut rig = Self {
                server: Server::new(Config::new(), entropy),
                now: Instant::now(),
                app: Dispatcher::new(limits),
                session: None,
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

        /// Feeds `event` to the dispatcher, answering a [`Step::Answer`] as the
        /// adapters do; returns any other step.
        fn dispatch(&mut self, event: Event) -> Step<Flag> {
            match self.app.handle_event(event, &Info) {
                Step::Answer(h, result) => {
                    crate::app::answer(&mut self.server, self.now, h, result);
                    Step::Done
                }
                step => step,
            }
        }

        /// Feeds `event`, which must start a call.
        fn run(&mut self, event: Event) -> (CallInfo, Flag) {
            match self.dispatch(event) {
                Step::Run(start) => start.into_parts(),
                other => panic!("not started: {other:?}"),
            }
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
        crate::app::answer(
            &mut rig.server,
            rig.now,
            call.handle(),
            Ok(json!({"ok": 1})),
        );
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
}
