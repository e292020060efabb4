//! End to end over real HTTP/1.1 on 127.0.0.1: requests per second and p50/p99 latency of
//! `tools/call echo` at concurrency 1, 16 and 64, in JSON and SSE response modes, the
//! latency of a resume on another node of a cluster, and the resident memory of 10,000
//! idle sessions and of 10,000 open GET streams.
//!
//! Servers, each its own process (this bench's binary, started again with a role), all
//! on hyper 1 HTTP/1.1 with `TCP_NODELAY`, each on a default multi-threaded tokio runtime:
//!
//! - `mcpwire`: `mcpwire serve` itself (`mcpwire_cli::run`), `--sse-response` or
//!   `--json-response` (with sessions), and `--json-response --stateless`;
//! - `mcpwire (redis)`: the same `mcpwire serve` as one node of a cluster
//!   (`--store redis://… --node-id N`), its sessions and streams shared through a Redis
//!   started for the run (`mcpwire_tests::redis_server`, Debian's `redis-server`, on the
//!   same two cores); `--json-response` (sessions) and `--sse-response`, each read against
//!   the in-memory row of its group (`of in-memory`: issue 26 asks ≥ 50% at c=64);
//! - `rmcp`: the Rust SDK's `StreamableHttpService` with an `echo` tool written the
//!   way its docs show (`#[tool_router]`); SSE with sessions (its default), and JSON,
//!   which rmcp serves only without sessions (`json_response`, `legacy_session_mode: false`);
//! - `floor`: a bare hyper service that reads each POST's body and answers a fixed body
//!   (the JSON answer, or the same answer as one SSE event): HTTP with no MCP work.
//!
//! A second table loads revision 2026-07-28 (no session, no handshake: every call carries
//! its `_meta` and the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, which
//! the servers check): `mcpwire serve` (`--json-response` or `--sse-response`), in memory
//! and as a node on Redis (a modern call does no store work: the store only carries
//! `subscriptions/listen` fan-out), against rmcp's modern path (`legacy_session_mode(false)`,
//! `stateless_protocol_metadata_required(true)`, revision 2026-07-28 alone) and the same
//! floor.
//!
//! `resumable` is the share of an SSE row's calls answered with an event id, on a stream
//! whose frames are kept for resumes (a ring; on a node, also written to Redis): every
//! one, since a server at its bound of rings (64 a session, 1,024 in all) gives the
//! oldest finished stream's ring to the new one.
//!
//! The load generator is this process: one hyper HTTP/1.1 keep-alive connection per
//! simulated client, each client with its own session (initialize, initialized), then
//! calls back to back with fresh ids until the time is up; every answer is checked. It
//! shares the machine's cores with the server (the figures include it, as every peer's
//! published figures here do). Rows of one table come from one run, interleaved by
//! concurrency, so their ratios are what to read.
//!
//! The resume (issue 26: p99 ≤ 5 ms): two nodes on the run's Redis, A (`--node-id 1`) and
//! B (`--node-id 2`), both `--sse-response`. Sessions are opened on A and adopted by B (a
//! ping there) before their samples are timed, and deleted after 32 samples. Each sample
//! POSTs `tools/call echo` to A and
//! reads its whole stream (a priming event with an id, then the result), then GETs B with
//! `Last-Event-ID: <the priming event's id>`: B replays the result from Redis and ends the
//! stream. Timed: from sending the GET until the replayed result (its JSON-RPC id checked)
//! is decoded. Two ways, alternating sample by sample: *at once*, the GET sent as soon as
//! A's stream ended, while A's writes to Redis may still be on their way (B then replays
//! what is there and follows the ring, or, with no ring yet, asks again after 25 ms); and
//! *ring stored*, the GET sent once the ring's end marker is in Redis, which is what a
//! client that lost its connection finds: it waits the priming event's `retry` (1 s)
//! before it resumes.
//!
//! The bridge (issue 27), only with `-- bridge`: `mcpwire bridge --stdio` against the Node
//! gateways people run, `supergateway` 4.0.0 and `mcp-proxy` 6.7.19 (pinned in
//! `benches/gateways`, installed there with `npm ci`; Node.js on `PATH`), each in front of
//! the same stdio server, `stdio-echo` (this crate's binary: it answers at once, so the
//! gateway is what is measured). Rows: `tools/call echo` at concurrency 1 and 16 in the
//! session era (2025-11-25, a session per client: supergateway `--stateful`, one child
//! per session as the bridge; mcp-proxy shares one child) and at 2026-07-28 (mcpwire's
//! pool; supergateway without `--stateful`, a child per request; mcp-proxy's modern
//! path), each server in its default response mode; then the resident memory per idle
//! session of each gateway's own process, and with its children. supergateway cannot be
//! told an address: it listens on every interface for the run.
//!
//! Run: `cargo bench -p mcpwire-benches --bench e2e` (about 4½ minutes), or with
//! `-- rps` (the throughput tables, Redis rows included), `-- rss`, `-- bridge` (`-- bridge-rss`
//! its memory rows alone), `-- cluster` (the
//! in-memory and Redis rows alone, then the resume), `-- --secs N` (measured seconds per
//! row, default 3), `-- --resume-samples N` (per way, default 2,000; both ways within
//! 60 s, after a warm-up of a tenth of them, at most 100), or
//! `-- --target HOST:PORT [--concurrency N] [--bare|--modern]` to load a
//! server started elsewhere (an MCP server at `/mcp` with sessions, with `--modern` at
//! revision 2026-07-28, or with `--bare`
//! any server answering POSTs; to profile it).

