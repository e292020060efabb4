//! Newline-delimited JSON-RPC: the framing of MCP's stdio transport, both ways.
//!
//! On stdio every message is one line of UTF-8 JSON, ended by a line feed, with no line
//! break inside (STDIO-1); a server writes nothing else on its standard output
//! (STDIO-2). [`Decoder`] reads such a stream as it arrives, in chunks cut anywhere, and
//! hands out each message as an [`Envelope`] (the line's bytes, not copied again). What
//! is not a message (a banner, a stray `console.log`, a line longer than the limit, the
//! cut-off last line of a process that died) is a [`LineError`] for that line alone:
//! every other line is still read (STDIO-6). [`encode`] and [`encode_text`] write the
//! other way: one message, one line.
//!
//! ```
//! use mcpwire::stdio::{Decoder, LineProblem};
//!
//! let mut decoder = Decoder::new();
//! decoder.push(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nStarting server...\n{\"jsonrpc\":");
//! decoder.push(b"\"2.0\",\"method\":\"notifications/initialized\"}\r\n");
//! let first = decoder.poll_item().unwrap()?;
//! assert_eq!(first.id(), Some(&mcpwire::jsonrpc::RequestId::int(1)));
//! let garbage = decoder.poll_item().unwrap().unwrap_err();
//! assert_eq!(garbage.line(), 2);
//! assert!(matches!(garbage.problem(), LineProblem::NotJsonRpc(_)));
//! let third = decoder.poll_item().unwrap()?;
//! assert_eq!(third.method(), Some("notifications/initialized"));
//! assert!(decoder.poll_item().is_none());
//! # Ok::<(), mcpwire::stdio::LineError>(())
//! ```

use std::collections::VecDeque;
use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::ProtocolVersion;
use crate::Utf8Bytes;
use crate::jsonrpc::{Classifier, EncodeError, Envelope, Envelopes, Outgoing, ParseError};

/// How much of a bad line a [`LineError`] keeps, for a log: enough to recognise it.
const EXCERPT: usize = 120;

/// The bounds of a [`Decoder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    max_line: usize,
}

impl Limits {
    /// The defaults: lines of at most 4 MiB, as much as the HTTP server takes in a body
    /// (`server::Config::with_max_body`), since a line becomes one.
    pub const fn new() -> Self {
        Self { max_line: 4 << 20 }
    }

    /// The longest line read, its line feed not counted. A longer one is a
    /// [`LineProblem::TooLong`], reported as soon as it passes the limit and skipped to
    /// its end without being held.
    #[must_use]
    pub const fn with_max_line(mut self, bytes: usize) -> Self {
        self.max_line = bytes;
        self
    }

    /// See [`with_max_line`](Self::with_max_line).
    pub const fn max_line(&self) -> usize {
        self.max_line
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}

/// What was wrong with a line that held no message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LineProblem {
    /// Not UTF-8, not JSON, or JSON but not a JSON-RPC message (STDIO-2): the
    /// classifier's error, as for an HTTP body.
    NotJsonRpc(ParseError),
    /// Longer than [`Limits::max_line`]: skipped to its line feed.
    TooLong {
        /// The limit it passed.
        limit: usize,
    },
    /// The stream ended in the middle of a line (the writer died while writing it, or
    /// never ends its lines).
    Cut {
        /// How many bytes of it came.
        bytes: usize,
    },
}

/// A line of the stream that held no message; the lines before and after it are read
/// as if it were not there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    line: u64,
    problem: LineProblem,
    excerpt: String,
}

impl LineError {
    /// The line's number in the stream, from 1 (blank lines counted).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// What was wrong with it.
    pub fn problem(&self) -> &LineProblem {
        &self.problem
    }

    /// Its first bytes (at most 120, as text with U+FFFD for bytes that are not UTF-8),
    /// to show in a log.
    pub fn excerpt(&self) -> &str {
        &self.excerpt
    }
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: ", self.line)?;
        match &self.problem {
            LineProblem::NotJsonRpc(e) => write!(f, "not a JSON-RPC message ({e})")?,
            LineProblem::TooLong { limit } => write!(f, "longer than {limit} bytes; skipped")?,
            LineProblem::Cut { bytes } => {
                write!(f, "the stream ended {bytes} bytes into the line")?;
            }
        }
        write!(f, ": {:?}", self.excerpt)
    }
}

