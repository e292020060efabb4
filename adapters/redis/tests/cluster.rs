//! Several `McpService` nodes on 127.0.0.1 sharing sessions and streams through a real
//! Redis (the test's own `redis-server`), driven by `RedisStore`: any node serves any
//! live session and DELETE on one ends it on all (SESSION-7, HTTP-DELETE-1); a stream
//! written on one node is resumed on another with every frame once, then followed live
//! (RESUME-5), never a ring of another session (RESUME-6), and the resume cuts the
//! writer's old connection (RESUME-14); Redis lost fails only what needs it, with 503,
//! a frame lost meanwhile is a gap, and service comes back by itself; every node reads
//! the same `requestState` key (MODERN-23).

mod common;

use std::time::{Duration, Instant};

use common::{
    CALL, INITIALIZED, Node, PING, READ_TIMEOUT, SseEvent, Told, blocking, bounded, eventually,
    redis, sse,
};
use mcpwire::server::Config;
use mcpwire_redis::{RedisOptions, RedisStore, RedisStoreError};

const LIMIT: Duration = Duration::from_secs(60);

/// The progress values of `events`, in order.
fn progress(events: &[SseEvent]) -> Vec<i64> {
    events.iter().filter_map(SseEvent::progress).collect()
}

/// Whether `event` is the answer to the call (id 7).
fn is_answer(event: &SseEvent) -> bool {
    event.json().is_some_and(|m| m["id"] == 7)
}

