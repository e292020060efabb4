//! Text known to be valid UTF-8, and the proofs of it: the one module of the crate with
//! `unsafe` code.
//!
//! The decoder validates each pushed chunk once (SIMD) and then hands out field values as
//! `&str` slices of it, zero-copy, with no second validation. That needs
//! `str::from_utf8_unchecked`, and its soundness must not rest on a caller elsewhere
//! keeping a promise. So every proof is a type defined here, whose fields only this module
//! can set, and every `unsafe` block relies only on the invariant of its own type:
//!
//! - [`Utf8Bytes`]: reference-counted text; built only from a `str`, by validating, or
//!   from the types below;
//! - `Chunk`: a pushed chunk and the span of it that `check_from` validated; text is taken
//!   from the span with `Chunk::text`, a bounds and character-boundary check (O(1));
//! - `LineBuf`: a line carried across chunks and the prefix of it known valid (taken over
//!   from its chunk's span, or validated when the line completes);
//! - `TextBuf`: a buffer only `str`s are appended to (the joined lines of an event);
//! - [`Utf8Ref`]: borrowed text and, optionally, the `Bytes` it lies in (safe: it holds a
//!   `&str`; `to_bytes` slices the owner with a checked `slice_ref`).
//!
//! `LineBuf` and `InputBuf` also lend the spare capacity of allocations they know to be
//! initialised (zeroed once, then only written) as `&mut [u8]` room for reads, and take
//! what was read without a copy; their invariants say which allocations those are.
//!
//! Miri runs the tests that reach each of these blocks (`.ci/run`).

use bytes::{Bytes, BytesMut};
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

    /// Borrows `text`, which lies inside `owner`, so that [`to_bytes`](Self::to_bytes)
    /// can share `owner` instead of copying.
    #[inline]
    fn in_owner(owner: &'a Bytes, text: &'a str) -> Self {
        debug_assert!(owner.as_ptr_range().contains(&text.as_ptr()) || text.is_empty());
        Self {
            text,
            owner: Some(owner),
        }
    }

    /// The part `part` of this text, with the same owner.
    ///
    /// `part` must lie inside this text (checked when the owner is sliced).
    #[inline]
    pub(crate) fn sub(self, part: &'a str) -> Self {
        debug_assert!(
            self.text.as_bytes().as_ptr_range().contains(&part.as_ptr()) || part.is_empty()
        );
        Self {
            text: part,
            owner: self.owner,
        }
    }

    /// Borrows `text` from a buffer that is not a `Bytes` ([`to_bytes`](Self::to_bytes)
    /// copies).
    #[inline]
    pub(crate) fn unowned(text: &'a str) -> Self {
        Self { text, owner: None }
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

/// A pushed chunk of input and the span of it known to be valid UTF-8: the proof the
/// decoder's zero-copy text views rest on.
///
/// The decoder validates a chunk once, from its first complete line on (the chunk may
/// start inside a code point of a line carried from the previous chunk), and then takes
/// every field value inside the valid span as text with [`text`](Self::text): a bounds and
/// character-boundary check, O(1), instead of a validation per line.
#[derive(Debug, Default)]
pub(crate) struct Chunk {
    bytes: Bytes,
    // INVARIANT: valid_start <= valid_end <= bytes.len(), and
    // bytes[valid_start..valid_end] is valid UTF-8.
    valid_start: usize,
    valid_end: usize,
    checked: bool,
}

impl Chunk {
    /// A chunk nothing is known of yet.
    #[inline]
    pub(crate) fn new(bytes: Bytes) -> Self {
        Self {
            bytes,
            valid_start: 0,
            valid_end: 0,
            checked: false,
        }
    }

    /// The chunk's bytes.
    #[inline(always)]
    pub(crate) fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Whether [`check_from`](Self::check_from) has run on this chunk.
    #[inline(always)]
    pub(crate) fn is_checked(&self) -> bool {
        self.checked
    }

    /// Where the valid span ends (0 before the check).
    #[inline(always)]
    pub(crate) fn valid_end(&self) -> usize {
        self.valid_end
    }

    /// Validates the chunk from `from` (SIMD): the valid span becomes `from` up to the
    /// first invalid sequence or the end. Runs once per chunk; later calls do nothing.
    #[inline]
    pub(crate) fn check_from(&mut self, from: usize) {
        if self.checked {
            return;
        }
        self.checked = true;
        let rest = self.bytes.get(from..).unwrap_or_default();
        let valid = match simdutf8::compat::from_utf8(rest) {
            Ok(_) => rest.len(),
            Err(e) => e.valid_up_to(),
        };
        self.valid_start = from.min(self.bytes.len());
        self.valid_end = self.valid_start + valid;
    }

    /// `bytes[start..end]` as text, if it lies in the valid span on character
    /// boundaries (`None` otherwise: it must then be decoded with replacement).
    #[inline(always)]
    pub(crate) fn text(&self, start: usize, end: usize) -> Option<Utf8Ref<'_>> {
        if !self.in_span(start, end) {
            return None;
        }
        let text = self
            .valid_str()
            .get(start - self.valid_start..end - self.valid_start)?;
        Some(Utf8Ref::in_owner(&self.bytes, text))
    }

    /// Whether `bytes[start..end]` lies in the valid span: the cheap test for keeping a
    /// value as a range of the chunk. Reading it ([`text`](Self::text)) also checks the
    /// character boundaries, which a range between line ends and ASCII separators always
    /// meets.
    #[inline(always)]
    pub(crate) fn in_span(&self, start: usize, end: usize) -> bool {
        self.valid_start <= start && start <= end && end <= self.valid_end
    }

    /// `bytes[start..end]` as owned text (a slice of the chunk, no copy), under the same
    /// condition as [`text`](Self::text).
    #[inline]
    pub(crate) fn text_bytes(&self, start: usize, end: usize) -> Option<Utf8Bytes> {
        self.text(start, end)?;
        // `text` checked that the range is valid UTF-8 on character boundaries.
        Some(Utf8Bytes(self.bytes.slice(start..end)))
    }

    /// The valid span as `&str`.
    #[inline(always)]
    fn valid_str(&self) -> &str {
        let valid = &self.bytes[self.valid_start..self.valid_end];
        #[allow(unsafe_code)]
        // SAFETY: the INVARIANT on `valid_start`/`valid_end`: `check_from` validated
        // exactly this span, and the bytes of a `Bytes` never change.
        unsafe {
            std::str::from_utf8_unchecked(valid)
        }
    }
}

