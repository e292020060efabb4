//! The owned message: an [`Envelope`] keeps its message's text and finds its parts in it.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;

use super::error::{ErrorCode, ParseError, ShapeError};
use super::id::RequestId;
use super::message::{
    Classifier, ErrorObject, ErrorResponse, Kind, Message, Notification, RawJson, Request,
    Response, is_array, utf8,
};
use super::scan::{JsonError, JsonErrorKind};
use crate::utf8::Utf8Bytes;
use crate::version::ProtocolVersion;

/// One classified message that owns its text: for messages that outlive the input call
/// (what a server hands the application, what a client reports as an event).
///
/// It holds the message's [`Utf8Bytes`] (a decoded SSE event's data, an HTTP body, a
/// batch element's slice of its body: never a copy) and, found by one classification, the
/// kind, the id, and where the method and the raw `params`, `result` or error `data` lie
/// in that text. [`message`](Self::message) gives the borrowed [`Message`] view back
/// without scanning again; [`payload_bytes`](Self::payload_bytes) gives the payload as
/// `Utf8Bytes` of the same buffer, to forward or keep.
///
/// Building one allocates only what [`Classifier::classify`] allocates: nothing for an
/// integer id (or a string id of up to [`INLINE_ID_LEN`](super::INLINE_ID_LEN) bytes)
/// and a method without backslash escapes. A method or error message that the input
/// escaped (`"tools\/call"`) is kept as a small `String` of its own, unescaped.
///
/// ```
/// use mcpwire::jsonrpc::{Classifier, Kind, RequestId};
/// use mcpwire::sse::Event;
///
/// // As a decoder dispatches it: the data is a slice of the input chunk.
/// let event = Event::new(
///     r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#,
///     "",
///     "s1:4",
/// );
/// let envelope = Classifier::default().envelope(event.into_data())?;
/// assert_eq!(envelope.kind(), Kind::Request);
/// assert_eq!(envelope.id(), Some(&RequestId::int(7)));
/// assert_eq!(envelope.method(), Some("tools/call"));
/// let params = envelope.payload_bytes().unwrap();
/// assert_eq!(params, r#"{"name":"echo"}"#);
/// // The same buffer, not a copy.
/// assert!(envelope.text().as_bytes().as_ptr_range().contains(&params.as_ptr()));
/// # Ok::<(), mcpwire::jsonrpc::ParseError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Envelope {
    // INVARIANT: every `Span` in `repr` is the extent, in `text`, of a part of the
    // classification of `text`, so it lies inside it on character boundaries.
    text: Utf8Bytes,
    repr: Repr,
}

/// Where a part lies in the envelope's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

/// A method or error message: in the text, or unescaped into a string of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Name {
    At(Span),
    Unescaped(String),
}

/// The four shapes of [`Message`], with spans instead of borrows.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    Request {
        id: RequestId,
        method: Name,
        params: Option<Span>,
    },
    Notification {
        method: Name,
        params: Option<Span>,
    },
    Response {
        id: RequestId,
        result: Span,
    },
    Error {
        id: Option<RequestId>,
        code: ErrorCode,
        message: Name,
        data: Option<Span>,
    },
}

impl Repr {
    /// The spans of `message`'s parts in `base`, which they all borrow from.
    fn of(base: &str, message: Message<'_>) -> Self {
        let span = |part: &str| {
            // Both point into `base` (the classifier hands out slices of its input), so
            // the difference of the addresses is the offset; no pointer is dereferenced.
            let start = (part.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize);
            debug_assert!(base.get(start..start + part.len()) == Some(part));
            Span {
                start,
                end: start + part.len(),
            }
        };
        let name = |text: Cow<'_, str>| match text {
            Cow::Borrowed(s) => Name::At(span(s)),
            Cow::Owned(s) => Name::Unescaped(s),
        };
        let raw = |raw: RawJson<'_>| span(raw.as_str());
        match message {
            Message::Request(r) => Self::Request {
                id: r.id,
                method: name(r.method),
                params: r.params.map(raw),
            },
            Message::Notification(n) => Self::Notification {
                method: name(n.method),
                params: n.params.map(raw),
            },
            Message::Response(r) => Self::Response {
                id: r.id,
                result: raw(r.result),
            },
            Message::Error(e) => Self::Error {
                id: e.id,
                code: e.error.code,
                message: name(e.error.message),
                data: e.error.data.map(raw),
            },
        }
    }
}

impl Envelope {
    fn new(text: Utf8Bytes, base: &str, message: Message<'_>) -> Self {
        Self {
            repr: Repr::of(base, message),
            text,
        }
    }