/// Event ids of one ring, in order: `<epoch>:<ring>:<seq>` with `seq` strictly rising.
fn seqs(events: &[SseEvent]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| e.id.as_deref())
        .filter(|id| !id.is_empty())
        .map(|id| {
            let seq = id.rsplit(':').next().unwrap();
            u64::from_str_radix(seq, 16).unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_7_http_delete_1_any_node_serves_a_session_and_delete_ends_it_everywhere() {
    bounded(LIMIT, async {
        let redis = redis();
        let options = || RedisOptions::new().with_prefix("t1");
        let mut a = Node::with_options(1, &redis, Config::new(), options()).await;
        let mut b = Node::with_options(2, &redis, Config::new(), options()).await;
        let mut c = Node::with_options(3, &redis, Config::new(), options()).await;

        let sid = a.initialize().await;
        // The record is in Redis, under the documented key, with a time to live.
        let key = format!("t1:s:{sid}");
        assert!(
            redis
                .command(&["GET", &key])
                .starts_with("1 2025-11-25 s p "),
            "{}",
            redis.command(&["GET", &key])
        );
        let ttl: i64 = redis.command(&["PTTL", &key]).parse().unwrap();
        assert!(ttl > 0, "{ttl}");

        // Node B never saw the session: it loads the record and completes the handshake.
        let mut x = b.post(&sid, INITIALIZED).await;
        assert_eq!(x.status, 202);
        x.text().await;
        // Its record is written again, complete (a write: the answer does not wait).
        eventually(READ_TIMEOUT, "the record says complete", || async {
            redis
                .command(&["GET", &key])
                .starts_with("1 2025-11-25 s c ")
        })
        .await;

        // Node C loads it too, and its application answers a call in that session.
        let call = tokio::spawn({
            let addr = c.addr;
            let sid = sid.clone();
            async move {
                let mut x =
                    common::Exchange::send(addr, "POST", Some(&sid), None, Some(CALL)).await;
                (x.status, x.messages().await)
            }
        });
        let h = c.call().await;
        c.answer(h);
        let (status, messages) = call.await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert_eq!(messages[0]["id"], 7);
        assert!(messages[0]["result"].is_object(), "{messages:?}");

        // DELETE on B: the record is gone from Redis, and every node answers 404, those
        // that held a copy (A minted it, C adopted it) once the notice reached them.
        let mut d = b.delete(&sid).await;
        assert_eq!(d.status, 200);
        d.text().await;
        eventually(READ_TIMEOUT, "the record is deleted", || async {
            redis.command(&["EXISTS", &key]) == "0"
        })
        .await;
        for (name, node) in [("A", &a), ("B", &b), ("C", &c)] {
            eventually(
                Duration::from_secs(3),
                &format!("node {name} answers 404"),
                || async {
                    let mut x = node.post(&sid, PING).await;
                    x.text().await;
                    x.status == 404
                },
            )
            .await;
        }
        // No key of the session is left but its tombstone: A, polled while it still
        // held its copy, may have written the record again, which the tombstone refused.
        assert_eq!(
            redis.command(&["KEYS", &format!("t1:*{sid}*")]),
            format!("t1:gone:{sid}")
        );
        for node in [&mut a, &mut b, &mut c] {
            assert!(!node.told_so_far().contains(&Told::CommandFailed));
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_5_a_stream_written_on_one_node_is_replayed_then_followed_on_another() {
    bounded(LIMIT, async {
        let redis = redis();
        let mut a = Node::start(1, &redis, sse()).await;
        // B's subscriber pings its connection often: the pings must not disturb it.
        let often = RedisOptions::new().with_keepalive(Duration::from_millis(20));
        let mut b = Node::with_options(2, &redis, sse(), often).await;
        let sid = a.initialize().await;
        let x = a.post(&sid, INITIALIZED).await;
        assert_eq!(x.status, 202);

        // A call on A streams progress 1; the client reads it, then goes away.
        let mut call = a.post(&sid, CALL).await;
        assert_eq!(call.status, 200);
        let h = a.call().await;
        a.progress(h, 1);
        let seen = call.events_until(|e| e.progress() == Some(1)).await;
        let last = seen.last().and_then(|e| e.id.clone()).expect("an event id");
        drop(call);
        // A goes on writing while nobody reads: progress 2 and 3 go to the ring.
        a.progress(h, 2);
        a.progress(h, 3);
        let ring_key = {
            let (epoch_ring, _) = last.rsplit_once(':').unwrap();
            format!("mcpwire:r:{sid}:{epoch_ring}")
        };
        eventually(READ_TIMEOUT, "progress 3 is in the ring", || async {
            redis
                .command(&["XRANGE", &ring_key, "-", "+"])
                .contains("\"progress\":3")
        })
        .await;

        // The client resumes on B: exactly what it missed, in order, then live frames.
        let mut resumed = b.get(&sid, Some(&last)).await;
        assert_eq!(resumed.status, 200);
        let replayed = resumed.events_until(|e| e.progress() == Some(3)).await;
        assert_eq!(progress(&replayed), [2, 3], "{replayed:?}");
        a.progress(h, 4);
        let live = resumed.events_until(|e| e.progress() == Some(4)).await;
        assert_eq!(progress(&live), [4], "{live:?}");
        a.progress(h, 5);
        // The answer finishes the stream on A: B relays it and ends the stream.
        a.answer(h);
        let rest = resumed.ends_within(READ_TIMEOUT).await;
        assert_eq!(progress(&rest), [5], "{rest:?}");
        assert_eq!(rest.iter().filter(|e| is_answer(e)).count(), 1, "{rest:?}");

        // Every frame once: the ids after the client's last one rise one by one.
        let all: Vec<SseEvent> = [replayed, live, rest].concat();
        let ids = seqs(&all);
        let after = seqs(&seen).last().copied().unwrap();
        let expected: Vec<u64> = (after + 1..=after + ids.len() as u64).collect();
        assert_eq!(ids, expected, "{all:?}");
        // The ring is finished in Redis: its end marker sorts after its last frame.
        let entries = redis.command(&["XRANGE", &ring_key, "-", "+"]);
        assert!(entries.lines().any(|l| l == "end"), "{entries}");
        // B let the ring's wake channel go.
        eventually(READ_TIMEOUT, "B unsubscribed", || async {
            redis
                .command(&["PUBSUB", "CHANNELS", "mcpwire:w:*"])
                .is_empty()
        })
        .await;
        for node in [&mut a, &mut b] {
            let told = node.told_so_far();
            assert!(!told.contains(&Told::CommandFailed), "{told:?}");
            assert!(!told.contains(&Told::SubscriberLost), "{told:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_14_a_resume_on_another_node_cuts_the_writers_old_connection() {
    bounded(LIMIT, async {
        let redis = redis();
        let mut a = Node::start(1, &redis, sse()).await;
        let b = Node::start(2, &redis, sse()).await;
        let sid = a.initialize().await;
        let mut call = a.post(&sid, CALL).await;
        let h = a.call().await;
        a.progress(h, 1);
        let seen = call.events_until(|e| e.progress() == Some(1)).await;
        let last = seen.last().and_then(|e| e.id.clone()).unwrap();
        // The old connection died silently: A still believes it open. The client resumes
        // on B, whose take-over cuts it on A.
        let mut resumed = b.get(&sid, Some(&last)).await;
        assert_eq!(resumed.status, 200);
        let cut = call.ends_within(READ_TIMEOUT).await;
        assert!(progress(&cut).is_empty(), "{cut:?}");
        // What comes next goes to the new connection only, once.
        a.progress(h, 2);
        a.answer(h);
        let rest = resumed.ends_within(READ_TIMEOUT).await;
        assert_eq!(progress(&rest), [2], "{rest:?}");
        assert_eq!(rest.iter().filter(|e| is_answer(e)).count(), 1, "{rest:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_7_redis_lost_is_503_on_a_node_that_needs_it_and_service_comes_back_by_itself() {
    bounded(LIMIT, async {
        let mut redis = redis();
        let mut a = Node::start(1, &redis, Config::new()).await;
        let mut b = Node::start(2, &redis, Config::new()).await;
        let sid = a.initialize().await;
        let mut x = a.post(&sid, INITIALIZED).await;
        assert_eq!(x.status, 202);
        x.text().await;
        // Redis keeps what it holds across the outage (a snapshot), then goes away.
        assert_eq!(redis.command(&["SAVE"]), "OK");
        blocking(|| redis.stop());

        // B does not hold the session and cannot load it: 503 with a JSON-RPC error,
        // quickly, and again for the next request.
        for _ in 0..2 {
            let t = Instant::now();
            let mut x = b.post(&sid, PING).await;
            let messages = x.messages().await;
            let took = t.elapsed();
            assert_eq!(x.status, 503, "{messages:?}");
            assert_eq!(messages[0]["error"]["code"], -32603, "{messages:?}");
            assert!(took < Duration::from_secs(3), "503 took {took:?}");
        }
        b.wait_told(Told::Unavailable, READ_TIMEOUT).await;
        // A holds it and keeps serving it, a call included.
        let call = tokio::spawn({
            let addr = a.addr;
            let sid = sid.clone();
            async move {
                let mut x =
                    common::Exchange::send(addr, "POST", Some(&sid), None, Some(CALL)).await;
                (x.status, x.messages().await)
            }
        });
        let h = a.call().await;
        a.answer(h);
        let (status, messages) = call.await.unwrap();
        assert_eq!(status, 200, "{messages:?}");
        assert_eq!(messages[0]["id"], 7);

        // Redis is back: B's very next request works, nothing restarted.
        blocking(|| redis.restart());
        let mut x = b.post(&sid, PING).await;
        let messages = x.messages().await;
        assert_eq!(x.status, 200, "{messages:?}");
        assert_eq!(messages[0]["id"], 3);
        b.wait_told(Told::Recovered, READ_TIMEOUT).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_5_a_follow_survives_a_redis_restart_and_a_lost_frame_is_a_gap() {
    bounded(LIMIT, async {
        let mut redis = redis();
        let mut a = Node::start(1, &redis, sse()).await;
        let mut b = Node::start(2, &redis, sse()).await;
        let sid = a.initialize().await;
        let mut call = a.post(&sid, CALL).await;
        let h = a.call().await;
        a.progress(h, 1);
        let seen = call.events_until(|e| e.progress() == Some(1)).await;
        let last = seen.last().and_then(|e| e.id.clone()).unwrap();
        drop(call);
        let mut resumed = b.get(&sid, Some(&last)).await;
        assert_eq!(resumed.status, 200);
        a.progress(h, 2);
        let live = resumed.events_until(|e| e.progress() == Some(2)).await;
        assert_eq!(progress(&live), [2]);
        let last = live.last().and_then(|e| e.id.clone()).unwrap();

        // Redis restarts (with its data). Both nodes notice, reconnect and resubscribe.
        assert_eq!(redis.command(&["SAVE"]), "OK");
        blocking(|| redis.restart());
        a.wait_told(Told::Recovered, READ_TIMEOUT).await;
        b.wait_told(Told::SubscriberRecovered, READ_TIMEOUT).await;
        // The follow goes on: B's subscriber hears the wake-ups again.
        a.progress(h, 3);
        let live = resumed.events_until(|e| e.progress() == Some(3)).await;
        assert_eq!(progress(&live), [3], "{live:?}");
        let last_seen = live.last().and_then(|e| e.id.clone()).unwrap();
        assert_ne!(last_seen, last);

        // Redis is lost while A writes progress 4: that append is dropped. Back, progress
        // 5 is appended; B must not hand 5 as if 4 were there: it ends the stream.
        assert_eq!(redis.command(&["SAVE"]), "OK");
        blocking(|| redis.stop());
        a.wait_told(Told::Unavailable, READ_TIMEOUT).await;
        a.progress(h, 4);
        blocking(|| redis.restart());
        a.wait_told(Told::Recovered, READ_TIMEOUT).await;
        b.wait_told(Told::SubscriberRecovered, READ_TIMEOUT).await;
        a.progress(h, 5);
        let rest = resumed.ends_within(READ_TIMEOUT).await;
        assert!(progress(&rest).is_empty(), "{rest:?}");
        // Its client resumes after 3: the ring has no 4, and says so.
        let mut again = b.get(&sid, Some(&last_seen)).await;
        let text = again.text().await;
        assert_eq!(again.status, 400, "{text}");
        assert!(text.contains("no longer retained"), "{text}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_5_a_long_replay_is_paged_and_every_frame_comes_once() {
    bounded(LIMIT, async {
        let redis = redis();
        let a = Node::start(1, &redis, sse()).await;
        // Tiny pages and replays: the replay stops after 3 frames, the rest follows.
        let small = RedisOptions::new().with_fetch_count(2).with_max_replay(3);
        let b = Node::with_options(2, &redis, sse(), small).await;
        let mut a = a;
        let sid = a.initialize().await;
        let mut call = a.post(&sid, CALL).await;
        let h = a.call().await;
        a.progress(h, 1);
        let seen = call.events_until(|e| e.progress() == Some(1)).await;
        let last = seen.last().and_then(|e| e.id.clone()).unwrap();
        drop(call);
        for n in 2..=10 {
            a.progress(h, n);
        }
        let ring_key = format!("mcpwire:r:{sid}:{}", last.rsplit_once(':').unwrap().0);
        eventually(READ_TIMEOUT, "progress 10 is in the ring", || async {
            redis
                .command(&["XRANGE", &ring_key, "-", "+"])
                .contains("\"progress\":10")
        })
        .await;
        let mut resumed = b.get(&sid, Some(&last)).await;
        assert_eq!(resumed.status, 200);
        let replayed = resumed.events_until(|e| e.progress() == Some(10)).await;
        assert_eq!(progress(&replayed), (2..=10).collect::<Vec<_>>());
        a.answer(h);
        let rest = resumed.ends_within(READ_TIMEOUT).await;
        assert_eq!(rest.iter().filter(|e| is_answer(e)).count(), 1, "{rest:?}");
        let all = [replayed, rest].concat();
        let ids = seqs(&all);
        let after = *seqs(&seen).last().unwrap();
        assert_eq!(
            ids,
            (after + 1..=after + ids.len() as u64).collect::<Vec<_>>()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_5_resume_6_follows_are_bounded_and_a_ring_of_no_such_session_is_refused() {
    bounded(LIMIT, async {
        let redis = redis();
        let mut a = Node::start(1, &redis, sse()).await;
        let one = RedisOptions::new().with_max_follows(1);
        let b = Node::with_options(2, &redis, sse(), one).await;
        let sid = a.initialize().await;
        // Two calls streaming on A, their clients gone after progress 1.
        let mut lasts = Vec::new();
        let mut handles = Vec::new();
        for id in [7, 8] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow"}}}}"#
            );
            let mut call = a.post(&sid, &body).await;
            let h = a.call().await;
            a.progress(h, 1);
            let seen = call.events_until(|e| e.progress() == Some(1)).await;
            lasts.push(seen.last().and_then(|e| e.id.clone()).unwrap());
            handles.push(h);
        }
        assert_ne!(
            lasts[0].rsplit_once(':').unwrap().0,
            lasts[1].rsplit_once(':').unwrap().0
        );
        // An id of A's epoch but of a ring A never opened: refused, and it holds no
        // follow (B may hold one).
        let (epoch, _) = lasts[0].split_once(':').unwrap();
        let forged = format!("{epoch}:fffff:0");
        let mut x = b.get(&sid, Some(&forged)).await;
        let text = x.text().await;
        assert_eq!(x.status, 400, "{text}");
        assert!(text.contains("names no event"), "{text}");
        // Another session cannot resume a ring of this one: refused the same way.
        let other = a.initialize().await;
        let mut x = b.get(&other, Some(&lasts[0])).await;
        let text = x.text().await;
        assert_eq!(x.status, 400, "{text}");
        assert!(text.contains("names no event"), "{text}");
        // The one follow B may hold; a second one is 503, as if Redis were away.
        let mut first = b.get(&sid, Some(&lasts[0])).await;
        assert_eq!(first.status, 200);
        let mut second = b.get(&sid, Some(&lasts[1])).await;
        let text = second.text().await;
        assert_eq!(second.status, 503, "{text}");
        // The first ends with its stream; then the second ring can be followed.
        a.answer(handles[0]);
        let rest = first.ends_within(READ_TIMEOUT).await;
        assert_eq!(rest.iter().filter(|e| is_answer(e)).count(), 1, "{rest:?}");
        let mut second = b.get(&sid, Some(&lasts[1])).await;
        assert_eq!(second.status, 200);
        a.progress(handles[1], 2);
        let live = second.events_until(|e| e.progress() == Some(2)).await;
        assert_eq!(progress(&live), [2]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_7_a_session_in_use_keeps_its_record_and_rings_alive() {
    bounded(LIMIT, async {
        let redis = redis();
        let idle = || sse().with_session_idle(Duration::from_secs(1));
        let mut a = Node::start(1, &redis, idle()).await;
        let mut b = Node::start(2, &redis, idle()).await;
        let sid = a.initialize().await;
        let mut call = a.post(&sid, CALL).await;
        let h = a.call().await;
        a.progress(h, 1);
        let seen = call.events_until(|e| e.progress() == Some(1)).await;
        let last = seen.last().and_then(|e| e.id.clone()).unwrap();
        let ring_key = format!("mcpwire:r:{sid}:{}", last.rsplit_once(':').unwrap().0);
        // Requests keep coming on B for twice the record's life (1.25 s) with no new
        // frame: the touches keep the record and the ring alive.
        let until = Instant::now() + Duration::from_millis(2_600);
        while Instant::now() < until {
            let mut x = b.post(&sid, PING).await;
            x.text().await;
            assert_eq!(x.status, 200);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(redis.command(&["EXISTS", &format!("mcpwire:s:{sid}")]), "1");
        let ttl: i64 = redis.command(&["PTTL", &ring_key]).parse().unwrap();
        assert!(ttl > 0, "the ring expired: {ttl}");
        // Every SSE answer is a ring (each ping's too): the call's is among them.
        let set = redis.command(&["SMEMBERS", &format!("mcpwire:rings:{sid}")]);
        assert!(set.lines().any(|k| k == ring_key), "{set}");
        a.answer(h);
        drop(call);
        for node in [&mut a, &mut b] {
            assert!(!node.told_so_far().contains(&Told::CommandFailed));
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_a_closed_port_fails_at_once_with_a_clear_error() {
    bounded(LIMIT, async {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let t = Instant::now();
        let url = format!("redis://:secret@127.0.0.1:{port}");
        let e = RedisStore::connect(&url, RedisOptions::new())
            .await
            .unwrap_err();
        let took = t.elapsed();
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert!(matches!(e, RedisStoreError::Unreachable { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("cannot reach Redis at 127.0.0.1:{port}: ")),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
        let e = RedisStore::connect("http://127.0.0.1:1", RedisOptions::new())
            .await
            .unwrap_err();
        assert!(matches!(e, RedisStoreError::InvalidUrl(_)), "{e:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_ends_when_its_service_is_gone() {
    bounded(LIMIT, async {
        let redis = redis();
        let config = Config::new().with_node(Some(mcpwire::server::NodeId::new(9)));
        let (service, events) = mcpwire_tokio::server::McpService::new(
            config,
            mcpwire_tests::server::counter_entropy(9),
        );
        let store = RedisStore::connect(&redis.url(), RedisOptions::new())
            .await
            .unwrap();
        let driver = tokio::spawn(store.run(service.store_link()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!driver.is_finished());
        drop((service, events));
        tokio::time::timeout(READ_TIMEOUT, driver)
            .await
            .expect("the driver ends")
            .unwrap();
        // Its connections are closed: only the fixture's own probe is left, if any.
        eventually(READ_TIMEOUT, "no client left", || async {
            redis.command(&["CLIENT", "LIST"]).lines().count() <= 1
        })
        .await;
    })
    .await;
}

/// MODERN-23: every store on one Redis (and prefix) reads the same `requestState` key,
/// whichever drew first; another prefix is another cluster with its own key; a value
/// that is not a 32-byte key is a clear error, not a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_23_every_node_reads_the_same_state_key() {
    bounded(LIMIT, async {
        let redis = redis();
        // What the key of a store under `prefix`, drawing from `seed`, seals.
        let sealed = async |prefix: &str, seed: u64| {
            let options = RedisOptions::new().with_prefix(prefix);
            let mut store = RedisStore::connect(&redis.url(), options).await.unwrap();
            let mut entropy = mcpwire_tests::server::counter_entropy(seed);
            let key = store.state_key(&mut *entropy).await?;
            Ok::<_, RedisStoreError>(key.seal("tools/call", "t", "state"))
        };
        let first = sealed("mcpwire", 1).await.unwrap();
        for seed in [2, 3] {
            assert_eq!(sealed("mcpwire", seed).await.unwrap(), first);
        }
        assert_ne!(sealed("other", 9).await.unwrap(), first);

        assert_eq!(redis.command(&["SET", "bad:state-key", "short"]), "OK");
        let e = sealed("bad", 9).await.unwrap_err();
        assert!(matches!(e, RedisStoreError::Unexpected(_)), "{e:?}");
        assert!(e.to_string().contains("requestState key"), "{e}");
    })
    .await;
}
