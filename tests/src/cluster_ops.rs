//! An op model of several nodes of one cluster ([`Cluster`]) under faults, shared by the
//! `cluster_props` proptest and the `server_cluster` fuzz target: bytes become a list of
//! [`Op`]s ([`ops`]) that [`run`] plays, so a failing fuzz input replays as a test.
//!
//! The clients initialize on any node, call a tool on any node, and lose and resume the
//! call's stream on any node, while the application sends progress and answers, the
//! store comes and goes, notices are slow, a node is killed, time passes, and garbage
//! arrives where the store's bytes do (a notice, a session record). [`run`] checks after
//! every op that nothing panicked and, for every call, what its client saw over all its
//! connections in order: every SSE body decodes, progress arrives in increasing order
//! and never twice, the answer at most once (RESUME-5, RESUME-14: never delivered
//! twice); and once the answer arrived, every progress step sent before it arrived too
//! (never lost). Legacy HTTP+SSE clients (LEGACY-3, LEGACY-4) hold their stream on one
//! node and POST on any: every POST is 202, 404 or 503, and a stream carries only
//! answers to requests POSTed in its session, each at most once.

use arbitrary::Unstructured;
use bytes::Bytes;
use mcpwire::Era;
use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{
    Config, Event, ExchangeId, LegacyPaths, RequestHandle, ResponseMode, StoreInput, Target,
};

use crate::cluster::Cluster;
use crate::server::{Harness, Reply};

/// The most ops one input makes.
pub const MAX_OPS: usize = 128;

/// One move. Numbers name a node, a session or a call modulo how many there are then.
#[derive(Clone, Debug)]
pub enum Op {
    /// `initialize` and `notifications/initialized` on node `.0`.
    Initialize(u8),
    /// `tools/call` on node `.0` in session `.1`.
    Call(u8, u8),
    /// The application sends call `.0`'s next progress step.
    Progress(u8),
    /// The application answers call `.0`.
    Answer(u8),
    /// Call `.0`'s newest connection goes away.
    Disconnect(u8),
    /// Call `.0`'s client resumes on node `.1` after the last id it saw.
    Resume(u8, u8),
    /// DELETE on node `.0` of session `.1`.
    Delete(u8, u8),
    /// The store goes away, or comes back.
    ToggleStore,
    /// Notices start to wait, or the waiting ones arrive.
    ToggleNotices,
    /// These bytes arrive at node `.0` as a notice.
    Garbage(u8, Vec<u8>),
    /// Session `.0`'s record in the store becomes these bytes.
    Corrupt(u8, Vec<u8>),
    /// The clocks move on by `.0` tens of milliseconds.
    Advance(u8),
    /// Node `.0` is killed (never the last one alive).
    Kill(u8),
    /// A legacy client opens its stream on node `.0`.
    LegacyOpen(u8),
    /// Legacy stream `.1`'s client POSTs a request on node `.0`.
    LegacyPost(u8, u8),
    /// Legacy stream `.0` goes away.
    LegacyClose(u8),
}

