//! Resumability: replay locate latency and append throughput, mcpwire's `ReplayRing` and
//! `MemoryStore` against a linear-scan store, side by side in one run.
//!
//! The anchor, `linear-scan`, is what the MCP TypeScript SDK's in-memory example event
//! store does: ids are strings `${streamId}_${Date.now()}_${random}`, every stored event
//! sits in one collection, and a replay walks all of it to find the id and then sends the
//! later events of that stream. (The SDK also sorts all events on every replay; the
//! anchor does not, so it is faster than the original.) Here it is a `Vec` of
//! `(id, stream, frame)`.
//!
//! - `resume/locate/<n>`, for 16, 1,000 and 100,000 retained events of one stream: a
//!   replay after the last-but-one id, which returns exactly one frame (the newest), so
//!   the work measured is finding the place. Each iteration asserts that frame's length.
//!   `ring` is `ReplayRing::replay_after`, `memory-store` is `MemoryStore::replay_after`
//!   (the two map lookups added), `linear-scan` the anchor.
//! - `resume/append`, `Throughput::Elements` of 1,000 appends into a full store (1,024
//!   retained, so every append evicts one): `ring` appends frames encoded beforehand
//!   (the ring's own cost: id check, eviction, push); `ring-append-with` and
//!   `memory-store-append-with` mint the id on the stack, encode a 120-byte progress
//!   notification with it into a reused buffer and retain the frame (a server's whole
//!   cost per message); `linear-scan` mints its string id with `format!`, encodes the
//!   same frame with it and pushes it (bounded like the others, which the SDK's store is
//!   not).
//!
//! - `resume/poll-timeout/1024`: a store's next deadline with 1,024 open rings, each
//!   holding frames with an age limit (what a server asks after every input):
//!   `memory-store` is `MemoryStore::poll_timeout` (the first entry of its deadline
//!   index); `scan` is the minimum of `ReplayRing::poll_timeout` over the same 1,024 rings
//!   held in a `Vec`, a lower bound on the scan over its maps the store did before it kept
//!   the index. Each iteration asserts the deadline.
//!
//! The flatness criterion (issue 4): `ring` at 100,000 within 1.5× of `ring` at 16, while
//! `linear-scan` grows at least 100× over the same range.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpwire::resume::{
    Epoch, EventId, EventStore, MemoryStore, Replay, ReplayRing, RingId, RingLimits, StoreLimits,
};
use mcpwire::sse::{Encoder, EventFields, Id};

const SIZES: [usize; 3] = [16, 1_000, 100_000];
const EPOCH: Epoch = Epoch::new(0x9c41_d5e6_b7a8_3f2a);
const SESSION: &str = "7f9c2ba4-e88f-4bf1-9a34-d8a6e55c1b03";
/// The TypeScript SDK names POST streams with `randomUUID()`.
const TS_STREAM: &str = "3b241101-e2bb-4255-8caf-4136c566a962";
const JSON: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t-42","progress":50,"total":100}}"#;

/// A fixed-seed xorshift64, for the anchor's "random" id suffixes.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// `Math.random().toString(36).substring(2, 10)`: eight base-36 digits.
fn base36(mut n: u64, out: &mut String) {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    for _ in 0..8 {
        out.push(DIGITS[(n % 36) as usize] as char);
        n /= 36;
    }
}

/// The TypeScript SDK example store's event ids, `${streamId}_${Date.now()}_${random}`,
/// with a clock that advances one millisecond every 16 events.
struct TsIds {
    rng: XorShift,
    count: u64,
}

impl TsIds {
    fn new() -> Self {
        Self {
            rng: XorShift(0x2545_f491_4f6c_dd1d),
            count: 0,
        }
    }

    fn next(&mut self, stream: &str) -> String {
        let mut id = String::with_capacity(64);
        let millis = 1_767_225_600_000 + self.count / 16;
        self.count += 1;
        write!(id, "{stream}_{millis}_").unwrap();
        base36(self.rng.next(), &mut id);
        id
    }
}

/// The anchor: one collection of every event, found by a scan.
struct LinearStore {
    events: Vec<(String, String, Bytes)>,
}

