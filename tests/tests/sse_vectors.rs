//! Table-driven decoder and encoder vectors (docs/requirements.md §1 SSE-PARSE-*, §2 SSE-ENC-*,
//! §15 test vectors, and the web-platform-tests `eventsource/format-*` cases).
//!
//! Every decoder case runs through [`check`]: the spec-literal reference decoder (for the
//! SSE-PARSE-22 cases, its model of the limits) must produce the expected outcome, and mcpwire's decoder must produce it too when the input
//! is pushed whole, one byte at a time (with and without empty chunks in between), split
//! in two at every offset, and fully queued before draining, via both `push(Bytes)` and
//! `push_slice`, pulling with both `poll_item` and `poll_item_ref`.

use std::time::Duration;

use bytes::BytesMut;
use mcpwire::sse::{
    Comment, DecodeError, Decoder, EncodeError, Encoder, EventFields, EventType, Id,
    Item as CoreItem, Limits,
};
use mcpwire_tests::reference::sse::{
    self as reference, Drain, Feed, Item, Item::Retry, Outcome, Pull, escape,
};

fn msg(data: &str) -> Item {
    Item::message(data, "")
}

fn msg_id(data: &str, id: &str) -> Item {
    Item::message(data, id)
}

fn typed(data: &str, event_type: &str) -> Item {
    Item::event(data, event_type, "")
}

fn comment(text: &str) -> Item {
    Item::comment(text)
}

fn line_too_long(limit: usize) -> Item {
    Item::Error(DecodeError::LineTooLong { limit })
}

fn line_skipped(limit: usize) -> Item {
    Item::Error(DecodeError::LineSkipped { limit })
}

fn event_too_large(limit: usize) -> Item {
    Item::Error(DecodeError::EventTooLarge { limit })
}

