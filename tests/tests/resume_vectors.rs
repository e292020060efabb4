//! Resumability requirements (TRANSPORT.md §9 RESUME-*, §14.1–14.3, §14.15) through the
//! public API, with frames encoded by `sse::Encoder` and read back by `sse::Decoder` as a
//! client would; and the pattern of a store in another process (the module docs'
//! "Stores in another process"), driven end to end.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use mcpwire::resume::{
    Epoch, EventId, EventIdError, EventStore, MemoryStore, Replay, RingId, RingLimits, StoreError,
    StoreLimits,
};
use mcpwire::sse::{Decoder, Encoder, EventFields, Limits};

const EPOCH: Epoch = Epoch::new(0x9c41_d5e6);

/// A server's view: a store, an encoder and one reused encode buffer.
struct Server {
    store: MemoryStore<str>,
    buf: BytesMut,
    now: Instant,
}

impl Server {
    fn new(limits: StoreLimits) -> Self {
        Self {
            store: MemoryStore::new(EPOCH, limits),
            buf: BytesMut::new(),
            now: Instant::now(),
        }
    }

    fn open(&mut self, session: &str) -> RingId {
        self.store.open_ring(session).unwrap()
    }

    /// Sends the priming event (RESUME-8) and returns its id and bytes.
    fn prime(&mut self, session: &str, ring: RingId) -> (EventId, Bytes) {
        self.store
            .append_with(self.now, session, ring, &mut self.buf, |id, buf| {
                Encoder::new().encode_priming(id, None, buf);
            })
            .unwrap()
    }

    /// Sends one message and returns its id and bytes.
    fn send(&mut self, session: &str, ring: RingId, data: &str) -> (EventId, Bytes) {
        self.store
            .append_with(self.now, session, ring, &mut self.buf, |id, buf| {
                Encoder::new().encode_event(&EventFields::new().with_id(id), data, buf);
            })
            .unwrap()
    }

    /// What a GET with `Last-Event-ID: header` in `session` gets.
    fn resume(&mut self, session: &str, header: &[u8]) -> Result<Replay<'_>, EventIdError> {
        let after = EventId::parse_bytes(header)?;
        Ok(self.store.replay_after(self.now, session, after))
    }
}

/// Decodes frames as a client does: each event's (id, data).
fn decode<'a>(frames: impl IntoIterator<Item = &'a Bytes>) -> Vec<(String, String)> {
    let mut dec = Decoder::new(Limits::default());
    for frame in frames {
        dec.push(frame.clone()).unwrap();
    }
    dec.finish();
    let mut events = Vec::new();
    while let Some(event) = mcpwire_tests::reference::sse::next_event(&mut dec).unwrap() {
        events.push((event.id().to_owned(), event.data().to_owned()));
    }
    events
}

fn replayed(replay: Replay<'_>) -> Vec<(String, String)> {
    match replay {
        Replay::Frames(frames) => decode(frames),
        other => panic!("expected frames, got {other:?}"),
    }
}

#[test]
fn resume_1_frames_carry_their_event_id() {
    let mut s = Server::new(StoreLimits::new());
    let ring = s.open("a");
    let (id, frame) = s.send("a", ring, "{}");
    assert_eq!(decode([&frame]), [(id.to_string(), "{}".to_owned())]);
    assert_eq!(id.to_string(), format!("9c41d5e6:{ring}:0"));
}

