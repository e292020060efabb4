//! Node liveness through a real Redis (the test's own `redis-server`), nodes on
//! 127.0.0.1: a node keeps a liveness key per epoch while its store driver runs and
//! deletes it when the driver ends; a follower of a ring whose writer is gone (killed
//! mid-stream: its key lapsed) ends after the stored frames, and a new resume of that
//! ring is refused with 400 saying the node stopped (RESUME-5, RESUME-14: the writer can
//! no longer be superseded, so the resume cannot continue the stream); a finished ring
//! is replayed whoever wrote it.

mod common;

use std::time::{Duration, Instant};

use common::{CALL, Node, READ_TIMEOUT, SseEvent, blocking, bounded, eventually, redis, sse};
use mcpwire::server::{Config, NodeId};
use mcpwire_redis::{RedisEvent, RedisOptions, RedisStore};
use mcpwire_tests::redis_server::RedisServer;
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::server::McpService;
use tokio::sync::mpsc;

const LIMIT: Duration = Duration::from_secs(60);

/// Liveness that lapses quickly: a killed writer is known gone within half a second.
fn quick() -> RedisOptions {
    RedisOptions::new().with_liveness(Duration::from_millis(400), Duration::from_millis(100))
}

/// The progress values of `events`, in order.
fn progress(events: &[SseEvent]) -> Vec<i64> {
    events.iter().filter_map(SseEvent::progress).collect()
}

/// Whether `event` is the answer to the call (id 7).
fn is_answer(event: &SseEvent) -> bool {
    event.json().is_some_and(|m| m["id"] == 7)
}

/// The `<epoch>:<ring>` and the sequence number of event id `id`.
fn split(id: &str) -> (&str, u64) {
    let (ring, seq) = id.rsplit_once(':').unwrap();
    (ring, u64::from_str_radix(seq, 16).unwrap())
}

/// The liveness key of the node that wrote event `id` (default prefix).
fn liveness_key(id: &str) -> String {
    let (epoch, _) = id.split_once(':').unwrap();
    format!("mcpwire:node:{epoch}")
}

/// A resume of `last` on `node` is refused: 400, with a JSON-RPC error saying the node
/// that served the stream stopped.
async fn refused_as_stopped(node: &Node, sid: &str, last: &str) {
    let mut x = node.get(sid, Some(last)).await;
    let messages = x.messages().await;
    assert_eq!(x.status, 400, "{messages:?}");
    let message = messages
        .first()
        .and_then(|m| m["error"]["message"].as_str())
        .unwrap_or_default();
    assert!(message.contains("stopped"), "{messages:?}");
}

