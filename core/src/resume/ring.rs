//! The replay ring: a bounded, contiguous suffix of one resumable stream's encoded frames.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::sse;

use super::{Epoch, EventId, RingId, StoreError};

/// Bounds on what one [`ReplayRing`] retains.
///
/// A ring keeps at most `max_events` frames and at most `max_bytes` bytes of frames, and,
/// if `max_age` is set, drops a frame `max_age` after it was appended. A client that
/// resumes after an id older than what is retained gets a [`Replay::Gap`]. The bound is on
/// the frames' own bytes: a retained frame that is a slice of a larger encode buffer keeps
/// that whole buffer alive (the cost of encoding once and sharing the bytes), so encode
/// into a buffer sized for one frame or a few where that matters.
///
/// ```
/// use std::time::Duration;
/// use mcpwire::resume::RingLimits;
///
/// let limits = RingLimits::new().with_max_events(256).with_max_age(Some(Duration::from_secs(60)));
/// assert_eq!((limits.max_events(), limits.max_bytes()), (256, RingLimits::DEFAULT_MAX_BYTES));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingLimits {
    max_events: usize,
    max_bytes: usize,
    max_age: Option<Duration>,
}

impl RingLimits {
    /// Default [`max_events`](Self::max_events): 1024 frames.
    pub const DEFAULT_MAX_EVENTS: usize = 1024;
    /// Default [`max_bytes`](Self::max_bytes): 1 MiB of frames.
    pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

    /// The default limits: 1024 frames, 1 MiB, no age limit.
    pub const fn new() -> Self {
        Self {
            max_events: Self::DEFAULT_MAX_EVENTS,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_age: None,
        }
    }

    /// Sets the most frames retained. 0 retains none: every id is still issued, and a
    /// resume from anything but the newest id is a gap.
    #[must_use]
    pub const fn with_max_events(mut self, frames: usize) -> Self {
        self.max_events = frames;
        self
    }

    /// Sets the most bytes of frames retained. A frame larger than this is not retained
    /// (see [`ReplayRing::append`]).
    #[must_use]
    pub const fn with_max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Sets how long a frame is retained after it was appended (`None`: no age limit).
    /// A frame expires once `now - appended_at >= max_age`, so zero retains none.
    #[must_use]
    pub const fn with_max_age(mut self, age: Option<Duration>) -> Self {
        self.max_age = age;
        self
    }

    /// The most frames retained.
    pub const fn max_events(&self) -> usize {
        self.max_events
    }

    /// The most bytes of frames retained.
    pub const fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// How long a frame is retained, if limited.
    pub const fn max_age(&self) -> Option<Duration> {
        self.max_age
    }
}

impl Default for RingLimits {
    fn default() -> Self {
        Self::new()
    }
}

