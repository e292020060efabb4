//! `mcpwire call URL [TOOL [JSON-ARGS]]`: initialize, call one tool (or list the tools),
//! print its progress and result, end the session. Resumes through disconnects and falls
//! back to the legacy transport as the client core decides.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpwire::client::{CallError, Config, Progress, RequestError, Revision};
use mcpwire::jsonrpc::ErrorCode;
use mcpwire::{Era, ProtocolVersion};
use mcpwire_tokio::client::{ClientOptions, McpClient, ServerMessage};
use serde_json::{Value, json};

use crate::{BadUsage, block_on, print_help};

/// The usage text.
pub(crate) const USAGE: &str = "\
mcpwire call: call one tool of an MCP server and print the result

Usage: mcpwire call [OPTIONS] URL [TOOL [JSON-ARGS]]

  URL         the server's MCP endpoint, e.g. http://127.0.0.1:8080/mcp (http or https)
  TOOL        the tool's name; without it, the server's tools are listed (tools/list)
  JSON-ARGS   its arguments, one JSON object, quoted for the shell:
              '{\"text\":\"hi\"}' (default {})

Options:
  --revision R     auto (default): find the best revision the server offers
                   (server/discover at 2026-07-28, else initialize, else legacy
                   HTTP+SSE); or one revision: 2026-07-28, 2025-11-25, 2025-06-18,
                   2025-03-26; or legacy (as --legacy)
  --legacy         speak only the legacy HTTP+SSE transport (URL is its SSE endpoint);
                   without it, a 400/404/405 to initialize falls back to it anyway
  --timeout-ms N   give up after N ms, 1 or more (default 60000)
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

Says on stderr which revision and transport it settled on, prints one line per
progress notification on stderr, then the result as JSON on stdout. Exit status: 0 success; 1 the call failed; 2 bad usage.
";

const PROG: &str = "mcpwire call";

struct Options {
    url: http::Uri,
    /// `None`: list the tools.
    tool: Option<String>,
    args: Value,
    timeout: Duration,
    revision: Revision,
    blocking: bool,
    get_stream: bool,
    /// The root certificates of `--cacert` (DER), if given.
    roots: Option<Vec<Vec<u8>>>,
    /// The `--header`s, in order.
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

fn parse(args: &[OsString]) -> Result<Option<Options>, BadUsage> {
    let mut positional = Vec::new();
    let mut timeout = Duration::from_secs(60);
    let mut revision = Revision::Auto;
    let mut blocking = false;
    let mut get_stream = true;
    let mut roots = None;
    let mut headers = Vec::new();
    let mut args = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        let mut value = |what: &str| {
            args.next()
                .ok_or_else(|| BadUsage::Shape(format!("{arg} needs {what}")))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--legacy" => revision = Revision::Era(Era::HttpSse),
            "--revision" => revision = parse_revision(&value("a revision")?)?,
            "--blocking" => blocking = true,
            "--no-get-stream" => get_stream = false,
            "-H" | "--header" => {
                let header = value("'NAME: VALUE'")?;
                headers.push(parse_header(&header)?);
            }
            "--cacert" => {
                let path = value("a PEM file")?;
                let certs = crate::read_pem_certificates("--cacert", &path)?;
                roots = Some(certs.iter().map(|c| c.to_vec()).collect());
            }
            "--timeout-ms" => {
                let v = value("milliseconds")?;
                let ms: u64 = v
                    .parse()
                    .map_err(|_| format!("--timeout-ms: '{v}' is not milliseconds"))?;
                if ms == 0 {
                    return Err(BadUsage::Value(
                        "--timeout-ms: 0 would give up before the server could answer; \
                         give 1 or more milliseconds (default 60000)"
                            .into(),
                    ));
                }
                timeout = Duration::from_millis(ms);
            }
            a if a.starts_with("--") => {
                return Err(BadUsage::Shape(format!("unknown option '{a}'")));
            }
            _ => positional.push(arg),
        }
    }
    let [url, rest @ ..] = &positional[..] else {
        return Err(BadUsage::Shape("needs URL".into()));
    };
    let (tool, rest) = match rest {
        [tool, rest @ ..] => (Some(tool.clone()), rest),
        [] => (None, rest),
    };
    let url: http::Uri = url.parse().map_err(|_| {
        format!("'{url}' is not a URL; give the server's endpoint, e.g. http://127.0.0.1:8080/mcp")
    })?;
    if !matches!(url.scheme_str(), Some("http" | "https")) || url.authority().is_none() {
        return Err(BadUsage::Value(format!(
            "'{url}' is not an http:// or https:// URL; give the server's endpoint, e.g. \
             http://127.0.0.1:8080/mcp"
        )));
    }
    let args = match rest {
        [] => json!({}),
        [json] => json_args(json)?,
        [_, extra @ ..] => {
            let extra: Vec<String> = extra.iter().map(|a| format!("'{a}'")).collect();
            return Err(BadUsage::Value(format!(
                "too many arguments: {} after JSON-ARGS\n{JSON_ARGS_HINT}",
                extra.join(" ")
            )));
        }
    };
    Ok(Some(Options {
        url,
        tool,
        args,
        timeout,
        revision,
        blocking,
        get_stream,
        roots,
        headers,
    }))
}

