//! Several nodes of one cluster (`Config::with_node`) over a shared store: any node
//! serves any live session (SESSION-7 only once it is gone everywhere), DELETE ends it on
//! every node (HTTP-DELETE-1), a stream written on one node is resumed on another with
//! every frame once (RESUME-5, RESUME-6), a resume wins over a connection the writer
//! still holds (RESUME-14), and an unreachable store fails only what needs it, with 503.
//! The store is `mcpwire_tests::cluster`'s, which performs the driver contract literally.

use std::time::Duration;

use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{Config, Event, ResponseMode, StoreOp, Target};
use mcpwire_tests::cluster::Cluster;
use mcpwire_tests::server::{Harness, Reply};

const V3: &str = "2025-11-25";

/// Moves the clocks past `Config::with_store_grace`'s default (1 s) in steps, so every
/// ask-again in it happens (each step fires at most one, so the steps add up to more).
fn wait_out_the_grace(c: &mut Cluster) {
    for _ in 0..25 {
        c.advance(Duration::from_millis(100));
    }
}
const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}"#;

fn sse() -> Config {
    Config::new().with_response_mode(ResponseMode::Sse)
}

fn post(
    c: &mut Cluster,
    node: usize,
    sid: Option<&str>,
    body: &str,
) -> mcpwire::server::ExchangeId {
    let x = c.nodes[node].post(sid, Some(V3), body);
    c.pump();
    x
}

fn get(c: &mut Cluster, node: usize, sid: &str, last: Option<&str>) -> mcpwire::server::ExchangeId {
    let x = c.nodes[node].get(sid, last);
    c.pump();
    x
}

