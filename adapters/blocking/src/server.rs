//! The server side: one [`mcpwire::server::Server`] driven by blocking threads over
//! `std::net`, with an HTTP/1.1 server of its own (heads parsed by `httparse`), no async
//! runtime, and a bounded number of threads whatever the peers do.
//!
//! The adapter moves bytes and time, and nothing else: request heads and body reads go
//! into the core, the core's transmits come out as the response head and body, its
//! deadlines drive one timer thread, and its events go to the application through a
//! sink called in place. Every status code, header, stream and session decision is the
//! core's; the adapter's own answers are about its capacity (503 when every worker is
//! busy or every connection is) and about HTTP it could not hand to the core, each with
//! a JSON-RPC error body and the connection closed: 431 for a head over
//! [`Limits::max_head`], 400 for a head or a body framing it cannot read, 501 for a
//! transfer coding other than `chunked`, 408 for a body late past
//! [`ServeOptions::with_body_timeout`].
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
//! let entropy = Box::new(mcpwire::OsEntropy);
//! let handle = serve(listener, Config::new(), entropy, Arc::new(tools), ServeOptions::new())?;
//! println!("serving MCP on http://{}/mcp", handle.local_addr());
//! assert!(handle.shutdown(Duration::from_secs(5)));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Threads
//!
//! Their number is set by the [`ServeOptions`]: the acceptor, the poller, the timer,
//! [`with_workers`](ServeOptions::with_workers) workers and
//! [`with_handlers`](ServeOptions::with_handlers) handler threads (the
//! [`app`](crate::app) layer's). No peer can make more.
//!
//! - **The acceptor** accepts connections and admits each through a
//!   [`mcpwire::conn::Connections`] table (the policy the tokio server runs too): at
//!   [`with_max_connections`](ServeOptions::with_max_connections), the oldest connection
//!   not busy (new, idle between requests, or still sending its head) is closed to make
//!   room; only when every connection is busy is the new one refused (a best-effort
//!   `503` with `Retry-After` and `Connection: close`). An accept error never stops it:
//!   out of file descriptors (`EMFILE`, `ENFILE`) it closes the oldest connection not
//!   busy to free one, logs, and pauses 10 ms (50 ms when it had none to close); any
//!   other error is logged, with the same pause.
//! - **The poller** (`mio`, private) holds every connection not being served: new ones,
//!   idle keep-alive ones and those still sending a head. It reads what is ready into
//!   the connection's head buffer (at most [`Limits::max_head`] bytes, set by
//!   [`with_max_head`](ServeOptions::with_max_head): beyond, `431` and the connection
//!   closed), starts the header deadline at the
//!   head's first byte, and hands a complete head to a free worker, or answers it `503`
//!   with `Retry-After` at once when every worker is busy. It closes what the table gives
//!   up: a head not complete within the header timeout (slowloris), a connection waiting
//!   longer than the idle timeout for a request. A slow or idle peer holds a few KiB and
//!   a file descriptor, never a thread. It also watches the socket of each stream being
//!   served (on Unix): when its client closes its side, the worker is woken, tells the
//!   core ([`Server::handle_disconnect`]) and is free at once, without waiting for a
//!   heartbeat to fail. The watch starts at the end of the request body, so a client
//!   that goes away while its answer (JSON or a stream) is still being made is noticed
//!   the same way.
//! - **Workers**, a fixed pool ([`ServeOptions::with_workers`]): one serves one request
//!   from its head to the end of its response, then gives a keep-alive connection back
//!   to the poller. A long-lived SSE stream (a session's GET stream, above all) holds
//!   its worker for its whole life, so size the pool for the streams you expect to be
//!   open at once plus the POSTs in flight (the default, 64, is meant for a few dozen
//!   clients with a GET stream each).
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
//! under the one lock, so no wake-up is lost. The connection table has a lock of its
//! own, never held with the core's; the log hook is called with neither held.
//!
//! Body bytes are pulled from the core as the connection takes them: a worker takes the
//! frames ready now (at most [`BATCH_BYTES`] at a time), writes them outside the lock,
//! and only then takes more. A slow reader's bytes therefore stay in the core, which
//! bounds them ([`Config::with_max_unsent`](mcpwire::server::Config::with_max_unsent)).
//!
//! Events are dispatched as the tokio adapter's are: queued in the core's order, and
//! whichever thread queued some and finds no dispatch running becomes the dispatcher and
//! runs the sink until the queue is empty, the locks released around each call. The sink
//! must not block: the [`app`](crate::app) layer answers `initialize` and `ping` there
//! and hands every other request to its own pool of handler threads.
//!
//! # Requests and responses
//!
//! - A request body is read with `Content-Length` or chunked framing (strictly: see
//!   "Framing" below) and fed to the core as it comes (after a `100 Continue` when the
//!   client asked for one). Each read waits at most the header timeout, and the whole
//!   body may take at most [`ServeOptions::with_body_timeout`] from the end of its head:
//!   past either, `408` and the connection closed. A broken chunked framing is answered
//!   `400` and the connection closed. When the core answers before the body's end (a
//!   `413` for a body over its limit, above all), the answer is written with
//!   `Connection: close` and the rest of the body is never read: the connection is
//!   closed (after a short bounded drain, so the answer is not lost to a reset).
//! - A response head that carries `Content-Length` (the core's JSON answers), or one
//!   followed at once by the end, is written with its length. Any other (an SSE stream)
//!   is written chunked, each batch of frames flushed as it is taken (to an HTTP/1.0
//!   client: unframed, ended by the close). When a write fails, or a batch of
//!   [`BATCH_BYTES`] is not taken within [`ServeOptions::with_write_timeout`] (a
//!   deadline the adapter keeps, not the socket's timeout, which every partial write
//!   would renew), the client is gone: the core is told
//!   ([`Server::handle_disconnect`]), and the chunked terminator is *not* written, so a
//!   cut stream never looks like a complete one. [`Transmit::Abort`] (RESUME-14: a
//!   resume took the stream over) shuts the connection down the same way.
//! - After a complete response the connection is kept for the next request (HTTP/1.1
//!   unless `Connection: close`; HTTP/1.0 with `Connection: keep-alive`, unless the
//!   response was a stream, ended by the close) and goes back to the poller; otherwise
//!   it is closed.
//! - Framing (RFC 9112 §6): `Transfer-Encoding` must be exactly one `chunked`, else
//!   `501`; `Content-Length` must be ASCII digits, repeated values identical, else
//!   `400`; a chunk size must be hex digits (an extension after `;` is ignored), else
//!   `400`. With both headers, `chunked` frames the body, the `Content-Length` is not
//!   passed on to the core, and the connection closes after the request, as after any
//!   HTTP/1.0 request with `Transfer-Encoding`. A second `Host` header is `400`.
//!
//! # Limits
//!
//! - A client whose connection dies silently (no FIN, no RST: a NAT or a phone changing
//!   networks) under a quiet stream is noticed only when a write to it fails, at a
//!   heartbeat ([`Config::with_heartbeat`](mcpwire::server::Config::with_heartbeat), 15 s
//!   by default) or at the write timeout; until then it holds its worker. (Off Unix, a
//!   clean close is noticed that way too.)
//! - A client that stops reading, or reads less than [`BATCH_BYTES`] per write timeout,
//!   blocks its worker in `write` until the deadline passes; the core bounds the bytes
//!   queued for it meanwhile. A client sending its body slowly holds its worker at
//!   most the body timeout.
//! - A client that shuts down its sending side right after its request, to read the
//!   answer (rare in HTTP), is taken for gone.
//! - Requests on one connection are served one after the other (pipelined requests
//!   wait for the previous response).

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcpwire::Entropy;
use mcpwire::conn::{ConnId, Connections, Limits, Opened, Stats};
use mcpwire::server::{Config, Event, ExchangeId, PeerAddr, Server, Transmit};

