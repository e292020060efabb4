//! The shared scenario suite's harness: a server of either adapter started in-process as
//! `mcpwire serve` starts it, raw HTTP requests through ureq, and the transcript each
//! scenario returns so that the two adapters' answers can be compared whole.
//!
//! A scenario is a plain function `fn(&Server) -> Transcript`: it speaks to the server,
//! asserts what the wire must show, and records what it saw. [`on_both`] runs it once
//! on each adapter (each with a fresh server, the same configuration and the same
//! seeded entropy) and then asserts that the two transcripts are equal: the same core
//! behind both adapters, so the same bytes of MCP, down to session and event ids. It
//! runs it a third time on the tokio adapter split into shards, as `mcpwire serve` runs
//! by default: the same answers again, its session and event ids aside (a shard stamps
//! its ids), which are compared by where they recur ([`Transcript::shape`]).
//!
//! Everything listens on 127.0.0.1, every request and every wait is bounded, and each
//! server is shut down when its [`Server`] is dropped.

pub(crate) mod clients;
pub(crate) mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mcpwire::server::Config;
use mcpwire_tests::server::{Reply, counter_entropy};
use serde_json::{Value, json};

/// How long any one request, call or wait may take before the scenario fails: far above
/// what each takes (milliseconds), there for a loaded machine and for a hang.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

/// The seed of both servers' entropy: the same session ids on both adapters.
const SERVER_SEED: u64 = 15;

/// The revision every raw scenario negotiates.
pub(crate) const VERSION: &str = "2025-11-25";

/// The `Accept` a conforming client sends on POST (HTTP-POST-3).
pub(crate) const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// The two drivers of the one core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Adapter {
    /// `mcpwire-tokio`: `app::mount` and `server::serve` on a tokio runtime.
    Tokio,
    /// `mcpwire-blocking`: `server::serve` on its thread pool (tiny_http).
    Blocking,
    /// `mcpwire-tokio` over [`SHARDS`] cores (`app::mount_sharded`), as `mcpwire serve`
    /// runs it by default.
    TokioSharded,
}

/// The shards of [`Adapter::TokioSharded`].
const SHARDS: usize = 3;

/// Every server, in the order [`on_both`] runs them.
pub(crate) const ADAPTERS: [Adapter; 3] =
    [Adapter::Tokio, Adapter::Blocking, Adapter::TokioSharded];

/// A server of one adapter on 127.0.0.1, serving `mcpwire serve`'s reference tools.
/// Dropping it shuts it down.
pub(crate) struct Server {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    running: Running,
}

enum Running {
    Tokio {
        /// Taken on drop, to shut it down with a bound.
        runtime: Option<tokio::runtime::Runtime>,
        service: mcpwire_tokio::server::McpService,
    },
    Blocking(Option<mcpwire_blocking::server::Handle>),
}

impl Server {
    /// Starts `adapter` with `config`, as `mcpwire serve` starts it: the tokio adapter
    /// with `app::mount` and `server::serve`, the blocking one with `server::serve` and
    /// its default options; the reference tools on each.
    pub(crate) fn start_with(adapter: Adapter, config: Config) -> Self {
        match adapter {
            Adapter::Tokio | Adapter::TokioSharded => {
                let shards = if adapter == Adapter::Tokio { 1 } else { SHARDS };
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("a runtime");
                let listener = runtime
                    .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                    .expect("a loopback port");
                let addr = listener.local_addr().expect("its address");
                // `mount` spawns the service's tasks: inside the runtime.
                let service = {
                    let _entered = runtime.enter();
                    mcpwire_tokio::app::mount_sharded(
                        shards,
                        config,
                        counter_entropy(SERVER_SEED),
                        Arc::new(mcpwire_cli::reference::tools()),
                    )
                };
                runtime.spawn(mcpwire_tokio::server::serve(listener, service.clone()));
                Self {
                    addr,
                    running: Running::Tokio {
                        runtime: Some(runtime),
                        service,
                    },
                }
            }
            Adapter::Blocking => {
                use mcpwire_blocking::server::{ServeOptions, serve};
                let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
                let addr = listener.local_addr().expect("its address");
                let handle = serve(
                    listener,
                    config,
                    counter_entropy(SERVER_SEED),
                    Arc::new(mcpwire_cli::reference::blocking_tools()),
                    ServeOptions::new(),
                )
                .expect("the blocking server starts");
                Self {
                    addr,
                    running: Running::Blocking(Some(handle)),
                }
            }
        }
    }

