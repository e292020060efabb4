//! Drives the mcpwire core with blocking IO: an MCP server on `std::net`, an MCP client
//! on `ureq`, SSE reading and writing.
//!
//! # A server
//!
//! One tool, served on `http://127.0.0.1:8080/mcp` by [`server::serve`] (threads of its
//! own, no async runtime) until the process ends. This crate re-exports what an
//! embedder needs besides: [`mcpwire`], [`http`], [`serde_json`] and the operating
//! system's random generator, [`OsEntropy`].
//!
//! ```no_run
//! use std::net::TcpListener;
//! use std::sync::Arc;
//!
//! use mcpwire_blocking::app::{Call, Tools, text_result};
//! use mcpwire_blocking::mcpwire::server::Config;
//! use mcpwire_blocking::serde_json::{Value, json};
//! use mcpwire_blocking::server::{ServeOptions, serve};
//!
//! fn main() -> std::io::Result<()> {
//!     let tools = Tools::new().with_tool(
//!         "echo",
//!         "Echoes its text.",
//!         json!({"type": "object", "properties": {"text": {"type": "string"}}}),
//!         |_: &Call, arguments: Value| {
//!             Ok(text_result(arguments["text"].as_str().unwrap_or_default()))
//!         },
//!     );
//!     let listener = TcpListener::bind("127.0.0.1:8080")?;
//!     let entropy = Box::new(mcpwire_blocking::OsEntropy);
//!     let server = serve(listener, Config::new(), entropy, Arc::new(tools), ServeOptions::new())?;
//!     println!("serving http://{}/mcp", server.local_addr());
//!     // Dropping the handle stops the server (or `server.shutdown(grace)`).
//!     loop {
//!         std::thread::park();
//!     }
//! }
//! ```
//!
//! # What is here
//!
//! This crate owns the `std::io` side and nothing else: it reads bytes, hands them to the
//! sans-IO core unchanged and returns what the core decoded. Every protocol decision is
//! made in [`mcpwire`].
//!
//! - [`SseReader`]: a `text/event-stream` body read from any [`std::io::Read`] (a file,
//!   stdin, a `TcpStream`, an HTTP client's body reader), as an iterator of
//!   [`Item`]s.
//! - [`SseWriter`]: SSE frames written to any [`std::io::Write`], flushed one by one.
//! - [`server`]: an MCP server with an HTTP/1.1 server of its own on `std::net`
//!   (heads parsed by `httparse`, idle connections held by one poller thread, a fixed
//!   pool of worker threads over one core, connections bounded and timed); [`app`]: a
//!   handler per request on threads of its own, and a typed tool table.
//! - [`client`]: an MCP client on `ureq`, a thread per HTTP exchange over one core.
//!
//! # Reading SSE
//!
//! ```
//! use mcpwire::sse::Item;
//! use mcpwire_blocking::SseReader;
//!
//! let body: &[u8] = b"id: 1\ndata: {\"jsonrpc\":\"2.0\"}\n\n: keep-alive\n\n";
//! let mut reader = SseReader::new(body);
//! let Some(Ok(Item::Event(event))) = reader.next() else { panic!() };
//! assert_eq!((event.data(), event.id()), ("{\"jsonrpc\":\"2.0\"}", "1"));
//! assert!(matches!(reader.next(), Some(Ok(Item::Comment(_)))));
//! assert!(reader.next().is_none());
//! assert_eq!(reader.last_event_id(), "1");
//! ```

pub mod app;
pub mod client;
pub mod server;
mod writer;

pub use writer::SseWriter;

/// The sans-IO core this crate drives, re-exported: its
/// [`server::Config`](mcpwire::server::Config), [`app`](mcpwire::app) types and SSE
/// [`Item`]s appear in this crate's API.
pub use mcpwire;

/// The `http` crate, re-exported: the core's and this crate's API speak its types (a
/// client's endpoint [`Uri`](http::Uri) and headers, the request head an
/// [`Authorizer`](mcpwire::server::Authorizer) is shown).
pub use http;