#[test]
fn resume_2_ids_unique_across_all_streams_of_a_session() {
    let mut s = Server::new(StoreLimits::new());
    let mut seen = std::collections::BTreeSet::new();
    let (get, post) = (s.open("a"), s.open("a"));
    for i in 0..50 {
        for ring in [get, post] {
            let (id, frame) = s.send("a", ring, &i.to_string());
            let (text, _) = decode([&frame]).remove(0);
            assert!(seen.insert(text), "id {id} issued twice");
        }
    }
    // A dropped stream's ids are never issued again by a new stream.
    s.store.drop_ring("a", post);
    let again = s.open("a");
    for i in 0..50 {
        let (id, _) = s.send("a", again, &i.to_string());
        assert!(seen.insert(id.to_string()), "id {id} issued twice");
    }
    // Nor by a store after a restart, which has another epoch.
    let mut restarted = MemoryStore::new(Epoch::new(EPOCH.get() + 1), StoreLimits::new());
    let ring = restarted.open_ring("a").unwrap();
    let id = restarted.next_id("a", ring).unwrap();
    assert!(!seen.contains(&id.to_string()));
    assert_eq!(
        restarted.replay_after(s.now, "a", EventId::new(EPOCH, ring, 0)),
        Replay::UnknownRing,
        "an id from before the restart is not this store's"
    );
}

#[test]
fn resume_3_the_id_alone_names_its_stream() {
    let mut s = Server::new(StoreLimits::new());
    let rings = [s.open("a"), s.open("a"), s.open("a")];
    let mut last = Vec::new();
    for (i, &ring) in rings.iter().enumerate() {
        s.send("a", ring, "x");
        last.push((ring, s.send("a", ring, &format!("after {i}")).0));
    }
    for (ring, id) in last {
        let header = id.encode();
        assert_eq!(EventId::parse(&header).unwrap().ring(), ring);
    }
    // Nothing but the header picks the stream: each first id replays its own stream.
    for (i, &ring) in rings.iter().enumerate() {
        let first = EventId::new(EPOCH, ring, 0).encode();
        let events = replayed(s.resume("a", first.as_bytes()).unwrap());
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].1, format!("after {i}"));
    }
}

#[test]
fn resume_4_last_event_id_header_values_are_checked() {
    let mut s = Server::new(StoreLimits::new());
    let ring = s.open("a");
    s.send("a", ring, "x");
    for (header, error) in [
        (&b""[..], EventIdError::Empty),
        (b"9c41d5e6_0_0", EventIdError::FieldCount { found: 1 }),
        (
            b"9c41d5e6:0:\xff",
            EventIdError::InvalidByte {
                field: "seq",
                byte: 0xff,
            },
        ),
        (
            b"9C41D5E6:0:0",
            EventIdError::InvalidByte {
                field: "epoch",
                byte: b'C',
            },
        ),
        (
            b"09c41d5e6:0:0",
            EventIdError::LeadingZero { field: "epoch" },
        ),
    ] {
        assert_eq!(s.resume("a", header).unwrap_err(), error, "{header:?}");
    }
    assert!(matches!(
        s.resume("a", b"9c41d5e6:0:0"),
        Ok(Replay::UpToDate)
    ));
}

#[test]
fn resume_5_replays_what_followed_then_continues_live() {
    let mut s = Server::new(StoreLimits::new());
    let ring = s.open("a");
    let (primed, _) = s.prime("a", ring);
    let sent: Vec<_> = (0..5)
        .map(|i| s.send("a", ring, &i.to_string()).0)
        .collect();
    let events = replayed(s.resume("a", primed.encode().as_bytes()).unwrap());
    let expected: Vec<_> = sent
        .iter()
        .enumerate()
        .map(|(i, id)| (id.to_string(), i.to_string()))
        .collect();
    assert_eq!(events, expected);
    // The stream continues after the replay; the next resume picks up from the newest.
    let (live, _) = s.send("a", ring, "live");
    let events = replayed(s.resume("a", sent[4].encode().as_bytes()).unwrap());
    assert_eq!(events, [(live.to_string(), "live".to_owned())]);
    assert_eq!(
        s.resume("a", live.encode().as_bytes()).unwrap(),
        Replay::UpToDate
    );
}

