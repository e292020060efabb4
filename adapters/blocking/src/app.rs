//! A small application layer on the blocking [`server`](crate::server): a function per
//! request, run on a pool of handler threads, with a [`Call`] that sends progress and
//! notifications on that request's stream, asks the client ([`Call::request`]) and sees
//! cancellation, and [`Tools`], a typed tool table. The blocking twin of
//! `mcpwire_tokio::app`; not a full SDK: `initialize`, `ping`, `tools/list` and
//! `tools/call`, and whatever else a [`Handler`] answers. What those answers are, which
//! calls are in flight and cancelled, and where a client's response goes are decided in
//! [`mcpwire::app`] (its [`Dispatcher`]), for both; this module runs the handlers on
//! threads.
//!
//! Handlers run on threads of their own ([`ServeOptions::with_handlers`]), not on the
//! server's workers: the worker that carries a request's SSE stream keeps writing the
//! handler's progress while the handler runs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use mcpwire::app::{
    Act, Ask, CallInfo, Describe, Dispatcher, Responder, Route, Start, Step, ToolTable,
};
pub use mcpwire::app::{CacheHint, CallError, Change, Limits, Settings, text_result};
use mcpwire::mirror::ToolMirrors;
use mcpwire::server::{Event, SendError, SessionId};
use serde_json::{Value, json};

use crate::server::{Driver, ServeOptions, Sink};

/// How often a [`Call::request`] waiting for its response looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(10);

/// A call's answer, or a client's.
type Answer = Result<Value, CallError>;

/// A call's cancel signal: the flag its [`Call`] reads.
#[derive(Clone, Default)]
pub(crate) struct CancelFlag(Arc<AtomicBool>);

impl mcpwire::app::Cancel for CancelFlag {
    fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Where a client's answer to a [`Call::request`] goes.
pub(crate) struct ReplyTx(mpsc::Sender<Answer>);

impl mcpwire::app::Reply for ReplyTx {
    fn reply(self, answer: Answer) {
        let _ = self.0.send(answer);
    }
}

/// The layer's state, shared by the sink and the calls (see [`Dispatcher`]).
pub(crate) type Calls = Arc<Mutex<Dispatcher<CancelFlag, ReplyTx>>>;

/// One client request, for its handler.
pub struct Call {
    calls: Calls,
    driver: Driver,
    info: CallInfo,
    cancelled: CancelFlag,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("method", &self.info.method())
            .field("params", &self.info.params())
            .finish_non_exhaustive()
    }
}

impl Call {
    /// The method.
    pub fn method(&self) -> &str {
        self.info.method()
    }

    /// The params, if any.
    pub fn params(&self) -> Option<&Value> {
        self.info.params()
    }

    /// The session, if the server keeps sessions.
    pub fn session(&self) -> Option<SessionId> {
        self.info.session()
    }

    /// `params._meta.progressToken`, if the client asked for progress.
    pub fn progress_token(&self) -> Option<&Value> {
        self.info.progress_token()
    }

    /// The client's capabilities on a 2026-07-28 request (`None` in the session eras);
    /// see [`CallInfo::client_capabilities`].
    pub fn client_capabilities(&self) -> Option<&Value> {
        self.info.client_capabilities()
    }

    /// Whether a 2026-07-28 request's client declared the capability `name`.
    pub fn client_supports(&self, name: &str) -> bool {
        self.info.client_supports(name)
    }

    /// `params.inputResponses` of a retried multi round-trip request (MODERN-23).
    pub fn input_responses(&self) -> Option<&Value> {
        self.info.input_responses()
    }

    /// The `requestState` this handler handed out, opened and verified (MODERN-23).
    pub fn request_state(&self) -> Option<&str> {
        self.info.request_state()
    }

    /// Announces a change to every `subscriptions/listen` stream that asked for it
    /// (MODERN-13).
    pub fn changed(&self, change: &Change) {
        let act = lock(&self.calls).changed(change);
        apply(&self.driver, act);
    }

    /// Sends a notification related to this request (on its stream, HTTP-POST-9); a
    /// log message of a 2026-07-28 request only at or above its `logLevel` (MODERN-21).
    ///
    /// # Errors
    /// [`SendError`] from the core (the request is no longer open, …).
    pub fn notify(&self, method: &str, params: Value) -> Result<(), SendError> {
        self.driver
            .with_server(|server, now| self.info.notify(server, now, method, &params))
    }

