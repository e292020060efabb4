//! Decoder limits (SSE-PARSE-22).

/// Bounds on what a [`Decoder`](super::Decoder) buffers for one stream.
///
/// The WHATWG algorithm sets no limit; a peer could otherwise make the decoder grow
/// without bound with one endless line or one endless event. Exceeding a limit yields a
/// [`DecodeError`](super::DecodeError), which says what is dropped: the offending event,
/// or only the offending line when it is a comment or an ignored field. What the
/// decoder holds ([`Decoder::buffered_len`](super::Decoder::buffered_len)) stays within
/// `max_event_len + 3 × max_line_len` (partial line, data, event type, id), plus the
/// input the caller has pushed and not yet drained.
///
/// ```
/// use mcpwire::sse::Limits;
/// let limits = Limits::default().with_max_line_len(1 << 20).with_max_event_len(4 << 20);
/// assert_eq!(limits.max_line_len(), 1 << 20);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    max_line_len: usize,
    max_event_len: usize,
}

impl Limits {
    /// Default [`max_line_len`](Self::max_line_len): 16 MiB, room for a large tool
    /// result (for example a base64 image) on one `data` line.
    pub const DEFAULT_MAX_LINE_LEN: usize = 16 << 20;
    /// Default [`max_event_len`](Self::max_event_len): 16 MiB.
    pub const DEFAULT_MAX_EVENT_LEN: usize = 16 << 20;

    /// The default limits.
    pub const fn new() -> Self {
        Self {
            max_line_len: Self::DEFAULT_MAX_LINE_LEN,
            max_event_len: Self::DEFAULT_MAX_EVENT_LEN,
        }
    }

    /// Sets the longest line accepted, in bytes, without its line end.
    #[must_use]
    pub const fn with_max_line_len(mut self, bytes: usize) -> Self {
        self.max_line_len = bytes;
        self
    }

    /// Sets the largest event data accepted, in bytes: the `data` values joined with LF
    /// (after UTF-8 replacement).
    #[must_use]
    pub const fn with_max_event_len(mut self, bytes: usize) -> Self {
        self.max_event_len = bytes;
        self
    }

    /// The longest line accepted, in bytes.
    pub const fn max_line_len(&self) -> usize {
        self.max_line_len
    }

    /// The largest event data accepted, in bytes.
    pub const fn max_event_len(&self) -> usize {
        self.max_event_len
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}
