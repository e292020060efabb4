//! Encoding outgoing messages into a reusable buffer.

use std::fmt;

use bytes::{BufMut, BytesMut};

use super::error::ErrorCode;
use super::id::RequestId;
use super::message::RawJson;
use crate::sse::{Encoder, EventFields};
use crate::utf8::Utf8Bytes;

/// A value that can write itself as one JSON value: [`RawJson`] (copied as is) or
/// [`Json`] (any `serde::Serialize`, through serde_json).
pub trait ToJson {
    /// Appends the JSON text of the value to `dst`.
    ///
    /// # Errors
    /// [`EncodeError::Serialize`] when the value cannot be represented as JSON.
    fn write_json(&self, dst: &mut BytesMut) -> Result<(), EncodeError>;

    /// About how many bytes [`write_json`](Self::write_json) appends, to size a buffer
    /// once; 0 when unknown (the default).
    fn len_hint(&self) -> usize {
        0
    }
}

impl ToJson for RawJson<'_> {
    fn write_json(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        dst.extend_from_slice(self.as_str().as_bytes());
        Ok(())
    }

    fn len_hint(&self) -> usize {
        self.as_str().len()
    }
}

/// Serializes the wrapped value with serde_json, straight into the buffer.
#[derive(Debug, Clone, Copy)]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> ToJson for Json<T> {
    fn write_json(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        serde_json::to_writer(dst.writer(), &self.0)
            .map_err(|e| EncodeError::Serialize(e.to_string()))
    }
}

/// Why a message could not be encoded. The buffer is left as it was before the call.
///
/// Used as `jsonrpc::EncodeError`: [`sse::EncodeError`](crate::sse::EncodeError) is the
/// SSE encoder's (a field that cannot be encoded), a different failure.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// A [`Json`] value failed to serialize (serde_json's message).
    Serialize(String),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Serialize(e) => write!(f, "cannot serialize value: {e}"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// One outgoing JSON-RPC message, described by borrowed parts: the one writer of the
/// envelope, whether the text goes into an HTTP body ([`write`](Self::write),
/// [`MessageBuf`]) or straight into an SSE frame ([`encode_frame`](Self::encode_frame)).
///
/// The text is compact JSON in member order `jsonrpc`, `id`, `method`/`result`/`error`,
/// `params`; strings are escaped as serde_json escapes them. What the writer writes
/// itself holds no CR or LF; a raw payload is copied byte for byte (see [`MessageBuf`]).
///
/// ```
/// use bytes::BytesMut;
/// use mcpwire::jsonrpc::{Outgoing, RawJson, RequestId};
/// use mcpwire::sse::{EventFields, Id};
///
/// let result = RawJson::new(r#"{"content":[]}"#)?;
/// let message = Outgoing::Response { id: &RequestId::int(7), result: &result };
/// let mut frame = BytesMut::new();
/// message.encode_frame(&EventFields::new().with_id(Id::new("s1:3")?), &mut frame)?;
/// assert_eq!(
///     &frame[..],
///     br#"id: s1:3
/// data: {"jsonrpc":"2.0","id":7,"result":{"content":[]}}
///
/// "#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum Outgoing<'a> {
    /// `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`.
    Request {
        /// The request's id.
        id: &'a RequestId,
        /// The method name.
        method: &'a str,
        /// The `params` value, if any (an object or an array).
        params: Option<&'a dyn ToJson>,
    },
    /// `{"jsonrpc":"2.0","method":…,"params":…}`.
    Notification {
        /// The method name.
        method: &'a str,
        /// The `params` value, if any (an object or an array).
        params: Option<&'a dyn ToJson>,
    },
    /// `{"jsonrpc":"2.0","id":…,"result":…}`.
    Response {
        /// The id of the request this answers.
        id: &'a RequestId,
        /// The `result` value.
        result: &'a dyn ToJson,
    },
    /// `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…,"data":…}}`; a `None` id
    /// is written as `null` (JSONRPC-5: the request's id could not be read).
    Error {
        /// The id of the request this answers, if it was known.
        id: Option<&'a RequestId>,
        /// The error code.
        code: ErrorCode,
        /// The human-readable message.
        message: &'a str,
        /// The `data` value, if any.
        data: Option<&'a dyn ToJson>,
    },
    /// The `notifications/cancelled` notification for `request` (MCP cancellation:
    /// `"params":{"requestId":…,"reason":…}`); it cannot fail to encode.
    Cancelled {
        /// The id of the request given up on.
        request: &'a RequestId,
        /// Why, if the sender says.
        reason: Option<&'a str>,
    },
}

