//! A spec-literal `text/event-stream` decoder, and a driver that runs mcpwire's
//! [`Decoder`] into the same owned form.
//!
//! [`decode`] is a transcription of WHATWG HTML §9.2.5 "Parsing an event stream" and
//! §9.2.6 "Interpreting an event stream". It takes the whole stream at once, allocates
//! freely and is slow; it exists to be obviously right, so that the real decoder can be
//! compared with it (memchr's `naive.rs`, scaled up). The only additions to the spec
//! text are the choices recorded in docs/requirements.md: comments and `retry` fields are
//! reported as items (mcpwire's `Item::Comment` / `Item::Retry`), an empty `retry` value
//! is ignored and a huge one saturates (§14.10).
//!
//! [`run`] and [`run_with`] drive mcpwire's decoder over a list of chunks (by `push` or
//! `push_slice`, pulling with `poll_item` or `poll_item_ref`) and convert its output into
//! the same [`Outcome`], so unit tests, property tests and fuzz targets can compare the
//! two with `==`.

use std::fmt::Write as _;

use bytes::Bytes;
use mcpwire::sse::{DecodeError, Decoder, Limits};

/// One decoder output in owned, comparable form (mirrors `mcpwire::sse::Item`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A dispatched event.
    Event {
        /// The data buffer without its final LF.
        data: String,
        /// The event type (`message` when the event-type buffer was empty).
        event_type: String,
        /// The last event ID string at dispatch.
        id: String,
    },
    /// A comment line, without its leading colon.
    Comment(String),
    /// A valid `retry` field, in milliseconds.
    Retry(u64),
    /// A limit error from mcpwire's decoder, or from [`decode_limited`]'s model of it
    /// ([`decode`] has no limits and never produces this).
    Error(DecodeError),
}

impl Item {
    /// An event with the default type `message` and the given last event ID string.
    pub fn message(data: &str, id: &str) -> Self {
        Self::Event {
            data: data.to_owned(),
            event_type: "message".to_owned(),
            id: id.to_owned(),
        }
    }

    /// An event with an explicit type.
    pub fn event(data: &str, event_type: &str, id: &str) -> Self {
        Self::Event {
            data: data.to_owned(),
            event_type: event_type.to_owned(),
            id: id.to_owned(),
        }
    }

    /// A comment item.
    pub fn comment(text: &str) -> Self {
        Self::Comment(text.to_owned())
    }
}

/// Everything a decoder produced for one stream, plus its state at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The items in stream order.
    pub items: Vec<Item>,
    /// The last event ID string after the whole stream (and EOF) was processed.
    pub last_event_id: String,
    /// The reconnection time set by the last valid `retry` field, in milliseconds.
    pub retry: Option<u64>,
}

