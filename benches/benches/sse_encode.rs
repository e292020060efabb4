//! Encode throughput: mcpwire's SSE encoder against sse-stream's, a hand-written
//! `format!` and a memcpy floor.
//!
//! One group per payload set, `encode/large` (64 × 64 KiB `tools/call` results) and
//! `encode/tokens` (≈ 120-byte progress notifications), with `Throughput::Bytes` of the
//! payloads. Every function turns each `(id, message)` pair into one frame
//! `id: <id>\ndata: <message>\n\n` (sse-stream writes `data` before `id`; same length)
//! and hands it off as a server would. Each implementation is measured the way its API
//! is used, and the timed region holds exactly that:
//!
//! - `mcpwire`: borrows the messages and ids in place (the encoder takes `&str`, and an
//!   mcpwire server serializes each JSON-RPC message into a reused buffer, so it has no
//!   per-message `String` to build or free). Timed, per event: `Id::new`,
//!   `Encoder::encode_event` into one reused `BytesMut`, `split().freeze()`, and
//!   `black_box` and drop of the frame's `Bytes` (a server keeps that `Bytes` for the
//!   socket and the replay ring, so making and releasing it is part of the cost).
//! - `sse-stream`: `Sse::encode` (the crate's public `Sse` to `Bytes` conversion, which
//!   `SseBody` uses). Its API takes the id and data as owned `String`s, so the `Sse`
//!   values are built untimed (`iter_batched_ref` with `BatchSize::PerIteration`) and
//!   moved out of their `Vec` with `drain(..)` in the timed part. Timed, per event:
//!   `encode` (which frees the event's strings: that is this API's cost) and
//!   `black_box` and drop of the `Bytes`. The emptied `Vec` is dropped untimed.
//! - `naive-format`: `format!("id: {id}\ndata: {message}\n\n")` from the borrowed
//!   strings, what a hand-written server does (it ignores line splitting, which the
//!   payloads do not need). Timed, per event: the `format!` and the drop of its `String`.
//! - `memcpy-floor`: copying the framing and the borrowed id and payload into one reused,
//!   preallocated `Vec`. Timed, per event: the copies.
//!
//! Nothing else is timed: no input is built or dropped in the timed region except
//! sse-stream's `Sse` values, which its `encode` consumes. Before timing, the outputs are
//! checked to agree; every iteration asserts the total framed length.
//!
//! Heap: on glibc the bench first turns off heap trimming ([`keep_heap_top`]). Otherwise,
//! depending only on where the untimed setup happened to put sse-stream's input strings,
//! glibc can give the top of the heap back to the kernel between iterations, and then
//! each of sse-stream's 64 KiB output allocations in the timed loop lands on fresh pages
//! (≈ 16 page faults an event, ≈ 1.5× its time on `large`): a cost of the bench's
//! allocate-4-MiB-then-free-it batches, not of the encoder. The other functions allocate
//! at most one frame at a time and are not affected.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use mcpwire::sse::{Encoder, EventFields, Id};
use mcpwire_benches::Payloads;
use sse_stream::Sse;

/// Sets glibc's `M_TRIM_THRESHOLD` so `free` never gives the top of the heap back to the
/// kernel, and with it (as any explicit threshold does) stops glibc adjusting the mmap
/// threshold, which stays at 128 KiB: allocations are served the same way whatever ran
/// before. See the module docs.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // One FFI call to glibc's `mallopt`.
fn keep_heap_top() {
    use std::ffi::c_int;
    unsafe extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }
    const M_TRIM_THRESHOLD: c_int = -1;
    // SAFETY: `mallopt` only sets a tunable of glibc's allocator, under its lock.
    let set = unsafe { mallopt(M_TRIM_THRESHOLD, c_int::MAX) };
    assert_eq!(set, 1, "mallopt(M_TRIM_THRESHOLD) failed");
}

/// Other allocators are left as they are.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_heap_top() {}

/// The `(id, message)` pairs, borrowed.
fn pairs(payloads: &Payloads) -> impl Iterator<Item = (&str, &str)> {
    payloads
        .ids()
        .iter()
        .map(String::as_str)
        .zip(payloads.messages().iter().map(String::as_str))
}

/// Checks, before timing, that all encoders write the same frames.
fn check_outputs_agree(payloads: &Payloads) {
    let encoder = Encoder::new();
    let mut buf = BytesMut::new();
    for (id, message) in pairs(payloads).take(8) {
        let naive = format!("id: {id}\ndata: {message}\n\n");
        encoder.encode_event(
            &EventFields::new().with_id(Id::new(id).unwrap()),
            message,
            &mut buf,
        );
        assert_eq!(&buf.split()[..], naive.as_bytes());
        let sse = Sse::default().id(id).data(message);
        let sse = sse.encode().unwrap();
        assert_eq!(
            &sse[..],
            format!("data: {message}\nid: {id}\n\n").as_bytes()
        );
    }
}

fn encode_benches(c: &mut Criterion) {
    keep_heap_top();
    for payloads in [Payloads::large(), Payloads::tokens()] {
        check_outputs_agree(&payloads);
        let expected = payloads.framed_len();
        let mut group = c.benchmark_group(format!("encode/{}", payloads.name()));
        group.throughput(Throughput::Bytes(payloads.payload_bytes() as u64));

        group.bench_function("mcpwire", |b| {
            let encoder = Encoder::new();
            let mut buf = BytesMut::new();
            b.iter(|| {
                let mut total = 0;
                for (id, message) in pairs(&payloads) {
                    let id = Id::new(id).expect("the ids are valid");
                    encoder.encode_event(&EventFields::new().with_id(id), message, &mut buf);
                    let frame = buf.split().freeze();
                    total += frame.len();
                    black_box(frame);
                }
                assert_eq!(total, expected);
            });
        });
        group.bench_function("sse-stream", |b| {
            b.iter_batched_ref(
                || {
                    pairs(&payloads)
                        .map(|(id, message)| {
                            Sse::default().id(id.to_owned()).data(message.to_owned())
                        })
                        .collect::<Vec<_>>()
                },
                |events| {
                    let mut total = 0;
                    for event in events.drain(..) {
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
            b.iter(|| {
                let mut total = 0;
                for (id, message) in pairs(&payloads) {
                    let frame = format!("id: {id}\ndata: {message}\n\n");
                    total += frame.len();
                    black_box(frame);
                }
                assert_eq!(total, expected);
            });
        });
        group.bench_function("memcpy-floor", |b| {
            let longest = payloads
                .messages()
                .iter()
                .map(String::len)
                .max()
                .unwrap_or(0);
            let mut buf = Vec::with_capacity(longest + 64);
            b.iter(|| {
                let mut total = 0;
                for (id, message) in pairs(&payloads) {
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
            });
        });
        group.finish();
    }
}

criterion_group!(benches, encode_benches);
criterion_main!(benches);
