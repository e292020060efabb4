//! `jsonrpc_classify`: arbitrary bytes as one HTTP body or SSE event's data, classified
//! as JSON-RPC (docs/requirements.md §3 JSONRPC-*, §12 BATCH-*).
//!
//! Checks:
//! 1. `classify` and `Classifier::parse` under 2025-03-26 (batches) and 2025-11-25 (no
//!    batches), with default and with tiny limits, never panic; `parse` on a non-array
//!    equals `classify`; on an array, JSON validity is decided before the revision.
//! 2. JSON validity agrees with serde_json: the answer is -32700 exactly when
//!    `serde_json::from_slice::<IgnoredAny>` rejects the input, except for the known
//!    differences (pinned in `tests/tests/jsonrpc_props.rs`, `known_difference_*`):
//!    - not UTF-8: always -32700 `InvalidUtf8` at the first bad byte here (JSONRPC-1);
//!      serde_json's `from_slice` does not check the bytes of a string it ignores;
//!    - depth: more than 128 levels in the text is -32700 `TooDeep` here;
//!      `IgnoredAny` has no depth limit.
//!
//!    (Lone surrogate escapes and numbers beyond `f64` are no difference: both accept
//!    them when ignoring.)
//! 3. A classified message, re-encoded with `MessageBuf` (payloads as `RawJson`),
//!    classifies to the same message, and encoding that gives the same text; the same
//!    for every valid element of a 2025-03-26 batch. Its `Outgoing` encoded straight
//!    into an SSE frame is byte for byte that text given to `sse::Encoder::encode_event`.
//! 4. Owned envelopes agree with the borrowed classification: `Classifier::envelope`
//!    with `classify`, `Classifier::envelopes` with `parse` (every element's view, its
//!    text classifying alone to the same message), `body_text` with the UTF-8 check;
//!    `parse_any` is `parse` under 2025-03-26.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use mcpwire::jsonrpc::{
    Classifier, Envelope, Envelopes, JsonErrorKind, Limits, Message, MessageBuf, Outgoing,
    ParseError, Parsed, ToJson, body_text, classify, classify_str,
};
use mcpwire::sse::{Encoder, EventFields, Id};
use mcpwire::{ProtocolVersion, Utf8Bytes};
use serde::de::IgnoredAny;

const VERSIONS: [ProtocolVersion; 2] = [ProtocolVersion::V2025_03_26, ProtocolVersion::V2025_11_25];

fn is_json_error<T>(r: &Result<T, ParseError>) -> bool {
    matches!(r, Err(ParseError::Json(_)))
}

fn is_too_deep<T>(r: &Result<T, ParseError>) -> bool {
    matches!(r, Err(ParseError::Json(e)) if matches!(e.kind, JsonErrorKind::TooDeep { .. }))
}

/// The `Outgoing` that writes `msg`, its payloads as the `RawJson` it holds.
fn with_outgoing<R>(msg: &Message<'_>, f: impl FnOnce(&Outgoing<'_>) -> R) -> R {
    match msg {
        Message::Request(r) => f(&Outgoing::Request {
            id: &r.id,
            method: &r.method,
            params: r.params.as_ref().map(|p| p as &dyn ToJson),
        }),
        Message::Notification(n) => f(&Outgoing::Notification {
            method: &n.method,
            params: n.params.as_ref().map(|p| p as &dyn ToJson),
        }),
        Message::Response(r) => f(&Outgoing::Response {
            id: &r.id,
            result: &r.result,
        }),
        Message::Error(e) => f(&Outgoing::Error {
            id: e.id.as_ref(),
            code: e.error.code,
            message: &e.error.message,
            data: e.error.data.as_ref().map(|d| d as &dyn ToJson),
        }),
    }
}

/// 3. The frame of `msg` is its text encoded as an event.
fn check_frame(msg: &Message<'_>, text: &str) {
    let fields = EventFields::new().with_id(Id::new("s:1").expect("a valid id"));
    let mut expected = BytesMut::new();
    Encoder::new().encode_event(&fields, text, &mut expected);
    let mut frame = BytesMut::from(&b": before\n\n"[..]);
    with_outgoing(msg, |o| o.encode_frame(&fields, &mut frame))
        .expect("RawJson payloads always encode");
    assert_eq!(&frame[..10], b": before\n\n");
    assert_eq!(&frame[10..], &expected[..], "frame of {text:?}");
}

/// 4. An envelope says what the borrowed message says; its text is a slice of `input`.
fn check_envelope(e: &Envelope, msg: &Message<'_>, input: &Utf8Bytes) {
    assert_eq!(&e.message(), msg);
    assert_eq!(
        (e.kind(), e.id(), e.method()),
        (msg.kind(), msg.id(), msg.method())
    );
    assert_eq!(
        e.payload_bytes().as_deref(),
        e.payload().map(|p| p.as_str())
    );
    assert!(input.as_bytes().as_ptr_range().contains(&e.text().as_ptr()));
}

