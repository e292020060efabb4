//! The server side: [`McpService`], a `tower` service (and a hyper one, through
//! [`serve`]) that drives one [`mcpwire::server::Server`].
//!
//! The adapter moves bytes and time, and nothing else: request heads and body frames go
//! into the core, the core's transmits come out as the response head and a streaming
//! body, its deadlines become one tokio timer, and its events go to the application on
//! a channel or, with [`McpService::with_dispatch`], to a sink called in place. Every
//! status code, header, stream and session decision is the core's.
//!
//! One lock guards each core. The connection's own task feeds it the request (head and
//! body frames under one lock where they have arrived together), pulls the response
//! frames as hyper asks for them, and, in place, runs the application on the events
//! its input caused: a request answered at once costs no task switch.
//!
//! A service may split its sessions between several cores ([`McpService::sharded`]),
//! each with its own lock and timer, so that requests of different sessions never wait
//! for each other: the core says which shard a request head belongs to
//! ([`mcpwire::server::shard_of`]); one that names no session goes to the next shard in
//! turn.
//!
//! Backpressure: a response body pulls from the core only when hyper asks for the next
//! frame, so a slow reader leaves its bytes in the core, which bounds them
//! ([`Config::with_max_unsent`](mcpwire::server::Config::with_max_unsent)).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame};
use mcpwire::Entropy;
use mcpwire::conn::{ConnId, Connections, Limits, Opened};
use mcpwire::server::{
    Config, Event, ExchangeId, PeerAddr, Server, StoreInput, StoreOp, Transmit, shard_of,
};
use tokio::sync::{Notify, mpsc, oneshot};

/// The core and what the adapter keeps per exchange.
struct Core {
    server: Server,
    /// Exchanges whose request future waits for the head to be ready; the future takes
    /// it itself, as late as it can (see [`McpService::call`](tower_service::Service::call)).
    heads: HashMap<ExchangeId, oneshot::Sender<()>>,
    /// Response bodies waiting for bytes.
    wakers: HashMap<ExchangeId, Waker>,
    /// Where events go; `None`: they stay in the core for the in-place sink, taken by
    /// the task whose input caused them ([`Shared::release`]).
    events: Option<mpsc::UnboundedSender<Event>>,
    /// The deadline the timer task sleeps until (`None`: until notified). An input
    /// wakes the timer task only when it moved the core's next deadline earlier, so
    /// the common request, whose deadlines lie behind the earliest, costs no wake-up.
    timer_at: Option<Instant>,
    /// Where a cluster node's store work goes, with this shard's index
    /// ([`McpService::store_link`]); `None`: the core has none to give.
    store: Option<mpsc::UnboundedSender<(usize, StoreOp)>>,
    /// This core's index among the service's shards.
    shard: usize,
}

/// The in-place sink of [`McpService::with_dispatch`], shared by every shard.
type Sink = Arc<dyn Fn(&McpService, Event) + Send + Sync>;