impl Options {
    /// Whether only the legacy HTTP+SSE transport is spoken (`--legacy`).
    fn legacy(&self) -> bool {
        self.revision == Revision::Era(Era::HttpSse)
    }
}

/// Whether the tools are listed before the call: at 2026-07-28 a tool's `inputSchema`
/// says which arguments its call mirrors into `Mcp-Param-*` headers, and which tools
/// the client must not call at all (MODERN-7).
fn lists_first(options: &Options, era: Era) -> bool {
    options.tool.is_some() && era == Era::Sessionless
}

/// `--revision`'s value.
pub(crate) fn parse_revision(text: &str) -> Result<Revision, BadUsage> {
    match text {
        "auto" => Ok(Revision::Auto),
        "legacy" => Ok(Revision::Era(Era::HttpSse)),
        _ => text
            .parse::<ProtocolVersion>()
            .map(Revision::Exactly)
            .map_err(|_| {
                let known: Vec<&str> = ProtocolVersion::ALL.iter().map(|v| v.as_str()).collect();
                BadUsage::Value(format!(
                    "--revision: '{text}' is not a revision; give auto, legacy or one of {}",
                    known.join(", ")
                ))
            }),
    }
}

/// What JSON-ARGS is, after an error in it.
const JSON_ARGS_HINT: &str = "hint: JSON-ARGS is one argument, a JSON object with its keys \
    and strings in double quotes, in single quotes for the shell: '{\"text\":\"hi\"}'";

/// JSON-ARGS, a JSON object; or the error alone: what is wrong, the input with a caret
/// under the place, and [`JSON_ARGS_HINT`].
fn json_args(input: &str) -> Result<Value, String> {
    if input.trim().is_empty() {
        return Err(format!(
            "JSON-ARGS is empty: give the tool's arguments, or leave JSON-ARGS out for none \
             ({{}})\n{JSON_ARGS_HINT}"
        ));
    }
    match serde_json::from_str::<Value>(input) {
        Ok(args) if args.is_object() => Ok(args),
        Ok(args) => {
            let kind = match args {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "null",
            };
            Err(format!(
                "JSON-ARGS must be a JSON object (the arguments by name), not {kind}:\n    \
                 {input}\n{JSON_ARGS_HINT}"
            ))
        }
        Err(e) => Err(format!(
            "JSON-ARGS is not valid JSON: {e}\n{}{JSON_ARGS_HINT}",
            point_at(input, e.line(), e.column())
        )),
    }
}

/// The `line` (1-based) of `input`, indented, with a caret under its byte `column`
/// (1-based, as serde_json counts; 0 before the first), cut to 40 characters either side
/// of it.
fn point_at(input: &str, line: usize, column: usize) -> String {
    const SIDE: usize = 40;
    let text = input.lines().nth(line.saturating_sub(1)).unwrap_or("");
    let mut end = column.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before: Vec<char> = text[..end].chars().collect();
    // The caret goes under the last character read (the offending one).
    let at = before.len().saturating_sub(1);
    let start = at.saturating_sub(SIDE);
    let shown: String = text.chars().skip(start).take(2 * SIDE + 1).collect();
    let more = text.chars().count() > start + 2 * SIDE + 1;
    let (lead, trail) = (
        if start > 0 { "…" } else { "" },
        if more { "…" } else { "" },
    );
    let pad = " ".repeat(at - start + lead.chars().count());
    format!("    {lead}{shown}{trail}\n    {pad}^\n")
}

