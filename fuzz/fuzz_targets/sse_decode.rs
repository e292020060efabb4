//! `sse_decode`: arbitrary bytes as a `text/event-stream`, cut into arbitrary chunks.
//!
//! Input layout: byte 0 picks how chunks are fed (`push`, `push_slice`, alternating, or
//! read into the decoder's room; low 2 bits) and how many chunk-size bytes follow
//! (`(byte0 >> 2) % 16`); those bytes are chunk sizes used cyclically (0 gives an empty
//! chunk); the rest is the stream.
//!
//! Checks, against the spec-literal reference decoder in `mcpwire-tests`:
//! 1. Under generous limits, mcpwire's items, `last_event_id` and `retry` equal the
//!    reference's exactly, for this chunking (SSE-PARSE-1…19).
//! 2. Under small limits (lines of 64 bytes, events of 256): no panic; `buffered_len`
//!    stays within its documented bound after every call (checked inside
//!    `reference::sse::run`); every event's data fits `max_event_len`; the output equals
//!    `reference::decode_limited`, the model of the limit behaviour (the offending event
//!    is discarded up to its blank line, nothing else is lost); and with no limit error
//!    it equals the plain reference.

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
        0 => Feed::Bytes,
        1 => Feed::Slice,
        2 => Feed::Mixed,
        _ => Feed::Room,
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
    // The limit behaviour is specified exactly (one error per offending event, the event
    // discarded up to its blank line, everything else kept), and modelled by
    // `reference::decode_limited`.
    let expected_small = reference::decode_limited(stream, SMALL);
    assert_eq!(
        small,
        expected_small,
        "under small limits mcpwire differs from the limit model on {:?} in chunks of {sizes:?}",
        reference::escape(stream)
    );
    if small.errors().is_empty() {
        assert_eq!(
            small,
            expected,
            "no limit error, yet mcpwire differs from the reference on {:?}",
            reference::escape(stream)
        );
    }
});