#[test]
fn resume_6_never_replays_another_stream() {
    let mut s = Server::new(StoreLimits::new());
    let (a, b) = (s.open("one"), s.open("one"));
    let other = s.open("two");
    let (first_a, _) = s.send("one", a, "a0");
    for i in 1..10 {
        s.send("one", a, &format!("a{i}"));
        s.send("one", b, &format!("b{i}"));
        s.send("two", other, &format!("o{i}"));
    }
    let events = replayed(s.resume("one", first_a.encode().as_bytes()).unwrap());
    assert_eq!(events.len(), 9);
    for (id, data) in &events {
        assert_eq!(EventId::parse(id).unwrap().ring(), a);
        assert!(data.starts_with('a'), "{data} replayed on stream a");
    }
    // Another session's stream, named in this session, is unknown; so is a made-up one.
    let other_id = EventId::new(EPOCH, other, 0).encode();
    assert_eq!(
        s.resume("one", other_id.as_bytes()).unwrap(),
        Replay::UnknownRing
    );
    let first_a = first_a.encode();
    assert_eq!(
        s.resume("two", first_a.as_bytes()).unwrap(),
        Replay::UnknownRing
    );
    let made_up = EventId::new(EPOCH, RingId::new(99), 0).encode();
    assert_eq!(
        s.resume("one", made_up.as_bytes()).unwrap(),
        Replay::UnknownRing
    );
}

#[test]
fn resume_7_every_id_is_a_cursor_nothing_lost_nothing_twice() {
    let mut s = Server::new(StoreLimits::new());
    let ring = s.open("a");
    let mut sent = vec![s.prime("a", ring)];
    sent.extend((0..20).map(|i| s.send("a", ring, &i.to_string())));
    let all = decode(sent.iter().map(|(_, f)| f));
    for (k, (id, _)) in sent.iter().enumerate() {
        let replay = s.resume("a", id.encode().as_bytes()).unwrap();
        let got = match replay {
            Replay::UpToDate => Vec::new(),
            other => replayed(other),
        };
        // The client had events 0..=k; with the replay it has every event exactly once.
        assert_eq!(got, all[k + 1..], "resume after event {k}");
    }
}

