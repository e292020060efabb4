//! A validating JSON scanner that builds nothing.
//!
//! It accepts exactly RFC 8259 JSON over text that is already known to be UTF-8, and
//! reports where each value starts and ends so the envelope can hand out `params`,
//! `result` and `data` as slices of the input. Nesting is tracked in a fixed bit stack
//! (no recursion, no allocation), so a deeply nested document is a [`JsonErrorKind::TooDeep`]
//! error, never a stack overflow.
//!
//! Strings dominate MCP payloads (tool results are mostly text), so string bodies are
//! scanned eight bytes at a time (SWAR) for the three kinds of byte that matter inside a
//! string (`"`, `\` and controls below 0x20); everything else is skipped without a
//! per-byte branch.

use std::fmt;

/// Hard cap on nesting depth: the size of the fixed bit stack.
pub(crate) const MAX_DEPTH_CAP: usize = 1024;

/// Why a text is not JSON, and where; or, for [`JsonErrorKind::TooDeep`], why a limit
/// refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JsonError {
    /// Byte offset into the text where the problem was found.
    pub offset: usize,
    /// What was wrong.
    pub kind: JsonErrorKind,
}

/// The kinds of [`JsonError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// The text ended inside a value.
    UnexpectedEnd,
    /// A byte that cannot appear here.
    UnexpectedByte(u8),
    /// A backslash escape other than `\" \\ \/ \b \f \n \r \t \uXXXX`.
    InvalidEscape,
    /// A raw control character (U+0000–U+001F) inside a string.
    ControlInString,
    /// A malformed number (`01`, `1.`, `-`, `1e`).
    InvalidNumber,
    /// Bytes after the top-level value.
    TrailingCharacters,
    /// The text is not UTF-8.
    InvalidUtf8,
    /// Nesting deeper than the configured limit. A limit, not a syntax error: the text
    /// may well be JSON (the scanner stops where the limit is reached).
    TooDeep {
        /// The configured maximum depth.
        limit: usize,
    },
}

impl JsonErrorKind {
    /// Whether this is a limit of the classifier ([`TooDeep`](Self::TooDeep)) rather
    /// than a proof that the text is not JSON.
    pub const fn is_limit(&self) -> bool {
        matches!(self, Self::TooDeep { .. })
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            JsonErrorKind::UnexpectedEnd => {
                write!(f, "unexpected end of json at byte {}", self.offset)
            }
            // ASCII as a character; any other byte (part of a UTF-8 sequence) in hex.
            JsonErrorKind::UnexpectedByte(b) if b.is_ascii() => {
                write!(
                    f,
                    "unexpected byte {:?} at byte {}",
                    char::from(b),
                    self.offset
                )
            }
            JsonErrorKind::UnexpectedByte(b) => {
                write!(f, "unexpected byte 0x{b:02x} at byte {}", self.offset)
            }
            JsonErrorKind::InvalidEscape => {
                write!(f, "invalid string escape at byte {}", self.offset)
            }
            JsonErrorKind::ControlInString => {
                write!(
                    f,
                    "unescaped control character in string at byte {}",
                    self.offset
                )
            }
            JsonErrorKind::InvalidNumber => write!(f, "invalid number at byte {}", self.offset),
            JsonErrorKind::TrailingCharacters => {
                write!(
                    f,
                    "trailing characters after json value at byte {}",
                    self.offset
                )
            }
            JsonErrorKind::InvalidUtf8 => write!(f, "invalid utf-8 at byte {}", self.offset),
            JsonErrorKind::TooDeep { limit } => {
                write!(
                    f,
                    "json nested deeper than {limit} levels at byte {}",
                    self.offset
                )
            }
        }
    }
}

impl std::error::Error for JsonError {}

/// The extent of a string token: `start..end` is the body between the quotes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StrToken {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// The body contains at least one backslash escape.
    pub(crate) escaped: bool,
}

