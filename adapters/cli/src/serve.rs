//! `mcpwire serve`: a reference MCP server on the core, through `mcpwire-tokio`, or
//! through `mcpwire-blocking` with `--blocking`.
//!
//! Tools: `echo {text}` returns the text; `slow_count {n, delay_ms}` sends one
//! `notifications/progress` per step (when the request carries a progress token) and
//! then its count. Loopback only by default; one log line per session event on stderr.

use std::ffi::OsString;
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Duration;

use mcpwire::conn::Limits;
use mcpwire::mirror::ToolMirrors;
use mcpwire::server::{Allow, Config, Eras, Event, LegacyPaths, NodeId, ResponseMode, SessionMode};
use mcpwire_redis::{RedisEvent, RedisOptions, RedisStore};
use mcpwire_tokio::app::{self, CallError, Tools, text_result};
use mcpwire_tokio::server::{ServeOptions, serve_tls_with, serve_with};
use serde::Deserialize;
use serde_json::json;

use crate::{BadUsage, block_on, print_help};

/// The usage text.
pub(crate) const USAGE: &str = "\
mcpwire serve: a reference MCP server (2026-07-28, Streamable HTTP with sessions, and legacy
HTTP+SSE beside them, the era decided per request)

Usage: mcpwire serve [OPTIONS]

