//! Property tests for resumability (ARCHITECTURE.md "Testing pyramid" 2):
//!
//! - model-based: random appends (of random sizes, including oversized ones and ids out
//!   of order), expiries and replays (after retained, evicted, future, newest ids and ids
//!   of another ring or epoch) with random time steps (forwards, zero, backwards) give
//!   the same answers from `ReplayRing` as from a naive model that keeps every event in a
//!   `Vec` and recomputes what is retained from the limits' definition after each step;
//!   likewise `MemoryStore` over several sessions and rings against a model of one such
//!   `Vec` per ring, a store-wide clock, and the byte budget applied naively (evict the
//!   oldest retained frame of the whole store, found by a scan, until the total fits);
//!   every ring, the byte total and the next deadline (the naive minimum over rings) are
//!   compared after every step (RESUME-2, RESUME-5, RESUME-6, TRANSPORT.md §14.2, §14.15);
//! - a gap is never reported as an empty replay: after any history, every id of the
//!   stream replays completely to the newest, or is a gap with the exact missed count;
//! - event ids: the text round-trips, and parsing arbitrary bytes never panics and
//!   accepts exactly the canonical texts of a spec-literal acceptance rule (§14.1).
//!
//! Each property runs 10,000 cases.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcpwire::resume::{
    Epoch, EventId, EventIdError, EventStore, MemoryStore, Replay, ReplayRing, RingId, RingLimits,
    StoreError, StoreLimits,
};
use mcpwire_tests::reference::resume::is_canonical_event_id;
use proptest::prelude::*;
use proptest::sample::Index;

const CASES: u32 = 10_000;

const EPOCH: Epoch = Epoch::new(0x5eed);

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// The naive model.

/// A replay answer in owned, comparable form.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Frames {
        first: u64,
        frames: Vec<Bytes>,
    },
    UpToDate,
    Gap {
        missed: u64,
        first: Option<u64>,
        retained: Vec<Bytes>,
    },
    UnknownRing,
    NotIssued,
    Pending,
}

fn answer(replay: Replay<'_>) -> Answer {
    match replay {
        Replay::Frames(frames) => Answer::Frames {
            first: frames.first_id().expect("frames are never empty").seq(),
            frames: frames.cloned().collect(),
        },
        Replay::UpToDate => Answer::UpToDate,
        Replay::Gap { missed, retained } => Answer::Gap {
            missed,
            first: retained.first_id().map(EventId::seq),
            retained: retained.cloned().collect(),
        },
        Replay::UnknownRing => Answer::UnknownRing,
        Replay::NotIssued => Answer::NotIssued,
        Replay::Pending => Answer::Pending,
    }
}

/// One ring as the limits define it, computed the slow way: every event ever appended
/// is kept, and the retained ones are the longest run of the newest events that
/// satisfies every limit at the latest time, never growing back at the front.
#[derive(Clone, Debug)]
struct ModelRing {
    ring: RingId,
    limits: RingLimits,
    /// The store's byte budget (`usize::MAX` alone): no frame longer is retained.
    budget: usize,
    /// Every event appended, by sequence number: its frame, when it was appended, and
    /// its store-wide append stamp.
    history: Vec<(Bytes, Instant, u64)>,
    /// `history[front..]` is retained.
    front: usize,
    last_now: Option<Instant>,
}

impl ModelRing {
    fn new(ring: RingId, limits: RingLimits, budget: usize) -> Self {
        Self {
            ring,
            limits,
            budget,
            history: Vec::new(),
            front: 0,
            last_now: None,
        }
    }

    fn id(&self, seq: u64) -> EventId {
        EventId::new(EPOCH, self.ring, seq)
    }

    fn clock(&mut self, now: Instant) -> Instant {
        let now = self.last_now.map_or(now, |last| last.max(now));
        self.last_now = Some(now);
        now
    }

