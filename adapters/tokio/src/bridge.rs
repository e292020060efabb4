//! A stdio MCP server on HTTP: [`mcpwire::bridge::Gateway`] driven on tokio, its children
//! real processes.
//!
//! The gateway decides everything MCP (which child a request goes to, what a child's
//! message becomes, what fails when a child dies); this module runs the processes
//! (`tokio::process`, each in a process group of its own so that a wrapper such as
//! `npx` or a shell ends with its children), moves their bytes, logs their standard
//! error line by line with the session named (STDIO-4), sends the signals of a
//! shutdown (STDIO-5) and keeps the gateway's time.
//!
//! [`relay`] is the other way round: a local client that speaks only stdio, served by a
//! remote server through [`McpClient`] (BRIDGE-6).

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcpwire::Entropy;
use mcpwire::app::Settings;
use mcpwire::bridge::{
    Action, ChildId, Config as GatewayConfig, Exit, Gateway, Happening, Relay, RelayAction, Role,
};
use mcpwire::client::Config as ClientConfig;
use mcpwire::jsonrpc::RequestId;
use mcpwire::server::{Config, Server};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, mpsc};

use crate::client::{CallError, McpClient, ServerMessage};
use crate::server::{McpService, WeakService};

/// How the bridge logs: one line at a time (a child's report, a line of its standard
/// error).
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// The longest line of a child's standard error that is logged whole; the rest of a
/// longer one is cut.
const STDERR_LINE: usize = 4096;

/// How long a child's output may stay open after the child exited (a process it left
/// behind holds it) before its end is reported all the same.
const OUTPUT_AFTER_EXIT: Duration = Duration::from_secs(1);

/// The stdio server's command line: a program and its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StdioCommand {
    program: OsString,
    args: Vec<OsString>,
}

impl StdioCommand {
    /// `program` with `args`.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// A command line as a shell would split it, without running a shell: words
    /// separated by spaces, `'…'` and `"…"` quoting (a backslash escapes the next
    /// character outside single quotes).
    ///
    /// # Errors
    /// An empty command, or a quote left open.
    pub fn parse(line: &str) -> Result<Self, String> {
        let mut words: Vec<String> = Vec::new();
        let mut word: Option<String> = None;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                c if c.is_whitespace() => {
                    if let Some(w) = word.take() {
                        words.push(w);
                    }
                }
                '\'' => {
                    let w = word.get_or_insert_with(String::new);
                    loop {
                        match chars.next() {
                            Some('\'') => break,
                            Some(c) => w.push(c),
                            None => return Err(format!("a ' is left open in {line:?}")),
                        }
                    }
                }
                '"' => {
                    let w = word.get_or_insert_with(String::new);
                    loop {
                        match chars.next() {
                            Some('"') => break,
                            Some('\\') => match chars.next() {
                                Some(c) => w.push(c),
                                None => return Err(format!("a \" is left open in {line:?}")),
                            },
                            Some(c) => w.push(c),
                            None => return Err(format!("a \" is left open in {line:?}")),
                        }
                    }
                }
                '\\' => {
                    let w = word.get_or_insert_with(String::new);
                    if let Some(c) = chars.next() {
                        w.push(c);
                    }
                }
                c => word.get_or_insert_with(String::new).push(c),
            }
        }
        words.extend(word);
        let mut words = words.into_iter();
        let program = words
            .next()
            .ok_or_else(|| "the command is empty".to_owned())?;
        Ok(Self::new(program, words))
    }

    /// The program.
    pub fn program(&self) -> &OsString {
        &self.program
    }

    /// Its arguments.
    pub fn args(&self) -> &[OsString] {
        &self.args
    }
}

/// What a [`Bridge`] is made with beside its server's configuration.
#[derive(Clone)]
pub struct BridgeOptions {
    gateway: GatewayConfig,
    settings: Settings,
    log: Log,
}

impl std::fmt::Debug for BridgeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeOptions")
            .field("gateway", &self.gateway)
            .finish_non_exhaustive()
    }
}

