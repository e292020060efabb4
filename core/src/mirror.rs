//! Request values mirrored into HTTP headers (revision 2026-07-28): `Mcp-Name` and
//! `Mcp-Param-{Name}` (MODERN-6, MODERN-7, MODERN-8).
//!
//! A 2026-07-28 client copies `params.name` (or `params.uri`) into `Mcp-Name`, and every
//! tool argument the tool's `inputSchema` marks with `x-mcp-header: Name` into
//! `Mcp-Param-Name`, so that intermediaries can route without reading the body. A server
//! checks each copy against the body and answers a disagreement with 400 and -32020
//! (`HeaderMismatch`), because a load balancer that routes on the header and a server
//! that acts on the body must not see two different requests.
//!
//! This module holds both sides' rules, pure functions over bytes and
//! [`serde_json::Value`]s:
//!
//! - [`encode`] and [`encode_str`]: a JSON value as a header value (client);
//! - [`decode`]: a received header value as text (server);
//! - [`compare`] and [`compare_name`]: a header against the body value, as a
//!   [`Comparison`];
//! - [`Mirrors::from_input_schema`]: a tool's `x-mcp-header` annotations, validated
//!   (a client drops a tool whose annotations fail, and logs the [`SchemaError`]);
//!   [`Mirrors::check`] then checks a `tools/call`'s arguments against its `Mcp-Param-*`
//!   headers in one pass (server), and [`Mirrors::encode`] produces them (client);
//! - [`check_name`]: the `Mcp-Name` check of a request (server);
//! - [`ToolMirrors`]: every tool's [`Mirrors`], by name, the table a
//!   [`server::Config`](crate::server::Config) checks `tools/call` against.
//!
//! ```
//! use mcpwire::mirror::{self, Mirrors};
//! use serde_json::json;
//!
//! let schema = json!({"type": "object", "properties": {
//!     "region": {"type": "string", "x-mcp-header": "Region"}}});
//! let mirrors = Mirrors::from_input_schema(&schema)?;
//! let arguments = json!({"region": "Hello, 世界"});
//!
//! // The client's headers...
//! let headers = mirrors.encode(&arguments)?;
//! assert_eq!(headers, [("Mcp-Param-Region".to_owned(),
//!                       "=?base64?SGVsbG8sIOS4lueVjA==?=".to_owned())]);
//! // ...pass the server's check.
//! let pairs = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
//! assert!(mirrors.check(&arguments, pairs).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Decisions where the specification is silent
//!
//! - **Sentinel shape.** A value "looks like the sentinel" when it starts with
//!   `=?base64?` and ends with `?=`, the two markers exact and lowercase. The encoder
//!   wraps any string of that shape, and the decoder decodes any value of that shape
//!   (after trimming), so the one predicate serves both sides. A shape too short to hold
//!   both markers apart (`=?base64?=`) is malformed; a value with only one marker is
//!   literal text.
//! - **Strict base64.** The payload is standard-alphabet base64 with canonical padding
//!   (RFC 4648 §4): no whitespace, no URL-safe alphabet, no missing `=`, and no set bits
//!   after the last byte (§3.5 lets a decoder refuse them; no encoder produces them). The
//!   bytes must be UTF-8. Anything else is [`DecodeError`], which a server answers with
//!   -32020, as the conformance suite expects.
//! - **Characters.** A header value may hold only visible ASCII, space and tab (RFC 9110
//!   field-value without obs-text): any other byte is [`DecodeError::InvalidByte`], as
//!   MODERN-8 says invalid characters are refused. An inner tab in a literal value is
//!   accepted although an encoder would have wrapped it.
//! - **Integers.** A header matches an integer body value when it is written
//!   `-?(0|[1-9][0-9]*)(\.0+)?` and has the same value: `42`, `42.0` and `-0` are
//!   numbers; `+42`, `042`, `4.2e1` and `0x2a` are not, and mismatch (JSON's own number
//!   grammar, and what every integer formatter writes). Values compare exactly as
//!   128-bit integers, so a 64-bit value never rounds. A body number stored as a float
//!   (`42.0` in the JSON text) counts as an integer only when it is integral and within
//!   JavaScript's safe range (±(2^53 − 1)), where the float is exact; any other number
//!   cannot be mirrored ([`Comparison::Unmirrorable`]). The float is the one serde_json
//!   read, which is the value the server acts on (its default parser can miss the
//!   nearest float by one unit near 2^53: `9007199254740991.0` reads as
//!   `9007199254740990`). The encoder writes integers
//!   outside the safe range exactly rather than refusing them: the safe-range rule binds
//!   the tool's argument, and the body carries the same digits.
//! - **Types.** A body value is compared by its own JSON type (a string as text, a
//!   number numerically, a boolean as `true`/`false`), not by the schema's declared
//!   type: the client encodes the value it sends, and a value of the wrong type is the
//!   tool's argument validation to reject.
//! - **Unrecognised and repeated headers.** An `Mcp-Param-*` header that no annotation of
//!   the tool names is ignored (the specification has intermediaries forward such
//!   headers, and only recognised ones are validated); a recognised header that appears
//!   more than once is refused ([`MirrorError::Repeated`]), since the copies could
//!   disagree.
//! - **Annotations.** `type` must be `"string"`, `"integer"` or `"boolean"`, or an array
//!   of exactly one of them and optionally `"null"` (a nullable parameter: null sends no
//!   header). An annotation anywhere other than on a property reached from the root by
//!   `properties` keys alone is an error, found by walking the whole schema: every
//!   keyword's object or array values are walked as schemas except the instance data of
//!   `const`, `enum`, `default` and `examples`, and the keys of a `properties`,
//!   `patternProperties`, `$defs`, `definitions` or `dependentSchemas` map are names,
//!   not keywords. The walk is iterative: no schema depth overflows the stack.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Number, Value};

use crate::jsonrpc::ErrorCode;

/// The opening marker of a base64-encoded header value (MODERN-8): exact, lowercase.
pub const SENTINEL_PREFIX: &str = "=?base64?";

/// The closing marker of a base64-encoded header value (MODERN-8).
pub const SENTINEL_SUFFIX: &str = "?=";

/// The header that mirrors `params.name` or `params.uri` (MODERN-6).
pub const NAME_HEADER: &str = "Mcp-Name";

/// The prefix of the headers that mirror tool arguments (MODERN-7).
pub const PARAM_HEADER_PREFIX: &str = "Mcp-Param-";

/// The `inputSchema` keyword that marks a tool argument for mirroring (MODERN-7).
pub const ANNOTATION: &str = "x-mcp-header";

/// JavaScript's largest safe integer, 2^53 − 1: every integer of at most this magnitude
/// is exact as an `f64`.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

// ---------------------------------------------------------------------------------------
// Encoding (client)
// ---------------------------------------------------------------------------------------

/// Whether a string must travel as `=?base64?…?=` (MODERN-8): it holds a byte outside
/// printable ASCII (non-ASCII, a control character, tab, DEL), starts or ends with a
/// space, or itself looks like the sentinel.
pub fn needs_sentinel(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.iter().any(|b| !(0x20..=0x7e).contains(b))
        || bytes.first() == Some(&b' ')
        || bytes.last() == Some(&b' ')
        || is_sentinel_shaped(bytes)
}

/// A string as a header value (MODERN-8): the string itself when it is safe as it is,
/// otherwise `=?base64?<standard base64 of its UTF-8, padded>?=`.
///
/// The result is always visible ASCII and inner spaces, never starts or ends with a
/// space, and [`decode`]s back to `s`.
pub fn encode_str(s: &str) -> Cow<'_, str> {
    if !needs_sentinel(s) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(
        SENTINEL_PREFIX.len() + s.len().div_ceil(3) * 4 + SENTINEL_SUFFIX.len(),
    );
    out.push_str(SENTINEL_PREFIX);
    STANDARD.encode_string(s, &mut out);
    out.push_str(SENTINEL_SUFFIX);
    Cow::Owned(out)
}

/// A JSON value as a header value (MODERN-8): a string by [`encode_str`], an integer in
/// decimal, a boolean as `true` or `false`; `Ok(None)` for null, which sends no header.
///
/// # Errors
///
/// [`EncodeError::NotPrimitive`] for an object or an array, [`EncodeError::NotInteger`]
/// for a number that is not an exact integer (see the module's decisions).
pub fn encode(value: &Value) -> Result<Option<Cow<'_, str>>, EncodeError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(encode_str(s))),
        Value::Bool(true) => Ok(Some(Cow::Borrowed("true"))),
        Value::Bool(false) => Ok(Some(Cow::Borrowed("false"))),
        Value::Number(n) => match body_integer(n) {
            Some(i) => Ok(Some(Cow::Owned(i.to_string()))),
            None => Err(EncodeError::NotInteger),
        },
        Value::Array(_) | Value::Object(_) => Err(EncodeError::NotPrimitive),
    }
}

