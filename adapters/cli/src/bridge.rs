//! `mcpwire bridge`: a stdio MCP server on HTTP (`--stdio`), in every era the server
//! core serves. What goes where is decided by `mcpwire::bridge::Gateway`; the processes
//! run on `mcpwire_tokio::bridge`.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use mcpwire::bridge::Config as GatewayConfig;
use mcpwire::server::Eras;
use mcpwire_tokio::bridge::{Bridge, BridgeOptions, StdioCommand};
use mcpwire_tokio::server::{ServeOptions, serve_with};

use crate::serve::{Endpoint, Value, read_args, read_options};
use crate::{BadUsage, block_on, print_help};

/// The usage text.
pub(crate) const USAGE: &str = "\
mcpwire bridge: serve a stdio MCP server over HTTP, in every era: 2026-07-28, Streamable
HTTP with sessions (resumable, polling) and legacy HTTP+SSE on one endpoint

Usage: mcpwire bridge --stdio \"CMD ARGS...\" [OPTIONS]
       mcpwire bridge --remote URL [-H 'NAME: VALUE']... [--revision R]

Each session (2025-03-26 ... 2025-11-25, legacy) gets a child process of its own, started
by its initialize; 2026-07-28 requests go to a pool of children initialized once, one
request at a time each. A child's stderr is logged with its session named.

Options:
  --stdio \"CMD ARGS...\" the stdio server's command line (split as a shell would,
                       without running one)
  --pool N             children serving 2026-07-28 requests, started as needed
                       (default 4; 0: none, and such requests fail)
  --max-children N     session children at once (default 256); at the bound an idle
                       session makes room, and with every one active 503
  --stall-ms N         a child silent for N ms while requests wait on it is ended and
                       those requests fail (default 60000)
  --max-queue N        2026-07-28 requests waiting for a pool child (default 1024)
  --addr HOST:PORT     where to listen (default 127.0.0.1:8080; port 0: a free one)
  --path PATH          the Streamable HTTP endpoint (default /mcp)
  --eras LIST          a comma list of 2026, 2025 and legacy (default all three)
  --no-legacy          do not serve GET /sse and POST /messages
  --poll-ms N          SEP-1699 polling: close a stream N ms after it opened
  --retry-ms N         the retry sent in priming events (default 1000)
  --heartbeat-ms N|off a comment on a stream quiet for N ms (default 15000)
  --stream-after-ms N|off
                       answer a request with no answer after N ms as an SSE stream
  --allow-origin O     accept this Origin (repeatable; default: loopback origins)
  --json-response, --sse-response, --handshake-timeout-ms N, --max-connections N,
  --header-timeout-ms N, --idle-timeout-ms N, --no-keep-alive
                       as for mcpwire serve
  -h, --help           print this help

Ctrl-C closes every child's input, then ends it (SIGTERM, then SIGKILL, 2 s apart).

--remote: the other way round. A client that speaks only stdio runs this as its server:
its messages on our stdin, ours on our stdout, and the remote MCP server at URL behind
them, in whatever revision this client negotiates (resuming broken streams, starting a
new session when one expires); the server's requests (sampling, elicitation, roots)
reach the client and its answers go back. Logs go to stderr.
  --remote URL         the remote server's endpoint (http:// or https://; for legacy
                       HTTP+SSE its SSE endpoint, with --revision legacy)
  -H, --header 'NAME: VALUE'
                       send this header with every request (repeatable), e.g.
                       -H 'Authorization: Bearer TOKEN'
  --revision R         auto (default), legacy, or one revision (as for mcpwire call)
";

const PROG: &str = "mcpwire bridge";

/// How long the stdio server may take to answer the pool's first `initialize` (`npx`
/// may download it first).
const READY: Duration = Duration::from_secs(120);

#[derive(Debug)]
struct Options {
    endpoint: Endpoint,
    command: StdioCommand,
    gateway: GatewayConfig,
}

/// `--remote`'s options: the client core's configuration.
#[derive(Debug)]
struct Remote {
    config: mcpwire::client::Config,
}

/// What to run.
#[derive(Debug)]
enum Mode {
    Stdio(Box<Options>),
    Remote(Box<Remote>),
}

