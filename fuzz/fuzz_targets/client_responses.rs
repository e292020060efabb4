//! `client_responses`: a `mcpwire::client::Client` fed arbitrary response heads, bodies
//! split anywhere, connection failures and time steps, while its application sends
//! requests, notifications, answers and cancellations (docs/requirements.md HTTP-POST-7,
//! RESUME-12, SESSION-8, LEGACY-6), in every era it may settle on: the configuration is
//! drawn (the default probe, 2026-07-28 pinned, the session era), and the server's
//! answers include 2026-07-28 shapes (MODERN-15, MODERN-18, MODERN-22, MODERN-23):
//! `resultType`s valid and not, `input_required` with and without input requests and
//! state, `DiscoverResult`s, modern error codes (a refused `Mcp-Param` header among them),
//! listed tools with `x-mcp-header` annotations, and a listen's tagged notifications.
//!
//! Checks:
//! 1. Nothing panics, whatever the server says.
//! 2. Every request the application made ends at most once (one `Response` or one
//!    `Failed`), and a response event is only ever for an id the client issued.
//! 3. Memory is bounded: the exchanges the client has open never exceed what it sent,
//!    and after `close` and time past every deadline the client holds nothing
//!    (`Client::is_idle`) once its transmits are taken.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mcpwire::client::{self, Client, ExchangeId, Transmit};
use mcpwire::jsonrpc::{RawJson, RequestId};

#[derive(Arbitrary, Debug)]
enum Op {
    /// Answer the n-th open exchange with a head.
    Head {
        which: u8,
        status: u8,
        media: u8,
        session: bool,
    },
    /// A body chunk for the n-th open exchange: raw bytes, or a message for a live id.
    Body {
        which: u8,
        chunk: Chunk,
    },
    End {
        which: u8,
    },
    Fail {
        which: u8,
    },
    Advance {
        ms: u16,
    },
    Request {
        deadline_ms: Option<u16>,
        method: u8,
    },
    Notify,
    Respond {
        id: i64,
    },
    /// The application answers the n-th input request of a 2026-07-28 call (MODERN-23).
    RespondInput {
        n: u8,
        refuse: bool,
    },
    Cancel {
        which: u8,
    },
    Close,
}

#[derive(Arbitrary, Debug)]
enum Chunk {
    Raw(Vec<u8>),
    /// An SSE event with an id, carrying the response to the n-th live request.
    SseResponse {
        which: u8,
        id: u16,
        retry: Option<u16>,
    },
    /// A JSON body answering the n-th live request (or `initialize`).
    JsonResponse {
        which: u8,
        version: u8,
    },
    /// An SSE notification, or a server→client request.
    SseMessage {
        request: bool,
    },
    Endpoint(u8),
    /// A 2026-07-28 answer of shape `shape` ([`MODERN`]) for the n-th live request, as
    /// a JSON body or an SSE event (with an event id, which nothing may resume from).
    Modern {
        which: u8,
        shape: u8,
        sse: bool,
    },
}

/// 2026-07-28 answers; `{id}` is the request's id.
const MODERN: [&str; 16] = [
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete","content":[]}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}},"b":{"method":"roots/list"}},"requestState":"s"}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"input_required","requestState":"again"}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"input_required"}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"later"}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":7}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{},"ttlMs":0,"cacheScope":"private"}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete","supportedVersions":["2099-01-01"],"capabilities":{}}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32022,"message":"unsupported","data":{"supported":["2025-11-25"]}}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32020,"message":"Mcp-Param-Region differs"}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32021,"message":"needs","data":{"requiredCapabilities":{"sampling":{}}}}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"error":{"code":-32601,"message":"no such method"}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete","tools":[{"name":"x","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},{"name":"y","inputSchema":{"type":"object","properties":{"r":{"type":"number","x-mcp-header":"R"}}}}],"ttlMs":5,"cacheScope":"public"}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":{id}}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":{id}}}}"#,
    r#"{"jsonrpc":"2.0","id":{id},"result":{"resultType":"input_required","inputRequests":[1]}}"#,
];

