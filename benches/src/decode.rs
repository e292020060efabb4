//! Each decoder under test, driven over pre-split chunks to the end of the stream.
//!
//! The same functions run in the throughput benches and in the allocation counts, so
//! both measure exactly the same work. Each returns [`Counts`], which the caller compares
//! with the corpus's [`Expected`](crate::Expected) for that decoder.

use std::convert::Infallible;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_core::Stream;
use mcpwire::sse::{Decoder, Item, ItemRef, Limits};
use sse_stream::SseByteStream;

use crate::Counts;

/// Decodes `chunks` with `mcpwire`'s [`Decoder`]: pushes each chunk (a reference-count
/// clone, no copy) and drains [`poll_item`](Decoder::poll_item) after each.
///
/// # Panics
///
/// On a [`DecodeError`](mcpwire::sse::DecodeError): the corpora are within the default
/// limits.
pub fn mcpwire(chunks: &[Bytes]) -> Counts {
    let mut decoder = Decoder::new(Limits::default());
    let mut counts = Counts::default();
    for chunk in chunks {
        decoder.push(chunk.clone()).unwrap();
        drain(&mut decoder, &mut counts);
    }
    decoder.finish();
    drain(&mut decoder, &mut counts);
    counts
}

/// Decodes `input` with `mcpwire_blocking::SseReader` over the slice as a
/// [`std::io::Read`], `read_size` bytes per `read` call: the blocking adapter's path,
/// which reads into room the same [`Decoder`] lends and hands each read over without
/// another copy.
///
/// # Panics
///
/// As [`mcpwire()`].
pub fn sse_reader(input: &[u8], read_size: usize) -> Counts {
    let reader = mcpwire_blocking::SseReader::new(input).with_read_size(read_size);
    let mut counts = Counts::default();
    for item in reader {
        match item.expect("the corpora are within the default limits") {
            Item::Event(event) => {
                counts.events += 1;
                counts.data_bytes += event.data().len();
            }
            Item::Comment(_) => counts.comments += 1,
            Item::Retry(_) => counts.retries += 1,
        }
    }
    counts
}

/// The floor of any decoder fed by a [`std::io::Read`]: [`mcpwire()`] over the same
/// chunks, each first copied once into `scratch` (reused, at least as long as the
/// longest chunk), as a `read` call must copy it. The decoder still reads the chunks
/// themselves, so this is the core's own work plus the copy, nothing of a reader's
/// bookkeeping.
///
/// # Panics
///
/// As [`mcpwire()`], and if a chunk is longer than `scratch`.
pub fn mcpwire_after_copy(chunks: &[Bytes], scratch: &mut [u8]) -> Counts {
    let mut decoder = Decoder::new(Limits::default());
    let mut counts = Counts::default();
    for chunk in chunks {
        scratch[..chunk.len()].copy_from_slice(chunk);
        black_box(&mut *scratch);
        decoder.push(chunk.clone()).unwrap();
        drain(&mut decoder, &mut counts);
    }
    decoder.finish();
    drain(&mut decoder, &mut counts);
    counts
}

/// Like [`mcpwire()`], but drains with [`poll_item_ref`](Decoder::poll_item_ref): items are
/// borrowed from the decoder, so no reference count is touched per event. This is the
/// path of a consumer that parses each event's JSON in place.
///
/// # Panics
///
/// As [`mcpwire()`].
pub fn mcpwire_ref(chunks: &[Bytes]) -> Counts {
    let mut decoder = Decoder::new(Limits::default());
    let mut counts = Counts::default();
    for chunk in chunks {
        decoder.push(chunk.clone()).unwrap();
        drain_ref(&mut decoder, &mut counts);
    }
    decoder.finish();
    drain_ref(&mut decoder, &mut counts);
    counts
}

fn drain_ref(decoder: &mut Decoder, counts: &mut Counts) {
    while let Some(item) = decoder
        .poll_item_ref()
        .expect("the corpora are within the default limits")
    {
        match item {
            ItemRef::Event(event) => {
                counts.events += 1;
                counts.data_bytes += event.data().len();
            }
            ItemRef::Comment(_) => counts.comments += 1,
            ItemRef::Retry(_) => counts.retries += 1,
        }
    }
}

fn drain(decoder: &mut Decoder, counts: &mut Counts) {
    while let Some(item) = decoder
        .poll_item()
        .expect("the corpora are within the default limits")
    {
        match item {
            Item::Event(event) => {
                counts.events += 1;
                counts.data_bytes += event.data().len();
            }
            Item::Comment(_) => counts.comments += 1,
            Item::Retry(_) => counts.retries += 1,
        }
    }
}

/// The chunks as the byte stream an HTTP client hands a decoder: a
/// `futures_util::stream::iter` of `Ok::<Bytes, Infallible>` (each a reference-count
/// clone).
pub fn byte_stream(chunks: &[Bytes]) -> impl Stream<Item = Result<Bytes, Infallible>> + '_ {
    futures_util::stream::iter(chunks.iter().cloned().map(Ok::<Bytes, Infallible>))
}

