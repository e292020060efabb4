//! Drives the mcpwire core with tokio IO: an MCP server as a tower service, an MCP
//! client, SSE streams.
//!
//! # A server in an axum app
//!
//! One tool, served on `/mcp` beside an ordinary route. [`app::mount`] makes the
//! [`McpService`](server::McpService), a tower service that axum mounts with
//! `nest_service` or `route_service` alike: the core answers the endpoint's path
//! (`/mcp` by default) whole and as the `/` a nesting router hands on
//! ([`Config::with_endpoint`](mcpwire::server::Config::with_endpoint)). This crate
//! re-exports what an embedder needs besides axum and tokio: [`mcpwire`], [`http`],
//! [`serde_json`] and the operating system's random generator, [`OsEntropy`].
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use mcpwire_tokio::app::{self, Call, Tools, text_result};
//! use mcpwire_tokio::mcpwire::server::Config;
//! use mcpwire_tokio::serde_json::{Value, json};
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let tools = Tools::new().with_tool(
//!         "echo",
//!         "Echoes its text.",
//!         json!({"type": "object", "properties": {"text": {"type": "string"}}}),
//!         |_: Call, arguments: Value| async move {
//!             Ok(text_result(arguments["text"].as_str().unwrap_or_default()))
//!         },
//!     );
//!     // Must be called within the runtime: the service's timer runs on it.
//!     let mcp = app::mount(Config::new(), Box::new(mcpwire_tokio::OsEntropy), Arc::new(tools));
//!     let router = axum::Router::new()
//!         .route("/health", axum::routing::get(|| async { "ok" }))
//!         .nest_service("/mcp", mcp);
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//!     axum::serve(listener, router).await
//! }
//! ```
//!
//! Without axum, [`server::serve`] accepts on a `TcpListener` itself, with bounded,
//! timed connections.
//!
//! # What is here
//!
//! This crate owns the async IO side and nothing else: it polls a byte source, hands the
//! bytes to the sans-IO core unchanged and returns what the core decoded. Every protocol
//! decision is made in [`mcpwire`].
//!
//! - [`server::McpService`]: the server core ([`mcpwire::server::Server`]) as a tower and
//!   hyper service; [`server::serve`] accepts on a `TcpListener`. Its events reach the
//!   application on a channel ([`server::McpService::new`]) or in place, on the task
//!   whose input caused them ([`server::McpService::with_dispatch`]), over one core or
//!   several that split the sessions between them ([`server::McpService::sharded`]).
//! - [`client::McpClient`]: the client core over hyper-util's HTTP/1.1 keep-alive pool:
//!   `connect`, `call`, `notify`, and the server's own messages on a channel.
//! - [`app`]: a small application layer on the server: a handler per request that can send
//!   progress and notifications on its stream and sees cancellation, and a typed tool
//!   table ([`app::Tools`]); [`app::mount`] (or [`app::mount_sharded`]) serves it in
//!   place, [`app::run`] from the channel.
//! - SSE readers, below.
//!
//! # SSE streams
//!
//! Three ways in, one decoder ([`mcpwire::sse::Decoder`]) behind each, all of them
//! [`Stream`]s of `Result<Item, SseError<E>>`:
//!
//! | source | type | `E` |
//! |---|---|---|
//! | any `Stream<Item = Result<Bytes, E>>` (reqwest's `bytes_stream`, a channel, …) | [`SseStream`] | the stream's error |
//! | an [`http_body::Body`] with `Data = Bytes` (hyper 1's `Incoming`) | [`SseBodyStream`] | the body's error |
//! | a [`tokio::io::AsyncRead`] (a `TcpStream`, a child's stdout, …) | [`SseReader`] | [`std::io::Error`] |
//!
//! Each yields an item as soon as the chunk holding its blank line has arrived; chunks
//! are handed to the decoder as `Bytes` without a copy. At end of input the decoder is
//! finished (an unterminated event is discarded, SSE-PARSE-19) and the stream ends.
//!
//! ```
//! use bytes::Bytes;
//! use futures_util::StreamExt;
//! use mcpwire::sse::Item;
//! use mcpwire_tokio::SseStream;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let chunks = [Ok::<_, std::io::Error>(Bytes::from("id: 1\ndata: hel")), Ok(Bytes::from("lo\n\n"))];
//! let mut events = SseStream::new(futures_util::stream::iter(chunks));
//! let Some(Ok(Item::Event(event))) = events.next().await else { panic!() };
//! assert_eq!((event.data(), event.id()), ("hello", "1"));
//! assert!(events.next().await.is_none());
//! # });
//! ```

pub mod app;
pub mod bridge;
pub mod client;
pub mod server;

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
/// source to give a server in production, `Box::new(mcpwire_tokio::OsEntropy)` (session
/// ids must not be guessable).
pub use mcpwire::OsEntropy;

use std::error::Error;
use std::fmt;
use std::io::{self, ErrorKind};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures_core::{FusedStream, Stream};
use mcpwire::sse::{DecodeError, Decoder, Item, Limits};
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, ReadBuf};

