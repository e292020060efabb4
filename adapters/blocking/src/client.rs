//! The client side: [`McpClient`], the client core ([`mcpwire::client::Client`]) driven
//! over [`ureq`] 3 with blocking threads and no async runtime. The blocking mirror of
//! `mcpwire_tokio::client::McpClient`, with the same names.
//!
//! The adapter moves bytes and time, and nothing else: the core's requests go out as
//! ureq requests, their response heads, body chunks, ends and failures go back into the
//! core, its deadlines drive one timer thread, and what the core decided is handed out by
//! the table of callers both adapters share ([`mcpwire::client::Calls`]): each call's
//! progress and result to its [`Call`], the server's own messages to the receiver
//! [`McpClient::connect`] returns. The revision's negotiation, the handshake and its timeout ([`Config::with_connect_timeout`]), resumes after a
//! `retry` with `Last-Event-ID`, re-initialization after a 404, and the legacy fallback
//! all happen inside the core; what the application must react to (an expired session,
//! a re-initialization, a GET stream that could not be resumed) comes on that receiver
//! too, as [`ServerMessage`]s.
//!
//! # Example
//!
//! ```no_run
//! use mcpwire::client::Config;
//! use mcpwire_blocking::client::McpClient;
//! use serde_json::json;
//!
//! let config = Config::new("http://127.0.0.1:8080/mcp".parse()?);
//! // The operating system's generator, for the jitter of reconnection delays.
//! let (client, _messages) = McpClient::connect(config, Box::new(mcpwire::OsEntropy))?;
//! println!("speaking {} ({})", client.version(), client.era());
//! let result = client.call_tool("echo", json!({"text": "hi"}))?;
//! println!("{result}");
//! // Progress comes to the call it belongs to.
//! let mut call = client.start_tool_call("slow_count", json!({"n": 3}), None)?;
//! while let Some(step) = call.progress() {
//!     println!("{} of {:?}", step.progress, step.total);
//! }
//! println!("{}", call.result()?);
//! client.close();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Threads
//!
//! - **Exchange threads**: each [`Transmit::Request`] of the core runs on a thread of
//!   its own, from sending the request to the end (or failure) of its response. A
//!   long-lived SSE stream (the session's GET stream, a slow POST stream) holds its
//!   thread for its whole life. At most [`ClientOptions::with_max_exchanges`] run at
//!   once (64 by default); the core's further requests wait, in order, until one ends.
//! - **The timer**: sleeps until [`Client::poll_timeout`], or until an input moved it
//!   earlier, and then calls [`Client::handle_timeout`].
//! - **The caller's**: [`McpClient::call`] blocks its thread until the core hands out
//!   the response (or its failure); `connect` and `close` block likewise.
//!
//! # Locking
//!
//! One [`Mutex`] guards the core, the table of waiting callers, and the adapter's
//! bookkeeping of exchanges. Every input (a head, a body chunk, an end, a failure, a
//! timeout, a call from the application) is one lock, one call into the core, and then,
//! still under the lock, a pump: the core's events go to their callers and to the
//! message channel, and its transmits are collected. New threads are started and
//! aborted connections shut down after the lock is released. One [`Condvar`] tells the
//! timer (and a waiting [`McpClient::close`]) that something changed. Because a call
//! registers its waiter under the same lock as its request, its answer cannot be
//! dispatched before someone waits for it.
//!
//! # Connections
//!
//! Requests go through one [`ureq::Agent`], whose keep-alive pool reuses connections
//! across exchanges (`TCP_NODELAY` is ureq's default). A GET (a stream: the standalone
//! stream, a resume, the legacy stream) gets an agent of its own, so that when the core
//! aborts it ([`Transmit::Abort`]) the adapter can shut that agent's connection down and
//! unblock its thread's read. An aborted POST is only marked: its thread stops at its
//! next chunk, or when the server ends the response, or when the last clone of the
//! client is dropped (which shuts the shared pool down). Non-2xx statuses are handed to the
//! core like any other (`http_status_as_error(false)`), redirects are not followed, and
//! no content coding is offered (gzip would buffer SSE). No timeout bounds a whole
//! request or body (an SSE stream may last for hours); [`ClientOptions::with_read_timeout`]
//! is an optional idle watchdog per read. `https://` endpoints go over rustls (on
//! aws-lc-rs), trusting Mozilla's roots built in (webpki-roots) unless
//! [`ClientOptions::with_root_certificates`] names others.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcpwire::Entropy;
use mcpwire::client::{
    CallState, CallUpdate, Calls, Client, Config, Delivery, ExchangeId, RequestError, Transmit,
};
use mcpwire::jsonrpc::{Envelope, RequestId};
use mcpwire::{Era, ProtocolVersion};
use serde_json::Value;