thread_local! {
    /// The service whose sink runs on this thread (its address), if any: an input made
    /// from inside the sink (an answer) leaves its events to the loop already running…
    static DISPATCHING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// …and says here that it left some.
    static LEFT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// One shard: a core, its lock and its timer.
struct Shared {
    core: Mutex<Core>,
    /// The in-place sink, for services made by [`McpService::with_dispatch`].
    sink: Option<Sink>,
    /// Woken when an input may have moved the next deadline earlier, or at shutdown.
    timer: Notify,
    /// Set when the last [`McpService`] handle is gone: the timer task ends.
    closed: AtomicBool,
    /// Every shard of the service, for the handle the sink is given (weak: the handles
    /// own the router, the router owns the shards).
    router: OnceLock<Weak<Router>>,
}

/// Every shard of one service, and which one a request goes to.
struct Router {
    shards: Box<[Arc<Shared>]>,
    /// The paths the core routes by.
    config: Config,
    /// The shard for the next request that names no session.
    turn: AtomicUsize,
}

impl Router {
    /// The shard `head` belongs to, as the core says; the next in turn if any will do.
    fn pick(&self, head: &http::request::Parts) -> &Arc<Shared> {
        let n = self.shards.len();
        let at = if n == 1 {
            0
        } else {
            shard_of(&self.config, n, head)
                .unwrap_or_else(|| self.turn.fetch_add(1, Ordering::Relaxed) % n)
        };
        &self.shards[at]
    }
}

/// Held by every [`McpService`] clone; the last one to go stops the timer tasks.
struct Owner(Arc<Router>);

impl Drop for Owner {
    fn drop(&mut self) {
        for shard in &self.0.shards {
            shard.closed.store(true, Ordering::Release);
            shard.timer.notify_one();
        }
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

    /// Hands out what the last input produced, unlocks, and runs the in-place sink on
    /// its events, here.
    fn release(self: &Arc<Self>, mut core: MutexGuard<'_, Core>) {
        if self.sink.is_none() {
            self.release_deferred(core);
        } else if self.dispatching_here() {
            if core.server.has_events() {
                LEFT.set(true);
            }
            self.release_deferred(core);
        } else {
            let taken = take_events(&mut core.server);
            self.release_deferred(core);
            self.dispatch(taken);
        }
    }

    /// Hands out what the last input produced and unlocks; in-place events stay in the
    /// core until the next [`release`](Self::release) or [`deliver`](Self::deliver).
    fn release_deferred(&self, mut core: MutexGuard<'_, Core>) {
        core.pump();
        let wake = core.deadline_moved_earlier();
        drop(core);
        if wake {
            self.timer.notify_one();
        }
    }

    /// The service's router; once every handle is gone (a timer firing late), one of
    /// this shard alone.
    fn router(self: &Arc<Self>) -> Arc<Router> {
        self.router
            .get()
            .and_then(Weak::upgrade)
            .unwrap_or_else(|| {
                Arc::new(Router {
                    shards: Box::new([Arc::clone(self)]),
                    config: self.lock().server.config().clone(),
                    turn: AtomicUsize::new(0),
                })
            })
    }

    /// Whether this thread is inside this service's sink.
    fn dispatching_here(&self) -> bool {
        DISPATCHING.get() == std::ptr::from_ref(self) as usize
    }

    /// Runs the in-place sink on every event left in the core (unless this thread is
    /// inside the sink already: its loop takes them).
    fn deliver(self: &Arc<Self>) {
        if self.sink.is_some() {
            if self.dispatching_here() {
                LEFT.set(true);
            } else {
                let taken = take_events(&mut self.lock().server);
                self.dispatch(taken);
            }
        }
    }

    /// Runs the sink on `taken` (all the events one input caused, in the core's order),
    /// then on the events its answers caused, until none is left. Events of inputs made
    /// on other tasks are handled there, possibly at the same time.
    fn dispatch(self: &Arc<Self>, mut taken: Taken) {
        let Some(sink) = &self.sink else {
            return;
        };
        let service = McpService {
            shared: Arc::clone(self),
            router: self.router(),
            _owner: None,
        };
        let outer = DISPATCHING.replace(std::ptr::from_ref(&**self) as usize);
        let outer_left = LEFT.replace(false);
        loop {
            for event in taken.0.into_iter().chain(taken.1) {
                // A panicking sink loses its event, not the task it runs on.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    sink(&service, event);
                }));
            }
            if !LEFT.replace(false) {
                break;
            }
            let mut core = self.lock();
            taken = take_events(&mut core.server);
            self.release_deferred(core);
        }
        DISPATCHING.set(outer);
        LEFT.set(outer_left);
    }
}

/// Events taken out of the core together: the first (an input's usual one) and the
/// rest, which allocate only when there are more.
type Taken = (Option<Event>, Vec<Event>);

fn take_events(server: &mut Server) -> Taken {
    let first = server.poll_event();
    let mut rest = Vec::new();
    if first.is_some() {
        while let Some(event) = server.poll_event() {
            rest.push(event);
        }
    }
    (first, rest)
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

    /// Tells every request future whose head is ready, wakes every body with bytes, and
    /// forwards the application's events to the channel, if the service has one.
    fn pump(&mut self) {
        while let Some(x) = self.server.poll_ready() {
            if let Some(waiter) = self.heads.remove(&x) {
                let _ = waiter.send(());
            } else if let Some(waker) = self.wakers.remove(&x) {
                waker.wake();
            }
        }
        if let Some(tx) = &self.events {
            while let Some(event) = self.server.poll_event() {
                let _ = tx.send(event);
            }
        }
        if let Some(tx) = &self.store {
            while let Some(op) = self.server.poll_store() {
                let _ = tx.send((self.shard, op));
            }
        }
    }
}