Options:
  --addr HOST:PORT     where to listen: an IP address or a host name, e.g.
                       localhost:8080 (default 127.0.0.1:8080; loopback only unless
                       you name another; port 0: a free one)
  --path PATH          the Streamable HTTP endpoint, starting with / (default /mcp)
  --json-response      answer every request with one JSON body
  --sse-response       answer every request with an SSE stream
  --stateless          no sessions: every POST stands alone
  --poll-ms N          SEP-1699 polling: close a stream N ms after it opened (2025-11-25;
                       0: right after its priming event)
  --retry-ms N         the retry sent in priming events (default 1000; 0: at once)
  --max-sessions N     sessions open at once, 1 or more (default 10000); at the bound an
                       idle session makes room, and with every one active 503
  --max-sessions-per-peer N
                       sessions one client address holds, 1 or more (default: no cap;
                       not behind a proxy, where every client has its address)
  --handshake-timeout-ms N
                       a session whose client never comes back after initialize
                       expires after N ms (default 10000)
  --heartbeat-ms N|off a comment on a stream quiet for N ms (default 15000); keep it
                       below a proxy's read timeout
  --stream-after-ms N|off
                       answer a request with no answer after N ms as an SSE stream
                       (default 1000), so its head, then heartbeats, reach a proxy
  --max-connections N  connections open at once, 1 or more (default 1024); at the bound
                       the oldest idle one is closed for a new one
  --header-timeout-ms N
                       a request head must arrive within N ms of its first byte
                       (default 10000)
  --idle-timeout-ms N  a connection waiting for a request is closed after N ms
                       (default 60000)
  --eras LIST          the protocol generations served on the endpoint, a comma list of
                       2026 (the sessionless revision 2026-07-28), 2025 (Streamable HTTP
                       with sessions, 2025-03-26 … 2025-11-25) and legacy (HTTP+SSE,
                       2024-11-05: GET /sse and POST /messages); default all three
  --no-legacy          do not serve GET /sse and POST /messages (as --eras without legacy)
  --allow-origin O     accept this Origin (repeatable; default: loopback origins)
  --shards N           split the sessions between N cores, each behind its own lock
                       (tokio; default: 4 per CPU, at most 256)
  --conformance        serve the MCP conformance suite's fixture instead of the tools below
  --blocking           serve on a pool of blocking threads (mcpwire-blocking) instead
                       of tokio; the same core and the same tools
  --tls-cert FILE      serve https: the certificate chain (PEM, the server's first)
  --tls-key FILE       and its private key (PEM: PKCS#8, PKCS#1 or SEC1); tokio only
  --store URL          one node of a cluster: share sessions, resumable streams and
                       notifications with every node given the same redis://HOST:PORT
                       (Redis 6.2 or newer; tokio; default: none, all in this process)
  --node-id N          this node's number in the cluster, 0 to 65535, one per node
                       (default: drawn at random)
  --no-keep-alive      close each connection after its response (tokio), so a load
                       balancer that balances connections balances every request
  -h, --help           print this help

Tools: echo {text}; slow_count {n, delay_ms} (progress per step).
";

const PROG: &str = "mcpwire serve";

#[derive(Debug)]
struct Options {
    /// `--addr` as given, for messages.
    addr_text: String,
    /// What `--addr` resolved to, IPv4 first; bound in turn until one succeeds.
    addrs: Vec<SocketAddr>,
    config: Config,
    conformance: bool,
    blocking: bool,
    /// `None`: the default, 4 per CPU.
    shards: Option<usize>,
    /// `--tls-cert` and `--tls-key`, read: serve https.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// `--max-connections`, `--header-timeout-ms`, `--idle-timeout-ms`.
    limits: Limits,
    /// `--store`: the shared store's URL.
    store: Option<String>,
    /// `--no-keep-alive`.
    keep_alive: bool,
}

/// The options of the HTTP endpoint, shared by `mcpwire serve` and `mcpwire bridge`:
/// where it listens, what it serves, its timeouts and bounds.
#[derive(Debug)]
pub(crate) struct Endpoint {
    /// `--addr` as given, for messages.
    pub(crate) addr_text: String,
    /// What `--addr` resolved to, IPv4 first; bound in turn until one succeeds.
    pub(crate) addrs: Vec<SocketAddr>,
    path: String,
    legacy: bool,
    pub(crate) config: Config,
    origins: Vec<String>,
    /// `--max-connections`, `--header-timeout-ms`, `--idle-timeout-ms`.
    pub(crate) limits: Limits,
    /// `--no-keep-alive`.
    pub(crate) keep_alive: bool,
}

/// Gives the value of the option being read (inline after `=`, or the next argument).
pub(crate) type Value<'a> = dyn FnMut(&str) -> Result<String, BadUsage> + 'a;

impl Endpoint {
    /// The defaults: 127.0.0.1:8080, `/mcp`, every era, legacy beside it.
    pub(crate) fn new() -> Self {
        Self {
            addr_text: String::from("127.0.0.1:8080"),
            addrs: vec!["127.0.0.1:8080".parse().expect("a valid address")],
            path: String::from("/mcp"),
            legacy: true,
            config: Config::new().with_response_mode(ResponseMode::Auto),
            origins: Vec::new(),
            limits: Limits::new(),
            keep_alive: true,
        }
    }

    /// Takes the option `name` if it is one of the endpoint's; `Ok(false)` if not.
    pub(crate) fn option(&mut self, name: &str, value: &mut Value<'_>) -> Result<bool, BadUsage> {
        let config = std::mem::take(&mut self.config);
        self.config = match name {
            "--addr" => {
                self.addr_text = value("an address")?;
                self.addrs = resolve(&self.addr_text)?;
                config
            }
            "--path" => {
                self.path = value("a path")?;
                config
            }
            "--json-response" => config.with_response_mode(ResponseMode::Json),
            "--sse-response" => config.with_response_mode(ResponseMode::Sse),
            "--no-legacy" => {
                self.legacy = false;
                config
            }
            "--eras" => {
                let (eras, with_legacy) = eras(&value("a list of eras")?)?;
                self.legacy = with_legacy;
                config.with_eras(eras)
            }
            "--poll-ms" | "--retry-ms" => {
                let v = value("milliseconds")?;
                let d = Duration::from_millis(milliseconds(name, &v)?);
                if name == "--poll-ms" {
                    config
                        .with_polling(Some(d))
                        .with_response_mode(ResponseMode::Sse)
                } else {
                    config.with_retry(Some(d))
                }
            }
            "--max-sessions" => {
                let v = value("a count")?;
                let n = count(name, &v, "the sessions open at once; default 10000")?;
                config.with_max_sessions(n)
            }
            "--max-sessions-per-peer" => {
                let v = value("a count")?;
                let n = count(
                    name,
                    &v,
                    "the sessions of one client address; default: no cap",
                )?;
                config.with_max_sessions_per_peer(Some(n))
            }
            "--max-connections" => {
                let v = value("a count")?;
                let n = count(name, &v, "the connections open at once; default 1024")?;
                self.limits = self.limits.with_max_connections(n);
                config
            }
            "--handshake-timeout-ms" | "--header-timeout-ms" | "--idle-timeout-ms" => {
                let v = value("milliseconds")?;
                let ms = milliseconds(name, &v)?;
                if ms == 0 {
                    self.config = config;
                    return Err(BadUsage::Value(format!(
                        "{name}: 0 would close everything at once; give milliseconds from 1"
                    )));
                }
                let d = Duration::from_millis(ms);
                match name {
                    "--handshake-timeout-ms" => config.with_handshake_timeout(d),
                    "--header-timeout-ms" => {
                        self.limits = self.limits.with_header_timeout(d);
                        config
                    }
                    _ => {
                        self.limits = self.limits.with_idle_timeout(d);
                        config
                    }
                }
            }
            "--heartbeat-ms" | "--stream-after-ms" => {
                let v = value("milliseconds or off")?;
                let d = if v == "off" {
                    None
                } else {
                    Some(Duration::from_millis(milliseconds(name, &v)?))
                };
                if name == "--heartbeat-ms" {
                    if d.is_some_and(|d| d.is_zero()) {
                        self.config = config;
                        return Err(BadUsage::Value(
                            "--heartbeat-ms: 0 would send heartbeats without pause; give \
                             milliseconds from 1, or off"
                                .into(),
                        ));
                    }
                    config.with_heartbeat(d)
                } else {
                    config.with_stream_after(d)
                }
            }
            "--allow-origin" => {
                self.origins.push(value("an origin")?);
                config
            }
            "--no-keep-alive" => {
                self.keep_alive = false;
                config
            }
            _ => {
                self.config = config;
                return Ok(false);
            }
        };
        Ok(true)
    }

    /// The server's configuration from the options read.
    pub(crate) fn finish(mut self) -> Result<Self, BadUsage> {
        check_path(&self.path, self.legacy)?;
        let legacy = self.legacy.then(LegacyPaths::default);
        let mut config = std::mem::take(&mut self.config)
            .with_endpoint(self.path.clone())
            .with_legacy(legacy);
        if !self.origins.is_empty() {
            config = config.with_origins(Allow::List(std::mem::take(&mut self.origins)));
        }
        if self.addrs.iter().any(|a| !a.ip().is_loopback()) {
            // Reached by name from elsewhere: the Host check must not pin it to loopback.
            config = config.with_hosts(Allow::Any);
        }
        self.config = config;
        Ok(self)
    }
}

/// Reads `args` as options, each either the endpoint's or taken by `other`; `Ok(None)`
/// for `--help`.
pub(crate) fn read_options(
    args: &[OsString],
    endpoint: &mut Endpoint,
    mut other: impl FnMut(&str, &mut Value<'_>) -> Result<bool, BadUsage>,
) -> Result<Option<()>, BadUsage> {
    read_args(args, |name, value| {
        Ok(endpoint.option(name, value)? || other(name, value)?)
    })
}

/// Reads `args` as options (`--name value`, `--name=value`, or a flag), each handed to
/// `take` with what gives its value; one `take` does not know is an error. `Ok(None)`
/// for `--help`.
pub(crate) fn read_args(
    args: &[OsString],
    mut take: impl FnMut(&str, &mut Value<'_>) -> Result<bool, BadUsage>,
) -> Result<Option<()>, BadUsage> {
    let mut args = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = |what: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| BadUsage::Shape(format!("{name} needs {what}")))
        };
        if matches!(name.as_str(), "-h" | "--help") {
            return Ok(None);
        }
        if !take(&name, &mut value)? {
            return Err(BadUsage::Shape(format!("unknown option '{arg}'")));
        }
    }
    Ok(Some(()))
}

fn parse(args: &[OsString]) -> Result<Option<Options>, BadUsage> {
    let mut endpoint = Endpoint::new();
    let mut conformance = false;
    let mut blocking = false;
    let mut stateless = false;
    let mut shards = None;
    let (mut tls_cert, mut tls_key) = (None, None);
    let (mut store, mut node) = (None, None);
    let read = read_options(args, &mut endpoint, |name, value| {
        match name {
            "--stateless" => stateless = true,
            "--shards" => {
                let v = value("a count")?;
                shards = Some(
                    v.parse()
                        .ok()
                        .filter(|n| (1..=256).contains(n))
                        .ok_or_else(|| {
                            format!(
                                "--shards: '{v}' is not a count from 1 to 256 (default: 4 per \
                                 CPU)"
                            )
                        })?,
                );
            }
            "--conformance" => conformance = true,
            "--blocking" => blocking = true,
            "--tls-cert" => tls_cert = Some(value("a PEM file")?),
            "--tls-key" => tls_key = Some(value("a PEM file")?),
            "--store" => store = Some(store_url(&value("a redis:// URL")?)?),
            "--node-id" => {
                let v = value("a number")?;
                let n = v.parse::<u16>().map_err(|_| {
                    format!("--node-id: '{v}' is not a node number from 0 to 65535")
                })?;
                node = Some(NodeId::new(n));
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if read.is_none() {
        return Ok(None);
    }
    let Endpoint {
        addr_text,
        addrs,
        mut config,
        limits,
        keep_alive,
        ..
    } = endpoint.finish()?;
    if stateless {
        config = config.with_sessions(SessionMode::Stateless);
    }
    if !keep_alive && blocking {
        return Err(BadUsage::Value(
            "--no-keep-alive is for the tokio adapter: drop --blocking".into(),
        ));
    }
    if store.is_some() && blocking {
        return Err(BadUsage::Value(
            "--store is served by the tokio adapter only: drop --blocking".into(),
        ));
    }
    if node.is_some() && store.is_none() {
        return Err(BadUsage::Value(
            "--node-id names a node of a cluster: give --store too".into(),
        ));
    }
    if store.is_some() {
        let node = node.unwrap_or_else(|| {
            let mut raw = [0; 2];
            mcpwire::Entropy::fill(&mut mcpwire::OsEntropy, &mut raw);
            NodeId::new(u16::from_le_bytes(raw))
        });
        config = config.with_node(Some(node));
    }
    if shards.is_some() && blocking {
        return Err(BadUsage::Value(
            "--shards is for the tokio adapter (the blocking one has one core): drop one of \
             --shards and --blocking"
                .into(),
        ));
    }
    let tls = match (tls_cert, tls_key) {
        (None, None) => None,
        (Some(cert), Some(key)) if !blocking => Some(tls_config(&cert, &key)?),
        (Some(_), Some(_)) => {
            return Err(BadUsage::Value(
                "--tls-cert is served by the tokio adapter only: drop --blocking".into(),
            ));
        }
        _ => {
            return Err(BadUsage::Value(
                "--tls-cert and --tls-key go together: give both, or neither for http".into(),
            ));
        }
    };
    config = config.with_tool_mirrors(tool_mirrors(conformance));
    Ok(Some(Options {
        addr_text,
        addrs,
        config,
        conformance,
        blocking,
        shards,
        tls,
        limits,
        store,
        keep_alive,
    }))
}

/// What became of the store, for the log.
fn store_event(event: &RedisEvent) -> String {
    match event {
        RedisEvent::Unavailable(e) => {
            format!("unavailable ({e}): requests that need it get 503 until it returns")
        }
        RedisEvent::Recovered => "available again".into(),
        RedisEvent::CommandFailed(e) => format!("a command failed: {e}"),
        RedisEvent::SubscriberLost(e) => format!("notices lost ({e}); reconnecting"),
        RedisEvent::SubscriberRecovered => "notices back".into(),
        other => format!("{other:?}"),
    }
}

/// `--store`: a `redis://` URL.
fn store_url(url: &str) -> Result<String, String> {
    if url.starts_with("redis://") {
        Ok(url.to_owned())
    } else {
        Err(format!(
            "--store: '{url}' is not a redis:// URL; give redis://HOST:PORT, e.g. \
             redis://127.0.0.1:6379"
        ))
    }
}

/// A count of `--NAME`: 1 or more.
fn count(name: &str, v: &str, what: &str) -> Result<usize, String> {
    v.parse()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("{name}: '{v}' is not a count of 1 or more ({what})"))
}

/// The addresses of `--addr HOST:PORT`: an IP address (`127.0.0.1:8080`, `[::1]:8080`)
/// or a host name (`localhost:8080`), resolved; IPv4 first, so that `localhost` serves
/// the `127.0.0.1` URLs this tool prints and documents.
fn resolve(addr: &str) -> Result<Vec<SocketAddr>, String> {
    let example = "e.g. 127.0.0.1:8080, localhost:8080 or [::1]:8080";
    if let Ok(addr) = addr.parse::<SocketAddr>() {
        return Ok(vec![addr]);
    }
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!(
            "--addr: '{addr}' has no port; give HOST:PORT, {example}"
        ));
    };
    if host.is_empty() {
        return Err(format!(
            "--addr: '{addr}' has no host; give HOST:PORT, {example} (0.0.0.0:PORT for every \
             interface)"
        ));
    }
    if port.parse::<u16>().is_err() {
        return Err(format!(
            "--addr: '{port}' is not a port: give 1 to 65535, or 0 for a free one ({example})"
        ));
    }
    let mut addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| format!("--addr: cannot resolve '{host}': {e}; give an IP address or a known host name, {example}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!(
            "--addr: '{host}' has no address; give an IP address, {example}"
        ));
    }
    addrs.sort_by_key(SocketAddr::is_ipv6);
    Ok(addrs)
}

