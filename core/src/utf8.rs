//! `Utf8Bytes`: reference-counted bytes that are known to be valid UTF-8.

use bytes::Bytes;
use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::ops::Range;

/// An immutable, cheaply cloneable string backed by [`Bytes`].
///
/// The SSE decoder hands event data out as slices of the input chunks; this type keeps
/// that zero-copy slice and the proof that it is UTF-8 together, so reading it as `&str`
/// costs nothing.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Utf8Bytes(
    // INVARIANT: the bytes are valid UTF-8.
    Bytes,
);

impl Utf8Bytes {
    /// An empty string; does not allocate.
    pub const fn new() -> Self {
        Self(Bytes::new())
    }

    /// Wraps a static string without copying.
    pub const fn from_static(s: &'static str) -> Self {
        Self(Bytes::from_static(s.as_bytes()))
    }

    /// Validates `bytes` as UTF-8 and wraps them without copying.
    ///
    /// # Errors
    ///
    /// Returns the bytes back if they are not valid UTF-8.
    pub fn try_from_bytes(bytes: Bytes) -> Result<Self, Bytes> {
        if simdutf8::basic::from_utf8(&bytes).is_ok() {
            Ok(Self(bytes))
        } else {
            Err(bytes)
        }
    }

    /// Decodes `bytes` as UTF-8 with replacement (the WHATWG "UTF-8 decode without BOM"):
    /// valid input is kept without copying; each maximal invalid subsequence becomes U+FFFD.
    pub fn from_bytes_lossy(bytes: Bytes) -> Self {
        if simdutf8::basic::from_utf8(&bytes).is_ok() {
            return Self(bytes);
        }
        match String::from_utf8_lossy(&bytes) {
            // Unreachable in practice (validation failed above), but harmless.
            Cow::Borrowed(_) => Self(bytes),
            Cow::Owned(s) => Self(Bytes::from(s)),
        }
    }

    /// The part of `self` that `subset` is, without copying (one reference count), as
    /// [`Bytes::slice_ref`]: for keeping a `&str` borrowed from this text (a JSON-RPC
    /// method or payload found in it) past the borrow. An empty `subset` gives an empty
    /// string wherever it points.
    ///
    /// # Panics
    ///
    /// If `subset` is not empty and does not lie inside `self`.
    pub fn slice_ref(&self, subset: &str) -> Self {
        // `subset` is a `str`, so the slice is UTF-8 whatever its position.
        Self(self.0.slice_ref(subset.as_bytes()))
    }

    /// `self[range]` without copying, if `range` is within the text and on character
    /// boundaries.
    pub fn get(&self, range: Range<usize>) -> Option<Self> {
        self.as_str().get(range.clone())?;
        Some(Self(self.0.slice(range)))
    }

    /// The string.
    #[inline]
    pub fn as_str(&self) -> &str {
        #[allow(unsafe_code)]
        // SAFETY: the INVARIANT on the field: every constructor validates or takes a `str`.
        unsafe {
            std::str::from_utf8_unchecked(&self.0)
        }
    }

    /// The underlying bytes (a zero-copy view).
    #[inline]
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// Unwraps the underlying bytes.
    #[inline]
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Wraps bytes the caller has already validated.
    #[inline]
    pub(crate) fn from_validated(bytes: Bytes) -> Self {
        debug_assert!(std::str::from_utf8(&bytes).is_ok());
        Self(bytes)
    }
}

/// UTF-8 text borrowed from the decoder: its zero-refcount view.
///
/// Reading it costs nothing. [`to_bytes`](Self::to_bytes) turns it into an owned
/// [`Utf8Bytes`]: without copying (one reference-count increment) when the text lies in a
/// `Bytes`, by copying when it lies in a scratch buffer (the joined lines of a multi-line
/// event).
#[derive(Clone, Copy)]
pub struct Utf8Ref<'a> {
    // INVARIANT: `text` lies inside `owner`, if there is one.
    text: &'a str,
    owner: Option<&'a Bytes>,
}