use std::cell::Cell;
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
use mcpwire::sse::{Decoder, Item, Limits};
use mcpwire_tests::redis_server::RedisServer;
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
const PING: &str = r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#;
/// Resume samples per way, unless `--resume-samples N`.
const RESUME_SAMPLES: usize = 2_000;
/// The most time the samples of the resume take, warm-up included; fewer samples are
/// reported if it runs out.
const RESUME_BOUND: Duration = Duration::from_secs(60);
/// Calls of the resume in one session before it is deleted and another opened, so the
/// samples span many sessions.
const RESUME_CALLS_PER_SESSION: usize = 32;
/// How long one step of a resume sample (an answer, the ring reaching Redis) may take
/// before the run fails.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);

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
    let secs: f64 = option(&args, "--secs", "a number of seconds").unwrap_or(3.0);
    let target: Option<SocketAddr> = option(&args, "--target", "HOST:PORT");
    let samples: usize =
        option(&args, "--resume-samples", "a number of samples").unwrap_or(RESUME_SAMPLES);
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
        let only: Option<usize> = option(&args, "--concurrency", "1, 16 or 64");
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
    // The sections: those named, or all of them.
    let named = |name: &str| args.iter().any(|a| a == name);
    let (rps_named, rss_named, cluster_named) = (named("rps"), named("rss"), named("cluster"));
    if named("bridge") || named("bridge-rss") {
        // Its own run: it needs Node.js and the gateways of `benches/gateways`.
        if named("bridge") {
            runtime.block_on(bridge::tables(Duration::from_secs_f64(secs)));
        }
        runtime.block_on(bridge::rss());
        return;
    }
    let all = !rps_named && !rss_named && !cluster_named;
    let measure = Duration::from_secs_f64(secs);
    // One Redis for the whole run, for the Redis rows and the resume.
    let cluster = (all || rps_named || cluster_named).then(Cluster::start);
    if let Some(cluster) = &cluster {
        if all || rps_named {
            runtime.block_on(rps(measure, cluster, Tables::Full));
        } else {
            runtime.block_on(rps(measure, cluster, Tables::Cluster));
        }
        if all || cluster_named {
            runtime.block_on(resume(cluster, samples));
        }
    }
    if all || rss_named {
        runtime.block_on(rss());
    }
}