/// `--eras LIST`: the eras of the endpoint, and whether the legacy paths are served.
fn eras(list: &str) -> Result<(Eras, bool), String> {
    let (mut eras, mut legacy) = (None::<Eras>, false);
    for name in list.split(',').map(str::trim) {
        let era = match name {
            "2026" | "2026-07-28" => Eras::MODERN,
            "2025" => Eras::SESSIONS,
            "legacy" | "2024-11-05" => {
                legacy = true;
                continue;
            }
            other => {
                return Err(format!(
                    "--eras: '{other}' is not an era: name 2026, 2025 or legacy, comma-separated"
                ));
            }
        };
        eras = Some(eras.map_or(era, |e| e | era));
    }
    let eras = eras.ok_or_else(|| {
        format!("--eras: '{list}' names neither 2026 nor 2025: the endpoint needs one of them")
    })?;
    Ok((eras, legacy))
}

/// `--path PATH`: what a request's path can equal, and not one of the legacy paths
/// served beside it (the legacy routes would take its requests).
fn check_path(path: &str, legacy: bool) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!(
            "--path: '{path}' does not start with '/'; give the endpoint's path as in a URL, \
             e.g. /{path}",
            path = path.trim_start_matches('/')
        ));
    }
    let valid = path
        .parse::<http::uri::PathAndQuery>()
        .is_ok_and(|p| p.as_str() == path);
    if !valid || path.contains(['?', '#']) {
        return Err(format!(
            "--path: '{path}' is not a URL path (no spaces, '?' or '#'; no query: requests \
             are matched by their path alone), e.g. /mcp"
        ));
    }
    let defaults = LegacyPaths::default();
    if legacy && (path == defaults.sse || path == defaults.messages) {
        return Err(format!(
            "--path: {path} is a path of the legacy HTTP+SSE transport, served beside the \
             endpoint (GET {}, POST {}): choose another path, or add --no-legacy",
            defaults.sse, defaults.messages
        ));
    }
    Ok(())
}