pub use mcpwire::client::{CallError, Progress, ServerMessage};

/// How the adapter runs its exchanges.
#[derive(Clone, Debug)]
#[must_use]
pub struct ClientOptions {
    max_exchanges: usize,
    connect_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    read_size: usize,
    /// The DER root certificates to trust instead of Mozilla's.
    roots: Option<Vec<Vec<u8>>>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientOptions {
    /// 64 exchange threads at most, a 10 s TCP connect timeout, no read timeout, 16 KiB
    /// reads.
    pub fn new() -> Self {
        Self {
            max_exchanges: 64,
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: None,
            read_size: 16 << 10,
            roots: None,
        }
    }

    /// The most exchanges (threads) running at once; the core's further requests wait
    /// for one to end. Every open SSE stream holds one (at least 2: a GET stream and a
    /// POST).
    pub fn with_max_exchanges(mut self, exchanges: usize) -> Self {
        self.max_exchanges = exchanges.max(2);
        self
    }

    /// How long opening a TCP connection may take (`None`: the system's limit).
    pub fn with_connect_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// An idle watchdog: a response (head or body) that sends nothing for this long is
    /// reported to the core as a broken exchange, which then resumes or fails it as it
    /// would after a reset. Off by default: a quiet stream (a GET stream with no
    /// heartbeats, a POST whose tool runs long without progress) is not broken. Set it
    /// above the server's heartbeat interval to notice a half-open connection.
    pub fn with_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// The size of each read from a response body, handed to the core as one chunk.
    pub fn with_read_size(mut self, bytes: usize) -> Self {
        self.read_size = bytes.max(1);
        self
    }

    /// Trusts exactly these root certificates (DER) for `https://` endpoints, instead of
    /// Mozilla's: a private CA, or a test server's own. One that does not parse is
    /// skipped; with none left no server is trusted.
    pub fn with_root_certificates(mut self, roots: impl IntoIterator<Item = Vec<u8>>) -> Self {
        self.roots = Some(roots.into_iter().collect());
        self
    }

    /// ureq's TLS settings for these options.
    fn tls(&self) -> ureq::tls::TlsConfig {
        use ureq::tls::{Certificate, RootCerts, TlsConfig};
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let roots = match &self.roots {
            None => RootCerts::WebPki,
            Some(roots) => roots
                .iter()
                .map(|der| Certificate::from_der(der).to_owned())
                .into(),
        };
        TlsConfig::builder()
            .unversioned_rustls_crypto_provider(provider)
            .root_certs(roots)
            .build()
    }
}

/// Where one call's progress and outcome go.
type Updates = Sender<CallUpdate>;
/// The outcome of the first handshake (the negotiated revision is in the calls).
type Connected = SyncSender<Result<(), RequestError>>;

/// One exchange thread's handle, for an abort.
struct Running {
    aborted: Arc<AtomicBool>,
    /// The GET's own agent, shut down on abort.
    agent: Option<ureq::Agent>,
}

/// Everything under the lock.
struct State {
    calls: Calls<Updates>,
    messages: Sender<ServerMessage>,
    connected: Option<Connected>,
    running: HashMap<ExchangeId, Running>,
    /// Requests waiting for a free exchange thread.
    queued: VecDeque<(ExchangeId, http::request::Parts, Bytes)>,
    stopped: bool,
}

/// What to do once the lock is released.
#[derive(Default)]
struct Work {
    start: Vec<Start>,
    shutdown: Vec<ureq::Agent>,
}

struct Start {
    exchange: ExchangeId,
    head: http::request::Parts,
    body: Bytes,
    agent: ureq::Agent,
    aborted: Arc<AtomicBool>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    agent: ureq::Agent,
    agent_config: ureq::config::Config,
    options: ClientOptions,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One input: `f` on the core under the lock, the pump, then the work outside it.
    fn with<R>(self: &Arc<Self>, f: impl FnOnce(&mut State, Instant) -> R) -> R {
        let mut state = self.lock();
        let r = f(&mut state, Instant::now());
        let work = self.pump(&mut state);
        drop(state);
        self.changed.notify_all();
        self.run(work);
        r
    }