/// Why an SSE stream of this crate could not yield an item.
#[non_exhaustive]
#[derive(Debug)]
pub enum SseError<E> {
    /// The byte source failed. Polling again polls the source again; whether it has more
    /// to give is up to the source (most end after an error).
    Transport(E),
    /// The stream exceeded a decoder limit. The decoder has already recovered: the
    /// offending event is discarded and the stream continues with the next one.
    Decode(DecodeError),
}

impl<E: fmt::Display> fmt::Display for SseError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "reading the event stream failed: {e}"),
            Self::Decode(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: Error + 'static> Error for SseError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Transport(e) => Some(e),
            Self::Decode(e) => Some(e),
        }
    }
}

impl<E> From<DecodeError> for SseError<E> {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e)
    }
}

/// Drains `decoder`; when it needs input, `fill` polls the source once and pushes what
/// it got (or finishes the decoder at end of input). The whole drive loop of every type
/// in this crate.
fn drive<E>(
    decoder: &mut Decoder,
    mut fill: impl FnMut(&mut Decoder) -> Poll<Result<(), E>>,
) -> Poll<Option<Result<Item, SseError<E>>>> {
    loop {
        match decoder.poll_item() {
            Ok(Some(item)) => return Poll::Ready(Some(Ok(item))),
            Err(e) => return Poll::Ready(Some(Err(SseError::Decode(e)))),
            Ok(None) if decoder.is_finished() => return Poll::Ready(None),
            Ok(None) => {}
        }
        if let Err(e) = ready!(fill(decoder)) {
            return Poll::Ready(Some(Err(SseError::Transport(e))));
        }
    }
}

/// Hands a chunk to the decoder: `drive` asks for input only before the decoder is
/// finished, so the push cannot be refused.
fn push(decoder: &mut Decoder, chunk: Bytes) {
    decoder
        .push(chunk)
        .expect("drive fills the decoder only before it is finished");
}

pin_project! {
    /// A `text/event-stream` decoded from a [`Stream`] of `Bytes` chunks.
    ///
    /// Yields each [`Item`] as soon as the chunk that completes it has arrived. A chunk
    /// is handed to the decoder as it is (no copy), so single-line event data is a slice
    /// of the chunk. When the source ends, the stream yields what is left and ends too.
    #[derive(Debug)]
    #[must_use = "streams do nothing unless polled"]
    pub struct SseStream<S> {
        #[pin]
        source: S,
        decoder: Decoder,
    }
}

impl<S> SseStream<S> {
    /// Decodes `source` with the default [`Limits`].
    pub fn new(source: S) -> Self {
        Self::with_limits(source, Limits::default())
    }

    /// Decodes `source` under `limits`.
    pub fn with_limits(source: S, limits: Limits) -> Self {
        Self {
            source,
            decoder: Decoder::new(limits),
        }
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

    /// The byte source.
    pub fn get_ref(&self) -> &S {
        &self.source
    }

    /// The underlying source, mutably (what is taken from it directly is not decoded).
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.source
    }

    /// Returns the byte source; chunks received but not yet decoded are dropped.
    pub fn into_inner(self) -> S {
        self.source
    }
}

