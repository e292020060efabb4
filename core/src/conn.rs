//! Connection admission and deadlines for an HTTP/1 server, with no IO: which
//! connections a driver keeps, which it closes, and when.
//!
//! A server that keeps every connection a peer opens, for as long as the peer likes, can
//! be put out of service by anyone who reaches it: idle connections and half-sent heads
//! (slowloris) hold file descriptors, memory and, on a blocking server, threads, until
//! the process runs out. [`Connections`] is the policy both adapters run, so that they
//! answer such peers alike:
//!
//! - **A bound** ([`Limits::with_max_connections`]): at the bound, a new connection is
//!   served by closing the oldest connection that is not busy (waiting for its first
//!   request, idle between requests, or still sending a head), so a flood of idle or slow
//!   connections never locks out a new client; only when every connection is busy is the
//!   new one refused. The same shedding frees a descriptor when the process runs out of
//!   them ([`Connections::shed`]).
//! - **A header deadline** ([`Limits::with_header_timeout`]): once the first byte of a
//!   request head arrives, the whole head must follow within it.
//! - **An idle deadline** ([`Limits::with_idle_timeout`]): a connection waiting for a
//!   request (new, or after its last response) is closed after it.
//! - A **busy** connection (an exchange in progress, an SSE stream above all) has no
//!   deadline here: the protocol's own rules (heartbeats, write timeouts) govern it.
//!
//! The driver reports each connection's moves (`open`, `head_started`, `busy`, `idle`,
//! `close`), closes what [`poll_expired`](Connections::poll_expired) returns, and sleeps
//! until [`poll_timeout`](Connections::poll_timeout). Every count a log line needs is in
//! [`Connections::stats`].
//!
//! ```
//! use std::time::{Duration, Instant};
//! use mcpwire::conn::{Connections, Expiry, Limits, Opened};
//!
//! let mut conns = Connections::new(Limits::new().with_max_connections(1));
//! let now = Instant::now();
//! let Opened::Accepted(a) = conns.open(now) else { panic!() };
//! // At the bound: `a` is idle, so it makes room for `b`.
//! let Opened::Shed { id: b, shed } = conns.open(now) else { panic!() };
//! assert_eq!(shed, a);
//! conns.head_started(b, now);
//! let late = now + Limits::new().header_timeout();
//! assert_eq!(conns.poll_expired(late), Some((b, Expiry::HeaderTimeout)));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

/// The bounds and deadlines of [`Connections`]. Every one has a default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Limits {
    max_connections: usize,
    header_timeout: Duration,
    idle_timeout: Duration,
    max_head: usize,
}

impl Limits {
    /// The defaults: 1,024 connections, 10 s for a request head once it started, 60 s
    /// idle, heads of at most 16 KiB.
    pub fn new() -> Self {
        Self {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_head: 16 << 10,
        }
    }

    /// The largest request head (request line and headers), in bytes: a longer one is
    /// answered 431 and its connection closed. The driver enforces it as it reads.
    pub fn with_max_head(mut self, bytes: usize) -> Self {
        self.max_head = bytes;
        self
    }

    /// The largest request head, in bytes.
    pub fn max_head(&self) -> usize {
        self.max_head
    }

    /// The most connections open at once (at least 1). Keep it below the process's file
    /// descriptor limit, with room for the rest of the process.
    pub fn with_max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// How long a request head may take from its first byte to its end.
    pub fn with_header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = crate::duration::bounded(timeout);
        self
    }

    /// How long a connection may wait for a request: a new one, or one whose last
    /// response is complete (HTTP keep-alive).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = crate::duration::bounded(timeout);
        self
    }

    /// The most connections open at once.
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// How long a request head may take from its first byte.
    pub fn header_timeout(&self) -> Duration {
        self.header_timeout
    }

    /// How long a connection may wait for a request.
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}

/// One connection of a [`Connections`] table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// What became of a new connection ([`Connections::open`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Opened {
    /// Serve it.
    Accepted(ConnId),
    /// Serve `id`, and close `shed`, the oldest connection that was not busy, to make
    /// room for it (already gone from the table).
    Shed {
        /// The new connection.
        id: ConnId,
        /// The connection to close.
        shed: ConnId,
    },
    /// Every connection is busy: close the new one.
    Refused,
}

