//! The `text/event-stream` encoder (SSE-ENC-*).

use std::fmt;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use memchr::memchr3;

use super::line_end;

/// A field value was rejected: it would have changed the meaning of the frame.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// An `id`, `event` or comment contained CR or LF (which would start a new field), or
    /// an `id` contained NUL (which makes decoders ignore the field), SSE-ENC-4.
    InvalidField {
        /// Which field: `"id"`, `"event"` or `"comment"`.
        field: &'static str,
        /// The offending byte.
        byte: u8,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidField { field, byte } => write!(
                f,
                "sse {field} contains byte 0x{byte:02x}, which cannot be encoded in that field"
            ),
        }
    }
}

impl std::error::Error for EncodeError {}

/// An `id` field value: no CR, LF or NUL (SSE-ENC-4). Checked once, when constructed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Id<'a>(&'a str);

impl<'a> Id<'a> {
    /// Validates an event id.
    ///
    /// # Errors
    ///
    /// [`EncodeError::InvalidField`] if `id` contains CR, LF or NUL.
    pub fn new(id: &'a str) -> Result<Self, EncodeError> {
        let bytes = id.as_bytes();
        let bad = if bytes.len() <= 16 && !has_id_breaker_short(bytes) {
            None
        } else {
            memchr3(b'\r', b'\n', 0, bytes)
        };
        match bad {
            None => Ok(Self(id)),
            Some(i) => Err(EncodeError::InvalidField {
                field: "id",
                byte: bytes[i],
            }),
        }
    }

    /// The id.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// An `event` field value (the event type): no CR or LF (SSE-ENC-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventType<'a>(&'a str);

impl<'a> EventType<'a> {
    /// The type MCP uses for JSON-RPC messages (SSE-ENC-8); decoders also default to it.
    pub const MESSAGE: EventType<'static> = EventType("message");
    /// The legacy HTTP+SSE transport's first event, carrying the POST URI (LEGACY-2).
    pub const ENDPOINT: EventType<'static> = EventType("endpoint");

    /// Validates an event type.
    ///
    /// # Errors
    ///
    /// [`EncodeError::InvalidField`] if `event_type` contains CR or LF.
    pub fn new(event_type: &'a str) -> Result<Self, EncodeError> {
        single_line("event", event_type).map(Self)
    }

    /// The event type.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// A comment's text: no CR or LF. Comments are the keep-alive frames (SSE-ENC-7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Comment<'a>(&'a str);

impl<'a> Comment<'a> {
    /// Validates a comment.
    ///
    /// # Errors
    ///
    /// [`EncodeError::InvalidField`] if `text` contains CR or LF.
    pub fn new(text: &'a str) -> Result<Self, EncodeError> {
        single_line("comment", text).map(Self)
    }

    /// The text.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// Whether an id of at most 16 bytes holds CR, LF or NUL: two overlapping word loads and
/// a SWAR test each, with no loop and no call (ids are short and almost always clean).
#[inline]
fn has_id_breaker_short(bytes: &[u8]) -> bool {
    /// Any zero byte in `w` (exact: the classic `(w - 0x01…) & !w & 0x80…` test).
    fn has_zero(w: u64) -> bool {
        w.wrapping_sub(0x0101_0101_0101_0101) & !w & 0x8080_8080_8080_8080 != 0
    }
    fn breaker(w: u64) -> bool {
        has_zero(w) | has_zero(w ^ 0x0a0a_0a0a_0a0a_0a0a) | has_zero(w ^ 0x0d0d_0d0d_0d0d_0d0d)
    }
    fn word(bytes: &[u8]) -> u64 {
        u64::from_le_bytes(bytes.try_into().expect("8 bytes"))
    }
    fn half(bytes: &[u8]) -> u64 {
        // The upper half is spaces: none of the three bytes.
        u64::from(u32::from_le_bytes(bytes.try_into().expect("4 bytes"))) | 0x2020_2020 << 32
    }
    let n = bytes.len();
    debug_assert!(n <= 16);
    match n {
        8.. => breaker(word(&bytes[..8])) | breaker(word(&bytes[n - 8..])),
        4.. => breaker(half(&bytes[..4])) | breaker(half(&bytes[n - 4..])),
        _ => bytes.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)),
    }
}

fn single_line<'a>(field: &'static str, value: &'a str) -> Result<&'a str, EncodeError> {
    match line_end::find(value.as_bytes()) {
        None => Ok(value),
        Some(i) => Err(EncodeError::InvalidField {
            field,
            byte: value.as_bytes()[i],
        }),
    }
}

/// The fields of one event to encode besides its data: `id`, `event` and `retry`. Each
/// is a validated type, so encoding cannot fail.
///
/// The data is passed beside it ([`Encoder::encode_event`]) or written straight into the
/// frame ([`Encoder::encode_event_with`]). "Frame" in this crate always means the encoded
/// bytes of one event, comment or `retry` block, as written to the socket and retained
/// for replay; an `EventFields` is what goes into one.
///
/// The fields are public and the struct is exhaustive on purpose: WHATWG defines exactly
/// these three fields besides `data`, so it will not grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EventFields<'a> {
    /// The `id` field, if any.
    pub id: Option<Id<'a>>,
    /// The `event` field, if any (decoders read its absence as `message`).
    pub event: Option<EventType<'a>>,
    /// The `retry` field, if any.
    pub retry: Option<Duration>,
}

