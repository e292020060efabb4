//! Event ids: `<epoch>:<ring>:<seq>` in canonical lowercase hex (RESUME-2, RESUME-3).

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use crate::sse;

/// The lifetime of one set of ring and sequence counters, carried in every [`EventId`].
///
/// Two stores (or one store before and after a restart) that count rings and sequence
/// numbers from zero would hand out the same `ring:seq` pairs; the epoch tells them
/// apart, so an id from before a restart is never mistaken for a current one. The core
/// draws no randomness: the driver chooses the epoch, for example 64 random bits taken at
/// start-up. A store whose counters survive a restart (a persistent store) keeps its epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Epoch(u64);

impl Epoch {
    /// An epoch with this value.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The value.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// The number of one replay ring: the replay record of one resumable SSE stream, as
/// numbered by its [`EventStore`](super::EventStore).
///
/// The server has its own identity for every SSE stream it serves, resumable or not; a
/// stream it serves with event ids maps to exactly one ring, and a stream without ids
/// (the sessionless revision, or one the store refused) to none. Stores number rings from
/// one counter per [`Epoch`] and never reuse a number, so an id of a dropped ring can
/// never select a newer ring's messages (RESUME-6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RingId(u64);

impl RingId {
    /// A ring id with this value.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The value.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for RingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}", self.0)
    }
}

/// The id of one event of one ring: its [`Epoch`], [`RingId`] and sequence number.
///
/// A ring numbers its events 0, 1, 2, … with no holes, so the id alone names the ring
/// (and so the stream) to resume (RESUME-3) and the position to resume from, and ids are
/// unique across every stream of a session (RESUME-2) and across restarts (the epoch).
/// Clients treat the text as opaque (it is only echoed back in `Last-Event-ID`).
///
/// # Text form
///
/// `<epoch>:<ring>:<seq>`, each field a `u64` in lowercase hexadecimal without leading
/// zeros (zero is `0`), for example `9c41d5e6b7a83f2a:1:2a`. The text is canonical: every
/// id has exactly one text, and [`parse`](Self::parse) accepts only that text, so
/// `parse(s)?.encode() == s`. It is ASCII, at most [`MAX_LEN`](Self::MAX_LEN) bytes, and
/// holds no CR, LF or NUL, so it is always a valid SSE `id` field (SSE-ENC-4).
///
/// # Example
///
/// ```
/// use mcpwire::resume::{Epoch, EventId, RingId};
///
/// let id = EventId::new(Epoch::new(0x9c41), RingId::new(1), 42);
/// let text = id.encode(); // on the stack: formatting never allocates
/// assert_eq!(text.as_str(), "9c41:1:2a");
/// assert_eq!(EventId::parse("9c41:1:2a")?, id);
/// assert!(EventId::parse("9C41:1:2a").is_err()); // not canonical
/// # Ok::<(), mcpwire::resume::EventIdError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId {
    epoch: Epoch,
    ring: RingId,
    seq: u64,
}

/// The most hex digits a `u64` field has.
const FIELD_MAX_DIGITS: usize = 16;

impl EventId {
    /// The longest text form: three 16-digit fields and two separators.
    pub const MAX_LEN: usize = 3 * FIELD_MAX_DIGITS + 2;

    /// The id of event `seq` of `ring` in `epoch`.
    pub const fn new(epoch: Epoch, ring: RingId, seq: u64) -> Self {
        Self { epoch, ring, seq }
    }

    /// The epoch of the store that issued the id.
    pub const fn epoch(self) -> Epoch {
        self.epoch
    }

    /// The ring the event belongs to.
    pub const fn ring(self) -> RingId {
        self.ring
    }

    /// The event's position in its ring, from 0.
    pub const fn seq(self) -> u64 {
        self.seq
    }

    /// The id of event `seq` of the same ring.
    pub(crate) const fn with_seq(self, seq: u64) -> Self {
        Self { seq, ..self }
    }

    /// Formats the id into a stack buffer (no allocation); see the [text form](Self#text-form).
    pub fn encode(&self) -> EventIdBuf {
        let mut buf = EventIdBuf {
            bytes: [0; Self::MAX_LEN],
            len: 0,
        };
        buf.put_hex(self.epoch.0);
        buf.put_separator();
        buf.put_hex(self.ring.0);
        buf.put_separator();
        buf.put_hex(self.seq);
        buf
    }

    /// Parses the [text form](Self#text-form), as found in a `Last-Event-ID` header.
    ///
    /// Only the canonical text is accepted: no uppercase, no leading zeros, no surrounding
    /// whitespace (HTTP libraries strip the optional whitespace around header values).
    ///
    /// # Errors
    ///
    /// [`EventIdError`] naming what is wrong; parsing never panics, whatever the input.
    pub fn parse(text: &str) -> Result<Self, EventIdError> {
        Self::parse_bytes(text.as_bytes())
    }

