//! The event store seam, and its in-memory implementation over [`ReplayRing`]s.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use crate::sse;

use super::ring::encode_frame;
use super::{Epoch, EventId, Replay, ReplayRing, RingId, RingLimits};

/// Where the server keeps the replay rings of its resumable streams: the seam between the
/// server state machine and its storage.
///
/// A store numbers rings, issues each ring's event ids in order, retains the encoded
/// frames, answers replays by the rules of [`Replay`], and forgets rings and sessions when
/// told. Every method is synchronous and does no IO: [`MemoryStore`] is the default
/// implementation; a store in another process sits behind an adapter that answers
/// [`Replay::Pending`] and lets the driver do the IO (see the
/// [module docs](super#stores-in-another-process)).
///
/// Each ring belongs to one session: a replay names the session it comes from (the
/// request's `Mcp-Session-Id`) and the store answers [`Replay::UnknownRing`] for a ring
/// of any other session (RESUME-6).
///
/// Time-driven stores say it as every machine in this crate does:
/// [`poll_timeout`](Self::poll_timeout) is the next deadline, and
/// [`handle_timeout`](Self::handle_timeout) acts on it.
///
/// # Example
///
/// ```
/// use std::time::Instant;
/// use bytes::BytesMut;
/// use mcpwire::resume::{Epoch, EventId, EventStore, MemoryStore, Replay, StoreLimits};
/// use mcpwire::sse::{Encoder, EventFields};
///
/// // Sessions keyed by their `Mcp-Session-Id` text: the store keeps `String`s and is
/// // asked with `&str`.
/// let mut store = MemoryStore::<str>::new(Epoch::new(0x5eed), StoreLimits::new());
/// let (session, now, enc, mut buf) = ("session-a", Instant::now(), Encoder::new(), BytesMut::new());
///
/// // A new resumable SSE stream: open its ring, prime it (RESUME-8), send a message. Each
/// // frame is encoded once, with its id, and the same bytes go to the socket and the store.
/// let ring = store.open_ring(session)?;
/// let (primed, _priming) = store.append_with(now, session, ring, &mut buf, |id, buf| {
///     enc.encode_priming(id, None, buf)
/// })?;
/// let (_, message) = store.append_with(now, session, ring, &mut buf, |id, buf| {
///     enc.encode_event(&EventFields::new().with_id(id), r#"{"jsonrpc":"2.0","method":"ping","id":1}"#, buf)
/// })?;
///
/// // The connection drops; the client GETs with `Last-Event-ID: 5eed:0:0` (RESUME-4).
/// let after = EventId::parse_bytes(b"5eed:0:0")?;
/// assert_eq!(after, primed);
/// match store.replay_after(now, session, after) {
///     Replay::Frames(frames) => assert_eq!(frames.collect::<Vec<_>>(), [&message]),
///     Replay::UpToDate => { /* nothing missed: continue live */ }
///     Replay::Gap { .. } => { /* messages were lost: say so */ }
///     Replay::UnknownRing | Replay::NotIssued => { /* 400 (docs/requirements.md §14.3) */ }
///     Replay::Pending => unreachable!("a memory store answers at once"),
/// }
/// // Another session cannot replay this ring (RESUME-6); DELETE forgets it (§14.15).
/// assert_eq!(store.replay_after(now, "session-b", after), Replay::UnknownRing);
/// store.drop_session(session);
/// assert_eq!(store.replay_after(now, session, after), Replay::UnknownRing);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait EventStore {
    /// How the store knows a session (the server's session handle, or the
    /// `Mcp-Session-Id` value itself). Unsized types are allowed, so a store keyed by
    /// `String`s can be asked with `&str` ([`MemoryStore<str>`](MemoryStore)).
    type Session: ?Sized;

    /// Opens the ring of a new resumable stream in `session` and returns its number,
    /// never used before in this store's epoch. Its first frame will be event 0.
    ///
    /// # Errors
    ///
    /// [`StoreError::TooManyRings`] or [`StoreError::TooManySessionRings`] at a limit
    /// (the server may then serve the stream without ids: not resumable);
    /// [`StoreError::Exhausted`] when the ring counter is.
    fn open_ring(&mut self, session: &Self::Session) -> Result<RingId, StoreError>;

    /// The id the next frame of `ring` must carry: encode the frame with it, then
    /// [`append`](Self::append) it (or do both with [`append_with`](Self::append_with)).
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownRing`] if `ring` is not open in `session`.
    fn next_id(&self, session: &Self::Session, ring: RingId) -> Result<EventId, StoreError>;

    /// Retains `frame`, the encoded event `id` of ring `id.ring()`, as
    /// [`ReplayRing::append`] does (a store may also evict other rings' oldest frames to
    /// stay within a budget of its own; see [`StoreLimits::max_bytes`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownRing`] if the ring is not open in `session`;
    /// [`StoreError::OutOfOrder`] if `id` is not its [`next_id`](Self::next_id);
    /// [`StoreError::Exhausted`] when its sequence is. Nothing changes then.
    fn append(
        &mut self,
        now: Instant,
        session: &Self::Session,
        id: EventId,
        frame: Bytes,
    ) -> Result<(), StoreError>;

    /// What to send a client of `session` that resumes after `after` (RESUME-5); see
    /// [`Replay`]. The frames borrow the store until the answer is dropped.
    fn replay_after(&mut self, now: Instant, session: &Self::Session, after: EventId)
    -> Replay<'_>;

    /// Forgets `ring` and its frames: a resume after any of its ids is then
    /// [`Replay::UnknownRing`]. Nothing happens if it is not open in `session`.
    fn drop_ring(&mut self, session: &Self::Session, ring: RingId);

    /// Forgets every ring of `session` (the session ended or was deleted, docs/requirements.md
    /// §14.15).
    fn drop_session(&mut self, session: &Self::Session);

    /// Drops the frames that are past their age limit at `now`. Appends and replays
    /// expire the ring they touch, so this only frees memory of idle rings; call it at
    /// [`poll_timeout`](Self::poll_timeout). Calling it earlier is a no-op. The default
    /// does nothing.
    fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work; `None` if never (the
    /// default). A server asks after every input, so this should be cheap.
    #[must_use]
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Encodes the next frame of `ring` with its id and retains it; returns the id and
    /// the frame for the socket. `encode` gets the id as an SSE `id` value and appends
    /// one frame to `buf` (see [`ReplayRing::append_with`]). The id and the bytes cannot
    /// get out of step.
    ///
    /// # Errors
    ///
    /// As for [`next_id`](Self::next_id) and [`append`](Self::append); `encode` is only
    /// called if the id can be issued.
    fn append_with<F>(
        &mut self,
        now: Instant,
        session: &Self::Session,
        ring: RingId,
        buf: &mut BytesMut,
        encode: F,
    ) -> Result<(EventId, Bytes), StoreError>
    where
        Self: Sized,
        F: FnOnce(sse::Id<'_>, &mut BytesMut),
    {
        let id = self.next_id(session, ring)?;
        let frame = encode_frame(id, buf, encode)?;
        self.append(now, session, id, frame.clone())?;
        Ok((id, frame))
    }
}

/// Bounds on a [`MemoryStore`]: how many rings it holds, how many bytes of frames over
/// all of them, and what each ring retains.
///
/// The store holds at most [`max_bytes`](Self::max_bytes) bytes of frames (default
/// 64 MiB), however many rings are open, and each ring at most what its
/// [`RingLimits`] allow. Without the budget the worst case would be
/// `max_rings × ring.max_bytes()` (1 GiB with the defaults); with it, rings may be sized
/// for the streams that carry much while the total stays bounded.
///
/// # Budget eviction
///
/// When an append would take the store past `max_bytes`, the store evicts frames oldest
/// first across the whole store, in append order, until the new frame fits: first the
/// appended ring's own limits evict, then the globally oldest frames go, whichever ring
/// holds them (the appended ring's too). Only a ring's oldest frame is ever evicted, so
/// every ring keeps a contiguous run of its newest frames, and a client resuming from
/// before an evicted frame gets an exact [`Replay::Gap`], never a silent loss. A frame
/// longer than `max_bytes` is not retained (as one longer than the ring's own
/// `max_bytes`), and its ring keeps nothing before it; no other ring is touched. The
/// bytes counted are the frames' lengths
/// ([`retained_bytes`](MemoryStore::retained_bytes)); the bookkeeping of each ring (about
/// 200 bytes, and 8 to 32 bytes per retained frame beside its `Bytes`) is bounded by
/// `max_rings` and the rings' `max_events`.
///
/// ```
/// use mcpwire::resume::{RingLimits, StoreLimits};
///
/// let limits = StoreLimits::new()
///     .with_max_rings(10_000)
///     .with_max_bytes(256 << 20)
///     .with_ring(RingLimits::new().with_max_bytes(4 << 20));
/// assert_eq!(limits.ring().max_bytes(), 4 << 20);
/// assert_eq!(StoreLimits::new().max_bytes(), StoreLimits::DEFAULT_MAX_BYTES);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoreLimits {
    max_rings: usize,
    max_rings_per_session: usize,
    max_bytes: usize,
    ring: RingLimits,
}

