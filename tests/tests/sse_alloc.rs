//! Allocation behaviour of the SSE decoder, measured with a counting global allocator
//! (this test binary only):
//!
//! - the hot path (ARCHITECTURE.md "Data path"): single-line `data` events pushed as one
//!   `Bytes` are decoded without allocating, and each event's data is a slice of the
//!   pushed chunk (zero copy);
//! - SSE-PARSE-22: an endless line or an endless event keeps the decoder's memory within
//!   its limits (one error each, `buffered_len` within the limit, peak live heap within
//!   the limit plus a small constant).
//!
//! Counters are per thread, so the test harness running tests in parallel does not mix
//! their counts.

use bytes::Bytes;
use mcpwire::sse::{DecodeError, Decoder, Item, Limits};
use mcpwire_tests::alloc::{Counting, Meter};
use mcpwire_tests::reference::sse as reference;

#[global_allocator]
static GLOBAL: Counting = Counting;

const JSON: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":50}}"#;

/// Decodes `n` single-line `data` events (each preceded by `fields`) pushed as one
/// `Bytes`; returns the allocations made while decoding and dropping them all.
fn decode_events(n: usize, fields: &[u8]) -> usize {
    let mut input = Vec::new();
    for _ in 0..n {
        input.extend_from_slice(fields);
        input.extend_from_slice(b"data: ");
        input.extend_from_slice(JSON.as_bytes());
        input.extend_from_slice(b"\n\n");
    }
    let chunk = Bytes::from(input);
    // Cloning turns the `Bytes` into its shared form; do it before counting.
    let keep = chunk.clone();
    let range = keep.as_ptr_range();
    let mut dec = Decoder::new(Limits::default());
    dec.push(chunk).unwrap();

    let meter = Meter::start();
    let mut events = 0;
    while let Some(event) = reference::next_event(&mut dec).expect("no limit is near") {
        assert_eq!(event.data(), JSON);
        let data = event.data_bytes().as_bytes().as_ptr_range();
        assert!(
            range.start <= data.start && data.end <= range.end,
            "event data is not a slice of the pushed chunk (copied)"
        );
        events += 1;
        drop(event);
    }
    let allocations = meter.allocations();
    assert_eq!(events, n);
    dec.finish();
    assert_eq!(dec.poll_item(), Ok(None));
    allocations
}

#[test]
fn single_line_data_events_decode_without_allocating() {
    let small = decode_events(1_000, b"");
    let large = decode_events(10_000, b"");
    assert_eq!(
        small, large,
        "allocations grow with the number of events: {small} for 1,000, {large} for 10,000"
    );
    assert_eq!(large, 0, "allocations while decoding 10,000 events");
}

#[test]
fn events_with_id_and_type_decode_without_allocating() {
    // The id and event-type buffers are slices of the chunk too.
    let fields = b"id: s:12345\nevent: message\n: keep-alive\nretry: 1000\n";
    let small = decode_events(1_000, fields);
    let large = decode_events(10_000, fields);
    assert_eq!(
        (small, large),
        (0, 0),
        "allocations for 1,000 and 10,000 events"
    );
}

/// 16 KiB of one endless line: no CR or LF.
static LINE_CHUNK: [u8; 16 << 10] = [b'x'; 16 << 10];

