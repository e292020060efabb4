//! `mcpwire decode [FILE]`: a `text/event-stream` in, one JSON line per event out.
//!
//! The stream is read with [`mcpwire_blocking::SseReader`] and every dispatched event is
//! printed as soon as the read that delivered its blank line returns: stdout is buffered
//! and flushed whenever the decoder needs more input, which is exactly when the next read
//! may block. Memory stays bounded on endless input (the decoder's [`Limits`] and one read
//! buffer). A limit error is reported on stderr and decoding goes on with the next event;
//! the exit status is then 1.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, ErrorKind, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use mcpwire::jsonrpc::{Classifier, Message, ParseError, Parsed, RequestId, ShapeError};
use mcpwire::sse::{EventRef, ItemRef, Limits};
use mcpwire_blocking::SseReader;

use crate::{print_help, usage_error};

/// The `decode` usage text.
pub(crate) const USAGE: &str = "\
Usage: mcpwire decode [OPTIONS] [FILE]

Decodes a text/event-stream (WHATWG server-sent events, as MCP's HTTP transports send
them) from FILE, or from standard input when FILE is absent or `-`.

Output, one JSON object per line on stdout. For each dispatched event, as soon as its
blank line has arrived (id is the last event id in force, \"\" if none):
  {\"type\":\"message\",\"data\":\"...\",\"id\":\"...\"}
When the data is JSON text (an object, an array, or any other value), the line adds
what JSON-RPC makes of it, under any protocol revision (batches included):
  \"jsonrpc\":{\"kind\":\"request\",\"id\":1,\"method\":\"tools/call\"}
kind is request, notification, response or error; id and method are null when absent;
a batch gives a list of these. JSON that is no valid message (an object without
\"jsonrpc\", a number, an empty batch, a batch of more than 256 messages, nesting
deeper than 128 levels) gives kind \"invalid\" with the reason:
  \"jsonrpc\":{\"kind\":\"invalid\",\"id\":null,\"error\":\"empty batch\"}
Data that is not JSON text (a priming event's empty data, an endpoint URL) gets no
\"jsonrpc\" member.
At end of input (retry_ms is null if the stream set no valid retry; a retry beyond
9007199254740991 ms, 2^53 - 1, is printed as that, the largest integer JavaScript and
jq hold exactly):
  {\"final\":true,\"retry_ms\":3000,\"last_event_id\":\"...\"}

Options:
  --max-line-len BYTES    longest line accepted (default 16777216)
  --max-event-len BYTES   largest event data accepted (default 16777216)
  -h, --help              print this help

An event that exceeds a limit is reported on stderr and skipped; decoding goes on.

Exit status: 0 success; 1 a limit was exceeded or reading failed; 2 bad usage.
";

const PROG: &str = "mcpwire decode";

/// Where the stream comes from.
#[derive(Debug, PartialEq, Eq)]
enum Input {
    Stdin,
    File(PathBuf),
}

/// A parsed `decode` command line.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    Help,
    Run { input: Input, limits: Limits },
}

/// Parses the arguments after `decode`.
fn parse(args: &[OsString]) -> Result<Command, String> {
    let mut limits = Limits::default();
    let mut input = None;
    let mut args = args.iter();
    let mut options_done = false;
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if options_done || text == "-" || !text.starts_with('-') {
            if input.is_some() {
                return Err(format!("unexpected argument '{text}' (only one FILE)"));
            }
            input = Some(if text == "-" && !options_done {
                Input::Stdin
            } else {
                Input::File(PathBuf::from(arg))
            });
            continue;
        }
        if text == "--" {
            options_done = true;
            continue;
        }
        let (name, inline) = match text.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_owned())),
            _ => (&*text, None),
        };
        match name {
            "-h" | "--help" if inline.is_none() => return Ok(Command::Help),
            "--max-line-len" | "--max-event-len" => {
                let value = match inline {
                    Some(value) => value,
                    None => args
                        .next()
                        .ok_or_else(|| format!("{name} needs a value in bytes"))?
                        .to_string_lossy()
                        .into_owned(),
                };
                let bytes = value.parse::<usize>().map_err(|_| {
                    format!("{name}: '{value}' is not a byte count (a non-negative integer)")
                })?;
                limits = if name == "--max-line-len" {
                    limits.with_max_line_len(bytes)
                } else {
                    limits.with_max_event_len(bytes)
                };
            }
            _ => return Err(format!("unknown option '{text}'")),
        }
    }
    Ok(Command::Run {
        input: input.unwrap_or(Input::Stdin),
        limits,
    })
}

/// Runs `mcpwire decode` with the arguments after `decode`.
pub(crate) fn main(args: &[OsString]) -> ExitCode {
    let (input, limits) = match parse(args) {
        Ok(Command::Help) => return print_help(USAGE),
        Ok(Command::Run { input, limits }) => (input, limits),
        Err(message) => return usage_error(PROG, &message, USAGE),
    };
    let stdout = io::stdout().lock();
    let mut stderr = io::stderr().lock();
    let status = match input {
        Input::Stdin => decode(
            io::stdin().lock(),
            "standard input",
            limits,
            stdout,
            &mut stderr,
        ),
        Input::File(path) => match File::open(&path) {
            Ok(file) => decode(
                file,
                &path.display().to_string(),
                limits,
                stdout,
                &mut stderr,
            ),
            Err(e) => {
                let _ = writeln!(stderr, "{PROG}: cannot open {}: {e}", path.display());
                Status::Failed
            }
        },
    };
    match status {
        Status::Ok => ExitCode::SUCCESS,
        Status::Failed => ExitCode::FAILURE,
    }
}