/// Checks one decoder case every way (see the module doc). `limited` cases are checked
/// against the reference's model of the limits, the others against the literal reference.
fn check(input: &[u8], limits: Limits, expected: &Outcome, limited: bool) {
    let shown = escape(input);
    let reference = if limited {
        reference::decode_limited(input, limits)
    } else {
        let literal = reference::decode(input);
        assert_eq!(
            reference::decode_limited(input, limits),
            literal,
            "the limits model without limits hit"
        );
        literal
    };
    assert_eq!(&reference, expected, "reference decoder, input {shown:?}");
    let mut runs: Vec<(String, Vec<&[u8]>, Feed, Drain)> = Vec::new();
    for feed in [Feed::Bytes, Feed::Slice] {
        runs.push((
            format!("whole, {feed:?}"),
            vec![input],
            feed,
            Drain::EachChunk,
        ));
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    for feed in [Feed::Bytes, Feed::Slice, Feed::Mixed, Feed::Room] {
        runs.push((
            format!("1-byte, {feed:?}"),
            bytes.clone(),
            feed,
            Drain::EachChunk,
        ));
    }
    runs.push((
        "1-byte, queued".into(),
        bytes.clone(),
        Feed::Mixed,
        Drain::AtEnd,
    ));
    let with_empties: Vec<&[u8]> = bytes.iter().flat_map(|b| [&b""[..], b]).collect();
    runs.push((
        "1-byte, empty chunks between".into(),
        with_empties,
        Feed::Mixed,
        Drain::EachChunk,
    ));
    for p in 0..=input.len() {
        let (a, b) = input.split_at(p);
        runs.push((
            format!("split at {p}"),
            vec![a, b],
            Feed::Bytes,
            Drain::EachChunk,
        ));
        runs.push((
            format!("split at {p}, Mixed"),
            vec![a, b],
            Feed::Mixed,
            Drain::EachChunk,
        ));
        runs.push((
            format!("split at {p}, Room"),
            vec![a, b],
            Feed::Room,
            Drain::EachChunk,
        ));
    }
    for (how, chunks, feed, drain) in runs {
        for pull in [Pull::Owned, Pull::Borrowed] {
            let got = reference::run_with(limits, &chunks, feed, drain, pull);
            assert_eq!(
                &got, expected,
                "mcpwire decoder, {how}, {pull:?}, input {shown:?}"
            );
        }
    }
}

/// `Some(e)` if the optional macro argument was given, else `None`.
macro_rules! opt {
    () => {
        None
    };
    ($e:expr) => {
        Some($e)
    };
}

/// One `#[test]` per case:
/// `name: input => [items], last_id: "…", retry: ms, limits: Limits;` where the last
/// three are optional (default: `""`, `None`, and `Limits::default()` with the literal
/// reference decoder; with `limits`, the reference's limits model).
macro_rules! sse_vectors {
    ($(
        $(#[$meta:meta])*
        $name:ident: $input:expr => [$($item:expr),* $(,)?]
            $(, last_id: $id:expr)?
            $(, retry: $retry:expr)?
            $(, limits: $limits:expr)?
        ;
    )*) => {$(
        $(#[$meta])*
        #[test]
        fn $name() {
            let input = $input;
            let expected = Outcome {
                items: vec![$($item),*],
                last_event_id: opt!($($id)?).unwrap_or("").to_owned(),
                retry: opt!($($retry)?),
            };
            let limits: Option<Limits> = opt!($($limits)?);
            let limited = limits.is_some();
            let limits = limits.unwrap_or_default();
            check(AsRef::<[u8]>::as_ref(&input), limits, &expected, limited);
        }
    )*};
}

fn long(prefix: &str, n: usize, suffix: &str) -> Vec<u8> {
    let mut v = prefix.as_bytes().to_vec();
    v.extend(std::iter::repeat_n(b'x', n));
    v.extend_from_slice(suffix.as_bytes());
    v
}

fn small_line(max_line_len: usize) -> Limits {
    Limits::default().with_max_line_len(max_line_len)
}

fn small_event(max_event_len: usize) -> Limits {
    Limits::default().with_max_event_len(max_event_len)
}

// ---------------------------------------------------------------------------------------
// docs/requirements.md §15, in order.
sse_vectors! {
    sse_parse_8_vector_space_after_colon_is_optional: b"data:a\n\ndata: a\n\n" => [msg("a"), msg("a")];
    sse_parse_8_vector_only_one_leading_space_removed: b"data:  a\n\n" => [msg(" a")];
    sse_parse_16_vector_bare_data_lines_and_unterminated_block: b"data\n\ndata\ndata\n\ndata:" => [msg(""), msg("\n")];
    sse_parse_12_vector_id_persists_then_bare_id_resets: b"data: x\nid: 1\n\ndata: y\nid\n\n"
        => [msg_id("x", "1"), msg_id("y", "")];
    sse_parse_15_vector_id_only_block_sets_id_without_event: b"id: 7\n\n" => [], last_id: "7";
    sse_parse_12_vector_id_with_nul_leaves_id_unchanged: b"id: 1\n\nid: a\0b\n\ndata: x\n\n"
        => [msg_id("x", "1")], last_id: "1";
    sse_parse_12_vector_id_with_nul_only: b"id: a\0b\n\ndata: x\n\n" => [msg("x")];
    sse_parse_13_vector_retry_1500: b"retry: 1500\n\n" => [Retry(1500)], retry: 1500;
    sse_parse_13_vector_retry_decimal_point_ignored: b"retry: 1.5\n\n" => [];
    sse_parse_13_vector_retry_sign_ignored: b"retry: -1\n\n" => [];
    sse_parse_13_vector_retry_second_space_ignored: b"retry:  10\n\n" => [];
    sse_parse_3_vector_mixed_line_ends: b"data: a\rdata: b\ndata: c\r\n\r\ndata: d\n\r\n\r"
        => [msg("a\nb\nc"), msg("d")];
    sse_parse_17_vector_event_type_then_default: b"event: foo\ndata: x\n\ndata: y\n\n"
        => [typed("x", "foo"), msg("y")];
    sse_parse_10_vector_uppercase_field_is_unknown: b"DATA: x\n\n" => [];
}

// SSE-PARSE-1: UTF-8 with replacement.
sse_vectors! {
    sse_parse_1_valid_multibyte_utf8: "data: é€😀 ünïcödé\n\n".as_bytes() => [msg("é€😀 ünïcödé")];
    sse_parse_1_invalid_byte_becomes_replacement: b"data: a\xFFb\n\n" => [msg("a\u{FFFD}b")];
    sse_parse_1_truncated_sequence_is_one_replacement: b"data: a\xE2\x82b\n\n" => [msg("a\u{FFFD}b")];
    sse_parse_1_truncated_sequence_before_line_end: b"data: a\xF0\x9F\x98\ndata: b\xE2\n\n" => [msg("a\u{FFFD}\nb\u{FFFD}")];
    sse_parse_1_overlong_encoding_is_two_replacements: b"data: \xC0\x80\n\n" => [msg("\u{FFFD}\u{FFFD}")];
    sse_parse_1_surrogate_is_three_replacements: b"data: \xED\xA0\x80\n\n" => [msg("\u{FFFD}\u{FFFD}\u{FFFD}")];
    sse_parse_1_lone_continuation_bytes: b"data: \x80\xBFx\n\n" => [msg("\u{FFFD}\u{FFFD}x")];
    sse_parse_1_invalid_utf8_in_event_id_and_comment: b":\xFE\nevent: t\xFF\nid: i\xC3\ndata: d\n\n"
        => [comment("\u{FFFD}"), Item::event("d", "t\u{FFFD}", "i\u{FFFD}")], last_id: "i\u{FFFD}";
    sse_parse_1_invalid_utf8_in_field_name_is_unknown_field: b"d\xFFata: x\n\ndata: y\n\n" => [msg("y")];
    sse_parse_1_invalid_utf8_in_multi_line_data: b"data: \xFF\ndata: ok\ndata: \xE2\x82\n\n"
        => [msg("\u{FFFD}\nok\n\u{FFFD}")];
    sse_parse_1_replacement_char_itself_is_kept: "data: \u{FFFD}\n\n".as_bytes() => [msg("\u{FFFD}")];
    sse_parse_1_truncated_sequence_at_eof_is_dropped_with_its_line: b"data: a\n\ndata: \xE2\x82" => [msg("a")];
}

// SSE-PARSE-2: one BOM at stream start.
sse_vectors! {
    sse_parse_2_bom_stripped: b"\xEF\xBB\xBFdata: x\n\n" => [msg("x")];
    sse_parse_2_bom_only_then_blank_line: b"\xEF\xBB\xBF\n" => [];
    sse_parse_2_bom_then_comment: b"\xEF\xBB\xBF:hi\n" => [comment("hi")];
    sse_parse_2_bom_then_crlf_blank_line: b"\xEF\xBB\xBF\r\ndata: x\r\n\r\n" => [msg("x")];
    sse_parse_2_second_bom_is_content: b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n" => [msg("y")];
    sse_parse_2_bom_mid_stream_is_content: b"data: 1\n\n\xEF\xBB\xBFdata: 2\n\ndata: 3\n\n" => [msg("1"), msg("3")];
    sse_parse_2_bom_in_value_is_content: b"data: \xEF\xBB\xBFx\n\n" => [msg("\u{FEFF}x")];
    sse_parse_2_bom_prefix_ef_bb_is_not_a_bom: b"\xEF\xBBdata: x\n\ndata: y\n\n" => [msg("y")];
    sse_parse_2_bom_prefix_ef_is_not_a_bom: b"\xEFdata: x\n\ndata: y\n\n" => [msg("y")];
    sse_parse_2_bom_prefix_then_line_end: b"\xEF\xBB\ndata: y\n\n" => [msg("y")];
    sse_parse_2_bom_prefix_then_blank_line_dispatch: b"\xEF\n\ndata: y\n\n" => [msg("y")];
    sse_parse_2_ef_bb_be_is_not_a_bom: b"\xEF\xBB\xBEdata: x\n\ndata: y\n\n" => [msg("y")];
    sse_parse_2_bom_prefix_at_eof: b"\xEF\xBB" => [];
    sse_parse_2_bom_at_eof: b"\xEF\xBB\xBF" => [];
    sse_parse_2_empty_stream: b"" => [];
}

// SSE-PARSE-3: CRLF, LF, CR, mixed.
sse_vectors! {
    sse_parse_3_crlf: b"data: a\r\ndata: b\r\n\r\n" => [msg("a\nb")];
    sse_parse_3_lone_cr: b"data: a\rdata: b\r\r" => [msg("a\nb")];
    sse_parse_3_lone_lf: b"data: a\ndata: b\n\n" => [msg("a\nb")];
    sse_parse_3_lf_cr_is_two_line_ends: b"data: a\n\rdata: b\n\n" => [msg("a"), msg("b")];
    sse_parse_3_cr_cr_lf_is_line_then_blank: b"data: a\r\r\ndata: b\n\n" => [msg("a"), msg("b")];
    sse_parse_3_cr_at_eof_ends_the_line: b"data: a\n\r" => [msg("a")];
    sse_parse_3_crlf_blank_lines_only: b"\r\n\r\n\n\r\r" => [];
    sse_parse_3_crlf_between_events: b"data: 1\r\n\r\ndata: 2\r\n\r\n" => [msg("1"), msg("2")];
    sse_parse_3_cr_inside_value_ends_line: b"data: a\rb\n\n" => [msg("a")];
    sse_parse_3_line_ends_around_colon: b"data\r:x\r\n\r\n" => [comment("x"), msg("")];
}

// SSE-PARSE-4/5/6/7: state, order, blank line, comments.
sse_vectors! {
    sse_parse_4_initial_id_is_empty: b"data: x\n\n" => [msg_id("x", "")];
    sse_parse_5_items_in_arrival_order: b": c1\ndata: a\n: c2\nretry: 5\ndata: b\n\n: c3\n"
        => [comment(" c1"), comment(" c2"), Retry(5), msg("a\nb"), comment(" c3")], retry: 5;
    sse_parse_6_blank_line_dispatches_each_event: b"data: 1\n\ndata: 2\n\n\n\ndata: 3\n\n" => [msg("1"), msg("2"), msg("3")];
    sse_parse_7_comment_is_ignored: b": ping\n\n" => [comment(" ping")];
    sse_parse_7_empty_comment: b":\n" => [comment("")];
    sse_parse_7_comment_with_colons_and_field_text: b":data: x\n\n" => [comment("data: x")];
    sse_parse_7_comment_does_not_end_event: b"data: a\n:\ndata: b\n\n" => [comment(""), msg("a\nb")];
    sse_parse_7_comment_with_nul: b":\0\n" => [comment("\0")];
}

// SSE-PARSE-8..13: field parsing.
sse_vectors! {
    sse_parse_8_later_colons_belong_to_value: b"data:a:b: c\n\n" => [msg("a:b: c")];
    sse_parse_8_tab_is_not_a_space: b"data:\tx\n\n" => [msg("\tx")];
    sse_parse_8_event_second_space_kept: b"event:  t\ndata: x\n\n" => [typed("x", " t")];
    sse_parse_8_id_second_space_kept: b"id:  1\ndata: x\n\n" => [msg_id("x", " 1")], last_id: " 1";
    sse_parse_8_value_only_a_space: b"data: \n\n" => [msg("")];
    sse_parse_9_bare_data_appends_empty_line: b"data\ndata: x\n\n" => [msg("\nx")];
    sse_parse_9_bare_event_resets_type: b"event: a\nevent\ndata: x\n\n" => [msg("x")];
    sse_parse_9_bare_retry_is_ignored: b"retry\n\n" => [];
    sse_parse_10_field_names_are_case_sensitive: b"Data: x\nID: 1\nEvent: t\nRETRY: 5\n\n" => [];
    sse_parse_10_leading_space_makes_unknown_field: b" data: x\n\n" => [];
    sse_parse_10_trailing_space_makes_unknown_field: b"data : x\n\n" => [];
    sse_parse_10_nul_in_name_makes_unknown_field: b"data\0: x\n\n" => [];
    sse_parse_11_last_event_field_wins: b"event: a\nevent: b\ndata: x\n\n" => [typed("x", "b")];
    sse_parse_11_data_lines_joined_with_lf: b"data: a\ndata: b\ndata: c\n\n" => [msg("a\nb\nc")];
    sse_parse_11_nul_in_data_is_content: b"data: a\0b\n\n" => [msg("a\0b")];
    sse_parse_11_nul_in_event_type_is_content: b"event: a\0b\ndata: x\n\n" => [typed("x", "a\0b")];
    sse_parse_12_id_persists_across_events: b"id: 1\ndata: a\n\ndata: b\n\n" => [msg_id("a", "1"), msg_id("b", "1")], last_id: "1";
    sse_parse_12_empty_id_resets: b"id: 1\ndata: a\n\nid:\ndata: b\n\n" => [msg_id("a", "1"), msg_id("b", "")];
    sse_parse_12_id_after_data_in_same_block_applies: b"data: a\nid: 2\n\n" => [msg_id("a", "2")], last_id: "2";
    sse_parse_12_last_id_field_in_block_wins: b"id: 1\nid: 2\ndata: a\n\n" => [msg_id("a", "2")], last_id: "2";
    sse_parse_12_nul_anywhere_in_id_ignores_it: b"id: 1\n\nid: \0\n\nid: x\0\n\n" => [], last_id: "1";
    sse_parse_12_id_with_colon: b"id: s:1\ndata: a\n\n" => [msg_id("a", "s:1")], last_id: "s:1";
    sse_parse_13_retry_without_space: b"retry:1500\n\n" => [Retry(1500)], retry: 1500;
    sse_parse_13_retry_leading_zeros: b"retry: 01500\n\n" => [Retry(1500)], retry: 1500;
    sse_parse_13_retry_zero: b"retry: 0\n\n" => [Retry(0)], retry: 0;
    sse_parse_13_retry_overflow_saturates: b"retry: 99999999999999999999999\n\n" => [Retry(u64::MAX)], retry: u64::MAX;
    sse_parse_13_retry_u64_max: b"retry: 18446744073709551615\n\n" => [Retry(u64::MAX)], retry: u64::MAX;
    sse_parse_13_retry_empty_value_ignored: b"retry: 5\nretry:\nretry: \n\n" => [Retry(5)], retry: 5;
    sse_parse_13_retry_trailing_space_ignored: b"retry: 10 \n\n" => [];
    sse_parse_13_retry_exponent_ignored: b"retry: 1e3\n\n" => [];
    sse_parse_13_retry_plus_sign_ignored: b"retry: +1\n\n" => [];
    sse_parse_13_retry_non_ascii_digits_ignored: "retry: ١٢\n\nretry: １\n\n".as_bytes() => [];
    sse_parse_13_retry_later_value_replaces: b"retry: 1\nretry: 2\n\n" => [Retry(1), Retry(2)], retry: 2;
    sse_parse_13_bogus_retry_keeps_previous: b"retry: 7\nretry: x\n\n" => [Retry(7)], retry: 7;
    sse_parse_13_unknown_fields_ignored: b"foo: bar\nfoo\nfoobar:\ndata: x\n\n" => [msg("x")];
    sse_parse_13_retry_applies_without_blank_line: b"retry: 9\ndata: x\n" => [Retry(9)], retry: 9;
}

// SSE-PARSE-14..19: dispatch and end of stream.
sse_vectors! {
    sse_parse_14_id_copied_even_without_event: b"data: a\n\nid: 5\n\n" => [msg("a")], last_id: "5";
    sse_parse_14_id_buffer_not_cleared_by_dispatch: b"id: 1\n\ndata: a\n\n" => [msg_id("a", "1")], last_id: "1";
    sse_parse_15_event_only_block_dispatches_nothing_and_clears_type: b"event: t\n\ndata: x\n\n" => [msg("x")];
    sse_parse_15_retry_only_block: b"retry: 5\n\n" => [Retry(5)], retry: 5;
    sse_parse_16_empty_data_dispatches_empty_event: b"data:\n\n" => [msg("")];
    sse_parse_16_only_one_final_lf_removed: b"data: a\ndata:\n\n" => [msg("a\n")];
    sse_parse_16_two_bare_data_lines: b"data\ndata\n\n" => [msg("\n")];
    sse_parse_17_default_type_is_message: b"data: x\n\n" => [typed("x", "message")];
    sse_parse_17_empty_event_value_means_message: b"event:\ndata: x\n\nevent: \ndata: y\n\n" => [msg("x"), msg("y")];
    sse_parse_17_event_carries_type_and_id: b"id: 3\nevent: e\ndata: x\n\n" => [Item::event("x", "e", "3")], last_id: "3";
    sse_parse_18_type_cleared_after_dispatch: b"event: a\ndata: x\n\ndata: y\n\n" => [typed("x", "a"), msg("y")];
    sse_parse_18_data_cleared_after_dispatch: b"data: x\n\n\ndata: y\n\n" => [msg("x"), msg("y")];
    sse_parse_19_unterminated_event_dropped: b"data: a\n\ndata: b\n" => [msg("a")];
    sse_parse_19_unterminated_line_dropped: b"data: a\n\ndata: b" => [msg("a")];
    sse_parse_19_id_in_unterminated_block_not_applied: b"id: 1\ndata: a\n\nid: 2\ndata: b\n" => [msg_id("a", "1")], last_id: "1";
    sse_parse_19_id_only_unterminated_block: b"id: 2\n" => [];
    sse_parse_19_retry_in_unterminated_block_applies: b"data: a\n\nretry: 3000\ndata: b\n" => [msg("a"), Retry(3000)], retry: 3000;
    sse_parse_19_retry_in_unterminated_line_not_applied: b"retry: 3000" => [];
    sse_parse_19_comment_in_unterminated_block_reported: b"data: b\n: c\n" => [comment(" c")];
}

// SSE-ENC-9 / docs/requirements.md §14.5 on the decode side: the priming event.
sse_vectors! {
    sse_parse_16_priming_event_dispatches_empty_data: b"id: s:0\ndata:\n\n" => [msg_id("", "s:0")], last_id: "s:0";
    sse_parse_16_priming_event_with_retry: b"id: s:0\nretry: 500\ndata:\n\ndata: {}\n\n"
        => [Retry(500), msg_id("", "s:0"), msg_id("{}", "s:0")], last_id: "s:0", retry: 500;
}

// web-platform-tests eventsource/format-*.htm, reconstructed (format-mime-* is about the
// Content-Type, which the decoder never sees).
sse_vectors! {
    sse_parse_2_wpt_format_bom: b"\xEF\xBB\xBFdata:1\n\n\xEF\xBB\xBFdata:2\n\ndata:3\n\n" => [msg("1"), msg("3")];
    sse_parse_2_wpt_format_bom_2: b"\xEF\xBB\xBF\xEF\xBB\xBFdata:1\n\ndata:2\n\ndata:3\n\n" => [msg("2"), msg("3")];
    sse_parse_7_wpt_format_comments: long(":\0\n:\r\ndata:1\r:", 2048, "\rdata:2\n:data:fail\r:").iter()
        .chain(long("", 2048, "\ndata:3\n\n").iter()).copied().collect::<Vec<u8>>()
        => [comment("\0"), comment(""), comment(&"x".repeat(2048)), comment("data:fail"), comment(&"x".repeat(2048)), msg("1\n2\n3")];
    sse_parse_19_wpt_format_data_before_final_empty_line: b"retry:1000\ndata:test1\n\nid:test\ndata:test2" => [Retry(1000), msg("test1")], retry: 1000;
    sse_parse_11_wpt_format_field_data: b"data:\n\ndata\ndata\n\ndata:test\n\n" => [msg(""), msg("\n"), msg("test")];
    sse_parse_11_wpt_format_field_event: b"event:test\ndata:x\n\ndata:x\n\n" => [typed("x", "test"), msg("x")];
    sse_parse_17_wpt_format_field_event_empty: b"event: \ndata:data\n\n" => [msg("data")];
    sse_parse_12_wpt_format_field_id: b"id: 1\ndata: 1\n\nid: 2\ndata: 2\n\ndata: 3\n\n"
        => [msg_id("1", "1"), msg_id("2", "2"), msg_id("3", "2")], last_id: "2";
    sse_parse_12_wpt_format_field_id_2: b"id:1\r\ndata:1\r\n\r\nid:\r\ndata:2\r\n\r\n" => [msg_id("1", "1"), msg_id("2", "")];
    sse_parse_12_wpt_format_field_id_null: b"id: 1\n\nid: 2\0\ndata: x\n\nid: 3\x00x\n\n" => [msg_id("x", "1")], last_id: "1";
    sse_parse_8_wpt_format_field_parsing:
        b"data:\0\ndata:  2\rData:1\ndata\0:2\ndata:1\r\0data:4\nda-ta:3\rdata_5\ndata:3\rdata:\r\n data:32\ndata:4\n\n"
        => [msg("\0\n 2\n1\n3\n\n4")];
    sse_parse_13_wpt_format_field_retry: b"retry:03000\ndata:x\n\n" => [Retry(3000), msg("x")], retry: 3000;
    sse_parse_13_wpt_format_field_retry_bogus: b"retry:3000\nretry:1000x\ndata:x\n\n" => [Retry(3000), msg("x")], retry: 3000;
    sse_parse_13_wpt_format_field_retry_empty: b"retry\ndata:test\n\n" => [msg("test")];
    sse_parse_13_wpt_format_field_unknown: b"data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test\n\n"
        => [comment("thisisacommentyay"), msg("test\n\ntest")];
    sse_parse_8_wpt_format_leading_space: b"data:\ttest\rdata: \ndata:test\n\n" => [msg("\ttest\n\ntest")];
    sse_parse_3_wpt_format_newlines: b"data:test\r\ndata\ndata:test\r\n\r\n" => [msg("test\n\ntest")];
    sse_parse_11_wpt_format_null_character: b"data:\0\n\n\n\n" => [msg("\0")];
    sse_parse_1_wpt_format_utf_8: "data:ok…\n\n".as_bytes() => [msg("ok…")];
    sse_parse_1_wpt_format_invalid_utf_8: b"data:\xC3\x28\xA0\xA1\xE2\x28\xA1\n\n" => [msg("\u{FFFD}(\u{FFFD}\u{FFFD}\u{FFFD}(\u{FFFD}")];
}

// SSE-PARSE-22: limits. The offending event is reported once and discarded up to its
// blank line; earlier fields of that event stay in effect; decoding continues. A too-long
// comment or ignored field costs only itself.
sse_vectors! {
    sse_parse_22_line_at_limit_is_accepted: b"data: 12\n\n" => [msg("12")], limits: small_line(8);
    sse_parse_22_line_too_long_reported_once_then_next_event: b"data: 123456789\n\ndata: ok\n\n"
        => [line_too_long(8), msg("ok")], limits: small_line(8);
    sse_parse_22_line_too_long_discards_whole_event: b"data: a\ndata: 123456789\ndata: b\n\ndata: ok\n\n"
        => [line_too_long(8), msg("ok")], limits: small_line(8);
    sse_parse_22_two_long_lines_in_one_event_one_error: b"data: 123456789\ndata: 123456789\n\ndata: ok\n\n"
        => [line_too_long(8), msg("ok")], limits: small_line(8);
    sse_parse_22_two_long_events_two_errors: b"data: 123456789\n\ndata: ok\n\ndata: 123456789\n\ndata:ok2\n\n"
        => [line_too_long(8), msg("ok"), line_too_long(8), msg("ok2")], limits: small_line(8);
    sse_parse_22_long_comment_costs_only_itself: long(":", 20, "\n\ndata: ok\n\n")
        => [line_skipped(8), msg("ok")], limits: small_line(8);
    sse_parse_22_long_comment_inside_an_event_keeps_the_event:
        [&b"id: 7\ndata: a\n"[..], &long(":", 20, "\ndata: b\n\ndata: ok\n\n")].concat()
        => [line_skipped(8), msg_id("a\nb", "7"), msg_id("ok", "7")], last_id: "7", limits: small_line(8);
    sse_parse_22_id_longer_than_line_limit_after_replacement: b"id: \xFF\xFF\xFF\n\ndata: a\n\n"
        => [line_too_long(8), msg("a")], limits: small_line(8);
    sse_parse_22_event_type_longer_than_line_limit_after_replacement: b"event:\xFF\xFF\xFF\xFF\ndata: a\n\ndata: b\n\n"
        => [line_too_long(10), msg("b")], limits: small_line(10);
    sse_parse_22_long_ignored_field_costs_only_itself: long("foo:", 20, "\n\ndata: ok\n\n")
        => [line_skipped(8), msg("ok")], limits: small_line(8);
    sse_parse_22_long_nameless_line_costs_only_itself: b"data: a\nxxxxxxxxxxxxxxxxxxxx\ndata: b\n\n"
        => [line_skipped(8), msg("a\nb")], limits: small_line(8);
    sse_parse_22_long_name_that_only_starts_like_a_field_costs_only_itself: b"data: a\nretry1234567\ndata: b\n\ndata: ok\n\n"
        => [line_skipped(8), msg("a\nb"), msg("ok")], limits: small_line(8);
    sse_parse_22_tiny_limit_judges_by_the_bytes_it_has_seen: b"retrydata\n\ndata: x\n\n"
        => [line_too_long(1), line_too_long(1)], limits: small_line(1);
    sse_parse_22_earlier_id_and_retry_stay_in_effect: b"id: 1\nretry: 5\ndata: 123456789\n\ndata: ok\n\n"
        => [Retry(5), line_too_long(8), msg_id("ok", "1")], last_id: "1", retry: 5, limits: small_line(8);
    sse_parse_22_fields_after_error_are_discarded: b"data: 123456789\nid: 2\nretry: 6\n: c\nevent: t\n\ndata: ok\n\n"
        => [line_too_long(8), msg("ok")], limits: small_line(8);
    sse_parse_22_long_line_with_crlf_and_cr: b"data: 123456789\r\ndata: x\r\r\ndata: ok\r\r"
        => [line_too_long(8), msg("ok")], limits: small_line(8);
    sse_parse_22_long_line_at_eof_reported_once: b"data: ok\n\ndata: 123456789"
        => [msg("ok"), line_too_long(8)], limits: small_line(8);
    sse_parse_22_long_line_followed_by_eof_in_discard: b"data: 123456789\ndata: x\n"
        => [line_too_long(8)], limits: small_line(8);
    sse_parse_22_bom_prefix_at_eof_is_not_a_long_line: b"\xEF\xBB" => [], limits: small_line(1);
    sse_parse_22_bom_prefix_line_counts_toward_limit: b"\xEF\xBB\n\xEF\xBB\n" => [line_skipped(1), line_skipped(1)], limits: small_line(1);
    sse_parse_22_long_line_after_bom: b"\xEF\xBB\xBFdata: 12\n\ndata: 123\n\n"
        => [msg("12"), line_too_long(8)], limits: small_line(8);
    sse_parse_22_event_at_limit_is_accepted: b"data: 1234\ndata: 567\n\n" => [msg("1234\n567")], limits: small_event(8);
    sse_parse_22_event_too_large_multi_line: b"data: 12345\ndata: 678\n\ndata: ok\n\n"
        => [event_too_large(8), msg("ok")], limits: small_event(8);
    sse_parse_22_event_too_large_single_line: b"data: 123456789\n\ndata: ok\n\n"
        => [event_too_large(8), msg("ok")], limits: small_event(8);
    sse_parse_22_event_too_large_counts_replacement_chars: b"data: \xFF\xFF\xFF\n\ndata: \xFF\xFF\n\n"
        => [event_too_large(8), msg("\u{FFFD}\u{FFFD}")], limits: small_event(8);
    sse_parse_22_event_too_large_discards_rest_of_event: b"data: 12345\ndata: 6789\ndata: x\nid: 9\n\ndata: ok\n\n"
        => [event_too_large(8), msg("ok")], limits: small_event(8);
    sse_parse_22_event_too_large_many_empty_lines: b"data\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\n\ndata: ok\n\n"
        => [event_too_large(8), msg("ok")], limits: small_event(8);
    sse_parse_22_both_limits: b"data: 1234\ndata: 567\ndata: 123456789abc\n\ndata: ok\n\n"
        => [line_too_long(10), msg("ok")], limits: Limits::default().with_max_line_len(10).with_max_event_len(8);
    sse_parse_22_long_line_spans_many_chunks_small: long("data: ", 100, "\r\n\r\ndata: ok\r\n\r\n")
        => [line_too_long(16), msg("ok")], limits: small_line(16);
}

/// SSE-PARSE-22 at a realistic size: a 1 MiB line, 64 KiB limit, 1000-byte chunks (so
/// the line spans ~1000 chunks and chunk ends fall inside CRLFs).
#[test]
fn sse_parse_22_long_line_spans_many_chunks() {
    let limit = 64 << 10;
    let mut input = long("id: 1\ndata: ", 1 << 20, "\r");
    input.extend_from_slice(b"\ndata: more\r\n\r\n: after\r\ndata: ok\r\n\r\n");
    let expected = Outcome {
        items: vec![line_too_long(limit), comment(" after"), msg_id("ok", "1")],
        last_event_id: "1".into(),
        retry: None,
    };
    for size in [1000, 4096, 1 << 16, (1 << 16) + 1, input.len()] {
        for feed in [Feed::Bytes, Feed::Slice, Feed::Room] {
            let chunks: Vec<&[u8]> = input.chunks(size).collect();
            let got = reference::run(small_line(limit), &chunks, feed, Drain::EachChunk);
            assert_eq!(got, expected, "chunk size {size}, {feed:?}");
        }
    }
}

/// SSE-PARSE-22: many data lines, each within the line limit, over the event limit.
#[test]
fn sse_parse_22_event_too_large_spans_many_chunks() {
    let limit = 64 << 10;
    let mut input = Vec::new();
    for _ in 0..1000 {
        input.extend_from_slice(&long("data: ", 200, "\n"));
    }
    input.extend_from_slice(b"\ndata: ok\n\n");
    let expected = Outcome {
        items: vec![event_too_large(limit), msg("ok")],
        last_event_id: String::new(),
        retry: None,
    };
    for size in [1, 999, 4096, input.len()] {
        let chunks: Vec<&[u8]> = input.chunks(size).collect();
        let got = reference::run(small_event(limit), &chunks, Feed::Mixed, Drain::EachChunk);
        assert_eq!(got, expected, "chunk size {size}");
    }
}

// ---------------------------------------------------------------------------------------
// Explicit chunk boundaries named in docs/requirements.md §15 and the brief (the `check` runs above
// already cover every two-chunk split; these pin the exact chunkings).

fn run_chunks(chunks: &[&[u8]]) -> Outcome {
    reference::run(Limits::default(), chunks, Feed::Bytes, Drain::EachChunk)
}

#[test]
fn sse_parse_3_cr_at_chunk_end_lf_at_next_start_is_one_line_end() {
    let got = run_chunks(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
    assert_eq!(got.items, [msg("a\nb")]);
    // If the LF were a second line end, "a" would be dispatched alone.
    let got = run_chunks(&[b"data: a\r", b"\n", b"data: b\r", b"\r\n"]);
    assert_eq!(got.items, [msg("a\nb")]);
}

#[test]
fn sse_parse_3_cr_then_empty_chunks_then_lf() {
    let got = run_chunks(&[b"data: a\r", b"", b"", b"\n", b"\n"]);
    assert_eq!(got.items, [msg("a")]);
}

#[test]
fn sse_parse_3_lone_cr_at_chunk_end_dispatches_before_next_chunk() {
    let mut dec = Decoder::new(Limits::default());
    dec.push_slice(b"data: a\r\r").unwrap();
    // The blank line is complete at the second CR: no need to wait for the next byte.
    let ev = reference::next_event(&mut dec)
        .unwrap()
        .expect("dispatched at the CR");
    assert_eq!(ev.data(), "a");
    dec.push_slice(b"\ndata: b\n\n").unwrap();
    assert_eq!(
        reference::next_event(&mut dec).unwrap().unwrap().data(),
        "b"
    );
}

#[test]
fn sse_parse_2_bom_split_across_chunks() {
    let got = run_chunks(&[b"\xEF", b"\xBB\xBF", b"data: x\n\n"]);
    assert_eq!(got.items, [msg("x")]);
    let got = run_chunks(&[b"\xEF\xBB", b"\xBF", b"data: x\n\n"]);
    assert_eq!(got.items, [msg("x")]);
    let got = run_chunks(&[
        b"\xEF",
        b"",
        b"\xBB",
        b"\xBF",
        b"\xEF\xBB\xBF",
        b"data: x\n\ndata: y\n\n",
    ]);
    assert_eq!(got.items, [msg("y")], "only the first BOM is stripped");
}

#[test]
fn sse_parse_2_bom_prefix_split_that_is_not_a_bom() {
    let got = run_chunks(&[b"\xEF", b"\xBB", b"data: x\n\ndata: y\n\n"]);
    assert_eq!(got.items, [msg("y")]);
    let got = run_chunks(&[b"\xEF", b"\xBB", b"\n", b"data: y\n\n"]);
    assert_eq!(got.items, [msg("y")]);
    let got = run_chunks(&[b"\xEF", b":x\n"]);
    assert!(
        got.items.is_empty(),
        "EF then ':' is an unknown field named U+FFFD"
    );
}

#[test]
fn sse_parse_1_multibyte_split_across_chunks() {
    let input = "data: é€😀\n\n".as_bytes();
    for a in 0..input.len() {
        for b in a..input.len() {
            let got = run_chunks(&[&input[..a], &input[a..b], &input[b..]]);
            assert_eq!(got.items, [msg("é€😀")], "split at {a} and {b}");
        }
    }
}

#[test]
fn sse_parse_14_last_event_id_is_level_triggered_mid_stream() {
    let mut dec = Decoder::new(Limits::default());
    dec.push_slice(b"id: 1\n\nid: 2\ndata: x\n").unwrap();
    assert_eq!(dec.poll_item(), Ok(None));
    assert_eq!(dec.last_event_id(), "1", "id 2 waits for its blank line");
    dec.push_slice(b"\n").unwrap();
    assert!(matches!(dec.poll_item(), Ok(Some(CoreItem::Event(ev))) if ev.id() == "2"));
    assert_eq!(dec.last_event_id(), "2");
    dec.finish();
    assert_eq!(dec.poll_item(), Ok(None));
}

#[test]
fn sse_parse_19_finish_drops_pending_id_and_data() {
    let mut dec = Decoder::new(Limits::default());
    dec.push_slice(b"id: 1\n\nid: 2\ndata: x\n").unwrap();
    assert_eq!(dec.poll_item(), Ok(None));
    dec.finish();
    assert_eq!(dec.poll_item(), Ok(None));
    assert_eq!(dec.last_event_id(), "1");
    // The pending line, data and id buffer are all gone.
    assert_eq!(dec.buffered_len(), 0);
}

#[test]
fn sse_parse_22_error_display_names_the_limit() {
    let e = DecodeError::LineTooLong { limit: 8 };
    assert!(e.to_string().contains("max_line_len (8 bytes)"), "{e}");
    let e = DecodeError::EventTooLarge { limit: 9 };
    assert!(e.to_string().contains("max_event_len (9 bytes)"), "{e}");
}

// ---------------------------------------------------------------------------------------
// SSE-ENC: the encoder's output, decoded by both decoders.

/// Encodes `frames` and checks `encoded_len`; returns the stream bytes.
fn encode_all(frames: &[(EventFields<'_>, &str)]) -> Vec<u8> {
    let enc = Encoder::new();
    let mut buf = BytesMut::new();
    for (fields, data) in frames {
        let before = buf.len();
        enc.encode_event(fields, data, &mut buf);
        assert_eq!(
            buf.len() - before,
            enc.encoded_len(fields, data),
            "encoded_len of {fields:?} {data:?}"
        );
    }
    buf.to_vec()
}

/// Decodes an encoder's output with the reference decoder and every chunking of mcpwire's.
fn decode_encoded(bytes: &[u8], expected: &Outcome) {
    check(bytes, Limits::default(), expected, false);
}

#[test]
fn sse_enc_1_utf8_only_and_no_bom() {
    let bytes = encode_all(&[(EventFields::new(), "\u{FEFF}é€😀")]);
    assert!(std::str::from_utf8(&bytes).is_ok());
    assert!(bytes.starts_with(b"data: "), "no BOM is written");
    // The data's own leading U+FEFF is not at stream start, so it survives.
    decode_encoded(
        &bytes,
        &Outcome {
            items: vec![msg("\u{FEFF}é€😀")],
            ..Outcome::default()
        },
    );
}

#[test]
fn sse_enc_2_data_split_on_every_line_end() {
    let bytes = encode_all(&[(EventFields::new(), "a\r\nb\rc\nd\r\r\n\n")]);
    assert_eq!(
        bytes,
        b"data: a\ndata: b\ndata: c\ndata: d\ndata:\ndata:\ndata:\n\n"
    );
    decode_encoded(
        &bytes,
        &Outcome {
            items: vec![msg("a\nb\nc\nd\n\n\n")],
            ..Outcome::default()
        },
    );
}

#[test]
fn sse_enc_2_multiline_json() {
    let json = "{\r\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1\r}";
    let bytes = encode_all(&[(EventFields::new(), json)]);
    decode_encoded(
        &bytes,
        &Outcome {
            items: vec![msg("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1\n}")],
            ..Outcome::default()
        },
    );
}

#[test]
fn sse_enc_3_values_starting_with_space_survive() {
    let frame = (
        EventFields::new()
            .with_id(Id::new(" id").unwrap())
            .with_event(EventType::new(" type").unwrap()),
        "  two spaces",
    );
    let bytes = encode_all(&[frame]);
    assert_eq!(bytes, b"event:  type\nid:  id\ndata:   two spaces\n\n");
    decode_encoded(
        &bytes,
        &Outcome {
            items: vec![Item::event("  two spaces", " type", " id")],
            last_event_id: " id".into(),
            retry: None,
        },
    );
}

#[test]
fn sse_enc_4_id_event_and_comment_reject_line_ends_and_id_rejects_nul() {
    let invalid = |field, byte| Some(EncodeError::InvalidField { field, byte });
    assert_eq!(Id::new("1\ndata: evil").err(), invalid("id", b'\n'));
    assert_eq!(Id::new("1\revil").err(), invalid("id", b'\r'));
    assert_eq!(Id::new("a\0b").err(), invalid("id", 0));
    assert_eq!(EventType::new("a\nb").err(), invalid("event", b'\n'));
    assert_eq!(EventType::new("a\rb").err(), invalid("event", b'\r'));
    assert_eq!(Comment::new("a\nb").err(), invalid("comment", b'\n'));
    assert_eq!(Comment::new("a\rb").err(), invalid("comment", b'\r'));
    assert!(Id::new("").is_ok() && Id::new("s:1 é").is_ok());
    // NUL is legal (and round-trips) in an event type and in data.
    let frame = (
        EventFields::new().with_event(EventType::new("t\0").unwrap()),
        "x\0y",
    );
    decode_encoded(
        &encode_all(&[frame]),
        &Outcome {
            items: vec![typed("x\0y", "t\0")],
            ..Outcome::default()
        },
    );
}

#[test]
fn sse_enc_5_retry_is_ascii_digits_in_milliseconds() {
    let enc = Encoder::new();
    let mut buf = BytesMut::new();
    enc.encode_retry(Duration::from_millis(1500), &mut buf);
    enc.encode_retry(Duration::from_micros(2999), &mut buf);
    enc.encode_retry(Duration::MAX, &mut buf);
    let frame = (EventFields::new().with_retry(Duration::ZERO), "x");
    enc.encode_event(&frame.0, frame.1, &mut buf);
    decode_encoded(
        &buf,
        &Outcome {
            items: vec![Retry(1500), Retry(2), Retry(u64::MAX), Retry(0), msg("x")],
            retry: Some(0),
            ..Outcome::default()
        },
    );
}

#[test]
fn sse_enc_6_event_not_delivered_before_its_blank_line() {
    let bytes = encode_all(&[(EventFields::new().with_id(Id::new("1").unwrap()), "a\nb")]);
    assert!(bytes.ends_with(b"\n\n"));
    let mut dec = Decoder::new(Limits::default());
    dec.push_slice(&bytes[..bytes.len() - 1]).unwrap();
    assert_eq!(dec.poll_item(), Ok(None));
    assert_eq!(dec.last_event_id(), "");
    dec.push_slice(&bytes[bytes.len() - 1..]).unwrap();
    let ev = reference::next_event(&mut dec).unwrap().unwrap();
    assert_eq!((ev.data(), ev.id()), ("a\nb", "1"));
}

#[test]
fn sse_enc_6_lowercase_field_names() {
    let frame = (
        EventFields::new()
            .with_id(Id::new("i").unwrap())
            .with_event(EventType::new("e").unwrap())
            .with_retry(Duration::from_millis(7)),
        "d",
    );
    assert_eq!(
        encode_all(&[frame]),
        b"event: e\nid: i\nretry: 7\ndata: d\n\n"
    );
}

#[test]
fn sse_enc_7_comment_is_a_keep_alive_not_an_event() {
    let enc = Encoder::new();
    let mut buf = BytesMut::new();
    enc.encode_comment(Comment::new("keep-alive").unwrap(), &mut buf);
    enc.encode_comment(Comment::new("").unwrap(), &mut buf);
    enc.encode_comment(Comment::new(" data: x").unwrap(), &mut buf);
    assert_eq!(&buf[..], b":keep-alive\n\n:\n\n: data: x\n\n");
    decode_encoded(
        &buf,
        &Outcome {
            items: vec![comment("keep-alive"), comment(""), comment(" data: x")],
            ..Outcome::default()
        },
    );
}

#[test]
fn sse_enc_8_message_type() {
    let bytes = encode_all(&[
        (EventFields::new().with_event(EventType::MESSAGE), "{}"),
        (
            EventFields::new().with_event(EventType::ENDPOINT),
            "/mcp?sessionId=1",
        ),
        (EventFields::new(), "[]"),
    ]);
    decode_encoded(
        &bytes,
        &Outcome {
            items: vec![
                typed("{}", "message"),
                typed("/mcp?sessionId=1", "endpoint"),
                msg("[]"),
            ],
            ..Outcome::default()
        },
    );
}

#[test]
fn sse_enc_9_priming_event_sets_last_event_id() {
    let enc = Encoder::new();
    let mut buf = BytesMut::new();
    enc.encode_priming(Id::new("s:0").unwrap(), None, &mut buf);
    enc.encode_event(&EventFields::new(), "{}", &mut buf);
    enc.encode_priming(
        Id::new("s:1").unwrap(),
        Some(Duration::from_millis(250)),
        &mut buf,
    );
    assert_eq!(
        &buf[..],
        b"id: s:0\ndata:\n\ndata: {}\n\nid: s:1\nretry: 250\ndata:\n\n"
    );
    decode_encoded(
        &buf,
        &Outcome {
            items: vec![
                msg_id("", "s:0"),
                msg_id("{}", "s:0"),
                Retry(250),
                msg_id("", "s:1"),
            ],
            last_event_id: "s:1".into(),
            retry: Some(250),
        },
    );
}

#[test]
fn sse_enc_encoded_len_matches_for_edge_frames() {
    let retry_max = (EventFields::new().with_retry(Duration::MAX), "");
    let frames = [
        (EventFields::new(), ""),
        (EventFields::new(), "\r\n"),
        (EventFields::new(), "\r"),
        (EventFields::new(), "\n\n"),
        (EventFields::new().with_id(Id::new("").unwrap()), "x"),
        (
            EventFields::new().with_event(EventType::new("").unwrap()),
            "x",
        ),
        retry_max,
        (
            EventFields::new().with_retry(Duration::from_millis(9)),
            "a\r\r\nb",
        ),
    ];
    // encode_all asserts encoded_len for each.
    let bytes = encode_all(&frames);
    let decoded = reference::decode(&bytes);
    assert_eq!(
        decoded.events().iter().map(|e| e.0).collect::<Vec<_>>(),
        ["", "\n", "\n", "\n\n", "x", "x", "", "a\n\nb"]
    );
}
