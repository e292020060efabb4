//! [`RedisStore`]: the connections, and the executor that performs a node's store work
//! in order.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use mcpwire::app::StateKey;
use mcpwire::resume::{Epoch, EventId, Replay};
use mcpwire::server::{RingKey, StoreInput, StoreOp, StoreUnavailable, StreamId};
use mcpwire_tokio::server::{StoreHandle, StoreLink};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSub};
use redis::{Pipeline, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Duration, Instant, MissedTickBehavior};

use crate::health::{self, Health};
use crate::keys::{
    self, DELETE_SCRIPT, END_FIELD, Entry, EntryId, FRAME_FIELD, Keys, PUT_SCRIPT, Run,
    STATE_KEY_SCRIPT, TOUCH_SCRIPT,
};
use crate::liveness::Liveness;
use crate::subscriber::{Command, Dirty, Subscriber};
use crate::{RedisEvent, RedisOptions, RedisStoreError};

/// How many commands wait for the subscriber: the executor waits for each subscription
/// it asks, so only unsubscriptions ever queue.
const COMMANDS: usize = 64;

/// How many entries a follow's first read takes from the end of the ring, to find its
/// last frame past an end marker.
const TAIL: usize = 3;

/// Reconnects of the command connection: few and quick, so that a command meeting a
/// dead Redis fails within about 0.3 s instead of waiting out a long series.
const RECONNECT_RETRIES: usize = 2;
const RECONNECT_MIN_DELAY: Duration = Duration::from_millis(50);
const RECONNECT_MAX_DELAY: Duration = Duration::from_millis(250);