/// At most this many body bytes are taken from the core for one write and flush.
pub const BATCH_BYTES: usize = 64 << 10;

/// A log hook: called with one line for each thing worth a line (an accept error and
/// what was done about it; connections refused, shed or timed out, counted, at powers of
/// two). It is called with no lock held, on the acceptor's or the poller's thread: it
/// must not block for long.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// How the adapter runs: threads, sockets and connections. The protocol's policies are
/// the core's [`Config`].
#[derive(Clone)]
#[must_use]
pub struct ServeOptions {
    workers: usize,
    handlers: usize,
    queue: usize,
    retry_after: Duration,
    nodelay: bool,
    write_timeout: Option<Duration>,
    body_timeout: Option<Duration>,
    read_size: usize,
    grace: Duration,
    limits: Limits,
    log: Option<Log>,
    app: mcpwire::app::Settings,
}

impl ServeOptions {
    /// The defaults: 64 workers, 8 handler threads with 1,024 queued calls, `Retry-After:
    /// 1` on a busy 503, `TCP_NODELAY` on, a 30 s write timeout, a 30 s body timeout,
    /// 16 KiB body reads, a 5 s grace when a [`Handle`] is dropped, [`Limits::new`]
    /// (1,024 connections, 10 s for a head once begun, 60 s idle, heads of at most
    /// 16 KiB), no log, and the application layer's tables bounded by
    /// [`mcpwire::app::Limits::new`].
    pub fn new() -> Self {
        Self {
            workers: 64,
            handlers: 8,
            queue: 1024,
            retry_after: Duration::from_secs(1),
            nodelay: true,
            write_timeout: Some(Duration::from_secs(30)),
            body_timeout: Some(Duration::from_secs(30)),
            read_size: 16 << 10,
            grace: Duration::from_secs(5),
            limits: Limits::new(),
            log: None,
            app: mcpwire::app::Settings::new(),
        }
    }

    /// The number of worker threads (1 to 65,536): the most requests served at once, open
    /// SSE streams included (see the [module docs](self)).
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers.clamp(1, 1 << WORKER_BITS);
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

    /// The application layer's settings ([`app`](crate::app)): the bounds of its
    /// tables (calls in flight, early cancels, requests to clients, listens) and the
    /// key that seals `requestState` (drawn from the server's entropy when not given).
    pub fn with_app(mut self, settings: mcpwire::app::Settings) -> Self {
        self.app = settings;
        self
    }

