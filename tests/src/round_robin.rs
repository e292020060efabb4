//! A round-robin TCP proxy for the tests of several `mcpwire serve` nodes behind one
//! address: [`RoundRobin`] listens on 127.0.0.1 and hands each new client connection to
//! the next of its upstreams in turn, as a plain layer-4 balancer does, so consecutive
//! requests of one client land on different nodes. A test can change the upstreams while
//! it runs ([`RoundRobin::set_upstreams`]: take a killed node out, put a restarted one
//! back) and cut the piped connections ([`RoundRobin::kill_all`],
//! [`RoundRobin::kill_upstream`]: a node's sockets dying).
//!
//! Std only: a thread accepts (nonblocking, polling a stop flag), and each piped
//! connection has a thread per direction; a half-close (EOF one way) is passed on as
//! `shutdown(Write)`, an error either way cuts both ways. At most [`MAX_LIVE`] piped
//! connections at once; past that a new connection is closed at once.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most piped connections open at once; a connection accepted beyond it is closed.
pub const MAX_LIVE: usize = 4096;

/// How long the accepting thread sleeps when no connection is waiting, and so at most
/// how long [`Drop`] waits for it to see the stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(5);

/// How long a connect to an upstream may take (on loopback a dead one refuses at once).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long [`Drop`] waits for the piped connections it cut to finish.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Each direction's copy buffer.
const BUFFER: usize = 16 * 1024;

/// The stack of each piping thread: a loop around a heap buffer needs little.
const STACK: usize = 128 * 1024;

/// A round-robin TCP proxy on 127.0.0.1. Connection `i` (counted from the start, or
/// from the last [`set_upstreams`](Self::set_upstreams)) goes to `upstreams[i % n]`.
/// A connection whose upstream refuses, or that arrives while there is no upstream, is
/// closed at once (the client reads EOF), as behind a balancer that does not retry.
/// Stops when dropped: the listener closes and every piped connection is cut.
#[derive(Debug)]
pub struct RoundRobin {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    stop: AtomicBool,
    route: Mutex<Route>,
    accepted: AtomicU64,
    live: Mutex<HashMap<u64, Piped>>,
}

/// The upstreams and the turn of the next connection among them.
#[derive(Debug)]
struct Route {
    upstreams: Vec<SocketAddr>,
    turn: usize,
}

/// A piped connection's sockets (clones), so that it can be cut from outside.
#[derive(Debug)]
struct Piped {
    upstream: SocketAddr,
    client: TcpStream,
    /// Once connected.
    server: Option<TcpStream>,
    /// Cut before its upstream connected: it must not start piping.
    killed: bool,
}

