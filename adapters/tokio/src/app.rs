//! A small application layer on [`McpService`]: an async function per request, with a
//! [`Call`] that sends progress and notifications on that request's stream and sees
//! cancellation, and [`Tools`], a typed tool table. Not a full SDK: `initialize`,
//! `ping`, `tools/list` and `tools/call`, and whatever else a [`Handler`] answers; on
//! the 2026-07-28 revision also `server/discover` and `subscriptions/listen`, with every
//! result completed for that revision.
//!
//! What those answers are, which calls are in flight and cancelled, and where a client's
//! response goes are decided in [`mcpwire::app`] (its [`Dispatcher`]), as for the
//! blocking adapter's layer; this module runs the handlers as futures and carries their
//! answers.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire::app::{
    Act, Ask, CallInfo, Describe, Dispatcher, Responder, Route, Start, Step, ToolTable,
};
pub use mcpwire::app::{CacheHint, CallError, Change, Limits, Settings, text_result};
use mcpwire::mirror::ToolMirrors;
use mcpwire::server::{Event, SendError, SessionId};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use crate::server::McpService;

/// A boxed future, as handlers return.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A call's answer, or a client's.
type Answer = Result<Value, CallError>;

/// A call's cancel signal: a watch channel its [`Call`] subscribes to.
#[derive(Clone)]
struct CancelTx(Arc<watch::Sender<bool>>);

impl Default for CancelTx {
    fn default() -> Self {
        Self(Arc::new(watch::channel(false).0))
    }
}

impl mcpwire::app::Cancel for CancelTx {
    fn cancel(&self) {
        // Kept even with no receiver yet: the call subscribes after an early cancel.
        self.0.send_replace(true);
    }
}

/// Where a client's answer to a [`Call::request`] goes.
struct ReplyTx(oneshot::Sender<Answer>);

impl mcpwire::app::Reply for ReplyTx {
    fn reply(self, answer: Answer) {
        let _ = self.0.send(answer);
    }
}

/// The layer's state, shared by the sink and the calls (see [`Dispatcher`]).
type Calls = Arc<Mutex<Dispatcher<CancelTx, ReplyTx>>>;

