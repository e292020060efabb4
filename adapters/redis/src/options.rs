//! How a node uses Redis: [`RedisOptions`], and what it tells of it: [`RedisEvent`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::RedisStoreError;

/// A change in the node's use of Redis, told to [`RedisOptions::with_on_event`] (a CLI
/// logs it). Told on each change, not on each failed command.
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisEvent {
    /// Redis stopped answering the node's commands: reads fail (503), writes are
    /// dropped, until [`Recovered`](Self::Recovered).
    Unavailable(RedisStoreError),
    /// Redis answers again; every follow is caught up.
    Recovered,
    /// Redis refused some commands while the connection is fine (another program's
    /// keys under the prefix?). Told at most once per pipeline.
    CommandFailed(RedisStoreError),
    /// The subscriber's connection (notices and wake-ups) was lost; it reconnects.
    SubscriberLost(RedisStoreError),
    /// The subscriber is connected and subscribed again; every follow is caught up.
    SubscriberRecovered,
}

/// The longest duration an option takes: a deadline this far off never overflows the
/// clock.
const LONGEST: Duration = Duration::from_secs(365 * 24 * 3_600);

/// A duration of at least 1 ms and at most [`LONGEST`].
fn bounded(d: Duration) -> Duration {
    d.clamp(Duration::from_millis(1), LONGEST)
}

/// The callback of [`RedisOptions::with_on_event`].
type OnEvent = Arc<dyn Fn(&RedisEvent) + Send + Sync>;

/// How [`RedisStore`](crate::RedisStore) uses Redis. Every bound has a default; see
/// each method. Intervals and timeouts are taken between 1 ms and a year.
#[derive(Clone)]
pub struct RedisOptions {
    pub(crate) prefix: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) max_pipeline: usize,
    pub(crate) max_follows: usize,
    pub(crate) fetch_count: usize,
    pub(crate) max_replay: usize,
    pub(crate) probe_interval: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) keepalive: Duration,
    pub(crate) tombstone_ttl: Duration,
    pub(crate) liveness_ttl: Duration,
    pub(crate) liveness_every: Duration,
    pub(crate) on_event: Option<OnEvent>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl RedisOptions {
    /// The defaults: prefix `mcpwire`, 500 ms to connect, 1 s per round trip, 256 ops
    /// per pipeline, 10,000 follows, 1,024 entries per read, 16,384 frames per replay,
    /// a probe every 200 ms while Redis is down, subscriber backoff up to 1 s, a
    /// subscriber keep-alive every 5 s, tombstones kept an hour, and a liveness key
    /// living 3 s, refreshed every second.
    pub fn new() -> Self {
        Self {
            prefix: "mcpwire".to_owned(),
            connect_timeout: Duration::from_millis(500),
            response_timeout: Duration::from_secs(1),
            max_pipeline: 256,
            max_follows: 10_000,
            fetch_count: 1_024,
            max_replay: 16_384,
            probe_interval: Duration::from_millis(200),
            max_backoff: Duration::from_secs(1),
            keepalive: Duration::from_secs(5),
            tombstone_ttl: Duration::from_secs(3_600),
            liveness_ttl: Duration::from_secs(3),
            liveness_every: Duration::from_secs(1),
            on_event: None,
        }
    }

    /// The prefix of every key and channel (see the [crate docs](crate#key-schema)):
    /// nodes sharing sessions use the same one; other clusters on the same Redis use
    /// others.
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long one connection attempt may take (at start-up, and each reconnect).
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = bounded(timeout);
        self
    }

    /// How long one round trip may take, a read's second try included: the bound on how
    /// long a request waits for Redis before it is answered 503.
    #[must_use]
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = bounded(timeout);
        self
    }

    /// How many consecutive ops go to Redis in one pipeline (at least 1).
    #[must_use]
    pub fn with_max_pipeline(mut self, ops: usize) -> Self {
        self.max_pipeline = ops.max(1);
        self
    }

    /// How many follows (resumes of another node's stream) the node keeps at once;
    /// one more is refused as if Redis were unavailable (503).
    #[must_use]
    pub fn with_max_follows(mut self, follows: usize) -> Self {
        self.max_follows = follows;
        self
    }

    /// How many stream entries one `XRANGE` reads (at least 1); longer reads are paged.
    #[must_use]
    pub fn with_fetch_count(mut self, entries: usize) -> Self {
        self.fetch_count = entries.max(1);
        self
    }

    /// How many frames a follow's replay, or one wake-up of it, hands at most (at least
    /// 1): a replay stops there and the rest follows at once, so a follow never holds
    /// more than this in memory.
    #[must_use]
    pub fn with_max_replay(mut self, frames: usize) -> Self {
        self.max_replay = frames.max(1);
        self
    }

    /// How often Redis is pinged while it is down, to learn it is back.
    #[must_use]
    pub fn with_probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = bounded(interval);
        self
    }

    /// The longest wait between two reconnects of the subscriber (it starts at 50 ms
    /// and doubles).
    #[must_use]
    pub fn with_max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = bounded(backoff);
        self
    }

    /// How often the subscriber pings Redis to learn that a silent connection is dead.
    #[must_use]
    pub fn with_keepalive(mut self, interval: Duration) -> Self {
        self.keepalive = bounded(interval);
        self
    }

    /// How long a deleted session's tombstone keeps it from being written again (by a
    /// node that still holds a copy because the notice of the delete has not reached it;
    /// a node whose subscriber was away holds one until its idle time ends). Longer than
    /// the nodes' session idle time (30 min by default).
    #[must_use]
    pub fn with_tombstone_ttl(mut self, ttl: Duration) -> Self {
        self.tombstone_ttl = ttl;
        self
    }

    /// The node's liveness (see the [crate docs](crate#liveness)): its key lives `ttl`
    /// and is written again every `every`, and this node checks the writers of the rings
    /// it follows every `every` too. A node killed mid-stream is known to be gone at
    /// most `ttl` after its last refresh, and its followers learn it within one `every`
    /// more; a `ttl` too short for the refreshes' round trips (or a stalled node) makes
    /// a live writer look gone, ending its followers' connections. `every` is at least
    /// 1 ms, and `ttl` at least twice `every`; both at most a year.
    #[must_use]
    pub fn with_liveness(mut self, ttl: Duration, every: Duration) -> Self {
        self.liveness_every = bounded(every);
        self.liveness_ttl = bounded(ttl.max(self.liveness_every.saturating_mul(2)));
        self
    }

    /// Called on each change in the node's use of Redis ([`RedisEvent`]), from the
    /// driver's task: it must not block.
    #[must_use]
    pub fn with_on_event(mut self, on_event: impl Fn(&RedisEvent) + Send + Sync + 'static) -> Self {
        self.on_event = Some(Arc::new(on_event));
        self
    }

    /// Tells `event` to the callback, if any.
    pub(crate) fn tell(&self, event: &RedisEvent) {
        if let Some(on_event) = &self.on_event {
            on_event(event);
        }
    }
}

impl fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisOptions")
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("max_pipeline", &self.max_pipeline)
            .field("max_follows", &self.max_follows)
            .field("fetch_count", &self.fetch_count)
            .field("max_replay", &self.max_replay)
            .field("probe_interval", &self.probe_interval)
            .field("max_backoff", &self.max_backoff)
            .field("keepalive", &self.keepalive)
            .field("tombstone_ttl", &self.tombstone_ttl)
            .field("liveness_ttl", &self.liveness_ttl)
            .field("liveness_every", &self.liveness_every)
            .field("on_event", &self.on_event.is_some())
            .finish()
    }
}