impl Outcome {
    /// Only the dispatched events, as `(data, event_type, id)`.
    pub fn events(&self) -> Vec<(&str, &str, &str)> {
        self.items
            .iter()
            .filter_map(|item| match item {
                Item::Event {
                    data,
                    event_type,
                    id,
                } => Some((data.as_str(), event_type.as_str(), id.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The limit errors mcpwire reported.
    pub fn errors(&self) -> Vec<DecodeError> {
        self.items
            .iter()
            .filter_map(|item| match item {
                Item::Error(e) => Some(*e),
                _ => None,
            })
            .collect()
    }
}

/// Decodes a complete stream exactly as WHATWG HTML §9.2.5/§9.2.6 say.
///
/// Deliberately naive: the whole input is decoded to a `String` first, then split into
/// lines, then each line is processed in order. No limits.
pub fn decode(input: &[u8]) -> Outcome {
    // §9.2.5: "Streams must be decoded using the UTF-8 decode algorithm." The Encoding
    // standard's "UTF-8 decode" strips ONE leading BOM (EF BB BF) and then decodes with
    // replacement: each maximal invalid subsequence becomes U+FFFD, which is also what
    // `String::from_utf8_lossy` does.
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let text = String::from_utf8_lossy(input);

    // §9.2.5: "When a stream is parsed, a data buffer, an event type buffer, and a last
    // event ID buffer must be associated with it. They must be initialized to the empty
    // string." §9.2.3 adds the source's "last event ID string" and the stream's
    // "reconnection time" (here `None` until a `retry` field sets it).
    let mut state = State::default();

    // §9.2.5: "reading everything line by line, with a CRLF character pair, a single LF
    // character not preceded by a CR character, and a single CR character not followed by
    // a LF character being the ways in which a line can end."
    let (lines, _unterminated) = split_lines(&text);

    // "Lines must be processed, in the order they are received, as follows:"
    for line in lines {
        state.process_line(line);
    }

    // "Once the end of the file is reached, any pending data must be discarded. (If the
    // file ends in the middle of an event, before the final empty line, the incomplete
    // event is not dispatched.)" The unterminated last line is not a line at all (the
    // ABNF requires `end-of-line`), so it was never processed; the buffers of the
    // incomplete event are simply dropped with `state`, and the last event ID string keeps
    // the value of the last dispatch (step 1 of dispatch never ran for this event).
    Outcome {
        items: state.items,
        last_event_id: state.last_event_id_string,
        retry: state.reconnection_time,
    }
}

/// Splits `text` at CRLF, lone LF and lone CR. Returns the terminated lines (without their
/// line ends) and the unterminated remainder (possibly empty).
///
/// A CR at the very end of the input is not followed by LF, so it ends a line.
pub fn split_lines(text: &str) -> (Vec<&str>, &str) {
    let (lines, rest) = split_byte_lines(text.as_bytes());
    // CR and LF are ASCII, so every piece is still valid UTF-8.
    let str = |b| std::str::from_utf8(b).expect("split at ASCII bytes");
    (lines.into_iter().map(str).collect(), str(rest))
}

/// [`split_lines`] on bytes.
pub fn split_byte_lines(bytes: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\r' => {
                lines.push(&bytes[start..i]);
                // CRLF is one line end; a CR not followed by LF is a line end on its own.
                i += if bytes.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            b'\n' => {
                lines.push(&bytes[start..i]);
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    (lines, &bytes[start..])
}

/// [`decode`] plus mcpwire's documented limits (SSE-PARSE-22; WHATWG sets none), as a
/// model for differential tests of the limit paths.
///
/// The rules, from `Limits` and `DecodeError`:
/// - a line (raw bytes, without its line end, after the stream's BOM) longer than
///   `max_line_len` is `LineTooLong`; so is an `id` or `event` value longer than
///   `max_line_len` once decoded (UTF-8 replacement can triple invalid bytes);
/// - event data (the `data` values joined with LF, decoded) longer than `max_event_len` is
///   `EventTooLarge`;
/// - but a too-long line that holds nothing of its event, judged by its first
///   `min(max_line_len + 1, 6)` bytes (a comment, or a field name that is none of `data`,
///   `event`, `id`, `retry` and no prefix of one), is `LineSkipped`: only that line is
///   dropped;
/// - any other error is reported once; the event's data and type are dropped and its remaining
///   lines skipped (comments and `retry` too) up to its blank line, which then runs the
///   dispatch step on the emptied buffers (so an `id` read before the error takes
///   effect); an over-long unterminated last line is reported too (the decoder cannot
///   know it will never end), unless it is a stream-start BOM prefix (`EF`, `EF BB`),
///   which the decoder holds undecided rather than as a line.
///
/// Decoding each line on its own equals decoding the whole stream first: CR, LF and `:`
/// are ASCII and never part of a malformed sequence.
pub fn decode_limited(input: &[u8], limits: Limits) -> Outcome {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let mut state = State {
        limits: Some(limits),
        ..State::default()
    };
    let (lines, unterminated) = split_byte_lines(input);
    for raw in lines {
        if state.discarding {
            if raw.is_empty() {
                state.discarding = false;
                state.dispatch();
            }
            continue;
        }
        if raw.len() > limits.max_line_len() {
            state.too_long(raw, limits.max_line_len());
            continue;
        }
        state.process_line(&String::from_utf8_lossy(raw));
    }
    // A stream that is so far only a proper prefix of a BOM (`EF` or `EF BB`) is not yet
    // known to be a line at all, so the decoder has nothing to report for it.
    let undecided_bom = input.len() < 3 && b"\xEF\xBB\xBF".starts_with(input);
    if !state.discarding && !undecided_bom && unterminated.len() > limits.max_line_len() {
        state.too_long(unterminated, limits.max_line_len());
    }
    Outcome {
        items: state.items,
        last_event_id: state.last_event_id_string,
        retry: state.reconnection_time,
    }
}

#[derive(Default)]
struct State {
    data_buffer: String,
    event_type_buffer: String,
    last_event_id_buffer: String,
    last_event_id_string: String,
    reconnection_time: Option<u64>,
    items: Vec<Item>,
    /// Only for [`decode_limited`]: the limits, and whether the current event is being
    /// skipped after a limit error.
    limits: Option<Limits>,
    discarding: bool,
}

impl State {
    fn process_line(&mut self, line: &str) {
        if line.is_empty() {
            // "If the line is empty (a blank line): Dispatch the event, as defined below."
            self.dispatch();
        } else if let Some(comment) = line.strip_prefix(':') {
            // "If the line starts with a U+003A COLON character (:): Ignore the line."
            // (mcpwire reports it as a keep-alive item; it changes no state.)
            self.items.push(Item::Comment(comment.to_owned()));
        } else if let Some(colon) = line.find(':') {
            // "If the line contains a U+003A COLON character (:): Collect the characters on
            // the line before the first U+003A COLON character (:), and let field be that
            // string. Collect the characters on the line after the first U+003A COLON
            // character (:), and let value be that string. If value starts with a U+0020
            // SPACE character, remove it from value."
            let field = &line[..colon];
            let mut value = &line[colon + 1..];
            if let Some(rest) = value.strip_prefix(' ') {
                value = rest;
            }
            self.process_field(field, value);
        } else {
            // "Otherwise, the string is not empty but does not contain a U+003A COLON
            // character (:): Process the field using the whole line as the field name, and
            // the empty string as the field value."
            self.process_field(line, "");
        }
    }

    /// "The steps to process the field given a field name and a field value depend on the
    /// field name, as given in the following list. Field names must be compared
    /// literally, with no case folding performed."
    // One arm per field name, as in the spec's list; guards would hide the "Otherwise,
    // ignore the field" of the `id` and `retry` steps.
    #[allow(clippy::collapsible_match)]
    fn process_field(&mut self, field: &str, value: &str) {
        match field {
            // "If the field name is "event": Set the event type buffer to field value."
            "event" => {
                if self.value_too_long(value) {
                    return;
                }
                self.event_type_buffer = value.to_owned();
            }
            // "If the field name is "data": Append the field value to the data buffer,
            // then append a single U+000A LINE FEED (LF) character to the data buffer."
            "data" => {
                self.data_buffer.push_str(value);
                self.data_buffer.push('\n');
                if let Some(limits) = self.limits {
                    // The joined data, without the final LF.
                    if self.data_buffer.len() - 1 > limits.max_event_len() {
                        self.fail(DecodeError::EventTooLarge {
                            limit: limits.max_event_len(),
                        });
                    }
                }
            }
            // "If the field name is "id": If the field value does not contain U+0000 NULL,
            // then set the last event ID buffer to the field value. Otherwise, ignore the
            // field."
            "id" => {
                if !value.contains('\0') {
                    if self.value_too_long(value) {
                        return;
                    }
                    self.last_event_id_buffer = value.to_owned();
                }
            }
            // "If the field name is "retry": If the field value consists of only ASCII
            // digits, then interpret the field value as an integer in base ten, and set the
            // event stream's reconnection time to that integer. Otherwise, ignore the
            // field." docs/requirements.md §14.10: an empty value (vacuously "only digits") is
            // ignored, and a value too large for u64 milliseconds saturates.
            "retry" => {
                if !value.is_empty() && value.chars().all(|c| c.is_ascii_digit()) {
                    let ms = value.chars().fold(0u64, |ms, c| {
                        ms.saturating_mul(10)
                            .saturating_add(u64::from(c as u32 - '0' as u32))
                    });
                    self.reconnection_time = Some(ms);
                    self.items.push(Item::Retry(ms));
                }
            }
            // "Otherwise: The field is ignored."
            _ => {}
        }
    }

    /// [`decode_limited`] only: an `id` or `event` value longer than `max_line_len`.
    fn value_too_long(&mut self, value: &str) -> bool {
        match self.limits {
            Some(limits) if value.len() > limits.max_line_len() => {
                self.fail(DecodeError::LineTooLong {
                    limit: limits.max_line_len(),
                });
                true
            }
            _ => false,
        }
    }

    /// [`decode_limited`] only: a line longer than `limit`: skipped alone if what the
    /// decoder has seen of it (its first `limit + 1` bytes, at most 6) shows a comment or
    /// an ignored field, else the event is discarded.
    fn too_long(&mut self, raw: &[u8], limit: usize) {
        let seen = &raw[..raw.len().min(limit.saturating_add(1)).min(6)];
        let names: [&[u8]; 4] = [b"data", b"event", b"id", b"retry"];
        let ignored = match seen.iter().position(|&b| b == b':') {
            Some(0) => true,
            Some(colon) => !names.iter().any(|name| *name == &seen[..colon]),
            None => !names.iter().any(|name| name.starts_with(seen)),
        };
        if ignored {
            self.items
                .push(Item::Error(DecodeError::LineSkipped { limit }));
        } else {
            self.fail(DecodeError::LineTooLong { limit });
        }
    }

    /// [`decode_limited`] only: reports `e` and discards the rest of the event.
    fn fail(&mut self, e: DecodeError) {
        self.items.push(Item::Error(e));
        self.data_buffer.clear();
        self.event_type_buffer.clear();
        self.discarding = true;
    }

    /// §9.2.6 "dispatch the event", the web-browser steps (the MessageEvent parts become
    /// an `Item::Event`).
    fn dispatch(&mut self) {
        // Step 1: "Set the last event ID string of the event source to the value of the
        // last event ID buffer. The buffer does not get reset, so the last event ID string
        // of the event source remains set to this value until the next time it is set by
        // the server."
        self.last_event_id_string = self.last_event_id_buffer.clone();

        // Step 2: "If the data buffer is an empty string, set the data buffer and the
        // event type buffer to the empty string and return."
        if self.data_buffer.is_empty() {
            self.data_buffer.clear();
            self.event_type_buffer.clear();
            return;
        }

        // Step 3: "If the data buffer's last character is a U+000A LINE FEED (LF)
        // character, then remove the last character from the data buffer."
        if self.data_buffer.ends_with('\n') {
            self.data_buffer.pop();
        }

        // Steps 4–5: "Initialize event's type attribute to "message", its data attribute
        // to data, […] and its lastEventId attribute to the last event ID string of the
        // event source."
        let mut event_type = "message".to_owned();
        // Step 6: "If the event type buffer has a value other than the empty string,
        // change the type of the newly created event to equal the value of the event type
        // buffer."
        if !self.event_type_buffer.is_empty() {
            event_type = self.event_type_buffer.clone();
        }
        let event = Item::Event {
            data: self.data_buffer.clone(),
            event_type,
            id: self.last_event_id_string.clone(),
        };

        // Step 7: "Set the data buffer and the event type buffer to the empty string."
        self.data_buffer.clear();
        self.event_type_buffer.clear();

        // Step 8: "Queue a task which […] dispatches the newly created event".
        self.items.push(event);
    }
}

/// How [`run`] hands chunks to mcpwire's decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feed {
    /// `Decoder::push(Bytes)` (zero-copy).
    Bytes,
    /// `Decoder::push_slice(&[u8])` (copying).
    Slice,
    /// Alternate: even-numbered chunks by `push`, odd-numbered by `push_slice`.
    Mixed,
    /// Each chunk is copied into the rooms `Decoder::read_room` lends and committed, room
    /// by room (a room may be shorter than the chunk); with `Drain::EachChunk` the
    /// decoder is drained after each commit. This is how a reader feeds the decoder.
    Room,
}

/// When [`run`] drains the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Drain {
    /// After every chunk (the normal drive loop).
    EachChunk,
    /// Only once every chunk has been queued (tests queued input).
    AtEnd,
}

/// How [`run_with`] pulls items out of mcpwire's decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pull {
    /// `Decoder::poll_item` (owned items sharing the input's memory).
    Owned,
    /// `Decoder::poll_item_ref` (items borrowed from the decoder), read through the
    /// borrowed accessors; each is also checked to equal its `ItemRef::to_item`.
    Borrowed,
}

/// Runs mcpwire's decoder over `chunks` (then `finish`) and returns its output in the
/// reference's owned form. Limit errors become [`Item::Error`]. Same as [`run_with`] with
/// [`Pull::Owned`].
///
/// Also checks API invariants on the way, panicking if they break: `buffered_len` never
/// exceeds `max_event_len + 3 * max_line_len`; `finish` changes neither `last_event_id` nor
/// `retry`; and `poll_item` keeps returning `Ok(None)` after the stream is over.
pub fn run<C: AsRef<[u8]>>(limits: Limits, chunks: &[C], feed: Feed, drain: Drain) -> Outcome {
    run_with(limits, chunks, feed, drain, Pull::Owned)
}

/// [`run`], choosing how items are pulled.
pub fn run_with<C: AsRef<[u8]>>(
    limits: Limits,
    chunks: &[C],
    feed: Feed,
    drain: Drain,
    pull: Pull,
) -> Outcome {
    let mut dec = Decoder::new(limits);
    let mut items = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let chunk = chunk.as_ref();
        let by_bytes = match feed {
            Feed::Bytes => true,
            Feed::Slice => false,
            Feed::Mixed => i % 2 == 0,
            Feed::Room => {
                let mut rest = chunk;
                while !rest.is_empty() {
                    let room = dec.read_room(rest.len()).expect("lent until finished");
                    let n = room.len().min(rest.len());
                    room[..n].copy_from_slice(&rest[..n]);
                    dec.commit_read(n);
                    rest = &rest[n..];
                    if drain == Drain::EachChunk {
                        drain_with(&mut dec, &mut items, pull);
                    }
                }
                continue;
            }
        };
        if by_bytes {
            dec.push(Bytes::copy_from_slice(chunk)).unwrap();
        } else {
            dec.push_slice(chunk).unwrap();
        }
        if drain == Drain::EachChunk {
            drain_with(&mut dec, &mut items, pull);
        }
    }
    drain_with(&mut dec, &mut items, pull);
    // Once drained, the level-triggered state reflects all input; EOF never changes it
    // (SSE-PARSE-19: no dispatch runs at EOF, and a `retry` already took effect).
    let before_eof = (dec.last_event_id().to_owned(), dec.retry());
    dec.finish();
    drain_with(&mut dec, &mut items, pull);
    assert_eq!(
        dec.poll_item(),
        Ok(None),
        "decoder yielded after end of stream"
    );
    assert!(
        matches!(dec.poll_item_ref(), Ok(None)),
        "decoder yielded after end of stream"
    );
    assert_eq!(
        (dec.last_event_id().to_owned(), dec.retry()),
        before_eof,
        "finish changed last_event_id or retry"
    );
    Outcome {
        items,
        last_event_id: dec.last_event_id().to_owned(),
        retry: dec.retry().map(duration_ms),
    }
}

/// The next event from `dec`, skipping comments and `retry` items; `Ok(None)` when the
/// decoder needs input.
///
/// # Errors
///
/// A limit error from the decoder.
pub fn next_event(dec: &mut Decoder) -> Result<Option<mcpwire::sse::Event>, DecodeError> {
    loop {
        match dec.poll_item()? {
            Some(mcpwire::sse::Item::Event(event)) => return Ok(Some(event)),
            Some(_) => {}
            None => return Ok(None),
        }
    }
}

/// Runs mcpwire's decoder with default limits over `input` pushed as one `Bytes`.
pub fn run_whole(input: &[u8]) -> Outcome {
    run(Limits::default(), &[input], Feed::Bytes, Drain::EachChunk)
}

/// Drains `dec` with `poll_item` until it returns `Ok(None)`, converting every item and
/// error.
pub fn drain_into(dec: &mut Decoder, items: &mut Vec<Item>) {
    drain_with(dec, items, Pull::Owned);
}

/// Drains `dec` until it returns `Ok(None)`, pulling as `pull` says.
pub fn drain_with(dec: &mut Decoder, items: &mut Vec<Item>, pull: Pull) {
    let limits = dec.limits();
    // `Decoder::buffered_len`'s documented bound: the data buffer within `max_event_len`,
    // the carried line, the event-type and the id buffers each within `max_line_len`.
    let bound = limits
        .max_event_len()
        .saturating_add(limits.max_line_len().saturating_mul(3));
    loop {
        let next = match pull {
            Pull::Owned => dec.poll_item().map(|item| item.map(convert)),
            Pull::Borrowed => dec.poll_item_ref().map(|item| item.map(convert_ref)),
        };
        assert!(
            dec.buffered_len() <= bound,
            "buffered_len {} exceeds max_event_len + 3 * max_line_len = {bound}",
            dec.buffered_len()
        );
        match next {
            Ok(Some(item)) => items.push(item),
            Ok(None) => return,
            Err(e) => items.push(Item::Error(e)),
        }
    }
}

/// Converts one of mcpwire's borrowed items into the owned form, through the borrowed
/// accessors, and checks that `ItemRef::to_item` gives the same.
pub fn convert_ref(item: mcpwire::sse::ItemRef<'_>) -> Item {
    let owned = match item {
        mcpwire::sse::ItemRef::Event(ev) => {
            assert_eq!(ev.data_ref().as_str(), ev.data());
            Item::Event {
                data: ev.data().to_owned(),
                event_type: ev.event_type().to_owned(),
                id: ev.id().to_owned(),
            }
        }
        mcpwire::sse::ItemRef::Comment(text) => Item::Comment(text.as_str().to_owned()),
        mcpwire::sse::ItemRef::Retry(retry) => Item::Retry(duration_ms(retry)),
    };
    assert_eq!(convert(item.to_item()), owned, "ItemRef::to_item differs");
    owned
}

/// Converts one of mcpwire's items into the owned form.
pub fn convert(item: mcpwire::sse::Item) -> Item {
    match item {
        mcpwire::sse::Item::Event(ev) => Item::Event {
            data: ev.data().to_owned(),
            event_type: ev.event_type().to_owned(),
            id: ev.id().to_owned(),
        },
        mcpwire::sse::Item::Comment(text) => Item::Comment(text.as_str().to_owned()),
        mcpwire::sse::Item::Retry(retry) => Item::Retry(duration_ms(retry)),
        // `Item` is exhaustive today; if a variant is added this stops compiling, which is
        // the point.
    }
}

fn duration_ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Splits `input` at the given offsets (sorted and clamped to `input.len()`; duplicates
/// give empty chunks) into consecutive chunks that concatenate back to `input`.
pub fn split_at<'a>(input: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = points.iter().map(|&p| p.min(input.len())).collect();
    points.sort_unstable();
    let mut chunks = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for p in points {
        chunks.push(&input[start..p]);
        start = p;
    }
    chunks.push(&input[start..]);
    chunks
}

/// Cuts `input` into chunks whose lengths are taken cyclically from `sizes` (0 gives an
/// empty chunk; an empty `sizes` gives one chunk). A fuzz target can derive `sizes` from
/// its first bytes.
pub fn split_by_sizes<'a>(input: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    if sizes.is_empty() {
        return vec![input];
    }
    let mut chunks = Vec::new();
    let mut rest = input;
    let mut i = 0;
    // Bound the number of chunks even if every size is zero.
    let mut zero_run = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].min(rest.len());
        i += 1;
        if n == 0 {
            zero_run += 1;
            if zero_run > sizes.len() {
                chunks.push(rest);
                break;
            }
        } else {
            zero_run = 0;
        }
        let (head, tail) = rest.split_at(n);
        chunks.push(head);
        rest = tail;
    }
    chunks
}

