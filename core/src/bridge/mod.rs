//! A stdio MCP server served over HTTP: the decisions of `mcpwire bridge --stdio`,
//! runtime-free.
//!
//! A [`Gateway`] sits between a [`Server`](crate::server::Server) and the stdio server's
//! processes (its *children*). It is fed the server's events and what each child writes,
//! and answers with [`Action`]s for the adapter (start a child, write lines to it, close
//! its input, end it) and with answers, notifications and requests on the server. The
//! adapter runs the processes and moves bytes; every MCP decision is here, on the
//! virtual time the adapter passes in (BRIDGE-1 … BRIDGE-6 in the requirements).
//!
//! - **Sessions** (2025-03-26 … 2025-11-25, and legacy HTTP+SSE): one child per
//!   session, started by the session's `initialize`, which it answers; the client's
//!   ids pass through unchanged, since the child has one client (BRIDGE-1).
//! - **2026-07-28**: a pool of children, each initialized once by the gateway, each
//!   running one request at a time, so that whatever a child sends while it runs a
//!   request (progress, log messages, questions for the client) belongs to that request
//!   alone; ids and progress tokens are remapped both ways (BRIDGE-2). A child's
//!   question becomes an `input_required` answer, and the client's retry carries the
//!   answers back to the child that waits (BRIDGE-3).
//! - **Failures**: a child that exits or stalls fails exactly the requests in flight on
//!   it, with JSON-RPC errors; a line that is not JSON-RPC is reported and costs nothing
//!   else (BRIDGE-4).
//! - **Bounds**: children, requests waiting for a pool child, bytes not yet written to a
//!   child, and the time a question waits for the client's retry (BRIDGE-5).
//!
//! The other way round, [`Relay`] serves a client that speaks only stdio from a remote
//! server, through the client core (`mcpwire bridge --remote`, BRIDGE-6).

mod gateway;
mod relay;

pub use gateway::Gateway;
pub use relay::{Relay, RelayAction};

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::ProtocolVersion;
use crate::server::SessionId;
use crate::stdio::{self, LineError};

/// One child process of a [`Gateway`]: a counter, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChildId(u64);

impl ChildId {
    /// The id's number, for a log or a table.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ChildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "child-{}", self.0)
    }
}

/// What a child serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// One session's client (BRIDGE-1).
    Session(SessionId),
    /// Any 2026-07-28 request (BRIDGE-2).
    Pool,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Session(session) => write!(f, "session {session}"),
            Self::Pool => f.write_str("the 2026-07-28 pool"),
        }
    }
}

/// How a child ended, as the adapter saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// It could not be started at all.
    NotStarted,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Code(code) => write!(f, "exited with status {code}"),
            Self::Signal(signal) => write!(f, "was ended by signal {signal}"),
            Self::NotStarted => f.write_str("could not be started"),
        }
    }
}

/// Work for the adapter, from [`Gateway::poll_action`], to do in order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// Start a child: the stdio server's command, its standard input, output and error
    /// piped. Report its output with [`Gateway::child_output`] and its end with
    /// [`Gateway::child_exited`]; one that cannot start is an [`Exit::NotStarted`].
    Spawn {
        /// The new child.
        child: ChildId,
        /// What it serves (to name it in logs).
        role: Role,
    },
    /// Write these bytes (whole lines) to the child's standard input, after what came
    /// before; tell [`Gateway::child_wrote`] once they are written.
    Write {
        /// The child.
        child: ChildId,
        /// The lines.
        bytes: bytes::Bytes,
    },
    /// Close the child's standard input: the first step of its shutdown (STDIO-5).
    CloseInput {
        /// The child.
        child: ChildId,
    },
    /// Ask the child to end (SIGTERM): it did not exit after its input closed.
    Terminate {
        /// The child.
        child: ChildId,
    },
    /// End the child (SIGKILL): it did not exit after [`Action::Terminate`].
    Kill {
        /// The child.
        child: ChildId,
    },
    /// Something worth a line in the log.
    Report(Report),
}

/// A happening the adapter logs: which child, what it serves, and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The child.
    pub child: ChildId,
    /// What it serves.
    pub role: Role,
    /// What happened.
    pub what: Happening,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.child, self.role, self.what)
    }
}

/// What a [`Report`] tells.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Happening {
    /// A line on the child's standard output held no message (STDIO-2); nothing else
    /// was lost.
    BadLine(LineError),
    /// The child ended; `failed` requests in flight on it were answered with an error.
    Exited {
        /// How it ended.
        exit: Exit,
        /// The requests that got an error.
        failed: usize,
    },
    /// The child wrote nothing for the stall timeout while requests waited on it: it is
    /// being ended, and `failed` requests got an error.
    Stalled {
        /// The timeout.
        after: Duration,
        /// The requests that got an error.
        failed: usize,
    },
    /// A message of the child that belongs to nothing open (a response to a request no
    /// longer in flight, a notification with nowhere to go): dropped.
    Dropped {
        /// Its method, or `"response"`.
        what: String,
    },
    /// The child answered `initialize` with another protocol version than the one the
    /// transport negotiated; the client is told the negotiated one.
    VersionDiffers {
        /// What the transport negotiated.
        negotiated: ProtocolVersion,
        /// What the child said.
        child: String,
    },
    /// The child was started and answered `initialize`.
    Ready {
        /// Its `serverInfo`.
        server_info: Value,
    },
    /// The child's `initialize` failed, with this message.
    InitializeFailed(String),
    /// A question the child asked a 2026-07-28 client waited longer than
    /// [`Config::with_input_wait`] for its answer: the child's request was cancelled.
    InputAbandoned,
}