/// The handle the application and hyper share: clone it freely.
///
/// As a service it routes each request to its shard. As a handle on the core
/// ([`with_server`](Self::with_server)) it acts on one shard: the sink's handle on the
/// shard of its event, the one [`sharded`](Self::sharded) returns on the first;
/// [`shards`](Self::shards) gives one per shard.
#[derive(Clone)]
pub struct McpService {
    /// The shard [`with_server`](Self::with_server) acts on.
    shared: Arc<Shared>,
    router: Arc<Router>,
    /// `None` in the handle the sink is given: it must not keep the service alive.
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
        (Self::build(1, config, entropy, Some(events), None), rx)
    }

    /// A service whose events are handed to `sink` in place, on the task whose input
    /// caused them (the connection's, mostly), instead of through a channel to an
    /// application task: a request answered at once then costs no task switch, and its
    /// answer leaves with the response head. The events one input caused are handled in
    /// order, one at a time; those of inputs on other connections may be handled on
    /// their tasks at the same time, so `sink` is `Fn + Sync`. `sink` must not block; it
    /// may call [`with_server`](Self::with_server) (the events that causes are handled
    /// after it returns, by the same loop). A timer task is spawned on the current tokio
    /// runtime.
    pub fn with_dispatch(
        config: Config,
        entropy: Box<dyn Entropy + Send>,
        sink: impl Fn(&Self, Event) + Send + Sync + 'static,
    ) -> Self {
        Self::sharded(1, config, entropy, sink)
    }

    /// As [`with_dispatch`](Self::with_dispatch), over `shards` cores that split the
    /// sessions between them (see [`Config::shards`]), each behind its own lock and
    /// with its own timer task, so that requests of different sessions never wait for
    /// each other's lock. A request goes to the shard of the session it names, else to
    /// the next in turn. The shards draw their session ids from `entropy` in turn; the
    /// `sink` serves them all, and is handed each event with a handle on its shard.
    ///
    /// # Panics
    ///
    /// Unless `1 <= shards <= 256`.
    pub fn sharded(
        shards: usize,
        config: Config,
        entropy: Box<dyn Entropy + Send>,
        sink: impl Fn(&Self, Event) + Send + Sync + 'static,
    ) -> Self {
        Self::build(shards, config, entropy, None, Some(Arc::new(sink)))
    }

    fn build(
        count: usize,
        config: Config,
        entropy: Box<dyn Entropy + Send>,
        events: Option<mpsc::UnboundedSender<Event>>,
        sink: Option<Sink>,
    ) -> Self {
        let configs = config.clone().shards(count);
        let shard = |index: usize, entropy: Box<dyn Entropy + Send>| {
            Arc::new(Shared {
                core: Mutex::new(Core {
                    server: Server::new(configs[index].clone(), entropy),
                    heads: HashMap::new(),
                    wakers: HashMap::new(),
                    events: events.clone(),
                    timer_at: None,
                    store: None,
                    shard: index,
                }),
                sink: sink.clone(),
                timer: Notify::new(),
                closed: AtomicBool::new(false),
                router: OnceLock::new(),
            })
        };
        let shards: Box<[Arc<Shared>]> = if count == 1 {
            Box::new([shard(0, entropy)])
        } else {
            // Session ids are rare: one source behind a lock serves every shard.
            let entropy = Arc::new(Mutex::new(entropy));
            (0..count)
                .map(|index| {
                    let entropy = Arc::clone(&entropy);
                    let fill = move |dst: &mut [u8]| {
                        entropy
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .fill(dst);
                    };
                    shard(index, Box::new(fill))
                })
                .collect()
        };
        let router = Arc::new(Router {
            shards,
            config,
            turn: AtomicUsize::new(0),
        });
        for shard in &router.shards {
            let _ = shard.router.set(Arc::downgrade(&router));
            tokio::spawn(timers(Arc::clone(shard)));
        }
        Self {
            shared: Arc::clone(&router.shards[0]),
            _owner: Some(Arc::new(Owner(Arc::clone(&router)))),
            router,
        }
    }

    /// A handle on each shard, in order: what [`with_server`](Self::with_server) on
    /// every core at once needs (a shutdown, counting exchanges).
    pub fn shards(&self) -> impl ExactSizeIterator<Item = Self> + '_ {
        self.router.shards.iter().map(|shard| Self {
            shared: Arc::clone(shard),
            router: Arc::clone(&self.router),
            _owner: self._owner.clone(),
        })
    }

    /// Runs `f` on this handle's core (an application's `respond`, `notify`, `request`),
    /// with the current time, then hands out what it produced.
    pub fn with_server<R>(&self, f: impl FnOnce(&mut Server, Instant) -> R) -> R {
        self.shared.with(f)
    }

    /// As [`with_server`](Self::with_server), but the events it causes wait for the next
    /// [`deliver`](Self::deliver) (or the next input): for a caller holding a lock that
    /// the sink takes.
    pub(crate) fn with_server_deferred<R>(&self, f: impl FnOnce(&mut Server, Instant) -> R) -> R {
        let now = Instant::now();
        let mut core = self.shared.lock();
        let r = f(&mut core.server, now);
        self.shared.release_deferred(core);
        r
    }

    /// Runs the in-place sink on the events the core holds (those of deferred inputs).
    pub(crate) fn deliver(&self) {
        self.shared.deliver();
    }

    /// Connects the shared store of a cluster node (a core configured with
    /// [`Config::with_node`]): from now on every shard's store work goes, in the order
    /// each core gave it, to the returned link's [`ops`](StoreLink::ops), tagged with the
    /// shard's index, and the link's [`StoreHandle`] hands back what came of it
    /// (`mcpwire-redis` drives one on Redis). The channel is unbounded: the work is what
    /// the traffic makes, and a core cannot wait for the store under its lock. Calling it
    /// again replaces the link (the old one's channel closes).
    pub fn store_link(&self) -> StoreLink {
        let (tx, ops) = mpsc::unbounded_channel();
        let mut epochs = Vec::with_capacity(self.router.shards.len());
        for shard in &self.router.shards {
            let mut core = shard.lock();
            core.store = Some(tx.clone());
            epochs.push(core.server.epoch());
            // Work queued before the link (a session minted first) is not lost.
            core.pump();
        }
        StoreLink {
            epochs,
            ops,
            handle: StoreHandle {
                service: self.downgrade(),
            },
        }
    }

    /// A handle that keeps nothing alive: for what the service's own sink holds (the
    /// application layer's), which would otherwise keep the service from ever being
    /// freed.
    pub(crate) fn downgrade(&self) -> WeakService {
        WeakService {
            shared: Arc::downgrade(&self.shared),
            router: Arc::downgrade(&self.router),
        }
    }
}