/// The ops `data` makes (at most [`MAX_OPS`]).
pub fn ops(data: &[u8]) -> (u8, Vec<Op>) {
    let mut u = Unstructured::new(data);
    let nodes = u.int_in_range(2..=3).unwrap_or(2);
    // Every run has a session and a call to work on; the rest is the input's.
    let mut ops = vec![Op::Initialize(0), Op::Call(0, 0)];
    while ops.len() < MAX_OPS && !u.is_empty() {
        // Weighted towards what moves a call: progress, losing and resuming its stream.
        const KINDS: [u8; 24] = [
            0, 0, 1, 1, 2, 2, 2, 3, 4, 4, 5, 5, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 14, 15,
        ];
        let Ok(kind) = u.choose(&KINDS).copied() else {
            break;
        };
        let b = |u: &mut Unstructured<'_>| u.arbitrary::<u8>().unwrap_or(0);
        let bytes = |u: &mut Unstructured<'_>| {
            let n = u.int_in_range(0..=24usize).unwrap_or(0);
            u.bytes(n).map(<[u8]>::to_vec).unwrap_or_default()
        };
        ops.push(match kind {
            0 => Op::Initialize(b(&mut u)),
            1 => Op::Call(b(&mut u), b(&mut u)),
            2 => Op::Progress(b(&mut u)),
            3 => Op::Answer(b(&mut u)),
            4 => Op::Disconnect(b(&mut u)),
            5 => Op::Resume(b(&mut u), b(&mut u)),
            6 => Op::Delete(b(&mut u), b(&mut u)),
            7 => Op::ToggleStore,
            8 => Op::ToggleNotices,
            9 => Op::Garbage(b(&mut u), bytes(&mut u)),
            10 => Op::Corrupt(b(&mut u), bytes(&mut u)),
            11 => Op::Advance(b(&mut u)),
            12 => Op::Kill(b(&mut u)),
            13 => Op::LegacyOpen(b(&mut u)),
            14 => Op::LegacyPost(b(&mut u), b(&mut u)),
            _ => Op::LegacyClose(b(&mut u)),
        });
    }
    (nodes, ops)
}

/// One call, as its client and its application see it.
struct Call {
    /// The node running it and its handle there, while the application holds it.
    running: Option<(usize, RequestHandle)>,
    /// Its JSON-RPC id.
    id: u64,
    /// Progress steps the application sent.
    sent: u32,
    /// Its session.
    sid: String,
    /// Its connections, oldest first.
    conns: Vec<Conn>,
}

/// One connection of a call's client.
struct Conn {
    node: usize,
    x: ExchangeId,
    /// How much of its body the client read before it let it go (it reads no more of
    /// a connection it disconnected or resumed past); `None` while it reads.
    read: Option<usize>,
}

impl Conn {
    /// What the client read of it.
    fn reply(&self, c: &Cluster) -> Reply {
        let mut reply = c.nodes[self.node].reply(self.x);
        if let Some(read) = self.read {
            reply.body.truncate(read);
        }
        reply
    }

    /// The client reads no more of it.
    fn let_go(&mut self, c: &Cluster) {
        if self.read.is_none() {
            self.read = Some(c.nodes[self.node].reply(self.x).body.len());
        }
    }
}

/// One legacy HTTP+SSE client: its stream, and the ids of the requests it POSTed.
struct Legacy {
    node: usize,
    x: ExchangeId,
    /// The messages path with its `sessionId`, from the `endpoint` event.
    endpoint: String,
    posted: Vec<u64>,
}

/// What a run's clients received in the end, so that a test can tell the model moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Calls answered.
    pub answered: usize,
    /// Legacy requests answered on their streams.
    pub legacy_answered: usize,
}

