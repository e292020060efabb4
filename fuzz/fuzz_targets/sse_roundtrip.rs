//! `sse_roundtrip`: frames encoded with mcpwire's `Encoder` decode back to exactly what
//! was encoded, whatever the chunking (SSE-ENC-2…9 against SSE-PARSE-*).
//!
//! The input is an `arbitrary` list of frames (events with optional id, event type and
//! retry; comments; retry-only frames; SEP-1699 priming frames) plus chunk sizes and a
//! feed mode. Values the encoder's types reject (CR, LF, NUL in an id; CR, LF in an event
//! type or comment) are sanitised by dropping those characters, so every frame is
//! encoded. The stream is decoded by mcpwire (in chunks) and by the reference decoder
//! (whole); both must equal the model built from the frames: data with CR and CRLF turned
//! into LF, the type or `message`, the id in force, each retry reported, and the final
//! `last_event_id` and `retry`.

#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use mcpwire::sse::{Comment, Encoder, EventFields, EventType, Id, Limits};
use mcpwire_tests::reference::sse::{self as reference, Drain, Feed, Item, Outcome};

#[derive(Arbitrary, Debug)]
enum Spec {
    Event {
        data: String,
        id: Option<String>,
        event: Option<String>,
        retry: Option<u64>,
    },
    Comment(String),
    Retry(u64),
    Priming {
        id: String,
        retry: Option<u64>,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    frames: Vec<Spec>,
    chunk_sizes: Vec<u8>,
    feed: u8,
}

/// Drops the characters `field` cannot hold.
fn sanitise(value: &str, forbidden: &[char]) -> String {
    value.chars().filter(|c| !forbidden.contains(c)).collect()
}

const ID_FORBIDDEN: &[char] = &['\r', '\n', '\0'];
const LINE_FORBIDDEN: &[char] = &['\r', '\n'];

fuzz_target!(|input: Input| {
    let encoder = Encoder::new();
    let mut buf = BytesMut::new();
    let mut model = Outcome::default();

    for spec in &input.frames {
        let before = buf.len();
        match spec {
            Spec::Event {
                data,
                id,
                event,
                retry,
            } => {
                let id = id.as_deref().map(|id| sanitise(id, ID_FORBIDDEN));
                let event = event.as_deref().map(|e| sanitise(e, LINE_FORBIDDEN));
                let mut fields = EventFields::new();
                if let Some(id) = &id {
                    fields = fields.with_id(Id::new(id).expect("sanitised id"));
                }
                if let Some(event) = &event {
                    fields = fields.with_event(EventType::new(event).expect("sanitised type"));
                }
                if let Some(ms) = *retry {
                    fields = fields.with_retry(Duration::from_millis(ms));
                }
                encoder.encode_event(&fields, data, &mut buf);
                assert_eq!(
                    buf.len() - before,
                    encoder.encoded_len(&fields, data),
                    "encoded_len is exact"
                );
                if let Some(ms) = *retry {
                    model.items.push(Item::Retry(ms));
                    model.retry = Some(ms);
                }
                if let Some(id) = id {
                    model.last_event_id = id;
                }
                let event_type = match event.as_deref() {
                    None | Some("") => "message",
                    Some(event) => event,
                };
                model.items.push(Item::event(
                    &reference::normalise_line_ends(data),
                    event_type,
                    &model.last_event_id,
                ));
            }
            Spec::Comment(text) => {
                let text = sanitise(text, LINE_FORBIDDEN);
                encoder.encode_comment(Comment::new(&text).expect("sanitised comment"), &mut buf);
                model.items.push(Item::Comment(text));
            }
            Spec::Retry(ms) => {
                encoder.encode_retry(Duration::from_millis(*ms), &mut buf);
                model.items.push(Item::Retry(*ms));
                model.retry = Some(*ms);
            }
            Spec::Priming { id, retry } => {
                let id = sanitise(id, ID_FORBIDDEN);
                let retry_duration = retry.map(Duration::from_millis);
                encoder.encode_priming(
                    Id::new(&id).expect("sanitised id"),
                    retry_duration,
                    &mut buf,
                );
                if let Some(ms) = *retry {
                    model.items.push(Item::Retry(ms));
                    model.retry = Some(ms);
                }
                model.last_event_id = id;
                model.items.push(Item::message("", &model.last_event_id));
            }
        }
    }

    let stream = &buf[..];
    let sizes: Vec<usize> = input.chunk_sizes.iter().map(|&s| usize::from(s)).collect();
    let chunks = reference::split_by_sizes(stream, &sizes);
    let feed = match input.feed % 3 {
        0 => Feed::Bytes,
        1 => Feed::Slice,
        _ => Feed::Mixed,
    };

    let decoded = reference::run(Limits::default(), &chunks, feed, Drain::EachChunk);
    assert_eq!(
        decoded,
        model,
        "round trip failed for {:?} in chunks of {sizes:?}",
        reference::escape(stream)
    );
    assert_eq!(
        reference::decode(stream),
        model,
        "the reference decoder disagrees with the encoder on {:?}",
        reference::escape(stream)
    );
});