    /// The `Retry-After` of the 503 a request gets when every worker is busy (whole
    /// seconds, at least 1).
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = after;
        self
    }

    /// Whether accepted sockets have `TCP_NODELAY`. Without it a small response can wait
    /// for the client's delayed ACK.
    pub fn with_nodelay(mut self, nodelay: bool) -> Self {
        self.nodelay = nodelay;
        self
    }

    /// How long a client may take to read one batch of a response: a deadline, kept by
    /// the adapter, for each [`BATCH_BYTES`] written (not a timeout per `write`, which
    /// a client reading a little at a time would renew for ever); so a client must read
    /// at least [`BATCH_BYTES`] per timeout (`None` or zero: no deadline). A client
    /// that reads slower, or stops reading, frees its worker when the deadline passes:
    /// its connection is closed and the core told, as for a client that went away.
    pub fn with_write_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.write_timeout = timeout.filter(|t| !t.is_zero());
        self
    }

    /// How long a request body may take, from the end of its head to its last byte
    /// (`None` or zero: no deadline for the whole body; each read still waits at most
    /// the header timeout). A body not complete by then is answered `408` with a
    /// JSON-RPC error, and its connection closed: a client sending a byte now and then
    /// cannot hold a worker longer than this.
    pub fn with_body_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.body_timeout = timeout.filter(|t| !t.is_zero());
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

    /// The connection bound, deadlines and largest head, all at once (see the four
    /// below).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The most connections open at once (at least 1; [`Limits::with_max_connections`]):
    /// at the bound the oldest connection not busy is closed to make room, and a new one
    /// is refused only when every connection is busy. Keep it below the process's file
    /// descriptor limit.
    pub fn with_max_connections(mut self, connections: usize) -> Self {
        self.limits = self.limits.with_max_connections(connections);
        self
    }

    /// How long a request head may take from its first byte to its end
    /// ([`Limits::with_header_timeout`]); also the longest one read of a request body
    /// may wait (the whole body has [`with_body_timeout`](Self::with_body_timeout)).
    pub fn with_header_timeout(mut self, timeout: Duration) -> Self {
        self.limits = self.limits.with_header_timeout(timeout);
        self
    }

    /// How long a connection may wait for a request, new or kept alive
    /// ([`Limits::with_idle_timeout`]).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.limits = self.limits.with_idle_timeout(timeout);
        self
    }

    /// The largest request head, in bytes (at least 256); a longer one is answered 431
    /// and its connection closed. Sets [`Limits::with_max_head`], which is what the
    /// adapter reads (a smaller value there is taken as 256).
    pub fn with_max_head(mut self, bytes: usize) -> Self {
        self.limits = self.limits.with_max_head(bytes.max(256));
        self
    }

    /// Where log lines go (see [`Log`]).
    pub fn with_log(mut self, log: Log) -> Self {
        self.log = Some(log);
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

    /// The application layer's settings.
    pub fn app(&self) -> &mcpwire::app::Settings {
        &self.app
    }

    /// The connection bound and deadlines.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The most threads the server runs: the acceptor, the poller, the timer, the
    /// workers and the handler threads ([`serve`]'s; [`start`] has none).
    pub fn max_threads(&self) -> usize {
        3 + self.workers + self.handlers
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
            .field("workers", &self.workers)
            .field("handlers", &self.handlers)
            .field("queue", &self.queue)
            .field("retry_after", &self.retry_after)
            .field("nodelay", &self.nodelay)
            .field("write_timeout", &self.write_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("read_size", &self.read_size)
            .field("grace", &self.grace)
            .field("limits", &self.limits)
            .field("log", &self.log.is_some())
            .field("app", &self.app)
            .finish()
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
    /// Each worker's watch on the client of the stream it serves (see [`Shared::watch`]).
    watches: Box<[Watch]>,
}

/// A worker's watch on its stream's client.
#[derive(Clone, Copy, Default)]
struct Watch {
    /// Counts the watches, so that an event for an earlier one is told apart.
    generation: usize,
    /// The poller saw the client close its side.
    gone: bool,
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

/// A connection with a complete request head, handed to a worker.
struct Job {
    stream: TcpStream,
    id: ConnId,
    /// The bytes read so far: the head (`head_len` bytes), then whatever followed it.
    buf: Vec<u8>,
    head_len: usize,
    /// When the head was complete: the body's deadline counts from here.
    head_at: Instant,
}

/// Requests handed to the workers, and how many workers are free.
struct Pool {
    queue: VecDeque<Job>,
    /// Workers neither serving a request nor reserved for a queued one: every worker
    /// at the start, one less per hand-off, one more when a worker finishes a request.
    /// So a request is queued only when a worker is bound to take it.
    idle: usize,
    stopping: bool,
}

/// A connection for the poller to hold.
struct Parked {
    stream: TcpStream,
    id: ConnId,
    /// Bytes already read (the start of the next request).
    buf: Vec<u8>,
    /// Answered with `Connection: close` and shut down for writing: what comes is read
    /// and dropped (at most [`DRAIN_BYTES`]) until the peer's end, then it is closed.
    drain: bool,
}

/// What the poller is told to do, in order.
enum Cmd {
    /// Hold this connection.
    Park(Parked),
    /// Close this connection (shed, or expired), if it holds it.
    Kill(ConnId),
}

/// The connection table and the poller's inbox, under one lock (so a connection given
/// back to the poller is always parked before it can be shed).
struct Net {
    conns: Connections,
    inbox: Vec<Cmd>,
    /// The counts the last log line told.
    reported: Stats,
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
    net: Mutex<Net>,
    /// Wakes the poller: its inbox has something, or the adapter stops.
    poller: mio::Waker,
    /// The poller's registry, for the workers' watches.
    registry: mio::Registry,
    log: Option<Log>,
}

/// The unread bytes a connection being closed may still send before it is closed
/// anyway; reading them first lets the peer see the last answer rather than a reset.
const DRAIN_BYTES: usize = 256 << 10;

impl Shared {
    fn net(&self) -> MutexGuard<'_, Net> {
        lock(&self.net)
    }

    fn log(&self, line: &str) {
        if let Some(log) = &self.log {
            log(line);
        }
    }

    /// Tells the log about connections given up, when their counts call for a line.
    fn report(&self) {
        let line = {
            let mut net = self.net();
            let now = net.conns.stats();
            let line = now.log_line(&net.reported);
            net.reported = now;
            line
        };
        if let Some(line) = line {
            self.log(&line);
        }
    }

    /// Hands `cmd` to the poller.
    fn tell_poller(&self, net: MutexGuard<'_, Net>, cmds: impl IntoIterator<Item = Cmd>) {
        let mut net = net;
        net.inbox.extend(cmds);
        drop(net);
        let _ = self.poller.wake();
    }

    /// A served connection goes back to the poller for its next request (or is closed,
    /// when the table shed it meanwhile).
    fn park(&self, stream: TcpStream, id: ConnId, buf: Vec<u8>) {
        let now = Instant::now();
        let mut net = self.net();
        if !net.conns.contains(id) {
            return;
        }
        net.conns.idle(id, now);
        let parked = Parked {
            stream,
            id,
            buf,
            drain: false,
        };
        self.tell_poller(net, [Cmd::Park(parked)]);
    }

    /// A served connection that must end: answered, shut down for writing, then
    /// drained a little by the poller and closed.
    fn linger(&self, stream: TcpStream, id: ConnId) {
        let _ = stream.shutdown(Shutdown::Write);
        let now = Instant::now();
        let mut net = self.net();
        // No longer busy: it can be shed, and it expires at the idle timeout. Shed
        // already: it goes now.
        if !net.conns.contains(id) {
            return;
        }
        net.conns.idle(id, now);
        let parked = Parked {
            stream,
            id,
            buf: Vec::new(),
            drain: true,
        };
        self.tell_poller(net, [Cmd::Park(parked)]);
    }

    /// Has the poller watch the client of the stream worker `me` serves on `stream`: when
    /// it closes its side, the worker is woken and ends the stream (the core told at
    /// once, not at the next heartbeat). Whether the watch is on.
    fn watch(&self, me: usize, stream: &TcpStream) -> bool {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let generation = {
                let mut core = self.core();
                let watch = &mut core.watches[me];
                watch.generation = watch.generation.wrapping_add(1);
                watch.gone = false;
                watch.generation
            };
            let mask = (WATCHED - 1) >> WORKER_BITS;
            let token = WATCHED | ((generation & mask) << WORKER_BITS) | me;
            let fd = stream.as_raw_fd();
            self.registry
                .register(
                    &mut mio::unix::SourceFd(&fd),
                    mio::Token(token),
                    mio::Interest::READABLE,
                )
                .is_ok()
        }
        #[cfg(not(unix))]
        {
            let _ = (me, stream);
            false
        }
    }

    /// Ends worker `me`'s watch (before its stream is closed or parked).
    fn unwatch(&self, me: usize, stream: &TcpStream) {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let fd = stream.as_raw_fd();
            let _ = self.registry.deregister(&mut mio::unix::SourceFd(&fd));
        }
        let _ = stream;
        let mut core = self.core();
        let watch = &mut core.watches[me];
        watch.generation = watch.generation.wrapping_add(1);
        watch.gone = false;
    }

    /// The poller saw the client of watch `token` close its side: its worker is woken,
    /// unless the watch is over.
    fn client_gone(&self, token: usize) {
        let me = token & ((1 << WORKER_BITS) - 1);
        let mask = (WATCHED - 1) >> WORKER_BITS;
        let generation = (token & !WATCHED) >> WORKER_BITS;
        let mut core = self.core();
        let Some(watch) = core.watches.get_mut(me) else {
            return;
        };
        if watch.generation & mask == generation {
            watch.gone = true;
            self.wake[me].notify_one();
        }
    }

    /// A served connection is closed now.
    fn close(&self, stream: TcpStream, id: ConnId) {
        drop(stream);
        self.net().conns.close(id);
    }
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
            if core.stopped || core.watches[me].gone {
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
    addr: SocketAddr,
    /// Wakes the acceptor (at stop).
    accept_waker: Arc<mio::Waker>,
    acceptor: Option<JoinHandle<()>>,
    poller: Option<JoinHandle<()>>,
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

    /// The connections open now (in the connection table: being served, idle, or
    /// sending a head).
    pub fn open_connections(&self) -> usize {
        self.driver.shared.net().conns.len()
    }

    /// The counts of connections accepted, refused, shed and timed out so far.
    pub fn connection_stats(&self) -> Stats {
        self.driver.shared.net().conns.stats()
    }

    /// Shuts down gracefully: the core's [`Server::shutdown`] ends every session and
    /// stream cleanly and answers later requests 503; then this waits up to `grace` for
    /// the open exchanges to be written out, and stops every thread of the adapter
    /// (connections waiting for a request are closed). Returns whether every exchange
    /// ended within the grace. Workers still inside an exchange then (a client that
    /// stopped reading) are told to stop and not waited for.
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
        shared.net().stopping = true;
        let _ = shared.poller.wake();
        let _ = self.accept_waker.wake();
        for thread in [self.acceptor.take(), self.poller.take(), self.timer.take()]
            .into_iter()
            .flatten()
        {
            let _ = thread.join();
        }
        let workers = std::mem::take(&mut self.workers);
        if clean {
            for worker in workers {
                let _ = worker.join();
            }
        }
        // Connections handed back to the poller after it stopped are closed here.
        shared.net().inbox.clear();
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
/// Making the listener non-blocking, setting up the poller, or spawning a thread
/// failed.
pub fn serve(
    listener: TcpListener,
    config: Config,
    entropy: Box<dyn Entropy + Send>,
    handler: Arc<dyn crate::app::Handler>,
    options: ServeOptions,
) -> io::Result<Handle> {
    let mut entropy = entropy;
    let mirrors = handler.tool_mirrors();
    let config = if mirrors.is_empty() {
        config
    } else {
        config.with_tool_mirrors(mirrors)
    };
    let (sink, calls) = crate::app::mount_app(Arc::clone(&handler), &options, &mut *entropy)?;
    let handle = start(listener, config, entropy, options, sink)?;
    crate::app::started(&*handler, calls, handle.driver());
    Ok(handle)
}

const WAKER: mio::Token = mio::Token(usize::MAX);
/// The bit of a token that marks a worker's watch: the rest is the worker and the
/// watch's generation.
const WATCHED: usize = 1 << (usize::BITS - 1);
/// The bits of a watch's token that name the worker.
const WORKER_BITS: u32 = 16;
const LISTENER: mio::Token = mio::Token(0);

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
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let mut listener = mio::net::TcpListener::from_std(listener);
    let accept_poll = mio::Poll::new()?;
    accept_poll
        .registry()
        .register(&mut listener, LISTENER, mio::Interest::READABLE)?;
    let accept_waker = Arc::new(mio::Waker::new(accept_poll.registry(), WAKER)?);
    let poll = mio::Poll::new()?;
    let poller = mio::Waker::new(poll.registry(), WAKER)?;
    let registry = poll.registry().try_clone()?;
    let shared = Arc::new(Shared {
        core: Mutex::new(Core {
            server: Server::new(config, entropy),
            sleeping: HashMap::new(),
            timer_at: None,
            stopped: false,
            watches: vec![Watch::default(); options.workers].into(),
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
        net: Mutex::new(Net {
            conns: Connections::new(options.limits),
            inbox: Vec::new(),
            reported: Stats::default(),
            stopping: false,
        }),
        poller,
        registry,
        log: options.log.clone(),
    });
    let mut handle = Handle {
        driver: Driver {
            shared: Arc::clone(&shared),
        },
        addr,
        accept_waker,
        acceptor: None,
        poller: None,
        timer: None,
        workers: Vec::with_capacity(options.workers),
        grace: options.grace,
        stopped: false,
    };
    let retry_after = options.retry_after.as_secs().max(1);
    let io = Io {
        nodelay: options.nodelay,
        write_timeout: options.write_timeout,
        body_timeout: options.body_timeout,
        read_timeout: Some(options.limits.header_timeout()).filter(|t| !t.is_zero()),
        read_size: options.read_size,
        max_head: options.limits.max_head().max(256),
        retry_after,
    };
    for me in 0..options.workers {
        let shared = Arc::clone(&shared);
        let worker = thread::Builder::new()
            .name(format!("mcpwire-worker-{me}"))
            .stack_size(512 << 10)
            .spawn(move || work(&shared, me, io))?;
        handle.workers.push(worker);
    }
    let timer_shared = Arc::clone(&shared);
    handle.timer = Some(
        thread::Builder::new()
            .name("mcpwire-timer".into())
            .spawn(move || timers(&timer_shared))?,
    );
    let poller_shared = Arc::clone(&shared);
    handle.poller = Some(
        thread::Builder::new()
            .name("mcpwire-poller".into())
            .spawn(move || held(&poller_shared, poll, io))?,
    );
    handle.acceptor = Some(
        thread::Builder::new()
            .name("mcpwire-acceptor".into())
            .spawn(move || accept(&shared, accept_poll, &listener, retry_after))?,
    );
    Ok(handle)
}

/// The socket settings and bounds the poller and the workers use.
#[derive(Clone, Copy)]
struct Io {
    nodelay: bool,
    write_timeout: Option<Duration>,
    body_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    read_size: usize,
    max_head: usize,
    retry_after: u64,
}

/// Accepts every connection, admits it through the table and parks it with the poller;
/// never stops on an error (see the [module docs](self)).
fn accept(
    shared: &Arc<Shared>,
    mut poll: mio::Poll,
    listener: &mio::net::TcpListener,
    retry_after: u64,
) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset, Interrupted};
    let mut events = mio::Events::with_capacity(8);
    loop {
        loop {
            if shared.net().stopping {
                return;
            }
            match listener.accept() {
                Ok((stream, _)) => admit(shared, TcpStream::from(stream), retry_after),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e)
                    if matches!(
                        e.kind(),
                        Interrupted | ConnectionAborted | ConnectionRefused | ConnectionReset
                    ) => {}
                Err(e) => {
                    // Out of file descriptors (EMFILE, ENFILE) or another resource: free
                    // one by closing the oldest connection not busy, and try again
                    // shortly.
                    let shed = {
                        let mut net = shared.net();
                        let shed = net.conns.shed();
                        if let Some(id) = shed {
                            net.inbox.push(Cmd::Kill(id));
                        }
                        shed
                    };
                    let _ = shared.poller.wake();
                    let pause = if shed.is_some() { 10 } else { 50 };
                    shared.log(&format!(
                        "accept: {e}; {}, accepting again in {pause} ms",
                        match shed {
                            Some(id) => format!("closed idle connection {id}"),
                            None => "no idle connection to close".to_owned(),
                        }
                    ));
                    thread::sleep(Duration::from_millis(pause));
                }
            }
        }
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() != Interrupted {
                shared.log(&format!("accept: polling: {e}; again in 50 ms"));
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A new connection: parked with the poller (closing the one shed for it), or refused.
fn admit(shared: &Shared, stream: TcpStream, retry_after: u64) {
    let now = Instant::now();
    let mut net = shared.net();
    match net.conns.open(now) {
        Opened::Accepted(id) => shared.tell_poller(net, [Cmd::Park(fresh(stream, id))]),
        Opened::Shed { id, shed } => {
            shared.tell_poller(net, [Cmd::Kill(shed), Cmd::Park(fresh(stream, id))]);
        }
        Opened::Refused => {
            drop(net);
            // Best effort, without blocking: the socket is still non-blocking.
            let _ = (&stream).write(&busy(retry_after));
            let _ = stream.shutdown(Shutdown::Write);
        }
    }
    shared.report();
}

fn fresh(stream: TcpStream, id: ConnId) -> Parked {
    Parked {
        stream,
        id,
        buf: Vec::new(),
        drain: false,
    }
}

/// The 503 for a request no worker or no connection slot is free for.
fn busy(retry_after: u64) -> Vec<u8> {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: {retry_after}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
    )
    .into_bytes()
}

/// An answer of the adapter's own, with a JSON-RPC error body, and the connection
/// closed after it.
fn refusal(status: http::StatusCode, message: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": message},
    })
    .to_string();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

/// A connection the poller holds.
struct Held {
    stream: mio::net::TcpStream,
    id: ConnId,
    buf: Vec<u8>,
    /// Where the search for the head's end goes on.
    scanned: usize,
    /// Its first byte was reported to the table.
    started: bool,
    /// Closing: the bytes it may still send, read and dropped.
    drain: Option<usize>,
}

/// What a connection's readiness came to.
enum Ready {
    /// Nothing more to read now.
    Wait,
    /// The peer closed it or it failed: close it.
    Close,
    /// Its head is complete: its first `.0` bytes.
    Head(usize),
    /// Answer this and close.
    Refuse(Vec<u8>),
}

/// The most header lines a request head may have.
const MAX_HEADERS: usize = 128;

/// The poller: holds every connection not being served (see the [module docs](self)).
fn held(shared: &Arc<Shared>, mut poll: mio::Poll, io: Io) {
    let mut conns: HashMap<usize, Held> = HashMap::new();
    let mut tokens: HashMap<ConnId, usize> = HashMap::new();
    let mut next_token = 1;
    let mut events = mio::Events::with_capacity(1024);
    let mut ready = Vec::new();
    loop {
        let timeout = shared
            .net()
            .conns
            .poll_timeout()
            .map(|at| at.saturating_duration_since(Instant::now()));
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                shared.log(&format!("poll: {e}; again in 50 ms"));
                thread::sleep(Duration::from_millis(50));
            }
        }
        ready.clear();
        for event in &events {
            match event.token() {
                WAKER => {}
                mio::Token(t) if t & WATCHED != 0 => {
                    if event.is_read_closed() || event.is_error() {
                        shared.client_gone(t);
                    }
                }
                mio::Token(t) => ready.push(t),
            }
        }
        let inbox = {
            let mut net = shared.net();
            if net.stopping {
                return;
            }
            let now = Instant::now();
            while let Some((id, _)) = net.conns.poll_expired(now) {
                net.inbox.push(Cmd::Kill(id));
            }
            std::mem::take(&mut net.inbox)
        };
        for cmd in inbox {
            match cmd {
                Cmd::Park(parked) => {
                    let token = next_token;
                    // Never 0, never with the `WATCHED` bit.
                    next_token = (next_token + 1) % (WATCHED - 1) + 1;
                    let _ = parked.stream.set_nonblocking(true);
                    let mut stream = mio::net::TcpStream::from_std(parked.stream);
                    let registered = poll.registry().register(
                        &mut stream,
                        mio::Token(token),
                        mio::Interest::READABLE,
                    );
                    if registered.is_err() {
                        shared.net().conns.close(parked.id);
                        continue;
                    }
                    if !parked.buf.is_empty() {
                        // The start of the next request came with the last one.
                        ready.push(token);
                    }
                    tokens.insert(parked.id, token);
                    conns.insert(
                        token,
                        Held {
                            stream,
                            id: parked.id,
                            scanned: 0,
                            buf: parked.buf,
                            started: false,
                            drain: parked.drain.then_some(DRAIN_BYTES),
                        },
                    );
                }
                Cmd::Kill(id) => {
                    if let Some(mut conn) = tokens.remove(&id).and_then(|t| conns.remove(&t)) {
                        let _ = poll.registry().deregister(&mut conn.stream);
                    }
                }
            }
        }
        shared.report();
        for &token in &ready {
            let Some(conn) = conns.get_mut(&token) else {
                continue;
            };
            let outcome = read_ready(shared, conn, io.max_head);
            let mut conn = match outcome {
                Ready::Wait => continue,
                _ => conns.remove(&token).expect("just seen"),
            };
            tokens.remove(&conn.id);
            let _ = poll.registry().deregister(&mut conn.stream);
            match outcome {
                Ready::Wait => {}
                Ready::Close => {
                    shared.net().conns.close(conn.id);
                }
                Ready::Refuse(answer) => {
                    let _ = conn.stream.write(&answer);
                    let stream = TcpStream::from(conn.stream);
                    shared.linger(stream, conn.id);
                }
                Ready::Head(head_len) => hand_off(shared, conn, head_len, io),
            }
        }
    }
}

