//! Shared by the cli crate's tests: `mcpwire serve` on an ephemeral loopback port, killed
//! when dropped, its address read from its first stderr line within a bounded wait.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// The `mcpwire` binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

/// How long a starting server may take to print its address.
const STARTUP: Duration = Duration::from_secs(15);

/// The server process, killed when dropped (`http` or, with `--tls-cert`, `https`).
pub(crate) struct Server {
    pub(crate) child: Child,
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    /// The lines it wrote on stderr after its address.
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Whether a line of its log contains `needle` within `wait`.
    #[allow(dead_code)] // Not every test file that shares this module reads the log.
    pub(crate) fn logs_within(&self, needle: &str, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        loop {
            let seen = self
                .log
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .any(|l| l.contains(needle));
            if seen {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `mcpwire serve` on each adapter: tokio (the default) and `--blocking`; the shared
/// scenarios run on both.
#[allow(dead_code)] // Not every test file that shares this module runs both.
pub(crate) const ADAPTERS: [&[&str]; 2] = [&[], &["--blocking"]];

/// `mcpwire serve` on `adapter` (one of [`ADAPTERS`]), with `args`.
#[allow(dead_code)]
pub(crate) fn start_on(adapter: &[&str], args: &[&str]) -> Server {
    start(&[adapter, args].concat())
}

/// Starts `mcpwire serve --addr 127.0.0.1:0` with `args` after it.
pub(crate) fn start(args: &[&str]) -> Server {
    start_command("serve", args)
}

/// Starts `mcpwire COMMAND --addr 127.0.0.1:0` with `args` after it, and waits for its
/// "listening on" line (the lines before it are kept in its log).
pub(crate) fn start_command(command: &str, args: &[&str]) -> Server {
    let mut child = Command::new(BIN)
        .args([command, "--addr", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpwire runs");
    let stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
    let (tx, rx) = mpsc::channel();
    let log = Arc::new(Mutex::new(Vec::new()));
    // Keep draining stderr so the server never blocks on a full pipe; keep the last
    // lines for `logs_within`.
    std::thread::spawn({
        let log = Arc::clone(&log);
        move || {
            let mut announced = false;
            for line in stderr.lines() {
                if !announced {
                    match line {
                        Ok(line) if !line.contains("listening on ") => {
                            log.lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .push(line);
                            continue;
                        }
                        other => {
                            announced = true;
                            let _ = tx.send(Some(other));
                            continue;
                        }
                    }
                }
                let Ok(line) = line else { break };
                let mut log = log
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if log.len() >= 1_000 {
                    log.remove(0);
                }
                log.push(line);
            }
            if !announced {
                // It ended without saying where it listens.
                let _ = tx.send(None);
            }
        }
    });
    let mut server = Server {
        child,
        addr: String::new(),
        log,
    };
    let line = match rx.recv_timeout(STARTUP) {
        Ok(Some(Ok(line))) => line,
        other => panic!(
            "mcpwire {command} printed no address within {STARTUP:?}: {other:?}; its log: {:?}",
            server.log.lock().map(|l| l.clone()).unwrap_or_default()
        ),
    };
    server.addr = line
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    server
}
