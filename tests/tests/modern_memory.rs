//! No state left behind: 100,000 requests of the sessionless revision (2026-07-28)
//! through one [`Server`] leave nothing of any client in it (MODERN-2: no session is
//! made; MODERN-11: a request whose client went away is cancelled and forgotten), and
//! the same through the application layer's [`Dispatcher`] leaves nothing in it either.
//!
//! The requests come in batches, every request of a batch open at once before any is
//! answered, in a mix: answered with JSON, answered on an SSE stream after a progress
//! notification (MODERN-10), answered with a tool's error, cancelled by a disconnect
//! before and after their stream began (MODERN-11), refused for a bad header (MODERN-4,
//! MODERN-6, MODERN-20), notifications (MODERN-24, 202), and long streams closed by the
//! client (a `subscriptions/listen`'s through the dispatcher, MODERN-13). Each exchange's
//! answer is checked. After every batch, and at the end, the state is counted, not
//! timed or measured: no exchange, no session, [`Server::is_idle`], no event, nothing
//! ready, no deadline pending (a stream's heartbeat and polling timers go with it), and in the dispatcher no
//! call, listen, early cancel or server→client request.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use mcpwire::app::{CallError, Cancel, Change, Describe, Dispatcher, Reply, Settings, Step};
use mcpwire::jsonrpc::{ErrorCode, RawJson};
use mcpwire::server::{Config, Era, Event, ExchangeId, Server, Target, Transmit};
use mcpwire_tests::server::{ACCEPT_BOTH, counter_entropy};
use serde_json::{Value, json};

/// The requests, as the issue asks.
const TOTAL: usize = 100_000;
/// Requests open at once.
const BATCH: usize = 1_000;

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p"}"#;

/// What a request of the mix is, and what its exchange must come to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Answered with a JSON body.
    Json,
    /// A progress notification, then the answer: an SSE stream.
    Stream,
    /// A tool's error: still 200 (MODERN-9 makes only -32601 a 404).
    ToolError,
    /// The client goes before any answer: cancelled, nothing written.
    CancelEarly,
    /// The client goes after the stream began: cancelled mid-stream.
    CancelStreaming,
    /// A bad header: refused 400.
    BadHeader,
    /// A notification: 202.
    Notification,
    /// A long stream (a listen), closed by its client at the end of the batch.
    Long,
}

const MIX: [Kind; 10] = [
    Kind::Json,
    Kind::Stream,
    Kind::Json,
    Kind::CancelEarly,
    Kind::BadHeader,
    Kind::Stream,
    Kind::Notification,
    Kind::CancelStreaming,
    Kind::ToolError,
    Kind::Long,
];

/// What one exchange wrote.
#[derive(Debug, Default, Clone)]
struct Written {
    status: Option<u16>,
    stream: bool,
    body: usize,
    ended: bool,
    aborted: bool,
}

/// The server and its virtual clock, with what every exchange of the batch wrote.
struct Wire {
    server: Server,
    now: Instant,
    written: HashMap<ExchangeId, Written>,
    n: u64,
}

impl Wire {
    fn new() -> Self {
        // The defaults: every era, `ResponseMode::Auto`, heartbeats every 15 s.
        Self {
            server: Server::new(Config::new(), counter_entropy(7)),
            now: Instant::now(),
            written: HashMap::new(),
            n: 0,
        }
    }

