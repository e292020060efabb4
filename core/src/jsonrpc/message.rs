//! Classification: one JSON text in, a [`Message`] with borrowed payloads out.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use super::error::{ErrorCode, ParseError, Shape, ShapeError};
use super::id::RequestId;
use super::scan::{JsonError, JsonErrorKind, MAX_DEPTH_CAP, Scanner, StrToken, unescape};
use crate::version::ProtocolVersion;

/// A JSON value exactly as it appeared in the input: validated, never parsed into a tree.
///
/// This is how `params`, `result` and error `data` travel: a gateway can forward them
/// byte for byte, and an application deserializes them with the library of its choice.
/// To keep one without copying, keep the message as an
/// [`Envelope`](super::Envelope) ([`payload_bytes`](super::Envelope::payload_bytes)), or
/// slice the buffer it came from: `bytes.slice_ref(raw.as_str().as_bytes())`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawJson<'a>(&'a str);

impl<'a> RawJson<'a> {
    /// The JSON text of the value (no surrounding whitespace).
    pub const fn as_str(&self) -> &'a str {
        self.0
    }

    /// Checks that `text` is exactly one JSON value (whitespace around it is trimmed).
    ///
    /// # Errors
    /// The [`JsonError`] that makes it invalid.
    pub fn new(text: &'a str) -> Result<Self, JsonError> {
        let mut sc = Scanner::new(text.as_bytes(), Limits::DEFAULT_MAX_DEPTH);
        let (start, end) = sc.value()?;
        sc.end()?;
        Ok(Self(&text[start..end]))
    }

    /// Wraps text the scanner validated.
    pub(crate) const fn validated(text: &'a str) -> Self {
        Self(text)
    }

    /// Whether the value is a JSON object.
    pub fn is_object(&self) -> bool {
        self.0.starts_with('{')
    }
}

impl fmt::Debug for RawJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawJson({})", self.0)
    }
}

impl fmt::Display for RawJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A request: it has an `id` and a `method`, and expects a response (JSONRPC-2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    /// The id the response must carry.
    pub id: RequestId,
    /// The method name; borrowed unless the input escaped a character in it.
    pub method: Cow<'a, str>,
    /// The `params` value, untouched.
    pub params: Option<RawJson<'a>>,
}

/// A notification: a `method` and no `id`; it is never answered (JSONRPC-7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification<'a> {
    /// The method name; borrowed unless the input escaped a character in it.
    pub method: Cow<'a, str>,
    /// The `params` value, untouched.
    pub params: Option<RawJson<'a>>,
}

/// A successful response: the request's `id` and a `result` (JSONRPC-4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response<'a> {
    /// The id of the request this answers.
    pub id: RequestId,
    /// The `result` value, untouched.
    pub result: RawJson<'a>,
}

/// The `error` member of an error response (JSONRPC-4, JSONRPC-6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorObject<'a> {
    /// The integer error code.
    pub code: ErrorCode,
    /// The human-readable message.
    pub message: Cow<'a, str>,
    /// The optional `data` value, untouched.
    pub data: Option<RawJson<'a>>,
}

/// An error response; `id` is `None` when the request's id could not be read (JSONRPC-5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorResponse<'a> {
    /// The id of the request this answers, if it was known.
    pub id: Option<RequestId>,
    /// What went wrong.
    pub error: ErrorObject<'a>,
}

/// One classified JSON-RPC message (JSONRPC-8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    /// `id` and `method`.
    Request(Request<'a>),
    /// `method` without `id`.
    Notification(Notification<'a>),
    /// `id` and `result`.
    Response(Response<'a>),
    /// `error` (with `id`, or with a null or absent one).
    Error(ErrorResponse<'a>),
}

/// The four kinds of [`Message`], for logs and routing tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// See [`Message::Request`].
    Request,
    /// See [`Message::Notification`].
    Notification,
    /// See [`Message::Response`].
    Response,
    /// See [`Message::Error`].
    Error,
}

impl Kind {
    /// `"request"`, `"notification"`, `"response"` or `"error"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Notification => "notification",
            Self::Response => "response",
            Self::Error => "error",
        }
    }
}