/// The start of a line that continues in a later chunk, and how much of it is known to
/// be valid UTF-8, so a long line is validated once, whole, when it completes.
///
/// It can also lend the room after the line to a reader ([`room`](Self::room) and
/// [`commit`](Self::commit)), so a long line's bytes are read where they are kept instead
/// of being read into one buffer and copied into this one. `Read` needs initialised
/// memory, and zeroing the room before each read would cost as much as the copy it
/// saves; so once it has lent room, the buffer takes its allocations zeroed, once each,
/// and keeps reusing them.
#[derive(Debug, Default)]
pub(crate) struct LineBuf {
    buf: BytesMut,
    // INVARIANT: buf[..valid_upto] is valid UTF-8; INVALID once an invalid sequence was
    // found in the line.
    valid_upto: usize,
    // INVARIANT: true only if every byte of the allocation `buf` lies in has been
    // initialised: the allocation was made by `zeroed` (below), and `buf` has reached it
    // only through splits and `try_reclaim`, which never allocate, and has grown only
    // within its capacity. Such an allocation stays initialised: bytes are only ever
    // written to it.
    initialised: bool,
    /// The allocation before `buf`'s, kept while the input after its last line still lies
    /// in it, to be reclaimed later (two allocations take turns). INVARIANT: empty, and
    /// `spare_initialised` is to it what `initialised` is to `buf`.
    spare: BytesMut,
    spare_initialised: bool,
    /// Room has been lent: new allocations are zeroed from then on.
    lending: bool,
}

/// `LineBuf::valid_upto` of a line with an invalid sequence.
const INVALID: usize = usize::MAX;