/// 4.
fn check_envelopes(text: &str, classifier: &Classifier) {
    let input = Utf8Bytes::from(text.to_owned());
    match (
        classifier.envelope(input.clone()),
        classifier.classify_str(text),
    ) {
        (Ok(e), Ok(msg)) => check_envelope(&e, &msg, &input),
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("envelope {a:?}, classify {b:?}"),
    }
    for v in VERSIONS {
        match (
            classifier.envelopes(input.clone(), v),
            classifier.parse(text.as_bytes(), v),
        ) {
            (Ok(Envelopes::Single(e)), Ok(Parsed::Single(msg))) => check_envelope(&e, &msg, &input),
            (Ok(Envelopes::Batch(owned)), Ok(Parsed::Batch(items))) => {
                assert_eq!(owned.len(), items.len());
                for (e, item) in owned.iter().zip(&items) {
                    match (e, item) {
                        (Ok(e), Ok(msg)) => {
                            check_envelope(e, msg, &input);
                            assert_eq!(classify_str(e.text()).as_ref(), Ok(msg));
                        }
                        (Err(a), Err(b)) => assert_eq!(a, b),
                        (a, b) => panic!("element {a:?}, parse {b:?}"),
                    }
                }
            }
            (Err(a), Err(b)) => assert_eq!(a, b),
            (a, b) => panic!("envelopes {a:?}, parse {b:?} under {v}"),
        }
    }
}

/// Encodes `msg` with `MessageBuf`, its payloads as the `RawJson` it holds.
fn encode(msg: &Message<'_>) -> String {
    let mut buf = MessageBuf::new();
    let text = match msg {
        Message::Request(r) => buf.push_request(
            &r.id,
            &r.method,
            r.params.as_ref().map(|p| p as &dyn ToJson),
        ),
        Message::Notification(n) => {
            buf.push_notification(&n.method, n.params.as_ref().map(|p| p as &dyn ToJson))
        }
        Message::Response(r) => buf.push_result(&r.id, &r.result),
        Message::Error(e) => buf.push_error(
            e.id.as_ref(),
            e.error.code,
            &e.error.message,
            e.error.data.as_ref().map(|d| d as &dyn ToJson),
        ),
    };
    text.expect("RawJson payloads always encode").to_owned()
}

/// 3. Re-encoding round trip.
fn check_reencode(msg: &Message<'_>, input: &[u8]) {
    let text = encode(msg);
    let again = classify(text.as_bytes());
    assert_eq!(
        again.as_ref(),
        Ok(msg),
        "{:?} re-encoded as {text:?}",
        String::from_utf8_lossy(input)
    );
    assert_eq!(
        encode(again.as_ref().unwrap()),
        text,
        "encoding is not stable"
    );
    check_frame(msg, &text);
}

fuzz_target!(|input: &[u8]| {
    let classifier = Classifier::default();
    let tiny = Classifier::new(Limits::new().with_max_depth(2).with_max_batch_len(2));

    // 1.
    let got = classify(input);
    let _ = tiny.classify(input);
    let is_array = input.iter().find(|b| !b" \t\r\n".contains(b)) == Some(&b'[');
    let parsed = VERSIONS.map(|v| {
        let _ = tiny.parse(input, v);
        classifier.parse(input, v)
    });
    for (v, p) in VERSIONS.iter().zip(&parsed) {
        if is_array {
            if !is_too_deep(&got) && !is_too_deep(p) {
                assert_eq!(
                    is_json_error(p),
                    is_json_error(&got),
                    "{v}: {p:?} vs {got:?}"
                );
            }
        } else {
            assert_eq!(p, &got.clone().map(Parsed::Single), "{v}");
        }
    }
    if is_array && !is_json_error(&parsed[1]) {
        assert_eq!(
            parsed[1],
            Err(ParseError::BatchNotAllowed {
                version: ProtocolVersion::V2025_11_25
            })
        );
    }

    // 4. A body is text exactly when it is UTF-8, and is not copied.
    match body_text(Bytes::copy_from_slice(input)) {
        Ok(text) => assert_eq!(text.as_bytes(), input),
        Err(e) => assert_eq!(Err(e), got.clone().map(|_| ())),
    }

    // 2.
    match std::str::from_utf8(input) {
        Err(e) => {
            for r in [got.as_ref().map(|_| ()), parsed[0].as_ref().map(|_| ())] {
                match r {
                    Err(ParseError::Json(j)) => {
                        assert_eq!(j.kind, JsonErrorKind::InvalidUtf8);
                        assert_eq!(j.offset, e.valid_up_to());
                    }
                    other => panic!("not UTF-8, yet {other:?}"),
                }
            }
        }
        Ok(text) => {
            assert_eq!(classifier.classify_str(text), got);
            assert_eq!(classifier.parse_any(input), parsed[0]);
            check_envelopes(text, &classifier);
            let serde_ok = serde_json::from_slice::<IgnoredAny>(input).is_ok();
            if !is_too_deep(&got) {
                assert_eq!(
                    !is_json_error(&got),
                    serde_ok,
                    "classify {got:?}, serde_json ok = {serde_ok}, for {text:?}"
                );
            }
            for (v, p) in VERSIONS.iter().zip(&parsed) {
                if !is_too_deep(p) {
                    assert_eq!(!is_json_error(p), serde_ok, "{v}: {p:?} for {text:?}");
                }
            }
        }
    }

    // 3.
    if let Ok(msg) = &got {
        check_reencode(msg, input);
    }
    if let Ok(Parsed::Batch(items)) = &parsed[0] {
        assert!(!items.is_empty());
        for msg in items.iter().flatten() {
            check_reencode(msg, input);
        }
    }
});