/// The milliseconds of a `--…-ms` option: 0 to one day.
fn milliseconds(name: &str, v: &str) -> Result<u64, String> {
    const DAY_MS: u64 = 24 * 60 * 60 * 1000;
    v.parse()
        .ok()
        .filter(|ms| *ms <= DAY_MS)
        .ok_or_else(|| format!("{name}: '{v}' is not milliseconds from 0 to {DAY_MS} (a day)"))
}

/// The TLS configuration of `--tls-cert CERT --tls-key KEY`: rustls on aws-lc-rs, its
/// safe default versions, HTTP/1.1 offered in ALPN.
fn tls_config(cert: &str, key: &str) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls_pki_types::PrivateKeyDer;
    use rustls_pki_types::pem::PemObject;
    let chain = crate::read_pem_certificates("--tls-cert", cert)?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("--tls-key: no private key read from {key}: {e}"))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("--tls-cert and --tls-key do not fit: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[derive(Deserialize)]
struct Echo {
    text: String,
}

#[derive(Deserialize)]
struct SlowCount {
    n: u32,
    #[serde(default)]
    delay_ms: u64,
}

/// The [`Config`] `mcpwire serve ARGS` serves with: the options parsed as the command
/// parses them (`--addr` changes it only for a non-loopback address, which admits any
/// `Host`; `--blocking` and `--conformance` choose the driver and the handler, and
/// `--conformance` the served tools' mirrored arguments, MODERN-7).
///
/// # Errors
/// The usage error `mcpwire serve` would print, or a note that `--help` asks for no
/// server.
pub fn config<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Result<Config, String> {
    let args: Vec<OsString> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    match parse(&args).map_err(|bad| bad.message().to_owned())? {
        Some(options) => Ok(options.config),
        None => Err("--help asks for no server".into()),
    }
}

/// `echo`'s input schema.
fn echo_schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

/// `slow_count`'s input schema.
fn slow_count_schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"n": {"type": "integer"}, "delay_ms": {"type": "integer"}}, "required": ["n"]})
}