impl<'a> EventFields<'a> {
    /// No `id`, `event` or `retry`: a plain `message` event.
    pub const fn new() -> Self {
        Self {
            id: None,
            event: None,
            retry: None,
        }
    }

    /// Sets the `id` field.
    #[must_use]
    pub const fn with_id(mut self, id: Id<'a>) -> Self {
        self.id = Some(id);
        self
    }

    /// Sets the `event` field.
    #[must_use]
    pub const fn with_event(mut self, event: EventType<'a>) -> Self {
        self.event = Some(event);
        self
    }

    /// Sets the `retry` field.
    #[must_use]
    pub const fn with_retry(mut self, retry: Duration) -> Self {
        self.retry = Some(retry);
        self
    }
}

/// Writes SSE frames into a buffer the caller owns and reuses.
///
/// Each method appends one complete frame, ending with its blank line (SSE-ENC-6), to
/// `dst`; `dst.split().freeze()` then gives the `Bytes` that is written to the socket and
/// kept for replay without another copy. Field names are lowercase and every value is
/// preceded by `": "` (SSE-ENC-3), so a value that starts with a space survives.
///
/// When `dst` has no room for a frame, it is given at least [`Encoder::MIN_RESERVE`]
/// bytes, so a buffer reused frame after frame (encode, split, send, drop) allocates or
/// reclaims once per block of small frames rather than once per frame. Frames split from
/// one block share its allocation: a frame kept for replay keeps at most that block
/// alive, and a buffer per stream keeps one stream's frames from pinning another's.
///
/// # Example
///
/// ```
/// use bytes::BytesMut;
/// use mcpwire::sse::{Encoder, EventFields, Id};
///
/// let mut buf = BytesMut::new();
/// let fields = EventFields::new().with_id(Id::new("s1:42")?);
/// Encoder::new().encode_event(&fields, "line 1\nline 2", &mut buf);
/// assert_eq!(&buf[..], b"id: s1:42\ndata: line 1\ndata: line 2\n\n");
/// # Ok::<(), mcpwire::sse::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Encoder {
    _private: (),
}

impl Encoder {
    /// The least room a frame reserves in a buffer that has none: 2 KiB, a dozen
    /// token-sized frames (see the type's docs).
    pub const MIN_RESERVE: usize = 2048;

    /// An encoder.
    pub const fn new() -> Self {
        Self { _private: () }
    }

    /// Appends the frame of one event: `fields`, then `data` split into one `data` line
    /// per line (SSE-ENC-2), then the blank line.
    #[inline]
    pub fn encode_event(&self, fields: &EventFields<'_>, data: &str, dst: &mut BytesMut) {
        reserve(
            dst,
            fields_len(fields) + DATA_LINE_OVERHEAD + 1 + data.len(),
        );
        put_fields(dst, fields);
        let data = data.as_bytes();
        if data.len() <= SHORT_DATA && !has_line_end_short(data) {
            // The common frame, one JSON-RPC message on one line: one search, three copies.
            if data.is_empty() {
                dst.put_slice(b"data:\n\n");
            } else {
                dst.put_slice(b"data: ");
                dst.put_slice(data);
                dst.put_slice(b"\n\n");
            }
            return;
        }
        put_data(dst, data);
        dst.put_u8(b'\n');
    }