impl<S, E> Stream for SseStream<S>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    type Item = Result<Item, SseError<E>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let mut source = this.source;
        drive(this.decoder, |decoder| {
            match ready!(source.as_mut().poll_next(cx)) {
                Some(Ok(chunk)) => push(decoder, chunk),
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => decoder.finish(),
            }
            Poll::Ready(Ok(()))
        })
    }
}

impl<S, E> FusedStream for SseStream<S>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    fn is_terminated(&self) -> bool {
        is_drained(&self.decoder)
    }
}

/// The decoder was finished and everything queued in it has been decoded.
fn is_drained(decoder: &Decoder) -> bool {
    decoder.is_finished() && decoder.queued_len() == 0
}

pin_project! {
    /// A `text/event-stream` decoded from an HTTP body, such as hyper 1's
    /// `body::Incoming`.
    ///
    /// The body's data is handed to the decoder without a copy; trailers are skipped.
    /// (The body's `http_body::Frame`s are an HTTP-layer unit, not SSE frames.)
    /// When the body ends, the stream yields what is left and ends too.
    #[derive(Debug)]
    #[must_use = "streams do nothing unless polled"]
    pub struct SseBodyStream<B> {
        #[pin]
        body: B,
        decoder: Decoder,
    }
}

impl<B> SseBodyStream<B> {
    /// Decodes `body` with the default [`Limits`].
    pub fn new(body: B) -> Self {
        Self::with_limits(body, Limits::default())
    }

    /// Decodes `body` under `limits`.
    pub fn with_limits(body: B, limits: Limits) -> Self {
        Self {
            body,
            decoder: Decoder::new(limits),
        }
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

    /// The body.
    pub fn get_ref(&self) -> &B {
        &self.body
    }

    /// The underlying source, mutably (what is taken from it directly is not decoded).
    pub fn get_mut(&mut self) -> &mut B {
        &mut self.body
    }

    /// Returns the body; data received but not yet decoded is dropped.
    pub fn into_inner(self) -> B {
        self.body
    }
}

impl<B> Stream for SseBodyStream<B>
where
    B: http_body::Body<Data = Bytes>,
{
    type Item = Result<Item, SseError<B::Error>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let mut body = this.body;
        drive(this.decoder, |decoder| {
            match ready!(body.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => {
                    // Trailers (`Err(frame)`) carry no stream bytes.
                    if let Ok(data) = frame.into_data() {
                        push(decoder, data);
                    }
                }
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => decoder.finish(),
            }
            Poll::Ready(Ok(()))
        })
    }
}

impl<B> FusedStream for SseBodyStream<B>
where
    B: http_body::Body<Data = Bytes>,
{
    fn is_terminated(&self) -> bool {
        is_drained(&self.decoder)
    }
}

pin_project! {
    /// A `text/event-stream` decoded from a [`tokio::io::AsyncRead`].
    ///
    /// Bytes are read straight into room the decoder lends ([`Decoder::read_room`]; at
    /// most [`read_size`](Self::read_size) per read) and handed over without another
    /// copy, a long line's straight into the buffer the decoder keeps it in. Each item is
    /// yielded as soon as the read that completed it returns. `ErrorKind::Interrupted` is retried; a read of 0 bytes is the
    /// end of the stream.
    #[derive(Debug)]
    #[must_use = "streams do nothing unless polled"]
    pub struct SseReader<R> {
        #[pin]
        reader: R,
        decoder: Decoder,
        read_size: usize,
    }
}

impl<R> SseReader<R> {
    /// The default size of one read: 16 KiB.
    pub const DEFAULT_READ_SIZE: usize = 16 << 10;

    /// Decodes what `reader` reads with the default [`Limits`].
    pub fn new(reader: R) -> Self {
        Self::with_limits(reader, Limits::default())
    }

    /// Decodes what `reader` reads under `limits`.
    pub fn with_limits(reader: R, limits: Limits) -> Self {
        Self {
            reader,
            decoder: Decoder::new(limits),
            read_size: Self::DEFAULT_READ_SIZE,
        }
    }

    /// Sets the most bytes asked for in one read (0 is taken as 1).
    pub fn with_read_size(mut self, bytes: usize) -> Self {
        self.read_size = bytes.max(1);
        self
    }

