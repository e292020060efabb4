//! `mcpwire call URL [TOOL [JSON-ARGS]]`: initialize, call one tool (or list the tools),
//! print its progress and result, end the session. Resumes through disconnects and falls
//! back to the legacy transport as the client core decides.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire::client::Config;
use mcpwire::jsonrpc::ErrorCode;
use mcpwire_tokio::client::{ClientOptions, McpClient, ServerMessage};
use serde_json::{Value, json};

use crate::{block_on, os_entropy, print_help, usage_error};

/// The usage text.
pub(crate) const USAGE: &str = "\
mcpwire call: call one tool of an MCP server and print the result

Usage: mcpwire call [OPTIONS] URL [TOOL [JSON-ARGS]]

  URL         the server's MCP endpoint, e.g. http://127.0.0.1:8080/mcp (http or https)
  TOOL        the tool's name; without it, the server's tools are listed (tools/list)
  JSON-ARGS   its arguments, a JSON object (default {})

Options:
  --legacy         speak only the legacy HTTP+SSE transport (URL is its SSE endpoint);
                   without it, a 400/404/405 to the first POST falls back to it anyway
  --timeout-ms N   give up after N ms (default 60000)
  --no-get-stream  do not open the standalone GET stream for server-initiated messages
                   (a call's own messages come on its POST's stream either way)
  --blocking       use the blocking client (mcpwire-blocking, on ureq and threads)
                   instead of the tokio one: the same core, so the same exchanges
  --cacert FILE    for https, trust the root certificates in this PEM file instead
                   of the built-in Mozilla roots (a private CA, a test server's)
  -H, --header 'NAME: VALUE'
                   send this header with every request, e.g. 'Authorization: Bearer
                   TOKEN' (repeatable; the transport's own headers stay its own)
  -h, --help       print this help

Prints one line per progress notification on stderr, then the result as JSON on
stdout. Exit status: 0 success; 1 the call failed; 2 bad usage.
";

const PROG: &str = "mcpwire call";

struct Options {
    url: http::Uri,
    /// `None`: list the tools.
    tool: Option<String>,
    args: Value,
    timeout: Duration,
    legacy: bool,
    blocking: bool,
    get_stream: bool,
    /// The root certificates of `--cacert` (DER), if given.
    roots: Option<Vec<Vec<u8>>>,
    /// The `--header`s, in order.
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

fn parse(args: &[OsString]) -> Result<Option<Options>, String> {
    let mut positional = Vec::new();
    let mut timeout = Duration::from_secs(60);
    let mut legacy = false;
    let mut blocking = false;
    let mut get_stream = true;
    let mut roots = None;
    let mut headers = Vec::new();
    let mut args = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--legacy" => legacy = true,
            "--blocking" => blocking = true,
            "--no-get-stream" => get_stream = false,
            "-H" | "--header" => {
                let header = args.next().ok_or("--header needs 'NAME: VALUE'")?;
                headers.push(parse_header(&header)?);
            }
            "--cacert" => {
                let path = args.next().ok_or("--cacert needs a PEM file")?;
                let certs = crate::read_pem_certificates("--cacert", &path)?;
                roots = Some(certs.iter().map(|c| c.to_vec()).collect());
            }
            "--timeout-ms" => {
                let v = args.next().ok_or("--timeout-ms needs milliseconds")?;
                let ms: u64 = v
                    .parse()
                    .map_err(|_| format!("--timeout-ms: '{v}' is not milliseconds"))?;
                timeout = Duration::from_millis(ms);
            }
            a if a.starts_with("--") => return Err(format!("unknown option '{a}'")),
            _ => positional.push(arg),
        }
    }
    let [url, rest @ ..] = &positional[..] else {
        return Err("needs URL".into());
    };
    let (tool, rest) = match rest {
        [tool, rest @ ..] => (Some(tool.clone()), rest),
        [] => (None, rest),
    };
    let url: http::Uri = url.parse().map_err(|_| format!("'{url}' is not a URL"))?;
    if !matches!(url.scheme_str(), Some("http" | "https")) || url.authority().is_none() {
        return Err(format!("'{url}' is not an http:// or https:// URL"));
    }
    let args = match rest {
        [] => json!({}),
        [json] => serde_json::from_str(json).map_err(|e| format!("JSON-ARGS: {e}"))?,
        _ => return Err("too many arguments".into()),
    };
    if !args.is_object() {
        return Err("JSON-ARGS must be a JSON object".into());
    }
    Ok(Some(Options {
        url,
        tool,
        args,
        timeout,
        legacy,
        blocking,
        get_stream,
        roots,
        headers,
    }))
}

/// A `--header` argument, `NAME: VALUE`.
fn parse_header(arg: &str) -> Result<(http::HeaderName, http::HeaderValue), String> {
    let (name, value) = arg
        .split_once(':')
        .ok_or_else(|| format!("--header: '{arg}' is not 'NAME: VALUE'"))?;
    let name = http::HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("--header: '{}' is not a header name", name.trim()))?;
    let value = http::HeaderValue::from_str(value.trim())
        .map_err(|_| format!("--header: the value of {name} is not a header value"))?;
    Ok((name, value))
}

pub(crate) fn main(args: &[OsString]) -> ExitCode {
    let options = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => return print_help(USAGE),
        Err(message) => return usage_error(PROG, &message, USAGE),
    };
    if options.blocking {
        return run_blocking(&options);
    }
    block_on(PROG, async {
        match tokio::time::timeout(options.timeout, run(&options)).await {
            Ok(code) => code,
            Err(_) => {
                eprintln!("{PROG}: timed out after {} ms", options.timeout.as_millis());
                ExitCode::FAILURE
            }
        }
    })
}