/// The replay record of one resumable SSE stream: its encoded frames, kept for replay
/// (RESUME-5), bounded by [`RingLimits`].
///
/// A frame is the encoded `Bytes` of one SSE event. The ring issues the stream's event ids
/// in order, 0, 1, 2, …, and retains the frames exactly as they were written to the socket
/// (`Bytes`, shared, so a replay re-encodes and copies nothing). What it retains is always
/// a contiguous run of the newest frames, so
/// [`replay_after`](Self::replay_after) finds an id's successor by subtraction, in O(1)
/// whatever the number of retained frames, and knows exactly how many frames a client
/// missed when its id fell out of the ring. Append is amortised O(1) (each frame is
/// evicted once) and allocates nothing once the ring has grown to its steady size.
///
/// Time is an argument (`now`); the ring reads no clock and treats time as monotonic:
/// an earlier `now` than one seen before counts as that later one. With an age limit,
/// [`poll_timeout`](Self::poll_timeout) is when the oldest frame expires and
/// [`handle_timeout`](Self::handle_timeout) drops it, as every time-driven type in this
/// crate says it.
///
/// # Example
///
/// ```
/// use std::time::Instant;
/// use bytes::BytesMut;
/// use mcpwire::resume::{Epoch, Replay, ReplayRing, RingId, RingLimits};
/// use mcpwire::sse::{Encoder, EventFields};
///
/// let mut ring = ReplayRing::new(Epoch::new(7), RingId::new(1), RingLimits::new());
/// let (now, enc, mut buf) = (Instant::now(), Encoder::new(), BytesMut::new());
/// // The ring hands out the next id; the frame is encoded with it, retained, and returned
/// // for the socket.
/// let (primed, frame) = ring.append_with(now, &mut buf, |id, buf| enc.encode_priming(id, None, buf))?;
/// assert_eq!(&frame[..], b"id: 7:1:0\ndata:\n\n");
/// let (_, frame) = ring.append_with(now, &mut buf, |id, buf| {
///     enc.encode_event(&EventFields::new().with_id(id), "{}", buf)
/// })?;
/// assert_eq!(&frame[..], b"id: 7:1:1\ndata: {}\n\n");
///
/// // A client that saw only the priming event gets the message it missed.
/// let Replay::Frames(frames) = ring.replay_after(now, primed) else { panic!() };
/// assert_eq!(frames.collect::<Vec<_>>(), [&frame]);
/// # Ok::<(), mcpwire::resume::StoreError>(())
/// ```
///
/// Not `Clone`: two copies would issue the same ids (RESUME-2).
#[derive(Debug)]
pub struct ReplayRing {
    epoch: Epoch,
    ring: RingId,
    limits: RingLimits,
    /// The retained frames, oldest first.
    /// INVARIANT: `frames[i]` is event `next_seq - frames.len() + i`: a contiguous suffix of
    /// the stream, so `frames.len() <= next_seq`; `frames.len() <= limits.max_events`.
    frames: VecDeque<Bytes>,
    /// INVARIANT: when `limits.max_age` is set, `times[i]` is when `frames[i]` was
    /// appended (non-decreasing); otherwise `times` is empty.
    times: VecDeque<Instant>,
    /// INVARIANT: in a ring of a [`MemoryStore`](super::MemoryStore), `stamps[i]` is the
    /// store-wide append stamp of `frames[i]` (increasing), which orders the frames of all
    /// the store's rings oldest first for its byte budget; in a ring used alone (whose
    /// appends never carry a stamp) `stamps` is empty.
    stamps: VecDeque<u64>,
    /// In a ring of a [`MemoryStore`](super::MemoryStore): the stamp under which the
    /// store's budget index holds this ring, a lower bound of `stamps.front()` (see
    /// `Ledger::fronts`); `None` when it is not in the index.
    pub(super) indexed_front: Option<u64>,
    /// The sequence number of the next frame. INVARIANT: only grows.
    next_seq: u64,
    /// INVARIANT: the sum of `frames[i].len()`, and `bytes <= limits.max_bytes`.
    bytes: usize,
    /// The latest `now` seen, so time never runs backwards.
    last_now: Option<Instant>,
}

impl ReplayRing {
    /// An empty ring numbered `ring`; its first frame will be event 0. Allocates nothing
    /// until the first append.
    pub fn new(epoch: Epoch, ring: RingId, limits: RingLimits) -> Self {
        Self {
            epoch,
            ring,
            limits,
            frames: VecDeque::new(),
            times: VecDeque::new(),
            stamps: VecDeque::new(),
            indexed_front: None,
            next_seq: 0,
            bytes: 0,
            last_now: None,
        }
    }

    /// The epoch in the ring's ids.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The ring's number, in its ids.
    pub fn ring_id(&self) -> RingId {
        self.ring
    }

    /// The ring's limits.
    pub fn limits(&self) -> RingLimits {
        self.limits
    }

    /// The id the next appended frame must carry.
    pub fn next_id(&self) -> EventId {
        EventId::new(self.epoch, self.ring, self.next_seq)
    }

    /// The newest id issued, retained or not; `None` before the first append.
    pub fn last_id(&self) -> Option<EventId> {
        self.next_seq.checked_sub(1).map(|seq| self.id(seq))
    }

    /// The id of the oldest retained frame; `None` if nothing is retained.
    pub fn first_retained_id(&self) -> Option<EventId> {
        (!self.frames.is_empty()).then(|| self.id(self.front_seq()))
    }

    /// The number of frames retained.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether no frame is retained.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The exact number of bytes of the retained frames (their lengths summed). The
    /// allocations behind them can be larger: frames split from one buffer share its
    /// blocks (see [`sse::Encoder`](crate::sse::Encoder)), and the oldest retained frame
    /// keeps its whole block alive.
    pub fn retained_bytes(&self) -> usize {
        self.bytes
    }