    /// The most bytes asked for in one read.
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

    /// The reader.
    pub fn get_ref(&self) -> &R {
        &self.reader
    }

    /// The underlying source, mutably (what is taken from it directly is not decoded).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.reader
    }

    /// Returns the reader; bytes read but not yet decoded are dropped.
    pub fn into_inner(self) -> R {
        self.reader
    }
}

impl<R: AsyncRead> Stream for SseReader<R> {
    type Item = Result<Item, SseError<io::Error>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let mut reader = this.reader;
        let read_size = *this.read_size;
        drive(this.decoder, |decoder| {
            let room = decoder
                .read_room(read_size)
                .expect("drive fills the decoder only before it is finished");
            let mut window = ReadBuf::new(room);
            loop {
                match ready!(reader.as_mut().poll_read(cx, &mut window)) {
                    Ok(()) => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            match window.filled().len() {
                0 => decoder.finish(),
                n => decoder.commit_read(n),
            }
            Poll::Ready(Ok(()))
        })
    }
}

impl<R: AsyncRead> FusedStream for SseReader<R> {
    fn is_terminated(&self) -> bool {
        is_drained(&self.decoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::{StreamExt, stream};
    use http_body_util::{BodyExt, StreamBody};
    use std::collections::VecDeque;
    use tokio::io::{AsyncWriteExt, ReadBuf};

    /// A stream that exercises BOM, CR/LF/CRLF, comments, retry, ids, priming, multi-line
    /// data and an unterminated event at the end.
    const STREAM: &[u8] = b"\xEF\xBB\xBFid: 0\r\nretry: 1500\r\ndata:\r\n\r\n: ping\n\n\
        event: endpoint\ndata: /messages?sessionId=1\n\ndata: x\rdata: y\r\rid: 2\ndata: z\n\ndata: cut";

    /// Items as comparable text.
    fn show(item: &Item) -> String {
        match item {
            Item::Event(e) => format!("event {} {:?} id={}", e.event_type(), e.data(), e.id()),
            Item::Comment(c) => format!("comment {c:?}"),
            Item::Retry(r) => format!("retry {}", r.as_millis()),
        }
    }

    fn expected() -> Vec<String> {
        [
            "retry 1500",
            "event message \"\" id=0",
            "comment \" ping\"",
            "event endpoint \"/messages?sessionId=1\" id=0",
            "event message \"x\\ny\" id=0",
            "event message \"z\" id=2",
        ]
        .map(String::from)
        .to_vec()
    }

    async fn collect<St, E>(stream: St) -> Vec<String>
    where
        St: Stream<Item = Result<Item, SseError<E>>>,
        E: fmt::Debug,
    {
        let mut stream = std::pin::pin!(stream);
        let mut out = Vec::new();
        while let Some(item) = stream.next().await {
            out.push(show(&item.expect("no error")));
        }
        out
    }

    fn chunks(splits: &[usize]) -> Vec<Result<Bytes, io::Error>> {
        let mut out = Vec::new();
        let mut start = 0;
        for &end in splits.iter().chain([&STREAM.len()]) {
            out.push(Ok(Bytes::copy_from_slice(&STREAM[start..end])));
            start = end;
        }
        out
    }

    #[tokio::test(flavor = "current_thread")]
    async fn sse_parse_3_stream_every_two_and_three_way_split() {
        assert_eq!(
            collect(SseStream::new(stream::iter(chunks(&[])))).await,
            expected()
        );
        for a in 0..=STREAM.len() {
            let got = collect(SseStream::new(stream::iter(chunks(&[a])))).await;
            assert_eq!(got, expected(), "split at {a}");
        }
        for a in (0..=STREAM.len()).step_by(3) {
            for b in a..=STREAM.len() {
                let got = collect(SseStream::new(stream::iter(chunks(&[a, b])))).await;
                assert_eq!(got, expected(), "split at {a}, {b}");
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn stream_yields_an_event_before_the_source_ends() {
        let source = stream::iter(chunks(&[32])).take(1).chain(stream::pending());
        let mut events = SseStream::new(source);
        let first = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .expect("the retry arrives without waiting for more input");
        assert_eq!(show(&first.unwrap().unwrap()), "retry 1500");
        let second = tokio::time::timeout(Duration::from_secs(5), events.next()).await;
        assert_eq!(show(&second.unwrap().unwrap().unwrap()), expected()[1]);
        // Nothing else is complete: the stream waits.
        let third = tokio::time::timeout(Duration::from_millis(20), events.next()).await;
        assert!(third.is_err(), "pending, not ended");
        assert!(!events.is_terminated());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn stream_transport_error_mid_stream_then_continues() {
        let source = stream::iter([
            Ok(Bytes::from_static(b"data: a\n\ndata: b")),
            Err(io::Error::new(ErrorKind::ConnectionReset, "reset")),
            Ok(Bytes::from_static(b"\n\n")),
        ]);
        let mut events = SseStream::new(source);
        assert!(matches!(events.next().await, Some(Ok(Item::Event(e))) if e.data() == "a"));
        let Some(Err(err)) = events.next().await else {
            panic!("expected the transport error")
        };
        assert!(matches!(&err, SseError::Transport(e) if e.kind() == ErrorKind::ConnectionReset));
        assert_eq!(err.to_string(), "reading the event stream failed: reset");
        assert!(err.source().is_some());
        assert!(matches!(events.next().await, Some(Ok(Item::Event(e))) if e.data() == "b"));
        assert!(events.next().await.is_none());
        assert!(events.is_terminated());
        assert!(events.next().await.is_none(), "stays ended");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn sse_parse_22_decode_error_then_continues() {
        let limits = Limits::default().with_max_event_len(4);
        let source = stream::iter([
            Ok::<_, io::Error>(Bytes::from_static(b"id: 1\ndata: ab")),
            Ok(Bytes::from_static(b"cdef\n\nid: 2\ndata: ok\n\n")),
        ]);
        let mut events = SseStream::with_limits(source, limits);
        let Some(Err(err)) = events.next().await else {
            panic!("expected the limit error")
        };
        assert!(matches!(
            err,
            SseError::Decode(DecodeError::EventTooLarge { limit: 4 })
        ));
        assert!(err.to_string().contains("max_event_len"), "{err}");
        let Some(Ok(Item::Event(e))) = events.next().await else {
            panic!("expected the next event")
        };
        assert_eq!((e.data(), e.id()), ("ok", "2"));
        assert!(events.next().await.is_none());
        assert_eq!(events.last_event_id(), "2");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn body_skips_trailers_and_splits_anywhere() {
        for a in 0..=STREAM.len() {
            let frames: [Result<_, io::Error>; 3] = [
                Ok(http_body::Frame::data(Bytes::copy_from_slice(&STREAM[..a]))),
                Ok(http_body::Frame::trailers(http::HeaderMap::new())),
                Ok(http_body::Frame::data(Bytes::copy_from_slice(&STREAM[a..]))),
            ];
            let body = StreamBody::new(stream::iter(frames));
            assert_eq!(collect(SseBodyStream::new(body)).await, expected(), "{a}");
        }
        let full = http_body_util::Full::new(Bytes::from_static(STREAM));
        let mut events = SseBodyStream::new(full);
        let mut n = 0;
        while let Some(item) = events.next().await {
            item.unwrap();
            n += 1;
        }
        assert_eq!(n, expected().len());
        assert_eq!(events.retry(), Some(Duration::from_millis(1500)));
        assert_eq!(events.last_event_id(), "2");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn body_error_is_yielded() {
        let frames = stream::iter([
            Ok(http_body::Frame::data(Bytes::from_static(b"data: a\n\n"))),
            Err(io::Error::other("body broke")),
        ]);
        let mut events = SseBodyStream::new(StreamBody::new(frames).map_err(|e| e.to_string()));
        assert!(matches!(events.next().await, Some(Ok(Item::Event(e))) if e.data() == "a"));
        let Some(Err(SseError::Transport(e))) = events.next().await else {
            panic!("expected the body error")
        };
        assert_eq!(e, "body broke");
        assert!(events.next().await.is_none());
    }

    /// What one `poll_read` of a [`Script`] does.
    enum Step {
        Bytes(&'static [u8]),
        Interrupted,
        Fail,
        Pending,
    }

    /// An `AsyncRead` that plays a script: one step per `poll_read`, at most `per_read`
    /// bytes at a time.
    struct Script {
        steps: VecDeque<Step>,
        per_read: usize,
    }

    impl AsyncRead for Script {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            match self.steps.pop_front() {
                None => Poll::Ready(Ok(())),
                Some(Step::Interrupted) => Poll::Ready(Err(ErrorKind::Interrupted.into())),
                Some(Step::Fail) => Poll::Ready(Err(io::Error::other("read broke"))),
                Some(Step::Pending) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Some(Step::Bytes(bytes)) => {
                    let n = bytes.len().min(buf.remaining()).min(self.per_read);
                    buf.put_slice(&bytes[..n]);
                    if n < bytes.len() {
                        self.steps.push_front(Step::Bytes(&bytes[n..]));
                    }
                    Poll::Ready(Ok(()))
                }
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn async_read_long_lines_in_short_reads_with_pauses() {
        // Events of 9 to 36 KB, read 1460 bytes at a time with a pending poll before
        // each read: long lines go into the decoder's line buffer, and a read that was
        // pending is lent its room again.
        let mut input = Vec::new();
        let mut want = Vec::new();
        for i in 0..10usize {
            let value = "é".repeat(4500 + 4500 * (i % 4));
            input.extend_from_slice(format!("id: {i}\r\ndata: {value}\r\n\r\n").as_bytes());
            want.push(format!("event message {value:?} id={i}"));
        }
        let input: &'static [u8] = Box::leak(input.into_boxed_slice());
        let steps = input
            .chunks(1460)
            .flat_map(|chunk| [Step::Pending, Step::Bytes(chunk)])
            .collect();
        let reader = Script {
            steps,
            per_read: usize::MAX,
        };
        assert_eq!(
            collect(SseReader::new(reader).with_read_size(1460)).await,
            want
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn async_read_one_byte_at_a_time_and_small_read_sizes() {
        let one_byte = Script {
            steps: VecDeque::from([Step::Bytes(STREAM)]),
            per_read: 1,
        };
        assert_eq!(collect(SseReader::new(one_byte)).await, expected());
        for read_size in 1..=7 {
            let reader = SseReader::new(STREAM).with_read_size(read_size);
            assert_eq!(collect(reader).await, expected(), "read_size {read_size}");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn async_read_retries_interrupted_and_yields_errors() {
        let script = Script {
            steps: VecDeque::from([
                Step::Interrupted,
                Step::Bytes(b"data: a\n"),
                Step::Pending,
                Step::Interrupted,
                Step::Bytes(b"\ndata: b"),
                Step::Fail,
                Step::Bytes(b"\n\n"),
            ]),
            per_read: usize::MAX,
        };
        let mut events = SseReader::new(script);
        assert!(matches!(events.next().await, Some(Ok(Item::Event(e))) if e.data() == "a"));
        let Some(Err(SseError::Transport(e))) = events.next().await else {
            panic!("expected the read error")
        };
        assert_eq!(e.to_string(), "read broke");
        assert!(matches!(events.next().await, Some(Ok(Item::Event(e))) if e.data() == "b"));
        assert!(events.next().await.is_none());
        assert!(events.is_terminated());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn async_read_yields_each_event_while_the_writer_is_open() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut events = SseReader::new(rx);
        for i in 0..3 {
            tx.write_all(format!("id: {i}\ndata: {i}\n\n").as_bytes())
                .await
                .unwrap();
            let item = tokio::time::timeout(Duration::from_secs(5), events.next())
                .await
                .expect("the event arrives before the writer closes");
            let Some(Ok(Item::Event(e))) = item else {
                panic!("expected an event")
            };
            assert_eq!(e.data(), i.to_string());
            assert_eq!(events.last_event_id(), i.to_string());
        }
        tx.write_all(b"data: unterminated").await.unwrap();
        drop(tx);
        assert!(events.next().await.is_none());
    }
}