impl StoreLimits {
    /// Default [`max_rings`](Self::max_rings): 1024.
    pub const DEFAULT_MAX_RINGS: usize = 1024;
    /// Default [`max_rings_per_session`](Self::max_rings_per_session): 64.
    pub const DEFAULT_MAX_RINGS_PER_SESSION: usize = 64;
    /// Default [`max_bytes`](Self::max_bytes): 64 MiB of frames over all rings, the
    /// frames of 64 full default rings.
    pub const DEFAULT_MAX_BYTES: usize = 64 << 20;

    /// The default limits, with [`RingLimits::new`] for each ring.
    pub const fn new() -> Self {
        Self {
            max_rings: Self::DEFAULT_MAX_RINGS,
            max_rings_per_session: Self::DEFAULT_MAX_RINGS_PER_SESSION,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            ring: RingLimits::new(),
        }
    }

    /// Sets the most rings open at once, over all sessions.
    #[must_use]
    pub const fn with_max_rings(mut self, rings: usize) -> Self {
        self.max_rings = rings;
        self
    }

    /// Sets the most rings one session has open at once.
    #[must_use]
    pub const fn with_max_rings_per_session(mut self, rings: usize) -> Self {
        self.max_rings_per_session = rings;
        self
    }

    /// Sets the most bytes of frames retained over all rings (see
    /// [budget eviction](Self#budget-eviction)).
    #[must_use]
    pub const fn with_max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Sets what each ring retains.
    #[must_use]
    pub const fn with_ring(mut self, ring: RingLimits) -> Self {
        self.ring = ring;
        self
    }

