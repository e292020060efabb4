//! A node writes to Redis behind its answers: a session's record and a stream's frames
//! are queued for the store while the client already has the session id, or the event
//! id. Behind a balancer the client's next request may reach another node before Redis
//! has them; that node must not take "not in Redis yet" for "gone". Here node A reaches
//! Redis through a link that delays what it sends by 50 ms (a slow network, a busy
//! driver), node B directly, and the client goes to B as soon as A answered.
//!
//! - SESSION-7: only a session gone from the store is 404; one whose record is on its
//!   way is not.
//! - RESUME-5, RESUME-14: a resume after an id the writer sent on the stream is
//!   followed, every later message delivered once; it is not refused as naming no event.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{
    CALL, INITIALIZED, Node, PING, READ_TIMEOUT, SseEvent, bounded, eventually, redis, sse,
};
use mcpwire_redis::RedisOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const LIMIT: Duration = Duration::from_secs(30);

/// How late what node A sends reaches Redis.
const LAG: Duration = Duration::from_millis(50);

/// A TCP proxy on 127.0.0.1 to `upstream` that passes what its clients send `lag` late,
/// in order, and the answers at once.
async fn slow_link(upstream: SocketAddr, lag: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = TcpStream::connect(upstream).await else {
                continue;
            };
            let (mut ri, mut wi) = inbound.into_split();
            let (mut ro, mut wo) = outbound.into_split();
            let (tx, mut rx) = mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n @ 1..) = ri.read(&mut buf).await {
                    if tx
                        .send((tokio::time::Instant::now() + lag, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                while let Some((at, chunk)) = rx.recv().await {
                    tokio::time::sleep_until(at).await;
                    if wo.write_all(&chunk).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut ro, &mut wi).await;
            });
        }
    });
    addr
}

/// Node A (1), behind the slow link, and node B (2), on `redis`.
async fn nodes(redis: &mcpwire_tests::redis_server::RedisServer) -> (Node, Node) {
    let slow = slow_link(redis.addr(), LAG).await;
    let a = Node::with_url(1, &format!("redis://{slow}"), sse(), RedisOptions::new()).await;
    let b = Node::start(2, redis, sse()).await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_7_a_session_whose_record_is_on_its_way_to_redis_is_not_404_on_another_node() {
    bounded(LIMIT, async {
        let redis = redis();
        let (a, b) = nodes(&redis).await;
        let sid = a.initialize().await;
        // The client completes its handshake on B at once.
        let mut x = b.post(&sid, INITIALIZED).await;
        x.text().await;
        // The session is alive: its record reaches Redis.
        let key = format!("mcpwire:s:{sid}");
        eventually(READ_TIMEOUT, "the record reaches Redis", || async {
            redis.command(&["EXISTS", &key]) == "1"
        })
        .await;
        assert_eq!(x.status, 202, "a live session refused on B");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_5_resume_14_a_resume_after_an_id_on_its_way_to_redis_is_followed_on_another_node() {
    bounded(LIMIT, async {
        let redis = redis();
        let (mut a, b) = nodes(&redis).await;
        let sid = a.initialize().await;
        let x = a.post(&sid, INITIALIZED).await;
        assert_eq!(x.status, 202);
        // B holds the session (its record reached Redis): only the ring is on its way.
        eventually(READ_TIMEOUT, "B serves the session", || async {
            let mut x = b.post(&sid, PING).await;
            x.text().await;
            x.status == 200
        })
        .await;
        // A call on A streams progress 1; the client reads it and its connection breaks.
        let mut call = a.post(&sid, CALL).await;
        assert_eq!(call.status, 200);
        let h = a.call().await;
        a.progress(h, 1);
        let seen = call.events_until(|e| e.progress() == Some(1)).await;
        let last = seen.last().and_then(|e| e.id.clone()).expect("an event id");
        drop(call);
        // It resumes on B at once, before Redis has progress 1.
        let mut resumed = b.get(&sid, Some(&last)).await;
        let status = resumed.status;
        let body = if status == 200 {
            String::new()
        } else {
            resumed.text().await
        };
        assert_eq!(status, 200, "the resume after {last} was refused: {body}");
        // What follows comes once, then the stream ends.
        a.progress(h, 2);
        a.answer(h);
        let rest = resumed.ends_within(READ_TIMEOUT).await;
        let progress: Vec<i64> = rest.iter().filter_map(SseEvent::progress).collect();
        assert_eq!(progress, [2], "{rest:?}");
        let answers = rest
            .iter()
            .filter(|e| e.json().is_some_and(|m| m["id"] == 7))
            .count();
        assert_eq!(answers, 1, "{rest:?}");
    })
    .await;
}
