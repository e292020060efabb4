//! Cluster nodes on 127.0.0.1, each an `McpService` served over HTTP with its store on a
//! real Redis (the test's own `redis-server`), and a small HTTP client that reads JSON
//! and SSE answers as they come.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{Config, Event, NodeId, RequestHandle, ResponseMode, Target};
use mcpwire_redis::{RedisEvent, RedisOptions, RedisStore};
use mcpwire_tests::redis_server::RedisServer;
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::server::{McpService, serve};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub const V3: &str = "2025-11-25";
pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
pub const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}"#;
pub const PING: &str = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;

/// How long one read of an answer may take before the test fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs a test body with a bound on its whole time.
pub async fn bounded<F: Future>(limit: Duration, body: F) -> F::Output {
    tokio::time::timeout(limit, body)
        .await
        .expect("the test took too long")
}

/// Runs blocking fixture work (starting, stopping Redis) without stalling the runtime.
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    tokio::task::block_in_place(f)
}

/// A Redis of the test's own.
pub fn redis() -> RedisServer {
    blocking(RedisServer::start)
}

/// What a node's store told (`RedisEvent`, by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Told {
    Unavailable,
    Recovered,
    CommandFailed,
    SubscriberLost,
    SubscriberRecovered,
}

/// One cluster node: served on 127.0.0.1, its store on Redis, its application answering
/// `initialize` and `ping` at once and handing each `tools/call` to the test.
pub struct Node {
    pub addr: SocketAddr,
    pub service: McpService,
    pub calls: mpsc::UnboundedReceiver<RequestHandle>,
    pub told: mpsc::UnboundedReceiver<Told>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Node {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Node `n`'s config: Server-Sent Events always, so every call is a resumable stream.
pub fn sse() -> Config {
    Config::new().with_response_mode(ResponseMode::Sse)
}

impl Node {
    /// Node `n` on `redis` with `config` and the default store options.
    pub async fn start(n: u16, redis: &RedisServer, config: Config) -> Self {
        Self::with_options(n, redis, config, RedisOptions::new()).await
    }

    /// Node `n` on `redis` with `config` and store `options`.
    pub async fn with_options(
        n: u16,
        redis: &RedisServer,
        config: Config,
        options: RedisOptions,
    ) -> Self {
        Self::with_url(n, &redis.url(), config, options).await
    }

    /// Node `n` on the Redis at `url` (a proxy in front of the test's own, say) with
    /// `config` and store `options`.
    pub async fn with_url(n: u16, url: &str, config: Config, options: RedisOptions) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (service, mut events) = McpService::new(
            config.with_node(Some(NodeId::new(n))),
            counter_entropy(u64::from(n) * 1_000),
        );
        let (told_tx, told) = mpsc::unbounded_channel();
        let options = options.with_on_event(move |e| {
            let told = match e {
                RedisEvent::Unavailable(_) => Told::Unavailable,
                RedisEvent::Recovered => Told::Recovered,
                RedisEvent::CommandFailed(e) => {
                    eprintln!("node {n}: {e}");
                    Told::CommandFailed
                }
                RedisEvent::SubscriberLost(_) => Told::SubscriberLost,
                RedisEvent::SubscriberRecovered => Told::SubscriberRecovered,
                _ => return,
            };
            let _ = told_tx.send(told);
        });
        let store = RedisStore::connect(url, options).await.unwrap();
        let mut tasks = vec![tokio::spawn(store.run(service.store_link()))];
        tasks.push(tokio::spawn({
            let service = service.clone();
            async move {
                serve(listener, service).await;
            }
        }));
        let (calls_tx, calls) = mpsc::unbounded_channel();
        let app = service.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let Event::Request(request) = event else {
                    continue;
                };
                let result = match request.method() {
                    "initialize" => format!(
                        r#"{{"protocolVersion":"{}","capabilities":{{}},"serverInfo":{{"name":"node","version":"1"}}}}"#,
                        request.version()
                    ),
                    "tools/call" => {
                        let _ = calls_tx.send(request.handle());
                        continue;
                    }
                    _ => "{}".to_owned(),
                };
                let result = RawJson::new(&result).unwrap();
                app.with_server(|s, now| {
                    let _ = s.respond(now, request.handle(), &result);
                });
            }
        }));
        Self {
            addr,
            service,
            calls,
            told,
            tasks,
        }
    }

    /// Kills the node's store driver as a crash would: no clean end, so its liveness
    /// keys are left to expire; it serves HTTP on, but nothing reaches Redis any more.
    pub fn kill_store(&mut self) {
        self.tasks[0].abort();
    }

    /// The next `tools/call` this node's application got.
    pub async fn call(&mut self) -> RequestHandle {
        tokio::time::timeout(READ_TIMEOUT, self.calls.recv())
            .await
            .expect("a tools/call in time")
            .expect("the application runs")
    }

    /// Sends progress `n` on the stream of request `h`.
    pub fn progress(&self, h: RequestHandle, n: u32) {
        let params = format!(r#"{{"progressToken":1,"progress":{n}}}"#);
        let params = RawJson::new(&params).unwrap();
        self.service.with_server(|s, now| {
            s.notify(
                now,
                Target::Request(h),
                "notifications/progress",
                Some(&params),
            )
            .unwrap();
        });
    }

    /// Answers request `h`: its stream finishes.
    pub fn answer(&self, h: RequestHandle) {
        let result = RawJson::new(r#"{"content":[]}"#).unwrap();
        self.service
            .with_server(|s, now| s.respond(now, h, &result).unwrap());
    }

    /// Waits until the store told `what` (what it told before is passed over).
    pub async fn wait_told(&mut self, what: Told, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.told.recv()).await {
                Ok(Some(told)) if told == what => return,
                Ok(Some(_)) => {}
                Ok(None) => panic!("the store is gone"),
                Err(_) => panic!("the store did not tell {what:?} within {within:?}"),
            }
        }
    }

    /// Everything the store told so far.
    pub fn told_so_far(&mut self) -> Vec<Told> {
        let mut all = Vec::new();
        while let Ok(told) = self.told.try_recv() {
            all.push(told);
        }
        all
    }

    /// `initialize` here; returns the session id. Its client has not come back yet.
    pub async fn initialize(&self) -> String {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{V3}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        );
        let mut x = Exchange::send(self.addr, "POST", None, None, Some(&body)).await;
        assert_eq!(x.status, 200);
        let sid = x.header("mcp-session-id").expect("a session").to_owned();
        let messages = x.messages().await;
        assert!(
            messages
                .iter()
                .any(|m| m["result"]["protocolVersion"] == V3),
            "{messages:?}"
        );
        sid
    }

    /// POSTs `body` in session `sid`.
    pub async fn post(&self, sid: &str, body: &str) -> Exchange {
        Exchange::send(self.addr, "POST", Some(sid), None, Some(body)).await
    }

    /// GETs the session's stream, resuming after `last` if given.
    pub async fn get(&self, sid: &str, last: Option<&str>) -> Exchange {
        Exchange::send(self.addr, "GET", Some(sid), last, None).await
    }

    /// DELETEs session `sid`.
    pub async fn delete(&self, sid: &str) -> Exchange {
        Exchange::send(self.addr, "DELETE", Some(sid), None, None).await
    }
}

