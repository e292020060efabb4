//! Growing a `BytesMut` without letting its capacity pass a limit (SSE-PARSE-22).

use bytes::{Bytes, BytesMut};

/// Appends `bytes` to `buf` without letting its capacity pass `limit`.
///
/// `BytesMut` grows by doubling, which could leave a buffer holding up to twice its limit.
/// Here the old allocation is reused when possible; otherwise the buffer grows to
/// `max(needed, 2 × capacity, hint)`, clamped to `limit` (callers have checked that the
/// needed length is within it).
#[inline]
pub(crate) fn extend_within(buf: &mut BytesMut, bytes: &[u8], hint: usize, limit: usize) {
    if buf.capacity() - buf.len() < bytes.len() {
        grow_within(buf, bytes.len(), hint, limit);
    }
    buf.extend_from_slice(bytes);
}

/// The slow path of [`extend_within`]: makes room for `additional` more bytes.
#[cold]
fn grow_within(buf: &mut BytesMut, additional: usize, hint: usize, limit: usize) {
    let needed = buf.len() + additional;
    if !buf.try_reclaim(additional) {
        let cap = needed
            .max(buf.capacity().saturating_mul(2))
            .max(hint)
            .min(limit)
            .max(needed);
        // Through `Vec`, whose exact reservation reallocates in place where it can, so
        // the old and new buffers are not both alive (both conversions are zero-copy for
        // an unshared buffer).
        let mut vec = Vec::from(std::mem::take(buf));
        vec.reserve_exact(cap - vec.len());
        *buf = BytesMut::from(Bytes::from(vec));
    }
}