/// Reads what `conn` has for us, until it would block, its head is complete, or it
/// must be closed.
fn read_ready(shared: &Shared, conn: &mut Held, max_head: usize) -> Ready {
    loop {
        if let Some(left) = &mut conn.drain {
            let mut scratch = [0; 4096];
            match conn.stream.read(&mut scratch) {
                Ok(0) => return Ready::Close,
                Ok(n) if n >= *left => return Ready::Close,
                Ok(n) => *left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ready::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Ready::Close,
            }
            continue;
        }
        if !conn.buf.is_empty() {
            if !conn.started {
                conn.started = true;
                shared.net().conns.head_started(conn.id, Instant::now());
            }
            if let Some(outcome) = parse_progress(conn, max_head) {
                return outcome;
            }
        }
        let room = (max_head + 1).saturating_sub(conn.buf.len());
        if room == 0 {
            return Ready::Refuse(refusal(
                http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "the request head is too large",
            ));
        }
        // Read into the stack, so that a head arriving a byte at a time holds only what
        // came.
        let mut scratch = [0; 4096];
        let room = room.min(scratch.len());
        match conn.stream.read(&mut scratch[..room]) {
            Ok(0) => return Ready::Close,
            Ok(n) => conn.buf.extend_from_slice(&scratch[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ready::Wait,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Ready::Close,
        }
    }
}

/// Whether `conn`'s buffer holds a whole head yet (`None`: not yet, read on).
fn parse_progress(conn: &mut Held, max_head: usize) -> Option<Ready> {
    // A head ends with an empty line: LF (CR) LF. Searched once per byte.
    let buf = &conn.buf;
    let from = conn.scanned;
    let end = (from..buf.len()).find(|&i| {
        buf[i] == b'\n'
            && (buf.get(i + 1) == Some(&b'\n')
                || (buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n')))
    });
    let Some(_) = end else {
        conn.scanned = buf.len().saturating_sub(2);
        return (buf.len() > max_head).then(|| {
            Ready::Refuse(refusal(
                http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "the request head is too large",
            ))
        });
    };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    Some(match request.parse(buf) {
        Ok(httparse::Status::Complete(len)) if len <= max_head => Ready::Head(len),
        Ok(httparse::Status::Complete(_)) | Err(httparse::Error::TooManyHeaders) => {
            Ready::Refuse(refusal(
                http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "the request head is too large",
            ))
        }
        // An empty line before any request line: skipped, as HTTP/1.1 allows.
        Ok(httparse::Status::Partial) => {
            conn.scanned = buf.len().saturating_sub(2);
            return None;
        }
        Err(e) => Ready::Refuse(refusal(
            http::StatusCode::BAD_REQUEST,
            &format!("malformed request head: {e}"),
        )),
    })
}

/// A complete head goes to a free worker, or is answered 503 when there is none.
fn hand_off(shared: &Shared, conn: Held, head_len: usize, io: Io) {
    let head_at = Instant::now();
    let Held {
        stream, id, buf, ..
    } = conn;
    let stream = TcpStream::from(stream);
    {
        let mut net = shared.net();
        if net
            .inbox
            .iter()
            .any(|cmd| matches!(cmd, Cmd::Kill(k) if *k == id))
        {
            // Shed in the meantime: it goes.
            return;
        }
        net.conns.busy(id);
    }
    let mut pool = lock(&shared.pool);
    if pool.stopping || pool.idle == 0 {
        drop(pool);
        let _ = (&stream).write(&busy(io.retry_after));
        return shared.linger(stream, id);
    }
    pool.idle -= 1;
    pool.queue.push_back(Job {
        stream,
        id,
        buf,
        head_len,
        head_at,
    });
    drop(pool);
    shared.work.notify_one();
}

/// One worker: serves the requests handed to it, one at a time, until the stop.
fn work(shared: &Arc<Shared>, me: usize, io: Io) {
    loop {
        let job = {
            let mut pool = lock(&shared.pool);
            while pool.queue.is_empty() && !pool.stopping {
                pool = shared
                    .work
                    .wait(pool)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            match pool.queue.pop_front() {
                Some(job) => job,
                None => return,
            }
        };
        // A panic here is a bug; the worker survives it (the connection is closed) and
        // stays in the pool.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            exchange(shared, me, job, io);
        }));
        lock(&shared.pool).idle += 1;
    }
}

/// How a request body is framed.
#[derive(Clone, Copy)]
enum Framing {
    Length(u64),
    Chunked,
}

/// A request head as the core takes it, and what the adapter needs of it.
struct Head {
    parts: http::request::Parts,
    framing: Framing,
    keep_alive: bool,
    http10: bool,
    no_body: bool,
}

/// A head the adapter answers itself: the status, and the message of the JSON-RPC
/// error in the body (see [`refusal`]).
type Refused = (http::StatusCode, String);

/// The request head, built with `http` (every header value's bytes as they came, so
/// the core judges them), and its body's framing, as RFC 9112 §6 has it:
///
/// - `Transfer-Encoding` must be exactly one `chunked` (any case, spaces around it);
///   anything else is `501`.
/// - `Content-Length` must be ASCII digits (no sign, no spaces inside, no overflow);
///   repeated values (in one header or several) must be identical; anything else,
///   an empty value above all, is `400`. The core sees the one value.
/// - With both, `chunked` frames the body, the `Content-Length` is not passed on to
///   the core, and the connection ends after the request; so it does after any
///   HTTP/1.0 request with `Transfer-Encoding` (§6.1).
/// - A second `Host` header is `400` (§3.2).
fn parse_head(buf: &[u8], peer: Option<SocketAddr>) -> Result<Head, Refused> {
    let bad = |message: String| (http::StatusCode::BAD_REQUEST, message);
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(bad("an incomplete request head".into())),
        Err(e) => return Err(bad(format!("malformed request head: {e}"))),
    }
    let http10 = request.version == Some(0);
    let (mut parts, ()) = http::Request::builder()
        .method(request.method.unwrap_or_default())
        .uri(request.path.unwrap_or_default())
        .version(if http10 {
            http::Version::HTTP_10
        } else {
            http::Version::HTTP_11
        })
        .body(())
        .map_err(|e| bad(format!("malformed request line: {e}")))?
        .into_parts();
    for header in request.headers.iter() {
        let name = http::HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|e| bad(format!("malformed header name: {e}")))?;
        let value = http::HeaderValue::from_bytes(header.value)
            .map_err(|e| bad(format!("malformed value of {name}: {e}")))?;
        parts.headers.append(name, value);
    }
    if let Some(peer) = peer {
        parts.extensions.insert(PeerAddr(peer.ip()));
    }
    if parts
        .headers
        .get_all(http::header::HOST)
        .iter()
        .nth(1)
        .is_some()
    {
        return Err(bad("more than one host header".into()));
    }
    let connection = parts
        .headers
        .get_all(http::header::CONNECTION)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(|t| String::from_utf8_lossy(trim_ows(t)).to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>();
    let mut keep_alive = if http10 {
        connection.iter().any(|t| t == "keep-alive")
    } else {
        !connection.iter().any(|t| t == "close")
    };
    let framing = if parts.headers.contains_key(http::header::TRANSFER_ENCODING) {
        let codings = parts
            .headers
            .get_all(http::header::TRANSFER_ENCODING)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(trim_ows)
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>();
        if !matches!(codings[..], [only] if only.eq_ignore_ascii_case(b"chunked")) {
            let listed = codings
                .iter()
                .map(|c| String::from_utf8_lossy(c))
                .collect::<Vec<_>>()
                .join(", ");
            return Err((
                http::StatusCode::NOT_IMPLEMENTED,
                format!("unsupported transfer-encoding: {listed:?}"),
            ));
        }
        // Both framings: the coding wins, and the length is not the core's to see.
        let both = parts.headers.remove(http::header::CONTENT_LENGTH).is_some();
        if both || http10 {
            keep_alive = false;
        }
        Framing::Chunked
    } else if parts.headers.contains_key(http::header::CONTENT_LENGTH) {
        let mut length = None;
        for value in parts.headers.get_all(http::header::CONTENT_LENGTH) {
            for item in value.as_bytes().split(|&b| b == b',') {
                let n = number(trim_ows(item), 10).ok_or_else(|| {
                    bad(format!(
                        "malformed content-length: {:?}",
                        String::from_utf8_lossy(value.as_bytes())
                    ))
                })?;
                if length.is_some_and(|l| l != n) {
                    return Err(bad("conflicting content-length values".into()));
                }
                length = Some(n);
            }
        }
        let length = length.unwrap_or_default();
        parts.headers.insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(length),
        );
        Framing::Length(length)
    } else {
        Framing::Length(0)
    };
    let no_body = parts.method == http::Method::HEAD;
    Ok(Head {
        parts,
        framing,
        keep_alive,
        http10,
        no_body,
    })
}

