//! The client side: [`McpClient`], the client core ([`mcpwire::client::Client`]) driven
//! over hyper-util's HTTP/1.1 client, whose keep-alive pool reuses connections across
//! exchanges (`TCP_NODELAY` set); a long-lived GET stream holds its connection and the
//! pool opens others beside it. `https://` endpoints go over rustls (on aws-lc-rs), trusting
//! Mozilla's roots built in (webpki-roots) unless [`ClientOptions::with_root_certificates`]
//! names others.
//!
//! One driver task owns the core (with the table of callers both adapters share,
//! [`mcpwire::client::Calls`]): it sends the core's requests, feeds it their response
//! heads, bodies and failures, sleeps until its deadline, and hands out what the core
//! decided: each call's progress and result to its [`Call`], the server's own messages to
//! the receiver [`McpClient::connect`] returns. The revision's negotiation, resumes,
//! re-initialization, the legacy fallback and the handshake's timeout
//! ([`Config::with_connect_timeout`]) happen inside the core; what the application must
//! react to (an expired session, a re-initialization, a GET stream that could not be
//! resumed) comes on that receiver too, as [`ServerMessage`]s.
//!
//! # Example
//!
//! ```no_run
//! use mcpwire::client::Config;
//! use mcpwire_tokio::client::McpClient;
//! use serde_json::json;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::new("http://127.0.0.1:8080/mcp".parse()?);
//! // The operating system's generator, for the jitter of reconnection delays.
//! let (client, _messages) = McpClient::connect(config, Box::new(mcpwire::OsEntropy)).await?;
//! println!("speaking {} ({})", client.version(), client.era());
//! let result = client.call_tool("echo", json!({"text": "hi"})).await?;
//! println!("{result}");
//! // Progress comes to the call it belongs to.
//! let mut call = client.start_tool_call("slow_count", json!({"n": 3}), None)?;
//! while let Some(step) = call.progress().await {
//!     println!("{} of {:?}", step.progress, step.total);
//! }
//! println!("{}", call.result().await?);
//! client.close().await;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::{ConfigBuilderExt, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use mcpwire::Entropy;
use mcpwire::Era;
use mcpwire::ProtocolVersion;
use mcpwire::client::{
    CallState, CallUpdate, Calls, Client, Config, Delivery, ExchangeId, RequestError, Transmit,
};
use mcpwire::jsonrpc::{Envelope, RequestId};
use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;

pub use mcpwire::client::{CallError, Progress, ServerMessage};

/// Where one call's progress and outcome go.
type Updates = mpsc::UnboundedSender<CallUpdate>;

struct Shared {
    calls: Mutex<Calls<Updates>>,
    wake: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Calls<Updates>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `f` on the calls under the lock; then the driver wakes to hand out what it did.
    fn with<R>(&self, f: impl FnOnce(&mut Calls<Updates>, Instant) -> R) -> R {
        let r = f(&mut self.lock(), Instant::now());
        self.wake.notify_one();
        r
    }
}

/// A connected MCP client. Clone it freely; dropping the last clone stops its driver.
#[derive(Clone)]
pub struct McpClient {
    shared: Arc<Shared>,
    _driver: Arc<DriverGuard>,
}

struct DriverGuard(JoinHandle<()>);

