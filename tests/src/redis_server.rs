//! A real Redis server for the tests of several `mcpwire serve` nodes sharing sessions and
//! streams through Redis: [`RedisServer`] runs Debian's `redis-server` (installed here
//! with apt-get when missing) on 127.0.0.1, on a free port of its own, with a data folder
//! of its own and persistence off, and can be stopped and started again on the same port
//! (Redis lost mid-run, then back). [`RedisServer::command`] speaks RESP by hand, so a
//! test can look into Redis (`KEYS`, `XLEN`) or reset it (`FLUSHALL`) with std alone.
//!
//! A `redis-server` that Debian's package starts as a system service (on 6379) is neither
//! used nor disturbed: each fixture has its own port, folder and process.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where Debian puts `redis-server`.
const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// How long a started server has to answer `PING`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a stopped server has to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`RedisServer::command`] waits for a connection and for each read.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// Tries at a free port: the port is let go before Redis binds it, so another socket can
/// take it in between.
const PORT_TRIES: usize = 4;

/// The `redis-server` binary: Debian's, else the first on `PATH`, else Debian's
/// `redis-server` package installed with apt-get (once per process). Panics saying why
/// when it cannot be had.
pub fn redis_server_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        if let Some(found) = find_redis_server() {
            return found;
        }
        let apt = |args: &[&str]| {
            let out = Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("redis-server is missing and apt-get cannot run: {e}"));
            assert!(
                out.status.success(),
                "redis-server is missing and `apt-get {}` failed (run as root, or install \
                 Debian's redis-server package): {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        apt(&["update"]);
        // The package's own service, if its postinst starts one, listens on 6379: the
        // fixtures never use that port, so it is left alone.
        apt(&[
            "install",
            "-y",
            "--no-install-recommends",
            "-o",
            "DPkg::Lock::Timeout=120",
            "redis-server",
        ]);
        find_redis_server().unwrap_or_else(|| {
            panic!("Debian's redis-server package installed, but no {REDIS_SERVER} is there")
        })
    })
}