/// `serde_json`, re-exported: tools take their arguments and give their results as its
/// [`Value`](serde_json::Value)s ([`app::Tools`]).
pub use serde_json;

/// The operating system's random generator, re-exported from [`mcpwire`]: the entropy
/// source to give a server in production, `Box::new(mcpwire_blocking::OsEntropy)`
/// (session ids must not be guessable).
pub use mcpwire::OsEntropy;

use std::error::Error;
use std::fmt;
use std::io::{self, ErrorKind, Read};
use std::time::Duration;

use mcpwire::sse::{DecodeError, Decoder, Item, ItemRef, Limits};

/// Why [`SseReader`] could not yield an item.
#[non_exhaustive]
#[derive(Debug)]
pub enum SseError {
    /// The underlying reader failed. The [`SseReader`] is still usable: the next call
    /// reads again, which is what a caller wants after `WouldBlock` or `TimedOut` from a
    /// socket with a read timeout. Most other errors are fatal for the stream.
    Transport(io::Error),
    /// The stream exceeded a decoder limit. The decoder has already recovered: the
    /// offending event is discarded and iteration continues with the next one.
    Decode(DecodeError),
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "reading the event stream failed: {e}"),
            Self::Decode(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl Error for SseError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Transport(e) => Some(e),
            Self::Decode(e) => Some(e),
        }
    }
}

impl From<io::Error> for SseError {
    fn from(e: io::Error) -> Self {
        Self::Transport(e)
    }
}

impl From<DecodeError> for SseError {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e)
    }
}

/// A `text/event-stream` body read from a [`Read`], yielding decoded [`Item`]s.
///
/// Each call to [`next`](Iterator::next) first drains what the [`Decoder`] can already
/// decode; only when it needs more input does it make **one** `read` call, so an event
/// is yielded as soon as the read that delivered its blank line returns, however short
/// that read was. Each read goes into room the decoder lends ([`Decoder::read_room`]), so
/// the read is the one copy of the input: the decoder takes the bytes over without
/// another (single-line event data is a slice of the memory read into), and a long
/// line (a large tool result) is read straight into the buffer the decoder keeps it in.
/// That memory is zeroed once per allocation, not before each read, and reused once
/// nothing holds any of its bytes; see [`Decoder::read_room`] for what it keeps.
///
/// At end of input (`read` returns 0) the decoder is finished: an unterminated event is
/// discarded (SSE-PARSE-19) and the iterator ends. `ErrorKind::Interrupted` is retried.
/// Errors are yielded as items (see [`SseError`]); after a decode error the iteration
/// continues with the next event.
///
/// For a driver that must act when the reader is about to block (flush its output, for
/// instance), [`poll_item`](Self::poll_item) (or its borrowing twin
/// [`poll_item_ref`](Self::poll_item_ref)) and [`read_chunk`](Self::read_chunk)
/// are the two halves of `next`.
#[derive(Debug)]
pub struct SseReader<R> {
    reader: R,
    decoder: Decoder,
    read_size: usize,
}

impl<R: Read> SseReader<R> {
    /// The default size of one `read` call: 16 KiB.
    pub const DEFAULT_READ_SIZE: usize = 16 << 10;

    /// Reads an event stream from `reader` with the default [`Limits`].
    pub fn new(reader: R) -> Self {
        Self::with_limits(reader, Limits::default())
    }

    /// Reads an event stream from `reader`, decoding under `limits`.
    pub fn with_limits(reader: R, limits: Limits) -> Self {
        Self {
            reader,
            decoder: Decoder::new(limits),
            read_size: Self::DEFAULT_READ_SIZE,
        }
    }

    /// Sets the most bytes asked for in one `read` call (0 is taken as 1).
    #[must_use]
    pub fn with_read_size(mut self, bytes: usize) -> Self {
        self.read_size = bytes.max(1);
        self
    }

    /// The most bytes asked for in one `read` call.
    pub fn read_size(&self) -> usize {
        self.read_size
    }

    /// The last event ID string: the value to send as `Last-Event-ID` on reconnection
    /// (see [`Decoder::last_event_id`]).
    pub fn last_event_id(&self) -> &str {
        self.decoder.last_event_id()
    }

