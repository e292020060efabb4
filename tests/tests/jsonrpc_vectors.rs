//! JSON-RPC envelope vectors, named after the JSONRPC-n and BATCH-n requirements of
//! docs/requirements.md: classification, the -32700 / -32600 split, id recovery, payloads kept
//! byte for byte, batches by protocol version, and the encoder's output.

use std::borrow::Cow;

use mcpwire::ProtocolVersion;
use mcpwire::jsonrpc::{
    Classifier, ErrorCode, Json, JsonErrorKind, Kind, Limits, Message, MessageBuf, ParseError,
    Parsed, RawJson, RequestId, Shape, ShapeError, classify,
};

fn ok(text: &str) -> Message<'_> {
    classify(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn shape_err(text: &str) -> ShapeError {
    match classify(text.as_bytes()) {
        Err(ParseError::Shape(e)) => e,
        other => panic!("{text}: expected a shape error, got {other:?}"),
    }
}

/// A shape error's id and shape (`ShapeError` is `#[non_exhaustive]`).
fn pair(e: &ShapeError) -> (Option<RequestId>, Shape) {
    (e.id.clone(), e.shape)
}

fn invalid(text: &str) -> (Option<RequestId>, Shape) {
    pair(&shape_err(text))
}

fn json_err(text: &[u8]) -> JsonErrorKind {
    match classify(text) {
        Err(ParseError::Json(e)) => e.kind,
        other => panic!("{text:?}: expected a json error, got {other:?}"),
    }
}

#[test]
fn jsonrpc_1_version_must_be_the_string_2_0() {
    assert_eq!(
        shape_err(r#"{"id":1,"method":"ping"}"#).shape,
        Shape::MissingVersion
    );
    for version in [r#""1.0""#, "2.0", r#""2.0 ""#, "null", r#"["2.0"]"#] {
        let text = format!(r#"{{"jsonrpc":{version},"id":1,"method":"ping"}}"#);
        assert_eq!(
            invalid(&text),
            (Some(RequestId::int(1)), Shape::WrongVersion)
        );
    }
    // An escaped spelling of "2.0" is the same string.
    assert_eq!(
        ok(r#"{"jsonrpc":"\u0032.0","id":1,"method":"ping"}"#).kind(),
        Kind::Request
    );
}

#[test]
fn jsonrpc_1_utf8_is_required() {
    assert_eq!(
        json_err(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}"),
        JsonErrorKind::InvalidUtf8
    );
    let err = classify(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xc3\"}").unwrap_err();
    assert_eq!(err.jsonrpc_code(), ErrorCode::PARSE_ERROR);
}

#[test]
fn jsonrpc_2_request_ids_are_strings_or_integers_never_null() {
    let Message::Request(r) = ok(r#"{"jsonrpc":"2.0","id":"abc","method":"tools/list"}"#) else {
        panic!()
    };
    assert_eq!(r.id, RequestId::string("abc"));
    let Message::Request(r) = ok(r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m"}"#)
    else {
        panic!()
    };
    assert_eq!(r.id, RequestId::int(i64::MIN));
    let Message::Request(r) = ok(r#"{"jsonrpc":"2.0","id":"a\"b\u00e9","method":"m"}"#) else {
        panic!()
    };
    assert_eq!(r.id, RequestId::string("a\"bé"));
    for id in ["null", "1.5", "1e3", "1.0", "true", "{}", "[1]"] {
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
        assert_eq!(invalid(&text), (None, Shape::InvalidId), "{id}");
    }
}

#[test]
fn jsonrpc_2_an_integer_id_beyond_i64_says_out_of_range() {
    for id in [
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551616",
        "100000000000000000000000",
    ] {
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
        assert_eq!(invalid(&text), (None, Shape::IdOutOfRange), "{id}");
        let response = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        assert_eq!(invalid(&response), (None, Shape::IdOutOfRange), "{id}");
    }
    assert_eq!(
        Shape::IdOutOfRange.to_string(),
        "integer \"id\" out of range (ids must fit in 64 signed bits)"
    );
    // The ends of the range are ids.
    for n in [i64::MAX, i64::MIN] {
        let text = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"m"}}"#);
        assert_eq!(ok(&text).id(), Some(&RequestId::int(n)));
    }
}

#[test]
fn jsonrpc_2_unpaired_surrogates_in_id_and_method_are_named() {
    for id in [r#""\ud800""#, r#""a\udfffb""#, r#""\ud83d\u0041""#] {
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
        assert_eq!(
            invalid(&text),
            (None, Shape::UnpairedSurrogate("id")),
            "{id}"
        );
    }
    let text = r#"{"jsonrpc":"2.0","id":4,"method":"tools/\udc00"}"#;
    assert_eq!(
        invalid(text),
        (Some(RequestId::int(4)), Shape::UnpairedSurrogate("method"))
    );
    assert_eq!(
        Shape::UnpairedSurrogate("method").to_string(),
        "\"method\" holds an unpaired surrogate escape, which is not unicode text"
    );
    // A method that is no string at all is still that.
    assert_eq!(
        invalid(r#"{"jsonrpc":"2.0","id":4,"method":7}"#),
        (Some(RequestId::int(4)), Shape::InvalidMethod)
    );
    // A paired surrogate is a character.
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","method":"\ud83d\ude00"}"#).method(),
        Some("😀")
    );
}

#[test]
fn sse_enc_9_a_priming_event_is_no_message_and_is_skipped() {
    // Its empty data is not JSON: classify says so, classify_event skips it.
    let err = mcpwire::jsonrpc::classify_str("").unwrap_err();
    assert_eq!(err.jsonrpc_code(), ErrorCode::PARSE_ERROR);
    assert_eq!(
        err.to_string(),
        "parse error: unexpected end of json at byte 0"
    );
    let classifier = Classifier::default();
    assert_eq!(classifier.classify_event(""), Ok(None));
    let data = r#"{"jsonrpc":"2.0","method":"m"}"#;
    assert_eq!(
        classifier.classify_event(data),
        Ok(Some(classify(data.as_bytes()).unwrap()))
    );
    assert!(classifier.classify_event(" ").unwrap_err().is_not_json());
}

#[test]
fn parse_any_takes_batches_whatever_the_revision() {
    let classifier = Classifier::default();
    assert_eq!(
        classifier.parse_any(BATCH.as_bytes()),
        classifier.parse(BATCH.as_bytes(), ProtocolVersion::V2025_03_26)
    );
    let single = br#"{"jsonrpc":"2.0","method":"m"}"#;
    assert_eq!(
        classifier.parse_any(single),
        Ok(Parsed::Single(classify(single).unwrap()))
    );
    assert_eq!(classifier.parse_any(b"[]"), Err(ParseError::EmptyBatch));
    // What is not JSON at all, and what is JSON but no message (or too deep to tell).
    for not_json in [&b""[..], b"not json", b"[1,", b"{\"a\":}", b"\xff"] {
        assert!(classifier.parse_any(not_json).unwrap_err().is_not_json());
    }
    let deep = format!("[{}{}]", "[".repeat(200), "]".repeat(200));
    for wrong in [&b"[]"[..], b"7", b"{}", b"[7]", deep.as_bytes()] {
        match classifier.parse_any(wrong) {
            Err(e) => assert!(!e.is_not_json(), "{e}"),
            Ok(Parsed::Batch(items)) => assert!(items.iter().all(Result::is_err)),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn jsonrpc_4_a_response_has_result_xor_error_and_an_id() {
    let Message::Response(r) = ok(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#) else {
        panic!()
    };
    assert_eq!((r.id, r.result.as_str()), (RequestId::int(3), "{}"));
    // Any JSON value is a result, null included.
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","id":3,"result":null}"#).kind(),
        Kind::Response
    );
    let both = r#"{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1,"message":"m"}}"#;
    assert_eq!(invalid(both), (Some(RequestId::int(3)), Shape::Ambiguous));
    assert_eq!(
        shape_err(r#"{"jsonrpc":"2.0","result":{}}"#).shape,
        Shape::MissingId
    );
    assert_eq!(
        shape_err(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#).shape,
        Shape::MissingId
    );
    let method_and_result = r#"{"jsonrpc":"2.0","id":3,"method":"m","result":{}}"#;
    assert_eq!(shape_err(method_and_result).shape, Shape::Ambiguous);
}

#[test]
fn jsonrpc_5_error_responses_may_lack_an_id() {
    for text in [
        r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
    ] {
        let Message::Error(e) = ok(text) else {
            panic!("{text}")
        };
        assert_eq!(e.id, None);
        assert_eq!(e.error.code, ErrorCode::PARSE_ERROR);
        assert_eq!(e.error.message, "Parse error");
    }
    let Message::Error(e) =
        ok(r#"{"jsonrpc":"2.0","id":"x","error":{"data":[1, 2],"message":"m","code":5}}"#)
    else {
        panic!()
    };
    assert_eq!(e.id, Some(RequestId::string("x")));
    assert_eq!(e.error.data.unwrap().as_str(), "[1, 2]");
}

#[test]
fn jsonrpc_6_error_code_is_an_integer_and_message_a_string() {
    for error in [
        r#"{"code":1.5,"message":"m"}"#,
        r#"{"code":"1","message":"m"}"#,
        r#"{"message":"m"}"#,
        r#"{"code":1}"#,
        r#"{"code":1,"message":7}"#,
        r#"{"code":1,"code":2,"message":"m"}"#,
        r#""oops""#,
        "null",
    ] {
        let text = format!(r#"{{"jsonrpc":"2.0","id":1,"error":{error}}}"#);
        assert_eq!(
            invalid(&text),
            (Some(RequestId::int(1)), Shape::InvalidError),
            "{error}"
        );
    }
}

#[test]
fn jsonrpc_7_a_notification_has_a_method_and_no_id() {
    let Message::Notification(n) = ok(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
    else {
        panic!()
    };
    assert_eq!(
        (n.method.as_ref(), n.params),
        ("notifications/initialized", None)
    );
    assert_eq!(
        ok(r#"{"method":"m","jsonrpc":"2.0","params":[1]}"#).kind(),
        Kind::Notification
    );
}

#[test]
fn jsonrpc_8_classification_and_distinct_integer_and_string_ids() {
    let cases = [
        (r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#, Kind::Request),
        (r#"{"jsonrpc":"2.0","method":"m"}"#, Kind::Notification),
        (r#"{"jsonrpc":"2.0","id":1,"result":1}"#, Kind::Response),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":""}}"#,
            Kind::Error,
        ),
    ];
    for (text, kind) in cases {
        let message = ok(text);
        assert_eq!(message.kind(), kind, "{text}");
        assert_eq!(message.id().is_some(), kind != Kind::Notification);
    }
    let int = ok(r#"{"jsonrpc":"2.0","id":1,"result":1}"#);
    let string = ok(r#"{"jsonrpc":"2.0","id":"1","result":1}"#);
    assert_ne!(int.id(), string.id());
    assert_eq!(
        shape_err(r#"{"jsonrpc":"2.0","id":1}"#).shape,
        Shape::NoMethodOrOutcome
    );
    assert_eq!(
        shape_err(r#"{"jsonrpc":"2.0","id":1,"method":3}"#).shape,
        Shape::InvalidMethod
    );
    assert_eq!(
        shape_err(r#"[1]"#.trim_start_matches('[').trim_end_matches(']')).shape,
        Shape::NotAnObject
    );
    assert_eq!(shape_err(r#""just a string""#).shape, Shape::NotAnObject);
}

#[test]
fn jsonrpc_8_invalid_json_is_32700_and_a_wrong_shape_is_32600_with_its_id() {
    for text in [
        &b"{"[..],
        b"",
        b"{\"jsonrpc\":\"2.0\",}",
        b"{\"jsonrpc\":\"2.0\"} x",
        b"nul",
        b"{'a':1}",
    ] {
        let err = classify(text).unwrap_err();
        assert!(matches!(err, ParseError::Json(_)), "{text:?}");
        assert_eq!(err.jsonrpc_code(), ErrorCode::PARSE_ERROR);
        assert_eq!(err.status_hint(), http::StatusCode::BAD_REQUEST);
        assert_eq!(err.id(), None);
    }
    let err =
        classify(br#"{"jsonrpc":"2.0","id":"req-9","method":"m","params":"no"}"#).unwrap_err();
    assert_eq!(err.jsonrpc_code(), ErrorCode::INVALID_REQUEST);
    assert_eq!(err.id(), Some(&RequestId::string("req-9")));
    assert_eq!(
        err.to_string(),
        "invalid json-rpc message: \"params\" must be an object or an array"
    );
    // A JSON error wins over a shape error, wherever it is.
    let err = classify(br#"{"jsonrpc":"1.0","id":1,"method":"m","params":{"a":01}}"#).unwrap_err();
    assert_eq!(err.jsonrpc_code(), ErrorCode::PARSE_ERROR);
    let at = br#"{"jsonrpc":"1.0","id":1,"method":"m","params":{"a":0"#.len();
    assert_eq!(
        err.to_string(),
        format!("parse error: invalid number at byte {at}")
    );
}

#[test]
fn jsonrpc_8_payloads_are_untouched_slices_and_methods_are_decoded() {
    let text = "{ \"jsonrpc\" : \"2.0\" , \"id\" : 5 , \"method\" : \"tools/c\\u0061ll\" ,\n \"params\" :\t{ \"a\" : [ 1 , 2.5e3 , \"\\n\" ] } }";
    let Message::Request(r) = ok(text) else {
        panic!()
    };
    assert_eq!(
        r.params.unwrap().as_str(),
        "{ \"a\" : [ 1 , 2.5e3 , \"\\n\" ] }"
    );
    assert_eq!(r.method, "tools/call");
    assert!(matches!(r.method, Cow::Owned(_)));
    let Message::Request(r) = ok(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call"}"#) else {
        panic!()
    };
    assert!(matches!(r.method, Cow::Borrowed(_)));
    // Escaped member names are the same names.
    let escaped = r#"{"\u006asonrpc":"2.0","i\u0064":5,"\u006dethod":"m","p\u0061rams":{}}"#;
    assert_eq!(ok(escaped).params().unwrap().as_str(), "{}");
    // Unknown members are skipped (still validated).
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","x":{"y":[null]},"method":"m"}"#).kind(),
        Kind::Notification
    );
    assert!(classify(br#"{"jsonrpc":"2.0","x":{"y":[nul]},"method":"m"}"#).is_err());
}

#[test]
fn duplicate_envelope_members_are_rejected() {
    for text in [
        r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}"#,
        r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"a"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":1,"result":2}"#,
    ] {
        assert!(
            matches!(shape_err(text).shape, Shape::DuplicateMember(_)),
            "{text}"
        );
    }
    // With two ids, the error carries neither; with one id, it carries it.
    assert_eq!(
        shape_err(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}"#).id,
        None
    );
    let dup_method = r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#;
    assert_eq!(shape_err(dup_method).id, Some(RequestId::int(1)));
}

#[test]
fn nesting_is_bounded_by_the_limit() {
    let nested = |depth: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"m","params":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    // The message object is the first level, so `params` may nest 127 more.
    assert!(classify(nested(127).as_bytes()).is_ok());
    assert!(matches!(
        json_err(nested(128).as_bytes()),
        JsonErrorKind::TooDeep { limit: 128 }
    ));
    assert!(matches!(
        json_err(nested(1_000_000).as_bytes()),
        JsonErrorKind::TooDeep { limit: 128 }
    ));
    let strict = Classifier::new(Limits::new().with_max_depth(4));
    assert!(strict.classify(nested(3).as_bytes()).is_ok());
    assert!(strict.classify(nested(4).as_bytes()).is_err());
}

#[test]
fn raw_json_new_validates_one_value() {
    assert_eq!(RawJson::new("  [1, 2] \n").unwrap().as_str(), "[1, 2]");
    assert!(RawJson::new("[1] [2]").is_err());
    assert!(RawJson::new("").is_err());
    assert!(RawJson::new(r#"{"a":}"#).is_err());
}

const BATCH: &str = r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},7,{"jsonrpc":"2.0","id":2,"method":"c","params":3}]"#;

#[test]
fn batch_1_batches_are_accepted_under_2025_03_26() {
    let Parsed::Batch(items) = Classifier::default()
        .parse(BATCH.as_bytes(), ProtocolVersion::V2025_03_26)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(items.len(), 4);
    assert_eq!(items[0].as_ref().unwrap().kind(), Kind::Request);
    assert_eq!(items[1].as_ref().unwrap().kind(), Kind::Notification);
    // BATCH-5: a bad element gets its own error and spoils nothing else.
    assert_eq!(
        pair(items[2].as_ref().unwrap_err()),
        (None, Shape::NotAnObject)
    );
    assert_eq!(
        pair(items[3].as_ref().unwrap_err()),
        (Some(RequestId::int(2)), Shape::InvalidParams)
    );
    // A single message parses as one under every version.
    for &version in ProtocolVersion::ALL {
        let single = Classifier::default()
            .parse(br#" {"jsonrpc":"2.0","method":"m"}"#, version)
            .unwrap();
        assert!(matches!(single, Parsed::Single(Message::Notification(_))));
    }
}

#[test]
fn batch_6_batches_are_rejected_from_2025_06_18_on() {
    for version in [
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2026_07_28,
    ] {
        let err = Classifier::default()
            .parse(BATCH.as_bytes(), version)
            .unwrap_err();
        assert_eq!(err, ParseError::BatchNotAllowed { version });
        assert_eq!(err.jsonrpc_code(), ErrorCode::INVALID_REQUEST);
        assert_eq!(err.status_hint(), http::StatusCode::BAD_REQUEST);
    }
    assert_eq!(
        classify(BATCH.as_bytes()).unwrap_err(),
        ParseError::UnexpectedBatch
    );
}

#[test]
fn batch_5_an_empty_batch_is_one_invalid_request_and_bad_json_spoils_all() {
    let parser = Classifier::default();
    assert_eq!(
        parser.parse(b" [ ] ", ProtocolVersion::V2025_03_26),
        Err(ParseError::EmptyBatch)
    );
    let err = parser
        .parse(
            br#"[{"jsonrpc":"2.0","method":"m"},"#,
            ProtocolVersion::V2025_03_26,
        )
        .unwrap_err();
    assert_eq!(err.jsonrpc_code(), ErrorCode::PARSE_ERROR);
    let small = Classifier::new(Limits::new().with_max_batch_len(2));
    let three = br#"[{"jsonrpc":"2.0","method":"m"},{"jsonrpc":"2.0","method":"m"},{"jsonrpc":"2.0","method":"m"}]"#;
    assert_eq!(
        small.parse(three, ProtocolVersion::V2025_03_26),
        Err(ParseError::BatchTooLarge { limit: 2 })
    );
}

#[test]
fn batch_4_initialize_is_not_batched() {
    let text = br#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]"#;
    let Parsed::Batch(items) = Classifier::default()
        .parse(text, ProtocolVersion::V2025_03_26)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(items.len(), 1);
    assert_eq!(
        pair(items[0].as_ref().unwrap_err()),
        (Some(RequestId::int(1)), Shape::InitializeInBatch)
    );
}

#[test]
fn encoded_messages_classify_back_to_what_was_encoded() {
    let mut buf = MessageBuf::with_capacity(256);
    let params = serde_json::json!({"name": "echo", "arguments": {"text": "line\nbreak \"q\""}});
    let text = buf
        .push_request(
            &RequestId::string("r\"1"),
            "tools/call",
            Some(&Json(&params)),
        )
        .unwrap()
        .to_owned();
    assert!(!text.contains(['\n', '\r']), "one SSE data line: {text}");
    let Message::Request(r) = ok(&text) else {
        panic!()
    };
    assert_eq!(r.id, RequestId::string("r\"1"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(r.params.unwrap().as_str()).unwrap(),
        params
    );

    buf.clear();
    let data = RawJson::new(r#"{"supported":["2025-11-25"]}"#).unwrap();
    let text = buf
        .push_error(
            Some(&RequestId::int(4)),
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported",
            Some(&data),
        )
        .unwrap()
        .to_owned();
    let Message::Error(e) = ok(&text) else {
        panic!()
    };
    assert_eq!((e.error.code.0, e.error.data), (-32022, Some(data)));
    assert_eq!(buf.split().as_str(), text);
}