impl std::error::Error for LineError {}

/// Where the decoder is in the current line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Gathering the line in the buffer; `searched` bytes of it hold no line feed.
    Reading { searched: usize },
    /// The line passed the limit (and was reported): its bytes are dropped until its
    /// line feed.
    Skipping,
}

/// Reads newline-delimited JSON-RPC from chunks cut anywhere (STDIO-1, STDIO-6).
///
/// Each line is a message or a [`LineError`]; blank lines (only spaces, tabs and a
/// carriage return) are skipped, and a carriage return before the line feed is not part
/// of the message. A batch line (a JSON array, which revision 2025-03-26 allowed) gives
/// its messages one by one, and a malformed element a [`LineError`] of its own. Memory
/// is bounded by [`Limits::max_line`] plus the chunk being pushed.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    mode: Mode,
    /// Lines ended so far.
    lines: u64,
    limits: Limits,
    classifier: Classifier,
    /// What the lines found so far gave, oldest first.
    out: VecDeque<Result<Envelope, LineError>>,
    ended: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder with the default [`Limits`].
    pub fn new() -> Self {
        Self::with_limits(Limits::new())
    }

    /// A decoder with `limits`.
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            buf: BytesMut::new(),
            mode: Mode::Reading { searched: 0 },
            lines: 0,
            limits,
            classifier: Classifier::default(),
            out: VecDeque::new(),
            ended: false,
        }
    }

    /// Its limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// How many lines have ended so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Bytes held of a line not ended yet.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Feeds the next chunk; then drain [`poll_item`](Self::poll_item). Bytes after
    /// [`finish`](Self::finish) are ignored.
    pub fn push(&mut self, mut chunk: &[u8]) {
        if self.ended {
            return;
        }
        while !chunk.is_empty() {
            match self.mode {
                Mode::Skipping => match memchr::memchr(b'\n', chunk) {
                    Some(at) => {
                        self.lines += 1;
                        self.mode = Mode::Reading { searched: 0 };
                        chunk = &chunk[at + 1..];
                    }
                    None => return,
                },
                Mode::Reading { searched } => {
                    // Only as much as the limit lets the line grow is taken in at a
                    // time, so a line without end never holds more than the limit.
                    let room = (self.limits.max_line + 1).saturating_sub(self.buf.len());
                    let take = chunk.len().min(room.max(1));
                    self.buf.extend_from_slice(&chunk[..take]);
                    chunk = &chunk[take..];
                    self.split_lines(searched);
                }
            }
        }
    }

    /// Takes every complete line out of the buffer, whose first `searched` bytes hold no
    /// line feed; passes to skipping when what is left is too long.
    fn split_lines(&mut self, mut searched: usize) {
        while let Some(at) = memchr::memchr(b'\n', &self.buf[searched..]) {
            let line = self.buf.split_to(searched + at + 1).freeze();
            searched = 0;
            self.lines += 1;
            self.line(line.slice(..line.len() - 1));
        }
        if self.buf.len() > self.limits.max_line {
            let excerpt = excerpt(&self.buf);
            self.buf.clear();
            self.mode = Mode::Skipping;
            self.out.push_back(Err(LineError {
                line: self.lines + 1,
                problem: LineProblem::TooLong {
                    limit: self.limits.max_line,
                },
                excerpt,
            }));
        } else {
            self.mode = Mode::Reading {
                searched: self.buf.len(),
            };
        }
    }

    /// One line, its line feed removed.
    fn line(&mut self, mut line: Bytes) {
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        if line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
            return;
        }
        let text = match crate::jsonrpc::body_text(line.clone()) {
            Ok(text) => text,
            Err(e) => return self.error(LineProblem::NotJsonRpc(e), excerpt(&line)),
        };
        self.message(text);
    }

    /// A line of UTF-8 text: a message, a batch of them, or not JSON-RPC.
    fn message(&mut self, text: Utf8Bytes) {
        let is_batch = text.as_str().trim_start().starts_with('[');
        let parsed = if is_batch {
            // The newest revision that had batches: the check is on the text, not on
            // what the peer negotiated.
            self.classifier
                .envelopes(text.clone(), ProtocolVersion::V2025_03_26)
        } else {
            self.classifier
                .envelope(text.clone())
                .map(Envelopes::Single)
        };
        match parsed {
            Ok(Envelopes::Single(envelope)) => self.out.push_back(Ok(envelope)),
            Ok(Envelopes::Batch(items)) => {
                for item in items {
                    match item {
                        Ok(envelope) => self.out.push_back(Ok(envelope)),
                        Err(e) => self.error(
                            LineProblem::NotJsonRpc(ParseError::Shape(e)),
                            excerpt(text.as_bytes()),
                        ),
                    }
                }
            }
            Err(e) => self.error(LineProblem::NotJsonRpc(e), excerpt(text.as_bytes())),
        }
    }

    fn error(&mut self, problem: LineProblem, excerpt: String) {
        self.out.push_back(Err(LineError {
            line: self.lines,
            problem,
            excerpt,
        }));
    }

    /// The next message, or the error of the next line that held none; `None` when
    /// every line pushed so far is read.
    pub fn poll_item(&mut self) -> Option<Result<Envelope, LineError>> {
        self.out.pop_front()
    }

    /// The stream ended: a line it cut short is a [`LineProblem::Cut`] (its bytes, had
    /// they been complete, are not guessed at). Drain [`poll_item`](Self::poll_item)
    /// once more.
    pub fn finish(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        if self.mode == Mode::Skipping {
            return;
        }
        let rest = self.buf.split();
        if rest.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
            return;
        }
        self.out.push_back(Err(LineError {
            line: self.lines + 1,
            problem: LineProblem::Cut { bytes: rest.len() },
            excerpt: excerpt(&rest),
        }));
    }
}