    /// Retains `frame`, the encoded event `id`, evicting the oldest frames to stay within
    /// the limits (and, first, the expired ones).
    ///
    /// `id` must be [`next_id`](Self::next_id), and `frame` must be the bytes written to
    /// the socket for it, `id` field included. [`append_with`](Self::append_with) does
    /// both in one call and cannot get them out of step; this form is for frames encoded
    /// elsewhere. A frame larger than `max_bytes` (or any frame, when `max_events` or
    /// `max_age` is 0) is not retained, and neither is anything before it: its id is
    /// issued, and a resume from before it is a [`Replay::Gap`], since the frame cannot be
    /// replayed.
    ///
    /// # Errors
    ///
    /// [`StoreError::OutOfOrder`] if `id` is not the next id (nothing changes);
    /// [`StoreError::Exhausted`] once `u64::MAX` ids were issued.
    pub fn append(&mut self, now: Instant, id: EventId, frame: Bytes) -> Result<(), StoreError> {
        if let Some(at) = self.admit(now, id, frame.len(), usize::MAX)? {
            self.push(at, frame, None);
        }
        Ok(())
    }

    /// The first half of an append of a frame of `len` bytes as event `id`: checks the id,
    /// expires, issues the id, and makes room in this ring by its own limits. Returns when
    /// the frame was appended (time made monotonic) if it is to be retained, for
    /// [`push`](Self::push); `None` if it is not (then nothing before it is either: the
    /// ring is empty). A frame longer than `budget` (the store's byte budget, or
    /// `usize::MAX`) is not retained either. Between the two halves a store may evict
    /// frames of other rings to stay within its budget.
    ///
    /// # Errors
    ///
    /// As for [`append`](Self::append); nothing changes then.
    pub(crate) fn admit(
        &mut self,
        now: Instant,
        id: EventId,
        len: usize,
        budget: usize,
    ) -> Result<Option<Instant>, StoreError> {
        let expected = self.next_id();
        if id != expected {
            return Err(StoreError::OutOfOrder { expected, got: id });
        }
        let next_seq = self.next_seq.checked_add(1).ok_or(StoreError::Exhausted)?;
        let now = self.clock(now);
        self.expire_at(now);
        self.next_seq = next_seq;
        if len > self.limits.max_bytes.min(budget)
            || self.limits.max_events == 0
            || self.limits.max_age == Some(Duration::ZERO)
        {
            // Keep the suffix contiguous: frames before an unretained one are no use to a
            // client, which would miss this one anyway.
            self.frames.clear();
            self.times.clear();
            self.stamps.clear();
            self.bytes = 0;
            return Ok(None);
        }
        // Evict before pushing, so the deque never holds more than `max_events` frames and
        // its capacity stops growing.
        while self.frames.len() >= self.limits.max_events
            || self.limits.max_bytes - self.bytes < len
        {
            if self.pop_front().is_none() {
                break;
            }
        }
        Ok(Some(now))
    }

    /// The second half of an append: retains `frame`, appended `at` (from
    /// [`admit`](Self::admit), which made room for it), with its store-wide `stamp`.
    pub(crate) fn push(&mut self, at: Instant, frame: Bytes, stamp: Option<u64>) {
        self.bytes += frame.len();
        self.frames.push_back(frame);
        if self.limits.max_age.is_some() {
            self.times.push_back(at);
        }
        if let Some(stamp) = stamp {
            self.stamps.push_back(stamp);
        }
    }