    /// The most rings open at once.
    pub const fn max_rings(&self) -> usize {
        self.max_rings
    }

    /// The most rings one session has open at once.
    pub const fn max_rings_per_session(&self) -> usize {
        self.max_rings_per_session
    }

    /// The most bytes of frames retained over all rings.
    pub const fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// What each ring retains.
    pub const fn ring(&self) -> RingLimits {
        self.ring
    }
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self::new()
    }
}

/// The in-memory [`EventStore`]: one [`ReplayRing`] per open resumable stream, in one
/// process, within a store-wide byte budget ([`StoreLimits`]).
///
/// # Session keys
///
/// Sessions are keys of any ordered type, looked up by reference: `MemoryStore<Q>` keeps
/// owned keys `Q::Owned` and is asked with `&Q`, so `MemoryStore<str>` stores `String`s
/// and looks them up with `&str`, and `MemoryStore<u64>` stores and is asked with `u64`s.
/// Only opening the first ring of a new session (or of one whose rings were all dropped)
/// clones the key; every other call allocates nothing for it. The maps are `BTreeMap`s, so the store runs the same way
/// every time: no random hashing.
///
/// # Costs
///
/// A replay costs two map lookups (O(log n) in the number of sessions and of rings) and an
/// O(1) locate in the ring, independent of the number of retained frames. The next
/// deadline ([`poll_timeout`](EventStore::poll_timeout)) is the first entry of an ordered
/// index of ring deadlines, O(log n), and
/// [`handle_timeout`](EventStore::handle_timeout) touches only the rings that are due. An
/// append updates the deadline index when its ring's deadline moves (rings with an age
/// limit), and the budget's index of each ring's oldest frame only when the ring goes
/// from empty to not or back, or when the budget evicts (O(log n) each); it allocates
/// nothing once the rings have grown to their steady size (in an index of more than 11
/// rings, moving an entry may now and then split or merge a B-tree node).
///
/// # Time
///
/// Time is an argument; the store treats it as monotonic over all its rings: an earlier
/// `now` than one seen before counts as that later one.
///
/// Ring numbers come from one counter and are never reused; the counter is store-wide, so
/// the ids a client sees also tell it roughly how many rings the server has opened (use
/// one store per session to avoid that). Not `Clone`: two copies would issue the same ids
/// (RESUME-2).
#[derive(Debug)]
pub struct MemoryStore<Q: ?Sized + ToOwned> {
    epoch: Epoch,
    limits: StoreLimits,
    /// The sessions with at least one open ring.
    /// INVARIANT: `rings` of each counts its rings in `self.rings`, and is at least 1.
    sessions: BTreeMap<Q::Owned, SessionEntry>,
    /// Every open ring, by session and number, so a session's rings are one range.
    /// INVARIANT: `rings[k].ring_id() == k.ring`, and `k.session` is the `key` of the
    /// session the ring was opened in.
    rings: BTreeMap<RingKey, ReplayRing>,
    /// Byte total and indexes over `rings`.
    ledger: Ledger,
    /// The value of the next ring number. INVARIANT: only grows.
    next_ring: u64,
    /// The stamp of the next retained frame. INVARIANT: only grows.
    next_stamp: u64,
    /// The latest `now` seen, so time never runs backwards for any ring.
    last_now: Option<Instant>,
}

/// One session's entry in a [`MemoryStore`].
#[derive(Debug)]
struct SessionEntry {
    /// The session's part of its rings' keys: the number of its first ring, unique
    /// because ring numbers are never reused.
    key: u64,
    /// How many rings it has open.
    rings: usize,
}

/// A ring's key in a [`MemoryStore`]: its session's key, then its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct RingKey {
    session: u64,
    ring: RingId,
}