/// Why a JSON value cannot be mirrored into a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// An object or an array: only strings, integers and booleans are mirrored (MODERN-7).
    NotPrimitive,
    /// A number with a fraction, or a float beyond the range where it is exact.
    NotInteger,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotPrimitive => "an object or array cannot be mirrored into a header",
            Self::NotInteger => "a number that is not an exact integer cannot be mirrored",
        })
    }
}

impl std::error::Error for EncodeError {}

// ---------------------------------------------------------------------------------------
// Decoding (server)
// ---------------------------------------------------------------------------------------

/// A received `Mcp-Name` or `Mcp-Param-*` value as text (MODERN-8).
///
/// Optional whitespace (space, tab) is trimmed at both ends. A value that then starts
/// with `=?base64?` and ends with `?=` is decoded strictly (standard alphabet, canonical
/// padding, UTF-8); any other value is literal text, borrowed from the input.
///
/// # Errors
///
/// [`DecodeError::InvalidByte`] for a byte that is not visible ASCII, space or tab
/// anywhere in the value; [`DecodeError::InvalidBase64`] and [`DecodeError::NotUtf8`] for
/// a sentinel whose payload fails. Never panics, whatever the input.
pub fn decode(value: &[u8]) -> Result<Cow<'_, str>, DecodeError> {
    if let Some(at) = value.iter().position(|&b| !is_field_byte(b)) {
        return Err(DecodeError::InvalidByte {
            at,
            byte: value[at],
        });
    }
    let trimmed = trim_ows(value);
    if !is_sentinel_shaped(trimmed) {
        // Only visible ASCII, space and tab are left, so this cannot fail.
        return std::str::from_utf8(trimmed)
            .map(Cow::Borrowed)
            .map_err(|_| DecodeError::NotUtf8);
    }
    // `=?base64?=` has both markers, overlapping: no payload fits between them.
    let payload = trimmed
        .get(SENTINEL_PREFIX.len()..trimmed.len() - SENTINEL_SUFFIX.len())
        .ok_or(DecodeError::InvalidBase64)?;
    let bytes = STANDARD
        .decode(payload)
        .map_err(|_| DecodeError::InvalidBase64)?;
    String::from_utf8(bytes)
        .map(Cow::Owned)
        .map_err(|_| DecodeError::NotUtf8)
}

/// Why a received header value is malformed (MODERN-8): a server answers 400 with -32020.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// A byte that is neither visible ASCII (0x21–0x7E), space nor tab: a control
    /// character, DEL, or a non-ASCII byte the client should have base64-encoded.
    InvalidByte {
        /// Its offset in the value as received (before trimming).
        at: usize,
        /// The byte.
        byte: u8,
    },
    /// The payload between `=?base64?` and `?=` is not canonical standard base64 with
    /// padding (or the markers overlap, leaving no payload).
    InvalidBase64,
    /// The base64 payload decodes to bytes that are not UTF-8.
    NotUtf8,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidByte { at, byte } => {
                write!(
                    f,
                    "invalid byte 0x{byte:02x} at offset {at} in header value"
                )
            }
            Self::InvalidBase64 => {
                f.write_str("sentinel payload is not standard base64 with canonical padding")
            }
            Self::NotUtf8 => f.write_str("sentinel payload does not decode to utf-8"),
        }
    }
}

impl std::error::Error for DecodeError {}

// ---------------------------------------------------------------------------------------
// Comparing (server)
// ---------------------------------------------------------------------------------------

/// What became of comparing one mirrored header with its body value.
///
/// Everything but [`Match`](Self::Match) is a request a server rejects with 400 and
/// -32020 (MODERN-6, MODERN-8).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub enum Comparison {
    /// The header carries the body value, or neither has one.
    Match,
    /// The header, decoded, does not equal the body value.
    Mismatch {
        /// The header's text after decoding.
        header: String,
    },
    /// The body has a value and the header is absent.
    MissingHeader,
    /// The header is present and the body value is absent or null.
    UnexpectedHeader,
    /// The header is present but cannot be decoded.
    Malformed(DecodeError),
    /// The body value is of a kind no header can carry (an object, an array, a number
    /// that is not an exact integer), so no header can match it.
    Unmirrorable,
}

impl Comparison {
    /// Whether this is [`Comparison::Match`].
    pub const fn is_match(&self) -> bool {
        matches!(self, Self::Match)
    }
}

/// Compares a received `Mcp-Param-*` header (`None` when absent) with the body value it
/// mirrors (`None` or null when absent) (MODERN-7, MODERN-8).
///
/// A present header is decoded first (a malformed one is [`Comparison::Malformed`]
/// whatever the body holds); then a string compares exactly, case included, an integer
/// numerically, a boolean as `true`/`false`. Never panics.
pub fn compare(header: Option<&[u8]>, body: Option<&Value>) -> Comparison {
    let body = body.filter(|v| !v.is_null());
    let text = match header.map(decode) {
        None => {
            return match body {
                None => Comparison::Match,
                Some(v) if is_mirrorable(v) => Comparison::MissingHeader,
                Some(_) => Comparison::Unmirrorable,
            };
        }
        Some(Err(e)) => return Comparison::Malformed(e),
        Some(Ok(text)) => text,
    };
    let equal = match body {
        None => return Comparison::UnexpectedHeader,
        Some(Value::String(s)) => *s == text,
        Some(Value::Bool(b)) => text == if *b { "true" } else { "false" },
        Some(Value::Number(n)) => match body_integer(n) {
            Some(i) => header_integer(&text) == Some(i),
            None => return Comparison::Unmirrorable,
        },
        Some(_) => return Comparison::Unmirrorable,
    };
    if equal {
        Comparison::Match
    } else {
        Comparison::Mismatch {
            header: text.into_owned(),
        }
    }
}

/// Compares a received `Mcp-Name` header (`None` when absent) with the body's
/// `params.name` or `params.uri` (MODERN-6): decoded as any mirrored value (the sentinel
/// applies to `Mcp-Name` too), then compared exactly. A name is a string: a body value of
/// another type is [`Comparison::Unmirrorable`].
pub fn compare_name(header: Option<&[u8]>, body: Option<&Value>) -> Comparison {
    match body {
        Some(v) if !v.is_null() && !v.is_string() => match header.map(decode) {
            Some(Err(e)) => Comparison::Malformed(e),
            _ => Comparison::Unmirrorable,
        },
        _ => compare(header, body),
    }
}

/// The `params` member `Mcp-Name` mirrors for a method: `name` for `tools/call` and
/// `prompts/get`, `uri` for `resources/read`, none for any other method (MODERN-6).
pub fn name_member(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// The server's `Mcp-Name` check of one request (MODERN-6): for a method that mirrors a
/// name ([`name_member`]), the one `Mcp-Name` among `headers` (names compared without
/// case) must carry `params.<member>`; other methods pass.
///
/// `headers` are (name, value) pairs as received; [`header_pairs`] gives them from an
/// [`http::HeaderMap`]. An absent name in the body is left to the request's own
/// validation (-32602): a header then is unexpected, no header matches.
///
/// # Errors
///
/// [`MirrorError::Header`] when the comparison is not a match, [`MirrorError::Repeated`]
/// when `Mcp-Name` appears more than once.
pub fn check_name<'h>(
    method: &str,
    params: Option<&Value>,
    headers: impl IntoIterator<Item = (&'h str, &'h [u8])>,
) -> Result<(), MirrorError> {
    let Some(member) = name_member(method) else {
        return Ok(());
    };
    let mut found = None;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case(NAME_HEADER) && found.replace(value).is_some() {
            return Err(MirrorError::Repeated {
                header: NAME_HEADER.to_owned(),
            });
        }
    }
    let body = params.and_then(|p| p.get(member));
    match compare_name(found, body) {
        Comparison::Match => Ok(()),
        comparison => Err(MirrorError::Header {
            header: NAME_HEADER.to_owned(),
            comparison,
        }),
    }
}

/// An [`http::HeaderMap`]'s fields as the (name, value) pairs [`check_name`] and
/// [`Mirrors::check`] take, every value of a repeated field included.
pub fn header_pairs(map: &http::HeaderMap) -> impl Iterator<Item = (&str, &[u8])> {
    map.iter().map(|(n, v)| (n.as_str(), v.as_bytes()))
}

/// A request whose mirrored headers disagree with its body (MODERN-6, MODERN-7,
/// MODERN-8): the server answers [`status_hint`](Self::status_hint) (400) with
/// [`jsonrpc_code`](Self::jsonrpc_code) (-32020, `HeaderMismatch`) and the request's id.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MirrorError {
    /// One header did not match its body value.
    Header {
        /// The header, as the specification spells it (`Mcp-Name`, `Mcp-Param-Region`).
        header: String,
        /// How it failed (never [`Comparison::Match`]).
        comparison: Comparison,
    },
    /// A mirrored header appears more than once.
    Repeated {
        /// The header, as the specification spells it.
        header: String,
    },
}

impl MirrorError {
    /// -32020 (`HeaderMismatch`).
    pub const fn jsonrpc_code(&self) -> ErrorCode {
        ErrorCode::HEADER_MISMATCH
    }

    /// 400 Bad Request.
    pub const fn status_hint(&self) -> http::StatusCode {
        http::StatusCode::BAD_REQUEST
    }