fn config(options: &Options) -> Config {
    let config = Config::new(options.url.clone())
        .with_legacy_only(options.legacy)
        .with_get_stream(options.get_stream)
        .with_client_info("mcpwire-call", env!("CARGO_PKG_VERSION"));
    options
        .headers
        .iter()
        .fold(config, |config, (name, value)| {
            config.with_header(name.clone(), value.clone())
        })
}

/// The request: `tools/call` of the tool with its arguments and a progress token, or
/// `tools/list` without a tool.
fn request(options: &Options) -> (&'static str, Option<Value>) {
    match &options.tool {
        Some(tool) => (
            "tools/call",
            Some(json!({
                "name": tool,
                "arguments": options.args,
                "_meta": {"progressToken": "mcpwire-call"},
            })),
        ),
        None => ("tools/list", None),
    }
}

/// The error `mcpwire call` answers every server→client request with (-32601): it
/// offers no capabilities, so a server should ask nothing (sampling, elicitation, roots),
/// and one that asks gets an answer at once instead of waiting for ever. (A `ping` is
/// answered by the client core.)
const DECLINE: &str = "mcpwire call answers no requests from the server";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What `mcpwire call` does with a server's message: prints progress, and `decline`s a
/// request (see [`DECLINE`]); the rest it leaves.
fn on_message(message: ServerMessage, decline: impl FnOnce(&mcpwire::jsonrpc::RequestId)) {
    match message {
        ServerMessage::Notification(n) => print_progress(&n),
        ServerMessage::Request(r) => {
            if let Some(id) = r.id() {
                decline(id);
            }
        }
        _ => {}
    }
}

/// Prints a progress notification on stderr.
fn print_progress(n: &mcpwire::jsonrpc::Envelope) {
    if n.method() == Some("notifications/progress") {
        let params = n
            .payload()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default();
        eprintln!("{PROG}: progress {params}");
    }
}

/// Prints the result (or the failure); the exit status.
fn outcome<E: std::fmt::Display>(result: Result<Value, E>) -> ExitCode {
    match result {
        Ok(value) => {
            println!("{value}");
            if value.get("isError").and_then(Value::as_bool) == Some(true) {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{PROG}: the call failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--blocking`: the same call on `mcpwire_blocking::client`, no runtime. The overall
/// timeout bounds the handshake (the core's connect timeout) and then the call (its
/// deadline in the core); `close` waits 2 s at most.
fn run_blocking(options: &Options) -> ExitCode {
    use mcpwire_blocking::client::{ClientOptions, McpClient};
    let started = std::time::Instant::now();
    let config = config(options).with_connect_timeout(options.timeout);
    let mut connect_options = ClientOptions::new();
    if let Some(roots) = &options.roots {
        connect_options = connect_options.with_root_certificates(roots.iter().cloned());
    }
    let (client, messages) =
        match McpClient::connect_with(config, Box::new(os_entropy), connect_options) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{PROG}: cannot connect to {}: {e}", options.url);
                return ExitCode::FAILURE;
            }
        };
    eprintln!(
        "{PROG}: connected ({}, {:?}, blocking)",
        client.version(),
        client.transport()
    );
    // Answers the server's requests while the call runs; dropped after it, so that the
    // client's last clone goes with `close`.
    let responder = Arc::new(Mutex::new(Some(client.clone())));
    // Ends once the client is gone, after every message the server sent before.
    let printer = std::thread::spawn({
        let responder = Arc::clone(&responder);
        move || {
            for message in messages {
                on_message(message, |id| {
                    if let Some(client) = &*lock(&responder) {
                        let _ = client.respond_error(id, ErrorCode::METHOD_NOT_FOUND, DECLINE);
                    }
                });
            }
        }
    });
    let left = options.timeout.saturating_sub(started.elapsed());
    let (method, params) = request(options);
    let result = client.call_timeout(method, params, left);
    lock(&responder).take();
    client.close();
    // The last progress step may arrive with the result: print it before the result.
    let _ = printer.join();
    outcome(result)
}

async fn run(options: &Options) -> ExitCode {
    let config = config(options);
    let mut connect_options = ClientOptions::new();
    if let Some(roots) = &options.roots {
        connect_options = connect_options.with_root_certificates(roots.iter().cloned());
    }
    let (client, mut messages) =
        match McpClient::connect_with(config, Box::new(os_entropy), connect_options).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{PROG}: cannot connect to {}: {e}", options.url);
                return ExitCode::FAILURE;
            }
        };
    eprintln!(
        "{PROG}: connected ({}, {:?})",
        client.version(),
        client.transport()
    );
    // As in `run_blocking`: answers the server's requests while the call runs.
    let responder = Arc::new(Mutex::new(Some(client.clone())));
    let printer = tokio::spawn({
        let responder = Arc::clone(&responder);
        async move {
            while let Some(message) = messages.recv().await {
                on_message(message, |id| {
                    if let Some(client) = &*lock(&responder) {
                        let _ = client.respond_error(id, ErrorCode::METHOD_NOT_FOUND, DECLINE);
                    }
                });
            }
        }
    });
    let (method, params) = request(options);
    let result = client.call(method, params).await;
    lock(&responder).take();
    client.close().await;
    // Ends once the client's driver has stopped, after every message the server sent
    // before: the last progress step may arrive with the result.
    let _ = printer.await;
    outcome(result)
}
