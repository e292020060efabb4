//! Property tests for the JSON-RPC envelope (`mcpwire::jsonrpc`; docs/requirements.md §3
//! JSONRPC-* and §12 BATCH-*):
//!
//! - (a) build → encode → classify round trip: requests, notifications, results, errors
//!   and `notifications/cancelled`, encoded by `MessageBuf` with `RawJson` and
//!   `Json(&serde_json::Value)` payloads, classify (by `classify`, `classify_str` and
//!   `parse` under every revision, alone and inside a batch) back to exactly what was
//!   built, payload text byte for byte;
//! - (b) no input panics `classify`, `Classifier::parse` (every revision, default and tiny
//!   limits) or `RawJson::new`, and the entry points agree with each other;
//! - (c) differential JSON validity against serde_json, on valid JSON and mutations of it;
//! - (d) classification of arbitrary envelopes against a literal model of JSONRPC-8
//!   written from the spec, alone and as a batch element (BATCH-4);
//! - (e) `Pending` and `InFlight` against naive models;
//! - (f) owned envelopes agree with the borrowed classification, and an `Outgoing`
//!   message encoded straight into an SSE frame is byte for byte `MessageBuf`'s text
//!   given to `sse::Encoder::encode_event`, and decodes back to the same message.
//!
//! Each property runs 10,000 cases. The places where mcpwire and serde_json differ on
//! purpose are pinned by the `known_difference_*` tests; the differential property (c)
//! lists them and excludes exactly those.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::{self, Write as _};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mcpwire::jsonrpc::{
    Classifier, Envelope, Envelopes, ErrorCode, INLINE_ID_LEN, InFlight, InFlightError, Json,
    JsonErrorKind, Kind, Limits, Message, MessageBuf, Outgoing, ParseError, Parsed, Pending,
    PendingError, RawJson, RequestId, Resolution, Shape, ToJson, body_text, classify, classify_str,
};
use mcpwire::sse::{Encoder, EventFields, EventType, Id};
use mcpwire::{ProtocolVersion, Utf8Bytes};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde::de::IgnoredAny;
use serde_json::Value;

const CASES: u32 = 10_000;

/// The four JSON whitespace characters (RFC 8259 §2).
const JSON_WS: &[char] = &[' ', '\t', '\n', '\r'];

// ---------------------------------------------------------------------------------------
// Text and JSON generators.

/// Characters that stress string handling: the three bytes a JSON string must escape
/// (`"`, `\`, controls), `/` (optionally escaped), DEL, multi-byte and astral characters,
/// the JS line separators, a BOM, and JSON punctuation.
const SPECIAL_CHARS: &[char] = &[
    '"',
    '\\',
    '/',
    '\u{0}',
    '\u{1}',
    '\u{8}',
    '\t',
    '\n',
    '\u{b}',
    '\u{c}',
    '\r',
    '\u{1b}',
    '\u{1f}',
    ' ',
    '\u{7f}',
    '\u{80}',
    'é',
    '€',
    '😀',
    '\u{2028}',
    '\u{2029}',
    '\u{feff}',
    '\u{fffd}',
    '\u{10ffff}',
    '{',
    '}',
    '[',
    ']',
    ':',
    ',',
    'u',
    '0',
    '9',
];

fn any_char() -> BoxedStrategy<char> {
    prop_oneof![
        4 => proptest::char::range('a', 'z'),
        3 => select(SPECIAL_CHARS),
        1 => any::<char>(),
    ]
    .boxed()
}

/// Strings of that alphabet: short ones, and ones of exactly 20–25 bytes, around the
/// inline limit of string ids (`INLINE_ID_LEN` = 22).
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => vec(any_char(), 0..12).prop_map(String::from_iter),
        1 => (vec(any_char(), 0..30), 20usize..=25).prop_map(|(chars, len)| exact_len(&chars, len)),
    ]
    .boxed()
}

/// The longest prefix of `chars` that fits in `len` bytes, padded with `x` to `len`.
fn exact_len(chars: &[char], len: usize) -> String {
    let mut s = String::new();
    for &c in chars {
        if s.len() + c.len_utf8() > len {
            break;
        }
        s.push(c);
    }
    while s.len() < len {
        s.push('x');
    }
    s
}

fn ws() -> BoxedStrategy<&'static str> {
    prop_oneof![6 => Just(""), 2 => Just(" "), 1 => Just("\n"), 1 => Just("\t"), 1 => Just("\r\n  ")].boxed()
}

/// How `json_str` escapes: 0 minimal with short escapes; 1 minimal with `\u00XX` for
/// controls and `\/`; 2 also every non-ASCII character and `/` as `\uxxxx` (surrogate
/// pairs for astral ones); 3 every character as `\uXXXX`.
fn escape_style() -> BoxedStrategy<u8> {
    prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)].boxed()
}

/// `s` as a JSON string literal, escaped in `style`.
fn json_str(s: &str, style: u8) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if style == 3 || (style == 2 && (!c.is_ascii() || c == '/')) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                if style == 3 {
                    write!(out, "\\u{unit:04X}").unwrap();
                } else {
                    write!(out, "\\u{unit:04x}").unwrap();
                }
            }
            continue;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if style == 1 => out.push_str("\\/"),
            '\u{8}' if style == 0 => out.push_str("\\b"),
            '\u{c}' if style == 0 => out.push_str("\\f"),
            '\n' if style == 0 => out.push_str("\\n"),
            '\r' if style == 0 => out.push_str("\\r"),
            '\t' if style == 0 => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => write!(out, "\\u{:04X}", u32::from(c)).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Number tokens: negatives, fractions, exponents of both cases and signs, `-0`, the
/// `i64` extremes and one past them, and magnitudes beyond `f64` (`1e400`, valid JSON).
fn number_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,6})?([eE][+-]?[0-9]{1,3})?",
        1 => select(vec![
            "-0", "0.0", "1.0", "-0.0e-0", "2.5e-3", "1E2", "9223372036854775807", "-9223372036854775808",
            "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e400", "-1E+400", "1e-400",
            "123456789012345678901234567890",
        ])
        .prop_map(str::to_owned),
    ]
    .boxed()
}

fn json_leaf() -> BoxedStrategy<String> {
    prop_oneof![
        1 => Just("null".to_owned()),
        1 => Just("true".to_owned()),
        1 => Just("false".to_owned()),
        3 => number_text(),
        4 => (text(), escape_style()).prop_map(|(s, style)| json_str(&s, style)),
    ]
    .boxed()
}

fn render_array(items: &[(&str, String, &str)], empty_ws: &str) -> String {
    if items.is_empty() {
        return format!("[{empty_ws}]");
    }
    let inner: Vec<String> = items.iter().map(|(a, v, b)| format!("{a}{v}{b}")).collect();
    format!("[{}]", inner.join(","))
}

type MemberText = (
    &'static str,
    String,
    u8,
    &'static str,
    &'static str,
    String,
    &'static str,
);

