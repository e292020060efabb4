//! Unit tests of the decoder's internals; the behaviour is tested in the tests crate.

use super::*;
use fields::parse_retry;

/// Decodes `chunks` (then EOF) into items, errors rendered as text.
fn decode_with(limits: Limits, chunks: &[&[u8]]) -> (Vec<String>, String) {
    let mut dec = Decoder::new(limits);
    let mut out = Vec::new();
    for chunk in chunks {
        dec.push(Bytes::copy_from_slice(chunk)).unwrap();
        drain(&mut dec, &mut out);
    }
    dec.finish();
    drain(&mut dec, &mut out);
    (out, dec.last_event_id().to_owned())
}

fn drain(dec: &mut Decoder, out: &mut Vec<String>) {
    loop {
        match dec.poll_item() {
            Ok(Some(Item::Event(e))) => {
                out.push(format!("{}|{}|{}", e.event_type(), e.data(), e.id()));
            }
            Ok(Some(Item::Comment(c))) => out.push(format!(":{c}")),
            Ok(Some(Item::Retry(r))) => out.push(format!("retry {}", r.as_millis())),
            Ok(None) => return,
            Err(e) => out.push(format!("error {e}")),
        }
    }
}

/// The next event, skipping other items; panics on an error or on needing input.
fn next_event(dec: &mut Decoder) -> Event {
    loop {
        if let Item::Event(event) = dec.poll_item().unwrap().expect("an event") {
            return event;
        }
    }
}

fn decode(chunks: &[&[u8]]) -> Vec<String> {
    decode_with(Limits::default(), chunks).0
}

#[test]
fn sse_parse_3_cr_at_chunk_end_then_lf_is_one_line_end() {
    assert_eq!(decode(&[b"data: a\r", b"\n\r", b"\n"]), ["message|a|"]);
    assert_eq!(decode(&[b"data: a\r", b"\r"]), ["message|a|"]);
}

