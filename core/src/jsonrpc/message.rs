//! Classification: one JSON text in, a [`Message`] with borrowed payloads out.

use std::borrow::Cow;
use std::fmt;

use super::error::{ErrorCode, ParseError, Shape, ShapeError};
use super::id::RequestId;
use super::scan::{JsonError, JsonErrorKind, MAX_DEPTH_CAP, Scanner, StrToken, unescape};
use crate::version::ProtocolVersion;

/// A JSON value exactly as it appeared in the input: validated, never parsed into a tree.
///
/// This is how `params`, `result` and error `data` travel: a gateway can forward them
/// byte for byte, and an application deserializes them with the library of its choice.
/// To keep one without copying, slice the buffer it came from:
/// `bytes.slice_ref(raw.as_str().as_bytes())`.
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
    /// data is), which skips the UTF-8 check.
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
        let text = utf8(text)?;
        let mut sc = Scanner::new(text.as_bytes(), self.limits.max_depth);
        if sc.peek() != Some(b'[') {
            return self.classify_str(text).map(Parsed::Single);
        }
        // Validate the whole text first: invalid JSON is -32700 whatever its shape.
        sc.value()?;
        sc.end()?;
        if !version.allows_batches() {
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
        let mut items = Vec::new();
        loop {
            if items.len() == self.limits.max_batch_len {
                return Err(ParseError::BatchTooLarge {
                    limit: self.limits.max_batch_len,
                });
            }
            let item = match sc.peek() {
                Some(b'{') => object(&mut sc, text)?,
                _ => {
                    sc.value()?;
                    Err(ShapeError::new(None, Shape::NotAnObject))
                }
            };
            items.push(item.and_then(|m| match m {
                Message::Request(r) if r.method == "initialize" => {
                    Err(ShapeError::new(Some(r.id), Shape::InitializeInBatch))
                }
                m => Ok(m),
            }));
            if !sc.eat(b',') {
                break;
            }
        }
        sc.expect(b']')?;
        sc.leave();
        Ok(Parsed::Batch(items))
    }
}

fn utf8(text: &[u8]) -> Result<&str, ParseError> {
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
    method: Option<Option<Cow<'a, str>>>,
    params: Option<RawJson<'a>>,
    result: Option<RawJson<'a>>,
    error: Option<Option<ErrorObject<'a>>>,
    duplicate: Option<&'static str>,
}

/// What the `id` member held.
enum IdMember {
    Id(RequestId),
    Null,
    Invalid,
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
                    m.version_ok = Some(string_member(sc, text)?.is_some_and(|v| v == "2.0"));
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

/// A member's value if it is a string (`None` for a string holding an unpaired
/// surrogate); any other value is scanned past and is `None` too.
#[inline]
fn string_member<'a>(
    sc: &mut Scanner<'a>,
    text: &'a str,
) -> Result<Option<Cow<'a, str>>, JsonError> {
    if sc.peek() == Some(b'"') {
        let tok = sc.string()?;
        Ok(string_value(text, tok))
    } else {
        sc.value()?;
        Ok(None)
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
                None => IdMember::Invalid,
            }
        }
        Some(b'-' | b'0'..=b'9') => {
            let (start, end) = sc.number()?;
            match integer(&text.as_bytes()[start..end]) {
                Some(n) => IdMember::Id(RequestId::int(n)),
                None => IdMember::Invalid,
            }
        }
        Some(b'n') => {
            let (start, end) = sc.value()?;
            if &text[start..end] == "null" {
                IdMember::Null
            } else {
                IdMember::Invalid
            }
        }
        _ => {
            sc.value()?;
            IdMember::Invalid
        }
    })
}

/// A number token as an `i64`, if it is an integer in range (no fraction, no exponent).
fn integer(token: &[u8]) -> Option<i64> {
    let (negative, digits) = match token.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, token),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // Accumulate negatively so i64::MIN fits.
    let mut n: i64 = 0;
    for &d in digits {
        n = n.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative { Some(n) } else { n.checked_neg() }
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
                        integer(&text.as_bytes()[s..e])
                    } else {
                        sc.value()?;
                        None
                    };
                    ok &= code.is_none() && value.is_some();
                    code = value.map(ErrorCode);
                }
                Some("message") => {
                    let value = string_member(sc, text)?;
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
    let (id, id_present, id_valid) = match m.id {
        Some(IdMember::Id(id)) => (Some(id), true, true),
        Some(IdMember::Null) => (None, true, true),
        Some(IdMember::Invalid) => (None, true, false),
        None => (None, false, true),
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
    if !id_valid {
        return fail(id, Shape::InvalidId);
    }
    match (m.method, m.result, m.error) {
        (Some(method), None, None) => {
            let Some(method) = method else {
                return fail(id, Shape::InvalidMethod);
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