    /// Moves the core's events to their receivers and its transmits into `Work`.
    fn pump(&self, state: &mut State) -> Work {
        let mut work = Work::default();
        while let Some(t) = state.calls.core().poll_transmit() {
            match t {
                Transmit::Request {
                    exchange,
                    head,
                    body,
                } => state.queued.push_back((exchange, head, body)),
                Transmit::Abort(x) => {
                    state.queued.retain(|(q, _, _)| *q != x);
                    if let Some(r) = state.running.remove(&x) {
                        r.aborted.store(true, Ordering::SeqCst);
                        work.shutdown.extend(r.agent);
                    }
                }
            }
        }
        while state.running.len() < self.options.max_exchanges {
            let Some((exchange, head, body)) = state.queued.pop_front() else {
                break;
            };
            let aborted = Arc::new(AtomicBool::new(false));
            // A GET is a stream that may last: its own agent, so an abort can close it.
            let own = (head.method == http::Method::GET).then(|| self.agent_config.new_agent());
            let agent = own.clone().unwrap_or_else(|| self.agent.clone());
            state.running.insert(
                exchange,
                Running {
                    aborted: Arc::clone(&aborted),
                    agent: own,
                },
            );
            work.start.push(Start {
                exchange,
                head,
                body,
                agent,
                aborted,
            });
        }
        let State {
            calls,
            messages,
            connected,
            ..
        } = state;
        calls.pump(|delivery| match delivery {
            Delivery::Call(to, update) => {
                let _ = to.send(update);
            }
            Delivery::Message(m) => {
                let _ = messages.send(m);
            }
            Delivery::Connected(outcome) => {
                if let Some(tx) = connected.take() {
                    let _ = tx.try_send(outcome);
                }
            }
        });
        work
    }

    fn run(self: &Arc<Self>, work: Work) {
        for agent in work.shutdown {
            agent.shutdown();
        }
        for start in work.start {
            let (x, aborted) = (start.exchange, Arc::clone(&start.aborted));
            let shared = Arc::clone(self);
            let spawned = thread::Builder::new()
                .name(format!("mcpwire-client-{x}"))
                .spawn(move || exchange(&shared, start));
            if spawned.is_err() {
                // No thread: the exchange fails as a broken connection would. The core
                // decides what that means (a failed request, a resume later).
                self.report(
                    x,
                    &aborted,
                    Report::Failed("no thread for the exchange".into()),
                );
            }
        }
    }

