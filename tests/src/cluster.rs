//! Several [`Server`](mcpwire::server::Server)s as the nodes of one cluster, over a
//! shared store kept in memory: the driver contract of `mcpwire::server::cluster`
//! performed literally (every op in order, every read answered at once), so the core's
//! cluster decisions are tested without Redis.
//!
//! The store can be made unreachable ([`Cluster::set_available`]): reads then answer
//! [`StoreUnavailable`] and writes are lost, as a real store's would be.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcpwire::resume::{EventId, Replay};
use mcpwire::server::{Config, NodeId, RingKey, StoreInput, StoreOp, StoreUnavailable, StreamId};

use crate::server::Harness;

/// One shared ring: its frames by sequence number, and where it finished.
#[derive(Debug, Default)]
struct Ring {
    frames: BTreeMap<u64, Bytes>,
    finished: Option<u64>,
}

/// A follow: the node and stream it answers, and the next frame it is owed.
#[derive(Debug)]
struct Follow {
    session: Arc<str>,
    ring: RingKey,
    next: u64,
    ended: bool,
}

/// The shared store.
#[derive(Debug, Default)]
pub struct Store {
    /// Session records and when they expire.
    pub sessions: BTreeMap<Arc<str>, (Bytes, Instant)>,
    rings: BTreeMap<(Arc<str>, RingKey), Ring>,
    follows: BTreeMap<(usize, StreamId), Follow>,
    /// Every op performed, by node, oldest first (for tests that check what was asked).
    pub log: Vec<(usize, StoreOp)>,
    unavailable: bool,
    /// Notices published while [`Cluster::hold_notices`] holds them.
    held: Option<Vec<Bytes>>,
    /// Writes (records, appends, finishes) made while [`Cluster::hold_writes`] holds
    /// them: they land later, in order.
    late: Option<Vec<(usize, StoreOp)>>,
}

impl Store {
    /// How many frames ring `ring` of `session` holds.
    pub fn ring_len(&self, session: &str, ring: RingKey) -> usize {
        self.rings
            .get(&(session.into(), ring))
            .map_or(0, |r| r.frames.len())
    }

    /// How many rings `session` has.
    pub fn rings_of(&self, session: &str) -> usize {
        self.rings.keys().filter(|(s, _)| &**s == session).count()
    }

    /// How many follows are open.
    pub fn follows(&self) -> usize {
        self.follows.len()
    }
}

/// The nodes and their store, on one virtual clock.
pub struct Cluster {
    /// The nodes, each with its own harness.
    pub nodes: Vec<Harness>,
    /// The shared store.
    pub store: Store,
    /// The nodes killed ([`Cluster::kill`]): they do nothing more.
    dead: Vec<bool>,
}

impl Cluster {
    /// `n` nodes configured by `config` (each gets its number, 1…n) with distinct entropy.
    pub fn new(n: usize, config: impl Fn() -> Config) -> Self {
        let start = Instant::now();
        let nodes = (0..n)
            .map(|i| {
                let node = NodeId::new(u16::try_from(i + 1).expect("few nodes"));
                let mut h = Harness::seeded(config().with_node(Some(node)), 100 + i as u64);
                h.now = start;
                h
            })
            .collect();
        Self {
            dead: vec![false; n],
            nodes,
            store: Store::default(),
        }
    }

    /// Kills node `node`: it performs no more work, and every follower of a ring it was
    /// writing (unfinished) learns it, as a driver watching node liveness would tell it.
    pub fn kill(&mut self, node: usize) {
        self.dead[node] = true;
        let epoch = self.epoch_of(node);
        let gone: Vec<(usize, StreamId)> = self
            .store
            .follows
            .iter()
            .filter(|(_, f)| f.ring.epoch == epoch && !f.ended)
            .map(|(k, _)| *k)
            .collect();
        for (i, stream) in gone {
            self.store.follows.remove(&(i, stream));
            let n = &mut self.nodes[i];
            n.server
                .handle_store(n.now, StoreInput::WriterGone { stream });
        }
        self.pump();
    }

    /// The epoch of node `node`'s event ids (its number in the top 16 bits).
    fn epoch_of(&self, node: usize) -> mcpwire::resume::Epoch {
        let n = self.nodes[node]
            .server
            .config()
            .node()
            .expect("a node")
            .get();
        let rings = self
            .store
            .rings
            .keys()
            .map(|(_, r)| r.epoch)
            .find(|e| e.get() >> 48 == u64::from(n));
        rings.unwrap_or(NodeId::new(n).epoch(0))
    }