fn render_object(members: &[MemberText], empty_ws: &str) -> String {
    if members.is_empty() {
        return format!("{{{empty_ws}}}");
    }
    let inner: Vec<String> = members
        .iter()
        .map(|(a, key, style, b, c, v, d)| format!("{a}{}{b}:{c}{v}{d}", json_str(key, *style)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// A JSON array or object whose elements come from `inner`, with whitespace anywhere.
fn container_of(inner: BoxedStrategy<String>) -> BoxedStrategy<String> {
    prop_oneof![
        (vec((ws(), inner.clone(), ws()), 0..5), ws())
            .prop_map(|(items, w)| render_array(&items, w)),
        (
            vec(
                (ws(), text(), escape_style(), ws(), ws(), inner, ws()),
                0..5
            ),
            ws()
        )
            .prop_map(|(members, w)| render_object(&members, w)),
    ]
    .boxed()
}

/// Any JSON value as text, nested at most 5 deep (far below every depth limit in play,
/// see `known_difference_depth`).
fn json_value() -> BoxedStrategy<String> {
    json_leaf().prop_recursive(4, 32, 5, container_of).boxed()
}

/// A JSON array or object as text.
fn json_container() -> BoxedStrategy<String> {
    container_of(json_value())
}

/// A JSON object as text.
fn json_object() -> BoxedStrategy<String> {
    (
        vec(
            (ws(), text(), escape_style(), ws(), ws(), json_value(), ws()),
            0..5,
        ),
        ws(),
    )
        .prop_map(|(members, w)| render_object(&members, w))
        .boxed()
}

/// A JSON array as text.
fn json_array() -> BoxedStrategy<String> {
    (vec((ws(), json_value(), ws()), 0..5), ws())
        .prop_map(|(items, w)| render_array(&items, w))
        .boxed()
}

/// A `serde_json::Value` tree (finite numbers only: serde_json cannot hold others).
fn serde_value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::Array),
            vec((text(), inner), 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

const EDGE_INTS: &[i64] = &[
    i64::MIN,
    i64::MIN + 1,
    -32700,
    -1,
    0,
    1,
    2,
    22,
    23,
    i64::MAX - 1,
    i64::MAX,
];

fn int() -> BoxedStrategy<i64> {
    prop_oneof![any::<i64>(), select(EDGE_INTS)].boxed()
}

fn request_id() -> BoxedStrategy<RequestId> {
    prop_oneof![
        int().prop_map(RequestId::int),
        text().prop_map(|s| RequestId::string(&s))
    ]
    .boxed()
}

fn method_name() -> BoxedStrategy<String> {
    prop_oneof![
        3 => text(),
        1 => select(vec!["initialize", "tools/call", "notifications/cancelled", "ping", ""]).prop_map(str::to_owned),
    ]
    .boxed()
}

/// Whether `s` has a character the encoder must escape.
fn needs_escape(s: &str) -> bool {
    s.chars()
        .any(|c| c == '"' || c == '\\' || u32::from(c) < 0x20)
}

fn escape(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).escape_debug().to_string()
}

// ---------------------------------------------------------------------------------------
// (a) Round trip.

/// A payload handed to `MessageBuf`: JSON text (possibly with whitespace around it, which
/// `RawJson::new` trims) or a `serde_json::Value` written through `Json`.
#[derive(Debug, Clone)]
enum Payload {
    Raw(String),
    Serde(Value),
}

impl Payload {
    /// The text the classified message must hold for this payload.
    fn expected(&self) -> String {
        match self {
            Self::Raw(text) => text.trim_matches(JSON_WS).to_owned(),
            Self::Serde(v) => serde_json::to_string(v).unwrap(),
        }
    }
}

fn payload(structured: bool) -> BoxedStrategy<Payload> {
    let raw = if structured {
        json_container()
    } else {
        json_value()
    };
    let value = serde_value().prop_map(move |v| match v {
        Value::Array(_) | Value::Object(_) => v,
        v if structured => Value::Array(vec![v]),
        v => v,
    });
    prop_oneof![
        3 => (ws(), raw, ws()).prop_map(|(a, v, b)| Payload::Raw(format!("{a}{v}{b}"))),
        1 => value.prop_map(Payload::Serde),
    ]
    .boxed()
}

fn with_payload<R>(p: Option<&Payload>, f: impl FnOnce(Option<&dyn ToJson>) -> R) -> R {
    match p {
        None => f(None),
        Some(Payload::Raw(text)) => f(Some(&RawJson::new(text).expect("generated JSON is valid"))),
        Some(Payload::Serde(v)) => f(Some(&Json(v))),
    }
}

#[derive(Debug, Clone)]
enum Built {
    Request {
        id: RequestId,
        method: String,
        params: Option<Payload>,
    },
    Notification {
        method: String,
        params: Option<Payload>,
    },
    Result {
        id: RequestId,
        result: Payload,
    },
    Error {
        id: Option<RequestId>,
        code: i64,
        message: String,
        data: Option<Payload>,
    },
    Cancelled {
        id: RequestId,
        reason: Option<String>,
    },
}

fn built() -> BoxedStrategy<Built> {
    prop_oneof![
        (request_id(), method_name(), option::of(payload(true)))
            .prop_map(|(id, method, params)| Built::Request { id, method, params }),
        (method_name(), option::of(payload(true)))
            .prop_map(|(method, params)| Built::Notification { method, params }),
        (request_id(), payload(false)).prop_map(|(id, result)| Built::Result { id, result }),
        (
            option::of(request_id()),
            int(),
            text(),
            option::of(payload(false))
        )
            .prop_map(|(id, code, message, data)| Built::Error {
                id,
                code,
                message,
                data
            }),
        (request_id(), option::of(text())).prop_map(|(id, reason)| Built::Cancelled { id, reason }),
    ]
    .boxed()
}

fn encode(b: &Built, buf: &mut MessageBuf) -> String {
    match b {
        Built::Request { id, method, params } => with_payload(params.as_ref(), |p| {
            buf.push_request(id, method, p).unwrap().to_owned()
        }),
        Built::Notification { method, params } => with_payload(params.as_ref(), |p| {
            buf.push_notification(method, p).unwrap().to_owned()
        }),
        Built::Result { id, result } => with_payload(Some(result), |p| {
            buf.push_result(id, p.unwrap()).unwrap().to_owned()
        }),
        Built::Error {
            id,
            code,
            message,
            data,
        } => with_payload(data.as_ref(), |p| {
            buf.push_error(id.as_ref(), ErrorCode(*code), message, p)
                .unwrap()
                .to_owned()
        }),
        Built::Cancelled { id, reason } => buf.push_cancelled(id, reason.as_deref()).to_owned(),
    }
}

/// Hands `f` the `Outgoing` description of what `b` builds.
fn with_outgoing<R>(b: &Built, f: impl FnOnce(&Outgoing<'_>) -> R) -> R {
    match b {
        Built::Request { id, method, params } => with_payload(params.as_ref(), |params| {
            f(&Outgoing::Request { id, method, params })
        }),
        Built::Notification { method, params } => with_payload(params.as_ref(), |params| {
            f(&Outgoing::Notification { method, params })
        }),
        Built::Result { id, result } => with_payload(Some(result), |result| {
            f(&Outgoing::Response {
                id,
                result: result.unwrap(),
            })
        }),
        Built::Error {
            id,
            code,
            message,
            data,
        } => with_payload(data.as_ref(), |data| {
            f(&Outgoing::Error {
                id: id.as_ref(),
                code: ErrorCode(*code),
                message,
                data,
            })
        }),
        Built::Cancelled { id, reason } => f(&Outgoing::Cancelled {
            request: id,
            reason: reason.as_deref(),
        }),
    }
}

/// Decodes `frame` as a stream that holds one event, and returns it.
fn decode_one(frame: Bytes) -> mcpwire::sse::Event {
    let mut decoder = mcpwire::sse::Decoder::default();
    decoder.push(frame).expect("a fresh decoder");
    decoder.finish();
    let mut events = Vec::new();
    while let Some(item) = decoder.poll_item().expect("no limit is near") {
        if let mcpwire::sse::Item::Event(event) = item {
            events.push(event);
        }
    }
    assert_eq!(events.len(), 1, "{events:?}");
    events.pop().unwrap()
}

/// An envelope's view, and its text as the input's slice.
fn check_envelope(e: &Envelope, msg: &Message<'_>, input: &Utf8Bytes) -> Result<(), TestCaseError> {
    prop_assert_eq!(&e.message(), msg);
    prop_assert_eq!(e.kind(), msg.kind());
    prop_assert_eq!(e.id(), msg.id());
    prop_assert_eq!(e.method(), msg.method());
    let range = input.as_bytes().as_ptr_range();
    prop_assert!(
        e.text().is_empty() || range.contains(&e.text().as_ptr()),
        "the text is a copy"
    );
    let payload = e.payload().map(|p| p.as_str());
    let bytes = e.payload_bytes();
    prop_assert_eq!(bytes.as_deref(), payload);
    if let Some(bytes) = bytes.filter(|b| !b.is_empty()) {
        prop_assert!(range.contains(&bytes.as_ptr()), "the payload is a copy");
    }
    Ok(())
}

/// (f) The owned paths agree with the borrowed ones on `text`.
fn check_envelopes(text: &str) -> Result<(), TestCaseError> {
    let classifier = Classifier::default();
    let input = Utf8Bytes::from(text.to_owned());
    match (
        classifier.envelope(input.clone()),
        classifier.classify_str(text),
    ) {
        (Ok(e), Ok(msg)) => {
            check_envelope(&e, &msg, &input)?;
            prop_assert_eq!(e.text(), text);
        }
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        (a, b) => prop_assert!(false, "envelope {a:?}, classify {b:?}"),
    }
    for &v in ProtocolVersion::ALL {
        match (
            classifier.envelopes(input.clone(), v),
            classifier.parse(text.as_bytes(), v),
        ) {
            (Ok(Envelopes::Single(e)), Ok(Parsed::Single(msg))) => {
                check_envelope(&e, &msg, &input)?
            }
            (Ok(Envelopes::Batch(owned)), Ok(Parsed::Batch(items))) => {
                prop_assert_eq!(owned.len(), items.len());
                for (e, item) in owned.iter().zip(&items) {
                    match (e, item) {
                        (Ok(e), Ok(msg)) => {
                            check_envelope(e, msg, &input)?;
                            // An element's text is the element alone.
                            prop_assert_eq!(classify_str(e.text()), Ok(msg.clone()));
                        }
                        (Err(a), Err(b)) => prop_assert_eq!(a, b),
                        (a, b) => prop_assert!(false, "envelope {a:?}, parse {b:?}"),
                    }
                }
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "envelopes {a:?}, parse {b:?} under {v}"),
        }
    }
    Ok(())
}

fn id_value(id: &RequestId) -> Value {
    match (id.as_int(), id.as_str()) {
        (Some(n), _) => Value::from(n),
        (None, Some(s)) => Value::from(s),
        (None, None) => unreachable!("an id is an integer or a string"),
    }
}

fn raw_text(raw: Option<RawJson<'_>>) -> Option<String> {
    raw.map(|r| r.as_str().to_owned())
}

/// Checks that `msg` is exactly what `b` built.
fn check_built(b: &Built, msg: &Message<'_>) -> Result<(), TestCaseError> {
    let kind = match b {
        Built::Request { .. } => Kind::Request,
        Built::Notification { .. } | Built::Cancelled { .. } => Kind::Notification,
        Built::Result { .. } => Kind::Response,
        Built::Error { .. } => Kind::Error,
    };
    prop_assert_eq!(msg.kind(), kind);
    match (b, msg) {
        (Built::Request { id, method, params }, Message::Request(r)) => {
            prop_assert_eq!(&r.id, id);
            prop_assert_eq!(&*r.method, method.as_str());
            prop_assert_eq!(raw_text(r.params), params.as_ref().map(Payload::expected));
            // "borrowed unless the input escaped a character in it"; the encoder escapes
            // only what it must.
            prop_assert_eq!(matches!(r.method, Cow::Borrowed(_)), !needs_escape(method));
            prop_assert_eq!(msg.id(), Some(id));
            prop_assert_eq!(msg.method(), Some(method.as_str()));
            prop_assert_eq!(
                raw_text(msg.params()),
                params.as_ref().map(Payload::expected)
            );
            if let Some(s) = id.as_str() {
                prop_assert_eq!(r.id.is_inline(), s.len() <= INLINE_ID_LEN);
            }
        }
        (Built::Notification { method, params }, Message::Notification(n)) => {
            prop_assert_eq!(&*n.method, method.as_str());
            prop_assert_eq!(raw_text(n.params), params.as_ref().map(Payload::expected));
            prop_assert_eq!(matches!(n.method, Cow::Borrowed(_)), !needs_escape(method));
            prop_assert_eq!(msg.id(), None);
        }
        (Built::Result { id, result }, Message::Response(r)) => {
            prop_assert_eq!(&r.id, id);
            prop_assert_eq!(r.result.as_str(), result.expected());
            prop_assert_eq!(msg.method(), None);
            prop_assert_eq!(msg.params(), None);
        }
        (
            Built::Error {
                id,
                code,
                message,
                data,
            },
            Message::Error(e),
        ) => {
            prop_assert_eq!(&e.id, id);
            prop_assert_eq!(e.error.code, ErrorCode(*code));
            prop_assert_eq!(&*e.error.message, message.as_str());
            prop_assert_eq!(raw_text(e.error.data), data.as_ref().map(Payload::expected));
            prop_assert_eq!(msg.id(), id.as_ref());
        }
        (Built::Cancelled { id, reason }, Message::Notification(n)) => {
            prop_assert_eq!(&*n.method, "notifications/cancelled");
            let params: Value =
                serde_json::from_str(n.params.expect("cancelled has params").as_str()).unwrap();
            let mut expected = serde_json::Map::new();
            expected.insert("requestId".to_owned(), id_value(id));
            if let Some(reason) = reason {
                expected.insert("reason".to_owned(), Value::from(reason.as_str()));
            }
            prop_assert_eq!(params, Value::Object(expected));
        }
        _ => prop_assert!(false, "built {b:?}, classified {msg:?}"),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// (b) and (c) Inputs near JSON, and mutations.

/// Pieces of JSON-RPC-shaped input, valid and not, for token-soup inputs.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b" ",
    b"\n",
    b"\"jsonrpc\"",
    b"\"2.0\"",
    b"\"id\"",
    b"\"\\u0069d\"",
    b"\"method\"",
    b"\"params\"",
    b"\"result\"",
    b"\"error\"",
    b"\"code\"",
    b"\"message\"",
    b"\"data\"",
    b"\"initialize\"",
    b"1",
    b"-",
    b"0",
    b"01",
    b"1.5e3",
    b"9223372036854775808",
    b"null",
    b"true",
    b"fals",
    b"\\u",
    b"\\ud800",
    b"\\u006d",
    b"\\x",
    b"\xc3\xa9",
    b"\0",
    b"\t",
];

/// Byte sequences that are not UTF-8: a stray byte, a truncated sequence, an encoded
/// surrogate, a code point above U+10FFFF, an overlong encoding.
const NOT_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xc0\x80",
];

fn token_soup() -> BoxedStrategy<Vec<u8>> {
    vec(select(TOKENS), 0..48).prop_map(|t| t.concat()).boxed()
}

/// `bytes` with a sequence that is not UTF-8 inserted somewhere.
fn break_utf8(bytes: BoxedStrategy<Vec<u8>>) -> BoxedStrategy<Vec<u8>> {
    (bytes, any::<Index>(), select(NOT_UTF8))
        .prop_map(|(mut bytes, i, bad)| {
            let n = i.index(bytes.len() + 1);
            bytes.splice(n..n, bad.iter().copied());
            bytes
        })
        .boxed()
}

/// Insertions from the JSON alphabet and whitespace.
const ALPHABET: &[&str] = &[
    "{", "}", "[", "]", "\"", ":", ",", "\\", " ", "\t", "\n", "\r", "0", "1", "5", "9", "e", "E",
    "+", "-", ".", "t", "r", "u", "f", "a", "l", "s", "n",
];

#[derive(Debug, Clone)]
enum Mutation {
    /// Cut the text at a character boundary.
    Truncate(Index),
    /// Insert a piece of the JSON alphabet.
    Insert(Index, &'static str),
    /// Delete one character.
    Delete(Index),
    /// Insert a raw control character (inside a string, invalid; outside, invalid unless
    /// it is JSON whitespace).
    Control(Index, char),
    /// Insert an escape JSON does not have.
    BadEscape(Index, &'static str),
    /// Insert an unpaired surrogate escape (valid JSON grammar, RFC 8259 §8.2).
    LoneSurrogate(Index, &'static str),
    /// Put a `0` in front of the next digit.
    LeadingZero(Index),
    /// Put a `,` in front of the next `]` or `}`.
    TrailingComma(Index),
}

fn mutation() -> BoxedStrategy<Mutation> {
    prop_oneof![
        1 => any::<Index>().prop_map(Mutation::Truncate),
        4 => (any::<Index>(), select(ALPHABET)).prop_map(|(i, s)| Mutation::Insert(i, s)),
        3 => any::<Index>().prop_map(Mutation::Delete),
        1 => (any::<Index>(), select(vec!['\0', '\u{1}', '\u{8}', '\u{b}', '\u{c}', '\u{1f}', '\t', '\n', '\r']))
            .prop_map(|(i, c)| Mutation::Control(i, c)),
        1 => (any::<Index>(), select(vec!["\\x", "\\u12g4", "\\U0041", "\\'", "\\u00", "\\", "\\0", "\\a"]))
            .prop_map(|(i, s)| Mutation::BadEscape(i, s)),
        1 => (any::<Index>(), select(vec!["\\ud800", "\\udfff", "\\ud83d\\u0041", "\\udc00\\ud800", "\\ud83d\\ude00"]))
            .prop_map(|(i, s)| Mutation::LoneSurrogate(i, s)),
        1 => any::<Index>().prop_map(Mutation::LeadingZero),
        1 => any::<Index>().prop_map(Mutation::TrailingComma),
    ]
    .boxed()
}

/// The character boundaries of `s`, end included.
fn boundaries(s: &str) -> Vec<usize> {
    s.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()))
        .collect()
}

fn apply(text: &mut String, m: &Mutation) {
    let at = |i: &Index, s: &str| *i.get(&boundaries(s));
    match m {
        Mutation::Truncate(i) => {
            let n = at(i, text);
            text.truncate(n);
        }
        Mutation::Insert(i, piece)
        | Mutation::BadEscape(i, piece)
        | Mutation::LoneSurrogate(i, piece) => {
            let n = at(i, text);
            text.insert_str(n, piece);
        }
        Mutation::Delete(i) => {
            let n = at(i, text);
            if n < text.len() {
                text.remove(n);
            }
        }
        Mutation::Control(i, c) => {
            let n = at(i, text);
            text.insert(n, *c);
        }
        Mutation::LeadingZero(i) => {
            let n = at(i, text);
            if let Some(d) = text[n..].find(|c: char| c.is_ascii_digit()) {
                text.insert(n + d, '0');
            }
        }
        Mutation::TrailingComma(i) => {
            let n = at(i, text);
            if let Some(d) = text[n..].find([']', '}']) {
                text.insert(n + d, ',');
            }
        }
    }
}

/// Valid JSON (a bare value, or a JSON-RPC envelope around one), then 0–4 mutations.
fn json_ish() -> BoxedStrategy<String> {
    let base = prop_oneof![
        2 => json_value(),
        2 => envelope().prop_map(|fields| render_fields(&fields)),
        1 => (json_value(), json_value()).prop_map(|(a, b)| format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"a":{a},"b":[{b}]}}}}"#
        )),
    ];
    (
        base,
        prop_oneof![1 => Just(Vec::new()), 3 => vec(mutation(), 1..=4)],
    )
        .prop_map(|(mut text, ms)| {
            for m in &ms {
                apply(&mut text, m);
            }
            text
        })
        .boxed()
}