    /// The reconnection time set by the stream's last valid `retry` field, if any.
    pub fn retry(&self) -> Option<Duration> {
        self.decoder.retry()
    }

    /// The decoder.
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        &self.reader
    }

    /// The underlying reader, mutably (reading from it directly skips those bytes).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.reader
    }

    /// Whether the input has ended: every item has been yielded once
    /// [`poll_item`](Self::poll_item) returns `Ok(None)`.
    pub fn is_finished(&self) -> bool {
        self.decoder.is_finished()
    }

    /// Returns the underlying reader; input read but not yet decoded is dropped.
    pub fn into_inner(self) -> R {
        self.reader
    }

    /// Decodes the next item from the bytes already read, without reading.
    ///
    /// `Ok(None)` means the decoder needs more input: call [`read_chunk`](Self::read_chunk)
    /// next, unless [`is_finished`](Self::is_finished), in which case the stream is over.
    ///
    /// # Errors
    ///
    /// A limit error from the decoder, which has already recovered (see [`DecodeError`]).
    #[must_use = "an item or an error is lost if the result is dropped"]
    pub fn poll_item(&mut self) -> Result<Option<Item>, DecodeError> {
        self.decoder.poll_item()
    }

    /// Like [`poll_item`](Self::poll_item), but the item borrows from the decoder
    /// ([`Decoder::poll_item_ref`]): nothing is copied or reference-counted.
    ///
    /// # Errors
    ///
    /// As [`poll_item`](Self::poll_item).
    #[must_use = "an item or an error is lost if the result is dropped"]
    pub fn poll_item_ref(&mut self) -> Result<Option<ItemRef<'_>>, DecodeError> {
        self.decoder.poll_item_ref()
    }

    /// Makes one `read` call (retrying `Interrupted`) and hands the bytes to the decoder;
    /// at end of input (0 bytes) it finishes the decoder. Returns the number of bytes read.
    /// Does nothing and returns 0 once the input has ended.
    ///
    /// # Errors
    ///
    /// The reader's error, other than `Interrupted`. Nothing was handed to the decoder, so
    /// calling again is safe.
    pub fn read_chunk(&mut self) -> io::Result<usize> {
        let Some(room) = self.decoder.read_room(self.read_size) else {
            // Finished: the input has ended.
            return Ok(0);
        };
        // `min` guards against a `Read` impl that reports more than it was given.
        let most = room.len();
        let n = read_retrying(&mut self.reader, room)?.min(most);
        if n == 0 {
            self.decoder.finish();
        } else {
            self.decoder.commit_read(n);
        }
        Ok(n)
    }

    /// [`read_chunk`](Self::read_chunk), kept out of line: `next` inlines into its
    /// caller's loop with only the decoder's pull in it, so an item is built where the
    /// caller uses it, and a read is a call once per read.
    #[inline(never)]
    fn read_more(&mut self) -> io::Result<usize> {
        self.read_chunk()
    }
}

/// One `read` call into `buf`, retried on `Interrupted`.
fn read_retrying(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match reader.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

impl<R: Read> Iterator for SseReader<R> {
    type Item = Result<Item, SseError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.poll_item() {
                Ok(Some(item)) => return Some(Ok(item)),
                Err(e) => return Some(Err(SseError::Decode(e))),
                Ok(None) if self.is_finished() => return None,
                Ok(None) => {}
            }
            if let Err(e) = self.read_more() {
                return Some(Err(SseError::Transport(e)));
            }
        }
    }
}

