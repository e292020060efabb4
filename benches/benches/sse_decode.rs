//! Decode throughput: mcpwire's SSE decoder against its peers and its floors.
//!
//! One group per corpus and chunk size, `decode/<corpus>/<chunk>` (for example
//! `decode/tokens/1460B`), with `Throughput::Bytes` of the whole corpus. Every function
//! in a group works on the same chunks, split before timing, so the results of one run
//! are comparable as ratios:
//!
//! - `mcpwire`: `Decoder::push` of each chunk (a reference-count clone), `poll_item`
//!   drained after each push;
//! - `mcpwire-ref`: the same with `poll_item_ref` (items borrowed from the decoder, no
//!   reference count touched per event);
//! - `sse-stream`: the `sse-stream` 0.3 crate's `SseByteStream` over a
//!   `futures_util::stream::iter` of the chunks;
//! - `eventsource-stream`: the `eventsource-stream` 0.2 crate's `Eventsource::eventsource`
//!   over the same stream;
//! - `memchr2-floor`: `memchr2_iter(b'\n', b'\r', ..)` over every chunk, the least work a
//!   decoder must do to find line ends;
//! - `utf8-floor`: validating every chunk as UTF-8 with `simdutf8` (what SSE-PARSE-1
//!   asks of every decoder; on the non-ASCII text of `large` it costs more than the
//!   line-end scan and the copy together);
//! - `memcpy-floor`: copying every chunk into a preallocated buffer.
//!
//! In cache and out of cache: the corpora (1–4 MiB) fit in the last-level cache, so the
//! groups above measure decoding from cache. The groups `decode/<corpus>-64MiB/16KiB`
//! decode each corpus repeated to 64 MiB (`Corpus::out_of_cache`, twice the bench
//! machine's 32 MiB L3), which streams from memory, with one chunk size and the same
//! functions except `eventsource-stream`: at 200–300 MiB/s it takes ≈ 0.3 s an iteration
//! there, so half a minute or more per group for criterion's 100 samples, and in cache
//! it is already 20–60 times slower than mcpwire on 16 KiB chunks.
//!
//! Each iteration asserts its result against the corpus's expected counts for that
//! decoder's documented behaviour (see `Expected::{mcpwire, sse_stream,
//! eventsource_stream}`), so a fast wrong answer fails.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpwire_benches::{CHUNK_16K, CHUNK_SIZES, Corpus, chunk_label, decode};

/// Which peers a group measures beside mcpwire and the floors.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Peers {
    /// `sse-stream` and `eventsource-stream`.
    All,
    /// `sse-stream` only: `eventsource-stream` is too slow to repeat on 64 MiB.
    WithoutEventsourceStream,
}

fn decode_benches(c: &mut Criterion) {
    for corpus in Corpus::all() {
        for size in CHUNK_SIZES {
            decode_group(c, &corpus, size, Peers::All);
        }
    }
    // Out of cache: each corpus repeated to 64 MiB, generated one at a time.
    for corpus in Corpus::all() {
        decode_group(
            c,
            &corpus.out_of_cache(),
            CHUNK_16K,
            Peers::WithoutEventsourceStream,
        );
    }
}

/// The group `decode/<corpus>/<chunk>`: every function on `corpus` split into `size`
/// chunks, each asserting its result.
fn decode_group(c: &mut Criterion, corpus: &Corpus, size: usize, peers: Peers) {
    let expected = *corpus.expected();
    let chunks = corpus.chunks(size);
    let mut group = c.benchmark_group(format!("decode/{}/{}", corpus.name(), chunk_label(size)));
    group.throughput(Throughput::Bytes(corpus.len() as u64));

    // Every event (priming events included), comment and valid retry field.
    group.bench_function("mcpwire", |b| {
        b.iter(|| assert_eq!(decode::mcpwire(black_box(&chunks)), expected.mcpwire()));
    });
    // The same items, borrowed.
    group.bench_function("mcpwire-ref", |b| {
        b.iter(|| {
            assert_eq!(decode::mcpwire_ref(black_box(&chunks)), expected.mcpwire());
        });
    });
    // Every block with a field, metadata-only blocks included; no comments.
    group.bench_function("sse-stream", |b| {
        b.iter(|| {
            assert_eq!(
                decode::sse_stream(black_box(&chunks)),
                expected.sse_stream()
            );
        });
    });
    // Every block with a data field, as WHATWG; no comments, no metadata blocks.
    if peers == Peers::All {
        group.bench_function("eventsource-stream", |b| {
            b.iter(|| {
                assert_eq!(
                    decode::eventsource_stream(black_box(&chunks)),
                    expected.eventsource_stream()
                );
            });
        });
    }
    // Every CR and LF byte (a CRLF counts twice).
    group.bench_function("memchr2-floor", |b| {
        b.iter(|| {
            assert_eq!(
                decode::memchr2_line_ends(black_box(&chunks)),
                expected.line_end_bytes
            );
        });
    });
    // Every byte but those of code points split by a chunk boundary.
    group.bench_function("utf8-floor", |b| {
        b.iter(|| {
            let validated = decode::utf8_validation(black_box(&chunks));
            assert!(validated + 6 * chunks.len() >= corpus.len());
        });
    });
    group.bench_function("memcpy-floor", |b| {
        let mut buf = Vec::with_capacity(corpus.len());
        b.iter(|| {
            buf.clear();
            for chunk in black_box(&chunks) {
                buf.extend_from_slice(chunk);
            }
            black_box(&buf);
            assert_eq!(buf.len(), corpus.len());
        });
    });
    group.finish();
}

criterion_group!(benches, decode_benches);
criterion_main!(benches);