/// A node's shared store on Redis: connected by [`connect`](Self::connect), driven by
/// [`run`](Self::run).
pub struct RedisStore {
    client: redis::Client,
    addr: String,
    con: ConnectionManager,
    pubsub: PubSub,
    keys: Keys,
    options: RedisOptions,
    /// The shared `requestState` key, once [`state_key`](Self::state_key) read it: the
    /// liveness writes it back (if missing) with every refresh.
    state_key: Option<[u8; 32]>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("addr", &self.addr)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to Redis at `url` (`redis://[user:password@]host:port[/db]`): the
    /// command connection, which `PING`s, and the subscriber's, subscribed to the
    /// notices. An unreachable Redis is an error at once (within a few connect
    /// timeouts), never a retry loop: a node does not start without its store.
    ///
    /// # Errors
    ///
    /// [`RedisStoreError::InvalidUrl`], [`RedisStoreError::Unreachable`] (refused,
    /// unknown host, authentication failed), [`RedisStoreError::TimedOut`].
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, RedisStoreError> {
        let client = redis::Client::open(url).map_err(RedisStoreError::InvalidUrl)?;
        let addr = client.get_connection_info().addr().to_string();
        let unreachable = |source| RedisStoreError::Unreachable {
            addr: addr.clone(),
            source,
        };
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(RECONNECT_RETRIES)
            .set_min_delay(RECONNECT_MIN_DELAY)
            .set_max_delay(RECONNECT_MAX_DELAY)
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout));
        // The first connect makes its own attempts: bound them all.
        let attempts = u32::try_from(RECONNECT_RETRIES + 1).unwrap_or(u32::MAX);
        let within = (options.connect_timeout + RECONNECT_MAX_DELAY) * attempts;
        let timed_out = |after| RedisStoreError::TimedOut {
            addr: addr.clone(),
            after,
        };
        let mut con =
            tokio::time::timeout(within, client.get_connection_manager_with_config(config))
                .await
                .map_err(|_| timed_out(within))?
                .map_err(unreachable)?;
        let ping = redis::cmd("PING");
        let pong = ping.query_async::<Value>(&mut con);
        tokio::time::timeout(options.response_timeout, pong)
            .await
            .map_err(|_| timed_out(options.response_timeout))?
            .map_err(unreachable)?;
        let mut pubsub = tokio::time::timeout(options.connect_timeout, client.get_async_pubsub())
            .await
            .map_err(|_| timed_out(options.connect_timeout))?
            .map_err(unreachable)?;
        let keys = Keys::new(&options.prefix);
        tokio::time::timeout(options.response_timeout, pubsub.subscribe(keys.notices()))
            .await
            .map_err(|_| timed_out(options.response_timeout))?
            .map_err(unreachable)?;
        Ok(Self {
            client,
            addr,
            con,
            pubsub,
            keys,
            options,
            state_key: None,
        })
    }

    /// The key that seals the `requestState` of multi round-trip requests (MODERN-23),
    /// the same on every node of this Redis (and prefix), so that a retry may reach any
    /// node: the first node to ask stores a key drawn from `entropy` under
    /// `{p}:state-key` (`SET NX`, without expiry), and every node reads the stored one.
    /// Give it to the application layer
    /// ([`Settings::with_state_key`](mcpwire::app::Settings::with_state_key)) before the
    /// node serves. While [`run`](Self::run) runs, the node writes it back whenever it
    /// is missing (a Redis restarted without its data), with its liveness.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect) when Redis does not answer;
    /// [`RedisStoreError::Unexpected`] when the stored value is not a 32-byte key.
    pub async fn state_key(
        &mut self,
        entropy: &mut dyn mcpwire::Entropy,
    ) -> Result<StateKey, RedisStoreError> {
        let mut candidate = [0; 32];
        entropy.fill(&mut candidate);
        let mut script = redis::cmd("EVAL");
        script
            .arg(STATE_KEY_SCRIPT)
            .arg(1)
            .arg(self.keys.state_key())
            .arg(&candidate[..]);
        let within = self.options.response_timeout;
        let stored = tokio::time::timeout(within, script.query_async::<Value>(&mut self.con))
            .await
            .map_err(|_| RedisStoreError::TimedOut {
                addr: self.addr.clone(),
                after: within,
            })?
            .map_err(RedisStoreError::Command)?;
        let bytes = match stored {
            Value::BulkString(bytes) => <[u8; 32]>::try_from(bytes.as_slice()).ok(),
            _ => None,
        }
        .ok_or(RedisStoreError::Unexpected(
            "the shared requestState key is not a 32-byte string",
        ))?;
        self.state_key = Some(bytes);
        Ok(StateKey::new(bytes))
    }

    /// `host:port` of the Redis it uses (no credentials).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Performs the store work of `link`'s service (from
    /// [`McpService::store_link`](mcpwire_tokio::server::McpService::store_link)) until
    /// the service is gone; spawn it. Redis lost meanwhile does not end it: it serves
    /// what it can and recovers by itself (see the [crate docs](crate#when-redis-is-lost)).
    /// While it runs it keeps the node's liveness keys, and deletes them when it ends
    /// (see the [crate docs](crate#liveness)); a node whose task is aborted (or whose
    /// process is killed) leaves them to expire, and its followers then learn it is gone.
    pub async fn run(self, link: StoreLink) {
        let Self {
            client,
            addr,
            con,
            pubsub,
            keys,
            options,
            state_key,
        } = self;
        let StoreLink {
            epochs,
            ops,
            handle,
        } = link;
        let dirty = Arc::new(Dirty::default());
        let health = Arc::new(Health::default());
        let mut liveness = Liveness::new(
            con.clone(),
            addr.clone(),
            &keys,
            &epochs,
            Arc::clone(&health),
            Arc::clone(&dirty),
            options.clone(),
        );
        if let Some(key) = state_key {
            liveness = liveness.with_state_key(keys.state_key(), key);
        }
        // Alive before any work is done: a follower of a ring of this node never finds
        // the ring before the liveness.
        liveness.refresh().await;
        let (commands, commands_rx) = mpsc::channel(COMMANDS);
        let subscriber = Subscriber::new(
            client,
            addr.clone(),
            keys.notices(),
            handle.clone(),
            Arc::clone(&dirty),
            Arc::clone(&health),
            options.clone(),
        );
        let probe = health::probe(
            con.clone(),
            Arc::clone(&health),
            Arc::clone(&dirty),
            options.clone(),
        );
        let mut executor = Executor {
            con,
            addr,
            keys,
            options,
            handle,
            commands,
            dirty,
            health,
            own: epochs.into_iter().collect(),
            follows: HashMap::new(),
            rings: HashMap::new(),
        };
        // One task: the executor, the subscriber, the probe and the liveness take turns;
        // when the executor ends (the service is gone), so do the others.
        tokio::select! {
            () = executor.run(ops) => {}
            () = subscriber.run(pubsub, commands_rx) => {}
            () = probe => {}
            () = liveness.run() => {}
        }
        // The service is gone: so is the node, cleanly.
        liveness.clear().await;
    }
}

