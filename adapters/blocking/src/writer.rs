//! [`SseWriter`]: `text/event-stream` frames written to any [`Write`], one flush per frame.

use std::io::{self, Write};
use std::time::Duration;

use bytes::BytesMut;
use mcpwire::sse::{Comment, Encoder, EventFields};

/// Writes SSE frames to a [`Write`] (a socket, a chunked HTTP body, a file), encoded by
/// [`mcpwire::sse::Encoder`], and flushes after each one.
///
/// The flush is the point: an event a client waits for must not sit in a buffer of the
/// writer's (SSE-ENC-10). Each frame is encoded into one reused buffer and handed to the
/// writer with one `write_all`, so a buffering writer underneath sees whole frames.
///
/// # Example
///
/// ```
/// use mcpwire::sse::{EventFields, Id, Item};
/// use mcpwire_blocking::{SseReader, SseWriter};
///
/// let mut writer = SseWriter::new(Vec::new());
/// writer.event(&EventFields::new().with_id(Id::new("7")?), "{\"jsonrpc\":\"2.0\"}")?;
/// writer.heartbeat()?;
/// let bytes = writer.into_inner();
/// let mut reader = SseReader::new(&bytes[..]);
/// let Some(Ok(Item::Event(event))) = reader.next() else { panic!() };
/// assert_eq!((event.data(), event.id()), ("{\"jsonrpc\":\"2.0\"}", "7"));
/// assert!(matches!(reader.next(), Some(Ok(Item::Comment(_)))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SseWriter<W> {
    writer: W,
    encoder: Encoder,
    buf: BytesMut,
}

impl<W: Write> SseWriter<W> {
    /// A writer of SSE frames to `writer`.
    pub fn new(writer: W) -> Self {
        Self {
            writer,
            encoder: Encoder::new(),
            buf: BytesMut::new(),
        }
    }

    /// Writes one event (`fields`, then `data` as one `data` line per line) and flushes.
    ///
    /// # Errors
    ///
    /// The writer's error; part of the frame may have been written.
    pub fn event(&mut self, fields: &EventFields<'_>, data: &str) -> io::Result<()> {
        self.encoder.encode_event(fields, data, &mut self.buf);
        self.send()
    }

    /// Writes one plain `message` event with no id and flushes.
    ///
    /// # Errors
    ///
    /// As [`event`](Self::event).
    pub fn message(&mut self, data: &str) -> io::Result<()> {
        self.event(&EventFields::new(), data)
    }

    /// Writes a comment frame and flushes.
    ///
    /// # Errors
    ///
    /// As [`event`](Self::event).
    pub fn comment(&mut self, comment: Comment<'_>) -> io::Result<()> {
        self.encoder.encode_comment(comment, &mut self.buf);
        self.send()
    }

    /// Writes a heartbeat, an empty comment (`:` and a blank line) that decoders report
    /// as a comment and dispatch nothing for, and flushes: it keeps a quiet connection
    /// alive through proxies and finds out when the peer has gone (SSE-ENC-7).
    ///
    /// # Errors
    ///
    /// As [`event`](Self::event).
    pub fn heartbeat(&mut self) -> io::Result<()> {
        self.comment(Comment::new("").expect("an empty comment has no line end"))
    }

    /// Writes a frame with only a `retry` field (the client's reconnection time) and
    /// flushes.
    ///
    /// # Errors
    ///
    /// As [`event`](Self::event).
    pub fn retry(&mut self, retry: Duration) -> io::Result<()> {
        self.encoder.encode_retry(retry, &mut self.buf);
        self.send()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.writer
    }

    /// The underlying writer, mutably (bytes written to it directly go between frames).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.writer
    }

    /// Returns the underlying writer.
    pub fn into_inner(self) -> W {
        self.writer
    }

    /// Writes the encoded frame and flushes; the buffer is emptied either way.
    fn send(&mut self) -> io::Result<()> {
        let result = self.writer.write_all(&self.buf);
        self.buf.clear();
        result?;
        self.writer.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SseReader;
    use mcpwire::sse::{EventType, Id, Item};

    /// Records each write and each flush, in order.
    #[derive(Default)]
    struct Log {
        bytes: Vec<u8>,
        ops: Vec<&'static str>,
    }

    impl Write for Log {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.bytes.extend_from_slice(buf);
            self.ops.push("write");
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            self.ops.push("flush");
            Ok(())
        }
    }

    #[test]
    fn sse_enc_round_trip_through_sse_reader() {
        let mut w = SseWriter::new(Log::default());
        let fields = EventFields::new()
            .with_id(Id::new("s1:3").unwrap())
            .with_event(EventType::MESSAGE);
        w.event(&fields, "line 1\nline 2").unwrap();
        w.message("{\"jsonrpc\":\"2.0\",\"method\":\"x\"}").unwrap();
        w.heartbeat().unwrap();
        w.comment(Comment::new("hello").unwrap()).unwrap();
        w.retry(Duration::from_millis(2500)).unwrap();
        w.message("").unwrap();
        let log = w.into_inner();
        let mut reader = SseReader::new(&log.bytes[..]);
        let items: Vec<Item> = reader.by_ref().map(Result::unwrap).collect();
        assert_eq!(items.len(), 6, "{items:?}");
        let Item::Event(first) = &items[0] else {
            panic!("{items:?}")
        };
        assert_eq!((first.data(), first.id()), ("line 1\nline 2", "s1:3"));
        let Item::Event(second) = &items[1] else {
            panic!("{items:?}")
        };
        assert_eq!(second.data(), "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}");
        assert_eq!(second.id(), "s1:3", "the last event id carries over");
        assert!(matches!(&items[2], Item::Comment(_)));
        assert!(matches!(&items[3], Item::Comment(_)));
        assert!(matches!(&items[5], Item::Event(e) if e.data().is_empty()));
        assert_eq!(reader.retry(), Some(Duration::from_millis(2500)));
    }

    #[test]
    fn sse_enc_7_heartbeat_is_an_empty_comment() {
        let mut w = SseWriter::new(Vec::new());
        w.heartbeat().unwrap();
        assert_eq!(w.get_ref().as_slice(), b":\n\n");
    }

    #[test]
    fn sse_enc_10_each_frame_is_one_write_then_a_flush() {
        let mut w = SseWriter::new(Log::default());
        w.message("a").unwrap();
        w.heartbeat().unwrap();
        assert_eq!(w.get_ref().ops, ["write", "flush", "write", "flush"]);
        assert_eq!(w.get_mut().bytes, b"data: a\n\n:\n\n");
    }

    #[test]
    fn a_failed_write_is_reported_and_the_next_frame_starts_clean() {
        struct Fails(bool, Vec<u8>);
        impl Write for Fails {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if std::mem::take(&mut self.0) {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                self.1.extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut w = SseWriter::new(Fails(true, Vec::new()));
        assert_eq!(
            w.message("lost").unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
        w.message("kept").unwrap();
        assert_eq!(w.into_inner().1, b"data: kept\n\n");
    }
}