    /// An exchange thread's report, unless the core aborted the exchange.
    fn report(self: &Arc<Self>, x: ExchangeId, aborted: &AtomicBool, r: Report) {
        self.with(|state, now| {
            if aborted.load(Ordering::SeqCst) {
                return;
            }
            let core = state.calls.core();
            match r {
                Report::Head(head) => core.handle_head(now, x, head),
                Report::Body(chunk) => core.handle_body(now, x, chunk),
                Report::End => {
                    state.running.remove(&x);
                    core.handle_body_end(now, x);
                }
                Report::Failed(cause) => {
                    state.running.remove(&x);
                    core.handle_failure_with(now, x, &cause);
                }
            }
        });
    }
}

/// What an exchange thread reports.
enum Report {
    Head(http::response::Parts),
    Body(Bytes),
    End,
    /// The exchange failed; why, as text.
    Failed(String),
}

/// One HTTP exchange: the request, then the response's head and body chunks, each into
/// the core as it arrives.
fn exchange(shared: &Arc<Shared>, start: Start) {
    let Start {
        exchange: x,
        head,
        body,
        agent,
        aborted,
    } = start;
    let sent = if body.is_empty() {
        agent.run(http::Request::from_parts(head, ()))
    } else {
        agent.run(http::Request::from_parts(head, &body[..]))
    };
    let response = match sent {
        Ok(r) => r,
        Err(e) => return shared.report(x, &aborted, Report::Failed(e.to_string())),
    };
    let (parts, body) = response.into_parts();
    shared.report(x, &aborted, Report::Head(parts));
    let mut reader = body.into_reader();
    let mut buf = vec![0; shared.options.read_size];
    loop {
        if aborted.load(Ordering::SeqCst) {
            return;
        }
        match reader.read(&mut buf) {
            Ok(0) => return shared.report(x, &aborted, Report::End),
            Ok(n) => {
                let chunk = Bytes::copy_from_slice(&buf[..n]);
                shared.report(x, &aborted, Report::Body(chunk));
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // After an abort (`Agent::shutdown`) this is the expected end; `report`
            // drops it then.
            Err(e) => return shared.report(x, &aborted, Report::Failed(e.to_string())),
        }
    }
}

/// The timer: `handle_timeout` at each of the core's deadlines, until stopped.
fn timer(shared: &Arc<Shared>) {
    let mut state = shared.lock();
    loop {
        if state.stopped {
            return;
        }
        let now = Instant::now();
        match state.calls.core().poll_timeout() {
            Some(at) if at <= now => {
                state.calls.core().handle_timeout(now);
                let work = shared.pump(&mut state);
                drop(state);
                shared.changed.notify_all();
                shared.run(work);
                state = shared.lock();
            }
            Some(at) => {
                state = shared
                    .changed
                    .wait_timeout(state, at - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            None => {
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(|p| p.into_inner());
            }
        }
    }
}

/// Stops the timer and every stream when the last [`McpClient`] clone goes.
struct Guard(Arc<Shared>);

impl Drop for Guard {
    fn drop(&mut self) {
        let shared = &self.0;
        let agents: Vec<ureq::Agent> = {
            let mut state = shared.lock();
            state.stopped = true;
            let core = state.calls.core();
            core.close(Instant::now());
            // Whatever the close transmits now goes unsent: nothing drives it any more.
            let _ = std::iter::from_fn(|| core.poll_transmit()).count();
            state.queued.clear();
            // The receiver ends now, after what was already sent, even while threads
            // that still hold `shared` wind down.
            drop(std::mem::replace(&mut state.messages, mpsc::channel().0));
            state
                .running
                .drain()
                .filter_map(|(_, r)| {
                    r.aborted.store(true, Ordering::SeqCst);
                    r.agent
                })
                .collect()
        };
        shared.changed.notify_all();
        for agent in agents {
            agent.shutdown();
        }
        // The POSTs' pool too: a thread still reading a response stops now.
        shared.agent.clone().shutdown();
    }
}

/// A connected MCP client. Clone it freely; dropping the last clone stops its timer and
/// closes every connection (without the DELETE of [`close`](Self::close)).
#[derive(Clone)]
pub struct McpClient {
    shared: Arc<Shared>,
    _guard: Arc<Guard>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("version", &self.version())
            .field("era", &self.era())
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// Connects: runs the handshake (with the legacy fallback when the server needs it)
    /// and returns the client and the server's own messages, with what becomes of the
    /// session ([`ServerMessage`]). Blocks until the core reports the handshake's
    /// outcome (at most the config's connect timeout).
    ///
    /// A server message sent before a response is on the receiver before the call that
    /// waits for that response returns. The receiver ends once the last clone of the
    /// client is gone (after [`close`](Self::close), say), having yielded everything
    /// sent before.
    ///
    /// # Errors
    /// The handshake's [`RequestError`] (refused, unauthorized, timed out, …).
    pub fn connect(
        config: Config,
        entropy: Box<dyn Entropy + Send>,
    ) -> Result<(Self, Receiver<ServerMessage>), RequestError> {
        Self::connect_with(config, entropy, ClientOptions::new())
    }

    /// [`connect`](Self::connect) with the adapter's own options.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub fn connect_with(
        config: Config,
        entropy: Box<dyn Entropy + Send>,
        options: ClientOptions,
    ) -> Result<(Self, Receiver<ServerMessage>), RequestError> {
        let agent_config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_connect(options.connect_timeout)
            .tls_config(options.tls())
            .timeout_per_read(options.read_timeout)
            .build();
        let (messages, rx) = mpsc::channel();
        let (connected_tx, connected_rx) = mpsc::sync_channel(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                calls: Calls::new(Client::new(config, entropy)),
                messages,
                connected: Some(connected_tx),
                running: HashMap::new(),
                queued: VecDeque::new(),
                stopped: false,
            }),
            changed: Condvar::new(),
            agent: agent_config.new_agent(),
            agent_config,
            options,
        });
        let guard = Arc::new(Guard(Arc::clone(&shared)));
        let timer_shared = Arc::clone(&shared);
        thread::Builder::new()
            .name("mcpwire-client-timer".into())
            .spawn(move || timer(&timer_shared))
            .map_err(|e| RequestError::BadResponse(format!("no timer thread: {e}")))?;
        shared.with(|state, now| state.calls.core().connect(now));
        match connected_rx.recv() {
            Ok(Ok(())) => Ok((
                Self {
                    shared,
                    _guard: guard,
                },
                rx,
            )),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(RequestError::Closed),
        }
    }