    /// The store is reachable (`true`) or not.
    pub fn set_available(&mut self, available: bool) {
        self.store.unavailable = !available;
    }

    /// Holds every write (a record, an append, a finish) from now on, as writes still on
    /// their way, until [`release_writes`](Self::release_writes); reads meanwhile do not
    /// see them.
    pub fn hold_writes(&mut self) {
        self.store.late.get_or_insert_with(Vec::new);
    }

    /// The writes held land, in order; then pumps.
    pub fn release_writes(&mut self) {
        for (i, op) in self.store.late.take().unwrap_or_default() {
            self.perform(i, op);
        }
        self.pump();
    }

    /// Holds every notice published from now on, as a slow channel would, until
    /// [`release_notices`](Self::release_notices).
    pub fn hold_notices(&mut self) {
        self.store.held.get_or_insert_with(Vec::new);
    }

    /// Delivers the notices held, in order, and pumps.
    pub fn release_notices(&mut self) {
        let dead = &self.dead;
        for notice in self.store.held.take().unwrap_or_default() {
            for (_, n) in self.nodes.iter_mut().enumerate().filter(|(j, _)| !dead[*j]) {
                n.server.handle_store(n.now, StoreInput::Notice(&notice));
            }
        }
        self.pump();
    }

    /// Moves every node's clock on by `d`, runs their timers, and pumps.
    pub fn advance(&mut self, d: Duration) {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            node.now += d;
            if !self.dead[i] {
                node.server.handle_timeout(node.now);
                node.drain();
            }
        }
        self.pump();
    }

    /// Performs every node's store work, answering reads and delivering notices and
    /// followed frames, until no node has any; drains every node after each step.
    pub fn pump(&mut self) {
        for _ in 0..10_000 {
            let mut any = false;
            for i in 0..self.nodes.len() {
                if self.dead[i] {
                    continue;
                }
                while let Some(op) = self.nodes[i].server.poll_store() {
                    any = true;
                    self.store.log.push((i, op.clone()));
                    self.perform(i, op);
                }
                self.nodes[i].drain();
            }
            if !any {
                return;
            }
        }
        panic!("the cluster's store work never ends");
    }

    fn now(&self) -> Instant {
        self.nodes.iter().map(|n| n.now).max().expect("a node")
    }

    fn perform(&mut self, i: usize, op: StoreOp) {
        let now = self.now();
        let down = self.store.unavailable;
        if let Some(late) = &mut self.store.late
            && matches!(
                op,
                StoreOp::PutSession { .. } | StoreOp::Append { .. } | StoreOp::Finish { .. }
            )
        {
            return late.push((i, op));
        }
        match op {
            StoreOp::PutSession {
                session,
                record,
                ttl,
            } => {
                if !down {
                    self.store.sessions.insert(session, (record, now + ttl));
                }
            }
            StoreOp::TouchSession { session, ttl } => {
                if !down && let Some((_, at)) = self.store.sessions.get_mut(&session) {
                    *at = now + ttl;
                }
            }
            StoreOp::LoadSession { session } => {
                let record = if down {
                    Err(StoreUnavailable)
                } else {
                    Ok(self
                        .store
                        .sessions
                        .get(&session)
                        .filter(|(_, at)| *at > now)
                        .map(|(r, _)| r.clone()))
                };
                let n = &mut self.nodes[i];
                n.server.handle_store(
                    n.now,
                    StoreInput::Session {
                        session: &session,
                        record: record.as_ref().map(|r| r.as_deref()).map_err(|e| *e),
                    },
                );
            }
            StoreOp::DeleteSession { session } => {
                if !down {
                    self.store.sessions.remove(&session);
                    self.store.rings.retain(|(s, _), _| *s != session);
                }
            }
            StoreOp::Append {
                session,
                id,
                frame,
                keep,
                announce,
                ..
            } => {
                if down {
                    return;
                }
                let key = (session, RingKey::of(id));
                let ring = self.store.rings.entry(key.clone()).or_default();
                ring.frames.insert(id.seq(), frame);
                while ring.frames.len() > keep.max(1) {
                    ring.frames.pop_first();
                }
                // Followers hear of it only when the writer announces it, as a driver
                // that wakes them by publishing would have them.
                if announce {
                    self.feed(&key);
                }
            }
            StoreOp::Finish {
                session,
                ring,
                next,
                announce,
            } => {
                if down {
                    return;
                }
                let key = (session, ring);
                self.store.rings.entry(key.clone()).or_default().finished = Some(next);
                if announce {
                    self.feed(&key);
                }
            }
            StoreOp::Wake { session, ring } => {
                if !down {
                    self.feed(&(session, ring));
                }
            }
            StoreOp::Follow {
                stream,
                session,
                after,
            } => self.follow(i, stream, session, after),
            StoreOp::Unfollow { stream } => {
                self.store.follows.remove(&(i, stream));
            }
            StoreOp::Publish { notice } => {
                if down {
                    return;
                }
                if let Some(held) = &mut self.store.held {
                    return held.push(notice);
                }
                let dead = &self.dead;
                for (_, n) in self.nodes.iter_mut().enumerate().filter(|(j, _)| !dead[*j]) {
                    n.server.handle_store(n.now, StoreInput::Notice(&notice));
                }
            }
        }
    }

    /// The first answer to a follow: the run of frames after the last hole, from the
    /// first one after `after`.
    fn follow(&mut self, i: usize, stream: StreamId, session: Arc<str>, after: EventId) {
        let ring = RingKey::of(after);
        let key = (session.clone(), ring);
        let writer_dead = (0..self.nodes.len()).any(|node| {
            self.dead[node]
                && self.nodes[node]
                    .server
                    .config()
                    .node()
                    .map(|n| u64::from(n.get()))
                    == Some(ring.epoch.get() >> 48)
        });
        let n = &mut self.nodes[i];
        if self.store.unavailable {
            n.server.handle_store(
                n.now,
                StoreInput::Replayed {
                    stream,
                    replay: Err(StoreUnavailable),
                },
            );
            return;
        }
        let finished = self
            .store
            .rings
            .get(&key)
            .and_then(|r| r.finished)
            .is_some();
        if writer_dead && !finished {
            n.server
                .handle_store(n.now, StoreInput::WriterGone { stream });
            return;
        }
        let Some(stored) = self.store.rings.get(&key) else {
            n.server.handle_store(
                n.now,
                StoreInput::Replayed {
                    stream,
                    replay: Ok(Replay::UnknownRing),
                },
            );
            return;
        };
        // The run after the last hole.
        let mut run: Vec<(u64, Bytes)> = Vec::new();
        for (&seq, frame) in &stored.frames {
            if run.last().is_some_and(|(last, _)| seq != last + 1) {
                run.clear();
            }
            run.push((seq, frame.clone()));
        }
        let next = run.last().map_or(0, |(seq, _)| seq + 1);
        let first = run
            .first()
            .map_or(ring.event(next), |(seq, _)| ring.event(*seq));
        let frames: Vec<Bytes> = run.into_iter().map(|(_, f)| f).collect();
        let replay = Replay::from_window(after, first, &frames);
        let owed = match &replay {
            Replay::Frames(_) | Replay::UpToDate => Some(next.max(after.seq() + 1)),
            _ => None,
        };
        n.server.handle_store(
            n.now,
            StoreInput::Replayed {
                stream,
                replay: Ok(replay),
            },
        );
        if let Some(next) = owed {
            self.store.follows.insert(
                (i, stream),
                Follow {
                    session,
                    ring,
                    next,
                    ended: false,
                },
            );
            self.feed(&key);
        }
    }

    /// Hands every follow of ring `key` what was appended since, and its end.
    fn feed(&mut self, key: &(Arc<str>, RingKey)) {
        let Some(ring) = self.store.rings.get(key) else {
            return;
        };
        for ((i, stream), follow) in &mut self.store.follows {
            if follow.session != key.0 || follow.ring != key.1 || follow.ended {
                continue;
            }
            // One consecutive run at a time: a hole inside is the core's to see.
            let first = ring.frames.range(follow.next..).next().map(|(s, _)| *s);
            let frames: Vec<Bytes> = first.map_or_else(Vec::new, |first| {
                ring.frames
                    .range(first..)
                    .zip(first..)
                    .take_while(|((seq, _), expected)| *seq == expected)
                    .map(|((_, f), _)| f.clone())
                    .collect()
            });
            let n = &mut self.nodes[*i];
            if let Some(first) = first {
                follow.next = first + frames.len() as u64;
                n.server.handle_store(
                    n.now,
                    StoreInput::Followed {
                        stream: *stream,
                        first: follow.ring.event(first),
                        frames: &frames,
                    },
                );
            }
            if let Some(next) = ring.finished
                && follow.next >= next
            {
                follow.ended = true;
                n.server.handle_store(
                    n.now,
                    StoreInput::FollowEnded {
                        stream: *stream,
                        next,
                    },
                );
            }
        }
    }
}
