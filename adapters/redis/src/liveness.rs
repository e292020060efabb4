//! The node's liveness: one key per epoch of its event ids, written again and again
//! while the driver runs, so that the followers of its rings on other nodes learn when
//! it is gone (see the [crate docs](crate#liveness)).

use std::sync::Arc;

use mcpwire::resume::Epoch;
use redis::aio::ConnectionManager;
use redis::{Pipeline, Value};
use tokio::time::{Instant, MissedTickBehavior};

use crate::health::Health;
use crate::keys::{self, Keys};
use crate::subscriber::Dirty;
use crate::{RedisEvent, RedisOptions, RedisStoreError};

/// Writes and deletes the liveness keys of a node's epochs.
pub(crate) struct Liveness {
    con: ConnectionManager,
    /// `host:port` of Redis, for errors.
    addr: String,
    /// `{p}:node:{epoch_hex}` of each own epoch, once each (as many as the shards).
    keys: Vec<String>,
    /// `{p}:state-key` and this node's shared `requestState` key, if it asked for one:
    /// written back whenever Redis lost it.
    state_key: Option<(String, [u8; 32])>,
    health: Arc<Health>,
    dirty: Arc<Dirty>,
    options: RedisOptions,
}

impl Liveness {
    pub(crate) fn new(
        con: ConnectionManager,
        addr: String,
        names: &Keys,
        epochs: &[Epoch],
        health: Arc<Health>,
        dirty: Arc<Dirty>,
        options: RedisOptions,
    ) -> Self {
        let mut keys: Vec<String> = epochs.iter().map(|e| names.node(*e)).collect();
        keys.sort_unstable();
        keys.dedup();
        Self {
            con,
            addr,
            keys,
            state_key: None,
            health,
            dirty,
            options,
        }
    }

    /// Also keeps `key`, the shared `requestState` key, in Redis under `name`.
    pub(crate) fn with_state_key(mut self, name: String, key: [u8; 32]) -> Self {
        self.state_key = Some((name, key));
        self
    }

    /// Writes every key (`SET … PX ttl`), and the shared `requestState` key if missing
    /// (`SET NX`), within the response timeout. Redis lost is
    /// told as any command's failure would tell it (and the probe learns when it is
    /// back, which writes them again at once); Redis answering says it is up.
    pub(crate) async fn refresh(&mut self) {
        if self.keys.is_empty() && self.state_key.is_none() {
            return;
        }
        let ttl = keys::millis(self.options.liveness_ttl);
        let mut pipe = redis::pipe();
        for key in &self.keys {
            pipe.cmd("SET").arg(key).arg("1").arg("PX").arg(ttl);
        }
        if let Some((name, key)) = &self.state_key {
            pipe.cmd("SET").arg(name).arg(&key[..]).arg("NX");
        }
        match self.query(&pipe).await {
            Ok(()) => self.health.up(&self.options, &self.dirty),
            Err(e) if e.is_connection_error() => self.health.down(&self.options, e),
            Err(e) => self.options.tell(&RedisEvent::CommandFailed(e)),
        }
    }

    /// Refreshes every [`RedisOptions::with_liveness`] interval, and at once when Redis
    /// is back after an outage (which may have let the keys expire). A failed refresh is
    /// simply tried again at the next one. Never ends.
    pub(crate) async fn run(&mut self) {
        let every = self.options.liveness_every;
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let health = Arc::clone(&self.health);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = health.recovered() => {}
            }
            self.refresh().await;
        }
    }

    /// Deletes every key, best effort and within the response timeout: the node is
    /// leaving cleanly, and its followers need not wait for the keys to expire.
    pub(crate) async fn clear(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        pipe.cmd("DEL").arg(&self.keys);
        let _ = self.query(&pipe).await;
    }

    /// One round trip within the response timeout; an error reply is an error.
    async fn query(&mut self, pipe: &Pipeline) -> Result<(), RedisStoreError> {
        let within = self.options.response_timeout;
        match tokio::time::timeout(within, pipe.query_async::<Vec<Value>>(&mut self.con)).await {
            Err(_) => Err(RedisStoreError::TimedOut {
                addr: self.addr.clone(),
                after: within,
            }),
            Ok(Err(e)) => Err(RedisStoreError::Command(e)),
            Ok(Ok(_)) => Ok(()),
        }
    }
}
