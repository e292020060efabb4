//! `mcpwire decode` end to end: the built binary on stdin and on files.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

/// Runs `mcpwire ARGS` with `input` on stdin.
fn run(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpwire");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // Written from a thread so a full stdout pipe cannot deadlock the test.
    let writer = thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("wait for mcpwire");
    writer.join().unwrap();
    output
}

/// The stdout lines as JSON values.
fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .expect("stdout is UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn event(event_type: &str, data: &str, id: &str) -> Value {
    json!({"type": event_type, "data": data, "id": id})
}

/// What `decode` says of `{}`: a JSON object that is no JSON-RPC message.
const EMPTY_OBJECT: &str = r#"{"kind":"invalid","id":null,"error":"missing \"jsonrpc\" member"}"#;

/// `event` with the `jsonrpc` summary `summary` (JSON text) added.
fn with_jsonrpc(mut event: Value, summary: &str) -> Value {
    event["jsonrpc"] = serde_json::from_str(summary).unwrap();
    event
}

fn last(retry_ms: Option<u64>, last_event_id: &str) -> Value {
    json!({"final": true, "retry_ms": retry_ms, "last_event_id": last_event_id})
}

/// Decodes `input` from stdin; asserts success and returns the lines.
fn decode_ok(input: &[u8]) -> Vec<Value> {
    let output = run(&["decode"], input);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stderr(&output), "");
    let lines = lines(&output);
    // The key order is part of the format.
    let text = String::from_utf8(output.stdout).unwrap();
    for line in text.lines() {
        assert!(
            line.starts_with("{\"type\":") || line.starts_with("{\"final\":true,\"retry_ms\":"),
            "{line}"
        );
    }
    lines
}

#[test]
fn sse_parse_8_vector_colon_and_one_space() {
    assert_eq!(
        decode_ok(b"data:a\n\ndata: a\n\ndata:  a\n\n"),
        [
            event("message", "a", ""),
            event("message", "a", ""),
            event("message", " a", ""),
            last(None, ""),
        ]
    );
}

#[test]
fn sse_parse_9_16_19_vector_bare_data_and_eof() {
    assert_eq!(
        decode_ok(b"data\n\ndata\ndata\n\ndata:"),
        [
            event("message", "", ""),
            event("message", "\n", ""),
            last(None, ""),
        ]
    );
}

#[test]
fn sse_parse_12_14_vector_id_persists_and_resets() {
    assert_eq!(
        decode_ok(b"data: x\nid: 1\n\ndata: y\nid\n\n"),
        [
            event("message", "x", "1"),
            event("message", "y", ""),
            last(None, "")
        ]
    );
}

#[test]
fn sse_parse_15_vector_id_only_block_and_nul() {
    assert_eq!(decode_ok(b"id: 7\n\n"), [last(None, "7")]);
    assert_eq!(decode_ok(b"id: 7\n\nid: a\0b\n\n"), [last(None, "7")]);
}

#[test]
fn sse_parse_13_vector_retry() {
    assert_eq!(decode_ok(b"retry: 1500\n\n"), [last(Some(1500), "")]);
    for bad in [
        "retry: 1.5\n\n",
        "retry: -1\n\n",
        "retry:  10\n\n",
        "retry:\n\n",
    ] {
        assert_eq!(decode_ok(bad.as_bytes()), [last(None, "")], "{bad:?}");
    }
}