/// Why [`Connections::poll_expired`] gave a connection up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// A request head began and did not end in time (slowloris).
    HeaderTimeout,
    /// No request came in time.
    IdleTimeout,
}

/// Counts since the table was made, for log lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Connections accepted (shedding another or not).
    pub accepted: u64,
    /// New connections refused: every connection was busy.
    pub refused: u64,
    /// Connections closed to make room ([`Opened::Shed`], [`Connections::shed`]).
    pub shed: u64,
    /// Connections closed at the header deadline.
    pub header_timeouts: u64,
    /// Connections closed at the idle deadline.
    pub idle_timeouts: u64,
}

impl Stats {
    /// A log line for what changed since `earlier`, when a count of connections given
    /// up (refused, shed, timed out) reached a power of two (1, 2, 4, …): every count is
    /// told while the log stays short under a flood. `None` otherwise.
    pub fn log_line(&self, earlier: &Self) -> Option<String> {
        // A power of two lies in (then, now].
        let crossed = |now: u64, then: u64| now > then && (then == 0 || now.ilog2() > then.ilog2());
        let counts = [
            (self.refused, earlier.refused),
            (self.shed, earlier.shed),
            (self.header_timeouts, earlier.header_timeouts),
            (self.idle_timeouts, earlier.idle_timeouts),
        ];
        counts
            .iter()
            .any(|&(now, then)| crossed(now, then))
            .then(|| {
                format!(
                    "connections so far: {} accepted, {} refused (all busy), {} closed to make \
                 room, {} closed at the header timeout, {} at the idle timeout",
                    self.accepted,
                    self.refused,
                    self.shed,
                    self.header_timeouts,
                    self.idle_timeouts
                )
            })
    }
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// Waiting for a request, since `since`.
    Idle,
    /// A request head is arriving.
    Head,
    /// An exchange is in progress.
    Busy,
}

#[derive(Debug)]
struct Entry {
    state: State,
    /// When it left `Busy` (its place in the shedding order), unless busy.
    since: Instant,
    /// Its deadline in `deadlines`, if it has one.
    deadline: Option<Instant>,
}

/// The connection table. See the [module docs](self).
#[derive(Debug)]
pub struct Connections {
    limits: Limits,
    next: u64,
    entries: BTreeMap<u64, Entry>,
    // INVARIANT: `deadlines` holds exactly (deadline, id) of every entry with a deadline.
    deadlines: BTreeSet<(Instant, u64)>,
    // INVARIANT: `sheddable` holds exactly (since, id) of every entry not `Busy`.
    sheddable: BTreeSet<(Instant, u64)>,
    stats: Stats,
}

impl Connections {
    /// An empty table.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            next: 0,
            entries: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            sheddable: BTreeSet::new(),
            stats: Stats::default(),
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Connections open.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The counts so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// A connection was accepted: whether to serve it, and what to close for it.
    pub fn open(&mut self, now: Instant) -> Opened {
        let shed = if self.entries.len() >= self.limits.max_connections {
            match self.take_oldest() {
                Some(old) => Some(old),
                None => {
                    self.stats.refused += 1;
                    return Opened::Refused;
                }
            }
        } else {
            None
        };
        let id = self.next;
        self.next += 1;
        self.entries.insert(
            id,
            Entry {
                state: State::Busy,
                since: now,
                deadline: None,
            },
        );
        self.set_idle(id, now);
        self.stats.accepted += 1;
        match shed {
            Some(shed) => Opened::Shed {
                id: ConnId(id),
                shed,
            },
            None => Opened::Accepted(ConnId(id)),
        }
    }

    /// The first byte of a request head arrived on `id`: the head must end within the
    /// header timeout. No-op unless `id` was waiting for a request.
    pub fn head_started(&mut self, id: ConnId, now: Instant) {
        let Some(entry) = self.entries.get_mut(&id.0) else {
            return;
        };
        if !matches!(entry.state, State::Idle) {
            return;
        }
        entry.state = State::Head;
        let deadline = now + self.limits.header_timeout;
        if let Some(old) = entry.deadline.replace(deadline) {
            self.deadlines.remove(&(old, id.0));
        }
        self.deadlines.insert((deadline, id.0));
    }

