//! [`RequestId`]: a JSON-RPC request id, integer or string, stored inline when short.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Longest string id kept inline (no allocation); longer ones share one heap copy.
pub const INLINE_ID_LEN: usize = 22;

/// A JSON-RPC request id: an integer or a string, never null (JSONRPC-2).
///
/// `1` and `"1"` are different ids (JSONRPC-8): equality, ordering and hashing all keep
/// the kind. Integer ids and string ids of up to [`INLINE_ID_LEN`] bytes live inside the
/// value; a longer string is reference-counted, so cloning never copies it.
///
/// Integer ids are `i64`: an integer id outside that range is refused
/// ([`Shape::IdOutOfRange`](super::Shape::IdOutOfRange)) rather than kept as text or
/// widened to `u64`. Peers issue small counters, and a JavaScript peer cannot hold an
/// integer beyond 2^53 exactly, so a larger id could not be echoed back faithfully anyway.
///
/// Ordering puts every integer before every string; it exists so ids can key a
/// `BTreeMap` (the core uses no hasher that would need a random seed).
#[derive(Clone)]
pub struct RequestId(Repr);

#[derive(Clone)]
enum Repr {
    Int(i64),
    // INVARIANT: len <= INLINE_ID_LEN and bytes[..len] is UTF-8.
    Inline { len: u8, bytes: [u8; INLINE_ID_LEN] },
    // INVARIANT: longer than INLINE_ID_LEN, so no id has two representations.
    Shared(Arc<str>),
}

impl RequestId {
    /// An integer id.
    pub const fn int(n: i64) -> Self {
        Self(Repr::Int(n))
    }

    /// A string id; allocates only when longer than [`INLINE_ID_LEN`] bytes.
    pub fn string(s: &str) -> Self {
        if s.len() <= INLINE_ID_LEN {
            let mut bytes = [0; INLINE_ID_LEN];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Self(Repr::Inline {
                len: s.len() as u8,
                bytes,
            })
        } else {
            Self(Repr::Shared(Arc::from(s)))
        }
    }

    /// The integer, if this is an integer id.
    pub fn as_int(&self) -> Option<i64> {
        match self.0 {
            Repr::Int(n) => Some(n),
            _ => None,
        }
    }

    /// The string, if this is a string id.
    pub fn as_str(&self) -> Option<&str> {
        match &self.0 {
            Repr::Int(_) => None,
            Repr::Inline { len, bytes } => Some(
                std::str::from_utf8(&bytes[..usize::from(*len)])
                    .expect("INVARIANT: an inline id is UTF-8"),
            ),
            Repr::Shared(s) => Some(s),
        }
    }

    /// Whether the id is stored without a heap allocation.
    pub fn is_inline(&self) -> bool {
        !matches!(self.0, Repr::Shared(_))
    }

    /// A borrowed view used by the comparison traits.
    fn view(&self) -> View<'_> {
        match self.as_int() {
            Some(n) => View::Int(n),
            None => View::Str(self.as_str().expect("not an integer, so a string")),
        }
    }

    /// Writes the id as JSON (an integer or a quoted, escaped string).
    pub(crate) fn write_json(&self, dst: &mut bytes::BytesMut) {
        match self.view() {
            View::Int(n) => super::encode::write_int(dst, n),
            View::Str(s) => super::encode::write_str(dst, s),
        }
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord, Hash)]
enum View<'a> {
    Int(i64),
    Str(&'a str),
}

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.view() == other.view()
    }
}

impl Eq for RequestId {}

impl PartialOrd for RequestId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RequestId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.view().cmp(&other.view())
    }
}

impl Hash for RequestId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.view().hash(state);
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        Self::int(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::string(s)
    }
}

/// Shows the id as JSON: `7` or `"7"`, so the two kinds stay distinguishable.
impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.view() {
            View::Int(n) => write!(f, "{n}"),
            View::Str(s) => super::encode::json_string(s, |piece| f.write_str(piece)),
        }
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestId({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn jsonrpc_8_integer_and_string_ids_differ() {
        assert_ne!(RequestId::int(1), RequestId::string("1"));
        let set: HashSet<RequestId> = [RequestId::int(1), RequestId::string("1")]
            .into_iter()
            .collect();
        assert_eq!(set.len(), 2);
        assert!(RequestId::int(i64::MAX) < RequestId::string(""));
    }

    #[test]
    fn short_ids_are_inline_and_long_ones_shared() {
        let short = "a".repeat(INLINE_ID_LEN);
        let long = "a".repeat(INLINE_ID_LEN + 1);
        assert!(RequestId::string(&short).is_inline());
        assert!(!RequestId::string(&long).is_inline());
        assert_eq!(RequestId::string(&long).as_str(), Some(long.as_str()));
        assert_eq!(RequestId::string(&short), RequestId::string(&short).clone());
        assert_eq!(RequestId::string("é").as_str(), Some("é"));
        assert_eq!(RequestId::int(-3).as_int(), Some(-3));
        assert_eq!(RequestId::int(-3).to_string(), "-3");
        assert_eq!(RequestId::string("x\"").to_string(), "\"x\\\"\"");
    }
}