    /// Which of the four shapes this is.
    pub const fn kind(&self) -> Kind {
        match self.repr {
            Repr::Request { .. } => Kind::Request,
            Repr::Notification { .. } => Kind::Notification,
            Repr::Response { .. } => Kind::Response,
            Repr::Error { .. } => Kind::Error,
        }
    }

    /// The id, for requests and responses (and error responses that have one).
    pub const fn id(&self) -> Option<&RequestId> {
        match &self.repr {
            Repr::Request { id, .. } | Repr::Response { id, .. } => Some(id),
            Repr::Error { id, .. } => id.as_ref(),
            Repr::Notification { .. } => None,
        }
    }

    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        match &self.repr {
            Repr::Request { method, .. } | Repr::Notification { method, .. } => {
                Some(self.name(method))
            }
            Repr::Response { .. } | Repr::Error { .. } => None,
        }
    }

    /// The raw payload: `params` of a request or notification (if any), `result` of a
    /// response, `data` of an error response (if any).
    pub fn payload(&self) -> Option<RawJson<'_>> {
        match &self.repr {
            Repr::Request { params, .. } | Repr::Notification { params, .. } => {
                params.map(|p| self.raw(p))
            }
            Repr::Response { result, .. } => Some(self.raw(*result)),
            Repr::Error { data, .. } => data.map(|d| self.raw(d)),
        }
    }

    /// The raw payload (see [`payload`](Self::payload)) as a slice of the same buffer:
    /// one reference count, no copy, to forward or keep past the envelope.
    pub fn payload_bytes(&self) -> Option<Utf8Bytes> {
        self.payload().map(|p| self.text.slice_ref(p.as_str()))
    }

    /// The borrowed view, as [`Classifier::classify`] would give it for the text: no
    /// scan, no allocation (the id is cloned: a copy, or one reference count for a
    /// string id longer than [`INLINE_ID_LEN`](super::INLINE_ID_LEN) bytes).
    pub fn message(&self) -> Message<'_> {
        match &self.repr {
            Repr::Request { id, method, params } => Message::Request(Request {
                id: id.clone(),
                method: Cow::Borrowed(self.name(method)),
                params: params.map(|p| self.raw(p)),
            }),
            Repr::Notification { method, params } => Message::Notification(Notification {
                method: Cow::Borrowed(self.name(method)),
                params: params.map(|p| self.raw(p)),
            }),
            Repr::Response { id, result } => Message::Response(Response {
                id: id.clone(),
                result: self.raw(*result),
            }),
            Repr::Error {
                id,
                code,
                message,
                data,
            } => Message::Error(ErrorResponse {
                id: id.clone(),
                error: ErrorObject {
                    code: *code,
                    message: Cow::Borrowed(self.name(message)),
                    data: data.map(|d| self.raw(d)),
                },
            }),
        }
    }

    /// The message's JSON text: the whole input for a single message (whitespace around
    /// it included), the element's extent for an element of a batch.
    pub const fn text(&self) -> &Utf8Bytes {
        &self.text
    }

    /// Takes the text (see [`text`](Self::text)).
    pub fn into_text(self) -> Utf8Bytes {
        self.text
    }

    fn at(&self, span: Span) -> &str {
        // INVARIANT on `text`: the span lies inside it on character boundaries.
        &self.text.as_str()[span.start..span.end]
    }

    fn name<'s>(&'s self, name: &'s Name) -> &'s str {
        match name {
            Name::At(span) => self.at(*span),
            Name::Unescaped(s) => s,
        }
    }

    fn raw(&self, span: Span) -> RawJson<'_> {
        RawJson::validated(self.at(span))
    }
}

impl fmt::Debug for Envelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Envelope").field(&self.message()).finish()
    }
}

/// What one HTTP body or SSE event held, owned: one [`Envelope`], or (2025-03-26 only) a
/// batch of them sharing the body's one buffer. The owned form of
/// [`Parsed`](super::Parsed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Envelopes {
    /// A single message.
    Single(Envelope),
    /// A batch, in input order; each element's text is its slice of the body. A
    /// malformed element is an `Err` that deserves its own -32600 response and does not
    /// spoil the others (BATCH-5).
    Batch(Vec<Result<Envelope, ShapeError>>),
}

/// An HTTP body as text: validated as UTF-8 once, kept without copying, for
/// [`Classifier::envelope`] and [`Classifier::envelopes`].
///
/// # Errors
/// [`ParseError::Json`] (-32700, [`JsonErrorKind::InvalidUtf8`] at the first bad byte)
/// when the body is not UTF-8 (JSONRPC-1).
pub fn body_text(body: Bytes) -> Result<Utf8Bytes, ParseError> {
    Utf8Bytes::try_from_bytes(body).map_err(|body| {
        // Only on this path: the validator that reports where (both validators agree).
        utf8(&body).err().unwrap_or(ParseError::Json(JsonError {
            offset: 0,
            kind: JsonErrorKind::InvalidUtf8,
        }))
    })
}