impl BridgeOptions {
    /// The gateway's defaults ([`GatewayConfig::new`]), the application layer's
    /// ([`Settings::new`]), and a log on standard error.
    pub fn new() -> Self {
        Self {
            gateway: GatewayConfig::new(),
            settings: Settings::new(),
            log: Arc::new(|line: &str| eprintln!("{line}")),
        }
    }

    /// The gateway's bounds and timeouts.
    #[must_use]
    pub fn with_gateway(mut self, config: GatewayConfig) -> Self {
        self.gateway = config;
        self
    }

    /// The application layer's settings (its bounds, the key that seals
    /// `requestState`).
    #[must_use]
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Where log lines go.
    #[must_use]
    pub fn with_log(mut self, log: Log) -> Self {
        self.log = log;
        self
    }
}

impl Default for BridgeOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// What waits for a child's input task and its life task: shared state and a wake-up
/// each, rather than channels, whose first block would cost every idle child a
/// kilobyte.
#[derive(Default)]
struct ChildLine {
    pending: Mutex<Pending>,
    /// Wakes the input task.
    input: Notify,
    /// Wakes the life task.
    signal: Notify,
}

/// What the gateway asked of a child and its tasks have not done yet.
#[derive(Default)]
struct Pending {
    writes: std::collections::VecDeque<Bytes>,
    close: bool,
    signal: Option<Signal>,
}

/// The signals of a shutdown (STDIO-5).
#[derive(Clone, Copy, Debug)]
enum Signal {
    Terminate,
    Kill,
}

/// The handle of one running child.
struct ChildIo {
    line: Arc<ChildLine>,
}

/// What the service's sink, the children's tasks and the timer share.
struct Shared {
    gateway: Mutex<Gateway>,
    command: StdioCommand,
    io: Mutex<HashMap<ChildId, ChildIo>>,
    /// Wakes the timer: the gateway's deadline moved.
    timer: Notify,
    /// Wakes whoever waits for the pool or for the children to end.
    changed: Notify,
    /// Why the pool failed before it was ready, if it did.
    failure: Mutex<Option<String>>,
    log: Log,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// Runs `f` on the gateway and the server, then does what the gateway asked. The
    /// events of the server it causes are dispatched after the gateway's lock is
    /// released (the sink takes it too).
    fn with(
        self: &Arc<Self>,
        service: &McpService,
        f: impl FnOnce(&mut Gateway, &mut Server, Instant),
    ) {
        let actions: Vec<Action> = {
            let mut gateway = lock(&self.gateway);
            let before = gateway.poll_timeout();
            service.with_server_deferred(|server, now| f(&mut gateway, server, now));
            if gateway.poll_timeout() != before {
                self.timer.notify_one();
            }
            std::iter::from_fn(|| gateway.poll_action()).collect()
        };
        service.deliver();
        for action in actions {
            self.perform(service, action);
        }
        self.changed.notify_waiters();
    }

    fn perform(self: &Arc<Self>, service: &McpService, action: Action) {
        match action {
            Action::Spawn { child, role } => self.spawn(service, child, role),
            Action::Write { child, bytes } => self.input(child, |p| p.writes.push_back(bytes)),
            Action::CloseInput { child } => self.input(child, |p| p.close = true),
            Action::Terminate { child } => self.signal(child, Signal::Terminate),
            Action::Kill { child } => self.signal(child, Signal::Kill),
            Action::Report(report) => {
                if report.role == Role::Pool {
                    let failed = matches!(
                        report.what,
                        Happening::Exited { .. } | Happening::InitializeFailed(_)
                    );
                    if failed && !lock(&self.gateway).is_ready() {
                        *lock(&self.failure) = Some(report.to_string());
                    }
                }
                (self.log)(&report.to_string());
            }
            other => (self.log)(&format!("an action this runtime does not know: {other:?}")),
        }
    }

    fn input(&self, child: ChildId, f: impl FnOnce(&mut Pending)) {
        if let Some(io) = lock(&self.io).get(&child) {
            f(&mut lock(&io.line.pending));
            io.line.input.notify_one();
        }
    }

    fn signal(&self, child: ChildId, signal: Signal) {
        if let Some(io) = lock(&self.io).get(&child) {
            lock(&io.line.pending).signal = Some(signal);
            io.line.signal.notify_one();
        }
    }

