//! Property tests for the SSE codec (ARCHITECTURE.md "Testing pyramid" 2 and 3):
//!
//! - chunking invariance: any split of any input, fed by `push` or `push_slice`, drained
//!   after each chunk or at the end, pulled by `poll_item` or `poll_item_ref`, gives the
//!   same items, last event id and retry as one push, under default and under tiny limits
//!   (SSE-PARSE-3, SSE-PARSE-22);
//! - encode→decode round trip of arbitrary frame sequences (SSE-ENC-*), with
//!   `encoded_len` equal to the bytes written;
//! - differential: mcpwire's decoder equals the spec-literal reference decoder on
//!   arbitrary input and arbitrary chunkings (SSE-PARSE-1..19), and, under small limits,
//!   the reference's model of the limits (SSE-PARSE-22).
//!
//! Each property runs 10,000 cases.

use std::time::Duration;

use bytes::BytesMut;
use mcpwire::sse::{Comment, Encoder, EventFields, EventType, Id, Limits};
use mcpwire_tests::reference::sse::{self as reference, Drain, Feed, Item, Outcome, Pull, escape};
use proptest::prelude::*;
use proptest::sample::Index;

const CASES: u32 = 10_000;

// ---------------------------------------------------------------------------------------
// Input generators.

/// Pieces that make SSE-shaped input likely: field names (right and wrong), colons,
/// spaces, every line end, BOMs, NUL, non-ASCII and invalid UTF-8.
const TOKENS: &[&[u8]] = &[
    b"data",
    b"data:",
    b"data: ",
    b"event",
    b"event:",
    b"event: ",
    b"id",
    b"id:",
    b"id: ",
    b"retry",
    b"retry:",
    b"retry: ",
    b"Data",
    b" data",
    b"foo",
    b":",
    b": ",
    b" ",
    b"  ",
    b"\t",
    b"\r",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"\r\n\r\n",
    b"\r\r",
    b"\xEF\xBB\xBF",
    b"\xEF",
    b"\xEF\xBB",
    b"\0",
    b"0",
    b"7",
    b"1500",
    b"18446744073709551616",
    b"-",
    b".",
    b"x",
    b"abc",
    b"message",
    "é".as_bytes(),
    "€".as_bytes(),
    "😀".as_bytes(),
    "\u{FEFF}".as_bytes(),
    b"\xFF",
    b"\x80",
    b"\xC3",
    b"\xE2\x82",
    b"\xF0\x9F\x98",
    b"\xC0\x80",
    b"\xED\xA0\x80",
];

fn token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        12 => proptest::sample::select(TOKENS).prop_map(<[u8]>::to_vec),
        1 => any::<u8>().prop_map(|b| vec![b]),
    ]
}

/// Bytes for field values: digits (valid and bogus retry values), text, spaces, colons,
/// NUL, non-ASCII, invalid UTF-8 and a BOM.
const VALUE_TOKENS: &[&[u8]] = &[
    b"x",
    b"abc",
    b"{\"jsonrpc\":\"2.0\"}",
    b"0",
    b"7",
    b"1500",
    b"-1",
    b"1.5",
    b"18446744073709551616",
    b" ",
    b":",
    b"\0",
    b"\t",
    "é".as_bytes(),
    "😀".as_bytes(),
    b"\xFF",
    b"\xE2\x82",
    b"\xF0\x9F\x98",
    b"\xEF\xBB\xBF",
];

fn value() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        8 => proptest::sample::select(VALUE_TOKENS).prop_map(<[u8]>::to_vec),
        1 => any::<u8>().prop_map(|b| vec![b]),
    ];
    proptest::collection::vec(piece, 0..5).prop_map(|p| p.concat())
}

