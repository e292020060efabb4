//! The server side: [`McpService`], a `tower` service (and a hyper one, through
//! [`serve`]) that drives one [`mcpwire::server::Server`].
//!
//! The adapter moves bytes and time, and nothing else: request heads and body frames go
//! into the core, the core's transmits come out as the response head and a streaming
//! body, its deadlines become one tokio timer, and its events go to the application on
//! a channel or, with [`McpService::with_dispatch`], to a sink called in place. Every
//! status code, header, stream and session decision is the core's.
//!
//! One lock guards the core. The connection's own task feeds it the request (head and
//! body frames under one lock where they have arrived together), pulls the response
//! frames as hyper asks for them, and, in place, runs the application on the events
//! its input caused: a request answered at once costs no task switch.
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
    events: EventSink,
    /// The deadline the timer task sleeps until (`None`: until notified). An input
    /// wakes the timer task only when it moved the core's next deadline earlier, so
    /// the common request, whose deadlines lie behind the earliest, costs no wake-up.
    timer_at: Option<Instant>,
}

/// Where the core's events go.
enum EventSink {
    /// To the receiver [`McpService::new`] returned.
    Channel(mpsc::UnboundedSender<Event>),
    /// Into the dispatch queue of [`McpService::with_dispatch`].
    Queue(Arc<Mutex<Dispatch>>),
}

/// The events of a service with an in-place dispatcher, and the dispatcher. Events are
/// queued in the core's order (under the core's lock); whichever task queued some and
/// finds no dispatch running becomes the dispatcher and runs the sink until the queue is
/// empty, the queue's lock released around each call. So events are handled one at a
/// time, in order, on the tasks that caused them, and a sink that feeds the core again
/// (an answer) only queues more for the loop already running.
struct Dispatch {
    queue: std::collections::VecDeque<Event>,
    /// Taken out by the running dispatcher; `None` means a dispatch is running.
    sink: Option<Sink>,
}

type Sink = Box<dyn FnMut(&McpService, Event) + Send>;

struct Shared {
    core: Mutex<Core>,
    /// The dispatch queue, for services made by [`McpService::with_dispatch`].
    dispatch: Option<Arc<Mutex<Dispatch>>>,
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
    fn with<R>(self: &Arc<Self>, input: impl FnOnce(&mut Server, Instant) -> R) -> R {
        let now = Instant::now();
        let mut core = self.lock();
        let r = input(&mut core.server, now);
        self.release(core);
        r
    }

    /// Hands out what the last input produced, unlocks, and dispatches its events.
    fn release(self: &Arc<Self>, core: MutexGuard<'_, Core>) {
        self.release_deferred(core);
        self.deliver();
    }

    /// Hands out what the last input produced and unlocks; its events stay queued.
    fn release_deferred(&self, mut core: MutexGuard<'_, Core>) {
        core.pump();
        let wake = core.deadline_moved_earlier();
        drop(core);
        if wake {
            self.timer.notify_one();
        }
    }

    /// Runs the in-place dispatcher over the queued events, unless one is running (it
    /// will see them) or the service has none.
    fn deliver(self: &Arc<Self>) {
        let Some(dispatch) = &self.dispatch else {
            return;
        };
        let lock = || dispatch.lock().unwrap_or_else(|p| p.into_inner());
        let mut queue = lock();
        let Some(mut sink) = queue.sink.take() else {
            return;
        };
        let service = McpService {
            shared: Arc::clone(self),
            _owner: None,
        };
        while let Some(event) = queue.queue.pop_front() {
            drop(queue);
            // A panicking sink loses its event, not the dispatcher (nor the connection
            // task it runs on).
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                sink(&service, event);
            }));
            queue = lock();
        }
        // Emptiness seen and the sink put back under one lock: nothing queued is missed.
        queue.sink = Some(sink);
    }
}

impl Core {
    /// Whether the core's next deadline is earlier than the one the timer sleeps until.
    fn deadline_moved_earlier(&self) -> bool {
        match (self.server.poll_timeout(), self.timer_at) {
            (Some(next), Some(armed)) => next < armed,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

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
        match &self.events {
            EventSink::Channel(tx) => {
                while let Some(event) = self.server.poll_event() {
                    let _ = tx.send(event);
                }
            }
            EventSink::Queue(dispatch) => {
                let mut dispatch = dispatch.lock().unwrap_or_else(|p| p.into_inner());
                while let Some(event) = self.server.poll_event() {
                    dispatch.queue.push_back(event);
                }
            }
        }
    }
}

/// The handle the application and hyper share: clone it freely.
#[derive(Clone)]
pub struct McpService {
    shared: Arc<Shared>,
    /// `None` in the handle a dispatcher is given: it must not keep the service alive.
    _owner: Option<Arc<Owner>>,
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
        (
            Self::build(config, entropy, EventSink::Channel(events), None),
            rx,
        )
    }