/// The value after `--name` in `args`, parsed; `None` without one. Exits, saying what was
/// expected, when it is missing or does not parse.
fn option<T: std::str::FromStr>(args: &[String], name: &str, what: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    match args.get(i + 1).map(|v| v.parse()) {
        Some(Ok(value)) => Some(value),
        Some(Err(_)) | None => {
            eprintln!(
                "e2e: {name} wants {what}, not {:?}",
                args.get(i + 1).map_or("nothing", String::as_str)
            );
            std::process::exit(2);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The servers.

/// What a row is to the others of its group, for the ratio columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The floor: `of floor` is read against it.
    Floor,
    /// An `mcpwire` row no other row is read against.
    Mcpwire,
    /// The in-memory `mcpwire` row the group's Redis row is read against.
    InMemory,
    /// `mcpwire serve --store`: `of in-memory` is read against the group's `InMemory` row.
    Redis,
    /// rmcp: `× rmcp` is read against it.
    Rmcp,
}

/// A server to start: its row's name, this binary's role and `mcpwire serve` options,
/// how clients speak to it.
#[derive(Clone, Debug)]
struct Spec {
    name: &'static str,
    role: &'static str,
    args: String,
    proto: Proto,
    sse: bool,
    kind: Kind,
}

impl Spec {
    /// `mcpwire serve ARGS`.
    fn mcpwire(name: &'static str, args: &str, proto: Proto, sse: bool, kind: Kind) -> Self {
        Self {
            name,
            role: "mcpwire",
            args: args.to_owned(),
            proto,
            sse,
            kind,
        }
    }

    /// A peer or the floor, started as `role`.
    fn other(name: &'static str, role: &'static str, proto: Proto, sse: bool, kind: Kind) -> Self {
        Self {
            name,
            role,
            args: String::new(),
            proto,
            sse,
            kind,
        }
    }
}

/// The Redis of the run, and the node numbers given out so far: every node started gets
/// a number of its own (nodes of different groups never run at once, but their rings
/// stay in Redis).
struct Cluster {
    redis: RedisServer,
    nodes: Cell<u16>,
}

impl Cluster {
    /// Starts the run's Redis (installing Debian's `redis-server` if missing; panics
    /// saying why when it cannot).
    fn start() -> Self {
        Self {
            redis: RedisServer::start(),
            // 1 and 2 are the resume's nodes A and B.
            nodes: Cell::new(2),
        }
    }

    /// `args` and the options of a new node of this cluster.
    fn node(&self, args: &str) -> String {
        let n = self.nodes.get().wrapping_add(1);
        self.nodes.set(n);
        format!("{args} --store {} --node-id {n}", self.redis.url())
    }

    /// A Redis row: `mcpwire serve ARGS` as a new node of this cluster.
    fn row(&self, args: &str, proto: Proto, sse: bool) -> Spec {
        Spec::mcpwire("mcpwire (redis)", &self.node(args), proto, sse, Kind::Redis)
    }
}

/// A server process, killed when dropped.
struct Server {
    name: &'static str,
    child: Child,
    addr: SocketAddr,
    /// How clients speak to it.
    proto: Proto,
    sse: bool,
    kind: Kind,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts this binary as `spec.role`; waits for its "listening on http://ADDR" line.
    /// Panics with what it said if it exits (or says nothing) first.
    fn start(spec: &Spec) -> Self {
        let name = spec.name;
        let mut child = Command::new(std::env::current_exe().expect("the bench's own path"))
            .env(ROLE, spec.role)
            .env(SERVE_ARGS, &spec.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let stderr = child.stderr.take().expect("a stderr pipe");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the address, then drains the log (one line per session) so the server
        // never blocks on a full pipe. Before the address, the lines are kept: they say
        // why a server that exits did not start.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut said = String::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let Some(tx_now) = tx.as_ref() else { continue };
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let addr = rest.split('/').next().unwrap_or_default().to_owned();
                    let _ = tx_now.send(Ok(addr));
                    tx = None;
                } else {
                    said.push_str(&line);
                    said.push('\n');
                }
            }
            if let Some(tx) = tx {
                let _ = tx.send(Err(said));
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(addr)) => addr,
            Ok(Err(said)) => panic!("{name} ({}) did not start: {said}", spec.args),
            Err(_) => panic!("{name} ({}) did not start within 30 s", spec.args),
        };
        let addr = addr
            .parse()
            .unwrap_or_else(|_| panic!("{name} said it listens on {addr:?}"));
        Self {
            name,
            child,
            addr,
            proto: spec.proto,
            sse: spec.sse,
            kind: spec.kind,
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
    if role == "mcpwire-bridge" {
        let mut args: Vec<std::ffi::OsString> =
            vec!["bridge".into(), "--stdio".into(), bridge::STDIO_ECHO.into()];
        let extra = std::env::var(SERVE_ARGS).unwrap_or_default();
        args.extend(extra.split_whitespace().map(Into::into));
        args.extend(["--addr".into(), "127.0.0.1:0".into()]);
        let _ = mcpwire_cli::run(&args);
        return;
    }
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
/// at or after `start`, and how many of those were answered on a resumable stream.
async fn client(
    addr: SocketAddr,
    proto: Proto,
    start: Instant,
    end: Instant,
) -> Result<(Vec<u32>, usize), String> {
    let mut send = connect(addr).await?;
    let session = if proto == Proto::Sessions {
        handshake(&mut send, addr).await?
    } else {
        None
    };
    let mut latencies = Vec::with_capacity(1 << 16);
    let mut resumable = 0;
    let mut id = 1;
    loop {
        let began = Instant::now();
        if began >= end {
            return Ok((latencies, resumable));
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
            resumable += usize::from(has_event_id(&body));
        }
        id += 1;
    }
}

/// Whether an answer is an SSE stream with an event id (a priming event, on a resumable
/// stream): a field `id` at the start of a line (a JSON body has none).
fn has_event_id(body: &[u8]) -> bool {
    body.starts_with(b"id:") || memchr::memmem::find(body, b"\nid:").is_some()
}

/// One row: `concurrency` clients for `warm` + `measure`.
struct Row {
    rps: f64,
    p50: f64,
    p99: f64,
    /// The share of the measured calls answered on a resumable stream (with an event id).
    resumable: f64,
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
    let (mut all, mut resumable) = (Vec::new(), 0);
    for c in clients {
        let (latencies, primed) = c.await.expect("a client task")?;
        all.extend(latencies);
        resumable += primed;
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
        resumable: resumable as f64 / all.len().max(1) as f64,
    })
}

/// Which rows of the throughput tables to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tables {
    /// Every row: the floor, mcpwire in memory and on Redis, rmcp.
    Full,
    /// The Redis rows and the in-memory rows they are read against (`-- cluster`).
    Cluster,
}

async fn rps(measure: Duration, cluster: &Cluster, tables: Tables) {
    let full = tables == Tables::Full;
    // The floor first, rmcp last, in full tables.
    let group = |floor: &'static str, mut rows: Vec<Spec>, rmcp: &'static str, proto, sse| {
        if full {
            rows.insert(
                0,
                Spec::other("floor", floor, Proto::Bare, sse, Kind::Floor),
            );
            rows.push(Spec::other("rmcp", rmcp, proto, sse, Kind::Rmcp));
        }
        rows
    };
    let mcpwire = Spec::mcpwire;
    println!(
        "\n## tools/call echo, HTTP/1.1 keep-alive on 127.0.0.1, {:.1} s per row\n",
        measure.as_secs_f64()
    );
    let mut json = Vec::new();
    if full {
        json.push(mcpwire(
            "mcpwire",
            "--no-legacy --json-response --stateless",
            Proto::Sessions,
            false,
            Kind::Mcpwire,
        ));
    }
    json.extend([
        mcpwire(
            "mcpwire (sessions)",
            "--no-legacy --json-response",
            Proto::Sessions,
            false,
            Kind::InMemory,
        ),
        cluster.row("--no-legacy --json-response", Proto::Sessions, false),
    ]);
    let sse = vec![
        mcpwire(
            "mcpwire",
            "--no-legacy --sse-response",
            Proto::Sessions,
            true,
            Kind::InMemory,
        ),
        cluster.row("--no-legacy --sse-response", Proto::Sessions, true),
    ];
    table(
        measure,
        vec![
            group("floor-json", json, "rmcp-json", Proto::Sessions, false),
            group("floor-sse", sse, "rmcp-sse", Proto::Sessions, true),
        ],
    )
    .await;
    println!(
        "\n## tools/call echo at revision 2026-07-28 (no session; `_meta` and `Mcp-*` headers), {:.1} s per row\n",
        measure.as_secs_f64()
    );
    let modern = |args: &str, sse| {
        vec![
            mcpwire("mcpwire", args, Proto::Modern, sse, Kind::InMemory),
            cluster.row(args, Proto::Modern, sse),
        ]
    };
    table(
        measure,
        vec![
            group(
                "floor-json",
                modern("--no-legacy --json-response", false),
                "rmcp-modern-json",
                Proto::Modern,
                false,
            ),
            group(
                "floor-sse",
                modern("--no-legacy --sse-response", true),
                "rmcp-modern-sse",
                Proto::Modern,
                true,
            ),
        ],
    )
    .await;
}

/// One table: each group (a response mode: JSON, then SSE) started, measured at every
/// concurrency with its rows interleaved so that their ratios hold, and stopped before
/// the next group starts. The ratio columns read each row against its group's floor,
/// rmcp, and (Redis rows) in-memory row, where the group has them; `resumable` is the
/// share of an SSE row's calls answered with an event id (a ring of the stream kept for
/// resumes, and written to Redis on a node). Then a line gives the Redis rows' share of
/// the in-memory rows at concurrency 64.
async fn table(measure: Duration, groups: Vec<Vec<Spec>>) {
    println!(
        "| mode | server | concurrency | req/s | p50 ms | p99 ms | of floor | × rmcp | of in-memory | resumable |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut at_64 = Vec::new();
    for specs in groups {
        let servers: Vec<Server> = specs.iter().map(Server::start).collect();
        let Some(first) = servers.first() else {
            continue;
        };
        let mode = if first.sse { "SSE" } else { "JSON" };
        for concurrency in [1, 16, 64] {
            let mut rows = Vec::new();
            for server in &servers {
                let row = load(server.addr, server.proto, concurrency, measure).await;
                rows.push(row.unwrap_or_else(|e| panic!("{}: {e}", server.name)));
            }
            let of = |kind| {
                servers
                    .iter()
                    .zip(&rows)
                    .find(|(s, _)| s.kind == kind)
                    .map(|(_, row)| row.rps)
            };
            let (floor, rmcp, in_memory) = (of(Kind::Floor), of(Kind::Rmcp), of(Kind::InMemory));
            let ratio = |base: Option<f64>, rps: f64, percent: bool| match base {
                Some(base) if percent => format!("{:.0}%", 100.0 * rps / base),
                Some(base) => format!("{:.2}", rps / base),
                None => "–".to_owned(),
            };
            for (server, row) in servers.iter().zip(&rows) {
                let redis = server.kind == Kind::Redis;
                let resumable = if server.sse && server.kind != Kind::Floor {
                    format!("{:.0}%", 100.0 * row.resumable)
                } else {
                    "–".to_owned()
                };
                println!(
                    "| {mode} | {} | {concurrency} | {:.0} | {:.3} | {:.3} | {} | {} | {} | {resumable} |",
                    server.name,
                    row.rps,
                    row.p50,
                    row.p99,
                    ratio(floor, row.rps, true),
                    ratio(rmcp, row.rps, false),
                    ratio(in_memory.filter(|_| redis), row.rps, true),
                );
                if redis && concurrency == 64 {
                    at_64.push(format!("{mode} {}", ratio(in_memory, row.rps, true)));
                }
            }
        }
        // Every node of this group is stopped before the next group starts.
        drop(servers);
    }
    if !at_64.is_empty() {
        println!(
            "\nmcpwire (redis) at concurrency 64, of the in-memory row's req/s (issue 26: ≥ 50%): {}",
            at_64.join(", ")
        );
    }
}

// ---------------------------------------------------------------------------------------
// A resume on another node.

/// How a resume sample waits before its GET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// The GET goes as soon as A's stream ended.
    AtOnce,
    /// The GET goes once the ring's end marker is in Redis.
    Stored,
}

/// The resume on another node: see the module's docs. Prints one row per way.
async fn resume(cluster: &Cluster, samples: usize) {
    println!(
        "\n## A finished SSE stream of node A resumed on node B (Last-Event-ID: the priming event's id), both on Redis; from the GET to the replayed result (issue 26: p99 ≤ 5 ms)\n"
    );
    let args = "--no-legacy --sse-response";
    let a = Server::start(&Spec::mcpwire(
        "node A",
        &format!("{args} --store {} --node-id 1", cluster.redis.url()),
        Proto::Sessions,
        true,
        Kind::Redis,
    ));
    let b = Server::start(&Spec::mcpwire(
        "node B",
        &format!("{args} --store {} --node-id 2", cluster.redis.url()),
        Proto::Sessions,
        true,
        Kind::Redis,
    ));
    let measured = resume_samples(cluster, &a, &b, samples)
        .await
        .unwrap_or_else(|e| panic!("the resume on node B: {e}"));
    let short = measured.iter().any(|(_, l)| l.len() < samples);
    let mut slowest = Vec::new();
    println!(
        "| resume | samples | p50 ms | p99 ms | max ms | over 5 ms |\n|---|---:|---:|---:|---:|---:|"
    );
    for (way, mut latencies) in measured {
        latencies.sort_unstable();
        let at = |q: f64| {
            let i = ((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1));
            f64::from(latencies.get(i).copied().unwrap_or(0)) / 1000.0
        };
        let over = latencies.iter().filter(|&&us| us > 5_000).count();
        let way = match way {
            Wait::AtOnce => "at once",
            Wait::Stored => "ring stored",
        };
        if over > 0 {
            let ms: Vec<String> = (latencies.iter().rev().take(over.min(8)))
                .map(|&us| format!("{:.1}", f64::from(us) / 1000.0))
                .collect();
            slowest.push(format!("{way}: {} ms", ms.join(", ")));
        }
        println!(
            "| {way} | {} | {:.3} | {:.3} | {:.3} | {over} |",
            latencies.len(),
            at(0.50),
            at(0.99),
            f64::from(latencies.last().copied().unwrap_or(0)) / 1000.0,
        );
    }
    if !slowest.is_empty() {
        // A ring not in Redis yet when B first reads it is read again 25 ms later.
        println!(
            "\nSlowest (a ring B finds missing is asked for again after 25 ms): {}",
            slowest.join("; ")
        );
    }
    if short {
        println!("\n(fewer samples than asked: the bound of {RESUME_BOUND:?} ran out)");
    }
}

/// The samples of both ways, alternating, after a warm-up: the latencies (µs) of each.
/// Each session is opened on A and adopted by B (a ping there, which may wait for A's
/// write of the record) before its samples, and deleted after
/// [`RESUME_CALLS_PER_SESSION`] of them; none of that is timed.
async fn resume_samples(
    cluster: &Cluster,
    a: &Server,
    b: &Server,
    samples: usize,
) -> Result<[(Wait, Vec<u32>); 2], String> {
    let mut to_a = connect(a.addr).await?;
    let mut to_b = connect(b.addr).await?;
    let warm = (samples / 10).min(100);
    let (mut at_once, mut stored) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    let until = Instant::now() + RESUME_BOUND;
    let mut session: Option<(String, usize)> = None;
    for (i, call) in (0..(warm + samples) * 2).zip(1..) {
        if Instant::now() >= until {
            break;
        }
        let (id, calls) = match session.take() {
            Some((id, calls)) if calls < RESUME_CALLS_PER_SESSION => (id, calls),
            old => {
                if let Some((id, _)) = old {
                    delete_session(&mut to_a, a.addr, &id).await?;
                }
                let id = open_session((&mut to_a, a.addr), (&mut to_b, b.addr)).await?;
                (id, 0)
            }
        };
        // The ways alternate: sample n of each is calls 2n and 2n + 1.
        let way = [Wait::AtOnce, Wait::Stored][i % 2];
        let n = i / 2;
        let took = resume_once(
            cluster,
            (&mut to_a, a.addr),
            (&mut to_b, b.addr),
            &id,
            call,
            way,
        )
        .await?;
        session = Some((id, calls + 1));
        if n >= warm {
            let us = u32::try_from(took.as_micros()).unwrap_or(u32::MAX);
            match way {
                Wait::AtOnce => at_once.push(us),
                Wait::Stored => stored.push(us),
            }
        }
    }
    if let Some((id, _)) = session {
        delete_session(&mut to_a, a.addr, &id).await?;
    }
    Ok([(Wait::AtOnce, at_once), (Wait::Stored, stored)])
}

/// A session opened on A (initialize, initialized) and adopted by B (a ping there): its
/// id.
async fn open_session(
    (to_a, a): (&mut Conn, SocketAddr),
    (to_b, b): (&mut Conn, SocketAddr),
) -> Result<String, String> {
    reconnect_if_closed(to_a, a).await?;
    let id = within("initialize on A", handshake(to_a, a))
        .await??
        .ok_or("node A gave no session id")?;
    reconnect_if_closed(to_b, b).await?;
    let ping = request(
        http::Method::POST,
        b,
        Some(&id),
        Bytes::from_static(PING.as_bytes()),
    );
    let (status, _, body) = within("a ping on B", exchange(to_b, ping)).await??;
    if status != 200 || memchr::memmem::find(&body, br#""result""#).is_none() {
        return Err(format!(
            "node B did not take session {id}: {status} {body:?}"
        ));
    }
    Ok(id)
}

/// DELETE of session `id`, which ends it (and its rings) on every node.
async fn delete_session(send: &mut Conn, addr: SocketAddr, id: &str) -> Result<(), String> {
    reconnect_if_closed(send, addr).await?;
    let delete = request(http::Method::DELETE, addr, Some(id), Bytes::new());
    let (status, _, body) = within("DELETE", exchange(send, delete)).await??;
    if status != 200 {
        return Err(format!("DELETE of session {id}: {status} {body:?}"));
    }
    Ok(())
}

/// One sample: `tools/call echo` (JSON-RPC id `call`) on A, its stream read to the end;
/// then, `way`, a GET on B resuming after the priming event. The time from sending the
/// GET to decoding the replayed result; the rest of B's stream is read (untimed) and
/// must hold no second copy of it.
async fn resume_once(
    cluster: &Cluster,
    (to_a, a): (&mut Conn, SocketAddr),
    (to_b, b): (&mut Conn, SocketAddr),
    session: &str,
    call: u64,
    way: Wait,
) -> Result<Duration, String> {
    reconnect_if_closed(to_a, a).await?;
    let post = request(http::Method::POST, a, Some(session), call_body(call));
    let (status, _, body) = within("the call on A", exchange(to_a, post)).await??;
    if status != 200 {
        return Err(format!("the call on A: {status} {body:?}"));
    }
    let last = priming_id(&body, call)?;
    if way == Wait::Stored {
        ring_stored(&cluster.redis, session, &last).await?;
    }
    reconnect_if_closed(to_b, b).await?;
    let get = http::Request::get("/mcp")
        .header("host", b.to_string())
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-session-id", session)
        .header("last-event-id", &last)
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("a GET with Last-Event-ID {last:?}: {e}"))?;
    within("B ready", to_b.ready())
        .await?
        .map_err(|e| format!("ready: {e}"))?;
    let began = Instant::now();
    let response = within("B's answer", to_b.send_request(get))
        .await?
        .map_err(|e| format!("the GET on B: {e}"))?;
    let status = response.status();
    let mut body = response.into_body();
    if status != 200 {
        let text = within("B's refusal", body.collect())
            .await?
            .map(|b| b.to_bytes());
        return Err(format!("the GET on B after {last}: {status} {text:?}"));
    }
    let mut decoder = Decoder::new(Limits::default());
    let (mut took, mut copies) = (None, 0);
    let mut seen = |decoder: &mut Decoder| -> Result<(), String> {
        while let Some(item) = decoder
            .poll_item()
            .map_err(|e| format!("B's stream: {e}"))?
        {
            if let Item::Event(event) = item
                && answers(event.data(), call)?
            {
                took.get_or_insert_with(|| began.elapsed());
                copies += 1;
            }
        }
        Ok(())
    };
    while let Some(frame) = within("B's stream", body.frame()).await? {
        let frame = frame.map_err(|e| format!("B's stream: {e}"))?;
        if let Ok(data) = frame.into_data() {
            decoder.push(data).map_err(|e| format!("B's stream: {e}"))?;
            seen(&mut decoder)?;
        }
    }
    decoder.finish();
    seen(&mut decoder)?;
    match (took, copies) {
        (Some(took), 1) => Ok(took),
        (None, _) => Err(format!("B's stream after {last} ended without the result")),
        (Some(_), n) => Err(format!("B's stream after {last} held the result {n} times")),
    }
}