#[test]
fn sse_parse_2_3_vector_bom_and_mixed_line_ends() {
    assert_eq!(
        decode_ok(b"\xEF\xBB\xBFdata: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d\r\ndata: e\r\n\n"),
        [
            event("message", "a", ""),
            event("message", "b", ""),
            event("message", "c", ""),
            event("message", "d\ne", ""),
            last(None, ""),
        ]
    );
    // A second BOM is content: it is part of the field name, so the line is ignored.
    assert_eq!(
        decode_ok(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"),
        [last(None, "")]
    );
}

#[test]
fn sse_parse_3_vector_cr_and_lf_in_separate_writes() {
    // The pieces are written with pauses, so the binary most likely reads them apart: the
    // CR|LF and the split BOM must still be one line end and one BOM.
    let mut child = spawn_decode(&[]);
    let mut stdin = child.stdin.take().unwrap();
    for piece in [
        &b"\xEF"[..],
        b"\xBB\xBF",
        b"data: a\r",
        b"\n\r",
        b"\ndata: b\n",
        b"\n",
    ] {
        stdin.write_all(piece).unwrap();
        stdin.flush().unwrap();
        thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        lines(&output),
        [
            event("message", "a", ""),
            event("message", "b", ""),
            last(None, "")
        ]
    );
}

#[test]
fn sse_parse_10_17_vector_event_type_and_case() {
    assert_eq!(
        decode_ok(b"event: foo\ndata: x\n\ndata: y\n\nDATA: x\n\nData: x\n\n data: x\n\n"),
        [
            event("foo", "x", ""),
            event("message", "y", ""),
            last(None, "")
        ]
    );
}

#[test]
fn sse_parse_1_invalid_utf8_is_replaced() {
    assert_eq!(
        decode_ok(b"data: a\xFFb\n\n"),
        [event("message", "a\u{FFFD}b", ""), last(None, "")]
    );
}

#[test]
fn final_line_reports_retry_and_last_event_id() {
    let lines =
        decode_ok(b"id: s1:0\nretry: 3000\ndata:\n\n: keep-alive\n\nid: s1:1\ndata: {}\n\n");
    assert_eq!(
        lines,
        [
            event("message", "", "s1:0"),
            with_jsonrpc(event("message", "{}", "s1:1"), EMPTY_OBJECT),
            last(Some(3000), "s1:1"),
        ]
    );
}

#[test]
fn sse_parse_22_limit_error_exit_1_and_later_events_printed() {
    let input =
        b"data: ok\n\ndata: this line is longer than sixteen\ndata: more\n\nid: 2\ndata: after\n\n";
    let output = run(&["decode", "--max-line-len", "16"], input);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        stderr(&output),
        "mcpwire decode: sse line longer than max_line_len (16 bytes); the event was discarded\n"
    );
    assert_eq!(
        lines(&output),
        [
            event("message", "ok", ""),
            event("message", "after", "2"),
            last(None, "2")
        ]
    );

    let output = run(
        &["decode", "--max-event-len=4"],
        b"data: ab\ndata: cd\n\ndata: ok\n\n",
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stderr(&output)
            .starts_with("mcpwire decode: sse event data larger than max_event_len (4 bytes)")
    );
    assert_eq!(lines(&output), [event("message", "ok", ""), last(None, "")]);
}

fn spawn_decode(args: &[&str]) -> Child {
    Command::new(BIN)
        .arg("decode")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpwire")
}

/// Writes `write` to the child's stdin (kept open) and expects `want` on its stdout
/// within 10 s.
fn expect_line(
    child: &mut Child,
    stdin: &mut ChildStdin,
    lines: &mpsc::Receiver<String>,
    write: &[u8],
    want: Value,
) {
    stdin.write_all(write).unwrap();
    stdin.flush().unwrap();
    match lines.recv_timeout(Duration::from_secs(10)) {
        Ok(line) => assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), want),
        Err(e) => {
            let _ = child.kill();
            panic!("no line within 10 s while stdin is open ({e}): output is not streamed");
        }
    }
}

#[test]
fn events_are_printed_before_input_ends() {
    let mut child = spawn_decode(&[]);
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let first = event("message", "first", "1");
    expect_line(
        &mut child,
        &mut stdin,
        &rx,
        b"id: 1\ndata: first\n\n",
        first,
    );
    stdin.write_all(b": ping\n\ndata: sec").unwrap();
    let second = event("message", "second", "1");
    expect_line(&mut child, &mut stdin, &rx, b"ond\n\n", second);
    drop(stdin);
    let fin = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the final line");
    assert_eq!(
        serde_json::from_str::<Value>(&fin).unwrap(),
        last(None, "1")
    );
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
}

#[test]
fn file_input_and_dash_for_stdin() {
    let path = std::env::temp_dir().join(format!("mcpwire-cli-test-{}.sse", std::process::id()));
    std::fs::write(
        &path,
        b"event: endpoint\ndata: /messages?sessionId=abc\n\ndata: {}\n\n",
    )
    .unwrap();
    let output = Command::new(BIN)
        .arg("decode")
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        lines(&output),
        [
            event("endpoint", "/messages?sessionId=abc", ""),
            with_jsonrpc(event("message", "{}", ""), EMPTY_OBJECT),
            last(None, ""),
        ]
    );
    let output = run(&["decode", "-"], b"data: x\n\n");
    assert!(output.status.success());
    assert_eq!(lines(&output), [event("message", "x", ""), last(None, "")]);
}