    fn fits(&self, start: usize, now: Instant) -> bool {
        let run = &self.history[start..];
        run.len() <= self.limits.max_events()
            && run.iter().map(|(f, ..)| f.len()).sum::<usize>() <= self.limits.max_bytes()
            && run.iter().all(|(f, ..)| f.len() <= self.budget)
            && run.iter().all(|&(_, at, _)| {
                self.limits
                    .max_age()
                    .is_none_or(|age| now.duration_since(at) < age)
            })
    }

    fn settle(&mut self, now: Instant) {
        while !self.fits(self.front, now) {
            self.front += 1;
        }
    }

    fn retained(&self) -> &[(Bytes, Instant, u64)] {
        &self.history[self.front..]
    }

    fn next_id(&self) -> EventId {
        self.id(self.history.len() as u64)
    }

    fn append(&mut self, now: Instant, frame: Bytes, stamp: u64) {
        let now = self.clock(now);
        self.history.push((frame, now, stamp));
        self.settle(now);
    }

    fn expire(&mut self, now: Instant) {
        let now = self.clock(now);
        self.settle(now);
    }

    fn replay(&mut self, now: Instant, after: EventId) -> Answer {
        self.expire(now);
        if after.epoch() != EPOCH || after.ring() != self.ring {
            return Answer::UnknownRing;
        }
        // Find the event by scanning the whole history.
        let Some(pos) = (0..self.history.len()).find(|&i| i as u64 == after.seq()) else {
            return Answer::NotIssued;
        };
        let frames = |from: usize| -> Vec<Bytes> {
            self.history[from..]
                .iter()
                .map(|(f, ..)| f.clone())
                .collect()
        };
        if pos + 1 == self.history.len() {
            Answer::UpToDate
        } else if pos + 1 >= self.front {
            Answer::Frames {
                first: pos as u64 + 1,
                frames: frames(pos + 1),
            }
        } else {
            Answer::Gap {
                missed: (self.front - (pos + 1)) as u64,
                first: (self.front < self.history.len()).then_some(self.front as u64),
                retained: frames(self.front),
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let (_, at, _) = self.retained().first()?;
        at.checked_add(self.limits.max_age()?)
    }

    fn retained_bytes(&self) -> usize {
        self.retained().iter().map(|(f, ..)| f.len()).sum()
    }

    /// The stamp of the oldest retained frame.
    fn front_stamp(&self) -> Option<u64> {
        self.retained().first().map(|&(_, _, stamp)| stamp)
    }
}

/// A `MemoryStore` computed the slow way: one `ModelRing` per open ring, one clock for
/// all of them, and the byte budget applied after each append by evicting the oldest
/// retained frame of the whole store (found by scanning every ring) until the total fits.
struct ModelStore {
    limits: StoreLimits,
    /// (session, ring) -> model.
    rings: BTreeMap<(u8, RingId), ModelRing>,
    next_stamp: u64,
    last_now: Option<Instant>,
}

impl ModelStore {
    fn new(limits: StoreLimits) -> Self {
        Self {
            limits,
            rings: BTreeMap::new(),
            next_stamp: 0,
            last_now: None,
        }
    }

    fn clock(&mut self, now: Instant) -> Instant {
        let now = self.last_now.map_or(now, |last| last.max(now));
        self.last_now = Some(now);
        now
    }

    fn open(&mut self, session: u8, ring: RingId) {
        let model = ModelRing::new(ring, self.limits.ring(), self.limits.max_bytes());
        self.rings.insert((session, ring), model);
    }

    fn append(&mut self, now: Instant, key: (u8, RingId), frame: Bytes) {
        let now = self.clock(now);
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.rings.get_mut(&key).unwrap().append(now, frame, stamp);
        while self.retained_bytes() > self.limits.max_bytes() {
            let oldest = self
                .rings
                .values_mut()
                .filter(|ring| ring.front_stamp().is_some())
                .min_by_key(|ring| ring.front_stamp())
                .expect("over the budget, so some frame is retained");
            oldest.front += 1;
        }
    }

    fn replay(&mut self, now: Instant, session: u8, after: EventId) -> Answer {
        let now = self.clock(now);
        match self.rings.get_mut(&(session, after.ring())) {
            Some(model) => model.replay(now, after),
            None => Answer::UnknownRing,
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock(now);
        for model in self.rings.values_mut() {
            model.expire(now);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.rings
            .values()
            .filter_map(ModelRing::poll_timeout)
            .min()
    }

    fn retained_bytes(&self) -> usize {
        self.rings.values().map(ModelRing::retained_bytes).sum()
    }
}

/// Checks every observable of `ring` against `model`.
fn same_state(ring: &ReplayRing, model: &ModelRing) -> Result<(), TestCaseError> {
    prop_assert_eq!(ring.next_id(), model.next_id());
    prop_assert_eq!(ring.len(), model.retained().len());
    prop_assert_eq!(ring.retained_bytes(), model.retained_bytes());
    prop_assert_eq!(
        ring.last_id(),
        model
            .history
            .len()
            .checked_sub(1)
            .map(|s| model.id(s as u64))
    );
    prop_assert_eq!(
        ring.first_retained_id(),
        (!model.retained().is_empty()).then(|| model.id(model.front as u64))
    );
    prop_assert_eq!(ring.poll_timeout(), model.poll_timeout());
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Generators.

/// Frame `seq` of `len` bytes: distinct frames for distinct sequence numbers (when long
/// enough to hold them), so a replay of the wrong frames shows.
fn frame(seq: u64, len: usize) -> Bytes {
    let mut bytes = vec![seq as u8; len];
    let tag = seq.to_le_bytes();
    let n = len.min(tag.len());
    bytes[..n].copy_from_slice(&tag[..n]);
    Bytes::from(bytes)
}

/// A time step in milliseconds: mostly forwards, sometimes none, sometimes backwards
/// (the ring must treat time as monotonic).
fn step() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => 0i64..20,
        2 => Just(0i64),
        1 => -30i64..0,
        1 => 20i64..200,
    ]
}

fn ring_limits() -> impl Strategy<Value = RingLimits> {
    let events = prop_oneof![1 => Just(0usize), 6 => 1usize..8, 2 => 8usize..40];
    let bytes = prop_oneof![1 => Just(0usize), 6 => 0usize..80, 1 => Just(usize::MAX)];
    let age = prop_oneof![
        3 => Just(None),
        1 => Just(Some(Duration::ZERO)),
        4 => (1u64..60).prop_map(|ms| Some(Duration::from_millis(ms))),
    ];
    (events, bytes, age).prop_map(|(events, bytes, age)| {
        RingLimits::new()
            .with_max_events(events)
            .with_max_bytes(bytes)
            .with_max_age(age)
    })
}

/// Which id a replay asks about.
#[derive(Clone, Debug)]
enum Target {
    /// An id issued (retained or evicted), picked among all issued.
    Issued(Index),
    /// The newest id.
    Newest,
    /// `next_id() + k`: never issued.
    Future(u64),
    /// An issued sequence number, but of another ring.
    OtherRing(Index),
    /// An issued sequence number, but of another epoch.
    OtherEpoch(Index),
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        8 => any::<Index>().prop_map(Target::Issued),
        2 => Just(Target::Newest),
        2 => (0u64..3).prop_map(Target::Future),
        1 => any::<Index>().prop_map(Target::OtherRing),
        1 => any::<Index>().prop_map(Target::OtherEpoch),
    ]
}

impl Target {
    fn id(&self, ring: RingId, next_seq: u64) -> EventId {
        let pick = |i: &Index| {
            if next_seq == 0 {
                0
            } else {
                i.index(next_seq as usize) as u64
            }
        };
        match self {
            Self::Issued(i) => EventId::new(EPOCH, ring, pick(i)),
            Self::Newest => EventId::new(EPOCH, ring, next_seq.saturating_sub(1)),
            Self::Future(k) => EventId::new(EPOCH, ring, next_seq + k),
            Self::OtherRing(i) => EventId::new(EPOCH, RingId::new(ring.get() ^ 1), pick(i)),
            Self::OtherEpoch(i) => EventId::new(Epoch::new(EPOCH.get() + 1), ring, pick(i)),
        }
    }
}

#[derive(Clone, Debug)]
enum RingOp {
    Append {
        len: usize,
        step: i64,
    },
    /// An append with the wrong id (`next_id + delta`, delta != 0): refused, no change.
    AppendOutOfOrder {
        delta: i64,
    },
    Expire {
        step: i64,
    },
    Replay {
        target: Target,
        step: i64,
    },
}

fn ring_op() -> impl Strategy<Value = RingOp> {
    prop_oneof![
        8 => (prop_oneof![6 => 0usize..24, 1 => 24usize..100], step())
            .prop_map(|(len, step)| RingOp::Append { len, step }),
        1 => prop_oneof![-3i64..0, 1i64..3].prop_map(|delta| RingOp::AppendOutOfOrder { delta }),
        1 => step().prop_map(|step| RingOp::Expire { step }),
        5 => (target(), step()).prop_map(|(target, step)| RingOp::Replay { target, step }),
    ]
}

/// Virtual time: a base instant and an offset that steps may move either way.
struct Clock {
    base: Instant,
    offset_ms: i64,
}

impl Clock {
    fn new() -> Self {
        Self {
            base: Instant::now(),
            offset_ms: 0,
        }
    }

    fn step(&mut self, ms: i64) -> Instant {
        self.offset_ms = (self.offset_ms + ms).max(0);
        self.base + Duration::from_millis(self.offset_ms as u64)
    }
}

// ---------------------------------------------------------------------------------------
// Properties.

proptest! {
    #![proptest_config(config())]

    /// `ReplayRing` answers and accounts exactly as the naive model does.
    #[test]
    fn ring_matches_naive_model(
        limits in ring_limits(),
        ops in proptest::collection::vec(ring_op(), 0..48),
    ) {
        let ring_id = RingId::new(6);
        let mut ring = ReplayRing::new(EPOCH, ring_id, limits);
        let mut model = ModelRing::new(ring_id, limits, usize::MAX);
        let mut clock = Clock::new();
        for op in &ops {
            match op {
                RingOp::Append { len, step } => {
                    let now = clock.step(*step);
                    let id = ring.next_id();
                    let frame = frame(id.seq(), *len);
                    prop_assert_eq!(ring.append(now, id, frame.clone()), Ok(()));
                    model.append(now, frame, id.seq());
                }
                RingOp::AppendOutOfOrder { delta } => {
                    let expected = ring.next_id();
                    let got = EventId::new(EPOCH, ring_id, expected.seq().wrapping_add_signed(*delta));
                    prop_assert_eq!(
                        ring.append(clock.step(0), got, Bytes::new()),
                        Err(StoreError::OutOfOrder { expected, got })
                    );
                }
                RingOp::Expire { step } => {
                    let now = clock.step(*step);
                    let before = ring.len();
                    let expired = ring.handle_timeout(now);
                    model.expire(now);
                    prop_assert_eq!(expired, before - ring.len());
                }
                RingOp::Replay { target, step } => {
                    let now = clock.step(*step);
                    let after = target.id(ring_id, ring.next_id().seq());
                    let got = answer(ring.replay_after(now, after));
                    let want = model.replay(now, after);
                    prop_assert_eq!(&got, &want, "replay after {}", after);
                }
            }
            same_state(&ring, &model)?;
        }
    }

    /// A gap is never reported as an empty replay: after any history, replaying after
    /// every id the stream issued gives either all the frames up to the newest, or a gap
    /// whose missed count and retained frames add up to exactly what followed the id.
    #[test]
    fn gap_is_never_reported_as_an_empty_replay(
        limits in ring_limits(),
        ops in proptest::collection::vec(ring_op(), 0..48),
    ) {
        let ring_id = RingId::new(1);
        let mut ring = ReplayRing::new(EPOCH, ring_id, limits);
        let mut clock = Clock::new();
        for op in &ops {
            match op {
                RingOp::Append { len, step } => {
                    let id = ring.next_id();
                    ring.append(clock.step(*step), id, frame(id.seq(), *len)).unwrap();
                }
                RingOp::Expire { step } => {
                    let _ = ring.handle_timeout(clock.step(*step));
                }
                RingOp::AppendOutOfOrder { .. } | RingOp::Replay { .. } => {}
            }
        }
        let now = clock.step(0);
        let next = ring.next_id().seq();
        for seq in 0..next + 2 {
            let after = EventId::new(EPOCH, ring_id, seq);
            // What followed `after`: events seq + 1 ..= next - 1.
            let followed = next.saturating_sub(seq + 1);
            match ring.replay_after(now, after) {
                Replay::UpToDate => prop_assert_eq!(seq + 1, next, "up to date, but not newest"),
                Replay::Frames(frames) => {
                    prop_assert!(followed > 0);
                    prop_assert_eq!(frames.len() as u64, followed, "frames missing after {}", seq);
                    prop_assert_eq!(frames.first_id(), Some(EventId::new(EPOCH, ring_id, seq + 1)));
                    prop_assert_eq!(frames.last_id(), ring_last(next, ring_id));
                }
                Replay::Gap { missed, retained } => {
                    prop_assert!(missed > 0, "a gap with nothing missed");
                    prop_assert_eq!(missed + retained.len() as u64, followed);
                    if let Some(last) = retained.last_id() {
                        prop_assert_eq!(Some(last), ring_last(next, ring_id));
                    }
                }
                Replay::NotIssued => prop_assert!(seq >= next),
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }

    /// `MemoryStore` over several sessions and rings equals the naive store model on every
    /// step: answers, every ring's state, the byte total (within the budget), the ring
    /// count and the next deadline; replays of another session's or a dropped ring are
    /// unknown, ring numbers are never reused, and refused appends change nothing.
    #[test]
    fn memory_store_matches_naive_store_model(
        ring in ring_limits(),
        max_rings in 1usize..6,
        per_session in 1usize..4,
        max_bytes in store_budget(),
        ops in proptest::collection::vec(store_op(), 0..64),
    ) {
        let limits = StoreLimits::new()
            .with_max_rings(max_rings)
            .with_max_rings_per_session(per_session)
            .with_max_bytes(max_bytes)
            .with_ring(ring);
        let mut store = MemoryStore::new(EPOCH, limits);
        let mut model = ModelStore::new(limits);
        // Every ring ever opened, in order.
        let mut opened: Vec<(u8, RingId)> = Vec::new();
        let mut clock = Clock::new();
        for op in &ops {
            match op {
                StoreOp::Open { session } => {
                    let in_session = model.rings.keys().filter(|(s, _)| s == session).count();
                    let got = store.open_ring(session);
                    if model.rings.len() >= max_rings {
                        prop_assert_eq!(got, Err(StoreError::TooManyRings { limit: max_rings }));
                    } else if in_session >= per_session {
                        prop_assert_eq!(got, Err(StoreError::TooManySessionRings { limit: per_session }));
                    } else {
                        let ring = got.unwrap();
                        // RESUME-2: a ring number is never handed out twice.
                        prop_assert!(opened.iter().all(|&(_, r)| r != ring));
                        opened.push((*session, ring));
                        model.open(*session, ring);
                    }
                }
                StoreOp::Append { pick, session, len, step } => {
                    let Some(&(owner, ring)) = pick_of(&opened, pick) else { continue };
                    let now = clock.step(*step);
                    let session = if *session { owner } else { owner ^ 1 };
                    let Some(ring_model) = model.rings.get(&(session, ring)) else {
                        let id = EventId::new(EPOCH, ring, 0);
                        prop_assert_eq!(
                            store.append(now, &session, id, Bytes::new()),
                            Err(StoreError::UnknownRing { ring })
                        );
                        continue;
                    };
                    let id = store.next_id(&session, ring).unwrap();
                    prop_assert_eq!(id, ring_model.next_id());
                    let frame = frame(id.seq() + (u64::from(session) << 32), *len);
                    store.append(now, &session, id, frame.clone()).unwrap();
                    model.append(now, (session, ring), frame);
                }
                StoreOp::AppendOutOfOrder { pick, delta, step } => {
                    let Some(&(owner, ring)) = pick_of(&opened, pick) else { continue };
                    let Ok(expected) = store.next_id(&owner, ring) else { continue };
                    let got = EventId::new(EPOCH, ring, expected.seq().wrapping_add_signed(*delta));
                    prop_assert_eq!(
                        store.append(clock.step(*step), &owner, got, Bytes::new()),
                        Err(StoreError::OutOfOrder { expected, got })
                    );
                }
                StoreOp::Replay { pick, session, target, step } => {
                    let Some(&(owner, ring)) = pick_of(&opened, pick) else { continue };
                    let now = clock.step(*step);
                    let session = if *session { owner } else { owner ^ 1 };
                    let next_seq = model
                        .rings
                        .get(&(owner, ring))
                        .map_or(0, |m| m.history.len() as u64);
                    let after = target.id(ring, next_seq);
                    let got = answer(store.replay_after(now, &session, after));
                    let want = model.replay(now, session, after);
                    prop_assert_eq!(&got, &want, "replay after {} in session {}", after, session);
                }
                StoreOp::DropRing { pick } => {
                    let Some(&(owner, ring)) = pick_of(&opened, pick) else { continue };
                    store.drop_ring(&owner, ring);
                    model.rings.remove(&(owner, ring));
                }
                StoreOp::DropSession { session } => {
                    store.drop_session(session);
                    model.rings.retain(|(s, _), _| s != session);
                }
                StoreOp::HandleTimeout { step } => {
                    let now = clock.step(*step);
                    store.handle_timeout(now);
                    model.handle_timeout(now);
                }
            }
            prop_assert_eq!(store.ring_count(), model.rings.len());
            prop_assert_eq!(store.retained_bytes(), model.retained_bytes());
            prop_assert!(store.retained_bytes() <= max_bytes);
            // The deadline index against the naive minimum over rings.
            prop_assert_eq!(store.poll_timeout(), model.poll_timeout());
            for &(session, ring) in &opened {
                match model.rings.get(&(session, ring)) {
                    Some(ring_model) => same_state(store.ring(&session, ring).unwrap(), ring_model)?,
                    None => prop_assert!(store.ring(&session, ring).is_none()),
                }
            }
        }
    }

    /// Every id's text parses back to it, is canonical and fits the documented bound.
    #[test]
    fn event_id_text_round_trips(epoch: u64, ring: u64, seq: u64) {
        let id = EventId::new(Epoch::new(epoch), RingId::new(ring), seq);
        let text = id.encode();
        prop_assert!(text.len() <= EventId::MAX_LEN);
        prop_assert_eq!(text.as_str(), format!("{epoch:x}:{ring:x}:{seq:x}"));
        prop_assert_eq!(EventId::parse(&text), Ok(id));
        prop_assert_eq!(text.sse_id().as_str(), text.as_str());
    }

    /// Parsing any bytes never panics, and accepts exactly the canonical texts (checked
    /// against a spec-literal rule), each of which formats back to the input.
    #[test]
    fn event_id_parse_accepts_exactly_canonical_text(input in id_input()) {
        let parsed = EventId::parse_bytes(&input);
        prop_assert_eq!(parsed.is_ok(), is_canonical_event_id(&input), "{:?}", String::from_utf8_lossy(&input));
        if let Ok(id) = parsed {
            let text = id.encode();
            prop_assert_eq!(text.as_bytes(), &input[..]);
        }
        if let Ok(text) = std::str::from_utf8(&input) {
            prop_assert_eq!(EventId::parse(text), parsed);
            prop_assert_eq!(text.parse::<EventId>(), parsed);
        }
        if let Err(error) = parsed {
            let shown = error.to_string();
            prop_assert!(shown.starts_with("event id "), "{}", shown);
        }
    }
}

/// The newest id of a ring whose next sequence number is `next` (> 0).
fn ring_last(next: u64, ring: RingId) -> Option<EventId> {
    next.checked_sub(1).map(|s| EventId::new(EPOCH, ring, s))
}

fn pick_of<'a, T>(items: &'a [T], pick: &Index) -> Option<&'a T> {
    (!items.is_empty()).then(|| &items[pick.index(items.len())])
}

#[derive(Clone, Debug)]
enum StoreOp {
    Open {
        session: u8,
    },
    /// Append to an opened ring (`session`: from its own session, or the other one).
    Append {
        pick: Index,
        session: bool,
        len: usize,
        step: i64,
    },
    /// An append with the wrong id (`next_id + delta`, delta != 0): refused, no change,
    /// not even to the store's clock.
    AppendOutOfOrder {
        pick: Index,
        delta: i64,
        step: i64,
    },
    Replay {
        pick: Index,
        session: bool,
        target: Target,
        step: i64,
    },
    DropRing {
        pick: Index,
    },
    DropSession {
        session: u8,
    },
    HandleTimeout {
        step: i64,
    },
}

fn store_op() -> impl Strategy<Value = StoreOp> {
    let own = prop_oneof![5 => Just(true), 1 => Just(false)];
    prop_oneof![
        2 => (0u8..3).prop_map(|session| StoreOp::Open { session }),
        6 => (any::<Index>(), own.clone(), 0usize..40, step())
            .prop_map(|(pick, session, len, step)| StoreOp::Append { pick, session, len, step }),
        1 => (any::<Index>(), prop_oneof![-3i64..0, 1i64..3], step())
            .prop_map(|(pick, delta, step)| StoreOp::AppendOutOfOrder { pick, delta, step }),
        5 => (any::<Index>(), own, target(), step())
            .prop_map(|(pick, session, target, step)| StoreOp::Replay { pick, session, target, step }),
        1 => any::<Index>().prop_map(|pick| StoreOp::DropRing { pick }),
        1 => (0u8..3).prop_map(|session| StoreOp::DropSession { session }),
        1 => step().prop_map(|step| StoreOp::HandleTimeout { step }),
    ]
}

/// The store's byte budget: mostly small enough to evict across rings (frames are up to
/// 39 bytes), sometimes none, sometimes zero.
fn store_budget() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(0usize),
        6 => 1usize..150,
        2 => Just(usize::MAX),
    ]
}

/// Inputs near the canonical form (hex digits of either case, separators, a leading zero,
/// long fields) mixed with arbitrary bytes.
fn id_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => "(0|[1-9a-f][0-9a-f]{0,16}):(0|[1-9a-f][0-9a-f]{0,16}):(0|[1-9a-f][0-9a-f]{0,16})"
            .prop_map(String::into_bytes),
        3 => "[0-9a-fA-F:]{0,56}".prop_map(String::into_bytes),
        1 => "[0-9a-f]{0,17}:[0-9a-f]{0,17}:[0-9a-f]{0,17}[ \n\r\0:x]?".prop_map(String::into_bytes),
        2 => proptest::collection::vec(any::<u8>(), 0..60),
    ]
}

#[test]
fn event_id_parse_errors_are_typed() {
    assert_eq!(EventId::parse(""), Err(EventIdError::Empty));
    assert_eq!(
        EventId::parse("g:0:0"),
        Err(EventIdError::InvalidByte {
            field: "epoch",
            byte: b'g'
        })
    );
}