impl Outgoing<'_> {
    /// About how long the message's text is: its envelope and the payloads' hints, to
    /// size a buffer with one allocation.
    pub fn len_hint(&self) -> usize {
        // `{"jsonrpc":"2.0","id":…,"result":…}` and the like: the fixed text, an id.
        const ENVELOPE: usize = 64;
        let payload = |p: Option<&dyn ToJson>| p.map_or(0, ToJson::len_hint);
        ENVELOPE
            + match *self {
                Self::Request { method, params, .. } => method.len() + payload(params),
                Self::Notification { method, params } => method.len() + payload(params),
                Self::Response { result, .. } => result.len_hint(),
                Self::Error { message, data, .. } => message.len() + payload(data),
                Self::Cancelled { reason, .. } => 48 + reason.map_or(0, str::len),
            }
    }

    /// Appends the message's JSON text to `dst`.
    ///
    /// # Errors
    /// [`EncodeError`] from a payload; `dst` is then truncated back to its length before
    /// the call.
    pub fn write(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        let start = dst.len();
        let written = self.write_unguarded(dst);
        if written.is_err() {
            dst.truncate(start);
        }
        written
    }

    /// Appends one SSE frame (`fields`, the message as its data, the blank line) to
    /// `dst`, writing the text once, in place
    /// ([`sse::Encoder::encode_event_with`](crate::sse::Encoder::encode_event_with)):
    /// byte for byte what [`MessageBuf`]'s text given to
    /// [`Encoder::encode_event`](crate::sse::Encoder::encode_event) makes, without the
    /// buffer in between. `dst.split().freeze()` is then the frame to send and keep for
    /// replay.
    ///
    /// # Errors
    /// [`EncodeError`] from a payload; `dst` is then truncated back to its length before
    /// the call.
    pub fn encode_frame(
        &self,
        fields: &EventFields<'_>,
        dst: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        Encoder::new().encode_event_with(fields, dst, |dst| self.write_unguarded(dst))
    }

    /// The writer: appends the text, leaving a partial message behind on error.
    fn write_unguarded(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        match *self {
            Self::Request { id, method, params } => {
                dst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
                id.write_json(dst);
                dst.extend_from_slice(b",\"method\":");
                write_str(dst, method);
                write_params(dst, params)?;
            }
            Self::Notification { method, params } => {
                dst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
                write_str(dst, method);
                write_params(dst, params)?;
            }
            Self::Response { id, result } => {
                dst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
                id.write_json(dst);
                dst.extend_from_slice(b",\"result\":");
                result.write_json(dst)?;
            }
            Self::Error {
                id,
                code,
                message,
                data,
            } => {
                dst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
                match id {
                    Some(id) => id.write_json(dst),
                    None => dst.extend_from_slice(b"null"),
                }
                dst.extend_from_slice(b",\"error\":{\"code\":");
                write_int(dst, code.0);
                dst.extend_from_slice(b",\"message\":");
                write_str(dst, message);
                if let Some(data) = data {
                    dst.extend_from_slice(b",\"data\":");
                    data.write_json(dst)?;
                }
                dst.extend_from_slice(b"}");
            }
            Self::Cancelled { request, reason } => {
                dst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":");
                request.write_json(dst);
                if let Some(reason) = reason {
                    dst.extend_from_slice(b",\"reason\":");
                    write_str(dst, reason);
                }
                dst.extend_from_slice(b"}");
            }
        }
        dst.extend_from_slice(b"}");
        Ok(())
    }
}

fn write_params(dst: &mut BytesMut, params: Option<&dyn ToJson>) -> Result<(), EncodeError> {
    if let Some(params) = params {
        dst.extend_from_slice(b",\"params\":");
        params.write_json(dst)?;
    }
    Ok(())
}

impl fmt::Debug for Outgoing<'_> {
    /// The envelope (kind, id, method or code); payloads are not shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Request { id, method, .. } => f
                .debug_struct("Request")
                .field("id", id)
                .field("method", method)
                .finish_non_exhaustive(),
            Self::Notification { method, .. } => f
                .debug_struct("Notification")
                .field("method", method)
                .finish_non_exhaustive(),
            Self::Response { id, .. } => f
                .debug_struct("Response")
                .field("id", id)
                .finish_non_exhaustive(),
            Self::Error {
                id, code, message, ..
            } => f
                .debug_struct("Error")
                .field("id", id)
                .field("code", code)
                .field("message", message)
                .finish_non_exhaustive(),
            Self::Cancelled { request, reason } => f
                .debug_struct("Cancelled")
                .field("request", request)
                .field("reason", reason)
                .finish(),
        }
    }
}

