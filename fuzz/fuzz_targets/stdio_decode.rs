//! `stdio_decode`: arbitrary bytes as a stdio server's output, cut into arbitrary chunks.
//!
//! Input layout: byte 0 is the line limit (`byte0 % 64 + 1` bytes, so that long lines are
//! common); byte 1 says how many chunk-size bytes follow (`byte1 % 16`), used cyclically
//! (0 gives an empty chunk); the rest is the stream.
//!
//! Checks (STDIO-1, STDIO-6):
//! 1. The items do not depend on the chunking: cut as the input says, byte by byte, and
//!    whole, the decoder gives the same messages and the same errors.
//! 2. Against a model of the framing: each line (split at LF, a CR before it dropped) is
//!    skipped when blank, is exactly one `TooLong` error when longer than the limit, and
//!    otherwise gives what the classifier makes of it alone (a message, an error, or a
//!    batch's elements); a last line without LF is one `Cut` error at `finish`.
//! 3. The decoder never holds more than the limit plus one byte.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire::stdio::{Decoder, Limits, LineProblem};

/// An item as compared: the message's text, or the error's line and kind.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Message(String),
    Error(u64, &'static str),
}

fn kind(problem: &LineProblem) -> &'static str {
    match problem {
        LineProblem::NotJsonRpc(_) => "not json-rpc",
        LineProblem::TooLong { .. } => "too long",
        LineProblem::Cut { .. } => "cut",
        _ => "other",
    }
}

fn run(limits: Limits, chunks: &[&[u8]]) -> Vec<Seen> {
    let mut decoder = Decoder::with_limits(limits);
    let mut seen = Vec::new();
    let mut drain = |decoder: &mut Decoder| {
        while let Some(item) = decoder.poll_item() {
            seen.push(match item {
                Ok(message) => {
                    assert!(!message.text().as_str().contains('\n'), "STDIO-1");
                    Seen::Message(message.text().as_str().to_owned())
                }
                Err(e) => Seen::Error(e.line(), kind(e.problem())),
            });
        }
    };
    for chunk in chunks {
        decoder.push(chunk);
        assert!(
            decoder.buffered() <= limits.max_line() + 1,
            "holds {} bytes with a limit of {}",
            decoder.buffered(),
            limits.max_line()
        );
        drain(&mut decoder);
    }
    decoder.finish();
    drain(&mut decoder);
    seen
}

/// The framing as the requirements say it, one line at a time.
fn model(limits: Limits, stream: &[u8]) -> Vec<Seen> {
    let mut seen = Vec::new();
    let mut parts: Vec<&[u8]> = stream.split(|b| *b == b'\n').collect();
    let last = parts.pop().unwrap_or_default();
    for (i, line) in parts.iter().enumerate() {
        let number = i as u64 + 1;
        if line.len() > limits.max_line() {
            seen.push(Seen::Error(number, "too long"));
            continue;
        }
        let bare = line.strip_suffix(b"\r").unwrap_or(line);
        if bare.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
            continue;
        }
        // The line alone through the decoder (which drops the one CR before its LF) is
        // the classifier's verdict on it.
        let mut alone = Decoder::with_limits(Limits::new());
        alone.push(line);
        alone.push(b"\n");
        while let Some(item) = alone.poll_item() {
            seen.push(match item {
                Ok(message) => Seen::Message(message.text().as_str().to_owned()),
                Err(e) => Seen::Error(number, kind(e.problem())),
            });
        }
    }
    let number = parts.len() as u64 + 1;
    if last.len() > limits.max_line() {
        seen.push(Seen::Error(number, "too long"));
    } else if !last.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
        seen.push(Seen::Error(number, "cut"));
    }
    seen
}

fuzz_target!(|input: &[u8]| {
    let [limit, n_sizes, rest @ ..] = input else {
        return;
    };
    let limits = Limits::new().with_max_line(usize::from(*limit) % 64 + 1);
    let (sizes, stream) = rest.split_at((usize::from(*n_sizes) % 16).min(rest.len()));
    let mut chunks = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < stream.len() {
        let size = sizes
            .get(i % sizes.len().max(1))
            .map_or(stream.len(), |s| usize::from(*s));
        let end = (at + size).min(stream.len());
        chunks.push(&stream[at..end]);
        at = end;
        i += 1;
        if chunks.len() > 4 * stream.len() + 4 {
            // Only empty chunks: the rest goes whole.
            chunks.push(&stream[at..]);
            break;
        }
    }
    let cut = run(limits, &chunks);
    let whole = run(limits, &[stream]);
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    let single = run(limits, &bytes);
    assert_eq!(cut, whole, "the chunking changed the items");
    assert_eq!(single, whole, "byte by byte changed the items");
    assert_eq!(
        whole,
        model(limits, stream),
        "the decoder differs from the model"
    );
});
