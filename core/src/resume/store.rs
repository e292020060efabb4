//! The event store seam, and its in-memory implementation over [`ReplayRing`]s.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use crate::sse;

use super::ring::encode_frame;
use super::{Epoch, EventId, Replay, ReplayRing, RingLimits, StreamId};

/// Where the server keeps each resumable stream's frames for replay: the seam between the
/// server state machine and its storage.
///
/// A store allocates stream ids, issues each stream's event ids in order, retains the
/// encoded frames, answers replays by the rules of [`Replay`], and forgets streams and
/// sessions when told. Every method is synchronous and does no IO: [`MemoryStore`] is the
/// default implementation; a store in another process sits behind an adapter that
/// answers [`Replay::Pending`] and lets the driver do the IO (see the
/// [module docs](super#stores-in-another-process)).
///
/// Each stream belongs to one session: a replay names the session it comes from (the
/// request's `Mcp-Session-Id`) and the store answers [`Replay::UnknownStream`] for a
/// stream of any other session (RESUME-6).
///
/// # Example
///
/// ```
/// use std::time::Instant;
/// use bytes::BytesMut;
/// use mcpwire::resume::{Epoch, EventId, EventStore, MemoryStore, Replay, StoreLimits};
/// use mcpwire::sse::{Encoder, EventFields};
///
/// let mut store = MemoryStore::new(Epoch::new(0x5eed), StoreLimits::new());
/// let (session, now, enc, mut buf) = ("session-a", Instant::now(), Encoder::new(), BytesMut::new());
///
/// // A new SSE stream: open it, prime it (RESUME-8), send a message. Each frame is
/// // encoded once, with its id, and the same bytes go to the socket and the store.
/// let stream = store.open_stream(&session)?;
/// let (primed, _priming) = store.append_with(now, &session, stream, &mut buf, |id, buf| {
///     enc.encode_priming(id, None, buf)
/// })?;
/// let (_, message) = store.append_with(now, &session, stream, &mut buf, |id, buf| {
///     enc.encode_event(&EventFields::new().with_id(id), r#"{"jsonrpc":"2.0","method":"ping","id":1}"#, buf)
/// })?;
///
/// // The connection drops; the client GETs with `Last-Event-ID: 5eed:0:0` (RESUME-4).
/// let after = EventId::parse_bytes(b"5eed:0:0")?;
/// assert_eq!(after, primed);
/// match store.replay_after(now, &session, after) {
///     Replay::Frames(frames) => assert_eq!(frames.collect::<Vec<_>>(), [&message]),
///     Replay::UpToDate => { /* nothing missed: continue live */ }
///     Replay::Gap { .. } => { /* messages were lost: say so */ }
///     Replay::UnknownStream | Replay::NotIssued => { /* 400 (TRANSPORT.md §14.3) */ }
///     Replay::Pending => unreachable!("a memory store answers at once"),
/// }
/// // Another session cannot replay this stream (RESUME-6); DELETE forgets it (§14.15).
/// assert_eq!(store.replay_after(now, &"session-b", after), Replay::UnknownStream);
/// store.drop_session(&session);
/// assert_eq!(store.replay_after(now, &session, after), Replay::UnknownStream);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait EventStore {
    /// How the store knows a session (the server's session handle, or the
    /// `Mcp-Session-Id` value itself).
    type Session;

    /// Starts a resumable stream in `session` and returns its id, never used before in
    /// this store's epoch. Its first frame will be event 0.
    ///
    /// # Errors
    ///
    /// [`StoreError::TooManyStreams`] or [`StoreError::TooManySessionStreams`] at a limit
    /// (the server may then serve the stream without ids: not resumable);
    /// [`StoreError::Exhausted`] when the stream counter is.
    fn open_stream(&mut self, session: &Self::Session) -> Result<StreamId, StoreError>;

    /// The id the next frame of `stream` must carry: encode the frame with it, then
    /// [`append`](Self::append) it (or do both with [`append_with`](Self::append_with)).
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownStream`] if `stream` is not open in `session`.
    fn next_id(&self, session: &Self::Session, stream: StreamId) -> Result<EventId, StoreError>;

    /// Retains `frame`, the encoded event `id` of stream `id.stream()`, as
    /// [`ReplayRing::append`] does.
    ///
    /// # Errors
    ///
    /// [`StoreError::UnknownStream`] if the stream is not open in `session`;
    /// [`StoreError::OutOfOrder`] if `id` is not its [`next_id`](Self::next_id);
    /// [`StoreError::Exhausted`] when its sequence is.
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

    /// Forgets `stream` and its frames: a resume after any of its ids is then
    /// [`Replay::UnknownStream`]. Nothing happens if it is not open in `session`.
    fn drop_stream(&mut self, session: &Self::Session, stream: StreamId);

    /// Forgets every stream of `session` (the session ended or was deleted, TRANSPORT.md
    /// §14.15).
    fn drop_session(&mut self, session: &Self::Session);

    /// Drops frames past their age limit. Appends and replays expire the stream they
    /// touch, so this only frees memory of idle streams; call it at
    /// [`next_expiry`](Self::next_expiry). The default does nothing.
    fn expire(&mut self, now: Instant) {
        let _ = now;
    }

    /// When [`expire`](Self::expire) next has work; `None` if never (the default).
    fn next_expiry(&self) -> Option<Instant> {
        None
    }

    /// Encodes the next frame of `stream` with its id and retains it; returns the id and
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
        stream: StreamId,
        buf: &mut BytesMut,
        encode: F,
    ) -> Result<(EventId, Bytes), StoreError>
    where
        Self: Sized,
        F: FnOnce(sse::Id<'_>, &mut BytesMut),
    {
        let id = self.next_id(session, stream)?;
        if id.seq() == u64::MAX {
            return Err(StoreError::Exhausted);
        }
        let frame = encode_frame(id, buf, encode);
        self.append(now, session, id, frame.clone())?;
        Ok((id, frame))
    }
}

/// Bounds on a [`MemoryStore`]: how many streams it holds, and what each retains.
///
/// The store holds at most `max_streams × ring.max_bytes()` bytes of frames; size the
/// two together for the memory you can spend (the defaults allow 1 GiB in the worst case
/// of every stream full).
///
/// ```
/// use mcpwire::resume::{RingLimits, StoreLimits};
///
/// let limits = StoreLimits::new()
///     .with_max_streams(10_000)
///     .with_ring(RingLimits::new().with_max_bytes(64 << 10));
/// assert_eq!(limits.ring().max_bytes(), 64 << 10);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoreLimits {
    max_streams: usize,
    max_streams_per_session: usize,
    ring: RingLimits,
}