#[test]
fn sse_parse_2_bom_split_across_chunks_is_stripped_once() {
    assert_eq!(
        decode(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]),
        ["message|a|"]
    );
    // A second BOM is content: the line's field name is not `data`.
    assert!(decode(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"]).is_empty());
    // A BOM prefix that turns out not to be a BOM is the start of the first line.
    assert!(decode(&[b"\xEF\xBB", b"data: a\n\n"]).is_empty());
    assert_eq!(decode(&[b"\xEF\xBB", b"\n\ndata: b\n\n"]), ["message|b|"]);
}

#[test]
fn sse_parse_13_retry_digits_only_and_saturating() {
    assert_eq!(parse_retry(b"1500"), Some(Duration::from_millis(1500)));
    assert_eq!(parse_retry(b""), None);
    assert_eq!(parse_retry(b"1.5"), None);
    assert_eq!(parse_retry(b"-1"), None);
    assert_eq!(parse_retry(b" 10"), None);
    assert_eq!(
        parse_retry(b"99999999999999999999999"),
        Some(Duration::from_millis(u64::MAX))
    );
}

#[test]
fn sse_parse_19_unterminated_event_and_line_are_dropped() {
    let (items, id) = decode_with(Limits::default(), &[b"id: 1\ndata: x\n\nid: 2\ndata: y\n"]);
    assert_eq!(items, ["message|x|1"]);
    assert_eq!(id, "1");
    let (items, _) = decode_with(Limits::default(), &[b"retry: 5\n", b"retry: 7"]);
    assert_eq!(items, ["retry 5"]);
}

#[test]
fn sse_parse_22_long_line_in_one_chunk_discards_only_its_event() {
    let limits = Limits::default().with_max_line_len(10);
    let input: &[u8] = b"data: ok\n\ndata: 0123456789\ndata: more\n\ndata: next\n\n";
    let (items, _) = decode_with(limits, &[input]);
    assert_eq!(
        items,
        [
            "message|ok|",
            "error sse line longer than max_line_len (10 bytes); the event was discarded",
            "message|next|",
        ]
    );
}

#[test]
fn sse_parse_22_long_line_across_chunks_is_never_buffered_past_the_limit() {
    let limits = Limits::default().with_max_line_len(16);
    let mut dec = Decoder::new(limits);
    dec.push_slice(b"id: 3\n\ndata: ").unwrap();
    let mut errors = 0;
    for _ in 0..1000 {
        dec.push_slice(b"xxxxxxxxxx").unwrap();
        while let Some(r) = dec.poll_item().transpose() {
            assert_eq!(r, Err(DecodeError::LineTooLong { limit: 16 }));
            errors += 1;
        }
        assert!(dec.buffered_len() <= 16 + 1);
    }
    dec.push_slice(b"\r").unwrap();
    // The rest of the long line's event (up to its blank line) is discarded too.
    dec.push_slice(b"\ndata: lost\n\ndata: after\n\n").unwrap();
    assert_eq!(next_event(&mut dec).data(), "after");
    assert_eq!(errors, 1);
    assert_eq!(dec.last_event_id(), "3");
}

#[test]
fn sse_parse_22_event_too_large_keeps_earlier_id() {
    let limits = Limits::default().with_max_event_len(5);
    let (items, id) = decode_with(
        limits,
        &[b"data: abc\n\nid: 9\ndata: abc\ndata: def\nid: 10\n\ndata: z\n\n"],
    );
    assert_eq!(
        items,
        [
            "message|abc|",
            "error sse event data larger than max_event_len (5 bytes); the event was discarded",
            "message|z|9",
        ]
    );
    assert_eq!(
        id, "9",
        "fields after the overflow belong to the discarded event"
    );
}

#[test]
fn sse_parse_22_replacement_cannot_grow_id_past_the_line_limit() {
    let limits = Limits::default().with_max_line_len(8);
    let (items, id) = decode_with(limits, &[b"id: \xFF\xFF\xFF\n\ndata: a\n\n"]);
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(items[0].starts_with("error sse line longer"));
    assert_eq!(id, "");
}

#[test]
fn single_line_data_is_a_slice_of_the_pushed_chunk() {
    let chunk = Bytes::from_static(b"data: zero-copy\n\n");
    let mut dec = Decoder::default();
    dec.push(chunk.clone()).unwrap();
    let event = next_event(&mut dec);
    let range = chunk.as_ptr_range();
    assert!(range.contains(&event.data_bytes().as_bytes().as_ptr()));
}

#[test]
fn long_carried_data_lines_are_shared_and_joined() {
    let long = "é".repeat(5000); // 10,000 bytes, a code point split by most cuts
    let input = format!("data: {long}\n\ndata: {long}\ndata: tail\n\ndata: x\ndata: {long}\n\n");
    let bytes = input.as_bytes();
    let expected = [
        format!("message|{long}|"),
        format!("message|{long}\ntail|"),
        format!("message|x\n{long}|"),
    ];
    for size in [1000, 1460, 4097, 16 << 10] {
        let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
        assert_eq!(decode(&chunks), expected, "chunks of {size}");
    }
}

#[test]
fn sse_parse_1_invalid_utf8_in_long_carried_lines_is_replaced() {
    // Lines of 300 and 6000 bytes (both sides of the short-line check), with an invalid
    // byte, a truncated sequence mid-line, or a truncated sequence at the very end.
    for len in [300, 6000] {
        for (bad, at) in [
            (&b"\xFF"[..], len / 2),
            (b"\xE2\x82", len / 3),
            (b"\xC3", len),
        ] {
            let mut value = "é".repeat(len / 2).into_bytes();
            value.splice(at..at, bad.iter().copied());
            let expected = String::from_utf8_lossy(&value).into_owned();
            let mut input = b"data: ".to_vec();
            input.extend_from_slice(&value);
            input.extend_from_slice(b"\n\ndata: next\n\n");
            for size in [7, 1000, 1460, 4097, 16 << 10] {
                let chunks: Vec<&[u8]> = input.chunks(size).collect();
                assert_eq!(
                    decode(&chunks),
                    [format!("message|{expected}|"), "message|next|".to_owned()],
                    "len {len}, bad {bad:?} at {at}, chunks of {size}"
                );
            }
        }
    }
}

#[test]
fn data_split_across_chunks_is_joined() {
    assert_eq!(
        decode(&[b"da", b"ta: a", b"b\ndata", b":c\n", b"\n"]),
        ["message|ab\nc|"]
    );
}

/// Reads `input` into `dec` as a reader with `read_room` does, `size` bytes at a time,
/// draining after each read; returns the items as `decode_with` renders them.
fn decode_through_rooms(dec: &mut Decoder, input: &[u8], size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let room = dec.read_room(size).expect("lent until finished");
        let n = room.len().min(rest.len());
        room[..n].copy_from_slice(&rest[..n]);
        dec.commit_read(n);
        rest = &rest[n..];
        drain(dec, &mut out);
    }
    dec.finish();
    drain(dec, &mut out);
    out
}