/// `initialize` on `node`, then `notifications/initialized` on `then`.
fn initialize(c: &mut Cluster, node: usize, then: usize) -> String {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{V3}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    );
    let x = c.nodes[node].post(None, None, &body);
    let request = c.nodes[node].take_request();
    c.nodes[node].answer(
        &request,
        &format!(r#"{{"protocolVersion":"{V3}","capabilities":{{}},"serverInfo":{{"name":"h","version":"1"}}}}"#),
    );
    c.pump();
    let sid = c.nodes[node]
        .reply(x)
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    let n = post(
        c,
        then,
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(c.nodes[then].reply(n).status(), 202);
    for node in &mut c.nodes {
        node.take_events();
    }
    sid
}

fn progress(h: &mut Harness, request: mcpwire::server::RequestHandle, n: u32) {
    let params = format!(r#"{{"progressToken":1,"progress":{n}}}"#);
    h.server
        .notify(
            h.now,
            Target::Request(request),
            "notifications/progress",
            Some(&RawJson::new(&params).unwrap()),
        )
        .unwrap();
    h.drain();
}

fn disconnect(h: &mut Harness, x: mcpwire::server::ExchangeId) {
    h.server.handle_disconnect(h.now, x);
    h.drain();
}

fn progress_values(reply: &Reply) -> Vec<i64> {
    reply
        .messages()
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_i64().unwrap())
        .collect()
}

fn last_id(reply: &Reply) -> String {
    reply
        .events()
        .iter()
        .rev()
        .map(|e| e.id().to_owned())
        .find(|id| !id.is_empty())
        .expect("an event id")
}

/// A session initialized on node 0 whose call there sent progress 1 on its stream, then
/// lost its connection: the session id, the call, and the last id its client read.
fn interrupted(c: &mut Cluster) -> (String, mcpwire::server::IncomingRequest, String) {
    let sid = initialize(c, 0, 0);
    let x = post(c, 0, Some(&sid), CALL);
    let request = c.nodes[0].take_request();
    progress(&mut c.nodes[0], request.handle(), 1);
    let last = last_id(&c.nodes[0].reply(x));
    disconnect(&mut c.nodes[0], x);
    (sid, request, last)
}

#[test]
fn session_7_a_session_minted_on_one_node_is_served_by_every_node() {
    let mut c = Cluster::new(3, Config::new);
    // Minted on node 0, its handshake completed on node 1, a call answered on node 2.
    let sid = initialize(&mut c, 0, 1);
    let x = post(&mut c, 2, Some(&sid), CALL);
    let request = c.nodes[2].take_request();
    assert!(request.session().is_some());
    c.nodes[2].answer(&request, r#"{"content":[]}"#);
    assert_eq!(c.nodes[2].reply(x).status(), 200);
    assert_eq!(c.nodes[2].reply(x).header("mcp-session-id"), Some(&*sid));
    // The record was written when minted (pending) and when the handshake completed.
    let puts: Vec<(usize, Duration)> = c
        .store
        .log
        .iter()
        .filter_map(|(node, op)| match op {
            StoreOp::PutSession { ttl, .. } => Some((*node, *ttl)),
            _ => None,
        })
        .collect();
    assert_eq!(puts.len(), 2, "{puts:?}");
    assert_eq!(puts[0].0, 0);
    assert_eq!(puts[1].0, 1);
    assert!(
        puts[0].1 < puts[1].1,
        "a pending handshake lives shorter: {puts:?}"
    );
    // Each node loaded it once; node 2's second request needs no load.
    let loads = |c: &Cluster| {
        c.store
            .log
            .iter()
            .filter(|(_, op)| matches!(op, StoreOp::LoadSession { .. }))
            .count()
    };
    assert_eq!(loads(&c), 2);
    let y = post(
        &mut c,
        2,
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(c.nodes[2].reply(y).status(), 202);
    assert_eq!(loads(&c), 2);
}

#[test]
fn session_7_an_id_no_node_minted_is_404_once_the_store_says_so() {
    let mut c = Cluster::new(2, Config::new);
    let unknown = "0123456789abcdef0123456789abcdef";
    let x = post(&mut c, 1, Some(unknown), CALL);
    assert!(
        c.nodes[1].reply(x).head.is_none(),
        "asked again within the grace"
    );
    wait_out_the_grace(&mut c);
    assert_eq!(c.nodes[1].reply(x).status(), 404);
    // An id not of the minted form is not even looked up.
    let y = post(&mut c, 1, Some("*"), CALL);
    assert_eq!(c.nodes[1].reply(y).status(), 404);
    let loads: Vec<_> = c
        .store
        .log
        .iter()
        .filter(|(_, op)| matches!(op, StoreOp::LoadSession { .. }))
        .collect();
    // 25, 50, 100, 200 and 400 ms apart: within the 1 s grace.
    assert_eq!(loads.len(), 6, "{loads:?}");
}

#[test]
fn http_delete_1_delete_on_one_node_ends_the_session_on_every_node() {
    let mut c = Cluster::new(3, Config::new);
    let sid = initialize(&mut c, 0, 1);
    let x = c.nodes[2].send(
        Harness::head(
            "DELETE",
            "/mcp",
            &[("mcp-session-id", &sid), ("mcp-protocol-version", V3)],
        ),
        None,
    );
    c.pump();
    assert_eq!(c.nodes[2].reply(x).status(), 200);
    assert!(c.store.sessions.is_empty());
    // Every node's copy is gone: the application heard of it on each.
    for (i, node) in c.nodes.iter_mut().enumerate() {
        let closed = node
            .take_events()
            .into_iter()
            .any(|e| matches!(e, Event::SessionClosed { .. }));
        assert!(closed, "node {i} closed its copy");
        assert_eq!(node.server.session_count(), 0, "node {i}");
    }
    for node in 0..3 {
        let y = post(&mut c, node, Some(&sid), CALL);
        // Not found: asked again, in case a write was still on its way, then 404.
        wait_out_the_grace(&mut c);
        assert_eq!(c.nodes[node].reply(y).status(), 404, "node {node}");
    }
}

#[test]
fn resume_5_resume_6_a_stream_written_on_one_node_is_resumed_on_another() {
    let mut c = Cluster::new(2, sse);
    let sid = initialize(&mut c, 0, 0);
    let x = post(&mut c, 0, Some(&sid), CALL);
    let request = c.nodes[0].take_request();
    progress(&mut c.nodes[0], request.handle(), 1);
    let seen = c.nodes[0].reply(x);
    assert_eq!(progress_values(&seen), [1]);
    let last = last_id(&seen);
    disconnect(&mut c.nodes[0], x);
    progress(&mut c.nodes[0], request.handle(), 2);
    c.nodes[0].answer(&request, r#"{"content":[]}"#);
    c.pump();
    // The client resumes on node 1: exactly what it missed, then the stream ends.
    let r = get(&mut c, 1, &sid, Some(&last));
    let resumed = c.nodes[1].reply(r);
    assert_eq!(resumed.status(), 200);
    assert_eq!(progress_values(&resumed), [2]);
    let answers: Vec<_> = resumed
        .messages()
        .into_iter()
        .filter(|m| m["id"] == 7)
        .collect();
    assert_eq!(answers.len(), 1, "{:?}", resumed.messages());
    assert!(resumed.ended);
    assert_eq!(c.store.follows(), 0);
    // Another session cannot resume it (RESUME-6).
    let other = initialize(&mut c, 1, 1);
    let y = get(&mut c, 1, &other, Some(&last));
    assert!(
        c.nodes[1].reply(y).head.is_none(),
        "asked again within the grace"
    );
    wait_out_the_grace(&mut c);
    assert_eq!(c.nodes[1].reply(y).status(), 400);
}

#[test]
fn resume_5_a_resume_on_another_node_follows_the_stream_live() {
    let mut c = Cluster::new(2, sse);
    let sid = initialize(&mut c, 0, 1);
    let x = post(&mut c, 0, Some(&sid), CALL);
    let request = c.nodes[0].take_request();
    progress(&mut c.nodes[0], request.handle(), 1);
    let last = last_id(&c.nodes[0].reply(x));
    disconnect(&mut c.nodes[0], x);
    c.nodes[0].drain();
    let r = get(&mut c, 1, &sid, Some(&last));
    assert_eq!(c.nodes[1].reply(r).status(), 200);
    assert!(!c.nodes[1].reply(r).ended);
    // Nothing was missed: the connection starts as a priming event (RESUME-8) naming the
    // id the client resumed after, so it resumes from there again if this one breaks.
    let first = &c.nodes[1].reply(r).events()[0];
    assert_eq!((first.id(), first.data()), (&*last, ""));
    assert!(
        c.nodes[1]
            .reply(r)
            .items()
            .iter()
            .any(|i| matches!(i, mcpwire::sse::Item::Retry(_)))
    );
    // The writer goes on; the follower relays each frame as it is appended.
    for n in 2..=4 {
        progress(&mut c.nodes[0], request.handle(), n);
        c.pump();
        assert_eq!(
            progress_values(&c.nodes[1].reply(r)),
            (2..=n).map(i64::from).collect::<Vec<_>>()
        );
    }
    c.nodes[0].answer(&request, r#"{"content":[]}"#);
    c.pump();
    let resumed = c.nodes[1].reply(r);
    assert!(resumed.ended, "the follower ends with the stream");
    assert_eq!(
        resumed.messages().iter().filter(|m| m["id"] == 7).count(),
        1
    );
    assert_eq!(c.store.follows(), 0);
}

#[test]
fn resume_14_a_resume_on_another_node_cuts_the_connection_the_writer_still_has() {
    let mut c = Cluster::new(2, sse);
    let sid = initialize(&mut c, 0, 0);
    let x = post(&mut c, 0, Some(&sid), CALL);
    let request = c.nodes[0].take_request();
    progress(&mut c.nodes[0], request.handle(), 1);
    let last = last_id(&c.nodes[0].reply(x));
    // The connection died silently: node 0 still believes it alive.
    let r = get(&mut c, 1, &sid, Some(&last));
    assert!(c.nodes[0].reply(x).aborted, "the old connection is cut");
    progress(&mut c.nodes[0], request.handle(), 2);
    c.pump();
    assert_eq!(progress_values(&c.nodes[0].reply(x)), [1]);
    assert_eq!(progress_values(&c.nodes[1].reply(r)), [2]);
    // Back on node 0, the writer: a local resume, which cuts node 1's follow.
    let last = last_id(&c.nodes[1].reply(r));
    let back = get(&mut c, 0, &sid, Some(&last));
    assert!(c.nodes[1].reply(r).aborted);
    assert_eq!(c.store.follows(), 0);
    progress(&mut c.nodes[0], request.handle(), 3);
    assert_eq!(progress_values(&c.nodes[0].reply(back)), [3]);
}

#[test]
fn resume_5_a_frame_the_store_lost_is_a_gap_never_a_silent_skip() {
    let mut c = Cluster::new(2, sse);
    let (sid, request, last) = interrupted(&mut c);
    let r = get(&mut c, 1, &sid, Some(&last));
    // Progress 2's append is lost; 3's is not.
    c.set_available(false);
    progress(&mut c.nodes[0], request.handle(), 2);
    c.pump();
    c.set_available(true);
    progress(&mut c.nodes[0], request.handle(), 3);
    c.pump();
    let cut = c.nodes[1].reply(r);
    assert!(cut.ended, "the follower stops at the hole");
    assert!(
        progress_values(&cut).is_empty(),
        "{:?}",
        progress_values(&cut)
    );
    // Resumed again after its last id: the store has no 2, so the resume says so.
    let again = get(&mut c, 1, &sid, Some(&last));
    assert_eq!(c.nodes[1].reply(again).status(), 400);
    assert!(
        c.nodes[1].reply(again).json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer retained")
    );
}

#[test]
fn session_7_an_unreachable_store_fails_what_needs_it_with_503_and_nothing_else() {
    let mut c = Cluster::new(2, Config::new);
    let sid = initialize(&mut c, 0, 0);
    c.set_available(false);
    // Node 1 cannot load the session: 503 with a JSON-RPC error, not 404.
    let x = post(&mut c, 1, Some(&sid), CALL);
    let reply = c.nodes[1].reply(x);
    assert_eq!(reply.status(), 503);
    assert_eq!(reply.json()["error"]["code"], -32603);
    // Node 0 holds it and goes on serving it.
    let y = post(&mut c, 0, Some(&sid), CALL);
    let request = c.nodes[0].take_request();
    c.nodes[0].answer(&request, r#"{"content":[]}"#);
    assert_eq!(c.nodes[0].reply(y).status(), 200);
    // Back: node 1 serves it.
    c.set_available(true);
    let z = post(
        &mut c,
        1,
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(c.nodes[1].reply(z).status(), 202);
}

#[test]
fn session_7_a_copy_that_idles_out_on_one_node_leaves_the_session_alive_elsewhere() {
    let idle = Duration::from_secs(60);
    let mut c = Cluster::new(2, || Config::new().with_session_idle(idle));
    let sid = initialize(&mut c, 0, 1);
    // Node 0 keeps the session busy with a GET stream; node 1's copy idles out.
    let g = get(&mut c, 0, &sid, None);
    assert_eq!(c.nodes[0].reply(g).status(), 200);
    for _ in 0..8 {
        c.advance(idle / 2);
    }
    assert_eq!(
        c.nodes[1].server.session_count(),
        0,
        "node 1 let its copy go"
    );
    assert_eq!(c.nodes[0].server.session_count(), 1);
    // The record was touched while node 0 used it, so node 1 adopts it again.
    let x = post(
        &mut c,
        1,
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(c.nodes[1].reply(x).status(), 202);
    let touches = c
        .store
        .log
        .iter()
        .filter(|(_, op)| matches!(op, StoreOp::TouchSession { .. }))
        .count();
    assert!(touches >= 4, "{touches} touches in 4 idle times");
}

#[test]
fn session_7_a_server_alone_does_no_store_work() {
    let mut h = Harness::new(sse());
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    progress(&mut h, request.handle(), 1);
    let last = last_id(&h.reply(x));
    h.server.handle_disconnect(h.now, x);
    h.answer(&request, r#"{"content":[]}"#);
    let r = h.get(&sid, Some(&last));
    assert!(h.reply(r).ended);
    assert_eq!(h.server.poll_store(), None);
    assert!(!h.server.has_store_work());
}

#[test]
fn jsonrpc_3_jsonrpc_4_a_response_to_a_server_request_reaches_the_node_that_asked() {
    let mut c = Cluster::new(3, sse);
    let sid = initialize(&mut c, 0, 1);
    // A call on node 0 asks the client something on its stream.
    let x = post(&mut c, 0, Some(&sid), CALL);
    let request = c.nodes[0].take_request();
    let now = c.nodes[0].now;
    let asked = c.nodes[0]
        .server
        .request(
            now,
            Target::Request(request.handle()),
            "roots/list",
            None,
            None,
        )
        .unwrap();
    c.nodes[0].drain();
    let ask = c.nodes[0]
        .reply(x)
        .messages()
        .into_iter()
        .find(|m| m["method"] == "roots/list");
    assert_eq!(
        ask.expect("the request on the stream")["id"],
        serde_json::json!(asked.as_int().unwrap())
    );
    // Each node numbers its requests above its own node number, so the ids of two
    // nodes never meet in one session (JSONRPC-3): node 0 of the test is node 1.
    assert_eq!(asked.as_int().unwrap() >> 36, 1);
    // The client's answer lands on node 1: node 0's application gets it, once.
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"roots":[]}}}}"#,
        asked.as_int().unwrap()
    );
    let y = post(&mut c, 1, Some(&sid), &answer);
    assert_eq!(c.nodes[1].reply(y).status(), 202);
    let responses = |node: &mut Harness| {
        node.take_events()
            .into_iter()
            .filter(|e| matches!(e, Event::Response { .. }))
            .count()
    };
    assert_eq!(responses(&mut c.nodes[0]), 1);
    assert_eq!(responses(&mut c.nodes[1]), 0);
    assert_eq!(responses(&mut c.nodes[2]), 0);
    // A second copy of the answer completes nothing.
    post(&mut c, 2, Some(&sid), &answer);
    assert_eq!(responses(&mut c.nodes[0]), 0);
}

#[test]
fn http_post_12_a_cancel_reaches_the_node_that_runs_the_request() {
    let mut c = Cluster::new(2, Config::new);
    let sid = initialize(&mut c, 0, 1);
    let x = post(&mut c, 0, Some(&sid), CALL);
    let request = c.nodes[0].take_request();
    post(
        &mut c,
        1,
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"enough"}}"#,
    );
    let cancelled: Vec<_> = c.nodes[0]
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Cancelled { request, reason } => Some((request, reason)),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, [(request.handle(), Some("enough".to_owned()))]);
    // The request is settled: its POST is answered 202 with nothing owed, and an answer
    // now is refused.
    let now = c.nodes[0].now;
    let late = c.nodes[0]
        .server
        .respond(now, request.handle(), &RawJson::new("{}").unwrap());
    assert!(late.is_err());
    assert_eq!(c.nodes[0].reply(x).status(), 202);
}

#[test]
fn resume_5_a_frame_written_before_the_writer_hears_of_its_follower_still_reaches_it() {
    let mut c = Cluster::new(2, sse);
    let (sid, request, last) = interrupted(&mut c);
    // Node 1 replays (nothing missed yet), but its take-over is slow to reach node 0,
    // which meanwhile appends progress 2 unannounced.
    c.hold_notices();
    let r = get(&mut c, 1, &sid, Some(&last));
    progress(&mut c.nodes[0], request.handle(), 2);
    c.pump();
    assert!(progress_values(&c.nodes[1].reply(r)).is_empty());
    // Once node 0 hears of the follower, it wakes it: progress 2 is read, once.
    c.release_notices();
    assert_eq!(progress_values(&c.nodes[1].reply(r)), [2]);
    progress(&mut c.nodes[0], request.handle(), 3);
    c.pump();
    assert_eq!(progress_values(&c.nodes[1].reply(r)), [2, 3]);
}

#[test]
fn modern_13_what_one_nodes_application_announces_reaches_every_other_node() {
    let mut c = Cluster::new(3, Config::new);
    let now = c.nodes[1].now;
    c.nodes[1].server.announce(now, b"tools");
    c.pump();
    for (i, node) in c.nodes.iter_mut().enumerate() {
        let heard: Vec<_> = node
            .take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Announced { payload } => Some(payload),
                _ => None,
            })
            .collect();
        let expected: &[&[u8]] = if i == 1 { &[] } else { &[b"tools"] };
        assert_eq!(heard, expected, "node {i}");
    }
    // A server alone announces to nobody.
    let mut alone = Harness::new(Config::new());
    let now = alone.now;
    alone.server.announce(now, b"tools");
    assert_eq!(alone.server.poll_store(), None);
}

