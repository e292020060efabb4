//! The server side: [`McpService`], a `tower` service (and a hyper one, through
//! [`serve`]) that drives one [`mcpwire::server::Server`].
//!
//! The adapter moves bytes and time, and nothing else: request heads and body frames go
//! into the core, the core's transmits come out as the response head and a streaming
//! body, its deadlines become one tokio timer, and its events go to the application as
//! a channel. Every status code, header, stream and session decision is the core's.
//!
//! Backpressure: a response body pulls from the core only when hyper asks for the next
//! frame, so a slow reader leaves its bytes in the core, which bounds them
//! ([`Config::with_max_unsent`](mcpwire::server::Config::with_max_unsent)).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame};
use mcpwire::Entropy;
use mcpwire::server::{Config, Event, ExchangeId, Server, Transmit};
use tokio::sync::{Notify, mpsc, oneshot};

/// The core and what the adapter keeps per exchange.
struct Core {
    server: Server,
    /// Exchanges whose head a request future waits for.
    heads: HashMap<ExchangeId, oneshot::Sender<http::response::Parts>>,
    /// Response bodies waiting for bytes.
    wakers: HashMap<ExchangeId, Waker>,
    events: mpsc::UnboundedSender<Event>,
}

struct Shared {
    core: Mutex<Core>,
    /// Woken when an input may have moved the next deadline earlier, or at shutdown.
    timer: Notify,
    /// Set when the last [`McpService`] handle is gone: the timer task ends.
    closed: std::sync::atomic::AtomicBool,
}

/// Held by every [`McpService`] clone; the last one to go stops the timer task.
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0
            .closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.0.timer.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic while holding the lock is a bug in the core; keep serving the rest.
        self.core
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `input` on the core, then hands out what it produced.
    fn with<R>(&self, input: impl FnOnce(&mut Server, Instant) -> R) -> R {
        let now = Instant::now();
        let mut core = self.lock();
        let r = input(&mut core.server, now);
        core.pump();
        drop(core);
        self.timer.notify_one();
        r
    }
}

impl Core {
    /// Hands every ready head to its waiting request future, wakes every body with
    /// bytes, and forwards the application's events.
    fn pump(&mut self) {
        while let Some(x) = self.server.poll_ready() {
            if let Some(waiter) = self.heads.remove(&x) {
                match self.server.poll_transmit(x) {
                    Some(Transmit::Head(head)) => {
                        let _ = waiter.send(head);
                    }
                    // The core always sends the head first; anything else is a core bug.
                    _ => continue,
                }
            }
            if let Some(waker) = self.wakers.remove(&x) {
                waker.wake();
            }
        }
        while let Some(event) = self.server.poll_event() {
            let _ = self.events.send(event);
        }
    }
}

/// The handle the application and hyper share: clone it freely.
#[derive(Clone)]
pub struct McpService {
    shared: Arc<Shared>,
    _owner: Arc<Owner>,
}

impl std::fmt::Debug for McpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpService").finish_non_exhaustive()
    }
}

impl McpService {
    /// A service over a new core with `config`; `entropy` must be cryptographically
    /// secure in production (session ids). Returns the service and the application's
    /// event stream; a timer task is spawned on the current tokio runtime.
    pub fn new(
        config: Config,
        entropy: Box<dyn Entropy + Send>,
    ) -> (Self, mpsc::UnboundedReceiver<Event>) {
        let (events, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            core: Mutex::new(Core {
                server: Server::new(config, entropy),
                heads: HashMap::new(),
                wakers: HashMap::new(),
                events,
            }),
            timer: Notify::new(),
            closed: std::sync::atomic::AtomicBool::new(false),
        });
        tokio::spawn(timers(Arc::clone(&shared)));
        let owner = Arc::new(Owner(Arc::clone(&shared)));
        (
            Self {
                shared,
                _owner: owner,
            },
            rx,
        )
    }

    /// Runs `f` on the core (an application's `respond`, `notify`, `request`), with the
    /// current time, then hands out what it produced.
    pub fn with_server<R>(&self, f: impl FnOnce(&mut Server, Instant) -> R) -> R {
        self.shared.with(f)
    }
}

