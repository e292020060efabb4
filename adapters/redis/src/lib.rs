//! The shared store of mcpwire cluster nodes, on Redis.
//!
//! A server configured as a node of a cluster
//! ([`Config::with_node`](mcpwire::server::Config::with_node)) keeps its sessions' records,
//! the frames of its resumable streams, and its notices to the other nodes in a store it
//! never touches itself: it emits [`StoreOp`](mcpwire::server::StoreOp)s and takes
//! [`StoreInput`](mcpwire::server::StoreInput)s (the contract is in
//! [`mcpwire::server::cluster`]). [`RedisStore`] performs that contract on Redis for a
//! [`McpService`](mcpwire_tokio::server::McpService):
//!
//! ```no_run
//! # async fn node(service: mcpwire_tokio::server::McpService) -> Result<(), mcpwire_redis::RedisStoreError> {
//! use mcpwire_redis::{RedisOptions, RedisStore};
//!
//! let store = RedisStore::connect("redis://127.0.0.1:6379", RedisOptions::new()).await?;
//! tokio::spawn(store.run(service.store_link()));
//! # Ok(()) }
//! ```
//!
//! # Key schema
//!
//! With the key prefix `{p}` ([`RedisOptions::with_prefix`], `mcpwire` by default), a
//! session id `{sid}` (32 lowercase hex digits) and a ring written `{ring}` =
//! `{epoch_hex}:{ring_hex}` (as [`RingKey`](mcpwire::server::RingKey) displays it, and as
//! the ring's event ids begin):
//!
//! | Key or channel | Type | What |
//! |---|---|---|
//! | `{p}:s:{sid}` | string | The session's record (opaque to the driver). `SET … PX ttl` unless the session has a tombstone; a touch is `PEXPIRE`. |
//! | `{p}:r:{sid}:{ring}` | stream | A ring. Frame `k` is entry `(k+1)-0`, one field `f` holding the SSE frame; `XADD … MAXLEN ~ keep`, then `PEXPIRE ttl`. A finished ring ends with the entry `{next}-1` (it sorts after the last frame, `{next}-0`), one field `end`. |
//! | `{p}:gone:{sid}` | string | The tombstone of a deleted session ([`RedisOptions::with_tombstone_ttl`], an hour by default): a record written after the delete (by a node that has not heard of it yet) is refused, so a deleted session never comes back. |
//! | `{p}:rings:{sid}` | set | The session's ring keys (`SADD` on every append), so that a touch reaches every ring and a delete removes them all. |
//! | `{p}:node:{epoch_hex}` | string | A node's liveness: one key per epoch of its event ids (one per shard, [`StoreLink::epochs`](mcpwire_tokio::server::StoreLink::epochs)), the epoch as its rings write it. `SET … PX ttl` every [`RedisOptions::with_liveness`] interval while [`RedisStore::run`] runs; deleted when it ends. |
//! | `{p}:state-key` | string | The key that seals the `requestState` of multi round-trip requests, 32 bytes, the same on every node ([`RedisStore::state_key`]): `SET NX` by the first node to ask, no expiry; written back (`SET NX`) with every liveness refresh, should Redis lose it. |
//! | `{p}:notices` | channel | Every node's notices, to every node (the publisher included). |
//! | `{p}:w:{sid}:{ring}` | channel | Wake-ups of a ring's followers: published after an append or a finish that says `announce`, and for a wake. The message is empty: a follower reads the ring itself. |
//!
//! A put, a touch and a delete are Lua scripts (`EVAL`) that reach the ring keys listed in the
//! set: fine on a standalone Redis (or a replicated one), not on Redis Cluster, whose
//! scripts may only touch the keys they declare. Redis 6.2 or newer is needed
//! (`XADD NOMKSTREAM`).
//!
//! # How the work is done
//!
//! One executor performs the ops in the order the link gives them: consecutive ops are
//! sent as one pipeline (not a transaction; at most
//! [`RedisOptions::with_max_pipeline`] of them) in one round trip, in order. Writes get
//! no answer. A session load is a `GET`. A follow first subscribes to the ring's wake
//! channel, and waits until Redis confirmed it (or the subscriber is reconnecting, which
//! catches every follow up afterwards), before the node's next op runs: the core follows
//! a ring and then publishes its take-over, whose wake-up the follower must not miss.
//! It then reads the ring after the client's id (`XRANGE`, paged by
//! [`RedisOptions::with_fetch_count`]), answers the replay of the run after the last
//! hole, and from then on reads the ring again on each wake-up.
//!
//! A second connection, the subscriber, listens to the notices and to the wake channels
//! of the rings this node follows. When it is lost it reconnects by itself (with
//! backoff), subscribes again, and every follow is caught up from the ring, since
//! messages published meanwhile are lost.
//!
//! # Liveness
//!
//! A node killed mid-stream leaves rings that will never finish; their followers must
//! learn it rather than wait. While [`RedisStore::run`] runs, it writes the node's
//! liveness keys (before any other work, then every
//! [`RedisOptions::with_liveness`] interval, and at once when Redis is back after an
//! outage), each living the liveness time to live (3 s and every second by default).
//! When the service is gone and `run` returns, it deletes them; a node whose driver is
//! aborted or whose process dies lets them expire.
//!
//! - A follow of a ring without an end marker whose writer's key is missing is refused
//!   ([`StoreInput::WriterGone`](mcpwire::server::StoreInput::WriterGone) instead of the
//!   replay: the core answers the resume 400, saying the node stopped). The key is read
//!   in the same transaction as the ring. A finished ring is replayed whoever wrote it.
//! - Every interval, the node checks the writers of the rings it follows: one `EXISTS`
//!   per writer epoch, in one round trip. A follow whose writer is gone is caught up on
//!   the ring (its stored frames, and its end if it has one), then told the writer is
//!   gone, and forgotten: its connection ends after the stored frames.
//! - The node's own rings are alive by definition: their liveness is never read.
//! - Neither a failed check nor a key missing within one time to live after Redis came
//!   back counts as a death (an outage longer than the time to live, or a restart
//!   without data, loses every key until the nodes write theirs again); the next check
//!   decides.
//!
//! # When Redis is lost
//!
//! Reads fail fast: each round trip is bounded by
//! [`RedisOptions::with_response_timeout`], and a read that meets a broken connection is
//! tried once more (the first command after a reconnect failure gets the stale error).
//! The core answers the request that needed it 503 with a JSON-RPC error. Writes are
//! dropped, and while Redis is known to be down they are not even tried, so nothing
//! queues behind them: a lost append leaves a hole in the ring, which a follower reports
//! as a gap (nothing half-written is ever replayed). A probe pings Redis until it answers
//! again; then every follow is caught up. The subscriber losing its connection counts as
//! Redis lost too (a restart drops every connection): the probe then reconnects the
//! command connection before the next write, which would otherwise meet the dead one.
//! Nothing blocks the node, and nothing needs a restart.
//!
//! # Bounds
//!
//! A pipeline holds at most [`RedisOptions::with_max_pipeline`] ops (a liveness check,
//! at most one `EXISTS` per followed ring); a node holds at most
//! [`RedisOptions::with_max_follows`] follows (one more is answered 503); a replay,
//! or one feed of a follow, holds at most [`RedisOptions::with_max_replay`] frames (and
//! one page of [`RedisOptions::with_fetch_count`] entries). Wake-ups are not queued:
//! a set of the rings that spoke, at most one entry per followed ring. The queues that
//! are not this crate's: the link's op channel (the adapter's: the work the traffic
//! makes), and redis-rs's channel of pub/sub messages, which the subscriber drains as
//! they come (a subscriber too slow is cut by Redis's own output buffer limit, then
//! reconnects and catches up).
//!
//! The driver writes nothing to stdout or stderr: what happens to the connection is told
//! to [`RedisOptions::with_on_event`], if set.

mod driver;
mod error;
mod health;
mod keys;
mod liveness;
mod options;
mod subscriber;

pub use driver::RedisStore;
pub use error::RedisStoreError;
pub use options::{RedisEvent, RedisOptions};