impl LineBuf {
    /// The carried bytes.
    #[inline(always)]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The carried length.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is carried.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Forgets the line, keeping the allocation.
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.valid_upto = 0;
    }

    /// Makes an empty buffer hold at least `want` bytes without growing later, at the
    /// front of an allocation (reclaimed or new), not in the tail a shared line left; a
    /// new allocation holds at most `limit` bytes (or `want`, if more).
    #[inline]
    pub(crate) fn prepare(&mut self, want: usize, limit: usize) {
        if self.buf.is_empty() && self.buf.capacity() < want && !self.buf.try_reclaim(want) {
            self.replace(want, limit);
        }
    }

    /// The slow path of `prepare`: `buf`'s allocation is still shared (by a line handed
    /// out, or by input read into the room after it). Once lending, the spare allocation
    /// is tried before a new, zeroed one is made; `buf` becomes the spare.
    #[cold]
    fn replace(&mut self, want: usize, limit: usize) {
        if !self.lending {
            self.buf = BytesMut::with_capacity(want);
            self.initialised = false;
            return;
        }
        std::mem::swap(&mut self.buf, &mut self.spare);
        std::mem::swap(&mut self.initialised, &mut self.spare_initialised);
        // `buf` is the spare now: empty (the INVARIANT of `spare`).
        if !(self.buf.capacity() >= want || self.buf.try_reclaim(want)) {
            // Half as much again: a line a little longer than the last one, and the
            // rest of the read that ends it, fit without growing (which copies the line).
            self.buf = zeroed(want.saturating_add(want / 2).min(limit).max(want));
            self.initialised = true;
        }
    }

    /// Lends the room after the line, at most `want` bytes and never so much that the
    /// line could pass `limit` (which it must not have reached): the caller writes input
    /// there and hands it over with [`commit`](Self::commit). `hint` sizes a new
    /// allocation (the length of the last long line). Empty if `want` is 0 or the line
    /// is at its limit.
    pub(crate) fn room(&mut self, want: usize, hint: usize, limit: usize) -> &mut [u8] {
        self.lending = true;
        let len = self.buf.len();
        let want = want.min(limit.saturating_sub(len));
        if want == 0 {
            return &mut [];
        }
        if !self.initialised || self.buf.capacity() == len {
            self.grow_initialised(want, hint, limit);
        }
        // What is left of the allocation, if less than `want`: a shorter read costs a
        // call, growing costs a copy of the line.
        let want = want.min(self.buf.capacity() - len);
        let spare = &mut self.buf.spare_capacity_mut()[..want];
        #[allow(unsafe_code)]
        // SAFETY: the INVARIANT on `initialised`, which `grow_initialised` made true:
        // every byte of the allocation is initialised, so its spare capacity is valid as
        // `[u8]` (`MaybeUninit<u8>` and `u8` have the same layout).
        unsafe {
            &mut *(std::ptr::from_mut::<[std::mem::MaybeUninit<u8>]>(spare) as *mut [u8])
        }
    }

    /// Makes `buf` an initialised allocation with room for `additional` more bytes,
    /// keeping the line: reclaimed if it already is one, or else zeroed and the line
    /// copied over (at most `limit` bytes, unless the line and `additional` need more).
    #[cold]
    fn grow_initialised(&mut self, additional: usize, hint: usize, limit: usize) {
        if self.initialised && self.buf.try_reclaim(additional) {
            return;
        }
        let needed = self.buf.len() + additional;
        let cap = needed
            .max(self.buf.capacity().saturating_mul(2))
            .max(hint)
            .min(limit)
            .max(needed);
        let mut buf = zeroed(cap);
        buf.extend_from_slice(&self.buf);
        self.buf = buf;
        self.initialised = true;
    }

    /// Appends the first `n` bytes of the room [`room`](Self::room) lent (at most what
    /// is left of the allocation) to the line, unchecked as UTF-8 so far. Returns how
    /// many were appended: 0 if the buffer is not an initialised allocation.
    pub(crate) fn commit(&mut self, n: usize) -> usize {
        if !self.initialised {
            return 0;
        }
        let len = self.buf.len();
        let n = n.min(self.buf.capacity() - len);
        #[allow(unsafe_code)]
        // SAFETY: `len + n` is within the capacity, and those bytes are initialised: the
        // INVARIANT on `initialised`, which is true here.
        unsafe {
            self.buf.set_len(len + n);
        }
        n
    }

    /// Splits the bytes from `at` on off the line (input read into the room after it)
    /// and returns them; the line keeps what it knows of its validity.
    pub(crate) fn split_off(&mut self, at: usize) -> Bytes {
        if self.valid_upto != INVALID {
            self.valid_upto = self.valid_upto.min(at);
        }
        self.buf.split_off(at).freeze()
    }

    /// Starts the line with `chunk[from..]`, taking over what the chunk's check knows of
    /// its validity.
    #[inline]
    pub(crate) fn start(&mut self, chunk: &Chunk, from: usize, hint: usize, limit: usize) {
        debug_assert!(self.buf.is_empty());
        let piece = chunk.bytes().get(from..).unwrap_or_default();
        self.extend(piece, hint, limit);
        self.valid_upto = if chunk.in_span(from, chunk.valid_end) {
            // `from` is a line start inside the valid span, so a character boundary:
            // chunk[from..valid_end] is valid on its own.
            chunk.valid_end - from
        } else {
            0
        };
    }

    /// Appends raw bytes (a BOM prefix that was no BOM, or the middle of a long line).
    #[inline]
    pub(crate) fn push(&mut self, piece: &[u8], hint: usize, limit: usize) {
        self.extend(piece, hint, limit);
    }

    /// Appends `piece`, growing the buffer at most to `limit` (see `buf::extend_within`);
    /// once lending, into an initialised allocation.
    #[inline]
    fn extend(&mut self, piece: &[u8], hint: usize, limit: usize) {
        if self.buf.capacity() - self.buf.len() < piece.len() {
            if self.lending {
                self.grow_initialised(piece.len(), hint, limit);
            } else {
                // `extend_within` may move the line to a new allocation.
                self.initialised = false;
            }
        }
        crate::buf::extend_within(&mut self.buf, piece, hint, limit);
    }

    /// Appends the line's last piece and validates what is not yet known valid: once,
    /// whole, while it is still in cache. Returns whether the whole line is UTF-8.
    ///
    /// One call of the SIMD validator over a buffer still in L2 beats a call per piece
    /// (a 64 KiB line arrives in 45 TCP segments), and the common case, valid text, needs
    /// no error position.
    pub(crate) fn complete(&mut self, piece: &[u8], limit: usize) -> bool {
        self.extend(piece, 0, limit);
        if self.valid_upto == INVALID {
            return false;
        }
        let unchecked = &self.buf[self.valid_upto.min(self.buf.len())..];
        // A short line split by a chunk boundary is usually ASCII: std's validator, which
        // checks ASCII a word at a time, beats the SIMD validator's set-up there.
        let valid = if unchecked.len() < 256 {
            std::str::from_utf8(unchecked).is_ok()
        } else {
            simdutf8::basic::from_utf8(unchecked).is_ok()
        };
        self.valid_upto = if valid { self.buf.len() } else { INVALID };
        valid
    }

    /// The line as text, if [`complete`](Self::complete) found it valid.
    #[inline]
    pub(crate) fn text(&self) -> Option<&str> {
        if self.valid_upto != self.buf.len() {
            return None;
        }
        #[allow(unsafe_code)]
        // SAFETY: the INVARIANT on `valid_upto`, which covers the whole buffer here.
        Some(unsafe { std::str::from_utf8_unchecked(&self.buf) })
    }

    /// Takes the completed line: `Ok` with its text if it is valid UTF-8, `Err` with its
    /// bytes otherwise. The buffer starts empty, reusing its allocation once the line is
    /// dropped.
    pub(crate) fn take(&mut self) -> Result<Utf8Bytes, Bytes> {
        let valid = self.valid_upto == self.buf.len();
        self.valid_upto = 0;
        let bytes = self.buf.split().freeze();
        if valid {
            // The INVARIANT on `valid_upto`: the whole line was validated.
            Ok(Utf8Bytes(bytes))
        } else {
            Err(bytes)
        }
    }
}

