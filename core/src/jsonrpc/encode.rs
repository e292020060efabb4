//! Encoding outgoing messages into a reusable buffer.

use std::fmt;

use bytes::{BufMut, BytesMut};

use super::error::ErrorCode;
use super::id::RequestId;
use super::message::RawJson;
use crate::utf8::Utf8Bytes;

/// A value that can write itself as one JSON value: [`RawJson`] (copied as is) or
/// [`Json`] (any `serde::Serialize`, through serde_json).
pub trait ToJson {
    /// Appends the JSON text of the value to `dst`.
    ///
    /// # Errors
    /// [`EncodeError::Serialize`] when the value cannot be represented as JSON.
    fn write_json(&self, dst: &mut BytesMut) -> Result<(), EncodeError>;
}

impl ToJson for RawJson<'_> {
    fn write_json(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        dst.extend_from_slice(self.as_str().as_bytes());
        Ok(())
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

/// A reusable buffer of encoded JSON-RPC messages.
///
/// Each `push_*` appends one compact message and returns its text, which can go straight
/// into an SSE event ([`Encoder::encode_event`](crate::sse::Encoder::encode_event)) or, through [`MessageBuf::split`], become an
/// HTTP body without a copy. Clear or split the buffer between messages; its allocation
/// is reused.
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
        simdutf8::basic::from_utf8(&self.buf).expect("INVARIANT: MessageBuf holds UTF-8")
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
    pub fn split(&mut self) -> Utf8Bytes {
        Utf8Bytes::from_validated(self.buf.split().freeze())
    }

    /// Appends `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`.
    ///
    /// # Errors
    /// [`EncodeError`] from `params`; the buffer is unchanged.
    pub fn push_request(
        &mut self,
        id: &RequestId,
        method: &str,
        params: Option<&dyn ToJson>,
    ) -> Result<&str, EncodeError> {
        self.push(|dst| {
            dst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            id.write_json(dst);
            dst.extend_from_slice(b",\"method\":");
            write_str(dst, method);
            if let Some(params) = params {
                dst.extend_from_slice(b",\"params\":");
                params.write_json(dst)?;
            }
            Ok(())
        })
    }

    /// Appends `{"jsonrpc":"2.0","method":…,"params":…}`.
    ///
    /// # Errors
    /// [`EncodeError`] from `params`; the buffer is unchanged.
    pub fn push_notification(
        &mut self,
        method: &str,
        params: Option<&dyn ToJson>,
    ) -> Result<&str, EncodeError> {
        self.push(|dst| {
            dst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
            write_str(dst, method);
            if let Some(params) = params {
                dst.extend_from_slice(b",\"params\":");
                params.write_json(dst)?;
            }
            Ok(())
        })
    }

    /// Appends `{"jsonrpc":"2.0","id":…,"result":…}`.
    ///
    /// # Errors
    /// [`EncodeError`] from `result`; the buffer is unchanged.
    pub fn push_result(
        &mut self,
        id: &RequestId,
        result: &dyn ToJson,
    ) -> Result<&str, EncodeError> {
        self.push(|dst| {
            dst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            id.write_json(dst);
            dst.extend_from_slice(b",\"result\":");
            result.write_json(dst)
        })
    }

    /// Appends `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…,"data":…}}`; a
    /// `None` id is written as `null` (JSONRPC-5: the request's id could not be read).
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
        self.push(|dst| {
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
            Ok(())
        })
    }

    /// Appends the `notifications/cancelled` notification for `request` (MCP
    /// cancellation: `{"requestId":…,"reason":…}`).
    pub fn push_cancelled(&mut self, request: &RequestId, reason: Option<&str>) -> &str {
        let start = self.buf.len();
        let dst = &mut self.buf;
        dst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":");
        request.write_json(dst);
        if let Some(reason) = reason {
            dst.extend_from_slice(b",\"reason\":");
            write_str(dst, reason);
        }
        dst.extend_from_slice(b"}}");
        self.written(start)
    }

    fn push(
        &mut self,
        body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
    ) -> Result<&str, EncodeError> {
        let start = self.buf.len();
        match body(&mut self.buf) {
            Ok(()) => {
                self.buf.extend_from_slice(b"}");
                Ok(self.written(start))
            }
            Err(e) => {
                self.buf.truncate(start);
                Err(e)
            }
        }
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
}
