//! The `jsonrpc` bench's messages: a small request, a progress notification and a
//! 256 KiB `tools/call` result, each with the envelope facts a classifier must report.

use crate::payload::{escaped_text, progress};
use crate::rng::XorShift;

/// The size of the large tool result: 256 KiB.
pub const LARGE_RESULT_LEN: usize = 256 * 1024;

/// One bench message and what classifying it must find.
#[derive(Clone, Debug)]
pub struct Message {
    /// The group name: `small-request`, `progress` or `result-256k`.
    pub name: &'static str,
    /// The JSON text.
    pub text: String,
    /// `"request"`, `"notification"` or `"response"`.
    pub kind: &'static str,
    /// The method, for requests and notifications.
    pub method: Option<&'static str>,
    /// The exact length of the raw `params` (or `result`) value.
    pub payload_len: usize,
}

impl Message {
    /// The three messages, in bench order.
    pub fn all() -> [Self; 3] {
        [
            Self::small_request(),
            Self::progress(),
            Self::large_result(),
        ]
    }

    /// A `tools/call` request with an integer id, 172 bytes.
    pub fn small_request() -> Self {
        let params = r#"{"name":"get_weather","arguments":{"city":"Zürich","units":"metric","days":3},"_meta":{"progressToken":"call-42"}}"#;
        Self {
            name: "small-request",
            text: format!(r#"{{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{params}}}"#),
            kind: "request",
            method: Some("tools/call"),
            payload_len: params.len(),
        }
    }

    /// A `notifications/progress` of a token stream, 100 to 160 bytes.
    pub fn progress() -> Self {
        let text = progress(&mut XorShift::new(0x7072_6f67), 17);
        let params_at =
            text.find("\"params\":").expect("progress has params") + "\"params\":".len();
        Self {
            name: "progress",
            payload_len: text.len() - params_at - 1,
            text,
            kind: "notification",
            method: Some("notifications/progress"),
        }
    }

    /// A 256 KiB `tools/call` result as tools return them: half of it one text content
    /// of JSON-escaped prose (what a file read or a command's output gives), half
    /// `structuredContent` rows of short strings, numbers and booleans (what a query
    /// gives). Both halves matter: the first is string scanning, the second structure.
    pub fn large_result() -> Self {
        let mut rng = XorShift::new(0x0025_6b72_6573);
        let mut result = String::with_capacity(LARGE_RESULT_LEN + 1024);
        result.push_str(r#"{"content":[{"type":"text","text":""#);
        escaped_text(&mut rng, &mut result, LARGE_RESULT_LEN / 2);
        result.push_str(r#""}],"structuredContent":{"rows":["#);
        let mut row = 0u64;
        while result.len() < LARGE_RESULT_LEN - 200 {
            if row > 0 {
                result.push(',');
            }
            let mut name = String::new();
            escaped_text(&mut rng, &mut name, 24);
            result.push_str(&format!(
                r#"{{"id":{row},"name":"{name}","score":{}.{:02},"active":{},"tags":["a{}","b"]}}"#,
                rng.below(1000),
                rng.below(100),
                rng.one_in(2),
                rng.below(50),
            ));
            row += 1;
        }
        result.push_str(r#"],"total":"#);
        result.push_str(&row.to_string());
        result.push_str(r#"},"isError":false}"#);
        Self {
            name: "result-256k",
            text: format!(r#"{{"jsonrpc":"2.0","id":7,"result":{result}}}"#),
            kind: "response",
            method: None,
            payload_len: result.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_json_rpc_of_the_stated_shape() {
        #[derive(serde::Deserialize)]
        struct Envelope<'a> {
            method: Option<&'a str>,
            #[serde(borrow)]
            params: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow)]
            result: Option<&'a serde_json::value::RawValue>,
        }
        for m in Message::all() {
            let value: serde_json::Value = serde_json::from_str(&m.text).unwrap();
            assert_eq!(value["jsonrpc"], "2.0");
            let envelope: Envelope<'_> = serde_json::from_str(&m.text).unwrap();
            let payload = envelope.params.or(envelope.result).unwrap();
            assert_eq!(payload.get().len(), m.payload_len, "{}", m.name);
            assert_eq!(envelope.method, m.method);
        }
        assert_eq!(Message::small_request().text.len(), 172);
        assert!((100..160).contains(&Message::progress().text.len()));
        let large = Message::large_result();
        assert!(
            large.text.len().abs_diff(LARGE_RESULT_LEN) < 512,
            "{}",
            large.text.len()
        );
    }
}