    /// Appends the frame of one event whose data `write` appends to `dst` itself: the data
    /// is written once, in place, instead of into a buffer of its own and then copied
    /// (this is how a JSON-RPC message becomes a frame, see
    /// [`jsonrpc::Outgoing::encode_frame`](crate::jsonrpc::Outgoing::encode_frame)).
    ///
    /// `write` must append valid UTF-8 (it is text, like the `&str` of
    /// [`encode_event`](Self::encode_event)). The frame is byte for byte what
    /// `encode_event` writes for the same data: data without line ends (the common case)
    /// costs one search over it; data with line ends is re-split into `data` lines, which
    /// copies it once more.
    ///
    /// # Errors
    ///
    /// What `write` returns; `dst` is then truncated back to its length before the call.
    pub fn encode_event_with<E>(
        &self,
        fields: &EventFields<'_>,
        dst: &mut BytesMut,
        write: impl FnOnce(&mut BytesMut) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = dst.len();
        reserve(dst, fields_len(fields) + DATA_LINE_OVERHEAD + 1);
        put_fields(dst, fields);
        dst.put_slice(b"data: ");
        let data_start = dst.len();
        if let Err(e) = write(dst) {
            dst.truncate(start);
            return Err(e);
        }
        let data = &dst[data_start..];
        if data.is_empty() {
            // As `encode_event`: an empty piece is `data:` without the space.
            dst.truncate(data_start - 1);
            dst.put_slice(b"\n\n");
        } else if line_end::find(data).is_none() {
            reserve(dst, 2);
            dst.put_slice(b"\n\n");
        } else {
            // Rare: the data has line ends (pretty-printed raw JSON). Re-split it.
            let data = dst.split_off(data_start - DATA_PREFIX.len());
            put_data(dst, &data[DATA_PREFIX.len()..]);
            dst.put_u8(b'\n');
        }
        Ok(())
    }

    /// Appends a comment frame (`:text` and a blank line): a heartbeat that decoders
    /// report as a comment and dispatch nothing for (SSE-ENC-7).
    pub fn encode_comment(&self, comment: Comment<'_>, dst: &mut BytesMut) {
        reserve(dst, comment.0.len() + 3);
        dst.put_u8(b':');
        dst.put_slice(comment.0.as_bytes());
        dst.put_slice(b"\n\n");
    }

    /// Appends a frame with only a `retry` field: it sets the client's reconnection time
    /// and dispatches nothing (RESUME-10: sent before the server closes a stream early).
    pub fn encode_retry(&self, retry: Duration, dst: &mut BytesMut) {
        reserve(dst, RETRY_MAX_LEN + 1);
        put_retry(dst, retry);
        dst.put_u8(b'\n');
    }

    /// Appends a SEP-1699 priming frame: an `id`, optionally a `retry`, and one empty
    /// `data` line (SSE-ENC-9, RESUME-8). Decoders dispatch it as an event with empty data;
    /// MCP clients record its id and do not parse it as JSON-RPC.
    pub fn encode_priming(&self, id: Id<'_>, retry: Option<Duration>, dst: &mut BytesMut) {
        reserve(dst, id.0.len() + RETRY_MAX_LEN + 16);
        put_field(dst, b"id: ", id.0);
        if let Some(retry) = retry {
            put_retry(dst, retry);
        }
        dst.put_slice(b"data:\n\n");
    }

    /// The exact number of bytes [`encode_event`](Self::encode_event) appends for
    /// `fields` and `data`.
    pub fn encoded_len(&self, fields: &EventFields<'_>, data: &str) -> usize {
        let mut len = fields_len(fields) + 1;
        for_each_line(data.as_bytes(), |line| {
            len += line_len(line);
        });
        len
    }
}

/// Data up to this length is searched for line ends once, as a whole, and written with
/// three copies when it has none; longer data goes through the blocked `put_data`, which
/// keeps each block in L1 between its search and its copy.
const SHORT_DATA: usize = 512;

