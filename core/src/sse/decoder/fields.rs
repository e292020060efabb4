//! Interpreting one line (WHATWG §9.2.6): the data, event-type and last-event-id buffers,
//! the reconnection time, and the dispatch step at a blank line.

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use memchr::memchr;

use super::DecodeError;
use crate::Utf8Bytes;
use crate::utf8::{Chunk, TextBuf, Utf8Ref};

/// Where a complete, non-blank line lies, with what is known of its UTF-8 (SSE-PARSE-1).
#[derive(Clone, Copy)]
pub(super) enum Src<'a> {
    /// In the front chunk: a value inside the chunk's valid span is kept as a range of it
    /// (no copy, no reference count); one outside it is decoded with replacement.
    Chunk(&'a Chunk),
    /// A line carried across chunks that is valid UTF-8: values are shared slices of it.
    Text(&'a Utf8Bytes),
    /// A carried line with an invalid sequence: values are decoded with replacement.
    Raw(&'a Bytes),
}

impl<'a> Src<'a> {
    /// The line's bytes.
    #[inline(always)]
    fn bytes(self) -> &'a [u8] {
        match self {
            Self::Chunk(chunk) => chunk.bytes(),
            Self::Text(text) => text.as_bytes(),
            Self::Raw(raw) => raw,
        }
    }

    /// `[start..end]` as text, when it is known valid where it lies.
    #[inline(always)]
    fn valid(self, start: usize, end: usize) -> Option<Utf8Ref<'a>> {
        match self {
            Self::Chunk(chunk) => chunk.text(start, end),
            Self::Text(text) => {
                let part = text.as_str().get(start..end)?;
                Some(Utf8Ref::new(text).sub(part))
            }
            Self::Raw(_) => None,
        }
    }

    /// `[start..end]` as owned text: shared when valid, else decoded with replacement.
    fn owned(self, start: usize, end: usize) -> Utf8Bytes {
        let valid = match self {
            Self::Chunk(chunk) => chunk.text_bytes(start, end),
            Self::Text(text) => text.get(start..end),
            Self::Raw(_) => None,
        };
        valid.unwrap_or_else(|| {
            // Shared, not copied, if the slice turns out valid (a line after an invalid
            // sequence in the same chunk).
            let bytes = match self {
                Self::Chunk(chunk) => chunk.bytes().slice(start..end),
                Self::Text(text) => text.as_bytes().slice(start..end),
                Self::Raw(raw) => raw.slice(start..end),
            };
            Utf8Bytes::from_bytes_lossy(bytes)
        })
    }

    /// `[start..end]` as text to copy: borrowed when valid, else decoded with replacement.
    fn text(self, start: usize, end: usize) -> Cow<'a, str> {
        match self.valid(start, end) {
            Some(text) => Cow::Borrowed(text.as_str()),
            None => String::from_utf8_lossy(&self.bytes()[start..end]),
        }
    }
}

/// What processing a line produced, to be turned into an item by the decoder.
///
/// It carries no data, so `Result<Option<Step>, DecodeError>` fits in two registers on the
/// hot path; what a step refers to is in `Fields`.
#[derive(Clone, Copy)]
pub(super) enum Step {
    /// An event was dispatched: `Fields::data` (not `None`) and `event_type` hold it.
    Event,
    /// A comment at `front[Fields::comment_at]`, in the chunk's valid span.
    CommentInChunk,
    /// A comment in `Fields::comment`.
    Comment,
    /// A valid `retry` field: `Fields::retry`.
    Retry,
}

/// What the last item handed out borrowed from `Fields`, to be released at the next pull
/// (the buffers are cleared then rather than at dispatch, SSE-PARSE-18).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Lent {
    /// Nothing to release.
    #[default]
    Nothing,
    /// An event: clear the data and event-type buffers.
    Event,
    /// An owned comment: drop it.
    Comment,
}

/// The WHATWG parser state (SSE-PARSE-4): data, event type and last-event-id buffers,
/// the last event ID string, and the reconnection time.
#[derive(Debug, Default)]
pub(super) struct Fields {
    pub(super) max_line_len: usize,
    pub(super) max_event_len: usize,
    pub(super) data: Data,
    /// Joined data while `data` is `Data::Many`; reused across events.
    pub(super) multi: TextBuf,
    pub(super) event_type: FieldValue,
    pub(super) lent: Lent,
    /// A comment's text when it cannot be borrowed from the front chunk.
    pub(super) comment: Utf8Bytes,
    /// Where the comment of a `Step::CommentInChunk` is in the front chunk.
    pub(super) comment_at: (usize, usize),
    /// The last-event-id *buffer*, `Some` when an `id` field was seen since the last
    /// dispatch (it then differs from `last_event_id`).
    pub(super) id_buf: Option<FieldValue>,
    /// The last event ID *string* (set from `id_buf` at every blank line, SSE-PARSE-14).
    /// Moved, not copied, from `id_buf`: while it lies in the front chunk, a new id costs
    /// no reference count.
    pub(super) last_event_id: FieldValue,
    pub(super) retry: Option<Duration>,
}

