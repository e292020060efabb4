//! `sse_decode`: arbitrary bytes as a `text/event-stream`, cut into arbitrary chunks.
//!
//! Input layout: byte 0 picks how chunks are fed (`push`, `push_slice` or alternating,
//! low 2 bits) and how many chunk-size bytes follow (`(byte0 >> 2) % 16`); those bytes
//! are chunk sizes used cyclically (0 gives an empty chunk); the rest is the stream.
//!
//! Checks, against the spec-literal reference decoder in `mcpwire-tests`:
//! 1. Under generous limits, mcpwire's items, `last_event_id` and `retry` equal the
//!    reference's exactly, for this chunking (SSE-PARSE-1…19).
//! 2. Under small limits (lines of 64 bytes, events of 256): no panic; `buffered_len`
//!    stays within its documented bound after every call (checked inside
//!    `reference::sse::run`); every event's data fits `max_event_len`; if no limit error
//!    was reported, the output equals the reference's; and if one was, the surviving
//!    events are the reference's events with some removed (a discarded event loses
//!    nothing else).

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire::sse::Limits;
use mcpwire_tests::reference::sse::{self as reference, Drain, Feed, Item};

const SMALL: Limits = Limits::new().with_max_line_len(64).with_max_event_len(256);

fuzz_target!(|input: &[u8]| {
    let Some((&control, rest)) = input.split_first() else {
        return;
    };
    let feed = match control & 3 {
        0 | 3 => Feed::Bytes,
        1 => Feed::Slice,
        _ => Feed::Mixed,
    };
    let n_sizes = usize::from(control >> 2) % 16;
    let (sizes, stream) = rest.split_at(n_sizes.min(rest.len()));
    let sizes: Vec<usize> = sizes.iter().map(|&s| usize::from(s)).collect();
    let chunks = reference::split_by_sizes(stream, &sizes);

    let expected = reference::decode(stream);

    // 1. Generous limits: the fuzzer's inputs are far below the defaults.
    let got = reference::run(Limits::default(), &chunks, feed, Drain::EachChunk);
    assert_eq!(
        got,
        expected,
        "mcpwire differs from the reference on {:?} in chunks of {sizes:?}",
        reference::escape(stream)
    );

    // 2. Small limits.
    let small = reference::run(SMALL, &chunks, feed, Drain::EachChunk);
    for item in &small.items {
        if let Item::Event { data, .. } = item {
            assert!(
                data.len() <= SMALL.max_event_len(),
                "event data of {} bytes exceeds max_event_len",
                data.len()
            );
        }
    }
    if small.errors().is_empty() {
        assert_eq!(
            small,
            expected,
            "no limit error, yet mcpwire differs from the reference on {:?}",
            reference::escape(stream)
        );
    } else {
        // Ids may differ after a discarded event (its `id` lines after the failure point
        // were skipped), so compare data and type only.
        let want: Vec<(&str, &str)> = expected.events().iter().map(|e| (e.0, e.1)).collect();
        let mut want = want.iter();
        for (data, event_type, _) in small.events() {
            assert!(
                want.any(|&w| w == (data, event_type)),
                "event {data:?} ({event_type}) under small limits is not one of the \
                 reference's, in order, for {:?}",
                reference::escape(stream)
            );
        }
    }
});
