//! JSON-RPC classification: mcpwire's `jsonrpc::classify` against the ways Rust code
//! classifies a message today, in the same run.
//!
//! One group per message, `jsonrpc/<message>` (a small `tools/call` request, a progress
//! notification, a 256 KiB `tools/call` result), with `Throughput::Bytes` of the text.
//! Every function takes the message's bytes (`&[u8]`, as an HTTP body or SSE data
//! arrives), validates all of it as JSON and UTF-8, and yields its kind, id, method and
//! the extent of `params` or `result`; each iteration asserts those facts against what
//! the generator wrote, so a fast wrong answer fails.
//!
//! - `mcpwire`: `jsonrpc::classify` (the envelope decoded, the payload a validated slice).
//! - `mcpwire-envelope`: `Classifier::envelope` on a clone of the message's `Utf8Bytes`
//!   (as an SSE event's data arrives), the owned message: what keeping it costs beyond
//!   `classify`.
//! - `serde_json-rawvalue`: a typed envelope struct with `Option<Box<RawValue>>` payload
//!   fields, `id: Option<Value>` and `method: Option<String>`, from `from_slice`.
//! - `serde_json-value`: `from_slice::<serde_json::Value>`, then the fields looked up.
//! - `simd-json-tape` and `simd-json-borrowed`: simd-json's tape and borrowed value.
//!   Both need a mutable input, so each iteration first copies the message into a reused
//!   buffer (part of what using them costs); their buffers are reused across iterations.
//!
//! And one group per message, `jsonrpc-encode/<message>`, for the way out: the message
//! (payload as `RawJson`) encoded into one SSE frame in a reused buffer, `Throughput` the
//! frame's bytes; each iteration asserts the frame's length.
//!
//! - `mcpwire-frame`: `Outgoing::encode_frame`, the text written once, in the frame.
//! - `messagebuf+encode_event`: `MessageBuf` text, then `sse::Encoder::encode_event`
//!   copies it into the frame (the two-copy path `encode_frame` replaces).
//! - `memcpy-floor`: copying the finished frame into the buffer.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpwire::Utf8Bytes;
use mcpwire::jsonrpc::{Classifier, Message as Classified, MessageBuf, Outgoing, ToJson, classify};
use mcpwire::sse::{Encoder, EventFields};
use mcpwire_benches::Message;
use serde::Deserialize;
use serde_json::value::RawValue;
use simd_json::prelude::*;

/// The usual serde envelope: every member optional, payloads kept raw.
#[derive(Deserialize)]
struct RawEnvelope {
    #[allow(dead_code)] // Read by serde; checked by the shape of the test data.
    jsonrpc: String,
    id: Option<serde_json::Value>,
    method: Option<String>,
    params: Option<Box<RawValue>>,
    result: Option<Box<RawValue>>,
    #[allow(dead_code)]
    error: Option<Box<RawValue>>,
}

fn mcpwire_facts(text: &[u8]) -> (usize, bool) {
    let message = classify(text).expect("bench messages are valid");
    let payload = match &message {
        Classified::Request(r) => r.params.map(|p| p.as_str().len()),
        Classified::Notification(n) => n.params.map(|p| p.as_str().len()),
        Classified::Response(r) => Some(r.result.as_str().len()),
        Classified::Error(_) => None,
    };
    (payload.unwrap_or(0), message.id().is_some())
}

/// The `Outgoing` that writes `message` again, its payload the `RawJson` it holds.
fn outgoing<'a>(message: &'a Classified<'a>) -> Outgoing<'a> {
    match message {
        Classified::Request(r) => Outgoing::Request {
            id: &r.id,
            method: &r.method,
            params: r.params.as_ref().map(|p| p as &dyn ToJson),
        },
        Classified::Notification(n) => Outgoing::Notification {
            method: &n.method,
            params: n.params.as_ref().map(|p| p as &dyn ToJson),
        },
        Classified::Response(r) => Outgoing::Response {
            id: &r.id,
            result: &r.result,
        },
        Classified::Error(_) => unreachable!("no bench message is an error"),
    }
}