/// The served tools' mirrored arguments (MODERN-7), which the core checks a 2026-07-28
/// `tools/call`'s `Mcp-Param-*` headers against: the conformance fixture's with
/// `--conformance` (its `test_x_mcp_header`), else the reference tools' (none mirror an
/// argument today; the table follows their schemas if one comes to).
///
/// # Panics
///
/// If a served tool's annotations are invalid: fixed schemas, which the tests read.
fn tool_mirrors(conformance: bool) -> ToolMirrors {
    let schemas = if conformance {
        crate::conformance::tool_schemas()
    } else {
        vec![("echo", echo_schema()), ("slow_count", slow_count_schema())]
    };
    ToolMirrors::from_schemas(schemas.iter().map(|(name, schema)| (*name, schema)))
        .unwrap_or_else(|e| panic!("a served tool's x-mcp-header annotation: {e}"))
}

/// The reference tools on `mcpwire-tokio`: `echo {text}` returns its text; `slow_count
/// {n, delay_ms}` sends one `notifications/progress` per step, `delay_ms` apart, when the
/// request carries a progress token, and then answers its count (`n` at most 10,000).
pub fn tools() -> Tools {
    Tools::new()
        .with_server_info("mcpwire", env!("CARGO_PKG_VERSION"))
        .with_tool(
            "echo",
            "Returns its text.",
            echo_schema(),
            |_call, args: Echo| async move { Ok(text_result(&args.text)) },
        )
        .with_tool(
            "slow_count",
            "Counts to n, one progress notification per step, delay_ms apart.",
            slow_count_schema(),
            |call, args: SlowCount| async move {
                if args.n > 10_000 {
                    return Err(CallError::invalid_params("n is at most 10000"));
                }
                for step in 1..=args.n {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(args.delay_ms)) => {}
                        () = call.cancelled() => return Err(CallError::invalid_params("cancelled")),
                    }
                    let _ = call.progress(f64::from(step), Some(f64::from(args.n)));
                }
                Ok(text_result(&args.n.to_string()))
            },
        )
}

/// The reference tools on `mcpwire-blocking`: the same two as [`tools`], with blocking
/// waits.
pub fn blocking_tools() -> mcpwire_blocking::app::Tools {
    use mcpwire_blocking::app::{CallError, Tools, text_result};
    Tools::new()
        .with_server_info("mcpwire", env!("CARGO_PKG_VERSION"))
        .with_tool(
            "echo",
            "Returns its text.",
            echo_schema(),
            |_call, args: Echo| Ok(text_result(&args.text)),
        )
        .with_tool(
            "slow_count",
            "Counts to n, one progress notification per step, delay_ms apart.",
            slow_count_schema(),
            |call, args: SlowCount| {
                if args.n > 10_000 {
                    return Err(CallError::invalid_params("n is at most 10000"));
                }
                for step in 1..=args.n {
                    // Slept in slices, so a cancel is seen within 10 ms.
                    let until = std::time::Instant::now() + Duration::from_millis(args.delay_ms);
                    while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
                        if call.is_cancelled() {
                            return Err(CallError::invalid_params("cancelled"));
                        }
                        std::thread::sleep(left.min(Duration::from_millis(10)));
                    }
                    let _ = call.progress(f64::from(step), Some(f64::from(args.n)));
                }
                Ok(text_result(&args.n.to_string()))
            },
        )
}