    /// The Streamable HTTP endpoint's URL.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The sessions the core holds now.
    pub(crate) fn session_count(&self) -> usize {
        match &self.running {
            Running::Tokio { service, .. } => service
                .shards()
                .map(|shard| shard.with_server(|s, _| s.session_count()))
                .sum(),
            Running::Blocking(handle) => handle
                .as_ref()
                .expect("running")
                .with_server(|s, _| s.session_count()),
        }
    }

    /// A raw HTTP client for this server.
    pub(crate) fn http(&self) -> Http {
        Http::new(self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        match &mut self.running {
            Running::Tokio { runtime, .. } => {
                if let Some(runtime) = runtime.take() {
                    runtime.shutdown_timeout(Duration::from_secs(2));
                }
            }
            Running::Blocking(handle) => {
                if let Some(handle) = handle.take() {
                    handle.shutdown(Duration::from_secs(2));
                }
            }
        }
    }
}

/// Raw requests through ureq: no header it adds on its own but `Host` (and the framing
/// of a body), no status turned into an error, no redirect followed, no connection
/// reused, and a bound on each request, its body included.
pub(crate) struct Http {
    agent: ureq::Agent,
    base: String,
}

/// A request's body.
pub(crate) enum Body<'a> {
    /// No body.
    None,
    /// A body with its `Content-Length`.
    Text(&'a str),
    /// A body sent `Transfer-Encoding: chunked`, its length not announced.
    Chunked(Vec<u8>),
}

impl Http {
    fn new(addr: SocketAddr) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_idle_connections(0)
            .accept("")
            .user_agent("")
            .timeout_global(Some(TIMEOUT))
            .build()
            .new_agent();
        Self {
            agent,
            base: format!("http://{addr}"),
        }
    }

    /// Sends a request and returns its head and its body, not yet read.
    pub(crate) fn open(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Body<'_>,
    ) -> (http::response::Parts, ureq::Body) {
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = match body {
            Body::None => self.agent.run(request.body(()).expect("a request")),
            Body::Text(text) => self.agent.run(request.body(text).expect("a request")),
            Body::Chunked(bytes) => {
                let body = ureq::SendBody::from_owned_reader(std::io::Cursor::new(bytes));
                self.agent.run(request.body(body).expect("a request"))
            }
        }
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        response.into_parts()
    }