/// Whether an event's data is the echo result of call `call`: `false` for an event
/// with no data (a priming event), an error for any other message.
fn answers(data: &str, call: u64) -> Result<bool, String> {
    if data.is_empty() {
        return Ok(false);
    }
    let message: serde_json::Value = serde_json::from_str(data)
        .map_err(|e| format!("an event that is not JSON ({e}): {data}"))?;
    if message["id"] == call && message["result"]["content"][0]["text"] == "hi" {
        Ok(true)
    } else {
        Err(format!(
            "an event that is not the result of call {call}: {data}"
        ))
    }
}

/// The id of the event before the result of call `call` in a whole SSE body: the
/// priming event's, where a client that lost the stream before the result resumes.
fn priming_id(body: &Bytes, call: u64) -> Result<String, String> {
    let mut decoder = Decoder::new(Limits::default());
    decoder
        .push(body.clone())
        .map_err(|e| format!("A's stream: {e}"))?;
    decoder.finish();
    let mut before = String::new();
    while let Some(item) = decoder
        .poll_item()
        .map_err(|e| format!("A's stream: {e}"))?
    {
        let Item::Event(event) = item else { continue };
        if answers(event.data(), call)? {
            return if before.is_empty() {
                Err(format!("no event with an id before the result: {body:?}"))
            } else {
                Ok(before)
            };
        }
        before = event.id().to_owned();
    }
    Err(format!("A's stream has no result: {body:?}"))
}