pub(crate) fn main(args: &[OsString]) -> ExitCode {
    match parse(args) {
        Ok(Some(options)) if options.blocking => run_blocking(options),
        Ok(Some(options)) => block_on(PROG, run(options)),
        Ok(None) => print_help(USAGE),
        Err(bad) => bad.report(PROG, USAGE),
    }
}

async fn run(options: Options) -> ExitCode {
    // A node of a cluster needs its store before it serves anything.
    let store = match &options.store {
        Some(url) => {
            let on_event = RedisOptions::new().with_on_event(|event: &RedisEvent| {
                crate::log::line(format!("{PROG}: store: {}", store_event(event)));
            });
            // Every node seals `requestState` with the cluster's key, so that a
            // multi round-trip retry may reach any node.
            let shared = async {
                let mut store = RedisStore::connect(url, on_event).await?;
                let key = store.state_key(&mut mcpwire::OsEntropy).await?;
                Ok::<_, mcpwire_redis::RedisStoreError>((store, key))
            };
            match shared.await {
                Ok(shared) => Some(shared),
                Err(e) => {
                    eprintln!("{PROG}: --store {url}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        None => None,
    };
    let (store, settings) = match store {
        Some((store, key)) => (Some(store), app::Settings::new().with_state_key(key)),
        None => (None, app::Settings::new()),
    };
    let listener = match tokio::net::TcpListener::bind(&options.addrs[..]).await {
        Ok(l) => l,
        Err(e) => return cannot_listen(&options, &e),
    };
    let addr = listener.local_addr().unwrap_or(options.addrs[0]);
    let path = options.config.endpoint().to_owned();
    let handler: Arc<dyn app::Handler> = if options.conformance {
        Arc::new(crate::conformance::on_tokio::Fixture(Arc::default()))
    } else {
        Arc::new(tools())
    };
    let shards = options.shards.unwrap_or_else(|| {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        (cpus * 4).min(256)
    });
    let handler = Arc::new(Logged(handler, OnceLock::new()));
    let node = options.config.node();
    let service = app::mount_sharded_with(
        shards,
        options.config,
        Box::new(mcpwire::OsEntropy),
        Arc::clone(&handler) as Arc<dyn app::Handler>,
        &settings,
    );
    // Said after the address, which is the first line (tests and scripts read it).
    let cluster = store.zip(node).map(|(store, node)| {
        let line = format!("{PROG}: {node} of the cluster sharing {}", store.addr());
        tokio::spawn(store.run(service.store_link()));
        line
    });
    let serving = ServeOptions::new()
        .with_limits(options.limits)
        .with_keep_alive(options.keep_alive)
        .with_log(Arc::new(|line: &str| {
            crate::log::line(format!("{PROG}: {line}"))
        }));
    let interrupt = interrupt().await;
    let served = match options.tls {
        Some(tls) => {
            eprintln!("{PROG}: listening on https://{addr}{path}");
            tokio::spawn(serve_tls_with(listener, tls, service.clone(), serving))
        }
        None => {
            eprintln!("{PROG}: listening on http://{addr}{path}");
            tokio::spawn(serve_with(listener, service.clone(), serving))
        }
    };
    if let Some(line) = cluster {
        eprintln!("{line}");
    }
    tokio::select! {
        _ = interrupt => {
            eprintln!("{PROG}: shutting down");
            if let Some(app) = handler.1.get() {
                app.end_listens();
            }
            for shard in service.shards() {
                shard.with_server(|server, now| server.shutdown(now));
            }
            // Every stream was ended and every request answered 503: wait, briefly, until
            // each response has been written out.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            let open = || {
                service
                    .shards()
                    .map(|shard| shard.with_server(|server, _| server.exchange_count()))
                    .sum::<usize>()
            };
            while open() > 0 && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            ExitCode::SUCCESS
        }
        // `serve` never returns: its task ends only by a panic.
        _ = served => {
            eprintln!("{PROG}: the server stopped");
            ExitCode::FAILURE
        }
    }
}

/// `mcpwire serve --blocking`: the core on `mcpwire-blocking`'s thread pool; Ctrl-C
/// shuts it down as the tokio server does (tokio here only waits for the signal).
fn run_blocking(options: Options) -> ExitCode {
    use mcpwire_blocking::server::{ServeOptions, serve};
    let listener = match std::net::TcpListener::bind(&options.addrs[..]) {
        Ok(l) => l,
        Err(e) => return cannot_listen(&options, &e),
    };
    let path = options.config.endpoint().to_owned();
    let handler: Arc<dyn mcpwire_blocking::app::Handler> = if options.conformance {
        Arc::new(crate::conformance::on_blocking::Fixture(
            crate::conformance::Conformance,
        ))
    } else {
        Arc::new(blocking_tools())
    };
    let handler = Arc::new(LoggedBlocking(handler, OnceLock::new()));
    let handle = match serve(
        listener,
        options.config,
        Box::new(mcpwire::OsEntropy),
        Arc::clone(&handler) as Arc<dyn mcpwire_blocking::app::Handler>,
        ServeOptions::new()
            .with_limits(options.limits)
            .with_log(Arc::new(|line: &str| {
                crate::log::line(format!("{PROG}: {line}"))
            })),
    ) {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("{PROG}: cannot start the server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr = handle.local_addr();
    let waited = block_on(PROG, async {
        let interrupt = interrupt().await;
        eprintln!("{PROG}: listening on http://{addr}{path}");
        match interrupt.await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{PROG}: cannot wait for Ctrl-C: {e}");
                ExitCode::FAILURE
            }
        }
    });
    eprintln!("{PROG}: shutting down");
    if let Some(app) = handler.1.get() {
        app.end_listens();
    }
    if !handle.shutdown(Duration::from_secs(5)) {
        eprintln!("{PROG}: exchanges still open after 5 s were cut");
    }
    waited
}

/// Ctrl-C, with its handler installed by the time this returns. The server announces
/// its address only then: a Ctrl-C sent as soon as the address is known must reach the
/// graceful shutdown, not the default action, which ends the process at once (tokio
/// installs the handler when the future is first polled, not when it is made).
pub(crate) async fn interrupt() -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>> {
    let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
    let first = std::future::poll_fn(|cx| Poll::Ready(ctrl_c.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(result) => Box::pin(std::future::ready(result)),
        Poll::Pending => ctrl_c,
    }
}

/// Reports that no address of `--addr` could be bound, and what to do.
fn cannot_listen(options: &Options, e: &std::io::Error) -> ExitCode {
    eprintln!("{PROG}: cannot listen on {}: {e}", options.addr_text);
    let advice = match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            "another process listens there: stop it, or give another port with --addr"
        }
        std::io::ErrorKind::PermissionDenied => {
            "ports below 1024 need privileges: give a port of 1024 or more with --addr"
        }
        std::io::ErrorKind::AddrNotAvailable => {
            "that address is not this machine's: give one of its addresses with --addr \
             (127.0.0.1 for this machine only, 0.0.0.0 for every interface)"
        }
        _ => "give another address with --addr",
    };
    eprintln!("{PROG}: {advice}");
    ExitCode::FAILURE
}

/// One log line per session event, through the log queue (never waiting for stderr).
fn log(event: &Event) {
    match event {
        Event::Request(r) if r.method() == "initialize" => {
            if let Some(s) = r.session() {
                crate::log::line(format!(
                    "{PROG}: session {s} opened ({}, {:?})",
                    r.version(),
                    r.era()
                ));
            }
        }
        Event::SessionClosed { session, reason } => {
            crate::log::line(format!("{PROG}: session {session} closed ({reason:?})"));
        }
        Event::Cancelled { request, reason } => {
            let why = reason
                .as_deref()
                .map_or_else(String::new, |r| format!(": {r}"));
            crate::log::line(format!("{PROG}: request {} cancelled{why}", request.get()));
        }
        _ => {}
    }
}

/// The served blocking handler, with one log line per session event, and its layer's
/// handle, to end the listen streams at a shutdown.
struct LoggedBlocking(
    Arc<dyn mcpwire_blocking::app::Handler>,
    OnceLock<mcpwire_blocking::app::AppHandle>,
);

impl mcpwire_blocking::app::Handler for LoggedBlocking {
    fn server_info(&self) -> serde_json::Value {
        self.0.server_info()
    }

    fn capabilities(&self) -> serde_json::Value {
        self.0.capabilities()
    }

    fn cache_hint(&self, method: &str) -> mcpwire::app::CacheHint {
        self.0.cache_hint(method)
    }

    fn tool_mirrors(&self) -> mcpwire::mirror::ToolMirrors {
        self.0.tool_mirrors()
    }

    fn started(&self, app: mcpwire_blocking::app::AppHandle) {
        let _ = self.1.set(app.clone());
        self.0.started(app);
    }

    fn observe(&self, event: &Event) {
        log(event);
    }

    fn call(
        &self,
        call: &mcpwire_blocking::app::Call,
    ) -> Result<serde_json::Value, mcpwire_blocking::app::CallError> {
        self.0.call(call)
    }
}

/// The served handler, with one log line per session event, and its layer's handle, to
/// end the listen streams at a shutdown.
struct Logged(Arc<dyn app::Handler>, OnceLock<app::AppHandle>);

impl app::Handler for Logged {
    fn server_info(&self) -> serde_json::Value {
        self.0.server_info()
    }

    fn capabilities(&self) -> serde_json::Value {
        self.0.capabilities()
    }

    fn cache_hint(&self, method: &str) -> mcpwire::app::CacheHint {
        self.0.cache_hint(method)
    }

    fn tool_mirrors(&self) -> mcpwire::mirror::ToolMirrors {
        self.0.tool_mirrors()
    }

    fn started(&self, app: app::AppHandle) {
        let _ = self.1.set(app.clone());
        self.0.started(app);
    }

    fn observe(&self, event: &Event) {
        log(event);
        self.0.observe(event);
    }

    fn call(&self, call: app::Call) -> app::BoxFuture<Result<serde_json::Value, CallError>> {
        self.0.call(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_25_eras_choose_the_generations_served() {
        let config = |args: &[&str]| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            parse(&args).unwrap().unwrap().config
        };
        let all = config(&[]);
        assert_eq!(all.eras(), Eras::ALL);
        assert!(all.legacy().is_some());
        let modern = config(&["--eras", "2026"]);
        assert_eq!(modern.eras(), Eras::MODERN);
        assert!(modern.legacy().is_none());
        let older = config(&["--eras=legacy,2025"]);
        assert_eq!(older.eras(), Eras::SESSIONS);
        assert!(older.legacy().is_some());
        assert_eq!(config(&["--eras", "2025, 2026"]).eras(), Eras::ALL);
        for bad in ["legacy", "2024", "", "2026,nope"] {
            let args = [OsString::from("--eras"), OsString::from(bad)];
            assert!(parse(&args).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn modern_7_conformance_serves_the_fixture_s_mirrors() {
        let config = |args: &[&str]| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            parse(&args).unwrap().unwrap().config
        };
        let fixture = config(&["--conformance"]);
        let mirrors = fixture.tool_mirrors();
        assert_eq!(mirrors.len(), 1, "{mirrors:?}");
        let header = mirrors.get("test_x_mcp_header").map(|m| {
            m.iter()
                .map(mcpwire::mirror::Mirrored::header_name)
                .collect::<Vec<_>>()
        });
        assert_eq!(header, Some(vec!["Mcp-Param-Value".to_owned()]));
        // The reference tools mirror nothing (their schemas have no annotation).
        assert!(config(&[]).tool_mirrors().is_empty());
        assert!(config(&["--blocking"]).tool_mirrors().is_empty());
    }

    #[test]
    fn sec_3_serve_listens_on_loopback_unless_told_otherwise() {
        let options = parse(&[]).unwrap().unwrap();
        assert_eq!(options.addrs, ["127.0.0.1:8080".parse().unwrap()]);
        let options = parse(&["--addr".into(), "0.0.0.0:9000".into()])
            .unwrap()
            .unwrap();
        assert!(!options.addrs[0].ip().is_loopback());
        assert!(parse(&["--addr".into(), "nowhere".into()]).is_err());
        // A host name, resolved: loopback names keep the loopback Host check.
        let options = parse(&["--addr".into(), "localhost:8080".into()])
            .unwrap()
            .unwrap();
        assert!(
            options.addrs.iter().all(|a| a.ip().is_loopback()),
            "{options:?}"
        );
        assert!(options.addrs[0].is_ipv4(), "{:?}", options.addrs);
        assert_eq!(options.addr_text, "localhost:8080");
    }

    fn refused(args: &[&str]) -> String {
        let args: Vec<OsString> = args.iter().map(Into::into).collect();
        match parse(&args) {
            Err(bad) => bad.message().to_owned(),
            Ok(options) => panic!("{args:?} accepted: {options:?}"),
        }
    }

    #[test]
    fn the_network_options_take_their_values_and_refuse_nonsense() {
        let args: Vec<OsString> = [
            "--heartbeat-ms",
            "off",
            "--stream-after-ms",
            "250",
            "--max-connections",
            "7",
            "--header-timeout-ms",
            "1500",
            "--idle-timeout-ms",
            "2500",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let options = parse(&args).unwrap().unwrap();
        assert_eq!(options.limits.max_connections(), 7);
        assert_eq!(options.limits.header_timeout(), Duration::from_millis(1500));
        assert_eq!(options.limits.idle_timeout(), Duration::from_millis(2500));
        for (args, says) in [
            (
                &["--heartbeat-ms", "0"][..],
                "give milliseconds from 1, or off",
            ),
            (&["--heartbeat-ms", "soon"][..], "is not milliseconds"),
            (&["--stream-after-ms", "-1"][..], "is not milliseconds"),
            (
                &["--max-connections", "0"][..],
                "is not a count of 1 or more",
            ),
            (
                &["--max-sessions-per-peer", "0"][..],
                "is not a count of 1 or more",
            ),
            (
                &["--header-timeout-ms", "0"][..],
                "would close everything at once",
            ),
            (
                &["--idle-timeout-ms", "0"][..],
                "would close everything at once",
            ),
            (
                &["--handshake-timeout-ms", "0"][..],
                "would close everything at once",
            ),
        ] {
            let message = refused(args);
            assert!(message.contains(says), "{args:?}: {message}");
        }
    }
}