/// One SSE event: its id (if it has one) and its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub data: String,
}

impl SseEvent {
    /// Its data as JSON, if it holds a message.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.data).ok()
    }

    /// The progress value it carries, if it is a progress notification.
    pub fn progress(&self) -> Option<i64> {
        let json = self.json()?;
        (json["method"] == "notifications/progress")
            .then(|| json["params"]["progress"].as_i64())
            .flatten()
    }
}

/// One HTTP/1.1 exchange on its own connection; dropping it closes the connection (the
/// client goes away).
pub struct Exchange {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    body: Incoming,
    buf: Vec<u8>,
    ended: bool,
    conn: JoinHandle<()>,
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.conn.abort();
    }
}

impl Exchange {
    /// Sends one request and waits for the response head.
    pub async fn send(
        addr: SocketAddr,
        method: &str,
        sid: Option<&str>,
        last: Option<&str>,
        body: Option<&str>,
    ) -> Self {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut b = http::Request::builder()
            .method(method)
            .uri("/mcp")
            .header("host", addr.to_string())
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", V3);
        if body.is_some() {
            b = b.header("content-type", "application/json");
        }
        if let Some(sid) = sid {
            b = b.header("mcp-session-id", sid);
        }
        if let Some(last) = last {
            b = b.header("last-event-id", last);
        }
        let body = Full::new(Bytes::from(body.unwrap_or_default().to_owned()));
        let response = tokio::time::timeout(READ_TIMEOUT, send.send_request(b.body(body).unwrap()))
            .await
            .expect("a response head in time")
            .expect("a response");
        let (head, body) = response.into_parts();
        Self {
            status: head.status,
            headers: head.headers,
            body,
            buf: Vec::new(),
            ended: false,
            conn,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Reads more of the body; `false` at its end (or if the connection was cut).
    async fn fill(&mut self, within: Duration) -> bool {
        if self.ended {
            return false;
        }
        loop {
            match tokio::time::timeout(within, self.body.frame()).await {
                Err(_) => panic!("no bytes within {within:?}"),
                Ok(None | Some(Err(_))) => {
                    self.ended = true;
                    return false;
                }
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                        return true;
                    }
                }
            }
        }
    }