    /// The header that failed.
    pub fn header(&self) -> &str {
        match self {
            Self::Header { header, .. } | Self::Repeated { header } => header,
        }
    }
}

impl fmt::Display for MirrorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("header mismatch: ")?;
        match self {
            Self::Repeated { header } => write!(f, "{header} header appears more than once"),
            Self::Header { header, comparison } => match comparison {
                Comparison::Match => write!(f, "{header} header matches"),
                Comparison::Mismatch { header: value } => write!(
                    f,
                    "{header} header value {value:?} does not match the body value"
                ),
                Comparison::MissingHeader => {
                    write!(f, "{header} header is missing (the body has a value)")
                }
                Comparison::UnexpectedHeader => {
                    write!(f, "{header} header is present but the body has no value")
                }
                Comparison::Malformed(e) => write!(f, "{header} header is malformed: {e}"),
                Comparison::Unmirrorable => write!(
                    f,
                    "the body value of {header} is not a string, integer or boolean"
                ),
            },
        }
    }
}

impl std::error::Error for MirrorError {}

// ---------------------------------------------------------------------------------------
// Tool annotations (MODERN-7)
// ---------------------------------------------------------------------------------------

/// The primitive type of a mirrored tool argument (MODERN-7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Primitive {
    /// `"type": "string"`.
    String,
    /// `"type": "integer"`.
    Integer,
    /// `"type": "boolean"`.
    Boolean,
}

impl Primitive {
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "string" => Some(Self::String),
            "integer" => Some(Self::Integer),
            "boolean" => Some(Self::Boolean),
            _ => None,
        }
    }
}

/// One argument a tool mirrors into a header: the annotation's name, the chain of
/// `properties` keys that reaches the argument, and its declared type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mirrored {
    name: String,
    path: Vec<String>,
    primitive: Primitive,
}

impl Mirrored {
    /// The `x-mcp-header` value (`Region`), a non-empty RFC 9110 token.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The header name, `Mcp-Param-` and [`name`](Self::name) (`Mcp-Param-Region`).
    pub fn header_name(&self) -> String {
        format!("{PARAM_HEADER_PREFIX}{}", self.name)
    }

    /// The property keys from the root of `arguments` to the value (never empty).
    pub fn path(&self) -> &[String] {
        &self.path
    }

    /// The declared type.
    pub const fn primitive(&self) -> Primitive {
        self.primitive
    }

    /// The value at [`path`](Self::path) in a call's `arguments`: `None` when absent,
    /// null, or when a step is not an object.
    pub fn value<'a>(&self, arguments: &'a Value) -> Option<&'a Value> {
        self.path
            .iter()
            .try_fold(arguments, |v, key| v.as_object()?.get(key))
            .filter(|v| !v.is_null())
    }
}

/// The arguments one tool mirrors into `Mcp-Param-*` headers, read from its
/// `inputSchema` (MODERN-7): a server keeps one per tool to check calls, a client one per
/// listed tool to produce the headers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Mirrors {
    // INVARIANT: names are valid tokens, unique without case; paths are non-empty.
    entries: Vec<Mirrored>,
}

impl Mirrors {
    /// Reads and validates every `x-mcp-header` annotation of a tool's `inputSchema`.
    ///
    /// An annotation is valid on a property reached from the root by `properties` keys
    /// alone, whose `type` is `string`, `integer` or `boolean` (or one of them and
    /// `null`), when its value is a non-empty RFC 9110 token unique without case among
    /// the tool's annotations. A schema that is not an object has no annotations.
    ///
    /// # Errors
    ///
    /// The first invalid annotation, in document order: a client drops the tool from its
    /// `tools/list` results and logs the error with the tool's name.
    pub fn from_input_schema(input_schema: &Value) -> Result<Self, SchemaError> {
        struct Frame<'a> {
            node: &'a Value,
            pointer: String,
            // The property keys from the root, while only `properties` keys led here.
            path: Option<Vec<String>>,
        }
        let mut entries: Vec<(Mirrored, String)> = Vec::new();
        let mut stack = vec![Frame {
            node: input_schema,
            pointer: String::new(),
            path: Some(Vec::new()),
        }];
        while let Some(Frame {
            node,
            pointer,
            path,
        }) = stack.pop()
        {
            let schema = match node {
                Value::Object(schema) => schema,
                // A schema in a place that takes a list of schemas (`allOf`) or any
                // keyword's array: walk its objects, fail closed.
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Frame {
                            node: item,
                            pointer: format!("{pointer}/{i}"),
                            path: None,
                        });
                    }
                    continue;
                }
                _ => continue,
            };
            if let Some(annotation) = schema.get(ANNOTATION) {
                let mirrored = annotated(schema, annotation, &pointer, path.as_ref())?;
                if let Some((first, first_at)) = entries
                    .iter()
                    .find(|(m, _)| m.name.eq_ignore_ascii_case(&mirrored.name))
                {
                    return Err(SchemaError {
                        location: pointer,
                        kind: SchemaErrorKind::Duplicate {
                            name: mirrored.name,
                            first: first.name.clone(),
                            first_at: first_at.clone(),
                        },
                    });
                }
                entries.push((mirrored, pointer.clone()));
            }
            // Pushed in reverse, popped in document order.
            for (key, value) in schema.iter().rev() {
                let at = format!("{pointer}/{}", escape_pointer(key));
                match key.as_str() {
                    ANNOTATION | "const" | "enum" | "default" | "examples" => {}
                    "properties" | "patternProperties" | "$defs" | "definitions"
                    | "dependentSchemas"
                        if value.is_object() =>
                    {
                        let reach = if key == "properties" {
                            path.as_ref()
                        } else {
                            None
                        };
                        for (name, sub) in value.as_object().into_iter().flatten().rev() {
                            stack.push(Frame {
                                node: sub,
                                pointer: format!("{at}/{}", escape_pointer(name)),
                                path: reach.map(|p| {
                                    let mut p = p.clone();
                                    p.push(name.clone());
                                    p
                                }),
                            });
                        }
                    }
                    _ => stack.push(Frame {
                        node: value,
                        pointer: at,
                        path: None,
                    }),
                }
            }
        }
        Ok(Self {
            entries: entries.into_iter().map(|(m, _)| m).collect(),
        })
    }

    /// The mirrored arguments, in document order.
    pub fn iter(&self) -> std::slice::Iter<'_, Mirrored> {
        self.entries.iter()
    }

    /// How many arguments the tool mirrors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the tool mirrors no argument.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The server's check of a `tools/call` (MODERN-7, MODERN-8): every mirrored argument
    /// of `arguments` against its `Mcp-Param-*` header among `headers`, in one pass over
    /// the headers.
    ///
    /// Header names compare without case. An `Mcp-Param-*` header no annotation names is
    /// ignored; an argument that is absent or null expects no header. `headers` are
    /// (name, value) pairs as received ([`header_pairs`] for an [`http::HeaderMap`]).
    ///
    /// # Errors
    ///
    /// The first failing argument, in document order ([`MirrorError::Header`]), or a
    /// recognised header that appears twice ([`MirrorError::Repeated`]).
    pub fn check<'h>(
        &self,
        arguments: &Value,
        headers: impl IntoIterator<Item = (&'h str, &'h [u8])>,
    ) -> Result<(), MirrorError> {
        if self.entries.is_empty() {
            return Ok(());
        }
        let mut received: Vec<Option<&[u8]>> = vec![None; self.entries.len()];
        for (name, value) in headers {
            let Some(suffix) = strip_prefix_ignore_case(name, PARAM_HEADER_PREFIX) else {
                continue;
            };
            let Some((m, slot)) = self
                .entries
                .iter()
                .zip(received.iter_mut())
                .find(|(m, _)| m.name.eq_ignore_ascii_case(suffix))
            else {
                continue;
            };
            if slot.replace(value).is_some() {
                return Err(MirrorError::Repeated {
                    header: m.header_name(),
                });
            }
        }
        for (m, header) in self.entries.iter().zip(received) {
            match compare(header, m.value(arguments)) {
                Comparison::Match => {}
                comparison => {
                    return Err(MirrorError::Header {
                        header: m.header_name(),
                        comparison,
                    });
                }
            }
        }
        Ok(())
    }

    /// The client's `Mcp-Param-*` headers for a call's `arguments` (MODERN-7, MODERN-8):
    /// (header name, value) for every mirrored argument present and not null, in document
    /// order. Both are visible ASCII, valid for any HTTP library's header types.
    ///
    /// # Errors
    ///
    /// The first argument whose value cannot be mirrored (an object, an array, a
    /// fraction), with its header.
    pub fn encode(&self, arguments: &Value) -> Result<Vec<(String, String)>, ParamEncodeError> {
        let mut headers = Vec::new();
        for m in &self.entries {
            let Some(value) = m.value(arguments) else {
                continue;
            };
            match encode(value) {
                Ok(Some(text)) => headers.push((m.header_name(), text.into_owned())),
                Ok(None) => {}
                Err(error) => {
                    return Err(ParamEncodeError {
                        header: m.header_name(),
                        error,
                    });
                }
            }
        }
        Ok(headers)
    }
}