impl Drop for DriverGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
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
    /// Connects: finds the revision to speak (MODERN-15: `server/discover`, then
    /// `initialize`, then the legacy transport, unless the [`Config`] pins one), runs its
    /// handshake, and returns the client and the server's own messages, with what becomes
    /// of the session ([`ServerMessage`]).
    ///
    /// A server message sent before a response is on the receiver before the call that
    /// waits for that response returns. The receiver ends once the last clone of the
    /// client is gone (after [`close`](Self::close), say) and its driver has stopped,
    /// having yielded everything sent before.
    ///
    /// # Errors
    /// The handshake's [`RequestError`] (refused, unauthorized, timed out, no common
    /// revision, …).
    pub async fn connect(
        config: Config,
        entropy: Box<dyn Entropy + Send>,
    ) -> Result<(Self, mpsc::UnboundedReceiver<ServerMessage>), RequestError> {
        Self::connect_with(config, entropy, ClientOptions::new()).await
    }

    /// [`connect`](Self::connect) with the adapter's own options.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_with(
        config: Config,
        entropy: Box<dyn Entropy + Send>,
        options: ClientOptions,
    ) -> Result<(Self, mpsc::UnboundedReceiver<ServerMessage>), RequestError> {
        let http = http_client(&options);
        let shared = Arc::new(Shared {
            calls: Mutex::new(Calls::new(Client::new(config, entropy))),
            wake: Notify::new(),
        });
        let (messages, rx) = mpsc::unbounded_channel();
        let (connected_tx, connected_rx) = oneshot::channel();
        shared.with(|c, now| c.core().connect(now));
        let driver = tokio::spawn(drive(Arc::clone(&shared), http, messages, connected_tx));
        let driver = Arc::new(DriverGuard(driver));
        match connected_rx.await {
            Ok(Ok(())) => Ok((
                Self {
                    shared,
                    _driver: driver,
                },
                rx,
            )),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(RequestError::Closed),
        }
    }

    /// The server's description from the latest handshake: the `result` of its
    /// `InitializeResult` (capabilities, `serverInfo`, instructions), or at 2026-07-28 of
    /// its `DiscoverResult`; `None` when the server proved modern without one.
    pub fn described(&self) -> Option<Value> {
        self.shared.lock().described()
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
        self.shared.lock().core().negotiated()
    }

    /// The transport in use (as [`version`](Self::version), the latest handshake's).
    pub fn era(&self) -> Era {
        self.latest().1
    }

    fn latest(&self) -> (ProtocolVersion, Era) {
        self.shared.lock().negotiated()
    }

    /// Sets the header `name` of every later request to `value`, or removes it (`None`):
    /// a refreshed `Authorization` token after a call failed with
    /// `CallError::Request(RequestError::Unauthorized { .. })`, say. Headers for every
    /// request from the start go in the [`Config`] ([`Config::with_header`]); see
    /// [`Client::set_header`] for what stays the transport's.
    pub fn set_header(&self, name: http::HeaderName, value: Option<http::HeaderValue>) {
        self.shared.with(|c, _| c.core().set_header(name, value));
    }

    /// The `Mcp-Session-Id` the server issued, if any (it changes after a
    /// re-initialization).
    pub fn session_id(&self) -> Option<String> {
        self.shared.lock().core().session_id().map(str::to_owned)
    }

    /// Sends a request and waits for its result. Dropping the future gives the call up
    /// (the server is told: [`Call`]).
    ///
    /// # Errors
    /// [`CallError`].
    pub async fn call(&self, method: &str, params: Option<Value>) -> Result<Value, CallError> {
        self.start_call(method, params, None)?.result().await
    }

    /// [`call`](Self::call), failing with [`RequestError::Timeout`] after `timeout` (the
    /// server is told: `notifications/cancelled`, or at 2026-07-28 the response closed).
    ///
    /// # Errors
    /// [`CallError`].
    pub async fn call_timeout(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        self.start_call(method, params, Some(timeout))?
            .result()
            .await
    }

    /// Calls the tool `name` with `arguments` and waits for its result (its progress
    /// is dropped: [`start_tool_call`](Self::start_tool_call) hands it out).
    ///
    /// # Errors
    /// [`CallError`]; a tool's own failure is a result with `isError`.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, CallError> {
        self.start_tool_call(name, arguments, None)?.result().await
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
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self
            .shared
            .with(|c, now| c.call(now, method, params.as_ref(), timeout.map(|t| now + t), tx))?;
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
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self
            .shared
            .with(|c, now| c.call_tool(now, name, arguments, timeout.map(|t| now + t), tx))?;
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
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self
            .shared
            .with(|c, now| c.listen(now, notifications, tx))?;
        Ok(self.handle(id, rx))
    }

    fn handle(&self, id: RequestId, updates: mpsc::UnboundedReceiver<CallUpdate>) -> Call {
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
            .with(|c, now| c.notify(now, method, params.as_ref()))
    }

    /// Answers a server→client request ([`ServerMessage::Request`]).
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub fn respond(&self, id: &RequestId, result: Value) -> Result<(), CallError> {
        self.shared.with(|c, now| c.respond(now, id, &result))
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
            .with(|c, now| c.respond_error(now, id, code, message))
    }

    /// Ends the session (DELETE) and waits, briefly, for the driver to finish.
    pub async fn close(self) {
        self.shared.with(|c, now| c.core().close(now));
        let deadline = tokio::time::sleep(Duration::from_secs(2));
        tokio::pin!(deadline);
        loop {
            if self.shared.lock().core().is_idle() {
                return;
            }
            tokio::select! {
                () = &mut deadline => return,
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }
}

/// A request in flight: its progress (for a tool call, [`McpClient::start_tool_call`]),
/// then its result. Dropping it before the result gives the call up: the server is told
/// (at 2026-07-28 by closing the call's response, MODERN-11; else with
/// `notifications/cancelled`), and nothing more of it is read.
pub struct Call {
    id: RequestId,
    updates: mpsc::UnboundedReceiver<CallUpdate>,
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
    /// The request's id (the one the application's own messages, such as a cancel,
    /// name).
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The next progress notification of this tool call, in the order the server sent
    /// them; `None` once the call has ended (its result is then ready for
    /// [`result`](Self::result)).
    pub async fn progress(&mut self) -> Option<Progress> {
        loop {
            if let CallUpdate::Progress(p) = self.next().await? {
                return Some(p);
            }
        }
    }

    /// The next notification of this listen ([`McpClient::listen`]), in the order the
    /// server sent them (`notifications/subscriptions/acknowledged` first); `None` once
    /// the server ended the stream.
    pub async fn notification(&mut self) -> Option<Envelope> {
        loop {
            if let CallUpdate::Notification(n) = self.next().await? {
                return Some(n);
            }
        }
    }

    /// The next update before the outcome, which is kept for [`result`](Self::result).
    async fn next(&mut self) -> Option<CallUpdate> {
        if !self.state.is_waiting() {
            return None;
        }
        let update = self.updates.recv().await;
        self.state.take(update)
    }

    /// Waits for the result, passing over progress not yet read.
    ///
    /// # Errors
    /// [`CallError`].
    pub async fn result(mut self) -> Result<Value, CallError> {
        while self.next().await.is_some() {}
        self.state.result()
    }

    /// Gives the call up (as dropping it does).
    pub fn cancel(self) {}
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.state.is_waiting() {
            self.shared.with(|c, now| c.cancel(now, &self.id));
        }
    }
}