/// Whether `data`, of at most [`SHORT_DATA`] bytes, holds CR or LF.
///
/// A first pass looks for any byte up to CR (`0x0d`) in two overlapping fixed-size
/// windows, the first and the last `2^k` bytes: loops of constant length that compile to
/// a few vector compares, with no tail loop whose exit mispredicts whenever message
/// lengths vary (a `memchr2` call over ~120 bytes cost ~8 ns here, this ~5 ns). Clean JSON
/// text has no byte that low, so the exact search behind it runs only on a hit (a tab, a
/// control byte or a real line end).
#[inline]
fn has_line_end_short(data: &[u8]) -> bool {
    /// Whether any byte of `window` is at most CR.
    #[inline(always)]
    fn low<const N: usize>(window: &[u8; N]) -> bool {
        let mut hit = false;
        for &b in window {
            hit |= b <= b'\r';
        }
        hit
    }
    /// [`low`] over the first and the last `N` bytes of `data` (`N <= data.len()`).
    #[inline(always)]
    fn ends<const N: usize>(data: &[u8]) -> bool {
        let head = data.first_chunk::<N>().expect("N <= len");
        let tail = data.last_chunk::<N>().expect("N <= len");
        low(head) | low(tail)
    }
    let maybe = match data.len() {
        0..16 => data.iter().any(|&b| b <= b'\r'),
        16..32 => ends::<16>(data),
        32..64 => ends::<32>(data),
        64..128 => ends::<64>(data),
        128..256 => ends::<128>(data),
        256..=SHORT_DATA => ends::<256>(data),
        _ => true,
    };
    maybe && line_end::find(data).is_some()
}

/// Makes room for `needed` more bytes; a buffer without room gets at least a block.
#[inline]
fn reserve(dst: &mut BytesMut, needed: usize) {
    if dst.capacity() - dst.len() < needed {
        dst.reserve(needed.max(Encoder::MIN_RESERVE));
    }
}

/// `"data: "` plus LF.
const DATA_LINE_OVERHEAD: usize = 7;
/// `"retry: "`, 20 digits, LF.
const RETRY_MAX_LEN: usize = 28;

/// `"data: "`, the start of a non-empty data line.
const DATA_PREFIX: &[u8] = b"data: ";

/// Bytes of the `event`, `id` and `retry` lines of `fields`.
fn fields_len(fields: &EventFields<'_>) -> usize {
    let mut len = 0;
    if let Some(event) = fields.event {
        len += 8 + event.0.len();
    }
    if let Some(id) = fields.id {
        len += 5 + id.0.len();
    }
    if let Some(retry) = fields.retry {
        len += 8 + decimal_len(retry_ms(retry));
    }
    len
}

/// Writes the `event`, `id` and `retry` lines of `fields` (room is reserved).
#[inline]
fn put_fields(dst: &mut BytesMut, fields: &EventFields<'_>) {
    if let Some(event) = fields.event {
        put_field(dst, b"event: ", event.0);
    }
    if let Some(id) = fields.id {
        put_field(dst, b"id: ", id.0);
    }
    if let Some(retry) = fields.retry {
        put_retry(dst, retry);
    }
}

#[inline]
fn put_field(dst: &mut BytesMut, name: &[u8], value: &str) {
    dst.put_slice(name);
    dst.put_slice(value.as_bytes());
    dst.put_u8(b'\n');
}

/// SSE-ENC-5: milliseconds in ASCII digits.
fn put_retry(dst: &mut BytesMut, retry: Duration) {
    dst.put_slice(b"retry: ");
    dst.put_slice(itoa::Buffer::new().format(retry_ms(retry)).as_bytes());
    dst.put_u8(b'\n');
}

fn retry_ms(retry: Duration) -> u64 {
    u64::try_from(retry.as_millis()).unwrap_or(u64::MAX)
}

fn decimal_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

/// The encoded length of one data line: `data:` + (` ` + piece, if non-empty) + LF.
#[inline]
fn line_len(piece: &[u8]) -> usize {
    if piece.is_empty() {
        6
    } else {
        DATA_LINE_OVERHEAD + piece.len()
    }
}