impl LinearStore {
    /// Sends (here: sums the lengths of) the events of `last_event_id`'s stream after it.
    fn replay_after(&self, last_event_id: &str) -> Option<usize> {
        let stream = last_event_id.split('_').next()?;
        let mut found = false;
        let mut sent = 0;
        for (id, event_stream, frame) in &self.events {
            if event_stream != stream {
                continue;
            }
            if id == last_event_id {
                found = true;
                continue;
            }
            if found {
                sent += frame.len();
            }
        }
        found.then_some(sent)
    }
}

/// The frame of message `JSON` with `id`.
fn encode(enc: &Encoder, id: Id<'_>, buf: &mut BytesMut) {
    enc.encode_event(&EventFields::new().with_id(id), JSON, buf);
}

fn locate_benches(c: &mut Criterion) {
    let now = Instant::now();
    let enc = Encoder::new();
    for n in SIZES {
        let limits = RingLimits::new()
            .with_max_events(n)
            .with_max_bytes(usize::MAX);
        let mut ring = ReplayRing::new(EPOCH, RingId::new(1), limits);
        let mut store = MemoryStore::new(EPOCH, StoreLimits::new().with_ring(limits));
        let session = SESSION.to_owned();
        let ring_id = store.open_ring(&session).unwrap();
        let mut linear = LinearStore {
            events: Vec::with_capacity(n),
        };
        let mut ts_ids = TsIds::new();
        let mut buf = BytesMut::new();
        for _ in 0..n {
            ring.append_with(now, &mut buf, |id, buf| encode(&enc, id, buf))
                .unwrap();
            store
                .append_with(now, &session, ring_id, &mut buf, |id, buf| {
                    encode(&enc, id, buf)
                })
                .unwrap();
            let id = ts_ids.next(TS_STREAM);
            encode(&enc, Id::new(&id).unwrap(), &mut buf);
            linear
                .events
                .push((id, TS_STREAM.to_owned(), buf.split().freeze()));
        }
        assert_eq!(ring.len(), n);
        let newest_len = |replay: Replay<'_>| match replay {
            Replay::Frames(mut frames) if frames.len() == 1 => frames.next().unwrap().len(),
            other => panic!("expected one frame, got {other:?}"),
        };
        let ring_after = EventId::new(EPOCH, ring.ring_id(), n as u64 - 2);
        let store_after = EventId::new(EPOCH, ring_id, n as u64 - 2);
        let linear_after = linear.events[n - 2].0.clone();
        let expected = newest_len(ring.replay_after(now, ring_after));
        assert_eq!(
            newest_len(store.replay_after(now, &session, store_after)),
            expected
        );
        assert_eq!(
            linear.replay_after(&linear_after),
            Some(linear.events[n - 1].2.len())
        );

        let mut group = c.benchmark_group(format!("resume/locate/{n}"));
        group.bench_function("ring", |b| {
            b.iter(|| {
                let len = newest_len(ring.replay_after(now, black_box(ring_after)));
                assert_eq!(len, expected);
            });
        });
        group.bench_function("memory-store", |b| {
            b.iter(|| {
                let replay = store.replay_after(now, black_box(&session), black_box(store_after));
                assert_eq!(newest_len(replay), expected);
            });
        });
        group.bench_function("linear-scan", |b| {
            let expected = linear.events[n - 1].2.len();
            b.iter(|| {
                let sent = linear.replay_after(black_box(&linear_after));
                assert_eq!(sent, Some(expected));
            });
        });
        group.finish();
    }
}

/// Appends per iteration.
const APPENDS: usize = 1_000;
/// Retained by every store in the append group: each append evicts one.
const RETAINED: usize = 1_024;

