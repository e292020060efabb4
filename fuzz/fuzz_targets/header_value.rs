//! `header_value`: arbitrary bytes as an `Mcp-Name` or `Mcp-Param-*` header value
//! (MODERN-6, MODERN-7, MODERN-8).
//!
//! Checks:
//! 1. `mirror::decode` never panics and gives exactly what the spec-literal decoder
//!    below gives: trimmed literal text, or the strictly decoded sentinel payload, or an
//!    error.
//! 2. Any decoded string encodes (`encode_str`) to visible ASCII without edge spaces that
//!    decodes back to it and compares as `Match` with it, as a parameter and as a name.
//! 3. `compare` never panics, reports `Malformed` exactly when decoding fails, matches a
//!    string body exactly when it is the decoded text, an integer body exactly when the
//!    text is `-?(0|[1-9][0-9]*)(\.0+)?` of the same value, and a boolean as `true` or
//!    `false`; an integer read from the input round-trips through `encode`.
//! 4. Input that parses as JSON, read as an `inputSchema`, never panics
//!    `Mirrors::from_input_schema`, and an accepted one checks and encodes the same value
//!    as arguments without panicking; its own headers pass its check.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire::mirror::{self, Comparison, Mirrors};
use serde_json::{Value, json};

fuzz_target!(|input: &[u8]| {
    // 1.
    let decoded = mirror::decode(input);
    let expected = reference_decode(input);
    assert_eq!(
        decoded.as_deref().ok(),
        expected.as_deref(),
        "decode({:?})",
        String::from_utf8_lossy(input)
    );
    if let Err(error) = &decoded {
        assert!(!error.to_string().is_empty());
    }

    // 2.
    if let Ok(text) = &decoded {
        let encoded = mirror::encode_str(text);
        let bytes = encoded.as_bytes();
        assert!(bytes.iter().all(|b| (0x20..=0x7e).contains(b)));
        assert!(bytes.first() != Some(&b' ') && bytes.last() != Some(&b' '));
        assert_eq!(mirror::decode(bytes).as_deref(), Ok(&**text));
        let body = Value::String(text.to_string());
        assert_eq!(mirror::compare(Some(bytes), Some(&body)), Comparison::Match);
        assert_eq!(
            mirror::compare_name(Some(bytes), Some(&body)),
            Comparison::Match
        );
    }

    // 3.
    let text = decoded.as_deref().ok();
    let mut bodies = vec![
        json!(true),
        json!(false),
        json!(null),
        json!(1.5),
        json!([]),
    ];
    if let Some(text) = text {
        bodies.push(Value::String(text.to_owned()));
    }
    if let Some(head) = input.get(..8) {
        let mut word = [0; 8];
        word.copy_from_slice(head);
        let (i, u) = (i64::from_le_bytes(word), u64::from_le_bytes(word));
        for value in [json!(i), json!(u)] {
            let encoded = mirror::encode(&value).unwrap().unwrap();
            assert_eq!(
                mirror::compare(Some(encoded.as_bytes()), Some(&value)),
                Comparison::Match
            );
            bodies.push(value);
        }
    }
    for body in &bodies {
        let outcome = mirror::compare(Some(input), Some(body));
        let Some(text) = text else {
            assert!(matches!(outcome, Comparison::Malformed(_)), "{outcome:?}");
            continue;
        };
        let equal = match body {
            Value::Null => {
                assert_eq!(outcome, Comparison::UnexpectedHeader);
                continue;
            }
            Value::String(s) => s == text,
            Value::Bool(b) => text == b.to_string(),
            Value::Number(n) if n.is_i64() || n.is_u64() => {
                let n: i128 = n
                    .as_i64()
                    .map_or_else(|| n.as_u64().unwrap().into(), Into::into);
                reference_integer(text) == Some(n)
            }
            _ => {
                assert_eq!(outcome, Comparison::Unmirrorable);
                continue;
            }
        };
        assert_eq!(
            outcome.is_match(),
            equal,
            "{text:?} against {body}: {outcome:?}"
        );
        let _ = mirror::compare_name(Some(input), Some(body));
    }

    // 4.
    if let Ok(schema) = serde_json::from_slice::<Value>(input) {
        match Mirrors::from_input_schema(&schema) {
            Ok(mirrors) => {
                let headers = [("Mcp-Param-X", input), ("mcp-name", input)];
                let _ = mirrors.check(&schema, headers);
                if let Ok(own) = mirrors.encode(&schema) {
                    let pairs = own.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
                    assert_eq!(mirrors.check(&schema, pairs), Ok(()));
                }
            }
            Err(error) => assert!(error.to_string().starts_with("invalid x-mcp-header at ")),
        }
    }
});

/// MODERN-8 as written: only visible ASCII, space and tab; trim spaces and tabs; a value
/// with both markers is strict RFC 4648 §4 base64 (canonical padding and trailing bits)
/// of UTF-8; anything else is literal.
fn reference_decode(input: &[u8]) -> Option<String> {
    if input
        .iter()
        .any(|&b| b != b'\t' && !(0x20..=0x7e).contains(&b))
    {
        return None;
    }
    let text = std::str::from_utf8(input).ok()?.trim_matches([' ', '\t']);
    if !(text.starts_with("=?base64?") && text.ends_with("?=")) {
        return Some(text.to_owned());
    }
    let payload = text.get(9..text.len().checked_sub(2)?)?.as_bytes();
    if payload.len() % 4 != 0 {
        return None;
    }
    let sextet = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let quads = payload.len() / 4;
    let mut out = Vec::new();
    for (i, quad) in payload.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i + 1 != quads) {
            return None;
        }
        let mut bits = 0u32;
        for &c in &quad[..4 - pad] {
            bits = bits << 6 | sextet(c)?;
        }
        match pad {
            0 => out.extend_from_slice(&bits.to_be_bytes()[1..]),
            1 if bits & 0b11 == 0 => out.extend_from_slice(&(bits >> 2).to_be_bytes()[2..]),
            2 if bits & 0b1111 == 0 => out.push((bits >> 4) as u8),
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// An integer header as the module documents it: `-?(0|[1-9][0-9]*)(\.0+)?`.
fn reference_integer(text: &str) -> Option<i128> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (digits, zeros) = unsigned.split_once('.').unwrap_or((unsigned, "0"));
    let canonical = digits == "0" || (!digits.starts_with('0') && !digits.is_empty());
    if !canonical
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || zeros.is_empty()
        || !zeros.bytes().all(|b| b == b'0')
    {
        return None;
    }
    let value: i128 = digits.parse().ok()?;
    Some(if text.starts_with('-') { -value } else { value })
}