/// How a decode run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Ok,
    Failed,
}

/// Decodes `reader` to JSON lines on `out`, reporting problems on `err`.
fn decode<R: Read>(
    reader: R,
    name: &str,
    limits: Limits,
    out: impl Write,
    err: &mut impl Write,
) -> Status {
    let mut out = BufWriter::with_capacity(64 << 10, out);
    let mut reader = SseReader::with_limits(reader, limits);
    match drive(&mut reader, &mut out, err) {
        Ok(status) => status,
        Err(Failure::Read(e)) => {
            let _ = out.flush();
            let _ = writeln!(err, "{PROG}: reading {name} failed: {e}");
            Status::Failed
        }
        // Nobody reads the output any more (`mcpwire decode | head`): stop quietly.
        Err(Failure::Write(e)) if e.kind() == ErrorKind::BrokenPipe => Status::Failed,
        Err(Failure::Write(e)) => {
            let _ = writeln!(err, "{PROG}: writing the output failed: {e}");
            Status::Failed
        }
    }
}

/// An IO failure that ends the run.
enum Failure {
    Read(io::Error),
    Write(io::Error),
}

/// The drive loop: drain the decoder, flush when it needs input, read once, repeat.
fn drive<R: Read, W: Write>(
    reader: &mut SseReader<R>,
    out: &mut W,
    err: &mut impl Write,
) -> Result<Status, Failure> {
    let mut status = Status::Ok;
    loop {
        match reader.poll_item_ref() {
            Ok(Some(ItemRef::Event(event))) => write_event(out, &event).map_err(Failure::Write)?,
            Ok(Some(ItemRef::Comment(_) | ItemRef::Retry(_))) => {}
            Err(e) => {
                // Keep stdout and stderr in stream order on a terminal.
                out.flush().map_err(Failure::Write)?;
                let _ = writeln!(err, "{PROG}: {e}");
                status = Status::Failed;
            }
            Ok(None) => {
                // The next read may block: what has been decoded must be visible now.
                out.flush().map_err(Failure::Write)?;
                if reader.is_finished() {
                    break;
                }
                reader.read_chunk().map_err(Failure::Read)?;
            }
        }
    }
    write_final(out, reader).map_err(Failure::Write)?;
    out.flush().map_err(Failure::Write)?;
    Ok(status)
}

/// `{"type":…,"data":…,"id":…}` (plus `"jsonrpc":…` when the data is a JSON-RPC message
/// or a batch of them) and a newline.
fn write_event(out: &mut impl Write, event: &EventRef<'_>) -> io::Result<()> {
    out.write_all(b"{\"type\":")?;
    serde_json::to_writer(&mut *out, event.event_type())?;
    out.write_all(b",\"data\":")?;
    serde_json::to_writer(&mut *out, event.data())?;
    out.write_all(b",\"id\":")?;
    serde_json::to_writer(&mut *out, event.id())?;
    write_jsonrpc(out, event.data())?;
    out.write_all(b"}\n")
}

/// `,"jsonrpc":…`: what the core's version-agnostic classification
/// ([`Classifier::parse_any`]) says of the data, a message's summary or a list of them
/// for a batch; nothing when the core says the data is not JSON at all
/// ([`ParseError::is_not_json`]).
fn write_jsonrpc(out: &mut impl Write, data: &str) -> io::Result<()> {
    let parsed = Classifier::default().parse_any(data.as_bytes());
    if parsed.as_ref().is_err_and(ParseError::is_not_json) {
        return Ok(());
    }
    out.write_all(b",\"jsonrpc\":")?;
    match parsed {
        Ok(Parsed::Single(message)) => write_message(out, &message),
        Ok(Parsed::Batch(items)) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                match item {
                    Ok(message) => write_message(out, message)?,
                    Err(e) => write_shape_error(out, e)?,
                }
            }
            out.write_all(b"]")
        }
        Err(ParseError::Shape(e)) => write_shape_error(out, &e),
        // Said of the whole text: an empty or too long batch, too deep a text.
        Err(ParseError::Json(e)) => write_invalid(out, None, &e.to_string()),
        Err(e) => write_invalid(out, e.id(), &e.to_string()),
    }
}

/// `{"kind":…,"id":…,"method":…}`.
fn write_message(out: &mut impl Write, message: &Message<'_>) -> io::Result<()> {
    write!(out, "{{\"kind\":\"{}\",\"id\":", message.kind().as_str())?;
    write_id(out, message.id())?;
    out.write_all(b",\"method\":")?;
    serde_json::to_writer(&mut *out, &message.method())?;
    out.write_all(b"}")
}

