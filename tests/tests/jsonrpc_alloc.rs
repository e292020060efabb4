//! Allocation behaviour of JSON-RPC classification, measured with a counting global
//! allocator (this test binary only).
//!
//! The data path (ARCHITECTURE.md) classifies every message, so the common shapes must
//! not touch the heap: a request with an integer id (or a string id of up to 22 bytes)
//! and a method name of up to 22 bytes, a notification, a response; all payloads stay
//! slices of the input.

use mcpwire::jsonrpc::{INLINE_ID_LEN, Message, RequestId, classify};
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