/// One client request, for its handler.
pub struct Call {
    calls: Calls,
    service: McpService,
    info: CallInfo,
    cancelled: watch::Receiver<bool>,
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
        apply(&self.service, act);
    }

    /// Sends a notification related to this request (on its stream, HTTP-POST-9);
    /// a log message of a 2026-07-28 request only at or above its `logLevel`
    /// (MODERN-21).
    ///
    /// # Errors
    /// [`SendError`] from the core (the request is no longer open, …).
    pub fn notify(&self, method: &str, params: Value) -> Result<(), SendError> {
        self.service
            .with_server(|server, now| self.info.notify(server, now, method, &params))
    }

    /// Sends `notifications/progress` if the client gave a progress token; a no-op
    /// otherwise.
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub fn progress(&self, progress: f64, total: Option<f64>) -> Result<(), SendError> {
        self.service
            .with_server(|server, now| self.info.progress(server, now, progress, total))
    }

    /// Sends a request to the client on this request's stream (`sampling/createMessage`,
    /// `elicitation/create`, …) and waits for its response: the `result`, or the client's
    /// error. Ends early with an error when this request is cancelled or its session ends.
    ///
    /// # Errors
    /// The client's error response; -32603 when the request cannot be sent or this call
    /// was cancelled before the answer came.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.request_with_timeout(method, params, None).await
    }

    /// As [`request`](Self::request), but gives up when `timeout` passes (the core then
    /// drops a late response).
    ///
    /// # Errors
    /// As [`request`](Self::request); -32603 too when no response came in time.
    pub async fn request_with_timeout(
        &self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let (tx, rx) = oneshot::channel();
        let ask = Ask {
            method,
            params: &params,
            timeout,
        };
        // The lock is held while sending, so the response cannot come before its reply
        // slot is kept; the events the send causes are dispatched after it is released
        // (the sink takes it too).
        let sent = {
            let mut calls = lock(&self.calls);
            self.service.with_server_deferred(|server, now| {
                calls.request(server, now, self.info.handle(), ask, ReplyTx(tx))
            })
        };
        self.service.deliver();
        sent?;
        tokio::select! {
            answer = rx => answer.unwrap_or_else(|_| Err(CallError::internal(format!("{method}: no response")))),
            () = self.cancelled() => Err(CallError::internal(format!("{method}: cancelled"))),
        }
    }

    /// Whether the client cancelled the request (or its session ended).
    pub fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }

    /// Resolves when the client cancels the request (or its session ends).
    pub async fn cancelled(&self) {
        let mut rx = self.cancelled.clone();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// The service, for anything else (a notification to the session's GET stream
    /// with [`Target::Session`](mcpwire::server::Target::Session), say).
    pub fn service(&self) -> &McpService {
        &self.service
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

    /// Called once the service is mounted, with the handle through which the
    /// application announces changes outside a call ([`AppHandle::changed`]). The
    /// default drops it.
    fn started(&self, app: AppHandle) {
        let _ = app;
    }

    /// Sees every event of the service before the layer acts on it (to log sessions, to
    /// count); the default ignores them. Runs where the events are dispatched: keep it
    /// short.
    fn observe(&self, event: &Event) {
        let _ = event;
    }

    /// Answers one request (`initialize`, `ping`, `server/discover` and
    /// `subscriptions/listen` are answered before it is asked).
    /// The future is first polled on the task that reads the events, so work before its
    /// first await point should be short: put heavy work behind an await
    /// (`tokio::task::spawn_blocking`, say).
    fn call(&self, call: Call) -> BoxFuture<Result<Value, CallError>>;
}

/// The table entry of one tool.
type ToolFn = Arc<dyn Fn(Call, Value) -> BoxFuture<Result<Value, CallError>> + Send + Sync>;

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
    /// returns the `CallToolResult` (see [`text_result`]).
    #[must_use]
    pub fn with_tool<A, F, Fut>(
        mut self,
        name: &str,
        description: &str,
        input_schema: Value,
        run: F,
    ) -> Self
    where
        A: serde::de::DeserializeOwned,
        F: Fn(Call, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, CallError>> + Send + 'static,
    {
        let run = Arc::new(run);
        let run: ToolFn = Arc::new(move |call, arguments| {
            let run = Arc::clone(&run);
            Box::pin(async move {
                let arguments: A = mcpwire::app::tool_arguments(arguments)?;
                run(call, arguments).await
            })
        });
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

    fn call(&self, call: Call) -> BoxFuture<Result<Value, CallError>> {
        match self.0.route(call.method(), call.params()) {
            Route::Answer(answer) => Box::pin(async move { answer }),
            Route::Run(run, arguments) => run(call, arguments),
        }
    }
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

/// The application layer's state: what [`run`] and [`mount`] share.
struct App {
    handler: Arc<dyn Handler>,
    calls: Calls,
}

impl App {
    fn new(
        handler: Arc<dyn Handler>,
        settings: &Settings,
        entropy: &mut dyn mcpwire::Entropy,
    ) -> Self {
        Self {
            handler,
            calls: Arc::new(Mutex::new(Dispatcher::new(settings, entropy))),
        }
    }

    /// Acts on one event of the service, as the dispatcher says.
    fn dispatch(&self, service: &McpService, event: Event) {
        self.handler.observe(&event);
        let step = lock(&self.calls).handle_event(event, &Described(&*self.handler));
        match step {
            Step::Done => {}
            Step::Act(act) => apply(service, act),
            Step::Run(start) => self.start(service, start),
        }
    }

    /// Runs the handler of a call: in place when it finishes at its first poll, else in a
    /// task of its own.
    fn start(&self, service: &McpService, start: Start<CancelTx>) {
        let (info, cancel, responder) = match start.begin() {
            Ok(parts) => parts,
            Err((responder, refusal)) => {
                finish(&self.calls, service, responder, Err(refusal));
                return;
            }
        };
        let call = Call {
            calls: Arc::clone(&self.calls),
            service: service.clone(),
            info,
            cancelled: cancel.0.subscribe(),
        };
        let mut future = self.handler.call(call);
        // Most handlers finish at their first poll (no await point reached): answer those
        // here, sparing a task and its wake-ups; spawn only the ones that wait. A future
        // registers the waker of each poll, so the task's real waker replaces this one.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            future.as_mut().poll(&mut cx)
        }));
        let result = match first {
            Ok(std::task::Poll::Ready(result)) => Some(result),
            Ok(std::task::Poll::Pending) => None,
            Err(_) => Some(Err(CallError::internal("the handler panicked"))),
        };
        if let Some(result) = result {
            finish(&self.calls, service, responder, result);
            return;
        }
        let service = service.clone();
        let calls = Arc::clone(&self.calls);
        tokio::spawn(async move {
            let result = future.await;
            finish(&calls, &service, responder, result);
        });
    }
}