    /// Starts a child and the tasks that serve it.
    fn spawn(self: &Arc<Self>, service: &McpService, child: ChildId, role: Role) {
        let mut command = tokio::process::Command::new(self.command.program());
        command
            .args(self.command.args())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        let weak = service.downgrade();
        let mut process = match command.spawn() {
            Ok(process) => process,
            Err(e) => {
                (self.log)(&format!(
                    "{child} ({role}): cannot start {}: {e}",
                    self.command.program().to_string_lossy()
                ));
                let shared = Arc::clone(self);
                tokio::spawn(async move {
                    if let Some(service) = weak.upgrade() {
                        shared.with(&service, |gateway, server, now| {
                            gateway.child_exited(server, now, child, Exit::NotStarted);
                        });
                    }
                });
                return;
            }
        };
        let line = Arc::new(ChildLine::default());
        lock(&self.io).insert(
            child,
            ChildIo {
                line: Arc::clone(&line),
            },
        );
        if let Some(stdin) = process.stdin.take() {
            tokio::spawn(write_input(
                Arc::clone(self),
                child,
                stdin,
                Arc::clone(&line),
            ));
        }
        let reader = process
            .stdout
            .take()
            .map(|stdout| tokio::spawn(read_output(Arc::clone(self), weak.clone(), child, stdout)));
        if let Some(stderr) = process.stderr.take() {
            tokio::spawn(read_errors(Arc::clone(self), child, role, stderr));
        }
        tokio::spawn(live(Arc::clone(self), weak, child, process, line, reader));
    }
}

/// Writes what the gateway gives a child, in order; tells the gateway how much went.
async fn write_input(
    shared: Arc<Shared>,
    child: ChildId,
    mut stdin: tokio::process::ChildStdin,
    line: Arc<ChildLine>,
) {
    loop {
        let (writes, close) = {
            let mut pending = lock(&line.pending);
            (std::mem::take(&mut pending.writes), pending.close)
        };
        if writes.is_empty() && !close {
            // A wake-up given since the look above is kept for this wait.
            line.input.notified().await;
            continue;
        }
        let mut written = 0;
        for bytes in &writes {
            if stdin.write_all(bytes).await.is_err() {
                // The child is gone; its end is reported by its own task.
                return;
            }
            written += bytes.len();
        }
        let flushed = stdin.flush().await;
        lock(&shared.gateway).child_wrote(child, written);
        if close || flushed.is_err() {
            return;
        }
    }
}

/// What an idle child's reader holds: enough for the small messages most are. A read
/// that fills it goes on into a buffer that lives for that burst alone, so a thousand
/// idle children hold no read buffers of size.
const SMALL_READ: usize = 512;

/// How much a burst reads at once beyond [`SMALL_READ`].
const BURST_READ: usize = 64 << 10;

/// Hands a child's output to the gateway as it comes.
async fn read_output(
    shared: Arc<Shared>,
    service: WeakService,
    child: ChildId,
    mut stdout: tokio::process::ChildStdout,
) {
    let mut small = [0; SMALL_READ];
    loop {
        let n = match stdout.read(&mut small).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Some(service) = service.upgrade() else {
            return;
        };
        shared.with(&service, |gateway, server, now| {
            gateway.child_output(server, now, child, &small[..n]);
        });
        if n < SMALL_READ {
            continue;
        }
        // More is likely waiting: take what is there now, without waiting for more.
        let mut burst = vec![0; BURST_READ];
        loop {
            let read = std::pin::pin!(stdout.read(&mut burst));
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let n = match std::future::Future::poll(read, &mut cx) {
                std::task::Poll::Ready(Ok(n)) if n > 0 => n,
                // Nothing more now (the next read waits), or the end (it sees it too).
                _ => break,
            };
            shared.with(&service, |gateway, server, now| {
                gateway.child_output(server, now, child, &burst[..n]);
            });
            if n < BURST_READ {
                break;
            }
        }
    }
}