/// The store-wide accounting of a [`MemoryStore`]'s rings, kept exact by running every
/// change to a ring through [`track`](Self::track) (or [`forget`](Self::forget)).
#[derive(Debug, Default)]
struct Ledger {
    /// INVARIANT: the sum of the rings' `retained_bytes`, and at most the budget.
    bytes: usize,
    /// `(deadline, ring)` for every ring with a deadline: the store's next deadline is the
    /// first. INVARIANT: one entry per ring whose `poll_timeout` is `Some`, with its value.
    deadlines: BTreeSet<(Instant, RingKey)>,
    /// `(stamp, ring)` for every non-empty ring, `stamp` being a lower bound of the stamp
    /// of its oldest retained frame: the budget's way to the oldest frame of the whole
    /// store. INVARIANT: one entry per non-empty ring, equal to its `indexed_front`, and
    /// at most its `front_stamp` (none for an empty ring).
    ///
    /// A lower bound, not the exact stamp, so that a ring that evicts its own oldest frame
    /// (every append of a full ring) costs the index nothing: stamps only grow, so the old
    /// entry stays a lower bound. [`evict_oldest`](MemoryStore::evict_oldest) makes the
    /// first entry exact before it trusts it; since every other entry is at most its
    /// ring's true stamp, an exact first entry is the true oldest frame.
    fronts: BTreeSet<(u64, RingKey)>,
}

impl Ledger {
    /// Runs `f` on `ring` (the ring of `key`) and brings the byte total and the indexes
    /// up to date with what it changed.
    fn track<R>(
        &mut self,
        key: RingKey,
        ring: &mut ReplayRing,
        f: impl FnOnce(&mut ReplayRing) -> R,
    ) -> R {
        let (deadline, bytes) = (ring.poll_timeout(), ring.retained_bytes());
        let result = f(ring);
        // No underflow: `self.bytes` includes the ring's `bytes`.
        self.bytes = self.bytes - bytes + ring.retained_bytes();
        self.set_deadline(key, deadline, ring.poll_timeout());
        match (ring.indexed_front, ring.front_stamp()) {
            (None, Some(stamp)) => self.index_front(key, ring, Some(stamp)),
            (Some(_), None) => self.index_front(key, ring, None),
            // Still a lower bound: stamps only grow (see `fronts`).
            _ => {}
        }
        result
    }

    /// Removes a dropped ring's share.
    fn forget(&mut self, key: RingKey, ring: &mut ReplayRing) {
        self.bytes -= ring.retained_bytes();
        self.set_deadline(key, ring.poll_timeout(), None);
        self.index_front(key, ring, None);
    }

    fn set_deadline(&mut self, key: RingKey, before: Option<Instant>, after: Option<Instant>) {
        if before != after {
            if let Some(at) = before {
                self.deadlines.remove(&(at, key));
            }
            if let Some(at) = after {
                self.deadlines.insert((at, key));
            }
        }
    }

    /// Indexes `ring` (of `key`) under `stamp`, or takes it out of the index.
    fn index_front(&mut self, key: RingKey, ring: &mut ReplayRing, stamp: Option<u64>) {
        if ring.indexed_front == stamp {
            return;
        }
        if let Some(old) = ring.indexed_front {
            self.fronts.remove(&(old, key));
        }
        if let Some(new) = stamp {
            self.fronts.insert((new, key));
        }
        ring.indexed_front = stamp;
    }
}