impl<'a> Message<'a> {
    /// Which of the four shapes this is.
    pub const fn kind(&self) -> Kind {
        match self {
            Self::Request(_) => Kind::Request,
            Self::Notification(_) => Kind::Notification,
            Self::Response(_) => Kind::Response,
            Self::Error(_) => Kind::Error,
        }
    }

    /// The id, for requests and responses (and error responses that have one).
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Self::Request(r) => Some(&r.id),
            Self::Response(r) => Some(&r.id),
            Self::Error(e) => e.id.as_ref(),
            Self::Notification(_) => None,
        }
    }

    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        match self {
            Self::Request(r) => Some(&r.method),
            Self::Notification(n) => Some(&n.method),
            Self::Response(_) | Self::Error(_) => None,
        }
    }

    /// The `params` value, for requests and notifications that have one.
    pub fn params(&self) -> Option<RawJson<'a>> {
        match self {
            Self::Request(r) => r.params,
            Self::Notification(n) => n.params,
            Self::Response(_) | Self::Error(_) => None,
        }
    }
}

/// Limits on what the classifier accepts. Strict by default.
///
/// Used as `jsonrpc::Limits`: [`sse::Limits`](crate::sse::Limits) are the SSE decoder's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    max_depth: usize,
    max_batch_len: usize,
}

impl Limits {
    pub(crate) const DEFAULT_MAX_DEPTH: usize = 128;

    /// The defaults: nesting depth 128 (as serde_json's), batches of at most 256 messages.
    pub const fn new() -> Self {
        Self {
            max_depth: Self::DEFAULT_MAX_DEPTH,
            max_batch_len: 256,
        }
    }

    /// Sets the deepest nesting of arrays and objects accepted in a text, counted over the
    /// whole text: the message object is one level and a batch array one more, so a
    /// message's `params` may nest one level less than this (clamped to 1024). A message
    /// is counted the same way alone and inside a batch, and too deep a text is a JSON
    /// error (-32700), as in serde_json. Below 2 even an error response (an object in an
    /// object) is too deep; 0 refuses every message.
    #[must_use]
    pub const fn with_max_depth(mut self, depth: usize) -> Self {
        self.max_depth = if depth < MAX_DEPTH_CAP {
            depth
        } else {
            MAX_DEPTH_CAP
        };
        self
    }

    /// Sets the most messages accepted in one batch.
    #[must_use]
    pub const fn with_max_batch_len(mut self, len: usize) -> Self {
        self.max_batch_len = len;
        self
    }

    /// The deepest nesting accepted in a text.
    pub const fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The most messages accepted in one batch.
    pub const fn max_batch_len(&self) -> usize {
        self.max_batch_len
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}

/// What one HTTP body or SSE event held: one message, or (2025-03-26 only) a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A single message.
    Single(Message<'a>),
    /// A batch, in input order. Each element is classified on its own: a malformed
    /// element is an `Err` that deserves its own -32600 response and does not spoil the
    /// others (BATCH-5).
    Batch(Vec<Result<Message<'a>, ShapeError>>),
}

/// Classifies JSON-RPC messages under configured [`Limits`].
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    limits: Limits,
}

/// Classifies one message under default [`Limits`]; see [`Classifier::classify`].
///
/// # Errors
/// As [`Classifier::classify`].
pub fn classify(text: &[u8]) -> Result<Message<'_>, ParseError> {
    Classifier::default().classify(text)
}

/// Classifies one message that is already text (an SSE event's data) under default
/// [`Limits`], without checking UTF-8 again; see [`Classifier::classify_str`].
///
/// # Errors
/// As [`Classifier::classify`].
pub fn classify_str(text: &str) -> Result<Message<'_>, ParseError> {
    Classifier::default().classify_str(text)
}

impl Classifier {
    /// A classifier with these limits.
    pub const fn new(limits: Limits) -> Self {
        Self { limits }
    }