fn any_input() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        1 => vec(any::<u8>(), 0..200),
        2 => token_soup(),
        4 => json_ish().prop_map(String::into_bytes),
        1 => break_utf8(token_soup()),
        1 => break_utf8(json_ish().prop_map(String::into_bytes).boxed()),
    ]
    .boxed()
}

/// Brackets in `text`: an upper bound on its nesting depth. Every differential check
/// asserts it is far below the depth limits (`known_difference_depth`).
fn max_possible_depth(text: &[u8]) -> usize {
    text.iter().filter(|&&b| b == b'[' || b == b'{').count()
}

fn is_json_error<T>(r: &Result<T, ParseError>) -> bool {
    matches!(r, Err(ParseError::Json(_)))
}

/// serde_json's messages for the failures that `serde_json::Value` has and
/// `IgnoredAny` (and mcpwire's validation) does not: unpaired surrogate escapes and
/// numbers beyond `f64`. See `known_difference_lone_surrogates` and
/// `known_difference_numbers_beyond_f64`.
const VALUE_ONLY_FAILURES: &[&str] = &[
    "lone leading surrogate in hex escape",
    "unexpected end of hex escape",
    "number out of range",
];

/// Checks every `RawJson` of a classified message: valid JSON on its own, no whitespace
/// around it, and a slice of the input (not a copy).
fn check_raw_slices(msg: &Message<'_>, input: &[u8]) -> Result<(), TestCaseError> {
    let raws: Vec<RawJson<'_>> = match msg {
        Message::Request(r) => r.params.into_iter().collect(),
        Message::Notification(n) => n.params.into_iter().collect(),
        Message::Response(r) => vec![r.result],
        Message::Error(e) => e.error.data.into_iter().collect(),
    };
    let range = input.as_ptr_range();
    for raw in raws {
        let s = raw.as_str();
        prop_assert!(RawJson::new(s).is_ok_and(|r| r.as_str() == s), "raw {s:?}");
        prop_assert!(
            range.contains(&s.as_ptr()) && s.len() <= input.len(),
            "raw {s:?} is not a slice of the input"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// (d) A literal model of JSONRPC-8.

/// A member value, as the model sees it.
#[derive(Debug, Clone)]
enum V {
    /// A string (decoded), written in an escape style.
    Str(String, u8),
    /// A string literal holding an unpaired surrogate escape: JSON by the RFC 8259
    /// grammar, but no Unicode string, so it can be no id, method, version or message.
    LoneSurrogate(&'static str),
    /// An integer token in the `i64` range.
    Int(i64),
    /// A number token that is not an `i64` integer token: a fraction or an exponent, or
    /// an integer outside the `i64` range.
    Num(&'static str),
    Bool(bool),
    Null,
    /// Some JSON object (its keys are from `text()`; see `model_error`).
    Obj(String),
    /// Some JSON array.
    Arr(String),
    /// An object built member by member (the `error` member and its mutations).
    Fields(Vec<Field>),
    /// Any JSON value, only ever under `result` or `data`, where any value is fine.
    Any(String),
}

/// One member of an object: decoded key, how it is escaped, value, whitespace around.
#[derive(Debug, Clone)]
struct Field {
    key: String,
    style: u8,
    value: V,
    ws: [&'static str; 4],
}

fn render(v: &V) -> String {
    match v {
        V::Str(s, style) => json_str(s, *style),
        V::LoneSurrogate(t) | V::Num(t) => (*t).to_owned(),
        V::Int(n) => n.to_string(),
        V::Bool(b) => b.to_string(),
        V::Null => "null".to_owned(),
        V::Obj(t) | V::Arr(t) | V::Any(t) => t.clone(),
        V::Fields(fields) => render_fields(fields),
    }
}

fn render_fields(fields: &[Field]) -> String {
    let inner: Vec<String> = fields
        .iter()
        .map(|f| {
            let [a, b, c, d] = f.ws;
            format!(
                "{a}{}{b}:{c}{}{d}",
                json_str(&f.key, f.style),
                render(&f.value)
            )
        })
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Number tokens that are not `i64` integer tokens. Two are arguably integers: `1.0`
/// and `1E2` have no fractional part (JSON Schema's `integer` would take them) and
/// `9223372036854775808` is an integer outside `i64`; JSONRPC-2 says "integer", and the
/// model reads it lexically (digits only, in `i64`), as the mcpwire docs do.
const NON_INT_NUMBERS: &[&str] = &[
    "1.5",
    "-0.5",
    "1e3",
    "1E+2",
    "1.0",
    "-0.0",
    "2.0",
    "1E2",
    "0.1e-5",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1e400",
];

const LONE_SURROGATES: &[&str] = &[
    r#""\ud800""#,
    r#""a\udfffb""#,
    r#""\ud83d\u0041""#,
    r#""\udc00\ud800""#,
];

fn flat_value() -> BoxedStrategy<V> {
    prop_oneof![
        3 => (text(), escape_style()).prop_map(|(s, style)| V::Str(s, style)),
        1 => select(LONE_SURROGATES).prop_map(V::LoneSurrogate),
        2 => int().prop_map(V::Int),
        1 => select(NON_INT_NUMBERS).prop_map(V::Num),
        1 => any::<bool>().prop_map(V::Bool),
        1 => Just(V::Null),
        1 => json_object().prop_map(V::Obj),
        1 => json_array().prop_map(V::Arr),
    ]
    .boxed()
}

fn four_ws() -> BoxedStrategy<[&'static str; 4]> {
    (ws(), ws(), ws(), ws())
        .prop_map(|(a, b, c, d)| [a, b, c, d])
        .boxed()
}

fn field(key: &'static str, value: BoxedStrategy<V>) -> BoxedStrategy<Field> {
    (escape_style(), value, four_ws())
        .prop_map(move |(style, value, ws)| Field {
            key: key.to_owned(),
            style,
            value,
            ws,
        })
        .boxed()
}

/// Strings that are not `"2.0"`.
const WRONG_VERSIONS: &[&str] = &["2", "2.0 ", " 2.0", "1.0", "2.00", "", "2.0\0", "2,0"];

fn version_value() -> BoxedStrategy<V> {
    prop_oneof![
        16 => escape_style().prop_map(|style| V::Str("2.0".to_owned(), style)),
        1 => (select(WRONG_VERSIONS), escape_style()).prop_map(|(s, style)| V::Str(s.to_owned(), style)),
        1 => prop_oneof![Just(V::Num("2.0")), Just(V::Int(2)), Just(V::Null)],
    ]
    .boxed()
}

fn valid_id() -> BoxedStrategy<V> {
    prop_oneof![
        int().prop_map(V::Int),
        (text(), escape_style()).prop_map(|(s, style)| V::Str(s, style))
    ]
    .boxed()
}

fn method_value() -> BoxedStrategy<V> {
    (method_name(), escape_style())
        .prop_map(|(s, style)| V::Str(s, style))
        .boxed()
}

fn structured() -> BoxedStrategy<V> {
    prop_oneof![
        json_object().prop_map(V::Obj),
        json_array().prop_map(V::Arr)
    ]
    .boxed()
}

fn error_key() -> BoxedStrategy<&'static str> {
    select(vec!["code", "message", "data", "Code", "foo", "codes", ""]).boxed()
}

/// An `error` member value: a valid error object, mutated 0–3 times.
fn error_value() -> BoxedStrategy<V> {
    let base = (
        field("code", int().prop_map(V::Int).boxed()),
        field(
            "message",
            (text(), escape_style())
                .prop_map(|(s, style)| V::Str(s, style))
                .boxed(),
        ),
        option::of(field("data", json_value().prop_map(V::Any).boxed())),
    )
        .prop_map(|(code, message, data)| {
            let mut fields = vec![code, message];
            fields.extend(data);
            fields
        });
    let change = prop_oneof![
        any::<Index>().prop_map(FieldChange::Remove),
        (any::<Index>(), flat_value()).prop_map(|(i, v)| FieldChange::Replace(i, v)),
        (any::<Index>(), option::of(flat_value())).prop_map(|(i, v)| FieldChange::Duplicate(i, v)),
        (error_key(), escape_style(), flat_value(), four_ws()).prop_map(
            |(key, style, value, ws)| FieldChange::Add(Field {
                key: key.to_owned(),
                style,
                value,
                ws
            })
        ),
    ];
    (
        base,
        prop_oneof![2 => Just(Vec::new()), 1 => vec(change, 1..=3)],
    )
        .prop_flat_map(|(mut fields, changes)| {
            for c in changes {
                c.apply(&mut fields);
            }
            Just(fields).prop_shuffle()
        })
        .prop_map(V::Fields)
        .boxed()
}

#[derive(Debug, Clone)]
enum FieldChange {
    Remove(Index),
    Replace(Index, V),
    Duplicate(Index, Option<V>),
    Add(Field),
}

impl FieldChange {
    fn apply(self, fields: &mut Vec<Field>) {
        match self {
            Self::Remove(i) if !fields.is_empty() => {
                fields.remove(i.index(fields.len()));
            }
            Self::Replace(i, v) if !fields.is_empty() => {
                let n = i.index(fields.len());
                fields[n].value = v;
            }
            Self::Duplicate(i, v) if !fields.is_empty() => {
                let mut copy = fields[i.index(fields.len())].clone();
                if let Some(v) = v {
                    copy.value = v;
                }
                fields.push(copy);
            }
            Self::Add(f) => fields.push(f),
            _ => {}
        }
    }
}

fn any_value() -> BoxedStrategy<V> {
    prop_oneof![6 => flat_value(), 1 => error_value()].boxed()
}

const ENVELOPE: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

/// Member names that are none of the envelope's (some look close).
const UNKNOWN_KEYS: &[&str] = &[
    "foo", "_meta", "Method", "ID", "jsonrpc ", " id", "results", "", "errors", "code", "message",
    "data", "ids",
];

/// A JSON-RPC object: one of the four valid shapes, then 0–3 changes (remove, replace,
/// duplicate or add a member), 0–2 unknown members, in any order.
fn envelope() -> BoxedStrategy<Vec<Field>> {
    let version = || field("jsonrpc", version_value());
    let request = (
        version(),
        field("id", valid_id()),
        field("method", method_value()),
        option::of(field("params", structured())),
    )
        .prop_map(|(v, id, m, p)| [vec![v, id, m], p.into_iter().collect()].concat());
    let notification = (
        version(),
        field("method", method_value()),
        option::of(field("params", structured())),
    )
        .prop_map(|(v, m, p)| [vec![v, m], p.into_iter().collect()].concat());
    let result = prop_oneof![any_value(), json_value().prop_map(V::Any)].boxed();
    let response = (version(), field("id", valid_id()), field("result", result))
        .prop_map(|(v, id, r)| vec![v, id, r]);
    let error = (
        version(),
        prop_oneof![2 => option::of(field("id", valid_id())), 1 => field("id", Just(V::Null).boxed()).prop_map(Some)],
        field("error", error_value()),
    )
        .prop_map(|(v, id, e)| [vec![v], id.into_iter().collect(), vec![e]].concat());
    let change = prop_oneof![
        1 => any::<Index>().prop_map(FieldChange::Remove),
        2 => (any::<Index>(), any_value()).prop_map(|(i, v)| FieldChange::Replace(i, v)),
        1 => (any::<Index>(), option::of(any_value())).prop_map(|(i, v)| FieldChange::Duplicate(i, v)),
        2 => (select(ENVELOPE.to_vec()), escape_style(), any_value(), four_ws())
            .prop_map(|(key, style, value, ws)| FieldChange::Add(Field { key: key.to_owned(), style, value, ws })),
    ];
    let unknown = (select(UNKNOWN_KEYS), escape_style(), any_value(), four_ws()).prop_map(
        |(key, style, value, ws)| Field {
            key: key.to_owned(),
            style,
            value,
            ws,
        },
    );
    (
        prop_oneof![request, notification, response, error],
        prop_oneof![3 => Just(Vec::new()), 2 => vec(change, 1..=3)],
        prop_oneof![2 => Just(Vec::new()), 1 => vec(unknown, 1..=2)],
    )
        .prop_flat_map(|(mut fields, changes, unknown)| {
            for c in changes {
                c.apply(&mut fields);
            }
            fields.extend(unknown);
            Just(fields).prop_shuffle()
        })
        .boxed()
}

/// What the model says a message is.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    Request {
        id: RequestId,
        method: String,
        params: Option<String>,
    },
    Notification {
        method: String,
        params: Option<String>,
    },
    Response {
        id: RequestId,
        result: String,
    },
    Error {
        id: Option<RequestId>,
        code: i64,
        message: String,
        data: Option<String>,
    },
    /// Not a JSON-RPC message: -32600. `id` is the id the error response carries, or
    /// `None` when the model does not say (the `id` member appears twice).
    Invalid {
        id: Option<Option<RequestId>>,
    },
}

/// What an `id` member holds, per JSONRPC-2 and JSONRPC-5.
enum IdState {
    Absent,
    Null,
    Valid(RequestId),
    Invalid,
}

fn string_of(v: &V) -> Option<&str> {
    match v {
        V::Str(s, _) => Some(s),
        _ => None,
    }
}

/// The keys of a JSON object text, in order, decoded.
fn object_keys(text: &str) -> Vec<String> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Keys;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(k) = map.next_key::<String>()? {
                        map.next_value::<IgnoredAny>()?;
                        keys.push(k);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(Visit)
        }
    }
    serde_json::from_str::<Keys>(text)
        .expect("generated objects have string keys")
        .0
}

/// The `error` member per JSONRPC-4 and JSONRPC-6: an object with exactly one integer
/// `code`, exactly one string `message` and at most one `data` (of any value). Other
/// members are ignored; a repeated one makes it invalid, as in the envelope.
fn model_error(v: &V) -> Result<Option<(i64, String, Option<String>)>, TestCaseError> {
    let fields = match v {
        V::Fields(fields) => fields,
        V::Obj(text) => {
            // A generic object is no error object unless its random keys happen to spell
            // `code` and `message`; discard that (practically impossible) case.
            let keys = object_keys(text);
            prop_assume!(!keys.iter().any(|k| k == "code" || k == "message"));
            return Ok(None);
        }
        _ => return Ok(None),
    };
    let get = |name: &str| {
        fields
            .iter()
            .filter(|f| f.key == name)
            .map(|f| &f.value)
            .collect::<Vec<_>>()
    };
    let (codes, messages, data) = (get("code"), get("message"), get("data"));
    Ok(match (codes.as_slice(), messages.as_slice(), data.len()) {
        ([V::Int(code)], [V::Str(message, _)], 0 | 1) => {
            Some((*code, message.clone(), data.first().map(|d| render(d))))
        }
        _ => None,
    })
}

/// JSONRPC-8, literally, from docs/requirements.md §3 (and JSON-RPC 2.0 for `params`):
/// - duplicate envelope members ⇒ invalid (two parsers would read different messages);
/// - `jsonrpc` must be the string `"2.0"` (JSONRPC-1);
/// - an `id` that is not a string or an `i64` integer (null aside) ⇒ invalid (JSONRPC-2);
/// - exactly one of `method`, `result`, `error` (JSONRPC-4, -8), else invalid;
/// - `method` (a string) with a non-null id ⇒ request; without an `id` member ⇒
///   notification (JSONRPC-7); with `id: null` ⇒ invalid (JSONRPC-2); `params`, if
///   present, an object or array (JSON-RPC 2.0 "structured value"; MCP uses objects);
/// - `result` (any value, null included) with a non-null id ⇒ response; a null or
///   absent id ⇒ invalid (JSONRPC-4: a result response carries its request's id);
/// - `error` (a valid error object) ⇒ error response with its id, or none when the id is
///   null or absent (JSONRPC-5); an invalid error object ⇒ invalid;
/// - members of no envelope role are ignored, and so is `params` on a response.
///
/// An invalid message's error response carries the id when the `id` member held a valid
/// non-null id (JSONRPC-5: omit it only when it could not be read).
fn model(fields: &[Field]) -> Result<Expect, TestCaseError> {
    let get = |name: &str| {
        fields
            .iter()
            .filter(|f| f.key == name)
            .map(|f| &f.value)
            .collect::<Vec<_>>()
    };
    if ENVELOPE.iter().any(|name| get(name).len() > 1) {
        return Ok(Expect::Invalid { id: None });
    }
    let one = |name: &str| get(name).first().copied();
    let id = match one("id") {
        None => IdState::Absent,
        Some(V::Null) => IdState::Null,
        Some(V::Int(n)) => IdState::Valid(RequestId::int(*n)),
        Some(V::Str(s, _)) => IdState::Valid(RequestId::string(s)),
        Some(_) => IdState::Invalid,
    };
    let carried = match &id {
        IdState::Valid(id) => Some(id.clone()),
        _ => None,
    };
    let invalid = Ok(Expect::Invalid {
        id: Some(carried.clone()),
    });
    if one("jsonrpc").and_then(string_of) != Some("2.0") {
        return invalid;
    }
    if matches!(id, IdState::Invalid) {
        return invalid;
    }
    match (one("method"), one("result"), one("error")) {
        (Some(method), None, None) => {
            let Some(method) = string_of(method) else {
                return invalid;
            };
            let params = match one("params") {
                None => None,
                Some(p @ (V::Obj(_) | V::Arr(_) | V::Fields(_))) => Some(render(p)),
                Some(V::Any(t)) if t.starts_with(['{', '[']) => Some(t.clone()),
                Some(_) => return invalid,
            };
            let method = method.to_owned();
            Ok(match id {
                IdState::Valid(id) => Expect::Request { id, method, params },
                IdState::Absent => Expect::Notification { method, params },
                IdState::Null | IdState::Invalid => return invalid,
            })
        }
        (None, Some(result), None) => match id {
            IdState::Valid(id) => Ok(Expect::Response {
                id,
                result: render(result),
            }),
            _ => invalid,
        },
        (None, None, Some(error)) => match model_error(error)? {
            Some((code, message, data)) => Ok(Expect::Error {
                id: carried,
                code,
                message,
                data,
            }),
            None => invalid,
        },
        _ => invalid,
    }
}

/// Compares a classification with the model's answer.
fn check_model(
    expect: &Expect,
    got: &Result<Message<'_>, ParseError>,
    text: &str,
) -> Result<(), TestCaseError> {
    match (expect, got) {
        (Expect::Request { id, method, params }, Ok(Message::Request(r))) => {
            prop_assert_eq!(&r.id, id, "{}", text);
            prop_assert_eq!(&*r.method, method.as_str(), "{}", text);
            prop_assert_eq!(&raw_text(r.params), params, "{}", text);
        }
        (Expect::Notification { method, params }, Ok(Message::Notification(n))) => {
            prop_assert_eq!(&*n.method, method.as_str(), "{}", text);
            prop_assert_eq!(&raw_text(n.params), params, "{}", text);
        }
        (Expect::Response { id, result }, Ok(Message::Response(r))) => {
            prop_assert_eq!(&r.id, id, "{}", text);
            prop_assert_eq!(r.result.as_str(), result.as_str(), "{}", text);
        }
        (
            Expect::Error {
                id,
                code,
                message,
                data,
            },
            Ok(Message::Error(e)),
        ) => {
            prop_assert_eq!(&e.id, id, "{}", text);
            prop_assert_eq!(e.error.code, ErrorCode(*code), "{}", text);
            prop_assert_eq!(&*e.error.message, message.as_str(), "{}", text);
            prop_assert_eq!(&raw_text(e.error.data), data, "{}", text);
        }
        (Expect::Invalid { id }, Err(err @ ParseError::Shape(e))) => {
            prop_assert_eq!(err.jsonrpc_code(), ErrorCode::INVALID_REQUEST);
            if let Some(id) = id {
                prop_assert_eq!(&e.id, id, "carried id of {:?} for {}", e.shape, text);
                prop_assert_eq!(err.id(), id.as_ref());
            }
        }
        _ => prop_assert!(
            false,
            "model says {expect:?}, classify says {got:?}, for {text}"
        ),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// (e) Correlation models.

#[derive(Debug, Clone)]
enum Target {
    /// An id this table issued (pending or not), picked among 1..next.
    Issued(Index),
    /// An id pending in the model.
    Pending(Index),
    /// Any integer (0, negatives and ids not issued yet are never issued).
    Int(i64),
    /// A string id: never issued (the table issues integers), e.g. `"1"`.
    Str(String),
}

#[derive(Debug, Clone)]
enum Op {
    /// `deadline` is in ms relative to now (negative: already passed).
    Register {
        token: u16,
        deadline: Option<i64>,
    },
    Resolve(Target),
    Cancel(Target),
    Contains(Target),
    /// Advance the clock by `advance` ms, call `handle_timeout` (if `handle`), then
    /// `poll_expired` once or until `None`.
    Poll {
        advance: u64,
        handle: bool,
        drain: bool,
    },
}

fn target() -> BoxedStrategy<Target> {
    prop_oneof![
        3 => any::<Index>().prop_map(Target::Issued),
        3 => any::<Index>().prop_map(Target::Pending),
        1 => prop_oneof![Just(0i64), Just(-1), Just(i64::MIN), Just(i64::MAX), 0i64..40].prop_map(Target::Int),
        1 => prop_oneof![Just(String::new()), (0u8..10).prop_map(|n| n.to_string()), Just("a".to_owned())]
            .prop_map(Target::Str),
    ]
    .boxed()
}

fn op() -> BoxedStrategy<Op> {
    prop_oneof![
        4 => (any::<u16>(), option::weighted(0.8, -20i64..100))
            .prop_map(|(token, deadline)| Op::Register { token, deadline }),
        2 => target().prop_map(Op::Resolve),
        1 => target().prop_map(Op::Cancel),
        1 => target().prop_map(Op::Contains),
        2 => (prop_oneof![Just(0u64), 0u64..60], prop::bool::weighted(0.8), any::<bool>())
            .prop_map(|(advance, handle, drain)| Op::Poll { advance, handle, drain }),
    ]
    .boxed()
}

/// The naive table: a list of (id, token, deadline in ms since the start), and the
/// queue of expired (id, token) not yet polled.
struct PendingModel {
    entries: Vec<(i64, u16, Option<u64>)>,
    expired: std::collections::VecDeque<(i64, u16)>,
    next: i64,
    max: usize,
}

impl PendingModel {
    fn id(&self, t: &Target) -> RequestId {
        match t {
            Target::Issued(i) if self.next > 1 => {
                RequestId::int(1 + i.index((self.next - 1) as usize) as i64)
            }
            Target::Pending(i) if !self.entries.is_empty() => {
                RequestId::int(self.entries[i.index(self.entries.len())].0)
            }
            Target::Issued(_) | Target::Pending(_) => RequestId::int(1),
            Target::Int(n) => RequestId::int(*n),
            Target::Str(s) => RequestId::string(s),
        }
    }

    fn remove(&mut self, id: &RequestId) -> Option<u16> {
        let n = id.as_int()?;
        let at = self.entries.iter().position(|e| e.0 == n)?;
        Some(self.entries.remove(at).1)
    }

    fn min_deadline(&self) -> Option<u64> {
        self.entries.iter().filter_map(|e| e.2).min()
    }

    /// Moves every entry due by `now` to the expired queue, by (deadline, id).
    fn handle_timeout(&mut self, now: u64) {
        let mut due: Vec<_> = self
            .entries
            .iter()
            .filter_map(|&(id, token, at)| at.filter(|&at| at <= now).map(|at| (at, id, token)))
            .collect();
        due.sort_unstable();
        for (_, id, token) in due {
            self.entries.retain(|e| e.0 != id);
            self.expired.push_back((id, token));
        }
    }
}

// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// (a) Whatever `MessageBuf` encodes (RawJson and serde payloads, any id, method,
    /// code, message), every entry point classifies back to exactly what was built,
    /// payload text byte for byte (JSONRPC-2, -4, -6, -7, -8), alone and in a batch
    /// (BATCH-1, BATCH-4).
    #[test]
    fn jsonrpc_8_build_encode_classify_round_trip(b in built(), prefix in any::<bool>()) {
        let mut buf = MessageBuf::new();
        let before = if prefix {
            buf.push_notification("notifications/initialized", None).unwrap().to_owned()
        } else {
            String::new()
        };
        let text = encode(&b, &mut buf);
        // Each push returns only its own message and appends it.
        prop_assert_eq!(buf.as_str(), format!("{before}{text}"));
        prop_assert_eq!(buf.len(), before.len() + text.len());
        prop_assert!(serde_json::from_str::<IgnoredAny>(&text).is_ok(), "not JSON: {}", text);

        let got = classify(text.as_bytes());
        let msg = match &got {
            Ok(msg) => msg,
            Err(e) => return Err(TestCaseError::fail(format!("{e:?} for {text}"))),
        };
        check_built(&b, msg)?;
        check_raw_slices(msg, text.as_bytes())?;
        prop_assert_eq!(&Classifier::default().classify_str(&text), &got);
        for &v in ProtocolVersion::ALL {
            prop_assert_eq!(Classifier::default().parse(text.as_bytes(), v), got.clone().map(Parsed::Single));
        }
        // In a batch (2025-03-26 only), with whitespace around it and a second element.
        let batch = format!("[ {text} ,\n{text}]");
        let expected = match msg {
            Message::Request(r) if r.method == "initialize" => Err(Shape::InitializeInBatch),
            m => Ok(m.clone()),
        };
        match Classifier::default().parse(batch.as_bytes(), ProtocolVersion::V2025_03_26) {
            Ok(Parsed::Batch(items)) => {
                prop_assert_eq!(items.len(), 2);
                for item in items {
                    prop_assert_eq!(item.map_err(|e| e.shape), expected.clone());
                }
            }
            other => prop_assert!(false, "batch {batch}: {other:?}"),
        }
        prop_assert_eq!(
            Classifier::default().parse(batch.as_bytes(), ProtocolVersion::V2025_06_18),
            Err(ParseError::BatchNotAllowed { version: ProtocolVersion::V2025_06_18 })
        );
        let split = buf.split();
        prop_assert_eq!(split.as_str(), format!("{before}{text}"));
        prop_assert!(buf.is_empty());
        check_envelopes(&text)?;
        check_envelopes(&batch)?;
        // `MessageBuf::push` of the `Outgoing` is what `push_*` wrote.
        let mut again = MessageBuf::new();
        prop_assert_eq!(with_outgoing(&b, |o| again.push(o).map(str::to_owned)), Ok(text));
    }

    /// (f) An `Outgoing` encoded straight into a frame (after other frames, under any
    /// event fields) is byte for byte `MessageBuf`'s text given to `encode_event`
    /// (SSE-ENC-2, -3, -6); the decoder reads one event back whose data is that text with
    /// each line break as LF, and which classifies, borrowed and as an envelope, to what
    /// was built (JSONRPC-8).
    #[test]
    fn sse_enc_2_outgoing_frames_are_the_buffer_text_as_an_event(
        b in built(),
        id in option::of("[a-z0-9:._-]{0,12}"),
        event in option::of(prop_oneof![Just("message".to_owned()), "[a-z]{1,8}"]),
        retry in option::of(0u64..100_000),
        before in prop_oneof![Just(Vec::new()), Just(b": ping\n\n".to_vec()), Just(b"data: x\n\n".to_vec())],
    ) {
        let mut fields = EventFields::new();
        if let Some(id) = &id {
            fields = fields.with_id(Id::new(id).unwrap());
        }
        if let Some(event) = &event {
            fields = fields.with_event(EventType::new(event).unwrap());
        }
        if let Some(ms) = retry {
            fields = fields.with_retry(Duration::from_millis(ms));
        }
        let mut buf = MessageBuf::new();
        let text = with_outgoing(&b, |o| buf.push(o).unwrap().to_owned());
        let mut expected = BytesMut::new();
        Encoder::new().encode_event(&fields, &text, &mut expected);

        let mut frame = BytesMut::from(&before[..]);
        with_outgoing(&b, |o| o.encode_frame(&fields, &mut frame)).unwrap();
        prop_assert_eq!(&frame[..before.len()], &before[..]);
        prop_assert_eq!(&frame[before.len()..], &expected[..]);

        let decoded = decode_one(frame.split_off(before.len()).freeze());
        prop_assert_eq!(decoded.id(), id.as_deref().unwrap_or(""));
        prop_assert_eq!(decoded.event_type(), event.as_deref().unwrap_or("message"));
        let lf = text.replace("\r\n", "\n").replace('\r', "\n");
        prop_assert_eq!(decoded.data(), lf.as_str());
        let msg = classify_str(&lf).unwrap();
        if !text.contains('\r') {
            check_built(&b, &msg)?;
        }
        let envelope = Classifier::default().envelope(decoded.into_data()).unwrap();
        prop_assert_eq!(envelope.message(), msg);
    }

    /// (b) No input panics any entry point, under default and under tiny limits, and the
    /// entry points agree: bytes and str, `classify` and `parse` on non-arrays, JSON
    /// errors for non-UTF-8 at the right offset; every raw payload is a valid slice.
    #[test]
    fn jsonrpc_1_no_input_panics(input in any_input(), depth in 0usize..4, batch_len in 0usize..3) {
        let tiny = Classifier::new(Limits::new().with_max_depth(depth).with_max_batch_len(batch_len));
        let default = Classifier::default();
        let got = classify(&input);
        let _ = tiny.classify(&input);
        for &v in ProtocolVersion::ALL {
            let parsed = default.parse(&input, v);
            let _ = tiny.parse(&input, v);
            let first = input.iter().find(|b| !b" \t\r\n".contains(b));
            if first != Some(&b'[') {
                prop_assert_eq!(&parsed, &got.clone().map(Parsed::Single));
            } else {
                // Arrays: JSON validity is decided before the shape, whatever the revision.
                prop_assert_eq!(is_json_error(&parsed), is_json_error(&got), "{:?} under {}", escape(&input), v);
                if !is_json_error(&got) {
                    prop_assert!(got == Err(ParseError::UnexpectedBatch), "{:?}", got);
                    match &parsed {
                        Ok(Parsed::Batch(items)) => {
                            prop_assert!(v.allows_batches());
                            prop_assert!(!items.is_empty() && items.len() <= Limits::default().max_batch_len());
                            for m in items.iter().flatten() {
                                check_raw_slices(m, &input)?;
                            }
                        }
                        Err(ParseError::BatchNotAllowed { version }) => prop_assert!(!v.allows_batches() && *version == v),
                        Err(ParseError::EmptyBatch | ParseError::BatchTooLarge { .. }) => prop_assert!(v.allows_batches()),
                        other => prop_assert!(false, "{:?} under {}: {:?}", escape(&input), v, other),
                    }
                }
            }
        }
        if let Ok(msg) = &got {
            check_raw_slices(msg, &input)?;
        }
        // (f) An HTTP body is validated once: text exactly when classify takes it as UTF-8.
        match body_text(Bytes::from(input.clone())) {
            Ok(text) => prop_assert_eq!(text.as_bytes(), &input[..]),
            Err(e) => prop_assert_eq!(Err(e), got.clone().map(|_| ())),
        }
        match std::str::from_utf8(&input) {
            Ok(text) => {
                check_envelopes(text)?;
                prop_assert_eq!(&default.classify_str(text), &got);
                prop_assert_eq!(&classify_str(text), &got);
                let event = default.classify_event(text);
                if text.is_empty() {
                    prop_assert_eq!(event, Ok(None));
                } else {
                    prop_assert_eq!(event, got.clone().map(Some));
                }
                let any = default.parse_any(&input);
                prop_assert_eq!(&any, &default.parse(&input, ProtocolVersion::V2025_03_26));
                if let Ok(raw) = RawJson::new(text) {
                    prop_assert_eq!(raw.as_str(), text.trim_matches(JSON_WS));
                    prop_assert_eq!(raw.is_object(), raw.as_str().starts_with('{'));
                }
                // Validity agrees with serde_json (the depth limit cannot be reached here).
                prop_assert!(max_possible_depth(&input) < 100);
                let serde_ok = serde_json::from_str::<IgnoredAny>(text).is_ok();
                prop_assert_eq!(!is_json_error(&got), serde_ok, "{:?}: {:?}", text, got);
                prop_assert_eq!(RawJson::new(text).is_ok(), serde_ok, "{:?}", text);
            }
            Err(e) => {
                // JSONRPC-1: UTF-8 or -32700, pointing at the first bad byte.
                match &got {
                    Err(ParseError::Json(j)) => {
                        prop_assert_eq!(j.kind, JsonErrorKind::InvalidUtf8);
                        prop_assert_eq!(j.offset, e.valid_up_to());
                    }
                    other => prop_assert!(false, "{:?}: {:?}", escape(&input), other),
                }
            }
        }
    }

    /// (b) `RawJson::new` on arbitrary strings: no panic; on success, the value is the
    /// text without the whitespace around it.
    #[test]
    fn raw_json_new_never_panics(text in prop_oneof![any::<String>(), json_ish()]) {
        if let Ok(raw) = RawJson::new(&text) {
            prop_assert_eq!(raw.as_str(), text.trim_matches(JSON_WS));
        }
    }

    /// (c) On valid JSON and mutations of it, `RawJson::new` accepts exactly what
    /// serde_json accepts (`IgnoredAny`), and classification answers -32700 exactly for
    /// the texts serde_json rejects; a text serde_json reads into a `Value` is never a
    /// -32700, and an object never an "unexpected batch" or "not an object".
    ///
    /// Known differences, each pinned by a `known_difference_*` test:
    /// 1. Depth: mcpwire refuses more than 128 levels in a text; serde_json's `IgnoredAny`
    ///    has no limit and its `Value` 127 levels in all. Generated depth stays below 10.
    /// 2. Lone surrogate escapes (`"\ud800"`): RFC 8259's grammar allows them; mcpwire
    ///    and `IgnoredAny` accept them, `Value` does not (a Rust string cannot hold one).
    ///    So they do not affect `RawJson::new` against `IgnoredAny`, only the `Value`
    ///    side, where they are excluded by serde_json's message.
    /// 3. Numbers beyond `f64` (`1e400`): valid JSON;
    ///    mcpwire and `IgnoredAny` accept them, `Value` answers "number out of range".
    #[test]
    fn jsonrpc_1_validity_agrees_with_serde_json(text in json_ish()) {
        prop_assert!(max_possible_depth(text.as_bytes()) < 100, "depth limit in play");
        let ours = RawJson::new(&text);
        let ignored = serde_json::from_str::<IgnoredAny>(&text);
        prop_assert_eq!(ours.is_ok(), ignored.is_ok(), "{:?}: ours {:?}, serde_json {:?}", text, ours, ignored);

        let got = classify(text.as_bytes());
        match &ignored {
            Err(_) => {
                prop_assert!(is_json_error(&got), "{:?}: {:?}", text, got);
                prop_assert_eq!(got.as_ref().unwrap_err().jsonrpc_code(), ErrorCode::PARSE_ERROR);
            }
            Ok(_) => prop_assert!(!is_json_error(&got), "{:?}: {:?}", text, got),
        }
        for &v in ProtocolVersion::ALL {
            prop_assert_eq!(is_json_error(&Classifier::default().parse(text.as_bytes(), v)), ignored.is_err());
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(value) => {
                prop_assert!(!is_json_error(&got));
                match value {
                    Value::Object(_) => prop_assert!(
                        !matches!(&got, Err(ParseError::Shape(e)) if e.shape == Shape::NotAnObject)
                            && got != Err(ParseError::UnexpectedBatch),
                        "{:?}", got
                    ),
                    Value::Array(_) => prop_assert!(got == Err(ParseError::UnexpectedBatch), "{:?}", got),
                    _ => prop_assert!(matches!(&got, Err(ParseError::Shape(e)) if e.shape == Shape::NotAnObject), "{:?}", got),
                }
            }
            Err(e) if ignored.is_ok() => {
                // serde_json's `Value` refuses JSON that its `IgnoredAny` takes: only
                // the known differences 2 and 3 may do that.
                let message = e.to_string();
                prop_assert!(
                    VALUE_ONLY_FAILURES.iter().any(|known| message.starts_with(known)),
                    "unexpected Value-only failure {:?} for {:?}", message, text
                );
            }
            Err(_) => {}
        }
    }

    /// (d) Classification of arbitrary envelopes equals the literal model of JSONRPC-8:
    /// alone, under every revision, and as a batch element under 2025-03-26 (BATCH-4:
    /// `initialize` is an invalid element).
    #[test]
    fn jsonrpc_8_classification_matches_the_model(fields in envelope()) {
        let text = render_fields(&fields);
        let expect = model(&fields)?;
        let got = classify(text.as_bytes());
        check_model(&expect, &got, &text)?;
        for &v in ProtocolVersion::ALL {
            prop_assert_eq!(Classifier::default().parse(text.as_bytes(), v), got.clone().map(Parsed::Single));
        }
        let batch = format!("[{text}]");
        let element = match Classifier::default().parse(batch.as_bytes(), ProtocolVersion::V2025_03_26) {
            Ok(Parsed::Batch(mut items)) if items.len() == 1 => items.pop().unwrap().map_err(ParseError::Shape),
            other => return Err(TestCaseError::fail(format!("batch {batch}: {other:?}"))),
        };
        let expect_in_batch = match expect {
            Expect::Request { id, method, .. } if method == "initialize" => Expect::Invalid { id: Some(Some(id)) },
            e => e,
        };
        check_model(&expect_in_batch, &element, &batch)?;
        if let Err(ParseError::Shape(e)) = &element {
            if matches!(&got, Ok(Message::Request(r)) if r.method == "initialize") {
                prop_assert_eq!(e.shape, Shape::InitializeInBatch);
            }
        }
    }

    /// (e) `Pending` equals a naive list of (id, token, deadline) and a queue of expired
    /// requests under random register, resolve, cancel, contains, handle_timeout and
    /// poll_expired with an advancing clock: `handle_timeout(now)` expires exactly the
    /// requests due by `now`, earliest deadline first, an expired request is no longer
    /// pending and still counts against the limit until polled; `poll_timeout` is always
    /// the model's earliest deadline (JSONRPC-3, JSONRPC-4).
    #[test]
    fn jsonrpc_3_pending_matches_a_naive_model(max in 0usize..8, ops in vec(op(), 0..60)) {
        let start = Instant::now() + Duration::from_secs(1);
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut p = Pending::new(max);
        let mut m = PendingModel { entries: Vec::new(), expired: Default::default(), next: 1, max };
        let mut now = 0u64;
        for op in &ops {
            match op {
                Op::Register { token, deadline } => {
                    let deadline = deadline.map(|d| now.saturating_add_signed(d));
                    let got = p.register(*token, deadline.map(at));
                    if m.entries.len() + m.expired.len() >= m.max {
                        prop_assert_eq!(got, Err(PendingError::TooMany { limit: m.max }));
                    } else {
                        prop_assert_eq!(got, Ok(RequestId::int(m.next)));
                        m.entries.push((m.next, *token, deadline));
                        m.next += 1;
                    }
                }
                Op::Resolve(t) => {
                    let id = m.id(t);
                    let expected = match m.remove(&id) {
                        Some(token) => Resolution::Matched(token),
                        None if id.as_int().is_some_and(|n| (1..m.next).contains(&n)) => Resolution::Stale,
                        None => Resolution::Unknown,
                    };
                    prop_assert_eq!(p.resolve(&id), expected, "resolve {}", id);
                }
                Op::Cancel(t) => {
                    let id = m.id(t);
                    prop_assert_eq!(p.cancel(&id), m.remove(&id), "cancel {}", id);
                }
                Op::Contains(t) => {
                    let id = m.id(t);
                    let expected = id.as_int().is_some_and(|n| m.entries.iter().any(|e| e.0 == n));
                    prop_assert_eq!(p.contains(&id), expected);
                }
                Op::Poll { advance, handle, drain } => {
                    now += advance;
                    if *handle {
                        p.handle_timeout(at(now));
                        m.handle_timeout(now);
                    }
                    loop {
                        let got = p.poll_expired();
                        let expected = m.expired.pop_front().map(|(id, token)| (RequestId::int(id), token));
                        let done = got.is_none();
                        prop_assert_eq!(got, expected);
                        if done || !drain {
                            break;
                        }
                    }
                }
            }
            prop_assert_eq!(p.poll_timeout(), m.min_deadline().map(at));
            prop_assert_eq!(p.len(), m.entries.len());
            prop_assert_eq!(p.is_empty(), m.entries.is_empty());
        }
    }

    /// (e) `InFlight` equals a set: a reused id in flight is refused (JSONRPC-3), `1` and
    /// `"1"` are different ids (JSONRPC-8), the set is bounded.
    #[test]
    fn jsonrpc_3_in_flight_matches_a_set(
        max in 0usize..5,
        ops in vec((any::<bool>(), prop_oneof![
            (0i64..4).prop_map(RequestId::int),
            (0u8..4).prop_map(|n| RequestId::string(&n.to_string())),
        ]), 0..40),
    ) {
        let mut f = InFlight::new(max);
        let mut set = BTreeSet::new();
        for (begin, id) in ops {
            if begin {
                let expected = if set.contains(&id) {
                    Err(InFlightError::Reused(id.clone()))
                } else if set.len() >= max {
                    Err(InFlightError::TooMany { limit: max })
                } else {
                    set.insert(id.clone());
                    Ok(())
                };
                prop_assert_eq!(f.begin(&id), expected);
            } else {
                prop_assert_eq!(f.end(&id), set.remove(&id));
            }
            prop_assert_eq!(f.len(), set.len());
            prop_assert_eq!(f.is_empty(), set.is_empty());
            prop_assert_eq!(f.contains(&id), set.contains(&id));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Known, intended differences from serde_json, pinned.

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// Known difference 1, depth. mcpwire: at most 128 levels (`Limits::max_depth`), counted
/// over the whole text, the message object included, so a message's `params` nests 127.
/// serde_json `IgnoredAny`: no limit (it skips iteratively). serde_json `Value`: its
/// recursion budget of 128 is spent before each container is entered and fails at zero,
/// so 127 levels in all: one level fewer than mcpwire.
#[test]
fn known_difference_depth() {
    assert!(RawJson::new(&nested(128)).is_ok());
    assert_eq!(
        RawJson::new(&nested(129)).unwrap_err().kind,
        JsonErrorKind::TooDeep { limit: 128 }
    );
    for depth in [128, 129, 5000] {
        assert!(serde_json::from_str::<IgnoredAny>(&nested(depth)).is_ok());
    }
    assert!(serde_json::from_str::<Value>(&nested(127)).is_ok());
    assert!(serde_json::from_str::<Value>(&nested(128)).is_err());

    let message = |depth| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"m","params":{}}}"#,
            nested(depth)
        )
    };
    assert!(matches!(
        classify(message(127).as_bytes()),
        Ok(Message::Notification(_))
    ));
    assert!(matches!(
        classify(message(128).as_bytes()),
        Err(ParseError::Json(e)) if e.kind == JsonErrorKind::TooDeep { limit: 128 }
    ));
    assert!(serde_json::from_str::<Value>(&message(126)).is_ok());
    assert!(serde_json::from_str::<Value>(&message(127)).is_err());
}

/// Known difference 2, unpaired surrogate escapes: valid by the RFC 8259 grammar (§7,
/// §8.2 says only that behaviour is unpredictable), accepted by mcpwire's validation and
/// by serde_json's `IgnoredAny`, refused by serde_json's `Value`. The envelope cannot
/// hold such a string: as an id or a method it is refused as
/// `Shape::UnpairedSurrogate` (saying what is wrong), as the version it is not `"2.0"`,
/// as an error message the error object is invalid; as a key it names no envelope member.
#[test]
fn known_difference_lone_surrogates() {
    for text in [
        r#""\ud800""#,
        r#""\udfff""#,
        r#""\ud83d\u0041""#,
        r#"{"\ud800":1}"#,
    ] {
        assert!(RawJson::new(text).is_ok(), "{text}");
        assert!(serde_json::from_str::<IgnoredAny>(text).is_ok(), "{text}");
        assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
    }
    let shape = |text: &str| match classify(text.as_bytes()) {
        Err(ParseError::Shape(e)) => Some(e.shape),
        _ => None,
    };
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","method":"\ud800"}"#),
        Some(Shape::UnpairedSurrogate("method"))
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":"\ud800","method":"m"}"#),
        Some(Shape::UnpairedSurrogate("id"))
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"\ud800","method":"m"}"#),
        Some(Shape::WrongVersion)
    );
    assert_eq!(
        shape(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"\udc00"}}"#),
        Some(Shape::InvalidError)
    );
    let Ok(Message::Notification(n)) =
        classify(br#"{"jsonrpc":"2.0","method":"m","\ud800method":1,"params":["\ud800"]}"#)
    else {
        panic!("a lone surrogate in a key or in params is no shape error");
    };
    assert_eq!(n.params.unwrap().as_str(), r#"["\ud800"]"#);
}

/// Known difference 3: numbers beyond `f64`. `1e400` is valid JSON
/// (RFC 8259 §6 leaves range to implementations); mcpwire and `IgnoredAny` accept it,
/// `Value` refuses it ("number out of range"). As params it is forwarded untouched.
#[test]
fn known_difference_numbers_beyond_f64() {
    for text in ["1e400", "-1E+400", "[1e999]"] {
        assert!(RawJson::new(text).is_ok());
        assert!(serde_json::from_str::<IgnoredAny>(text).is_ok());
        assert!(
            serde_json::from_str::<Value>(text)
                .unwrap_err()
                .to_string()
                .starts_with("number out of range")
        );
    }
    let Ok(Message::Request(r)) =
        classify(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1e400}}"#)
    else {
        panic!("a huge number in params is a request");
    };
    assert_eq!(r.params.unwrap().as_str(), r#"{"x":1e400}"#);
}

/// Known difference 4 (fuzz target only, which reads bytes): serde_json's `from_slice`
/// does not check UTF-8 inside a string it ignores; mcpwire requires UTF-8 (JSONRPC-1).
#[test]
fn known_difference_utf8_in_ignored_strings() {
    assert!(serde_json::from_slice::<IgnoredAny>(b"\"\xff\"").is_ok());
    assert!(serde_json::from_slice::<Value>(b"\"\xff\"").is_err());
    assert!(matches!(
        classify(b"\"\xff\""),
        Err(ParseError::Json(e)) if e.kind == JsonErrorKind::InvalidUtf8 && e.offset == 1
    ));
}

/// Batches: the empty batch is one invalid request (BATCH-5); batches are refused after
/// 2025-03-26 (BATCH-6); `initialize` is an invalid element (BATCH-4), the others stand.
#[test]
fn batch_5_empty_and_mixed_batches() {
    let c = Classifier::default();
    assert_eq!(
        c.parse(b" [ ] ", ProtocolVersion::V2025_03_26),
        Err(ParseError::EmptyBatch)
    );
    for &v in ProtocolVersion::ALL.iter().filter(|v| !v.allows_batches()) {
        assert_eq!(
            c.parse(b"[]", v),
            Err(ParseError::BatchNotAllowed { version: v })
        );
    }
    let text =
        br#"[{"jsonrpc":"2.0","id":1,"method":"initialize"},1,{"jsonrpc":"2.0","method":"x"}]"#;
    let Ok(Parsed::Batch(items)) = c.parse(text, ProtocolVersion::V2025_03_26) else {
        panic!()
    };
    assert_eq!(items.len(), 3);
    assert_eq!(
        items[0].as_ref().unwrap_err().shape,
        Shape::InitializeInBatch
    );
    assert_eq!(items[0].as_ref().unwrap_err().id, Some(RequestId::int(1)));
    assert_eq!(items[1].as_ref().unwrap_err().shape, Shape::NotAnObject);
    assert!(matches!(&items[2], Ok(Message::Notification(n)) if n.method == "x"));
}

// ---------------------------------------------------------------------------------------
// Contracts that an earlier version broke (found by this file; now fixed).

/// `MessageBuf` writes no line break of its own; a `RawJson` payload keeps its own
/// whitespace byte for byte, and through an SSE frame it still decodes to the same JSON.
#[test]
fn message_buf_writes_no_line_break_of_its_own() {
    let mut buf = MessageBuf::new();
    let value = serde_json::json!({"text": "a\r\nb", "k\n": ["\n"]});
    let text = buf
        .push_request(&RequestId::string("a\nb"), "m\r", Some(&Json(&value)))
        .unwrap();
    assert!(!text.contains(['\r', '\n']), "{text:?}");
    buf.clear();
    let params = RawJson::new("{\r\n\"a\": 1}").unwrap();
    let text = buf
        .push_request(&RequestId::int(1), "m", Some(&params))
        .unwrap()
        .to_owned();
    assert!(text.contains("{\r\n\"a\": 1}"), "{text:?}");
    let mut frame = bytes::BytesMut::new();
    mcpwire::sse::Encoder::new().encode_event(&mcpwire::sse::EventFields::new(), &text, &mut frame);
    let mut decoder = mcpwire::sse::Decoder::default();
    decoder.push(frame.freeze()).unwrap();
    let event = mcpwire_tests::reference::sse::next_event(&mut decoder)
        .unwrap()
        .unwrap();
    let Ok(Message::Request(r)) = classify(event.data().as_bytes()) else {
        panic!("{event:?}")
    };
    let decoded: serde_json::Value = serde_json::from_str(r.params.unwrap().as_str()).unwrap();
    assert_eq!(decoded, serde_json::json!({"a": 1}));
}

/// Nesting is counted over the whole text, the same way alone and in a batch: the
/// message object is one level, an error object one more, a batch array one more.
#[test]
fn depth_is_counted_over_the_whole_text_alone_and_in_a_batch() {
    let element = |depth| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":1,"message":"m","data":{}}}}}"#,
            nested(depth)
        )
    };
    let c = Classifier::default();
    let v1 = ProtocolVersion::V2025_03_26;
    assert!(matches!(
        c.classify(element(126).as_bytes()),
        Ok(Message::Error(_))
    ));
    assert!(is_json_error(&c.classify(element(127).as_bytes())));
    let batch = |depth| format!("[{}]", element(depth));
    assert!(matches!(
        c.parse(batch(125).as_bytes(), v1),
        Ok(Parsed::Batch(items)) if matches!(items[..], [Ok(Message::Error(_))])
    ));
    assert!(is_json_error(&c.parse(batch(126).as_bytes(), v1)));
}

/// `classify` and `parse` agree on whether deep arrays are JSON, under every version.
#[test]
fn classify_and_parse_agree_on_deep_arrays() {
    let c = Classifier::default();
    for depth in [126, 127, 128, 129] {
        let text = format!("[{}]", nested(depth));
        let classified = is_json_error(&c.classify(text.as_bytes()));
        assert_eq!(classified, depth >= 128, "{depth}");
        for &v in ProtocolVersion::ALL {
            assert_eq!(
                is_json_error(&c.parse(text.as_bytes(), v)),
                classified,
                "{depth} {v}"
            );
        }
    }
}

/// `RequestId`'s `Display` is the id's JSON text.
#[test]
fn request_id_display_is_json() {
    for s in ["\u{1}", "\u{7f}", "\u{feff}", "a\"b\\c\n", "é😀"] {
        assert_eq!(
            RequestId::string(s).to_string(),
            serde_json::to_string(s).unwrap()
        );
    }
    assert_eq!(RequestId::int(-5).to_string(), "-5");
}