/// `bytes` without the spaces and tabs around them (HTTP's optional whitespace).
fn trim_ows(bytes: &[u8]) -> &[u8] {
    let ows = |b: &u8| matches!(b, b' ' | b'\t');
    let start = bytes.iter().position(|b| !ows(b)).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !ows(b)).map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// The number `digits` spell in `radix` (10 or 16): at least one digit, nothing else
/// (no sign, no space), and no overflow; `None` otherwise.
fn number(digits: &[u8], radix: u32) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = char::from(b).to_digit(radix)?;
        n.checked_mul(u64::from(radix))?
            .checked_add(u64::from(digit))
    })
}

/// A connection being served: its socket and the bytes read but not used yet.
struct Wire {
    stream: TcpStream,
    buf: Vec<u8>,
    pos: usize,
    read_size: usize,
    /// The longest one read may wait (the header timeout).
    read_timeout: Option<Duration>,
    /// When the body must have come whole (the body timeout after the head's end).
    deadline: Option<Instant>,
}

impl Wire {
    /// Reads more, waiting at most the read timeout and never past the deadline; an
    /// error at the connection's end, and [`io::ErrorKind::TimedOut`] when the wait is
    /// over.
    fn fill(&mut self) -> io::Result<()> {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let timeout = match self.deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                Some(self.read_timeout.map_or(left, |t| t.min(left)))
            }
            None => self.read_timeout,
        };
        self.stream.set_read_timeout(timeout)?;
        let start = self.buf.len();
        self.buf.resize(start + self.read_size, 0);
        loop {
            let read = self.stream.read(&mut self.buf[start..]);
            self.buf.truncate(start + *read.as_ref().unwrap_or(&0));
            return match read {
                Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    self.buf.resize(start + self.read_size, 0);
                    continue;
                }
                // A read timeout (`EAGAIN` on Unix).
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    Err(io::ErrorKind::TimedOut.into())
                }
                Err(e) => Err(e),
            };
        }
    }
    /// At most `max` bytes (at least one).
    fn take(&mut self, max: usize) -> io::Result<Bytes> {
        if self.pos == self.buf.len() {
            self.fill()?;
        }
        let n = (self.buf.len() - self.pos).min(max);
        let bytes = Bytes::copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(bytes)
    }

    /// One line, without its line end, of at most `limit` bytes.
    fn line(&mut self, limit: usize) -> io::Result<Vec<u8>> {
        loop {
            let rest = &self.buf[self.pos..];
            if let Some(i) = rest.iter().position(|&b| b == b'\n') {
                let line = rest[..i].strip_suffix(b"\r").unwrap_or(&rest[..i]);
                if line.len() > limit {
                    return Err(io::ErrorKind::InvalidData.into());
                }
                let line = line.to_vec();
                self.pos += i + 1;
                return Ok(line);
            }
            if rest.len() > limit {
                return Err(io::ErrorKind::InvalidData.into());
            }
            self.fill()?;
        }
    }

    /// The bytes read beyond what was used (the start of the next request).
    fn rest(&self) -> Vec<u8> {
        self.buf[self.pos..].to_vec()
    }
}