/// One SSE line with its line end: a field (right or wrong name, with or without a
/// colon and a space), a comment, or a blank line.
fn line() -> impl Strategy<Value = Vec<u8>> {
    const NAMES: &[&[u8]] = &[
        b"data",
        b"data",
        b"data",
        b"data",
        b"event",
        b"id",
        b"id",
        b"retry",
        b"retry",
        b"Data",
        b" data",
        b"data ",
        b"foo",
        b"\xEF\xBB\xBFdata",
        b"d\xFFata",
    ];
    const SEPARATORS: &[&[u8]] = &[b"", b":", b":", b": ", b": ", b":  "];
    const ENDS: &[&[u8]] = &[b"\n", b"\n", b"\r\n", b"\r"];
    let field = (
        proptest::sample::select(NAMES),
        proptest::sample::select(SEPARATORS),
        value(),
    )
        .prop_map(|(name, sep, value)| {
            let value: &[u8] = if sep.is_empty() { b"" } else { &value };
            [name, sep, value].concat()
        });
    let comment = value().prop_map(|v| [&b":"[..], &v].concat());
    let retry =
        ("(retry|id): ?", "[0-9]{0,3}|[0-9]{18,22}").prop_map(|(f, v)| (f + &v).into_bytes());
    let body = prop_oneof![6 => field, 1 => retry, 1 => comment, 3 => Just(Vec::new())];
    (body, proptest::sample::select(ENDS)).prop_map(|(body, end)| [&body[..], end].concat())
}

/// A structured stream: maybe a BOM (or a BOM prefix), lines, maybe an unterminated tail.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    const STARTS: &[&[u8]] = &[
        b"",
        b"",
        b"",
        b"",
        b"",
        b"\xEF\xBB\xBF",
        b"\xEF\xBB\xBF\xEF\xBB\xBF",
        b"\xEF\xBB",
        b"\xEF",
    ];
    (
        proptest::sample::select(STARTS),
        proptest::collection::vec(line(), 0..24),
        prop_oneof![3 => Just(Vec::new()), 1 => line().prop_map(|mut l| {
            l.pop();
            l
        })],
    )
        .prop_map(|(start, lines, tail)| [start.to_vec(), lines.concat(), tail].concat())
}

/// Structured SSE streams (mostly), SSE-ish token soup, or fully arbitrary bytes.
fn input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        5 => stream(),
        2 => proptest::collection::vec(token(), 0..48).prop_map(|t| t.concat()),
        1 => proptest::collection::vec(any::<u8>(), 0..256),
    ]
}

/// How an input is cut into chunks.
#[derive(Clone, Debug)]
enum Chunking {
    /// At arbitrary offsets (duplicates give empty chunks).
    Points(Vec<Index>),
    /// Cyclic chunk sizes in 0..=3: many empty and one-byte chunks.
    Tiny(Vec<usize>),
    /// One byte per chunk.
    Bytes,
}

impl Chunking {
    fn apply<'a>(&self, input: &'a [u8]) -> Vec<&'a [u8]> {
        match self {
            Self::Points(points) => {
                let points: Vec<usize> = points.iter().map(|p| p.index(input.len() + 1)).collect();
                reference::split_at(input, &points)
            }
            Self::Tiny(sizes) => reference::split_by_sizes(input, sizes),
            Self::Bytes => input.chunks(1).collect(),
        }
    }
}

fn chunking() -> impl Strategy<Value = Chunking> {
    prop_oneof![
        6 => proptest::collection::vec(any::<Index>(), 0..12).prop_map(Chunking::Points),
        2 => proptest::collection::vec(0usize..=3, 1..6).prop_map(Chunking::Tiny),
        1 => Just(Chunking::Bytes),
    ]
}

fn feed() -> impl Strategy<Value = Feed> {
    prop_oneof![
        Just(Feed::Bytes),
        Just(Feed::Slice),
        Just(Feed::Mixed),
        Just(Feed::Room)
    ]
}

fn pull() -> impl Strategy<Value = Pull> {
    prop_oneof![Just(Pull::Owned), Just(Pull::Borrowed)]
}

fn drain() -> impl Strategy<Value = Drain> {
    prop_oneof![3 => Just(Drain::EachChunk), 1 => Just(Drain::AtEnd)]
}

/// Default limits, or limits small enough that the generated input hits them.
fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        1 => Just(Limits::default()),
        2 => (1usize..48, 1usize..64).prop_map(|(line, event)| {
            Limits::default().with_max_line_len(line).with_max_event_len(event)
        }),
    ]
}

// ---------------------------------------------------------------------------------------
// Frame generators for the round trip.