/// The session handle node `node` knows `sid` by: it serves a notification on it.
fn session_on(c: &mut Cluster, node: usize, sid: &str) -> mcpwire::server::SessionId {
    post(
        c,
        node,
        Some(sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    c.nodes[node]
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Event::Notification { session, .. } => session,
            _ => None,
        })
        .expect("the notification, on the session")
}

fn log_messages(reply: &Reply) -> Vec<String> {
    reply
        .messages()
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["data"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn http_get_8_http_get_9_a_message_for_the_get_stream_reaches_the_node_that_holds_it() {
    let mut c = Cluster::new(3, Config::new);
    let sid = initialize(&mut c, 0, 0);
    let on0 = session_on(&mut c, 0, &sid);
    let on2 = session_on(&mut c, 2, &sid);
    // The client's GET stream is on node 1.
    let g1 = get(&mut c, 1, &sid, None);
    assert_eq!(c.nodes[1].reply(g1).status(), 200);
    for (node, session, data) in [(2, on2, "from 2"), (0, on0, "from 0")] {
        let h = &mut c.nodes[node];
        let params = serde_json::json!({"level": "info", "data": data}).to_string();
        let delivery = h
            .server
            .notify(
                h.now,
                Target::Session(session),
                "notifications/message",
                Some(&RawJson::new(&params).unwrap()),
            )
            .unwrap();
        assert_eq!(delivery, mcpwire::server::Delivery::Forwarded);
        c.pump();
    }
    assert_eq!(log_messages(&c.nodes[1].reply(g1)), ["from 2", "from 0"]);
    // A GET opened on node 2 takes the role over (one per session, HTTP-GET-9): node
    // 1's connection is cut, and node 0's next message goes to node 2.
    let g2 = get(&mut c, 2, &sid, None);
    assert!(c.nodes[1].reply(g1).aborted);
    let h = &mut c.nodes[0];
    let params = r#"{"level":"info","data":"later"}"#;
    h.server
        .notify(
            h.now,
            Target::Session(on0),
            "notifications/message",
            Some(&RawJson::new(params).unwrap()),
        )
        .unwrap();
    c.pump();
    assert_eq!(log_messages(&c.nodes[2].reply(g2)), ["later"]);
    assert_eq!(log_messages(&c.nodes[1].reply(g1)).len(), 2);
}

#[test]
fn resume_5_a_node_killed_mid_stream_leaves_its_clients_a_clear_refusal_not_a_wait() {
    let mut c = Cluster::new(3, sse);
    let (sid, request, last) = interrupted(&mut c);
    let r = get(&mut c, 1, &sid, Some(&last));
    progress(&mut c.nodes[0], request.handle(), 2);
    c.pump();
    assert_eq!(progress_values(&c.nodes[1].reply(r)), [2]);
    // Node 0 dies with the call unfinished: the follower ends after what was stored.
    c.kill(0);
    assert!(c.nodes[1].reply(r).ended);
    assert_eq!(c.store.follows(), 0);
    // The client's next resume, on node 2, is refused with why: no silent wait.
    let last = last_id(&c.nodes[1].reply(r));
    let again = get(&mut c, 2, &sid, Some(&last));
    let refused = c.nodes[2].reply(again);
    assert_eq!(refused.status(), 400);
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("stopped"), "{message}");
    // The session lives on: another node serves its next call.
    let y = post(
        &mut c,
        2,
        Some(&sid),
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"slow"}}"#,
    );
    let next = c.nodes[2].take_request();
    c.nodes[2].answer(&next, r#"{"content":[]}"#);
    let answered = c.nodes[2].reply(y);
    assert_eq!(
        answered.messages().iter().filter(|m| m["id"] == 8).count(),
        1
    );
}