/// One follow: the wake channel of its ring, and the next frame it is owed.
#[derive(Debug)]
struct Follow {
    channel: Arc<str>,
    next: u64,
    /// The ring's writer is gone: once it has every frame stored, the follow is told
    /// so ([`StoreInput::WriterGone`]) and forgotten, unless the ring ends first.
    orphaned: bool,
}

/// A ring this node follows, by its wake channel.
#[derive(Debug)]
struct Followed {
    key: String,
    ring: RingKey,
    followers: BTreeSet<(usize, StreamId)>,
}

/// A session load in a pipeline: who asked, and where its answer is.
#[derive(Debug)]
struct Load {
    shard: usize,
    session: Arc<str>,
    key: String,
    at: usize,
}

/// Ops gathered for one round trip.
struct Batch {
    pipe: Pipeline,
    loads: Vec<Load>,
}

impl Batch {
    fn new() -> Self {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        Self {
            pipe,
            loads: Vec::new(),
        }
    }
}

/// What a follow's first read found after the client's id.
#[derive(Debug, Default)]
struct Window {
    /// The ring exists (else: [`Replay::UnknownRing`]).
    exists: bool,
    /// The run after the last hole.
    run: Run,
    /// The sequence number after the ring's last frame, for an empty run.
    tail_next: u64,
    /// Where the ring is finished, if the read found it.
    end: Option<u64>,
    /// The ring has an end marker (in the read, or at its tail).
    finished: bool,
    /// The ring's writer's liveness key exists (or was not asked for: this node is the
    /// writer).
    writer_alive: bool,
    /// The read reached the end of the ring (else it stopped at the replay bound).
    complete: bool,
}

impl Window {
    /// The sequence number after the window.
    fn next(&self) -> u64 {
        if self.run.frames.is_empty() {
            self.tail_next
        } else {
            self.run.next()
        }
    }
}

/// Performs the ops in order, answers the reads, and feeds the follows.
struct Executor {
    con: ConnectionManager,
    addr: String,
    keys: Keys,
    options: RedisOptions,
    handle: StoreHandle,
    commands: mpsc::Sender<Command>,
    dirty: Arc<Dirty>,
    health: Arc<Health>,
    /// This node's epochs: the writers of its own rings, alive by definition.
    own: HashSet<Epoch>,
    /// At most [`RedisOptions::with_max_follows`].
    follows: HashMap<(usize, StreamId), Follow>,
    /// The rings of the follows, by wake channel (as many as the follows, at most).
    rings: HashMap<Arc<str>, Followed>,
}