    /// Encodes the next frame with its id and retains it: `encode` gets the id as an SSE
    /// `id` value and appends one frame to `buf`; what it appended is split off `buf`
    /// (bytes already in `buf` stay there), retained as by [`append`](Self::append), and
    /// returned with its id for the socket.
    ///
    /// # Errors
    ///
    /// [`StoreError::Exhausted`] once `u64::MAX` ids were issued (`encode` is not called).
    pub fn append_with(
        &mut self,
        now: Instant,
        buf: &mut BytesMut,
        encode: impl FnOnce(sse::Id<'_>, &mut BytesMut),
    ) -> Result<(EventId, Bytes), StoreError> {
        let id = self.next_id();
        let frame = encode_frame(id, buf, encode)?;
        self.append(now, id, frame.clone())?;
        Ok((id, frame))
    }

    /// Drops the frames that reached `max_age` by `now` (none if it is not set); returns
    /// how many.
    ///
    /// Appends and replays expire too, so calling this is only needed to free the memory
    /// of an idle stream, at [`poll_timeout`](Self::poll_timeout). Calling it earlier is a
    /// no-op: it drops nothing (it only records `now` as the latest time seen).
    pub fn handle_timeout(&mut self, now: Instant) -> usize {
        let now = self.clock(now);
        self.expire_at(now)
    }

    /// When the oldest retained frame expires, the next time
    /// [`handle_timeout`](Self::handle_timeout) has work; `None` without an age limit or
    /// frames.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let at = *self.times.front()?;
        at.checked_add(self.limits.max_age?)
    }

    /// What to send a client that resumes after `after` (RESUME-5): the frames that
    /// followed it, or why there are none. Expires old frames first (amortised over the
    /// frames it drops), then locates in O(1); allocates nothing. See [`Replay`] for the
    /// answers.
    pub fn replay_after(&mut self, now: Instant, after: EventId) -> Replay<'_> {
        self.handle_timeout(now);
        self.locate(after)
    }

    /// [`replay_after`](Self::replay_after) without expiring.
    pub(crate) fn locate(&self, after: EventId) -> Replay<'_> {
        let (head, tail) = self.frames.as_slices();
        Replay::classify(after, self.next_id(), head, tail)
    }

    fn id(&self, seq: u64) -> EventId {
        EventId::new(self.epoch, self.ring, seq)
    }

    /// The sequence number of the oldest retained frame (`next_seq` if none).
    fn front_seq(&self) -> u64 {
        // INVARIANT: frames.len() <= next_seq.
        self.next_seq - self.frames.len() as u64
    }

    fn clock(&mut self, now: Instant) -> Instant {
        let now = match self.last_now {
            Some(last) if last > now => last,
            _ => now,
        };
        self.last_now = Some(now);
        now
    }

    fn expire_at(&mut self, now: Instant) -> usize {
        let Some(max_age) = self.limits.max_age else {
            return 0;
        };
        let mut expired = 0;
        while let Some(&at) = self.times.front() {
            if now.saturating_duration_since(at) < max_age || self.pop_front().is_none() {
                break;
            }
            expired += 1;
        }
        expired
    }

    /// The store-wide stamp of the oldest retained frame; `None` if nothing is retained
    /// or the ring is used alone.
    pub(crate) fn front_stamp(&self) -> Option<u64> {
        self.stamps.front().copied()
    }

    /// Evicts the oldest frame and returns its length; `None` if there is none. The
    /// retained frames stay a contiguous suffix, so a resume from before the evicted frame
    /// is an exact [`Replay::Gap`].
    pub(crate) fn pop_front(&mut self) -> Option<usize> {
        let frame = self.frames.pop_front()?;
        self.times.pop_front();
        self.stamps.pop_front();
        self.bytes -= frame.len();
        Some(frame.len())
    }
}

