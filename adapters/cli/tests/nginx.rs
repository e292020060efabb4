//! `mcpwire serve` behind a real nginx (Debian's `nginx-light`, installed here when
//! missing), with its buffering left at the default and a `proxy_read_timeout` of a few
//! seconds, as deployments put it: a tool silent for longer than the timeout completes
//! thanks to the stream's head going out at once and heartbeats (RESUME-15, SSE-ENC-7),
//! progress arrives live (`X-Accel-Buffering: no`), and SEP-1699 polling resumes through
//! the proxy (RESUME-9, RESUME-11). Each on both adapters. nginx listens on 127.0.0.1
//! only, on a free port, with a configuration and files of its own in a temporary folder,
//! and is stopped when the test ends.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ADAPTERS, BIN, Server, start_on};

/// nginx's read timeout towards mcpwire: a tool silent for longer is cut without
/// heartbeats.
const PROXY_READ_TIMEOUT_S: u64 = 3;

/// Where Debian puts nginx.
const NGINX: &str = "/usr/sbin/nginx";

/// Installs `nginx-light` with apt-get if nginx is missing; panics saying why if it
/// cannot.
fn nginx_binary() -> &'static Path {
    static INSTALLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        if Path::new(NGINX).exists() {
            return;
        }
        let apt = |args: &[&str]| {
            let out = Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .output()
                .unwrap_or_else(|e| panic!("nginx is missing and apt-get cannot run: {e}"));
            assert!(
                out.status.success(),
                "nginx is missing and `apt-get {}` failed (run as root, or install \
                 nginx-light): {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        apt(&["update"]);
        apt(&["install", "-y", "--no-install-recommends", "nginx-light"]);
        assert!(
            Path::new(NGINX).exists(),
            "nginx-light installed no {NGINX}"
        );
    });
    Path::new(NGINX)
}

/// nginx in front of `upstream`, stopped and its folder removed when dropped.
struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Nginx {
    /// nginx on a free port. The port is let go before nginx binds it, so another
    /// socket can take it in between: nginx then exits (address in use) and is started
    /// again on another port, a few times at most.
    fn start(upstream: &str) -> Self {
        for _ in 0..4 {
            match Self::try_start(upstream) {
                Ok(nginx) => return nginx,
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("nginx exited: {log}"),
            }
        }
        panic!("nginx found no free port in four tries");
    }

    /// nginx on a port free a moment ago; `Err` with its error log if it exited.
    fn try_start(upstream: &str) -> Result<Self, String> {
        let nginx = nginx_binary();
        let dir = std::env::temp_dir().join(format!(
            "mcpwire-nginx-{}-{}",
            std::process::id(),
            upstream.replace([':', '.'], "-")
        ));
        std::fs::create_dir_all(&dir).expect("a folder for nginx");
        // A free port: bound, read, let go (nginx binds it right after).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let d = dir.display();
        let config = format!(
            "daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 128; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_read_timeout {PROXY_READ_TIMEOUT_S}s;
        }}
    }}
}}
"
        );
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, config).expect("nginx.conf written");
        let child = Command::new(nginx)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx runs");
        let mut nginx = Self { child, dir, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !answers_http(port) {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                return Err(format!("({status}) {}", nginx.error_log()));
            }
            assert!(
                Instant::now() < deadline,
                "nginx did not listen: {}",
                nginx.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nginx)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

/// Whether an HTTP server answers on `port`: a request gets a status line back. A bare
/// connect is not enough: while nothing listens, a connect from an ephemeral port that
/// happens to be `port` itself connects to itself (TCP simultaneous open), and would
/// read its own request back.
fn answers_http(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut probe) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = probe.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = [0; 5];
    probe
        .write_all(b"GET /ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .and_then(|()| probe.read_exact(&mut head))
        .is_ok_and(|()| &head == b"HTTP/")
}

/// `mcpwire call` through nginx: its exit status, stdout, and each stderr line with
/// when it arrived.
fn call(nginx: &Nginx, tool: &str, args: &str) -> (bool, String, Vec<(Instant, String)>) {
    let mut child = Command::new(BIN)
        .args(["call", "--timeout-ms", "30000", &nginx.url(), tool, args])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpwire call runs");
    let stderr = BufReader::new(child.stderr.take().expect("piped"));
    let lines = std::thread::spawn(move || {
        stderr
            .lines()
            .map_while(Result::ok)
            .map(|line| (Instant::now(), line))
            .collect::<Vec<_>>()
    });
    let out = child.wait_with_output().expect("mcpwire call ends");
    let lines = lines.join().expect("stderr read");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        lines,
    )
}