    /// The limits in force.
    pub const fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Classifies one JSON text as a single message (an array is not one).
    ///
    /// The whole text is validated as JSON (RFC 8259, UTF-8), but only the envelope is
    /// decoded: `params`, `result` and `data` come back as [`RawJson`] slices of `text`.
    /// With an integer id and a method without escapes this allocates nothing.
    ///
    /// # Errors
    /// [`ParseError::Json`] (code -32700) when the text is not JSON;
    /// [`ParseError::Shape`] (code -32600, with the id when it could be read) when it is
    /// JSON but not a JSON-RPC message; [`ParseError::UnexpectedBatch`] for an array.
    pub fn classify<'a>(&self, text: &'a [u8]) -> Result<Message<'a>, ParseError> {
        let text = utf8(text)?;
        self.classify_str(text)
    }

    /// As [`Classifier::classify`], for text already known to be UTF-8 (an SSE event's
    /// data is), which skips the UTF-8 check. Empty text (a priming event's data) is a
    /// -32700 "unexpected end"; [`classify_event`](Self::classify_event) skips it.
    ///
    /// # Errors
    /// As [`Classifier::classify`].
    pub fn classify_str<'a>(&self, text: &'a str) -> Result<Message<'a>, ParseError> {
        let mut sc = Scanner::new(text.as_bytes(), self.limits.max_depth);
        let message = match sc.peek() {
            Some(b'{') => object(&mut sc, text)?,
            Some(b'[') => {
                sc.value()?;
                sc.end()?;
                return Err(ParseError::UnexpectedBatch);
            }
            _ => {
                sc.value()?;
                sc.end()?;
                return Err(ShapeError::new(None, Shape::NotAnObject).into());
            }
        };
        sc.end()?;
        message.map_err(ParseError::Shape)
    }

    /// Classifies the data of one SSE event; `Ok(None)` for empty data.
    ///
    /// A SEP-1699 priming event (an `id` and one empty `data` line, sent first on a
    /// resumable stream) carries no message: its empty data is not JSON, and
    /// [`classify_str`](Self::classify_str) would call it a -32700 "unexpected end". A
    /// client records the event's id and skips it; this is that skip, so every event of a
    /// stream can go through one call. Any other data is classified as by `classify_str`
    /// (whitespace alone is still a -32700).
    ///
    /// # Errors
    /// As [`Classifier::classify`].
    pub fn classify_event<'a>(&self, data: &'a str) -> Result<Option<Message<'a>>, ParseError> {
        if data.is_empty() {
            return Ok(None);
        }
        self.classify_str(data).map(Some)
    }

    /// Classifies a body that may be a batch, under the negotiated `version`.
    ///
    /// Batches are accepted for 2025-03-26 only (BATCH-1); later revisions reject them
    /// (BATCH-6). An empty batch is one invalid request (BATCH-5), and `initialize`
    /// inside a batch is an invalid element (BATCH-4, JSONRPC-10). Elements of every kind
    /// are classified; BATCH-2 lists only requests and notifications, or only responses,
    /// in one POST body, and enforcing that (a 400 for a mixed array) is the server's call
    /// with the whole batch in view.
    ///
    /// # Errors
    /// As [`Classifier::classify`], plus [`ParseError::BatchNotAllowed`],
    /// [`ParseError::EmptyBatch`] and [`ParseError::BatchTooLarge`].
    pub fn parse<'a>(
        &self,
        text: &'a [u8],
        version: ProtocolVersion,
    ) -> Result<Parsed<'a>, ParseError> {
        self.parse_str(utf8(text)?, Some(version))
    }

    /// Classifies a text that may be a batch, whatever the revision: for tools that only
    /// look (a log viewer, `mcpwire decode`), which have no negotiated version and want
    /// to show what a batch holds rather than refuse it.
    ///
    /// It is [`parse`](Self::parse) under a revision that allows batches: the same
    /// limits, the same errors except [`ParseError::BatchNotAllowed`], which it never
    /// returns. A server or a client decides with `parse` and the negotiated version.
    /// [`ParseError::is_not_json`] tells text that is not meant as JSON-RPC at all
    /// apart from a message that is wrong.
    ///
    /// # Errors
    /// As [`Classifier::parse`], except [`ParseError::BatchNotAllowed`].
    pub fn parse_any<'a>(&self, text: &'a [u8]) -> Result<Parsed<'a>, ParseError> {
        self.parse_str(utf8(text)?, None)
    }

    /// `parse` (`Some(version)`) or `parse_any` (`None`) on text.
    fn parse_str<'a>(
        &self,
        text: &'a str,
        version: Option<ProtocolVersion>,
    ) -> Result<Parsed<'a>, ParseError> {
        if !is_array(text) {
            return self.classify_str(text).map(Parsed::Single);
        }
        let mut items = Vec::new();
        self.batch(text, version, |_, item| items.push(item))?;
        Ok(Parsed::Batch(items))
    }

    /// Classifies a text that is an array as a batch: validates all of it, checks the
    /// revision (`None`: any), then hands `each` every element's extent in `text` and its
    /// classification, in order. The one batch walk of the borrowed and the owned paths.
    pub(super) fn batch<'a>(
        &self,
        text: &'a str,
        version: Option<ProtocolVersion>,
        mut each: impl FnMut(Range<usize>, Result<Message<'a>, ShapeError>),
    ) -> Result<(), ParseError> {
        // Validate the whole text first: invalid JSON is -32700 whatever its shape.
        let mut sc = Scanner::new(text.as_bytes(), self.limits.max_depth);
        sc.value()?;
        sc.end()?;
        if let Some(version) = version.filter(|v| !v.allows_batches()) {
            return Err(ParseError::BatchNotAllowed { version });
        }
        // The first pass proved the text is JSON within the depth limit, counted the same
        // way: this one cannot fail on syntax.
        let mut sc = Scanner::new(text.as_bytes(), self.limits.max_depth);
        sc.enter()?;
        sc.expect(b'[')?;
        if sc.eat(b']') {
            return Err(ParseError::EmptyBatch);
        }
        let mut len = 0;
        loop {
            if len == self.limits.max_batch_len {
                return Err(ParseError::BatchTooLarge {
                    limit: self.limits.max_batch_len,
                });
            }
            let first = sc.peek();
            let start = sc.pos();
            let item = match first {
                Some(b'{') => object(&mut sc, text)?,
                _ => {
                    sc.value()?;
                    Err(ShapeError::new(None, Shape::NotAnObject))
                }
            };
            let item = item.and_then(|m| match m {
                Message::Request(r) if r.method == "initialize" => {
                    Err(ShapeError::new(Some(r.id), Shape::InitializeInBatch))
                }
                m => Ok(m),
            });
            each(start..sc.pos(), item);
            len += 1;
            if !sc.eat(b',') {
                break;
            }
        }
        sc.expect(b']')?;
        sc.leave();
        Ok(())
    }
}