/// A cluster node's link to its shared store ([`McpService::store_link`]).
#[derive(Debug)]
pub struct StoreLink {
    /// The epoch of each shard's event ids, by index ([`Server::epoch`]): the driver
    /// keeps them alive in the store while the service lives, so a follower of one of
    /// their rings on another node learns when this one is gone.
    pub epochs: Vec<mcpwire::resume::Epoch>,
    /// Every shard's store work, with the shard's index, in the order each core gave it.
    /// It ends when the service is gone.
    pub ops: mpsc::UnboundedReceiver<(usize, StoreOp)>,
    /// How the results go back.
    pub handle: StoreHandle,
}

/// Hands a store's results back to the cores of a service; keeps the service alive no
/// more than the application does.
#[derive(Clone)]
pub struct StoreHandle {
    service: WeakService,
}

impl std::fmt::Debug for StoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreHandle").finish_non_exhaustive()
    }
}

impl StoreHandle {
    /// Hands `input` to the core of shard `shard` (the index that came with the op it
    /// answers), then hands out what it caused. `false` once the service is gone.
    pub fn input(&self, shard: usize, input: StoreInput<'_>) -> bool {
        let Some(service) = self.service.upgrade() else {
            return false;
        };
        let Some(core) = service.router.shards.get(shard) else {
            return false;
        };
        core.with(|server, now| server.handle_store(now, input));
        true
    }

    /// Hands a notice another node published to every core. `false` once the service
    /// is gone.
    pub fn notice(&self, notice: &[u8]) -> bool {
        let Some(service) = self.service.upgrade() else {
            return false;
        };
        for core in &service.router.shards {
            core.with(|server, now| server.handle_store(now, StoreInput::Notice(notice)));
        }
        true
    }

    /// Whether the service still lives.
    pub fn is_alive(&self) -> bool {
        self.service.upgrade().is_some()
    }
}

/// A [`McpService`] that keeps nothing alive ([`McpService::downgrade`]).
#[derive(Clone)]
pub(crate) struct WeakService {
    shared: std::sync::Weak<Shared>,
    router: std::sync::Weak<Router>,
}

impl WeakService {
    /// The service, while it lives.
    pub(crate) fn upgrade(&self) -> Option<McpService> {
        Some(McpService {
            shared: self.shared.upgrade()?,
            router: self.router.upgrade()?,
            _owner: None,
        })
    }
}