impl<R: Read> std::iter::FusedIterator for SseReader<R> {}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpwire::sse::Event;
    use std::collections::VecDeque;

    /// What one `read` call of a [`Script`] does.
    enum Step {
        Bytes(&'static [u8]),
        Interrupted,
        Fail(ErrorKind),
    }

    /// A reader that plays a script: each step answers one `read` call (bytes longer than
    /// the caller's buffer are delivered over several calls). Records the reads made.
    struct Script {
        steps: VecDeque<Step>,
        reads: usize,
    }

    impl Script {
        fn new(steps: impl IntoIterator<Item = Step>) -> Self {
            Self {
                steps: steps.into_iter().collect(),
                reads: 0,
            }
        }
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads += 1;
            match self.steps.pop_front() {
                None => Ok(0),
                Some(Step::Interrupted) => Err(ErrorKind::Interrupted.into()),
                Some(Step::Fail(kind)) => Err(io::Error::new(kind, "scripted failure")),
                Some(Step::Bytes(bytes)) => {
                    let n = bytes.len().min(buf.len());
                    buf[..n].copy_from_slice(&bytes[..n]);
                    if n < bytes.len() {
                        self.steps.push_front(Step::Bytes(&bytes[n..]));
                    }
                    Ok(n)
                }
            }
        }
    }

    /// Returns one byte per `read` call.
    struct OneByte<'a>(&'a [u8]);

    impl Read for OneByte<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((&b, rest)), Some(slot)) => {
                    *slot = b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    fn events<R: Read>(reader: SseReader<R>) -> Vec<(String, String, String)> {
        reader
            .map(|item| item.expect("no error"))
            .filter_map(|item| match item {
                Item::Event(e) => Some((
                    e.event_type().to_owned(),
                    e.data().to_owned(),
                    e.id().to_owned(),
                )),
                _ => None,
            })
            .collect()
    }

    fn ev(event_type: &str, data: &str, id: &str) -> (String, String, String) {
        (event_type.into(), data.into(), id.into())
    }

    const STREAM: &[u8] = b"\xEF\xBB\xBFid: 0\r\nretry: 1500\r\ndata:\r\n\r\n: ping\n\n\
        event: message\ndata: {\"a\":1}\n\ndata: x\rdata: y\r\rid: 2\ndata: z\n\ndata: cut";

    fn expected() -> Vec<(String, String, String)> {
        vec![
            ev("message", "", "0"),
            ev("message", "{\"a\":1}", "0"),
            ev("message", "x\ny", "0"),
            ev("message", "z", "2"),
        ]
    }

    #[test]
    fn whole_input_in_one_read() {
        let reader = SseReader::new(STREAM);
        assert_eq!(events(reader), expected());
    }

    #[test]
    fn sse_parse_3_one_byte_per_read() {
        let mut reader = SseReader::new(OneByte(STREAM));
        let mut items = Vec::new();
        for item in reader.by_ref() {
            items.push(item.unwrap());
        }
        assert_eq!(items.len(), 6, "4 events, a retry and a comment: {items:?}");
        assert_eq!(reader.last_event_id(), "2");
        assert_eq!(reader.retry(), Some(Duration::from_millis(1500)));
        assert!(reader.is_finished());
        assert!(reader.next().is_none(), "fused");
        assert_eq!(events(SseReader::new(OneByte(STREAM))), expected());
    }

    #[test]
    fn small_read_size_splits_everywhere() {
        for read_size in 1..=9 {
            let reader = SseReader::new(STREAM).with_read_size(read_size);
            assert_eq!(events(reader), expected(), "read_size {read_size}");
        }
        assert_eq!(SseReader::new(STREAM).with_read_size(0).read_size(), 1);
    }

    #[test]
    fn interrupted_is_retried() {
        let script = Script::new([
            Step::Interrupted,
            Step::Bytes(b"data: a\n"),
            Step::Interrupted,
            Step::Interrupted,
            Step::Bytes(b"\n"),
        ]);
        let mut reader = SseReader::new(script);
        let Some(Ok(Item::Event(e))) = reader.next() else {
            panic!("expected an event")
        };
        assert_eq!(e.data(), "a");
        assert!(reader.next().is_none());
        assert_eq!(reader.into_inner().reads, 6);
    }

    #[test]
    fn event_yielded_after_one_read_without_filling_the_buffer() {
        // The second read would fail: the event must come out of the first one alone.
        let script = Script::new([
            Step::Bytes(b"data: first\n\n"),
            Step::Fail(ErrorKind::ConnectionReset),
        ]);
        let mut reader = SseReader::new(script);
        let Some(Ok(Item::Event(e))) = reader.next() else {
            panic!("expected an event")
        };
        assert_eq!(e.data(), "first");
        assert_eq!(reader.get_ref().reads, 1);
    }

    #[test]
    fn io_error_mid_stream_is_yielded_then_reading_resumes() {
        let script = Script::new([
            Step::Bytes(b"data: a\n\ndata: b"),
            Step::Fail(ErrorKind::TimedOut),
            Step::Bytes(b"\n\n"),
        ]);
        let mut reader = SseReader::new(script);
        assert!(matches!(reader.next(), Some(Ok(Item::Event(e))) if e.data() == "a"));
        let Some(Err(err)) = reader.next() else {
            panic!("expected the io error")
        };
        assert!(matches!(&err, SseError::Transport(e) if e.kind() == ErrorKind::TimedOut));
        assert!(err.to_string().contains("scripted failure"), "{err}");
        assert!(err.source().is_some());
        // The partial event survived the error.
        assert!(matches!(reader.next(), Some(Ok(Item::Event(e))) if e.data() == "b"));
        assert!(reader.next().is_none());
    }

    #[test]
    fn sse_parse_22_decode_error_is_yielded_and_iteration_continues() {
        let limits = Limits::default().with_max_line_len(8);
        let input: &[u8] = b"data: this line is too long\ndata: more\n\ndata: ok\n\n";
        let mut reader = SseReader::with_limits(OneByte(input), limits);
        let Some(Err(err)) = reader.next() else {
            panic!("expected the limit error")
        };
        assert!(matches!(
            err,
            SseError::Decode(DecodeError::LineTooLong { limit: 8 })
        ));
        assert!(err.to_string().contains("max_line_len"), "{err}");
        assert!(matches!(reader.next(), Some(Ok(Item::Event(e))) if e.data() == "ok"));
        assert!(reader.next().is_none());
        assert!(reader.decoder().buffered_len() <= 8);
    }

    #[test]
    fn sse_parse_19_unterminated_event_dropped_at_eof() {
        let mut reader = SseReader::new(&b"id: 9\ndata: never"[..]);
        assert!(reader.next().is_none());
        assert_eq!(reader.last_event_id(), "");
    }

    #[test]
    fn single_line_data_is_a_slice_of_the_read_buffer() {
        let mut reader = SseReader::new(&b"data: zero-copy\n\ndata: two\n\n"[..]);
        let Some(Ok(Item::Event(a))) = reader.next() else {
            panic!()
        };
        let Some(Ok(Item::Event(b))) = reader.next() else {
            panic!()
        };
        let (a, b) = (a.data().as_ptr(), b.data().as_ptr());
        // Both point into the one read buffer: "two" starts 17 bytes after "zero-copy".
        assert_eq!(b as usize - a as usize, 17);
    }

    /// `blocks` 16-byte events, `data: ` and eight letters each (`a…`, `b…`, …).
    fn sixteen_byte_events(blocks: usize) -> (Vec<u8>, Vec<String>) {
        let mut input = Vec::new();
        let mut data = Vec::new();
        for i in 0..blocks {
            let letter = char::from(b'a' + (i % 26) as u8);
            let value: String = std::iter::repeat_n(letter, 8).collect();
            input.extend_from_slice(format!("data: {value}\n\n").as_bytes());
            data.push(value);
        }
        assert_eq!(input.len(), 16 * blocks);
        (input, data)
    }

    #[test]
    fn a_buffer_still_held_by_an_item_is_never_written_to() {
        let (input, expected) = sixteen_byte_events(40);
        let reader = SseReader::new(&input[..]).with_read_size(16);
        // Every event is kept, so no read buffer can be taken back.
        let events: Vec<Event> = reader
            .map(|item| match item.unwrap() {
                Item::Event(event) => event,
                other => panic!("only events: {other:?}"),
            })
            .collect();
        let data: Vec<&str> = events.iter().map(Event::data).collect();
        assert_eq!(data, expected);
        let mut at: Vec<usize> = events.iter().map(|e| e.data().as_ptr() as usize).collect();
        at.sort_unstable();
        at.dedup();
        assert_eq!(at.len(), 40, "each event in a buffer of its own");
    }

    /// Records where each `read` call was asked to write.
    struct Ranges<'a> {
        input: &'a [u8],
        reads: Vec<std::ops::Range<usize>>,
        /// The reads into memory never written before (all zeroes).
        zeroed: Vec<usize>,
    }

    impl Read for Ranges<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let start = buf.as_ptr() as usize;
            self.reads.push(start..start + buf.len());
            if buf.iter().all(|&b| b == 0) {
                self.zeroed.push(self.reads.len() - 1);
            }
            self.input.read(buf)
        }
    }

    #[test]
    fn long_lines_are_read_into_the_decoder_and_not_copied_again() {
        // Events of 9 to 10 KB read 1460 bytes at a time: once a line is long, reads go
        // into the decoder's line buffer, so every event's data lies in memory a read
        // wrote, and its buffers are reused: after the first few events no read gets
        // fresh (zeroed) memory.
        let mut input = Vec::new();
        let mut expected = Vec::new();
        for i in 0..40usize {
            let value = char::from(b'a' + (i % 26) as u8)
                .to_string()
                .repeat(9000 + 397 * i % 1000);
            input.extend_from_slice(
                format!(
                    "data: {value}

"
                )
                .as_bytes(),
            );
            expected.push(value);
        }
        let reader = Ranges {
            input: &input,
            reads: Vec::new(),
            zeroed: Vec::new(),
        };
        let mut reader = SseReader::new(reader).with_read_size(1460);
        let mut got = Vec::new();
        let mut warm = 0;
        while let Some(item) = reader.next() {
            let Item::Event(event) = item.unwrap() else {
                panic!("only events")
            };
            // The read that delivered the blank line, or the one before it, wrote the
            // data's last byte where the event holds it.
            let last = event.data().as_ptr() as usize + event.data().len() - 1;
            let reads = &reader.get_ref().reads;
            assert!(
                reads.iter().rev().take(2).any(|read| read.contains(&last)),
                "event {} was copied out of the buffer it was read into",
                got.len()
            );
            got.push(event.data().to_owned());
            if got.len() == 4 {
                warm = reads.len();
            }
        }
        assert_eq!(got, expected);
        let spy = reader.into_inner();
        assert!(
            spy.zeroed.iter().all(|&read| read < warm),
            "reads {:?} of {} got fresh memory, after the first 4 events' {warm}",
            spy.zeroed,
            spy.reads.len()
        );
    }

    #[test]
    fn sse_parse_14_reads_reuse_memory_once_nothing_holds_it() {
        // 4 KiB reads of 16-byte events, each with an `id`: the decoder keeps the last
        // event ID as a slice of the memory it was read into, so that stays held while
        // other memory is read into; memory nothing holds any more is read into again
        // without being zeroed. Over 64 KiB, at most two 16 KiB allocations' worth of
        // reads get fresh (zeroed) memory.
        let mut input = Vec::new();
        for i in 0..4096 {
            input.extend_from_slice(format!("id:{:02}\ndata:xyz\n\n", i % 100).as_bytes());
        }
        assert_eq!(input.len(), 16 * 4096);
        let reader = Ranges {
            input: &input,
            reads: Vec::new(),
            zeroed: Vec::new(),
        };
        let mut reader = SseReader::new(reader).with_read_size(4096);
        let mut events = 0;
        while let Some(item) = reader.next() {
            let Item::Event(event) = item.unwrap() else {
                panic!("only events")
            };
            assert_eq!(event.data(), "xyz");
            assert_eq!(event.id(), format!("{:02}", events % 100));
            assert_eq!(reader.last_event_id(), event.id());
            events += 1;
        }
        assert_eq!(events, 4096);
        let spy = reader.into_inner();
        assert!(
            spy.zeroed.len() <= 2 * 4,
            "{} of {} reads got fresh memory",
            spy.zeroed.len(),
            spy.reads.len()
        );
    }
}