impl Executor {
    async fn run(&mut self, mut ops: mpsc::UnboundedReceiver<(usize, StoreOp)>) {
        let dirty = Arc::clone(&self.dirty);
        let mut batch = Vec::with_capacity(self.options.max_pipeline);
        let every = self.options.liveness_every;
        let mut check = tokio::time::interval_at(Instant::now() + every, every);
        check.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = check.tick() => self.check_writers().await,
                op = ops.recv() => {
                    let Some(op) = op else {
                        return;
                    };
                    batch.push(op);
                    while batch.len() < self.options.max_pipeline {
                        match ops.try_recv() {
                            Ok(op) => batch.push(op),
                            Err(_) => break,
                        }
                    }
                    self.perform(&mut batch).await;
                }
                () = dirty.notify.notified() => {}
            }
            self.catch_up().await;
        }
    }

    /// Performs `ops` in order: runs of writes and loads in one pipeline each; a follow
    /// alone, after what came before it.
    async fn perform(&mut self, ops: &mut Vec<(usize, StoreOp)>) {
        let mut batch = Batch::new();
        for (shard, op) in ops.drain(..) {
            match op {
                StoreOp::Follow {
                    stream,
                    session,
                    after,
                } => {
                    self.flush(std::mem::replace(&mut batch, Batch::new()))
                        .await;
                    self.follow(shard, stream, session, after).await;
                }
                StoreOp::Unfollow { stream } => self.forget((shard, stream)).await,
                op => self.queue(&mut batch, shard, op),
            }
        }
        self.flush(batch).await;
    }

    /// Adds a write or a load to the pipeline.
    fn queue(&self, batch: &mut Batch, shard: usize, op: StoreOp) {
        let pipe = &mut batch.pipe;
        match op {
            StoreOp::PutSession {
                session,
                record,
                ttl,
            } => {
                pipe.cmd("EVAL")
                    .arg(PUT_SCRIPT)
                    .arg(2)
                    .arg(self.keys.record(&session))
                    .arg(self.keys.tombstone(&session))
                    .arg(&record[..])
                    .arg(keys::millis(ttl));
            }
            StoreOp::TouchSession { session, ttl } => {
                pipe.cmd("EVAL")
                    .arg(TOUCH_SCRIPT)
                    .arg(2)
                    .arg(self.keys.record(&session))
                    .arg(self.keys.rings(&session))
                    .arg(keys::millis(ttl));
            }
            StoreOp::LoadSession { session } => {
                let key = self.keys.record(&session);
                batch.loads.push(Load {
                    shard,
                    session,
                    key: key.clone(),
                    at: pipe.len(),
                });
                pipe.cmd("GET").arg(key);
            }
            StoreOp::DeleteSession { session } => {
                pipe.cmd("EVAL")
                    .arg(DELETE_SCRIPT)
                    .arg(3)
                    .arg(self.keys.record(&session))
                    .arg(self.keys.rings(&session))
                    .arg(self.keys.tombstone(&session))
                    .arg(keys::millis(self.options.tombstone_ttl));
            }
            StoreOp::Append {
                session,
                id,
                frame,
                keep,
                ttl,
                announce,
            } => {
                // The one sequence number no entry id can hold: a lost write (a hole).
                let Some(entry) = EntryId::frame(id.seq()) else {
                    return;
                };
                let ring = RingKey::of(id);
                let key = self.keys.ring(&session, ring);
                let rings = self.keys.rings(&session);
                let ttl = keys::millis(ttl);
                pipe.cmd("XADD")
                    .arg(&key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(keep.max(1))
                    .arg(entry.to_string())
                    .arg(FRAME_FIELD)
                    .arg(&frame[..]);
                pipe.cmd("PEXPIRE").arg(&key).arg(ttl);
                pipe.cmd("SADD").arg(&rings).arg(&key);
                pipe.cmd("PEXPIRE").arg(&rings).arg(ttl);
                if announce {
                    pipe.cmd("PUBLISH")
                        .arg(self.keys.wake(&session, ring))
                        .arg("");
                }
            }
            StoreOp::Wake { session, ring } => {
                pipe.cmd("PUBLISH")
                    .arg(self.keys.wake(&session, ring))
                    .arg("");
            }
            StoreOp::Finish {
                session,
                ring,
                next,
                announce,
            } => {
                // NOMKSTREAM: a ring gone (expired, deleted) is not made again, without
                // a time to live.
                pipe.cmd("XADD")
                    .arg(self.keys.ring(&session, ring))
                    .arg("NOMKSTREAM")
                    .arg(EntryId::end(next).to_string())
                    .arg(END_FIELD)
                    .arg("");
                if announce {
                    pipe.cmd("PUBLISH")
                        .arg(self.keys.wake(&session, ring))
                        .arg("");
                }
            }
            StoreOp::Publish { notice } => {
                pipe.cmd("PUBLISH")
                    .arg(self.keys.notices())
                    .arg(&notice[..]);
            }
            // Not pipelined (see `perform`).
            StoreOp::Follow { .. } | StoreOp::Unfollow { .. } => {}
        }
    }

    /// Sends the pipeline and answers its loads. While Redis is known to be down, the
    /// writes are dropped unsent and only the loads go (each tried twice): a request
    /// waits for its own read, never for writes queued before it.
    async fn flush(&mut self, batch: Batch) {
        if batch.pipe.is_empty() {
            return;
        }
        let deadline = Instant::now() + self.options.response_timeout;
        let mut values = None;
        if !self.health.is_down() {
            match self.query(&batch.pipe, deadline).await {
                Ok(got) => {
                    self.up();
                    if let Some(Value::ServerError(e)) =
                        got.iter().find(|v| matches!(v, Value::ServerError(_)))
                    {
                        let e = RedisStoreError::Command(redis::RedisError::from(e.clone()));
                        self.options.tell(&RedisEvent::CommandFailed(e));
                    }
                    values = Some(got);
                }
                Err(e) => self.fault(e),
            }
        }
        let answers: Vec<Result<Option<Vec<u8>>, StoreUnavailable>> = match values {
            Some(mut values) => batch
                .loads
                .iter()
                .map(|load| record(values.get_mut(load.at).map(std::mem::take)))
                .collect(),
            None if batch.loads.is_empty() => return,
            None => {
                let mut reads = redis::pipe();
                reads.ignore_errors();
                for load in &batch.loads {
                    reads.cmd("GET").arg(&load.key);
                }
                match self.read(&reads, deadline).await {
                    Ok(mut values) => (0..batch.loads.len())
                        .map(|at| record(values.get_mut(at).map(std::mem::take)))
                        .collect(),
                    Err(_) => vec![Err(StoreUnavailable); batch.loads.len()],
                }
            }
        };
        for (load, answer) in batch.loads.iter().zip(answers) {
            let record = answer.as_ref().map(|r| r.as_deref()).map_err(|e| *e);
            self.handle.input(
                load.shard,
                StoreInput::Session {
                    session: &load.session,
                    record,
                },
            );
        }
    }

    /// One round trip within `deadline`; its replies, one per command.
    async fn query(
        &self,
        pipe: &Pipeline,
        deadline: Instant,
    ) -> Result<Vec<Value>, RedisStoreError> {
        let mut con = self.con.clone();
        match tokio::time::timeout_at(deadline, pipe.query_async::<Vec<Value>>(&mut con)).await {
            Err(_) => Err(RedisStoreError::TimedOut {
                addr: self.addr.clone(),
                after: self.options.response_timeout,
            }),
            Ok(Err(e)) => Err(RedisStoreError::Command(e)),
            Ok(Ok(values)) if values.len() == pipe.len() => Ok(values),
            Ok(Ok(_)) => Err(RedisStoreError::Unexpected(
                "one reply per pipelined command",
            )),
        }
    }

    /// A read: tried once more if the connection failed (the first command after a
    /// failed reconnect gets the stale error and starts a new one), both within
    /// `deadline`.
    async fn read(
        &mut self,
        pipe: &Pipeline,
        deadline: Instant,
    ) -> Result<Vec<Value>, RedisStoreError> {
        let mut result = self.query(pipe, deadline).await;
        if let Err(e) = &result
            && e.is_connection_error()
            && !matches!(e, RedisStoreError::TimedOut { .. })
        {
            result = self.query(pipe, deadline).await;
        }
        match result {
            Ok(values) => {
                self.up();
                Ok(values)
            }
            Err(e) => {
                self.fault(e.clone());
                Err(e)
            }
        }
    }

    /// Redis answered: if it was down, it is back, and every follow catches up.
    fn up(&self) {
        self.health.up(&self.options, &self.dirty);
    }

    /// A round trip failed: a lost connection marks Redis down (told once, and probed
    /// until it is back); another error is told as such.
    fn fault(&self, e: RedisStoreError) {
        if e.is_connection_error() {
            self.health.down(&self.options, e);
        } else {
            self.options.tell(&RedisEvent::CommandFailed(e));
        }
    }

    /// Hands `input` to shard `shard`'s core.
    fn input(&self, shard: usize, input: StoreInput<'_>) {
        // `false`: the service is gone, and the link's channel closes with it.
        let _ = self.handle.input(shard, input);
    }

    /// A follow: subscribed to its ring's wake channel first, then its replay, then it
    /// is fed on every wake-up (or ends at once if the ring is finished already).
    async fn follow(&mut self, shard: usize, stream: StreamId, session: Arc<str>, after: EventId) {
        let id = (shard, stream);
        if self.follows.len() >= self.options.max_follows || self.follows.contains_key(&id) {
            let replay = Err(StoreUnavailable);
            return self.input(shard, StoreInput::Replayed { stream, replay });
        }
        let ring = RingKey::of(after);
        let channel: Arc<str> = self.keys.wake(&session, ring).into();
        if !self.rings.contains_key(&channel) {
            self.subscribe(Arc::clone(&channel)).await;
            self.rings.insert(
                Arc::clone(&channel),
                Followed {
                    key: self.keys.ring(&session, ring),
                    ring,
                    followers: BTreeSet::new(),
                },
            );
        }
        let key = self
            .rings
            .get(&channel)
            .map(|r| r.key.clone())
            .unwrap_or_default();
        // The writer's liveness, read with the ring: a ring of this node needs none.
        let writer = (!self.own.contains(&ring.epoch)).then(|| self.keys.node(ring.epoch));
        let window = self.window(&key, after, writer.as_deref()).await;
        let mut registered = false;
        match window {
            Err(_) => self.input(
                shard,
                StoreInput::Replayed {
                    stream,
                    replay: Err(StoreUnavailable),
                },
            ),
            // The writer is gone and the ring will never finish: the resume is refused,
            // unless Redis is just back (the writer may not have written its key again).
            Ok(window)
                if window.exists
                    && !window.finished
                    && !window.writer_alive
                    && !self.health.recovering(self.options.liveness_ttl) =>
            {
                self.input(shard, StoreInput::WriterGone { stream });
            }
            Ok(window) => {
                let replay = if !window.exists {
                    Replay::UnknownRing
                } else if window.run.frames.is_empty() {
                    Replay::from_window(after, ring.event(window.tail_next), &[])
                } else {
                    Replay::from_window(after, ring.event(window.run.first), &window.run.frames)
                };
                // What the follow is owed next, if it goes on.
                let owed = matches!(replay, Replay::Frames(_) | Replay::UpToDate)
                    .then(|| window.next().max(after.seq().saturating_add(1)));
                self.input(
                    shard,
                    StoreInput::Replayed {
                        stream,
                        replay: Ok(replay),
                    },
                );
                match (owed, window.end) {
                    (Some(next), Some(end)) if window.complete && next >= end => {
                        self.input(shard, StoreInput::FollowEnded { stream, next: end });
                    }
                    (Some(next), _) => {
                        self.follows.insert(
                            id,
                            Follow {
                                channel: Arc::clone(&channel),
                                next,
                                orphaned: false,
                            },
                        );
                        if let Some(ring) = self.rings.get_mut(&channel) {
                            ring.followers.insert(id);
                        }
                        registered = true;
                        if !window.complete {
                            // The replay stopped at its bound: the rest follows now.
                            self.feed(id).await;
                        }
                    }
                    (None, _) => {}
                }
            }
        }
        if !registered {
            self.release(&channel).await;
        }
    }

    /// Asks the subscriber to subscribe to `channel` and waits until it did (or knows
    /// it will on its next connection, after which every follow catches up).
    async fn subscribe(&mut self, channel: Arc<str>) {
        let (ack, acked) = oneshot::channel();
        if self
            .commands
            .send(Command::Subscribe(channel, ack))
            .await
            .is_err()
        {
            return;
        }
        // The subscriber answers within its response timeout; should it not, it reads
        // the ring again once subscribed (it sees this wait was given up).
        let _ = tokio::time::timeout(self.options.response_timeout * 2, acked).await;
    }

    /// Reads ring `key` after `after`: `EXISTS`, the tail (for the ring's last frame and
    /// its end marker), the first page, and whether liveness key `writer` exists (if
    /// given), in one transaction, so that they agree; then more pages, up to the replay
    /// bound.
    async fn window(
        &mut self,
        key: &str,
        after: EventId,
        writer: Option<&str>,
    ) -> Result<Window, RedisStoreError> {
        let count = self.options.fetch_count;
        let deadline = Instant::now() + self.options.response_timeout;
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("EXISTS").arg(key);
        pipe.cmd("XREVRANGE")
            .arg(key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(TAIL);
        if let Some(writer) = writer {
            pipe.cmd("EXISTS").arg(writer);
        }
        let wanted = after.seq().checked_add(1);
        if let Some(next) = wanted {
            pipe.cmd("XRANGE")
                .arg(key)
                .arg(EntryId::from_frame(next).to_string())
                .arg("+")
                .arg("COUNT")
                .arg(count);
        }
        let mut values = self.read(&pipe, deadline).await?.into_iter();
        let unexpected = |_| RedisStoreError::Unexpected("a stream's entries");
        let exists = matches!(values.next(), Some(Value::Int(1)));
        let tail = keys::entries(values.next().unwrap_or(Value::Nil)).map_err(unexpected)?;
        // Anything but a plain "no" is not a death.
        let writer_alive = writer.is_none() || !matches!(values.next(), Some(Value::Int(0)));
        let mut window = Window {
            exists,
            writer_alive,
            finished: tail.iter().any(|(_, e)| matches!(e, Entry::End(_))),
            tail_next: tail
                .iter()
                .find_map(|(_, e)| match e {
                    Entry::Frame(seq, _) => Some(seq + 1),
                    _ => None,
                })
                .unwrap_or(0),
            ..Window::default()
        };
        let mut page = match values.next() {
            Some(first) => keys::entries(first).map_err(unexpected)?,
            None => Vec::new(),
        };
        let mut scanned = 0;
        loop {
            let full = page.len() >= count;
            let last = page.last().map(|(id, _)| *id);
            scanned += page.len();
            for (_, entry) in page {
                match entry {
                    Entry::Frame(seq, frame) => push(&mut window.run, seq, frame),
                    Entry::End(next) => {
                        window.end = Some(next);
                        window.finished = true;
                    }
                    Entry::Other => {}
                }
            }
            let from = last.and_then(EntryId::successor);
            let Some(from) = from.filter(|_| full && window.end.is_none()) else {
                window.complete = true;
                return Ok(window);
            };
            if scanned >= self.options.max_replay {
                return Ok(window);
            }
            let deadline = Instant::now() + self.options.response_timeout;
            page = self.range(key, from, deadline).await?;
        }
    }

    /// One page of ring `key` from entry `from`.
    async fn range(
        &mut self,
        key: &str,
        from: EntryId,
        deadline: Instant,
    ) -> Result<Vec<keys::Read>, RedisStoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("XRANGE")
            .arg(key)
            .arg(from.to_string())
            .arg("+")
            .arg("COUNT")
            .arg(self.options.fetch_count);
        let reply = self.read(&pipe, deadline).await?.into_iter().next();
        keys::entries(reply.unwrap_or(Value::Nil))
            .map_err(|_| RedisStoreError::Unexpected("a stream's entries"))
    }

    /// Hands follow `id` what its ring holds from its next frame on, and its end; a
    /// hole ends it (the core ends the connection, and the client's next resume learns
    /// of the gap). At most the replay bound per call: the rest comes on the next turn,
    /// after the ops queued meanwhile (an unfollow among them). A follow whose writer is
    /// gone ends once it has read the whole ring: nothing more will come.
    async fn feed(&mut self, id: (usize, StreamId)) {
        let Some((channel, mut next)) = self
            .follows
            .get(&id)
            .map(|f| (Arc::clone(&f.channel), f.next))
        else {
            return;
        };
        let Some((key, ring)) = self.rings.get(&channel).map(|r| (r.key.clone(), r.ring)) else {
            return;
        };
        let (shard, stream) = id;
        let mut from = Some(EntryId::from_frame(next));
        let mut handed = 0;
        while let Some(start) = from {
            if handed >= self.options.max_replay {
                self.dirty.mark(channel);
                return;
            }
            let deadline = Instant::now() + self.options.response_timeout;
            // On failure Redis is down: every follow catches up once it is back.
            let Ok(page) = self.range(&key, start, deadline).await else {
                return;
            };
            from = if page.len() >= self.options.fetch_count {
                page.last().and_then(|(id, _)| id.successor())
            } else {
                None
            };
            let mut end = None;
            let mut frames = Vec::new();
            for (_, entry) in page {
                match entry {
                    Entry::Frame(seq, frame) if seq >= next => frames.push((seq, frame)),
                    Entry::End(at) => end = Some(at),
                    Entry::Frame(..) | Entry::Other => {}
                }
            }
            for run in keys::runs(frames) {
                let hole = run.first > next;
                self.input(
                    shard,
                    StoreInput::Followed {
                        stream,
                        first: ring.event(run.first),
                        frames: &run.frames,
                    },
                );
                handed += run.frames.len();
                next = run.next();
                if hole {
                    return self.forget(id).await;
                }
            }
            if let Some(follow) = self.follows.get_mut(&id) {
                follow.next = next;
            }
            if let Some(end) = end.filter(|end| next >= *end) {
                self.input(shard, StoreInput::FollowEnded { stream, next: end });
                return self.forget(id).await;
            }
        }
        // The whole ring is read.
        if self.follows.get(&id).is_some_and(|f| f.orphaned) {
            self.input(shard, StoreInput::WriterGone { stream });
            self.forget(id).await;
        }
    }

    /// Checks that the writers of the rings followed are alive: one `EXISTS` per writer
    /// epoch (not this node's), in one round trip. The follows of a writer gone are
    /// caught up on the ring, then told it is gone (unless the ring ends first). A
    /// failed check, or one just after Redis came back (the writers may not have
    /// written their keys again yet), is no verdict: the next one decides.
    async fn check_writers(&mut self) {
        if self.follows.is_empty()
            || self.health.is_down()
            || self.health.recovering(self.options.liveness_ttl)
        {
            return;
        }
        let epochs: Vec<Epoch> = self
            .rings
            .values()
            .map(|r| r.ring.epoch)
            .filter(|e| !self.own.contains(e))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if epochs.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        for epoch in &epochs {
            pipe.cmd("EXISTS").arg(self.keys.node(*epoch));
        }
        let deadline = Instant::now() + self.options.response_timeout;
        let Ok(values) = self.read(&pipe, deadline).await else {
            return;
        };
        let gone: HashSet<Epoch> = epochs
            .into_iter()
            .zip(values)
            .filter(|(_, v)| matches!(v, Value::Int(0)))
            .map(|(e, _)| e)
            .collect();
        if gone.is_empty() {
            return;
        }
        let orphans: Vec<(usize, StreamId)> = self
            .rings
            .values()
            .filter(|r| gone.contains(&r.ring.epoch))
            .flat_map(|r| r.followers.iter().copied())
            .collect();
        for id in orphans {
            if let Some(follow) = self.follows.get_mut(&id) {
                follow.orphaned = true;
            }
            self.feed(id).await;
        }
    }

    /// Feeds the follows of every ring whose wake channel spoke (or of all, after a
    /// reconnect or an outage).
    async fn catch_up(&mut self) {
        let (all, mut channels) = self.dirty.take();
        if all {
            channels = self.rings.keys().cloned().collect();
        }
        for channel in channels {
            if self.health.is_down() {
                // Every follow catches up once Redis is back.
                return;
            }
            let followers: Vec<(usize, StreamId)> = self
                .rings
                .get(&channel)
                .map(|r| r.followers.iter().copied().collect())
                .unwrap_or_default();
            for id in followers {
                self.feed(id).await;
            }
        }
    }

    /// Follow `id` is over (unfollowed, ended, or cut at a hole).
    async fn forget(&mut self, id: (usize, StreamId)) {
        let Some(follow) = self.follows.remove(&id) else {
            return;
        };
        if let Some(ring) = self.rings.get_mut(&follow.channel) {
            ring.followers.remove(&id);
        }
        self.release(&follow.channel).await;
    }

    /// Unsubscribes from `channel` when no follow needs it.
    async fn release(&mut self, channel: &Arc<str>) {
        if self
            .rings
            .get(channel)
            .is_some_and(|r| r.followers.is_empty())
        {
            self.rings.remove(channel);
            let _ = self
                .commands
                .send(Command::Unsubscribe(Arc::clone(channel)))
                .await;
        }
    }
}

/// Adds frame `seq` to the run after the last hole: a hole starts the run again.
fn push(run: &mut Run, seq: u64, frame: Bytes) {
    if !run.continues(seq) {
        run.frames.clear();
    }
    if run.frames.is_empty() {
        run.first = seq;
    }
    run.frames.push(frame);
}

/// A session load's answer from its reply: the record, none, or unavailable (an error,
/// or a reply of another shape).
fn record(reply: Option<Value>) -> Result<Option<Vec<u8>>, StoreUnavailable> {
    match reply {
        Some(Value::Nil) => Ok(None),
        Some(Value::BulkString(record)) => Ok(Some(record)),
        _ => Err(StoreUnavailable),
    }
}