/// A `--header` argument, `NAME: VALUE`.
pub(crate) fn parse_header(arg: &str) -> Result<(http::HeaderName, http::HeaderValue), String> {
    let (name, value) = arg.split_once(':').ok_or_else(|| {
        format!("--header: '{arg}' is not 'NAME: VALUE'; give e.g. 'Authorization: Bearer TOKEN'")
    })?;
    let name = http::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
        format!(
            "--header: '{}' is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)",
            name.trim()
        )
    })?;
    let value = http::HeaderValue::from_str(value.trim()).map_err(|_| {
        format!("--header: the value of {name} is not a header value (no line breaks or control characters)")
    })?;
    Ok((name, value))
}

pub(crate) fn main(args: &[OsString]) -> ExitCode {
    let options = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => return print_help(USAGE),
        Err(bad) => return bad.report(PROG, USAGE),
    };
    if options.blocking {
        return run_blocking(&options);
    }
    block_on(PROG, async {
        // The core bounds the handshake and the call (and cancels the call at the server
        // when its time is up); this is the backstop, with time for `close`.
        let backstop = options.timeout + Duration::from_secs(5);
        match tokio::time::timeout(backstop, run(&options)).await {
            Ok(code) => code,
            Err(_) => {
                eprintln!("{PROG}: timed out after {} ms", options.timeout.as_millis());
                eprintln!("{PROG}: {}", timeout_advice(&options));
                ExitCode::FAILURE
            }
        }
    })
}

fn config(options: &Options) -> Config {
    let config = Config::new(options.url.clone())
        .with_revision(options.revision)
        .with_get_stream(options.get_stream)
        .with_client_info("mcpwire-call", env!("CARGO_PKG_VERSION"));
    options
        .headers
        .iter()
        .fold(config, |config, (name, value)| {
            config.with_header(name.clone(), value.clone())
        })
}

/// The error `mcpwire call` answers every server→client request with (-32601): it
/// offers no capabilities, so a server should ask nothing (sampling, elicitation, roots),
/// and one that asks gets an answer at once instead of waiting for ever. (A `ping` is
/// answered by the client core.)
const DECLINE: &str =
    "mcpwire call answers no requests from the server but elicitations (declined) and roots (none)";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What `mcpwire call` does with a server's message: `answer`s a request (a
/// session-era server's, or a 2026-07-28 call's input request: MODERN-23) with
/// [`reply`], and says on stderr which listed tools the client dropped (MODERN-7); the
/// rest it leaves (the call's own progress comes to the call).
fn on_message(
    message: ServerMessage,
    answer: impl FnOnce(&mcpwire::jsonrpc::RequestId, Result<Value, &'static str>),
) {
    match message {
        ServerMessage::Request(r) => {
            if let Some(id) = r.id() {
                answer(id, reply(r.method().unwrap_or_default()));
            }
        }
        ServerMessage::ToolDropped { tool, reason } => {
            eprintln!("{PROG}: the server's tool '{tool}' cannot be called: {reason}");
        }
        _ => {}
    }
}

/// The answer of a command line with no one to ask: an elicitation is declined (the
/// answer its protocol has for a user who says no), no roots are exposed, and anything
/// else (sampling) is refused with [`DECLINE`].
fn reply(method: &str) -> Result<Value, &'static str> {
    match method {
        "elicitation/create" => Ok(json!({"action": "decline"})),
        "roots/list" => Ok(json!({"roots": []})),
        _ => Err(DECLINE),
    }
}

/// Prints a progress notification of the call on stderr: its params, without the token
/// the client chose.
fn print_progress(progress: &Progress) {
    let mut params: Value = progress
        .notification
        .payload()
        .and_then(|p| serde_json::from_str(p.as_str()).ok())
        .unwrap_or_default();
    if let Some(params) = params.as_object_mut() {
        params.remove("progressToken");
    }
    eprintln!("{PROG}: progress {params}");
}

