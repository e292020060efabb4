//! Allocation behaviour of the resumability primitives, measured with a counting global
//! allocator (this test binary only):
//!
//! - append allocates nothing beyond the frame's own `Bytes`: once a ring has grown to its
//!   steady size, appends and the evictions they cause (by count, by bytes, by age, by the
//!   store's budget) allocate nothing, in a `ReplayRing` and through `MemoryStore`, whose
//!   `str` sessions are looked up with `&str` (no `String` built per call);
//! - `append_with` (the id formatted on the stack and handed to the encoder) allocates
//!   exactly what encoding the same frames into the same buffer allocates without a ring;
//! - replays, and event id formatting and parsing, allocate nothing.
//!
//! Counters are per thread, so the test harness running tests in parallel does not mix
//! their counts.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mcpwire::resume::{
    Epoch, EventId, EventStore, MemoryStore, Replay, ReplayRing, RingId, RingLimits, StoreLimits,
};
use mcpwire::sse::{Encoder, EventFields};
use mcpwire_tests::alloc::{Counting, Meter};

#[global_allocator]
static GLOBAL: Counting = Counting;

const EPOCH: Epoch = Epoch::new(0x9c41_d5e6_b7a8_3f2a);
const JSON: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":50}}"#;

/// `n` distinct frames of 1 to 300 bytes, built before any measurement. They are moved
/// into the ring, not cloned: cloning a `Bytes` made from a `Vec` would allocate its
/// shared header, which is the frame's own cost, not the ring's.
fn frames(n: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| Bytes::from(vec![i as u8; 1 + (i * 7919) % 300]))
        .collect()
}

/// Appends `frames` to `ring`, `step` apart from `start`; returns the time after the last.
fn append_all(
    ring: &mut ReplayRing,
    start: Instant,
    step: Duration,
    frames: Vec<Bytes>,
) -> Instant {
    let mut now = start;
    for frame in frames {
        let id = ring.next_id();
        ring.append(now, id, frame).expect("ids are in order");
        now += step;
    }
    now
}

/// Fills the ring's deque to `max_events` with empty frames, so it reaches the largest
/// size it can ever have.
fn warm_up(ring: &mut ReplayRing, now: Instant) {
    for _ in 0..ring.limits().max_events() {
        let id = ring.next_id();
        ring.append(now, id, Bytes::new()).unwrap();
    }
}

#[test]
fn append_evicting_by_count_allocates_nothing() {
    let now = Instant::now();
    let mut ring = ReplayRing::new(
        EPOCH,
        RingId::new(1),
        RingLimits::new().with_max_events(256),
    );
    warm_up(&mut ring, now);
    for n in [1_000, 10_000] {
        let frames = frames(n);
        let meter = Meter::start();
        append_all(&mut ring, now, Duration::ZERO, frames);
        assert_eq!(meter.allocations(), 0, "allocations for {n} appends");
        assert_eq!(ring.len(), 256);
    }
}

#[test]
fn append_evicting_by_bytes_and_age_allocates_nothing() {
    let t0 = Instant::now();
    let limits = RingLimits::new()
        .with_max_events(512)
        .with_max_bytes(16 << 10)
        .with_max_age(Some(Duration::from_millis(50)));
    let mut ring = ReplayRing::new(EPOCH, RingId::new(2), limits);
    warm_up(&mut ring, t0);
    let mut now = t0;
    for round in 0..10 {
        let frames = frames(2_000);
        let meter = Meter::start();
        now = append_all(&mut ring, now, Duration::from_micros(100), frames);
        // Idle long enough for everything to expire, then expire explicitly.
        now += Duration::from_millis(60);
        let expired = ring.handle_timeout(now);
        assert_eq!(meter.allocations(), 0, "allocations in round {round}");
        assert!(
            expired > 0 && ring.is_empty(),
            "round {round}: {expired} expired"
        );
    }
}

