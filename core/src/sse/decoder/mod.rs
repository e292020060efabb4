//! The `text/event-stream` decoder: WHATWG HTML §9.2.5–9.2.6, sans-IO and zero-copy.
//!
//! - `mod.rs`: [`Decoder`], its input (`push`, `read_room` and `commit_read`, `finish`),
//!   its pull (`poll_item`, `poll_item_ref`) and its [`Mode`];
//! - `lines.rs`: splitting the input into lines: the in-chunk hot loop, lines carried
//!   across chunks, the BOM, skipping after a limit error (§9.2.5);
//! - `fields.rs`: interpreting one line: the field buffers and the dispatch step
//!   (§9.2.6);
//! - `item.rs`: what the decoder hands out; `error.rs`: its errors.

mod error;
mod fields;
mod item;
mod lines;
#[cfg(test)]
mod tests;

pub use error::{DecodeError, FinishedError};
pub use item::{Event, EventRef, Item, ItemRef};

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use super::Limits;
use super::line_end::LineEnds;
use crate::utf8::{Chunk, InputBuf, LineBuf};
use fields::{Data, Fields, Step, in_chunk};

/// A line carried this long is read into its own buffer by `read_room` (or one half of
/// `max_line_len` long, if that is less): from here on, the copy into that buffer that a
/// chunk read elsewhere needs costs more than the room's upkeep.
const LONG_LINE: usize = 4 << 10;

/// What `read_room` lent, and how many bytes of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Lent {
    /// Nothing, or a push or `finish` came since.
    #[default]
    Nothing,
    /// Room in the input buffer.
    Input(usize),
    /// Room after the carried line.
    Line(usize),
}

/// Where the decoder is in the stream: what the next input byte means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// At stream start, `matched` bytes of a byte order mark seen so far (SSE-PARSE-2).
    Bom { matched: u8 },
    /// At the start of a line: lines are read in place from the front chunk.
    Lines,
    /// Inside a line that started in an earlier chunk: its start is in `line`.
    /// INVARIANT: `line` is non-empty exactly in this mode.
    Carrying,
    /// After a limit error that discards the event: lines are skipped up to the blank line
    /// that ends it. `in_line`: the current skipped line has at least one byte.
    DiscardingEvent { in_line: bool },
    /// After a too-long line that holds nothing of the event (a comment, an ignored
    /// field): the rest of that line is skipped.
    SkippingLine,
    /// The input is finished and consumed: the unterminated line and event were dropped
    /// (SSE-PARSE-19).
    Ended,
}

