//! `client_responses`: a `mcpwire::client::Client` fed arbitrary response heads, bodies
//! split anywhere, connection failures and time steps, while its application sends
//! requests, notifications, answers and cancellations (docs/requirements.md HTTP-POST-7,
//! RESUME-12, SESSION-8, LEGACY-6).
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
    },
    Notify,
    Respond {
        id: i64,
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
}

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
    let config = client::Config::new(http::Uri::from_static("http://127.0.0.1:8080/mcp"))
        .with_max_pending(16)
        .with_max_body(4096);
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
            Op::Request { deadline_ms } => {
                let deadline = deadline_ms.map(|ms| now + Duration::from_millis(u64::from(ms)));
                let params = RawJson::new(r#"{"name":"x"}"#).unwrap();
                if let Ok(id) = c.request(now, "tools/call", Some(&params), deadline) {
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
