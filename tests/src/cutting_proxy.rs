//! A TCP proxy on tokio that cuts connections: one in `one_in` is closed, both ways,
//! after a pseudo-random number of bytes below a window, upload or download (a quarter
//! of the cuts upload), as a broken network or a proxy's idle timeout does. The dice
//! are [`splitmix64`](crate::splitmix64) of the connection's number, so a run's cuts are
//! the same from one run to the next (the timing around them is not). For the chaos
//! tests of the tokio adapter and of the Redis cluster (feature `tokio`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use crate::splitmix64 as mix;

/// How a [`start`]ed proxy cuts.
#[derive(Clone, Copy, Debug)]
pub struct Cuts {
    /// One connection in this many is cut (at least 1).
    pub one_in: u64,
    /// A cut connection carries fewer bytes than this (at least 1) in the cut direction.
    pub window: u64,
}

/// Starts a proxy to `upstream` on a free port of 127.0.0.1 and returns its address; it
/// runs on the current runtime until that runtime ends. `cut` counts the connections it
/// chose to cut.
///
/// # Panics
///
/// When no port is free, or `cuts` has a zero.
pub async fn start(upstream: SocketAddr, cuts: Cuts, cut: Arc<AtomicU64>) -> SocketAddr {
    assert!(cuts.one_in > 0 && cuts.window > 0, "{cuts:?}");
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port on 127.0.0.1");
    let addr = listener.local_addr().expect("a bound address");
    tokio::spawn(async move {
        let mut n = 0u64;
        loop {
            let Ok((inbound, _)) = listener.accept().await else {
                return;
            };
            n += 1;
            let dice = mix(n);
            let cutting = dice % cuts.one_in == 0;
            let at = usize::try_from(mix(dice) % cuts.window).unwrap_or(usize::MAX);
            let upload = mix(dice ^ 1) % 4 == 0;
            if cutting {
                cut.fetch_add(1, Ordering::Relaxed);
            }
            tokio::spawn(async move {
                let Ok(outbound) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                let (up, down) = match (cutting, upload) {
                    (true, true) => (Some(at), None),
                    (true, false) => (None, Some(at)),
                    _ => (None, None),
                };
                // A cut closes the whole connection, as a broken network does: when one
                // direction ends, both sockets go.
                tokio::select! {
                    () = pipe(ri, wo, up) => {}
                    () = pipe(ro, wi, down) => {}
                }
            });
        }
    });
    addr
}

/// Copies `from` to `to` until EOF, or until `budget` bytes passed (then both close).
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, budget: Option<usize>) {
    let mut buf = [0u8; 4096];
    let mut left = budget.unwrap_or(usize::MAX);
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let take = n.min(left);
        if to.write_all(&buf[..take]).await.is_err() {
            break;
        }
        left -= take;
        if left == 0 {
            break;
        }
    }
    let _ = to.shutdown().await;
}