#[test]
fn resume_8_priming_event_is_a_cursor_with_empty_data() {
    let mut s = Server::new(StoreLimits::new());
    let ring = s.open("a");
    let (primed, priming) = s.prime("a", ring);
    // The client records the id and does not parse the empty data as JSON-RPC.
    assert_eq!(decode([&priming]), [(primed.to_string(), String::new())]);
    assert_eq!(
        s.resume("a", primed.encode().as_bytes()).unwrap(),
        Replay::UpToDate
    );
    let (id, _) = s.send("a", ring, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let events = replayed(s.resume("a", primed.encode().as_bytes()).unwrap());
    assert_eq!(events[0].0, id.to_string());
}

#[test]
fn transport_14_2_a_client_past_the_ring_gets_a_gap_not_an_empty_replay() {
    let limits = StoreLimits::new().with_ring(RingLimits::new().with_max_events(4));
    let mut s = Server::new(limits);
    let ring = s.open("a");
    let (primed, _) = s.prime("a", ring);
    let sent: Vec<_> = (0..10)
        .map(|i| s.send("a", ring, &i.to_string()).0)
        .collect();
    let Replay::Gap { missed, retained } = s.resume("a", primed.encode().as_bytes()).unwrap()
    else {
        panic!("expected a gap")
    };
    assert_eq!(missed, 6, "messages 0..=5 are lost");
    assert_eq!(retained.first_id(), Some(sent[6]));
    assert_eq!(decode(retained).len(), 4);
    // An id just before the oldest retained frame still replays completely.
    assert_eq!(
        replayed(s.resume("a", sent[5].encode().as_bytes()).unwrap()).len(),
        4
    );
}

#[test]
fn transport_14_2_an_oversized_frame_is_sent_but_not_retained() {
    let limits = StoreLimits::new().with_ring(RingLimits::new().with_max_bytes(256));
    let mut s = Server::new(limits);
    let ring = s.open("a");
    let (before, _) = s.send("a", ring, "small");
    let (big, frame) = s.send("a", ring, &"x".repeat(300));
    assert_eq!(
        decode([&frame])[0].0,
        big.to_string(),
        "the frame itself is complete"
    );
    assert_eq!(s.store.retained_bytes(), 0);
    let gap = s.resume("a", before.encode().as_bytes()).unwrap();
    assert!(matches!(gap, Replay::Gap { missed: 1, .. }), "{gap:?}");
    assert_eq!(
        s.resume("a", big.encode().as_bytes()).unwrap(),
        Replay::UpToDate
    );
}

#[test]
fn transport_14_2_the_store_budget_evicts_the_oldest_frames_and_resumes_report_the_gap() {
    // Every frame here has the same length: single-digit ring and sequence numbers and
    // eight bytes of data. The budget holds three.
    let mut sample = BytesMut::new();
    let id = EventId::new(EPOCH, RingId::new(0), 0).encode();
    Encoder::new().encode_event(
        &EventFields::new().with_id(id.sse_id()),
        "x0......",
        &mut sample,
    );
    let len = sample.len();
    let mut s = Server::new(StoreLimits::new().with_max_bytes(3 * len));
    let (a, b) = (s.open("one"), s.open("two"));
    let a_ids: Vec<_> = (0..3)
        .map(|i| s.send("one", a, &format!("a{i}......")).0)
        .collect();
    assert_eq!(s.store.retained_bytes(), 3 * len);
    // Session two's frames push out the oldest frames of the whole store: a0, then a1.
    let (b0, _) = s.send("two", b, "b0......");
    let (b1, _) = s.send("two", b, "b1......");
    assert_eq!(s.store.retained_bytes(), 3 * len);
    // A client of session one that had a0 lost a1, and is told so; a2 is still replayed.
    let Replay::Gap { missed, retained } = s.resume("one", a_ids[0].encode().as_bytes()).unwrap()
    else {
        panic!("a1 was evicted")
    };
    assert_eq!(missed, 1);
    assert_eq!(
        decode(retained),
        [(a_ids[2].to_string(), "a2......".to_owned())]
    );
    assert_eq!(
        replayed(s.resume("one", a_ids[1].encode().as_bytes()).unwrap()).len(),
        1
    );
    assert_eq!(
        replayed(s.resume("two", b0.encode().as_bytes()).unwrap()),
        [(b1.to_string(), "b1......".to_owned())]
    );
}

#[test]
fn transport_14_3_unknown_or_unissued_ids_are_never_up_to_date() {
    let mut s = Server::new(StoreLimits::new());
    let ring = s.open("a");
    let (newest, _) = s.send("a", ring, "x");
    let ahead = EventId::new(EPOCH, ring, newest.seq() + 1).encode();
    assert_eq!(s.resume("a", ahead.as_bytes()).unwrap(), Replay::NotIssued);
    let fresh = s.open("a");
    let never = EventId::new(EPOCH, fresh, 0).encode();
    assert_eq!(s.resume("a", never.as_bytes()).unwrap(), Replay::NotIssued);
    assert_eq!(
        s.resume("nobody", newest.encode().as_bytes()).unwrap(),
        Replay::UnknownRing
    );
}

#[test]
fn transport_14_15_delete_drops_the_session_rings() {
    let mut s = Server::new(StoreLimits::new());
    let (a, b) = (s.open("a"), s.open("a"));
    let (id_a, _) = s.send("a", a, "x");
    s.send("a", a, "y");
    s.send("a", b, "z");
    let keep = s.open("b");
    s.send("b", keep, "kept");
    s.store.drop_session("a");
    assert_eq!(
        s.resume("a", id_a.encode().as_bytes()).unwrap(),
        Replay::UnknownRing
    );
    assert_eq!(s.store.ring_count(), 1);
    assert_eq!(
        s.store.retained_bytes(),
        s.store.ring("b", keep).unwrap().retained_bytes()
    );
    assert_eq!(
        s.store.next_id("a", b),
        Err(StoreError::UnknownRing { ring: b })
    );
}

// ---------------------------------------------------------------------------------------
// A store in another process (module docs, "Stores in another process").

/// Stands in for Redis Streams: what the driver reads and writes over the network. Each
/// ring is a Redis stream keyed by session, epoch and ring, trimmed to `max_len` frames.
struct Shared {
    rings: BTreeMap<(String, Epoch, RingId), (u64, VecDeque<Bytes>)>,
    max_len: usize,
}

/// IO the node's store asks its driver to do.
enum Command {
    Write {
        session: String,
        id: EventId,
        frame: Bytes,
    },
    DropRing {
        session: String,
        epoch: Epoch,
        ring: RingId,
    },
    DropSession {
        session: String,
    },
}

/// One node's `EventStore`: ids and fresh frames are local, writes go out through the
/// driver, and a resume of a ring another node wrote is `Pending`.
struct NodeStore {
    local: MemoryStore<str>,
    outbox: VecDeque<Command>,
}

impl EventStore for NodeStore {
    type Session = str;

    fn open_ring(&mut self, session: &str) -> Result<RingId, StoreError> {
        self.local.open_ring(session)
    }

    fn next_id(&self, session: &str, ring: RingId) -> Result<EventId, StoreError> {
        self.local.next_id(session, ring)
    }

    fn append(
        &mut self,
        now: Instant,
        session: &str,
        id: EventId,
        frame: Bytes,
    ) -> Result<(), StoreError> {
        self.local.append(now, session, id, frame.clone())?;
        self.outbox.push_back(Command::Write {
            session: session.to_owned(),
            id,
            frame,
        });
        Ok(())
    }

    fn replay_after(&mut self, now: Instant, session: &str, after: EventId) -> Replay<'_> {
        if after.epoch() != self.local.epoch() {
            return Replay::Pending; // another node's ring: the driver fetches it
        }
        self.local.replay_after(now, session, after)
    }

    fn drop_ring(&mut self, session: &str, ring: RingId) {
        self.local.drop_ring(session, ring);
        self.outbox.push_back(Command::DropRing {
            session: session.to_owned(),
            epoch: self.local.epoch(),
            ring,
        });
    }

    fn drop_session(&mut self, session: &str) {
        self.local.drop_session(session);
        self.outbox.push_back(Command::DropSession {
            session: session.to_owned(),
        });
    }
}

