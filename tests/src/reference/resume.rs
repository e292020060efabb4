//! The event id acceptance rule of docs/requirements.md §14.1 as mcpwire chose it, spelled out
//! literally, for the property tests and the `event_id_parse` fuzz target.

/// Whether `text` is the text of an event id: three `:`-separated fields, each `0` or a
/// non-zero lowercase hex digit followed by at most 15 lowercase hex digits (a `u64`
/// without leading zeros).
pub fn is_canonical_event_id(text: &[u8]) -> bool {
    let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    let fields: Vec<&[u8]> = text.split(|&b| b == b':').collect();
    fields.len() == 3
        && fields.iter().all(|field| match field.split_first() {
            Some((b'0', rest)) => rest.is_empty(),
            Some((first, rest)) => hex(first) && rest.len() <= 15 && rest.iter().all(hex),
            None => false,
        })
}