/// Event data as a decoder returns it after encoding: every CRLF, CR and LF becomes LF
/// (SSE-ENC-2 splits on all three; the decoder joins with LF).
pub fn normalise_line_ends(data: &str) -> String {
    data.replace("\r\n", "\n").replace('\r', "\n")
}

/// Renders bytes with `\r`, `\n`, `\0` and non-ASCII escaped, for assertion messages.
pub fn escape(input: &[u8]) -> String {
    let mut out = String::with_capacity(input.len());
    for &b in input {
        match b {
            b'\r' => out.push_str("\\r"),
            b'\n' => out.push_str("\\n"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02X}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_lines_handles_every_line_end() {
        assert_eq!(
            split_lines("a\r\nb\rc\nd\r\r\ne\n\rf"),
            (vec!["a", "b", "c", "d", "", "e", ""], "f")
        );
        assert_eq!(split_lines("x\r"), (vec!["x"], ""));
    }

    #[test]
    fn split_at_keeps_every_byte() {
        let chunks = split_at(b"abcdef", &[4, 1, 1, 99]);
        assert_eq!(chunks, [&b"a"[..], b"", b"bcd", b"ef", b""]);
        let chunks = split_by_sizes(b"abcdef", &[0, 2]);
        assert_eq!(chunks.concat(), b"abcdef");
    }
}