fn parse_mode(args: &[OsString]) -> Result<Option<Mode>, BadUsage> {
    if args
        .iter()
        .any(|a| a == "--remote" || a.to_string_lossy().starts_with("--remote="))
    {
        return Ok(parse_remote(args)?.map(|r| Mode::Remote(Box::new(r))));
    }
    Ok(parse(args)?.map(|o| Mode::Stdio(Box::new(o))))
}

fn parse_remote(args: &[OsString]) -> Result<Option<Remote>, BadUsage> {
    let mut url = None;
    let mut revision = mcpwire::client::Revision::Auto;
    let mut headers = Vec::new();
    let read = read_args(args, |name, value| {
        match name {
            "--remote" => url = Some(value("a URL")?),
            "--revision" => revision = crate::call::parse_revision(&value("a revision")?)?,
            "-H" | "--header" => {
                headers.push(crate::call::parse_header(&value("'NAME: VALUE'")?)?);
            }
            "--stdio" => {
                return Err(BadUsage::Shape(
                    "--stdio and --remote go different ways: give one".into(),
                ));
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if read.is_none() {
        return Ok(None);
    }
    let url = url.unwrap_or_default();
    let uri: http::Uri = url
        .parse()
        .ok()
        .filter(|u: &http::Uri| matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some())
        .ok_or_else(|| {
            format!("--remote: '{url}' is not an http:// or https:// URL, e.g. http://127.0.0.1:8080/mcp")
        })?;
    let config = headers.into_iter().fold(
        mcpwire::client::Config::new(uri).with_revision(revision),
        |config, (name, value)| config.with_header(name, value),
    );
    Ok(Some(Remote { config }))
}

fn parse(args: &[OsString]) -> Result<Option<Options>, BadUsage> {
    let mut endpoint = Endpoint::new();
    let mut command = None;
    let mut gateway = GatewayConfig::new();
    let mut max_children = None;
    let read =
        read_options(args, &mut endpoint, |name, value: &mut Value<'_>| {
            match name {
                "--stdio" => {
                    command = Some(
                        StdioCommand::parse(&value("a command line")?)
                            .map_err(|e| BadUsage::Value(format!("--stdio: {e}")))?,
                    );
                }
                "--pool" => {
                    let v = value("a count")?;
                    let n = v
                        .parse()
                        .map_err(|_| format!("--pool: '{v}' is not a count (default 4)"))?;
                    gateway = std::mem::take(&mut gateway).with_pool(n);
                }
                "--max-children" => {
                    let v = value("a count")?;
                    let n =
                        v.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                            format!("--max-children: '{v}' is not a count from 1")
                        })?;
                    max_children = Some(n);
                }
                "--max-queue" => {
                    let v = value("a count")?;
                    let n = v
                        .parse()
                        .map_err(|_| format!("--max-queue: '{v}' is not a count"))?;
                    gateway = std::mem::take(&mut gateway).with_max_waiting(n);
                }
                "--stall-ms" => {
                    let v = value("milliseconds")?;
                    let ms: u64 =
                        v.parse().ok().filter(|ms| *ms >= 1).ok_or_else(|| {
                            format!("--stall-ms: '{v}' is not milliseconds from 1")
                        })?;
                    gateway = std::mem::take(&mut gateway).with_stall(Duration::from_millis(ms));
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
    if read.is_none() {
        return Ok(None);
    }
    let Some(command) = command else {
        return Err(BadUsage::Shape(
            "give the stdio server to serve: --stdio \"CMD ARGS...\"".into(),
        ));
    };
    let mut endpoint = endpoint.finish()?;
    if !endpoint.config.eras().contains(Eras::MODERN) {
        gateway = gateway.with_pool(0);
    }
    let children = max_children.unwrap_or(gateway.max_children());
    gateway = gateway.with_max_children(children);
    // At the bound an idle session's place (and child) goes to a new one.
    endpoint.config = std::mem::take(&mut endpoint.config).with_max_sessions(children);
    Ok(Some(Options {
        endpoint,
        command,
        gateway,
    }))
}

pub(crate) fn main(args: &[OsString]) -> ExitCode {
    match parse_mode(args) {
        Ok(Some(Mode::Stdio(options))) => block_on(PROG, run(*options)),
        Ok(Some(Mode::Remote(remote))) => block_on(PROG, run_remote(*remote)),
        Ok(None) => print_help(USAGE),
        Err(bad) => bad.report(PROG, USAGE),
    }
}

async fn run(options: Options) -> ExitCode {
    let Options {
        endpoint,
        command,
        gateway,
    } = options;
    let listener = match tokio::net::TcpListener::bind(&endpoint.addrs[..]).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{PROG}: cannot listen on {}: {e}", endpoint.addr_text);
            return ExitCode::FAILURE;
        }
    };
    let addr = listener.local_addr().unwrap_or(endpoint.addrs[0]);
    let path = endpoint.config.endpoint().to_owned();
    let log: mcpwire_tokio::bridge::Log =
        Arc::new(|line: &str| crate::log::line(format!("{PROG}: {line}")));
    let bridge = Bridge::new(
        endpoint.config,
        Box::new(mcpwire::OsEntropy),
        command.clone(),
        BridgeOptions::new()
            .with_gateway(gateway)
            .with_log(Arc::clone(&log)),
    );
    if let Err(e) = bridge.ready(READY).await {
        eprintln!(
            "{PROG}: the stdio server {:?} did not start: {e}",
            command.program()
        );
        bridge.shutdown(Duration::from_secs(5)).await;
        return ExitCode::FAILURE;
    }
    let serving = ServeOptions::new()
        .with_limits(endpoint.limits)
        .with_keep_alive(endpoint.keep_alive)
        .with_log(Arc::clone(&log));
    let interrupt = crate::serve::interrupt().await;
    eprintln!("{PROG}: listening on http://{addr}{path}");
    let mut served = tokio::spawn(serve_with(listener, bridge.service().clone(), serving));
    tokio::select! {
        _ = interrupt => {
            eprintln!("{PROG}: shutting down");
            bridge.shutdown(Duration::from_secs(6)).await;
            served.abort();
            ExitCode::SUCCESS
        }
        _ = &mut served => {
            eprintln!("{PROG}: the server stopped");
            ExitCode::FAILURE
        }
    }
}

/// `--remote`: our stdin and stdout are the local client's; the remote server behind.
async fn run_remote(remote: Remote) -> ExitCode {
    let log: mcpwire_tokio::bridge::Log =
        Arc::new(|line: &str| crate::log::line(format!("{PROG}: {line}")));
    let relayed =
        mcpwire_tokio::bridge::relay(remote.config, tokio::io::stdin(), tokio::io::stdout(), log);
    let interrupt = crate::serve::interrupt().await;
    tokio::select! {
        done = relayed => match done {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{PROG}: the local client went away: {e}");
                ExitCode::FAILURE
            }
        },
        _ = interrupt => ExitCode::SUCCESS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn bridge_options_are_read_and_refused_clearly() {
        let options = parse(&args(&[
            "--stdio",
            "node server.js --x",
            "--pool",
            "2",
            "--max-children=8",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(options.command.program(), "node");
        assert_eq!(options.gateway.pool(), 2);
        assert_eq!(options.gateway.max_children(), 8);
        let no_modern = parse(&args(&["--stdio", "x", "--eras", "2025,legacy"]))
            .unwrap()
            .unwrap();
        assert_eq!(no_modern.gateway.pool(), 0, "no 2026-07-28: no pool");
        let missing = parse(&args(&["--pool", "2"])).unwrap_err();
        assert!(missing.message().contains("--stdio"), "{missing:?}");
        let open = parse(&args(&["--stdio", "node 'x"])).unwrap_err();
        assert!(open.message().contains("left open"), "{open:?}");
        let remote = parse_mode(&args(&[
            "--remote",
            "http://127.0.0.1:1/mcp",
            "-H",
            "Authorization: Bearer t",
            "--revision",
            "legacy",
        ]))
        .unwrap()
        .unwrap();
        assert!(matches!(remote, Mode::Remote(_)));
        let both = parse_mode(&args(&["--remote", "http://x/mcp", "--stdio", "y"])).unwrap_err();
        assert!(both.message().contains("give one"), "{both:?}");
        let bad = parse_mode(&args(&["--remote", "ftp://x"])).unwrap_err();
        assert!(bad.message().contains("not an http"), "{bad:?}");
    }
}