#[test]
fn resume_14_a_take_over_from_an_earlier_point_arriving_late_cuts_nothing_newer() {
    let mut c = Cluster::new(3, sse);
    let sid = initialize(&mut c, 0, 0);
    let x = post(&mut c, 0, Some(&sid), CALL);
    let request = c.nodes[0].take_request();
    progress(&mut c.nodes[0], request.handle(), 1);
    let first = last_id(&c.nodes[0].reply(x));
    progress(&mut c.nodes[0], request.handle(), 2);
    let second = last_id(&c.nodes[0].reply(x));
    disconnect(&mut c.nodes[0], x);
    // Two resumes, the first from an earlier point, whose take-overs cross.
    c.hold_notices();
    let r1 = get(&mut c, 1, &sid, Some(&first));
    let r2 = get(&mut c, 2, &sid, Some(&second));
    c.release_notices();
    assert!(c.nodes[1].reply(r1).aborted, "the older resume is cut");
    assert!(!c.nodes[2].reply(r2).aborted, "the newer one is not");
    progress(&mut c.nodes[0], request.handle(), 3);
    c.pump();
    assert_eq!(progress_values(&c.nodes[2].reply(r2)), [3]);
}

#[test]
fn modern_2_a_sessionless_request_on_a_node_touches_no_store() {
    let mut c = Cluster::new(2, Config::new);
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let head = mcpwire_tests::server::post_head(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ]);
    let x = c.nodes[1].send(head, Some(body));
    let request = c.nodes[1].take_request();
    assert!(request.session().is_none());
    c.nodes[1].answer(&request, r#"{"content":[]}"#);
    assert_eq!(c.nodes[1].reply(x).status(), 200);
    assert!(!c.nodes[1].server.has_store_work());
    c.pump();
    assert!(c.store.log.is_empty(), "{:?}", c.store.log);
}

