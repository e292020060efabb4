//! Encode throughput: mcpwire's SSE encoder against sse-stream's, a hand-written
//! `format!` and a memcpy floor.
//!
//! One group per payload set, `encode/large` (64 × 64 KiB `tools/call` results) and
//! `encode/tokens` (≈ 120-byte progress notifications), with `Throughput::Bytes` of the
//! payloads. Every function turns each `(id, message)` pair into one frame
//! `id: <id>\ndata: <message>\n\n` (sse-stream writes `data` before `id`; same length)
//! and hands it off as a server would, dropping it after `black_box`:
//!
//! - `mcpwire`: `Encoder::encode_event` into one reused `BytesMut`, then
//!   `split().freeze()` per event;
//! - `sse-stream`: `Sse::encode` (the crate's public `Sse` to `Bytes` conversion, which
//!   `SseBody` uses);
//! - `naive-format`: `format!("id: {id}\ndata: {message}\n\n")`, what a hand-written
//!   server does (it ignores line splitting, which the payloads do not need);
//! - `memcpy-floor`: copying the framing and the payload into one reused buffer.
//!
//! Input: a server holds each message as an owned `String` it just serialized, so each
//! iteration gets fresh owned pairs (made untimed with `iter_batched`) and consumes them:
//! sse-stream moves them into its `Sse`, the others borrow them and drop them after
//! encoding. Every iteration asserts the total framed length.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use mcpwire::sse::{Encoder, Frame, Id};
use mcpwire_benches::Payloads;
use sse_stream::Sse;

/// Checks, before timing, that all encoders write the same frames.
fn check_outputs_agree(payloads: &Payloads) {
    let encoder = Encoder::new();
    let mut buf = BytesMut::new();
    for (id, message) in payloads.owned().into_iter().take(8) {
        let naive = format!("id: {id}\ndata: {message}\n\n");
        encoder.encode_event(
            &Frame::new(&message).with_id(Id::new(&id).unwrap()),
            &mut buf,
        );
        assert_eq!(&buf.split()[..], naive.as_bytes());
        let sse = Sse::default().id(id.as_str()).data(message.as_str());
        let sse = sse.encode().unwrap();
        assert_eq!(
            &sse[..],
            format!("data: {message}\nid: {id}\n\n").as_bytes()
        );
    }
}

fn encode_benches(c: &mut Criterion) {
    for payloads in [Payloads::large(), Payloads::tokens()] {
        check_outputs_agree(&payloads);
        let expected = payloads.framed_len();
        let mut group = c.benchmark_group(format!("encode/{}", payloads.name()));
        group.throughput(Throughput::Bytes(payloads.payload_bytes() as u64));

        group.bench_function("mcpwire", |b| {
            let encoder = Encoder::new();
            let mut buf = BytesMut::new();
            b.iter_batched(
                || payloads.owned(),
                |owned| {
                    let mut total = 0;
                    for (id, message) in owned {
                        let id = Id::new(&id).expect("the ids are valid");
                        encoder.encode_event(&Frame::new(&message).with_id(id), &mut buf);
                        let frame = buf.split().freeze();
                        total += frame.len();
                        black_box(frame);
                    }
                    assert_eq!(total, expected);
                },
                BatchSize::PerIteration,
            );
        });
        group.bench_function("sse-stream", |b| {
            b.iter_batched(
                || {
                    let owned = payloads.owned().into_iter();
                    owned
                        .map(|(id, message)| Sse::default().id(id).data(message))
                        .collect::<Vec<_>>()
                },
                |events| {
                    let mut total = 0;
                    for event in events {
                        let frame = event.encode().expect("the ids are valid");
                        total += frame.len();
                        black_box(frame);
                    }
                    assert_eq!(total, expected);
                },
                BatchSize::PerIteration,
            );
        });
        group.bench_function("naive-format", |b| {
            b.iter_batched(
                || payloads.owned(),
                |owned| {
                    let mut total = 0;
                    for (id, message) in owned {
                        let frame = format!("id: {id}\ndata: {message}\n\n");
                        total += frame.len();
                        black_box(frame);
                    }
                    assert_eq!(total, expected);
                },
                BatchSize::PerIteration,
            );
        });
        group.bench_function("memcpy-floor", |b| {
            let longest = payloads
                .messages()
                .iter()
                .map(String::len)
                .max()
                .unwrap_or(0);
            let mut buf = Vec::with_capacity(longest + 64);
            b.iter_batched(
                || payloads.owned(),
                |owned| {
                    let mut total = 0;
                    for (id, message) in owned {
                        buf.clear();
                        buf.extend_from_slice(b"id: ");
                        buf.extend_from_slice(id.as_bytes());
                        buf.extend_from_slice(b"\ndata: ");
                        buf.extend_from_slice(message.as_bytes());
                        buf.extend_from_slice(b"\n\n");
                        total += buf.len();
                        black_box(&buf);
                    }
                    assert_eq!(total, expected);
                },
                BatchSize::PerIteration,
            );
        });
        group.finish();
    }
}

criterion_group!(benches, encode_benches);
criterion_main!(benches);
