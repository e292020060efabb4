//! The key schema (see the [crate docs](crate#key-schema)), stream entry ids, and what
//! Redis answers for a ring, read without trusting it.

use std::time::Duration;

use bytes::Bytes;
use mcpwire::resume::Epoch;
use mcpwire::server::RingKey;
use redis::Value;

/// The field of a frame entry.
pub(crate) const FRAME_FIELD: &str = "f";

/// The field of a ring's end marker.
pub(crate) const END_FIELD: &str = "end";

/// Refreshes a session's record and every ring of it: `KEYS[1]` the record, `KEYS[2]`
/// the set of its ring keys, `ARGV[1]` the time to live in ms. Rings gone meanwhile
/// leave the set, so the set never outgrows the session's live rings.
pub(crate) const TOUCH_SCRIPT: &str = r"
redis.call('PEXPIRE', KEYS[1], ARGV[1])
if redis.call('PEXPIRE', KEYS[2], ARGV[1]) == 1 then
  for _, ring in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    if redis.call('PEXPIRE', ring, ARGV[1]) == 0 then
      redis.call('SREM', KEYS[2], ring)
    end
  end
end
return 0
";

/// Writes a session's record unless the session was deleted: `KEYS[1]` the record,
/// `KEYS[2]` its tombstone, `ARGV[1]` the record, `ARGV[2]` its time to live in ms. A
/// node still holding a copy of a session deleted elsewhere (the notice has not reached
/// it yet) may write its record again; the tombstone keeps the session deleted.
pub(crate) const PUT_SCRIPT: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
";

/// Deletes a session's record, every ring of it, and the set of its rings, and leaves
/// its tombstone: `KEYS[1]` the record, `KEYS[2]` the set, `KEYS[3]` the tombstone,
/// `ARGV[1]` the tombstone's time to live in ms.
pub(crate) const DELETE_SCRIPT: &str = r"
for _, ring in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('DEL', ring)
end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[1])
return redis.call('DEL', KEYS[1], KEYS[2])
";

/// Stores a key for `requestState` unless one is there, and answers the one stored:
/// `KEYS[1]` the key's key, `ARGV[1]` this node's candidate. One script, so that every
/// node starting at once reads the same winner.
pub(crate) const STATE_KEY_SCRIPT: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
";

/// The names of every key and channel, under one prefix.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    /// `{p}:s:{sid}`: the session's record.
    pub(crate) fn record(&self, session: &str) -> String {
        format!("{}:s:{session}", self.prefix)
    }

    /// `{p}:gone:{sid}`: the tombstone of a deleted session.
    pub(crate) fn tombstone(&self, session: &str) -> String {
        format!("{}:gone:{session}", self.prefix)
    }

    /// `{p}:rings:{sid}`: the set of the session's ring keys.
    pub(crate) fn rings(&self, session: &str) -> String {
        format!("{}:rings:{session}", self.prefix)
    }

    /// `{p}:r:{sid}:{epoch_hex}:{ring_hex}`: one ring's stream.
    pub(crate) fn ring(&self, session: &str, ring: RingKey) -> String {
        format!("{}:r:{session}:{ring}", self.prefix)
    }

    /// `{p}:node:{epoch_hex}`: the liveness of the node whose event ids (and rings)
    /// carry `epoch`.
    pub(crate) fn node(&self, epoch: Epoch) -> String {
        format!("{}:node:{:x}", self.prefix, epoch.get())
    }

    /// `{p}:state-key`: the key that seals `requestState` on every node (no expiry).
    pub(crate) fn state_key(&self) -> String {
        format!("{}:state-key", self.prefix)
    }

    /// `{p}:notices`: every node's notices.
    pub(crate) fn notices(&self) -> String {
        format!("{}:notices", self.prefix)
    }

    /// `{p}:w:{sid}:{epoch_hex}:{ring_hex}`: wake-ups of one ring's followers.
    pub(crate) fn wake(&self, session: &str, ring: RingKey) -> String {
        format!("{}:w:{session}:{ring}", self.prefix)
    }
}

/// A stream entry id, `ms-seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct EntryId(pub(crate) u64, pub(crate) u64);

impl EntryId {
    /// Frame `seq`'s entry: `(seq+1)-0`; `None` for the one sequence number a stream
    /// cannot hold (`u64::MAX`).
    pub(crate) fn frame(seq: u64) -> Option<Self> {
        Some(Self(seq.checked_add(1)?, 0))
    }

