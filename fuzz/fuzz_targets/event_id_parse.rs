//! `event_id_parse`: arbitrary bytes as a `Last-Event-ID` value (TRANSPORT.md §14.1,
//! RESUME-3, RESUME-4).
//!
//! Checks:
//! 1. `EventId::parse_bytes` never panics, and accepts exactly the inputs the
//!    spec-literal rule in `mcpwire_tests::reference::resume` calls canonical.
//! 2. An accepted input is canonical: formatting the id gives the input back exactly,
//!    through `encode`, `Display` and `sse_id`, and parsing that text gives the same id.
//! 3. `parse` on `&str` agrees with `parse_bytes` on UTF-8 input; every error displays.
//! 4. The first 24 bytes, read as the three fields of an id, round-trip: any id
//!    formats to text that parses back to it and fits `EventId::MAX_LEN`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire::resume::{Epoch, EventId, RingId};
use mcpwire_tests::reference::resume::is_canonical_event_id;

fuzz_target!(|input: &[u8]| {
    // 1.
    let parsed = EventId::parse_bytes(input);
    assert_eq!(
        parsed.is_ok(),
        is_canonical_event_id(input),
        "parse_bytes({:?}) = {parsed:?}",
        String::from_utf8_lossy(input)
    );
    // 2.
    match parsed {
        Ok(id) => {
            let text = id.encode();
            assert_eq!(text.as_bytes(), input, "not canonical");
            assert_eq!(id.to_string(), text.as_str());
            assert_eq!(text.sse_id().as_str(), text.as_str());
            assert_eq!(EventId::parse(&text), Ok(id));
        }
        Err(error) => assert!(error.to_string().starts_with("event id ")),
    }
    // 3.
    if let Ok(text) = std::str::from_utf8(input) {
        assert_eq!(EventId::parse(text), parsed);
        assert_eq!(text.parse::<EventId>(), parsed);
    }
    // 4.
    if let Some(fields) = input.get(..24) {
        let field = |i: usize| {
            let mut bytes = [0; 8];
            bytes.copy_from_slice(&fields[8 * i..8 * i + 8]);
            u64::from_le_bytes(bytes)
        };
        let id = EventId::new(Epoch::new(field(0)), RingId::new(field(1)), field(2));
        let text = id.encode();
        assert!(text.len() <= EventId::MAX_LEN);
        assert_eq!(EventId::parse_bytes(text.as_bytes()), Ok(id));
    }
});