impl Piped {
    fn cut(&mut self) {
        self.killed = true;
        let _ = self.client.shutdown(Shutdown::Both);
        if let Some(server) = &self.server {
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RoundRobin {
    /// A proxy on a free port of 127.0.0.1 in front of `upstreams` (which may be empty
    /// for now), accepting when this returns.
    pub fn start(upstreams: Vec<SocketAddr>) -> Self {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a listener on a free port");
        listener
            .set_nonblocking(true)
            .expect("a nonblocking listener");
        let addr = listener.local_addr().expect("the listener's address");
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            route: Mutex::new(Route { upstreams, turn: 0 }),
            accepted: AtomicU64::new(0),
            live: Mutex::new(HashMap::new()),
        });
        let acceptor = std::thread::Builder::new()
            .name(format!("round-robin {addr}"))
            .spawn({
                let shared = Arc::clone(&shared);
                move || accept_loop(&listener, &shared)
            })
            .expect("the accepting thread");
        Self {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The address to connect to, `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many client connections it accepted so far, including those it closed at
    /// once (no upstream, upstream refused, too many open).
    pub fn connections(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// How many piped connections are open now (including any still connecting to their
    /// upstream).
    pub fn live(&self) -> usize {
        lock(&self.shared.live).len()
    }

    /// The upstreams now.
    pub fn upstreams(&self) -> Vec<SocketAddr> {
        lock(&self.shared.route).upstreams.clone()
    }

    /// Replaces the upstreams; the next connection goes to the first of them, and on in
    /// turn. Open connections are left as they are (see [`kill_upstream`](Self::kill_upstream)).
    pub fn set_upstreams(&self, upstreams: Vec<SocketAddr>) {
        *lock(&self.shared.route) = Route { upstreams, turn: 0 };
    }

    /// Cuts every open piped connection at once (`shutdown` both ways of both sockets):
    /// the clients and the upstreams read EOF, and their writes fail. New connections
    /// are piped as before. Returns how many it cut.
    pub fn kill_all(&self) -> usize {
        let mut live = lock(&self.shared.live);
        live.values_mut().for_each(Piped::cut);
        live.len()
    }

    /// Cuts the open piped connections to `upstream` only, as [`kill_all`](Self::kill_all)
    /// does. Returns how many it cut.
    pub fn kill_upstream(&self, upstream: SocketAddr) -> usize {
        let mut cut = 0;
        for piped in lock(&self.shared.live).values_mut() {
            if piped.upstream == upstream {
                piped.cut();
                cut += 1;
            }
        }
        cut
    }
}

impl Drop for RoundRobin {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        // No new connection now: cut the open ones and let their threads finish.
        self.kill_all();
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while self.live() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut next_id = 0u64;
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                admit(shared, client, next_id);
                next_id += 1;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Nothing waiting, or an error such as too many open files: do not spin.
            Err(_) => std::thread::sleep(ACCEPT_POLL),
        }
    }
}

/// Registers a new client connection and starts piping it to the next upstream, or
/// closes it (by dropping it) if there is none or too many are open.
fn admit(shared: &Arc<Shared>, client: TcpStream, id: u64) {
    // An accepted socket does not inherit the listener's O_NONBLOCK on Linux; make sure.
    if client.set_nonblocking(false).is_err() {
        return;
    }
    let _ = client.set_nodelay(true);
    let Ok(client_handle) = client.try_clone() else {
        return;
    };
    {
        let mut live = lock(&shared.live);
        if live.len() >= MAX_LIVE {
            return;
        }
        let upstream = {
            let mut route = lock(&shared.route);
            let Route { upstreams, turn } = &mut *route;
            if upstreams.is_empty() {
                return;
            }
            let upstream = upstreams[*turn % upstreams.len()];
            *turn = turn.wrapping_add(1);
            upstream
        };
        live.insert(
            id,
            Piped {
                upstream,
                client: client_handle,
                server: None,
                killed: false,
            },
        );
    }
    let spawned = std::thread::Builder::new()
        .name(format!("round-robin pipe {id}"))
        .stack_size(STACK)
        .spawn({
            let shared = Arc::clone(shared);
            move || {
                serve(&shared, id, client);
                lock(&shared.live).remove(&id);
            }
        });
    if spawned.is_err() {
        lock(&shared.live).remove(&id);
    }
}

/// Connects a registered client connection to its upstream and pipes it both ways until
/// both directions end.
fn serve(shared: &Shared, id: u64, client: TcpStream) {
    let Some(upstream) = lock(&shared.live).get(&id).map(|piped| piped.upstream) else {
        return;
    };
    let Ok(server) = TcpStream::connect_timeout(&upstream, CONNECT_TIMEOUT) else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (Ok(server_handle), Ok(server_back), Ok(client_back)) =
        (server.try_clone(), server.try_clone(), client.try_clone())
    else {
        return;
    };
    {
        let mut live = lock(&shared.live);
        match live.get_mut(&id) {
            Some(piped) if !piped.killed => piped.server = Some(server_handle),
            _ => return,
        }
    }
    let back = std::thread::Builder::new()
        .name(format!("round-robin pipe {id} back"))
        .stack_size(STACK)
        .spawn(move || pipe(&server_back, &client_back));
    pipe(&client, &server);
    match back {
        Ok(back) => {
            let _ = back.join();
        }
        Err(_) => {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}

/// Copies `from` to `to` until EOF, then half-closes `to` (`shutdown(Write)`); on an
/// error either way, cuts both sockets both ways so that the other direction ends too.
fn pipe(mut from: &TcpStream, mut to: &TcpStream) {
    let mut buffer = vec![0; BUFFER];
    loop {
        match from.read(&mut buffer) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use std::io::{ErrorKind, Read, Write};
    use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    use super::RoundRobin;

    const TIMEOUT: Duration = Duration::from_secs(5);

    /// An echo server on 127.0.0.1 that first writes its tag byte on each connection.
    struct Echo {
        addr: SocketAddr,
        stop: Arc<AtomicBool>,
        thread: Option<JoinHandle<()>>,
    }

    impl Echo {
        fn start(tag: u8) -> Self {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let thread = std::thread::spawn({
                let stop = Arc::clone(&stop);
                move || {
                    while !stop.load(Ordering::SeqCst) {
                        let Ok((mut stream, _)) = listener.accept() else {
                            std::thread::sleep(Duration::from_millis(2));
                            continue;
                        };
                        std::thread::spawn(move || {
                            stream.set_nonblocking(false).unwrap();
                            stream.set_read_timeout(Some(TIMEOUT)).unwrap();
                            stream.write_all(&[tag]).unwrap();
                            let mut buffer = [0; 256];
                            while let Ok(n @ 1..) = stream.read(&mut buffer) {
                                if stream.write_all(&buffer[..n]).is_err() {
                                    break;
                                }
                            }
                        });
                    }
                }
            });
            Self {
                addr,
                stop,
                thread: Some(thread),
            }
        }
    }

    impl Drop for Echo {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            if let Some(thread) = self.thread.take() {
                thread.join().unwrap();
            }
        }
    }

    /// A connection through the proxy and the tag of the upstream that took it.
    fn connect(proxy: &RoundRobin) -> (TcpStream, u8) {
        let mut stream = TcpStream::connect(proxy.addr()).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut tag = [0];
        stream.read_exact(&mut tag).unwrap();
        (stream, tag[0])
    }

    /// Whether `stream` reads EOF (or an error other than a timeout), no bytes, in time.
    fn is_closed(stream: &mut TcpStream) -> bool {
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        match stream.read(&mut [0; 16]) {
            Ok(n) => n == 0,
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        }
    }

    fn echoes(stream: &mut TcpStream, message: &[u8]) -> bool {
        let mut back = vec![0; message.len()];
        stream.write_all(message).is_ok() && stream.read_exact(&mut back).is_ok() && back == message
    }

    fn wait_for_live(proxy: &RoundRobin, count: usize) {
        let deadline = Instant::now() + TIMEOUT;
        while proxy.live() != count {
            assert!(
                Instant::now() < deadline,
                "live {} != {count}",
                proxy.live()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A loopback address nothing listens on (a moment ago).
    fn dead_addr() -> SocketAddr {
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
    }

    #[test]
    fn connections_go_to_the_upstreams_in_turn_and_pipe_both_ways() {
        let echoes_ = [Echo::start(b'a'), Echo::start(b'b'), Echo::start(b'c')];
        let proxy = RoundRobin::start(echoes_.iter().map(|e| e.addr).collect());
        let mut streams = Vec::new();
        let mut tags = Vec::new();
        for _ in 0..7 {
            let (stream, tag) = connect(&proxy);
            streams.push(stream);
            tags.push(tag);
        }
        assert_eq!(tags, b"abcabca");
        assert_eq!(proxy.connections(), 7);
        assert_eq!(proxy.live(), 7);

        // Both ways, then a half-close: the echo server reads EOF and closes, which
        // comes back as EOF.
        let stream = &mut streams[1];
        assert!(echoes(stream, b"hello"));
        assert!(echoes(stream, &[7; 40_000]));
        stream.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());

        drop(streams);
        wait_for_live(&proxy, 0);
    }

    #[test]
    fn set_upstreams_changes_where_new_connections_go() {
        let (a, b, c) = (Echo::start(b'a'), Echo::start(b'b'), Echo::start(b'c'));
        let proxy = RoundRobin::start(vec![a.addr, b.addr]);
        let (mut kept, tag) = connect(&proxy);
        assert_eq!(tag, b'a');
        assert_eq!(connect(&proxy).1, b'b');

        proxy.set_upstreams(vec![c.addr]);
        assert_eq!(proxy.upstreams(), [c.addr]);
        assert_eq!(connect(&proxy).1, b'c');
        assert_eq!(connect(&proxy).1, b'c');
        assert!(echoes(&mut kept, b"still piped"), "open connections stay");

        // A dead upstream: the client reads EOF at once; the turn moves on.
        proxy.set_upstreams(vec![b.addr, dead_addr(), a.addr]);
        assert_eq!(connect(&proxy).1, b'b');
        let mut refused = TcpStream::connect(proxy.addr()).unwrap();
        assert!(is_closed(&mut refused));
        assert_eq!(connect(&proxy).1, b'a');

        // No upstream: closed at once too.
        proxy.set_upstreams(Vec::new());
        let mut none = TcpStream::connect(proxy.addr()).unwrap();
        assert!(is_closed(&mut none));
        assert_eq!(proxy.connections(), 8);
    }

    #[test]
    fn kill_all_and_kill_upstream_cut_open_connections() {
        let (a, b) = (Echo::start(b'a'), Echo::start(b'b'));
        let proxy = RoundRobin::start(vec![a.addr, b.addr]);
        let mut streams: Vec<(TcpStream, u8)> = (0..4).map(|_| connect(&proxy)).collect();
        for (stream, _) in &mut streams {
            assert!(echoes(stream, b"ping"));
        }
        assert_eq!(proxy.live(), 4);

        assert_eq!(proxy.kill_upstream(a.addr), 2);
        for (stream, tag) in &mut streams {
            if *tag == b'a' {
                assert!(is_closed(stream), "cut");
            } else {
                assert!(echoes(stream, b"pong"), "not cut");
            }
        }
        wait_for_live(&proxy, 2);

        assert_eq!(proxy.kill_all(), 2);
        for (stream, _) in &mut streams {
            assert!(is_closed(stream));
        }
        wait_for_live(&proxy, 0);

        // New connections are piped as before, in turn.
        let (mut stream, tag) = connect(&proxy);
        assert_eq!(tag, b'a');
        assert!(echoes(&mut stream, b"again"));
        assert_eq!(proxy.connections(), 5);
    }

    #[test]
    fn drop_cuts_open_connections_and_stops_accepting() {
        let a = Echo::start(b'a');
        let proxy = RoundRobin::start(vec![a.addr]);
        let (mut stream, _) = connect(&proxy);
        let addr = proxy.addr();
        drop(proxy);
        assert!(is_closed(&mut stream));
        // The listener is closed (its port free again).
        TcpListener::bind(addr).expect("the proxy's port is free");
    }
}