    /// POSTs one message of `kind` with a fresh id; returns its exchange.
    fn post(&mut self, kind: Kind) -> ExchangeId {
        self.n += 1;
        let n = self.n;
        // Which of the four bad headers (see below).
        let fault = (n / 10) % 4;
        let (method, name) = match kind {
            Kind::Long => ("subscriptions/listen", None),
            _ => ("tools/call", Some("echo")),
        };
        let mut b = http::Request::post("/mcp")
            .header("host", "127.0.0.1:8080")
            .header("accept", ACCEPT_BOTH)
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28");
        let body = match kind {
            Kind::Notification => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{n},{META}}}}}"#
            ),
            Kind::Long => format!(
                r#"{{"jsonrpc":"2.0","id":{n},"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
            ),
            _ => format!(
                r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"echo","arguments":{{"n":{n}}},{META}}}}}"#
            ),
        };
        let method = if kind == Kind::BadHeader && fault == 2 {
            "tools/list"
        } else {
            method
        };
        if kind != Kind::Notification {
            b = b.header("mcp-method", method);
        }
        match (kind, name) {
            // Four faults in turn: a wrong `Mcp-Name`, none, a wrong `Mcp-Method` (all
            // -32020, MODERN-6), and a header beside a `_meta` naming another revision
            // (-32020, MODERN-4).
            (Kind::BadHeader, _) => match fault {
                0 => b = b.header("mcp-name", "Echo"),
                1 => {}
                _ => b = b.header("mcp-name", "echo"),
            },
            (_, Some(name)) => b = b.header("mcp-name", name),
            _ => {}
        }
        let body = if kind == Kind::BadHeader && fault == 3 {
            body.replace(
                r#"/protocolVersion":"2026-07-28""#,
                r#"/protocolVersion":"2025-11-25""#,
            )
        } else {
            body
        };
        let head = b.body(()).expect("a head").into_parts().0;
        let x = self.server.handle_head(self.now, head);
        self.server.handle_body(self.now, x, Bytes::from(body));
        self.server.handle_body_end(self.now, x);
        self.pump();
        x
    }

    /// Takes every transmit, as a driver writing them would, recording what each
    /// exchange wrote.
    fn pump(&mut self) {
        while let Some(x) = self.server.poll_ready() {
            while let Some(t) = self.server.poll_transmit(x) {
                let w = self.written.entry(x).or_default();
                match t {
                    Transmit::Head(head) => {
                        assert!(w.status.is_none(), "{x}: a second head");
                        w.status = Some(head.status.as_u16());
                        w.stream = head
                            .headers
                            .get("content-type")
                            .is_some_and(|v| v == "text/event-stream");
                        assert!(
                            !head.headers.contains_key("mcp-session-id"),
                            "MODERN-2: no session id"
                        );
                    }
                    Transmit::Data(d) => w.body += d.len(),
                    Transmit::End => w.ended = true,
                    Transmit::Abort => w.aborted = true,
                }
            }
        }
    }

    /// The client of `x` goes away.
    fn disconnect(&mut self, x: ExchangeId) {
        self.server.handle_disconnect(self.now, x);
        self.pump();
    }

    /// Checks what `x` wrote for a request of `kind`.
    fn check(&self, x: ExchangeId, kind: Kind) {
        let w = self.written.get(&x).cloned().unwrap_or_default();
        let (status, stream, ended) = match kind {
            Kind::Json | Kind::ToolError => (Some(200), false, true),
            Kind::Stream => (Some(200), true, true),
            Kind::CancelEarly => (None, false, false),
            Kind::CancelStreaming | Kind::Long => (Some(200), true, false),
            Kind::BadHeader => (Some(400), false, true),
            Kind::Notification => (Some(202), false, true),
        };
        assert_eq!(
            (w.status, w.stream, w.ended, w.aborted),
            (status, stream, ended, false),
            "{kind:?} on {x}: {w:?}"
        );
        if kind != Kind::Notification && status.is_some() {
            assert!(w.body > 0, "{kind:?} on {x}: an empty body");
        }
    }

    /// The state of the core after a batch: nothing of any client.
    fn assert_baseline(&mut self, after: usize) {
        let s = &mut self.server;
        assert_eq!(s.exchange_count(), 0, "after {after}: exchanges left");
        assert_eq!(s.session_count(), 0, "after {after}: sessions made");
        assert!(s.is_idle(), "after {after}: not idle: {s:?}");
        assert!(!s.has_events(), "after {after}: events left");
        assert_eq!(s.poll_ready(), None, "after {after}: an exchange ready");
        assert_eq!(
            self.server.poll_timeout(),
            None,
            "after {after}: a deadline pending"
        );
        self.written.clear();
    }
}

fn result() -> RawJson<'static> {
    RawJson::new(r#"{"content":[{"type":"text","text":"done"}],"resultType":"complete"}"#)
        .expect("JSON")
}

fn progress() -> RawJson<'static> {
    RawJson::new(r#"{"progressToken":"p","progress":1}"#).expect("JSON")
}