impl StoreLimits {
    /// Default [`max_streams`](Self::max_streams): 1024.
    pub const DEFAULT_MAX_STREAMS: usize = 1024;
    /// Default [`max_streams_per_session`](Self::max_streams_per_session): 64.
    pub const DEFAULT_MAX_STREAMS_PER_SESSION: usize = 64;

    /// The default limits, with [`RingLimits::new`] for each stream.
    pub const fn new() -> Self {
        Self {
            max_streams: Self::DEFAULT_MAX_STREAMS,
            max_streams_per_session: Self::DEFAULT_MAX_STREAMS_PER_SESSION,
            ring: RingLimits::new(),
        }
    }

    /// Sets the most streams open at once, over all sessions.
    #[must_use]
    pub const fn with_max_streams(mut self, streams: usize) -> Self {
        self.max_streams = streams;
        self
    }

    /// Sets the most streams one session has open at once.
    #[must_use]
    pub const fn with_max_streams_per_session(mut self, streams: usize) -> Self {
        self.max_streams_per_session = streams;
        self
    }

    /// Sets what each stream retains.
    #[must_use]
    pub const fn with_ring(mut self, ring: RingLimits) -> Self {
        self.ring = ring;
        self
    }

    /// The most streams open at once.
    pub const fn max_streams(&self) -> usize {
        self.max_streams
    }