impl Shared {
    /// The driver performs one queued write (`XADD`, trimmed by `MAXLEN`).
    fn perform(&mut self, command: Command) {
        match command {
            Command::Write { session, id, frame } => {
                let (next, frames) = self
                    .rings
                    .entry((session, id.epoch(), id.ring()))
                    .or_default();
                assert_eq!(*next, id.seq(), "writes are performed in order");
                *next += 1;
                frames.push_back(frame);
                if frames.len() > self.max_len {
                    frames.pop_front();
                }
            }
            Command::DropRing {
                session,
                epoch,
                ring,
            } => {
                self.rings.remove(&(session, epoch, ring));
            }
            Command::DropSession { session } => self.rings.retain(|(s, _, _), _| *s != session),
        }
    }

    /// The driver's fetch for a `Pending` replay (`XRANGE` after the id): the stream's next
    /// retained frames after `after` and the id of the first of them (the stream's next
    /// id if there are none); `None` if it has no such stream.
    fn fetch(&self, session: &str, after: EventId) -> Option<(EventId, Vec<Bytes>)> {
        let (next, frames) = self
            .rings
            .get(&(session.to_owned(), after.epoch(), after.ring()))?;
        let after_count = next.saturating_sub(after.seq() + 1) as usize;
        let skip = frames.len().saturating_sub(after_count);
        let window: Vec<Bytes> = frames.iter().skip(skip).cloned().collect();
        // The first fetched frame's id (the stream's next id when nothing is fetched).
        let first = EventId::new(after.epoch(), after.ring(), next - window.len() as u64);
        Some((first, window))
    }
}