    /// Sends a request and reads its whole body (within [`TIMEOUT`]).
    pub(crate) fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Body<'_>,
    ) -> Reply {
        let (head, mut body) = self.open(method, path, headers, body);
        let body = body
            .read_to_vec()
            .unwrap_or_else(|e| panic!("{method} {path}: the body: {e}"));
        Reply {
            head: Some(head),
            body,
            ended: true,
            aborted: false,
        }
    }

    /// A POST to `/mcp` as a conforming client sends it: `Accept` both types, JSON, and
    /// on a session its id and the negotiated version.
    pub(crate) fn post(&self, session: Option<&str>, body: &str) -> Reply {
        let mut headers = vec![
            ("accept", ACCEPT_BOTH),
            ("content-type", "application/json"),
        ];
        if let Some(session) = session {
            headers.push(("mcp-session-id", session));
            headers.push(("mcp-protocol-version", VERSION));
        }
        self.send("POST", "/mcp", &headers, Body::Text(body))
    }

    /// A GET on `/mcp` for session `session`, resuming after `last_event_id` if given.
    pub(crate) fn get(&self, session: &str, last_event_id: Option<&str>) -> Reply {
        let mut headers = vec![
            ("accept", "text/event-stream"),
            ("mcp-session-id", session),
            ("mcp-protocol-version", VERSION),
        ];
        if let Some(id) = last_event_id {
            headers.push(("last-event-id", id));
        }
        self.send("GET", "/mcp", &headers, Body::None)
    }

    /// A DELETE of session `session`.
    pub(crate) fn delete(&self, session: &str) -> Reply {
        let headers = [
            ("mcp-session-id", session),
            ("mcp-protocol-version", VERSION),
        ];
        self.send("DELETE", "/mcp", &headers, Body::None)
    }

    /// `initialize` and `notifications/initialized`; returns the session id.
    pub(crate) fn initialize(&self) -> String {
        let reply = self.post(None, &initialize(0));
        assert_eq!(reply.status(), 200, "{}", text(&reply));
        let session = reply
            .header("mcp-session-id")
            .expect("SESSION-1: a session id")
            .to_owned();
        let reply = self.post(Some(&session), INITIALIZED);
        assert_eq!(reply.status(), 202, "{}", text(&reply));
        session
    }
}

/// An `initialize` request with id `id`, offering [`VERSION`].
pub(crate) fn initialize(id: u32) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "scenarios", "version": "1"},
        },
    })
    .to_string()
}