/// Drives the core's deadlines: sleeps until `poll_timeout`, or until an input moved it.
async fn timers(shared: Arc<Shared>) {
    while !shared.closed.load(Ordering::Acquire) {
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
    /// Body bytes not yet taken, when the head gave the length: hyper stops polling a
    /// body once that many bytes went out, so the end is taken with the last of them.
    remaining: Option<u64>,
    done: bool,
    /// The core cut the response ([`Transmit::Abort`]) behind the bytes in `next`.
    cut: bool,
}

impl ExchangeBody {
    fn new(shared: Arc<Shared>, exchange: ExchangeId, head: &http::response::Parts) -> Self {
        let remaining = head
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok());
        Self {
            shared,
            exchange,
            next: None,
            remaining,
            done: false,
            cut: false,
        }
    }

    /// Counts `bytes`, just taken from the core, against the known length; with the
    /// last of them the end is taken too (the core gives a head its length only when
    /// the whole body and its end are queued behind it).
    fn took(&mut self, server: &mut Server, bytes: &Bytes) {
        if let Some(remaining) = &mut self.remaining {
            *remaining = remaining.saturating_sub(bytes.len() as u64);
            if *remaining == 0 && matches!(server.poll_transmit(self.exchange), Some(Transmit::End))
            {
                self.done = true;
            }
        }
    }
}

/// The error an [`ExchangeBody`] ends with when the core cut its response
/// ([`Transmit::Abort`]): hyper then closes the connection without the body's end, so
/// neither the client nor a proxy takes the response for complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut;

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the response was cut: a resume took its stream over")
    }
}

impl std::error::Error for Cut {}

impl Body for ExchangeBody {
    type Data = Bytes;
    type Error = Cut;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Cut>>> {
        if let Some(bytes) = self.next.take() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        if self.cut {
            self.cut = false;
            return Poll::Ready(Some(Err(Cut)));
        }
        if self.done {
            return Poll::Ready(None);
        }
        let shared = Arc::clone(&self.shared);
        let mut core = shared.lock();
        loop {
            match core.server.poll_transmit(self.exchange) {
                Some(Transmit::Data(bytes)) => {
                    self.took(&mut core.server, &bytes);
                    // An end or more bytes right behind these are taken now, so that hyper
                    // writes them together rather than after another poll.
                    if !self.done {
                        match core.server.poll_transmit(self.exchange) {
                            Some(Transmit::End) => self.done = true,
                            Some(Transmit::Abort) => {
                                self.done = true;
                                self.cut = true;
                            }
                            Some(Transmit::Data(more)) => {
                                self.took(&mut core.server, &more);
                                self.next = Some(more);
                            }
                            Some(Transmit::Head(_)) | None => {}
                        }
                    }
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
                Some(Transmit::Head(_)) => continue,
                Some(Transmit::End) => {
                    self.done = true;
                    return Poll::Ready(None);
                }
                Some(Transmit::Abort) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(Cut)));
                }
                None => {
                    core.wakers.insert(self.exchange, cx.waker().clone());
                    return Poll::Pending;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.next.is_none() && !self.cut
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
        let (parts, body) = request.into_parts();
        let shared = Arc::clone(self.router.pick(&parts));
        Box::pin(async move {
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
            let ready = loop {
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
                    Err(ready) => break ready,
                }
            };
            // The head is taken as late as it can be: after the application has seen
            // the request (in place, on this task, in `release`), so that an answer given
            // at once goes out with it, and a body complete by then is sent with its
            // length (the core adds it) rather than in chunks.
            let head = match ready.map(|()| shared.lock().server.poll_transmit(x)) {
                Ok(Some(Transmit::Head(head))) => head,
                // The core forgot the exchange without a head (it cannot): answer 500.
                _ => {
                    drop(guard);
                    return Ok(bare(http::StatusCode::INTERNAL_SERVER_ERROR, &shared, x));
                }
            };
            guard.armed = false;
            let body = ExchangeBody::new(shared, x, &head);
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
        remaining: None,
        done: true,
        cut: false,
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

/// How [`serve_with`] and [`serve_tls_with`] treat connections: the bound on open
/// connections and the deadlines of those not being served ([`mcpwire::conn::Limits`],
/// the policy both adapters run), the largest request head, and where log lines go.
#[derive(Clone)]
#[must_use]
pub struct ServeOptions {
    limits: Limits,
    log: Option<Log>,
    keep_alive: bool,
}

/// A log hook: called with one line for each thing worth a line (an accept error and
/// what was done about it). It must not block: it runs on the accepting task.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

impl ServeOptions {
    /// The defaults: [`Limits::new`] (1,024 connections, 10 s for a head once begun, 60 s
    /// idle, heads of at most 16 KiB), no log.
    pub fn new() -> Self {
        Self {
            limits: Limits::new(),
            log: None,
            keep_alive: true,
        }
    }

    /// The connection bound, deadlines and largest head ([`Limits::with_max_head`]: a
    /// longer head is answered 431; here at least 8 KiB, hyper's smallest read buffer).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Where log lines go.
    pub fn with_log(mut self, log: Log) -> Self {
        self.log = Some(log);
        self
    }

    /// Whether a connection serves more than one request (default `true`). With
    /// `false` every response says `Connection: close` and its connection closes after
    /// it: behind a load balancer that balances connections, every request is then
    /// balanced, a session's requests spread over the nodes of a cluster.
    pub fn with_keep_alive(mut self, keep_alive: bool) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// The connection bound and deadlines.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("limits", &self.limits)
            .field("log", &self.log.is_some())
            .field("keep_alive", &self.keep_alive)
            .finish()
    }
}

/// Accepts connections on `listener` and serves each with `service` over HTTP/1.1, with
/// [`ServeOptions::new`]: see [`serve_with`].
pub async fn serve(listener: tokio::net::TcpListener, service: McpService) -> Infallible {
    serve_with(listener, service, ServeOptions::new()).await
}

/// Accepts connections on `listener` and serves each with `service` over HTTP/1.1,
/// with `TCP_NODELAY` (without it every small response waits for the peer's delayed
/// ACK). Never ends by itself (abort its task to stop accepting).
///
/// Connections are admitted and timed by a [`mcpwire::conn::Connections`] table: at the
/// bound, the oldest connection not being served (idle, or still sending its head) is
/// closed to make room, and a new one is refused only when every connection is busy; a
/// head must end within the header timeout of its first byte, and a connection waiting
/// for a request is closed after the idle timeout. An accept error never ends the loop:
/// out of file descriptors, the oldest connection not busy is closed to free one; any
/// error is logged and accepting pauses briefly.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    service: McpService,
    options: ServeOptions,
) -> Infallible {
    let (max_head, keep_alive) = (options.limits.max_head(), options.keep_alive);
    accept(listener, options, move |stream, conn| {
        serve_io(stream, service.clone(), conn, max_head, keep_alive)
    })
    .await
}

/// How long a TLS client may take to finish its handshake before its connection is
/// dropped.
pub const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// [`serve`] over TLS: each connection's handshake is run with `tls` (rustls; at most
/// [`TLS_HANDSHAKE_TIMEOUT`], and a connection that fails it is dropped), then served as
/// [`serve`] serves one. HTTP/1.1 only: offer `http/1.1` in ALPN or nothing.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    service: McpService,
) -> Infallible {
    serve_tls_with(listener, tls, service, ServeOptions::new()).await
}

/// [`serve_tls`] with `options`, as [`serve_with`] takes them.
pub async fn serve_tls_with(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    service: McpService,
    options: ServeOptions,
) -> Infallible {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let (max_head, keep_alive) = (options.limits.max_head(), options.keep_alive);
    accept(listener, options, move |stream, conn| {
        let (acceptor, service) = (acceptor.clone(), service.clone());
        async move {
            // The handshake counts as the head: it must end within the header timeout
            // (or the TLS bound), and a peer that stalls it can be shed.
            conn.head_started();
            let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream));
            if let Ok(Ok(stream)) = handshake.await {
                serve_io(stream, service, conn, max_head, keep_alive).await;
            }
        }
    })
    .await
}