/// A call's handler finished: the dispatcher forgets it, and its answer goes out unless
/// it was cancelled.
fn finish(calls: &Calls, service: &McpService, responder: Responder, result: Answer) {
    if lock(calls).finish(responder.handle()) {
        service.with_server(|server, now| responder.answer(server, now, result));
    }
}

/// Hands what the layer sends on its own to the server: to `service`'s shard first
/// (where the event came from), then to the others until nothing is left.
fn apply(service: &McpService, mut act: Act) {
    if act.is_empty() {
        return;
    }
    service.with_server(|server, now| act.apply(server, now));
    for shard in service.shards() {
        if act.is_empty() {
            return;
        }
        shard.with_server(|server, now| act.apply(server, now));
    }
}

/// The application layer, for the application outside a call: announcing a change to
/// the `subscriptions/listen` streams (MODERN-13), ending them before a shutdown. Handed
/// to [`Handler::started`] when the service is mounted.
#[derive(Clone)]
pub struct AppHandle {
    calls: Calls,
    /// Weak: the handler that keeps this is kept by the service's sink.
    service: crate::server::WeakService,
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
    /// Does nothing once the service is gone.
    pub fn changed(&self, change: &Change) {
        if let Some(service) = self.service.upgrade() {
            let act = lock(&self.calls).changed(change);
            apply(&service, act);
        }
    }