/// A request body being read.
struct Body {
    framing: Framing,
    /// Bytes left in the body (Content-Length) or in the current chunk.
    left: u64,
    /// A chunk's data ended: its CRLF comes next.
    chunk_end: bool,
    /// Read to its end (a body of no bytes from the start).
    done: bool,
}

impl Body {
    fn new(framing: Framing) -> Self {
        Self {
            framing,
            left: match framing {
                Framing::Length(len) => len,
                Framing::Chunked => 0,
            },
            chunk_end: false,
            done: matches!(framing, Framing::Length(0)),
        }
    }

    /// The next piece of the body, `None` at its end. A broken chunked framing is
    /// [`io::ErrorKind::InvalidData`].
    fn next(&mut self, wire: &mut Wire, max_head: usize) -> io::Result<Option<Bytes>> {
        let bad = || io::Error::from(io::ErrorKind::InvalidData);
        loop {
            if self.left > 0 {
                let max = usize::try_from(self.left)
                    .unwrap_or(usize::MAX)
                    .min(wire.read_size);
                let bytes = wire.take(max)?;
                self.left -= bytes.len() as u64;
                self.chunk_end = self.left == 0;
                return Ok(Some(bytes));
            }
            if self.done || matches!(self.framing, Framing::Length(_)) {
                self.done = true;
                return Ok(None);
            }
            if self.chunk_end {
                if !wire.line(2)?.is_empty() {
                    return Err(bad());
                }
                self.chunk_end = false;
            }
            // chunk-size [ BWS ";" chunk-ext ]: hex digits only, then nothing or an
            // extension (ignored).
            let line = wire.line(1024)?;
            let digits = line
                .iter()
                .position(|b| !b.is_ascii_hexdigit())
                .unwrap_or(line.len());
            let size = number(&line[..digits], 16).ok_or_else(bad)?;
            let ext = &line[digits..];
            if !ext.is_empty() && !trim_ows(ext).starts_with(b";") {
                return Err(bad());
            }
            if size == 0 {
                // Trailers, dropped, up to the empty line.
                let mut trailers = 0;
                loop {
                    let line = wire.line(max_head)?;
                    trailers += line.len() + 2;
                    if line.is_empty() {
                        break;
                    }
                    if trailers > max_head {
                        return Err(bad());
                    }
                }
                self.done = true;
                return Ok(None);
            }
            self.left = size;
        }
    }
}

