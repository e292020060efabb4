//! A driver for [`Server`] on a virtual clock: builds request heads, feeds bodies, collects
//! every exchange's transmits and decodes SSE bodies, so a test reads like the exchange
//! it checks.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcpwire::Entropy;
use mcpwire::server::{Config, Event, ExchangeId, Server, SessionId, Transmit};
use mcpwire::sse::{Decoder, Event as SseEvent, Item, Limits};

/// The `Accept` value a conforming client sends on POST (HTTP-POST-3).
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// A deterministic entropy source: a counter through [`splitmix64`](crate::splitmix64),
/// one byte per output (not secure; tests only).
pub fn counter_entropy(seed: u64) -> Box<dyn Entropy + Send> {
    let mut state = seed;
    Box::new(move |dst: &mut [u8]| {
        for b in dst {
            *b = crate::splitmix64(state) as u8;
            state = state.wrapping_add(crate::SPLITMIX64_GAMMA);
        }
    })
}

/// Everything one exchange wrote so far.
#[derive(Debug, Default, Clone)]
pub struct Reply {
    /// The response head, once written.
    pub head: Option<http::response::Parts>,
    /// The body bytes, concatenated.
    pub body: Vec<u8>,
    /// Whether `End` was written.
    pub ended: bool,
    /// Whether `Abort` was written: the connection was cut, the response unfinished.
    pub aborted: bool,
}

