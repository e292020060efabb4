//! Whether Redis is known to be down, and the probe that learns it is back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::Value;
use redis::aio::ConnectionManager;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::subscriber::Dirty;
use crate::{RedisEvent, RedisOptions, RedisStoreError};

/// Redis is up or known to be down. Down, the executor drops writes unsent (reads are
/// still tried), and the probe pings until Redis answers.
#[derive(Debug, Default)]
pub(crate) struct Health {
    down: AtomicBool,
    /// Wakes the probe when Redis goes down.
    notify: Notify,
    /// Wakes the liveness refresh when Redis is back.
    back: Notify,
    /// When Redis was last known to be back after being down.
    back_at: Mutex<Option<Instant>>,
}

impl Health {
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// Redis answered: if it was down, it is back (told once), the node's liveness is
    /// written again at once, and every follow catches up on what it may have missed.
    pub(crate) fn up(&self, options: &RedisOptions, dirty: &Dirty) {
        if self.down.swap(false, Ordering::AcqRel) {
            *self.back_at.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
            self.back.notify_one();
            options.tell(&RedisEvent::Recovered);
            dirty.mark_all();
        }
    }

    /// Whether Redis came back less than `within` ago: the other nodes may not have
    /// written their liveness again yet (an outage longer than its time to live, or a
    /// restart without data, loses it), so a missing key does not mean a dead node.
    pub(crate) fn recovering(&self, within: Duration) -> bool {
        self.back_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|at| at.elapsed() < within)
    }

    /// Resolves once Redis is back after being down (at once if it came back since the
    /// last call).
    pub(crate) async fn recovered(&self) {
        self.back.notified().await;
    }

    /// Redis is lost (a command's connection failed, or the subscriber's did): told
    /// once, and probed until it is back.
    pub(crate) fn down(&self, options: &RedisOptions, e: RedisStoreError) {
        if !self.down.swap(true, Ordering::AcqRel) {
            options.tell(&RedisEvent::Unavailable(e));
            self.notify.notify_one();
        }
    }
}

/// Pings Redis every probe interval while it is down, until it answers. The pings also
/// make the command connection reconnect, so that the first write after an outage does
/// not meet the dead connection. Never ends.
pub(crate) async fn probe(
    mut con: ConnectionManager,
    health: Arc<Health>,
    dirty: Arc<Dirty>,
    options: RedisOptions,
) {
    loop {
        health.notify.notified().await;
        while health.is_down() {
            tokio::time::sleep(options.probe_interval).await;
            let ping = redis::cmd("PING");
            let pong = ping.query_async::<Value>(&mut con);
            if let Ok(Ok(_)) = tokio::time::timeout(options.response_timeout, pong).await {
                health.up(&options, &dirty);
            }
        }
    }
}