/// A cursor over UTF-8 text that validates JSON as it moves.
pub(crate) struct Scanner<'a> {
    text: &'a [u8],
    pos: usize,
    max_depth: usize,
    // INVARIANT: base <= max_depth. The depth of the containers the caller walks by hand
    // (the message object, a batch array, an error object): values count from it.
    base: usize,
}

type Result<T> = std::result::Result<T, JsonError>;

impl<'a> Scanner<'a> {
    /// A scanner at the start of `text`; `max_depth` is clamped to [`MAX_DEPTH_CAP`].
    pub(crate) fn new(text: &'a [u8], max_depth: usize) -> Self {
        Self {
            text,
            pos: 0,
            max_depth: max_depth.min(MAX_DEPTH_CAP),
            base: 0,
        }
    }

    /// The cursor: the offset of the next byte to scan.
    pub(crate) const fn pos(&self) -> usize {
        self.pos
    }

    fn err(&self, kind: JsonErrorKind) -> JsonError {
        JsonError {
            offset: self.pos,
            kind,
        }
    }

    fn unexpected(&self) -> JsonError {
        match self.text.get(self.pos) {
            Some(&b) => self.err(JsonErrorKind::UnexpectedByte(b)),
            None => self.err(JsonErrorKind::UnexpectedEnd),
        }
    }

    /// Enters a container that the caller walks itself (the message object, a batch,
    /// an error object), so that nesting is counted over the whole text.
    pub(crate) fn enter(&mut self) -> Result<()> {
        if self.base >= self.max_depth {
            return Err(self.err(JsonErrorKind::TooDeep {
                limit: self.max_depth,
            }));
        }
        self.base += 1;
        Ok(())
    }

    /// Leaves the container of the matching [`enter`](Self::enter).
    pub(crate) fn leave(&mut self) {
        self.base = self.base.saturating_sub(1);
    }

    /// Skips JSON whitespace and returns the next byte, if any.
    #[inline]
    pub(crate) fn peek(&mut self) -> Option<u8> {
        while let Some(&b) = self.text.get(self.pos) {
            if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// Skips whitespace, then consumes `byte` or fails.
    #[inline]
    pub(crate) fn expect(&mut self, byte: u8) -> Result<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    /// Consumes `byte` if it is next (after whitespace).
    #[inline]
    pub(crate) fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Requires that only whitespace remains.
    pub(crate) fn end(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.err(JsonErrorKind::TrailingCharacters)),
        }
    }