    /// Sends `notifications/progress` if the client gave a progress token; a no-op
    /// otherwise.
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub fn progress(&self, progress: f64, total: Option<f64>) -> Result<(), SendError> {
        self.driver
            .with_server(|server, now| self.info.progress(server, now, progress, total))
    }

    /// Sends a request to the client on this request's stream (`sampling/createMessage`,
    /// `elicitation/create`, …) and waits for its response: the `result`, or the client's
    /// error. Gives up when `timeout` passes (the core then drops a late response), when
    /// this request is cancelled, or when its session ends.
    ///
    /// # Errors
    /// The client's error response; -32603 when the request cannot be sent, or no
    /// response came in time or before the cancellation.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let (tx, rx) = mpsc::channel();
        let ask = Ask {
            method,
            params: &params,
            timeout,
        };
        // Held while sending, so the response cannot be dispatched before its reply slot
        // is kept; the events the send causes are dispatched once it is released (the
        // sink takes it too).
        let sent = {
            let mut calls = lock(&self.calls);
            self.driver.with_server_deferred(|server, now| {
                calls.request(server, now, self.info.handle(), ask, ReplyTx(tx))
            })
        };
        self.driver.deliver();
        sent?;
        loop {
            match rx.recv_timeout(CANCEL_POLL) {
                Ok(answer) => return answer,
                Err(RecvTimeoutError::Disconnected) => {
                    // The slot went: the core timed the request out, or the session ended.
                    return Err(CallError::internal(format!("{method}: no response")));
                }
                Err(RecvTimeoutError::Timeout) if self.is_cancelled() => {
                    return Err(CallError::internal(format!("{method}: cancelled")));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Whether the client cancelled the request (or its session ended): a long handler
    /// checks it between steps and gives up (its answer would be dropped anyway).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.0.load(Ordering::Acquire)
    }

    /// The handle on the core, for anything else (a notification to the session's GET
    /// stream with [`Target::Session`](mcpwire::server::Target::Session), say).
    pub fn driver(&self) -> &Driver {
        &self.driver
    }
}

/// What a server's application does with requests.
pub trait Handler: Send + Sync + 'static {
    /// `serverInfo` in the `InitializeResult`.
    fn server_info(&self) -> Value {
        mcpwire::app::default_server_info()
    }

    /// `capabilities` in the `InitializeResult`. Asked for each `initialize` (as is
    /// [`server_info`](Self::server_info)) under the layer's lock: return at once.
    fn capabilities(&self) -> Value {
        json!({})
    }

    /// The caching hint of `method`'s complete results on the 2026-07-28 revision
    /// (MODERN-22); by default [`CacheHint::NONE`].
    fn cache_hint(&self, method: &str) -> CacheHint {
        let _ = method;
        CacheHint::NONE
    }

    /// What the tools mirror into `Mcp-Param-*` headers (MODERN-7): when there is any,
    /// the server checks 2026-07-28 calls against it, in place of the configuration's
    /// table. By default none.
    fn tool_mirrors(&self) -> ToolMirrors {
        ToolMirrors::new()
    }

    /// Called once the server runs, with the handle through which the application
    /// announces changes outside a call ([`AppHandle::changed`]). The default drops it.
    fn started(&self, app: AppHandle) {
        let _ = app;
    }

    /// Sees every event of the server before the layer acts on it (to log sessions, to
    /// count); the default ignores them. Runs where the events are dispatched, on a
    /// worker or the timer thread: keep it short and never block.
    fn observe(&self, event: &Event) {
        let _ = event;
    }

    /// Answers one request (`initialize`, `ping`, `server/discover` and
    /// `subscriptions/listen` are answered before it is asked), on a handler thread: it
    /// may block.
    fn call(&self, call: &Call) -> Result<Value, CallError>;
}

/// The table entry of one tool.
type ToolFn = Box<dyn Fn(&Call, Value) -> Result<Value, CallError> + Send + Sync>;

/// A [`Handler`] that serves `tools/list` and `tools/call` from a table.
#[derive(Default)]
pub struct Tools(ToolTable<ToolFn>);

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.0.names().collect();
        f.debug_struct("Tools").field("tools", &names).finish()
    }
}