#[test]
fn sse_parse_22_endless_line_is_bounded_by_max_line_len() {
    let limit = 64 << 10;
    let mut dec = Decoder::new(Limits::default().with_max_line_len(limit));
    dec.push(Bytes::from_static(b"id: 1\n\ndata: ")).unwrap();
    assert_eq!(dec.poll_item(), Ok(None));

    let meter = Meter::start();
    let mut errors = Vec::new();
    // 64 MiB of one line.
    for _ in 0..(64 << 20) / LINE_CHUNK.len() {
        dec.push(Bytes::from_static(&LINE_CHUNK)).unwrap();
        loop {
            match dec.poll_item() {
                Ok(None) => break,
                Ok(Some(item)) => panic!("unexpected item {item:?}"),
                Err(e) => errors.push(e),
            }
            assert!(dec.buffered_len() <= limit + 1, "{}", dec.buffered_len());
        }
        assert!(dec.buffered_len() <= limit + 1, "{}", dec.buffered_len());
    }
    let peak = meter.peak_growth();
    eprintln!("peak live heap growth: {peak} bytes (limit {limit})");
    assert_eq!(errors, [DecodeError::LineTooLong { limit }]);
    assert!(
        peak <= (limit + SLACK) as isize,
        "peak live heap grew by {peak} bytes for a {limit}-byte line limit"
    );

    // The discarded event ends at its blank line; decoding goes on.
    dec.push(Bytes::from_static(
        b"\r\ndata: lost\r\n\r\ndata: ok\r\n\r\n",
    ))
    .unwrap();
    let event = reference::next_event(&mut dec).unwrap().unwrap();
    assert_eq!((event.data(), event.id()), ("ok", "1"));
}

/// 16 KiB of `data` lines of 1,000 bytes; a line straddles every chunk boundary (the
/// pieces join into one longer `data` line), so the carried-line buffer is exercised too.
static EVENT_CHUNK: [u8; 16 << 10] = {
    let mut chunk = [b'y'; 16 << 10];
    let mut i = 0;
    while i < chunk.len() {
        // "data: " at the start of each 1,000-byte line, LF at its end.
        let line = i % 1000;
        chunk[i] = match line {
            0 => b'd',
            1 => b'a',
            2 => b't',
            3 => b'a',
            4 => b':',
            5 => b' ',
            999 => b'\n',
            _ => b'y',
        };
        i += 1;
    }
    chunk
};

/// The joined data buffer must not outgrow `max_event_len`: `BytesMut`'s doubling growth
/// once took it to about twice the limit (510,159 live bytes for 262,144) before
/// `EventTooLarge` fired.
#[test]
fn sse_parse_22_endless_event_is_bounded_by_max_event_len() {
    let limit = 256 << 10;
    let mut dec = Decoder::new(Limits::default().with_max_event_len(limit));
    dec.push(Bytes::from_static(b"id: 1\n\n")).unwrap();
    assert_eq!(dec.poll_item(), Ok(None));

    let meter = Meter::start();
    let mut errors = Vec::new();
    // 64 MiB of one event, about 67,000 data lines.
    for _ in 0..(64 << 20) / EVENT_CHUNK.len() {
        dec.push(Bytes::from_static(&EVENT_CHUNK)).unwrap();
        loop {
            match dec.poll_item() {
                Ok(None) => break,
                Ok(Some(item)) => panic!("unexpected item {item:?}"),
                Err(e) => errors.push(e),
            }
        }
        // The data buffer plus at most one carried line (< 2,000 bytes here).
        assert!(
            dec.buffered_len() <= limit + 2_000,
            "{}",
            dec.buffered_len()
        );
    }
    let peak = meter.peak_growth();
    eprintln!("peak live heap growth: {peak} bytes (limit {limit})");
    assert_eq!(errors, [DecodeError::EventTooLarge { limit }]);
    assert!(
        peak <= (limit + SLACK) as isize,
        "peak live heap grew by {peak} bytes for a {limit}-byte event limit \
         (the data buffer's capacity grows past max_event_len)"
    );

    dec.push(Bytes::from_static(b"\n\ndata: ok\n\n")).unwrap();
    let item = dec.poll_item().unwrap().unwrap();
    assert!(
        matches!(&item, Item::Event(e) if (e.data(), e.id()) == ("ok", "1")),
        "{item:?}"
    );
}

/// What the decoder may hold besides the buffer the limit bounds: one 16 KiB chunk's worth
/// of carried line (the chunks themselves are static and cost nothing) and bookkeeping.
const SLACK: usize = (16 << 10) + 4096;