/// Whether the first byte after whitespace is `[`: the text is a batch, or no message.
pub(super) fn is_array(text: &str) -> bool {
    Scanner::new(text.as_bytes(), 0).peek() == Some(b'[')
}

/// `text` as UTF-8, or the -32700 that points at its first bad byte (JSONRPC-1).
pub(super) fn utf8(text: &[u8]) -> Result<&str, ParseError> {
    simdutf8::compat::from_utf8(text).map_err(|e| {
        ParseError::Json(JsonError {
            offset: e.valid_up_to(),
            kind: JsonErrorKind::InvalidUtf8,
        })
    })
}

/// The envelope members, as found.
#[derive(Default)]
struct Members<'a> {
    version_ok: Option<bool>,
    id: Option<IdMember>,
    method: Option<Result<Cow<'a, str>, NotText>>,
    params: Option<RawJson<'a>>,
    result: Option<RawJson<'a>>,
    error: Option<Option<ErrorObject<'a>>>,
    duplicate: Option<&'static str>,
}

/// What the `id` member held.
enum IdMember {
    Id(RequestId),
    Null,
    /// Not an id, and why.
    Invalid(Shape),
}

/// Why a member that must be a string is not one.
#[derive(Clone, Copy)]
enum NotText {
    /// Another kind of value.
    NotAString,
    /// A string holding an unpaired surrogate escape: JSON, but no Unicode text.
    UnpairedSurrogate,
}

