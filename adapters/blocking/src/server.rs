//! The server side: one [`mcpwire::server::Server`] driven by blocking threads over
//! [`tiny_http`], with no async runtime.
//!
//! The adapter moves bytes and time, and nothing else: request heads and body reads go
//! into the core, the core's transmits come out as the response head and body, its
//! deadlines drive one timer thread, and its events go to the application through a
//! sink called in place. Every status code, header, stream and session decision is the
//! core's; the adapter's own answers are about its capacity (503 when every worker is
//! busy) and about HTTP it could not hand to the core (400 for a head `http` rejects).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use mcpwire::server::Config;
//! use mcpwire_blocking::app::{Call, Tools, text_result};
//! use mcpwire_blocking::server::{ServeOptions, serve};
//! use serde_json::{Value, json};
//!
//! let tools = Tools::new().with_tool(
//!     "echo",
//!     "Returns its text",
//!     json!({"type": "object", "properties": {"text": {"type": "string"}}}),
//!     |_: &Call, args: Value| Ok(text_result(args["text"].as_str().unwrap_or_default())),
//! );
//! let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//! // Session ids come from this: use a cryptographically secure source in production.
//! let entropy = Box::new(|b: &mut [u8]| b.fill(7));
//! let handle = serve(listener, Config::new(), entropy, Arc::new(tools), ServeOptions::new())?;
//! println!("serving MCP on http://{}/mcp", handle.local_addr());
//! assert!(handle.shutdown(Duration::from_secs(5)));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Threads
//!
//! - **tiny_http's**: it accepts connections and parses request heads on threads of its
//!   own (one per connection, unbounded) and queues the requests (unbounded).
//! - **The acceptor** takes each request from tiny_http and hands it to an idle worker.
//!   The hand-off is bounded: a request is queued only when it can reserve a free
//!   worker, so it is picked up at once; when every worker is busy it is
//!   answered **503 with `Retry-After`** on the spot rather than left waiting.
//! - **Workers**, a fixed pool ([`ServeOptions::with_workers`]): one serves one request
//!   from its head to the end of its response. A long-lived SSE stream (a session's GET
//!   stream, above all) holds its worker for its whole life, so size the pool for the
//!   streams you expect to be open at once plus the POSTs in flight (the default, 64,
//!   is meant for a few dozen clients with a GET stream each).
//! - **The timer**: sleeps until [`Server::poll_timeout`], or until an input moved it
//!   earlier, and then calls [`Server::handle_timeout`] (heartbeats, SEP-1699 polling
//!   closes and session expiry all come out of the core this way).
//!
//! # Locking
//!
//! One [`Mutex`] guards the core (and the adapter's little bookkeeping beside it). Every
//! input (a head, a body read, the body's end, a disconnect, a timeout, an application's
//! answer) is one lock, one call into the core, and then, still under the lock, a pump
//! over [`Server::poll_ready`] that wakes the worker owning each ready exchange, and a
//! move of the core's events into the dispatch queue. Each worker has its own
//! [`Condvar`] (used only with the core's mutex): a worker whose exchange has nothing to
//! send records itself as sleeping on that exchange and waits on its condvar, and the
//! pump signals exactly that worker. Checking for frames and starting to wait happen
//! under the one lock, so no wake-up is lost.
//!
//! Body bytes are pulled from the core as the connection takes them: a worker takes the
//! frames ready now (at most [`BATCH_BYTES`] at a time), writes them outside the lock,
//! flushes, and only then takes more. A slow reader's bytes therefore stay in the core,
//! which bounds them ([`Config::with_max_unsent`](mcpwire::server::Config::with_max_unsent)).
//!
//! Events are dispatched as the tokio adapter's are: queued in the core's order, and
//! whichever thread queued some and finds no dispatch running becomes the dispatcher and
//! runs the sink until the queue is empty, the locks released around each call. The sink
//! must not block: the [`app`](crate::app) layer answers `initialize` and `ping` there
//! and hands every other request to its own pool of handler threads.
//!
//! # Writing a response
//!
//! A head that carries `Content-Length` (the core's JSON answers), or one followed at
//! once by the end, is answered through tiny_http's `respond` with a known length. Any
//! other (an SSE stream) is written through the request's raw writer: the status line
//! and headers by tiny_http (`Transfer-Encoding: chunked`, no body), then each batch of
//! frames as chunks by [`chunked_transfer::Encoder`] and a flush of the socket writer.
//! tiny_http's own chunked path would hold frames in an 8 KiB buffer until the end.
//! When a write fails the client is gone: the core is told
//! ([`Server::handle_disconnect`]), and the chunked terminator is *not* written, so a
//! cut stream never looks like a complete one.
//!
//! # Limits of tiny_http
//!
//! - A client that goes away from a quiet stream is noticed only when a write to it
//!   fails, at the next heartbeat or the one after
//!   ([`Config::with_heartbeat`](mcpwire::server::Config::with_heartbeat), 15 s by
//!   default): until then it holds its worker (tiny_http gives no access to the socket
//!   to watch it for the peer's close).
//! - A client that stops reading blocks its worker in `write` until the write timeout
//!   ([`ServeOptions::with_write_timeout`]) passes. The core bounds the bytes queued
//!   for it meanwhile. The abandoned connection itself stays open until the client
//!   closes it (tiny_http gives no way to close it).
//! - The unread rest of a refused request's body (a 413, a 503) is read and dropped by
//!   tiny_http when the request is dropped, on the thread that answered it; one
//!   declared longer than [`DROP_SAFE_BYTES`] is leaked unanswered instead, since
//!   tiny_http would allocate all of it at once (and abort the process on failing to).
//! - A streamed response is always HTTP/1.1 chunked, even to an HTTP/1.0 client.
//! - Idle keep-alive connections keep their tiny_http thread until the client closes.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcpwire::Entropy;
use mcpwire::server::{Config, Event, ExchangeId, Server, Transmit};