/// Writes `bytes` whole, each [`BATCH_BYTES`] of them within `timeout` (`None`: no
/// bound). The deadline is the adapter's: the socket's own timeout would start again
/// at each partial write, and a client reading a little at a time would never reach
/// it. A deadline passed is [`io::ErrorKind::TimedOut`].
fn write_within(stream: &TcpStream, bytes: &[u8], timeout: Option<Duration>) -> io::Result<()> {
    let mut writer = stream;
    for piece in bytes.chunks(BATCH_BYTES) {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut rest = piece;
        while !rest.is_empty() {
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                stream.set_write_timeout(Some(left))?;
            }
            match writer.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// How serving a response ended.
enum Served {
    /// Written whole.
    Done,
    /// The client is gone (or the adapter stops); the core was told.
    Gone,
    /// RESUME-14: the core cut the response ([`Transmit::Abort`]).
    Cut,
}

/// What a panicking [`exchange`] leaves behind, closed when it unwinds: the
/// connection's entry in the table, the exchange in the core, the worker's watch. Does
/// nothing on a normal return (the exchange closed or parked them itself).
struct Unwind<'a> {
    shared: &'a Shared,
    me: usize,
    id: ConnId,
    x: Option<ExchangeId>,
}

impl Drop for Unwind<'_> {
    fn drop(&mut self) {
        if !thread::panicking() {
            return;
        }
        let mut core = self.shared.core();
        let watch = &mut core.watches[self.me];
        watch.generation = watch.generation.wrapping_add(1);
        watch.gone = false;
        if let Some(x) = self.x {
            core.sleeping.remove(&x);
            core.server.handle_disconnect(Instant::now(), x);
        }
        // Its events wait for the next input: no sink runs on a panicking thread.
        self.shared.release_deferred(core);
        self.shared.net().conns.close(self.id);
    }
}

/// Serves one request: its head and body into the core, the core's response out, then
/// the connection back to the poller or closed.
fn exchange(shared: &Arc<Shared>, me: usize, job: Job, io: Io) {
    let Job {
        stream,
        id,
        buf,
        head_len,
        head_at,
    } = job;
    let mut unwind = Unwind {
        shared,
        me,
        id,
        x: None,
    };
    let _ = stream.set_nonblocking(false);
    if io.nodelay {
        let _ = stream.set_nodelay(true);
    }
    let _ = stream.set_write_timeout(io.write_timeout);
    let head = match parse_head(&buf[..head_len], stream.peer_addr().ok()) {
        Ok(head) => head,
        Err((status, message)) => {
            // A head `http` cannot represent, or a framing the adapter does not take:
            // the core never sees it.
            let _ = write_within(&stream, &refusal(status, &message), io.write_timeout);
            return shared.linger(stream, id);
        }
    };
    let mut wire = Wire {
        stream,
        buf,
        pos: head_len,
        read_size: io.read_size,
        read_timeout: io.read_timeout,
        deadline: io.body_timeout.and_then(|t| head_at.checked_add(t)),
    };
    let Head {
        parts,
        framing,
        keep_alive,
        http10,
        no_body,
    } = head;
    let expect_continue = !http10
        && parts
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let (x, mut first) = shared.with(|server, now| {
        let x = server.handle_head(now, parts);
        // An answer at the head (a declared length over the limit, say) needs no body.
        match server.poll_transmit(x) {
            Some(Transmit::Head(head)) => (x, Some(head)),
            _ => (x, None),
        }
    });
    unwind.x = Some(x);
    let mut body = Body::new(framing);
    if first.is_none() && expect_continue && !body.done {
        // The client waits for this before it sends the body.
        let sent = write_within(
            &wire.stream,
            b"HTTP/1.1 100 Continue\r\n\r\n",
            io.write_timeout,
        );
        if sent.is_err() {
            shared.disconnect(x);
            return shared.close(wire.stream, id);
        }
    }
    // The body, read as it comes, until it ends or the core answers first (a refusal:
    // the rest is not wanted, and never read).
    while first.is_none() {
        let piece = match body.next(&mut wire, io.max_head) {
            Ok(piece) => piece,
            Err(e) => {
                // The request broke off, stalled, or is malformed: the core forgets it.
                shared.disconnect(x);
                return body_failed(shared, wire.stream, id, &e, io);
            }
        };
        let end = piece.is_none();
        let answered = shared.with(|server, now| {
            match piece {
                Some(chunk) => server.handle_body(now, x, chunk),
                None => server.handle_body_end(now, x),
            }
            // A refusal's head can come before the body's end.
            match server.poll_transmit(x) {
                Some(Transmit::Head(head)) => Some(head),
                _ => None,
            }
        });
        first = answered;
        if end {
            break;
        }
    }
    // From the body's end on, the poller watches the socket while the answer is
    // waited for and written: a client that goes away frees the worker at once, and
    // the core is told.
    let mut watched = false;
    let (served, keep) = 'respond: {
        let mut batch = match first {
            Some(head) => {
                // What came right behind the head is taken with it.
                let mut rest = shared.next_batch(x, me, false).unwrap_or_default();
                rest.head = Some(head);
                rest
            }
            None => {
                watched = shared.watch(me, &wire.stream);
                match shared.next_batch(x, me, true) {
                    Some(batch) => batch,
                    None => {
                        shared.disconnect(x);
                        break 'respond (Served::Gone, false);
                    }
                }
            }
        };
        let Some(head) = batch.head.take() else {
            // The core sends the head first; anything else is a core bug.
            shared.disconnect(x);
            break 'respond (Served::Gone, false);
        };
        if body.done && !watched && !batch.end && !batch.cut {
            watched = shared.watch(me, &wire.stream);
        }
        let mut reply = Reply {
            stream: &wire.stream,
            keep: keep_alive && body.done && !says_close(&head.headers),
            http10,
            no_body,
            write_timeout: io.write_timeout,
        };
        let known_length = head.headers.contains_key(http::header::CONTENT_LENGTH);
        let served = if known_length || (batch.end && batch.data.is_empty()) {
            reply.whole(shared, me, x, &head, batch)
        } else {
            reply.stream(shared, me, x, &head, batch)
        };
        // The reply's own: a stream to an HTTP/1.0 client ends with the connection.
        (served, reply.keep)
    };
    if watched {
        shared.unwatch(me, &wire.stream);
    }
    match served {
        Served::Done if keep => {
            let rest = wire.rest();
            shared.park(wire.stream, id, rest);
        }
        Served::Done => shared.linger(wire.stream, id),
        Served::Gone => shared.close(wire.stream, id),
        Served::Cut => {
            // RESUME-14: no terminating chunk, so the stream cannot pass for complete;
            // the core already forgot the exchange.
            let _ = wire.stream.shutdown(Shutdown::Both);
            shared.close(wire.stream, id);
        }
    }
}

