//! Shared by the tests that run `mcpwire call` against the MCP servers built on the
//! TypeScript SDK in `tests/interop` (`ts-server.mjs` on SDK 1.32, `ts-server-v2.mjs` on
//! SDK v2): the server process and its JSON event log, and `mcpwire call` with what it
//! printed. Needs `mod common;` and `#[path = "common/npm.rs"] mod npm;` beside it.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::BIN;
use crate::npm::{run_bounded, sdk};

/// How long one scenario (a TS client run, an `mcpwire call`) may take: each takes about
/// a second; the bound is there for a loaded machine and for a hang.
pub(crate) const RUN: Duration = Duration::from_secs(30);

/// How long a server may take to say it listens, or to log an expected event.
pub(crate) const WAIT: Duration = Duration::from_secs(15);

/// A server script of `tests/interop` running: killed when dropped.
pub(crate) struct TsServer {
    child: Child,
    /// Held open: the scripts exit when they read the end of their input, so an aborted
    /// test process leaves no server behind.
    _stdin: ChildStdin,
    /// The port, then one JSON event per line.
    lines: Receiver<String>,
    /// The events read so far.
    pub(crate) events: Vec<Value>,
    /// What the script wrote on stderr, for the failure messages.
    stderr: Arc<Mutex<String>>,
    /// The script, for the failure messages.
    script: String,
    port: u16,
}

impl Drop for TsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TsServer {
    /// Starts `node SCRIPT 0 MODE` in `tests/interop` (installed first) and reads the
    /// port it prints on its first line.
    pub(crate) fn start(script: &str, mode: &str) -> Self {
        let dir = sdk();
        let mut child = Command::new("node")
            .args([script, "0", mode])
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("node runs {script}: {e}"));
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = BufReader::new(child.stderr.take().expect("piped stderr"));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in pipe.lines().map_while(Result::ok) {
                let mut text = sink
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                text.push_str(&line);
                text.push('\n');
            }
        });
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut server = Self {
            child,
            _stdin: stdin,
            lines,
            events: Vec::new(),
            stderr,
            script: script.to_owned(),
            port: 0,
        };
        let first = server.lines.recv_timeout(WAIT).unwrap_or_else(|e| {
            panic!(
                "{script} {mode} printed no port within {WAIT:?} ({e}); stderr:\n{}",
                server.stderr_text()
            )
        });
        server.port = first
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{script} printed {first:?}, not a port"));
        server
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Takes the next event line, if one comes within `left`.
    fn next_event(&mut self, left: Duration) -> Result<Value, RecvTimeoutError> {
        let line = self.lines.recv_timeout(left)?;
        let event: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{} printed {line:?}: {e}", self.script));
        self.events.push(event.clone());
        Ok(event)
    }

    /// Reads events until one named `name` satisfies `check`, within [`WAIT`]; returns it.
    pub(crate) fn wait_for(&mut self, name: &str, check: impl Fn(&Value) -> bool) -> Value {
        let matches = |e: &Value| e["event"] == name && check(e);
        if let Some(e) = self.events.iter().find(|e| matches(e)) {
            return e.clone();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left) {
                Ok(event) if matches(&event) => return event,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                    "{} logged no {name:?} event within {WAIT:?}; events: {:?}\nstderr:\n{}",
                    self.script,
                    self.events,
                    self.stderr_text()
                ),
            }
        }
    }

    /// Reads every event the server logs until `until`.
    #[allow(dead_code)] // Not every test file that shares this module waits so.
    pub(crate) fn read_until(&mut self, until: Instant) {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.next_event(left).is_err() {
                return;
            }
        }
    }

    pub(crate) fn stderr_text(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The events named `name` read so far.
    pub(crate) fn seen(&self, name: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == name).collect()
    }
}

/// What `mcpwire call` printed: the result, the `connected (VERSION, TRANSPORT)` line and
/// the progress notifications.
pub(crate) struct Called {
    pub(crate) result: Value,
    pub(crate) connected: String,
    pub(crate) progress: Vec<Value>,
}

/// Runs `mcpwire call URL TOOL ARGS`, which must succeed.
#[allow(dead_code)] // Not every test file that shares this module calls without options.
pub(crate) fn mcpwire_call(url: &str, tool: &str, args: &Value) -> Called {
    mcpwire_call_with(&[], url, tool, args)
}

/// [`mcpwire_call`] with more options (`--blocking`, `--revision R`).
pub(crate) fn mcpwire_call_with(options: &[&str], url: &str, tool: &str, args: &Value) -> Called {
    let timeout_ms = (RUN.as_millis() - 5_000).to_string();
    let out = mcpwire_call_run(
        &[&["--timeout-ms", &timeout_ms], options].concat(),
        url,
        tool,
        args,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mcpwire call {url} {tool} failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    let result = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the result is not JSON ({e}): {stdout}"));
    Called {
        result,
        connected: connected_line(&stderr),
        progress: progress_lines(&stderr),
    }
}

/// Runs `mcpwire call OPTIONS URL TOOL ARGS` to its end within [`RUN`], however it ends.
pub(crate) fn mcpwire_call_run(options: &[&str], url: &str, tool: &str, args: &Value) -> Output {
    run_bounded(
        Command::new(BIN)
            .arg("call")
            .args(options)
            .args([url, tool, &args.to_string()]),
        RUN,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The `(VERSION, TRANSPORT)` of `mcpwire call`'s `connected` line on `stderr`.
pub(crate) fn connected_line(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("mcpwire call: connected "))
        .unwrap_or_else(|| panic!("no connected line: {stderr}"))
        .to_owned()
}

/// The progress notifications `mcpwire call` printed on `stderr`, in order.
pub(crate) fn progress_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("mcpwire call: progress "))
        .map(|p| serde_json::from_str(p).unwrap_or_else(|e| panic!("progress {p:?}: {e}")))
        .collect()
}

/// The progress `mcpwire call` must print for `slow_count {n}`: every step, in order.
pub(crate) fn steps(n: u32) -> Vec<Value> {
    (1..=n)
        .map(|i| json!({"progress": i, "total": n}))
        .collect()
}

/// A tool result of one text content.
#[allow(dead_code)] // Not every test file that shares this module expects it bare.
pub(crate) fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}