/// Room for input read from a `Read` ([`Decoder::read_room`](crate::sse::Decoder::read_room)),
/// handed over as `Bytes` without a copy, in allocations that are zeroed once and then
/// reused: a read needs initialised memory, and zeroing before each read would cost as
/// much as the read's own copy.
///
/// Committed bytes are split off the front of the current allocation. When too little
/// of it is left, it is taken back whole once nothing holds any of its bytes any more
/// (every chunk decoded and dropped, no item or last event ID in it); until then it
/// waits among the spent ones (the last [`SPENT`]), and the first of those that is free
/// is used instead, or, if none is, a new one.
#[derive(Debug, Default)]
pub(crate) struct InputBuf {
    // INVARIANT (every handle here): empty, and either without an allocation or lying in
    // one made by `zeroed` that it has reached only through splits and `try_reclaim`,
    // which never allocate: every byte of that allocation is initialised.
    current: BytesMut,
    spent: std::collections::VecDeque<BytesMut>,
}

/// How many spent allocations an [`InputBuf`] keeps to take back: an unfinished event,
/// the last event ID and an item the caller still holds can each keep one.
const SPENT: usize = 3;

/// The smallest allocation of an [`InputBuf`]: 16 KiB, many short reads' worth.
const INPUT_ALLOC: usize = 16 << 10;