    /// A service whose events are handed to `sink` in place, on the task whose input
    /// caused them (the connection's, mostly), one at a time and in order, instead of
    /// through a channel to an application task: a request answered at once then costs
    /// no task switch. `sink` must not block; it may call [`with_server`](Self::with_server)
    /// (the events that causes are handled after it returns). A timer task is spawned
    /// on the current tokio runtime.
    pub fn with_dispatch(
        config: Config,
        entropy: Box<dyn Entropy + Send>,
        sink: impl FnMut(&Self, Event) + Send + 'static,
    ) -> Self {
        let dispatch = Arc::new(Mutex::new(Dispatch {
            queue: std::collections::VecDeque::new(),
            sink: Some(Box::new(sink)),
        }));
        Self::build(
            config,
            entropy,
            EventSink::Queue(Arc::clone(&dispatch)),
            Some(dispatch),
        )
    }

    fn build(
        config: Config,
        entropy: Box<dyn Entropy + Send>,
        events: EventSink,
        dispatch: Option<Arc<Mutex<Dispatch>>>,
    ) -> Self {
        let shared = Arc::new(Shared {
            core: Mutex::new(Core {
                server: Server::new(config, entropy),
                heads: HashMap::new(),
                wakers: HashMap::new(),
                events,
                timer_at: None,
            }),
            dispatch,
            timer: Notify::new(),
            closed: std::sync::atomic::AtomicBool::new(false),
        });
        tokio::spawn(timers(Arc::clone(&shared)));
        let owner = Arc::new(Owner(Arc::clone(&shared)));
        Self {
            shared,
            _owner: Some(owner),
        }
    }

    /// Runs `f` on the core (an application's `respond`, `notify`, `request`), with the
    /// current time, then hands out what it produced.
    pub fn with_server<R>(&self, f: impl FnOnce(&mut Server, Instant) -> R) -> R {
        self.shared.with(f)
    }

    /// As [`with_server`](Self::with_server), but the events it causes wait for the next
    /// [`deliver`](Self::deliver) (or the next input): for a caller holding a lock that
    /// the dispatcher takes.
    pub(crate) fn with_server_deferred<R>(&self, f: impl FnOnce(&mut Server, Instant) -> R) -> R {
        let now = Instant::now();
        let mut core = self.shared.lock();
        let r = f(&mut core.server, now);
        self.shared.release_deferred(core);
        r
    }

    /// Dispatches the events queued so far (a service with an in-place dispatcher).
    pub(crate) fn deliver(&self) {
        self.shared.deliver();
    }
}