impl fmt::Display for Happening {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadLine(e) => write!(f, "bad output, ignored: {e}"),
            Self::Exited { exit, failed } => {
                write!(f, "{exit}; {failed} request(s) in flight failed")
            }
            Self::Stalled { after, failed } => write!(
                f,
                "silent for {} ms with requests waiting: ending it; {failed} request(s) failed",
                after.as_millis()
            ),
            Self::Dropped { what } => write!(f, "dropped a {what} that belongs to nothing open"),
            Self::VersionDiffers { negotiated, child } => write!(
                f,
                "answered initialize with protocol version {child}; the client is told {negotiated}"
            ),
            Self::Ready { server_info } => write!(f, "ready: {server_info}"),
            Self::InitializeFailed(message) => write!(f, "initialize failed: {message}"),
            Self::InputAbandoned => {
                f.write_str("no retry brought the client's answer in time: request cancelled")
            }
        }
    }
}

/// The gateway's settings and bounds (BRIDGE-5).
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) max_children: usize,
    pub(crate) pool: usize,
    pub(crate) max_waiting: usize,
    pub(crate) max_unwritten: usize,
    pub(crate) stall: Duration,
    pub(crate) input_wait: Duration,
    pub(crate) grace: Duration,
    pub(crate) lines: stdio::Limits,
    pub(crate) client_info: Value,
}

impl Config {
    /// The defaults: 256 session children and a pool of 4; 1,024 requests waiting for a
    /// pool child; 4 MiB not yet written to one child; a child silent for 60 s with
    /// requests waiting is stalled (the TypeScript SDK's request timeout); a question
    /// waits 5 minutes for the client's retry; 2 s between the steps of a child's
    /// shutdown; lines as [`stdio::Limits`].
    pub fn new() -> Self {
        Self {
            max_children: 256,
            pool: 4,
            max_waiting: 1024,
            max_unwritten: 4 << 20,
            stall: Duration::from_secs(60),
            input_wait: Duration::from_secs(300),
            grace: Duration::from_secs(2),
            lines: stdio::Limits::new(),
            client_info: serde_json::json!({
                "name": "mcpwire-bridge", "version": env!("CARGO_PKG_VERSION")
            }),
        }
    }

    /// The most session children at once; one more session's `initialize` is
    /// answered -32603 (and the session ends).
    #[must_use]
    pub fn with_max_children(mut self, children: usize) -> Self {
        self.max_children = children;
        self
    }

    /// The most pool children (BRIDGE-2), started as requests need them; 0 serves no
    /// 2026-07-28 request (each is answered -32603).
    #[must_use]
    pub fn with_pool(mut self, children: usize) -> Self {
        self.pool = children;
        self
    }

    /// The most 2026-07-28 requests waiting for a pool child; one more is answered
    /// -32603 "busy".
    #[must_use]
    pub fn with_max_waiting(mut self, requests: usize) -> Self {
        self.max_waiting = requests;
        self
    }

    /// The most bytes given to a child to write and not yet written (a child that
    /// does not read its input); a request that would pass it is answered -32603
    /// "busy", a notification is dropped.
    #[must_use]
    pub fn with_max_unwritten(mut self, bytes: usize) -> Self {
        self.max_unwritten = bytes;
        self
    }

    /// How long a child may stay silent while requests wait on it (BRIDGE-4).
    #[must_use]
    pub fn with_stall(mut self, timeout: Duration) -> Self {
        self.stall = timeout;
        self
    }

    /// How long a child's question to a 2026-07-28 client waits for the retry that
    /// answers it (BRIDGE-3).
    #[must_use]
    pub fn with_input_wait(mut self, wait: Duration) -> Self {
        self.input_wait = wait;
        self
    }

    /// The time between closing a child's input and SIGTERM, and between SIGTERM and
    /// SIGKILL (STDIO-5).
    #[must_use]
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The bounds of the lines read from children.
    #[must_use]
    pub fn with_lines(mut self, limits: stdio::Limits) -> Self {
        self.lines = limits;
        self
    }

    /// The `clientInfo` the pool children are initialized with.
    #[must_use]
    pub fn with_client_info(mut self, name: &str, version: &str) -> Self {
        self.client_info = serde_json::json!({"name": name, "version": version});
        self
    }

    /// See [`with_max_children`](Self::with_max_children).
    pub fn max_children(&self) -> usize {
        self.max_children
    }

    /// See [`with_pool`](Self::with_pool).
    pub fn pool(&self) -> usize {
        self.pool
    }

    /// See [`with_stall`](Self::with_stall).
    pub fn stall(&self) -> Duration {
        self.stall
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}