impl InputBuf {
    /// Lends room for at most `want` bytes (`want` > 0): all of it, or at least a
    /// quarter of it when that much is left in the current allocation.
    #[inline]
    pub(crate) fn room(&mut self, want: usize) -> &mut [u8] {
        let cap = self.current.capacity();
        // Not enough left for all of `want`: the whole allocation back if nothing holds
        // any of it, else what is left if that is a quarter of `want`, else another one.
        if cap < want && !self.current.try_reclaim(want) && cap < want.div_ceil(4) {
            self.refill(want);
        }
        let want = want.min(self.current.capacity());
        let spare = &mut self.current.spare_capacity_mut()[..want];
        #[allow(unsafe_code)]
        // SAFETY: the INVARIANT on the fields: every byte of `current`'s allocation is
        // initialised, so its spare capacity is valid as `[u8]` (`MaybeUninit<u8>` and
        // `u8` have the same layout).
        unsafe {
            &mut *(std::ptr::from_mut::<[std::mem::MaybeUninit<u8>]>(spare) as *mut [u8])
        }
    }

    /// Makes `current`, which is still held, a spent allocation, and replaces it with a
    /// spent one that is free again (taken back whole), or else a new, zeroed one.
    #[cold]
    fn refill(&mut self, want: usize) {
        let next = match self.spent.iter_mut().position(|b| b.try_reclaim(want)) {
            Some(i) => self.spent.remove(i).unwrap_or_default(),
            None => zeroed(want.max(INPUT_ALLOC)),
        };
        if self.spent.len() == SPENT {
            // Given up: it goes when the last of its bytes does.
            self.spent.pop_front();
        }
        self.spent
            .push_back(std::mem::replace(&mut self.current, next));
    }

    /// Takes the first `n` bytes of the room [`room`](Self::room) lent (at most what
    /// is left of the allocation) as input.
    #[inline]
    pub(crate) fn commit(&mut self, n: usize) -> Bytes {
        let n = n.min(self.current.capacity());
        #[allow(unsafe_code)]
        // SAFETY: `n` is within the capacity (the length is 0, the INVARIANT), and those
        // bytes are initialised: the INVARIANT on the fields.
        unsafe {
            self.current.set_len(n);
        }
        // The handle stays empty (the INVARIANT).
        self.current.split().freeze()
    }
}

/// An empty buffer whose allocation of `cap` bytes is all initialised (zeroed).
fn zeroed(cap: usize) -> BytesMut {
    let mut buf = BytesMut::zeroed(cap);
    // Should the allocation be bigger than asked, its tail is initialised too (a resize
    // within the capacity does not reallocate).
    let all = buf.capacity();
    buf.resize(all, 0);
    buf.clear();
    buf
}

/// A growable UTF-8 buffer: the joined lines of a multi-line event.
#[derive(Debug, Default)]
pub(crate) struct TextBuf(
    // INVARIANT: valid UTF-8: only `str`s are appended.
    BytesMut,
);

impl TextBuf {
    /// The length in bytes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Forgets the text, keeping the allocation.
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// Appends `text`, growing the buffer at most to `limit` (see `buf::extend_within`).
    #[inline]
    pub(crate) fn push_within(&mut self, text: &str, hint: usize, limit: usize) {
        crate::buf::extend_within(&mut self.0, text.as_bytes(), hint, limit);
    }

    /// The text, borrowed.
    #[inline]
    pub(crate) fn as_ref(&self) -> Utf8Ref<'_> {
        #[allow(unsafe_code)]
        // SAFETY: the INVARIANT on the field.
        let text = unsafe { std::str::from_utf8_unchecked(&self.0) };
        Utf8Ref::unowned(text)
    }

    /// Takes the text; the buffer starts empty and reuses its allocation once the text is
    /// dropped.
    #[inline]
    pub(crate) fn split(&mut self) -> Utf8Bytes {
        // The INVARIANT on the field.
        Utf8Bytes(self.0.split().freeze())
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