fn append_benches(c: &mut Criterion) {
    let now = Instant::now();
    let enc = Encoder::new();
    let limits = RingLimits::new().with_max_events(RETAINED);
    let mut group = c.benchmark_group("resume/append");
    group.throughput(Throughput::Elements(APPENDS as u64));

    group.bench_function("ring", |b| {
        let mut ring = ReplayRing::new(EPOCH, RingId::new(1), limits);
        // Frames encoded beforehand, as shared `Bytes` (cloning one is a reference count).
        let mut buf = BytesMut::new();
        let frames: Vec<Bytes> = (0..APPENDS)
            .map(|i| {
                let id = EventId::new(EPOCH, RingId::new(1), i as u64).encode();
                encode(&enc, id.sse_id(), &mut buf);
                buf.split().freeze()
            })
            .collect();
        b.iter(|| {
            for frame in &frames {
                let id = ring.next_id();
                ring.append(now, id, frame.clone()).unwrap();
            }
            assert_eq!(ring.len(), RETAINED.min(ring.next_id().seq() as usize));
        });
    });
    group.bench_function("ring-append-with", |b| {
        let mut ring = ReplayRing::new(EPOCH, RingId::new(1), limits);
        let mut buf = BytesMut::new();
        b.iter(|| {
            let mut total = 0;
            for _ in 0..APPENDS {
                let (_, frame) = ring
                    .append_with(now, &mut buf, |id, buf| encode(&enc, id, buf))
                    .unwrap();
                total += frame.len();
            }
            assert!(total > APPENDS * JSON.len());
        });
    });
    group.bench_function("memory-store-append-with", |b| {
        let mut store = MemoryStore::new(EPOCH, StoreLimits::new().with_ring(limits));
        let session = SESSION.to_owned();
        let ring_id = store.open_ring(&session).unwrap();
        let mut buf = BytesMut::new();
        b.iter(|| {
            let mut total = 0;
            for _ in 0..APPENDS {
                let (_, frame) = store
                    .append_with(now, &session, ring_id, &mut buf, |id, buf| {
                        encode(&enc, id, buf)
                    })
                    .unwrap();
                total += frame.len();
            }
            assert!(total > APPENDS * JSON.len());
        });
    });
    group.bench_function("linear-scan", |b| {
        let mut events: VecDeque<(String, String, Bytes)> = VecDeque::with_capacity(RETAINED);
        let mut ts_ids = TsIds::new();
        let mut buf = BytesMut::new();
        b.iter(|| {
            let mut total = 0;
            for _ in 0..APPENDS {
                let id = ts_ids.next(TS_STREAM);
                encode(&enc, Id::new(&id).unwrap(), &mut buf);
                let frame = buf.split().freeze();
                total += frame.len();
                if events.len() == RETAINED {
                    events.pop_front();
                }
                events.push_back((id, TS_STREAM.to_owned(), frame));
            }
            assert!(total > APPENDS * JSON.len());
        });
    });
    group.finish();
}

/// Open rings in the deadline group.
const DEADLINE_RINGS: u64 = 1_024;

fn deadline_benches(c: &mut Criterion) {
    let t0 = Instant::now();
    let ring_limits = RingLimits::new()
        .with_max_events(4)
        .with_max_age(Some(Duration::from_secs(60)));
    let limits = StoreLimits::new().with_ring(ring_limits);
    let mut store = MemoryStore::<u64>::new(EPOCH, limits);
    let mut rings = Vec::new();
    for i in 0..DEADLINE_RINGS {
        let session = i / 16;
        let ring = store.open_ring(&session).unwrap();
        // One frame each, at t0: every deadline ties, so the index orders them by ring.
        let id = store.next_id(&session, ring).unwrap();
        store
            .append(t0, &session, id, Bytes::from_static(b"x"))
            .unwrap();
        let mut alone = ReplayRing::new(EPOCH, ring, ring_limits);
        alone.append(t0, id, Bytes::from_static(b"x")).unwrap();
        rings.push(alone);
    }
    let expected = store.poll_timeout();
    assert_eq!(expected, Some(t0 + Duration::from_secs(60)));

    let mut group = c.benchmark_group(format!("resume/poll-timeout/{DEADLINE_RINGS}"));
    group.bench_function("memory-store", |b| {
        b.iter(|| assert_eq!(black_box(&store).poll_timeout(), expected));
    });
    group.bench_function("scan", |b| {
        b.iter(|| {
            let next = black_box(&rings)
                .iter()
                .filter_map(ReplayRing::poll_timeout)
                .min();
            assert_eq!(next, expected);
        });
    });
    group.finish();
}

criterion_group!(benches, locate_benches, append_benches, deadline_benches);
criterion_main!(benches);
