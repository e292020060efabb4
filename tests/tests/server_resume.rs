//! The server's resumability: RESUME-*, SEP-1699 polling, docs/requirements.md §14.2 and
//! §14.3, and the replay races (a resume delivers exactly the frames after its id, and a
//! message emitted around a replay exactly once).

use std::time::Duration;

use mcpwire::jsonrpc::RawJson;
use mcpwire::resume::{RingLimits, StoreLimits};
use mcpwire::server::{Config, Delivery, ExchangeId, ResponseMode, Target, Transmit};
use mcpwire_tests::server::Harness;

const V3: &str = "2025-11-25";
const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}"#;

fn sse() -> Config {
    Config::new().with_response_mode(ResponseMode::Sse)
}

fn progress(h: &mut Harness, request: mcpwire::server::RequestHandle, n: u32) -> Delivery {
    let d = progress_untaken(h, request, n);
    h.drain();
    d
}

/// Progress `n`, left for the driver to take (its transmits are not drained).
fn progress_untaken(h: &mut Harness, request: mcpwire::server::RequestHandle, n: u32) -> Delivery {
    let params = format!(r#"{{"progressToken":1,"progress":{n}}}"#);
    let params = RawJson::new(&params).unwrap();
    h.server
        .notify(
            h.now,
            Target::Request(request),
            "notifications/progress",
            Some(&params),
        )
        .unwrap()
}

fn progress_values(messages: &[serde_json::Value]) -> Vec<i64> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_i64().unwrap())
        .collect()
}

/// A 2025-11-25 session with a POST stream that got the priming event and progress 1,
/// then lost its connection.
fn interrupted(h: &mut Harness) -> (String, mcpwire::server::IncomingRequest, ExchangeId) {
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    assert_eq!(progress(h, request.handle(), 1), Delivery::Sent);
    h.server.handle_disconnect(h.now, x);
    h.drain();
    (sid, request, x)
}

