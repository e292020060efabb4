//! The client side: [`McpClient`], the client core ([`mcpwire::client::Client`]) driven
//! over hyper-util's HTTP/1.1 client, whose keep-alive pool reuses connections across
//! exchanges (`TCP_NODELAY` set); a long-lived GET stream holds its connection and the
//! pool opens others beside it. `https://` endpoints go over rustls (on aws-lc-rs), trusting
//! Mozilla's roots built in (webpki-roots) unless [`ClientOptions::with_root_certificates`]
//! names others.
//!
//! One driver task owns the core: it sends the core's requests, feeds it their response
//! heads, bodies and failures, sleeps until its deadline, and turns its events into
//! answers for [`McpClient::call`] and messages on the receiver [`McpClient::connect`]
//! returns. Resumes, re-initialization, the legacy fallback and the handshake's timeout
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
//! let params = json!({"name": "echo", "arguments": {"text": "hi"}});
//! let result = client.call("tools/call", Some(params)).await?;
//! println!("{result}");
//! client.close().await;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::{ConfigBuilderExt, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use mcpwire::Entropy;
use mcpwire::Era;
use mcpwire::ProtocolVersion;
use mcpwire::client::{Client, Config, Event, ExchangeId, RequestError, Transmit};
use mcpwire::jsonrpc::{Envelope, Message, RawJson, RequestId};
use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;

/// Why a call got no result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallError {
    /// The server answered with a JSON-RPC error.
    Rpc {
        /// The code.
        code: i64,
        /// The message.
        message: String,
    },
    /// No answer (a lost stream, an expired session, a timeout, …).
    Request(RequestError),
    /// The client is not connected or was closed.
    Closed,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Rpc { code, message } => write!(f, "error {code}: {message}"),
            Self::Request(e) => e.fmt(f),
            Self::Closed => f.write_str("the client is closed"),
        }
    }
}

impl std::error::Error for CallError {}

pub use mcpwire::client::ServerMessage;

type Waiter = oneshot::Sender<Result<Envelope, CallError>>;

struct Shared {
    core: Mutex<Client>,
    wake: Notify,
    waiters: Mutex<HashMap<RequestId, Waiter>>,
    /// What the latest handshake negotiated; set by the driver before it reports one.
    negotiated: Mutex<(ProtocolVersion, Era)>,
}