/// Decodes `chunks` with the `sse-stream` 0.3 crate's `SseByteStream` (the type its docs
/// recommend for byte streams).
///
/// # Panics
///
/// On a decoding error (the corpora are valid UTF-8).
pub fn sse_stream(chunks: &[Bytes]) -> Counts {
    let mut counts = Counts::default();
    for_each_ready(SseByteStream::new(byte_stream(chunks)), |sse| {
        let sse = sse.expect("sse-stream rejected the corpus");
        match &sse.data {
            Some(data) => {
                counts.events += 1;
                counts.data_bytes += data.len();
            }
            None => counts.metadata_blocks += 1,
        }
        if sse.retry.is_some() {
            counts.retries += 1;
        }
    });
    counts
}

/// Decodes `chunks` with the `eventsource-stream` 0.2 crate, through its `Eventsource`
/// extension trait.
///
/// # Panics
///
/// On a decoding error (the corpora are valid).
pub fn eventsource_stream(chunks: &[Bytes]) -> Counts {
    let mut counts = Counts::default();
    for_each_ready(byte_stream(chunks).eventsource(), |event| {
        let event = event.expect("eventsource-stream rejected the corpus");
        counts.events += 1;
        counts.data_bytes += event.data.len();
    });
    counts
}

/// The `memchr2` floor: counts CR and LF bytes in every chunk with
/// `memchr::memchr2_iter`, the least work any decoder must do.
pub fn memchr2_line_ends(chunks: &[Bytes]) -> usize {
    chunks
        .iter()
        .map(|chunk| memchr::memchr2_iter(b'\n', b'\r', chunk).count())
        .sum()
}

/// The UTF-8 floor: validates every chunk with `simdutf8` (the validator mcpwire's
/// decoder uses), the least work a decoder must do to decode the text with replacement
/// (SSE-PARSE-1). A code point split by a chunk boundary is left out of both chunks (at
/// most 3 bytes a side), so the floor is, if anything, optimistic. Returns the bytes
/// validated.
///
/// # Panics
///
/// If a chunk is not valid UTF-8 (the corpora are).
pub fn utf8_validation(chunks: &[Bytes]) -> usize {
    chunks
        .iter()
        .map(|chunk| {
            let text = complete_code_points(chunk);
            assert!(
                simdutf8::basic::from_utf8(text).is_ok(),
                "the corpora are valid UTF-8"
            );
            text.len()
        })
        .sum()
}

/// `chunk` without the continuation bytes of a code point begun in the chunk before and
/// without a code point that continues in the next one.
fn complete_code_points(chunk: &[u8]) -> &[u8] {
    let is_continuation = |b: u8| b & 0xC0 == 0x80;
    let start = chunk
        .iter()
        .take(3)
        .take_while(|&&b| is_continuation(b))
        .count();
    let chunk = &chunk[start..];
    // The last byte that starts a code point, and how long its sequence is.
    let Some(lead) = (chunk.len().saturating_sub(4)..chunk.len())
        .rev()
        .find(|&i| !is_continuation(chunk[i]))
    else {
        return chunk;
    };
    let needed = match chunk[lead] {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    };
    if lead + needed > chunk.len() {
        &chunk[..lead]
    } else {
        chunk
    }
}

/// Polls `stream` to its end with a no-op waker, calling `f` with each item.
///
/// The benches' streams are in memory and never pending, so this is all an executor
/// would do, without its overhead.
///
/// # Panics
///
/// If the stream returns `Poll::Pending`.
pub fn for_each_ready<S: Stream>(stream: S, mut f: impl FnMut(S::Item)) {
    let mut stream = pin!(stream);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        match stream.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(item)) => f(item),
            Poll::Ready(None) => return,
            Poll::Pending => panic!("an in-memory stream was pending"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CHUNK_SIZES, Corpus};

    // The benches assert the same; these make `cargo test` catch a mismatch early.
    #[test]
    fn every_decoder_matches_its_expected_counts() {
        for corpus in Corpus::all() {
            let expected = corpus.expected();
            for size in CHUNK_SIZES {
                let chunks = corpus.chunks(size);
                let what = format!("{} / {size}", corpus.name());
                assert_eq!(mcpwire(&chunks), expected.mcpwire(), "mcpwire {what}");
                assert_eq!(
                    mcpwire_ref(&chunks),
                    expected.mcpwire(),
                    "mcpwire-ref {what}"
                );
                assert_eq!(
                    sse_reader(corpus.bytes(), size),
                    expected.mcpwire(),
                    "SseReader {what}"
                );
                assert_eq!(
                    mcpwire_after_copy(&chunks, &mut vec![0; size]),
                    expected.mcpwire(),
                    "decoder+copy {what}"
                );
                assert_eq!(
                    sse_stream(&chunks),
                    expected.sse_stream(),
                    "sse-stream {what}"
                );
                assert_eq!(
                    eventsource_stream(&chunks),
                    expected.eventsource_stream(),
                    "eventsource-stream {what}"
                );
                assert_eq!(
                    memchr2_line_ends(&chunks),
                    expected.line_end_bytes,
                    "{what}"
                );
                let validated = utf8_validation(&chunks);
                assert!(
                    validated <= corpus.len() && validated + 6 * chunks.len() >= corpus.len(),
                    "utf8 floor {what}: {validated} of {}",
                    corpus.len()
                );
            }
        }
    }
}