/// A reusable buffer of encoded JSON-RPC messages: the text of [`Outgoing`] messages,
/// one after another, for HTTP bodies.
///
/// Each `push_*` appends one compact message and returns its text. Through
/// [`MessageBuf::split`] it becomes an HTTP body without a copy; for an SSE event, use
/// [`Outgoing::encode_frame`], which writes the same text straight into the frame.
/// Clear or split the buffer between messages; its allocation is reused.
///
/// What the buffer writes itself (the envelope, escaped strings, numbers, serde_json's
/// compact output of ordinary values) holds no CR or LF, so such a message is one
/// `data:` line. Raw JSON is copied byte for byte, line breaks between its tokens
/// included: a [`RawJson`] payload, or a serde_json `RawValue` inside a [`Json`] value,
/// may be pretty-printed. The SSE encoder then writes several `data:` lines, and the
/// client decodes the same JSON value with LF for each line break.
#[derive(Debug, Default)]
pub struct MessageBuf {
    // INVARIANT: UTF-8: everything appended is UTF-8 (escaped strings, decimal numbers,
    // RawJson text, serde_json output), and a failed push truncates back.
    buf: BytesMut,
}

impl MessageBuf {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty buffer with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: BytesMut::with_capacity(capacity),
        }
    }

    /// Everything encoded since the last clear or split.
    pub fn as_str(&self) -> &str {
        self.written(0)
    }

    /// Bytes encoded since the last clear or split.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is encoded.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Forgets the contents, keeping the allocation.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Takes the contents as shared bytes (an HTTP body); the buffer starts empty and
    /// reuses its allocation once every split-off part is dropped.
    ///
    /// The text is validated once more on the way out (one SIMD pass, no copy): safe
    /// code cannot hand the buffer's UTF-8 invariant to [`Utf8Bytes`] without a check.
    pub fn split(&mut self) -> Utf8Bytes {
        // INVARIANT: the buffer holds UTF-8, so this keeps the bytes as they are and the
        // replacement it would make for invalid input never happens.
        Utf8Bytes::from_bytes_lossy(self.buf.split().freeze())
    }

    /// Appends any [`Outgoing`] message and returns its text.
    ///
    /// # Errors
    /// [`EncodeError`] from a payload; the buffer is unchanged.
    pub fn push(&mut self, message: &Outgoing<'_>) -> Result<&str, EncodeError> {
        let start = self.buf.len();
        message.write(&mut self.buf)?;
        Ok(self.written(start))
    }

    /// Appends `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`
    /// ([`Outgoing::Request`]).
    ///
    /// # Errors
    /// [`EncodeError`] from `params`; the buffer is unchanged.
    pub fn push_request(
        &mut self,
        id: &RequestId,
        method: &str,
        params: Option<&dyn ToJson>,
    ) -> Result<&str, EncodeError> {
        self.push(&Outgoing::Request { id, method, params })
    }

    /// Appends `{"jsonrpc":"2.0","method":…,"params":…}` ([`Outgoing::Notification`]).
    ///
    /// # Errors
    /// [`EncodeError`] from `params`; the buffer is unchanged.
    pub fn push_notification(
        &mut self,
        method: &str,
        params: Option<&dyn ToJson>,
    ) -> Result<&str, EncodeError> {
        self.push(&Outgoing::Notification { method, params })
    }

    /// Appends `{"jsonrpc":"2.0","id":…,"result":…}` ([`Outgoing::Response`]).
    ///
    /// # Errors
    /// [`EncodeError`] from `result`; the buffer is unchanged.
    pub fn push_result(
        &mut self,
        id: &RequestId,
        result: &dyn ToJson,
    ) -> Result<&str, EncodeError> {
        self.push(&Outgoing::Response { id, result })
    }

    /// Appends `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…,"data":…}}`
    /// ([`Outgoing::Error`]); a `None` id is written as `null` (JSONRPC-5: the request's
    /// id could not be read).
    ///
    /// # Errors
    /// [`EncodeError`] from `data`; the buffer is unchanged.
    pub fn push_error(
        &mut self,
        id: Option<&RequestId>,
        code: ErrorCode,
        message: &str,
        data: Option<&dyn ToJson>,
    ) -> Result<&str, EncodeError> {
        self.push(&Outgoing::Error {
            id,
            code,
            message,
            data,
        })
    }

    /// Appends the `notifications/cancelled` notification for `request`
    /// ([`Outgoing::Cancelled`]: `{"requestId":…,"reason":…}`).
    pub fn push_cancelled(&mut self, request: &RequestId, reason: Option<&str>) -> &str {
        let start = self.buf.len();
        // A cancellation has no payload, so it cannot fail to encode (and a failure would
        // leave nothing behind).
        let _ = Outgoing::Cancelled { request, reason }.write(&mut self.buf);
        self.written(start)
    }

    fn written(&self, start: usize) -> &str {
        simdutf8::basic::from_utf8(&self.buf[start..]).expect("INVARIANT: MessageBuf holds UTF-8")
    }
}

