//! A small application layer on the blocking [`server`](crate::server): a function per
//! request, run on a pool of handler threads, with a [`Call`] that sends progress and
//! notifications on that request's stream, asks the client ([`Call::request`]) and sees
//! cancellation, and [`Tools`], a typed tool table. The blocking twin of
//! `mcpwire_tokio::app`; not a full SDK: `initialize`, `ping`, `tools/list` and
//! `tools/call`, and whatever else a [`Handler`] answers. What those answers are is
//! decided in [`mcpwire::app`], for both; this module runs the handlers on threads.
//!
//! Handlers run on threads of their own ([`ServeOptions::with_handlers`]), not on the
//! server's workers: the worker that carries a request's SSE stream keeps writing the
//! handler's progress while the handler runs.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use mcpwire::app::{CallError, text_result};
use mcpwire::app::{Route, ToolTable};
use mcpwire::jsonrpc::{RawJson, RequestId};
use mcpwire::server::{Event, IncomingRequest, RequestHandle, SendError, SessionId, Target};
use serde_json::{Value, json};

use crate::server::{Driver, ServeOptions, Sink};

/// Server→client requests awaiting the client's response, by session and id.
type Pending = Mutex<HashMap<(SessionId, RequestId), mpsc::Sender<Result<Value, CallError>>>>;

/// How often a [`Call::request`] waiting for its response looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(10);

