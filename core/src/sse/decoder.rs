//! The `text/event-stream` decoder: WHATWG HTML §9.2.5–9.2.6, sans-IO and zero-copy.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use memchr::memchr;

use super::line_end::LineEnds;
use crate::buf::extend_within;

use crate::{Utf8Bytes, Utf8Ref};

use super::Limits;

const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

/// A carried `data` line shorter than this is copied into the data buffer (no reference
/// counts); a longer one is shared from the carried-line buffer (no copy).
const COPY_UP_TO: usize = 4096;

/// One dispatched server-sent event (WHATWG §9.2.6 "dispatch the event").
///
/// `data` is the event's data buffer with the final LF removed; `event_type` is the
/// `event` field or `message`; `id` is the *last event ID string* in force when the event
/// was dispatched (it persists across events until an `id` field changes it).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Event {
    data: Utf8Bytes,
    // Empty means the default type, `message` (SSE-PARSE-17).
    event_type: Utf8Bytes,
    id: Utf8Bytes,
}

impl Event {
    /// Builds an event as a decoder would dispatch it: an empty `event_type` means `message`.
    pub fn new(
        data: impl Into<Utf8Bytes>,
        event_type: impl Into<Utf8Bytes>,
        id: impl Into<Utf8Bytes>,
    ) -> Self {
        Self {
            data: data.into(),
            event_type: event_type.into(),
            id: id.into(),
        }
    }

    /// The event data: the `data` lines joined with LF (SSE-PARSE-16).
    #[inline]
    pub fn data(&self) -> &str {
        self.data.as_str()
    }

    /// The event data as reference-counted bytes (a slice of the input where possible).
    #[inline]
    pub fn data_bytes(&self) -> &Utf8Bytes {
        &self.data
    }

    /// Takes the event data without copying it.
    #[inline]
    pub fn into_data(self) -> Utf8Bytes {
        self.data
    }

    /// The event type: the last `event` field of the event, or `message` (SSE-PARSE-17).
    #[inline]
    pub fn event_type(&self) -> &str {
        event_type_or_message(&self.event_type)
    }

    /// The last event ID string at dispatch time; empty if no id is in force (SSE-PARSE-14).
    #[inline]
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The last event ID string as reference-counted bytes.
    #[inline]
    pub fn id_bytes(&self) -> &Utf8Bytes {
        &self.id
    }
}

/// SSE-PARSE-17: an empty event-type buffer means `message`.
fn event_type_or_message(event_type: &str) -> &str {
    if event_type.is_empty() {
        "message"
    } else {
        event_type
    }
}

/// What [`Decoder::next_item`] yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A dispatched event (a block of lines that ended with a blank line and had `data`).
    Event(Event),
    /// A comment line (`:` first), without the colon: the keep-alive signal (SSE-PARSE-7).
    Comment(Utf8Bytes),
    /// A valid `retry` field: the new reconnection time (SSE-PARSE-13). Edge-triggered;
    /// [`Decoder::retry`] gives the level.
    Retry(Duration),
}

/// A dispatched event borrowed from the decoder: see [`Decoder::next_item_ref`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef<'a> {
    data: Utf8Ref<'a>,
    event_type: Utf8Ref<'a>,
    id: Utf8Ref<'a>,
}

impl<'a> EventRef<'a> {
    /// The event data: the `data` lines joined with LF (SSE-PARSE-16).
    #[inline]
    pub fn data(&self) -> &'a str {
        self.data.as_str()
    }

    /// The event data as a borrowed view that can be turned into owned bytes without a copy.
    #[inline]
    pub fn data_ref(&self) -> Utf8Ref<'a> {
        self.data
    }

    /// The event type: the last `event` field of the event, or `message` (SSE-PARSE-17).
    #[inline]
    pub fn event_type(&self) -> &'a str {
        event_type_or_message(self.event_type.as_str())
    }

    /// The last event ID string at dispatch time; empty if no id is in force (SSE-PARSE-14).
    #[inline]
    pub fn id(&self) -> &'a str {
        self.id.as_str()
    }

    /// The owned event, sharing the decoder's bytes (no copy).
    pub fn to_event(&self) -> Event {
        Event {
            data: self.data.to_bytes(),
            event_type: self.event_type.to_bytes(),
            id: self.id.to_bytes(),
        }
    }
}

/// What [`Decoder::next_item_ref`] yields: an [`Item`] borrowed from the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemRef<'a> {
    /// A dispatched event.
    Event(EventRef<'a>),
    /// A comment line, without the colon (SSE-PARSE-7).
    Comment(Utf8Ref<'a>),
    /// A valid `retry` field (SSE-PARSE-13).
    Retry(Duration),
}

impl ItemRef<'_> {
    /// The owned item, sharing the decoder's bytes (no copy).
    pub fn to_item(&self) -> Item {
        match self {
            Self::Event(event) => Item::Event(event.to_event()),
            Self::Comment(text) => Item::Comment(text.to_bytes()),
            Self::Retry(retry) => Item::Retry(*retry),
        }
    }
}

/// A limit of the decoder was exceeded.
///
/// The decoder stays usable: the offending event is discarded up to its terminating blank
/// line (its earlier `retry` and `id` fields have already taken effect, as they would
/// have without the limit), and decoding continues with the next event, so no other event
/// is lost.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A line was longer than [`Limits::max_line_len`].
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// An event's data was larger than [`Limits::max_event_len`].
    EventTooLarge {
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
        }
    }
}

impl std::error::Error for DecodeError {}