/// Runs `encode` with `id` (a ring's next id) as an SSE id into `buf` and splits off what
/// it appended: the one encode step of every `append_with`.
///
/// # Errors
///
/// [`StoreError::Exhausted`] if `id` is the one id a ring cannot issue (sequence
/// `u64::MAX`: its successor would not exist); `encode` is not called.
pub(crate) fn encode_frame(
    id: EventId,
    buf: &mut BytesMut,
    encode: impl FnOnce(sse::Id<'_>, &mut BytesMut),
) -> Result<Bytes, StoreError> {
    if id.seq() == u64::MAX {
        return Err(StoreError::Exhausted);
    }
    let text = id.encode();
    let start = buf.len();
    encode(text.sse_id(), buf);
    let start = start.min(buf.len());
    // `split` keeps the spare capacity in `buf` for the next frame; `split_off` would
    // hand it to the frame, so it is only for the rare caller that left bytes in `buf`.
    let frame = if start == 0 {
        buf.split()
    } else {
        buf.split_off(start)
    };
    Ok(frame.freeze())
}

/// What a store answers a client that resumes after an id (RESUME-5, RESUME-6).
///
/// Every answer but [`Frames`](Self::Frames) means the client cannot simply continue:
/// only [`UpToDate`](Self::UpToDate) says it missed nothing, and a client that missed
/// messages always gets [`Gap`](Self::Gap), never an empty replay.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Replay<'a> {
    /// The frames that followed the id, oldest first, up to the newest: send them, then
    /// continue the stream live. Never empty.
    Frames(Frames<'a>),
    /// The id is the stream's newest: nothing was missed; continue the stream live.
    UpToDate,
    /// Frames that followed the id are no longer retained (the ring's limits or age
    /// evicted them): the client lost messages and must be told so, not sent the rest as
    /// if nothing happened (docs/requirements.md §14.2).
    Gap {
        /// How many frames right after the id are lost.
        missed: u64,
        /// The frames retained after those, up to the newest (possibly none).
        retained: Frames<'a>,
    },
    /// The id names no ring (no resumable stream) of this session in this store: another
    /// session's or a dropped ring, another epoch (before a restart), or a ring never
    /// opened. Its messages are never replayed (RESUME-6); docs/requirements.md §14.3 suggests
    /// 400, not 404.
    UnknownRing,
    /// The id names this ring but a frame it never issued (ahead of the newest): a
    /// forged or corrupted id. Not "up to date", which would hide the mismatch.
    NotIssued,
    /// The store cannot answer now: its frames are in another process and the driver must
    /// fetch them (see the [module docs](super#stores-in-another-process)). The in-memory
    /// [`ReplayRing`] and [`MemoryStore`](super::MemoryStore) never answer this.
    Pending,
}

impl<'a> Replay<'a> {
    /// The answer for a replay after `after`, from frames a driver fetched from another
    /// process: the rules of [`ReplayRing::replay_after`] applied to that window.
    ///
    /// `frames` are consecutive events of one ring, oldest first, the first being
    /// `first`, and the window is taken to end at the newest frame the driver could see:
    /// the ring's next id is `first` plus `frames.len()`. With no frames, `first` is
    /// the ring's next id. The driver guarantees the run has no holes: if a write was
    /// lost (the store holds 5, 6 and 8), it passes only what follows the hole (8, with
    /// `first` = 8), and the answer is then an exact [`Gap`](Self::Gap). A window that
    /// stops short of the ring's newest frame (a paged fetch, or writes still in
    /// flight) is answered as far as it goes; the client resumes again after its newest
    /// id for the rest (see the [module docs](super#stores-in-another-process)).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mcpwire::resume::{Epoch, EventId, Replay, RingId};
    ///
    /// let id = |seq| EventId::new(Epoch::new(1), RingId::new(2), seq);
    /// // Events 5..=7 were fetched.
    /// let fetched = [Bytes::from("five"), Bytes::from("six"), Bytes::from("seven")];
    /// let Replay::Frames(frames) = Replay::from_window(id(5), id(5), &fetched) else { panic!() };
    /// assert_eq!(frames.first_id(), Some(id(6)));
    /// assert!(matches!(Replay::from_window(id(3), id(5), &fetched), Replay::Gap { missed: 1, .. }));
    /// assert_eq!(Replay::from_window(id(7), id(5), &fetched), Replay::UpToDate);
    /// ```
    pub fn from_window(after: EventId, first: EventId, frames: &'a [Bytes]) -> Self {
        // Ids end at u64::MAX: frames beyond it cannot exist and are dropped.
        let room = usize::try_from(u64::MAX - first.seq()).unwrap_or(usize::MAX);
        let frames = &frames[..frames.len().min(room)];
        let next = first.with_seq(first.seq() + frames.len() as u64);
        Self::classify(after, next, frames, &[])
    }

    /// `head` then `tail` are the retained frames: a contiguous run ending at event
    /// `next.seq() - 1`, with `head.len() + tail.len() <= next.seq()`.
    fn classify(after: EventId, next: EventId, head: &'a [Bytes], tail: &'a [Bytes]) -> Self {
        if after.epoch() != next.epoch() || after.ring() != next.ring() {
            return Self::UnknownRing;
        }
        if after.seq() >= next.seq() {
            return Self::NotIssued;
        }
        // No overflow: after.seq() < next.seq() <= u64::MAX.
        let wanted = after.seq() + 1;
        if wanted == next.seq() {
            return Self::UpToDate;
        }
        let retained = (head.len() + tail.len()) as u64;
        let front = next.seq() - retained;
        if wanted < front {
            return Self::Gap {
                missed: front - wanted,
                retained: Frames::new(next.with_seq(front), head, tail),
            };
        }
        // INVARIANT: front <= wanted < next.seq(), so 0 <= skip < head.len() + tail.len().
        let skip = (wanted - front) as usize;
        let (head, tail) = match head.get(skip..) {
            Some(rest) => (rest, tail),
            None => (tail.get(skip - head.len()..).unwrap_or_default(), &[][..]),
        };
        Self::Frames(Frames::new(next.with_seq(wanted), head, tail))
    }
}

/// Retained frames, oldest first, borrowed from the store: iterate them (each item is the
/// `Bytes` to write, shared, not copied) or take them as two slices for a vectored write.
#[derive(Clone, Debug)]
pub struct Frames<'a> {
    /// INVARIANT: `head` is empty only if `tail` is.
    head: &'a [Bytes],
    tail: &'a [Bytes],
    /// The id of the first frame of `head`.
    first: EventId,
}