/// What the driver's exchange tasks report.
enum Report {
    Head(ExchangeId, http::response::Parts),
    Body(ExchangeId, Bytes),
    End(ExchangeId),
    /// The exchange failed; why, as text.
    Failed(ExchangeId, String),
}

/// The outcome of the first handshake (the negotiated revision is in the calls).
type Connected = oneshot::Sender<Result<(), RequestError>>;

/// How the adapter connects.
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct ClientOptions {
    /// The DER root certificates to trust instead of Mozilla's.
    roots: Option<Vec<Vec<u8>>>,
}

impl ClientOptions {
    /// The defaults: Mozilla's root certificates (webpki-roots) for `https://`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts exactly these root certificates (DER) for `https://` endpoints, instead of
    /// Mozilla's: a private CA, or a test server's own. One that does not parse is
    /// skipped; with none left no server is trusted.
    pub fn with_root_certificates(mut self, roots: impl IntoIterator<Item = Vec<u8>>) -> Self {
        self.roots = Some(roots.into_iter().collect());
        self
    }
}

/// The connection pool every exchange of one [`McpClient`] goes through.
type HttpClient = hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An HTTP/1.1 keep-alive pool whose connections set `TCP_NODELAY`, plain or over TLS as
/// the URL says.
fn http_client(options: &ClientOptions) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    // `https` URLs go to the TLS layer, so the TCP connector must not refuse them.
    connector.enforce_http(false);
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("aws-lc-rs supports rustls's default protocol versions");
    let tls = match &options.roots {
        None => tls.with_webpki_roots(),
        Some(roots) => {
            let mut store = rustls::RootCertStore::empty();
            store.add_parsable_certificates(
                roots
                    .iter()
                    .map(|der| rustls::pki_types::CertificateDer::from(der.clone())),
            );
            tls.with_root_certificates(store)
        }
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.with_no_client_auth())
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .build(connector)
}