#[test]
fn resume_4_resume_5_resume_7_a_get_with_last_event_id_replays_exactly_the_missed_frames() {
    let mut h = Harness::new(sse());
    let (sid, request, x) = interrupted(&mut h);
    let seen = h.reply(x).events();
    let last = seen.last().unwrap().id().to_owned();
    assert_eq!(progress(&mut h, request.handle(), 2), Delivery::Retained);
    h.answer(&request, r#"{"done":true}"#);
    let g = h.get(&sid, Some(&last));
    let reply = h.reply(g);
    assert_eq!(reply.status(), 200);
    let messages = reply.messages();
    assert_eq!(
        progress_values(&messages),
        [2],
        "never the named event again"
    );
    assert_eq!(
        messages.last().unwrap()["id"],
        7,
        "the pending response comes on the GET (HTTP-GET-5)"
    );
    assert!(
        reply.ended,
        "the stream was finished: the resumed connection ends after it"
    );
    // Resuming from the priming event gets everything after it.
    let priming = seen[0].id().to_owned();
    let g = h.get(&sid, Some(&priming));
    assert_eq!(progress_values(&h.reply(g).messages()), [1, 2]);
}

#[test]
fn resume_5_sse_enc_11_replayed_frames_are_the_bytes_that_were_sent() {
    let mut h = Harness::new(sse());
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    progress(&mut h, request.handle(), 1);
    progress(&mut h, request.handle(), 2);
    let sent = h.reply(x).body;
    h.server.handle_disconnect(h.now, x);
    let priming = h.reply(x).events()[0].id().to_owned();
    let g = h.get(&sid, Some(&priming));
    let replayed = h.reply(g).body;
    let priming_len = sent.windows(2).position(|w| w == b"\n\n").unwrap() + 2;
    assert_eq!(replayed[..], sent[priming_len..]);
}

#[test]
fn a_message_emitted_right_after_a_replay_follows_it_exactly_once() {
    let mut h = Harness::new(sse());
    let (sid, request, x) = interrupted(&mut h);
    let last = h.reply(x).events().last().unwrap().id().to_owned();
    progress(&mut h, request.handle(), 2);
    // The resume and a live message in the same turn of the driver, before it pulls.
    let head = Harness::head(
        "GET",
        "/mcp",
        &[
            ("accept", "text/event-stream"),
            ("mcp-session-id", &sid),
            ("last-event-id", &last),
        ],
    );
    let g = h.server.handle_head(h.now, head);
    let params = RawJson::new(r#"{"progressToken":1,"progress":3}"#).unwrap();
    let d = h
        .server
        .notify(
            h.now,
            Target::Request(request.handle()),
            "notifications/progress",
            Some(&params),
        )
        .unwrap();
    assert_eq!(
        d,
        Delivery::Sent,
        "the resumed connection is the stream's live tail"
    );
    h.drain();
    assert_eq!(progress_values(&h.reply(g).messages()), [2, 3]);
}

#[test]
fn resume_2_resume_3_ids_are_unique_across_the_streams_of_a_session() {
    let mut h = Harness::new(sse());
    let (sid, session) = h.initialize(V3);
    let g = h.get(&sid, None);
    let a = h.post(Some(&sid), Some(V3), CALL);
    let b = h.post(Some(&sid), Some(V3), &CALL.replace("\"id\":7", "\"id\":8"));
    let ra = h.take_request();
    let rb = h.take_request();
    progress(&mut h, ra.handle(), 1);
    progress(&mut h, rb.handle(), 1);
    h.server
        .notify(h.now, Target::Session(session), "n", None)
        .unwrap();
    h.drain();
    let mut ids: Vec<String> = [a, b, g]
        .iter()
        .flat_map(|x| h.reply(*x).events())
        .map(|e| e.id().to_owned())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "{ids:?}");
    // Each id names its stream: resuming the GET stream's id replays nothing of a POST's.
    let get_id = h.reply(g).events().last().unwrap().id().to_owned();
    h.server.handle_disconnect(h.now, g);
    progress(&mut h, ra.handle(), 2);
    let again = h.get(&sid, Some(&get_id));
    assert!(h.reply(again).messages().is_empty());
}

#[test]
fn resume_6_another_sessions_event_id_is_400_and_replays_nothing() {
    let mut h = Harness::new(sse());
    let (_a, request, x) = interrupted(&mut h);
    let priming = h.reply(x).events()[0].id().to_owned();
    progress(&mut h, request.handle(), 2);
    let (b, _) = h.initialize(V3);
    let g = h.get(&b, Some(&priming));
    let reply = h.reply(g);
    assert_eq!(reply.status(), 400);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert!(!String::from_utf8_lossy(&reply.body).contains("progress"));
}

#[test]
fn resume_refusals_14_3_malformed_unknown_not_issued_are_400_never_404() {
    let mut h = Harness::new(sse());
    let (sid, _, x) = interrupted(&mut h);
    let last = h.reply(x).events().last().unwrap().id().to_owned();
    let (epoch, rest) = last.split_once(':').unwrap();
    let (ring, _) = rest.split_once(':').unwrap();
    let forged_ring = format!(
        "{epoch}:{:x}:0",
        u64::from_str_radix(ring, 16).unwrap() + 100
    );
    let not_issued = format!("{epoch}:{ring}:ff");
    let other_epoch = format!("1:{ring}:0");
    for id in [
        "garbage",
        "1:2",
        forged_ring.as_str(),
        not_issued.as_str(),
        other_epoch.as_str(),
    ] {
        let g = h.get(&sid, Some(id));
        let reply = h.reply(g);
        assert_eq!(reply.status(), 400, "{id}");
        assert_eq!(reply.json()["error"]["code"], -32000, "{id}");
    }
}

/// A 2025-11-25 session with a POST stream whose connection the server still holds
/// (it died silently), after the priming event and progress 1 and 2. Returns the
/// session, the request, the connection and the id of progress 1's event (the last one
/// its client saw).
fn silently_dead(
    h: &mut Harness,
) -> (String, mcpwire::server::IncomingRequest, ExchangeId, String) {
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    assert_eq!(progress(h, request.handle(), 1), Delivery::Sent);
    let seen = h.reply(x).events().last().unwrap().id().to_owned();
    // Written to a connection nobody reads any more: the server cannot know.
    assert_eq!(progress(h, request.handle(), 2), Delivery::Sent);
    (sid, request, x, seen)
}

#[test]
fn resume_14_a_resume_takes_over_a_stream_whose_connection_the_server_still_holds() {
    let mut h = Harness::new(sse());
    let (sid, request, x, seen) = silently_dead(&mut h);
    let before = h.reply(x);
    assert!(
        !before.ended && !before.aborted,
        "the server believes it alive"
    );
    let g = h.get(&sid, Some(&seen));
    let resumed = h.reply(g);
    assert_eq!(resumed.status(), 200, "never 409 (HTTP-GET-9)");
    assert_eq!(
        progress_values(&resumed.messages()),
        [2],
        "what followed the id, once"
    );
    let old = h.reply(x);
    assert!(old.aborted, "the old connection is cut");
    assert!(!old.ended, "not ended as if complete");
    assert_eq!(old.body, before.body, "and given nothing more");
    // The stream goes on on the new connection alone.
    assert_eq!(progress(&mut h, request.handle(), 3), Delivery::Sent);
    h.answer(&request, r#"{"done":true}"#);
    let resumed = h.reply(g);
    assert_eq!(progress_values(&resumed.messages()), [2, 3]);
    assert_eq!(resumed.messages().last().unwrap()["id"], 7);
    assert!(
        resumed.ended,
        "the finished stream ends on its new connection"
    );
    assert_eq!(h.reply(x).body, before.body);
    assert_eq!(
        h.server.exchange_count(),
        0,
        "the cut exchange is forgotten"
    );
}

#[test]
fn resume_14_frames_the_old_connection_never_took_come_once_on_the_new_one() {
    let mut h = Harness::new(sse());
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    let seen = h.reply(x).events().last().unwrap().id().to_owned();
    // Queued for the old connection, which never takes them (its socket is stuck).
    for n in 1..=3 {
        progress_untaken(&mut h, request.handle(), n);
    }
    let g = h.get(&sid, Some(&seen));
    assert_eq!(progress_values(&h.reply(g).messages()), [1, 2, 3]);
    let old = h.reply(x);
    assert!(old.aborted);
    assert_eq!(
        progress_values(&old.messages()),
        [] as [i64; 0],
        "the untaken frames are not written to the cut connection"
    );
}

#[test]
fn resume_14_a_resume_takes_over_a_finished_stream_whose_end_was_not_taken() {
    let mut h = Harness::new(sse());
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    let seen = h.reply(x).events().last().unwrap().id().to_owned();
    let result = RawJson::new(r#"{"done":true}"#).unwrap();
    h.server.respond(h.now, request.handle(), &result).unwrap();
    let g = h.get(&sid, Some(&seen));
    let resumed = h.reply(g);
    assert_eq!(resumed.messages().last().unwrap()["id"], 7);
    assert!(resumed.ended);
    assert!(h.reply(x).aborted, "cut, not left without an end");
    assert_eq!(h.server.exchange_count(), 0);
}

#[test]
fn resume_14_the_standalone_get_stream_is_taken_over_by_a_resume_only() {
    let mut h = Harness::new(Config::new());
    let (sid, session) = h.initialize(V3);
    let g = h.get(&sid, None);
    let seen = h.reply(g).events().last().unwrap().id().to_owned();
    let notify = |h: &mut Harness, n: u32| {
        let params = format!(r#"{{"n":{n}}}"#);
        let params = RawJson::new(&params).unwrap();
        let d = h
            .server
            .notify(
                h.now,
                Target::Session(session),
                "notifications/message",
                Some(&params),
            )
            .unwrap();
        h.drain();
        d
    };
    assert_eq!(notify(&mut h, 1), Delivery::Sent);
    // HTTP-GET-9: a GET without `Last-Event-ID` does not take a live stream.
    let second = h.get(&sid, None);
    assert_eq!(h.reply(second).status(), 409);
    assert!(!h.reply(g).aborted);
    let resumed = h.get(&sid, Some(&seen));
    let reply = h.reply(resumed);
    assert_eq!(reply.status(), 200);
    let ns: Vec<_> = reply
        .messages()
        .iter()
        .map(|m| m["params"]["n"].clone())
        .collect();
    assert_eq!(ns, [1]);
    assert!(h.reply(g).aborted);
    assert_eq!(notify(&mut h, 2), Delivery::Sent);
    let ns: Vec<_> = h
        .reply(resumed)
        .messages()
        .iter()
        .map(|m| m["params"]["n"].clone())
        .collect();
    assert_eq!(ns, [1, 2], "the stream goes on on the new connection");
}

#[test]
fn resume_14_a_refused_resume_leaves_the_live_connection_alone() {
    let mut h = Harness::new(sse());
    let (sid, request, x, seen) = silently_dead(&mut h);
    let (other, _) = h.initialize(V3);
    for (session, id) in [(sid.as_str(), "garbage"), (other.as_str(), seen.as_str())] {
        let g = h.get(session, Some(id));
        assert_eq!(h.reply(g).status(), 400, "{id}");
    }
    assert!(
        !h.reply(x).aborted,
        "another session's resume cannot cut it"
    );
    assert_eq!(progress(&mut h, request.handle(), 3), Delivery::Sent);
    assert_eq!(progress_values(&h.reply(x).messages()), [1, 2, 3]);
}

#[test]
fn gap_14_2_evicted_frames_are_reported_not_replayed_silently() {
    let ring = RingLimits::new().with_max_events(2);
    let mut h = Harness::new(sse().with_store_limits(StoreLimits::new().with_ring(ring)));
    let (sid, request, x) = interrupted(&mut h);
    let priming = h.reply(x).events()[0].id().to_owned();
    for n in 2..6 {
        progress(&mut h, request.handle(), n);
    }
    let g = h.get(&sid, Some(&priming));
    let reply = h.reply(g);
    assert_eq!(reply.status(), 400);
    let message = reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("no longer retained"), "{message}");
}

#[test]
fn linger_14_2_a_finished_streams_frames_go_after_the_linger() {
    let mut h = Harness::new(sse().with_linger(Duration::from_secs(30)));
    let (sid, request, x) = interrupted(&mut h);
    let priming = h.reply(x).events()[0].id().to_owned();
    h.answer(&request, "{}");
    h.advance(Duration::from_secs(29));
    let g = h.get(&sid, Some(&priming));
    assert_eq!(h.reply(g).messages().last().unwrap()["id"], 7);
    h.advance(Duration::from_secs(2));
    let g = h.get(&sid, Some(&priming));
    assert_eq!(h.reply(g).status(), 400);
}

#[test]
fn resume_9_resume_10_polling_closes_after_the_priming_event_and_the_client_comes_back() {
    let mut h = Harness::new(sse().with_polling(Some(Duration::ZERO)));
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    assert_eq!(h.server.poll_timeout(), Some(h.now));
    h.advance(Duration::ZERO);
    let reply = h.reply(x);
    assert!(reply.ended, "closed after the priming event");
    let items = reply.items();
    assert!(
        matches!(items[0], mcpwire::sse::Item::Retry(_)),
        "retry before the close"
    );
    let priming = reply.events()[0].id().to_owned();
    let result = RawJson::new("{}").unwrap();
    assert_eq!(
        h.server.respond(h.now, request.handle(), &result),
        Ok(Delivery::Retained)
    );
    h.advance(Duration::from_secs(1));
    let g = h.get(&sid, Some(&priming));
    let reply = h.reply(g);
    assert_eq!(reply.messages().last().unwrap()["id"], 7);
    assert!(reply.ended);
}

#[test]
fn resume_8_resume_10_a_resume_with_nothing_to_replay_is_primed_before_a_polling_close() {
    let mut h = Harness::new(sse().with_polling(Some(Duration::ZERO)));
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    h.advance(Duration::ZERO);
    assert!(h.reply(x).ended, "closed after the priming event");
    let priming = h.reply(x).events()[0].id().to_owned();
    // The client is back before anything new was sent: the connection it gets is closed
    // at once too, but not before it carried a `retry` and an id to come back with.
    let g = h.get(&sid, Some(&priming));
    h.advance(Duration::ZERO);
    let reply = h.reply(g);
    assert_eq!(reply.status(), 200);
    assert!(reply.ended, "closed by polling");
    assert!(
        matches!(reply.items()[0], mcpwire::sse::Item::Retry(_)),
        "retry before the close"
    );
    let events = reply.events();
    assert_eq!(events.len(), 1, "one priming event");
    assert_eq!(events[0].data(), "");
    let fresh = events[0].id().to_owned();
    assert_ne!(fresh, priming);
    // The fresh id is a cursor of the same stream: what came after it is replayed.
    assert_eq!(progress(&mut h, request.handle(), 1), Delivery::Retained);
    h.answer(&request, "{}");
    let g = h.get(&sid, Some(&fresh));
    let messages = h.reply(g).messages();
    assert_eq!(progress_values(&messages), [1]);
    assert_eq!(messages.last().unwrap()["id"], 7);
}

#[test]
fn polling_a_long_stream_is_closed_after_the_configured_time_and_resumes_live() {
    let mut h = Harness::new(
        sse()
            .with_polling(Some(Duration::from_secs(5)))
            .with_heartbeat(None),
    );
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let request = h.take_request();
    progress(&mut h, request.handle(), 1);
    h.advance(Duration::from_secs(5));
    assert!(h.reply(x).ended);
    let last = h.reply(x).events().last().unwrap().id().to_owned();
    let g = h.get(&sid, Some(&last));
    assert_eq!(progress(&mut h, request.handle(), 2), Delivery::Sent);
    assert_eq!(progress_values(&h.reply(g).messages()), [2]);
}

#[test]
fn the_get_stream_resumes_after_an_id_and_a_fresh_get_gets_what_no_connection_took() {
    let mut h = Harness::new(Config::new());
    let (sid, session) = h.initialize(V3);
    let g = h.get(&sid, None);
    let n = |h: &mut Harness, k: u32| {
        let params = format!(r#"{{"k":{k}}}"#);
        let params = RawJson::new(&params).unwrap();
        h.server
            .notify(
                h.now,
                Target::Session(session),
                "notifications/message",
                Some(&params),
            )
            .unwrap();
        h.drain();
    };
    n(&mut h, 1);
    let last = h.reply(g).events().last().unwrap().id().to_owned();
    h.server.handle_disconnect(h.now, g);
    n(&mut h, 2);
    n(&mut h, 3);
    let resumed = h.get(&sid, Some(&last));
    let ks: Vec<_> = h
        .reply(resumed)
        .messages()
        .iter()
        .map(|m| m["params"]["k"].as_i64().unwrap())
        .collect();
    assert_eq!(ks, [2, 3]);
    h.server.handle_disconnect(h.now, resumed);
    n(&mut h, 4);
    let fresh = h.get(&sid, None);
    let ks: Vec<_> = h
        .reply(fresh)
        .messages()
        .iter()
        .map(|m| m["params"]["k"].as_i64().unwrap())
        .collect();
    assert_eq!(ks, [4], "the frame no connection was handed, once");
}

#[test]
fn a_slow_reader_is_ended_at_the_unsent_bound_and_loses_nothing_it_can_resume() {
    let mut h = Harness::new(sse().with_max_unsent(600));
    let (sid, _) = h.initialize(V3);
    let x = h.post(Some(&sid), Some(V3), CALL);
    let priming = h.reply(x).events()[0].id().to_owned();
    let request = h.take_request();
    // The driver does not pull while twenty frames are written.
    for n in 0..20 {
        let params = format!(r#"{{"progressToken":1,"progress":{n}}}"#);
        let params = RawJson::new(&params).unwrap();
        let _ = h
            .server
            .notify(
                h.now,
                Target::Request(request.handle()),
                "notifications/progress",
                Some(&params),
            )
            .unwrap();
    }
    let mut ended = false;
    while let Some(t) = h.server.poll_transmit(x) {
        ended |= matches!(t, Transmit::End);
    }
    assert!(ended, "ended at the bound");
    h.drain();
    let g = h.get(&sid, Some(&priming));
    assert_eq!(
        progress_values(&h.reply(g).messages()),
        (0..20).collect::<Vec<_>>()
    );
}

#[test]
fn http_post_10_before_2025_11_25_a_stream_is_never_closed_before_its_response() {
    let mut h = Harness::new(sse().with_polling(Some(Duration::ZERO)));
    let (sid, _) = h.initialize("2025-06-18");
    let x = h.post(Some(&sid), Some("2025-06-18"), CALL);
    let request = h.take_request();
    h.advance(Duration::from_secs(10));
    assert!(!h.reply(x).ended, "polling is a 2025-11-25 behaviour");
    h.answer(&request, "{}");
    assert!(h.reply(x).ended);
}

#[test]
fn http_get_6_the_server_may_close_the_get_stream_after_retry_and_the_client_resumes() {
    let mut h = Harness::new(
        Config::new()
            .with_polling(Some(Duration::from_secs(30)))
            .with_heartbeat(None),
    );
    let (sid, session) = h.initialize(V3);
    let g = h.get(&sid, None);
    let items = h.reply(g).items();
    assert!(matches!(items[0], mcpwire::sse::Item::Retry(_)));
    let priming = h.reply(g).events()[0].id().to_owned();
    h.advance(Duration::from_secs(30));
    assert!(h.reply(g).ended);
    h.server
        .notify(
            h.now,
            Target::Session(session),
            "notifications/message",
            None,
        )
        .unwrap();
    let again = h.get(&sid, Some(&priming));
    assert_eq!(
        h.reply(again).messages()[0]["method"],
        "notifications/message"
    );
}

/// One call of `sid` answered and read to its end; the priming event's id.
fn finished_call(h: &mut Harness, sid: &str, id: u32) -> String {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow"}}}}"#
    );
    let x = h.post(Some(sid), Some(V3), &body);
    let request = h.take_request();
    h.answer(&request, "{}");
    let priming = h.reply(x).events()[0].id().to_owned();
    assert!(!priming.is_empty(), "call {id}: a resumable stream");
    priming
}

/// Linger, §14.2: at the store's bounds a new stream is still resumable: the oldest
/// finished stream no connection reads gives its ring up (of the session at the
/// session's bound, of any session at the store's). A session making more calls within
/// a linger than it may keep rings loses only its oldest streams' frames, never the
/// newest's; a stream still open keeps its ring whatever comes.
#[test]
fn linger_14_2_at_the_ring_bounds_the_oldest_finished_stream_makes_room() {
    let limits = StoreLimits::new()
        .with_max_rings(6)
        .with_max_rings_per_session(3);
    let mut h = Harness::new(sse().with_store_limits(limits));
    let (sid, _) = h.initialize(V3);
    // A stream that stays open through it all.
    let open = h.post(Some(&sid), Some(V3), CALL);
    let running = h.take_request();
    let open_priming = h.reply(open).events()[0].id().to_owned();
    let primings: Vec<String> = (1..=5).map(|i| finished_call(&mut h, &sid, i)).collect();
    let resumes = |h: &mut Harness, sid: &str, after: &str| {
        let g = h.get(sid, Some(after));
        h.reply(g).status()
    };
    // The two newest finished streams of the session are kept, the older ones gave way.
    assert_eq!(resumes(&mut h, &sid, &primings[4]), 200);
    assert_eq!(resumes(&mut h, &sid, &primings[3]), 200);
    for old in &primings[..3] {
        assert_eq!(resumes(&mut h, &sid, old), 400, "{old}");
    }
    // The store's bound (in SSE mode an `initialize` answer is a stream too): the
    // other sessions' streams take the three rings left, and then the oldest finished
    // stream of any session gives way.
    let (other, _) = h.initialize(V3);
    let o1 = finished_call(&mut h, &other, 1);
    let (third, _) = h.initialize(V3);
    let t1 = finished_call(&mut h, &third, 1);
    assert_eq!(
        resumes(&mut h, &sid, &primings[3]),
        400,
        "the oldest of all"
    );
    assert_eq!(resumes(&mut h, &sid, &primings[4]), 200);
    assert_eq!(resumes(&mut h, &other, &o1), 200);
    assert_eq!(resumes(&mut h, &third, &t1), 200);
    // The open stream was never taken: its client resumes it and gets the answer.
    h.answer(&running, "{}");
    let g = h.get(&sid, Some(&open_priming));
    assert_eq!(h.reply(g).messages().last().unwrap()["id"], 7);
}