/// A request body that could not be read (the core already told): a broken chunked
/// framing is answered `400` and a body late past its deadline `408`, each with a
/// JSON-RPC error, and the connection lingers to its close; a client gone is closed.
fn body_failed(shared: &Shared, stream: TcpStream, id: ConnId, e: &io::Error, io: Io) {
    let answer = match e.kind() {
        io::ErrorKind::InvalidData => refusal(
            http::StatusCode::BAD_REQUEST,
            "malformed chunked request body",
        ),
        io::ErrorKind::TimedOut => refusal(
            http::StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        ),
        _ => return shared.close(stream, id),
    };
    let _ = write_within(&stream, &answer, io.write_timeout);
    shared.linger(stream, id);
}

/// Whether the core's head asks for the connection's end.
fn says_close(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
}

/// A response being written.
struct Reply<'a> {
    stream: &'a TcpStream,
    /// The connection stays open after it.
    keep: bool,
    http10: bool,
    /// A `HEAD` request: the head alone.
    no_body: bool,
    /// Each [`BATCH_BYTES`] written must be taken within this (see [`write_within`]).
    write_timeout: Option<Duration>,
}

/// How a response body is framed on the wire.
enum Out {
    Length(usize),
    Chunked,
    /// Ended by the close (a stream to an HTTP/1.0 client).
    Close,
}

impl Reply<'_> {
    /// The status line and headers: the core's, but for the framing ones, which are
    /// the adapter's.
    fn head(&self, head: &http::response::Parts, out: &Out) -> Vec<u8> {
        let mut bytes = format!(
            "HTTP/1.1 {} {}\r\n",
            head.status.as_u16(),
            head.status.canonical_reason().unwrap_or("")
        )
        .into_bytes();
        for (name, value) in &head.headers {
            if *name == http::header::CONTENT_LENGTH
                || *name == http::header::TRANSFER_ENCODING
                || *name == http::header::CONNECTION
            {
                continue;
            }
            bytes.extend_from_slice(name.as_str().as_bytes());
            bytes.extend_from_slice(b": ");
            bytes.extend_from_slice(value.as_bytes());
            bytes.extend_from_slice(b"\r\n");
        }
        match out {
            Out::Length(len) => {
                bytes.extend_from_slice(format!("content-length: {len}\r\n").as_bytes())
            }
            Out::Chunked => bytes.extend_from_slice(b"transfer-encoding: chunked\r\n"),
            Out::Close => {}
        }
        if !self.keep {
            bytes.extend_from_slice(b"connection: close\r\n");
        } else if self.http10 {
            bytes.extend_from_slice(b"connection: keep-alive\r\n");
        }
        bytes.extend_from_slice(b"\r\n");
        bytes
    }

    /// Answers with the whole body, collected until the end, and its length.
    fn whole(
        &mut self,
        shared: &Arc<Shared>,
        me: usize,
        x: ExchangeId,
        head: &http::response::Parts,
        mut batch: Batch,
    ) -> Served {
        let mut body = Vec::new();
        loop {
            for data in batch.data.drain(..) {
                body.extend_from_slice(&data);
            }
            if batch.cut {
                // Only a stream is cut, never a body with a length.
                return Served::Cut;
            }
            if batch.end {
                break;
            }
            batch = match shared.next_batch(x, me, true) {
                Some(batch) => batch,
                None => {
                    shared.disconnect(x);
                    return Served::Gone;
                }
            };
        }
        let mut bytes = self.head(head, &Out::Length(body.len()));
        if !self.no_body {
            bytes.extend_from_slice(&body);
        }
        // The exchange already ended in the core; a client gone by now changes nothing
        // there, but its connection goes.
        match write_within(self.stream, &bytes, self.write_timeout) {
            Ok(()) => Served::Done,
            Err(_) => Served::Gone,
        }
    }

    /// Streams the body: the head, then each batch of frames as chunks, written and so
    /// flushed, until the end.
    fn stream(
        &mut self,
        shared: &Arc<Shared>,
        me: usize,
        x: ExchangeId,
        head: &http::response::Parts,
        mut batch: Batch,
    ) -> Served {
        let chunked = !self.http10;
        if !chunked {
            // Ended by the close.
            self.keep = false;
        }
        let mut bytes = self.head(head, if chunked { &Out::Chunked } else { &Out::Close });
        loop {
            for data in batch.data.drain(..) {
                if data.is_empty() || self.no_body {
                    continue;
                }
                if chunked {
                    bytes.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                    bytes.extend_from_slice(&data);
                    bytes.extend_from_slice(b"\r\n");
                } else {
                    bytes.extend_from_slice(&data);
                }
            }
            if batch.end && chunked && !self.no_body {
                bytes.extend_from_slice(b"0\r\n\r\n");
            }
            if !bytes.is_empty() && write_within(self.stream, &bytes, self.write_timeout).is_err() {
                // The client is gone, or reads too slowly for the write timeout: no
                // terminating chunk, so the stream cannot pass for complete; the core
                // decides what the cut means.
                shared.disconnect(x);
                return Served::Gone;
            }
            bytes.clear();
            if batch.cut {
                return Served::Cut;
            }
            if batch.end {
                return Served::Done;
            }
            batch = match shared.next_batch(x, me, true) {
                Some(batch) => batch,
                None => {
                    shared.disconnect(x);
                    return Served::Gone;
                }
            };
        }
    }
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