async fn drive(
    shared: Arc<Shared>,
    http: HttpClient,
    messages: mpsc::UnboundedSender<ServerMessage>,
    connected: Connected,
) {
    let mut connected = Some(connected);
    let (reports_tx, mut reports) = mpsc::unbounded_channel::<Report>();
    let mut tasks: HashMap<ExchangeId, JoinHandle<()>> = HashMap::new();
    loop {
        // Hand out everything the core has: its requests to the network, its events to
        // whom they concern.
        let (transmits, deadline) = {
            let mut calls = shared.lock();
            let core = calls.core();
            let transmits: Vec<Transmit> = std::iter::from_fn(|| core.poll_transmit()).collect();
            let deadline = core.poll_timeout();
            calls.pump(|delivery| match delivery {
                Delivery::Call(to, update) => {
                    let _ = to.send(update);
                }
                Delivery::Message(m) => {
                    let _ = messages.send(m);
                }
                Delivery::Connected(outcome) => {
                    if let Some(tx) = connected.take() {
                        let _ = tx.send(outcome);
                    }
                }
            });
            (transmits, deadline)
        };
        for t in transmits {
            match t {
                Transmit::Request {
                    exchange,
                    head,
                    body,
                } => {
                    let task = tokio::spawn(exchange_task(
                        http.clone(),
                        exchange,
                        head,
                        body,
                        reports_tx.clone(),
                    ));
                    tasks.insert(exchange, task);
                }
                Transmit::Abort(x) => {
                    if let Some(task) = tasks.remove(&x) {
                        task.abort();
                    }
                }
            }
        }
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => shared.with(|c, now| c.core().handle_timeout(now)),
            () = shared.wake.notified() => {}
            Some(report) = reports.recv() => {
                let mut calls = shared.lock();
                let core = calls.core();
                let now = Instant::now();
                match report {
                    Report::Head(x, head) => core.handle_head(now, x, head),
                    Report::Body(x, bytes) => core.handle_body(now, x, bytes),
                    Report::End(x) => {
                        tasks.remove(&x);
                        core.handle_body_end(now, x);
                    }
                    Report::Failed(x, cause) => {
                        tasks.remove(&x);
                        core.handle_failure_with(now, x, &cause);
                    }
                }
            }
        }
    }
}

/// One HTTP exchange, on a pooled connection or a new one.
///
/// The head carries the absolute URI and the `Host` header the core wrote; the pool
/// sends the request in origin form. Aborting the task drops the exchange, and with it a
/// connection that is still busy (it is not returned to the pool).
async fn exchange_task(
    http: HttpClient,
    x: ExchangeId,
    head: http::request::Parts,
    body: Bytes,
    reports: mpsc::UnboundedSender<Report>,
) {
    let failed = |reports: &mpsc::UnboundedSender<Report>, e: &dyn std::error::Error| {
        let _ = reports.send(Report::Failed(x, causes(e)));
    };
    let request = http::Request::from_parts(head, Full::new(body));
    let response = match http.request(request).await {
        Ok(response) => response,
        Err(e) => return failed(&reports, &e),
    };
    let (parts, mut body) = response.into_parts();
    let _ = reports.send(Report::Head(x, parts));
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let _ = reports.send(Report::Body(x, data));
                }
            }
            Some(Err(e)) => return failed(&reports, &e),
            None => {
                let _ = reports.send(Report::End(x));
                return;
            }
        }
    }
}

/// An error and its sources, outermost first: hyper-util's "client error (Connect)"
/// says little until its source says "Connection refused".
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}
