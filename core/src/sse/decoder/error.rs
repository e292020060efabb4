//! The decoder's errors: a limit was exceeded ([`DecodeError`]), or input came after the
//! end ([`FinishedError`]).

use std::fmt;

/// A limit of the decoder was exceeded (SSE-PARSE-22).
///
/// The decoder stays usable and loses no other event: decoding continues after the
/// offending line. What is lost depends on the line:
///
/// - [`LineSkipped`](Self::LineSkipped): a comment or a field the decoder ignores anyway
///   (any name but `data`, `event`, `id` and `retry`) was too long. Only that line is
///   dropped; the event around it is decoded as if the line were not there.
/// - [`LineTooLong`](Self::LineTooLong) (a `data`, `event`, `id` or `retry` line) and
///   [`EventTooLarge`](Self::EventTooLarge): the event the line belongs to is discarded,
///   up to the blank line that ends it. Of that event, the `retry` and `id` lines *before*
///   the offending line have taken effect (a `retry` at once, the `id` becoming the last
///   event ID at that blank line), as they would have without the limit; its data and
///   event type, and every line after the offending one up to the blank line, are
///   dropped.
///
/// The line is judged by its first `min(max_line_len + 1, 6)` bytes, which the decoder
/// has seen whatever the chunking: with a `max_line_len` under 5 bytes, a line whose
/// first bytes could still begin `data`, `event`, `id` or `retry` is treated as a field
/// of the event (the event is discarded).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A `data`, `event`, `id` or `retry` line was longer than
    /// [`Limits::max_line_len`](crate::sse::Limits::max_line_len); its event was
    /// discarded.
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// An event's data was larger than
    /// [`Limits::max_event_len`](crate::sse::Limits::max_event_len); the event was
    /// discarded.
    EventTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A comment line, or a line of a field the decoder ignores, was longer than
    /// [`Limits::max_line_len`](crate::sse::Limits::max_line_len); only that line was
    /// dropped.
    LineSkipped {
        /// The limit in bytes.
        limit: usize,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LineTooLong { limit } => write!(
                f,
                "sse line longer than max_line_len ({limit} bytes); the event was discarded"
            ),
            Self::EventTooLarge { limit } => write!(
                f,
                "sse event data larger than max_event_len ({limit} bytes); the event was discarded"
            ),
            Self::LineSkipped { limit } => write!(
                f,
                "sse comment or ignored field longer than max_line_len ({limit} bytes); the line was skipped, the event kept"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Input was pushed after [`Decoder::finish`](super::Decoder::finish): a decoder decodes
/// one stream (one HTTP response body); make a new one for the next. The input was not
/// taken.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FinishedError;

impl fmt::Display for FinishedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sse input pushed after the decoder was finished; use a new decoder per stream")
    }
}

impl std::error::Error for FinishedError {}