/// Logs a child's standard error, a line at a time, naming what it serves (STDIO-4).
async fn read_errors(
    shared: Arc<Shared>,
    child: ChildId,
    role: Role,
    stderr: tokio::process::ChildStderr,
) {
    let mut lines = tokio::io::BufReader::with_capacity(512, stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Bounded: a line without end is logged in pieces.
        let mut limited = (&mut lines).take(STDERR_LINE as u64);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        (shared.log)(&format!("{child} ({role}) stderr: {text}"));
    }
}

/// Waits for a child to end, sending it the signals the gateway asks for; then reports
/// its end once its output is read.
async fn live(
    shared: Arc<Shared>,
    service: WeakService,
    child: ChildId,
    mut process: tokio::process::Child,
    line: Arc<ChildLine>,
    reader: Option<tokio::task::JoinHandle<()>>,
) {
    let status = loop {
        tokio::select! {
            status = process.wait() => break status,
            () = line.signal.notified() => {
                let signal = lock(&line.pending).signal.take();
                if let Some(signal) = signal {
                    send_signal(&mut process, signal);
                }
            }
        }
    };
    if let Some(mut reader) = reader
        && tokio::time::timeout(OUTPUT_AFTER_EXIT, &mut reader)
            .await
            .is_err()
    {
        reader.abort();
    }
    lock(&shared.io).remove(&child);
    let exit = match status {
        Ok(status) => exit_of(status),
        Err(_) => Exit::NotStarted,
    };
    if let Some(service) = service.upgrade() {
        shared.with(&service, |gateway, server, now| {
            gateway.child_exited(server, now, child, exit);
        });
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return Exit::Signal(signal);
        }
    }
    Exit::Code(status.code().unwrap_or(-1))
}

/// Sends `signal` to the child's process group (a wrapper's children too); where there
/// are no signals, SIGTERM is a kill as well.
fn send_signal(process: &mut tokio::process::Child, signal: Signal) {
    #[cfg(unix)]
    {
        use rustix::process::{Pid, Signal as Sig, kill_process_group};
        // `id` is `None` once the child is reaped, so a reused pid is never signalled.
        let group = process
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        if let Some(group) = group {
            let sig = match signal {
                Signal::Terminate => Sig::TERM,
                Signal::Kill => Sig::KILL,
            };
            let _ = kill_process_group(group, sig);
        }
    }
    #[cfg(not(unix))]
    {
        let _ = signal;
        let _ = process.start_kill();
    }
}

/// Drives the gateway's deadlines: sleeps until `poll_timeout`, or until an input
/// moved it.
async fn timers(shared: Arc<Shared>, service: WeakService) {
    loop {
        let next = lock(&shared.gateway).poll_timeout();
        let notified = shared.timer.notified();
        match next {
            Some(at) => {
                let at = tokio::time::Instant::from_std(at);
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = notified => continue,
                }
            }
            None => notified.await,
        }
        let Some(service) = service.upgrade() else {
            return;
        };
        shared.with(&service, |gateway, server, now| {
            gateway.handle_timeout(server, now);
        });
    }
}

/// A stdio MCP server served over HTTP: the service to serve (with
/// [`serve`](crate::server::serve), say) and the bridge's controls.
#[derive(Clone)]
pub struct Bridge {
    service: McpService,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("command", &self.shared.command)
            .finish_non_exhaustive()
    }
}

impl Bridge {
    /// A bridge to `command` behind a server with `config` (its eras, its endpoint, its
    /// checks), with `entropy` for session ids and the `requestState` key. Spawns its
    /// timer task, and with a pool its first child, on the current tokio runtime.
    pub fn new(
        config: Config,
        mut entropy: Box<dyn Entropy + Send>,
        command: StdioCommand,
        options: BridgeOptions,
    ) -> Self {
        let gateway = Gateway::new(
            options.gateway,
            &options.settings,
            &mut *entropy,
            Instant::now(),
        );
        let shared = Arc::new(Shared {
            gateway: Mutex::new(gateway),
            command,
            io: Mutex::new(HashMap::new()),
            timer: Notify::new(),
            changed: Notify::new(),
            failure: Mutex::new(None),
            log: options.log,
        });
        let sink = {
            let shared = Arc::clone(&shared);
            move |service: &McpService, event| {
                shared.with(service, |gateway, server, now| {
                    gateway.handle_event(server, now, event);
                });
            }
        };
        let service = McpService::with_dispatch(config, entropy, sink);
        tokio::spawn(timers(Arc::clone(&shared), service.downgrade()));
        // The gateway's first actions (the pool's first child) were made before the
        // service was.
        shared.with(&service, |_, _, _| {});
        Self { service, shared }
    }