/// Prints the result (or the failure, with what to do about it); the exit status.
fn outcome(options: &Options, result: Result<Value, CallError>) -> ExitCode {
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
            if let Some(advice) = advice(options, &e) {
                eprintln!("{PROG}: {advice}");
            }
            ExitCode::FAILURE
        }
    }
}

/// Reports a handshake that failed, with what to do about it.
fn cannot_connect(options: &Options, e: &RequestError) -> ExitCode {
    eprintln!("{PROG}: cannot connect to {}: {e}", options.url);
    if let Some(advice) = advice(options, e) {
        eprintln!("{PROG}: {advice}");
    }
    ExitCode::FAILURE
}

/// What a failure says, for [`advice`]: a call's, or the handshake's.
trait Failure: std::fmt::Display {
    /// The server's JSON-RPC error, `(code, message)`.
    fn rpc(&self) -> Option<(i64, &str)>;
    /// Why no answer came.
    fn request(&self) -> Option<&RequestError>;
}

impl Failure for RequestError {
    fn rpc(&self) -> Option<(i64, &str)> {
        None
    }

    fn request(&self) -> Option<&RequestError> {
        Some(self)
    }
}

impl Failure for CallError {
    fn rpc(&self) -> Option<(i64, &str)> {
        match self {
            Self::Rpc { code, message, .. } => Some((*code, message)),
            _ => None,
        }
    }

    fn request(&self) -> Option<&RequestError> {
        match self {
            Self::Request(e) => Some(e),
            _ => None,
        }
    }
}

/// `options`' URL with another scheme.
fn with_scheme(options: &Options, scheme: &str) -> String {
    let url = &options.url;
    let rest = url.path_and_query().map_or("/", |p| p.as_str());
    format!("{scheme}://{}{rest}", authority(options))
}

/// `options`' URL with another path.
fn with_path(options: &Options, path: &str) -> String {
    let scheme = options.url.scheme_str().unwrap_or("http");
    format!("{scheme}://{}{path}", authority(options))
}

/// `HOST:PORT` of `options`' URL.
fn authority(options: &Options) -> &str {
    options.url.authority().map_or("", |a| a.as_str())
}

/// The command that lists the server's tools: this one without TOOL and JSON-ARGS.
fn list_command(options: &Options) -> String {
    let mut command = String::from("mcpwire call");
    if options.blocking {
        command.push_str(" --blocking");
    }
    if let Revision::Exactly(version) = options.revision {
        command.push_str(" --revision ");
        command.push_str(version.as_str());
    }
    if options.legacy() {
        command.push_str(" --legacy");
    }
    if !options.headers.is_empty() {
        command.push_str(" -H …");
    }
    format!("{command} {}", options.url)
}

/// What to do after a timeout.
fn timeout_advice(options: &Options) -> String {
    format!(
        "the server did not answer within {} ms: give it longer with --timeout-ms N, or check \
         that the tool ends",
        options.timeout.as_millis()
    )
}