/// Drives the core's deadlines: sleeps until `poll_timeout`, or until an input moved it.
async fn timers(shared: Arc<Shared>) {
    while !shared.closed.load(std::sync::atomic::Ordering::Acquire) {
        // Read and recorded under one lock: an input that moves the deadline earlier
        // after this sees `timer_at` and notifies (a notification before the wait
        // begins is kept as a permit).
        let deadline = {
            let mut core = shared.lock();
            core.timer_at = core.server.poll_timeout();
            core.timer_at
        };
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
    /// Bytes taken from the core while looking for the end behind the last ones.
    next: Option<Bytes>,
    done: bool,
}

impl Body for ExchangeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(bytes) = self.next.take() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        if self.done {
            return Poll::Ready(None);
        }
        let shared = Arc::clone(&self.shared);
        let mut core = shared.lock();
        loop {
            match core.server.poll_transmit(self.exchange) {
                Some(Transmit::Data(bytes)) => {
                    // An end right behind these bytes is taken now, so that hyper writes
                    // the message's end with them rather than after another poll.
                    match core.server.poll_transmit(self.exchange) {
                        Some(Transmit::End) => self.done = true,
                        Some(Transmit::Data(more)) => self.next = Some(more),
                        Some(Transmit::Head(_)) | None => {}
                    }
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
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
        self.done && self.next.is_none()
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
            let (tx, mut rx) = oneshot::channel();
            let mut body = std::pin::pin!(body);
            // The head, and the body frames already here, go in under one lock (a small
            // POST is one frame, read with its head).
            let mut start = Some((parts, tx));
            let (x, mut fed) = std::future::poll_fn(|cx| {
                let Some((parts, tx)) = start.take() else {
                    unreachable!("ready at its first poll")
                };
                let now = Instant::now();
                let mut core = shared.lock();
                let x = core.server.handle_head(now, parts);
                core.heads.insert(x, tx);
                let fed = feed(&mut core.server, now, x, None, body.as_mut(), cx);
                shared.release(core);
                Poll::Ready((x, fed))
            })
            .await;
            let mut guard = HeadGuard {
                shared: Arc::clone(&shared),
                exchange: x,
                armed: true,
            };
            // The rest of the body is read here, in the connection's own task, until it
            // ends or the head comes first (a refusal: the rest is not wanted).
            let head = loop {
                match fed {
                    Fed::Reading => {}
                    Fed::Ended => break (&mut rx).await,
                    Fed::Broken => {
                        // The request broke off: the guard tells the core, and the
                        // connection, which is gone, gets a bare 400.
                        drop(guard);
                        return Ok(bare(http::StatusCode::BAD_REQUEST, &shared, x));
                    }
                }
                let step = std::future::poll_fn(|cx| {
                    if let Poll::Ready(head) = Pin::new(&mut rx).poll(cx) {
                        return Poll::Ready(Err(head));
                    }
                    let Poll::Ready(frame) = body.as_mut().poll_frame(cx) else {
                        return Poll::Pending;
                    };
                    let now = Instant::now();
                    let mut core = shared.lock();
                    let fed = feed(&mut core.server, now, x, Some(frame), body.as_mut(), cx);
                    shared.release(core);
                    Poll::Ready(Ok(fed))
                })
                .await;
                match step {
                    Ok(next) => fed = next,
                    Err(head) => break head,
                }
            };
            guard.armed = false;
            let Ok(head) = head else {
                // The core forgot the exchange without a head (it cannot): answer 500.
                return Ok(bare(http::StatusCode::INTERNAL_SERVER_ERROR, &shared, x));
            };
            let body = ExchangeBody {
                shared,
                exchange: x,
                next: None,
                done: false,
            };
            Ok(http::Response::from_parts(head, body))
        })
    }
}

/// Where reading a request body stands.
enum Fed {
    /// More frames are to come.
    Reading,
    /// The body ended, and the core was told.
    Ended,
    /// The body broke off (the connection failed).
    Broken,
}

/// At most this many frames are fed per lock, so a fast sender cannot hold the core.
const FRAMES_PER_LOCK: usize = 16;

/// Feeds `first` (a frame already polled) and then every frame `body` has ready, and its
/// end, to the core.
fn feed<B: Body<Data = Bytes>>(
    server: &mut Server,
    now: Instant,
    x: ExchangeId,
    mut first: Option<Option<Result<Frame<Bytes>, B::Error>>>,
    mut body: Pin<&mut B>,
    cx: &mut Context<'_>,
) -> Fed {
    for _ in 0..FRAMES_PER_LOCK {
        let frame = match first.take() {
            Some(frame) => frame,
            // A body that knows it is done (its length reached) needs no further poll.
            None if body.is_end_stream() => None,
            None => match body.as_mut().poll_frame(cx) {
                Poll::Ready(frame) => frame,
                Poll::Pending => return Fed::Reading,
            },
        };
        match frame {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    server.handle_body(now, x, data);
                }
            }
            Some(Err(_)) => return Fed::Broken,
            None => {
                server.handle_body_end(now, x);
                return Fed::Ended;
            }
        }
    }
    // Yield the lock; the caller polls again (the body's waker is not armed, so wake).
    cx.waker().wake_by_ref();
    Fed::Reading
}

/// A response of `status` alone, for an exchange the core no longer serves.
fn bare(
    status: http::StatusCode,
    shared: &Arc<Shared>,
    exchange: ExchangeId,
) -> http::Response<ExchangeBody> {
    let mut response = http::Response::new(ExchangeBody {
        shared: Arc::clone(shared),
        exchange,
        next: None,
        done: true,
    });
    *response.status_mut() = status;
    response
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

/// Accepts connections on `listener` and serves each with `service` over HTTP/1.1,
/// with `TCP_NODELAY` (without it every small response waits for the peer's delayed
/// ACK). Never ends by itself (abort its task to stop accepting): a connection that
/// failed before it was accepted is skipped, and any other accept error (out of file
/// descriptors, say) pauses accepting for 50 ms, since it passes as connections close.
pub async fn serve(listener: tokio::net::TcpListener, service: McpService) -> Infallible {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e)
                if matches!(
                    e.kind(),
                    ConnectionAborted | ConnectionRefused | ConnectionReset
                ) =>
            {
                continue;
            }
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
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