/// A sans-IO `text/event-stream` decoder.
///
/// Feed it the bytes of one HTTP response body with [`push`](Self::push) (zero-copy) or
/// [`push_slice`](Self::push_slice), call [`finish`](Self::finish) at end of body, and pull
/// with [`next_item`](Self::next_item) until it returns `Ok(None)` ("need more input").
/// [`next_item_ref`](Self::next_item_ref) is the same pull, borrowing instead of sharing:
/// it touches no reference count, for callers that consume each item before the next.
/// The decoder never does IO and never panics on input.
///
/// The decoder follows the WHATWG processing model exactly (SSE-PARSE-1…19): one BOM is
/// stripped at stream start, CR, LF and CRLF all end a line (also when CR and LF arrive in
/// different chunks), the input is decoded as UTF-8 with replacement, and an unterminated
/// event at end of stream is discarded. A single-line `data` field that lies inside one
/// pushed chunk is returned as a slice of that chunk: nothing is copied or allocated for
/// it. Memory is bounded by [`Limits`] (SSE-PARSE-22).
///
/// # Example
///
/// ```
/// use mcpwire::sse::{Decoder, Item, Limits};
///
/// let mut dec = Decoder::new(Limits::default());
/// dec.push_slice(b"id: 7\ndata: {\"jsonrpc\":\"2.0\"}\n\n: ping\n\nda");
/// let Some(Item::Event(ev)) = dec.next_item()? else { panic!() };
/// assert_eq!((ev.data(), ev.event_type(), ev.id()), ("{\"jsonrpc\":\"2.0\"}", "message", "7"));
/// assert!(matches!(dec.next_item()?, Some(Item::Comment(_))));
/// assert_eq!(dec.next_item()?, None); // "da" waits for the rest of its line
/// dec.push_slice(b"ta: x\n\n");
/// assert_eq!(dec.next_event()?.unwrap().data(), "x");
/// # Ok::<(), mcpwire::sse::DecodeError>(())
/// ```
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    line_ends: LineEnds,
    /// The chunk being scanned, kept out of `queue` so the hot loop reaches it with one
    /// load. INVARIANT: empty only when no input is queued (then `queue` is empty too).
    front: Bytes,
    /// Pushed chunks after `front`.
    queue: VecDeque<Bytes>,
    /// INVARIANT: `pos <= front.len()`.
    pos: usize,
    /// The start of a line that continues in a later chunk (or a BOM prefix at stream start).
    /// INVARIANT: `line.len() <= limits.max_line_len`.
    line: BytesMut,
    /// Length of the last line completed from `line`, used to size the next carry.
    line_hint: usize,
    /// `line[..line_valid_upto]` is known to be valid UTF-8; `usize::MAX` once an invalid
    /// sequence was seen in it.
    line_valid_upto: usize,
    /// `front[..chunk_valid_until]` is known to be valid UTF-8 from the first complete
    /// line on (a chunk may start inside a code point of a carried line) to its last line
    /// end.
    chunk_valid_until: usize,
    /// The front chunk has been validated once; lines past `chunk_valid_until` are then
    /// validated one by one, so no byte is validated more than twice.
    chunk_checked: bool,
    /// Reused buffer behind `push_slice`.
    scratch: BytesMut,
    /// The previous line ended in CR: an LF at the start of the next input is part of that
    /// line end (SSE-PARSE-3).
    pending_cr: bool,
    /// The BOM check at stream start is over (SSE-PARSE-2).
    bom_done: bool,
    /// After a limit error: lines are skipped until the blank line that ends the event.
    discarding: bool,
    /// In discard mode: the current (skipped) line has at least one byte.
    discard_line_nonempty: bool,
    /// `finish` was called: no more input will come.
    finished: bool,
    fields: Fields,
}

/// The WHATWG parser state (SSE-PARSE-4): data, event type and last-event-id buffers,
/// the last event ID string, and the reconnection time.
#[derive(Debug, Default)]
struct Fields {
    max_line_len: usize,
    max_event_len: usize,
    data: Data,
    /// Joined data while `data` is `Data::Many`; reused across events.
    multi: BytesMut,
    event_type: FieldValue,
    /// The last event was handed out borrowing `data` and `event_type`: they are cleared
    /// (SSE-PARSE-18) at the start of the next call rather than at dispatch.
    dispatched: bool,
    /// A comment's text when it cannot be borrowed from the front chunk.
    comment: Utf8Bytes,
    /// Where the comment of a `Step::CommentInChunk` is in the front chunk.
    comment_at: (usize, usize),
    /// The last-event-id *buffer* (set by `id` fields) while it differs from
    /// `last_event_id`, that is, while `id_dirty`; otherwise empty.
    id_buf: FieldValue,
    /// An `id` field was seen since the last dispatch.
    id_dirty: bool,
    /// The last event ID *string* (set from `id_buf` at every blank line, SSE-PARSE-14).
    /// Moved, not copied, from `id_buf`: while it lies in the front chunk, a new id costs
    /// no reference count.
    last_event_id: FieldValue,
    retry: Option<Duration>,
}

/// The data buffer, without its final LF.
#[derive(Debug, Default)]
enum Data {
    /// No `data` field yet: the WHATWG buffer is the empty string.
    #[default]
    None,
    /// Exactly one `data` field, at `front[start..end]`, valid UTF-8: zero copy and
    /// not even a reference count until the chunk is dropped.
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
enum FieldValue {
    /// The empty string.
    #[default]
    Empty,
    /// At `front[start..end]`, valid UTF-8: no reference count until the chunk is
    /// dropped. INVARIANT: as for `Data::InChunk`.
    InChunk { start: usize, end: usize },
    /// Kept past its chunk, or decoded with replacement.
    Owned(Utf8Bytes),
}

impl FieldValue {
    fn len(&self) -> usize {
        match self {
            Self::Empty => 0,
            Self::InChunk { start, end } => end - start,
            Self::Owned(value) => value.len(),
        }
    }

    /// Keeps an `InChunk` value alive past `chunk`, which is about to be dropped.
    fn detach(&mut self, chunk: &Bytes) {
        if let Self::InChunk { start, end } = *self {
            *self = Self::Owned(Utf8Bytes::from_validated(chunk.slice(start..end)));
        }
    }

    /// The value, borrowed; `chunk` is the front chunk.
    #[inline(always)]
    fn view<'a>(&'a self, chunk: &'a Bytes) -> Utf8Ref<'a> {
        match self {
            Self::Empty => Utf8Ref::new(&EMPTY),
            Self::InChunk { start, end } => {
                // SAFETY: `InChunk` values are validated before they are stored, and refer
                // to the front chunk (their INVARIANT).
                #[allow(unsafe_code)]
                unsafe {
                    Utf8Ref::from_validated(chunk, *start..*end)
                }
            }
            Self::Owned(value) => Utf8Ref::new(value),
        }
    }