/// At most this many body bytes are taken from the core for one write and flush.
pub const BATCH_BYTES: usize = 64 << 10;

/// How the adapter runs: threads and sockets. The protocol's policies are the core's
/// [`Config`].
#[derive(Clone, Debug)]
#[must_use]
pub struct ServeOptions {
    workers: usize,
    handlers: usize,
    queue: usize,
    retry_after: Duration,
    nodelay: bool,
    write_timeout: Option<Duration>,
    read_size: usize,
    grace: Duration,
}

impl ServeOptions {
    /// The defaults: 64 workers, 8 handler threads with 1,024 queued calls, `Retry-After:
    /// 1` on a busy 503, `TCP_NODELAY` on, a 30 s write timeout, 16 KiB body reads, and
    /// a 5 s grace when a [`Handle`] is dropped.
    pub fn new() -> Self {
        Self {
            workers: 64,
            handlers: 8,
            queue: 1024,
            retry_after: Duration::from_secs(1),
            nodelay: true,
            write_timeout: Some(Duration::from_secs(30)),
            read_size: 16 << 10,
            grace: Duration::from_secs(5),
        }
    }

    /// The number of worker threads (at least 1): the most requests served at once, open
    /// SSE streams included (see the [module docs](self)).
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// The number of threads that run the application's handlers (at least 1), and the
    /// most calls queued for them; a call beyond is answered with an error at once
    /// (used by [`serve`]).
    pub fn with_handlers(mut self, threads: usize, queue: usize) -> Self {
        self.handlers = threads.max(1);
        self.queue = queue;
        self
    }