    /// The end marker of a ring finished before frame `next`: `next-1`, right after
    /// frame `next - 1`'s entry.
    pub(crate) fn end(next: u64) -> Self {
        Self(next, 1)
    }

    /// The first entry a reader owed frame `next` onwards wants: right after frame
    /// `next - 1`'s entry, so that an end marker at `next` is read too.
    pub(crate) fn from_frame(next: u64) -> Self {
        Self(next, 1)
    }

    /// The entry right after this one, to page on from; `None` after the last id.
    pub(crate) fn successor(self) -> Option<Self> {
        match self.1.checked_add(1) {
            Some(seq) => Some(Self(self.0, seq)),
            None => Some(Self(self.0.checked_add(1)?, 0)),
        }
    }

    fn parse(text: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(text).ok()?;
        let (ms, seq) = text.split_once('-')?;
        let number = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        };
        Some(Self(number(ms)?, number(seq)?))
    }
}

impl std::fmt::Display for EntryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.0, self.1)
    }
}

/// What one stream entry of a ring holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Frame `seq`.
    Frame(u64, Bytes),
    /// The ring is finished before frame `next`.
    End(u64),
    /// Something this driver did not write: skipped (a frame it may stand for is a
    /// hole).
    Other,
}

/// One entry as read: its id and what it holds.
pub(crate) type Read = (EntryId, Entry);

/// The reply was not the array of entries `XRANGE` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Malformed;

/// The entries of an `XRANGE` or `XREVRANGE` reply (RESP2: an array of `[id, [field,
/// value, …]]`), in the reply's order.
pub(crate) fn entries(reply: Value) -> Result<Vec<Read>, Malformed> {
    let Value::Array(items) = reply else {
        return Err(Malformed);
    };
    items.into_iter().map(entry).collect()
}

fn entry(item: Value) -> Result<Read, Malformed> {
    let Value::Array(parts) = item else {
        return Err(Malformed);
    };
    let mut parts = parts.into_iter();
    let (Some(Value::BulkString(id)), Some(fields), None) =
        (parts.next(), parts.next(), parts.next())
    else {
        return Err(Malformed);
    };
    let id = EntryId::parse(&id).ok_or(Malformed)?;
    let fields = match fields {
        Value::Array(fields) => fields,
        // A stream entry always has fields; tolerate none.
        Value::Nil => Vec::new(),
        _ => return Err(Malformed),
    };
    let mut fields = fields.into_iter();
    let what = match (fields.next(), fields.next(), fields.next()) {
        (Some(Value::BulkString(name)), Some(Value::BulkString(frame)), None)
            if name == FRAME_FIELD.as_bytes() && id.1 == 0 && id.0 > 0 =>
        {
            Entry::Frame(id.0 - 1, Bytes::from(frame))
        }
        (Some(Value::BulkString(name)), Some(_), None)
            if name == END_FIELD.as_bytes() && id.1 == 1 =>
        {
            Entry::End(id.0)
        }
        _ => Entry::Other,
    };
    Ok((id, what))
}

/// A duration in whole milliseconds for `PX` and `PEXPIRE`: at least 1 (Redis refuses
/// 0), at most about a century (Redis refuses what overflows its clock).
pub(crate) fn millis(d: Duration) -> u64 {
    const CENTURY_MS: u64 = 100 * 365 * 24 * 3_600 * 1_000;
    u64::try_from(d.as_millis())
        .unwrap_or(u64::MAX)
        .clamp(1, CENTURY_MS)
}

/// Consecutive frames: the first's sequence number and the frames, oldest first.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) first: u64,
    pub(crate) frames: Vec<Bytes>,
}

impl Run {
    /// The sequence number after its last frame.
    pub(crate) fn next(&self) -> u64 {
        self.first + self.frames.len() as u64
    }

    /// Whether frame `seq` follows it directly (always, when it is empty).
    pub(crate) fn continues(&self, seq: u64) -> bool {
        self.frames.is_empty() || seq == self.next()
    }
}