impl Shared {
    fn with<R>(&self, f: impl FnOnce(&mut Client, Instant) -> R) -> R {
        let r = f(
            &mut self.core.lock().unwrap_or_else(|p| p.into_inner()),
            Instant::now(),
        );
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
    /// Connects: runs the handshake (with the legacy fallback when the server needs it)
    /// and returns the client and the server's own messages, with what becomes of the
    /// session ([`ServerMessage`]).
    ///
    /// A server message sent before a response is on the receiver before the call that
    /// waits for that response returns. The receiver ends once the last clone of the
    /// client is gone (after [`close`](Self::close), say) and its driver has stopped,
    /// having yielded everything sent before.
    ///
    /// # Errors
    /// The handshake's [`RequestError`] (refused, unauthorized, timed out, …).
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
            core: Mutex::new(Client::new(config, entropy)),
            wake: Notify::new(),
            waiters: Mutex::new(HashMap::new()),
            // Replaced by the driver before `connected` reports the handshake.
            negotiated: Mutex::new((ProtocolVersion::LATEST_WITH_INITIALIZE, Era::Sessions)),
        });
        let (messages, rx) = mpsc::unbounded_channel();
        let (connected_tx, connected_rx) = oneshot::channel();
        shared.with(|c, now| c.connect(now));
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

    /// The negotiated revision: the handshake's of [`connect`](Self::connect), or, after
    /// a re-initialization, the one [`ServerMessage::Reconnected`] reported.
    pub fn version(&self) -> ProtocolVersion {
        self.negotiated().0
    }

    /// The transport in use (as [`version`](Self::version), the latest handshake's).
    pub fn era(&self) -> Era {
        self.negotiated().1
    }

    /// Sets the header `name` of every later request to `value`, or removes it (`None`):
    /// a refreshed `Authorization` token after a call failed with
    /// `CallError::Request(RequestError::Unauthorized { .. })`, say. Headers for every
    /// request from the start go in the [`Config`] ([`Config::with_header`]); see
    /// [`Client::set_header`] for what stays the transport's.
    pub fn set_header(&self, name: http::HeaderName, value: Option<http::HeaderValue>) {
        self.shared.with(|c, _| c.set_header(name, value));
    }

    /// The `Mcp-Session-Id` the server issued, if any (it changes after a
    /// re-initialization).
    pub fn session_id(&self) -> Option<String> {
        self.shared
            .core
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .session_id()
            .map(str::to_owned)
    }

    fn negotiated(&self) -> (ProtocolVersion, Era) {
        *self
            .shared
            .negotiated
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Sends a request and waits for its result.
    ///
    /// # Errors
    /// [`CallError`].
    pub async fn call(&self, method: &str, params: Option<Value>) -> Result<Value, CallError> {
        let text = params.map(|p| p.to_string());
        let raw = match &text {
            Some(t) => Some(RawJson::new(t).map_err(|_| CallError::Closed)?),
            None => None,
        };
        let (tx, rx) = oneshot::channel();
        let id = self.shared.with(|c, now| {
            let id = c
                .request(now, method, raw.as_ref().map(|r| r as _), None)
                .map_err(|_| CallError::Closed)?;
            self.shared
                .waiters
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id.clone(), tx);
            Ok::<_, CallError>(id)
        })?;
        let _ = id;
        let envelope = rx.await.map_err(|_| CallError::Closed)??;
        // The core classified the answer already: a result (parsed here) or an error.
        match envelope.message() {
            Message::Response(r) => {
                serde_json::from_str(r.result.as_str()).map_err(|_| CallError::Closed)
            }
            Message::Error(e) => Err(CallError::Rpc {
                code: e.error.code.0,
                message: e.error.message.into_owned(),
            }),
            Message::Request(_) | Message::Notification(_) => Err(CallError::Closed),
        }
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// [`CallError::Closed`].
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), CallError> {
        let text = params.map(|p| p.to_string());
        let raw = match &text {
            Some(t) => Some(RawJson::new(t).map_err(|_| CallError::Closed)?),
            None => None,
        };
        self.shared
            .with(|c, now| c.notify(now, method, raw.as_ref().map(|r| r as _)))
            .map_err(|_| CallError::Closed)
    }

    /// Answers a server→client request.
    ///
    /// # Errors
    /// [`CallError::Closed`].
    pub fn respond(&self, id: &RequestId, result: Value) -> Result<(), CallError> {
        let text = result.to_string();
        let raw = RawJson::new(&text).map_err(|_| CallError::Closed)?;
        self.shared
            .with(|c, now| c.respond(now, id, &raw))
            .map_err(|_| CallError::Closed)
    }

    /// Answers a server→client request ([`ServerMessage::Request`]) with a JSON-RPC error:
    /// one the application does not serve (-32601), or cannot do now.
    ///
    /// # Errors
    /// As [`respond`](Self::respond).
    pub fn respond_error(
        &self,
        id: &RequestId,
        code: mcpwire::jsonrpc::ErrorCode,
        message: &str,
    ) -> Result<(), CallError> {
        self.shared
            .with(|c, now| c.respond_error(now, id, code, message))
            .map_err(|_| CallError::Closed)
    }

    /// Ends the session (DELETE) and waits, briefly, for the driver to finish.
    pub async fn close(self) {
        self.shared.with(|c, now| c.close(now));
        let deadline = tokio::time::sleep(std::time::Duration::from_secs(2));
        tokio::pin!(deadline);
        loop {
            let idle = self.shared.core.lock().map(|c| c.is_idle()).unwrap_or(true);
            if idle {
                return;
            }
            tokio::select! {
                () = &mut deadline => return,
                () = tokio::time::sleep(std::time::Duration::from_millis(5)) => {}
            }
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

/// The outcome of the first handshake (the negotiated revision is in `Shared`).
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
        // Hand out everything the core has.
        let (transmits, events, deadline) = {
            let mut core = shared.core.lock().unwrap_or_else(|p| p.into_inner());
            let transmits: Vec<Transmit> = std::iter::from_fn(|| core.poll_transmit()).collect();
            let events: Vec<Event> = std::iter::from_fn(|| core.poll_event()).collect();
            (transmits, events, core.poll_timeout())
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
        for event in events {
            match event {
                // The first handshake's outcome goes to `connect`; a later one is a
                // re-initialization's, after `SessionExpired`.
                Event::Connected { version, era, .. } => {
                    *shared.negotiated.lock().unwrap_or_else(|p| p.into_inner()) = (version, era);
                    match connected.take() {
                        Some(tx) => {
                            let _ = tx.send(Ok(()));
                        }
                        None => {
                            let _ = messages.send(ServerMessage::reconnected(version, era));
                        }
                    }
                }
                Event::ConnectFailed(e) => match connected.take() {
                    Some(tx) => {
                        let _ = tx.send(Err(e));
                    }
                    None => {
                        let _ = messages.send(ServerMessage::ReconnectFailed(e));
                    }
                },
                Event::SessionExpired => {
                    let _ = messages.send(ServerMessage::SessionExpired);
                }
                Event::StreamReset { error } => {
                    let _ = messages.send(ServerMessage::StreamReset(error));
                }
                Event::Response(m) => {
                    let waiter = m.id().and_then(|id| shared.waiters.lock().ok()?.remove(id));
                    if let Some(tx) = waiter {
                        let _ = tx.send(Ok(m));
                    }
                }
                Event::Failed { id, error } => {
                    let waiter = shared.waiters.lock().ok().and_then(|mut w| w.remove(&id));
                    if let Some(tx) = waiter {
                        let _ = tx.send(Err(CallError::Request(error)));
                    }
                }
                Event::Notification(m) => {
                    let _ = messages.send(ServerMessage::Notification(m));
                }
                Event::Request(m) => {
                    let _ = messages.send(ServerMessage::Request(m));
                }
                Event::Closed => {
                    if let Ok(mut w) = shared.waiters.lock() {
                        for (_, tx) in w.drain() {
                            let _ = tx.send(Err(CallError::Closed));
                        }
                    }
                }
                _ => {}
            }
        }
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => shared.with(|c, now| c.handle_timeout(now)),
            () = shared.wake.notified() => {}
            Some(report) = reports.recv() => {
                let mut core = shared.core.lock().unwrap_or_else(|p| p.into_inner());
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