/// MODERN-2, MODERN-11: 100,000 requests through the core alone, answered by the test.
#[test]
fn modern_2_modern_11_100k_sessionless_requests_leave_no_state_in_the_core() {
    let mut wire = Wire::new();
    wire.assert_baseline(0);
    let mut cancels = 0;
    for batch in 0..TOTAL / BATCH {
        // Every request of the batch is open before any is answered.
        let mut open = Vec::with_capacity(BATCH);
        for i in 0..BATCH {
            let kind = MIX[i % MIX.len()];
            let x = wire.post(kind);
            let request = match wire.server.poll_event() {
                Some(Event::Request(r)) => {
                    assert_eq!(r.era(), Era::Sessionless);
                    assert_eq!(r.session(), None);
                    Some(r)
                }
                Some(Event::Notification { session: None, .. }) => {
                    assert_eq!(kind, Kind::Notification);
                    None
                }
                None => {
                    assert_eq!(kind, Kind::BadHeader, "request {i} of batch {batch}");
                    None
                }
                Some(other) => panic!("{kind:?}: {other:?}"),
            };
            assert!(!wire.server.has_events());
            open.push((x, kind, request));
        }
        assert_eq!(
            wire.server.exchange_count(),
            BATCH / MIX.len() * 8,
            "every request open at once (refusals and notifications are done)"
        );
        // Answered from the last to the first.
        for (x, kind, request) in open.iter().rev() {
            let Some(r) = request else { continue };
            let h = r.handle();
            let now = wire.now;
            let s = &mut wire.server;
            match kind {
                Kind::Json => {
                    s.respond(now, h, &result()).expect("answered");
                }
                Kind::Stream => {
                    s.notify(
                        now,
                        Target::Request(h),
                        "notifications/progress",
                        Some(&progress()),
                    )
                    .expect("a stream");
                    s.respond(now, h, &result()).expect("answered");
                }
                Kind::ToolError => {
                    s.respond_error(now, h, ErrorCode::INVALID_PARAMS, "bad", None)
                        .expect("answered");
                }
                Kind::CancelEarly => wire.disconnect(*x),
                Kind::CancelStreaming | Kind::Long => {
                    s.notify(
                        now,
                        Target::Request(h),
                        "notifications/progress",
                        Some(&progress()),
                    )
                    .expect("a stream");
                    if *kind == Kind::CancelStreaming {
                        // The stream's head and first event reach the client; then it goes.
                        wire.pump();
                        wire.disconnect(*x);
                    }
                }
                Kind::BadHeader | Kind::Notification => unreachable!(),
            }
            wire.pump();
        }
        // The long streams' clients go.
        for (x, kind, _) in &open {
            if *kind == Kind::Long {
                wire.disconnect(*x);
            }
        }
        let mut cancelled = 0;
        while let Some(event) = wire.server.poll_event() {
            match event {
                Event::Cancelled { request, .. } => {
                    cancelled += 1;
                    // MODERN-11: nothing more is sent for it.
                    let late = wire.server.respond(wire.now, request, &result());
                    assert!(late.is_err(), "a cancelled request answered");
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(cancelled, BATCH / MIX.len() * 3, "batch {batch}");
        cancels += cancelled;
        for (x, kind, _) in &open {
            wire.check(*x, *kind);
        }
        wire.assert_baseline((batch + 1) * BATCH);
    }
    assert_eq!(cancels, TOTAL / MIX.len() * 3);
    assert_eq!(wire.n as usize, TOTAL);
    wire.assert_baseline(TOTAL);
}

/// A cancel signal the test reads.
#[derive(Clone, Default, Debug)]
struct Flag(Rc<Cell<bool>>);

impl Cancel for Flag {
    fn cancel(&self) {
        self.0.set(true);
    }
}

/// No call here asks its client anything (the revision asks with `input_required`).
struct NoReply;

impl Reply for NoReply {
    fn reply(self, _: Result<Value, CallError>) {
        unreachable!("no server→client request is sent");
    }
}

struct App;

impl Describe for App {
    fn capabilities(&self) -> Value {
        json!({"tools": {"listChanged": true}})
    }
    fn server_info(&self) -> Value {
        json!({"name": "memory", "version": "1"})
    }
}

/// MODERN-2, MODERN-11, MODERN-13: the same 100,000 through the application layer: each
/// event through [`Dispatcher::handle_event`], each call begun, finished and answered
/// through its `Responder`, the long streams `subscriptions/listen` streams hearing a
/// change, and some cancels handled before their request (the dispatcher's early
/// cancels, as when two connections' events race).
#[test]
fn modern_2_modern_11_modern_13_100k_requests_leave_no_state_in_the_dispatcher() {
    let mut wire = Wire::new();
    let mut app: Dispatcher<Flag, NoReply> =
        Dispatcher::new(&Settings::new(), &mut |dst: &mut [u8]| dst.fill(9));
    let assert_app = |app: &Dispatcher<Flag, NoReply>, after: usize| {
        assert_eq!(
            (
                app.calls(),
                app.listens(),
                app.early_cancels(),
                app.pending_requests()
            ),
            (0, 0, 0, 0),
            "after {after}: calls, listens, early cancels, requests left"
        );
    };
    wire.assert_baseline(0);
    assert_app(&app, 0);
    for batch in 0..TOTAL / BATCH {
        let mut running = Vec::new();
        let mut listens = Vec::new();
        let mut kinds = Vec::with_capacity(BATCH);
        for i in 0..BATCH {
            let kind = MIX[i % MIX.len()];
            let x = wire.post(kind);
            kinds.push((x, kind));
            let mut events: Vec<Event> = std::iter::from_fn(|| wire.server.poll_event()).collect();
            if kind == Kind::CancelEarly && i % 20 == 3 {
                // The client goes before the call starts, and its cancel is handled
                // first: remembered, then found by the request.
                wire.disconnect(x);
                let cancel = wire.server.poll_event().expect("the cancel");
                assert!(matches!(cancel, Event::Cancelled { .. }), "{cancel:?}");
                assert!(matches!(app.handle_event(cancel, &App), Step::Done));
                assert_eq!(app.early_cancels(), 1);
            }
            for event in events.drain(..) {
                match app.handle_event(event, &App) {
                    Step::Done => {
                        assert!(
                            matches!(kind, Kind::Notification),
                            "{kind:?} came to nothing"
                        );
                    }
                    Step::Act(mut act) => {
                        assert_eq!(kind, Kind::Long, "only a listen is answered by the layer");
                        act.apply(&mut wire.server, wire.now);
                        assert!(act.is_empty());
                        listens.push(x);
                    }
                    Step::Run(start) => {
                        let (info, cancel, responder) = start.begin().expect("begun");
                        if kind == Kind::CancelEarly && i % 20 == 3 {
                            assert!(cancel.0.get(), "the early cancel reached the call");
                            assert_eq!(app.early_cancels(), 0);
                            assert!(!app.finish(info.handle()), "not answered");
                            continue;
                        }
                        running.push((x, kind, info, cancel, responder));
                    }
                }
            }
            wire.pump();
        }
        assert_eq!(app.listens(), BATCH / MIX.len());
        // Every listen hears a change.
        app.changed(&Change::Tools)
            .apply(&mut wire.server, wire.now);
        wire.pump();
        for (x, kind, info, cancel, responder) in running.into_iter().rev() {
            let now = wire.now;
            let h = info.handle();
            match kind {
                Kind::Json | Kind::Stream | Kind::ToolError => {
                    if kind == Kind::Stream {
                        info.progress(&mut wire.server, now, 1.0, None)
                            .expect("a stream");
                    }
                    assert!(app.finish(h), "{kind:?} is answered");
                    let answer = if kind == Kind::ToolError {
                        Err(CallError::invalid_params("bad"))
                    } else {
                        Ok(json!({"content": []}))
                    };
                    responder.answer(&mut wire.server, now, answer);
                }
                Kind::CancelEarly | Kind::CancelStreaming => {
                    if kind == Kind::CancelStreaming {
                        info.progress(&mut wire.server, now, 1.0, None)
                            .expect("a stream");
                        wire.pump();
                    }
                    wire.disconnect(x);
                    for event in std::iter::from_fn(|| wire.server.poll_event()).collect::<Vec<_>>()
                    {
                        assert!(matches!(app.handle_event(event, &App), Step::Done));
                    }
                    assert!(cancel.0.get(), "MODERN-11: the call is told");
                    assert!(!app.finish(h), "a cancelled call is not answered");
                    // An answer sent anyway is dropped.
                    responder.answer(&mut wire.server, now, Ok(json!({"content": []})));
                }
                _ => unreachable!("{kind:?}"),
            }
            wire.pump();
        }
        // The listens' clients go: each is forgotten.
        for x in listens {
            wire.disconnect(x);
            for event in std::iter::from_fn(|| wire.server.poll_event()).collect::<Vec<_>>() {
                assert!(matches!(app.handle_event(event, &App), Step::Done));
            }
        }
        assert_eq!(
            app.changed(&Change::Tools).notifications(),
            0,
            "no listen left"
        );
        for (x, kind) in kinds {
            wire.check(x, kind);
        }
        assert_app(&app, (batch + 1) * BATCH);
        wire.assert_baseline((batch + 1) * BATCH);
    }
    assert_app(&app, TOTAL);
    wire.assert_baseline(TOTAL);
}