/// Writes `n` in decimal.
pub(crate) fn write_int(dst: &mut BytesMut, n: i64) {
    dst.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Writes `s` as a JSON string (see [`json_string`]).
pub(crate) fn write_str(dst: &mut BytesMut, s: &str) {
    dst.reserve(s.len() + 2);
    let _ = json_string(s, |piece| {
        dst.extend_from_slice(piece.as_bytes());
        Ok::<(), std::convert::Infallible>(())
    });
}

/// Hands `put` the pieces of `s` as a quoted JSON string: `"` and `\` escaped, control
/// characters as `\n`, `\t`, … or `\u00XX`; everything else (non-ASCII included) as is,
/// as serde_json writes it. Shared by the encoder and `RequestId`'s `Display`.
pub(crate) fn json_string<E>(s: &str, mut put: impl FnMut(&str) -> Result<(), E>) -> Result<(), E> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    put("\"")?;
    let mut run = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        let mut unicode = *b"\\u0000";
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..0x20 => {
                unicode[4] = HEX[usize::from(b >> 4)];
                unicode[5] = HEX[usize::from(b & 15)];
                std::str::from_utf8(&unicode).expect("six ASCII bytes")
            }
            _ => continue,
        };
        // `i` is at an ASCII byte, so both slices end on character boundaries.
        put(&s[run..i])?;
        put(escape)?;
        run = i + 1;
    }
    put(&s[run..])?;
    put("\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_and_strings_are_json() {
        let mut dst = BytesMut::new();
        for n in [0, 7, -1, i64::MIN, i64::MAX] {
            dst.clear();
            write_int(&mut dst, n);
            assert_eq!(&dst[..], n.to_string().as_bytes());
        }
        dst.clear();
        write_str(&mut dst, "a\"b\\c\n\u{1}é\u{7f}");
        assert_eq!(&dst[..], "\"a\\\"b\\\\c\\n\\u0001é\u{7f}\"".as_bytes());
    }

    #[test]
    fn messages_have_the_envelope_and_failed_pushes_leave_no_trace() {
        let mut buf = MessageBuf::new();
        let params = RawJson::new(r#"{"a":1}"#).unwrap();
        assert_eq!(
            buf.push_request(&RequestId::int(1), "tools/call", Some(&params))
                .unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":1}}"#
        );
        buf.clear();
        assert_eq!(
            buf.push_error(None, ErrorCode::PARSE_ERROR, "Parse error", None)
                .unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
        );
        let before = buf.len();
        let bad = std::collections::HashMap::from([(vec![1u8], 1)]);
        assert!(
            buf.push_result(&RequestId::string("x"), &Json(&bad))
                .is_err()
        );
        assert_eq!(buf.len(), before);
        buf.clear();
        let cancelled = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r1","reason":"user"}}"#;
        assert_eq!(
            buf.push_cancelled(&RequestId::string("r1"), Some("user")),
            cancelled
        );
        assert_eq!(buf.split().as_str(), cancelled);
        assert!(buf.is_empty());
    }

    #[test]
    fn sse_enc_2_a_frame_is_the_buffer_text_encoded_as_an_event() {
        use crate::sse::Id;
        let pretty = RawJson::new("{\n  \"a\": 1\r\n}").unwrap();
        let id = RequestId::string("r\n1");
        let fields = EventFields::new().with_id(Id::new("s:1").unwrap());
        for message in [
            Outgoing::Request {
                id: &id,
                method: "tools/call",
                params: Some(&pretty),
            },
            Outgoing::Notification {
                method: "m",
                params: None,
            },
            Outgoing::Response {
                id: &id,
                result: &pretty,
            },
            Outgoing::Error {
                id: None,
                code: ErrorCode::INTERNAL_ERROR,
                message: "x\ny",
                data: Some(&pretty),
            },
            Outgoing::Cancelled {
                request: &id,
                reason: None,
            },
        ] {
            let mut text = MessageBuf::new();
            let mut expected = BytesMut::new();
            Encoder::new().encode_event(&fields, text.push(&message).unwrap(), &mut expected);
            let mut frame = BytesMut::from(&b"before"[..]);
            message.encode_frame(&fields, &mut frame).unwrap();
            assert_eq!(&frame[6..], &expected[..], "{message:?}");
        }
    }

    #[test]
    fn a_failed_frame_leaves_no_trace() {
        let bad = Json(std::collections::HashMap::from([(vec![1u8], 1)]));
        let id = RequestId::int(1);
        let message = Outgoing::Response {
            id: &id,
            result: &bad,
        };
        let mut dst = BytesMut::from(&b"kept"[..]);
        assert!(message.encode_frame(&EventFields::new(), &mut dst).is_err());
        assert!(message.write(&mut dst).is_err());
        assert_eq!(&dst[..], b"kept");
    }
}