/// Plays `ops` on `nodes` nodes; what the clients saw, or the first violation found.
///
/// # Errors
/// The first violation.
pub fn run(nodes: u8, ops: &[Op]) -> Result<Seen, String> {
    let n = usize::from(nodes.clamp(2, 3));
    let mut c = Cluster::new(n, || {
        Config::new()
            .with_response_mode(ResponseMode::Sse)
            .with_legacy(Some(LegacyPaths::default()))
    });
    let mut sessions: Vec<String> = Vec::new();
    let mut legacies: Vec<Legacy> = Vec::new();
    let mut next_legacy_id = 1_000u64;
    let mut calls: Vec<Call> = Vec::new();
    let mut alive = vec![true; n];
    let (mut store_up, mut holding) = (true, false);
    for op in ops {
        let pick = |i: u8| usize::from(i) % n;
        match op {
            Op::Initialize(node) => {
                let node = pick(*node);
                if alive[node]
                    && let Some(sid) = initialize(&mut c, node)
                {
                    sessions.push(sid);
                }
            }
            Op::Call(node, session) => {
                let node = pick(*node);
                if !alive[node] || sessions.is_empty() {
                    continue;
                }
                let sid = sessions[usize::from(*session) % sessions.len()].clone();
                let id = calls.len() as u64 + 100;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow"}}}}"#
                );
                let x = c.nodes[node].post(Some(&sid), Some("2025-11-25"), &body);
                c.pump();
                let running = take_request(&mut c.nodes[node]).map(|h| (node, h));
                calls.push(Call {
                    running,
                    id,
                    sent: 0,
                    sid,
                    conns: vec![Conn {
                        node,
                        x,
                        read: None,
                    }],
                });
            }
            Op::Progress(call) => {
                let Some(call) = nth(&mut calls, *call) else {
                    continue;
                };
                let Some((node, h)) = call.running.filter(|(node, _)| alive[*node]) else {
                    continue;
                };
                let params = format!(r#"{{"progressToken":1,"progress":{}}}"#, call.sent + 1);
                let raw = RawJson::new(&params).expect("JSON");
                let now = c.nodes[node].now;
                let sent = c.nodes[node].server.notify(
                    now,
                    Target::Request(h),
                    "notifications/progress",
                    Some(&raw),
                );
                if sent.is_ok() {
                    call.sent += 1;
                } else {
                    call.running = None;
                }
                c.nodes[node].drain();
                c.pump();
            }
            Op::Answer(call) => {
                let Some(call) = nth(&mut calls, *call) else {
                    continue;
                };
                if let Some((node, h)) = call.running.take().filter(|(node, _)| alive[*node]) {
                    let now = c.nodes[node].now;
                    let raw = RawJson::new(r#"{"content":[]}"#).expect("JSON");
                    let _ = c.nodes[node].server.respond(now, h, &raw);
                    c.nodes[node].drain();
                    c.pump();
                }
            }
            Op::Disconnect(call) => {
                let Some(call) = nth(&mut calls, *call) else {
                    continue;
                };
                if let Some(conn) = call.conns.last_mut()
                    && alive[conn.node]
                {
                    conn.let_go(&c);
                    let (node, x) = (conn.node, conn.x);
                    let now = c.nodes[node].now;
                    c.nodes[node].server.handle_disconnect(now, x);
                    c.nodes[node].drain();
                    c.pump();
                }
            }
            Op::Resume(call, node) => {
                let node = pick(*node);
                let Some(call) = nth(&mut calls, *call) else {
                    continue;
                };
                if !alive[node] {
                    continue;
                }
                for conn in &mut call.conns {
                    conn.let_go(&c);
                }
                let Some(last) = last_id(&c, &call.conns) else {
                    continue;
                };
                let x = c.nodes[node].get(&call.sid, Some(&last));
                c.pump();
                call.conns.push(Conn {
                    node,
                    x,
                    read: None,
                });
            }
            Op::Delete(node, session) => {
                let node = pick(*node);
                if !alive[node] || sessions.is_empty() {
                    continue;
                }
                let sid = sessions[usize::from(*session) % sessions.len()].clone();
                let head = Harness::head(
                    "DELETE",
                    "/mcp",
                    &[
                        ("mcp-session-id", &sid),
                        ("mcp-protocol-version", "2025-11-25"),
                    ],
                );
                c.nodes[node].send(head, None);
                c.pump();
            }
            Op::ToggleStore => {
                store_up = !store_up;
                c.set_available(store_up);
            }
            Op::ToggleNotices => {
                holding = !holding;
                if holding {
                    c.hold_notices();
                } else {
                    c.release_notices();
                }
            }
            Op::Garbage(node, bytes) => {
                let node = pick(*node);
                if alive[node] {
                    let h = &mut c.nodes[node];
                    h.server.handle_store(h.now, StoreInput::Notice(bytes));
                    h.drain();
                    c.pump();
                }
            }
            Op::Corrupt(session, bytes) => {
                if sessions.is_empty() {
                    continue;
                }
                let sid = &sessions[usize::from(*session) % sessions.len()];
                if let Some((record, _)) = c.store.sessions.get_mut(sid.as_str()) {
                    *record = Bytes::copy_from_slice(bytes);
                }
            }
            Op::Advance(ticks) => {
                c.advance(std::time::Duration::from_millis(10 * u64::from(*ticks)));
            }
            Op::LegacyOpen(node) => {
                let node = pick(*node);
                if !alive[node] {
                    continue;
                }
                let head = Harness::head("GET", "/sse", &[("accept", "text/event-stream")]);
                let x = c.nodes[node].send(head, None);
                c.pump();
                let reply = c.nodes[node].reply(x);
                if reply.status() == 200 {
                    let endpoint = reply
                        .events()
                        .first()
                        .ok_or("no endpoint event")?
                        .data()
                        .to_owned();
                    legacies.push(Legacy {
                        node,
                        x,
                        endpoint,
                        posted: Vec::new(),
                    });
                }
            }
            Op::LegacyPost(node, legacy) => {
                let node = pick(*node);
                let len = legacies.len();
                if !alive[node] || len == 0 {
                    continue;
                }
                let legacy = &mut legacies[usize::from(*legacy) % len];
                let id = next_legacy_id;
                next_legacy_id += 1;
                let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
                let head = Harness::head(
                    "POST",
                    &legacy.endpoint,
                    &[("content-type", "application/json")],
                );
                let x = c.nodes[node].send(head, Some(&body));
                c.pump();
                legacy.posted.push(id);
                match c.nodes[node].reply(x).head.map(|h| h.status.as_u16()) {
                    // Still waiting for the store (within the grace) is fine too.
                    None | Some(202 | 404 | 503) => {}
                    Some(status) => {
                        return Err(format!("after {op:?}: a legacy POST got {status}"));
                    }
                }
            }
            Op::LegacyClose(legacy) => {
                let len = legacies.len();
                if len == 0 {
                    continue;
                }
                let legacy = &legacies[usize::from(*legacy) % len];
                if alive[legacy.node] {
                    let (node, x) = (legacy.node, legacy.x);
                    let now = c.nodes[node].now;
                    c.nodes[node].server.handle_disconnect(now, x);
                    c.nodes[node].drain();
                    c.pump();
                }
            }
            Op::Kill(node) => {
                let node = pick(*node);
                if alive[node] && alive.iter().filter(|a| **a).count() > 1 {
                    alive[node] = false;
                    c.kill(node);
                    for call in &mut calls {
                        if call.running.is_some_and(|(n, _)| n == node) {
                            call.running = None;
                        }
                    }
                }
            }
        }
        for (i, h) in c.nodes.iter_mut().enumerate() {
            if alive[i] {
                drop_requests(h, &mut calls, i);
            }
        }
        for call in &calls {
            check(&c, call).map_err(|e| format!("after {op:?}: call {}: {e}", call.id))?;
        }
        for legacy in &legacies {
            check_legacy(&c, legacy)
                .map_err(|e| format!("after {op:?}: {}: {e}", legacy.endpoint))?;
        }
    }
    let answered = calls
        .iter()
        .filter(|call| {
            call.conns.iter().any(|conn| {
                let reply = conn.reply(&c);
                reply.head.is_some()
                    && is_sse(&reply)
                    && reply.messages().iter().any(|m| m["id"] == call.id)
            })
        })
        .count();
    let legacy_answered = legacies
        .iter()
        .map(|l| {
            c.nodes[l.node]
                .reply(l.x)
                .messages()
                .iter()
                .filter(|m| m.get("id").is_some())
                .count()
        })
        .sum();
    Ok(Seen {
        answered,
        legacy_answered,
    })
}

/// Runs the ops `data` makes.
///
/// # Errors
/// The first violation.
pub fn run_bytes(data: &[u8]) -> Result<Seen, String> {
    let (nodes, ops) = ops(data);
    run(nodes, &ops)
}

fn nth(calls: &mut [Call], i: u8) -> Option<&mut Call> {
    let len = calls.len();
    (len > 0).then(|| &mut calls[usize::from(i) % len])
}

/// The handshake on `node`; the session id, unless it was refused.
fn initialize(c: &mut Cluster, node: usize) -> Option<String> {
    let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let x = c.nodes[node].post(None, None, body);
    let h = take_request(&mut c.nodes[node])?;
    let now = c.nodes[node].now;
    let result = RawJson::new(
        r#"{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"h","version":"1"}}"#,
    )
    .expect("JSON");
    c.nodes[node].server.respond(now, h, &result).ok()?;
    c.nodes[node].drain();
    c.pump();
    let sid = c.nodes[node].reply(x).header("mcp-session-id")?.to_owned();
    c.nodes[node].post(
        Some(&sid),
        Some("2025-11-25"),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    c.pump();
    Some(sid)
}

/// The request the node's application got last, taken from its events.
fn take_request(h: &mut Harness) -> Option<RequestHandle> {
    h.drain();
    let at = h
        .events
        .iter()
        .rposition(|e| matches!(e, Event::Request(_)))?;
    match h.events.remove(at) {
        Event::Request(r) => Some(r.handle()),
        _ => None,
    }
}

/// Forgets what the application of node `node` was told: a cancelled call or a closed
/// session stops its call.
fn drop_requests(h: &mut Harness, calls: &mut [Call], node: usize) {
    for event in h.take_events() {
        match event {
            Event::Cancelled { request, .. } => {
                for call in calls.iter_mut() {
                    if call.running == Some((node, request)) {
                        call.running = None;
                    }
                }
            }
            Event::SessionClosed { .. } => {
                // Its calls' sends are refused from now on, which `Progress` notices.
            }
            // A legacy client's request is answered at once, on its stream.
            Event::Request(request) if request.era() == Era::HttpSse => {
                let result = RawJson::new(r#"{"tools":[]}"#).expect("JSON");
                let _ = h.server.respond(h.now, request.handle(), &result);
            }
            _ => {}
        }
    }
}

/// What a legacy client saw on its stream: every answer to a request it POSTed in its
/// session, each at most once, and nothing else with an id.
fn check_legacy(c: &Cluster, legacy: &Legacy) -> Result<(), String> {
    let reply = c.nodes[legacy.node].reply(legacy.x);
    let mut seen = Vec::new();
    for m in reply.messages() {
        let Some(id) = m.get("id") else {
            continue;
        };
        let id = id
            .as_u64()
            .ok_or_else(|| format!("an id that is not ours: {m}"))?;
        if !legacy.posted.contains(&id) {
            return Err(format!("an answer to {id}, which this client never sent"));
        }
        if seen.contains(&id) {
            return Err(format!("{id} answered twice"));
        }
        seen.push(id);
    }
    Ok(())
}

/// The last event id the call's client saw, over its connections.
fn last_id(c: &Cluster, conns: &[Conn]) -> Option<String> {
    conns.iter().rev().find_map(|conn| {
        let reply = conn.reply(c);
        if reply.head.as_ref()?.status != 200 || !is_sse(&reply) {
            return None;
        }
        reply
            .events()
            .iter()
            .rev()
            .map(|e| e.id().to_owned())
            .find(|id| !id.is_empty())
    })
}

fn is_sse(reply: &Reply) -> bool {
    reply.header("content-type") == Some("text/event-stream")
}

/// What the call's client saw: progress increasing and never twice, the answer at most
/// once, and every step before the answer once it came.
fn check(c: &Cluster, call: &Call) -> Result<(), String> {
    let mut progress: Vec<i64> = Vec::new();
    let mut answers = 0;
    for conn in &call.conns {
        let reply = conn.reply(c);
        if reply.head.is_none() || !is_sse(&reply) {
            continue;
        }
        for m in reply.messages() {
            if m["method"] == "notifications/progress" {
                let p = m["params"]["progress"].as_i64().ok_or("progress")?;
                if progress.last().is_some_and(|last| p <= *last) {
                    return Err(format!("progress {p} after {progress:?}"));
                }
                if answers > 0 {
                    return Err(format!("progress {p} after the answer"));
                }
                progress.push(p);
            } else if m["id"] == call.id {
                answers += 1;
            }
        }
    }
    if answers > 1 {
        return Err(format!("{answers} answers"));
    }
    if answers == 1 {
        let expected: Vec<i64> = (1..=i64::from(call.sent)).collect();
        if progress != expected && call.running.is_none() {
            return Err(format!("answered after {progress:?}, sent {}", call.sent));
        }
    }
    Ok(())
}