/// Waits until the ring of event id `last` (`<epoch>:<ring>:<seq>`) of `session` ends
/// with its end marker in Redis (key `mcpwire:r:<session>:<epoch>:<ring>`, the
/// `mcpwire-redis` key schema under its default prefix).
async fn ring_stored(redis: &RedisServer, session: &str, last: &str) -> Result<(), String> {
    let (ring, _) = last
        .rsplit_once(':')
        .ok_or_else(|| format!("an event id with no ring: {last:?}"))?;
    let key = format!("mcpwire:r:{session}:{ring}");
    let until = Instant::now() + STEP_TIMEOUT;
    loop {
        // `id`, `end`, `` for the end marker; `id`, `f`, the frame for a frame.
        let tail = tokio::task::block_in_place(|| {
            redis.try_command(&["XREVRANGE", &key, "+", "-", "COUNT", "1"])
        })
        .map_err(|e| format!("redis: {e}"))?;
        if tail.lines().nth(1) == Some("end") {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(format!(
                "{key} has no end marker after {STEP_TIMEOUT:?}: {tail:?}"
            ));
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

/// Connects `conn` again if its server closed it.
async fn reconnect_if_closed(conn: &mut Conn, addr: SocketAddr) -> Result<(), String> {
    if conn.is_closed() {
        *conn = connect(addr).await?;
    }
    Ok(())
}

/// `what` within [`STEP_TIMEOUT`], or an error naming it.
async fn within<F: std::future::Future>(what: &str, f: F) -> Result<F::Output, String> {
    tokio::time::timeout(STEP_TIMEOUT, f)
        .await
        .map_err(|_| format!("{what}: nothing within {STEP_TIMEOUT:?}"))
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
        let kind = if mcp { Kind::Mcpwire } else { Kind::Floor };
        let server = Server::start(&Spec {
            name,
            role,
            args: args.to_owned(),
            proto,
            sse: true,
            kind,
        });
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

// ---------------------------------------------------------------------------------------
// The bridge against the Node gateways (`-- bridge`).

mod bridge {
    use std::collections::HashMap;
    use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use super::{Kind, Proto, SERVE_ARGS, Server, Spec, connect, exchange, handshake, load};

    /// The stdio server behind every gateway.
    pub(super) const STDIO_ECHO: &str = env!("CARGO_BIN_EXE_stdio-echo");

    /// Sessions opened for the memory rows: each starts a child (but at mcp-proxy).
    const IDLE: usize = 200;

    /// `benches/gateways`, installed (`npm ci`) unless it is already.
    fn gateways() -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("gateways");
        if !dir.join("node_modules/.package-lock.json").exists() {
            let status = Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(&dir)
                .status()
                .unwrap_or_else(|e| {
                    panic!(
                        "npm ci in {}: {e} (the bridge rows need Node.js and npm)",
                        dir.display()
                    )
                });
            assert!(status.success(), "npm ci in {} failed", dir.display());
        }
        dir
    }

    /// A gateway process started with `node`, killed when dropped.
    struct Node {
        name: &'static str,
        child: Child,
        addr: SocketAddr,
    }

    impl Drop for Node {
        fn drop(&mut self) {
            // The gateways spawn children of their own (supergateway through `sh`).
            for pid in descendants(self.child.id()) {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// A free loopback port (closed again: the gateway binds it next).
    fn free_port() -> u16 {
        StdListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
    }

    impl Node {
        fn start(name: &'static str, script: &str, args: &[String]) -> Self {
            let dir = gateways();
            let child = Command::new("node")
                .arg(dir.join("node_modules").join(script))
                .args(args)
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("node runs {name}: {e}"));
            let port = args
                .iter()
                .position(|a| a == "--port")
                .and_then(|i| args.get(i + 1))
                .and_then(|p| p.parse().ok())
                .expect("--port");
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let until = Instant::now() + Duration::from_secs(30);
            while StdStream::connect(addr).is_err() {
                assert!(
                    Instant::now() < until,
                    "{name} did not listen on {addr} within 30 s"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            Self { name, child, addr }
        }

        fn supergateway(stateful: bool) -> Self {
            let mut args: Vec<String> = [
                "--stdio",
                STDIO_ECHO,
                "--outputTransport",
                "streamableHttp",
                "--streamableHttpPath",
                "/mcp",
                "--logLevel",
                "none",
                "--port",
            ]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
            args.push(free_port().to_string());
            if stateful {
                args.push("--stateful".into());
            }
            Self::start("supergateway", "supergateway/dist/index.js", &args)
        }

        fn mcp_proxy() -> Self {
            let port = free_port().to_string();
            let args: Vec<String> = [
                "--host",
                "127.0.0.1",
                "--port",
                &port,
                "--server",
                "stream",
                "--streamEndpoint",
                "/mcp",
                "--",
                STDIO_ECHO,
            ]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
            Self::start("mcp-proxy", "mcp-proxy/dist/bin/mcp-proxy.mjs", &args)
        }
    }

    /// `mcpwire bridge --stdio stdio-echo ARGS`.
    fn mcpwire(args: &str) -> Server {
        Server::start(&Spec {
            name: "mcpwire bridge",
            role: "mcpwire-bridge",
            args: args.to_owned(),
            proto: Proto::Sessions,
            sse: false,
            kind: Kind::Mcpwire,
        })
    }

    /// The rows of one era: mcpwire first, then the Node gateways; `× best Node` reads
    /// each row against the faster Node gateway at its concurrency.
    pub(super) async fn tables(measure: Duration) {
        let _ = SERVE_ARGS;
        for (era, proto) in [
            ("session era (2025-11-25)", Proto::Sessions),
            ("2026-07-28", Proto::Modern),
        ] {
            println!(
                "\n## Bridges to a stdio server: tools/call echo, {era}, {:.1} s per row\n",
                measure.as_secs_f64()
            );
            println!(
                "| gateway | concurrency | req/s | p50 ms | p99 ms | × best Node |\n|---|---:|---:|---:|---:|---:|"
            );
            let ours = mcpwire("--pool 4");
            let nodes = [
                Node::supergateway(proto == Proto::Sessions),
                Node::mcp_proxy(),
            ];
            for concurrency in [1, 16] {
                let mine = load(ours.addr, proto, concurrency, measure).await;
                let theirs: Vec<_> = {
                    let mut rows = Vec::new();
                    for node in &nodes {
                        rows.push(load(node.addr, proto, concurrency, measure).await);
                    }
                    rows
                };
                let best = theirs
                    .iter()
                    .filter_map(|r| r.as_ref().ok().map(|r| r.rps))
                    .fold(0.0_f64, f64::max);
                let ratio = |rps: f64| {
                    if best > 0.0 {
                        format!("{:.1}", rps / best)
                    } else {
                        "–".to_owned()
                    }
                };
                let rows = std::iter::once(("mcpwire bridge", mine))
                    .chain(nodes.iter().map(|n| n.name).zip(theirs));
                for (name, row) in rows {
                    match row {
                        Ok(row) => println!(
                            "| {name} | {concurrency} | {:.0} | {:.3} | {:.3} | {} |",
                            row.rps,
                            row.p50,
                            row.p99,
                            ratio(row.rps)
                        ),
                        Err(e) => println!(
                            "| {name} | {concurrency} | failed: {} | | | |",
                            e.chars().take(120).collect::<String>()
                        ),
                    }
                }
            }
        }
    }

    /// Every process below `root`, from `/proc`.
    fn descendants(root: u32) -> Vec<u32> {
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
            let Some(ppid) = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.split(' ').nth(1))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            children.entry(ppid).or_default().push(pid);
        }
        let mut all = Vec::new();
        let mut queue = vec![root];
        while let Some(pid) = queue.pop() {
            for &child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
                all.push(child);
                queue.push(child);
            }
        }
        all
    }

    /// `VmRSS` of `pid`, in KiB (0 once it is gone).
    fn rss_of(pid: u32) -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// The gateway's own RSS and its children's, in KiB.
    fn measure_rss(pid: u32) -> (u64, u64) {
        let children = descendants(pid).into_iter().map(rss_of).sum();
        (rss_of(pid), children)
    }

    /// Opens `IDLE` sessions on 8 connections and keeps them (nothing is deleted).
    async fn open(addr: SocketAddr) {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                tokio::spawn(async move {
                    let mut send = connect(addr).await.expect("connect");
                    for _ in 0..IDLE / 8 {
                        handshake(&mut send, addr).await.expect("a session");
                    }
                })
            })
            .collect();
        for w in workers {
            w.await.expect("a worker");
        }
    }

    /// Resident memory per idle session: each gateway warmed up (8 sessions, a call in
    /// each), then `IDLE` more sessions opened and left idle.
    pub(super) async fn rss() {
        println!(
            "\n## Resident memory per idle session (session era), {IDLE} sessions above a warmed-up baseline\n"
        );
        println!("| gateway | the gateway's process | with its children |\n|---|---:|---:|");
        let ours = mcpwire("--pool 1 --max-children 512");
        let theirs = [Node::supergateway(true), Node::mcp_proxy()];
        let mut rows: Vec<(&str, u32, SocketAddr)> =
            vec![("mcpwire bridge", ours.child.id(), ours.addr)];
        rows.extend(theirs.iter().map(|n| (n.name, n.child.id(), n.addr)));
        for (name, pid, addr) in rows {
            let mut send = connect(addr).await.expect("connect");
            for _ in 0..8 {
                let session = handshake(&mut send, addr).await.expect("a session");
                let (status, _, _) = exchange(
                    &mut send,
                    super::request(
                        http::Method::POST,
                        addr,
                        session.as_deref(),
                        super::call_body(1),
                    ),
                )
                .await
                .expect("a call");
                assert_eq!(status, 200, "{name}");
            }
            drop(send);
            super::settle().await;
            let (base, base_children) = measure_rss(pid);
            open(addr).await;
            super::settle().await;
            super::settle().await;
            let (after, after_children) = measure_rss(pid);
            let per = |from: u64, to: u64| to.saturating_sub(from) as f64 / IDLE as f64;
            println!(
                "| {name} | {:.1} KiB | {:.1} KiB |",
                per(base, after),
                per(base + base_children, after + after_children)
            );
        }
    }
}