    /// The most streams one session has open at once.
    pub const fn max_streams_per_session(&self) -> usize {
        self.max_streams_per_session
    }

    /// What each stream retains.
    pub const fn ring(&self) -> RingLimits {
        self.ring
    }
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self::new()
    }
}

/// The in-memory [`EventStore`]: one [`ReplayRing`] per open stream, in one process.
///
/// Sessions are keys of any ordered type `S` (the store is a `BTreeMap`, so it runs the
/// same way every time: no random hashing). A replay costs two map lookups (O(log n) in
/// the number of sessions and of the session's streams) and an O(1) locate in the ring,
/// independent of the number of retained frames. Stream ids come from one counter and are
/// never reused; the counter is store-wide, so the stream ids a client sees also tell it
/// roughly how many streams the server has opened (use one store per session to avoid
/// that). Not `Clone`: two copies would issue the same ids (RESUME-2).
#[derive(Debug)]
pub struct MemoryStore<S> {
    epoch: Epoch,
    limits: StoreLimits,
    /// INVARIANT: no session maps to an empty map; each ring's stream is its key.
    sessions: BTreeMap<S, BTreeMap<StreamId, ReplayRing>>,
    /// INVARIANT: the number of rings in `sessions`.
    streams: usize,
    /// The value of the next stream id. INVARIANT: only grows.
    next_stream: u64,
    /// INVARIANT: the sum of the rings' `retained_bytes`.
    bytes: usize,
}

