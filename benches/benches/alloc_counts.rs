//! Heap allocations per event of each decoder, on each corpus and chunk size.
//!
//! A counting `#[global_allocator]` wraps the system allocator; each decoder decodes each
//! corpus once (after one untimed warm-up run) through the same functions the throughput
//! bench uses, and a markdown table is printed: allocator calls (`alloc`,
//! `alloc_zeroed` and `realloc`) per dispatched event, and bytes requested per event
//! (the new size, for `realloc`). The chunks are split before counting; decoder
//! construction and the whole stream's decoding are counted.
//!
//! It asserts each decoder's counts, as the throughput bench does, and that mcpwire makes
//! fewer than [`MCPWIRE_TOKENS_16K_MAX`] allocations per event on `tokens` at 16 KiB
//! chunks: single-line events inside one chunk are zero-copy slices, so a regression of
//! that fast path fails here.
//!
//! Run: `cargo bench -p mcpwire-benches --bench alloc_counts`.

#![allow(unsafe_code)] // The counting global allocator is an `unsafe impl GlobalAlloc`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use mcpwire_benches::{CHUNK_16K, CHUNK_SIZES, Corpus, Counts, Expected, chunk_label, decode};

/// The most allocations per event mcpwire may make on `tokens` at 16 KiB chunks.
const MCPWIRE_TOKENS_16K_MAX: f64 = 0.05;

static CALLS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting allocator calls and bytes requested.
struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees carry over; the counters are only statistics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CALLS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size(), Relaxed);
        // SAFETY: forwarded; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        CALLS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size(), Relaxed);
        // SAFETY: forwarded; the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        CALLS.fetch_add(1, Relaxed);
        BYTES.fetch_add(new_size, Relaxed);
        // SAFETY: forwarded; `ptr` came from `System` through this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One decoder under test: its name, its driver and what it must report.
struct Subject {
    name: &'static str,
    decode: fn(&[Bytes]) -> Counts,
    expected: fn(&Expected) -> Counts,
}

const SUBJECTS: [Subject; 4] = [
    Subject {
        name: "mcpwire",
        decode: decode::mcpwire,
        expected: Expected::mcpwire,
    },
    Subject {
        name: "mcpwire-ref",
        decode: decode::mcpwire_ref,
        expected: Expected::mcpwire,
    },
    Subject {
        name: "sse-stream",
        decode: decode::sse_stream,
        expected: Expected::sse_stream,
    },
    Subject {
        name: "eventsource-stream",
        decode: decode::eventsource_stream,
        expected: Expected::eventsource_stream,
    },
];

/// Runs `f` and returns its result with the allocator calls and bytes it made.
fn counted<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    let (calls, bytes) = (CALLS.load(Relaxed), BYTES.load(Relaxed));
    let out = f();
    (
        out,
        CALLS.load(Relaxed) - calls,
        BYTES.load(Relaxed) - bytes,
    )
}

fn main() {
    let mut rows = Vec::new();
    let mut mcpwire_tokens_16k = None;
    for corpus in Corpus::all() {
        let expected = corpus.expected();
        for size in CHUNK_SIZES {
            let chunks = corpus.chunks(size);
            for subject in &SUBJECTS {
                (subject.decode)(&chunks); // Warm-up: lazy initialisation is not counted.
                let (counts, calls, bytes) = counted(|| (subject.decode)(&chunks));
                assert_eq!(
                    counts,
                    (subject.expected)(expected),
                    "{} on {}/{}",
                    subject.name,
                    corpus.name(),
                    chunk_label(size)
                );
                let events = expected.events as f64;
                let per_event = calls as f64 / events;
                if subject.name == "mcpwire" && corpus.name() == "tokens" && size == CHUNK_16K {
                    mcpwire_tokens_16k = Some(per_event);
                }
                rows.push(format!(
                    "| {} | {} | {} | {} | {:.3} | {:.1} |",
                    subject.name,
                    corpus.name(),
                    chunk_label(size),
                    expected.events,
                    per_event,
                    bytes as f64 / events,
                ));
            }
        }
    }
    println!("| decoder | corpus | chunk | events | allocations/event | bytes allocated/event |");
    println!("|---|---|---|---:|---:|---:|");
    for row in rows {
        println!("{row}");
    }
    let per_event = mcpwire_tokens_16k.expect("tokens/16KiB was measured");
    assert!(
        per_event < MCPWIRE_TOKENS_16K_MAX,
        "mcpwire made {per_event:.3} allocations per event on tokens/16KiB \
         (at most {MCPWIRE_TOKENS_16K_MAX}): the zero-copy fast path regressed"
    );
}