impl<Q> MemoryStore<Q>
where
    Q: ?Sized + Ord + ToOwned,
    Q::Owned: Ord,
{
    /// An empty store issuing ids in `epoch` (choose one no earlier store used, for
    /// example random at start-up: see [`Epoch`]).
    pub fn new(epoch: Epoch, limits: StoreLimits) -> Self {
        Self {
            epoch,
            limits,
            sessions: BTreeMap::new(),
            rings: BTreeMap::new(),
            ledger: Ledger::default(),
            next_ring: 0,
            next_stamp: 0,
            last_now: None,
        }
    }

    /// The epoch in the store's ids.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The store's limits.
    pub fn limits(&self) -> StoreLimits {
        self.limits
    }

    /// The number of open rings.
    pub fn ring_count(&self) -> usize {
        self.rings.len()
    }

    /// The exact number of bytes of frames retained over all rings (their lengths
    /// summed), at most [`StoreLimits::max_bytes`].
    pub fn retained_bytes(&self) -> usize {
        self.ledger.bytes
    }

    /// The ring numbered `ring`, if it is open in `session`.
    pub fn ring(&self, session: &Q, ring: RingId) -> Option<&ReplayRing> {
        self.rings.get(&self.key(session, ring)?)
    }

    /// The key of `ring` in `session`, if the session has rings.
    fn key(&self, session: &Q, ring: RingId) -> Option<RingKey> {
        let session = self.sessions.get(session)?.key;
        Some(RingKey { session, ring })
    }

    /// `now`, made monotonic (not recorded: see [`clock`](Self::clock)).
    fn monotonic(&self, now: Instant) -> Instant {
        self.last_now.map_or(now, |last| last.max(now))
    }

    /// `now`, made monotonic and recorded as the latest time seen.
    fn clock(&mut self, now: Instant) -> Instant {
        let now = self.monotonic(now);
        self.last_now = Some(now);
        now
    }

    /// Appends to the ring of `key` the frame `make` gives (it sees the ring, to take its
    /// next id), then returns what `make` returned beside it. Evicts by the budget (see
    /// [`StoreLimits`](StoreLimits#budget-eviction)) between the ring's own eviction and
    /// the push.
    fn append_at<R>(
        &mut self,
        now: Instant,
        key: RingKey,
        make: impl FnOnce(&ReplayRing) -> Result<(EventId, Bytes, R), StoreError>,
    ) -> Result<R, StoreError> {
        let now = self.monotonic(now);
        let budget = self.limits.max_bytes;
        let mut ring = self
            .rings
            .get_mut(&key)
            .ok_or(StoreError::UnknownRing { ring: key.ring })?;
        let (id, frame, made) = make(ring)?;
        let len = frame.len();
        let admitted = self
            .ledger
            .track(key, ring, |ring| ring.admit(now, id, len, budget))?;
        self.last_now = Some(now);
        let Some(at) = admitted else {
            return Ok(made);
        };
        // INVARIANT: `admit` retains only frames of at most `budget` bytes, and
        // `ledger.bytes <= budget`, so neither subtraction underflows.
        if budget - self.ledger.bytes < len {
            while budget - self.ledger.bytes < len && self.evict_oldest() {}
            ring = self
                .rings
                .get_mut(&key)
                .expect("budget eviction drops frames, never rings");
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.ledger
            .track(key, ring, |ring| ring.push(at, frame, Some(stamp)));
        Ok(made)
    }

    /// Evicts the oldest frame of the whole store; false if no frame is retained.
    fn evict_oldest(&mut self) -> bool {
        while let Some(&(stamp, key)) = self.ledger.fronts.first() {
            let ring = self
                .rings
                .get_mut(&key)
                .expect("every indexed ring is open");
            let front = ring.front_stamp();
            if front != Some(stamp) {
                // A stale lower bound: make it exact, and look at the first entry again.
                self.ledger.index_front(key, ring, front);
                continue;
            }
            self.ledger.track(key, ring, ReplayRing::pop_front);
            // Exact again right away: this ring is the likeliest to be asked next.
            let front = ring.front_stamp();
            self.ledger.index_front(key, ring, front);
            return true;
        }
        false
    }
}

impl<Q> EventStore for MemoryStore<Q>
where
    Q: ?Sized + Ord + ToOwned,
    Q::Owned: Ord,
{
    type Session = Q;

    fn open_ring(&mut self, session: &Q) -> Result<RingId, StoreError> {
        if self.rings.len() >= self.limits.max_rings {
            return Err(StoreError::TooManyRings {
                limit: self.limits.max_rings,
            });
        }
        let entry = self.sessions.get_mut(session);
        if entry.as_ref().map_or(0, |s| s.rings) >= self.limits.max_rings_per_session {
            return Err(StoreError::TooManySessionRings {
                limit: self.limits.max_rings_per_session,
            });
        }
        let value = self.next_ring;
        self.next_ring = value.checked_add(1).ok_or(StoreError::Exhausted)?;
        let ring = RingId::new(value);
        let session = match entry {
            Some(entry) => {
                entry.rings += 1;
                entry.key
            }
            None => {
                // The only allocation for the key: the session's first ring.
                let entry = SessionEntry {
                    key: value,
                    rings: 1,
                };
                self.sessions.insert(session.to_owned(), entry);
                value
            }
        };
        let replay_ring = ReplayRing::new(self.epoch, ring, self.limits.ring);
        self.rings.insert(RingKey { session, ring }, replay_ring);
        Ok(ring)
    }

    fn next_id(&self, session: &Q, ring: RingId) -> Result<EventId, StoreError> {
        self.ring(session, ring)
            .map(ReplayRing::next_id)
            .ok_or(StoreError::UnknownRing { ring })
    }

    fn append(
        &mut self,
        now: Instant,
        session: &Q,
        id: EventId,
        frame: Bytes,
    ) -> Result<(), StoreError> {
        let ring = id.ring();
        let key = self
            .key(session, ring)
            .ok_or(StoreError::UnknownRing { ring })?;
        self.append_at(now, key, |_| Ok((id, frame, ())))
    }

    /// As the default, with one lookup of the ring instead of two.
    fn append_with<F>(
        &mut self,
        now: Instant,
        session: &Q,
        ring: RingId,
        buf: &mut BytesMut,
        encode: F,
    ) -> Result<(EventId, Bytes), StoreError>
    where
        F: FnOnce(sse::Id<'_>, &mut BytesMut),
    {
        let key = self
            .key(session, ring)
            .ok_or(StoreError::UnknownRing { ring })?;
        self.append_at(now, key, |ring| {
            let id = ring.next_id();
            let frame = encode_frame(id, buf, encode)?;
            Ok((id, frame.clone(), (id, frame)))
        })
    }

    fn replay_after(&mut self, now: Instant, session: &Q, after: EventId) -> Replay<'_> {
        let now = self.clock(now);
        // The ring answers an id of another epoch with `UnknownRing`.
        let Some(key) = self.key(session, after.ring()) else {
            return Replay::UnknownRing;
        };
        let Some(ring) = self.rings.get_mut(&key) else {
            return Replay::UnknownRing;
        };
        if ring.poll_timeout().is_some_and(|at| at <= now) {
            // Only a due ring has anything to expire (and the store keeps the clock).
            self.ledger
                .track(key, ring, |ring| ring.handle_timeout(now));
        }
        ring.locate(after)
    }

    fn drop_ring(&mut self, session: &Q, ring: RingId) {
        let Some(entry) = self.sessions.get_mut(session) else {
            return;
        };
        let key = RingKey {
            session: entry.key,
            ring,
        };
        let Some(mut dropped) = self.rings.remove(&key) else {
            return;
        };
        self.ledger.forget(key, &mut dropped);
        entry.rings -= 1;
        if entry.rings == 0 {
            self.sessions.remove(session);
        }
    }

    fn drop_session(&mut self, session: &Q) {
        let Some(entry) = self.sessions.remove(session) else {
            return;
        };
        let first = RingKey {
            session: entry.key,
            ring: RingId::new(0),
        };
        let last = RingKey {
            session: entry.key,
            ring: RingId::new(u64::MAX),
        };
        // One ring at a time (O(log n) each), so dropping allocates nothing.
        while let Some((&key, _)) = self.rings.range(first..=last).next() {
            if let Some(mut dropped) = self.rings.remove(&key) {
                self.ledger.forget(key, &mut dropped);
            }
        }
    }

    /// Expires the rings that are due, found in the deadline index: O(log n) per due
    /// ring, none for the others.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock(now);
        while let Some(&(at, key)) = self.ledger.deadlines.first() {
            if at > now {
                break;
            }
            let ring = self
                .rings
                .get_mut(&key)
                .expect("every indexed ring is open");
            // A due ring drops at least its oldest frame, which moves its deadline past
            // `now`; the check only guards the loop against a broken invariant.
            if self
                .ledger
                .track(key, ring, |ring| ring.handle_timeout(now))
                == 0
            {
                break;
            }
        }
    }

    /// The first entry of the deadline index: O(log n).
    fn poll_timeout(&self) -> Option<Instant> {
        self.ledger.deadlines.first().map(|&(at, _)| at)
    }
}