/// Drives the core's deadlines: sleeps until `poll_timeout`, or until an input moved it.
async fn timers(shared: Arc<Shared>) {
    while !shared.closed.load(std::sync::atomic::Ordering::Acquire) {
        let deadline = shared.lock().server.poll_timeout();
        let notified = shared.timer.notified();
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {
                        shared.with(|server, now| server.handle_timeout(now));
                    }
                    () = notified => {}
                }
            }
            None => notified.await,
        }
    }
}

/// The response body of one exchange: pulls the core's transmits as hyper polls.
pub struct ExchangeBody {
    shared: Arc<Shared>,
    exchange: ExchangeId,
    done: bool,
}

impl Body for ExchangeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let shared = Arc::clone(&self.shared);
        let mut core = shared.lock();
        loop {
            match core.server.poll_transmit(self.exchange) {
                Some(Transmit::Data(bytes)) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Some(Transmit::Head(_)) => continue,
                Some(Transmit::End) => {
                    self.done = true;
                    return Poll::Ready(None);
                }
                None => {
                    core.wakers.insert(self.exchange, cx.waker().clone());
                    return Poll::Pending;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

impl Drop for ExchangeBody {
    fn drop(&mut self) {
        if !self.done {
            // The client went away before the end: the core decides what that means.
            let x = self.exchange;
            self.shared
                .with(|server, now| server.handle_disconnect(now, x));
            self.shared.lock().wakers.remove(&x);
        }
    }
}

impl std::fmt::Debug for ExchangeBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeBody")
            .field("exchange", &self.exchange)
            .finish()
    }
}

/// Disconnects the exchange if the request future is dropped before its head came.
struct HeadGuard {
    shared: Arc<Shared>,
    exchange: ExchangeId,
    armed: bool,
}

impl Drop for HeadGuard {
    fn drop(&mut self) {
        if self.armed {
            let x = self.exchange;
            self.shared.lock().heads.remove(&x);
            self.shared
                .with(|server, now| server.handle_disconnect(now, x));
        }
    }
}

impl<B> tower_service::Service<http::Request<B>> for McpService
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Send,
{
    type Response = http::Response<ExchangeBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let (tx, rx) = oneshot::channel();
            let x = {
                let now = Instant::now();
                let mut core = shared.lock();
                let x = core.server.handle_head(now, parts);
                core.heads.insert(x, tx);
                core.pump();
                x
            };
            shared.timer.notify_one();
            let mut guard = HeadGuard {
                shared: Arc::clone(&shared),
                exchange: x,
                armed: true,
            };
            let reader = tokio::spawn(read_body(Arc::clone(&shared), x, body));
            let head = match rx.await {
                Ok(head) => head,
                Err(_) => {
                    // The core forgot the exchange without a head (it cannot): answer 500.
                    reader.abort();
                    let (mut head, ()) = http::Response::new(()).into_parts();
                    head.status = http::StatusCode::INTERNAL_SERVER_ERROR;
                    head
                }
            };
            guard.armed = false;
            let body = ExchangeBody {
                shared,
                exchange: x,
                done: false,
            };
            Ok(http::Response::from_parts(head, body))
        })
    }
}

impl<B> hyper::service::Service<http::Request<B>> for McpService
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Send,
{
    type Response = http::Response<ExchangeBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: http::Request<B>) -> Self::Future {
        tower_service::Service::call(&mut self.clone(), request)
    }
}

/// Feeds a request body to the core, frame by frame.
async fn read_body<B>(shared: Arc<Shared>, x: ExchangeId, body: B)
where
    B: Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    loop {
        let frame = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
        match frame {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    shared.with(|server, now| server.handle_body(now, x, data));
                }
            }
            Some(Err(_)) => {
                shared.with(|server, now| server.handle_disconnect(now, x));
                return;
            }
            None => {
                shared.with(|server, now| server.handle_body_end(now, x));
                return;
            }
        }
    }
}

/// Accepts connections on `listener` and serves each with `service` over HTTP/1.1,
/// with `TCP_NODELAY` (without it every small response waits for the peer's delayed
/// ACK). Runs until the listener fails.
///
/// # Errors
/// The listener's accept error.
pub async fn serve(listener: tokio::net::TcpListener, service: McpService) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}