    /// Parses the [text form](Self#text-form) from bytes: a header value may not be UTF-8
    /// (such a value is rejected with [`EventIdError::InvalidByte`]).
    ///
    /// # Errors
    ///
    /// As for [`parse`](Self::parse).
    pub fn parse_bytes(bytes: &[u8]) -> Result<Self, EventIdError> {
        if bytes.is_empty() {
            return Err(EventIdError::Empty);
        }
        if bytes.len() > Self::MAX_LEN {
            return Err(EventIdError::TooLong { len: bytes.len() });
        }
        let mut fields = bytes.split(|&b| b == SEPARATOR);
        let (Some(epoch), Some(ring), Some(seq), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            let found = 1 + memchr::memchr_iter(SEPARATOR, bytes).count();
            return Err(EventIdError::FieldCount { found });
        };
        Ok(Self {
            epoch: Epoch(parse_hex("epoch", epoch)?),
            ring: RingId(parse_hex("ring", ring)?),
            seq: parse_hex("seq", seq)?,
        })
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.encode().as_str())
    }
}

impl FromStr for EventId {
    type Err = EventIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

const SEPARATOR: u8 = b':';
const HEX: &[u8; 16] = b"0123456789abcdef";

/// One canonical field: lowercase hex digits, no leading zero, at most 16 digits.
fn parse_hex(field: &'static str, digits: &[u8]) -> Result<u64, EventIdError> {
    let mut value = 0u64;
    for &byte in digits {
        let digit = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            _ => return Err(EventIdError::InvalidByte { field, byte }),
        };
        // Cannot lose bits that matter: more than 16 digits is rejected below.
        value = (value << 4) | u64::from(digit);
    }
    match digits {
        [] => Err(EventIdError::EmptyField { field }),
        [b'0', _, ..] => Err(EventIdError::LeadingZero { field }),
        _ if digits.len() > FIELD_MAX_DIGITS => Err(EventIdError::Overflow { field }),
        _ => Ok(value),
    }
}

/// The text form of an [`EventId`], on the stack: [`EventId::encode`] writes it without
/// allocating, and [`sse_id`](Self::sse_id) hands it to the SSE encoder as the `id` field.
///
/// Dereferences to `&str`.
#[derive(Clone, Copy)]
pub struct EventIdBuf {
    bytes: [u8; EventId::MAX_LEN],
    /// INVARIANT: `len <= MAX_LEN`, and `bytes[..len]` holds only hex digits and `:`.
    len: usize,
}

impl EventIdBuf {
    /// The text.
    pub fn as_str(&self) -> &str {
        match std::str::from_utf8(self.as_bytes()) {
            Ok(text) => text,
            // INVARIANT: `encode` writes only ASCII hex digits and `:`.
            Err(_) => unreachable!("event id text is ASCII"),
        }
    }

    /// The text as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The text as an SSE `id` field value, ready for [`sse::EventFields::with_id`] or
    /// [`sse::Encoder::encode_priming`].
    pub fn sse_id(&self) -> sse::Id<'_> {
        match sse::Id::new(self.as_str()) {
            Ok(id) => id,
            // INVARIANT: hex digits and `:` contain no CR, LF or NUL.
            Err(_) => unreachable!("event id text is a valid sse id"),
        }
    }

    fn put_separator(&mut self) {
        self.bytes[self.len] = SEPARATOR;
        self.len += 1;
    }

    fn put_hex(&mut self, value: u64) {
        // Digits needed: one per started nibble, and one for zero.
        let digits = (64 - value.leading_zeros() as usize).div_ceil(4).max(1);
        for i in 0..digits {
            let shift = 4 * (digits - 1 - i);
            self.bytes[self.len + i] = HEX[((value >> shift) & 0xf) as usize];
        }
        self.len += digits;
    }
}