fn behind_nginx(adapter: &[&str], args: &[&str]) -> (Server, Nginx) {
    let server = start_on(adapter, args);
    let nginx = Nginx::start(&server.addr);
    (server, nginx)
}

/// RESUME-15, SSE-ENC-7: `slow_count`'s first step comes after 5 s, longer than nginx's
/// 3 s read timeout. With heartbeats every second, the head out after 300 ms and comments
/// after it, the call completes; with the head held until the first message (no
/// `--stream-after-ms`) and heartbeats every 15 s, nginx gives up first.
#[test]
fn resume_15_a_tool_silent_longer_than_the_proxy_timeout_completes_thanks_to_heartbeats() {
    for adapter in ADAPTERS {
        let args = ["--heartbeat-ms", "1000", "--stream-after-ms", "300"];
        let (_server, nginx) = behind_nginx(adapter, &args);
        let (ok, stdout, stderr) = call(&nginx, "slow_count", r#"{"n":1,"delay_ms":5000}"#);
        assert!(ok, "{adapter:?}: {stderr:?}\n{}", nginx.error_log());
        assert!(stdout.contains(r#""text":"1""#), "{adapter:?}: {stdout}");
        // The control: the same call without them fails at the proxy.
        let args = ["--heartbeat-ms", "15000", "--stream-after-ms", "off"];
        let (_server, nginx) = behind_nginx(adapter, &args);
        let (ok, _, stderr) = call(&nginx, "slow_count", r#"{"n":1,"delay_ms":5000}"#);
        assert!(!ok, "{adapter:?}: nginx should have cut it: {stderr:?}");
    }
}

/// SSE-ENC-10: progress goes through nginx as it happens, not when the response ends:
/// its first step arrives a second or more before the call's end (steps are 1 s apart).
#[test]
fn sse_enc_10_progress_arrives_live_through_a_buffering_proxy() {
    for adapter in ADAPTERS {
        let (_server, nginx) = behind_nginx(adapter, &[]);
        let (ok, stdout, stderr) = call(&nginx, "slow_count", r#"{"n":3,"delay_ms":1000}"#);
        let end = Instant::now();
        assert!(ok, "{adapter:?}: {stderr:?}\n{}", nginx.error_log());
        assert!(stdout.contains(r#""text":"3""#), "{adapter:?}: {stdout}");
        let progress: Vec<Instant> = stderr
            .iter()
            .filter(|(_, line)| line.contains(": progress {"))
            .map(|(at, _)| *at)
            .collect();
        assert_eq!(progress.len(), 3, "{adapter:?}: {stderr:?}");
        let ahead = end - progress[0];
        assert!(
            ahead >= Duration::from_millis(1500),
            "{adapter:?}: the first progress came only {ahead:?} before the end: buffered"
        );
    }
}

/// RESUME-9, RESUME-11: with polling, every stream is closed right after its priming
/// event; the client resumes through nginx with `Last-Event-ID` and gets every message
/// once.
#[test]
fn resume_9_resume_11_polling_resumes_through_the_proxy() {
    for adapter in ADAPTERS {
        let args = ["--poll-ms", "0", "--retry-ms", "20"];
        let (_server, nginx) = behind_nginx(adapter, &args);
        let (ok, stdout, stderr) = call(&nginx, "slow_count", r#"{"n":3,"delay_ms":100}"#);
        assert!(ok, "{adapter:?}: {stderr:?}\n{}", nginx.error_log());
        assert!(stdout.contains(r#""text":"3""#), "{adapter:?}: {stdout}");
        let steps = stderr
            .iter()
            .filter(|(_, line)| line.contains(": progress {"))
            .count();
        assert_eq!(steps, 3, "{adapter:?}: each step once: {stderr:?}");
    }
}