/// The application's requests: method and params.
const METHODS: [(&str, Option<&str>); 5] = [
    (
        "tools/call",
        Some(r#"{"name":"x","arguments":{"region":"eu"}}"#),
    ),
    ("tools/list", None),
    (
        "subscriptions/listen",
        Some(r#"{"notifications":{"toolsListChanged":true}}"#),
    ),
    ("resources/read", Some(r#"{"uri":"file:///a"}"#)),
    ("prompts/get", Some(r#"{"name":"p"}"#)),
];

const STATUS: [u16; 10] = [200, 202, 400, 404, 405, 409, 500, 200, 200, 503];
const MEDIA: [&str; 4] = ["application/json", "text/event-stream", "text/html", ""];
const VERSIONS: [&str; 5] = [
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
    "1999-01-01",
];
const ENDPOINTS: [&str; 4] = [
    "/messages?sessionId=1",
    "http://evil.example/x",
    "m",
    "http://127.0.0.1:8080/m",
];

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut seed = 0u8;
    let entropy = move |dst: &mut [u8]| {
        for b in dst {
            seed = seed.wrapping_mul(31).wrapping_add(7);
            *b = seed;
        }
    };
    let revision = match u.arbitrary::<u8>().unwrap_or(0) % 3 {
        0 => client::Revision::Auto,
        1 => client::Revision::Exactly(mcpwire::ProtocolVersion::V2026_07_28),
        _ => client::Revision::Era(mcpwire::Era::Sessions),
    };
    let config = client::Config::new(http::Uri::from_static("http://127.0.0.1:8080/mcp"))
        .with_max_pending(16)
        .with_max_body(4096)
        .with_max_rounds(3)
        .with_revision(revision);
    let mut c = Client::new(config, Box::new(entropy));
    let mut now = Instant::now();
    c.connect(now);
    let mut open: Vec<ExchangeId> = Vec::new();
    let mut sent = 0usize;
    // Requests the application issued, and how often each ended. The handshake's
    // requests (the probe, id 1, and `initialize` after a fallback, id 2 unless the
    // application took it first) are answerable but never end as events of their own:
    // they end as `Connected` or `ConnectFailed`.
    let mut issued: BTreeSet<RequestId> = BTreeSet::new();
    let mut ended: BTreeMap<RequestId, u32> = BTreeMap::new();
    let mut live: Vec<RequestId> = vec![RequestId::int(1), RequestId::int(2)];

    let mut steps = 0;
    while let Ok(op) = Op::arbitrary(&mut u) {
        steps += 1;
        if steps > 200 {
            break;
        }
        match op {
            Op::Head {
                which,
                status,
                media,
                session,
            } => {
                if let Some(&x) = pick(&open, which) {
                    let mut b =
                        http::Response::builder().status(STATUS[status as usize % STATUS.len()]);
                    let media = MEDIA[media as usize % MEDIA.len()];
                    if !media.is_empty() {
                        b = b.header("content-type", media);
                    }
                    if session {
                        b = b.header("mcp-session-id", "sess-1");
                    }
                    c.handle_head(now, x, b.body(()).unwrap().into_parts().0);
                }
            }
            Op::Body { which, chunk } => {
                if let Some(&x) = pick(&open, which) {
                    let bytes = match chunk {
                        Chunk::Raw(raw) => Bytes::from(raw),
                        Chunk::SseResponse { which, id, retry } => {
                            let rid = pick(&live, which).cloned().unwrap_or(RequestId::int(99));
                            let retry = retry.map(|r| format!("retry: {r}\n")).unwrap_or_default();
                            Bytes::from(format!(
                                "{retry}id: e:{id}\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{rid},\"result\":{{\"protocolVersion\":\"2025-11-25\"}}}}\n\n"
                            ))
                        }
                        Chunk::JsonResponse { which, version } => {
                            let rid = pick(&live, which).cloned().unwrap_or(RequestId::int(1));
                            let v = VERSIONS[version as usize % VERSIONS.len()];
                            Bytes::from(format!(
                                r#"{{"jsonrpc":"2.0","id":{rid},"result":{{"protocolVersion":"{v}"}}}}"#
                            ))
                        }
                        Chunk::SseMessage { request } => Bytes::from(if request {
                            "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"roots/list\"}\n\n"
                        } else {
                            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"
                        }),
                        Chunk::Endpoint(n) => Bytes::from(format!(
                            "event: endpoint\ndata: {}\n\n",
                            ENDPOINTS[n as usize % ENDPOINTS.len()]
                        )),
                        Chunk::Modern { which, shape, sse } => {
                            let rid = pick(&live, which).cloned().unwrap_or(RequestId::int(1));
                            let text = MODERN[shape as usize % MODERN.len()]
                                .replace("{id}", &rid.to_string());
                            Bytes::from(if sse {
                                format!("id: m{shape}\ndata: {text}\n\n")
                            } else {
                                text
                            })
                        }
                    };
                    c.handle_body(now, x, bytes);
                }
            }
            Op::End { which } => {
                if let Some(x) = take(&mut open, which) {
                    c.handle_body_end(now, x);
                }
            }
            Op::Fail { which } => {
                if let Some(x) = take(&mut open, which) {
                    c.handle_failure(now, x);
                }
            }
            Op::Advance { ms } => {
                now += Duration::from_millis(u64::from(ms) * 10);
                c.handle_timeout(now);
            }
            Op::Request {
                deadline_ms,
                method,
            } => {
                let deadline = deadline_ms.map(|ms| now + Duration::from_millis(u64::from(ms)));
                let (method, params) = METHODS[method as usize % METHODS.len()];
                let params = params.map(|p| RawJson::new(p).unwrap());
                let params = params.as_ref().map(|p| p as &dyn mcpwire::jsonrpc::ToJson);
                if let Ok(id) = c.request(now, method, params, deadline) {
                    assert!(issued.insert(id.clone()), "an id issued twice: {id}");
                    if !live.contains(&id) {
                        live.push(id);
                    }
                }
            }
            Op::Notify => {
                let _ = c.notify(now, "notifications/x", None);
            }
            Op::Respond { id } => {
                let result = RawJson::new("{}").unwrap();
                let _ = c.respond(now, &RequestId::int(id), &result);
            }
            Op::RespondInput { n, refuse } => {
                let id = RequestId::string(&format!("mcpwire-input-{}", n % 8));
                let _ = if refuse {
                    c.respond_error(now, &id, mcpwire::jsonrpc::ErrorCode(-32601), "no")
                } else {
                    c.respond(now, &id, &RawJson::new(r#"{"action":"decline"}"#).unwrap())
                };
            }
            Op::Cancel { which } => {
                if let Some(id) = pick(&live, which).cloned() {
                    if c.cancel(now, &id, None) {
                        *ended.entry(id).or_default() += 1;
                    }
                }
            }
            Op::Close => c.close(now),
        }
        drain(&mut c, &mut open, &mut sent, &issued, &mut ended, &mut live);
        assert!(open.len() <= sent, "more open exchanges than requests sent");
    }
    c.close(now);
    now += Duration::from_secs(3600);
    c.handle_timeout(now);
    drain(&mut c, &mut open, &mut sent, &issued, &mut ended, &mut live);
    for x in std::mem::take(&mut open) {
        c.handle_failure(now, x);
    }
    drain(&mut c, &mut open, &mut sent, &issued, &mut ended, &mut live);
    assert!(c.is_idle(), "state left after close: {c:?}");
});

fn pick<T>(items: &[T], which: u8) -> Option<&T> {
    (!items.is_empty()).then(|| &items[which as usize % items.len()])
}

fn take(items: &mut Vec<ExchangeId>, which: u8) -> Option<ExchangeId> {
    (!items.is_empty()).then(|| {
        let at = which as usize % items.len();
        items.remove(at)
    })
}

fn drain(
    c: &mut Client,
    open: &mut Vec<ExchangeId>,
    sent: &mut usize,
    issued: &BTreeSet<RequestId>,
    ended: &mut BTreeMap<RequestId, u32>,
    live: &mut Vec<RequestId>,
) {
    while let Some(t) = c.poll_transmit() {
        match t {
            Transmit::Request { exchange, .. } => {
                *sent += 1;
                open.push(exchange);
            }
            Transmit::Abort(x) => open.retain(|o| *o != x),
        }
    }
    while let Some(e) = c.poll_event() {
        let shown = format!("{e:?}");
        let id = match e {
            client::Event::Response(m) => m.id().cloned(),
            client::Event::Failed { id, .. } => Some(id),
            _ => None,
        };
        if let Some(id) = id {
            assert!(
                issued.contains(&id),
                "an event for an id never issued: {id}: {shown}"
            );
            let n = ended.entry(id.clone()).or_default();
            *n += 1;
            assert_eq!(*n, 1, "request {id} ended twice");
            live.retain(|l| *l != id);
        }
    }
}
