//! JSON-RPC payloads: the `data` of the events in the corpora and the input of the
//! encode benches.

use crate::rng::XorShift;

/// Words of the generated tool output. A few are non-ASCII (as real tool output often
/// is), so the decoders' UTF-8 validation runs on its slow path too.
const WORDS: &[&str] = &[
    "the",
    "result",
    "of",
    "tool",
    "call",
    "returned",
    "file",
    "line",
    "function",
    "error",
    "value",
    "async",
    "stream",
    "token",
    "model",
    "context",
    "protocol",
    "server",
    "client",
    "request",
    "response",
    "schema",
    "resource",
    "prompt",
    "session",
    "cargo",
    "build",
    "test",
    "passed",
    "failed",
    "warning",
    "src/lib.rs",
    "impl",
    "fn",
    "struct",
    "let",
    "match",
    "Option",
    "Result",
    "0x7f3a",
    "42",
    "1.25",
    "ok",
    "and",
    "with",
    "from",
    "to",
    "café",
    "naïve",
    "résumé",
    "Überprüfung",
    "données",
    "日本語",
    "テスト",
    "ok ✓",
    "🚀",
];

/// JSON string escapes that appear in real tool output (the text is JSON-escaped, so the
/// `data` line never contains a raw line end).
const ESCAPES: &[&str] = &["\\n", "\\n\\n", "\\t", "\\\"", "\\\\", "\\u001b[0m"];

/// Words of a progress message.
const TOKEN_WORDS: &[&str] = &[
    "Thinking",
    "about",
    "the",
    "request",
    "reading",
    "files",
    "running",
    "tests",
    "compiling",
    "crate",
    "done",
    "step",
    "searching",
    "index",
    "writing",
    "patch",
    "checking",
    "types",
    "almost",
    "there",
];

/// Appends JSON-escaped prose to `out` until it is at least `target` bytes long.
pub(crate) fn escaped_text(rng: &mut XorShift, out: &mut String, target: usize) {
    let mut words_on_line = 0;
    while out.len() < target {
        if rng.one_in(40) {
            out.push_str(rng.pick(ESCAPES));
        } else if words_on_line > 0 {
            out.push(' ');
        }
        out.push_str(rng.pick(WORDS));
        words_on_line += 1;
        if words_on_line > 12 && rng.one_in(6) {
            // A line of tool output ends: an escaped LF, as serde_json writes it.
            out.push_str("\\n");
            words_on_line = 0;
        }
    }
}

/// A `tools/call` result whose one text content is about `text_len` bytes of
/// JSON-escaped prose: `{"jsonrpc":"2.0","id":N,"result":{"content":[{"type":"text",
/// "text":"..."}],"isError":false}}`.
pub(crate) fn tool_result(rng: &mut XorShift, id: u64, text_len: usize) -> String {
    let mut out = String::with_capacity(text_len + 128);
    out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    out.push_str(&id.to_string());
    out.push_str(",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"");
    let target = out.len() + text_len;
    escaped_text(rng, &mut out, target);
    out.push_str("\"}],\"isError\":false}}");
    out
}

/// A `notifications/progress` notification of a token stream, about 100 to 150 bytes:
/// `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t-1",
/// "progress":N,"message":"<a few words>"}}`.
pub(crate) fn progress(rng: &mut XorShift, progress: u64) -> String {
    let mut message = String::new();
    for i in 0..rng.range(1, 5) {
        if i > 0 {
            message.push(' ');
        }
        message.push_str(rng.pick(TOKEN_WORDS));
    }
    format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":\
         {{\"progressToken\":\"t-1\",\"progress\":{progress},\"message\":\"{message}\"}}}}"
    )
}

/// The size of one `large` payload: 64 KiB.
pub const LARGE_PAYLOAD_LEN: usize = 64 * 1024;
/// How many `large` payloads there are: 64, so about 4 MiB in all.
pub const LARGE_PAYLOADS: usize = 64;
/// The `tokens` payloads add up to at least this many bytes once framed as
/// `data: …\n\n`: 1 MiB.
pub const TOKENS_FRAMED_LEN: usize = 1 << 20;