/// A sans-IO `text/event-stream` decoder.
///
/// Feed it the bytes of one HTTP response body with [`push`](Self::push) (zero-copy) or
/// [`push_slice`](Self::push_slice), call [`finish`](Self::finish) at end of body, and pull
/// with [`poll_item`](Self::poll_item) until it returns `Ok(None)` ("need more input").
/// A caller that reads from a `std::io::Read` reads into room the decoder lends
/// ([`read_room`](Self::read_room)) and hands it over with
/// [`commit_read`](Self::commit_read) instead: the read is then the only copy of the
/// input. The decoder never does IO and never panics on input.
///
/// There are two pulls, one for each kind of caller:
///
/// - [`poll_item`](Self::poll_item) gives an owned [`Item`]: use it by default. Its text
///   shares the pushed chunks' memory (a reference count, no copy), so it can be kept,
///   sent to another task, or turned into a JSON-RPC envelope without a copy.
/// - [`poll_item_ref`](Self::poll_item_ref) gives an [`ItemRef`] borrowed from the decoder
///   until the next pull: no reference count is touched. It is for a loop that is done
///   with each item before pulling the next (a parser that classifies and forwards,
///   a logger); [`ItemRef::to_item`] keeps one anyway.
///
/// The decoder follows the WHATWG processing model exactly (SSE-PARSE-1…19): one BOM is
/// stripped at stream start, CR, LF and CRLF all end a line (also when CR and LF arrive in
/// different chunks), the input is decoded as UTF-8 with replacement, and an unterminated
/// event at end of stream is discarded. A single-line `data` field that lies inside one
/// pushed chunk is returned as a slice of that chunk: nothing is copied or allocated for
/// it. Memory is bounded by [`Limits`] (SSE-PARSE-22); see [`DecodeError`] for what a
/// limit error costs.
///
/// # Example
///
/// ```
/// use mcpwire::sse::{Decoder, Item, Limits};
///
/// let mut dec = Decoder::new(Limits::default());
/// dec.push_slice(b"id: 7\ndata: {\"jsonrpc\":\"2.0\"}\n\n: ping\n\nda")?;
/// let Some(Item::Event(ev)) = dec.poll_item()? else { panic!() };
/// assert_eq!((ev.data(), ev.event_type(), ev.id()), ("{\"jsonrpc\":\"2.0\"}", "message", "7"));
/// assert!(matches!(dec.poll_item()?, Some(Item::Comment(_))));
/// assert_eq!(dec.poll_item()?, None); // "da" waits for the rest of its line
/// dec.push_slice(b"ta: x\n\n")?;
/// let Some(Item::Event(ev)) = dec.poll_item()? else { panic!() };
/// assert_eq!(ev.data(), "x");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    line_ends: LineEnds,
    mode: Mode,
    /// `finish` was called: no more input will be pushed.
    closed: bool,
    /// The last line end was a CR at the end of the input so far: an LF first in the next
    /// input belongs to it (SSE-PARSE-3).
    skip_lf: bool,
    /// The chunk being scanned, kept out of `queue` so the hot loop reaches it with one
    /// load, with its valid UTF-8 span. INVARIANT: empty only when no input is queued
    /// (then `queue` is empty too).
    front: Chunk,
    /// Pushed chunks after `front`.
    queue: VecDeque<Bytes>,
    /// INVARIANT: `pos <= front.len()`.
    pos: usize,
    /// The start of a line that continues in a later chunk. INVARIANT: non-empty only in
    /// `Mode::Carrying`; `line.len() <= limits.max_line_len`.
    line: LineBuf,
    /// Length of the last line completed from `line`, used to size the next carry.
    line_hint: usize,
    /// Reused buffer behind `push_slice`.
    scratch: BytesMut,
    /// Room for reads (`read_room`) outside a long line.
    input: InputBuf,
    /// What the last `read_room` lent and is not yet committed (nothing after any other
    /// input).
    lent: Lent,
    fields: Fields,
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
            mode: Mode::Bom { matched: 0 },
            closed: false,
            skip_lf: false,
            front: Chunk::default(),
            queue: VecDeque::with_capacity(4),
            pos: 0,
            line: LineBuf::default(),
            line_hint: 0,
            scratch: BytesMut::new(),
            input: InputBuf::default(),
            lent: Lent::Nothing,
            fields: Fields {
                max_line_len: limits.max_line_len(),
                max_event_len: limits.max_event_len(),
                ..Fields::default()
            },
        }
    }

    /// Queues a chunk of the stream without copying it. Empty chunks are ignored.
    ///
    /// # Errors
    ///
    /// [`FinishedError`] after [`finish`](Self::finish): a decoder decodes one stream.
    pub fn push(&mut self, chunk: Bytes) -> Result<(), FinishedError> {
        if self.closed {
            return Err(FinishedError);
        }
        self.lent = Lent::Nothing;
        self.enqueue(chunk);
        Ok(())
    }

    /// Queues a copy of `chunk`. Prefer [`push`](Self::push) when the bytes are already
    /// in a `Bytes`: event data can then be handed out without a copy.
    ///
    /// # Errors
    ///
    /// [`FinishedError`] after [`finish`](Self::finish).
    pub fn push_slice(&mut self, chunk: &[u8]) -> Result<(), FinishedError> {
        if self.closed {
            return Err(FinishedError);
        }
        self.lent = Lent::Nothing;
        if !chunk.is_empty() {
            self.scratch.extend_from_slice(chunk);
            let chunk = self.scratch.split().freeze();
            self.enqueue(chunk);
        }
        Ok(())
    }

    fn enqueue(&mut self, chunk: Bytes) {
        if self.front.bytes().is_empty() {
            // Nothing is queued (the INVARIANT of `front`), and `pos` is 0.
            self.front = Chunk::new(chunk);
        } else if !chunk.is_empty() {
            self.queue.push_back(chunk);
        }
    }

    /// Marks the end of the stream. Queued input is still decoded; after it, an
    /// unterminated line and an undispatched event are discarded (SSE-PARSE-19).
    pub fn finish(&mut self) {
        self.closed = true;
        self.lent = Lent::Nothing;
    }

    /// Room in the decoder's own buffers to read the next input into, for a caller that
    /// reads from a `std::io::Read`: write the input at its front and hand it over with
    /// [`commit_read`](Self::commit_read), then pull as after a [`push`](Self::push).
    /// At most `want` bytes; `None` only after [`finish`](Self::finish) or for a `want`
    /// of 0. The room is initialised memory, ready for `Read::read`.
    ///
    /// This saves what a caller's own buffers cost. Inside a long line that the input
    /// so far has not ended (4 KiB carried, or half of `max_line_len` if less; all input
    /// decoded), the room is the rest of the line's buffer, which keeps the line's bytes
    /// anyway: each byte is copied once, by the read, where a pushed chunk would be
    /// copied into that buffer again. Otherwise the room is in an input buffer that hands
    /// the bytes over without a copy and is taken back and reused, not zeroed again,
    /// once nothing holds any of its bytes (the decoder zeroes each allocation once and
    /// keeps up to six: the current one and three spent ones for input, each at least
    /// 16 KiB or `want`, and the line's two, each at most `max_line_len`).
    ///
    /// ```
    /// use std::io::Read;
    /// use mcpwire::sse::{Decoder, Item};
    ///
    /// let mut body: &[u8] = b"data: one\n\ndata: two\n\n";
    /// let mut dec = Decoder::default();
    /// let mut data = Vec::new();
    /// loop {
    ///     while let Some(item) = dec.poll_item()? {
    ///         if let Item::Event(event) = item {
    ///             data.push(event.data().to_owned());
    ///         }
    ///     }
    ///     let Some(room) = dec.read_room(4) else { break }; // finished
    ///     match body.read(room)? {
    ///         0 => dec.finish(),
    ///         n => dec.commit_read(n),
    ///     }
    /// }
    /// assert_eq!(data, ["one", "two"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_room(&mut self, want: usize) -> Option<&mut [u8]> {
        if self.closed || want == 0 {
            return None;
        }
        let max_line_len = self.limits.max_line_len();
        let long_line = LONG_LINE.min(max_line_len / 2).max(1);
        // `front` is empty only when all input is decoded (nothing is queued).
        let room = if self.mode == Mode::Carrying
            && self.front.bytes().is_empty()
            && (long_line..max_line_len).contains(&self.line.len())
        {
            // Below the limit, so the room is not empty.
            let room = self.line.room(want, self.line_hint, max_line_len);
            self.lent = Lent::Line(room.len());
            room
        } else {
            let room = self.input.room(want);
            self.lent = Lent::Input(room.len());
            room
        };
        Some(room)
    }

    /// Hands over the first `n` bytes written into the room the last
    /// [`read_room`](Self::read_room) lent, as [`push`](Self::push) hands over a chunk.
    /// `n` is capped at the room's size; a commit without room lent since the last
    /// input does nothing.
    pub fn commit_read(&mut self, n: usize) {
        match std::mem::take(&mut self.lent) {
            Lent::Nothing => {}
            Lent::Input(lent) => {
                let n = n.min(lent);
                if n > 0 {
                    let chunk = self.input.commit(n);
                    self.enqueue(chunk);
                }
            }
            Lent::Line(lent) => self.commit_line(n.min(lent)),
        }
    }

    /// Appends `n` bytes read into the line's room to the line.
    fn commit_line(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let old = self.line.len();
        let n = self.line.commit(n);
        let added = &self.line.as_bytes()[old..old + n];
        // The line goes on up to its line end; the rest is input like a pushed chunk,
        // which decoding reaches next (the line is finished from `Mode::Carrying`). The
        // room ends at `max_line_len`, so a line past it is found by the next input, as
        // if its bytes had been pushed.
        if let Some(end) = self.line_ends.find(added) {
            let rest = self.line.split_off(old + end);
            self.enqueue(rest);
        }
    }

    /// Whether [`finish`](Self::finish) was called.
    pub fn is_finished(&self) -> bool {
        self.closed
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The last event ID string (SSE-PARSE-14): the id in force at the most recent blank
    /// line, whether or not that blank line dispatched an event (a SEP-1699 priming event
    /// or an `id`-only block updates it too). Empty if none. It reflects all input once
    /// [`poll_item`](Self::poll_item) has returned `Ok(None)`. This is the value to send
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
        self.line.len() + self.fields.buffered_len()
    }

    /// Bytes of pushed input not yet scanned (the caller controls this by pushing only
    /// after `poll_item` returned `Ok(None)`).
    pub fn queued_len(&self) -> usize {
        self.front.bytes().len() - self.pos + self.queue.iter().map(Bytes::len).sum::<usize>()
    }

    /// Decodes until the next item or until the input runs out.
    ///
    /// `Ok(None)` means more input is needed (or, after [`finish`](Self::finish), that the
    /// stream is over). Items come in stream order (SSE-PARSE-5). The item shares the
    /// pushed chunks' memory (a reference-counted slice, no copy).
    ///
    /// # Errors
    ///
    /// [`DecodeError`] when a limit is exceeded. The decoder recovers by itself (see
    /// [`DecodeError`] for what is dropped) and the next call continues after it.
    #[inline]
    #[must_use = "an item or an error is lost if the result is dropped"]
    pub fn poll_item(&mut self) -> Result<Option<Item>, DecodeError> {
        Ok(match self.advance()? {
            Some(Step::Event) => Some(Item::Event(self.take_event())),
            Some(step) => Some(self.view(step).to_item()),
            None => None,
        })
    }

    /// Like [`poll_item`](Self::poll_item), but the item borrows from the decoder until
    /// the next call: no reference count is touched and nothing is copied. Use
    /// [`ItemRef::to_item`] to keep an item past the next call.
    ///
    /// # Errors
    ///
    /// As [`poll_item`](Self::poll_item).
    #[inline]
    #[must_use = "an item or an error is lost if the result is dropped"]
    pub fn poll_item_ref(&mut self) -> Result<Option<ItemRef<'_>>, DecodeError> {
        Ok(self.advance()?.map(|step| self.view(step)))
    }

    /// Moves the dispatched event out of the buffers (they are cleared next call anyway).
    fn take_event(&mut self) -> Event {
        let f = &mut self.fields;
        let data = match std::mem::take(&mut f.data) {
            Data::InChunk { start, end } => fields::in_chunk_bytes(&self.front, start, end),
            Data::One(data) => data,
            Data::Many => f.multi.split(),
            Data::None => unreachable!("dispatch leaves data"),
        };
        Event {
            data,
            event_type: f.event_type.take(&self.front),
            id: f.last_event_id.to_bytes(&self.front),
        }
    }

    /// The item a step produced, borrowed from the decoder's state. Inlined, so the item
    /// is built where the caller uses it rather than copied out of this function.
    #[inline(always)]
    fn view(&self, step: Step) -> ItemRef<'_> {
        let f = &self.fields;
        match step {
            Step::Event => {
                let data = match &f.data {
                    Data::InChunk { start, end } => in_chunk(&self.front, *start, *end),
                    Data::One(data) => crate::Utf8Ref::new(data),
                    Data::Many => f.multi.as_ref(),
                    Data::None => unreachable!("dispatch leaves data"),
                };
                ItemRef::Event(EventRef {
                    data,
                    event_type: f.event_type.view(&self.front),
                    id: f.last_event_id.view(&self.front),
                })
            }
            Step::CommentInChunk => {
                let (start, end) = f.comment_at;
                ItemRef::Comment(in_chunk(&self.front, start, end))
            }
            Step::Comment => ItemRef::Comment(crate::Utf8Ref::new(&f.comment)),
            Step::Retry => ItemRef::Retry(f.retry.expect("a retry step sets the retry")),
        }
    }

    /// Runs the parser until it produces a step or needs more input.
    fn advance(&mut self) -> Result<Option<Step>, DecodeError> {
        self.fields.release();
        loop {
            let Some(&first) = self.front.bytes().get(self.pos) else {
                if self.front.bytes().is_empty() {
                    if self.closed && self.mode != Mode::Ended {
                        self.end_of_stream();
                    }
                    return Ok(None);
                }
                self.next_chunk();
                continue;
            };
            if self.skip_lf {
                // SSE-PARSE-3: CR then LF is one line end, even across chunks.
                self.skip_lf = false;
                if first == b'\n' {
                    self.pos += 1;
                    continue;
                }
            }
            let step = match self.mode {
                Mode::Lines => self.scan_lines()?,
                Mode::Carrying => self.finish_carried_line()?,
                Mode::Bom { matched } => {
                    self.strip_bom(matched);
                    None
                }
                Mode::DiscardingEvent { in_line } => {
                    self.skip_discarded(in_line);
                    None
                }
                Mode::SkippingLine => {
                    self.skip_line();
                    None
                }
                // Nothing is pushed after `finish`, so no input is left once ended.
                Mode::Ended => return Ok(None),
            };
            if step.is_some() {
                return Ok(step);
            }
        }
    }

    /// Drops the front chunk, which is scanned, and makes the next one the front.
    fn next_chunk(&mut self) {
        // Keep the pending values alive past their chunk (one reference count each).
        self.fields.detach(&self.front);
        self.front = Chunk::new(self.queue.pop_front().unwrap_or_default());
        self.pos = 0;
    }
}