    /// Ends every listen stream with its result (the graceful end, MODERN-13): for a
    /// server about to shut down.
    pub fn end_listens(&self) {
        if let Some(service) = self.service.upgrade() {
            let act = lock(&self.calls).end_listens();
            apply(&service, act);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Serves the application from the receiver [`McpService::new`] returned: runs `handler`
/// for each request until the event stream ends (in place when it finishes at its first
/// poll, else in a task of its own). Call it once per service. [`mount`] does the same
/// without the channel and its task switches.
pub async fn run(
    service: McpService,
    events: mpsc::UnboundedReceiver<Event>,
    handler: Arc<dyn Handler>,
) {
    run_with(service, events, handler, &Settings::new()).await;
}

/// As [`run`], with the layer's [`Settings`]: the bounds of its tables (calls in
/// flight, early cancels, requests to clients, listens) and the key that seals
/// `requestState` (drawn from the operating system when not given).
pub async fn run_with(
    service: McpService,
    mut events: mpsc::UnboundedReceiver<Event>,
    handler: Arc<dyn Handler>,
    settings: &Settings,
) {
    let mirrors = handler.tool_mirrors();
    if !mirrors.is_empty() {
        let mirrors = Arc::new(mirrors);
        for shard in service.shards() {
            shard.with_server(|server, _| server.set_tool_mirrors(Arc::clone(&mirrors)));
        }
    }
    let app = App::new(handler, settings, &mut mcpwire::OsEntropy);
    app.handler.started(AppHandle {
        calls: Arc::clone(&app.calls),
        service: service.downgrade(),
    });
    while let Some(event) = events.recv().await {
        app.dispatch(&service, event);
    }
}

/// A service that serves `handler` in place ([`McpService::with_dispatch`]): each
/// request's handler is first polled on the connection task that completed the request,
/// and one that finishes then is answered before that task moves on. The same
/// application as [`run`], with no channel and no application task; must be called
/// within a tokio runtime.
pub fn mount(
    config: mcpwire::server::Config,
    entropy: Box<dyn mcpwire::Entropy + Send>,
    handler: Arc<dyn Handler>,
) -> McpService {
    mount_sharded(1, config, entropy, handler)
}

/// As [`mount`], over `shards` cores that split the sessions between them
/// ([`McpService::sharded`]): one application serves them all (the core numbers every
/// shard's sessions and requests apart), each answer going to its request's shard.
///
/// # Panics
///
/// Unless `1 <= shards <= 256`.
pub fn mount_sharded(
    shards: usize,
    config: mcpwire::server::Config,
    entropy: Box<dyn mcpwire::Entropy + Send>,
    handler: Arc<dyn Handler>,
) -> McpService {
    mount_sharded_with(shards, config, entropy, handler, &Settings::new())
}

/// As [`mount_sharded`], with the layer's [`Settings`]: the bounds of its tables
/// (calls in flight, early cancels, requests to clients, listens) and the key that
/// seals `requestState` (drawn from `entropy` when not given).
///
/// # Panics
///
/// Unless `1 <= shards <= 256`.
pub fn mount_sharded_with(
    shards: usize,
    config: mcpwire::server::Config,
    mut entropy: Box<dyn mcpwire::Entropy + Send>,
    handler: Arc<dyn Handler>,
    settings: &Settings,
) -> McpService {
    let mirrors = handler.tool_mirrors();
    let config = if mirrors.is_empty() {
        config
    } else {
        config.with_tool_mirrors(mirrors)
    };
    let app = App::new(handler, settings, &mut *entropy);
    let (handler, calls) = (Arc::clone(&app.handler), Arc::clone(&app.calls));
    let service = McpService::sharded(shards, config, entropy, move |service, event| {
        app.dispatch(service, event);
    });
    handler.started(AppHandle {
        calls,
        service: service.downgrade(),
    });
    service
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use mcpwire::jsonrpc::RawJson;
    use mcpwire::server::Config;
    use mcpwire_tests::server::{counter_entropy, post_head};

    /// HTTP-POST-12: events of different inputs may be handled on different tasks at
    /// once, so a cancel can be handled before its request's handler started; the
    /// handler then starts cancelled, and the early cancel is not kept.
    #[tokio::test]
    async fn http_post_12_a_cancel_handled_before_its_request_starts_the_handler_cancelled() {
        // The service's own sink only collects events, to hand them to an App in the
        // order a race between two connection tasks could.
        let events = Arc::new(Mutex::new(Vec::new()));
        let service = McpService::with_dispatch(Config::new(), counter_entropy(3), {
            let events = Arc::clone(&events);
            move |_, event| lock(&events).push(event)
        });
        let input = |headers: &[(&str, &str)], body: &'static str| {
            service.with_server(|server, now| {
                let x = server.handle_head(now, post_head(headers));
                server.handle_body(now, x, Bytes::from_static(body.as_bytes()));
                server.handle_body_end(now, x);
            });
        };
        input(
            &[],
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
        );
        let Some(Event::Request(init)) = lock(&events).pop() else {
            panic!("initialize reaches the sink");
        };
        service.with_server(|server, now| {
            let result = RawJson::new(r#"{"protocolVersion":"2025-11-25"}"#).unwrap();
            server.respond(now, init.handle(), &result).unwrap();
        });
        let session = service
            .with_server(|server, _| {
                server
                    .session_header(init.session().unwrap())
                    .map(str::to_owned)
            })
            .expect("a session");
        let headers = [
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        input(
            &headers,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"look","arguments":{}}}"#,
        );
        input(
            &headers,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#,
        );
        let mut taken: Vec<Event> = lock(&events).drain(..).collect();
        let at = taken
            .iter()
            .position(|e| matches!(e, Event::Cancelled { .. }))
            .expect("the cancel reaches the sink");
        let cancel = taken.remove(at);
        let request = taken
            .into_iter()
            .find(|e| matches!(e, Event::Request(_)))
            .expect("the request reaches the sink");

        let seen = Arc::new(Mutex::new(None));
        let tools = Tools::new().with_tool("look", "", json!({"type": "object"}), {
            let seen = Arc::clone(&seen);
            move |call, _: Value| {
                *lock(&seen) = Some(call.is_cancelled());
                async move { Ok(text_result("done")) }
            }
        });
        let app = App::new(Arc::new(tools), &Settings::new(), &mut mcpwire::OsEntropy);
        app.dispatch(&service, cancel);
        assert_eq!(lock(&app.calls).early_cancels(), 1);
        app.dispatch(&service, request);
        assert_eq!(*lock(&seen), Some(true), "the handler starts cancelled");
        assert_eq!(lock(&app.calls).early_cancels(), 0);
        assert_eq!(lock(&app.calls).calls(), 0);
    }
}