/// The driver's whole answer to a resume on `node`: the store's, or the fetched one.
fn resume_on(
    node: &mut NodeStore,
    shared: &Shared,
    session: &str,
    after: EventId,
) -> Vec<(String, String)> {
    let now = Instant::now();
    let fetched;
    let replay = match node.replay_after(now, session, after) {
        Replay::Pending => match shared.fetch(session, after) {
            Some((first, frames)) => {
                fetched = frames;
                Replay::from_window(after, first, &fetched)
            }
            None => Replay::UnknownRing,
        },
        ready => ready,
    };
    match replay {
        Replay::UpToDate => Vec::new(),
        Replay::Frames(frames) => decode(frames),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn event_store_is_object_safe() {
    let mut store = MemoryStore::new(EPOCH, StoreLimits::new());
    let store: &mut dyn EventStore<Session = str> = &mut store;
    let ring = store.open_ring("a").unwrap();
    assert_eq!(store.next_id("a", ring).unwrap().seq(), 0);
}

#[test]
fn remote_store_resume_on_another_node_via_pending_and_from_window() {
    let node = |epoch| NodeStore {
        local: MemoryStore::new(Epoch::new(epoch), StoreLimits::new()),
        outbox: VecDeque::new(),
    };
    let (mut a, mut b) = (node(0xa), node(0xb));
    let mut shared = Shared {
        rings: BTreeMap::new(),
        max_len: 3,
    };
    let session = "s".to_owned();
    let now = Instant::now();
    let mut buf = BytesMut::new();

    // Node A serves the stream: priming, then four messages.
    let ring = a.open_ring(&session).unwrap();
    let (primed, _) = a
        .append_with(now, &session, ring, &mut buf, |id, buf| {
            Encoder::new().encode_priming(id, None, buf)
        })
        .unwrap();
    let ids: Vec<EventId> = (0..4)
        .map(|i| {
            a.append_with(now, &session, ring, &mut buf, |id, buf| {
                Encoder::new().encode_event(&EventFields::new().with_id(id), &format!("m{i}"), buf);
            })
            .unwrap()
            .0
        })
        .collect();
    // The driver has performed all writes but the last.
    while a.outbox.len() > 1 {
        shared.perform(a.outbox.pop_front().unwrap());
    }

    // The client resumes on node B after m0: B answers Pending, the driver fetches.
    let got = resume_on(&mut b, &shared, &session, ids[0]);
    assert_eq!(
        got,
        [
            (ids[1].to_string(), "m1".into()),
            (ids[2].to_string(), "m2".into())
        ]
    );
    // The last write lands; the client resumes after its newest id and gets the rest.
    shared.perform(a.outbox.pop_front().unwrap());
    assert_eq!(
        resume_on(&mut b, &shared, &session, ids[2]),
        [(ids[3].to_string(), "m3".into())]
    );
    assert_eq!(resume_on(&mut b, &shared, &session, ids[3]), []);
    // On node A the same resume needs no IO.
    assert_eq!(resume_on(&mut a, &shared, &session, ids[2]).len(), 1);

    // The shared store trimmed the priming event and m0: the same rules report a gap.
    let (first, fetched) = shared.fetch(&session, primed).unwrap();
    assert!(matches!(
        Replay::from_window(primed, first, &fetched),
        Replay::Gap { missed: 1, .. }
    ));
    // Another session, a dropped stream, or after DELETE: the fetch finds nothing.
    assert!(shared.fetch("other", ids[0]).is_none());
    let second = a.open_ring(&session).unwrap();
    a.append_with(now, &session, second, &mut buf, |id, buf| {
        Encoder::new().encode_priming(id, None, buf)
    })
    .unwrap();
    a.drop_ring(&session, second);
    shared.perform(a.outbox.pop_front().unwrap());
    shared.perform(a.outbox.pop_front().unwrap());
    assert!(
        shared
            .fetch(&session, EventId::new(Epoch::new(0xa), second, 0))
            .is_none()
    );
    a.drop_session(&session);
    shared.perform(a.outbox.pop_front().unwrap());
    assert!(shared.fetch(&session, ids[0]).is_none());
}