    /// `id`'s request head is complete: its exchange runs, with no deadline here, and it
    /// is never shed.
    pub fn busy(&mut self, id: ConnId) {
        let Some(entry) = self.entries.get_mut(&id.0) else {
            return;
        };
        if matches!(entry.state, State::Busy) {
            return;
        }
        entry.state = State::Busy;
        if let Some(old) = entry.deadline.take() {
            self.deadlines.remove(&(old, id.0));
        }
        self.sheddable.remove(&(entry.since, id.0));
    }

    /// `id`'s response is complete and it stays open for another request: it may wait
    /// the idle timeout.
    pub fn idle(&mut self, id: ConnId, now: Instant) {
        if self.entries.contains_key(&id.0) {
            self.set_idle(id.0, now);
        }
    }

    /// Whether `id` is in the table (not closed, shed nor expired): a driver giving a
    /// connection back asks this first, and closes it rather than hold a connection
    /// the table no longer bounds.
    pub fn contains(&self, id: ConnId) -> bool {
        self.entries.contains_key(&id.0)
    }

    /// `id` is closed (by either side): forgotten.
    pub fn close(&mut self, id: ConnId) {
        if let Some(entry) = self.entries.remove(&id.0) {
            self.forget(id.0, &entry);
        }
    }

    /// Picks the oldest connection that is not busy for the driver to close, to free a
    /// file descriptor (the process ran out: `EMFILE`); it is gone from the table.
    pub fn shed(&mut self) -> Option<ConnId> {
        self.take_oldest()
    }

    /// The next deadline, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    /// A connection whose deadline is at or before `now`, for the driver to close; it is
    /// gone from the table. Call until `None`.
    pub fn poll_expired(&mut self, now: Instant) -> Option<(ConnId, Expiry)> {
        let &(at, id) = self.deadlines.first()?;
        if at > now {
            return None;
        }
        let entry = self.entries.remove(&id)?;
        self.forget(id, &entry);
        let expiry = match entry.state {
            State::Head => {
                self.stats.header_timeouts += 1;
                Expiry::HeaderTimeout
            }
            State::Idle | State::Busy => {
                self.stats.idle_timeouts += 1;
                Expiry::IdleTimeout
            }
        };
        Some((ConnId(id), expiry))
    }