/// The data buffer, without its final LF.
#[derive(Debug, Default)]
pub(super) enum Data {
    /// No `data` field yet: the WHATWG buffer is the empty string.
    #[default]
    None,
    /// Exactly one `data` field, at `front[start..end]`, inside the chunk's valid span:
    /// zero copy and not even a reference count until the chunk is dropped.
    /// INVARIANT: it always refers to the current front chunk (converted to `One` before
    /// that chunk is popped).
    InChunk { start: usize, end: usize },
    /// Exactly one `data` field, kept as a slice of its chunk or its carried line.
    One(Utf8Bytes),
    /// The data is in `Fields::multi`: several `data` fields joined with LF, or one short
    /// one that was carried across chunks (copied there instead of sharing its line).
    Many,
}

/// The value of an `event` or `id` field of the current event.
#[derive(Debug, Default)]
pub(super) enum FieldValue {
    /// The empty string.
    #[default]
    Empty,
    /// At `front[start..end]`, inside the chunk's valid span: no reference count until
    /// the chunk is dropped. INVARIANT: as for `Data::InChunk`.
    InChunk { start: usize, end: usize },
    /// Kept past its chunk, or decoded with replacement.
    Owned(Utf8Bytes),
}

const IN_SPAN: &str = "INVARIANT: in-chunk values lie in the front chunk's valid span";

/// The text of an in-chunk range, which its INVARIANT says is in the valid span.
#[inline(always)]
pub(super) fn in_chunk(chunk: &Chunk, start: usize, end: usize) -> Utf8Ref<'_> {
    chunk.text(start, end).expect(IN_SPAN)
}

/// An in-chunk range as owned text: a slice of the chunk (one reference count).
#[inline]
pub(super) fn in_chunk_bytes(chunk: &Chunk, start: usize, end: usize) -> Utf8Bytes {
    chunk.text_bytes(start, end).expect(IN_SPAN)
}

impl FieldValue {
    pub(super) fn len(&self) -> usize {
        match self {
            Self::Empty => 0,
            Self::InChunk { start, end } => end - start,
            Self::Owned(value) => value.len(),
        }
    }

    /// Keeps an `InChunk` value alive past `chunk`, which is about to be dropped.
    fn detach(&mut self, chunk: &Chunk) {
        if let Self::InChunk { start, end } = *self {
            *self = Self::Owned(in_chunk_bytes(chunk, start, end));
        }
    }

    /// The value, borrowed; `chunk` is the front chunk.
    #[inline(always)]
    pub(super) fn view<'a>(&'a self, chunk: &'a Chunk) -> Utf8Ref<'a> {
        match self {
            Self::Empty => Utf8Ref::new(&EMPTY),
            Self::InChunk { start, end } => in_chunk(chunk, *start, *end),
            Self::Owned(value) => Utf8Ref::new(value),
        }
    }

    /// The value, owned (a reference count, no copy); `chunk` is the front chunk.
    pub(super) fn to_bytes(&self, chunk: &Chunk) -> Utf8Bytes {
        match self {
            Self::Empty => Utf8Bytes::new(),
            Self::InChunk { start, end } => in_chunk_bytes(chunk, *start, *end),
            Self::Owned(value) => value.clone(),
        }
    }

    /// The value, owned, leaving `Empty`.
    pub(super) fn take(&mut self, chunk: &Chunk) -> Utf8Bytes {
        match std::mem::take(self) {
            Self::Owned(value) => value,
            value => value.to_bytes(chunk),
        }
    }
}

static EMPTY: Utf8Bytes = Utf8Bytes::new();

impl Fields {
    /// Releases what the last item borrowed (SSE-PARSE-18, deferred to the next pull).
    #[inline(always)]
    pub(super) fn release(&mut self) {
        match std::mem::take(&mut self.lent) {
            Lent::Nothing => {}
            Lent::Event => self.clear_event(),
            Lent::Comment => self.comment = Utf8Bytes::new(),
        }
    }