fn samples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples")
}

#[test]
fn sample_streamable_http_post() {
    let output = Command::new(BIN)
        .arg("decode")
        .arg(samples().join("streamable-http-post.sse"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output);
    let (events, fin) = lines.split_at(lines.len() - 1);
    // The priming event: an id and empty data (SSE-ENC-9).
    assert_eq!(events[0]["data"], "");
    assert_ne!(events[0]["id"], "");
    // Every other event is one JSON-RPC message; the last one is the response.
    for e in &events[1..] {
        let message: Value = serde_json::from_str(e["data"].as_str().unwrap()).unwrap();
        assert_eq!(message["jsonrpc"], "2.0", "{e}");
    }
    let response: Value =
        serde_json::from_str(events.last().unwrap()["data"].as_str().unwrap()).unwrap();
    assert!(response.get("result").is_some() && response.get("method").is_none());
    assert!(fin[0]["retry_ms"].is_u64());
    assert_eq!(fin[0]["last_event_id"], events.last().unwrap()["id"]);
}

#[test]
fn sample_legacy_sse() {
    let output = Command::new(BIN)
        .arg("decode")
        .arg(samples().join("legacy-sse.sse"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output);
    assert_eq!(lines[0]["type"], "endpoint");
    assert!(
        lines[0]["data"]
            .as_str()
            .unwrap()
            .starts_with("/messages?sessionId=")
    );
    for e in &lines[1..lines.len() - 1] {
        assert_eq!(e["type"], "message");
        let message: Value = serde_json::from_str(e["data"].as_str().unwrap()).unwrap();
        assert_eq!(message["jsonrpc"], "2.0");
    }
}

#[test]
fn io_errors_exit_1() {
    let output = run(&["decode", "/nonexistent/mcpwire.sse"], b"");
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).starts_with("mcpwire decode: cannot open /nonexistent/mcpwire.sse"));
    assert!(output.stdout.is_empty());
    // A directory opens but cannot be read.
    let output = run(&["decode", env!("CARGO_MANIFEST_DIR")], b"");
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("failed"), "{}", stderr(&output));
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    for args in [
        &[][..],
        &["frobnicate"],
        &["decode", "--bogus"],
        &["decode", "a", "b"],
        &["decode", "--max-line-len", "x"],
    ] {
        let output = run(args, b"");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains("Usage: mcpwire"),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(output.stdout.is_empty());
    }
    for args in [
        &["--help"][..],
        &["help"],
        &["decode", "--help"],
        &["help", "decode"],
    ] {
        let output = run(args, b"");
        assert!(output.status.success(), "{args:?}");
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(text.contains("mcpwire decode"), "{text}");
    }
    let output = run(&["decode", "-h"], b"");
    assert!(
        String::from_utf8(output.stdout)
            .unwrap()
            .contains("--max-event-len")
    );
}

#[test]
fn jsonrpc_8_each_message_is_summarised_by_kind_id_and_method() {
    let messages = [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"kind":"request","id":1,"method":"tools/call"}"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":"1","result":{}}"#,
            r#"{"kind":"response","id":"1","method":null}"#,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
            r#"{"kind":"notification","id":null,"method":"notifications/progress"}"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
            r#"{"kind":"error","id":null,"method":null}"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":"m","params":1}"#,
            r#"{"kind":"invalid","id":9,"error":"\"params\" must be an object or an array"}"#,
        ),
        (
            r#"[{"jsonrpc":"2.0","id":2,"result":null},{"jsonrpc":"2.0","method":"x"}]"#,
            r#"[{"kind":"response","id":2,"method":null},{"kind":"notification","id":null,"method":"x"}]"#,
        ),
    ];
    let mut input = Vec::new();
    let mut expected = Vec::new();
    for (data, summary) in messages {
        input.extend_from_slice(format!("data: {data}\n\n").as_bytes());
        expected.push(with_jsonrpc(event("message", data, ""), summary));
    }
    // JSON that is not an object is no message: invalid, with the reason.
    input.extend_from_slice(b"data: 7\n\n");
    expected.push(with_jsonrpc(
        event("message", "7", ""),
        r#"{"kind":"invalid","id":null,"error":"message is not a json object"}"#,
    ));
    // Not JSON, or a priming event's empty data: no summary.
    input.extend_from_slice(b"data: not json\n\ndata: [1,\n\nid: p\ndata:\n\n");
    expected.extend([
        event("message", "not json", ""),
        event("message", "[1,", ""),
        event("message", "", "p"),
        last(None, "p"),
    ]);
    assert_eq!(decode_ok(&input), expected);
}