/// The client's `notifications/initialized`.
pub(crate) const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// A `tools/call` of `name` with `arguments`, and a progress token if given.
pub(crate) fn tools_call(
    id: u32,
    name: &str,
    arguments: Value,
    progress_token: Option<&str>,
) -> String {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(token) = progress_token {
        params["_meta"] = json!({ "progressToken": token });
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

/// A reply's body as text, for failure messages.
pub(crate) fn text(reply: &Reply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

/// Response headers that frame the message or name the HTTP library, not MCP: left out
/// of the comparison between adapters (hyper and tiny_http frame bodies their own way).
const FRAMING: [&str; 6] = [
    "date",
    "server",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
];

/// What an adapter-independent reader sees of a reply: the status, every header but
/// the [`FRAMING`] ones, and the body as JSON, as SSE items, or as text.
pub(crate) fn observe(reply: &Reply) -> Value {
    let head = reply.head.as_ref().expect("a head");
    let mut headers = serde_json::Map::new();
    for (name, value) in &head.headers {
        if !FRAMING.contains(&name.as_str()) {
            let value = value.to_str().expect("a visible ASCII header value");
            headers.insert(name.as_str().to_owned(), value.into());
        }
    }
    let body = if reply.body.is_empty() {
        Value::Null
    } else if reply.header("content-type") == Some("text/event-stream") {
        Value::Array(sse_items(reply))
    } else if let Ok(json) = serde_json::from_slice(&reply.body) {
        json
    } else {
        Value::String(text(reply))
    };
    json!({"status": reply.status(), "headers": headers, "body": body})
}

/// Every item of an SSE body: `{"id", "event", "data"}` for an event (data parsed as
/// JSON when it is not empty), `{"retry": ms}`, `{"comment": text}`.
pub(crate) fn sse_items(reply: &Reply) -> Vec<Value> {
    reply
        .items()
        .into_iter()
        .map(|item| match item {
            mcpwire::sse::Item::Event(e) => {
                let data = if e.data().is_empty() {
                    Value::String(String::new())
                } else {
                    serde_json::from_str(e.data()).expect("JSON event data")
                };
                json!({"id": e.id(), "event": e.event_type(), "data": data})
            }
            mcpwire::sse::Item::Retry(retry) => json!({ "retry": retry.as_millis() as u64 }),
            mcpwire::sse::Item::Comment(c) => json!({ "comment": c.as_str() }),
        })
        .collect()
}

/// What a scenario saw, step by step: a label and an observation each.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Transcript(Vec<(String, Value)>);

impl Transcript {
    /// Records `value` under `label`.
    pub(crate) fn record(&mut self, label: &str, value: Value) {
        self.0.push((label.to_owned(), value));
    }

    /// Records what `reply` shows ([`observe`]) under `label`, and returns it.
    pub(crate) fn reply(&mut self, label: &str, reply: &Reply) -> Value {
        let seen = observe(reply);
        self.record(label, seen.clone());
        seen
    }

    /// [`pretty`](Self::pretty) with every session id and event id replaced by its
    /// rank among them in order of first appearance (`<id 1>`, `<id 2>`, …): two
    /// transcripts with the same shape are the same but for the values of their ids,
    /// each recurring where the other's does.
    pub(crate) fn shape(&self) -> String {
        let mut ids = Vec::new();
        for (_, value) in &self.0 {
            collect_ids(value, &mut ids);
        }
        let text = self.pretty();
        // Ranked by first appearance; replaced longest first, so that no id is cut
        // inside a longer one.
        ids.sort_by_key(|id| text.find(id.as_str()));
        ids.dedup();
        let mut ranked: Vec<(usize, &String)> = ids.iter().enumerate().collect();
        ranked.sort_by_key(|(_, id)| std::cmp::Reverse(id.len()));
        ranked.into_iter().fold(text, |text, (rank, id)| {
            text.replace(id.as_str(), &format!("<id {}>", rank + 1))
        })
    }

    pub(crate) fn pretty(&self) -> String {
        self.0
            .iter()
            .map(|(label, value)| format!("{label}: {value:#}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The session ids (`Mcp-Session-Id` values, a legacy `endpoint`'s `sessionId`) and SSE
/// event ids anywhere in `value`.
fn collect_ids(value: &Value, ids: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            // A JSON-RPC message's `id` is the client's, the same on every server.
            let message = map.contains_key("jsonrpc");
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("mcp-session-id", Value::String(id)) if !id.is_empty() => {
                        ids.push(id.clone());
                    }
                    ("id", Value::String(id)) if !id.is_empty() && !message => {
                        ids.push(id.clone());
                    }
                    ("data", Value::String(data)) => {
                        if let Some((_, id)) = data.split_once("sessionId=") {
                            ids.push(id.split('&').next().unwrap_or(id).to_owned());
                        }
                    }
                    _ => collect_ids(v, ids),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_ids(v, ids)),
        _ => {}
    }
}

/// Runs `scenario` on a fresh server of each adapter configured as `mcpwire serve ARGS`,
/// then asserts the adapters' transcripts are equal, and the sharded server's of the
/// same shape.
pub(crate) fn on_both(args: &[&str], scenario: fn(&Server) -> Transcript) {
    let config = mcpwire_cli::reference::config(args).expect("mcpwire serve's options");
    on_both_with(&config, scenario);
}

/// [`on_both`] with a configuration of its own.
pub(crate) fn on_both_with(config: &Config, scenario: fn(&Server) -> Transcript) {
    let transcripts: Vec<Transcript> = ADAPTERS
        .into_iter()
        .map(|adapter| {
            let server = Server::start_with(adapter, config.clone());
            scenario(&server)
        })
        .collect();
    let [tokio, blocking, sharded] = &transcripts[..] else {
        unreachable!("three servers")
    };
    assert!(
        tokio == blocking,
        "the adapters answered differently\n--- tokio:\n{}\n--- blocking:\n{}",
        tokio.pretty(),
        blocking.pretty()
    );
    let (one, split) = (blocking.shape(), sharded.shape());
    assert!(
        one == split,
        "the shards answered differently\n--- one core:\n{one}\n--- {SHARDS} shards:\n{split}"
    );
}