/// Text pieces for data: every line end, NUL, spaces, colons, non-ASCII, any char.
fn text(max: usize) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\r".to_owned()),
        Just("\n".to_owned()),
        Just("\r\n".to_owned()),
        Just("\0".to_owned()),
        Just(" ".to_owned()),
        Just(":".to_owned()),
        Just("data: ".to_owned()),
        Just("\u{FEFF}".to_owned()),
        Just("é".to_owned()),
        Just("😀".to_owned()),
        "[a-z0-9]{1,4}",
        any::<char>().prop_map(String::from),
    ];
    proptest::collection::vec(piece, 0..max).prop_map(|p| p.concat())
}

fn retry() -> impl Strategy<Value = Duration> {
    prop_oneof![
        4 => (0u64..100_000).prop_map(Duration::from_millis),
        1 => (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        1 => Just(Duration::MAX),
    ]
}

/// One frame to encode. Strings are arbitrary; the ones the encoder's types reject are
/// checked to be rejected and then left out.
#[derive(Clone, Debug)]
enum Spec {
    Event {
        data: String,
        id: Option<String>,
        event: Option<String>,
        retry: Option<Duration>,
    },
    Comment(String),
    Retry(Duration),
    Priming {
        id: String,
        retry: Option<Duration>,
    },
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        6 => (
            text(12),
            proptest::option::of(text(4)),
            proptest::option::of(text(4)),
            proptest::option::weighted(0.2, retry()),
        )
            .prop_map(|(data, id, event, retry)| Spec::Event { data, id, event, retry }),
        1 => text(6).prop_map(Spec::Comment),
        1 => retry().prop_map(Spec::Retry),
        1 => (text(4), proptest::option::of(retry()))
            .prop_map(|(id, retry)| Spec::Priming { id, retry }),
    ]
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Checks a value the encoder's constructor accepted or rejected as SSE-ENC-4 says.
fn checked<'a, T>(
    value: &'a str,
    forbidden: &[char],
    make: impl Fn(&'a str) -> Result<T, mcpwire::sse::EncodeError>,
) -> Result<Option<T>, TestCaseError> {
    let ok = !value.contains(forbidden);
    let made = make(value);
    prop_assert_eq!(made.is_ok(), ok, "validation of {:?}", value);
    Ok(made.ok())
}

/// Encodes `specs` and returns the bytes and the outcome a decoder must produce.
fn encode_model(specs: &[Spec]) -> Result<(Vec<u8>, Outcome), TestCaseError> {
    let enc = Encoder::new();
    let mut buf = BytesMut::new();
    let mut expected = Outcome::default();
    for spec in specs {
        let before = buf.len();
        match spec {
            Spec::Event {
                data,
                id,
                event,
                retry,
            } => {
                let id = match id {
                    Some(id) => checked(id, &['\r', '\n', '\0'], Id::new)?,
                    None => None,
                };
                let event = match event {
                    Some(event) => checked(event, &['\r', '\n'], EventType::new)?,
                    None => None,
                };
                let fields = EventFields {
                    id,
                    event,
                    retry: *retry,
                };
                enc.encode_event(&fields, data, &mut buf);
                prop_assert_eq!(
                    buf.len() - before,
                    enc.encoded_len(&fields, data),
                    "encoded_len"
                );
                if let Some(retry) = retry {
                    expected.retry = Some(ms(*retry));
                    expected.items.push(Item::Retry(ms(*retry)));
                }
                if let Some(id) = id {
                    expected.last_event_id = id.as_str().to_owned();
                }
                let event_type = match event.map(|e| e.as_str()) {
                    None | Some("") => "message",
                    Some(t) => t,
                };
                expected.items.push(Item::event(
                    &reference::normalise_line_ends(data),
                    event_type,
                    &expected.last_event_id,
                ));
            }
            Spec::Comment(text) => {
                if let Some(comment) = checked(text, &['\r', '\n'], Comment::new)? {
                    enc.encode_comment(comment, &mut buf);
                    expected.items.push(Item::Comment(text.clone()));
                }
            }
            Spec::Retry(retry) => {
                enc.encode_retry(*retry, &mut buf);
                expected.retry = Some(ms(*retry));
                expected.items.push(Item::Retry(ms(*retry)));
            }
            Spec::Priming { id, retry } => {
                if let Some(id) = checked(id, &['\r', '\n', '\0'], Id::new)? {
                    enc.encode_priming(id, *retry, &mut buf);
                    if let Some(retry) = retry {
                        expected.retry = Some(ms(*retry));
                        expected.items.push(Item::Retry(ms(*retry)));
                    }
                    expected.last_event_id = id.as_str().to_owned();
                    expected.items.push(Item::message("", id.as_str()));
                }
            }
        }
        // SSE-ENC-1/6: UTF-8, and every frame ends with its blank line.
        // (A rejected comment or priming id writes nothing.)
        let frame = &buf[before..];
        prop_assert!(std::str::from_utf8(frame).is_ok());
        prop_assert!(
            frame.is_empty() || frame.ends_with(b"\n\n"),
            "frame {}",
            escape(frame)
        );
    }
    Ok((buf.to_vec(), expected))
}

// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Any chunking, any feed, any drain schedule, any limits: the same outcome as one push.
    #[test]
    fn sse_parse_3_chunking_invariance(
        input in input(),
        chunking in chunking(),
        feed in feed(),
        drain in drain(),
        pull in pull(),
        limits in limits(),
    ) {
        let whole = reference::run(limits, &[&input[..]], Feed::Bytes, Drain::EachChunk);
        let chunks = chunking.apply(&input);
        prop_assert_eq!(chunks.concat(), input.clone());
        let split = reference::run_with(limits, &chunks, feed, drain, pull);
        prop_assert_eq!(
            &split, &whole,
            "input {:?}, chunks {:?}, {:?}, {:?}, {:?}, {:?}",
            escape(&input), chunks.iter().map(|c| escape(c)).collect::<Vec<_>>(), feed, drain,
            pull, limits
        );
        // Limit errors come one per discarded event; without limits there are none.
        if limits == Limits::default() {
            prop_assert!(whole.errors().is_empty());
        }
    }

    /// Encode arbitrary frame sequences, decode them (reference and mcpwire, arbitrarily
    /// chunked): data comes back with CR and CRLF turned into LF, ids, types and retry
    /// match, and `encoded_len` is exact.
    #[test]
    fn sse_enc_2_encode_decode_round_trip(
        specs in proptest::collection::vec(spec(), 0..8),
        chunking in chunking(),
        feed in feed(),
        pull in pull(),
    ) {
        let (bytes, expected) = encode_model(&specs)?;
        prop_assert_eq!(&reference::decode(&bytes), &expected, "reference, stream {:?}", escape(&bytes));
        let chunks = chunking.apply(&bytes);
        let got = reference::run_with(Limits::default(), &chunks, feed, Drain::EachChunk, pull);
        prop_assert_eq!(&got, &expected, "mcpwire, stream {:?}", escape(&bytes));
    }

    /// Under small limits, mcpwire's decoder equals the reference's model of the limits
    /// (one error per offending event, the event discarded up to its blank line).
    #[test]
    fn sse_parse_22_limits_differential_against_reference(
        input in input(),
        chunking in chunking(),
        feed in feed(),
        drain in drain(),
        pull in pull(),
        (line, event) in (1usize..40, 1usize..48),
    ) {
        let limits = Limits::default().with_max_line_len(line).with_max_event_len(event);
        let expected = reference::decode_limited(&input, limits);
        let chunks = chunking.apply(&input);
        let got = reference::run_with(limits, &chunks, feed, drain, pull);
        prop_assert_eq!(
            &got, &expected,
            "input {:?}, chunks {:?}, {:?}, {:?}, {:?}, {:?}",
            escape(&input), chunks.iter().map(|c| escape(c)).collect::<Vec<_>>(), feed, drain,
            pull, limits
        );
    }

    /// mcpwire's decoder, however the input is chunked and fed, equals the spec-literal
    /// reference decoder on the whole input.
    #[test]
    fn sse_parse_1_differential_against_reference(
        input in input(),
        chunking in chunking(),
        feed in feed(),
        drain in drain(),
        pull in pull(),
    ) {
        let expected = reference::decode(&input);
        let chunks = chunking.apply(&input);
        let got = reference::run_with(Limits::default(), &chunks, feed, drain, pull);
        prop_assert_eq!(
            &got, &expected,
            "input {:?}, chunks {:?}, {:?}, {:?}, {:?}",
            escape(&input), chunks.iter().map(|c| escape(c)).collect::<Vec<_>>(), feed, drain, pull
        );
    }
}