/// The connection table one accept loop keeps, and how to close each connection.
struct Table {
    conns: Connections,
    /// Each open connection's moves and close signal.
    open: HashMap<ConnId, Open>,
    /// The counts the last log line told.
    reported: mcpwire::conn::Stats,
}

/// An open connection, as the table holds it.
struct Open {
    moves: Arc<Moves>,
    /// The last [`Moves`] value the table was told.
    seen: u64,
    kill: oneshot::Sender<()>,
}

/// The table behind one accept loop, with its sweeper's wake-up.
///
/// A connection does not take the table's lock for its moves (a head's first byte, the
/// exchange, the response's end: three per request, on every request): it records each
/// in its [`Moves`], and the table learns them when it next looks ([`Table::sync`]), at
/// the sweeper's ticks and before it picks a connection to shed. A deadline is then met
/// at most one tick late.
struct Tracker {
    table: Mutex<Table>,
    sweep: Notify,
    /// The time [`Moves`] count from.
    start: Instant,
    /// How often the sweeper looks while connections are open.
    tick: Duration,
}

impl Tracker {
    /// Logs the connections given up, when their counts call for a line
    /// ([`mcpwire::conn::Stats::log_line`]); outside the lock.
    fn report(&self, log: &impl Fn(&str)) {
        let line = {
            let mut table = self.lock();
            let now = table.conns.stats();
            let line = now.log_line(&table.reported);
            table.reported = now;
            line
        };
        if let Some(line) = line {
            log(&line);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Table {
    /// Tells the table every move made since it last looked.
    fn sync(&mut self, start: Instant) {
        for (&id, open) in &mut self.open {
            let now = open.moves.state.load(Ordering::Acquire);
            if now == open.seen {
                continue;
            }
            open.seen = now;
            let at = start + Duration::from_micros(now >> 2);
            match now & 3 {
                Moves::HEAD => {
                    // It may have finished an exchange since the table last looked.
                    self.conns.idle(id, at);
                    self.conns.head_started(id, at);
                }
                Moves::BUSY => self.conns.busy(id),
                _ => self.conns.idle(id, at),
            }
        }
    }

    fn kill(&mut self, id: ConnId) {
        if let Some(open) = self.open.remove(&id) {
            let _ = open.kill.send(());
        }
    }
}

/// One connection's last move and when it was made, as one atomic word: the phase in
/// the low two bits ([`Moves::WAITING`], [`Moves::HEAD`], [`Moves::BUSY`]), the time in
/// microseconds since [`Tracker::start`] above them.
struct Moves {
    state: AtomicU64,
}

impl Moves {
    const WAITING: u64 = 0;
    const HEAD: u64 = 1;
    const BUSY: u64 = 2;
}

/// One connection's handle on the table: its moves, recorded as they happen.
#[derive(Clone)]
struct Conn {
    moves: Arc<Moves>,
    start: Instant,
    /// The peer's address, put in each request head for the core
    /// ([`Config::with_max_sessions_per_peer`](mcpwire::server::Config::with_max_sessions_per_peer)).
    peer: PeerAddr,
}

impl Conn {
    fn record(&self, phase: u64) {
        let micros = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX >> 2);
        self.moves
            .state
            .store((micros.min(u64::MAX >> 2) << 2) | phase, Ordering::Release);
    }

    /// A byte of a request head arrived: the head's deadline starts, unless one did.
    fn head_started(&self) {
        if self.moves.state.load(Ordering::Relaxed) & 3 == Moves::WAITING {
            self.record(Moves::HEAD);
        }
    }

    /// An exchange runs: no deadline, never shed. No time is needed, so every busy
    /// word is the same; the table then takes a missed round (idle, head, busy again)
    /// for the busy it already knew, which is what it is.
    fn busy(&self) {
        self.moves.state.store(Moves::BUSY, Ordering::Release);
    }

    fn idle(&self) {
        self.record(Moves::WAITING);
    }
}

/// Closes what the table gives up, at its deadlines: it looks at every tick while
/// connections are open (moves it has not been told of may bring a deadline earlier),
/// and sleeps until the accept loop wakes it when none is.
async fn sweep(tracker: Arc<Tracker>, log: impl Fn(&str)) {
    loop {
        let deadline = {
            let now = Instant::now();
            let mut table = tracker.lock();
            table.sync(tracker.start);
            while let Some((id, _)) = table.conns.poll_expired(now) {
                table.kill(id);
            }
            let tick = (!table.conns.is_empty()).then(|| now + tracker.tick);
            match (table.conns.poll_timeout(), tick) {
                (Some(at), Some(tick)) => Some(at.min(tick)),
                (at, tick) => at.or(tick),
            }
        };
        tracker.report(&log);
        let notified = tracker.sweep.notified();
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {}
                    () = notified => {}
                }
            }
            None => notified.await,
        }
    }
}

