//! `jsonrpc_classify`: arbitrary bytes as one HTTP body or SSE event's data, classified
//! as JSON-RPC (TRANSPORT.md §3 JSONRPC-*, §12 BATCH-*).
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
//!    for every valid element of a 2025-03-26 batch.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire::ProtocolVersion;
use mcpwire::jsonrpc::{
    Classifier, JsonErrorKind, Limits, Message, MessageBuf, ParseError, Parsed, ToJson, classify,
};
use serde::de::IgnoredAny;

const VERSIONS: [ProtocolVersion; 2] = [ProtocolVersion::V2025_03_26, ProtocolVersion::V2025_11_25];

fn is_json_error<T>(r: &Result<T, ParseError>) -> bool {
    matches!(r, Err(ParseError::Json(_)))
}

fn is_too_deep<T>(r: &Result<T, ParseError>) -> bool {
    matches!(r, Err(ParseError::Json(e)) if matches!(e.kind, JsonErrorKind::TooDeep { .. }))
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