fn bench_encode(c: &mut Criterion) {
    let fields = EventFields::new();
    for m in Message::all() {
        let classified = classify(m.text.as_bytes()).expect("bench messages are valid");
        let message = outgoing(&classified);
        // The frame, and the check that re-encoding gives the bench text back.
        let mut frame = BytesMut::new();
        message.encode_frame(&fields, &mut frame).unwrap();
        assert_eq!(&frame[..], format!("data: {}\n\n", m.text).as_bytes());
        let frame_len = frame.len();
        let mut group = c.benchmark_group(format!("jsonrpc-encode/{}", m.name));
        group.throughput(Throughput::Bytes(frame_len as u64));

        let mut dst = BytesMut::new();
        group.bench_function("mcpwire-frame", |b| {
            b.iter(|| {
                dst.clear();
                black_box(message).encode_frame(&fields, &mut dst).unwrap();
                assert_eq!(dst.len(), frame_len);
            });
        });

        let mut text = MessageBuf::new();
        group.bench_function("messagebuf+encode_event", |b| {
            b.iter(|| {
                dst.clear();
                text.clear();
                let data = text.push(black_box(&message)).unwrap();
                Encoder::new().encode_event(&fields, data, &mut dst);
                assert_eq!(dst.len(), frame_len);
            });
        });

        group.bench_function("memcpy-floor", |b| {
            b.iter(|| {
                dst.clear();
                dst.extend_from_slice(black_box(&frame));
                assert_eq!(dst.len(), frame_len);
            });
        });
        group.finish();
    }
}

fn bench(c: &mut Criterion) {
    for m in Message::all() {
        let text = m.text.as_bytes();
        let has_id = m.kind != "notification";
        let expected = (m.payload_len, has_id);
        let mut group = c.benchmark_group(format!("jsonrpc/{}", m.name));
        group.throughput(Throughput::Bytes(text.len() as u64));

        assert_eq!(mcpwire_facts(text), expected);
        assert_eq!(classify(text).unwrap().method(), m.method);
        group.bench_function("mcpwire", |b| {
            b.iter(|| assert_eq!(mcpwire_facts(black_box(text)), expected));
        });

        let classifier = Classifier::default();
        let shared = Utf8Bytes::from(m.text.clone());
        group.bench_function("mcpwire-envelope", |b| {
            b.iter(|| {
                let envelope = classifier.envelope(black_box(shared.clone())).unwrap();
                let payload = envelope.payload().map_or(0, |p| p.as_str().len());
                assert_eq!((payload, envelope.id().is_some()), expected);
                assert_eq!(envelope.method(), m.method);
            });
        });

        group.bench_function("serde_json-rawvalue", |b| {
            b.iter(|| {
                let env: RawEnvelope = serde_json::from_slice(black_box(text)).unwrap();
                let payload = env
                    .params
                    .as_ref()
                    .or(env.result.as_ref())
                    .map_or(0, |p| p.get().len());
                assert_eq!((payload, env.id.is_some()), expected);
                assert_eq!(env.method.as_deref(), m.method);
            });
        });

        group.bench_function("serde_json-value", |b| {
            b.iter(|| {
                let value: serde_json::Value = serde_json::from_slice(black_box(text)).unwrap();
                let payload = value.get("params").or(value.get("result")).is_some();
                assert!(payload);
                assert_eq!(value.get("id").is_some(), has_id);
                assert_eq!(value.get("method").and_then(|v| v.as_str()), m.method);
            });
        });

        let mut input = Vec::with_capacity(text.len());
        let mut buffers = simd_json::Buffers::new(text.len());
        group.bench_function("simd-json-tape", |b| {
            b.iter(|| {
                input.clear();
                input.extend_from_slice(black_box(text));
                let tape = simd_json::to_tape_with_buffers(&mut input, &mut buffers).unwrap();
                let value = tape.as_value();
                assert!(value.get("params").or(value.get("result")).is_some());
                assert_eq!(value.get("id").is_some(), has_id);
                let method = value.get("method");
                assert_eq!(method.as_ref().and_then(|v| v.as_str()), m.method);
            });
        });

        group.bench_function("simd-json-borrowed", |b| {
            b.iter(|| {
                input.clear();
                input.extend_from_slice(black_box(text));
                let value =
                    simd_json::to_borrowed_value_with_buffers(&mut input, &mut buffers).unwrap();
                assert!(value.get("params").or(value.get("result")).is_some());
                assert_eq!(value.get("id").is_some(), has_id);
                assert_eq!(value.get("method").and_then(|v| v.as_str()), m.method);
            });
        });
        group.finish();
    }
}

criterion_group!(benches, bench, bench_encode);
criterion_main!(benches);