/// A store operation was refused: a limit was reached, or the caller misused the store.
/// Nothing changed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The store already holds [`StoreLimits::max_rings`] rings.
    TooManyRings {
        /// The limit.
        limit: usize,
    },
    /// The session already holds [`StoreLimits::max_rings_per_session`] rings.
    TooManySessionRings {
        /// The limit.
        limit: usize,
    },
    /// The ring is not open in that session: never opened, or dropped.
    UnknownRing {
        /// The ring.
        ring: RingId,
    },
    /// The frame's id is not the one its ring issues next.
    OutOfOrder {
        /// The ring's next id.
        expected: EventId,
        /// The id given.
        got: EventId,
    },
    /// A counter ran out: `u64::MAX` ring numbers, or ids of one ring, were issued.
    Exhausted,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyRings { limit } => write!(
                f,
                "event store holds max_rings ({limit}) rings; drop finished rings or raise the limit"
            ),
            Self::TooManySessionRings { limit } => write!(
                f,
                "session holds max_rings_per_session ({limit}) rings; drop finished rings or raise the limit"
            ),
            Self::UnknownRing { ring } => write!(
                f,
                "ring {ring} is not open in this session (never opened, or dropped)"
            ),
            Self::OutOfOrder { expected, got } => write!(
                f,
                "event id {got} is not the ring's next id {expected}; encode each frame with next_id or use append_with"
            ),
            Self::Exhausted => {
                f.write_str("event store counter exhausted after u64::MAX ids; start a new epoch")
            }
        }
    }
}