/// Accepts connections for ever, each admitted by the table, set `TCP_NODELAY` and
/// handed to `connection` on a task of its own, which ends when the table closes it.
async fn accept<F, Fut>(
    listener: tokio::net::TcpListener,
    options: ServeOptions,
    connection: F,
) -> Infallible
where
    F: Fn(tokio::net::TcpStream, Conn) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    // A tenth of the shortest deadline, within [10 ms, 1 s].
    let shortest = options
        .limits
        .header_timeout()
        .min(options.limits.idle_timeout());
    let tracker = Arc::new(Tracker {
        table: Mutex::new(Table {
            conns: Connections::new(options.limits),
            open: HashMap::new(),
            reported: mcpwire::conn::Stats::default(),
        }),
        sweep: Notify::new(),
        start: Instant::now(),
        tick: (shortest / 10).clamp(Duration::from_millis(10), Duration::from_secs(1)),
    });
    let log = move |line: &str| {
        if let Some(log) = &options.log {
            log(line);
        }
    };
    let sweeper = tokio::spawn(sweep(Arc::clone(&tracker), log.clone()));
    let _stop = AbortOnDrop(sweeper);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e)
                if matches!(
                    e.kind(),
                    ConnectionAborted | ConnectionRefused | ConnectionReset
                ) =>
            {
                continue;
            }
            Err(e) => {
                // Out of file descriptors (EMFILE, ENFILE) or another resource: free one
                // by closing the oldest connection not busy, and try again shortly.
                let shed = {
                    let mut t = tracker.lock();
                    t.sync(tracker.start);
                    let shed = t.conns.shed();
                    if let Some(id) = shed {
                        t.kill(id);
                    }
                    shed
                };
                let pause = if shed.is_some() { 10 } else { 50 };
                log(&format!(
                    "accept: {e}; {}, accepting again in {pause} ms",
                    match shed {
                        Some(id) => format!("closed idle connection {id}"),
                        None => "no idle connection to close".to_owned(),
                    }
                ));
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                continue;
            }
        };
        let now = Instant::now();
        let (kill, killed) = oneshot::channel();
        let moves = Arc::new(Moves {
            state: AtomicU64::new(Moves::WAITING),
        });
        let (opened, first) = {
            let mut t = tracker.lock();
            if t.conns.len() >= t.conns.limits().max_connections() {
                // Shedding picks the oldest connection not busy: by their latest moves.
                t.sync(tracker.start);
            }
            let opened = match t.conns.open(now) {
                Opened::Accepted(id) => Some(id),
                Opened::Shed { id, shed } => {
                    t.kill(shed);
                    Some(id)
                }
                Opened::Refused => None,
            };
            if let Some(id) = opened {
                let conn = Conn {
                    moves: Arc::clone(&moves),
                    start: tracker.start,
                    peer: PeerAddr(peer.ip()),
                };
                // Waiting since now, as the table has it.
                conn.idle();
                let seen = moves.state.load(Ordering::Relaxed);
                t.open.insert(id, Open { moves, seen, kill });
                (Some((id, conn)), t.conns.len() == 1)
            } else {
                (None, false)
            }
        };
        if first {
            // The sweeper sleeps while no connection is open.
            tracker.sweep.notify_one();
        }
        tracker.report(&log);
        let Some((id, conn)) = opened else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let task = connection(stream, conn);
        let tracker = Arc::clone(&tracker);
        tokio::spawn(async move {
            tokio::select! {
                () = task => {}
                _ = killed => {}
            }
            let mut t = tracker.lock();
            t.conns.close(id);
            t.open.remove(&id);
        });
    }
}