/// Lets a refused resume's take-over notice (published after the follow is answered)
/// reach the other nodes: one arriving while the next resume of the ring is opening
/// there would cut that resume (RESUME-14), which is not what the test looks at.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// A call on `a` streams progress 1, which its client reads before it goes away;
/// returns the call's handle and the client's last event id.
async fn call_then_leave(a: &mut Node, sid: &str) -> (mcpwire::server::RequestHandle, String) {
    let mut call = a.post(sid, CALL).await;
    assert_eq!(call.status, 200);
    let h = a.call().await;
    a.progress(h, 1);
    let seen = call.events_until(|e| e.progress() == Some(1)).await;
    let last = seen.last().and_then(|e| e.id.clone()).expect("an event id");
    (h, last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_5_a_follower_of_a_lapsed_writer_gets_the_stored_frames_then_ends_and_resumes_are_400()
 {
    bounded(LIMIT, async {
        let redis = redis();
        // A writes its liveness once, at start (its next refresh is a minute away): the
        // test lets it lapse by deleting it. B checks its writers every 100 ms.
        let rare =
            RedisOptions::new().with_liveness(Duration::from_secs(120), Duration::from_secs(60));
        let mut a = Node::with_options(1, &redis, sse(), rare).await;
        let b = Node::with_options(2, &redis, sse(), quick()).await;
        let c = Node::start(3, &redis, sse()).await;
        let sid = a.initialize().await;
        let (h, last) = call_then_leave(&mut a, &sid).await;
        a.progress(h, 2);
        let (ring, _) = split(&last);
        let ring_key = format!("mcpwire:r:{sid}:{ring}");
        eventually(READ_TIMEOUT, "progress 2 is in the ring", || async {
            redis
                .command(&["XRANGE", &ring_key, "-", "+"])
                .contains("\"progress\":2")
        })
        .await;

        // The writer is alive: B replays what the client missed and follows the ring.
        let mut resumed = b.get(&sid, Some(&last)).await;
        assert_eq!(resumed.status, 200);
        let replayed = resumed.events_until(|e| e.progress() == Some(2)).await;
        assert_eq!(progress(&replayed), [2], "{replayed:?}");
        let two = replayed.last().and_then(|e| e.id.clone()).unwrap();
        // Checks of a live writer change nothing.
        tokio::time::sleep(Duration::from_millis(300)).await;

        // A frame reaches the ring with no wake-up (as the last append of a node killed
        // before its publish): B has not read it yet.
        let (_, seq) = split(&two);
        let three = format!("{ring}:{:x}", seq + 1);
        let tail = redis.command(&["XREVRANGE", &ring_key, "+", "-", "COUNT", "1"]);
        let mut parts = tail.splitn(3, '\n');
        let (Some(_), Some("f"), Some(frame)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("a frame entry: {tail}");
        };
        assert!(frame.contains(&two), "{frame}");
        let frame = frame
            .replace(&two, &three)
            .replace("\"progress\":2", "\"progress\":3");
        let entry = format!("{}-0", seq + 2);
        assert_eq!(
            redis.command(&["XADD", &ring_key, &entry, "f", &frame]),
            entry
        );

        // A's liveness lapses (A is not killed here, so it is not the one ending the
        // stream): B hands the stored frame, then ends the connection.
        let key = liveness_key(&last);
        assert_eq!(redis.command(&["DEL", &key]), "1");
        let t = Instant::now();
        let rest = resumed.ends_within(READ_TIMEOUT).await;
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert_eq!(progress(&rest), [3], "{rest:?}");
        let ids: Vec<&str> = rest.iter().filter_map(|e| e.id.as_deref()).collect();
        assert_eq!(ids, [three.as_str()], "{rest:?}");
        assert!(!rest.iter().any(is_answer), "{rest:?}");
        // B let the ring's wake channel go.
        eventually(READ_TIMEOUT, "B unsubscribed", || async {
            redis
                .command(&["PUBSUB", "CHANNELS", "mcpwire:w:*"])
                .is_empty()
        })
        .await;

        // Its client resumes, on B or on C: refused, the node that served it stopped.
        refused_as_stopped(&b, &sid, &three).await;
        settle().await;
        refused_as_stopped(&c, &sid, &last).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_14_a_writer_killed_mid_stream_ends_its_followers_once_its_liveness_expires() {
    bounded(LIMIT, async {
        let redis = redis();
        let mut a = Node::with_options(1, &redis, sse(), quick()).await;
        let b = Node::with_options(2, &redis, sse(), quick()).await;
        let c = Node::start(3, &redis, sse()).await;
        let sid = a.initialize().await;
        let (h, last) = call_then_leave(&mut a, &sid).await;
        let key = liveness_key(&last);
        assert_eq!(redis.command(&["EXISTS", &key]), "1");

        let mut resumed = b.get(&sid, Some(&last)).await;
        assert_eq!(resumed.status, 200);
        a.progress(h, 2);
        let live = resumed.events_until(|e| e.progress() == Some(2)).await;
        assert_eq!(progress(&live), [2], "{live:?}");
        let two = live.last().and_then(|e| e.id.clone()).unwrap();
        // Its refreshes keep a live writer's key beyond its time to live (400 ms).
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(redis.command(&["EXISTS", &key]), "1");

        // A's store driver dies without a clean end (a kill): what A writes next never
        // reaches Redis, and its liveness expires.
        a.kill_store();
        a.progress(h, 3);
        let t = Instant::now();
        let rest = resumed.ends_within(READ_TIMEOUT).await;
        let took = t.elapsed();
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert!(progress(&rest).is_empty(), "{rest:?}");
        assert_eq!(redis.command(&["EXISTS", &key]), "0");

        // A resume elsewhere is refused: nothing more of that stream will come.
        refused_as_stopped(&c, &sid, &two).await;
        settle().await;
        refused_as_stopped(&b, &sid, &two).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_5_a_finished_ring_of_a_writer_gone_is_still_replayed_in_full() {
    bounded(LIMIT, async {
        let redis = redis();
        let mut a = Node::with_options(1, &redis, sse(), quick()).await;
        let b = Node::with_options(2, &redis, sse(), quick()).await;
        let sid = a.initialize().await;
        let (h, last) = call_then_leave(&mut a, &sid).await;
        a.progress(h, 2);
        a.answer(h);
        let (ring, _) = split(&last);
        let ring_key = format!("mcpwire:r:{sid}:{ring}");
        eventually(READ_TIMEOUT, "the ring is finished", || async {
            redis
                .command(&["XRANGE", &ring_key, "-", "+"])
                .lines()
                .any(|l| l == "end")
        })
        .await;
        // A is killed; its liveness expires.
        a.kill_store();
        let key = liveness_key(&last);
        eventually(READ_TIMEOUT, "A's liveness expired", || async {
            redis.command(&["EXISTS", &key]) == "0"
        })
        .await;

        // The ring holds its whole stream: the resume gets the rest of it, and its end.
        let mut resumed = b.get(&sid, Some(&last)).await;
        assert_eq!(resumed.status, 200);
        let rest = resumed.ends_within(READ_TIMEOUT).await;
        assert_eq!(progress(&rest), [2], "{rest:?}");
        assert_eq!(rest.iter().filter(|e| is_answer(e)).count(), 1, "{rest:?}");
    })
    .await;
}

/// A store driver of its own on `redis`, for a service of `shards` shards as node 9:
/// the service, the driver's task, the liveness keys of its epochs, and what it told.
async fn lone_node(
    redis: &RedisServer,
    shards: usize,
    options: RedisOptions,
) -> (
    McpService,
    tokio::task::JoinHandle<()>,
    Vec<String>,
    mpsc::UnboundedReceiver<bool>,
) {
    let config = Config::new().with_node(Some(NodeId::new(9)));
    let service = McpService::sharded(shards, config, counter_entropy(9), |_, _| {});
    let (told, recovered) = mpsc::unbounded_channel();
    let options = options.with_prefix("t9").with_on_event(move |e| {
        let _ = told.send(matches!(e, RedisEvent::Recovered));
    });
    let store = RedisStore::connect(&redis.url(), options).await.unwrap();
    let link = service.store_link();
    let keys: Vec<String> = link
        .epochs
        .iter()
        .map(|e| format!("t9:node:{:x}", e.get()))
        .collect();
    let driver = tokio::spawn(store.run(link));
    (service, driver, keys, recovered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_5_a_node_keeps_its_liveness_while_its_driver_runs_and_deletes_it_when_it_ends() {
    bounded(LIMIT, async {
        let redis = redis();
        let options =
            RedisOptions::new().with_liveness(Duration::from_secs(2), Duration::from_millis(100));
        let (service, driver, keys, _) = lone_node(&redis, 2, options).await;
        // Written at the driver's start, before any work.
        eventually(READ_TIMEOUT, "the keys are written", || async {
            keys.iter().all(|k| redis.command(&["EXISTS", k]) == "1")
        })
        .await;
        // One key per shard, each of node 9's epochs.
        assert_eq!(keys.len(), 2);
        assert_ne!(keys[0], keys[1]);
        for key in &keys {
            assert!(key.starts_with("t9:node:9"), "{key}");
        }
        // Kept past its time to live (2 s) by refreshes.
        let until = Instant::now() + Duration::from_millis(2_600);
        while Instant::now() < until {
            for key in &keys {
                assert_eq!(redis.command(&["GET", key]), "1", "{key}");
                let ttl: i64 = redis.command(&["PTTL", key]).parse().unwrap();
                assert!(ttl > 0 && ttl <= 2_000, "{key}: {ttl}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The service is gone: the driver ends, and has deleted the keys (long before
        // they would expire).
        drop(service);
        tokio::time::timeout(READ_TIMEOUT, driver)
            .await
            .expect("the driver ends")
            .unwrap();
        for key in &keys {
            assert_eq!(redis.command(&["EXISTS", key]), "0", "{key}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_5_liveness_lost_with_redis_is_written_again_as_soon_as_redis_is_back() {
    bounded(LIMIT, async {
        let mut redis = redis();
        // No refresh is due within the test: only the recovery writes the key again.
        let options =
            RedisOptions::new().with_liveness(Duration::from_secs(120), Duration::from_secs(60));
        let (_service, _driver, keys, mut told) = lone_node(&redis, 1, options).await;
        eventually(READ_TIMEOUT, "the key is written", || async {
            redis.command(&["EXISTS", &keys[0]]) == "1"
        })
        .await;
        // Redis restarts empty: the key is lost.
        blocking(|| redis.restart());
        let t = Instant::now();
        loop {
            let recovered = tokio::time::timeout(READ_TIMEOUT, told.recv())
                .await
                .expect("Recovered told in time")
                .expect("the driver runs");
            if recovered {
                break;
            }
        }
        eventually(READ_TIMEOUT, "the key is written again", || async {
            redis.command(&["EXISTS", &keys[0]]) == "1"
        })
        .await;
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    })
    .await;
}