#[test]
fn a_long_line_read_into_the_room_is_handed_out_from_it() {
    let mut dec = Decoder::default();
    let value = "a".repeat(5000);
    dec.push_slice(format!("id: 3\ndata: {value}").as_bytes())
        .unwrap();
    assert_eq!(dec.poll_item(), Ok(None));
    let room = dec.read_room(64).expect("lent until finished");
    assert_eq!(room.len(), 64);
    let start = room.as_ptr() as usize;
    let rest = b"bc\r";
    room[..rest.len()].copy_from_slice(rest);
    dec.commit_read(rest.len());
    // The CR ends the line; an LF first in the next input belongs to it (SSE-PARSE-3).
    assert_eq!(dec.poll_item(), Ok(None));
    dec.push_slice(b"\n\ndata: next").unwrap();
    let event = next_event(&mut dec);
    assert_eq!(event.data(), format!("{value}bc"));
    assert_eq!(event.id(), "3");
    // The room was the rest of the line's buffer: the data is a slice of that buffer, so
    // the bytes read into the room were not copied again.
    let data = event.data().as_ptr() as usize;
    assert!(
        data < start && start - data == value.len(),
        "the data ends where the room began"
    );
    assert_eq!(dec.poll_item(), Ok(None));
}

#[test]
fn short_input_read_into_the_room_is_handed_out_without_a_copy() {
    let mut dec = Decoder::default();
    let room = dec.read_room(100).unwrap();
    let (start, len) = (room.as_ptr() as usize, room.len());
    assert_eq!(len, 100);
    let input = b"data: first\n\ndata: sec";
    room[..input.len()].copy_from_slice(input);
    dec.commit_read(input.len());
    let event = next_event(&mut dec);
    assert_eq!(event.data(), "first");
    let data = event.data().as_ptr() as usize;
    assert_eq!(data, start + 6, "a slice of the room");
    assert_eq!(dec.poll_item(), Ok(None));
    // Input may also be queued when room is lent: it is decoded in order.
    dec.push_slice(b"ond").unwrap();
    dec.read_room(10).unwrap()[..2].copy_from_slice(b"\n\n");
    dec.commit_read(2);
    assert_eq!(next_event(&mut dec).data(), "second");
}

#[test]
fn sse_parse_22_the_line_room_ends_at_the_line_limit() {
    // A line half the limit long is long: the room is the rest of its buffer, up to the
    // limit.
    let limits = Limits::default().with_max_line_len(100);
    let mut dec = Decoder::new(limits);
    dec.push_slice(&[b'x'; 60]).unwrap();
    assert_eq!(dec.poll_item(), Ok(None));
    let room = dec.read_room(1000).unwrap();
    assert_eq!(room.len(), 40, "the line may grow to 100 bytes, no further");
    room.fill(b'y');
    dec.commit_read(40);
    assert_eq!(dec.poll_item(), Ok(None));
    assert!(dec.buffered_len() <= 100);
    // At the limit, the room is elsewhere, and the next byte passes the limit: the line
    // (an ignored field) is skipped.
    let input = b"z\ndata: ok\n\n";
    dec.read_room(1000).unwrap()[..input.len()].copy_from_slice(input);
    dec.commit_read(input.len());
    assert_eq!(
        dec.poll_item(),
        Err(DecodeError::LineSkipped { limit: 100 })
    );
    assert_eq!(next_event(&mut dec).data(), "ok");
}

#[test]
fn room_is_lent_until_finished() {
    let mut dec = Decoder::default();
    assert!(dec.read_room(0).is_none(), "no room wanted");
    assert_eq!(dec.read_room(16).map(|r| r.len()), Some(16));
    dec.push_slice(b"data: b").unwrap();
    assert!(dec.read_room(16).is_some(), "input queued");
    assert_eq!(dec.poll_item(), Ok(None));
    assert!(dec.read_room(16).is_some(), "inside a line");
    dec.finish();
    assert!(dec.read_room(16).is_none(), "finished");
    dec.commit_read(16);
    assert_eq!(dec.poll_item(), Ok(None), "nothing committed after finish");
}