    /// The whole body, as text.
    pub async fn text(&mut self) -> String {
        while self.fill(READ_TIMEOUT).await {}
        String::from_utf8(std::mem::take(&mut self.buf)).unwrap()
    }

    /// The body's JSON-RPC messages: the JSON body, or every SSE event's data.
    pub async fn messages(&mut self) -> Vec<serde_json::Value> {
        let sse = self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if !sse {
            let text = self.text().await;
            return serde_json::from_str(&text).into_iter().collect();
        }
        let mut messages = Vec::new();
        while let Some(event) = self.event(READ_TIMEOUT).await {
            messages.extend(event.json());
        }
        messages
    }

    /// The next SSE event with data or an id (a `retry`-only or comment block is passed
    /// over); `None` once the stream ended. Panics if none comes within `within`.
    pub async fn event(&mut self, within: Duration) -> Option<SseEvent> {
        loop {
            while let Some(at) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..at + 2).collect();
                let block = String::from_utf8(block).unwrap();
                let mut id = None;
                let mut data: Vec<&str> = Vec::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if id.is_some() || !data.is_empty() {
                    return Some(SseEvent {
                        id,
                        data: data.join("\n"),
                    });
                }
            }
            if !self.fill(within).await {
                return None;
            }
        }
    }

    /// Events until one carrying data that satisfies `pred` (returned with the ones
    /// before it).
    pub async fn events_until(&mut self, pred: impl Fn(&SseEvent) -> bool) -> Vec<SseEvent> {
        let mut seen = Vec::new();
        loop {
            let event = self
                .event(READ_TIMEOUT)
                .await
                .unwrap_or_else(|| panic!("the stream ended before the event wanted: {seen:?}"));
            let done = pred(&event);
            seen.push(event);
            if done {
                return seen;
            }
        }
    }

    /// Whether the stream ends (or is cut) within `within`, with nothing more.
    pub async fn ends_within(&mut self, within: Duration) -> Vec<SseEvent> {
        let mut rest = Vec::new();
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the stream did not end: {rest:?}");
            match self.event(left).await {
                Some(event) => rest.push(event),
                None => return rest,
            }
        }
    }
}

/// Polls `check` every 20 ms until it holds, for at most `within`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
