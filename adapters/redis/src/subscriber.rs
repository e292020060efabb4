//! The subscriber: a connection of its own that hands every notice to the node and
//! marks the followed rings whose wake channel spoke, and that reconnects by itself.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use mcpwire_tokio::server::StoreHandle;
use redis::aio::{PubSub, PubSubSink, PubSubStream};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::health::Health;
use crate::{RedisEvent, RedisOptions, RedisStoreError};

/// How many channels one `SUBSCRIBE` names when subscribing again after a reconnect.
const SUBSCRIBE_CHUNK: usize = 512;

/// The first wait before a reconnect (it doubles up to [`RedisOptions::with_max_backoff`]).
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// What the executor asks of the subscriber.
#[derive(Debug)]
pub(crate) enum Command {
    /// Subscribe to a ring's wake channel; the sender is dropped (or sent to) once
    /// Redis confirmed it, or once the subscriber knows it will subscribe on its next
    /// connection (which catches every follow up).
    Subscribe(Arc<str>, oneshot::Sender<()>),
    /// Unsubscribe from a wake channel no follow needs any more.
    Unsubscribe(Arc<str>),
}

/// The wake channels that spoke since the executor last looked, or `all` of them (after
/// a reconnect, or when Redis is back). Holds at most the channels subscribed: no queue
/// of wake-ups builds up, whatever the traffic.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    state: Mutex<DirtyState>,
    /// Wakes the executor.
    pub(crate) notify: Notify,
}

#[derive(Debug, Default)]
struct DirtyState {
    channels: HashSet<Arc<str>>,
    all: bool,
}

impl Dirty {
    /// Channel `channel` spoke: its follows read their ring again.
    pub(crate) fn mark(&self, channel: Arc<str>) {
        self.lock().channels.insert(channel);
        self.notify.notify_one();
    }

    /// Every follow reads its ring again (wake-ups may have been lost).
    pub(crate) fn mark_all(&self) {
        let mut state = self.lock();
        state.all = true;
        state.channels.clear();
        drop(state);
        self.notify.notify_one();
    }

    /// What was marked: `(all, channels)`, leaving nothing marked.
    pub(crate) fn take(&self) -> (bool, Vec<Arc<str>>) {
        let mut state = self.lock();
        let all = std::mem::take(&mut state.all);
        (all, state.channels.drain().collect())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DirtyState> {
        // Nothing panics while holding it; a poisoned lock still holds a valid set.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How a connected spell ended.
enum Ended {
    /// The connection is lost: reconnect.
    Lost(RedisStoreError),
    /// The executor or the service is gone: stop.
    Done,
}

/// The subscriber's state across connections.
pub(crate) struct Subscriber {
    client: redis::Client,
    addr: String,
    notices: String,
    handle: StoreHandle,
    dirty: Arc<Dirty>,
    health: Arc<Health>,
    options: RedisOptions,
    /// The wake channels of the rings followed (bounded by the follows).
    wanted: HashSet<Arc<str>>,
}

impl Subscriber {
    pub(crate) fn new(
        client: redis::Client,
        addr: String,
        notices: String,
        handle: StoreHandle,
        dirty: Arc<Dirty>,
        health: Arc<Health>,
        options: RedisOptions,
    ) -> Self {
        Self {
            client,
            addr,
            notices,
            handle,
            dirty,
            health,
            options,
            wanted: HashSet::new(),
        }
    }

    /// Runs until the executor is gone (its commands end) or the service is. `first` is
    /// the connection made at start-up, subscribed to the notices.
    pub(crate) async fn run(mut self, first: PubSub, mut commands: mpsc::Receiver<Command>) {
        let mut connection = Some(first);
        loop {
            let fresh = connection.is_some();
            let pubsub = match connection.take() {
                Some(pubsub) => pubsub,
                None => match self.reconnect(&mut commands).await {
                    Some(pubsub) => pubsub,
                    None => return,
                },
            };
            let (mut sink, mut stream) = pubsub.split();
            if !fresh {
                if let Err(e) = self.subscribe_all(&mut sink).await {
                    self.options.tell(&RedisEvent::SubscriberLost(e));
                    continue;
                }
                // What was published while it was away is lost: every follow reads its
                // ring again.
                self.dirty.mark_all();
                self.options.tell(&RedisEvent::SubscriberRecovered);
            }
            match self.listen(&mut sink, &mut stream, &mut commands).await {
                Ended::Lost(e) => {
                    // Redis was most likely restarted or lost: the command connection is
                    // dead too. Marked down, writes are dropped instead of meeting it, and
                    // the probe reconnects it before the next write goes.
                    self.health.down(&self.options, e.clone());
                    self.options.tell(&RedisEvent::SubscriberLost(e));
                }
                Ended::Done => return,
            }
        }
    }

    /// Connects again, with backoff, answering commands meanwhile; `None` once the
    /// executor is gone.
    async fn reconnect(&mut self, commands: &mut mpsc::Receiver<Command>) -> Option<PubSub> {
        let mut backoff = FIRST_BACKOFF.min(self.options.max_backoff);
        loop {
            let client = self.client.clone();
            let within = self.options.connect_timeout;
            let attempt =
                async move { tokio::time::timeout(within, client.get_async_pubsub()).await };
            if let Ok(Ok(pubsub)) = self.serving(commands, attempt).await? {
                return Some(pubsub);
            }
            self.serving(commands, tokio::time::sleep(backoff)).await?;
            backoff = (backoff * 2).min(self.options.max_backoff);
        }
    }

    /// Awaits `work` while answering commands as a disconnected subscriber does: a
    /// channel is noted, to be subscribed on the next connection (which catches every
    /// follow up). `None` once the executor is gone.
    async fn serving<F: Future>(
        &mut self,
        commands: &mut mpsc::Receiver<Command>,
        work: F,
    ) -> Option<F::Output> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return Some(out),
                command = commands.recv() => match command? {
                    Command::Subscribe(channel, ack) => {
                        self.wanted.insert(channel);
                        let _ = ack.send(());
                    }
                    Command::Unsubscribe(channel) => {
                        self.wanted.remove(&channel);
                    }
                },
            }
        }
    }