    fn set_idle(&mut self, id: u64, now: Instant) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        if !matches!(entry.state, State::Busy) {
            self.sheddable.remove(&(entry.since, id));
        }
        entry.state = State::Idle;
        entry.since = now;
        self.sheddable.insert((now, id));
        let deadline = now + self.limits.idle_timeout;
        if let Some(old) = entry.deadline.replace(deadline) {
            self.deadlines.remove(&(old, id));
        }
        self.deadlines.insert((deadline, id));
    }

    fn take_oldest(&mut self) -> Option<ConnId> {
        let (_, id) = self.sheddable.pop_first()?;
        let entry = self.entries.remove(&id)?;
        if let Some(at) = entry.deadline {
            self.deadlines.remove(&(at, id));
        }
        self.stats.shed += 1;
        Some(ConnId(id))
    }

    fn forget(&mut self, id: u64, entry: &Entry) {
        if let Some(at) = entry.deadline {
            self.deadlines.remove(&(at, id));
        }
        if !matches!(entry.state, State::Busy) {
            self.sheddable.remove(&(entry.since, id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_of_duration_max_mean_for_ever_and_do_not_overflow() {
        let limits = Limits::new()
            .with_header_timeout(Duration::MAX)
            .with_idle_timeout(Duration::MAX);
        let mut table = Connections::new(limits);
        let now = Instant::now();
        let Opened::Accepted(id) = table.open(now) else {
            panic!("refused");
        };
        table.head_started(id, now);
        table.busy(id);
        table.idle(id, now);
        assert!(table.poll_timeout().is_some_and(|at| at > now));
        assert_eq!(table.poll_expired(now + Duration::from_secs(3600)), None);
    }

    const S: Duration = Duration::from_secs(1);

    fn accepted(opened: Opened) -> ConnId {
        match opened {
            Opened::Accepted(id) => id,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn at_the_bound_the_oldest_connection_not_busy_is_shed_and_busy_ones_never() {
        let mut c = Connections::new(Limits::new().with_max_connections(3));
        let t = Instant::now();
        let a = accepted(c.open(t));
        let b = accepted(c.open(t + S));
        let d = accepted(c.open(t + 2 * S));
        c.busy(a);
        // `b` waited longest of those not busy.
        assert_eq!(
            c.open(t + 3 * S),
            Opened::Shed {
                id: ConnId(3),
                shed: b
            }
        );
        c.busy(d);
        c.busy(ConnId(3));
        assert_eq!(c.open(t + 4 * S), Opened::Refused, "every one busy");
        // A slow head is sheddable too: it is not being served.
        c.idle(a, t + 5 * S);
        c.head_started(a, t + 6 * S);
        assert_eq!(
            c.open(t + 7 * S),
            Opened::Shed {
                id: ConnId(4),
                shed: a
            }
        );
        assert_eq!(c.len(), 3);
        let stats = c.stats();
        assert_eq!((stats.accepted, stats.refused, stats.shed), (5, 1, 2));
    }

    #[test]
    fn a_head_must_end_within_the_header_timeout_and_a_wait_within_the_idle_timeout() {
        let limits = Limits::new()
            .with_header_timeout(2 * S)
            .with_idle_timeout(10 * S);
        let mut c = Connections::new(limits);
        let t = Instant::now();
        let slow = accepted(c.open(t));
        let quiet = accepted(c.open(t));
        let served = accepted(c.open(t));
        c.head_started(slow, t + S);
        c.busy(served);
        assert_eq!(c.poll_timeout(), Some(t + 3 * S));
        assert_eq!(c.poll_expired(t + 3 * S - Duration::from_nanos(1)), None);
        assert_eq!(
            c.poll_expired(t + 3 * S),
            Some((slow, Expiry::HeaderTimeout))
        );
        assert_eq!(c.poll_expired(t + 3 * S), None);
        assert_eq!(
            c.poll_expired(t + 10 * S),
            Some((quiet, Expiry::IdleTimeout))
        );
        assert_eq!(c.poll_timeout(), None, "a busy connection has no deadline");
        // After its response, it may wait the idle time again, from then.
        c.idle(served, t + 60 * S);
        assert_eq!(c.poll_timeout(), Some(t + 70 * S));
        let stats = c.stats();
        assert_eq!((stats.header_timeouts, stats.idle_timeouts), (1, 1));
    }

    #[test]
    fn a_log_line_comes_when_a_count_reaches_a_power_of_two() {
        let at = |shed, idle_timeouts| Stats {
            shed,
            idle_timeouts,
            ..Stats::default()
        };
        assert!(at(1, 0).log_line(&at(0, 0)).is_some());
        assert!(at(2, 0).log_line(&at(1, 0)).is_some());
        assert!(at(3, 0).log_line(&at(2, 0)).is_none());
        assert!(at(3, 5).log_line(&at(3, 3)).is_some(), "4 passed");
        assert!(at(3, 7).log_line(&at(3, 5)).is_none());
        assert!(at(0, 0).log_line(&at(0, 0)).is_none());
        let line = at(16, 0).log_line(&at(15, 0)).unwrap();
        assert!(line.contains("16 closed to make room"), "{line}");
    }

    #[test]
    fn closed_and_shed_connections_leave_nothing_behind() {
        let mut c = Connections::new(Limits::new().with_max_connections(2));
        let t = Instant::now();
        let a = accepted(c.open(t));
        let b = accepted(c.open(t));
        c.head_started(a, t);
        assert_eq!(c.shed(), Some(a), "the fd limit: the oldest not busy goes");
        c.close(b);
        c.close(b);
        c.busy(a);
        c.idle(a, t);
        c.head_started(a, t);
        assert!(c.is_empty());
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(c.shed(), None);
        assert!(c.deadlines.is_empty() && c.sheddable.is_empty());
    }
}