/// Aborts a task when dropped (the sweeper, with its accept loop).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The connection's IO, reporting the first byte of each request head to the table.
struct Tracked<I> {
    io: I,
    conn: Conn,
}

impl<I: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Tracked<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.conn.head_started();
        }
        polled
    }
}

impl<I: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Tracked<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// The service one connection runs: `service`, with each exchange reported to the table
/// (busy from its head, idle again once its response is complete).
#[derive(Clone)]
struct Reported {
    service: McpService,
    conn: Conn,
}

impl<B> hyper::service::Service<http::Request<B>> for Reported
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Send,
{
    type Response = http::Response<ReportedBody>;
    type Error = Infallible;
    type Future = ReportedFuture;

    fn call(&self, mut request: http::Request<B>) -> Self::Future {
        self.conn.busy();
        request.extensions_mut().insert(self.conn.peer);
        ReportedFuture {
            response: hyper::service::Service::call(&self.service, request),
            conn: Some(self.conn.clone()),
        }
    }
}

/// [`McpService`]'s response, its body wrapped in a [`ReportedBody`] (no second box).
struct ReportedFuture {
    response:
        Pin<Box<dyn Future<Output = Result<http::Response<ExchangeBody>, Infallible>> + Send>>,
    conn: Option<Conn>,
}

impl Future for ReportedFuture {
    type Output = Result<http::Response<ReportedBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let response = std::task::ready!(self.response.as_mut().poll(cx))?;
        let conn = self.conn.take();
        Poll::Ready(Ok(response.map(|body| ReportedBody { body, conn })))
    }
}

/// An [`ExchangeBody`] that tells the table when it is over: the connection then waits
/// for its next request (keep-alive) under the idle deadline.
struct ReportedBody {
    body: ExchangeBody,
    conn: Option<Conn>,
}

impl std::fmt::Debug for ReportedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.body.fmt(f)
    }
}

impl Drop for ReportedBody {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.idle();
        }
    }
}

impl Body for ReportedBody {
    type Data = Bytes;
    type Error = Cut;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Cut>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
}

/// Serves one connection over HTTP/1.1 until it ends.
async fn serve_io<I>(io: I, service: McpService, conn: Conn, max_head: usize, keep_alive: bool)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let io = hyper_util::rt::TokioIo::new(Tracked {
        io,
        conn: conn.clone(),
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .max_buf_size(max_head.max(8 << 10))
        .keep_alive(keep_alive)
        .serve_connection(io, Reported { service, conn })
        .await;
}