    /// The value, owned (a reference count, no copy); `chunk` is the front chunk.
    fn to_bytes(&self, chunk: &Bytes) -> Utf8Bytes {
        match self {
            Self::Empty => Utf8Bytes::new(),
            Self::InChunk { start, end } => Utf8Bytes::from_validated(chunk.slice(*start..*end)),
            Self::Owned(value) => value.clone(),
        }
    }

    /// The value, owned, leaving `Empty`.
    fn take(&mut self, chunk: &Bytes) -> Utf8Bytes {
        match std::mem::take(self) {
            Self::Empty => Utf8Bytes::new(),
            Self::InChunk { start, end } => Utf8Bytes::from_validated(chunk.slice(start..end)),
            Self::Owned(value) => value,
        }
    }
}

static EMPTY: Utf8Bytes = Utf8Bytes::new();

/// What processing a line produced, to be turned into an [`ItemRef`] by the decoder.
///
/// It carries no data, so `Result<Option<Step>, DecodeError>` fits in two registers on the
/// hot path; what a step refers to is in `Fields`.
#[derive(Clone, Copy)]
enum Step {
    /// An event was dispatched: `Fields::data` (not `None`) and `event_type` hold it.
    Event,
    /// A comment at `front[Fields::comment_at]`, valid UTF-8.
    CommentInChunk,
    /// A comment in `Fields::comment`.
    Comment,
    /// A valid `retry` field: `Fields::retry`.
    Retry,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Decoder {
    /// A decoder at the start of a stream.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            line_ends: LineEnds::new(),
            front: Bytes::new(),
            queue: VecDeque::with_capacity(4),
            pos: 0,
            line: BytesMut::new(),
            line_hint: 0,
            line_valid_upto: 0,
            chunk_valid_until: 0,
            chunk_checked: false,
            scratch: BytesMut::new(),
            pending_cr: false,
            bom_done: false,
            discarding: false,
            discard_line_nonempty: false,
            finished: false,
            fields: Fields {
                max_line_len: limits.max_line_len(),
                max_event_len: limits.max_event_len(),
                ..Fields::default()
            },
        }
    }

    /// Queues a chunk of the stream without copying it. Empty chunks are ignored.
    ///
    /// # Panics
    ///
    /// If called after [`finish`](Self::finish) (a decoder decodes one stream; make a new
    /// one for the next response).
    pub fn push(&mut self, chunk: Bytes) {
        assert!(!self.finished, "Decoder::push after finish");
        self.enqueue(chunk);
    }

    /// Queues a copy of `chunk`. Prefer [`push`](Self::push) when the bytes are already
    /// in a `Bytes`: event data can then be handed out without a copy.
    ///
    /// # Panics
    ///
    /// If called after [`finish`](Self::finish).
    pub fn push_slice(&mut self, chunk: &[u8]) {
        assert!(!self.finished, "Decoder::push_slice after finish");
        if !chunk.is_empty() {
            self.scratch.extend_from_slice(chunk);
            let chunk = self.scratch.split().freeze();
            self.enqueue(chunk);
        }
    }

    fn enqueue(&mut self, chunk: Bytes) {
        if self.front.is_empty() {
            // Nothing is queued (the INVARIANT of `front`), and `pos` is 0.
            self.front = chunk;
        } else if !chunk.is_empty() {
            self.queue.push_back(chunk);
        }
    }

    /// Marks the end of the stream. Queued input is still decoded; after it, an
    /// unterminated line and an undispatched event are discarded (SSE-PARSE-19).
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// Whether [`finish`](Self::finish) was called.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The last event ID string (SSE-PARSE-14): the id in force at the most recent blank
    /// line, whether or not that blank line dispatched an event (a SEP-1699 priming event
    /// or an `id`-only block updates it too). Empty if none. It reflects all input once
    /// [`next_item`](Self::next_item) has returned `Ok(None)`. This is the value to send
    /// as `Last-Event-ID` when reconnecting (SSE-PARSE-20).
    pub fn last_event_id(&self) -> &str {
        self.fields.last_event_id.view(&self.front).as_str()
    }

    /// The reconnection time set by the last valid `retry` field, if any.
    pub fn retry(&self) -> Option<Duration> {
        self.fields.retry
    }

    /// Bytes the decoder holds for the incomplete line and event: the carried partial
    /// line, the data buffer and the event-type and id buffers (not counting queued
    /// input). Whatever the input, it stays within `max_event_len + 3 × max_line_len`:
    /// the data within `max_event_len`, each of the others within `max_line_len`.
    pub fn buffered_len(&self) -> usize {
        let f = &self.fields;
        let data = if f.dispatched {
            0
        } else {
            match &f.data {
                Data::None => 0,
                Data::InChunk { start, end } => end - start,
                Data::One(data) => data.len(),
                Data::Many => f.multi.len(),
            }
        };
        self.line.len() + data + f.event_type.len() + f.id_buf.len()
    }

    /// Bytes of pushed input not yet scanned (the caller controls this by pushing only
    /// after `next_item` returned `Ok(None)`).
    pub fn queued_len(&self) -> usize {
        self.front.len() - self.pos + self.queue.iter().map(Bytes::len).sum::<usize>()
    }

    /// Decodes until the next item or until the input runs out.
    ///
    /// `Ok(None)` means more input is needed (or, after [`finish`](Self::finish), that the
    /// stream is over). Items come in stream order (SSE-PARSE-5). The item shares the
    /// pushed chunks' memory (a reference-counted slice, no copy).
    ///
    /// # Errors
    ///
    /// [`DecodeError`] when a limit is exceeded. The decoder recovers by itself: the
    /// offending event is discarded and the next call continues with the event after it.
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item>, DecodeError> {
        Ok(match self.advance()? {
            Some(Step::Event) => Some(Item::Event(self.take_event())),
            Some(step) => Some(self.view(step).to_item()),
            None => None,
        })
    }

