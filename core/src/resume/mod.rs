//! Resumability (SEP-1699): ring-scoped event ids, the replay ring and the event store seam.
//!
//! A client whose SSE stream broke (or that the server closed, to poll) reconnects with
//! GET and `Last-Event-ID`, and must then receive exactly the messages it missed on that
//! stream: none lost, none twice, none from another stream or session (RESUME-4…7). This
//! module holds what a server needs for that, with no IO.
//!
//! # Vocabulary
//!
//! - A **ring** is the replay record of one resumable SSE stream: its encoded frames,
//!   bounded, numbered by a [`RingId`]. The server has its own identity for every SSE
//!   stream it serves, resumable or not; its stream maps to at most one ring (none when
//!   the stream carries no ids: the sessionless revision, or a store that refused).
//! - A **frame** is the encoded `Bytes` of one SSE event, as written to the socket (the
//!   one meaning of the word in this crate; the encoder's input is
//!   [`sse::EventFields`](crate::sse::EventFields) and the data).
//! - The limits and errors here ([`RingLimits`], [`StoreLimits`], [`StoreError`],
//!   [`EventIdError`]) are meant to be used by path (`resume::StoreLimits`,
//!   `resume::StoreError`), as `sse::Limits` and `jsonrpc::Limits` are: their names say
//!   what they bound or refuse within this module, not across the crate.
//!
//! # Contents
//!
//! - [`EventId`]: names an event's ring and its position in it, plus an [`Epoch`], so ids
//!   are unique across every stream of a session (RESUME-2) and the id alone finds its
//!   ring (RESUME-3), also after a restart.
//! - [`ReplayRing`]: one ring's frames, bounded by count, bytes and age ([`RingLimits`]);
//!   locates the frames after an id in O(1).
//! - [`Replay`]: the answer to a resume: the [`Frames`] to send, up to date, a gap
//!   (messages were lost), an unknown stream, an id never issued, or pending.
//! - [`EventStore`]: the seam the server state machine uses (open a ring, append a frame,
//!   replay, drop a ring or a session, and the timeouts); [`MemoryStore`] is the
//!   in-memory one, bounded by [`StoreLimits`] (ring counts, a store-wide byte budget, and
//!   what each ring retains); [`StoreError`] is what it refuses.
//!
//! Time-driven types say it one way, as the server and client machines will:
//! `poll_timeout()` is the next deadline (`None`: none) and `handle_timeout(now)` acts on
//! it; an early call is a no-op. Time is an argument, treated as monotonic.
//!
//! # Event ids
//!
//! `<epoch>:<ring>:<seq>`, three `u64`s in lowercase hex without leading zeros, at most
//! 50 bytes, for example `9c41d5e6b7a83f2a:1:2a` (TRANSPORT.md §14.1 suggests
//! `<stream>:<seq>`; the epoch is added so ids of an earlier process are never taken for
//! current ones). [`EventId::encode`] writes it on the stack; [`EventId::parse_bytes`]
//! accepts exactly that text, from any bytes, and never panics. Within a ring, the
//! sequence numbers have no holes: event `n + 1` follows event `n`. That is what makes
//! the replay locate O(1) and a gap exact. Clients treat ids as opaque.
//!
//! # Using the store
//!
//! For each resumable SSE stream (a POST response stream or the GET stream), the server:
//!
//! 1. opens its ring with [`EventStore::open_ring`] (a limit error means: serve the
//!    stream without ids, or refuse it);
//! 2. encodes every frame with [`EventStore::append_with`], which hands the encoder the
//!    ring's next id, retains the bytes and returns them for the socket: each frame is
//!    encoded once. For peers on 2025-11-25 or later the first frame is the priming event
//!    (RESUME-8); older peers may choke on its empty data (TRANSPORT.md §14.5), and
//!    2026-07-28 has no resumability at all (MODERN-12);
//! 3. on a GET with `Last-Event-ID`, parses it ([`EventId::parse_bytes`]; an error is a
//!    400) and asks [`EventStore::replay_after`] with the request's session; it writes
//!    [`Replay::Frames`] then continues the stream live, and answers the other outcomes as
//!    their docs say (never by pretending the stream is up to date);
//! 4. drops the ring when the stream is finished and its frames can no longer be asked
//!    for (TRANSPORT.md §14.2), and the session's rings when the session ends (§14.15);
//! 5. after every input, reads [`EventStore::poll_timeout`] among its own deadlines and
//!    calls [`EventStore::handle_timeout`] when it passes (frames past their age limit).
//!
//! A [`MemoryStore`] holds at most [`StoreLimits::max_bytes`] of frames (default 64 MiB)
//! over all its rings: an append that would pass it evicts the oldest frames of the whole
//! store first, only ever a ring's oldest, so every ring stays a contiguous run of its
//! newest frames and a resume from before an evicted frame is an exact [`Replay::Gap`]
//! (see [budget eviction](StoreLimits#budget-eviction)).
//!
//! # Stores in another process
//!
//! Servers behind a load balancer need a shared store (Redis Streams, say), so a client
//! can resume on another node. The core still does no IO; an adapter implements
//! [`EventStore`] synchronously and queues the writes for the driver:
//!
//! - Ids are issued locally: the node serving a stream is its ring's only writer, so
//!   `open_ring` and `next_id` read local counters. Each node (each process) has its
//!   own [`Epoch`], so two nodes never issue the same id, and `(epoch, ring)` is a
//!   ring's key in the shared store.
//! - `append` keeps the frame in a local [`MemoryStore`] (a resume on the same node needs
//!   no IO) and queues a write (for example `XADD <session>:<epoch>:<ring> <seq+1>-0
//!   frame <bytes>`, trimmed by `MAXLEN`; Redis ids start above `0-0`), which the driver
//!   drains and performs in order. A write that fails leaves a hole in the shared
//!   ring, which a later fetch from another node reports as a gap (below).
//! - `replay_after` answers from the local store when it has the ring, and
//!   [`Replay::Pending`] otherwise. The fetch then belongs to the server state machine,
//!   not to the store: it parks the resuming request under its own exchange id and emits
//!   an output asking the driver to fetch the frames after the id. The driver reads them
//!   (`XRANGE … (<seq+1>-0 +`), keeps the run after the last hole if there is one, builds
//!   the answer with [`Replay::from_window`] (exactly the ring's rules, counted from the
//!   id of the first fetched frame), and hands it back with that exchange id. The
//!   frames borrow the driver's buffer only for that call.
//! - A ring another node writes cannot be continued live here: after the replayed
//!   frames the server sends a `retry` and closes the response (RESUME-9, RESUME-10), and
//!   the client resumes again after its newest id, on whichever node.
//! - `drop_ring` and `drop_session` queue deletes.
//!
//! A frame whose write is still queued is not yet visible to other nodes: a resume there
//! replays up to the newest frame it can see, and the client's next resume, after its
//! newest id, gets the rest. Nothing is lost or repeated, because ids within a ring are
//! consecutive and every hole is reported.
//!
//! ```
//! use bytes::Bytes;
//! use mcpwire::resume::{EventId, Replay};
//!
//! // The driver fetched, from the shared store, the frames of ring 4 of node epoch 0x77
//! // after the client's id 0x77:4:6: events 7, 8 and 9.
//! let after = EventId::parse("77:4:6")?;
//! let first = EventId::parse("77:4:7")?;
//! let fetched: Vec<Bytes> = vec!["seven".into(), "eight".into(), "nine".into()];
//! let replay = Replay::from_window(after, first, &fetched);
//! assert!(matches!(replay, Replay::Frames(ref f) if f.len() == 3));
//! // The driver hands `replay` to the server state machine's replay input, which treats
//! // it exactly as an answer the store gave at once.
//! # Ok::<(), mcpwire::resume::EventIdError>(())
//! ```
//!
//! # Requirements
//!
//! RESUME-1…3 (ids), RESUME-5…7 (replay of the same stream only, ids as cursors),
//! RESUME-8 (the priming event is an ordinary frame with an id), TRANSPORT.md §14.1
//! (id format), §14.2 (bounded ring, gaps reported), §14.3 (unknown ids), §14.15 (DELETE
//! drops the frames). The tests are named after them.

mod event_id;
mod ring;
mod store;

pub use event_id::{Epoch, EventId, EventIdBuf, EventIdError, RingId};
pub use ring::{Frames, Replay, ReplayRing, RingLimits};
pub use store::{EventStore, MemoryStore, StoreError, StoreLimits};