/// Scans one object (the cursor is on `{`) and classifies it. The outer `Result` is a
/// JSON error (the text is not JSON); the inner one a shape error (JSON, but not a
/// JSON-RPC message).
fn object<'a>(
    sc: &mut Scanner<'a>,
    text: &'a str,
) -> Result<Result<Message<'a>, ShapeError>, JsonError> {
    let mut m = Members::default();
    sc.peek();
    sc.enter()?;
    sc.expect(b'{')?;
    if !sc.eat(b'}') {
        loop {
            let key = sc.member_key()?;
            let name = member_name(text, key);
            if let Some(name) = name {
                let seen = match name {
                    "jsonrpc" => m.version_ok.is_some(),
                    "id" => m.id.is_some(),
                    "method" => m.method.is_some(),
                    "params" => m.params.is_some(),
                    "result" => m.result.is_some(),
                    _ => m.error.is_some(),
                };
                if seen {
                    // Two `method` members read differently by two parsers is how a
                    // gateway and a backend come to disagree: refuse them all.
                    m.duplicate.get_or_insert(name);
                }
            }
            match name {
                Some("jsonrpc") => {
                    m.version_ok = Some(string_member(sc, text)?.is_ok_and(|v| v == "2.0"));
                }
                Some("id") => m.id = Some(id_member(sc, text)?),
                Some("method") => m.method = Some(string_member(sc, text)?),
                Some("params") => m.params = Some(raw(sc, text)?),
                Some("result") => m.result = Some(raw(sc, text)?),
                Some(_) => m.error = Some(error_member(sc, text)?),
                None => {
                    sc.value()?;
                }
            }
            if !sc.eat(b',') {
                break;
            }
        }
        sc.expect(b'}')?;
    }
    sc.leave();
    Ok(shape(m))
}

/// The envelope member a key names, if any; keys are compared after unescaping, so
/// `"\u006dethod"` is `method`, as it is to every other JSON parser.
fn member_name(text: &str, key: StrToken) -> Option<&'static str> {
    const NAMES: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
    let name = string_value(text, key)?;
    NAMES.into_iter().find(|n| *n == name)
}

/// A string token's value; `None` if it holds an unpaired surrogate.
fn string_value(text: &str, tok: StrToken) -> Option<Cow<'_, str>> {
    let body = &text[tok.start..tok.end];
    if tok.escaped {
        unescape(body).map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(body))
    }
}

/// A member's value if it is a string that holds Unicode text; any other value is
/// scanned past, and the inner error says what it was instead.
#[inline]
fn string_member<'a>(
    sc: &mut Scanner<'a>,
    text: &'a str,
) -> Result<Result<Cow<'a, str>, NotText>, JsonError> {
    if sc.peek() == Some(b'"') {
        let tok = sc.string()?;
        Ok(string_value(text, tok).ok_or(NotText::UnpairedSurrogate))
    } else {
        sc.value()?;
        Ok(Err(NotText::NotAString))
    }
}

fn raw<'a>(sc: &mut Scanner<'a>, text: &'a str) -> Result<RawJson<'a>, JsonError> {
    let (start, end) = sc.value()?;
    Ok(RawJson::validated(&text[start..end]))
}

fn id_member(sc: &mut Scanner<'_>, text: &str) -> Result<IdMember, JsonError> {
    Ok(match sc.peek() {
        Some(b'"') => {
            let tok = sc.string()?;
            match string_value(text, tok) {
                Some(s) => IdMember::Id(RequestId::string(&s)),
                None => IdMember::Invalid(Shape::UnpairedSurrogate("id")),
            }
        }
        Some(b'-' | b'0'..=b'9') => {
            let (start, end) = sc.number()?;
            match integer(&text.as_bytes()[start..end]) {
                Integer::Fits(n) => IdMember::Id(RequestId::int(n)),
                Integer::OutOfRange => IdMember::Invalid(Shape::IdOutOfRange),
                Integer::Fraction => IdMember::Invalid(Shape::InvalidId),
            }
        }
        Some(b'n') => {
            let (start, end) = sc.value()?;
            if &text[start..end] == "null" {
                IdMember::Null
            } else {
                IdMember::Invalid(Shape::InvalidId)
            }
        }
        _ => {
            sc.value()?;
            IdMember::Invalid(Shape::InvalidId)
        }
    })
}

/// What a number token is as an integer.
enum Integer {
    /// An integer in the `i64` range.
    Fits(i64),
    /// Digits only, but outside the `i64` range.
    OutOfRange,
    /// Not an integer token: a fraction or an exponent.
    Fraction,
}

/// A number token as an `i64`: integers are digits only (no fraction, no exponent).
fn integer(token: &[u8]) -> Integer {
    let (negative, digits) = match token.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, token),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Integer::Fraction;
    }
    // Accumulate negatively so i64::MIN fits.
    let mut n: i64 = 0;
    for &d in digits {
        match n
            .checked_mul(10)
            .and_then(|n| n.checked_sub(i64::from(d - b'0')))
        {
            Some(next) => n = next,
            None => return Integer::OutOfRange,
        }
    }
    match if negative { Some(n) } else { n.checked_neg() } {
        Some(n) => Integer::Fits(n),
        None => Integer::OutOfRange,
    }
}