    /// Like [`next_item`](Self::next_item), but the item borrows from the decoder: no
    /// reference count is touched and nothing is copied. Use
    /// [`ItemRef::to_item`] to keep an item past the next call.
    ///
    /// # Errors
    ///
    /// As [`next_item`](Self::next_item).
    #[inline]
    pub fn next_item_ref(&mut self) -> Result<Option<ItemRef<'_>>, DecodeError> {
        Ok(self.advance()?.map(|step| self.view(step)))
    }

    /// Like [`next_item`](Self::next_item), but skips comments and `retry` items.
    ///
    /// # Errors
    ///
    /// As [`next_item`](Self::next_item).
    pub fn next_event(&mut self) -> Result<Option<Event>, DecodeError> {
        loop {
            match self.advance()? {
                Some(Step::Event) => return Ok(Some(self.take_event())),
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }

    /// Moves the dispatched event out of the buffers (they are cleared next call anyway).
    fn take_event(&mut self) -> Event {
        let f = &mut self.fields;
        let data = match std::mem::take(&mut f.data) {
            Data::InChunk { start, end } => Utf8Bytes::from_validated(self.front.slice(start..end)),
            Data::One(data) => data,
            Data::Many => Utf8Bytes::from_validated(f.multi.split().freeze()),
            Data::None => unreachable!("dispatch leaves data"),
        };
        Event {
            data,
            event_type: f.event_type.take(&self.front),
            id: f.last_event_id.to_bytes(&self.front),
        }
    }

    /// The item a step produced, borrowed from the decoder's state. Inlined, so the item
    /// is built in the caller's frame rather than copied out of this one.
    #[inline(always)]
    fn view(&self, step: Step) -> ItemRef<'_> {
        let f = &self.fields;
        match step {
            Step::Event => {
                let data = match &f.data {
                    // SAFETY: `InChunk` ranges are validated before they are stored (see
                    // `scan_lines`), and refer to the front chunk (its INVARIANT).
                    #[allow(unsafe_code)]
                    Data::InChunk { start, end } => unsafe {
                        Utf8Ref::from_validated(&self.front, *start..*end)
                    },
                    Data::One(data) => Utf8Ref::new(data),
                    // SAFETY: only validated (or replacement-decoded) values are appended
                    // to `multi`, joined by ASCII LFs.
                    #[allow(unsafe_code)]
                    Data::Many => unsafe { Utf8Ref::from_validated_unowned(&f.multi) },
                    Data::None => unreachable!("dispatch leaves data"),
                };
                ItemRef::Event(EventRef {
                    data,
                    event_type: f.event_type.view(&self.front),
                    id: f.last_event_id.view(&self.front),
                })
            }
            // SAFETY: `scan_lines` returns this step only for a validated range of the
            // front chunk, and nothing has touched the chunks since.
            #[allow(unsafe_code)]
            Step::CommentInChunk => {
                let (start, end) = f.comment_at;
                ItemRef::Comment(unsafe { Utf8Ref::from_validated(&self.front, start..end) })
            }
            Step::Comment => ItemRef::Comment(Utf8Ref::new(&f.comment)),
            Step::Retry => ItemRef::Retry(f.retry.expect("a retry step sets the retry")),
        }
    }

    /// Runs the parser until it produces a step or needs more input.
    fn advance(&mut self) -> Result<Option<Step>, DecodeError> {
        if self.fields.dispatched {
            // SSE-PARSE-18, deferred: the previous event borrowed these buffers.
            self.fields.dispatched = false;
            self.fields.clear_event();
        }
        if !self.fields.comment.is_empty() {
            // The previous item was a comment that could not be borrowed from its chunk.
            self.fields.comment = Utf8Bytes::new();
        }
        loop {
            let Some(&first) = self.front.get(self.pos) else {
                if self.front.is_empty() {
                    if self.finished {
                        self.end_of_stream();
                    }
                    return Ok(None);
                }
                let chunk = &self.front;
                if let Data::InChunk { start, end } = self.fields.data {
                    // Keep the pending data alive past its chunk (one reference count).
                    let data = Utf8Bytes::from_validated(chunk.slice(start..end));
                    self.fields.data = Data::One(data);
                }
                self.fields.event_type.detach(chunk);
                self.fields.id_buf.detach(chunk);
                self.fields.last_event_id.detach(chunk);
                self.front = self.queue.pop_front().unwrap_or_default();
                self.pos = 0;
                self.chunk_checked = false;
                self.chunk_valid_until = 0;
                continue;
            };
            if self.pending_cr {
                // SSE-PARSE-3: CR then LF is one line end, even across chunks.
                self.pending_cr = false;
                if first == b'\n' {
                    self.pos += 1;
                    continue;
                }
            }
            if !self.bom_done {
                self.strip_bom();
            } else if self.discarding {
                self.skip_discarded();
            } else if !self.line.is_empty() {
                if let Some(step) = self.finish_carried_line()? {
                    return Ok(Some(step));
                }
            } else if let Some(step) = self.scan_lines()? {
                return Ok(Some(step));
            }
        }
    }

    /// The hot loop: processes the complete lines of the front chunk from `pos`, each
    /// borrowed from the chunk (zero copy), until one yields a step or the chunk ends;
    /// a final partial line is carried into `line`.
    fn scan_lines(&mut self) -> Result<Option<Step>, DecodeError> {
        let chunk = &self.front;
        let bytes: &[u8] = chunk;
        let max_line_len = self.limits.max_line_len();
        let mut pos = self.pos;
        while let Some(&first) = bytes.get(pos) {
            // A blank line right after a line end is the most common line of all.
            let len = if first == b'\n' || first == b'\r' {
                0
            } else if let Some(len) = self.line_ends.find(&bytes[pos..]) {
                len
            } else {
                // The line continues in a later chunk: carry its start.
                return self.carry_rest(pos, self.line_hint);
            };
            let (start, end) = (pos, pos + len);
            pos = end + 1;
            if bytes[end] == b'\r' {
                // SSE-PARSE-3: CRLF is one line end; an LF in the next chunk is checked later.
                match bytes.get(pos) {
                    Some(b'\n') => pos += 1,
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
            if len == 0 {
                // SSE-PARSE-6: a blank line dispatches.
                if let Some(step) = self.fields.dispatch() {
                    self.pos = pos;
                    return Ok(Some(step));
                }
                continue;
            }
            if len > max_line_len {
                self.pos = pos;
                return self.fail(DecodeError::LineTooLong {
                    limit: max_line_len,
                });
            }
            if end > self.chunk_valid_until && !self.chunk_checked {
                // SSE-PARSE-1: validate the rest of the chunk once, with SIMD; each line
                // inside the valid prefix then needs no check of its own, and a partial
                // line at the chunk's end is carried with its valid prefix known.
                self.chunk_checked = true;
                self.chunk_valid_until = start + valid_utf8_prefix(&bytes[start..]);
            }
            let valid = end <= self.chunk_valid_until;
            if valid
                && matches!(self.fields.data, Data::None)
                && bytes[start..end].starts_with(b"data:")
            {
                // The hot path of `Fields::line`: an event's first `data` line is kept as a
                // range of the chunk (SSE-PARSE-8, SSE-PARSE-11).
                let value = value_start(bytes, start + 5, end);
                if end - value <= self.fields.max_event_len {
                    self.fields.data = Data::InChunk { start: value, end };
                    continue;
                }
            }
            match self.fields.line(chunk, start, end, valid, true) {
                Ok(None) => {}
                Ok(Some(step)) => {
                    self.pos = pos;
                    return Ok(Some(step));
                }
                Err(e) => {
                    self.pos = pos;
                    return self.fail(e);
                }
            }
        }
        self.pos = pos;
        Ok(None)
    }

    /// Completes the line carried in `line` with the front chunk (or carries more of it).
    fn finish_carried_line(&mut self) -> Result<Option<Step>, DecodeError> {
        let chunk = &self.front;
        let buf = &chunk[self.pos..];
        let max_line_len = self.limits.max_line_len();
        let Some(len) = self.line_ends.find(buf) else {
            return self.carry_rest(self.pos, 0);
        };
        let end = self.pos + len;
        self.pos = end + 1;
        self.pending_cr = chunk[end] == b'\r';
        if self.line.len() + len > max_line_len {
            return self.fail(DecodeError::LineTooLong {
                limit: max_line_len,
            });
        }
        carry(
            &mut self.line,
            &mut self.line_valid_upto,
            &buf[..len],
            0,
            max_line_len,
            true,
        );
        let valid = self.line_valid_upto == self.line.len();
        self.line_valid_upto = 0;
        self.line_hint = self.line.len();
        if self.line.len() < COPY_UP_TO && self.line.starts_with(b"data:") {
            // The common case: a short data line split by a chunk boundary. Its value is
            // copied into the data buffer, so the line buffer is reused as it is. A long
            // line (a large tool result) is shared below instead of copied.
            let value = value_start(&self.line, 5, self.line.len());
            let result = self.fields.carried_data(&self.line[value..], valid);
            self.line.clear();
            return match result {
                Ok(()) => Ok(None),
                Err(e) => self.fail(e),
            };
        }
        let line = self.line.split().freeze();
        match self.fields.line(&line, 0, line.len(), valid, false) {
            Err(e) => self.fail(e),
            result => result,
        }
    }

    /// The front chunk from `from` on continues the current line in a later chunk: carries
    /// it into `line` (`hint` sizes a new carry), or fails if the line passes the limit.
    fn carry_rest(&mut self, from: usize, hint: usize) -> Result<Option<Step>, DecodeError> {
        let chunk = &self.front;
        let rest = &chunk[from..];
        self.pos = chunk.len();
        let max_line_len = self.limits.max_line_len();
        if self.line.len() + rest.len() > max_line_len {
            self.discard_line_nonempty = true;
            return self.fail(DecodeError::LineTooLong {
                limit: max_line_len,
            });
        }
        if self.line.is_empty() && self.chunk_checked {
            // The chunk was validated from an earlier line on (see `scan_lines`).
            self.line_valid_upto = self.chunk_valid_until.saturating_sub(from);
        }
        let want = hint.max(rest.len()).min(max_line_len);
        if self.line.is_empty() && self.line.capacity() < want && !self.line.try_reclaim(want) {
            // A new carry starts at the front of a buffer big enough for a line like the
            // last one, not in the tail the last (shared) line left: growing from there
            // would copy the line again.
            self.line = BytesMut::with_capacity(want);
        }
        carry(
            &mut self.line,
            &mut self.line_valid_upto,
            rest,
            hint,
            max_line_len,
            false,
        );
        Ok(None)
    }

    /// Enters discard mode (the rest of the current event is skipped) and reports `e`.
    fn fail<T>(&mut self, e: DecodeError) -> Result<Option<T>, DecodeError> {
        self.discarding = true;
        self.line.clear();
        self.line_valid_upto = 0;
        self.fields.clear_event();
        Err(e)
    }

    /// Discard mode: skips one line (or the rest of the chunk); a blank line ends the
    /// discarded event and runs the dispatch step on its (cleared) buffers.
    fn skip_discarded(&mut self) {
        let chunk = &self.front;
        let buf = &chunk[self.pos..];
        match self.line_ends.find(buf) {
            Some(len) => {
                let end = self.pos + len;
                self.pos = end + 1;
                self.pending_cr = chunk[end] == b'\r';
                let blank = len == 0 && !self.discard_line_nonempty;
                self.discard_line_nonempty = false;
                if blank {
                    self.discarding = false;
                    let dispatched = self.fields.dispatch();
                    debug_assert!(dispatched.is_none(), "data was cleared on failure");
                }
            }
            None => {
                self.discard_line_nonempty = true;
                self.pos = chunk.len();
            }
        }
    }

    /// SSE-PARSE-2: strips one BOM at stream start, also when it is split across chunks.
    /// A BOM prefix is kept in `line`; if the bytes turn out not to be a BOM, they are
    /// simply the start of the first line.
    fn strip_bom(&mut self) {
        let buf = &self.front[self.pos..];
        let have = self.line.len();
        let n = (BOM.len() - have).min(buf.len());
        if buf[..n] != BOM[have..have + n] {
            self.bom_done = true;
        } else if have + n == BOM.len() {
            self.line.clear();
            self.pos += n;
            self.bom_done = true;
        } else {
            self.line.extend_from_slice(&buf[..n]);
            self.pos += n;
        }
    }

    /// SSE-PARSE-19: at end of stream the unterminated line and event are dropped.
    fn end_of_stream(&mut self) {
        self.line.clear();
        self.line_valid_upto = 0;
        self.pending_cr = false;
        self.discarding = false;
        self.discard_line_nonempty = false;
        self.fields.clear_event();
        // The id buffer is not copied to the last event ID string: no dispatch ran.
        self.fields.id_buf = FieldValue::Empty;
        self.fields.id_dirty = false;
    }
}

impl Fields {
    /// Processes one complete, non-blank line `src[start..end]` (without its line end). `valid`: the
    /// line is known to be valid UTF-8; `in_chunk`: `src` is the front chunk, so a value
    /// may be kept as a range of it.
    #[inline]
    fn line(
        &mut self,
        src: &Bytes,
        start: usize,
        end: usize,
        valid: bool,
        in_chunk: bool,
    ) -> Result<Option<Step>, DecodeError> {
        let line = &src[start..end];
        // Blank lines (SSE-PARSE-6) are dispatched by the callers, which hold the front
        // chunk; a carried line is never blank.
        debug_assert!(!line.is_empty());
        // Fast path: the `data` field, by far the most common line.
        if line.len() >= 5 && &line[..5] == b"data:" {
            let value = value_start(src, start + 5, end);
            return self.data(src, value, end, valid, in_chunk);
        }
        let (name, value) = match find_colon(line) {
            // SSE-PARSE-7: a comment.
            Some(0) => {
                if valid && in_chunk {
                    self.comment_at = (start + 1, end);
                    return Ok(Some(Step::CommentInChunk));
                }
                self.comment = decode_utf8(src.slice(start + 1..end), valid);
                return Ok(Some(Step::Comment));
            }
            // SSE-PARSE-8: name before the first colon; one leading space dropped.
            Some(colon) => (&line[..colon], value_start(src, start + colon + 1, end)),
            // SSE-PARSE-9: the whole line is the name; the value is empty.
            None => (line, end),
        };
        // SSE-PARSE-10: names compare exactly.
        match name {
            b"data" => self.data(src, value, end, valid, in_chunk),
            b"event" => {
                self.event_type = self.short_value(src, value, end, valid, in_chunk)?;
                Ok(None)
            }
            b"id" => {
                // SSE-PARSE-12: an id containing NUL is ignored entirely.
                if !src[value..end].contains(&0) {
                    self.id_buf = self.short_value(src, value, end, valid, in_chunk)?;
                    self.id_dirty = true;
                }
                Ok(None)
            }
            b"retry" => Ok(parse_retry(&src[value..end]).map(|retry| {
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
        src: &Bytes,
        start: usize,
        end: usize,
        valid: bool,
        in_chunk: bool,
    ) -> Result<FieldValue, DecodeError> {
        if start == end {
            return Ok(FieldValue::Empty);
        }
        if valid && in_chunk {
            // Valid, so no longer than its line.
            return Ok(FieldValue::InChunk { start, end });
        }
        let value = decode_utf8(src.slice(start..end), valid);
        if value.len() > self.max_line_len {
            return Err(DecodeError::LineTooLong {
                limit: self.max_line_len,
            });
        }
        Ok(FieldValue::Owned(value))
    }

    /// SSE-PARSE-11: appends a `data` value (and, conceptually, an LF).
    #[inline]
    fn data(
        &mut self,
        src: &Bytes,
        start: usize,
        end: usize,
        valid: bool,
        in_chunk: bool,
    ) -> Result<Option<Step>, DecodeError> {
        match &self.data {
            Data::None => {
                if end - start > self.max_event_len {
                    return Err(self.too_large());
                }
                self.data = if valid && in_chunk {
                    Data::InChunk { start, end }
                } else {
                    let value = decode_utf8(src.slice(start..end), valid);
                    if value.len() > self.max_event_len {
                        return Err(self.too_large());
                    }
                    Data::One(value)
                };
            }
            Data::InChunk {
                start: first_start,
                end: first_end,
            } => {
                // Same chunk: `InChunk` always refers to the front chunk, and only lines of
                // the front chunk come with `in_chunk`.
                debug_assert!(in_chunk);
                let (first_start, first_end) = (*first_start, *first_end);
                self.multi.clear();
                extend_within(
                    &mut self.multi,
                    &src[first_start..first_end],
                    0,
                    self.max_event_len,
                );
                self.data = Data::Many;
                self.append(&src[start..end], valid)?;
            }
            Data::One(first) => {
                let first = first.clone();
                self.multi.clear();
                extend_within(&mut self.multi, first.as_bytes(), 0, self.max_event_len);
                self.data = Data::Many;
                self.append(&src[start..end], valid)?;
            }
            Data::Many => self.append(&src[start..end], valid)?,
        }
        Ok(None)
    }

    /// SSE-PARSE-11 for a `data` value of a line that was carried across chunks.
    fn carried_data(&mut self, value: &[u8], valid: bool) -> Result<(), DecodeError> {
        match &self.data {
            Data::None => {
                let value = decode_utf8_slice(value, valid);
                if value.len() > self.max_event_len {
                    return Err(self.too_large());
                }
                self.multi.clear();
                extend_within(&mut self.multi, &value, 0, self.max_event_len);
                self.data = Data::Many;
                Ok(())
            }
            Data::One(first) => {
                let first = first.clone();
                self.multi.clear();
                extend_within(&mut self.multi, first.as_bytes(), 0, self.max_event_len);
                self.data = Data::Many;
                self.append(value, valid)
            }
            Data::Many => self.append(value, valid),
            Data::InChunk { .. } => {
                unreachable!("InChunk data is made One before its chunk is popped")
            }
        }
    }

    fn too_large(&self) -> DecodeError {
        DecodeError::EventTooLarge {
            limit: self.max_event_len,
        }
    }

    /// Appends LF and `value` (decoded with replacement unless `valid`) to `multi`.
    fn append(&mut self, value: &[u8], valid: bool) -> Result<(), DecodeError> {
        let value = decode_utf8_slice(value, valid);
        if self.multi.len() + 1 + value.len() > self.max_event_len {
            return Err(self.too_large());
        }
        extend_within(&mut self.multi, b"\n", 1 + value.len(), self.max_event_len);
        extend_within(&mut self.multi, &value, 0, self.max_event_len);
        Ok(())
    }

    /// SSE-PARSE-14…17: the dispatch step at a blank line. The buffers are cleared
    /// (SSE-PARSE-18) when the decoder is next called, since the event borrows them.
    #[inline]
    fn dispatch(&mut self) -> Option<Step> {
        if self.id_dirty {
            self.last_event_id = std::mem::take(&mut self.id_buf);
            self.id_dirty = false;
        }
        match self.data {
            Data::None => {
                self.event_type = FieldValue::Empty;
                return None;
            }
            Data::InChunk { .. } | Data::One(_) | Data::Many => {}
        }
        self.dispatched = true;
        Some(Step::Event)
    }

    /// Clears the data and event-type buffers (SSE-PARSE-18, and on discard).
    fn clear_event(&mut self) {
        self.data = Data::None;
        self.multi.clear();
        self.event_type = FieldValue::Empty;
    }
}

/// Appends a piece of a line to `line`; when the line is `complete`, validates the part
/// not already known valid. `line[..*valid_upto]` is known valid; `usize::MAX` marks a
/// line with an invalid sequence.
///
/// A long line is validated once, whole, when it completes: one call of the SIMD
/// validator over a buffer still in L2 beats a call per piece (a 64 KiB line arrives in
/// 45 TCP segments), and the common case, valid text, needs no error position.
fn carry(
    line: &mut BytesMut,
    valid_upto: &mut usize,
    piece: &[u8],
    hint: usize,
    limit: usize,
    complete: bool,
) {
    extend_within(line, piece, hint, limit);
    if complete && *valid_upto != usize::MAX {
        let unchecked = &line[*valid_upto..];
        // A short line split by a chunk boundary is usually ASCII: std's validator, which
        // checks ASCII a word at a time, beats the SIMD validator's set-up there.
        let valid = if unchecked.len() < 256 {
            std::str::from_utf8(unchecked).is_ok()
        } else {
            simdutf8::basic::from_utf8(unchecked).is_ok()
        };
        // An invalid line is decoded with replacement by the caller.
        *valid_upto = if valid { line.len() } else { usize::MAX };
    }
}

/// SSE-PARSE-1: `bytes` as text, decoded with replacement unless already known `valid`.
#[inline]
fn decode_utf8(bytes: Bytes, valid: bool) -> Utf8Bytes {
    if valid {
        Utf8Bytes::from_validated(bytes)
    } else {
        Utf8Bytes::from_bytes_lossy(bytes)
    }
}

/// SSE-PARSE-1 for a value that will be copied: borrowed unless it needs replacement.
#[inline]
fn decode_utf8_slice(value: &[u8], valid: bool) -> std::borrow::Cow<'_, [u8]> {
    if valid || simdutf8::basic::from_utf8(value).is_ok() {
        std::borrow::Cow::Borrowed(value)
    } else {
        std::borrow::Cow::Owned(String::from_utf8_lossy(value).into_owned().into_bytes())
    }
}

/// The length of the longest valid UTF-8 prefix of `bytes` (SIMD-accelerated).
fn valid_utf8_prefix(bytes: &[u8]) -> usize {
    match simdutf8::compat::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) => e.valid_up_to(),
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
fn value_start(src: &[u8], after_colon: usize, end: usize) -> usize {
    if after_colon < end && src[after_colon] == b' ' {
        after_colon + 1
    } else {
        after_colon
    }
}

/// SSE-PARSE-13: a retry value made only of ASCII digits, in milliseconds. An empty value
/// is ignored (TRANSPORT.md §14.10); a huge one saturates.
fn parse_retry(value: &[u8]) -> Option<Duration> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let ms = value.iter().fold(0u64, |ms, &d| {
        ms.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    Some(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `chunks` (then EOF) into items, errors rendered as text.
    fn decode_with(limits: Limits, chunks: &[&[u8]]) -> (Vec<String>, String) {
        let mut dec = Decoder::new(limits);
        let mut out = Vec::new();
        for chunk in chunks {
            dec.push(Bytes::copy_from_slice(chunk));
            drain(&mut dec, &mut out);
        }
        dec.finish();
        drain(&mut dec, &mut out);
        (out, dec.last_event_id().to_owned())
    }

    fn drain(dec: &mut Decoder, out: &mut Vec<String>) {
        loop {
            match dec.next_item() {
                Ok(Some(Item::Event(e))) => {
                    out.push(format!("{}|{}|{}", e.event_type(), e.data(), e.id()));
                }
                Ok(Some(Item::Comment(c))) => out.push(format!(":{c}")),
                Ok(Some(Item::Retry(r))) => out.push(format!("retry {}", r.as_millis())),
                Ok(None) => return,
                Err(e) => out.push(format!("error {e}")),
            }
        }
    }

    fn decode(chunks: &[&[u8]]) -> Vec<String> {
        decode_with(Limits::default(), chunks).0
    }

    #[test]
    fn sse_parse_3_cr_at_chunk_end_then_lf_is_one_line_end() {
        assert_eq!(decode(&[b"data: a\r", b"\n\r", b"\n"]), ["message|a|"]);
        assert_eq!(decode(&[b"data: a\r", b"\r"]), ["message|a|"]);
    }

    #[test]
    fn sse_parse_2_bom_split_across_chunks_is_stripped_once() {
        assert_eq!(
            decode(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]),
            ["message|a|"]
        );
        // A second BOM is content: the line's field name is not `data`.
        assert!(decode(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"]).is_empty());
        // A BOM prefix that turns out not to be a BOM is the start of the first line.
        assert!(decode(&[b"\xEF\xBB", b"data: a\n\n"]).is_empty());
        assert_eq!(decode(&[b"\xEF\xBB", b"\n\ndata: b\n\n"]), ["message|b|"]);
    }

    #[test]
    fn sse_parse_13_retry_digits_only_and_saturating() {
        assert_eq!(parse_retry(b"1500"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry(b""), None);
        assert_eq!(parse_retry(b"1.5"), None);
        assert_eq!(parse_retry(b"-1"), None);
        assert_eq!(parse_retry(b" 10"), None);
        assert_eq!(
            parse_retry(b"99999999999999999999999"),
            Some(Duration::from_millis(u64::MAX))
        );
    }

    #[test]
    fn sse_parse_19_unterminated_event_and_line_are_dropped() {
        let (items, id) = decode_with(Limits::default(), &[b"id: 1\ndata: x\n\nid: 2\ndata: y\n"]);
        assert_eq!(items, ["message|x|1"]);
        assert_eq!(id, "1");
        let (items, _) = decode_with(Limits::default(), &[b"retry: 5\n", b"retry: 7"]);
        assert_eq!(items, ["retry 5"]);
    }

    #[test]
    fn sse_parse_22_long_line_in_one_chunk_discards_only_its_event() {
        let limits = Limits::default().with_max_line_len(10);
        let input: &[u8] = b"data: ok\n\ndata: 0123456789\ndata: more\n\ndata: next\n\n";
        let (items, _) = decode_with(limits, &[input]);
        assert_eq!(
            items,
            [
                "message|ok|",
                "error sse line longer than max_line_len (10 bytes); the event was discarded",
                "message|next|",
            ]
        );
    }

    #[test]
    fn sse_parse_22_long_line_across_chunks_is_never_buffered_past_the_limit() {
        let limits = Limits::default().with_max_line_len(16);
        let mut dec = Decoder::new(limits);
        dec.push_slice(b"id: 3\n\ndata: ");
        let mut errors = 0;
        for _ in 0..1000 {
            dec.push_slice(b"xxxxxxxxxx");
            while let Some(r) = dec.next_item().transpose() {
                assert_eq!(r, Err(DecodeError::LineTooLong { limit: 16 }));
                errors += 1;
            }
            assert!(dec.buffered_len() <= 16 + 1);
        }
        dec.push_slice(b"\r");
        // The rest of the long line's event (up to its blank line) is discarded too.
        dec.push_slice(b"\ndata: lost\n\ndata: after\n\n");
        assert_eq!(dec.next_event().unwrap().unwrap().data(), "after");
        assert_eq!(errors, 1);
        assert_eq!(dec.last_event_id(), "3");
    }

    #[test]
    fn sse_parse_22_event_too_large_keeps_earlier_id() {
        let limits = Limits::default().with_max_event_len(5);
        let (items, id) = decode_with(
            limits,
            &[b"data: abc\n\nid: 9\ndata: abc\ndata: def\nid: 10\n\ndata: z\n\n"],
        );
        assert_eq!(
            items,
            [
                "message|abc|",
                "error sse event data larger than max_event_len (5 bytes); the event was discarded",
                "message|z|9",
            ]
        );
        assert_eq!(
            id, "9",
            "fields after the overflow belong to the discarded event"
        );
    }

    #[test]
    fn sse_parse_22_replacement_cannot_grow_id_past_the_line_limit() {
        let limits = Limits::default().with_max_line_len(8);
        let (items, id) = decode_with(limits, &[b"id: \xFF\xFF\xFF\n\ndata: a\n\n"]);
        assert_eq!(items.len(), 2, "{items:?}");
        assert!(items[0].starts_with("error sse line longer"));
        assert_eq!(id, "");
    }

    #[test]
    fn single_line_data_is_a_slice_of_the_pushed_chunk() {
        let chunk = Bytes::from_static(b"data: zero-copy\n\n");
        let mut dec = Decoder::default();
        dec.push(chunk.clone());
        let event = dec.next_event().unwrap().unwrap();
        let range = chunk.as_ptr_range();
        assert!(range.contains(&event.data_bytes().as_bytes().as_ptr()));
    }

    #[test]
    fn long_carried_data_lines_are_shared_and_joined() {
        let long = "é".repeat(5000); // 10,000 bytes, a code point split by most cuts
        let input =
            format!("data: {long}\n\ndata: {long}\ndata: tail\n\ndata: x\ndata: {long}\n\n");
        let bytes = input.as_bytes();
        let expected = [
            format!("message|{long}|"),
            format!("message|{long}\ntail|"),
            format!("message|x\n{long}|"),
        ];
        for size in [1000, 1460, 4097, 16 << 10] {
            let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
            assert_eq!(decode(&chunks), expected, "chunks of {size}");
        }
    }

    #[test]
    fn sse_parse_1_invalid_utf8_in_long_carried_lines_is_replaced() {
        // Lines of 300 and 6000 bytes (both sides of the short-line check), with an invalid
        // byte, a truncated sequence mid-line, or a truncated sequence at the very end.
        for len in [300, 6000] {
            for (bad, at) in [
                (&b"\xFF"[..], len / 2),
                (b"\xE2\x82", len / 3),
                (b"\xC3", len),
            ] {
                let mut value = "é".repeat(len / 2).into_bytes();
                value.splice(at..at, bad.iter().copied());
                let expected = String::from_utf8_lossy(&value).into_owned();
                let mut input = b"data: ".to_vec();
                input.extend_from_slice(&value);
                input.extend_from_slice(b"\n\ndata: next\n\n");
                for size in [7, 1000, 1460, 4097, 16 << 10] {
                    let chunks: Vec<&[u8]> = input.chunks(size).collect();
                    assert_eq!(
                        decode(&chunks),
                        [format!("message|{expected}|"), "message|next|".to_owned()],
                        "len {len}, bad {bad:?} at {at}, chunks of {size}"
                    );
                }
            }
        }
    }

    #[test]
    fn data_split_across_chunks_is_joined() {
        assert_eq!(
            decode(&[b"da", b"ta: a", b"b\ndata", b":c\n", b"\n"]),
            ["message|ab\nc|"]
        );
    }
}