impl Tools {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the caching hint of `tools/list` on the 2026-07-28 revision (MODERN-22).
    #[must_use]
    pub fn with_cache_hint(mut self, hint: CacheHint) -> Self {
        self.0.set_cache_hint(hint);
        self
    }

    /// Sets `serverInfo` (`{"name": …, "version": …}`).
    #[must_use]
    pub fn with_server_info(mut self, name: &str, version: &str) -> Self {
        self.0.set_server_info(name, version);
        self
    }

    /// Adds a tool: `run` gets the call and its `arguments` deserialized as `A`, and
    /// returns the `CallToolResult` (see [`text_result`]). Arguments that do not
    /// deserialize are answered -32602 without calling it.
    #[must_use]
    pub fn with_tool<A, F>(
        mut self,
        name: &str,
        description: &str,
        input_schema: Value,
        run: F,
    ) -> Self
    where
        A: serde::de::DeserializeOwned,
        F: Fn(&Call, A) -> Result<Value, CallError> + Send + Sync + 'static,
    {
        let run: ToolFn =
            Box::new(move |call, arguments| run(call, mcpwire::app::tool_arguments(arguments)?));
        self.0.push(name, description, input_schema, run);
        self
    }
}

impl Handler for Tools {
    fn server_info(&self) -> Value {
        self.0.server_info()
    }

    fn cache_hint(&self, method: &str) -> CacheHint {
        self.0.cache_hint(method)
    }

    fn tool_mirrors(&self) -> ToolMirrors {
        self.0.mirrors()
    }

    fn capabilities(&self) -> Value {
        self.0.capabilities()
    }

    fn call(&self, call: &Call) -> Result<Value, CallError> {
        match self.0.route(call.method(), call.params()) {
            Route::Answer(answer) => answer,
            Route::Run(run, arguments) => run(call, arguments),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The calls waiting for a handler thread.
struct Jobs {
    queue: VecDeque<(Call, Responder)>,
    closed: bool,
}

/// The handler as [`Dispatcher::handle_event`] asks it for the `InitializeResult`.
struct Described<'a>(&'a dyn Handler);

impl Describe for Described<'_> {
    fn capabilities(&self) -> Value {
        self.0.capabilities()
    }

    fn server_info(&self) -> Value {
        self.0.server_info()
    }

    fn cache_hint(&self, method: &str) -> CacheHint {
        self.0.cache_hint(method)
    }
}

/// The application layer's state, shared by the sink and the handler threads.
struct App {
    handler: Arc<dyn Handler>,
    calls: Calls,
    jobs: Mutex<Jobs>,
    ready: Condvar,
    capacity: usize,
}

impl App {
    /// Acts on one event of the server, as the dispatcher says; never blocks.
    fn dispatch(&self, driver: &Driver, event: Event) {
        self.handler.observe(&event);
        let step = lock(&self.calls).handle_event(event, &Described(&*self.handler));
        match step {
            Step::Done => {}
            Step::Act(act) => apply(driver, act),
            Step::Run(start) => self.start(driver, start),
        }
    }

    /// Queues a call for a handler thread; answers it busy when the queue is full.
    fn start(&self, driver: &Driver, start: Start<CancelFlag>) {
        let (info, cancelled, responder) = match start.begin() {
            Ok(parts) => parts,
            Err((responder, refusal)) => {
                finish(&self.calls, driver, responder, Err(refusal));
                return;
            }
        };
        let call = Call {
            calls: Arc::clone(&self.calls),
            driver: driver.clone(),
            info,
            cancelled,
        };
        let mut jobs = lock(&self.jobs);
        if jobs.queue.len() >= self.capacity {
            drop(jobs);
            finish(&self.calls, driver, responder, Err(CallError::busy()));
            return;
        }
        jobs.queue.push_back((call, responder));
        drop(jobs);
        self.ready.notify_one();
    }