impl Deref for EventIdBuf {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for EventIdBuf {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for EventIdBuf {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for EventIdBuf {}

impl fmt::Debug for EventIdBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for EventIdBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A client-supplied event id (a `Last-Event-ID` value) is not the text of any
/// [`EventId`]: the peer sent an id this server never issued, or garbage.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventIdError {
    /// The id is empty.
    Empty,
    /// The id is longer than [`EventId::MAX_LEN`].
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The id does not have three `:`-separated fields.
    FieldCount {
        /// How many fields it has.
        found: usize,
    },
    /// A field is empty.
    EmptyField {
        /// Which field: `"epoch"`, `"ring"` or `"seq"`.
        field: &'static str,
    },
    /// A field holds a byte that is not a lowercase hex digit.
    InvalidByte {
        /// Which field: `"epoch"`, `"ring"` or `"seq"`.
        field: &'static str,
        /// The offending byte.
        byte: u8,
    },
    /// A field has a leading zero (the text would not be canonical).
    LeadingZero {
        /// Which field: `"epoch"`, `"ring"` or `"seq"`.
        field: &'static str,
    },
    /// A field has more than 16 digits: it does not fit in a `u64`.
    Overflow {
        /// Which field: `"epoch"`, `"ring"` or `"seq"`.
        field: &'static str,
    },
}

impl fmt::Display for EventIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("event id is empty"),
            Self::TooLong { len } => write!(
                f,
                "event id is {len} bytes long; the longest is {} bytes",
                EventId::MAX_LEN
            ),
            Self::FieldCount { found } => write!(
                f,
                "event id has {found} fields; expected 3 (epoch:ring:seq)"
            ),
            Self::EmptyField { field } => write!(f, "event id {field} field is empty"),
            Self::InvalidByte { field, byte } => write!(
                f,
                "event id {field} field contains byte 0x{byte:02x}; expected lowercase hex digits"
            ),
            Self::LeadingZero { field } => {
                write!(f, "event id {field} field has a leading zero")
            }
            Self::Overflow { field } => write!(
                f,
                "event id {field} field has more than {FIELD_MAX_DIGITS} hex digits"
            ),
        }
    }
}

impl std::error::Error for EventIdError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(epoch: u64, ring: u64, seq: u64) -> EventId {
        EventId::new(Epoch::new(epoch), RingId::new(ring), seq)
    }

    #[test]
    fn transport_14_1_text_form_vectors() {
        for (id, text) in [
            (id(0, 0, 0), "0:0:0"),
            (id(0x9c41, 1, 0x2a), "9c41:1:2a"),
            (id(0xf, 0x10, 0xabcdef), "f:10:abcdef"),
            (
                id(u64::MAX, u64::MAX, u64::MAX),
                "ffffffffffffffff:ffffffffffffffff:ffffffffffffffff",
            ),
        ] {
            assert_eq!(id.encode().as_str(), text);
            assert_eq!(id.to_string(), text);
            assert_eq!(EventId::parse(text), Ok(id));
            assert_eq!(text.parse::<EventId>(), Ok(id));
            assert_eq!(EventId::parse_bytes(text.as_bytes()), Ok(id));
            assert_eq!(id.encode().sse_id().as_str(), text);
        }
        assert_eq!(
            id(u64::MAX, u64::MAX, u64::MAX).encode().len(),
            EventId::MAX_LEN
        );
    }

    #[test]
    fn transport_14_1_parse_rejects_non_canonical_and_garbage() {
        use EventIdError::*;
        for (text, error) in [
            (&b""[..], Empty),
            (b"0:0", FieldCount { found: 2 }),
            (b"0:0:0:0", FieldCount { found: 4 }),
            (b"0", FieldCount { found: 1 }),
            (b"0_0_0", FieldCount { found: 1 }),
            (b":0:0", EmptyField { field: "epoch" }),
            (b"0::0", EmptyField { field: "ring" }),
            (b"0:0:", EmptyField { field: "seq" }),
            (
                b"A:0:0",
                InvalidByte {
                    field: "epoch",
                    byte: b'A',
                },
            ),
            (
                b"0:0:1F",
                InvalidByte {
                    field: "seq",
                    byte: b'F',
                },
            ),
            (
                b" 0:0:0",
                InvalidByte {
                    field: "epoch",
                    byte: b' ',
                },
            ),
            (
                b"0:0:0\n",
                InvalidByte {
                    field: "seq",
                    byte: b'\n',
                },
            ),
            (
                b"0:0:\xff",
                InvalidByte {
                    field: "seq",
                    byte: 0xff,
                },
            ),
            (
                b"0:+1:0",
                InvalidByte {
                    field: "ring",
                    byte: b'+',
                },
            ),
            (b"00:0:0", LeadingZero { field: "epoch" }),
            (b"0:01:0", LeadingZero { field: "ring" }),
            (b"0:0:10000000000000000", Overflow { field: "seq" }),
            (
                b"0:0:0x1",
                InvalidByte {
                    field: "seq",
                    byte: b'x',
                },
            ),
        ] {
            assert_eq!(EventId::parse_bytes(text), Err(error), "{text:?}");
        }
        let long = "1".repeat(EventId::MAX_LEN + 1);
        assert_eq!(
            EventId::parse(&long),
            Err(TooLong {
                len: EventId::MAX_LEN + 1
            })
        );
    }

    #[test]
    fn errors_display_lowercase_and_name_the_field() {
        let shown = EventIdError::InvalidByte {
            field: "seq",
            byte: b'G',
        }
        .to_string();
        assert_eq!(
            shown,
            "event id seq field contains byte 0x47; expected lowercase hex digits"
        );
        assert_eq!(
            EventIdError::TooLong { len: 60 }.to_string(),
            "event id is 60 bytes long; the longest is 50 bytes"
        );
    }
}