    /// Subscribes a new connection to the notices and every wanted channel.
    async fn subscribe_all(&self, sink: &mut PubSubSink) -> Result<(), RedisStoreError> {
        let mut channels: Vec<&str> = vec![&self.notices];
        channels.extend(self.wanted.iter().map(|c| &**c));
        for chunk in channels.chunks(SUBSCRIBE_CHUNK) {
            self.bounded(sink.subscribe(chunk)).await?;
        }
        Ok(())
    }

    /// Hands on messages and performs commands until the connection is lost.
    async fn listen(
        &mut self,
        sink: &mut PubSubSink,
        stream: &mut PubSubStream,
        commands: &mut mpsc::Receiver<Command>,
    ) -> Ended {
        let every = self.options.keepalive;
        let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = stream.next() => {
                    let Some(message) = message else {
                        return Ended::Lost(closed());
                    };
                    let channel = message.get_channel_name();
                    if channel == self.notices {
                        if !self.handle.notice(message.get_payload_bytes()) {
                            return Ended::Done;
                        }
                    } else if let Some(channel) = self.wanted.get(channel) {
                        self.dirty.mark(Arc::clone(channel));
                    }
                }
                command = commands.recv() => match command {
                    None => return Ended::Done,
                    Some(Command::Subscribe(channel, ack)) => {
                        self.wanted.insert(Arc::clone(&channel));
                        let done = self.bounded(sink.subscribe(&*channel)).await;
                        if ack.send(()).is_err() {
                            // The executor stopped waiting and may have read the ring
                            // before the subscription: it reads it again now.
                            self.dirty.mark(channel);
                        }
                        if let Err(e) = done {
                            return Ended::Lost(e);
                        }
                    }
                    Some(Command::Unsubscribe(channel)) => {
                        self.wanted.remove(&channel);
                        if let Err(e) = self.bounded(sink.unsubscribe(&*channel)).await {
                            return Ended::Lost(e);
                        }
                    }
                },
                _ = keepalive.tick() => {
                    if let Err(e) = self.bounded(sink.ping::<redis::Value>()).await {
                        return Ended::Lost(e);
                    }
                }
            }
        }
    }

    /// `command` within the response timeout.
    async fn bounded<T>(
        &self,
        command: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, RedisStoreError> {
        match tokio::time::timeout(self.options.response_timeout, command).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(RedisStoreError::Command(e)),
            Err(_) => Err(RedisStoreError::TimedOut {
                addr: self.addr.clone(),
                after: self.options.response_timeout,
            }),
        }
    }
}

/// The error of a subscriber connection that ended.
fn closed() -> RedisStoreError {
    RedisStoreError::Command(redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the subscriber's connection closed",
    )))
}