    /// Scans a string token; the cursor must be on its opening quote.
    pub(crate) fn string(&mut self) -> Result<StrToken> {
        debug_assert_eq!(self.text.get(self.pos), Some(&b'"'));
        let start = self.pos + 1;
        let mut i = start;
        let mut escaped = false;
        let text = self.text;
        loop {
            i = special_from(text, i);
            match text.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(StrToken {
                        start,
                        end: i,
                        escaped,
                    });
                }
                Some(b'\\') => {
                    escaped = true;
                    i = match text.get(i + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i + 2,
                        Some(b'u') => {
                            // Judge the digits that are there before blaming the end: a
                            // short `\u1"` is a bad escape, not a truncated text.
                            let hex = &text[i + 2..text.len().min(i + 6)];
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return Err(JsonError {
                                    offset: i,
                                    kind: JsonErrorKind::InvalidEscape,
                                });
                            }
                            if hex.len() < 4 {
                                return Err(JsonError {
                                    offset: text.len(),
                                    kind: JsonErrorKind::UnexpectedEnd,
                                });
                            }
                            i + 6
                        }
                        Some(_) => {
                            return Err(JsonError {
                                offset: i,
                                kind: JsonErrorKind::InvalidEscape,
                            });
                        }
                        None => {
                            return Err(JsonError {
                                offset: text.len(),
                                kind: JsonErrorKind::UnexpectedEnd,
                            });
                        }
                    };
                }
                Some(_) => {
                    return Err(JsonError {
                        offset: i,
                        kind: JsonErrorKind::ControlInString,
                    });
                }
                None => {
                    return Err(JsonError {
                        offset: text.len(),
                        kind: JsonErrorKind::UnexpectedEnd,
                    });
                }
            }
        }
    }

    /// Scans a number token; the cursor must be on `-` or a digit. Returns its extent.
    pub(crate) fn number(&mut self) -> Result<(usize, usize)> {
        let text = self.text;
        let start = self.pos;
        let mut i = start;
        if text.get(i) == Some(&b'-') {
            i += 1;
        }
        match text.get(i) {
            // RFC 8259 forbids leading zeros; say so rather than "unexpected byte".
            Some(b'0') if text.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                return Err(JsonError {
                    offset: i + 1,
                    kind: JsonErrorKind::InvalidNumber,
                });
            }
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(text, i + 1),
            _ => {
                return Err(JsonError {
                    offset: i,
                    kind: JsonErrorKind::InvalidNumber,
                });
            }
        }
        if text.get(i) == Some(&b'.') {
            let after = digits(text, i + 1);
            if after == i + 1 {
                return Err(JsonError {
                    offset: after,
                    kind: JsonErrorKind::InvalidNumber,
                });
            }
            i = after;
        }
        if matches!(text.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(text.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let after = digits(text, i);
            if after == i {
                return Err(JsonError {
                    offset: after,
                    kind: JsonErrorKind::InvalidNumber,
                });
            }
            i = after;
        }
        self.pos = i;
        Ok((start, i))
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        match self.text.get(self.pos..self.pos + word.len()) {
            Some(found) if found == word => {
                self.pos += word.len();
                Ok(())
            }
            _ => {
                // Point at the first byte that differs.
                let same = self.text[self.pos..]
                    .iter()
                    .zip(word)
                    .take_while(|(a, b)| a == b)
                    .count();
                self.pos += same;
                Err(self.unexpected())
            }
        }
    }

    /// Scans one complete value (after whitespace) and returns its extent. Nested
    /// containers are walked iteratively with a fixed bit stack; their depth counts from
    /// the containers [`enter`](Self::enter)ed.
    pub(crate) fn value(&mut self) -> Result<(usize, usize)> {
        self.peek();
        let start = self.pos;
        // Bit d of the stack is 1 when the container at depth d+1 is an object.
        let mut stack = [0u64; MAX_DEPTH_CAP / 64];
        let base = self.base;
        let mut depth = base;
        'value: loop {
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if depth >= self.max_depth {
                        return Err(self.err(JsonErrorKind::TooDeep {
                            limit: self.max_depth,
                        }));
                    }
                    self.pos += 1;
                    let is_object = open == b'{';
                    let close = if is_object { b'}' } else { b']' };
                    if !self.eat(close) {
                        let (word, bit) = (depth / 64, 1u64 << (depth % 64));
                        if is_object {
                            stack[word] |= bit;
                        } else {
                            stack[word] &= !bit;
                        }
                        depth += 1;
                        if is_object {
                            self.member_key()?;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                }
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                _ => return Err(self.unexpected()),
            }
            // A value ended: close containers until one expects another element.
            loop {
                if depth == base {
                    return Ok((start, self.pos));
                }
                let d = depth - 1;
                let in_object = stack[d / 64] & (1u64 << (d % 64)) != 0;
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if in_object {
                            self.member_key()?;
                        }
                        continue 'value;
                    }
                    Some(b'}') if in_object => {
                        self.pos += 1;
                        depth -= 1;
                    }
                    Some(b']') if !in_object => {
                        self.pos += 1;
                        depth -= 1;
                    }
                    _ => return Err(self.unexpected()),
                }
            }
        }
    }

    /// Scans `"key" :` inside an object.
    #[inline]
    pub(crate) fn member_key(&mut self) -> Result<StrToken> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected());
        }
        let key = self.string()?;
        self.expect(b':')?;
        Ok(key)
    }
}

