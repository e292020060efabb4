//! End to end over real HTTP/1.1 on 127.0.0.1: requests per second and p50/p99 latency of
//! `tools/call echo` at concurrency 1, 16 and 64, in JSON and SSE response modes, and the
//! resident memory of 10,000 idle sessions and of 10,000 open GET streams.
//!
//! Servers, each its own process (this bench's binary, started again with a role), all
//! on hyper 1 HTTP/1.1 with `TCP_NODELAY`, each on a default multi-threaded tokio runtime:
//!
//! - `mcpwire`: `mcpwire serve` itself (`mcpwire_cli::run`), `--sse-response` or
//!   `--json-response` (with sessions), and `--json-response --stateless`;
//! - `rmcp`: the Rust SDK's `StreamableHttpService` with an `echo` tool written the
//!   way its docs show (`#[tool_router]`); SSE with sessions (its default), and JSON,
//!   which rmcp serves only without sessions (`json_response`, `legacy_session_mode: false`);
//! - `floor`: a bare hyper service that reads each POST's body and answers a fixed body
//!   (the JSON answer, or the same answer as one SSE event): HTTP with no MCP work.
//!
//! A second table loads revision 2026-07-28 (no session, no handshake: every call carries
//! its `_meta` and the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, which
//! the servers check): `mcpwire serve` (`--json-response` or `--sse-response`) against
//! rmcp's modern path (`legacy_session_mode(false)`,
//! `stateless_protocol_metadata_required(true)`, revision 2026-07-28 alone) and the same
//! floor.
//!
//! The load generator is this process: one hyper HTTP/1.1 keep-alive connection per
//! simulated client, each client with its own session (initialize, initialized), then
//! calls back to back with fresh ids until the time is up; every answer is checked. It
//! shares the machine's cores with the server (the figures include it, as every peer's
//! published figures here do). Rows of one table come from one run, interleaved by
//! concurrency, so their ratios are what to read.
//!
//! Run: `cargo bench -p mcpwire-benches --bench e2e` (about two minutes), or with
//! `-- rps`, `-- rss`, `-- --secs N` (measured seconds per row, default 3), or
//! `-- --target HOST:PORT [--concurrency N] [--bare|--modern]` to load a server started
//! elsewhere (an MCP server at `/mcp` with sessions, or with `--modern` at revision
//! 2026-07-28, or with `--bare` any server answering POSTs; to profile it).

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use tokio::net::{TcpListener, TcpStream};

/// The environment variable that makes this binary a server; its value is the role.
const ROLE: &str = "MCPWIRE_E2E_ROLE";
/// For the `mcpwire` role: the `mcpwire serve` options, separated by spaces.
const SERVE_ARGS: &str = "MCPWIRE_E2E_ARGS";
const VERSION: &str = "2025-11-25";
const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const FIXED_JSON: &str =
    r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}"#;
const FIXED_SSE: &str = "id: 0\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n";
const MODERN: &str = "2026-07-28";

/// How a load generator's client speaks to a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    /// Plain POSTs (the floor needs no MCP).
    Bare,
    /// A session per client (initialize, initialized), then calls in it (2025-11-25).
    Sessions,
    /// Revision 2026-07-28: no session; `_meta` and the mirrored headers on every call.
    Modern,
}