/// The first bytes of a line, as text, for a log.
fn excerpt(line: &[u8]) -> String {
    let mut end = line.len().min(EXCERPT);
    // Not in the middle of a character, when the line is UTF-8 there.
    while end < line.len() && end > 0 && (line[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    String::from_utf8_lossy(&line[..end]).into_owned()
}

/// Appends one message's JSON text as a line (STDIO-1): every carriage return and line
/// feed in it becomes a space, then a line feed ends it.
///
/// JSON holds a line break only as whitespace between tokens (inside a string it is
/// escaped), so the message read back is the same value: this is how a pretty-printed
/// HTTP body goes onto one line. `text` must be one JSON value; a text that is not
/// JSON is written all the same, on one line.
pub fn encode_text(text: &str, dst: &mut BytesMut) {
    let start = dst.len();
    dst.extend_from_slice(text.as_bytes());
    flatten(&mut dst[start..]);
    dst.extend_from_slice(b"\n");
}

/// Appends an [`Outgoing`] message as a line, as [`encode_text`] does with its text.
///
/// # Errors
/// [`EncodeError`] from a payload; `dst` is then as it was.
pub fn encode(message: &Outgoing<'_>, dst: &mut BytesMut) -> Result<(), EncodeError> {
    let start = dst.len();
    message.write(dst)?;
    flatten(&mut dst[start..]);
    dst.extend_from_slice(b"\n");
    Ok(())
}

/// Line breaks between JSON tokens become spaces.
fn flatten(text: &mut [u8]) {
    let mut from = 0;
    while let Some(at) = memchr::memchr2(b'\n', b'\r', &text[from..]) {
        text[from + at] = b' ';
        from += at + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{Kind, RequestId};

    fn drain(decoder: &mut Decoder) -> Vec<Result<Envelope, LineError>> {
        std::iter::from_fn(|| decoder.poll_item()).collect()
    }

    #[test]
    fn stdio_1_every_split_of_two_messages_reads_the_same() {
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n\n{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"k\":\"\xc3\xa9\"}}\n";
        for cut in 0..=input.len() {
            let mut decoder = Decoder::new();
            decoder.push(&input[..cut]);
            decoder.push(&input[cut..]);
            let items = drain(&mut decoder);
            assert_eq!(items.len(), 2, "cut at {cut}: {items:?}");
            let first = items[0].as_ref().unwrap();
            assert_eq!(first.kind(), Kind::Request);
            assert_eq!(first.id(), Some(&RequestId::int(1)));
            let second = items[1].as_ref().unwrap();
            assert_eq!(second.id(), Some(&RequestId::string("a")));
            assert_eq!(decoder.lines(), 3);
        }
    }

    #[test]
    fn stdio_6_garbage_loses_only_its_line() {
        let mut decoder = Decoder::new();
        decoder.push(b"Server started on stdio\n{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\xff\xfe\n{\"x\":1}\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n");
        let items = drain(&mut decoder);
        assert_eq!(items.len(), 5);
        let lines: Vec<u64> = items
            .iter()
            .filter_map(|i| i.as_ref().err().map(LineError::line))
            .collect();
        assert_eq!(lines, [1, 3, 4]);
        assert_eq!(items[1].as_ref().unwrap().method(), Some("a"));
        assert_eq!(items[4].as_ref().unwrap().method(), Some("b"));
        let banner = items[0].as_ref().unwrap_err();
        assert_eq!(banner.excerpt(), "Server started on stdio");
        assert!(
            banner
                .to_string()
                .starts_with("line 1: not a JSON-RPC message")
        );
    }

    #[test]
    fn stdio_6_a_long_line_is_reported_once_skipped_and_never_held() {
        let mut decoder = Decoder::with_limits(Limits::new().with_max_line(16));
        decoder.push(b"{\"jsonrpc\":\"2.0\",");
        assert!(decoder.buffered() <= 17);
        let items = drain(&mut decoder);
        assert_eq!(items.len(), 1);
        let error = items[0].as_ref().unwrap_err();
        assert_eq!(error.line(), 1);
        assert_eq!(error.problem(), &LineProblem::TooLong { limit: 16 });
        for _ in 0..100 {
            decoder.push(b"xxxxxxxxxxxxxxxxxxxxxxxx");
            assert_eq!(decoder.buffered(), 0);
        }
        decoder.push(b"\"x\"}\n{\"id\":1}\n");
        let items = drain(&mut decoder);
        assert_eq!(items.len(), 1, "{items:?}");
        // `{"id":1}` is JSON, not JSON-RPC: line 2.
        assert_eq!(items[0].as_ref().unwrap_err().line(), 2);
        decoder.push(b"[]\n");
        assert_eq!(drain(&mut decoder).len(), 1);
    }

    #[test]
    fn stdio_6_a_line_at_the_limit_is_read() {
        let msg = br#"{"jsonrpc":"2.0","method":"a"}"#;
        let mut decoder = Decoder::with_limits(Limits::new().with_max_line(msg.len()));
        for &b in msg.iter().chain(b"\n") {
            decoder.push(&[b]);
        }
        let items = drain(&mut decoder);
        assert!(items[0].is_ok(), "{items:?}");
    }

    #[test]
    fn stdio_6_a_cut_last_line_is_reported_at_finish() {
        let mut decoder = Decoder::new();
        decoder.push(b"{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"id\":");
        assert_eq!(drain(&mut decoder).len(), 1);
        decoder.finish();
        let items = drain(&mut decoder);
        let error = items[0].as_ref().unwrap_err();
        assert_eq!(error.line(), 2);
        assert_eq!(error.problem(), &LineProblem::Cut { bytes: 22 });
        decoder.push(b"\n");
        assert!(decoder.poll_item().is_none());
    }

    #[test]
    fn stdio_6_a_batch_line_gives_each_message() {
        let mut decoder = Decoder::new();
        decoder.push(b"[{\"jsonrpc\":\"2.0\",\"method\":\"a\"},{\"nope\":1},{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}]\n");
        let items = drain(&mut decoder);
        assert_eq!(items.len(), 3);
        assert!(items[0].is_ok() && items[1].is_err() && items[2].is_ok());
    }

    #[test]
    fn stdio_1_encoding_puts_a_pretty_message_on_one_line() {
        let mut dst = BytesMut::new();
        encode_text(
            "{\r\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"a\\nb\"\n}",
            &mut dst,
        );
        assert_eq!(memchr::memchr_iter(b'\n', &dst).count(), 1);
        assert!(!dst.contains(&b'\r'));
        let mut decoder = Decoder::new();
        decoder.push(&dst);
        let envelope = decoder.poll_item().unwrap().unwrap();
        assert_eq!(envelope.method(), Some("a\nb"));
        encode(
            &Outgoing::Cancelled {
                request: &RequestId::int(3),
                reason: Some("gone"),
            },
            &mut dst,
        )
        .unwrap();
        assert!(dst.ends_with(b"\"reason\":\"gone\"}}\n"), "{dst:?}");
    }
}