/// One client request, for its handler.
pub struct Call {
    pending: Arc<Pending>,
    driver: Driver,
    handle: RequestHandle,
    session: Option<SessionId>,
    method: String,
    params: Option<Value>,
    cancelled: Arc<AtomicBool>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("method", &self.method)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl Call {
    /// The method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The params, if any.
    pub fn params(&self) -> Option<&Value> {
        self.params.as_ref()
    }

    /// The session, if the server keeps sessions.
    pub fn session(&self) -> Option<SessionId> {
        self.session
    }

    /// `params._meta.progressToken`, if the client asked for progress.
    pub fn progress_token(&self) -> Option<&Value> {
        mcpwire::app::progress_token(self.params.as_ref())
    }

    /// Sends a notification related to this request (on its stream, HTTP-POST-9).
    ///
    /// # Errors
    /// [`SendError`] from the core (the request is no longer open, …).
    pub fn notify(&self, method: &str, params: Value) -> Result<(), SendError> {
        let params = params.to_string();
        let raw = RawJson::new(&params).map_err(|_| SendError::NoStream)?;
        let handle = self.handle;
        self.driver.with_server(|server, now| {
            server
                .notify(now, Target::Request(handle), method, Some(&raw))
                .map(|_| ())
        })
    }

    /// Sends `notifications/progress` if the client gave a progress token; a no-op
    /// otherwise.
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub fn progress(&self, progress: f64, total: Option<f64>) -> Result<(), SendError> {
        let Some(token) = self.progress_token().cloned() else {
            return Ok(());
        };
        let params = mcpwire::app::progress_params(token, progress, total);
        self.notify(mcpwire::app::PROGRESS, params)
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
        let session = self
            .session
            .ok_or_else(|| CallError::internal("server requests need a session"))?;
        let text = params.to_string();
        let raw = RawJson::new(&text).map_err(|_| CallError::internal("params are not JSON"))?;
        let deadline = timeout.map(|t| Instant::now() + t);
        let (tx, rx) = mpsc::channel();
        let handle = self.handle;
        {
            // Held while sending, so the response cannot be dispatched before its entry
            // exists; the events the send causes are dispatched once it is released (the
            // sink takes it too).
            let mut pending = lock(&self.pending);
            let sent = self.driver.with_server_deferred(|server, now| {
                server.request(now, Target::Request(handle), method, Some(&raw), deadline)
            });
            match sent {
                Ok(id) => {
                    pending.insert((session, id), tx);
                }
                Err(e) => {
                    drop(pending);
                    self.driver.deliver();
                    return Err(CallError::internal(format!("cannot send {method}: {e}")));
                }
            }
        }
        self.driver.deliver();
        loop {
            match rx.recv_timeout(CANCEL_POLL) {
                Ok(answer) => return answer,
                Err(RecvTimeoutError::Disconnected) => {
                    // The entry went: the core timed the request out, or the session ended.
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
        self.cancelled.load(Ordering::Acquire)
    }

    /// The handle on the core, for anything else (a notification to the session's GET
    /// stream with [`Target::Session`], say).
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

    /// `capabilities` in the `InitializeResult`.
    fn capabilities(&self) -> Value {
        json!({})
    }

    /// Sees every event of the server before the layer acts on it (to log sessions, to
    /// count); the default ignores them. Runs where the events are dispatched, on a
    /// worker or the timer thread: keep it short and never block.
    fn observe(&self, event: &Event) {
        let _ = event;
    }

    /// Answers one request (`initialize` and `ping` are answered before it is asked), on
    /// a handler thread: it may block.
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

/// The open requests: their session and the cancel flag their [`Call`] reads.
type Open = HashMap<RequestHandle, (Option<SessionId>, Arc<AtomicBool>)>;

/// The calls waiting for a handler thread.
struct Jobs {
    queue: VecDeque<Call>,
    closed: bool,
}

/// The application layer's state, shared by the sink and the handler threads.
struct App {
    handler: Arc<dyn Handler>,
    /// The requests whose handler has not answered.
    open: Mutex<Open>,
    /// The server→client requests of the handlers.
    pending: Arc<Pending>,
    jobs: Mutex<Jobs>,
    ready: Condvar,
    capacity: usize,
}

impl App {
    /// Acts on one event of the server; never blocks.
    fn dispatch(&self, driver: &Driver, event: Event) {
        self.handler.observe(&event);
        match event {
            Event::Request(request) => self.start(driver, request),
            Event::Response { session, message } => {
                let Some(id) = message.id().cloned() else {
                    return;
                };
                let waiter = lock(&self.pending).remove(&(session, id));
                if let Some(tx) = waiter {
                    let _ = tx.send(mcpwire::app::client_answer(&message.message()));
                }
            }
            Event::RequestTimedOut { session, id } => {
                // Its waiter sees the channel close.
                lock(&self.pending).remove(&(session, id));
            }
            Event::Cancelled { request, .. } => {
                if let Some((_, flag)) = lock(&self.open).get(&request) {
                    flag.store(true, Ordering::Release);
                }
            }
            Event::SessionClosed { session, .. } => {
                // Its server requests will never be answered: their waiters end.
                lock(&self.pending).retain(|(s, _), _| *s != session);
                for (s, flag) in lock(&self.open).values() {
                    if *s == Some(session) {
                        flag.store(true, Ordering::Release);
                    }
                }
            }
            _ => {}
        }
    }

    /// Answers `initialize` and `ping` at once; queues anything else for a handler.
    fn start(&self, driver: &Driver, request: IncomingRequest) {
        let handle = request.handle();
        let immediate = mcpwire::app::builtin_answer(
            &request,
            || self.handler.capabilities(),
            || self.handler.server_info(),
        );
        if let Some(result) = immediate {
            answer(driver, handle, Ok(result));
            return;
        }
        let cancelled = Arc::new(AtomicBool::new(false));
        let call = Call {
            pending: Arc::clone(&self.pending),
            driver: driver.clone(),
            handle,
            session: request.session(),
            method: request.method().to_owned(),
            params: request
                .message()
                .payload()
                .and_then(|p| serde_json::from_str(p.as_str()).ok()),
            cancelled: Arc::clone(&cancelled),
        };
        let mut jobs = lock(&self.jobs);
        if jobs.queue.len() >= self.capacity {
            drop(jobs);
            answer(
                driver,
                handle,
                Err(CallError::internal("the server is busy; try again")),
            );
            return;
        }
        // Open before a handler can run, so a cancel that comes while it runs finds it.
        lock(&self.open).insert(handle, (request.session(), cancelled));
        jobs.queue.push_back(call);
        drop(jobs);
        self.ready.notify_one();
    }

    /// One handler thread: runs queued calls until the layer closes.
    fn run(&self) {
        loop {
            let call = {
                let mut jobs = lock(&self.jobs);
                loop {
                    if let Some(call) = jobs.queue.pop_front() {
                        break call;
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
            lock(&self.open).remove(&call.handle);
            answer(&call.driver, call.handle, result);
        }
    }
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

/// The sink that serves `handler`: `initialize` and `ping` answered in place, every other
/// request run on one of `options.handlers()` threads (spawned now), at most
/// `options.queue()` waiting; one more is answered -32603 at once.
/// [`serve`](crate::server::serve) uses it.
///
/// # Errors
///
/// A thread could not be spawned.
pub fn mount(handler: Arc<dyn Handler>, options: &ServeOptions) -> std::io::Result<Sink> {
    let app = Arc::new(App {
        handler,
        open: Mutex::new(HashMap::new()),
        pending: Arc::default(),
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
    Ok(Box::new(move |driver: &Driver, event: Event| {
        closer.0.dispatch(driver, event);
    }))
}

fn answer(driver: &Driver, handle: RequestHandle, result: Result<Value, CallError>) {
    driver.with_server(|server, now| mcpwire::app::answer(server, now, handle, result));
}