fn main() {
    if let Ok(role) = std::env::var(ROLE) {
        return serve_role(&role);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench` (and criterion's options when run with the rest):
    // anything not ours is ignored.
    let secs = args
        .iter()
        .position(|a| a == "--secs")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let target: Option<SocketAddr> = args
        .iter()
        .position(|a| a == "--target")
        .and_then(|i| args.get(i + 1))
        .map(|a| a.parse().expect("--target HOST:PORT"));
    let only_rss = args.iter().any(|a| a == "rss");
    let only_rps = args.iter().any(|a| a == "rps");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if let Some(addr) = target {
        // A server started elsewhere (to profile it, say): its rows alone.
        let proto = if args.iter().any(|a| a == "--bare") {
            Proto::Bare
        } else if args.iter().any(|a| a == "--modern") {
            Proto::Modern
        } else {
            Proto::Sessions
        };
        let only: Option<usize> = args
            .iter()
            .position(|a| a == "--concurrency")
            .and_then(|i| args.get(i + 1))
            .and_then(|c| c.parse().ok());
        for concurrency in [1, 16, 64] {
            if only.is_some_and(|c| c != concurrency) {
                continue;
            }
            let row = runtime
                .block_on(load(
                    addr,
                    proto,
                    concurrency,
                    Duration::from_secs_f64(secs),
                ))
                .unwrap_or_else(|e| panic!("{addr}: {e}"));
            println!(
                "{addr} concurrency {concurrency}: {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms",
                row.rps, row.p50, row.p99
            );
        }
        return;
    }
    if !only_rss {
        runtime.block_on(rps(Duration::from_secs_f64(secs)));
    }
    if !only_rps {
        runtime.block_on(rss());
    }
}

// ---------------------------------------------------------------------------------------
// The servers.

/// A server process, killed when dropped.
struct Server {
    name: &'static str,
    child: Child,
    addr: SocketAddr,
    /// How clients speak to it.
    proto: Proto,
    sse: bool,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts this binary as `role`; waits for its "listening on http://ADDR" line.
    fn start(name: &'static str, role: &str, serve_args: &str, proto: Proto, sse: bool) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("the bench's own path"))
            .env(ROLE, role)
            .env(SERVE_ARGS, serve_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let stderr = child.stderr.take().expect("a stderr pipe");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the address, then drains the log (one line per session) so the server
        // never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let addr = rest.split('/').next().unwrap_or_default().to_owned();
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{name} did not start"))
            .parse()
            .expect("a socket address");
        Self {
            name,
            child,
            addr,
            proto,
            sse,
        }
    }

    /// Resident set size, in KiB (`VmRSS` of `/proc/PID/status`).
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc is readable");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("a VmRSS line")
    }
}

/// Runs a server role in this process, until its stdin closes (the bench ended).
fn serve_role(role: &str) {
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        std::process::exit(0);
    });
    if role == "mcpwire" {
        let mut args: Vec<std::ffi::OsString> = vec!["serve".into()];
        let extra = std::env::var(SERVE_ARGS).unwrap_or_default();
        args.extend(extra.split_whitespace().map(Into::into));
        args.extend(["--addr".into(), "127.0.0.1:0".into()]);
        let _ = mcpwire_cli::run(&args);
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        eprintln!(
            "{role}: listening on http://{}/mcp",
            listener.local_addr().expect("an address")
        );
        match role {
            "rmcp-sse" => rmcp_server::serve(listener, false, false).await,
            "rmcp-json" => rmcp_server::serve(listener, true, false).await,
            "rmcp-modern-sse" => rmcp_server::serve(listener, false, true).await,
            "rmcp-modern-json" => rmcp_server::serve(listener, true, true).await,
            "floor-json" => floor(listener, false).await,
            "floor-sse" => floor(listener, true).await,
            other => panic!("unknown role {other}"),
        }
    });
}

/// The floor: every POST's body is read, and a fixed answer written; a GET gets an SSE
/// stream that sends one event and then stays open (the floor of an open GET stream).
async fn floor(listener: TcpListener, sse: bool) {
    let (body, content_type) = if sse {
        (FIXED_SSE, "text/event-stream")
    } else {
        (FIXED_JSON, "application/json")
    };
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                move |request: http::Request<hyper::body::Incoming>| async move {
                    let get = request.method() == http::Method::GET;
                    let _ = request.into_body().collect().await;
                    let body: FloorBody = if get {
                        let priming = Bytes::from_static(b"id: 0\ndata:\n\n");
                        let frames = futures_util::stream::once(async move {
                            Ok(hyper::body::Frame::data(priming))
                        })
                        .chain(futures_util::stream::pending());
                        BodyExt::boxed(http_body_util::StreamBody::new(frames))
                    } else {
                        Full::new(Bytes::from_static(body.as_bytes()))
                            .map_err(|never| match never {})
                            .boxed()
                    };
                    let response = http::Response::builder()
                        .header(
                            "content-type",
                            if get {
                                "text/event-stream"
                            } else {
                                content_type
                            },
                        )
                        .body(body)
                        .expect("a response");
                    Ok::<_, Infallible>(response)
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

type FloorBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The rmcp peer: its streamable HTTP service with one `echo` tool.
mod rmcp_server {
    use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
    use std::borrow::Cow;

    use rmcp::model::{ProtocolVersion, ServerCapabilities, ServerConfig};
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    use rmcp::{ServerHandler, schemars, tool, tool_handler, tool_router};
    use tokio::net::TcpListener;

    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    pub(super) struct EchoArgs {
        text: String,
    }

    #[derive(Debug, Clone)]
    pub(super) struct Echo {
        tool_router: ToolRouter<Self>,
        /// Revision 2026-07-28 alone.
        modern: bool,
    }

    #[tool_router]
    impl Echo {
        #[tool(description = "Returns its text.")]
        fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
            text
        }
    }

    #[tool_handler(router = self.tool_router)]
    impl ServerHandler for Echo {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
            if self.modern {
                Cow::Borrowed(&[ProtocolVersion::V_2026_07_28])
            } else {
                Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
            }
        }
    }

    /// rmcp's service: with sessions for SSE and without for JSON (the only JSON it
    /// serves), or, `modern`, its 2026-07-28 path as its docs configure it.
    pub(super) async fn serve(listener: TcpListener, json: bool, modern: bool) {
        let config = StreamableHttpServerConfig::default()
            .with_json_response(json)
            .with_legacy_session_mode(!json && !modern)
            .with_stateless_protocol_metadata_required(modern);
        let service: StreamableHttpService<Echo, LocalSessionManager> = StreamableHttpService::new(
            move || {
                Ok(Echo {
                    tool_router: Echo::tool_router(),
                    modern,
                })
            },
            Default::default(),
            config,
        );
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

// ---------------------------------------------------------------------------------------
// The load generator.

type Conn = SendRequest<Full<Bytes>>;

async fn connect(addr: SocketAddr) -> Result<Conn, String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn);
    Ok(send)
}

fn request(
    method: http::Method,
    addr: SocketAddr,
    session: Option<&str>,
    body: Bytes,
) -> http::Request<Full<Bytes>> {
    let mut b = http::Request::builder()
        .method(method)
        .uri("/mcp")
        .header("host", addr.to_string())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", VERSION);
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    b.body(Full::new(body)).expect("a request")
}

/// A 2026-07-28 `tools/call echo`: the mirrored headers beside the body.
fn modern_request(addr: SocketAddr, body: Bytes) -> http::Request<Full<Bytes>> {
    http::Request::post("/mcp")
        .header("host", addr.to_string())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .body(Full::new(body))
        .expect("a request")
}

/// One exchange: the status, the session header, the whole body.
async fn exchange(
    send: &mut Conn,
    request: http::Request<Full<Bytes>>,
) -> Result<(http::StatusCode, Option<String>, Bytes), String> {
    send.ready().await.map_err(|e| format!("ready: {e}"))?;
    let response = send
        .send_request(request)
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = response.status();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok((status, session, body))
}

/// initialize and notifications/initialized; the session id if the server gave one.
async fn handshake(send: &mut Conn, addr: SocketAddr) -> Result<Option<String>, String> {
    let (status, session, body) = exchange(
        send,
        request(
            http::Method::POST,
            addr,
            None,
            Bytes::from_static(INIT.as_bytes()),
        ),
    )
    .await?;
    if status != 200 || memchr::memmem::find(&body, b"protocolVersion").is_none() {
        return Err(format!("initialize: {status} {body:?}"));
    }
    let (status, _, body) = exchange(
        send,
        request(
            http::Method::POST,
            addr,
            session.as_deref(),
            Bytes::from_static(INITIALIZED.as_bytes()),
        ),
    )
    .await?;
    if status != 202 {
        return Err(format!("initialized: {status} {body:?}"));
    }
    Ok(session)
}

fn call_body(id: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}}}}}}"#
    ))
}

/// A 2026-07-28 call's body: the protocol metadata in `_meta`.
fn modern_call_body(id: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"e2e","version":"1"}}}}}}}}"#
    ))
}

/// One simulated client: calls until `end`; the latencies (µs) of the calls that began
/// at or after `start`.
async fn client(
    addr: SocketAddr,
    proto: Proto,
    start: Instant,
    end: Instant,
) -> Result<Vec<u32>, String> {
    let mut send = connect(addr).await?;
    let session = if proto == Proto::Sessions {
        handshake(&mut send, addr).await?
    } else {
        None
    };
    let mut latencies = Vec::with_capacity(1 << 16);
    let mut id = 1;
    loop {
        let began = Instant::now();
        if began >= end {
            return Ok(latencies);
        }
        let call = match proto {
            Proto::Modern => modern_request(addr, modern_call_body(id)),
            _ => request(http::Method::POST, addr, session.as_deref(), call_body(id)),
        };
        let (status, _, body) = exchange(&mut send, call).await?;
        let done = Instant::now();
        if status != 200 || memchr::memmem::find(&body, br#""text":"hi""#).is_none() {
            return Err(format!("tools/call: {status} {body:?}"));
        }
        if began >= start && done <= end {
            latencies.push(u32::try_from((done - began).as_micros()).unwrap_or(u32::MAX));
        }
        id += 1;
    }
}

/// One row: `concurrency` clients for `warm` + `measure`.
struct Row {
    rps: f64,
    p50: f64,
    p99: f64,
}

async fn load(
    addr: SocketAddr,
    proto: Proto,
    concurrency: usize,
    measure: Duration,
) -> Result<Row, String> {
    let warm = Duration::from_millis(500);
    // Connections and sessions are set up inside the warm-up.
    let start = Instant::now() + warm;
    let end = start + measure;
    let clients: Vec<_> = (0..concurrency)
        .map(|_| tokio::spawn(client(addr, proto, start, end)))
        .collect();
    let mut all = Vec::new();
    for c in clients {
        all.extend(c.await.expect("a client task")?);
    }
    all.sort_unstable();
    let at = |q: f64| {
        let i = ((all.len() as f64 * q) as usize).min(all.len().saturating_sub(1));
        f64::from(all.get(i).copied().unwrap_or(0)) / 1000.0
    };
    Ok(Row {
        rps: all.len() as f64 / measure.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    })
}

async fn rps(measure: Duration) {
    println!(
        "\n## tools/call echo, HTTP/1.1 keep-alive on 127.0.0.1, {:.1} s per row\n",
        measure.as_secs_f64()
    );
    let bare = |role| Server::start("floor", role, "", Proto::Bare, role == "floor-sse");
    let mcpwire = |name, args, proto, sse| Server::start(name, "mcpwire", args, proto, sse);
    table(
        measure,
        [
            vec![
                bare("floor-json"),
                mcpwire(
                    "mcpwire",
                    "--no-legacy --json-response --stateless",
                    Proto::Sessions,
                    false,
                ),
                mcpwire(
                    "mcpwire (sessions)",
                    "--no-legacy --json-response",
                    Proto::Sessions,
                    false,
                ),
                Server::start("rmcp", "rmcp-json", "", Proto::Sessions, false),
            ],
            vec![
                bare("floor-sse"),
                mcpwire(
                    "mcpwire",
                    "--no-legacy --sse-response",
                    Proto::Sessions,
                    true,
                ),
                Server::start("rmcp", "rmcp-sse", "", Proto::Sessions, true),
            ],
        ],
    )
    .await;
    println!(
        "\n## tools/call echo at revision 2026-07-28 (no session; `_meta` and `Mcp-*` headers), {:.1} s per row\n",
        measure.as_secs_f64()
    );
    table(
        measure,
        [
            vec![
                bare("floor-json"),
                mcpwire(
                    "mcpwire",
                    "--no-legacy --json-response",
                    Proto::Modern,
                    false,
                ),
                Server::start("rmcp", "rmcp-modern-json", "", Proto::Modern, false),
            ],
            vec![
                bare("floor-sse"),
                mcpwire("mcpwire", "--no-legacy --sse-response", Proto::Modern, true),
                Server::start("rmcp", "rmcp-modern-sse", "", Proto::Modern, true),
            ],
        ],
    )
    .await;
}

/// One table: for the JSON servers, then the SSE ones (each list the floor first and
/// rmcp last), every concurrency, rows interleaved so that their ratios hold.
async fn table(measure: Duration, modes: [Vec<Server>; 2]) {
    println!(
        "| mode | server | concurrency | req/s | p50 ms | p99 ms | of floor | × rmcp |\n|---|---|---:|---:|---:|---:|---:|---:|"
    );
    for servers in modes {
        let mode = if servers[0].sse { "SSE" } else { "JSON" };
        for concurrency in [1, 16, 64] {
            let mut rows = Vec::new();
            for server in &servers {
                let row = load(server.addr, server.proto, concurrency, measure).await;
                rows.push(row.unwrap_or_else(|e| panic!("{}: {e}", server.name)));
            }
            let floor = rows[0].rps;
            let rmcp = rows[rows.len() - 1].rps;
            for (server, row) in servers.iter().zip(&rows) {
                println!(
                    "| {mode} | {} | {concurrency} | {:.0} | {:.3} | {:.3} | {:.0}% | {:.2} |",
                    server.name,
                    row.rps,
                    row.p50,
                    row.p99,
                    100.0 * row.rps / floor,
                    row.rps / rmcp,
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Memory.

const SESSIONS: usize = 10_000;

/// Opens `SESSIONS` sessions (on 32 keep-alive connections); their ids.
async fn open_sessions(addr: SocketAddr) -> Vec<String> {
    let workers: Vec<_> = (0..32)
        .map(|_| {
            tokio::spawn(async move {
                let mut send = connect(addr).await.expect("connect");
                let mut ids = Vec::new();
                for _ in 0..SESSIONS / 32 + 1 {
                    let id = handshake(&mut send, addr).await.expect("a session");
                    ids.push(id.expect("a session id"));
                }
                ids
            })
        })
        .collect();
    let mut ids = Vec::new();
    for w in workers {
        ids.extend(w.await.expect("a worker"));
    }
    ids.truncate(SESSIONS);
    ids
}

/// Opens one GET stream per session, each on its own connection, and keeps it open:
/// what is returned must be held while measuring.
async fn open_streams(
    addr: SocketAddr,
    sessions: &[String],
) -> Vec<(Conn, http::Response<hyper::body::Incoming>)> {
    let sessions = Arc::new(sessions.to_vec());
    let mut held = Vec::with_capacity(sessions.len());
    for chunk in (0..sessions.len()).collect::<Vec<_>>().chunks(256) {
        let tasks: Vec<_> = chunk
            .iter()
            .map(|&i| {
                let sessions = Arc::clone(&sessions);
                tokio::spawn(async move {
                    let mut send = connect(addr).await.expect("connect");
                    let mut get =
                        request(http::Method::GET, addr, Some(&sessions[i]), Bytes::new());
                    get.headers_mut().insert(
                        "accept",
                        http::HeaderValue::from_static("text/event-stream"),
                    );
                    send.ready().await.expect("ready");
                    let response = send.send_request(get).await.expect("a GET answer");
                    assert_eq!(response.status(), 200, "GET stream");
                    (send, response)
                })
            })
            .collect();
        for t in tasks {
            held.push(t.await.expect("a stream"));
        }
    }
    held
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(750)).await;
}

async fn rss() {
    println!("\n## Resident memory (VmRSS) above a warmed-up baseline, {SESSIONS} sessions\n");
    println!(
        "| server | per idle session | per open GET stream (beyond its session) |\n|---|---:|---:|"
    );
    for (name, role, args) in [
        ("floor (hyper)", "floor-sse", ""),
        (
            "mcpwire",
            "mcpwire",
            "--no-legacy --max-sessions 20000 --max-connections 20000",
        ),
        ("rmcp", "rmcp-sse", ""),
    ] {
        let mcp = role != "floor-sse";
        let proto = if mcp { Proto::Sessions } else { Proto::Bare };
        let server = Server::start(name, role, args, proto, true);
        // Warm-up: the runtime's threads, the allocator's first arenas, one of each path.
        let mut send = connect(server.addr).await.expect("connect");
        for _ in 0..64 {
            let session = if mcp {
                handshake(&mut send, server.addr).await.expect("a session")
            } else {
                None
            };
            let (status, _, _) = exchange(
                &mut send,
                request(
                    http::Method::POST,
                    server.addr,
                    session.as_deref(),
                    call_body(1),
                ),
            )
            .await
            .expect("a call");
            assert_eq!(status, 200);
        }
        drop(send);
        settle().await;
        let base = server.rss_kib();
        let sessions = if mcp {
            open_sessions(server.addr).await
        } else {
            vec![String::from("none"); SESSIONS]
        };
        settle().await;
        let with_sessions = server.rss_kib();
        let streams = open_streams(server.addr, &sessions).await;
        settle().await;
        let with_streams = server.rss_kib();
        let per = |from: u64, to: u64| to.saturating_sub(from) as f64 * 1024.0 / SESSIONS as f64;
        if mcp {
            println!(
                "| {name} | {:.0} B | {:.0} B |",
                per(base, with_sessions),
                per(with_sessions, with_streams)
            );
        } else {
            println!("| {name} | – | {:.0} B |", per(with_sessions, with_streams));
        }
        drop(streams);
    }
}