    /// The negotiated revision: the handshake's of [`connect`](Self::connect), or, after
    /// a re-initialization, the one [`ServerMessage::Reconnected`] reported.
    pub fn version(&self) -> ProtocolVersion {
        self.latest().0
    }

    /// What the handshake settled on, to hand back in [`Config::with_revision`] the next
    /// time this server is called, skipping the probe (MODERN-26: cache it per origin);
    /// `None` once the client is closed.
    pub fn negotiated(&self) -> Option<mcpwire::client::Revision> {
        self.shared.lock().calls.core().negotiated()
    }

    /// The transport in use (as [`version`](Self::version), the latest handshake's).
    pub fn era(&self) -> Era {
        self.latest().1
    }

    fn latest(&self) -> (ProtocolVersion, Era) {
        self.shared.lock().calls.negotiated()
    }

    /// Sets the header `name` of every later request to `value`, or removes it (`None`):
    /// a refreshed `Authorization` token after a call failed with
    /// `CallError::Request(RequestError::Unauthorized { .. })`, say. Headers for every
    /// request from the start go in the [`Config`] ([`Config::with_header`]); see
    /// [`Client::set_header`] for what stays the transport's.
    pub fn set_header(&self, name: http::HeaderName, value: Option<http::HeaderValue>) {
        self.shared.lock().calls.core().set_header(name, value);
    }

    /// The `Mcp-Session-Id` the server issued, if any (it changes after a
    /// re-initialization).
    pub fn session_id(&self) -> Option<String> {
        self.shared
            .lock()
            .calls
            .core()
            .session_id()
            .map(str::to_owned)
    }

    /// Sends a request and blocks until its result.
    ///
    /// # Errors
    /// [`CallError`].
    pub fn call(&self, method: &str, params: Option<Value>) -> Result<Value, CallError> {
        self.start_call(method, params, None)?.result()
    }

    /// [`call`](Self::call), failing with [`RequestError::Timeout`] after `timeout` (the
    /// server is told: `notifications/cancelled`, or at 2026-07-28 the response closed).
    ///
    /// # Errors
    /// [`CallError`].
    pub fn call_timeout(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        self.start_call(method, params, Some(timeout))?.result()
    }

    /// Calls the tool `name` with `arguments` and blocks until its result (its progress
    /// is dropped: [`start_tool_call`](Self::start_tool_call) hands it out).
    ///
    /// # Errors
    /// [`CallError`]; a tool's own failure is a result with `isError`.
    pub fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, CallError> {
        self.start_tool_call(name, arguments, None)?.result()
    }

    /// Sends a request, failing after `timeout` if given; the [`Call`] yields its result.
    ///
    /// # Errors
    /// The core's refusal: [`CallError::Refused`], [`CallError::Closed`].
    pub fn start_call(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Option<Duration>,
    ) -> Result<Call, CallError> {
        let (tx, rx) = mpsc::channel();
        let id = self.shared.with(|state, now| {
            let deadline = timeout.map(|t| now + t);
            state.calls.call(now, method, params.as_ref(), deadline, tx)
        })?;
        Ok(self.handle(id, rx))
    }