/// Decodes one event with `data` and returns its `jsonrpc` member (`Value::Null` if it
/// has none).
fn summary_of(data: &str) -> Value {
    let lines = decode_ok(format!("data: {data}\n\n").as_bytes());
    assert_eq!(lines.len(), 2, "{lines:?}");
    lines[0].get("jsonrpc").cloned().unwrap_or(Value::Null)
}

#[test]
fn batch_5_whole_text_errors_are_invalid_with_the_reason() {
    let invalid = |reason: &str| json!({"kind": "invalid", "id": null, "error": reason});
    assert_eq!(summary_of("[]"), invalid("empty batch"));
    assert_eq!(summary_of(" [ ] "), invalid("empty batch"));
    let many = format!(
        "[{}]",
        vec![r#"{"jsonrpc":"2.0","method":"m"}"#; 257].join(",")
    );
    assert_eq!(summary_of(&many), invalid("batch longer than 256 messages"));
    let fits = format!(
        "[{}]",
        vec![r#"{"jsonrpc":"2.0","method":"m"}"#; 256].join(",")
    );
    assert_eq!(summary_of(&fits).as_array().map(Vec::len), Some(256));
    // A valid message nested past the depth limit (128 levels, the message object one).
    let deep = |levels: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"m","params":{}{}}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        )
    };
    assert_eq!(summary_of(&deep(127))["kind"], "notification");
    let text = deep(128);
    let at = text.find(&"[".repeat(128)).unwrap() + 127;
    assert_eq!(
        summary_of(&text),
        invalid(&format!("json nested deeper than 128 levels at byte {at}"))
    );
}

#[test]
fn jsonrpc_2_bad_ids_and_methods_say_what_is_wrong() {
    let invalid = |id: Value, reason: &str| json!({"kind": "invalid", "id": id, "error": reason});
    assert_eq!(
        summary_of(r#"{"jsonrpc":"2.0","id":"\ud800","method":"m"}"#),
        invalid(
            Value::Null,
            "\"id\" holds an unpaired surrogate escape, which is not unicode text"
        )
    );
    assert_eq!(
        summary_of(r#"{"jsonrpc":"2.0","id":1,"method":"\udfff"}"#),
        invalid(
            json!(1),
            "\"method\" holds an unpaired surrogate escape, which is not unicode text"
        )
    );
    assert_eq!(
        summary_of(r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#),
        invalid(
            Value::Null,
            "integer \"id\" out of range (ids must fit in 64 signed bits)"
        )
    );
    assert_eq!(
        summary_of(r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#),
        invalid(Value::Null, "\"id\" must be a string or an integer")
    );
}

#[test]
fn sse_parse_13_retry_beyond_2_53_is_clamped_to_what_json_readers_hold() {
    const MAX_SAFE: u64 = (1 << 53) - 1;
    for (retry, printed) in [
        ("9007199254740991", MAX_SAFE),
        ("9007199254740990", MAX_SAFE - 1),
        ("9007199254740992", MAX_SAFE),
        ("18446744073709551615", MAX_SAFE),
        ("99999999999999999999999999", MAX_SAFE),
    ] {
        let output = run(&["decode"], format!("retry: {retry}\n\n").as_bytes());
        assert!(output.status.success());
        let text = String::from_utf8(output.stdout).unwrap();
        // The exact digits, as a JavaScript reader would need them.
        assert_eq!(
            text,
            format!("{{\"final\":true,\"retry_ms\":{printed},\"last_event_id\":\"\"}}\n"),
            "{retry}"
        );
    }
}