    /// The service, to serve.
    pub fn service(&self) -> &McpService {
        &self.service
    }

    /// Waits until the pool's first child has described the stdio server, so that
    /// 2026-07-28 requests are served (at once without a pool).
    ///
    /// # Errors
    /// Why the pool's first child failed (it could not start, exited, or answered
    /// `initialize` with an error), or that `timeout` passed.
    pub async fn ready(&self, timeout: Duration) -> Result<(), String> {
        if lock(&self.shared.gateway).config().pool() == 0 {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.shared.changed.notified();
            if lock(&self.shared.gateway).is_ready() {
                return Ok(());
            }
            if let Some(failure) = lock(&self.shared.failure).take() {
                return Err(failure);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return Err(format!(
                    "the stdio server did not answer initialize within {} ms",
                    timeout.as_millis()
                ));
            }
        }
    }

    /// The children running.
    pub fn children(&self) -> usize {
        lock(&self.shared.gateway).children()
    }

    /// Shuts down: the server ends every session and answers later requests 503, the
    /// gateway ends every listen and every child (STDIO-5); then waits, at most
    /// `timeout`, until every child has exited and every response is written.
    pub async fn shutdown(&self, timeout: Duration) {
        self.shared.with(&self.service, |gateway, server, now| {
            server.shutdown(now);
            gateway.shutdown(server, now);
        });
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.shared.changed.notified();
            let open = self
                .service
                .with_server(|server, _| server.exchange_count());
            if self.children() == 0 && open == 0 {
                return;
            }
            let wait = tokio::time::Duration::from_millis(20);
            if tokio::time::timeout_at(deadline.min(tokio::time::Instant::now() + wait), changed)
                .await
                .is_err()
                && tokio::time::Instant::now() >= deadline
            {
                return;
            }
        }
    }
}

/// What the relay's loop is told by its tasks.
enum Told {
    Connected(Result<(McpClient, mpsc::UnboundedReceiver<ServerMessage>), String>),
    Answered(RequestId, Result<serde_json::Value, CallError>),
}

/// How long the answers still owed to a local client whose input ended may take.
const DRAIN: Duration = Duration::from_secs(30);