    /// Calls the tool `name` with `arguments` under a progress token of its own: the
    /// [`Call`] yields the server's progress for it, then its result.
    ///
    /// # Errors
    /// As [`start_call`](Self::start_call).
    pub fn start_tool_call(
        &self,
        name: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<Call, CallError> {
        let (tx, rx) = mpsc::channel();
        let id = self.shared.with(|state, now| {
            let deadline = timeout.map(|t| now + t);
            state.calls.call_tool(now, name, arguments, deadline, tx)
        })?;
        Ok(self.handle(id, rx))
    }

    /// Opens a `subscriptions/listen` stream (2026-07-28, MODERN-13) for `notifications`
    /// (`{"toolsListChanged": true, …}`): the [`Call`]'s
    /// [`notification`](Call::notification)s are the server's, the acknowledgement first;
    /// dropping it closes the stream.
    ///
    /// # Errors
    /// [`RequestError::Unsendable`] in the older eras (their list changes come on the
    /// receiver of [`connect`](Self::connect)); as [`start_call`](Self::start_call).
    pub fn listen(&self, notifications: Value) -> Result<Call, CallError> {
        let (tx, rx) = mpsc::channel();
        let id = self
            .shared
            .with(|state, now| state.calls.listen(now, notifications, tx))?;
        Ok(self.handle(id, rx))
    }

    fn handle(&self, id: RequestId, updates: Receiver<CallUpdate>) -> Call {
        Call {
            id,
            updates,
            state: CallState::new(),
            shared: Arc::clone(&self.shared),
        }
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// [`CallError::Closed`] once closed; [`CallError::Refused`].
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), CallError> {
        self.shared
            .with(|state, now| state.calls.notify(now, method, params.as_ref()))
    }

    /// Answers a server→client request ([`ServerMessage::Request`]).
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub fn respond(&self, id: &RequestId, result: Value) -> Result<(), CallError> {
        self.shared
            .with(|state, now| state.calls.respond(now, id, &result))
    }

    /// Answers a server→client request ([`ServerMessage::Request`]) with a JSON-RPC error:
    /// one the application does not serve (-32601), or cannot do now.
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub fn respond_error(
        &self,
        id: &RequestId,
        code: mcpwire::jsonrpc::ErrorCode,
        message: &str,
    ) -> Result<(), CallError> {
        self.shared
            .with(|state, now| state.calls.respond_error(now, id, code, message))
    }

    /// Ends the session (DELETE, when the server issued one) and waits, at most 2 s,
    /// for the core to let go of every exchange.
    pub fn close(self) {
        self.shared.with(|state, now| state.calls.core().close(now));
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut state = self.shared.lock();
        while !state.calls.core().is_idle() {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A request in flight: its progress (for a tool call, [`McpClient::start_tool_call`]),
/// then its result. Dropping it before the result gives the call up: the server is told
/// (at 2026-07-28 by closing the call's response, MODERN-11; else with
/// `notifications/cancelled`), and nothing more of it is read.
pub struct Call {
    id: RequestId,
    updates: Receiver<CallUpdate>,
    state: CallState,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Call {
    /// The request's id.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// Blocks for the next progress notification of this tool call, in the order the server sent
    /// them; `None` once the call has ended (its result is then ready for
    /// [`result`](Self::result)).
    pub fn progress(&mut self) -> Option<Progress> {
        loop {
            if let CallUpdate::Progress(p) = self.next()? {
                return Some(p);
            }
        }
    }

    /// Blocks for the next notification of this listen ([`McpClient::listen`]), in the order the
    /// server sent them (`notifications/subscriptions/acknowledged` first); `None` once
    /// the server ended the stream.
    pub fn notification(&mut self) -> Option<Envelope> {
        loop {
            if let CallUpdate::Notification(n) = self.next()? {
                return Some(n);
            }
        }
    }

    /// The next update before the outcome, which is kept for [`result`](Self::result).
    fn next(&mut self) -> Option<CallUpdate> {
        if !self.state.is_waiting() {
            return None;
        }
        let update = self.updates.recv().ok();
        self.state.take(update)
    }

    /// Blocks until the result, passing over progress not yet read.
    ///
    /// # Errors
    /// [`CallError`].
    pub fn result(mut self) -> Result<Value, CallError> {
        while self.next().is_some() {}
        self.state.result()
    }

    /// Gives the call up (as dropping it does).
    pub fn cancel(self) {}
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.state.is_waiting() {
            self.shared
                .with(|state, now| state.calls.cancel(now, &self.id));
        }
    }
}