impl<'a> Frames<'a> {
    fn new(first: EventId, head: &'a [Bytes], tail: &'a [Bytes]) -> Self {
        if head.is_empty() {
            Self {
                head: tail,
                tail: &[],
                first,
            }
        } else {
            Self { head, tail, first }
        }
    }

    /// The id of the first frame; `None` if there are none.
    pub fn first_id(&self) -> Option<EventId> {
        (!self.head.is_empty()).then_some(self.first)
    }

    /// The id of the last frame; `None` if there are none.
    pub fn last_id(&self) -> Option<EventId> {
        let len = self.len() as u64;
        (len > 0).then(|| self.first.with_seq(self.first.seq() + (len - 1)))
    }

    /// The frames as (up to) two slices, in order.
    pub fn as_slices(&self) -> (&'a [Bytes], &'a [Bytes]) {
        (self.head, self.tail)
    }

    /// The bytes of all frames (a sum over them: O(n)).
    pub fn total_bytes(&self) -> usize {
        self.head.iter().chain(self.tail).map(Bytes::len).sum()
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = &'a Bytes;

    fn next(&mut self) -> Option<&'a Bytes> {
        let (frame, rest) = self.head.split_first()?;
        self.head = rest;
        self.first = self.first.with_seq(self.first.seq().wrapping_add(1));
        if self.head.is_empty() {
            self.head = std::mem::take(&mut self.tail);
        }
        Some(frame)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = self.head.len() + self.tail.len();
        (len, Some(len))
    }
}

impl DoubleEndedIterator for Frames<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if let Some((frame, rest)) = self.tail.split_last() {
            self.tail = rest;
            return Some(frame);
        }
        let (frame, rest) = self.head.split_last()?;
        self.head = rest;
        Some(frame)
    }
}

impl ExactSizeIterator for Frames<'_> {}

impl std::iter::FusedIterator for Frames<'_> {}

impl PartialEq for Frames<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.first_id() == other.first_id() && self.clone().eq(other.clone())
    }
}