/// A named, deterministic list of JSON-RPC messages, each with the SSE event id a
/// resumable server would give it (`s1:<n>`).
///
/// The `large` and `tokens` decode corpora are made of these same messages.
#[derive(Clone, Debug)]
pub struct Payloads {
    name: &'static str,
    messages: Vec<String>,
    ids: Vec<String>,
}

impl Payloads {
    /// The names [`by_name`](Self::by_name) knows.
    pub const NAMES: [&'static str; 2] = ["large", "tokens"];

    /// 64 `tools/call` results of about 64 KiB each (≈ 4 MiB).
    pub fn large() -> Self {
        let mut rng = XorShift::new(0x006c_6172_6765);
        // The JSON skeleton around the text is 93 bytes plus the id's digits.
        let messages = (0..LARGE_PAYLOADS as u64)
            .map(|id| tool_result(&mut rng, id + 1, LARGE_PAYLOAD_LEN - 96))
            .collect();
        Self::with_ids("large", messages)
    }

    /// Token-stream progress notifications of about 100 to 150 bytes, enough for
    /// ≈ 1 MiB of `data: …\n\n` frames.
    pub fn tokens() -> Self {
        let mut rng = XorShift::new(0x746f_6b65_6e73);
        let mut messages = Vec::new();
        let mut framed = 0;
        while framed < TOKENS_FRAMED_LEN {
            let message = progress(&mut rng, messages.len() as u64 + 1);
            framed += message.len() + 8;
            messages.push(message);
        }
        Self::with_ids("tokens", messages)
    }

    /// The payloads called `name` (one of [`NAMES`](Self::NAMES)).
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "large" => Some(Self::large()),
            "tokens" => Some(Self::tokens()),
            _ => None,
        }
    }

    fn with_ids(name: &'static str, messages: Vec<String>) -> Self {
        let ids = (1..=messages.len()).map(|n| format!("s1:{n}")).collect();
        Self {
            name,
            messages,
            ids,
        }
    }

    /// The name, as used in bench group names.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The messages (valid JSON, without CR or LF).
    pub fn messages(&self) -> &[String] {
        &self.messages
    }

    /// The event ids, one per message (no CR, LF or NUL).
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// How many messages there are.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether there are no messages (never, for the built-in payloads).
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The bytes of all messages: the encode benches' throughput.
    pub fn payload_bytes(&self) -> usize {
        self.messages.iter().map(String::len).sum()
    }

    /// The exact bytes of all messages framed as `id: <id>\ndata: <message>\n\n` (or any
    /// field order): what every encoder in the encode bench must produce.
    pub fn framed_len(&self) -> usize {
        self.messages
            .iter()
            .zip(&self.ids)
            .map(|(message, id)| "id: ".len() + id.len() + 1 + "data: ".len() + message.len() + 2)
            .sum()
    }

    /// Owned `(id, message)` pairs, as a server holds them after serializing each message.
    pub fn owned(&self) -> Vec<(String, String)> {
        self.ids
            .iter()
            .cloned()
            .zip(self.messages.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_valid_json_without_line_ends_and_of_the_stated_size() {
        for payloads in [Payloads::large(), Payloads::tokens()] {
            for message in payloads.messages() {
                assert!(!message.contains(['\r', '\n']), "{message}");
                let value: serde_json::Value = serde_json::from_str(message).unwrap();
                assert_eq!(value["jsonrpc"], "2.0");
            }
        }
        let large = Payloads::large();
        assert_eq!(large.len(), LARGE_PAYLOADS);
        for message in large.messages() {
            assert!(
                message.len().abs_diff(LARGE_PAYLOAD_LEN) < 64,
                "{}",
                message.len()
            );
        }
        let tokens = Payloads::tokens();
        for message in tokens.messages() {
            assert!((100..160).contains(&message.len()), "{}", message.len());
        }
    }
}
