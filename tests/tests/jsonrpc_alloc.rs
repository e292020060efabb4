//! Allocation behaviour of JSON-RPC classification, measured with a counting global
//! allocator (this test binary only).
//!
//! The data path (ARCHITECTURE.md) classifies every message, so the common shapes must
//! not touch the heap: a request with an integer id (or a string id of up to 22 bytes)
//! and a method name of up to 22 bytes, a notification, a response; all payloads stay
//! slices of the input. An owned `Envelope` of such a message allocates nothing more,
//! and encoding a message straight into an SSE frame allocates only what the frame
//! buffer needs.

use bytes::BytesMut;
use mcpwire::Utf8Bytes;
use mcpwire::jsonrpc::{
    Classifier, Envelopes, INLINE_ID_LEN, Message, Outgoing, RawJson, RequestId, classify,
};
use mcpwire::sse::EventFields;
use mcpwire_tests::alloc::{Counting, Meter};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Classifies `text` and returns the allocations made while classifying and dropping.
fn allocations(text: &str) -> (usize, Message<'_>) {
    // Classify once outside the meter, to keep the returned value for the caller's checks.
    let kept = classify(text.as_bytes()).unwrap();
    let meter = Meter::start();
    for _ in 0..1000 {
        let message = classify(std::hint::black_box(text.as_bytes())).unwrap();
        std::hint::black_box(&message);
    }
    (meter.allocations(), kept)
}

#[test]
fn request_with_integer_id_and_22_byte_method_allocates_nothing() {
    let method = "resources/templates/ls";
    assert_eq!(method.len(), 22);
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":1234567,"method":"{method}","params":{{"cursor":"abc","_meta":{{"progressToken":9}}}}}}"#
    );
    let (n, message) = allocations(&text);
    assert_eq!(n, 0);
    let Message::Request(request) = message else {
        panic!("{message:?}")
    };
    assert_eq!(request.id, RequestId::int(1_234_567));
    assert_eq!(request.method, method);
    // The payload is a slice of the input, not a copy.
    let params = request.params.unwrap().as_str();
    assert!(text.as_bytes().as_ptr_range().contains(&params.as_ptr()));
}

#[test]
fn request_with_short_string_id_allocates_nothing_and_long_one_once() {
    let short = "a".repeat(INLINE_ID_LEN);
    let text = format!(r#"{{"jsonrpc":"2.0","id":"{short}","method":"ping"}}"#);
    assert_eq!(allocations(&text).0, 0);
    let long = "a".repeat(INLINE_ID_LEN + 1);
    let text = format!(r#"{{"jsonrpc":"2.0","id":"{long}","method":"ping"}}"#);
    assert_eq!(allocations(&text).0, 1000);
}

#[test]
fn notifications_responses_and_errors_allocate_nothing() {
    for text in [
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t-1","progress":50,"message":"compiling"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a \"quoted\"\nline"}],"isError":false}}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found","data":{"method":"x"}}}"#,
    ] {
        assert_eq!(allocations(text).0, 0, "{text}");
    }
}

/// Builds an envelope of `text` (a clone of one shared buffer, as the decoder hands
/// out event data) 1000 times; returns the allocations made while building and dropping.
fn envelope_allocations(text: &Utf8Bytes) -> usize {
    let classifier = Classifier::default();
    // The first clone of a buffer made from a `String` allocates its shared header:
    // that is the decoder's doing, once per buffer, not the envelope's.
    drop(text.clone());
    let meter = Meter::start();
    for _ in 0..1000 {
        let envelope = classifier
            .envelope(std::hint::black_box(text.clone()))
            .unwrap();
        std::hint::black_box(envelope.message());
        std::hint::black_box(&envelope);
    }
    meter.allocations()
}

#[test]
fn an_envelope_allocates_nothing_beyond_classify() {
    let text = r#"{"jsonrpc":"2.0","id":1234567,"method":"resources/templates/ls","params":{"cursor":"abc"}}"#;
    assert_eq!(allocations(text).0, 0);
    assert_eq!(envelope_allocations(&Utf8Bytes::from(text.to_owned())), 0);
    for text in [
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t-1","progress":50}}"#,
        r#"{"jsonrpc":"2.0","id":"short-string-id","result":{"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}"#,
    ] {
        assert_eq!(allocations(text).0, 0, "{text}");
        assert_eq!(
            envelope_allocations(&Utf8Bytes::from(text.to_owned())),
            0,
            "{text}"
        );
    }
    // An escaped method is unescaped into a string of its own: classify's one allocation.
    let escaped = r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call"}"#;
    assert_eq!(allocations(escaped).0, 1000);
    assert_eq!(
        envelope_allocations(&Utf8Bytes::from(escaped.to_owned())),
        1000
    );
}

#[test]
fn a_batch_of_envelopes_allocates_the_list_only() {
    let text = Utf8Bytes::from(
        r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]"#.to_owned(),
    );
    drop(text.clone());
    let classifier = Classifier::default();
    let meter = Meter::start();
    let parsed = classifier
        .envelopes(text.clone(), mcpwire::ProtocolVersion::V2025_03_26)
        .unwrap();
    // The `Vec` of elements grows to 4 slots (one allocation); the elements share the
    // buffer.
    assert_eq!(meter.allocations(), 1);
    let Envelopes::Batch(items) = parsed else {
        panic!()
    };
    assert_eq!(items.len(), 2);
}

#[test]
fn a_frame_is_written_once_into_a_reused_buffer() {
    let params = RawJson::new(r#"{"progressToken":"t-1","progress":50}"#).unwrap();
    let message = Outgoing::Notification {
        method: "notifications/progress",
        params: Some(&params),
    };
    let mut dst = BytesMut::with_capacity(64 << 10);
    let meter = Meter::start();
    for _ in 0..100 {
        message.encode_frame(&EventFields::new(), &mut dst).unwrap();
    }
    assert_eq!(meter.allocations(), 0);
    let text = mcpwire::jsonrpc::MessageBuf::new()
        .push(&message)
        .unwrap()
        .len();
    assert_eq!(dst.len(), 100 * (b"data: \n\n".len() + text));
}