/// What to do about `failure`, when the mistake is a common one: the scheme, the path,
/// `--legacy` on the wrong endpoint, the tool's name or arguments, a missing token, a
/// server that is not running, a timeout.
fn advice(options: &Options, failure: &impl Failure) -> Option<String> {
    let https = options.url.scheme_str() == Some("https");
    let host = authority(options);
    if let Some((code, message)) = failure.rpc() {
        let tool = options.tool.as_deref()?;
        if code != ErrorCode::INVALID_PARAMS.0 {
            return None;
        }
        // mcpwire: `no tool named "x"`; the TypeScript SDK: `Tool x not found`; the Python
        // SDK: `Unknown tool: x`.
        let lower = message.to_lowercase();
        let unknown = lower.contains("no tool")
            || lower.contains("unknown tool")
            || (lower.contains("not found") && message.contains(tool));
        return Some(if unknown {
            format!(
                "the server has no tool '{tool}'; list its tools with: {}",
                list_command(options)
            )
        } else {
            format!(
                "the arguments do not fit the input schema of '{tool}'; list the tools with \
                 their schemas with: {}",
                list_command(options)
            )
        });
    }
    let error = failure.request()?;
    match error {
        RequestError::Connection(cause)
            if https
                && (cause.contains("InvalidContentType") || cause.contains("corrupt message")) =>
        {
            Some(format!(
                "the server at {host} does not speak TLS (its answer was not a TLS handshake); \
                 if it serves plain HTTP, call {}",
                with_scheme(options, "http")
            ))
        }
        RequestError::Connection(cause) if !https && cause.contains("invalid HTTP version") => {
            Some(format!(
                "the server at {host} did not answer in HTTP (a server that speaks TLS answers \
                 plain HTTP so); if it serves https, call {}",
                with_scheme(options, "https")
            ))
        }
        RequestError::Connection(cause) if cause.contains("refused") => Some(format!(
            "nothing listens at {host}: start the server (mcpwire serve listens on \
             127.0.0.1:8080), or check the URL's host and port"
        )),
        RequestError::Http {
            status: 404,
            message,
        } => Some(not_found_advice(options, message)),
        RequestError::Http {
            status: 400 | 405 | 406,
            ..
        } if options.legacy() => Some(format!(
            "{} is not a legacy HTTP+SSE endpoint (it refused the GET that opens one): \
             --legacy needs the server's SSE endpoint (mcpwire serve's: {}), or drop --legacy \
             to speak Streamable HTTP to this URL",
            options.url,
            with_path(options, "/sse")
        )),
        RequestError::Unauthorized { .. } => {
            let sent = options
                .headers
                .iter()
                .any(|(name, _)| name == http::header::AUTHORIZATION);
            Some(if sent {
                "the server refused the Authorization header given with -H: check the token \
                 (the challenge above names where tokens come from)"
                    .into()
            } else {
                "the server wants a token: send it with -H 'Authorization: Bearer TOKEN' (the \
                 challenge above names where tokens come from)"
                    .into()
            })
        }
        RequestError::Timeout => Some(timeout_advice(options)),
        _ => None,
    }
}