impl Reply {
    /// The status; panics if no head was written.
    pub fn status(&self) -> u16 {
        self.head.as_ref().expect("a head").status.as_u16()
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.as_ref()?.headers.get(name)?.to_str().ok()
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// The body decoded as an SSE stream: every dispatched event.
    pub fn events(&self) -> Vec<SseEvent> {
        self.items()
            .into_iter()
            .filter_map(|item| match item {
                Item::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    /// Every item of the body decoded as an SSE stream (events, comments, retries).
    pub fn items(&self) -> Vec<Item> {
        let mut decoder = Decoder::new(Limits::default());
        decoder
            .push(Bytes::copy_from_slice(&self.body))
            .expect("not finished");
        let mut out = Vec::new();
        while let Some(item) = decoder.poll_item().expect("a well-formed stream") {
            out.push(item);
        }
        out
    }

    /// The data of every `message` event that is not a priming event, as JSON.
    pub fn messages(&self) -> Vec<serde_json::Value> {
        self.events()
            .iter()
            .filter(|e| !e.data().is_empty() && e.event_type() == "message")
            .map(|e| serde_json::from_str(e.data()).expect("JSON event data"))
            .collect()
    }
}

/// The server, its virtual clock, and every exchange's output.
pub struct Harness {
    /// The server under test.
    pub server: Server,
    /// The virtual time.
    pub now: Instant,
    replies: BTreeMap<ExchangeId, Reply>,
    /// Events taken from the server, oldest first, not yet taken by the test.
    pub events: Vec<Event>,
}

impl Harness {
    /// A server with `config` and seeded entropy.
    pub fn new(config: Config) -> Self {
        Self::seeded(config, 1)
    }

    /// A server with `config` and entropy from `seed`.
    pub fn seeded(config: Config, seed: u64) -> Self {
        Self {
            server: Server::new(config, counter_entropy(seed)),
            now: Instant::now(),
            replies: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    /// A request head for `method` `path` with a loopback `Host` and `headers`.
    pub fn head(method: &str, path: &str, headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1:8080");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).expect("a valid test head").into_parts().0
    }

    /// Sends a whole request: head, the body (if any) in one chunk, its end; then drains.
    pub fn send(&mut self, head: http::request::Parts, body: Option<&str>) -> ExchangeId {
        let x = self.server.handle_head(self.now, head);
        if let Some(body) = body {
            self.server
                .handle_body(self.now, x, Bytes::copy_from_slice(body.as_bytes()));
        }
        self.server.handle_body_end(self.now, x);
        self.drain();
        x
    }

    /// POSTs `body` to `/mcp` with the conforming headers, the session id and version
    /// given.
    pub fn post(&mut self, session: Option<&str>, version: Option<&str>, body: &str) -> ExchangeId {
        let mut headers = Vec::new();
        if let Some(s) = session {
            headers.push(("mcp-session-id", s));
        }
        if let Some(v) = version {
            headers.push(("mcp-protocol-version", v));
        }
        self.send(post_head(&headers), Some(body))
    }

    /// GETs `/mcp` with the session, and `Last-Event-ID` if given.
    pub fn get(&mut self, session: &str, last_event_id: Option<&str>) -> ExchangeId {
        let mut headers = vec![("accept", "text/event-stream"), ("mcp-session-id", session)];
        if let Some(id) = last_event_id {
            headers.push(("last-event-id", id));
        }
        self.send(Self::head("GET", "/mcp", &headers), None)
    }

    /// Takes every transmit and event the server has.
    pub fn drain(&mut self) {
        while let Some(x) = self.server.poll_ready() {
            while let Some(t) = self.server.poll_transmit(x) {
                let reply = self.replies.entry(x).or_default();
                match t {
                    Transmit::Head(head) => {
                        assert!(reply.head.is_none(), "{x}: a second head");
                        reply.head = Some(head);
                    }
                    Transmit::Data(bytes) => {
                        assert!(reply.head.is_some(), "{x}: body before head");
                        assert!(!reply.ended, "{x}: body after end");
                        assert!(!reply.aborted, "{x}: body after abort");
                        reply.body.extend_from_slice(&bytes);
                    }
                    Transmit::End => {
                        assert!(reply.head.is_some(), "{x}: end before head");
                        assert!(!reply.aborted, "{x}: end after abort");
                        reply.ended = true;
                    }
                    Transmit::Abort => {
                        assert!(reply.head.is_some(), "{x}: abort before head");
                        assert!(!reply.ended, "{x}: abort after end");
                        reply.aborted = true;
                    }
                }
            }
        }
        while let Some(e) = self.server.poll_event() {
            self.events.push(e);
        }
    }

    /// What exchange `x` wrote so far.
    pub fn reply(&self, x: ExchangeId) -> Reply {
        self.replies.get(&x).cloned().unwrap_or_default()
    }

    /// Takes the events collected so far.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Moves the clock on by `d`, runs the timers, drains.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.server.handle_timeout(self.now);
        self.drain();
    }

    /// Runs the handshake at `version`: `initialize` answered by a minimal result, then
    /// `notifications/initialized`. Returns the `Mcp-Session-Id` and the session.
    pub fn initialize(&mut self, version: &str) -> (String, SessionId) {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        );
        let x = self.post(None, None, &body);
        let request = self.take_request();
        let session = request.session().expect("a session");
        let negotiated = request.version();
        let result = format!(
            r#"{{"protocolVersion":"{negotiated}","capabilities":{{}},"serverInfo":{{"name":"h","version":"1"}}}}"#
        );
        let result = mcpwire::jsonrpc::RawJson::new(&result).expect("valid JSON");
        self.server
            .respond(self.now, request.handle(), &result)
            .expect("initialize answered");
        self.drain();
        let reply = self.reply(x);
        let id = reply
            .header("mcp-session-id")
            .expect("Mcp-Session-Id on the initialize response")
            .to_owned();
        let n = self.post(
            Some(&id),
            Some(negotiated.as_str()),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        assert_eq!(self.reply(n).status(), 202);
        self.take_events();
        (id, session)
    }

    /// The next event, which must be a request.
    pub fn take_request(&mut self) -> mcpwire::server::IncomingRequest {
        self.drain();
        let at = self
            .events
            .iter()
            .position(|e| matches!(e, Event::Request(_)))
            .expect("a request event");
        match self.events.remove(at) {
            Event::Request(r) => r,
            _ => unreachable!(),
        }
    }

    /// Answers `request` with `result` (JSON text) and drains.
    pub fn answer(&mut self, request: &mcpwire::server::IncomingRequest, result: &str) {
        let result = mcpwire::jsonrpc::RawJson::new(result).expect("valid JSON");
        self.server
            .respond(self.now, request.handle(), &result)
            .expect("answered");
        self.drain();
    }
}

/// A short pause for tests that need time to pass.
pub const TICK: Duration = Duration::from_millis(10);

/// A POST head to `/mcp` with a loopback `Host`, the conforming `Accept` and
/// `Content-Type`, and `headers`.
pub fn post_head(headers: &[(&str, &str)]) -> http::request::Parts {
    let mut all = vec![
        ("accept", ACCEPT_BOTH),
        ("content-type", "application/json"),
    ];
    all.extend_from_slice(headers);
    Harness::head("POST", "/mcp", &all)
}

/// What [`take_transmits`] took.
#[derive(Debug, Default)]
pub struct Taken {
    /// The last head taken (moved, not copied: taking it allocates nothing).
    pub head: Option<http::response::Parts>,
    /// Body bytes taken.
    pub body_len: usize,
    /// `End`s taken.
    pub ends: usize,
}

impl Taken {
    /// The status of the last head taken.
    pub fn status(&self) -> Option<u16> {
        self.head.as_ref().map(|h| h.status.as_u16())
    }
}

/// Takes every transmit the server has and drops it, as a driver that wrote it would,
/// keeping nothing but counts (for the allocation tests and benches, which must not hold
/// what they measure).
pub fn take_transmits(server: &mut Server) -> Taken {
    let mut taken = Taken::default();
    while let Some(x) = server.poll_ready() {
        while let Some(t) = server.poll_transmit(x) {
            match t {
                Transmit::Head(head) => taken.head = Some(head),
                Transmit::Data(bytes) => taken.body_len += bytes.len(),
                Transmit::End | Transmit::Abort => taken.ends += 1,
            }
        }
    }
    taken
}

/// Opens a session at `version` through the core alone, keeping nothing (unlike
/// [`Harness::initialize`]): `initialize` answered with a minimal result, then
/// `notifications/initialized`. Returns the `Mcp-Session-Id`.
pub fn initialize_core(server: &mut Server, now: Instant, version: &str) -> String {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    );
    let result = format!(
        r#"{{"protocolVersion":"{version}","capabilities":{{}},"serverInfo":{{"name":"h","version":"1"}}}}"#
    );
    let result = mcpwire::jsonrpc::RawJson::new(&result).expect("valid JSON");
    let taken = call_core(server, now, post_head(&[]), Bytes::from(body), &result);
    let id = taken
        .head
        .and_then(|h| {
            h.headers
                .get("mcp-session-id")?
                .to_str()
                .ok()
                .map(str::to_owned)
        })
        .expect("Mcp-Session-Id on the initialize response");
    let x = server.handle_head(
        now,
        post_head(&[("mcp-session-id", &id), ("mcp-protocol-version", version)]),
    );
    server.handle_body(
        now,
        x,
        Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
    );
    server.handle_body_end(now, x);
    assert_eq!(take_transmits(server).status(), Some(202));
    match server.poll_event() {
        Some(Event::Notification { .. }) => {}
        other => panic!("notifications/initialized reaches the application: {other:?}"),
    }
    id
}

/// One request through the core alone: its head, `body` in one chunk, the body's end, the
/// [`Event::Request`] it makes, `respond` with `result`, and every transmit to `End`
/// (dropped as taken). Panics unless the response ended with 200.
pub fn call_core(
    server: &mut Server,
    now: Instant,
    head: http::request::Parts,
    body: Bytes,
    result: &dyn mcpwire::jsonrpc::ToJson,
) -> Taken {
    let x = server.handle_head(now, head);
    server.handle_body(now, x, body);
    server.handle_body_end(now, x);
    let Some(Event::Request(request)) = server.poll_event() else {
        panic!("the request reaches the application");
    };
    server
        .respond(now, request.handle(), result)
        .expect("answered");
    let taken = take_transmits(server);
    assert_eq!((taken.status(), taken.ends), (Some(200), 1), "{taken:?}");
    taken
}

/// Queues a `notifications/message` log message with `data` for `session`'s GET stream
/// (as a server application would, unprompted). Panics unless the core takes it.
pub fn notify_session(server: &mut Server, now: Instant, session: SessionId, data: &str) {
    let params = serde_json::json!({"level": "info", "data": data}).to_string();
    let raw = mcpwire::jsonrpc::RawJson::new(&params).expect("JSON");
    server
        .notify(
            now,
            mcpwire::server::Target::Session(session),
            "notifications/message",
            Some(&raw),
        )
        .expect("taken by the server");
}
