//! Line ends (SSE-PARSE-3, SSE-ENC-2): CR, LF and CRLF, found and stepped over in one
//! place for the decoder and the encoder.

use memchr::memchr2;

/// Finds the next CR or LF: memchr's vector searcher picked once per decoder, which
/// saves memchr2's per-call dispatch on streams of short lines.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LineEnds {
    #[cfg(target_arch = "x86_64")]
    Avx2(memchr::arch::x86_64::avx2::memchr::Two),
    #[cfg(target_arch = "x86_64")]
    Sse2(memchr::arch::x86_64::sse2::memchr::Two),
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    Generic,
}

impl LineEnds {
    /// The best searcher this CPU has.
    pub(crate) fn new() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use memchr::arch::x86_64::{avx2, sse2};
            if let Some(two) = avx2::memchr::Two::new(b'\n', b'\r') {
                return Self::Avx2(two);
            }
            if let Some(two) = sse2::memchr::Two::new(b'\n', b'\r') {
                return Self::Sse2(two);
            }
        }
        Self::Generic
    }

    /// The offset of the first CR or LF in `haystack`.
    #[inline(always)]
    pub(crate) fn find(&self, haystack: &[u8]) -> Option<usize> {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Avx2(two) => two.find(haystack),
            #[cfg(target_arch = "x86_64")]
            Self::Sse2(two) => two.find(haystack),
            Self::Generic => find(haystack),
        }
    }
}

/// The offset of the first CR or LF in `haystack` (for one-off searches).
#[inline(always)]
pub(crate) fn find(haystack: &[u8]) -> Option<usize> {
    memchr2(b'\n', b'\r', haystack)
}

/// Steps over the line end at `bytes[at]` (a CR or an LF): returns where the next line
/// starts, and whether the line end was a CR at the very end of `bytes`, so that an LF
/// first in the next input belongs to it (CRLF split across chunks is one line end).
#[inline(always)]
pub(crate) fn step_over(bytes: &[u8], at: usize) -> (usize, bool) {
    debug_assert!(matches!(bytes[at], b'\r' | b'\n'));
    let next = at + 1;
    if bytes[at] == b'\r' {
        match bytes.get(next) {
            Some(b'\n') => return (next + 1, false),
            None => return (next, true),
            Some(_) => {}
        }
    }
    (next, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_parse_3_every_line_end_is_stepped_over_once() {
        assert_eq!(step_over(b"a\nb", 1), (2, false));
        assert_eq!(step_over(b"a\rb", 1), (2, false));
        assert_eq!(step_over(b"a\r\nb", 1), (3, false));
        assert_eq!(step_over(b"a\r", 1), (2, true));
        assert_eq!(step_over(b"a\n", 1), (2, false));
        assert_eq!(step_over(b"\r\r", 0), (1, false));
        let ends = LineEnds::new();
        for hay in [&b""[..], b"abc", b"ab\rc", b"\n", b"x\r\n"] {
            assert_eq!(ends.find(hay), find(hay), "{hay:?}");
        }
    }
}