fn digits(text: &[u8], mut i: usize) -> usize {
    while text.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// True for the bytes that end a run of plain string content.
#[inline(always)]
fn is_special(b: u8) -> bool {
    (b == b'"') | (b == b'\\') | (b < 0x20)
}

/// The index of the first `"`, `\` or control byte at or after `i` (or `text.len()`).
///
/// Eight bytes at a time (SWAR): for each of the three tests, the classic "has a zero
/// byte" trick sets the high bit of every byte that matches, and of none below the
/// first match, so the lowest set bit is the answer.
#[inline]
fn special_from(text: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(word) = text.get(i..i + 8) {
        let x = u64::from_le_bytes(word.try_into().unwrap_or_default());
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        let hits = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (x.wrapping_sub(ONES * 0x20) & !x);
        let hits = hits & HIGHS;
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = text.get(i) {
        if is_special(b) {
            return i;
        }
        i += 1;
    }
    i
}

/// Decodes the body of a string token (between the quotes, already validated by
/// [`Scanner::string`]). Returns `None` when it holds an unpaired surrogate escape,
/// which no Rust string can hold.
pub(crate) fn unescape(body: &str) -> Option<String> {
    let bytes = body.as_bytes();
    let mut out = String::with_capacity(body.len());
    let mut i = 0;
    while i < bytes.len() {
        let run = memchr::memchr(b'\\', &bytes[i..]).map_or(bytes.len(), |n| i + n);
        out.push_str(&body[i..run]);
        if run == bytes.len() {
            break;
        }
        let c = match bytes[run + 1] {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            _ => {
                let hi = hex4(&bytes[run + 2..run + 6]);
                i = run + 6;
                if (0xD800..0xDC00).contains(&hi) {
                    let lo = match bytes.get(i..i + 6) {
                        Some([b'\\', b'u', rest @ ..]) => hex4(rest),
                        _ => return None,
                    };
                    if !(0xDC00..0xE000).contains(&lo) {
                        return None;
                    }
                    i += 6;
                    out.push(char::from_u32(
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00),
                    )?);
                } else {
                    out.push(char::from_u32(hi)?);
                }
                continue;
            }
        };
        out.push(c);
        i = run + 2;
    }
    Some(out)
}

fn hex4(hex: &[u8]) -> u32 {
    hex.iter().fold(0, |acc, &h| {
        let digit = match h {
            b'0'..=b'9' => h - b'0',
            b'a'..=b'f' => h - b'a' + 10,
            _ => h - b'A' + 10,
        };
        (acc << 4) | u32::from(digit)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<(usize, usize)> {
        let mut sc = Scanner::new(text.as_bytes(), 128);
        let extent = sc.value()?;
        sc.end()?;
        Ok(extent)
    }

    #[test]
    fn accepts_rfc8259_values() {
        for ok in [
            "0",
            "-0",
            "1.5e-3",
            "-12E+7",
            "true",
            "false",
            "null",
            "\"\"",
            "\"a\\u00e9\\n\"",
            "[]",
            "{}",
            " [1, {\"a\": [true, null, {}]}, \"x\"] ",
            "{\"a\":{\"b\":{\"c\":[[[]]]}}}",
            "\"0123456789012345678901234567890123456789\\\"\"",
        ] {
            assert_eq!(check(ok).map(|_| ()), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejects_malformed_values_with_offsets() {
        let cases: &[(&str, JsonErrorKind, usize)] = &[
            ("01", JsonErrorKind::InvalidNumber, 1),
            ("-00", JsonErrorKind::InvalidNumber, 2),
            ("1.", JsonErrorKind::InvalidNumber, 2),
            ("-", JsonErrorKind::InvalidNumber, 1),
            ("1e+", JsonErrorKind::InvalidNumber, 3),
            ("[1,]", JsonErrorKind::UnexpectedByte(b']'), 3),
            ("{\"a\" 1}", JsonErrorKind::UnexpectedByte(b'1'), 5),
            ("{\"a\":1,}", JsonErrorKind::UnexpectedByte(b'}'), 7),
            ("[1 2]", JsonErrorKind::UnexpectedByte(b'2'), 3),
            ("\"a\\x\"", JsonErrorKind::InvalidEscape, 2),
            ("\"\\u12g4\"", JsonErrorKind::InvalidEscape, 1),
            ("\"a\tb\"", JsonErrorKind::ControlInString, 2),
            ("\"abc", JsonErrorKind::UnexpectedEnd, 4),
            ("\"\\u1\"", JsonErrorKind::InvalidEscape, 1),
            ("[\"\\u1\"]", JsonErrorKind::InvalidEscape, 2),
            ("\"\\u12", JsonErrorKind::UnexpectedEnd, 5),
            ("tru", JsonErrorKind::UnexpectedEnd, 3),
            ("nul1", JsonErrorKind::UnexpectedByte(b'1'), 3),
            ("[}", JsonErrorKind::UnexpectedByte(b'}'), 1),
            ("{]", JsonErrorKind::UnexpectedByte(b']'), 1),
            ("", JsonErrorKind::UnexpectedEnd, 0),
            ("{} {}", JsonErrorKind::TrailingCharacters, 3),
        ];
        for &(text, kind, offset) in cases {
            assert_eq!(check(text), Err(JsonError { offset, kind }), "{text:?}");
        }
    }

    #[test]
    fn errors_name_non_ascii_bytes_in_hex() {
        let e = JsonError {
            offset: 0,
            kind: JsonErrorKind::UnexpectedByte(0xef),
        };
        assert_eq!(e.to_string(), "unexpected byte 0xef at byte 0");
        let e = JsonError {
            offset: 3,
            kind: JsonErrorKind::UnexpectedByte(b'x'),
        };
        assert_eq!(e.to_string(), "unexpected byte 'x' at byte 3");
    }

    #[test]
    fn depth_limit_is_an_error_not_a_stack_overflow() {
        let deep = "[".repeat(100_000);
        assert_eq!(
            check(&deep).unwrap_err().kind,
            JsonErrorKind::TooDeep { limit: 128 }
        );
        let ok = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert!(check(&ok).is_ok());
        let over = format!("{}{}", "[".repeat(129), "]".repeat(129));
        assert!(check(&over).is_err());
    }

    #[test]
    fn special_search_finds_every_position() {
        // Every needle at every offset of every length, over fillers that sit next to
        // the needles in value (0x20, 0x21, 0x23, 0x5b, 0x5d) or have the high bit set,
        // with a second needle after the first to catch borrow effects.
        for needle in [b'"', b'\\', 0x00, 0x1f] {
            for filler in [b'a', 0x20, 0x21, b'#', b'[', b']', 0x80, 0xa0, 0xff] {
                for len in 0..40 {
                    for at in 0..=len {
                        let mut text = vec![filler; len];
                        if at < len {
                            text[at] = needle;
                        }
                        if at + 1 < len {
                            text[at + 1] = b'"';
                        }
                        assert_eq!(
                            special_from(&text, 0),
                            at,
                            "{needle:#x} {filler:#x} {len} {at}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn unescape_decodes_escapes_and_pairs() {
        assert_eq!(
            unescape(r#"a\"b\\c\/\b\f\n\r\t"#).as_deref(),
            Some("a\"b\\c/\u{8}\u{c}\n\r\t")
        );
        assert_eq!(unescape(r"\u00e9\ud83d\ude00x").as_deref(), Some("é😀x"));
        assert_eq!(unescape(r"\ud83d"), None);
        assert_eq!(unescape(r"\ude00"), None);
        assert_eq!(unescape(r"\ud83dx\ude00"), None);
    }
}