impl<'a> IntoIterator for &'a Mirrors {
    type Item = &'a Mirrored;
    type IntoIter = std::slice::Iter<'a, Mirrored>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A tool argument the client cannot mirror into its header ([`Mirrors::encode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParamEncodeError {
    /// The header (`Mcp-Param-Region`).
    pub header: String,
    /// Why.
    pub error: EncodeError,
}

impl fmt::Display for ParamEncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.header, self.error)
    }
}

impl std::error::Error for ParamEncodeError {}

/// An invalid `x-mcp-header` annotation (MODERN-7): where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaError {
    /// The JSON Pointer (RFC 6901) of the annotated schema within `inputSchema`, e.g.
    /// `/properties/region` (empty for the root).
    pub location: String,
    /// What is wrong.
    pub kind: SchemaErrorKind,
}

/// What is wrong with an `x-mcp-header` annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaErrorKind {
    /// The annotation is not on a property reached from the root by `properties` keys
    /// alone (it is at the root, or under `items`, `anyOf`, `$ref`'d `$defs`,
    /// `additionalProperties`, …).
    Unreachable,
    /// The annotation's value is not a string.
    NotAString,
    /// The annotation's value is the empty string.
    Empty,
    /// The annotation's value is not an RFC 9110 token (`1*tchar`).
    NotAToken {
        /// The value.
        name: String,
    },
    /// The property's `type` is not `string`, `integer` or `boolean` (`number`, `object`,
    /// `array`, several types, or none).
    NotPrimitive {
        /// The annotation's value.
        name: String,
    },
    /// Another annotation of the tool has the same name, without regard to case.
    Duplicate {
        /// This annotation's value.
        name: String,
        /// The earlier annotation's value.
        first: String,
        /// The earlier annotation's location (a JSON Pointer).
        first_at: String,
    },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.location.is_empty() {
            "the schema root"
        } else {
            &self.location
        };
        write!(f, "invalid {ANNOTATION} at {at}: ")?;
        match &self.kind {
            SchemaErrorKind::Unreachable => {
                f.write_str("not on a property reached from the root through \"properties\" alone")
            }
            SchemaErrorKind::NotAString => f.write_str("the value is not a string"),
            SchemaErrorKind::Empty => f.write_str("the value is empty"),
            SchemaErrorKind::NotAToken { name } => {
                write!(f, "{name:?} is not an http token")
            }
            SchemaErrorKind::NotPrimitive { name } => write!(
                f,
                "{name:?} is on a property whose type is not string, integer or boolean"
            ),
            SchemaErrorKind::Duplicate {
                name,
                first,
                first_at,
            } => write!(
                f,
                "{name:?} repeats {first:?} at {first_at} (names are unique without case)"
            ),
        }
    }
}

impl std::error::Error for SchemaError {}

// ---------------------------------------------------------------------------------------
// A server's tools (MODERN-7)
// ---------------------------------------------------------------------------------------

/// The mirrored arguments of the tools a server serves, by tool name (MODERN-7): what its
/// core checks each 2026-07-28 `tools/call` against
/// ([`Config::with_tool_mirrors`](crate::server::Config::with_tool_mirrors)).
///
/// Only tools with at least one annotation are kept: a tool absent from the table mirrors
/// nothing, and its calls are checked for `Mcp-Name` alone. Looking a tool up is one
/// ordered-map lookup (no hashing, so no random seed).
///
/// ```
/// use mcpwire::mirror::ToolMirrors;
/// use serde_json::json;
///
/// let region = json!({"type": "object", "properties": {
///     "region": {"type": "string", "x-mcp-header": "Region"}}});
/// let plain = json!({"type": "object", "properties": {"text": {"type": "string"}}});
/// let tools = ToolMirrors::from_schemas([("deploy", &region), ("echo", &plain)])?;
/// assert_eq!(tools.len(), 1);
/// assert!(tools.get("echo").is_none());
/// assert_eq!(tools.get("deploy").map(|m| m.len()), Some(1));
/// # Ok::<(), mcpwire::mirror::ToolSchemaError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolMirrors {
    // INVARIANT: no entry is empty.
    tools: BTreeMap<String, Mirrors>,
}

impl ToolMirrors {
    /// An empty table: no tool mirrors anything.
    pub const fn new() -> Self {
        Self {
            tools: BTreeMap::new(),
        }
    }

    /// The table of tools given as (name, `inputSchema`) pairs, each schema read with
    /// [`Mirrors::from_input_schema`]. A name given twice keeps its first schema's
    /// mirrors, as a tool table routes a call to the first tool of that name.
    ///
    /// # Errors
    ///
    /// The first tool, in the order given, whose annotations are invalid, named, with
    /// its [`SchemaError`]: a server must not serve a tool whose calls it cannot check.
    pub fn from_schemas<'a, N: Into<String>>(
        tools: impl IntoIterator<Item = (N, &'a Value)>,
    ) -> Result<Self, ToolSchemaError> {
        let mut table = Self::new();
        for (name, schema) in tools {
            let name = name.into();
            let mirrors = match Mirrors::from_input_schema(schema) {
                Ok(mirrors) => mirrors,
                Err(error) => return Err(ToolSchemaError { tool: name, error }),
            };
            if !mirrors.is_empty() {
                table.tools.entry(name).or_insert(mirrors);
            }
        }
        Ok(table)
    }

    /// Sets `tool`'s mirrors, returning those it replaces; empty `mirrors` remove the
    /// tool (a tool that mirrors nothing needs no entry).
    pub fn insert(&mut self, tool: impl Into<String>, mirrors: Mirrors) -> Option<Mirrors> {
        let tool = tool.into();
        if mirrors.is_empty() {
            self.tools.remove(&tool)
        } else {
            self.tools.insert(tool, mirrors)
        }
    }

    /// Removes `tool`, returning its mirrors.
    pub fn remove(&mut self, tool: &str) -> Option<Mirrors> {
        self.tools.remove(tool)
    }

    /// The mirrors of `tool`: `None` when it mirrors nothing (or is unknown).
    pub fn get(&self, tool: &str) -> Option<&Mirrors> {
        self.tools.get(tool)
    }

    /// How many tools mirror at least one argument.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool mirrors anything.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools and their mirrors, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Mirrors)> {
        self.tools.iter().map(|(name, m)| (name.as_str(), m))
    }

    /// The most arguments one tool mirrors (0 for an empty table): a server reads at
    /// least this many `Mcp-Param-*` headers, so a conforming call is never refused as
    /// having too many. Walks the table.
    pub fn widest(&self) -> usize {
        self.tools.values().map(Mirrors::len).max().unwrap_or(0)
    }
}

/// A tool whose `inputSchema` has an invalid `x-mcp-header` annotation
/// ([`ToolMirrors::from_schemas`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolSchemaError {
    /// The tool's name.
    pub tool: String,
    /// What is wrong with its schema.
    pub error: SchemaError,
}

impl fmt::Display for ToolSchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tool {:?}: {}", self.tool, self.error)
    }
}

impl std::error::Error for ToolSchemaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Validates one annotation found on `schema` (at `pointer`, reached by `path` when only
/// `properties` keys led there).
fn annotated(
    schema: &Map<String, Value>,
    annotation: &Value,
    pointer: &str,
    path: Option<&Vec<String>>,
) -> Result<Mirrored, SchemaError> {
    let error = |kind| SchemaError {
        location: pointer.to_owned(),
        kind,
    };
    let path = match path {
        Some(path) if !path.is_empty() => path,
        _ => return Err(error(SchemaErrorKind::Unreachable)),
    };
    let Value::String(name) = annotation else {
        return Err(error(SchemaErrorKind::NotAString));
    };
    if name.is_empty() {
        return Err(error(SchemaErrorKind::Empty));
    }
    if !is_token(name) {
        return Err(error(SchemaErrorKind::NotAToken { name: name.clone() }));
    }
    let Some(primitive) = declared_primitive(schema) else {
        return Err(error(SchemaErrorKind::NotPrimitive { name: name.clone() }));
    };
    Ok(Mirrored {
        name: name.clone(),
        path: path.clone(),
        primitive,
    })
}

/// `type` as one primitive: a name, or an array of one name and optionally `"null"`.
fn declared_primitive(schema: &Map<String, Value>) -> Option<Primitive> {
    match schema.get("type")? {
        Value::String(name) => Primitive::from_name(name),
        Value::Array(names) => {
            let mut found = None;
            for name in names {
                match name.as_str()? {
                    "null" => {}
                    name if found.is_none() => found = Some(Primitive::from_name(name)?),
                    _ => return None,
                }
            }
            found
        }
        _ => None,
    }
}

/// Whether `s` is an RFC 9110 token (`1*tchar`), the syntax of a header name.
pub fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn is_sentinel_shaped(value: &[u8]) -> bool {
    value.starts_with(SENTINEL_PREFIX.as_bytes()) && value.ends_with(SENTINEL_SUFFIX.as_bytes())
}

/// Visible ASCII, space or tab: RFC 9110 field-value bytes without obs-text.
const fn is_field_byte(b: u8) -> bool {
    matches!(b, b'\t' | 0x20..=0x7e)
}

fn trim_ows(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| s.get(prefix.len()..))
        .flatten()
}