#[test]
fn a_commit_takes_no_more_than_the_room_lent_since_the_last_input() {
    let mut dec = Decoder::default();
    dec.push_slice(b"data: ab").unwrap();
    assert_eq!(dec.poll_item(), Ok(None));
    dec.commit_read(5);
    dec.read_room(3).unwrap().copy_from_slice(b"cd\n");
    dec.commit_read(50);
    dec.commit_read(3);
    assert_eq!(dec.poll_item(), Ok(None));
    dec.read_room(3).unwrap().fill(b'!');
    dec.push_slice(b"\n").unwrap();
    dec.commit_read(3);
    // Without room, nothing; one commit of 3, capped; none after a push.
    assert_eq!(next_event(&mut dec).data(), "abcd");
    assert_eq!(dec.poll_item(), Ok(None));
    dec.finish();
    assert_eq!(dec.poll_item(), Ok(None));
}

#[test]
fn reads_into_rooms_decode_as_pushes_do() {
    // Long and short lines, CRLF and CR line ends, multi-line data and a last event ID,
    // read in sizes that cut lines, line ends and UTF-8 sequences everywhere.
    let mut input = Vec::new();
    for i in 0..12usize {
        let long = "é".repeat(1500 + 700 * i);
        let end = ["\n", "\r\n", "\r"][i % 3];
        input.extend_from_slice(format!("id: {i}{end}data: {long}{end}").as_bytes());
        input.extend_from_slice(format!("data: short {i}{end}: note{end}{end}").as_bytes());
    }
    // Miri runs these tests too (the room is lent by `unsafe` blocks): one size there.
    let sizes: &[usize] = if cfg!(miri) {
        &[1460]
    } else {
        &[1, 7, 1460, 4096, 16 << 10]
    };
    for &size in sizes {
        let chunks: Vec<&[u8]> = input.chunks(size).collect();
        let expected = decode(&chunks);
        assert_eq!(expected.len(), 24);
        let mut dec = Decoder::default();
        assert_eq!(
            decode_through_rooms(&mut dec, &input, size),
            expected,
            "reads of {size}"
        );
        assert_eq!(dec.last_event_id(), "11");
    }
}

/// Reads `count` 16-byte events through 16-byte rooms, yielding each event and where
/// its room was; `keep` decides whether the event is kept (else dropped at once).
fn sixteen_byte_reads(dec: &mut Decoder, count: usize, keep: bool) -> (Vec<usize>, Vec<Event>) {
    let (mut rooms, mut kept) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let room = dec.read_room(16).unwrap();
        assert_eq!(room.len(), 16);
        rooms.push(room.as_ptr() as usize);
        room.copy_from_slice(b"data: 12345678\n\n");
        dec.commit_read(16);
        let event = next_event(dec);
        assert_eq!(event.data(), "12345678");
        if keep {
            kept.push(event);
        }
        assert_eq!(dec.poll_item(), Ok(None));
    }
    (rooms, kept)
}

#[test]
fn the_input_room_is_taken_back_once_nothing_holds_it() {
    // 16-byte reads fill a 16 KiB allocation in 1024; every event is dropped at once,
    // so the next read goes to the front of the same allocation, which is not zeroed
    // again: it still holds the first read's bytes.
    let mut dec = Decoder::default();
    let (rooms, _) = sixteen_byte_reads(&mut dec, 1024, false);
    assert_eq!(
        rooms[1023],
        rooms[0] + 1023 * 16,
        "one allocation, read in order"
    );
    let room = dec.read_room(16).unwrap();
    assert_eq!(room.as_ptr() as usize, rooms[0], "taken back whole");
    assert_eq!(room, b"data: 12345678\n\n", "not zeroed again");
}

#[test]
fn an_input_room_still_held_is_not_lent_again() {
    let mut dec = Decoder::default();
    let (rooms, kept) = sixteen_byte_reads(&mut dec, 1024, true);
    // Every event of the first allocation is kept: the next reads go elsewhere.
    let (more, kept_more) = sixteen_byte_reads(&mut dec, 1024, true);
    let first = rooms[0]..rooms[0] + (16 << 10);
    assert!(more.iter().all(|at| !first.contains(at)));
    assert!(kept.iter().all(|event| event.data() == "12345678"));
    // Once the first allocation's events are dropped, it is free again: the second is
    // full and still held, and the first is taken back.
    drop(kept);
    let room = dec.read_room(16).unwrap();
    assert_eq!(room.as_ptr() as usize, rooms[0]);
    assert!(kept_more.iter().all(|event| event.data() == "12345678"));
}