#[test]
fn modern_13_a_node_of_several_shards_hears_an_announcement_once() {
    use mcpwire::server::{NodeId, Server, StoreInput};
    let mut other = Server::new(
        Config::new().with_node(Some(NodeId::new(9))),
        mcpwire_tests::server::counter_entropy(9),
    );
    let now = std::time::Instant::now();
    other.announce(now, b"tools");
    let Some(StoreOp::Publish { notice }) = other.poll_store() else {
        panic!("the announcement is published");
    };
    let shards = Config::new().with_node(Some(NodeId::new(1))).shards(3);
    let heard: usize = shards
        .into_iter()
        .enumerate()
        .map(|(i, config)| {
            let mut shard = Server::new(config, mcpwire_tests::server::counter_entropy(i as u64));
            shard.handle_store(now, StoreInput::Notice(&notice));
            std::iter::from_fn(|| shard.poll_event())
                .filter(|e| matches!(e, Event::Announced { .. }))
                .count()
        })
        .sum();
    assert_eq!(heard, 1);
}

#[test]
fn session_7_a_stream_held_by_a_node_that_adopted_the_session_keeps_it_alive() {
    let idle = Duration::from_secs(60);
    let mut c = Cluster::new(3, || Config::new().with_session_idle(idle));
    let sid = initialize(&mut c, 0, 0);
    // Node 1 adopts it with a GET stream it holds; node 0's copy idles out.
    let g = get(&mut c, 1, &sid, None);
    assert_eq!(c.nodes[1].reply(g).status(), 200);
    for _ in 0..8 {
        c.advance(idle / 2);
    }
    assert_eq!(c.nodes[0].server.session_count(), 0);
    // Node 1 touched the record all along: node 2 serves the session.
    let x = post(
        &mut c,
        2,
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(c.nodes[2].reply(x).status(), 202);
}

#[test]
fn session_7_resume_5_a_node_ahead_of_anothers_writes_waits_for_them() {
    let mut c = Cluster::new(2, sse);
    // `initialize` answered on node 0 before its record reached the store.
    c.hold_writes();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{V3}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    );
    let x = c.nodes[0].post(None, None, &body);
    let request = c.nodes[0].take_request();
    c.nodes[0].answer(
        &request,
        &format!(r#"{{"protocolVersion":"{V3}","capabilities":{{}},"serverInfo":{{"name":"h","version":"1"}}}}"#),
    );
    c.pump();
    let sid = c.nodes[0]
        .reply(x)
        .header("mcp-session-id")
        .unwrap()
        .to_owned();
    let y = post(
        &mut c,
        1,
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    c.advance(Duration::from_millis(60));
    assert!(c.nodes[1].reply(y).head.is_none(), "node 1 waits, not 404");
    c.release_writes();
    c.advance(Duration::from_millis(200));
    assert_eq!(c.nodes[1].reply(y).status(), 202);
    // A frame sent before its append landed: a resume on node 1 waits for it.
    let z = post(&mut c, 0, Some(&sid), CALL);
    let call = c.nodes[0].take_request();
    c.hold_writes();
    progress(&mut c.nodes[0], call.handle(), 1);
    let last = last_id(&c.nodes[0].reply(z));
    disconnect(&mut c.nodes[0], z);
    let r = get(&mut c, 1, &sid, Some(&last));
    c.advance(Duration::from_millis(60));
    assert!(c.nodes[1].reply(r).head.is_none(), "node 1 waits, not 400");
    c.release_writes();
    c.advance(Duration::from_millis(200));
    assert_eq!(c.nodes[1].reply(r).status(), 200);
    progress(&mut c.nodes[0], call.handle(), 2);
    c.pump();
    assert_eq!(progress_values(&c.nodes[1].reply(r)), [2]);
}

/// A legacy HTTP+SSE client behind a balancer: its stream on node 0, its POSTs on any
/// node. Each POST is 202 where it lands and handled by the node that holds the stream,
/// whose answers travel on it (LEGACY-3, LEGACY-4): a request, a notification, and the
/// client's response to a request of the server. A session-era request naming the
/// session is 404 on every node, as where it lives. When the stream ends, the session
/// ends on every node: a POST after it is 404 wherever it lands.
#[test]
fn legacy_3_legacy_4_a_legacy_clients_posts_reach_the_node_that_holds_its_stream() {
    let legacy = || Config::new().with_legacy(Some(mcpwire::server::LegacyPaths::default()));
    let mut c = Cluster::new(3, legacy);
    let stream = c.nodes[0].send(
        Harness::head("GET", "/sse", &[("accept", "text/event-stream")]),
        None,
    );
    c.pump();
    let endpoint = c.nodes[0].reply(stream).events()[0].data().to_owned();
    let sid = endpoint
        .strip_prefix("/messages?sessionId=")
        .expect(&endpoint)
        .to_owned();
    let legacy_post = |c: &mut Cluster, node: usize, body: &str| {
        let head = Harness::head("POST", &endpoint, &[("content-type", "application/json")]);
        let x = c.nodes[node].send(head, Some(body));
        c.pump();
        c.nodes[node].reply(x).status()
    };
    // Every request on another node than the stream's, the first before its record
    // would have landed (the store's writes are held, as behind a slow network).
    c.hold_writes();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let x = c.nodes[1].send(
        Harness::head("POST", &endpoint, &[("content-type", "application/json")]),
        Some(init),
    );
    c.pump();
    c.advance(Duration::from_millis(30));
    c.release_writes();
    c.advance(Duration::from_millis(100));
    assert_eq!(c.nodes[1].reply(x).status(), 202);
    assert!(
        c.nodes[1]
            .take_events()
            .iter()
            .all(|e| !matches!(e, Event::Request(_))),
        "the node without the stream runs nothing"
    );
    let request = c.nodes[0].take_request();
    assert_eq!(request.id().as_int(), Some(1));
    c.nodes[0].answer(&request, r#"{"protocolVersion":"2024-11-05","capabilities":{},"serverInfo":{"name":"h","version":"1"}}"#);
    c.pump();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(legacy_post(&mut c, 2, initialized), 202);
    assert_eq!(legacy_post(&mut c, 1, CALL), 202);
    let call = c.nodes[0].take_request();
    assert_eq!(call.id().as_int(), Some(7));
    // The server asks the client something; the client's answer lands on node 2.
    let s = session_on(&mut c, 0, &sid);
    let now = c.nodes[0].now;
    let asked = c.nodes[0]
        .server
        .request(now, Target::Session(s), "roots/list", None, None)
        .expect("a request on the stream");
    c.pump();
    let on_stream = c.nodes[0].reply(stream).messages().last().unwrap()["id"].clone();
    assert_eq!(on_stream, serde_json::json!(asked.as_int().unwrap()));
    let answer = format!(r#"{{"jsonrpc":"2.0","id":{on_stream},"result":{{"roots":[]}}}}"#);
    assert_eq!(legacy_post(&mut c, 2, &answer), 202);
    let answered = c.nodes[0]
        .take_events()
        .into_iter()
        .any(|e| matches!(e, Event::Response { message, .. } if message.id() == Some(&asked)));
    assert!(answered, "the client's answer reached the node that asked");
    c.nodes[0].answer(&call, r#"{"content":[]}"#);
    c.pump();
    let ids: Vec<serde_json::Value> = c.nodes[0]
        .reply(stream)
        .messages()
        .iter()
        .filter(|m| m.get("result").is_some())
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(ids, [serde_json::json!(1), serde_json::json!(7)]);
    // Not a session of the session era, on any node.
    for node in 0..3 {
        let x = post(&mut c, node, Some(&sid), CALL);
        assert_eq!(c.nodes[node].reply(x).status(), 404, "node {node}");
    }

    // The stream ends: so does the session, everywhere.
    disconnect(&mut c.nodes[0], stream);
    c.pump();
    let after: Vec<_> = (0..3)
        .map(|node| {
            let head = Harness::head("POST", &endpoint, &[("content-type", "application/json")]);
            c.nodes[node].send(head, Some(CALL))
        })
        .collect();
    c.pump();
    // A node that no longer holds it asks the store again within the grace first.
    wait_out_the_grace(&mut c);
    for (node, x) in after.into_iter().enumerate() {
        assert_eq!(c.nodes[node].reply(x).status(), 404, "node {node}");
    }
    assert!(
        c.store.sessions.is_empty(),
        "the record is deleted with the session"
    );
}