impl std::error::Error for StoreError {}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const EPOCH: Epoch = Epoch::new(0xab);

    fn store(limits: StoreLimits) -> MemoryStore<u8> {
        MemoryStore::new(EPOCH, limits)
    }

    fn push_at(
        store: &mut MemoryStore<u8>,
        now: Instant,
        session: u8,
        ring: RingId,
        len: usize,
    ) -> EventId {
        let id = store.next_id(&session, ring).unwrap();
        let frame = Bytes::from(vec![session; len]);
        store.append(now, &session, id, frame).unwrap();
        id
    }

    fn push(store: &mut MemoryStore<u8>, session: u8, ring: RingId, len: usize) -> EventId {
        push_at(store, Instant::now(), session, ring, len)
    }

    /// The sequence numbers of the frames `ring` retains.
    fn seqs(store: &MemoryStore<u8>, session: u8, ring: RingId) -> Vec<u64> {
        let ring = store.ring(&session, ring).unwrap();
        match ring.first_retained_id() {
            Some(first) => (first.seq()..ring.next_id().seq()).collect(),
            None => Vec::new(),
        }
    }

    #[test]
    fn resume_2_ring_ids_are_never_reused() {
        let mut s = store(StoreLimits::new());
        let a = s.open_ring(&1).unwrap();
        s.drop_ring(&1, a);
        let b = s.open_ring(&1).unwrap();
        let c = s.open_ring(&2).unwrap();
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn resume_6_another_sessions_ring_is_unknown() {
        let now = Instant::now();
        let mut s = store(StoreLimits::new());
        let a = s.open_ring(&1).unwrap();
        let id = push(&mut s, 1, a, 3);
        push(&mut s, 1, a, 3);
        assert_eq!(s.replay_after(now, &2, id), Replay::UnknownRing);
        assert!(matches!(s.replay_after(now, &1, id), Replay::Frames(f) if f.len() == 1));
        let foreign = EventId::new(Epoch::new(0xac), a, id.seq());
        assert_eq!(s.replay_after(now, &1, foreign), Replay::UnknownRing);
        assert_eq!(
            s.append(now, &2, s.next_id(&1, a).unwrap(), Bytes::new()),
            Err(StoreError::UnknownRing { ring: a })
        );
    }

    #[test]
    fn ring_limits_are_enforced_and_freed_by_drops() {
        let limits = StoreLimits::new()
            .with_max_rings(3)
            .with_max_rings_per_session(2);
        let mut s = store(limits);
        let a = s.open_ring(&1).unwrap();
        s.open_ring(&1).unwrap();
        assert_eq!(
            s.open_ring(&1),
            Err(StoreError::TooManySessionRings { limit: 2 })
        );
        s.open_ring(&2).unwrap();
        assert_eq!(s.open_ring(&3), Err(StoreError::TooManyRings { limit: 3 }));
        s.drop_ring(&1, a);
        assert_eq!(s.ring_count(), 2);
        s.open_ring(&3).unwrap();
        s.drop_session(&1);
        s.drop_session(&3);
        assert_eq!(s.ring_count(), 1);
    }

    #[test]
    fn retained_bytes_are_exact_across_rings_drops_and_expiry() {
        let t0 = Instant::now();
        let age = Duration::from_secs(1);
        let ring = RingLimits::new().with_max_bytes(10).with_max_age(Some(age));
        let mut s = store(StoreLimits::new().with_ring(ring));
        let a = s.open_ring(&1).unwrap();
        let b = s.open_ring(&1).unwrap();
        let c = s.open_ring(&2).unwrap();
        push_at(&mut s, t0, 1, a, 4);
        push_at(&mut s, t0, 1, b, 6);
        push_at(&mut s, t0, 2, c, 7);
        assert_eq!(s.retained_bytes(), 17);
        push_at(&mut s, t0, 1, a, 8); // evicts the 4-byte frame
        assert_eq!(s.retained_bytes(), 21);
        s.drop_ring(&1, b);
        assert_eq!(s.retained_bytes(), 15);
        assert_eq!(s.poll_timeout(), Some(t0 + age));
        s.handle_timeout(t0 + 2 * age);
        assert_eq!((s.retained_bytes(), s.poll_timeout()), (0, None));
        push(&mut s, 2, c, 5);
        s.drop_session(&2);
        assert_eq!((s.retained_bytes(), s.ring_count()), (0, 1));
    }

    #[test]
    fn poll_timeout_is_the_earliest_ring_deadline_and_handle_timeout_expires_only_due_rings() {
        let t0 = Instant::now();
        let secs = Duration::from_secs;
        let ring = RingLimits::new().with_max_age(Some(secs(10)));
        let mut s = store(StoreLimits::new().with_ring(ring));
        let (a, b, c) = (
            s.open_ring(&1).unwrap(),
            s.open_ring(&1).unwrap(),
            s.open_ring(&2).unwrap(),
        );
        assert_eq!(s.poll_timeout(), None, "no frames, no deadline");
        push_at(&mut s, t0 + secs(2), 1, b, 1);
        push_at(&mut s, t0, 1, a, 1);
        push_at(&mut s, t0 + secs(4), 2, c, 1);
        push_at(&mut s, t0 + secs(5), 1, a, 1);
        // Time is store-wide: `a`'s frames were appended at t0 + 2 s (the latest seen) and
        // at t0 + 5 s.
        assert_eq!(s.poll_timeout(), Some(t0 + secs(12)));
        s.handle_timeout(t0 + secs(11));
        assert_eq!(s.retained_bytes(), 4, "early: a no-op");
        s.handle_timeout(t0 + secs(12));
        assert_eq!(
            (seqs(&s, 1, a), seqs(&s, 1, b), seqs(&s, 2, c)),
            (vec![1], vec![], vec![0])
        );
        assert_eq!(s.poll_timeout(), Some(t0 + secs(14)));
        s.drop_ring(&2, c);
        assert_eq!(s.poll_timeout(), Some(t0 + secs(15)));
        // A replay expires its ring and moves the deadline too.
        let after = EventId::new(EPOCH, a, 0);
        assert!(matches!(
            s.replay_after(t0 + secs(15), &1, after),
            Replay::Gap { missed: 1, .. }
        ));
        assert_eq!((s.poll_timeout(), s.retained_bytes()), (None, 0));
    }

    #[test]
    fn budget_evicts_the_oldest_frames_of_the_whole_store_first() {
        let mut s = store(StoreLimits::new().with_max_bytes(10));
        let (a, b) = (s.open_ring(&1).unwrap(), s.open_ring(&2).unwrap());
        push(&mut s, 1, a, 3); // a0
        push(&mut s, 2, b, 3); // b0
        push(&mut s, 1, a, 3); // a1
        assert_eq!(s.retained_bytes(), 9);
        push(&mut s, 2, b, 3); // b1: evicts a0, the oldest
        assert_eq!((seqs(&s, 1, a), seqs(&s, 2, b)), (vec![1], vec![0, 1]));
        push(&mut s, 2, b, 6); // b2: evicts b0, then a1
        assert_eq!((seqs(&s, 1, a), seqs(&s, 2, b)), (vec![], vec![1, 2]));
        assert_eq!(s.retained_bytes(), 9);
        // A resume from before an evicted frame is an exact gap.
        let now = Instant::now();
        assert!(matches!(
            s.replay_after(now, &2, EventId::new(EPOCH, b, 0)),
            Replay::Frames(f) if f.len() == 2
        ));
        let Replay::Gap { missed, retained } = s.replay_after(now, &1, EventId::new(EPOCH, a, 0))
        else {
            panic!("a1 was evicted")
        };
        assert_eq!((missed, retained.len()), (1, 0));
        // The appended ring's own frames go too when they are the oldest.
        push(&mut s, 2, b, 4); // b3: evicts b1
        assert_eq!(seqs(&s, 2, b), [2, 3]);
        assert_eq!(s.retained_bytes(), 10);
    }

    #[test]
    fn budget_a_frame_longer_than_the_budget_is_not_retained_and_touches_no_other_ring() {
        let mut s = store(StoreLimits::new().with_max_bytes(10));
        let (a, b) = (s.open_ring(&1).unwrap(), s.open_ring(&1).unwrap());
        push(&mut s, 1, a, 4);
        push(&mut s, 1, b, 4);
        let big = push(&mut s, 1, b, 11);
        assert_eq!((seqs(&s, 1, a), seqs(&s, 1, b)), (vec![0], vec![]));
        assert_eq!(s.retained_bytes(), 4);
        let now = Instant::now();
        assert_eq!(s.replay_after(now, &1, big), Replay::UpToDate);
        assert!(matches!(
            s.replay_after(now, &1, EventId::new(EPOCH, b, 0)),
            Replay::Gap { missed: 1, .. }
        ));
        // Exactly the budget fits, after evicting everything older.
        push(&mut s, 1, b, 10);
        assert_eq!((seqs(&s, 1, a), seqs(&s, 1, b)), (vec![], vec![2]));
        assert_eq!(s.retained_bytes(), 10);
    }

    #[test]
    fn budget_eviction_moves_the_deadline_of_the_ring_it_evicts_from() {
        let t0 = Instant::now();
        let secs = Duration::from_secs;
        let ring = RingLimits::new().with_max_age(Some(secs(10)));
        let mut s = store(StoreLimits::new().with_ring(ring).with_max_bytes(8));
        let (a, b) = (s.open_ring(&1).unwrap(), s.open_ring(&2).unwrap());
        push_at(&mut s, t0, 1, a, 4);
        push_at(&mut s, t0 + secs(1), 1, a, 4);
        assert_eq!(s.poll_timeout(), Some(t0 + secs(10)));
        push_at(&mut s, t0 + secs(2), 2, b, 4); // evicts a0
        assert_eq!(s.poll_timeout(), Some(t0 + secs(11)));
        push_at(&mut s, t0 + secs(3), 2, b, 8); // evicts a1 and b0
        assert_eq!(s.poll_timeout(), Some(t0 + secs(13)));
        assert_eq!((seqs(&s, 1, a), seqs(&s, 2, b)), (vec![], vec![1]));
    }

    #[test]
    fn refused_appends_change_nothing_not_even_the_clock() {
        let t0 = Instant::now();
        let secs = Duration::from_secs;
        let ring = RingLimits::new().with_max_age(Some(secs(10)));
        let mut s = store(StoreLimits::new().with_ring(ring));
        let a = s.open_ring(&1).unwrap();
        let wrong = EventId::new(EPOCH, a, 5);
        assert_eq!(
            s.append(t0 + secs(100), &1, wrong, Bytes::new()),
            Err(StoreError::OutOfOrder {
                expected: EventId::new(EPOCH, a, 0),
                got: wrong
            })
        );
        push_at(&mut s, t0, 1, a, 1);
        assert_eq!(s.poll_timeout(), Some(t0 + secs(10)));
    }

    #[test]
    fn str_sessions_are_stored_as_strings_and_asked_with_str() {
        let now = Instant::now();
        let mut s = MemoryStore::<str>::new(EPOCH, StoreLimits::new());
        let ring = s.open_ring("session-a").unwrap();
        let id = s.next_id("session-a", ring).unwrap();
        s.append(now, "session-a", id, Bytes::from_static(b"x"))
            .unwrap();
        let key: &String = s.sessions.keys().next().unwrap();
        assert_eq!(key, "session-a");
        assert_eq!(s.replay_after(now, "session-b", id), Replay::UnknownRing);
        assert_eq!(s.replay_after(now, "session-a", id), Replay::UpToDate);
        s.drop_ring("session-a", ring);
        assert!(s.sessions.is_empty());
    }
}