impl Eq for Frames<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    const EPOCH: Epoch = Epoch::new(0xe);
    const RING: RingId = RingId::new(3);

    fn id(seq: u64) -> EventId {
        EventId::new(EPOCH, RING, seq)
    }

    fn ring(limits: RingLimits) -> ReplayRing {
        ReplayRing::new(EPOCH, RING, limits)
    }

    /// Appends frames of the given lengths (each filled with its seq's low byte).
    fn fill(ring: &mut ReplayRing, now: Instant, lens: &[usize]) {
        for &len in lens {
            let id = ring.next_id();
            let frame = Bytes::from(vec![id.seq() as u8; len]);
            ring.append(now, id, frame).unwrap();
        }
    }

    fn seqs(frames: Frames<'_>) -> Vec<u64> {
        frames
            .map(|f| u64::from(f.first().copied().unwrap_or(0)))
            .collect()
    }

    #[test]
    fn resume_5_replays_the_frames_after_the_id() {
        let now = Instant::now();
        let mut r = ring(RingLimits::new());
        fill(&mut r, now, &[1, 2, 3, 4]);
        let Replay::Frames(frames) = r.replay_after(now, id(1)) else {
            panic!()
        };
        assert_eq!(
            (frames.first_id(), frames.last_id()),
            (Some(id(2)), Some(id(3)))
        );
        assert_eq!(frames.total_bytes(), 7);
        assert_eq!(seqs(frames), [2, 3]);
        assert_eq!(r.replay_after(now, id(3)), Replay::UpToDate);
        assert_eq!(r.replay_after(now, id(4)), Replay::NotIssued);
    }

    #[test]
    fn resume_6_ids_of_another_ring_or_epoch_are_unknown() {
        let now = Instant::now();
        let mut r = ring(RingLimits::new());
        fill(&mut r, now, &[1, 1]);
        let other_ring = EventId::new(EPOCH, RingId::new(4), 0);
        let other_epoch = EventId::new(Epoch::new(0xf), RING, 0);
        assert_eq!(r.replay_after(now, other_ring), Replay::UnknownRing);
        assert_eq!(r.replay_after(now, other_epoch), Replay::UnknownRing);
    }

    #[test]
    fn transport_14_2_evicted_id_is_a_gap_with_the_missed_count() {
        let now = Instant::now();
        let mut r = ring(RingLimits::new().with_max_events(3));
        fill(&mut r, now, &[1; 6]);
        assert_eq!(r.first_retained_id(), Some(id(3)));
        let Replay::Gap { missed, retained } = r.replay_after(now, id(0)) else {
            panic!()
        };
        assert_eq!(missed, 2);
        assert_eq!(seqs(retained), [3, 4, 5]);
        // The oldest retained id's predecessor still replays completely.
        assert!(matches!(r.replay_after(now, id(2)), Replay::Frames(f) if f.len() == 3));
    }

    #[test]
    fn retained_bytes_are_exact_under_byte_eviction() {
        let now = Instant::now();
        let mut r = ring(RingLimits::new().with_max_bytes(10));
        fill(&mut r, now, &[4, 4]);
        assert_eq!((r.len(), r.retained_bytes()), (2, 8));
        fill(&mut r, now, &[2]);
        assert_eq!((r.len(), r.retained_bytes()), (3, 10));
        fill(&mut r, now, &[5]); // evicts the two 4-byte frames: 2 + 5
        assert_eq!((r.len(), r.retained_bytes()), (2, 7));
        fill(&mut r, now, &[0, 0]);
        assert_eq!((r.len(), r.retained_bytes()), (4, 7));
    }

    #[test]
    fn oversized_frame_is_not_retained_and_earlier_ids_become_a_gap() {
        let now = Instant::now();
        let mut r = ring(RingLimits::new().with_max_bytes(8));
        fill(&mut r, now, &[2, 2, 9]);
        assert_eq!((r.len(), r.retained_bytes()), (0, 0));
        assert_eq!(r.last_id(), Some(id(2)));
        assert_eq!(r.replay_after(now, id(2)), Replay::UpToDate);
        assert!(matches!(
            r.replay_after(now, id(1)),
            Replay::Gap { missed: 1, retained } if retained.len() == 0
        ));
        fill(&mut r, now, &[3]);
        assert!(
            matches!(r.replay_after(now, id(0)), Replay::Gap { missed: 2, retained } if retained.len() == 1)
        );
    }

    #[test]
    fn zero_max_events_retains_nothing_but_issues_ids() {
        let now = Instant::now();
        let mut r = ring(RingLimits::new().with_max_events(0));
        fill(&mut r, now, &[1, 1]);
        assert_eq!((r.len(), r.next_id()), (0, id(2)));
        assert_eq!(r.replay_after(now, id(1)), Replay::UpToDate);
        assert!(matches!(
            r.replay_after(now, id(0)),
            Replay::Gap { missed: 1, .. }
        ));
    }

    #[test]
    fn frames_expire_at_max_age_and_time_never_runs_backwards() {
        let t0 = Instant::now();
        let age = Duration::from_secs(10);
        let mut r = ring(RingLimits::new().with_max_age(Some(age)));
        fill(&mut r, t0, &[1]);
        fill(&mut r, t0 + Duration::from_secs(5), &[1]);
        assert_eq!(r.poll_timeout(), Some(t0 + age));
        assert_eq!(
            r.handle_timeout(t0 + Duration::from_secs(9)),
            0,
            "early: a no-op"
        );
        assert_eq!(r.handle_timeout(t0 + age), 1);
        assert_eq!(r.poll_timeout(), Some(t0 + Duration::from_secs(15)));
        // An earlier `now` counts as the latest one seen (t0 + 10 s): frame 2 is appended
        // then, and expires at t0 + 20 s, not at t0 + 10 s.
        fill(&mut r, t0, &[1]);
        assert_eq!(r.len(), 2);
        let Replay::Frames(frames) = r.replay_after(t0 + Duration::from_secs(15), id(1)) else {
            panic!()
        };
        assert_eq!(seqs(frames), [2]);
        assert_eq!(r.len(), 1);
        assert_eq!(r.poll_timeout(), Some(t0 + Duration::from_secs(20)));
        assert!(matches!(
            r.replay_after(t0, id(0)),
            Replay::Gap { missed: 1, .. }
        ));
        assert_eq!(
            r.replay_after(t0 + Duration::from_secs(20), id(2)),
            Replay::UpToDate
        );
        assert!(r.is_empty());
    }

    #[test]
    fn append_rejects_an_id_that_is_not_next_and_changes_nothing() {
        let now = Instant::now();
        let mut r = ring(RingLimits::new());
        fill(&mut r, now, &[1]);
        for wrong in [id(0), id(2), EventId::new(EPOCH, RingId::new(9), 1)] {
            assert_eq!(
                r.append(now, wrong, Bytes::new()),
                Err(StoreError::OutOfOrder {
                    expected: id(1),
                    got: wrong
                })
            );
        }
        assert_eq!((r.len(), r.next_id()), (1, id(1)));
    }

    #[test]
    fn append_with_keeps_earlier_bytes_in_the_buffer() {
        let now = Instant::now();
        let mut r = ring(RingLimits::new());
        let mut buf = BytesMut::from(&b"kept"[..]);
        let (id0, frame) = r
            .append_with(now, &mut buf, |id, buf| {
                sse::Encoder::new().encode_priming(id, None, buf);
            })
            .unwrap();
        assert_eq!(id0, id(0));
        assert_eq!(&frame[..], b"id: e:3:0\ndata:\n\n");
        assert_eq!(&buf[..], b"kept");
    }

    #[test]
    fn frames_iterate_across_the_deque_wrap() {
        let now = Instant::now();
        let mut r = ring(RingLimits::new().with_max_events(4));
        fill(&mut r, now, &[1; 7]);
        for after in 2..6 {
            let Replay::Frames(frames) = r.replay_after(now, id(after)) else {
                panic!()
            };
            let (head, tail) = frames.as_slices();
            assert_eq!(head.len() + tail.len(), (6 - after) as usize);
            assert_eq!(frames.clone().rev().count(), frames.len());
            assert_eq!(seqs(frames), (after + 1..7).collect::<Vec<_>>());
        }
    }

    #[test]
    fn from_window_counts_from_the_first_frame() {
        let frames = [Bytes::from("a"), Bytes::from("b"), Bytes::from("c")];
        // Events 5, 6, 7.
        let Replay::Frames(f) = Replay::from_window(id(5), id(5), &frames) else {
            panic!()
        };
        assert_eq!(f.collect::<Vec<_>>(), [&frames[1], &frames[2]]);
        assert!(matches!(
            Replay::from_window(id(2), id(5), &frames),
            Replay::Gap { missed: 2, .. }
        ));
        assert_eq!(Replay::from_window(id(7), id(5), &frames), Replay::UpToDate);
        assert_eq!(
            Replay::from_window(id(8), id(5), &frames),
            Replay::NotIssued
        );
        assert_eq!(
            Replay::from_window(id(4), id(8), &[]),
            Replay::Gap {
                missed: 3,
                retained: Frames::new(id(8), &[], &[]),
            }
        );
        // A window reaching past the last possible id keeps what fits.
        let Replay::Frames(f) = Replay::from_window(id(u64::MAX - 2), id(u64::MAX - 1), &frames)
        else {
            panic!()
        };
        assert_eq!(f.collect::<Vec<_>>(), [&frames[0]]);
    }
}