#[test]
fn memory_store_append_and_replay_allocate_nothing() {
    let now = Instant::now();
    let limits = StoreLimits::new().with_ring(RingLimits::new().with_max_events(128));
    let mut store = MemoryStore::new(EPOCH, limits);
    // String keys: an append looks the session up by reference and clones nothing.
    let sessions = ["session-a".to_owned(), "session-b".to_owned()];
    let mut rings: Vec<(String, RingId)> = Vec::new();
    for session in &sessions {
        for _ in 0..4 {
            rings.push((session.clone(), store.open_ring(session).unwrap()));
        }
    }
    for (session, ring) in &rings {
        for _ in 0..128 {
            let id = store.next_id(session, *ring).unwrap();
            store.append(now, session, id, Bytes::new()).unwrap();
        }
    }
    let frames = frames(8_000);
    let meter = Meter::start();
    let mut replayed = 0;
    for (i, frame) in frames.into_iter().enumerate() {
        let (session, ring) = &rings[i % rings.len()];
        let id = store.next_id(session, *ring).unwrap();
        store.append(now, session, id, frame).unwrap();
        if i % 3 == 0 {
            let after = EventId::new(EPOCH, *ring, id.seq() - 2);
            let Replay::Frames(frames) = store.replay_after(now, session, after) else {
                panic!("the last two frames are retained")
            };
            replayed += frames.map(Bytes::len).sum::<usize>();
        }
    }
    assert_eq!(meter.allocations(), 0, "allocations for 8,000 appends");
    assert!(replayed > 0);
}

#[test]
fn memory_store_str_sessions_are_looked_up_with_str_without_allocating() {
    let t0 = Instant::now();
    let ring_limits = RingLimits::new()
        .with_max_events(64)
        .with_max_age(Some(Duration::from_millis(50)));
    // Sessions stored as `String`s, asked with `&str`: a server that has the
    // `Mcp-Session-Id` header value as `&str` never builds a `String` to look it up. A
    // budget below the frames' total makes appends evict across rings too.
    let limits = StoreLimits::new()
        .with_ring(ring_limits)
        .with_max_bytes(32 << 10);
    let mut store = MemoryStore::<str>::new(EPOCH, limits);
    let sessions = ["session-a", "session-b", "session-c"];
    let mut rings: Vec<(&str, RingId)> = Vec::new();
    for session in sessions {
        for _ in 0..3 {
            rings.push((session, store.open_ring(session).unwrap()));
        }
    }
    // Warm up: every ring's deques at their largest, and the indexes at their size.
    for &(session, ring) in &rings {
        for _ in 0..64 {
            let id = store.next_id(session, ring).unwrap();
            store.append(t0, session, id, Bytes::new()).unwrap();
        }
    }
    let mut now = t0;
    for round in 0..5 {
        let frames = frames(3_000);
        let meter = Meter::start();
        let (mut replayed, mut fullest) = (0, 0);
        for (i, frame) in frames.into_iter().enumerate() {
            let (session, ring) = rings[i % rings.len()];
            let id = store.next_id(session, ring).unwrap();
            store.append(now, session, id, frame).unwrap();
            if i % 3 == 0 {
                let after = EventId::new(EPOCH, ring, id.seq() - 1);
                if let Replay::Frames(frames) = store.replay_after(now, session, after) {
                    replayed += frames.len();
                }
            }
            if store.poll_timeout().is_some_and(|at| at <= now) {
                store.handle_timeout(now);
            }
            fullest = fullest.max(store.retained_bytes());
            now += Duration::from_micros(100);
        }
        // Idle until everything expires, then expire at the deadlines.
        now += Duration::from_millis(60);
        while store.poll_timeout().is_some() {
            store.handle_timeout(now);
        }
        assert_eq!(meter.allocations(), 0, "allocations in round {round}");
        assert!(replayed > 0);
        assert!(
            fullest > (32 << 10) - 300,
            "the budget was reached: {fullest}"
        );
        assert_eq!(store.retained_bytes(), 0);
    }
}