/// What to do after a 404: call the path the server names (mcpwire's servers name
/// theirs: "this server's is /mcp (legacy HTTP+SSE: GET /sse)"), or check the path.
fn not_found_advice(options: &Options, message: &str) -> String {
    let named = |after: &str| {
        message.split_once(after).and_then(|(_, rest)| {
            rest.split(|c: char| c.is_whitespace() || c == ')')
                .next()
                .filter(|p| p.starts_with('/'))
                .map(str::to_owned)
        })
    };
    let path = options.url.path();
    let (endpoint, sse) = (named("this server's is "), named("GET "));
    match (options.legacy(), endpoint, sse) {
        (true, _, Some(sse)) => format!(
            "{path} is not an endpoint of this server: its legacy SSE endpoint is {sse}; call \
             that with --legacy: mcpwire call --legacy {}",
            with_path(options, &sse)
        ),
        (_, Some(endpoint), _) => format!(
            "{path} is not an endpoint of this server: call its endpoint, {}",
            with_path(options, &endpoint)
        ),
        _ => format!(
            "{path} is not an MCP endpoint of this server: check the URL's path (the server's \
             documentation names it; mcpwire serve's is /mcp)"
        ),
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
        match McpClient::connect_with(config, Box::new(mcpwire::OsEntropy), connect_options) {
            Ok(c) => c,
            Err(e) => return cannot_connect(options, &e),
        };
    eprintln!(
        "{PROG}: connected ({}, {}, blocking)",
        client.version(),
        client.era()
    );
    // Answers the server's requests while the call runs; dropped after it, so that the
    // client's last clone goes with `close`.
    let responder = Arc::new(Mutex::new(Some(client.clone())));
    // Ends once the client is gone, after every message the server sent before.
    let printer = std::thread::spawn({
        let responder = Arc::clone(&responder);
        move || {
            for message in messages {
                on_message(message, |id, reply| {
                    if let Some(client) = &*lock(&responder) {
                        let _ = match reply {
                            Ok(result) => client.respond(id, result),
                            Err(why) => client.respond_error(id, ErrorCode::METHOD_NOT_FOUND, why),
                        };
                    }
                });
            }
        }
    });
    if lists_first(options, client.era()) {
        let left = options.timeout.saturating_sub(started.elapsed());
        if let Err(e) = client.call_timeout("tools/list", None, left) {
            eprintln!("{PROG}: tools/list before the call failed: {e}");
        }
    }
    let left = options.timeout.saturating_sub(started.elapsed());
    let result = match &options.tool {
        Some(tool) => client
            .start_tool_call(tool, options.args.clone(), Some(left))
            .and_then(|mut call| {
                while let Some(step) = call.progress() {
                    print_progress(&step);
                }
                call.result()
            }),
        None => client.call_timeout("tools/list", None, left),
    };
    lock(&responder).take();
    client.close();
    // Ends once the client is gone, having answered what the server asked.
    let _ = printer.join();
    outcome(options, result)
}

/// The same call on `mcpwire_tokio::client`. As in [`run_blocking`], the overall timeout
/// bounds the handshake (the core's connect timeout) and then the call (its deadline in
/// the core, which tells the server the call is given up).
async fn run(options: &Options) -> ExitCode {
    let started = std::time::Instant::now();
    let config = config(options).with_connect_timeout(options.timeout);
    let mut connect_options = ClientOptions::new();
    if let Some(roots) = &options.roots {
        connect_options = connect_options.with_root_certificates(roots.iter().cloned());
    }
    let (client, mut messages) = match McpClient::connect_with(
        config,
        Box::new(mcpwire::OsEntropy),
        connect_options,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => return cannot_connect(options, &e),
    };
    eprintln!("{PROG}: connected ({}, {})", client.version(), client.era());
    // As in `run_blocking`: answers the server's requests while the call runs.
    let responder = Arc::new(Mutex::new(Some(client.clone())));
    let printer = tokio::spawn({
        let responder = Arc::clone(&responder);
        async move {
            while let Some(message) = messages.recv().await {
                on_message(message, |id, reply| {
                    if let Some(client) = &*lock(&responder) {
                        let _ = match reply {
                            Ok(result) => client.respond(id, result),
                            Err(why) => client.respond_error(id, ErrorCode::METHOD_NOT_FOUND, why),
                        };
                    }
                });
            }
        }
    });
    let left = || options.timeout.saturating_sub(started.elapsed());
    if lists_first(options, client.era())
        && let Err(e) = client.call_timeout("tools/list", None, left()).await
    {
        eprintln!("{PROG}: tools/list before the call failed: {e}");
    }
    let result = match &options.tool {
        Some(tool) => match client.start_tool_call(tool, options.args.clone(), Some(left())) {
            Ok(mut call) => {
                while let Some(step) = call.progress().await {
                    print_progress(&step);
                }
                call.result().await
            }
            Err(e) => Err(e),
        },
        None => client.call_timeout("tools/list", None, left()).await,
    };
    lock(&responder).take();
    client.close().await;
    // Ends once the client's driver has stopped, having answered what the server asked.
    let _ = printer.await;
    outcome(options, result)
}

#[cfg(test)]
mod tests {
    use super::point_at;

    #[test]
    fn the_caret_is_under_the_offending_character_of_its_line() {
        assert_eq!(point_at("{x}", 1, 2), "    {x}\n     ^\n");
        // Columns count bytes; the caret counts characters.
        assert_eq!(point_at("é!", 1, 3), "    é!\n     ^\n");
        // The offending line of several, alone.
        assert_eq!(
            point_at("{\n \"a\":x}", 2, 6),
            "     \"a\":x}\n         ^\n"
        );
        // Column 0 (nothing read): under the first character.
        assert_eq!(point_at("", 1, 0), "    \n    ^\n");
    }

    #[test]
    fn a_long_line_is_cut_to_forty_characters_either_side_of_the_caret() {
        let line = format!("{}!{}", "a".repeat(100), "b".repeat(100));
        let shown = point_at(&line, 1, 101);
        let [text, caret] = shown.lines().collect::<Vec<_>>()[..] else {
            panic!("{shown}")
        };
        assert_eq!(text, format!("    …{}!{}…", "a".repeat(40), "b".repeat(40)));
        assert_eq!(
            caret.chars().count(),
            text.chars().position(|c| c == '!').unwrap() + 1
        );
        assert!(caret.ends_with('^'));
    }
}