/// Scans the `error` member; `None` inside when it is JSON but not an error object
/// (JSONRPC-4, JSONRPC-6: an integer `code` and a string `message`, each once).
fn error_member<'a>(
    sc: &mut Scanner<'a>,
    text: &'a str,
) -> Result<Option<ErrorObject<'a>>, JsonError> {
    if sc.peek() != Some(b'{') {
        sc.value()?;
        return Ok(None);
    }
    sc.enter()?;
    sc.expect(b'{')?;
    let (mut code, mut message, mut data) = (None, None, None);
    let mut ok = true;
    if !sc.eat(b'}') {
        loop {
            let key = sc.member_key()?;
            match string_value(text, key).as_deref() {
                Some("code") => {
                    let value = if matches!(sc.peek(), Some(b'-' | b'0'..=b'9')) {
                        let (s, e) = sc.number()?;
                        match integer(&text.as_bytes()[s..e]) {
                            Integer::Fits(n) => Some(n),
                            Integer::OutOfRange | Integer::Fraction => None,
                        }
                    } else {
                        sc.value()?;
                        None
                    };
                    ok &= code.is_none() && value.is_some();
                    code = value.map(ErrorCode);
                }
                Some("message") => {
                    let value = string_member(sc, text)?.ok();
                    ok &= message.is_none() && value.is_some();
                    message = value;
                }
                Some("data") => {
                    ok &= data.is_none();
                    data = Some(raw(sc, text)?);
                }
                _ => {
                    sc.value()?;
                }
            }
            if !sc.eat(b',') {
                break;
            }
        }
        sc.expect(b'}')?;
    }
    sc.leave();
    Ok(match (ok, code, message) {
        (true, Some(code), Some(message)) => Some(ErrorObject {
            code,
            message,
            data,
        }),
        _ => None,
    })
}

/// Decides the message kind from the members (JSONRPC-8).
fn shape(m: Members<'_>) -> Result<Message<'_>, ShapeError> {
    let (id, id_present, id_fault) = match m.id {
        Some(IdMember::Id(id)) => (Some(id), true, None),
        Some(IdMember::Null) => (None, true, None),
        Some(IdMember::Invalid(shape)) => (None, true, Some(shape)),
        None => (None, false, None),
    };
    let fail = |id, shape| Err(ShapeError::new(id, shape));
    if let Some(name) = m.duplicate {
        // With two ids, echoing either would take a side: answer with none.
        let id = if name == "id" { None } else { id };
        return fail(id, Shape::DuplicateMember(name));
    }
    match m.version_ok {
        None => return fail(id, Shape::MissingVersion),
        Some(false) => return fail(id, Shape::WrongVersion),
        Some(true) => {}
    }
    if let Some(shape) = id_fault {
        return fail(id, shape);
    }
    match (m.method, m.result, m.error) {
        (Some(method), None, None) => {
            let method = match method {
                Ok(method) => method,
                Err(NotText::NotAString) => return fail(id, Shape::InvalidMethod),
                Err(NotText::UnpairedSurrogate) => {
                    return fail(id, Shape::UnpairedSurrogate("method"));
                }
            };
            if m.params
                .is_some_and(|p| !matches!(p.as_str().as_bytes()[0], b'{' | b'['))
            {
                return fail(id, Shape::InvalidParams);
            }
            match id {
                Some(id) => Ok(Message::Request(Request {
                    id,
                    method,
                    params: m.params,
                })),
                // JSONRPC-2: null is not a request id.
                None if id_present => fail(None, Shape::InvalidId),
                None => Ok(Message::Notification(Notification {
                    method,
                    params: m.params,
                })),
            }
        }
        (None, Some(result), None) => match id {
            Some(id) => Ok(Message::Response(Response { id, result })),
            None => fail(None, Shape::MissingId),
        },
        (None, None, Some(Some(error))) => Ok(Message::Error(ErrorResponse { id, error })),
        (None, None, Some(None)) => fail(id, Shape::InvalidError),
        (None, None, None) => fail(id, Shape::NoMethodOrOutcome),
        _ => fail(id, Shape::Ambiguous),
    }
}