    /// The `Retry-After` of the 503 a request gets when every worker is busy (whole
    /// seconds, at least 1).
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = after;
        self
    }

    /// Whether accepted sockets have `TCP_NODELAY` (set on the listener, which Linux
    /// accepted sockets inherit). Without it a small response can wait for the client's
    /// delayed ACK.
    pub fn with_nodelay(mut self, nodelay: bool) -> Self {
        self.nodelay = nodelay;
        self
    }

    /// How long one write to a client may block (`SO_SNDTIMEO`, set on the listener,
    /// which Linux accepted sockets inherit; `None` or zero: forever). A client that
    /// stops reading then frees its worker when the timeout passes: its connection is
    /// abandoned and the core told, as for a client that went away.
    pub fn with_write_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.write_timeout = timeout.filter(|t| !t.is_zero());
        self
    }

    /// The most bytes asked for in one read of a request body (at least 1).
    pub fn with_read_size(mut self, bytes: usize) -> Self {
        self.read_size = bytes.max(1);
        self
    }

    /// How long dropping a [`Handle`] waits for open exchanges to end.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The number of worker threads.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The number of handler threads.
    pub fn handlers(&self) -> usize {
        self.handlers
    }

    /// The most calls queued for the handler threads.
    pub fn queue(&self) -> usize {
        self.queue
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// What receives the core's events: called in place, one event at a time, in order.
pub type Sink = Box<dyn FnMut(&Driver, Event) + Send>;

/// The core and the adapter's bookkeeping beside it, under one lock.
struct Core {
    server: Server,
    /// Workers waiting for their exchange's next transmit, by exchange.
    sleeping: HashMap<ExchangeId, usize>,
    /// The deadline the timer thread sleeps until (`None`: until notified).
    timer_at: Option<Instant>,
    /// Set when the adapter stops: every wait ends.
    stopped: bool,
}

impl Core {
    /// Wakes the worker of every ready exchange.
    fn pump(&mut self, wake: &[Condvar]) {
        while let Some(x) = self.server.poll_ready() {
            if let Some(&w) = self.sleeping.get(&x) {
                wake[w].notify_one();
            }
        }
    }

    /// Whether the core's next deadline is earlier than the one the timer sleeps until.
    fn deadline_moved_earlier(&self) -> bool {
        match (self.server.poll_timeout(), self.timer_at) {
            (Some(next), Some(armed)) => next < armed,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// The events waiting for the sink, and the sink (taken out while a dispatch runs).
struct Dispatch {
    queue: VecDeque<Event>,
    sink: Option<Sink>,
}

/// Requests handed to the workers, and how many workers are free.
struct Pool {
    queue: VecDeque<tiny_http::Request>,
    /// Workers neither serving a request nor reserved for a queued one: every worker
    /// at the start, one less per hand-off, one more when a worker finishes a request.
    /// So a request is queued only when a worker is bound to take it.
    idle: usize,
    stopping: bool,
}

struct Shared {
    core: Mutex<Core>,
    /// One per worker, each used only with `core`.
    wake: Box<[Condvar]>,
    /// Woken when an input moved the next deadline earlier, and at stop.
    timer: Condvar,
    dispatch: Mutex<Dispatch>,
    pool: Mutex<Pool>,
    /// Woken when a request is queued for the workers, and at stop.
    work: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock is a bug; keep serving the rest.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    fn core(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    /// Runs `input` on the core, then hands out what it produced.
    fn with<R>(self: &Arc<Self>, input: impl FnOnce(&mut Server, Instant) -> R) -> R {
        let now = Instant::now();
        let mut core = self.core();
        let r = input(&mut core.server, now);
        self.release(core);
        r
    }

    /// Wakes the workers with something to send, queues the events, unlocks, moves the
    /// timer if needed, and dispatches.
    fn release(self: &Arc<Self>, core: MutexGuard<'_, Core>) {
        if self.release_deferred(core) {
            self.deliver();
        }
    }

    /// As [`release`](Self::release), but the events stay queued for the next dispatch.
    /// Returns whether any were queued.
    fn release_deferred(&self, mut core: MutexGuard<'_, Core>) -> bool {
        core.pump(&self.wake);
        let mut queued = false;
        {
            let mut dispatch = lock(&self.dispatch);
            while let Some(event) = core.server.poll_event() {
                dispatch.queue.push_back(event);
                queued = true;
            }
        }
        let wake_timer = core.deadline_moved_earlier();
        drop(core);
        if wake_timer {
            self.timer.notify_one();
        }
        queued
    }

    /// Runs the sink over the queued events, unless a dispatch is running (it will see
    /// them).
    fn deliver(self: &Arc<Self>) {
        let mut dispatch = lock(&self.dispatch);
        let Some(mut sink) = dispatch.sink.take() else {
            return;
        };
        let driver = Driver {
            shared: Arc::clone(self),
        };
        while let Some(event) = dispatch.queue.pop_front() {
            drop(dispatch);
            // A panicking sink loses its event, not the dispatcher nor its thread.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                sink(&driver, event);
            }));
            dispatch = lock(&self.dispatch);
        }
        // Emptiness seen and the sink put back under one lock: nothing queued is missed.
        dispatch.sink = Some(sink);
    }

    /// The transmits of `x` ready now (a head, up to [`BATCH_BYTES`] of data, the end);
    /// with `wait`, sleeps on worker `me`'s condvar until there is at least one. `None`
    /// when the adapter stopped first.
    fn next_batch(&self, x: ExchangeId, me: usize, wait: bool) -> Option<Batch> {
        let mut core = self.core();
        loop {
            let mut batch = Batch::default();
            let mut bytes = 0;
            while bytes < BATCH_BYTES {
                match core.server.poll_transmit(x) {
                    Some(Transmit::Head(head)) => batch.head = Some(head),
                    Some(Transmit::Data(data)) => {
                        bytes += data.len();
                        batch.data.push(data);
                    }
                    Some(Transmit::End) => {
                        batch.end = true;
                        break;
                    }
                    Some(Transmit::Abort) => {
                        batch.cut = true;
                        break;
                    }
                    None => break,
                }
            }
            if !wait || batch.head.is_some() || !batch.data.is_empty() || batch.end || batch.cut {
                core.sleeping.remove(&x);
                return Some(batch);
            }
            if core.stopped {
                core.sleeping.remove(&x);
                return None;
            }
            core.sleeping.insert(x, me);
            core = self.wake[me]
                .wait(core)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Tells the core that `x`'s client went away.
    fn disconnect(self: &Arc<Self>, x: ExchangeId) {
        self.with(|server, now| server.handle_disconnect(now, x));
    }
}

/// What one exchange has to send now.
#[derive(Default)]
struct Batch {
    head: Option<http::response::Parts>,
    data: Vec<Bytes>,
    end: bool,
    /// The core cut the response after `data` ([`Transmit::Abort`]).
    cut: bool,
}

/// A handle on the running core, for the application: clone it freely.
#[derive(Clone)]
pub struct Driver {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

impl Driver {
    /// Runs `f` on the core (an application's `respond`, `notify`, `request`) with the
    /// current time, then hands out what it produced: the workers whose exchanges have
    /// bytes are woken, and the events it caused are dispatched (after the running
    /// dispatch, if this is called from the sink).
    pub fn with_server<R>(&self, f: impl FnOnce(&mut Server, Instant) -> R) -> R {
        self.shared.with(f)
    }

    /// As [`with_server`](Self::with_server), but the events it causes wait for the next
    /// [`deliver`](Self::deliver) (or the next input): for a caller holding a lock that
    /// the sink takes.
    pub(crate) fn with_server_deferred<R>(&self, f: impl FnOnce(&mut Server, Instant) -> R) -> R {
        let now = Instant::now();
        let mut core = self.shared.core();
        let r = f(&mut core.server, now);
        self.shared.release_deferred(core);
        r
    }

    /// Dispatches the events queued so far.
    pub(crate) fn deliver(&self) {
        self.shared.deliver();
    }
}

/// A running server: its threads, its address, and its core. Dropping it shuts it down
/// as [`shutdown`](Self::shutdown) does, with the grace of its [`ServeOptions`].
pub struct Handle {
    driver: Driver,
    http: Arc<tiny_http::Server>,
    addr: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
    timer: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    grace: Duration,
    /// `stop` ran (a handle whose start failed midway stops what it had started).
    stopped: bool,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("addr", &self.addr)
            .field("workers", &self.workers.len())
            .finish_non_exhaustive()
    }
}

impl Handle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The handle on the core the application uses.
    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    /// Runs `f` on the core; see [`Driver::with_server`].
    pub fn with_server<R>(&self, f: impl FnOnce(&mut Server, Instant) -> R) -> R {
        self.driver.with_server(f)
    }

    /// Shuts down gracefully: the core's [`Server::shutdown`] ends every session and
    /// stream cleanly and answers later requests 503; then this waits up to `grace` for
    /// the open exchanges to be written out, and stops every thread of the adapter.
    /// Returns whether every exchange ended within the grace. Workers still inside an
    /// exchange then (a client that stopped reading) are told to stop and not waited for.
    pub fn shutdown(mut self, grace: Duration) -> bool {
        self.stop(grace)
    }

    fn stop(&mut self, grace: Duration) -> bool {
        if self.stopped {
            return true;
        }
        self.stopped = true;
        let shared = &self.driver.shared;
        shared.with(|server, now| server.shutdown(now));
        let deadline = Instant::now() + grace;
        let clean = loop {
            if shared.core().server.exchange_count() == 0 {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            thread::sleep(Duration::from_millis(2));
        };
        lock(&shared.pool).stopping = true;
        shared.work.notify_all();
        {
            let mut core = shared.core();
            core.stopped = true;
            for wake in &shared.wake {
                wake.notify_all();
            }
        }
        shared.timer.notify_all();
        self.http.unblock();
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        if let Some(timer) = self.timer.take() {
            let _ = timer.join();
        }
        let workers = std::mem::take(&mut self.workers);
        if clean {
            for worker in workers {
                let _ = worker.join();
            }
        }
        // The sink (and the application behind it) goes with the server.
        lock(&shared.dispatch).sink = None;
        clean
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop(self.grace);
    }
}

/// Serves `handler` (see [`app`](crate::app)) on `listener` with a new core: the usual
/// entry point. `entropy` must be cryptographically secure in production (session ids).
///
/// # Errors
///
/// Setting `TCP_NODELAY` on the listener, handing it to tiny_http, or spawning a thread
/// failed.
pub fn serve(
    listener: TcpListener,
    config: Config,
    entropy: Box<dyn Entropy + Send>,
    handler: Arc<dyn crate::app::Handler>,
    options: ServeOptions,
) -> io::Result<Handle> {
    let sink = crate::app::mount(handler, &options)?;
    start(listener, config, entropy, options, sink)
}

/// Serves the core on `listener`, handing its events to `sink` (see [`Sink`]): the
/// driver without an application layer.
///
/// # Errors
///
/// As [`serve`].
pub fn start(
    listener: TcpListener,
    config: Config,
    entropy: Box<dyn Entropy + Send>,
    options: ServeOptions,
    sink: Sink,
) -> io::Result<Handle> {
    let socket = socket2::SockRef::from(&listener);
    if options.nodelay {
        socket.set_tcp_nodelay(true)?;
    }
    socket.set_write_timeout(options.write_timeout)?;
    let addr = listener.local_addr()?;
    let http = tiny_http::Server::from_listener(listener, None).map_err(io::Error::other)?;
    let http = Arc::new(http);
    let shared = Arc::new(Shared {
        core: Mutex::new(Core {
            server: Server::new(config, entropy),
            sleeping: HashMap::new(),
            timer_at: None,
            stopped: false,
        }),
        wake: (0..options.workers).map(|_| Condvar::new()).collect(),
        timer: Condvar::new(),
        dispatch: Mutex::new(Dispatch {
            queue: VecDeque::new(),
            sink: Some(sink),
        }),
        pool: Mutex::new(Pool {
            queue: VecDeque::new(),
            idle: options.workers,
            stopping: false,
        }),
        work: Condvar::new(),
    });
    let mut handle = Handle {
        driver: Driver {
            shared: Arc::clone(&shared),
        },
        http: Arc::clone(&http),
        addr,
        acceptor: None,
        timer: None,
        workers: Vec::with_capacity(options.workers),
        grace: options.grace,
        stopped: false,
    };
    for me in 0..options.workers {
        let shared = Arc::clone(&shared);
        let read_size = options.read_size;
        let worker = thread::Builder::new()
            .name(format!("mcpwire-worker-{me}"))
            .stack_size(512 << 10)
            .spawn(move || work(&shared, me, read_size))?;
        handle.workers.push(worker);
    }
    let timer_shared = Arc::clone(&shared);
    handle.timer = Some(
        thread::Builder::new()
            .name("mcpwire-timer".into())
            .spawn(move || timers(&timer_shared))?,
    );
    let retry_after = options.retry_after.as_secs().max(1);
    handle.acceptor = Some(
        thread::Builder::new()
            .name("mcpwire-acceptor".into())
            .spawn(move || accept(&http, &shared, retry_after))?,
    );
    Ok(handle)
}

/// Hands each request tiny_http parsed to an idle worker, or answers 503 at once.
fn accept(http: &tiny_http::Server, shared: &Shared, retry_after: u64) {
    // `Err` is the unblock of a shutdown, or tiny_http's accept thread giving up (it
    // stops accepting after an accept error): either way no request comes any more.
    while let Ok(request) = http.recv() {
        let mut pool = lock(&shared.pool);
        if pool.stopping {
            break;
        }
        if pool.idle > 0 {
            pool.idle -= 1;
            pool.queue.push_back(request);
            drop(pool);
            shared.work.notify_one();
        } else {
            drop(pool);
            let unread = request.body_length();
            if !drop_is_safe(unread) {
                // Answering drops it: see `DROP_SAFE_BYTES`.
                drop_request(request, unread);
                continue;
            }
            let busy = tiny_http::Response::empty(503).with_header(
                tiny_http::Header::from_bytes(&b"Retry-After"[..], retry_after.to_string())
                    .expect("ASCII digits"),
            );
            let _ = request.respond(busy);
        }
    }
}

/// One worker: serves the requests handed to it, one at a time, until the stop.
fn work(shared: &Arc<Shared>, me: usize, read_size: usize) {
    let mut buf = vec![0; read_size];
    loop {
        let request = {
            let mut pool = lock(&shared.pool);
            while pool.queue.is_empty() && !pool.stopping {
                pool = shared
                    .work
                    .wait(pool)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            match pool.queue.pop_front() {
                Some(request) => request,
                None => return,
            }
        };
        // A panic here is a bug; the worker survives it (tiny_http answers a request
        // dropped unanswered with 500) and stays in the pool.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            exchange(shared, me, request, &mut buf);
        }));
        lock(&shared.pool).idle += 1;
    }
}

/// Serves one request: its head and body into the core, the core's response out.
fn exchange(shared: &Arc<Shared>, me: usize, mut request: tiny_http::Request, buf: &mut [u8]) {
    let Some(parts) = request_parts(&request) else {
        // A head tiny_http took but `http` refuses (a malformed target, say): the core
        // never sees it.
        let _ = request.respond(tiny_http::Response::empty(400));
        return;
    };
    let x = shared.with(|server, now| server.handle_head(now, parts));
    let declared = request.body_length();
    // The body, read as it comes, until it ends or the core answers first (a refusal:
    // the rest is not wanted).
    let mut first = None;
    let mut read = 0;
    loop {
        let n = match request.as_reader().read(buf) {
            // Fewer bytes than `Content-Length` said: the client cut the request short.
            Ok(0) if declared.is_some_and(|len| read < len) => None,
            Ok(n) => Some(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => None,
        };
        let Some(n) = n else {
            // The request broke off: the core forgets it; the connection is gone.
            shared.disconnect(x);
            return drop_request(request, declared.map(|len| len - read));
        };
        read += n;
        let chunk = (n > 0).then(|| Bytes::copy_from_slice(&buf[..n]));
        let answered = shared.with(|server, now| {
            match chunk {
                Some(chunk) => server.handle_body(now, x, chunk),
                None => server.handle_body_end(now, x),
            }
            // A refusal's head can come before the body's end.
            match server.poll_transmit(x) {
                Some(Transmit::Head(head)) => Some(head),
                _ => None,
            }
        });
        if answered.is_some() {
            first = answered;
            break;
        }
        if n == 0 {
            break;
        }
    }
    if first.is_some() && !drop_is_safe(declared.map(|len| len - read)) {
        // A refusal (413) of a body declared too long to be dropped: see `drop_request`.
        shared.disconnect(x);
        return drop_request(request, declared.map(|len| len - read));
    }
    let mut batch = match first {
        Some(head) => {
            // What came right behind the head is taken with it.
            let mut rest = shared.next_batch(x, me, false).unwrap_or_default();
            rest.head = Some(head);
            rest
        }
        None => match shared.next_batch(x, me, true) {
            Some(batch) => batch,
            None => return shared.disconnect(x),
        },
    };
    let Some(head) = batch.head.take() else {
        // The core sends the head first; anything else is a core bug. tiny_http answers
        // the dropped request with 500.
        return shared.disconnect(x);
    };
    let known_length = head.headers.contains_key(http::header::CONTENT_LENGTH);
    if known_length || (batch.end && batch.data.is_empty()) {
        respond_whole(shared, me, x, request, &head, batch);
    } else {
        stream(shared, me, x, request, &head, batch);
    }
}

/// The most unread body bytes a request may have when it is dropped (or answered).
///
/// tiny_http 0.12 reads the unread rest of a body with a declared length when the
/// request is dropped, into one buffer of that whole length, allocated at once: for an
/// absurd `Content-Length` the allocation fails and the process aborts. A request with
/// more unread than this is never dropped: it is leaked, unanswered (its connection and
/// its tiny_http thread stay until the process ends). Below it, the allocation is
/// virtual memory the read barely touches.
pub const DROP_SAFE_BYTES: usize = 64 << 20;

fn drop_is_safe(unread: Option<usize>) -> bool {
    unread.is_none_or(|unread| unread <= DROP_SAFE_BYTES)
}

/// Lets go of a request that will not be answered by the core: dropped (tiny_http
/// answers it 500 if it still can), or leaked when dropping it could abort the process
/// (see [`DROP_SAFE_BYTES`]).
fn drop_request(request: tiny_http::Request, unread: Option<usize>) {
    if drop_is_safe(unread) {
        drop(request);
    } else {
        std::mem::forget(request);
    }
}

/// Answers with the whole body, collected until the end, and its length.
fn respond_whole(
    shared: &Arc<Shared>,
    me: usize,
    x: ExchangeId,
    request: tiny_http::Request,
    head: &http::response::Parts,
    mut batch: Batch,
) {
    let mut body = Vec::new();
    loop {
        for data in batch.data.drain(..) {
            body.extend_from_slice(&data);
        }
        if batch.cut {
            // Only a stream is cut, never a body with a length; should one be, the
            // dropped request is answered 500 by tiny_http, if at all.
            return;
        }
        if batch.end {
            break;
        }
        batch = match shared.next_batch(x, me, true) {
            Some(batch) => batch,
            None => return shared.disconnect(x),
        };
    }
    let len = body.len();
    let response = tiny_http::Response::new(
        tiny_http::StatusCode(head.status.as_u16()),
        headers(head),
        io::Cursor::new(body),
        Some(len),
        None,
    )
    // Keep `Content-Length` for any size (tiny_http chunks bodies of 32 KiB and more).
    .with_chunked_threshold(usize::MAX);
    // The exchange already ended in the core; a client gone by now changes nothing.
    let _ = request.respond(response);
}

/// Streams the body: the head through tiny_http, then each batch of frames as chunks,
/// flushed, until the end.
fn stream(
    shared: &Arc<Shared>,
    me: usize,
    x: ExchangeId,
    request: tiny_http::Request,
    head: &http::response::Parts,
    mut batch: Batch,
) {
    let mut gate = Gate {
        inner: request.into_writer(),
        open: true,
    };
    let response = tiny_http::Response::new(
        tiny_http::StatusCode(head.status.as_u16()),
        headers(head),
        io::empty(),
        None,
        None,
    );
    // The request's headers are not passed: tiny_http would honour a `TE` header there.
    // HTTP/1.1 and no body: the status line and the headers with
    // `Transfer-Encoding: chunked`, nothing else.
    if response
        .raw_print(&mut gate, tiny_http::HTTPVersion(1, 1), &[], true, None)
        .is_err()
    {
        gate.open = false;
        return shared.disconnect(x);
    }
    let mut chunks = chunked_transfer::Encoder::with_flush_after_write(&mut gate);
    loop {
        let written = batch
            .data
            .iter()
            .try_for_each(|data| chunks.write_all(data))
            // The encoder's flush does not reach the socket's writer; this does.
            .and_then(|()| chunks.get_mut().flush());
        if written.is_err() {
            break;
        }
        if batch.cut {
            // RESUME-14: a resume took the stream over. No terminating chunk, so the
            // stream cannot pass for complete; the core already forgot the exchange.
            chunks.get_mut().open = false;
            return;
        }
        if batch.end {
            // Dropping the encoder writes the terminating chunk.
            drop(chunks);
            let _ = gate.flush();
            return;
        }
        batch = match shared.next_batch(x, me, true) {
            Some(batch) => batch,
            None => break,
        };
    }
    // The client is gone (or the adapter stops): no terminating chunk, so the stream
    // cannot pass for complete; the core decides what the cut means.
    chunks.get_mut().open = false;
    drop(chunks);
    shared.disconnect(x);
}

/// The response writer, with a switch that makes it swallow everything once the response
/// is abandoned (so the encoder's terminating chunk is not written).
struct Gate<W> {
    inner: W,
    open: bool,
}

impl<W: Write> Write for Gate<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.open {
            self.inner.write(buf)
        } else {
            Ok(buf.len())
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.open {
            self.inner.flush()
        } else {
            Ok(())
        }
    }
}

/// The response head's headers for tiny_http, which writes the framing ones itself.
fn headers(head: &http::response::Parts) -> Vec<tiny_http::Header> {
    head.headers
        .iter()
        .filter(|(name, _)| {
            *name != http::header::CONTENT_LENGTH && *name != http::header::TRANSFER_ENCODING
        })
        .filter_map(|(name, value)| {
            tiny_http::Header::from_bytes(name.as_str().as_bytes(), value.as_bytes()).ok()
        })
        .collect()
}

/// The request head as the core takes it.
fn request_parts(request: &tiny_http::Request) -> Option<http::request::Parts> {
    let version = if *request.http_version() == (1, 0) {
        http::Version::HTTP_10
    } else {
        http::Version::HTTP_11
    };
    let mut builder = http::Request::builder()
        .method(request.method().as_str())
        .uri(request.url())
        .version(version);
    for header in request.headers() {
        builder = builder.header(header.field.as_str().as_str(), header.value.as_str());
    }
    builder.body(()).ok().map(|r| r.into_parts().0)
}

/// Drives the core's deadlines: sleeps until `poll_timeout`, or until an input moved it.
fn timers(shared: &Arc<Shared>) {
    let mut core = shared.core();
    while !core.stopped {
        // Read and recorded under the lock: an input that moves the deadline earlier
        // after this sees `timer_at` and notifies while this thread waits.
        core.timer_at = core.server.poll_timeout();
        let now = Instant::now();
        core = match core.timer_at {
            Some(at) if at <= now => {
                core.server.handle_timeout(now);
                shared.release(core);
                shared.core()
            }
            Some(at) => {
                shared
                    .timer
                    .wait_timeout(core, at - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0
            }
            None => shared
                .timer
                .wait(core)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
    }
}