#[test]
fn replay_after_allocates_nothing() {
    let now = Instant::now();
    let mut ring = ReplayRing::new(
        EPOCH,
        RingId::new(3),
        RingLimits::new().with_max_events(1000),
    );
    append_all(&mut ring, now, Duration::ZERO, frames(1_500));
    let meter = Meter::start();
    let mut answers = [0usize; 3];
    for seq in 0..1_600 {
        match ring.replay_after(now, EventId::new(EPOCH, RingId::new(3), seq)) {
            Replay::Frames(frames) => answers[0] += frames.len(),
            Replay::Gap { missed, retained } => answers[1] += missed as usize + retained.len(),
            _ => answers[2] += 1,
        }
    }
    assert_eq!(meter.allocations(), 0);
    assert_eq!(answers[2], 101, "one up to date, 100 never issued");
}

#[test]
fn event_id_formatting_and_parsing_allocate_nothing() {
    let mut shown = String::with_capacity(64);
    let meter = Meter::start();
    for seq in (0..u64::MAX).step_by(1 << 40).take(10_000) {
        let id = EventId::new(EPOCH, RingId::new(seq >> 20), seq);
        let text = id.encode();
        assert_eq!(EventId::parse(text.sse_id().as_str()), Ok(id));
        assert_eq!(EventId::parse_bytes(text.as_bytes()), Ok(id));
        shown.clear();
        write!(shown, "{id}").unwrap();
        assert_eq!(shown, *text);
        assert!(EventId::parse_bytes(b"0:00:1").is_err());
    }
    assert_eq!(meter.allocations(), 0);
}

/// Encodes `n` message frames with ids through `append`, which is given the next id and
/// the encode step; returns the allocations made.
fn count_encoding(
    n: usize,
    mut append: impl FnMut(&mut BytesMut, &dyn Fn(&mut BytesMut, mcpwire::sse::Id<'_>)),
) -> usize {
    let enc = Encoder::new();
    let mut buf = BytesMut::with_capacity(64 << 10);
    let encode = |buf: &mut BytesMut, id: mcpwire::sse::Id<'_>| {
        enc.encode_event(&EventFields::new().with_id(id), JSON, buf);
    };
    let meter = Meter::start();
    for _ in 0..n {
        append(&mut buf, &encode);
    }
    meter.allocations()
}

#[test]
fn append_with_allocates_only_what_encoding_the_frame_does() {
    const RETAINED: usize = 256;
    let now = Instant::now();
    let ring_id = RingId::new(4);

    let mut ring = ReplayRing::new(EPOCH, ring_id, RingLimits::new().with_max_events(RETAINED));
    warm_up(&mut ring, now);
    let with_ring = count_encoding(20_000, |buf, encode| {
        let (_, frame) = ring
            .append_with(now, buf, |id, buf| encode(buf, id))
            .unwrap();
        drop(frame); // written to the socket
    });

    // The same frames, ids and buffer, retained the same way, with no ring: the frames'
    // own allocations (the encode buffer's refills and its shared header).
    let mut kept: VecDeque<Bytes> = VecDeque::with_capacity(RETAINED);
    kept.extend((0..RETAINED).map(|_| Bytes::new()));
    let mut seq = RETAINED as u64;
    let without_ring = count_encoding(20_000, |buf, encode| {
        let text = EventId::new(EPOCH, ring_id, seq).encode();
        seq += 1;
        encode(buf, text.sse_id());
        let frame = buf.split().freeze();
        kept.pop_front();
        kept.push_back(frame.clone());
        drop(frame);
    });

    eprintln!("allocations for 20,000 frames: {with_ring} with the ring, {without_ring} without");
    assert_eq!(with_ring, without_ring);
    assert!(
        with_ring < 20_000 / 10,
        "{with_ring} allocations for 20,000 frames"
    );
}