/// `redis-server` at Debian's place or on `PATH`.
fn find_redis_server() -> Option<PathBuf> {
    let debian = Path::new(REDIS_SERVER);
    if debian.is_file() {
        return Some(debian.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}

/// A `redis-server` of a test's own on 127.0.0.1: a free port, a data folder under
/// [`std::env::temp_dir`], no persistence (`--save ''`, `--appendonly no`). Stopped, and
/// its folder removed, when dropped.
#[derive(Debug)]
pub struct RedisServer {
    /// The running server; `None` while stopped.
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// A server on a free port, answering `PING` when this returns. Panics with the
    /// server's log when it does not start (or apt-get's error when it cannot be
    /// installed).
    pub fn start() -> Self {
        static INSTANCES: AtomicU64 = AtomicU64::new(0);
        let mut last = String::new();
        for _ in 0..PORT_TRIES {
            let instance = INSTANCES.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("mcpwire-redis-{}-{instance}", std::process::id()));
            // A folder left by an earlier process that had the same id.
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)
                .unwrap_or_else(|e| panic!("a folder for redis-server at {}: {e}", dir.display()));
            let mut server = Self {
                child: None,
                port: free_port(),
                dir,
            };
            match server.launch() {
                Ok(()) => return server,
                // Dropping `server` removes its folder.
                Err(log) if log.contains("Address already in use") => last = log,
                Err(log) => panic!("redis-server did not start: {log}"),
            }
        }
        panic!("redis-server found no free port in {PORT_TRIES} tries: {last}");
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port it listens on, the same across [`stop`](Self::stop) and
    /// [`restart`](Self::restart).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its address, `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Its data folder (which also holds its log, `redis.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether it runs (started and not stopped since).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Everything it logged so far, over all its starts.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// Stops it: SIGTERM, then SIGKILL if it has not exited within 10 s, and waits until
    /// its port is free. Its data is lost (persistence is off). Nothing if stopped.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let terminated = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        let deadline = Instant::now() + STOP_TIMEOUT;
        while terminated && Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if !matches!(child.try_wait(), Ok(Some(_))) {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Reaped, so its listening socket is closed; check that the port can be bound
        // (std sets SO_REUSEADDR, so connections left in TIME_WAIT do not count).
        let deadline = Instant::now() + STOP_TIMEOUT;
        while TcpListener::bind(self.addr()).is_err() {
            assert!(
                Instant::now() < deadline,
                "port {} still taken after redis-server exited",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts it again on the same port and data folder (stopping it first if it runs),
    /// answering `PING` when this returns. It starts empty. Panics with its log if it
    /// does not start, for instance when another socket took the port meanwhile.
    pub fn restart(&mut self) {
        self.stop();
        let mut last = String::new();
        for _ in 0..PORT_TRIES {
            match self.launch() {
                Ok(()) => return,
                // Something bound the port for a moment (a free-port probe): wait a bit.
                Err(log) if log.contains("Address already in use") => {
                    last = log;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(log) => panic!("redis-server did not restart: {log}"),
            }
        }
        panic!(
            "redis-server could not take port {} again: {last}",
            self.port
        );
    }

    /// Runs `redis-server` on `self.port` and waits until it answers `PING`; `Err` with
    /// what it logged in this start if it exited first. Panics if it neither answers
    /// nor exits in time.
    fn launch(&mut self) -> Result<(), String> {
        debug_assert!(self.child.is_none());
        let log_path = self.dir.join("redis.log");
        let log_start = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|e| panic!("{}: {e}", log_path.display()));
        let log_err = log.try_clone().expect("the log file, for stderr");
        // Logging to stdout (no `--logfile`), so that a configuration error, printed
        // before the log would be opened, lands in the same file.
        let mut child = Command::new(redis_server_binary())
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--protected-mode", "yes"])
            .args(["--daemonize", "no"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|e| panic!("redis-server cannot run: {e}"));
        let this_start = |log: String| log.get(log_start as usize..).unwrap_or(&log).to_owned();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("({status}) {}", this_start(self.log())));
            }
            if answers_ping(self.addr()) {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "redis-server did not answer PING within {READY_TIMEOUT:?}: {}",
                    this_start(self.log())
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends one command and reads its reply, rendered as [`try_command`](Self::try_command)
    /// does. Panics if Redis cannot be reached or the reply cannot be read; a Redis error
    /// reply is not a panic (it reads `(error) ...`).
    pub fn command(&self, args: &[&str]) -> String {
        self.try_command(args)
            .unwrap_or_else(|e| panic!("redis {args:?} on port {}: {e}", self.port))
    }

    /// Sends one command on a new connection and reads its reply, rendered as text:
    /// a simple string as itself (`OK`, `PONG`), an error as `(error) MESSAGE`, an integer
    /// in decimal, a bulk string as its bytes (lossy UTF-8), a null as `(nil)`, and an
    /// array as its elements so rendered, nested arrays flattened, one per line (an empty
    /// array is the empty string). `Err` if Redis cannot be reached (connection refused
    /// while it is stopped) or does not answer within 5 s.
    pub fn try_command(&self, args: &[&str]) -> std::io::Result<String> {
        let mut stream = TcpStream::connect_timeout(&self.addr(), COMMAND_TIMEOUT)?;
        stream.set_read_timeout(Some(COMMAND_TIMEOUT))?;
        stream.set_write_timeout(Some(COMMAND_TIMEOUT))?;
        stream.write_all(&encode(args))?;
        let mut reader = BufReader::new(stream);
        let mut lines = Vec::new();
        read_reply(&mut reader, &mut lines)?;
        Ok(lines.join("\n"))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // No need for a graceful stop or to wait for the port: it is going away.
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port free a moment ago: bound, read, let go.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Whether a Redis server answers `PING` at `addr` with `+PONG`. A bare connect is not
/// enough: while nothing listens, a connect from an ephemeral port that happens to be the
/// port itself connects to itself (TCP simultaneous open) and reads its own bytes back.
fn answers_ping(addr: SocketAddr) -> bool {
    let Ok(mut probe) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = probe.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = [0; 7];
    probe
        .write_all(b"*1\r\n$4\r\nPING\r\n")
        .and_then(|()| probe.read_exact(&mut reply))
        .is_ok_and(|()| &reply == b"+PONG\r\n")
}

/// A command as a RESP array of bulk strings.
fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The deepest array nesting [`read_reply`] follows (Redis's replies nest a few levels).
const MAX_DEPTH: usize = 8;

/// Reads one RESP2 reply, pushing its rendered lines onto `out` (see
/// [`RedisServer::try_command`]).
fn read_reply(reader: &mut impl BufRead, out: &mut Vec<String>) -> std::io::Result<()> {
    read_value(reader, out, 0)
}

fn read_value(
    reader: &mut impl BufRead,
    out: &mut Vec<String>,
    depth: usize,
) -> std::io::Result<()> {
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let Some(line) = line.strip_suffix("\r\n") else {
        return Err(invalid(format!("a reply line without CRLF: {line:?}")));
    };
    let (kind, rest) = line.split_at_checked(1).unwrap_or(("", ""));
    let length = || -> std::io::Result<i64> {
        rest.parse()
            .map_err(|_| invalid(format!("a bad length: {line:?}")))
    };
    match kind {
        "+" | ":" => out.push(rest.to_owned()),
        "-" => out.push(format!("(error) {rest}")),
        "$" => match usize::try_from(length()?) {
            Err(_) => out.push("(nil)".to_owned()),
            Ok(len) => {
                let mut bulk = vec![0; len + 2];
                reader.read_exact(&mut bulk)?;
                if !bulk.ends_with(b"\r\n") {
                    return Err(invalid("a bulk string without CRLF".to_owned()));
                }
                bulk.truncate(len);
                out.push(String::from_utf8_lossy(&bulk).into_owned());
            }
        },
        "*" => match usize::try_from(length()?) {
            Err(_) => out.push("(nil)".to_owned()),
            Ok(_) if depth >= MAX_DEPTH => {
                return Err(invalid(format!("arrays nested deeper than {MAX_DEPTH}")));
            }
            Ok(count) => {
                for _ in 0..count {
                    read_value(reader, out, depth + 1)?;
                }
            }
        },
        _ => return Err(invalid(format!("an unknown reply: {line:?}"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{RedisServer, read_reply};

    fn render(reply: &[u8]) -> String {
        let mut lines = Vec::new();
        read_reply(&mut &reply[..], &mut lines).expect("a reply");
        lines.join("\n")
    }

    #[test]
    fn replies_render_as_text() {
        assert_eq!(render(b"+OK\r\n"), "OK");
        assert_eq!(render(b"-ERR nope\r\n"), "(error) ERR nope");
        assert_eq!(render(b":42\r\n"), "42");
        assert_eq!(render(b"$5\r\na\r\nbc\r\n"), "a\r\nbc");
        assert_eq!(render(b"$0\r\n\r\n"), "");
        assert_eq!(render(b"$-1\r\n"), "(nil)");
        assert_eq!(render(b"*0\r\n"), "");
        assert_eq!(render(b"*-1\r\n"), "(nil)");
        assert_eq!(
            render(b"*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n:7\r\n"),
            "1-0\nf\nv\n7"
        );
        let mut lines = Vec::new();
        assert!(read_reply(&mut &b"$5\r\nab"[..], &mut lines).is_err());
        assert!(read_reply(&mut &b"?x\r\n"[..], &mut lines).is_err());
    }

    #[test]
    fn starts_answers_stops_and_restarts_on_the_same_port() {
        let mut redis = RedisServer::start();
        let port = redis.port();
        assert_eq!(redis.url(), format!("redis://127.0.0.1:{port}"));
        assert_ne!(port, 6379, "not the system service's port");
        assert_eq!(redis.command(&["PING"]), "PONG");
        assert_eq!(redis.command(&["SET", "greeting", "hello world"]), "OK");
        assert_eq!(redis.command(&["GET", "greeting"]), "hello world");
        assert_eq!(redis.command(&["GET", "missing"]), "(nil)");
        assert_eq!(redis.command(&["DEL", "greeting", "missing"]), "1");
        assert!(redis.command(&["NOSUCHCOMMAND"]).starts_with("(error) ERR"));
        assert_eq!(redis.command(&["XADD", "s", "7-0", "d", "x"]), "7-0");
        assert_eq!(redis.command(&["XRANGE", "s", "-", "+"]), "7-0\nd\nx");
        assert_eq!(redis.command(&["CONFIG", "GET", "save"]), "save\n");

        redis.stop();
        assert!(!redis.is_running());
        let refused = redis.try_command(&["PING"]).expect_err("stopped");
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

        redis.restart();
        assert!(redis.is_running());
        assert_eq!(redis.port(), port);
        assert_eq!(redis.command(&["PING"]), "PONG");
        assert_eq!(redis.command(&["EXISTS", "s"]), "0", "no persistence");

        let dir = redis.dir().to_path_buf();
        assert!(dir.is_dir());
        drop(redis);
        assert!(!dir.exists(), "its folder is removed on drop");
    }

    #[test]
    fn two_servers_have_their_own_ports_and_data() {
        let a = RedisServer::start();
        let b = RedisServer::start();
        assert_ne!(a.port(), b.port());
        assert_ne!(a.dir(), b.dir());
        a.command(&["SET", "k", "a"]);
        assert_eq!(b.command(&["GET", "k"]), "(nil)");
        assert_eq!(a.command(&["FLUSHALL"]), "OK");
        assert_eq!(a.command(&["KEYS", "*"]), "");
    }
}