/// SSE-ENC-2: one `data` line per piece of `data` split on CR, LF and CRLF.
///
/// The search for line ends runs one block ahead of the copy, so each block is read from
/// memory once and copied while it is still in L1: the cost stays near a plain memcpy.
#[inline]
fn put_data(dst: &mut BytesMut, data: &[u8]) {
    const BLOCK: usize = 4096;
    let mut rest = data;
    // Whether `data: ` has been written for the current piece.
    let mut open = false;
    loop {
        let window = &rest[..rest.len().min(BLOCK)];
        match line_end::find(window) {
            Some(i) => {
                put_piece_part(dst, &rest[..i], &mut open);
                close_piece(dst, &mut open);
                // A CR at the very end of the data is a line end like any other.
                rest = &rest[line_end::step_over(rest, i).0..];
            }
            None if window.len() == rest.len() => {
                put_piece_part(dst, rest, &mut open);
                close_piece(dst, &mut open);
                return;
            }
            None => {
                put_piece_part(dst, window, &mut open);
                rest = &rest[BLOCK..];
            }
        }
    }
}

#[inline]
fn put_piece_part(dst: &mut BytesMut, part: &[u8], open: &mut bool) {
    if !part.is_empty() {
        if !*open {
            dst.put_slice(DATA_PREFIX);
            *open = true;
        }
        dst.put_slice(part);
    }
}

/// Ends a data line; an empty piece is written as `data:` with no trailing space.
#[inline]
fn close_piece(dst: &mut BytesMut, open: &mut bool) {
    if *open {
        dst.put_u8(b'\n');
        *open = false;
    } else {
        dst.put_slice(b"data:\n");
    }
}

