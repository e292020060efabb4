//! The blocking adapter's `SseReader` against the core decoder alone: one group per corpus
//! and read size, `reader/<corpus>/<size>`, `Throughput::Bytes` of the whole corpus.
//!
//! - `decoder`: mcpwire's `Decoder` over the corpus split into chunks of that size before
//!   timing (`push` of each, a reference-count clone, `poll_item` drained after each):
//!   the core alone, as in the `sse_decode` bench;
//! - `SseReader`: `mcpwire_blocking::SseReader` over the corpus as a `&[u8]` reader,
//!   reading that many bytes per `read` call and yielding every item through
//!   `Iterator::next`: what the adapter adds is one copy of each read into its buffer and
//!   the read calls themselves.
//!
//! Both assert the corpus's expected counts, so a fast wrong answer fails.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpwire_benches::{CHUNK_SIZES, Corpus, chunk_label, decode};

fn reader_benches(c: &mut Criterion) {
    for corpus in Corpus::all() {
        for size in CHUNK_SIZES {
            let expected = corpus.expected().mcpwire();
            let chunks = corpus.chunks(size);
            let bytes = corpus.bytes().clone();
            let mut group =
                c.benchmark_group(format!("reader/{}/{}", corpus.name(), chunk_label(size)));
            group.throughput(Throughput::Bytes(corpus.len() as u64));
            group.bench_function("decoder", |b| {
                b.iter(|| assert_eq!(decode::mcpwire(black_box(&chunks)), expected));
            });
            group.bench_function("SseReader", |b| {
                b.iter(|| assert_eq!(decode::sse_reader(black_box(&bytes), size), expected));
            });
            group.finish();
        }
    }
}

criterion_group!(benches, reader_benches);
criterion_main!(benches);