impl Classifier {
    /// Classifies one message and keeps it with its text, as
    /// [`classify_str`](Self::classify_str) classifies it: an SSE event's data
    /// ([`Event::into_data`](crate::sse::Event::into_data)) or an HTTP body
    /// ([`body_text`]). The text is not copied.
    ///
    /// A priming event's empty data is a -32700 here too; skip it first, as
    /// [`classify_event`](Self::classify_event) does.
    ///
    /// # Errors
    /// As [`Classifier::classify`].
    pub fn envelope(&self, text: Utf8Bytes) -> Result<Envelope, ParseError> {
        let message = self.classify_str(text.as_str())?;
        let repr = Repr::of(text.as_str(), message);
        Ok(Envelope { text, repr })
    }

    /// Classifies a body that may be a batch, under the negotiated `version`, as
    /// [`parse`](Self::parse) does, and keeps every message with its text: a batch's
    /// elements are slices of the one buffer (one reference count each, no copy).
    ///
    /// # Errors
    /// As [`Classifier::parse`].
    pub fn envelopes(
        &self,
        text: Utf8Bytes,
        version: ProtocolVersion,
    ) -> Result<Envelopes, ParseError> {
        if !is_array(text.as_str()) {
            return self.envelope(text).map(Envelopes::Single);
        }
        let all = text.as_str();
        let mut items = Vec::new();
        self.batch(all, Some(version), |extent, item| {
            items.push(item.map(|message| {
                let element = &all[extent];
                Envelope::new(text.slice_ref(element), element, message)
            }));
        })?;
        Ok(Envelopes::Batch(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(text: &'static str) -> Envelope {
        Classifier::default()
            .envelope(Utf8Bytes::from_static(text))
            .unwrap()
    }

    #[test]
    fn the_view_is_what_classify_says_for_every_kind() {
        for text in [
            r#"{"jsonrpc":"2.0","id":"r-1","method":"tools\/call","params":[1]}"#,
            r#" {"method":"notifications/progress","jsonrpc":"2.0"} "#,
            r#"{"jsonrpc":"2.0","id":3,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"message":"b\u00e4d","code":-32700,"data":{"x":1}}}"#,
            r#"{"jsonrpc":"2.0","error":{"code":1,"message":"m"}}"#,
        ] {
            let e = envelope(text);
            let classified = Classifier::default().classify_str(text).unwrap();
            assert_eq!(e.message(), classified, "{text}");
            assert_eq!(e.kind(), classified.kind());
            assert_eq!(e.id(), classified.id());
            assert_eq!(e.method(), classified.method());
            assert_eq!(e.text(), text);
            let payload = e.payload().map(|p| p.as_str());
            assert_eq!(e.payload_bytes().as_deref(), payload);
        }
        assert_eq!(
            envelope(r#"{"jsonrpc":"2.0","method":"a\"b"}"#).method(),
            Some("a\"b")
        );
    }

    #[test]
    fn batch_elements_are_slices_of_one_buffer() {
        let text = Utf8Bytes::from_static(
            r#"[ {"jsonrpc":"2.0","id":1,"method":"a","params":{}} , 7, {"jsonrpc":"2.0","method":"b"}]"#,
        );
        let Ok(Envelopes::Batch(items)) =
            Classifier::default().envelopes(text.clone(), ProtocolVersion::V2025_03_26)
        else {
            panic!()
        };
        assert_eq!(items.len(), 3);
        let first = items[0].as_ref().unwrap();
        assert_eq!(
            first.text(),
            r#"{"jsonrpc":"2.0","id":1,"method":"a","params":{}}"#
        );
        assert_eq!(first.payload_bytes().unwrap(), "{}");
        let range = text.as_bytes().as_ptr_range();
        assert!(range.contains(&first.text().as_ptr()));
        assert!(items[1].is_err());
        assert_eq!(items[2].as_ref().unwrap().method(), Some("b"));
        assert_eq!(
            Classifier::default().envelopes(text, ProtocolVersion::V2025_06_18),
            Err(ParseError::BatchNotAllowed {
                version: ProtocolVersion::V2025_06_18
            })
        );
    }

    #[test]
    fn jsonrpc_1_a_body_is_validated_once_and_not_copied() {
        let body = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"m"}"#);
        let text = body_text(body.clone()).unwrap();
        assert_eq!(text.as_ptr(), body.as_ptr());
        assert_eq!(
            body_text(Bytes::from_static(b"{\"a\xff")),
            Err(ParseError::Json(JsonError {
                offset: 3,
                kind: JsonErrorKind::InvalidUtf8
            }))
        );
    }
}