/// Sleeps until `at`; for ever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The next server message, once connected.
async fn next_message(
    messages: &mut Option<mpsc::UnboundedReceiver<ServerMessage>>,
) -> Option<ServerMessage> {
    match messages {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// A server message for the local client (or the log).
fn server_message(relay: &mut Relay, message: ServerMessage, log: &Log) {
    match message {
        ServerMessage::Notification(note) => relay.server_notification(&note),
        ServerMessage::Request(request) => relay.server_request(&request),
        other => log(&format!("the remote session: {other:?}")),
    }
}

/// Serves a local client that speaks only stdio (its messages on `input`, the relay's
/// on `output`) from the remote server `config` names, in whatever revision the client
/// core negotiates (`mcpwire bridge --remote`, BRIDGE-6): [`Relay`] decides what goes
/// where; this drives it. The client core connects at the local client's `initialize`,
/// declaring its capabilities and identity, and re-initializes an expired session by
/// itself. Ends when `input` ends, after closing the client.
///
/// # Errors
/// Writing to `output` failed (the local client went away).
pub async fn relay<R, W>(
    config: ClientConfig,
    mut input: R,
    mut output: W,
    log: Log,
) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut relay = Relay::default();
    let (tx, mut told) = mpsc::unbounded_channel::<Told>();
    let mut client: Option<McpClient> = None;
    let mut messages: Option<mpsc::UnboundedReceiver<ServerMessage>> = None;
    let mut calls: HashMap<RequestId, tokio::task::AbortHandle> = HashMap::new();
    let mut buf = vec![0; 64 << 10];
    let mut input_open = true;
    // Once the input ended, what is in flight has this long to be answered.
    let mut drain_until: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            () = sleep_until(drain_until) => {
                log("the remote server did not answer everything in time after the input ended");
                relay.abandon();
            }
            message = next_message(&mut messages) => match message {
                Some(message) => server_message(&mut relay, message, &log),
                None => messages = None,
            },
            read = input.read(&mut buf), if input_open => match read {
                Ok(0) | Err(_) => {
                    input_open = false;
                    drain_until = Some(tokio::time::Instant::now() + DRAIN);
                    relay.local_ended();
                }
                Ok(n) => relay.local_input(&buf[..n]),
            },
            Some(news) = told.recv() => match news {
                Told::Connected(Ok((connected, receiver))) => {
                    relay.connected(connected.described().as_ref());
                    client = Some(connected);
                    messages = Some(receiver);
                }
                Told::Connected(Err(why)) => {
                    log(&format!("cannot connect: {why}"));
                    relay.connect_failed(&why);
                }
                Told::Answered(id, outcome) => {
                    // What the server sent before this answer (its last progress, say)
                    // is on the receiver already: it goes first.
                    if let Some(receiver) = &mut messages {
                        while let Ok(message) = receiver.try_recv() {
                            server_message(&mut relay, message, &log);
                        }
                    }
                    calls.remove(&id);
                    relay.answered(&id, outcome);
                }
            },
        }
        while let Some(action) = relay.poll_action() {
            match action {
                RelayAction::Connect {
                    capabilities,
                    client_info,
                } => {
                    let name = client_info
                        .get("name")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("mcpwire-bridge");
                    let version = client_info
                        .get("version")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("0");
                    let config = config
                        .clone()
                        .with_capabilities(capabilities.to_string())
                        .with_client_info(name, version)
                        .with_reinitialize(true);
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let connected = McpClient::connect(config, Box::new(mcpwire::OsEntropy))
                            .await
                            .map_err(|e| e.to_string());
                        let _ = tx.send(Told::Connected(connected));
                    });
                }
                RelayAction::Call { id, method, params } => {
                    let Some(client) = &client else {
                        relay.answered(&id, Err(CallError::Closed));
                        continue;
                    };
                    match client.start_call(&method, params, None) {
                        Ok(call) => {
                            let tx = tx.clone();
                            let key = id.clone();
                            let task = tokio::spawn(async move {
                                let outcome = call.result().await;
                                let _ = tx.send(Told::Answered(id, outcome));
                            });
                            calls.insert(key, task.abort_handle());
                        }
                        Err(e) => relay.answered(&id, Err(e)),
                    }
                }
                // Dropping the call (with its task) gives it up at the server.
                RelayAction::Cancel { id } => {
                    if let Some(task) = calls.remove(&id) {
                        task.abort();
                    }
                }
                RelayAction::Notify { method, params } => {
                    if let Some(client) = &client {
                        let _ = client.notify(&method, params);
                    }
                }
                RelayAction::Respond { id, answer } => {
                    if let Some(client) = &client {
                        let _ = match answer {
                            Ok(result) => client.respond(&id, result),
                            Err((code, message, _)) => client.respond_error(&id, code, &message),
                        };
                    }
                }
                RelayAction::Write(bytes) => {
                    output.write_all(&bytes).await?;
                    output.flush().await?;
                }
                RelayAction::BadLine(e) => log(&format!("the local client's input: {e}")),
                RelayAction::Close => {
                    for (_, task) in calls.drain() {
                        task.abort();
                    }
                    if let Some(client) = client.take() {
                        client.close().await;
                    }
                    return Ok(());
                }
                other => log(&format!("an action this runtime does not know: {other:?}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_splits_as_a_shell_would_without_one() {
        let c = StdioCommand::parse(r#"node  "my server.js" --name 'a b' x\ y"#).unwrap();
        assert_eq!(c.program(), "node");
        assert_eq!(c.args(), ["my server.js", "--name", "a b", "x y"]);
        assert!(StdioCommand::parse("  ").is_err());
        assert!(StdioCommand::parse("node 'open").is_err());
    }
}
