//! One endpoint split between several servers by session (`Config::shards`,
//! `shard_of`): a session's every request routes back to the shard that minted it, a
//! request that names none may go to any, handles are unique over all shards, and the
//! endpoint's session bound holds over all of them.

use mcpwire::server::{Config, Event, LegacyPaths, SessionMode, shard_of};
use mcpwire_tests::server::{ACCEPT_BOTH, Harness, post_head};

const N: usize = 3;

fn shards(config: &Config) -> Vec<Harness> {
    config
        .clone()
        .shards(N)
        .into_iter()
        .map(|shard| Harness::seeded(shard, 1))
        .collect()
}

fn with_session(id: &str) -> http::request::Parts {
    post_head(&[("mcp-session-id", id)])
}

const LIST: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#;

#[test]
fn session_2_session_5_a_session_routes_back_to_the_shard_that_minted_it() {
    let config = Config::new();
    let mut shards = shards(&config);
    let mut seen = Vec::new();
    for i in 0..N {
        let (id, session) = shards[i].initialize("2025-11-25");
        // Still 32 lowercase hex digits (SESSION-2), however stamped.
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
        assert_eq!(shard_of(&config, N, &with_session(&id)), Some(i));
        let get = Harness::head(
            "GET",
            "/mcp",
            &[("accept", "text/event-stream"), ("mcp-session-id", &id)],
        );
        assert_eq!(shard_of(&config, N, &get), Some(i));
        // The shards share one entropy seed, yet mint different ids and handles.
        assert!(!seen.iter().any(|(other, s)| *other == id || *s == session));
        seen.push((id.clone(), session));
        // Served where it routes (SESSION-5)…
        let x = shards[i].post(Some(&id), None, LIST);
        let request = shards[i].take_request();
        assert_eq!(request.session(), Some(session));
        shards[i].answer(&request, r#"{"tools":[]}"#);
        assert_eq!(shards[i].reply(x).status(), 200);
        // …and unknown to every other shard (SESSION-7), which is why it must route.
        let other = (i + 1) % N;
        let x = shards[other].post(Some(&id), None, LIST);
        assert_eq!(shards[other].reply(x).status(), 404);
    }
}

#[test]
fn session_7_an_id_no_shard_minted_gets_404_from_the_shard_it_routes_to() {
    let config = Config::new();
    let mut shards = shards(&config);
    for shard in &mut shards {
        shard.initialize("2025-11-25");
    }
    for forged in ["ff00000000000000000000000000000000", "zz", "", "a"] {
        let at = shard_of(&config, N, &with_session(forged)).unwrap_or(0);
        assert!(at < N);
        let x = shards[at].post(Some(forged), None, LIST);
        assert_eq!(shards[at].reply(x).status(), 404, "{forged:?}");
    }
}

#[test]
fn session_1_requests_that_name_no_session_may_go_to_any_shard() {
    let config = Config::new().with_legacy(Some(LegacyPaths::default()));
    let none = [
        post_head(&[]),
        Harness::head("GET", "/sse", &[("accept", "text/event-stream")]),
        Harness::head("POST", "/messages", &[("content-type", "application/json")]),
        Harness::head("POST", "/elsewhere", &[("mcp-session-id", "00ab")]),
        // A repeated header names no one session.
        post_head(&[("mcp-session-id", "01"), ("mcp-session-id", "02")]),
    ];
    for head in &none {
        assert_eq!(shard_of(&config, N, head), None, "{head:?}");
    }
    // An initialize on each shard mints a session that shard then serves.
    let mut shards = shards(&config);
    for (i, shard) in shards.iter_mut().enumerate() {
        let (id, _) = shard.initialize("2025-06-18");
        assert_eq!(shard_of(&config, N, &with_session(&id)), Some(i));
    }
}

#[test]
fn legacy_2_a_legacy_session_routes_by_its_session_id_parameter() {
    let config = Config::new().with_legacy(Some(LegacyPaths::default()));
    let mut shards = shards(&config);
    for (i, shard) in shards.iter_mut().enumerate() {
        let g = shard.send(
            Harness::head("GET", "/sse", &[("accept", "text/event-stream")]),
            None,
        );
        let endpoint = shard.reply(g).events()[0].data().to_owned();
        let post = Harness::head(
            "POST",
            &format!("{endpoint}&other=1"),
            &[("content-type", "application/json")],
        );
        assert_eq!(shard_of(&config, N, &post), Some(i), "{endpoint}");
        let x = shard.send(post, Some(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#));
        assert_eq!(shard.reply(x).status(), 202);
    }
}

#[test]
fn session_9_stateless_requests_are_whole_on_any_shard() {
    let config = Config::new().with_sessions(SessionMode::Stateless);
    let mut shards = shards(&config);
    let mut handles = Vec::new();
    for shard in &mut shards {
        let x = shard.post(None, None, LIST);
        let request = shard.take_request();
        handles.push(request.handle());
        shard.answer(&request, r#"{"tools":[]}"#);
        let reply = shard.reply(x);
        assert_eq!(reply.status(), 200);
        assert_eq!(reply.json()["id"], 7);
    }
    // The same inputs on every shard, yet no handle repeats.
    handles.sort();
    handles.dedup();
    assert_eq!(handles.len(), N);
}

const INIT: &str =
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;

#[test]
fn the_endpoints_session_bound_holds_over_all_its_shards() {
    let config = Config::new().with_max_sessions(4);
    let mut shards = shards(&config);
    let mut ids = Vec::new();
    let mut gets = Vec::new();
    for i in [0, 1, 2, 0] {
        assert_eq!(shards[i].server.config().shard(), (i, N));
        let (id, _) = shards[i].initialize("2025-11-25");
        // Active, with its GET stream: an idle one would be evicted (SESSION-8).
        gets.push((i, shards[i].get(&id, None)));
        ids.push((i, id));
    }
    // The fifth is refused wherever it goes, though no shard holds more than two.
    for shard in &mut shards {
        let x = shard.post(None, None, INIT);
        let reply = shard.reply(x);
        assert_eq!(reply.status(), 503);
        assert!(reply.header("retry-after").is_some());
        assert!(
            shard
                .take_events()
                .iter()
                .all(|e| !matches!(e, Event::Request(_)))
        );
    }
    // A session ended on one shard frees a place on any other (HTTP-DELETE-3).
    let (at, id) = &ids[1];
    let d = shards[*at].send(
        Harness::head("DELETE", "/mcp", &[("mcp-session-id", id)]),
        None,
    );
    assert_eq!(shards[*at].reply(d).status(), 200);
    let x = shards[2].post(None, None, INIT);
    assert_eq!(shards[2].take_request().method(), "initialize");
    assert!(shards[2].reply(x).head.is_none(), "waits for its answer");
    let x = shards[0].post(None, None, INIT);
    assert_eq!(shards[0].reply(x).status(), 503);
    // SESSION-8: a session gone idle on a shard gives its place to a new one there.
    let (at, g) = gets[3];
    let now = shards[at].now;
    shards[at].server.handle_disconnect(now, g);
    let x = shards[at].post(None, None, INIT);
    assert_eq!(shards[at].take_request().method(), "initialize");
    assert!(shards[at].reply(x).head.is_none(), "admitted");
    let d = shards[at].send(
        Harness::head(
            "GET",
            "/mcp",
            &[
                ("accept", "text/event-stream"),
                ("mcp-session-id", &ids[3].1),
            ],
        ),
        None,
    );
    assert_eq!(shards[at].reply(d).status(), 404, "the evicted session");
}

#[test]
fn bounds_over_every_session_are_divided_between_the_shards() {
    let config = Config::new().with_max_server_requests(10);
    let shards = config.clone().shards(N);
    assert_eq!(shards.len(), N);
    for (i, shard) in shards.iter().enumerate() {
        assert_eq!(shard.shard(), (i, N));
    }
    // 10 server requests over 3 shards: 4 each, rounded up; one shard alone keeps all.
    let mut h = Harness::new(shards[0].clone());
    let (_, session) = h.initialize("2025-11-25");
    let mut sent = 0;
    while h
        .server
        .request(
            h.now,
            mcpwire::server::Target::Session(session),
            "ping",
            None,
            None,
        )
        .is_ok()
    {
        sent += 1;
        assert!(sent <= 10, "unbounded");
    }
    assert_eq!(sent, 4);
}

#[test]
fn one_shard_is_the_unsharded_server() {
    let config = Config::new();
    assert_eq!(config.shard(), (0, 1));
    let mut plain = Harness::new(config.clone());
    let mut one = Harness::new(config.clone().shards(1).remove(0));
    let (a, sa) = plain.initialize("2025-11-25");
    let (b, sb) = one.initialize("2025-11-25");
    assert_eq!((a, sa), (b, sb), "same entropy, same ids: nothing stamped");
    assert_eq!(
        shard_of(&config, 1, &post_head(&[("accept", ACCEPT_BOTH)])),
        None
    );
}

#[test]
#[should_panic(expected = "257 shards: from 1 to 256")]
fn at_most_256_shards() {
    let _ = Config::new().shards(257);
}

#[test]
#[should_panic(expected = "0 shards: from 1 to 256")]
fn at_least_one_shard() {
    let _ = Config::new().shards(0);
}