/// Calls `f` with each piece of `data` between line ends (CR, LF, CRLF); always at least
/// one piece, and a trailing line end yields a trailing empty piece.
#[inline]
fn for_each_line(data: &[u8], mut f: impl FnMut(&[u8])) {
    let mut rest = data;
    while let Some(i) = line_end::find(rest) {
        f(&rest[..i]);
        rest = &rest[line_end::step_over(rest, i).0..];
    }
    f(rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use memchr::memchr2;

    /// Encodes through both entries and checks that they and `encoded_len` agree.
    fn event_with(fields: &EventFields<'_>, data: &str) -> BytesMut {
        let enc = Encoder::new();
        let mut buf = BytesMut::new();
        enc.encode_event(fields, data, &mut buf);
        assert_eq!(buf.len(), enc.encoded_len(fields, data));
        let mut with = BytesMut::from(&b"kept"[..]);
        enc.encode_event_with(fields, &mut with, |dst| {
            dst.extend_from_slice(data.as_bytes());
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(&with[..4], b"kept");
        assert_eq!(&with[4..], &buf[..], "encode_event_with for {data:?}");
        buf
    }

    fn event(data: &str) -> BytesMut {
        event_with(&EventFields::new(), data)
    }

    #[test]
    fn encode_event_with_rolls_back_on_error() {
        let mut buf = BytesMut::from(&b"kept"[..]);
        let fields = EventFields::new().with_id(Id::new("1").unwrap());
        let result = Encoder::new().encode_event_with(&fields, &mut buf, |dst| {
            dst.extend_from_slice(b"half a message");
            Err("serialize failed")
        });
        assert_eq!(result, Err("serialize failed"));
        assert_eq!(&buf[..], b"kept");
    }

    #[test]
    fn sse_enc_2_data_split_on_every_line_end() {
        let buf = event("a\r\nb\rc\nd\n");
        assert_eq!(&buf[..], b"data: a\ndata: b\ndata: c\ndata: d\ndata:\n\n");
    }

    #[test]
    fn sse_enc_2_long_data_split_across_search_blocks() {
        // Line ends just before, at and after the 4096-byte search block boundary, and a
        // CRLF split by it.
        for at in [4094, 4095, 4096, 4097, 8191] {
            let mut data = "x".repeat(10_000);
            data.replace_range(at..at + 2, "\r\n");
            let buf = event(&data);
            let expected = format!("data: {}\ndata: {}\n\n", &data[..at], &data[at + 2..]);
            assert_eq!(std::str::from_utf8(&buf).unwrap(), expected, "CRLF at {at}");
        }
        let data = "y".repeat(9000) + "\n";
        let buf = event(&data);
        assert_eq!(
            &buf[..],
            format!("data: {}\ndata:\n\n", &data[..9000]).as_bytes()
        );
    }

    #[test]
    fn sse_enc_2_short_line_end_check_agrees_with_memchr2() {
        // Every length of the short path and one past it, a CR, an LF or a near miss
        // (tab, NUL, 0x0e, a UTF-8 continuation byte) at every position: the windows must
        // cover every byte, and a prefilter hit must not become a line end.
        let bytes = [b'\n', b'\r', b'\t', 0, 0x0e, 0x8a];
        for len in 0..=SHORT_DATA + 1 {
            let clean = vec![b'a'; len];
            assert!(!has_line_end_short(&clean), "clean, {len} bytes");
            for pos in 0..len {
                for &byte in &bytes {
                    let mut data = clean.clone();
                    data[pos] = byte;
                    let exact = memchr2(b'\n', b'\r', &data).is_some();
                    assert_eq!(
                        has_line_end_short(&data),
                        exact,
                        "{byte:#x} at {pos} of {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn sse_enc_3_value_starting_with_space_keeps_it() {
        let buf = event(" x");
        assert_eq!(&buf[..], b"data:  x\n\n");
    }

    #[test]
    fn sse_enc_4_short_id_check_agrees_with_a_byte_scan() {
        // Every length the word test handles, every position, the three breakers and
        // their neighbours (a SWAR borrow must not turn them into false hits).
        let bytes = [
            0, b'\n', b'\r', 1, 9, 0x0b, 0x0c, 0x0e, b' ', 0x7f, 0x80, 0x8a, 0x8d, 0xff,
        ];
        for len in 0..=16 {
            for pos in 0..len {
                for &fill in &[b'a', 0xff, 0x01] {
                    for &byte in &bytes {
                        let mut id = vec![fill; len];
                        id[pos] = byte;
                        let naive = id.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0));
                        assert_eq!(has_id_breaker_short(&id), naive, "{id:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn sse_enc_4_id_and_event_reject_injection() {
        assert_eq!(
            Id::new("1\ndata: evil"),
            Err(EncodeError::InvalidField {
                field: "id",
                byte: b'\n'
            })
        );
        assert!(Id::new("a\0b").is_err());
        assert!(Id::new("a\rb").is_err());
        assert!(EventType::new("x\ry").is_err());
        assert!(
            EventType::new("a\0b").is_ok(),
            "NUL is legal in an event type"
        );
        assert!(Comment::new("ping\n").is_err());
    }

    #[test]
    fn sse_enc_5_retry_is_ascii_digits_in_ms() {
        let mut buf = BytesMut::new();
        let enc = Encoder::new();
        enc.encode_retry(Duration::from_millis(1500), &mut buf);
        enc.encode_retry(Duration::from_micros(999), &mut buf);
        enc.encode_retry(Duration::MAX, &mut buf);
        assert_eq!(
            &buf[..],
            &b"retry: 1500\n\nretry: 0\n\nretry: 18446744073709551615\n\n"[..]
        );
    }

    #[test]
    fn sse_enc_6_all_fields_and_blank_line() {
        let fields = EventFields::new()
            .with_id(Id::new("s:1").unwrap())
            .with_event(EventType::MESSAGE)
            .with_retry(Duration::from_secs(2));
        assert_eq!(
            &event_with(&fields, "{}")[..],
            b"event: message\nid: s:1\nretry: 2000\ndata: {}\n\n"
        );
    }

    #[test]
    fn sse_enc_7_comment_frame() {
        let mut buf = BytesMut::new();
        Encoder::new().encode_comment(Comment::new("keep-alive").unwrap(), &mut buf);
        assert_eq!(&buf[..], b":keep-alive\n\n");
    }

    #[test]
    fn sse_enc_9_priming_frame() {
        let mut buf = BytesMut::new();
        let id = Id::new("0:s:0").unwrap();
        Encoder::new().encode_priming(id, Some(Duration::from_millis(500)), &mut buf);
        assert_eq!(&buf[..], b"id: 0:s:0\nretry: 500\ndata:\n\n");
    }
}