    /// One handler thread: runs queued calls until the layer closes.
    fn run(&self) {
        loop {
            let (call, responder) = {
                let mut jobs = lock(&self.jobs);
                loop {
                    if let Some(job) = jobs.queue.pop_front() {
                        break job;
                    }
                    if jobs.closed {
                        return;
                    }
                    jobs = self
                        .ready
                        .wait(jobs)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.handler.call(&call)))
                    .unwrap_or_else(|_| Err(CallError::internal("the handler panicked")));
            finish(&self.calls, &call.driver, responder, result);
        }
    }
}

/// A call's handler finished (or never ran): the dispatcher forgets it, and its answer
/// goes out unless it was cancelled.
fn finish(calls: &Calls, driver: &Driver, responder: Responder, result: Answer) {
    if lock(calls).finish(responder.handle()) {
        driver.with_server(|server, now| responder.answer(server, now, result));
    }
}

/// Hands what the layer sends on its own to the server.
fn apply(driver: &Driver, mut act: Act) {
    if !act.is_empty() {
        driver.with_server(|server, now| act.apply(server, now));
    }
}

/// The application layer, for the application outside a call: announcing a change to
/// the `subscriptions/listen` streams (MODERN-13), ending them before a shutdown. Handed
/// to [`Handler::started`] by [`serve`](crate::server::serve).
#[derive(Clone)]
pub struct AppHandle {
    calls: Calls,
    driver: Driver,
}

impl std::fmt::Debug for AppHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppHandle")
            .field("listens", &lock(&self.calls).listens())
            .finish_non_exhaustive()
    }
}

impl AppHandle {
    /// Announces `change` to every listen stream that asked for it.
    pub fn changed(&self, change: &Change) {
        let act = lock(&self.calls).changed(change);
        apply(&self.driver, act);
    }

    /// Ends every listen stream with its result (the graceful end, MODERN-13): for a
    /// server about to shut down.
    pub fn end_listens(&self) {
        let act = lock(&self.calls).end_listens();
        apply(&self.driver, act);
    }
}

/// What [`serve`](crate::server::serve) hands the handler once the server runs.
pub(crate) fn started(handler: &dyn Handler, calls: Calls, driver: &Driver) {
    handler.started(AppHandle {
        calls,
        driver: driver.clone(),
    });
}

/// Closes the job queue when the sink that owns it goes (the server stopped): the
/// handler threads finish the calls queued and end. They are not waited for.
struct Closer(Arc<App>);

impl Drop for Closer {
    fn drop(&mut self) {
        lock(&self.0.jobs).closed = true;
        self.0.ready.notify_all();
    }
}

/// The sink that serves `handler`: `initialize`, `ping`, `server/discover` and
/// `subscriptions/listen` answered in place, every other request run on one of
/// `options.handlers()` threads (spawned now), at most `options.queue()` waiting; one
/// more is answered -32603 at once, as is one beyond the limits of `options.app()`. The
/// layer's `requestState` key, unless configured, is drawn from `entropy`.
/// [`serve`](crate::server::serve) uses it.
///
/// # Errors
///
/// A thread could not be spawned.
pub fn mount(
    handler: Arc<dyn Handler>,
    options: &ServeOptions,
    entropy: &mut dyn mcpwire::Entropy,
) -> std::io::Result<Sink> {
    mount_app(handler, options, entropy).map(|(sink, _)| sink)
}

/// [`mount`], and the layer's state for the [`AppHandle`].
pub(crate) fn mount_app(
    handler: Arc<dyn Handler>,
    options: &ServeOptions,
    entropy: &mut dyn mcpwire::Entropy,
) -> std::io::Result<(Sink, Calls)> {
    let app = Arc::new(App {
        handler,
        calls: Arc::new(Mutex::new(Dispatcher::new(options.app(), entropy))),
        jobs: Mutex::new(Jobs {
            queue: VecDeque::new(),
            closed: false,
        }),
        ready: Condvar::new(),
        capacity: options.queue(),
    });
    let closer = Closer(Arc::clone(&app));
    for i in 0..options.handlers() {
        let app = Arc::clone(&app);
        std::thread::Builder::new()
            .name(format!("mcpwire-handler-{i}"))
            .spawn(move || app.run())?;
    }
    let calls = Arc::clone(&app.calls);
    let sink: Sink = Box::new(move |driver: &Driver, event: Event| {
        closer.0.dispatch(driver, event);
    });
    Ok((sink, calls))
}