impl<'a> Utf8Ref<'a> {
    /// Borrows all of `s`.
    #[inline]
    pub fn new(s: &'a Utf8Bytes) -> Self {
        Self {
            text: s.as_str(),
            owner: Some(&s.0),
        }
    }

    /// Borrows `owner[range]`, already known to be valid UTF-8.
    ///
    /// # Safety
    ///
    /// `owner[range]` must be valid UTF-8 (and `range` within `owner`, which is checked).
    #[allow(unsafe_code)]
    #[inline]
    pub(crate) unsafe fn from_validated(owner: &'a Bytes, range: Range<usize>) -> Self {
        Self {
            // SAFETY: the caller guarantees the bytes are valid UTF-8.
            text: unsafe { str_from_validated(&owner[range]) },
            owner: Some(owner),
        }
    }

    /// Borrows `bytes`, already known to be valid UTF-8, from a buffer that is not a
    /// `Bytes` ([`to_bytes`](Self::to_bytes) copies).
    ///
    /// # Safety
    ///
    /// `bytes` must be valid UTF-8.
    #[allow(unsafe_code)]
    #[inline]
    pub(crate) unsafe fn from_validated_unowned(bytes: &'a [u8]) -> Self {
        Self {
            // SAFETY: the caller guarantees the bytes are valid UTF-8.
            text: unsafe { str_from_validated(bytes) },
            owner: None,
        }
    }

    /// The text.
    #[inline]
    pub fn as_str(&self) -> &'a str {
        self.text
    }

    /// An owned handle on the same bytes (no copy).
    #[inline]
    pub fn to_bytes(&self) -> Utf8Bytes {
        match self.owner {
            _ if self.text.is_empty() => Utf8Bytes::new(),
            Some(owner) => Utf8Bytes(owner.slice_ref(self.text.as_bytes())),
            None => Utf8Bytes(Bytes::copy_from_slice(self.text.as_bytes())),
        }
    }
}

/// # Safety
///
/// `bytes` must be valid UTF-8.
#[allow(unsafe_code)]
#[inline]
unsafe fn str_from_validated(bytes: &[u8]) -> &str {
    debug_assert!(std::str::from_utf8(bytes).is_ok());
    // SAFETY: the caller guarantees the bytes are valid UTF-8.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

impl Deref for Utf8Ref<'_> {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.text
    }
}

impl PartialEq for Utf8Ref<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Utf8Ref<'_> {}

impl PartialEq<str> for Utf8Ref<'_> {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for Utf8Ref<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl fmt::Debug for Utf8Ref<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.text, f)
    }
}

impl fmt::Display for Utf8Ref<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text)
    }
}

impl Deref for Utf8Bytes {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Utf8Bytes {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for Utf8Bytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<String> for Utf8Bytes {
    fn from(s: String) -> Self {
        Self(Bytes::from(s))
    }
}

impl From<&'static str> for Utf8Bytes {
    fn from(s: &'static str) -> Self {
        Self::from_static(s)
    }
}

impl From<Utf8Bytes> for Bytes {
    fn from(s: Utf8Bytes) -> Self {
        s.0
    }
}

impl PartialEq<str> for Utf8Bytes {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Utf8Bytes {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossy_keeps_valid_input_without_copying() {
        let b = Bytes::from_static("héllo".as_bytes());
        let s = Utf8Bytes::from_bytes_lossy(b.clone());
        assert_eq!(s.as_bytes().as_ptr(), b.as_ptr());
        assert_eq!(s, "héllo");
    }

    #[test]
    fn lossy_replaces_maximal_subparts() {
        // WHATWG: E2 82 is one truncated sequence (one U+FFFD); FF is another.
        let s = Utf8Bytes::from_bytes_lossy(Bytes::from_static(b"a\xE2\x82b\xFFc"));
        assert_eq!(s, "a\u{FFFD}b\u{FFFD}c");
    }

    #[test]
    fn try_from_bytes_rejects_invalid() {
        assert!(Utf8Bytes::try_from_bytes(Bytes::from_static(b"\xC0\x80")).is_err());
        assert_eq!(
            Utf8Bytes::try_from_bytes(Bytes::from_static(b"ok")).unwrap(),
            "ok"
        );
    }
}