fn escape_pointer(key: &str) -> Cow<'_, str> {
    if key.contains(['~', '/']) {
        Cow::Owned(key.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(key)
    }
}

fn is_mirrorable(value: &Value) -> bool {
    match value {
        Value::String(_) | Value::Bool(_) => true,
        Value::Number(n) => body_integer(n).is_some(),
        _ => false,
    }
}

/// A body number as an exact integer: any `i64` or `u64`, or a float that is integral
/// and within the safe range (where `f64` holds every integer exactly).
fn body_integer(n: &Number) -> Option<i128> {
    if let Some(i) = n.as_i64() {
        return Some(i.into());
    }
    if let Some(u) = n.as_u64() {
        return Some(u.into());
    }
    let f = n.as_f64()?;
    // `MAX_SAFE_INTEGER as f64` is exact (2^53 − 1 < 2^53), and so is the cast back for
    // an integral `f` within it.
    (f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64).then_some(f as i128)
}

/// A header's text as an integer: `-?(0|[1-9][0-9]*)(\.0+)?`, within `i128`.
fn header_integer(text: &str) -> Option<i128> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (digits, fraction) = match rest.split_once('.') {
        Some((digits, fraction)) => (digits, Some(fraction)),
        None => (rest, None),
    };
    if let Some(fraction) = fraction {
        if fraction.is_empty() || fraction.bytes().any(|b| b != b'0') {
            return None;
        }
    }
    let bytes = digits.as_bytes();
    if bytes.is_empty() || (bytes.len() > 1 && bytes[0] == b'0') {
        return None;
    }
    let mut value: i128 = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn dec(value: &str) -> Result<Cow<'_, str>, DecodeError> {
        decode(value.as_bytes())
    }

    fn cmp(header: Option<&str>, body: &Value) -> Comparison {
        compare(header.map(str::as_bytes), Some(body))
    }

    /// A body value from JSON text, so that `42.0` is the float serde_json makes of it.
    fn body(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    // --- MODERN-8: encoding -----------------------------------------------------------

    #[test]
    fn modern_8_plain_strings_go_as_they_are() {
        for s in [
            "us-west1",
            "",
            "a b",
            "tools/call",
            "=?base64?",
            "x?=",
            "Hello, World!",
        ] {
            assert!(matches!(encode_str(s), Cow::Borrowed(b) if b == s), "{s:?}");
        }
    }

    #[test]
    fn modern_8_spec_encoding_examples() {
        for (value, header) in [
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ] {
            assert_eq!(encode_str(value), header);
            assert_eq!(dec(header).unwrap(), value);
        }
    }

    #[test]
    fn modern_8_whitespace_controls_and_sentinel_shapes_are_wrapped() {
        for s in [
            " lead",
            "trail ",
            "\tx",
            "a\tb",
            "a\rb",
            "nul\0",
            "del\x7f",
            "é",
            "=?base64??=",
            "=?base64?=",
        ] {
            assert!(needs_sentinel(s), "{s:?}");
            let encoded = encode_str(s);
            assert!(encoded.starts_with(SENTINEL_PREFIX) && encoded.ends_with(SENTINEL_SUFFIX));
            assert_eq!(dec(&encoded).unwrap(), s);
        }
    }

    #[test]
    fn modern_8_integers_in_decimal_booleans_as_words_null_as_nothing() {
        let enc = |v: Value| encode(&v).map(|o| o.map(Cow::into_owned));
        assert_eq!(enc(json!(42)), Ok(Some("42".into())));
        assert_eq!(enc(json!(-7)), Ok(Some("-7".into())));
        assert_eq!(enc(json!(u64::MAX)), Ok(Some(u64::MAX.to_string())));
        assert_eq!(enc(json!(i64::MIN)), Ok(Some(i64::MIN.to_string())));
        assert_eq!(enc(body("42.0")), Ok(Some("42".into())));
        assert_eq!(enc(json!(true)), Ok(Some("true".into())));
        assert_eq!(enc(json!(false)), Ok(Some("false".into())));
        assert_eq!(enc(json!(null)), Ok(None));
        assert_eq!(enc(json!(3.5)), Err(EncodeError::NotInteger));
        assert_eq!(enc(body("1e300")), Err(EncodeError::NotInteger));
        assert_eq!(enc(json!([1])), Err(EncodeError::NotPrimitive));
        assert_eq!(enc(json!({"a": 1})), Err(EncodeError::NotPrimitive));
    }

    // --- MODERN-8: decoding -----------------------------------------------------------

    #[test]
    fn modern_8_decode_trims_optional_whitespace() {
        assert_eq!(dec("  name  ").unwrap(), "name");
        assert_eq!(dec("\t name\t").unwrap(), "name");
        assert_eq!(dec(" =?base64?SGVsbG8=?= \t").unwrap(), "Hello");
        assert_eq!(dec("   ").unwrap(), "");
        assert_eq!(dec("").unwrap(), "");
        assert_eq!(dec("a \t b").unwrap(), "a \t b");
    }

    #[test]
    fn modern_8_sentinel_decodes_standard_base64() {
        assert_eq!(dec("=?base64?SGVsbG8=?=").unwrap(), "Hello");
        assert_eq!(
            dec("=?base64?SGVsbG8sIOS4lueVjA==?=").unwrap(),
            "Hello, 世界"
        );
        assert_eq!(dec("=?base64?+/+/?=").unwrap_err(), DecodeError::NotUtf8);
        assert_eq!(dec("=?base64??=").unwrap(), "");
    }

    #[test]
    fn modern_8_sentinel_requires_padding() {
        assert_eq!(dec("=?base64?SGVsbG8?="), Err(DecodeError::InvalidBase64));
        assert_eq!(dec("=?base64?SGVsbA?="), Err(DecodeError::InvalidBase64));
        assert_eq!(dec("=?base64?SGVsbA=?="), Err(DecodeError::InvalidBase64));
        assert_eq!(dec("=?base64?SGVsbG8==?="), Err(DecodeError::InvalidBase64));
    }

    #[test]
    fn modern_8_sentinel_rejects_characters_outside_the_alphabet() {
        for v in [
            "=?base64?SGVs!!!bG8=?=",
            "=?base64?SGVs bG8=?=",
            "=?base64?SGVs\tbG8=?=",
            "=?base64?_-8=?=",
            "=?base64?SGVsbG8=SGVs?=",
            "=?base64?=SGVsbG8?=",
        ] {
            assert_eq!(dec(v), Err(DecodeError::InvalidBase64), "{v:?}");
        }
    }

    #[test]
    fn modern_8_sentinel_rejects_non_canonical_trailing_bits() {
        assert_eq!(dec("=?base64?SGVsbG8=?=").unwrap(), "Hello");
        assert_eq!(dec("=?base64?SGVsbG9=?="), Err(DecodeError::InvalidBase64));
    }

    #[test]
    fn modern_8_sentinel_must_decode_to_utf8() {
        // 0xff 0xfe
        assert_eq!(dec("=?base64?//4=?="), Err(DecodeError::NotUtf8));
    }

    #[test]
    fn modern_8_one_marker_alone_is_literal() {
        assert_eq!(dec("=?base64?SGVsbG8=").unwrap(), "=?base64?SGVsbG8=");
        assert_eq!(dec("SGVsbG8=?=").unwrap(), "SGVsbG8=?=");
        assert_eq!(dec("SGVsbG8=").unwrap(), "SGVsbG8=");
        assert_eq!(dec("x=?base64?SGVsbG8=?=").unwrap(), "x=?base64?SGVsbG8=?=");
    }

    #[test]
    fn modern_8_sentinel_markers_are_case_sensitive() {
        assert_eq!(dec("=?BASE64?SGVsbG8=?=").unwrap(), "=?BASE64?SGVsbG8=?=");
        assert_eq!(dec("=?Base64?SGVsbG8=?=").unwrap(), "=?Base64?SGVsbG8=?=");
    }

    #[test]
    fn modern_8_overlapping_markers_are_malformed() {
        assert_eq!(dec("=?base64?="), Err(DecodeError::InvalidBase64));
        assert_eq!(dec(" =?base64?= "), Err(DecodeError::InvalidBase64));
    }

    #[test]
    fn modern_8_invalid_characters_are_refused() {
        for (value, at, byte) in [
            (&b"a\rb"[..], 1, b'\r'),
            (b"a\nb", 1, b'\n'),
            (b"\0", 0, 0),
            (b"x\x7f", 1, 0x7f),
            (b"caf\xc3\xa9", 3, 0xc3),
            (b"=?base64?SGVsbG8=?=\xff", 19, 0xff),
        ] {
            assert_eq!(
                decode(value),
                Err(DecodeError::InvalidByte { at, byte }),
                "{value:?}"
            );
        }
    }

    // --- MODERN-8: comparing ----------------------------------------------------------

    #[test]
    fn modern_8_integers_compare_numerically() {
        for (header, value) in [
            ("42", "42"),
            ("42", "42.0"),
            ("42.0", "42"),
            ("42.000", "42"),
            ("-7", "-7"),
            ("0", "0"),
            ("-0", "0"),
            ("0", "-0.0"),
            ("=?base64?NDI=?=", "42"),
            (" 42 ", "42"),
            ("18446744073709551615", "18446744073709551615"),
            ("-9223372036854775808", "-9223372036854775808"),
            ("123456789", "123456789.0"),
            ("9007199254740991", "9007199254740991"),
            ("100", "1e2"),
        ] {
            assert_eq!(
                cmp(Some(header), &body(value)),
                Comparison::Match,
                "{header} {value}"
            );
        }
        for (header, value) in [
            ("+42", "42"),
            ("042", "42"),
            ("4.2e1", "42"),
            ("0x2a", "42"),
            ("42.", "42"),
            ("42.5", "42"),
            (".0", "0"),
            ("-", "0"),
            ("43", "42"),
            ("42 0", "42"),
            ("9007199254740993", "9007199254740992"),
            ("18446744073709551616", "18446744073709551615"),
            ("99999999999999999999999999999999999999999", "1"),
        ] {
            assert!(
                matches!(cmp(Some(header), &body(value)), Comparison::Mismatch { .. }),
                "{header} {value}"
            );
        }
    }

    #[test]
    fn modern_8_numbers_that_are_not_exact_integers_cannot_match() {
        for value in ["3.5", "1e300", "9007199254740992.0", "-1e16"] {
            assert_eq!(cmp(Some("3.5"), &body(value)), Comparison::Unmirrorable);
            assert_eq!(compare(None, Some(&body(value))), Comparison::Unmirrorable);
        }
        assert_eq!(cmp(Some("x"), &json!({})), Comparison::Unmirrorable);
        assert_eq!(cmp(Some("x"), &json!([])), Comparison::Unmirrorable);
    }

    #[test]
    fn modern_8_strings_compare_exactly() {
        assert_eq!(cmp(Some("Hello"), &json!("Hello")), Comparison::Match);
        assert_eq!(
            cmp(Some("hello"), &json!("Hello")),
            Comparison::Mismatch {
                header: "hello".into()
            }
        );
        // A string body is text, never a number.
        assert!(matches!(
            cmp(Some("42.0"), &json!("42")),
            Comparison::Mismatch { .. }
        ));
        assert_eq!(cmp(Some(""), &json!("")), Comparison::Match);
    }

    #[test]
    fn modern_8_booleans_compare_as_true_and_false() {
        assert_eq!(cmp(Some("true"), &json!(true)), Comparison::Match);
        assert_eq!(cmp(Some("false"), &json!(false)), Comparison::Match);
        for header in ["True", "TRUE", "1", "false", "yes"] {
            assert!(matches!(
                cmp(Some(header), &json!(true)),
                Comparison::Mismatch { .. }
            ));
        }
    }

    #[test]
    fn modern_8_absent_and_null_values_expect_no_header() {
        assert_eq!(compare(None, None), Comparison::Match);
        assert_eq!(compare(None, Some(&json!(null))), Comparison::Match);
        assert_eq!(compare(None, Some(&json!("x"))), Comparison::MissingHeader);
        assert_eq!(compare(None, Some(&json!(0))), Comparison::MissingHeader);
        assert_eq!(compare(Some(b"x"), None), Comparison::UnexpectedHeader);
        assert_eq!(
            compare(Some(b"null"), Some(&json!(null))),
            Comparison::UnexpectedHeader
        );
        // A malformed header is reported as such, whatever the body.
        assert_eq!(
            compare(Some(b"a\nb"), None),
            Comparison::Malformed(DecodeError::InvalidByte { at: 1, byte: b'\n' })
        );
    }

    // --- MODERN-6: Mcp-Name -----------------------------------------------------------

    fn name_check(
        method: &str,
        params: &Value,
        headers: &[(&str, &[u8])],
    ) -> Result<(), MirrorError> {
        check_name(method, Some(params), headers.iter().copied())
    }

    /// `http-header-validation`: the `Mcp-Name` cases the conformance suite sends.
    #[test]
    fn modern_6_conformance_mcp_name_cases() {
        let params = json!({"name": "test_simple_text", "arguments": {}});
        let ok = |headers: &[(&str, &[u8])]| name_check("tools/call", &params, headers);
        assert_eq!(ok(&[("mcp-name", b"test_simple_text")]), Ok(()));
        assert_eq!(ok(&[("Mcp-Name", b"  test_simple_text  ")]), Ok(()));
        assert_eq!(ok(&[("MCP-NAME", b"test_simple_text")]), Ok(()));
        let err = ok(&[("Mcp-Name", b"wrong_tool_name")]).unwrap_err();
        assert_eq!(err.jsonrpc_code(), ErrorCode::HEADER_MISMATCH);
        assert_eq!(err.status_hint(), http::StatusCode::BAD_REQUEST);
        assert_eq!(
            err.to_string(),
            "header mismatch: Mcp-Name header value \"wrong_tool_name\" does not match the body value"
        );
        assert_eq!(
            ok(&[("Mcp-Method", b"tools/call")]),
            Err(MirrorError::Header {
                header: "Mcp-Name".into(),
                comparison: Comparison::MissingHeader
            })
        );
        assert!(ok(&[("Mcp-Name", b"TEST_SIMPLE_TEXT")]).is_err());
    }

    #[test]
    fn modern_6_name_sentinel_uri_and_other_methods() {
        let tool = json!({"name": "héllo"});
        assert_eq!(
            name_check("tools/call", &tool, &[("mcp-name", b"=?base64?aMOpbGxv?=")]),
            Ok(())
        );
        let read = json!({"uri": "file:///a b.txt"});
        assert_eq!(
            name_check("resources/read", &read, &[("mcp-name", b"file:///a b.txt")]),
            Ok(())
        );
        assert!(name_check("resources/read", &read, &[("mcp-name", b"file:///a")]).is_err());
        let prompt = json!({"name": "review"});
        assert_eq!(
            name_check("prompts/get", &prompt, &[("mcp-name", b"review")]),
            Ok(())
        );
        assert!(name_check("prompts/get", &prompt, &[]).is_err());
        // Methods without a mirrored name pass, header or not.
        assert_eq!(
            name_check("tools/list", &json!({}), &[("mcp-name", b"x")]),
            Ok(())
        );
        assert_eq!(name_member("tools/list"), None);
        // Repeated, malformed, and a name that is not a string.
        assert_eq!(
            name_check(
                "prompts/get",
                &prompt,
                &[("mcp-name", b"review"), ("Mcp-Name", b"review")]
            ),
            Err(MirrorError::Repeated {
                header: "Mcp-Name".into()
            })
        );
        assert!(matches!(
            name_check(
                "prompts/get",
                &prompt,
                &[("mcp-name", b"=?base64?cmV2aWV3?=")]
            ),
            Ok(())
        ));
        assert!(matches!(
            name_check(
                "prompts/get",
                &prompt,
                &[("mcp-name", b"=?base64?cmV2aWV3?=x")]
            ),
            Err(MirrorError::Header { .. })
        ));
        assert_eq!(
            compare_name(Some(b"42"), Some(&json!(42))),
            Comparison::Unmirrorable
        );
        assert_eq!(
            compare_name(Some(b"=?base64?x?="), Some(&json!(42))),
            Comparison::Malformed(DecodeError::InvalidBase64)
        );
    }

    #[test]
    fn modern_6_header_pairs_reads_a_header_map() {
        let mut map = http::HeaderMap::new();
        map.insert("mcp-name", http::HeaderValue::from_static(" echo "));
        map.insert("mcp-param-value", http::HeaderValue::from_static("Hello"));
        let params = json!({"name": "echo", "arguments": {"value": "Hello"}});
        assert_eq!(
            check_name("tools/call", Some(&params), header_pairs(&map)),
            Ok(())
        );
        let mirrors = Mirrors::from_input_schema(&tool_schema()).unwrap();
        assert_eq!(
            mirrors.check(&params["arguments"], header_pairs(&map)),
            Ok(())
        );
    }

    // --- MODERN-7: annotations --------------------------------------------------------

    fn tool_schema() -> Value {
        json!({
            "type": "object",
            "properties": {"value": {"type": "string", "x-mcp-header": "Value"}},
            "required": ["value"]
        })
    }

    fn schema_error(schema: Value) -> SchemaError {
        Mirrors::from_input_schema(&schema).unwrap_err()
    }

    /// `http-custom-header-server-validation`: the cases the conformance suite sends.
    #[test]
    fn modern_7_conformance_custom_header_cases() {
        let mirrors = Mirrors::from_input_schema(&tool_schema()).unwrap();
        let check = |value: &str, header: Option<&[u8]>| {
            let arguments = json!({ "value": value });
            let headers = header.map(|h| ("Mcp-Param-Value", h));
            mirrors.check(&arguments, headers)
        };
        assert_eq!(check("Hello", Some(b"=?base64?SGVsbG8=?=")), Ok(()));
        assert_eq!(
            check("Hello", Some(b"=?base64?SGVsbG8?=")),
            Err(MirrorError::Header {
                header: "Mcp-Param-Value".into(),
                comparison: Comparison::Malformed(DecodeError::InvalidBase64)
            })
        );
        assert_eq!(
            check("Hello", Some(b"=?base64?SGVs!!!bG8=?=")),
            Err(MirrorError::Header {
                header: "Mcp-Param-Value".into(),
                comparison: Comparison::Malformed(DecodeError::InvalidBase64)
            })
        );
        assert_eq!(check("SGVsbG8=", Some(b"SGVsbG8=")), Ok(()));
        assert_eq!(
            check("=?base64?SGVsbG8=", Some(b"=?base64?SGVsbG8=")),
            Ok(())
        );
        let missing = check("Hello", None).unwrap_err();
        assert_eq!(missing.jsonrpc_code(), ErrorCode::HEADER_MISMATCH);
        assert_eq!(
            missing.to_string(),
            "header mismatch: Mcp-Param-Value header is missing (the body has a value)"
        );
    }

    #[test]
    fn modern_7_reads_nested_properties_and_types() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "limits": {
                    "type": "object",
                    "properties": {
                        "count": {"type": "integer", "x-mcp-header": "Count"},
                        "deep": {"properties": {"flag": {"type": ["boolean", "null"], "x-mcp-header": "Flag"}}}
                    }
                },
                "x-mcp-header": {"type": "string"},
                "plain": {"type": "string", "default": {"x-mcp-header": 1}, "enum": [{"x-mcp-header": "A"}], "examples": [{"x-mcp-header": ""}], "const": {"x-mcp-header": []}}
            }
        });
        let mirrors = Mirrors::from_input_schema(&schema).unwrap();
        let found: Vec<_> = mirrors
            .iter()
            .map(|m| (m.header_name(), m.path().join("."), m.primitive()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "Mcp-Param-Count".into(),
                    "limits.count".into(),
                    Primitive::Integer
                ),
                (
                    "Mcp-Param-Flag".into(),
                    "limits.deep.flag".into(),
                    Primitive::Boolean
                ),
                (
                    "Mcp-Param-Region".into(),
                    "region".into(),
                    Primitive::String
                ),
            ]
        );
        assert_eq!(mirrors.len(), 3);
        assert!(
            Mirrors::from_input_schema(&json!({"type": "object"}))
                .unwrap()
                .is_empty()
        );
        assert!(Mirrors::from_input_schema(&json!(true)).unwrap().is_empty());
    }

    #[test]
    fn modern_7_annotations_off_the_properties_chain_are_invalid() {
        let leaf = json!({"type": "string", "x-mcp-header": "X"});
        for (schema, location) in [
            (json!({"type": "string", "x-mcp-header": "X"}), ""),
            (
                json!({"properties": {"a": {"type": "array", "items": leaf}}}),
                "/properties/a/items",
            ),
            (
                json!({"properties": {"a": {"items": [leaf]}}}),
                "/properties/a/items/0",
            ),
            (
                json!({"properties": {"a": {"prefixItems": [leaf]}}}),
                "/properties/a/prefixItems/0",
            ),
            (
                json!({"properties": {"a": {"anyOf": [leaf]}}}),
                "/properties/a/anyOf/0",
            ),
            (
                json!({"properties": {"a": {"oneOf": [{"type": "null"}, leaf]}}}),
                "/properties/a/oneOf/1",
            ),
            (
                json!({"allOf": [{"properties": {"a": leaf}}]}),
                "/allOf/0/properties/a",
            ),
            (
                json!({"properties": {"a": {"not": leaf}}}),
                "/properties/a/not",
            ),
            (
                json!({"if": {}, "then": {"properties": {"a": leaf}}}),
                "/then/properties/a",
            ),
            (
                json!({"additionalProperties": leaf}),
                "/additionalProperties",
            ),
            (
                json!({"patternProperties": {"^a$": leaf}}),
                "/patternProperties/^a$",
            ),
            (
                json!({"$defs": {"a/b": leaf}, "properties": {"a": {"$ref": "#/$defs/a~1b"}}}),
                "/$defs/a~1b",
            ),
            (
                json!({"definitions": {"a": {"properties": {"b": leaf}}}}),
                "/definitions/a/properties/b",
            ),
            (
                json!({"dependentSchemas": {"a": {"properties": {"b": leaf}}}}),
                "/dependentSchemas/a/properties/b",
            ),
            (
                json!({"x-vendor": {"properties": {"b": leaf}}}),
                "/x-vendor/properties/b",
            ),
        ] {
            let error = schema_error(schema);
            assert_eq!(
                error,
                SchemaError {
                    location: location.into(),
                    kind: SchemaErrorKind::Unreachable
                }
            );
        }
        assert_eq!(
            schema_error(json!({"type": "string", "x-mcp-header": "X"})).to_string(),
            "invalid x-mcp-header at the schema root: not on a property reached from the root through \"properties\" alone"
        );
    }

    #[test]
    fn modern_7_only_string_integer_and_boolean_properties() {
        for ty in [
            json!("number"),
            json!("object"),
            json!("array"),
            json!("null"),
            json!(["string", "integer"]),
            json!(["null"]),
            json!([]),
            json!(["number", "null"]),
            json!(7),
        ] {
            let schema = json!({"properties": {"a": {"type": ty, "x-mcp-header": "A"}}});
            assert_eq!(
                schema_error(schema).kind,
                SchemaErrorKind::NotPrimitive { name: "A".into() },
                "{ty}"
            );
        }
        let untyped = json!({"properties": {"a": {"x-mcp-header": "A"}}});
        assert_eq!(
            schema_error(untyped).kind,
            SchemaErrorKind::NotPrimitive { name: "A".into() }
        );
        for ty in ["string", "integer", "boolean"] {
            let schema = json!({"properties": {"a": {"type": [ty, "null"], "x-mcp-header": "A"}}});
            assert!(Mirrors::from_input_schema(&schema).is_ok());
        }
    }

    #[test]
    fn modern_7_names_are_non_empty_tokens() {
        let with =
            |name: Value| json!({"properties": {"a": {"type": "string", "x-mcp-header": name}}});
        assert_eq!(schema_error(with(json!(""))).kind, SchemaErrorKind::Empty);
        assert_eq!(
            schema_error(with(json!(1))).kind,
            SchemaErrorKind::NotAString
        );
        assert_eq!(
            schema_error(with(json!(null))).kind,
            SchemaErrorKind::NotAString
        );
        for name in [
            "Two Words",
            "a:b",
            "a\r\nb",
            "Région",
            "a/b",
            "a(b)",
            "a,b",
            "a\"b",
            "a\tb",
        ] {
            assert_eq!(
                schema_error(with(json!(name))).kind,
                SchemaErrorKind::NotAToken { name: name.into() },
                "{name:?}"
            );
        }
        for name in ["Region", "x", "A1", "!#$%&'*+-.^_`|~"] {
            assert!(
                Mirrors::from_input_schema(&with(json!(name))).is_ok(),
                "{name:?}"
            );
        }
    }

    #[test]
    fn modern_7_names_are_unique_without_case() {
        let schema = json!({"properties": {
            "a": {"type": "string", "x-mcp-header": "Region"},
            "b": {"properties": {"c": {"type": "integer", "x-mcp-header": "REGION"}}}
        }});
        let error = schema_error(schema);
        assert_eq!(
            error,
            SchemaError {
                location: "/properties/b/properties/c".into(),
                kind: SchemaErrorKind::Duplicate {
                    name: "REGION".into(),
                    first: "Region".into(),
                    first_at: "/properties/a".into()
                }
            }
        );
        assert_eq!(
            error.to_string(),
            "invalid x-mcp-header at /properties/b/properties/c: \"REGION\" repeats \"Region\" at /properties/a (names are unique without case)"
        );
    }

    #[test]
    fn modern_7_deep_schemas_are_walked_without_recursion() {
        // Deeper than serde_json parses (128), as a schema built in code can be.
        let mut schema = json!({"type": "string", "x-mcp-header": "Deep"});
        for _ in 0..3_000 {
            let mut properties = Map::new();
            properties.insert("a".into(), schema);
            let mut object = Map::new();
            object.insert("properties".into(), Value::Object(properties));
            schema = Value::Object(object);
        }
        let mirrors = Mirrors::from_input_schema(&schema).unwrap();
        assert_eq!(mirrors.iter().next().unwrap().path().len(), 3_000);
        // serde_json drops a value recursively, which this depth overflows: leak it.
        std::mem::forget(schema);
    }

    #[test]
    fn modern_7_tool_table_keeps_tools_with_mirrors() {
        let plain = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        let first = tool_schema();
        let second = json!({"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "A"},
            "b": {"type": "integer", "x-mcp-header": "B"}}});
        let tools =
            ToolMirrors::from_schemas([("echo", &plain), ("t", &first), ("t", &second)]).unwrap();
        assert_eq!(tools.len(), 1, "a tool that mirrors nothing has no entry");
        assert!(tools.get("echo").is_none());
        assert_eq!(
            tools.get("t"),
            Some(&Mirrors::from_input_schema(&first).unwrap()),
            "a name given twice keeps its first schema"
        );
        assert_eq!(tools.widest(), 1);
        let mut tools = tools;
        let wide = Mirrors::from_input_schema(&second).unwrap();
        assert!(tools.insert("w", wide.clone()).is_none());
        assert_eq!(tools.widest(), 2);
        assert_eq!(tools.insert("w", Mirrors::default()), Some(wide));
        assert!(tools.get("w").is_none(), "empty mirrors remove the tool");
        assert_eq!(tools.iter().map(|(n, _)| n).collect::<Vec<_>>(), ["t"]);
        assert!(tools.remove("t").is_some());
        assert!(tools.is_empty());
        assert_eq!(tools.widest(), 0);
    }

    #[test]
    fn modern_7_tool_table_names_the_first_invalid_tool() {
        let good = tool_schema();
        let bad = json!({"type": "object", "properties": {
            "n": {"type": "number", "x-mcp-header": "N"}}});
        let e = ToolMirrors::from_schemas([("good", &good), ("bad", &bad), ("worse", &bad)])
            .unwrap_err();
        assert_eq!(e.tool, "bad");
        assert_eq!(e.error, Mirrors::from_input_schema(&bad).unwrap_err());
        assert!(
            e.to_string()
                .starts_with("tool \"bad\": invalid x-mcp-header at /properties/n"),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn modern_7_check_params_in_one_pass() {
        let schema = json!({"properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}
        }});
        let mirrors = Mirrors::from_input_schema(&schema).unwrap();
        let args = json!({"region": "eu", "opts": {"n": 42}, "dry": null});
        let check = |headers: &[(&str, &[u8])]| mirrors.check(&args, headers.iter().copied());
        assert_eq!(
            check(&[
                ("mcp-param-region", b"eu"),
                ("MCP-PARAM-N", b"42.0"),
                ("x-other", b"\n")
            ]),
            Ok(())
        );
        // An Mcp-Param header no annotation names is ignored.
        assert_eq!(
            check(&[
                ("Mcp-Param-Region", b"eu"),
                ("Mcp-Param-N", b"42"),
                ("Mcp-Param-Zone", b"\x01")
            ]),
            Ok(())
        );
        // A null argument expects no header.
        assert_eq!(
            check(&[
                ("Mcp-Param-Region", b"eu"),
                ("Mcp-Param-N", b"42"),
                ("Mcp-Param-Dry-Run", b"true")
            ]),
            Err(MirrorError::Header {
                header: "Mcp-Param-Dry-Run".into(),
                comparison: Comparison::UnexpectedHeader
            })
        );
        assert_eq!(
            check(&[("Mcp-Param-Region", b"eu"), ("Mcp-Param-N", b"41")]),
            Err(MirrorError::Header {
                header: "Mcp-Param-N".into(),
                comparison: Comparison::Mismatch {
                    header: "41".into()
                }
            })
        );
        assert_eq!(
            check(&[
                ("Mcp-Param-Region", b"eu"),
                ("mcp-param-region", b"eu"),
                ("Mcp-Param-N", b"42")
            ]),
            Err(MirrorError::Repeated {
                header: "Mcp-Param-Region".into()
            })
        );
        assert_eq!(
            check(&[("Mcp-Param-N", b"42")]).unwrap_err().header(),
            "Mcp-Param-Region"
        );
        // Arguments that are not an object hold no values.
        assert_eq!(mirrors.check(&json!(null), std::iter::empty()), Ok(()));
        assert_eq!(Mirrors::default().check(&args, std::iter::empty()), Ok(()));
    }

    #[test]
    fn modern_7_client_encodes_present_arguments() {
        let schema = json!({"properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "flag": {"type": "boolean", "x-mcp-header": "Flag"},
            "gone": {"type": "string", "x-mcp-header": "Gone"}
        }});
        let mirrors = Mirrors::from_input_schema(&schema).unwrap();
        let args = json!({"region": " eu ", "n": -3, "flag": false, "gone": null});
        let headers = mirrors.encode(&args).unwrap();
        assert_eq!(
            headers,
            [
                ("Mcp-Param-Flag".to_owned(), "false".to_owned()),
                ("Mcp-Param-N".to_owned(), "-3".to_owned()),
                (
                    "Mcp-Param-Region".to_owned(),
                    "=?base64?IGV1IA==?=".to_owned()
                ),
            ]
        );
        let pairs = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
        assert_eq!(mirrors.check(&args, pairs), Ok(()));
        for (name, value) in &headers {
            assert!(http::HeaderName::try_from(name.as_str()).is_ok());
            assert!(http::HeaderValue::try_from(value.as_str()).is_ok());
        }
        let error = mirrors.encode(&json!({"n": 1.5})).unwrap_err();
        assert_eq!(
            error,
            ParamEncodeError {
                header: "Mcp-Param-N".into(),
                error: EncodeError::NotInteger
            }
        );
        assert_eq!(
            error.to_string(),
            "Mcp-Param-N: a number that is not an exact integer cannot be mirrored"
        );
    }

    #[test]
    fn modern_8_errors_display() {
        assert_eq!(
            DecodeError::InvalidByte { at: 3, byte: 0x0a }.to_string(),
            "invalid byte 0x0a at offset 3 in header value"
        );
        let malformed = MirrorError::Header {
            header: "Mcp-Param-X".into(),
            comparison: Comparison::Malformed(DecodeError::NotUtf8),
        };
        assert_eq!(
            malformed.to_string(),
            "header mismatch: Mcp-Param-X header is malformed: sentinel payload does not decode to utf-8"
        );
        let unexpected = MirrorError::Header {
            header: "Mcp-Param-X".into(),
            comparison: Comparison::UnexpectedHeader,
        };
        assert!(unexpected.to_string().contains("body has no value"));
        assert!(Comparison::Match.is_match());
        assert!(!Comparison::Unmirrorable.is_match());
    }

    // --- properties -------------------------------------------------------------------

    proptest! {
        #[test]
        fn modern_8_any_string_round_trips(s in any::<String>()) {
            let encoded = encode_str(&s);
            let bytes = encoded.as_bytes();
            prop_assert!(bytes.iter().all(|b| (0x20..=0x7e).contains(b)));
            prop_assert!(bytes.first() != Some(&b' ') && bytes.last() != Some(&b' '));
            prop_assert_eq!(decode(bytes).unwrap(), s.as_str());
            prop_assert_eq!(compare(Some(bytes), Some(&Value::String(s.clone()))), Comparison::Match);
            prop_assert_eq!(compare_name(Some(bytes), Some(&Value::String(s.clone()))), Comparison::Match);
            // Surrounding optional whitespace changes nothing.
            let padded = format!(" \t{encoded}\t ");
            prop_assert_eq!(decode(padded.as_bytes()).unwrap(), s.as_str());
        }

        #[test]
        fn modern_8_printable_ascii_round_trips(s in "[ -~]{0,40}") {
            let encoded = encode_str(&s);
            prop_assert_eq!(decode(encoded.as_bytes()).unwrap(), s.as_str());
        }

        #[test]
        fn modern_8_any_integer_and_boolean_round_trip(i in any::<i64>(), u in any::<u64>(), b in any::<bool>()) {
            for value in [json!(i), json!(u), json!(b)] {
                let encoded = encode(&value).unwrap().unwrap();
                prop_assert_eq!(compare(Some(encoded.as_bytes()), Some(&value)), Comparison::Match);
            }
            let value = json!(i);
            prop_assert_eq!(encode(&value).unwrap().unwrap(), i.to_string());
            // A float body equal to a safe integer matches its decimal.
            let safe = i % MAX_SAFE_INTEGER;
            let float = json!(safe as f64);
            prop_assert_eq!(compare(Some(safe.to_string().as_bytes()), Some(&float)), Comparison::Match);
        }

        #[test]
        fn modern_8_decode_and_compare_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let decoded = decode(&bytes);
            if let Ok(text) = &decoded {
                let encoded = encode_str(text);
                prop_assert_eq!(decode(encoded.as_bytes()).unwrap(), text.clone());
            }
            for body in [json!("x"), json!(42), json!(true), json!(null), json!(1.5), json!([])] {
                let c = compare(Some(&bytes), Some(&body));
                prop_assert!(decoded.is_ok() || matches!(c, Comparison::Malformed(_)));
                let _ = compare_name(Some(&bytes), Some(&body));
            }
        }

        #[test]
        fn modern_8_sentinel_of_any_bytes(payload in proptest::collection::vec(any::<u8>(), 0..48)) {
            let header = format!("{SENTINEL_PREFIX}{}{SENTINEL_SUFFIX}", STANDARD.encode(&payload));
            match String::from_utf8(payload) {
                Ok(text) => prop_assert_eq!(decode(header.as_bytes()).unwrap(), text.as_str()),
                Err(_) => prop_assert_eq!(decode(header.as_bytes()), Err(DecodeError::NotUtf8)),
            }
        }
    }
}