    /// Keeps every in-chunk value alive past `chunk`, the front chunk about to be dropped.
    pub(super) fn detach(&mut self, chunk: &Chunk) {
        if let Data::InChunk { start, end } = self.data {
            // One reference count.
            self.data = Data::One(in_chunk_bytes(chunk, start, end));
        }
        self.event_type.detach(chunk);
        if let Some(id) = &mut self.id_buf {
            id.detach(chunk);
        }
        self.last_event_id.detach(chunk);
    }

    /// Bytes held for the event in progress (not counting a lent event).
    pub(super) fn buffered_len(&self) -> usize {
        let data = if self.lent == Lent::Event {
            0
        } else {
            match &self.data {
                Data::None => 0,
                Data::InChunk { start, end } => end - start,
                Data::One(data) => data.len(),
                Data::Many => self.multi.len(),
            }
        };
        data + self.event_type.len() + self.id_buf.as_ref().map_or(0, FieldValue::len)
    }

    /// Processes one complete, non-blank line `src[start..end]` (without its line end).
    #[inline]
    pub(super) fn line(
        &mut self,
        src: Src<'_>,
        start: usize,
        end: usize,
    ) -> Result<Option<Step>, DecodeError> {
        let line = &src.bytes()[start..end];
        // Blank lines (SSE-PARSE-6) are dispatched by the callers, which hold the front
        // chunk; a carried line is never blank.
        debug_assert!(!line.is_empty());
        // Fast path: the `data` field, by far the most common line.
        if line.len() >= 5 && &line[..5] == b"data:" {
            let value = value_start(src.bytes(), start + 5, end);
            return self.data(src, value, end).map(|()| None);
        }
        let (name, value) = match find_colon(line) {
            // SSE-PARSE-7: a comment.
            Some(0) => {
                if let Src::Chunk(chunk) = src
                    && chunk.in_span(start + 1, end)
                {
                    self.comment_at = (start + 1, end);
                    return Ok(Some(Step::CommentInChunk));
                }
                self.comment = src.owned(start + 1, end);
                self.lent = Lent::Comment;
                return Ok(Some(Step::Comment));
            }
            // SSE-PARSE-8: name before the first colon; one leading space dropped.
            Some(colon) => (
                &line[..colon],
                value_start(src.bytes(), start + colon + 1, end),
            ),
            // SSE-PARSE-9: the whole line is the name; the value is empty.
            None => (line, end),
        };
        // SSE-PARSE-10: names compare exactly.
        match name {
            b"data" => self.data(src, value, end).map(|()| None),
            b"event" => {
                self.event_type = self.short_value(src, value, end)?;
                Ok(None)
            }
            b"id" => {
                // SSE-PARSE-12: an id containing NUL is ignored entirely.
                if !src.bytes()[value..end].contains(&0) {
                    self.id_buf = Some(self.short_value(src, value, end)?);
                }
                Ok(None)
            }
            b"retry" => Ok(parse_retry(&src.bytes()[value..end]).map(|retry| {
                self.retry = Some(retry);
                Step::Retry
            })),
            _ => Ok(None),
        }
    }

    /// Decodes an `event` or `id` value. UTF-8 replacement can triple invalid bytes, so
    /// the line limit is checked again on the decoded value: these buffers outlive the line.
    fn short_value(
        &self,
        src: Src<'_>,
        start: usize,
        end: usize,
    ) -> Result<FieldValue, DecodeError> {
        if start == end {
            return Ok(FieldValue::Empty);
        }
        if let Src::Chunk(chunk) = src
            && chunk.in_span(start, end)
        {
            // Valid, so no longer than its line.
            return Ok(FieldValue::InChunk { start, end });
        }
        let value = src.owned(start, end);
        if value.len() > self.max_line_len {
            return Err(DecodeError::LineTooLong {
                limit: self.max_line_len,
            });
        }
        Ok(FieldValue::Owned(value))
    }

    /// SSE-PARSE-11: appends a `data` value (and, conceptually, an LF).
    #[inline]
    fn data(&mut self, src: Src<'_>, start: usize, end: usize) -> Result<(), DecodeError> {
        match &self.data {
            Data::None => {
                if end - start > self.max_event_len {
                    return Err(self.too_large());
                }
                self.data = match src {
                    Src::Chunk(chunk) if chunk.in_span(start, end) => Data::InChunk { start, end },
                    _ => {
                        let value = src.owned(start, end);
                        if value.len() > self.max_event_len {
                            return Err(self.too_large());
                        }
                        Data::One(value)
                    }
                };
                Ok(())
            }
            Data::InChunk {
                start: first_start,
                end: first_end,
            } => {
                // Same chunk: `InChunk` always refers to the front chunk, and a line that
                // comes with `Src::Chunk` is in it.
                let Src::Chunk(chunk) = src else {
                    unreachable!("InChunk data is made One before its chunk is popped")
                };
                let first = in_chunk(chunk, *first_start, *first_end);
                self.start_many(first.as_str());
                self.append(&src.text(start, end))
            }
            Data::One(first) => {
                let first = first.clone();
                self.start_many(&first);
                self.append(&src.text(start, end))
            }
            Data::Many => self.append(&src.text(start, end)),
        }
    }