/// Splits frames read in order into runs of consecutive sequence numbers: a hole (a
/// lost write) starts a new run.
pub(crate) fn runs(frames: impl IntoIterator<Item = (u64, Bytes)>) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (seq, frame) in frames {
        match runs.last_mut() {
            Some(run) if run.continues(seq) => run.frames.push(frame),
            _ => runs.push(Run {
                first: seq,
                frames: vec![frame],
            }),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpwire::resume::RingId;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn item(id: &str, fields: &[&str]) -> Value {
        Value::Array(vec![
            bulk(id),
            Value::Array(fields.iter().map(|f| bulk(f)).collect()),
        ])
    }

    #[test]
    fn keys_follow_the_documented_schema() {
        let keys = Keys::new("p");
        let ring = RingKey {
            epoch: Epoch::new(0x1_0000_0000_00ab),
            ring: RingId::new(0x1f),
        };
        let sid = "0123456789abcdef0123456789abcdef";
        assert_eq!(keys.record(sid), format!("p:s:{sid}"));
        assert_eq!(keys.rings(sid), format!("p:rings:{sid}"));
        assert_eq!(keys.tombstone(sid), format!("p:gone:{sid}"));
        assert_eq!(keys.ring(sid, ring), format!("p:r:{sid}:10000000000ab:1f"));
        assert_eq!(keys.wake(sid, ring), format!("p:w:{sid}:10000000000ab:1f"));
        assert_eq!(keys.notices(), "p:notices");
        // The epoch as the ring keys (and event ids) write it.
        assert_eq!(keys.node(ring.epoch), "p:node:10000000000ab");
    }

    #[test]
    fn entry_ids_place_the_end_marker_after_the_last_frame() {
        assert_eq!(EntryId::frame(0), Some(EntryId(1, 0)));
        assert_eq!(EntryId::frame(u64::MAX), None);
        // Frames 0..3, finished before 3: the marker sorts after frame 2 (3-0).
        assert!(EntryId::end(3) > EntryId::frame(2).unwrap());
        assert!(EntryId::end(3) < EntryId::frame(3).unwrap());
        // A reader owed frame 3 reads the marker and frame 3 onwards, not frame 2.
        assert!(EntryId::from_frame(3) > EntryId::frame(2).unwrap());
        assert!(EntryId::from_frame(3) <= EntryId::end(3));
        assert_eq!(EntryId(4, 7).successor(), Some(EntryId(4, 8)));
        assert_eq!(EntryId(4, u64::MAX).successor(), Some(EntryId(5, 0)));
        assert_eq!(EntryId(u64::MAX, u64::MAX).successor(), None);
        assert_eq!(EntryId(12, 1).to_string(), "12-1");
    }

    #[test]
    fn entries_are_read_without_trusting_the_reply() {
        let reply = Value::Array(vec![
            item("1-0", &["f", "zero"]),
            item("3-1", &["end", ""]),
            item("4-0", &["x", "y"]),
            item("5-0", &["f", "a", "f", "b"]),
            item("0-0", &["f", "no seq -1"]),
            item("6-1", &["f", "not a frame id"]),
        ]);
        let read = entries(reply).unwrap();
        assert_eq!(
            read,
            vec![
                (EntryId(1, 0), Entry::Frame(0, Bytes::from("zero"))),
                (EntryId(3, 1), Entry::End(3)),
                (EntryId(4, 0), Entry::Other),
                (EntryId(5, 0), Entry::Other),
                (EntryId(0, 0), Entry::Other),
                (EntryId(6, 1), Entry::Other),
            ]
        );
        for bad in [
            Value::Nil,
            Value::Int(3),
            Value::Array(vec![Value::Int(1)]),
            Value::Array(vec![Value::Array(vec![bulk("1-0")])]),
            Value::Array(vec![item("1", &["f", "x"])]),
            Value::Array(vec![item("a-0", &["f", "x"])]),
            Value::Array(vec![item("-1-0", &["f", "x"])]),
            Value::Array(vec![item("99999999999999999999-0", &["f", "x"])]),
            Value::Array(vec![Value::Array(vec![bulk("1-0"), Value::Int(2)])]),
        ] {
            assert_eq!(entries(bad.clone()), Err(Malformed), "{bad:?}");
        }
        assert_eq!(entries(Value::Array(vec![])), Ok(vec![]));
    }

    #[test]
    fn holes_split_runs() {
        let f = |s: u64| (s, Bytes::from(s.to_string()));
        let split = runs([f(3), f(4), f(6), f(7), f(8), f(10)]);
        let shape: Vec<(u64, usize)> = split.iter().map(|r| (r.first, r.frames.len())).collect();
        assert_eq!(shape, [(3, 2), (6, 3), (10, 1)]);
        assert_eq!(split[1].next(), 9);
        assert!(runs([]).is_empty());
    }

    #[test]
    fn ttls_are_whole_positive_milliseconds() {
        assert_eq!(millis(Duration::ZERO), 1);
        assert_eq!(millis(Duration::from_micros(1_500)), 1);
        assert_eq!(millis(Duration::from_secs(90)), 90_000);
        assert!(millis(Duration::MAX) < u64::MAX / 2);
    }
}