/// A message that is JSON but no valid JSON-RPC message: its shape is the reason.
fn write_shape_error(out: &mut impl Write, e: &ShapeError) -> io::Result<()> {
    write_invalid(out, e.id.as_ref(), &e.shape.to_string())
}

/// `{"kind":"invalid","id":…,"error":…}`.
fn write_invalid(out: &mut impl Write, id: Option<&RequestId>, reason: &str) -> io::Result<()> {
    out.write_all(b"{\"kind\":\"invalid\",\"id\":")?;
    write_id(out, id)?;
    out.write_all(b",\"error\":")?;
    serde_json::to_writer(&mut *out, reason)?;
    out.write_all(b"}")
}

/// An id as its JSON text (`7` or `"7"`, through its `Display`), or `null`.
fn write_id(out: &mut impl Write, id: Option<&RequestId>) -> io::Result<()> {
    match id {
        None => out.write_all(b"null"),
        Some(id) => write!(out, "{id}"),
    }
}

/// The largest integer that JavaScript numbers, and so `jq` and most JSON readers, hold
/// exactly: 2^53 − 1. Larger `retry_ms` values are printed as this.
const MAX_SAFE_INTEGER: u128 = (1 << 53) - 1;

/// `{"final":true,"retry_ms":…,"last_event_id":…}` and a newline.
fn write_final<R: Read>(out: &mut impl Write, reader: &SseReader<R>) -> io::Result<()> {
    out.write_all(b"{\"final\":true,\"retry_ms\":")?;
    match reader.retry() {
        // The decoder saturates `retry` at u64::MAX ms; no reader of the output could
        // hold that, and no client waits that long either.
        Some(retry) => write!(out, "{}", retry.as_millis().min(MAX_SAFE_INTEGER))?,
        None => out.write_all(b"null")?,
    }
    out.write_all(b",\"last_event_id\":")?;
    serde_json::to_writer(&mut *out, reader.last_event_id())?;
    out.write_all(b"}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn run(list: &[&str]) -> Result<(Input, Limits), String> {
        match parse(&args(list))? {
            Command::Run { input, limits } => Ok((input, limits)),
            Command::Help => Err("help".into()),
        }
    }

    #[test]
    fn no_file_or_dash_is_stdin() {
        assert_eq!(run(&[]).unwrap().0, Input::Stdin);
        assert_eq!(run(&["-"]).unwrap().0, Input::Stdin);
        assert_eq!(run(&["a.sse"]).unwrap().0, Input::File("a.sse".into()));
        assert_eq!(run(&["--", "-"]).unwrap().0, Input::File("-".into()));
        assert_eq!(
            run(&["--", "--help"]).unwrap().0,
            Input::File("--help".into())
        );
    }

    #[test]
    fn limits_in_both_spellings() {
        let (_, limits) = run(&["--max-line-len", "64", "--max-event-len=256", "x"]).unwrap();
        assert_eq!((limits.max_line_len(), limits.max_event_len()), (64, 256));
        assert_eq!(run(&[]).unwrap().1, Limits::default());
    }

    #[test]
    fn help_and_errors() {
        assert_eq!(parse(&args(&["x", "--help"])), Ok(Command::Help));
        assert_eq!(parse(&args(&["-h"])), Ok(Command::Help));
        assert!(
            run(&["--max-line-len"])
                .unwrap_err()
                .contains("needs a value")
        );
        assert!(
            run(&["--max-line-len", "-1"])
                .unwrap_err()
                .contains("not a byte count")
        );
        assert!(
            run(&["--max-line-len=1k"])
                .unwrap_err()
                .contains("not a byte count")
        );
        assert!(run(&["--bogus"]).unwrap_err().contains("unknown option"));
        assert!(run(&["a", "b"]).unwrap_err().contains("only one FILE"));
    }

    #[test]
    fn sse_parse_22_limit_error_reported_and_decoding_continues() {
        let input: &[u8] = b"data: a\n\ndata: far too long\n\nid: 3\ndata: b\n\n";
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let limits = Limits::default().with_max_line_len(10);
        let status = decode(input, "test", limits, &mut out, &mut err);
        assert_eq!(status, Status::Failed);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"type\":\"message\",\"data\":\"a\",\"id\":\"\"}\n\
             {\"type\":\"message\",\"data\":\"b\",\"id\":\"3\"}\n\
             {\"final\":true,\"retry_ms\":null,\"last_event_id\":\"3\"}\n"
        );
        let err = String::from_utf8(err).unwrap();
        assert!(err.starts_with("mcpwire decode: sse line longer"), "{err}");
    }

    #[test]
    fn json_escapes_data() {
        let input = "event: a\"b\ndata: \u{1}tab\there\ndata: é\n\n".as_bytes();
        let mut out = Vec::new();
        let status = decode(input, "test", Limits::default(), &mut out, &mut Vec::new());
        assert_eq!(status, Status::Ok);
        let first = String::from_utf8(out).unwrap();
        let first = first.lines().next().unwrap();
        assert_eq!(
            first,
            "{\"type\":\"a\\\"b\",\"data\":\"\\u0001tab\\there\\né\",\"id\":\"\"}"
        );
    }
}