    /// SSE-PARSE-11 for the value of a short `data` line that was carried across chunks:
    /// copied into the joined buffer, so the carried line's buffer is reused as it is.
    pub(super) fn carried_data(&mut self, value: &str) -> Result<(), DecodeError> {
        match &self.data {
            Data::None => {
                if value.len() > self.max_event_len {
                    return Err(self.too_large());
                }
                self.start_many(value);
                Ok(())
            }
            Data::One(first) => {
                let first = first.clone();
                self.start_many(&first);
                self.append(value)
            }
            Data::Many => self.append(value),
            Data::InChunk { .. } => {
                unreachable!("InChunk data is made One before its chunk is popped")
            }
        }
    }

    /// Puts `first` (within the event limit) alone in the joined buffer.
    fn start_many(&mut self, first: &str) {
        self.multi.clear();
        self.multi.push_within(first, 0, self.max_event_len);
        self.data = Data::Many;
    }

    fn too_large(&self) -> DecodeError {
        DecodeError::EventTooLarge {
            limit: self.max_event_len,
        }
    }

    /// Appends LF and `value` to the joined buffer.
    fn append(&mut self, value: &str) -> Result<(), DecodeError> {
        if self.multi.len() + 1 + value.len() > self.max_event_len {
            return Err(self.too_large());
        }
        self.multi
            .push_within("\n", 1 + value.len(), self.max_event_len);
        self.multi.push_within(value, 0, self.max_event_len);
        Ok(())
    }

    /// SSE-PARSE-14…17: the dispatch step at a blank line. The buffers are cleared
    /// (SSE-PARSE-18) when the decoder is next called, since the event borrows them.
    #[inline]
    pub(super) fn dispatch(&mut self) -> Option<Step> {
        if let Some(id) = self.id_buf.take() {
            self.last_event_id = id;
        }
        if let Data::None = self.data {
            self.event_type = FieldValue::Empty;
            return None;
        }
        self.lent = Lent::Event;
        Some(Step::Event)
    }

    /// Clears the data and event-type buffers (SSE-PARSE-18, and on discard).
    pub(super) fn clear_event(&mut self) {
        self.data = Data::None;
        self.multi.clear();
        self.event_type = FieldValue::Empty;
    }
}

/// Whether a line too long to keep holds nothing of its event, judged by its first bytes
/// `prefix`: a comment (SSE-PARSE-7), or a field whose name is none of `data`, `event`,
/// `id` and `retry`, which the decoder ignores anyway (SSE-PARSE-13). Such a line costs
/// only itself. When `prefix` ends before the name does and could still be one of the
/// four, the line counts as a field of the event.
pub(super) fn holds_nothing_of_the_event(prefix: &[u8]) -> bool {
    const NAMES: [&[u8]; 4] = [b"data", b"event", b"id", b"retry"];
    match find_colon(prefix) {
        Some(0) => true,
        Some(colon) => !NAMES.contains(&&prefix[..colon]),
        None => !NAMES.iter().any(|name| name.starts_with(prefix)),
    }
}

/// The first colon of a non-`data` line (SSE-PARSE-8): field names are short, so the
/// first bytes are searched directly and only a long name or comment goes to `memchr`.
#[inline]
fn find_colon(line: &[u8]) -> Option<usize> {
    const HEAD: usize = 16;
    match line[..line.len().min(HEAD)].iter().position(|&b| b == b':') {
        None if line.len() > HEAD => memchr(b':', &line[HEAD..]).map(|i| i + HEAD),
        found => found,
    }
}

/// SSE-PARSE-8: the value starts after the colon, minus one leading space.
#[inline]
pub(super) fn value_start(src: &[u8], after_colon: usize, end: usize) -> usize {
    if after_colon < end && src[after_colon] == b' ' {
        after_colon + 1
    } else {
        after_colon
    }
}

/// SSE-PARSE-13: a retry value made only of ASCII digits, in milliseconds. An empty value
/// is ignored (docs/requirements.md §14.10); a huge one saturates.
pub(super) fn parse_retry(value: &[u8]) -> Option<Duration> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let ms = value.iter().fold(0u64, |ms, &d| {
        ms.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    Some(Duration::from_millis(ms))
}