impl<S: Ord + Clone> MemoryStore<S> {
    /// An empty store issuing ids in `epoch` (choose one no earlier store used, for
    /// example random at start-up: see [`Epoch`]).
    pub fn new(epoch: Epoch, limits: StoreLimits) -> Self {
        Self {
            epoch,
            limits,
            sessions: BTreeMap::new(),
            streams: 0,
            next_stream: 0,
            bytes: 0,
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

    /// The number of open streams.
    pub fn stream_count(&self) -> usize {
        self.streams
    }

    /// The exact number of bytes of frames retained over all streams.
    pub fn retained_bytes(&self) -> usize {
        self.bytes
    }

    /// The ring of `stream`, if it is open in `session`.
    pub fn ring(&self, session: &S, stream: StreamId) -> Option<&ReplayRing> {
        self.sessions.get(session)?.get(&stream)
    }

    /// Runs `f` on the ring of `stream` in `session`, keeping the byte total exact.
    fn update_ring<R>(
        &mut self,
        session: &S,
        stream: StreamId,
        f: impl FnOnce(&mut ReplayRing) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let ring = self
            .sessions
            .get_mut(session)
            .and_then(|streams| streams.get_mut(&stream))
            .ok_or(StoreError::UnknownStream { stream })?;
        let before = ring.retained_bytes();
        let result = f(ring);
        self.bytes = self.bytes - before + ring.retained_bytes();
        result
    }
}

impl<S: Ord + Clone> EventStore for MemoryStore<S> {
    type Session = S;

    fn open_stream(&mut self, session: &S) -> Result<StreamId, StoreError> {
        if self.streams >= self.limits.max_streams {
            return Err(StoreError::TooManyStreams {
                limit: self.limits.max_streams,
            });
        }
        let streams = self.sessions.get_mut(session);
        if streams.as_ref().map_or(0, |s| s.len()) >= self.limits.max_streams_per_session {
            return Err(StoreError::TooManySessionStreams {
                limit: self.limits.max_streams_per_session,
            });
        }
        let value = self.next_stream;
        self.next_stream = value.checked_add(1).ok_or(StoreError::Exhausted)?;
        let stream = StreamId::new(value);
        let ring = ReplayRing::new(self.epoch, stream, self.limits.ring);
        match streams {
            Some(streams) => {
                streams.insert(stream, ring);
            }
            None => {
                self.sessions
                    .insert(session.clone(), BTreeMap::from([(stream, ring)]));
            }
        }
        self.streams += 1;
        Ok(stream)
    }

    fn next_id(&self, session: &S, stream: StreamId) -> Result<EventId, StoreError> {
        self.ring(session, stream)
            .map(ReplayRing::next_id)
            .ok_or(StoreError::UnknownStream { stream })
    }

    fn append(
        &mut self,
        now: Instant,
        session: &S,
        id: EventId,
        frame: Bytes,
    ) -> Result<(), StoreError> {
        self.update_ring(session, id.stream(), |ring| ring.append(now, id, frame))
    }

    /// As the default, with one lookup of the stream instead of two.
    fn append_with<F>(
        &mut self,
        now: Instant,
        session: &S,
        stream: StreamId,
        buf: &mut BytesMut,
        encode: F,
    ) -> Result<(EventId, Bytes), StoreError>
    where
        F: FnOnce(sse::Id<'_>, &mut BytesMut),
    {
        self.update_ring(session, stream, |ring| ring.append_with(now, buf, encode))
    }

    fn replay_after(&mut self, now: Instant, session: &S, after: EventId) -> Replay<'_> {
        // The ring answers an id of another epoch with `UnknownStream`.
        let Some(ring) = self
            .sessions
            .get_mut(session)
            .and_then(|streams| streams.get_mut(&after.stream()))
        else {
            return Replay::UnknownStream;
        };
        let before = ring.retained_bytes();
        ring.expire(now);
        self.bytes -= before - ring.retained_bytes();
        ring.locate(after)
    }

    fn drop_stream(&mut self, session: &S, stream: StreamId) {
        let Some(streams) = self.sessions.get_mut(session) else {
            return;
        };
        if let Some(ring) = streams.remove(&stream) {
            self.bytes -= ring.retained_bytes();
            self.streams -= 1;
        }
        if streams.is_empty() {
            self.sessions.remove(session);
        }
    }

    fn drop_session(&mut self, session: &S) {
        if let Some(streams) = self.sessions.remove(session) {
            self.streams -= streams.len();
            self.bytes -= streams
                .values()
                .map(ReplayRing::retained_bytes)
                .sum::<usize>();
        }
    }

    /// Expires every stream: O(number of streams).
    fn expire(&mut self, now: Instant) {
        for ring in self.sessions.values_mut().flat_map(BTreeMap::values_mut) {
            let before = ring.retained_bytes();
            ring.expire(now);
            self.bytes -= before - ring.retained_bytes();
        }
    }

    /// The earliest expiry over all streams: O(number of streams).
    fn next_expiry(&self) -> Option<Instant> {
        self.sessions
            .values()
            .flat_map(BTreeMap::values)
            .filter_map(ReplayRing::next_expiry)
            .min()
    }
}

/// A store operation was refused: a limit was reached, or the caller misused the store.
/// Nothing changed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The store already holds [`StoreLimits::max_streams`] streams.
    TooManyStreams {
        /// The limit.
        limit: usize,
    },
    /// The session already holds [`StoreLimits::max_streams_per_session`] streams.
    TooManySessionStreams {
        /// The limit.
        limit: usize,
    },
    /// The stream is not open in that session: never opened, or dropped.
    UnknownStream {
        /// The stream.
        stream: StreamId,
    },
    /// The frame's id is not the one its stream issues next.
    OutOfOrder {
        /// The stream's next id.
        expected: EventId,
        /// The id given.
        got: EventId,
    },
    /// A counter ran out: `u64::MAX` stream ids, or ids of one stream, were issued.
    Exhausted,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyStreams { limit } => write!(
                f,
                "event store holds max_streams ({limit}) streams; drop finished streams or raise the limit"
            ),
            Self::TooManySessionStreams { limit } => write!(
                f,
                "session holds max_streams_per_session ({limit}) streams; drop finished streams or raise the limit"
            ),
            Self::UnknownStream { stream } => write!(
                f,
                "stream {stream} is not open in this session (never opened, or dropped)"
            ),
            Self::OutOfOrder { expected, got } => write!(
                f,
                "event id {got} is not the stream's next id {expected}; encode each frame with next_id or use append_with"
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
    use super::*;

    const EPOCH: Epoch = Epoch::new(0xab);

    fn store(limits: StoreLimits) -> MemoryStore<u8> {
        MemoryStore::new(EPOCH, limits)
    }

    fn push(store: &mut MemoryStore<u8>, session: u8, stream: StreamId, len: usize) -> EventId {
        let id = store.next_id(&session, stream).unwrap();
        let frame = Bytes::from(vec![session; len]);
        store.append(Instant::now(), &session, id, frame).unwrap();
        id
    }

    #[test]
    fn resume_2_stream_ids_are_never_reused() {
        let mut s = store(StoreLimits::new());
        let a = s.open_stream(&1).unwrap();
        s.drop_stream(&1, a);
        let b = s.open_stream(&1).unwrap();
        let c = s.open_stream(&2).unwrap();
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn resume_6_another_sessions_stream_is_unknown() {
        let now = Instant::now();
        let mut s = store(StoreLimits::new());
        let a = s.open_stream(&1).unwrap();
        let id = push(&mut s, 1, a, 3);
        push(&mut s, 1, a, 3);
        assert_eq!(s.replay_after(now, &2, id), Replay::UnknownStream);
        assert!(matches!(s.replay_after(now, &1, id), Replay::Frames(f) if f.len() == 1));
        let foreign = EventId::new(Epoch::new(0xac), a, id.seq());
        assert_eq!(s.replay_after(now, &1, foreign), Replay::UnknownStream);
        assert_eq!(
            s.append(now, &2, s.next_id(&1, a).unwrap(), Bytes::new()),
            Err(StoreError::UnknownStream { stream: a })
        );
    }

    #[test]
    fn stream_limits_are_enforced_and_freed_by_drops() {
        let limits = StoreLimits::new()
            .with_max_streams(3)
            .with_max_streams_per_session(2);
        let mut s = store(limits);
        let a = s.open_stream(&1).unwrap();
        s.open_stream(&1).unwrap();
        assert_eq!(
            s.open_stream(&1),
            Err(StoreError::TooManySessionStreams { limit: 2 })
        );
        s.open_stream(&2).unwrap();
        assert_eq!(
            s.open_stream(&3),
            Err(StoreError::TooManyStreams { limit: 3 })
        );
        s.drop_stream(&1, a);
        assert_eq!(s.stream_count(), 2);
        s.open_stream(&3).unwrap();
        s.drop_session(&1);
        s.drop_session(&3);
        assert_eq!(s.stream_count(), 1);
    }

    #[test]
    fn retained_bytes_are_exact_across_streams_drops_and_expiry() {
        let t0 = Instant::now();
        let age = std::time::Duration::from_secs(1);
        let ring = RingLimits::new().with_max_bytes(10).with_max_age(Some(age));
        let mut s = store(StoreLimits::new().with_ring(ring));
        let a = s.open_stream(&1).unwrap();
        let b = s.open_stream(&1).unwrap();
        let c = s.open_stream(&2).unwrap();
        push(&mut s, 1, a, 4);
        push(&mut s, 1, b, 6);
        push(&mut s, 2, c, 7);
        assert_eq!(s.retained_bytes(), 17);
        push(&mut s, 1, a, 8); // evicts the 4-byte frame
        assert_eq!(s.retained_bytes(), 21);
        s.drop_stream(&1, b);
        assert_eq!(s.retained_bytes(), 15);
        assert!(s.next_expiry().is_some());
        s.expire(t0 + 2 * age);
        assert_eq!((s.retained_bytes(), s.next_expiry()), (0, None));
        push(&mut s, 2, c, 5);
        s.drop_session(&2);
        assert_eq!((s.retained_bytes(), s.stream_count()), (0, 1));
    }
}
