//! A deterministic simulation of many [`Client`]s and one [`Server`] joined by a simulated
//! network, on a virtual clock, driven by one seeded [`Rng`].
//!
//! Everything a run does is drawn from its seed: the server's configuration (the eras it
//! serves, response mode, polling, `retry`, heartbeats, session idle time, ring and
//! unsent limits), each client's (revision, standalone stream, re-initialization,
//! backoff), what the applications do, and every fault. The same seed replays the same
//! run exactly: nothing reads the clock or iterates a hashed map.
//!
//! # The eras
//!
//! The server serves the session era only (2 seeds in 5), both eras (2 in 5), or
//! 2026-07-28 only (1 in 5); its application answers `server/discover` with the revisions
//! served (the core leaves the probe to it). Each client speaks what the server can serve:
//!
//! | server        | session era (`Exactly(2025-…)`) | `Revision::Auto` | `Exactly(2026-07-28)` |
//! |---------------|------------|------|------|
//! | session era   | 60 %       | 40 % | —    |
//! | both          | 40 %       | 30 % | 30 % |
//! | 2026-07-28    | —          | 50 % | 50 % |
//!
//! so that over all seeds somewhat more than half the clients connect in the session
//! era (an `Auto` client to a session-era server falls back to `initialize`).
//!
//! # The fault model
//!
//! - **Delays and chunks**: every piece of an exchange (request head, body chunks, body
//!   end; response head, body chunks, end) travels with its own delay, in order within
//!   its exchange; bodies are split at random byte offsets (mid-line, mid-UTF-8).
//! - **Cuts**: an exchange may break at any point, during the upload or the download,
//!   after a random number of pieces or at a random time: the client sees
//!   `handle_failure`, the server `handle_disconnect`; pieces in flight are lost. Half of
//!   the cuts are half-open for up to 2 s: the server learns late (what it writes
//!   meanwhile is taken and lost, and a resume takes the stream over from the
//!   connection the server still holds, RESUME-14) or the client does.
//! - **Slow readers**: the driver may stop pulling an exchange's transmits for a while, so
//!   the server's `max_unsent` bound ends the connection (the client resumes) and small
//!   rings evict what the reader had not taken (the client is refused with a gap).
//! - **Polling** (SEP-1699), **heartbeats**, **session idle expiry**, and **restarts**: the
//!   server is replaced by a new one with other entropy, its memory store and sessions
//!   gone, every connection to it cut.
//! - **The applications**: each client issues its requests (each with a deadline, some
//!   cancelled, some clients closed mid-flight) and answers the server's `roots/list`;
//!   the server answers each `tools/call` after a delay, after up to four progress
//!   notifications (`Target::Request`) and sometimes a `roots/list` (`Target::Session`).
//!   A client whose handshake failed or whose session ended without re-initialization
//!   is replaced by a new one (up to four per simulated client).
//!
//! # The properties, checked on every seed
//!
//! Every rule below is a [`Report::violations`] entry when broken, naming the seed.
//!
//! 1. **Exactly once**: each request a client issued ends exactly once: one
//!    `Event::Response`, one `Event::Failed`, or `Client::cancel` returning `true`; by the
//!    end of the run every one has ended. A response carries the token of the request it
//!    answers (no cross-wiring), and is a result, or an error exactly when the server
//!    application chose to answer that call with one (rule 5).
//! 2. **No duplicates, order kept**: progress notifications of one request (per client,
//!    token) arrive with strictly increasing `progress`; messages on a session's
//!    standalone stream carry a per-session `seq` that arrives as 1, 2, 3, … with none
//!    repeated or skipped; no server→client request is delivered twice; when a request's
//!    progress shares its response's stream (`Auto`, `Sse`), none arrives after the
//!    response, and every one the server accepted (`Sent` or `Retained`) arrived before
//!    it. On the server, no client request arrives twice, each server→client request
//!    ends once (its response, its timeout, or its session's end), and `Cancelled` comes
//!    only for a request its client cancelled or timed out.
//!
//!    *The one exception*: a message the server handed to a standalone-stream GET that
//!    then broke before the client saw any event id on it, the message lost in the
//!    network, is lost unreported. The client has no id to resume from, and a GET
//!    without `Last-Event-ID` gets only what no connection took (the server's documented
//!    rule; frames the driver never took count as not taken): the wire cannot say "I saw
//!    none of it" apart from "start afresh". A `seq` skip is allowed exactly when such a
//!    GET of that session was cut after the last `seq` arrived; [`Stats::idless_losses`]
//!    counts them. (On a POST stream the same break is reported: `StreamLost`.) A skip
//!    is also allowed after the client reported `Event::StreamReset` for that session
//!    (its resume of the standalone stream failed, allowed on the `ResumeFailed` rules
//!    below); [`Stats::reset_losses`] counts those.
//! 3. **Losses only with a cause**: a failure is allowed only as follows, where a *fault
//!    touching* a client incarnation means a cut of one of its exchanges, a slow-reader
//!    hold on one, a restart, or the server expiring its session, during the interval
//!    named.
//!    - `Timeout`: at or after its deadline; and not if the server accepted its answer
//!      (`Sent`/`Retained`) at least [`QUIET`] before the deadline with no fault touching
//!      the client from then to the deadline (that would be a silent loss).
//!    - `StreamLost` (a stream with no event id broke): the POST that carried the request
//!      was cut or held, or the server expired the session or restarted during the
//!      request's life.
//!    - `ResumeFailed { status: 400, message ~ "no longer retained" }` (the server reported
//!      a gap): the seed has small rings, and the net saw that refusal sent to this client.
//!    - `ResumeFailed { status: 0, .. }` (attempts ran out): the client's GETs failed to
//!      connect (cut before their head or while reading an error answer, or 409 because
//!      the server had not yet noticed a half-open connection) at least `max_attempts` times during the request's life.
//!    - `SessionExpired`: the server ended the session the client held (idle expiry or a
//!      restart) before. `Event::SessionExpired` likewise.
//!    - `Closed`: the client's handshake failed (`ConnectFailed`, itself allowed only
//!      after a fault touched the client) or the application closed it.
//!    - anything else (`Http`, `BadResponse`, other `ResumeFailed`): never.
//!
//!    At 2026-07-28 (the client connected sessionless) nothing resumes (MODERN-11,
//!    MODERN-12) and there is no session: `StreamLost`, `ResumeFailed` and
//!    `SessionExpired` are never allowed, and in their place
//!    - `Broken { reached }`: only when the POST that carried the request was cut or held,
//!      or the server restarted, during its life; and `reached` is `Server` exactly when
//!      a response head of that POST reached the client (`Unknown` when none did). In
//!      the session era `Broken` is never allowed.
//! 4. **The era settled**: `Event::Connected { version, era }` is a revision the server
//!    serves, in the era the client's revision allows: the session era for a session-era
//!    revision; 2026-07-28 for `Exactly(2026-07-28)`; for `Auto`, 2026-07-28 when the
//!    server serves it (the session era only if a fault touched the handshake: a probe
//!    cut after its head is no modern evidence), else the session era. A
//!    re-initialization (`Event::Reconnected`) is always of a session-era client.
//! 5. **Answers and cancellations at 2026-07-28**: the server application answers some
//!    calls with a JSON-RPC error (under 404 or 200 at 2026-07-28, MODERN-9); the client
//!    hands exactly those over, as the call's response, carrying its token. The server
//!    learns of a call its client gave up on (cancel, deadline, close) because the client
//!    closes its response (MODERN-11): the server application must never be able to
//!    answer such a call (unless a fault took its connection first), and it is told
//!    `Cancelled` for a sessionless call only when its client gave up on it or a fault
//!    took its connection. No sessionless call reaches the server application twice.
//! 6. **Memory returns to baseline**: at the end every client is closed, time passes every
//!    timeout, and then `Server::is_idle` and every `Client::is_idle` hold, and no
//!    exchange is left in the net.
//!
//! A failing run's [`Report::check`] message names the seed and the command that replays
//! it (`MCPWIRE_SIM_SEED=<n>`; `MCPWIRE_SIM_TRACE=1` adds a trace of every step).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcpwire::client::{self, Client, Reached, RequestError, Revision};
use mcpwire::jsonrpc::{ErrorCode, Kind, RawJson, RequestId};
use mcpwire::resume::{RingLimits, StoreLimits};
use mcpwire::server::{
    self, CloseReason, Delivery, Eras, RequestHandle, ResponseMode, Server, SessionId, Target,
};
use mcpwire::{Era, ProtocolVersion};

use crate::server::counter_entropy;

/// How long before its deadline an answer the server accepted must reach the client when
/// no fault touches it (network delays, polling and `retry` included).
pub const QUIET: Duration = Duration::from_secs(10);

/// The endpoint the clients use (the server's defaults accept it).
const ENDPOINT: &str = "http://127.0.0.1:8080/mcp";

/// The most client incarnations one simulated client may go through (a new one after a
/// failed handshake or an expired session without re-initialization).
const MAX_INCARNATIONS: u32 = 4;

/// The most steps (actions or timer rounds) of one run before it counts as a livelock.
const MAX_STEPS: u64 = 400_000;

/// SplitMix64 ([`splitmix64`](crate::splitmix64)): a small, seeded generator (not
/// secure; simulations only).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let z = crate::splitmix64(self.0);
        self.0 = self.0.wrapping_add(crate::SPLITMIX64_GAMMA);
        z
    }

    /// Uniform in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `per_mille`/1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// A duration uniform in `lo..=hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }
}

/// Which faults a run may inject; each seed draws how often from those allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Faults {
    /// Per-piece network delays.
    pub delays: bool,
    /// Bodies split into random chunks.
    pub chunks: bool,
    /// Exchanges cut at random points.
    pub cuts: bool,
    /// Readers that stop pulling for a while (with small `max_unsent` sometimes).
    pub slow_readers: bool,
    /// SEP-1699 polling closes.
    pub polling: bool,
    /// Small replay rings (gaps).
    pub small_rings: bool,
    /// Heartbeats.
    pub heartbeats: bool,
    /// Short session idle times.
    pub expiry: bool,
    /// Server restarts that lose every session and ring.
    pub restarts: bool,
    /// Requests the application cancels.
    pub cancels: bool,
}

impl Faults {
    /// Every fault on.
    pub const ALL: Self = Self {
        delays: true,
        chunks: true,
        cuts: true,
        slow_readers: true,
        polling: true,
        small_rings: true,
        heartbeats: true,
        expiry: true,
        restarts: true,
        cancels: true,
    };

    /// No fault: a perfect network and a server that never forgets.
    pub const NONE: Self = Self {
        delays: false,
        chunks: false,
        cuts: false,
        slow_readers: false,
        polling: false,
        small_rings: false,
        heartbeats: false,
        expiry: false,
        restarts: false,
        cancels: false,
    };
}

/// Counts over one run (or, added up, many).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Runs added up.
    pub runs: u64,
    /// Requests issued.
    pub requests: u64,
    /// Requests answered.
    pub responses: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// Requests cancelled by the application.
    pub cancelled: u64,
    /// Requests failed with `StreamLost`.
    pub stream_lost: u64,
    /// Requests failed with `ResumeFailed`.
    pub resume_failed: u64,
    /// Requests failed with `SessionExpired`.
    pub session_expired: u64,
    /// Requests failed with `Closed` after a failed handshake.
    pub closed: u64,
    /// Requests failed with `Closed` because the application closed the client.
    pub closed_by_app: u64,
    /// Progress notifications delivered.
    pub progress: u64,
    /// Server→client requests delivered to a client.
    pub server_requests: u64,
    /// HTTP exchanges.
    pub exchanges: u64,
    /// Exchanges cut.
    pub cuts: u64,
    /// Slow-reader holds.
    pub holds: u64,
    /// Server restarts.
    pub restarts: u64,
    /// Sessions the server expired.
    pub expiries: u64,
    /// Gap refusals the server sent.
    pub gaps: u64,
    /// Client incarnations.
    pub incarnations: u64,
    /// Standalone-stream messages lost to a GET the client saw no id on (the exception).
    pub idless_losses: u64,
    /// Standalone-stream messages lost, and reported, by a failed resume of that stream.
    pub reset_losses: u64,
    /// Connections the server cut because a resume took their stream over (RESUME-14).
    pub superseded: u64,
    /// Client incarnations that connected in the session era.
    pub session_clients: u64,
    /// Client incarnations that connected at 2026-07-28 (sessionless).
    pub modern_clients: u64,
    /// `Revision::Auto` clients that connected in the session era to a server that serves
    /// 2026-07-28 (their probe was cut after its head: no modern evidence).
    pub auto_fallbacks: u64,
    /// `server/discover` probes the server application answered.
    pub probes: u64,
    /// Requests of sessionless clients (counted when they end).
    pub modern_requests: u64,
    /// Requests of sessionless clients answered.
    pub modern_responses: u64,
    /// Requests of sessionless clients that timed out.
    pub modern_timeouts: u64,
    /// Requests of sessionless clients the application cancelled.
    pub modern_cancelled: u64,
    /// Requests failed with `Broken { reached: Server }`.
    pub broken_server: u64,
    /// Requests failed with `Broken { reached: Unknown }`.
    pub broken_unknown: u64,
    /// Requests answered with a JSON-RPC error (the server application's choice).
    pub error_responses: u64,
    /// Sessionless requests the server application learnt were cancelled (their response
    /// closed: MODERN-11).
    pub modern_server_cancels: u64,
}

impl Stats {
    /// Adds `other` in.
    pub fn add(&mut self, other: &Self) {
        self.runs += other.runs;
        self.requests += other.requests;
        self.responses += other.responses;
        self.timeouts += other.timeouts;
        self.cancelled += other.cancelled;
        self.stream_lost += other.stream_lost;
        self.resume_failed += other.resume_failed;
        self.session_expired += other.session_expired;
        self.closed += other.closed;
        self.closed_by_app += other.closed_by_app;
        self.progress += other.progress;
        self.server_requests += other.server_requests;
        self.exchanges += other.exchanges;
        self.cuts += other.cuts;
        self.holds += other.holds;
        self.restarts += other.restarts;
        self.expiries += other.expiries;
        self.gaps += other.gaps;
        self.incarnations += other.incarnations;
        self.idless_losses += other.idless_losses;
        self.reset_losses += other.reset_losses;
        self.superseded += other.superseded;
        self.session_clients += other.session_clients;
        self.modern_clients += other.modern_clients;
        self.auto_fallbacks += other.auto_fallbacks;
        self.probes += other.probes;
        self.modern_requests += other.modern_requests;
        self.modern_responses += other.modern_responses;
        self.modern_timeouts += other.modern_timeouts;
        self.modern_cancelled += other.modern_cancelled;
        self.broken_server += other.broken_server;
        self.broken_unknown += other.broken_unknown;
        self.error_responses += other.error_responses;
        self.modern_server_cancels += other.modern_server_cancels;
    }
}

/// What one run found.
#[derive(Debug)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// The configuration drawn from it, in one line.
    pub plan: String,
    /// Every broken property, in the order found.
    pub violations: Vec<String>,
    /// The counts.
    pub stats: Stats,
    /// Every step, when tracing was on.
    pub trace: Vec<String>,
}

impl Report {
    /// `Err` with the seed, the plan, the violations and the replay command if any
    /// property broke.
    ///
    /// # Errors
    /// The failure text.
    pub fn check(&self) -> Result<(), String> {
        if self.violations.is_empty() {
            return Ok(());
        }
        let mut text = format!(
            "simulation seed {} failed ({} violations)\n  plan: {}\n",
            self.seed,
            self.violations.len(),
            self.plan
        );
        for v in self.violations.iter().take(20) {
            text.push_str("  - ");
            text.push_str(v);
            text.push('\n');
        }
        text.push_str(&format!(
            "  replay: MCPWIRE_SIM_SEED={} cargo test -p mcpwire-tests --test simulation -- --nocapture\n  (MCPWIRE_SIM_TRACE=1 prints every step)",
            self.seed
        ));
        Err(text)
    }
}

/// Runs seed `seed` with `faults` allowed; `trace` records every step.
pub fn run(seed: u64, faults: Faults, trace: bool) -> Report {
    let mut sim = Sim::new(seed, faults, trace);
    sim.run();
    sim.finish()
}

// ---------------------------------------------------------------------------------------
// The plan: everything a seed decides up front.

#[derive(Debug)]
struct Plan {
    server: server::Config,
    /// The eras the server serves.
    eras: Eras,
    mode: ResponseMode,
    small_rings: bool,
    /// Per mille of exchanges cut.
    cut: u64,
    max_delay: u64,
    chunks: bool,
    /// Per mille of exchanges held (slow readers), and the longest hold.
    hold: u64,
    max_hold: u64,
    restarts: Vec<Duration>,
    /// The most progress notifications per request.
    max_progress: u64,
    /// Per mille of requests that make the server ask the client (`roots/list`).
    ask: u64,
    /// Per mille of `tools/call`s the server answers with a JSON-RPC error.
    err: u64,
    clients: Vec<ClientPlan>,
    summary: String,
}

#[derive(Debug)]
struct ClientPlan {
    config: client::Config,
    revision: Revision,
    abandon: Option<Duration>,
    max_attempts: u32,
    start: Duration,
    requests: Vec<RequestPlan>,
}

#[derive(Debug, Clone, Copy)]
struct RequestPlan {
    at: Duration,
    timeout: Duration,
    cancel_after: Option<Duration>,
}

impl Plan {
    fn draw(rng: &mut Rng, faults: Faults) -> Self {
        // Session era only, both eras, or 2026-07-28 only: 2 : 2 : 1.
        let eras = match rng.below(5) {
            0 | 1 => Eras::SESSIONS,
            2 | 3 => Eras::ALL,
            _ => Eras::MODERN,
        };
        let mode = match rng.below(3) {
            0 => ResponseMode::Auto,
            1 => ResponseMode::Json,
            _ => ResponseMode::Sse,
        };
        let retry = (!rng.chance(150)).then(|| rng.millis(100, 1500));
        let polling = (faults.polling && rng.chance(400)).then(|| {
            if rng.chance(300) {
                Duration::ZERO
            } else {
                rng.millis(100, 3000)
            }
        });
        let heartbeat = (faults.heartbeats && rng.chance(500)).then(|| rng.millis(300, 4000));
        let idle = if faults.expiry && rng.chance(300) {
            rng.millis(1000, 8000)
        } else {
            Duration::from_secs(30 * 60)
        };
        let small_rings = faults.small_rings && rng.chance(400);
        let ring = if small_rings {
            RingLimits::new()
                .with_max_events(rng.range(1, 4) as usize)
                .with_max_bytes(rng.range(150, 1500) as usize)
        } else {
            RingLimits::new()
        };
        let slow = faults.slow_readers && rng.chance(if small_rings { 800 } else { 400 });
        let max_unsent = if slow && rng.chance(600) {
            rng.range(100, 1500) as usize
        } else {
            4 << 20
        };
        let backlog = if rng.chance(200) {
            rng.range(1, 6) as usize
        } else {
            256
        };
        let server = server::Config::new()
            .with_eras(eras)
            .with_response_mode(mode)
            .with_retry(retry)
            .with_polling(polling)
            .with_heartbeat(heartbeat)
            .with_session_idle(idle)
            .with_max_unsent(max_unsent)
            .with_max_backlog(backlog)
            .with_store_limits(StoreLimits::new().with_ring(ring));
        let cut = if faults.cuts { rng.range(0, 150) } else { 0 };
        let max_delay = if faults.delays { rng.range(0, 80) } else { 0 };
        let (hold, max_hold) = if slow {
            (rng.range(20, 150), rng.range(200, 6000))
        } else {
            (0, 0)
        };
        let mut restarts = Vec::new();
        if faults.restarts && rng.chance(250) {
            for _ in 0..rng.range(1, 2) {
                restarts.push(rng.millis(500, 25_000));
            }
        }
        let cancel = if faults.cancels { rng.range(0, 100) } else { 0 };
        let max_progress = rng.range(0, 4);
        let ask = rng.range(0, 400);
        let err = rng.range(0, 100);
        let n = rng.range(1, 6);
        let mut clients = Vec::new();
        for _ in 0..n {
            let version = match rng.below(5) {
                0 => ProtocolVersion::V2025_03_26,
                1 => ProtocolVersion::V2025_06_18,
                _ => ProtocolVersion::V2025_11_25,
            };
            let max_attempts = rng.range(3, 6) as u32;
            let revision = Self::revision(rng, eras, version);
            // `with_version` is `Exactly(version)`; `Auto` keeps `version` for the
            // `initialize` it falls back to without modern evidence.
            let config = client::Config::new(http::Uri::from_static(ENDPOINT))
                .with_version(version)
                .with_revision(revision)
                .with_get_stream(rng.chance(600))
                .with_reinitialize(rng.chance(500))
                .with_backoff(rng.millis(50, 500), rng.millis(1000, 3000), max_attempts);
            let start = rng.millis(0, 2000);
            let mut requests = Vec::new();
            let mut at = start;
            for _ in 0..rng.range(1, 10) {
                at += rng.millis(0, 4000);
                let timeout = if rng.chance(200) {
                    rng.millis(500, 8000)
                } else {
                    rng.millis(20_000, 60_000)
                };
                let cancel_after = rng.chance(cancel).then(|| rng.millis(0, 5000));
                requests.push(RequestPlan {
                    at,
                    timeout,
                    cancel_after,
                });
            }
            let abandon = rng.chance(100).then(|| start + rng.millis(0, 20_000));
            clients.push(ClientPlan {
                config,
                revision,
                abandon,
                max_attempts,
                start,
                requests,
            });
        }
        let summary = format!(
            "eras {eras:?}, mode {mode:?}, retry {retry:?}, polling {polling:?}, heartbeat {heartbeat:?}, idle {idle:?}, ring {ring:?}, max_unsent {max_unsent}, backlog {backlog}, cut {cut}‰, delay ≤{max_delay}ms, chunks {}, hold {hold}‰ ≤{max_hold}ms, restarts {restarts:?}, cancel {cancel}‰, progress ≤{max_progress}, ask {ask}‰, errors {err}‰, clients {:?}",
            faults.chunks,
            clients
                .iter()
                .map(|c| format!("{:?} {} requests", c.config, c.requests.len()))
                .collect::<Vec<_>>()
        );
        Self {
            server,
            eras,
            mode,
            small_rings,
            cut,
            max_delay,
            chunks: faults.chunks,
            hold,
            max_hold,
            restarts,
            max_progress,
            ask,
            err,
            clients,
            summary,
        }
    }

    /// A client's revision, for a server serving `eras`: the session era (offering
    /// `version` in `initialize`), `Auto` (which probes `server/discover` and settles
    /// what the server offers), or 2026-07-28 exactly (no probe), each only where the
    /// server serves something it can speak. Over all seeds about half the clients end
    /// up in the session era.
    fn revision(rng: &mut Rng, eras: Eras, version: ProtocolVersion) -> Revision {
        let sessions = Revision::Exactly(version);
        let modern = Revision::Exactly(ProtocolVersion::V2026_07_28);
        match (eras.contains(Eras::SESSIONS), eras.contains(Eras::MODERN)) {
            (true, false) if rng.chance(600) => sessions,
            (true, false) => Revision::Auto,
            (true, true) => match rng.below(10) {
                0..=3 => sessions,
                4..=6 => Revision::Auto,
                _ => modern,
            },
            _ if rng.chance(500) => Revision::Auto,
            _ => modern,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The run's state.

/// What touched a client incarnation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Cut,
    Hold,
    Restart,
    Expired,
}

/// One request a client issued.
#[derive(Debug)]
struct Req {
    token: String,
    issued: Instant,
    deadline: Instant,
    end: Option<(Instant, String)>,
    /// Progress notifications delivered, and the last value.
    progress: u64,
    last_progress: u64,
}

/// One `Client` instance of a simulated client.
struct Inc {
    slot: usize,
    client: Client,
    /// When it was created (its handshake began).
    born: Instant,
    /// The era it connected in (`Event::Connected`), once it did.
    era: Option<Era>,
    /// (from, to, what): the faults that touched it.
    faults: Vec<(Instant, Instant, Fault)>,
    /// When its GETs failed to connect: cut before their response head, or refused with
    /// 409 (the server still held a connection of the stream that broke on this side).
    get_failures: Vec<Instant>,
    /// When it was sent a gap refusal.
    gaps: Vec<Instant>,
    /// Its requests whose POST was cut or held.
    faulted_posts: BTreeSet<RequestId>,
    /// Its requests whose POST delivered a response head to it.
    post_heads: BTreeSet<RequestId>,
    closing: bool,
    closed: bool,
    connect_failed: bool,
    /// The session id it holds (or held last).
    wire: Option<String>,
    requests: BTreeMap<RequestId, Req>,
    tokens: BTreeMap<String, RequestId>,
    /// Server→client requests delivered: (session id, request id).
    asked: BTreeSet<(String, RequestId)>,
    /// The last standalone-stream `seq` delivered, and when, per session id.
    seq: BTreeMap<String, (u64, Instant)>,
    /// When a GET of a session (by id) was cut before the client saw any event id on it.
    idless: Vec<(String, Instant)>,
    /// When the client reported a reset of a session's standalone stream.
    resets: Vec<(String, Instant)>,
}

impl Inc {
    fn touched(&self, from: Instant, to: Instant) -> bool {
        self.faults.iter().any(|&(a, b, _)| a <= to && b >= from)
    }

    fn ended(&self) -> bool {
        self.closed || self.connect_failed
    }

    /// Whether the application may still send on it.
    fn live(&self) -> bool {
        !self.ended() && !self.closing
    }
}

/// One simulated client: its plan, and its incarnations.
struct Slot {
    plan: ClientPlan,
    inc: Option<usize>,
    incarnations: u32,
    issued: usize,
    abandoned: usize,
}

enum Up {
    Head(http::request::Parts),
    Body(Bytes),
    End,
}

enum Down {
    Head(http::response::Parts),
    Data(Bytes),
    End,
    /// The server cut the connection (RESUME-14: a resume took its stream over).
    Abort,
}

/// One HTTP exchange in the net.
struct Conn {
    inc: usize,
    cx: client::ExchangeId,
    life: u32,
    sx: Option<server::ExchangeId>,
    get: bool,
    resume: bool,
    up: VecDeque<Up>,
    down_clock: Instant,
    pieces: u32,
    cut_after: Option<u32>,
    held: bool,
    head_seen: bool,
    status: u16,
    error_body: Vec<u8>,
    /// The request a POST carries, if any.
    carries: Option<RequestId>,
    /// A GET's body until it shows a dispatched event id (then `saw_id`).
    scan: Vec<u8>,
    saw_id: bool,
    dead: bool,
    server_end: bool,
    client_end: bool,
}

impl Conn {
    fn finished(&self) -> bool {
        self.client_end && (self.server_end || self.dead)
    }

    /// Whether breaking now makes it a GET that failed to connect: no head yet, or an
    /// error head whose body (the refusal's reason) will not be read whole (a 409 counted
    /// when its head came).
    fn refused(&self) -> bool {
        !self.head_seen || (self.status >= 300 && self.status != 409)
    }
}

/// A server→client request's state.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    Open(SessionId),
    Answered,
    TimedOut,
    Gone,
}

/// The server application's pending work for one request.
enum Task {
    Progress {
        handle: RequestHandle,
        session: Option<SessionId>,
        token: String,
        n: u64,
        total: u64,
    },
    Ask(SessionId),
    Answer {
        handle: RequestHandle,
        token: String,
        /// Answer with this error instead of a result.
        error: Option<ErrorCode>,
    },
}

enum Action {
    Start(usize),
    Issue(usize, usize),
    Cancel(usize, RequestId),
    Up(u64),
    Down(u64, Down),
    Cut(u64),
    /// The server learns late of a cut (a half-open connection).
    ServerLearns(u32, server::ExchangeId),
    /// The client learns late of a cut.
    ClientLearns(u64),
    Release(u64),
    /// The application closes the client, whatever is in flight.
    Abandon(usize),
    Task(u32, Task),
    Restart,
}

struct Sim {
    seed: u64,
    rng: Rng,
    plan: Plan,
    t0: Instant,
    now: Instant,
    seq: u64,
    queue: BTreeMap<(Instant, u64), Action>,
    server: Server,
    life: u32,
    next_conn: u64,
    conns: BTreeMap<u64, Conn>,
    by_client: BTreeMap<(usize, client::ExchangeId), u64>,
    by_server: BTreeMap<server::ExchangeId, u64>,
    incs: Vec<Inc>,
    slots: Vec<Slot>,
    // The server application's records.
    wires: BTreeMap<(u32, SessionId), String>,
    /// Session ids the server ended, and when.
    ended: BTreeMap<String, Instant>,
    seen: BTreeSet<(u32, SessionId, RequestId)>,
    /// The tokens of the sessionless requests the server application got (a sessionless
    /// request is never sent again, so never arrives twice, on any server life).
    seen_tokens: BTreeSet<String>,
    /// The `server/discover` probes the server application got.
    probes: BTreeSet<(u32, RequestHandle)>,
    /// The tokens of the requests the server application answered with an error.
    errs: BTreeSet<String>,
    answers: BTreeMap<String, (Instant, Delivery)>,
    progress_sent: BTreeMap<String, Vec<(u64, Delivery)>>,
    asks: BTreeMap<(u32, RequestId), Ask>,
    get_seq: BTreeMap<(u32, SessionId), u64>,
    /// The token of every request the server application got, by handle.
    handles: BTreeMap<(u32, RequestHandle), String>,
    /// Every token a client sent: (incarnation, request id).
    tokens: BTreeMap<String, (usize, RequestId)>,
    violations: Vec<String>,
    stats: Stats,
    tracing: bool,
    trace: Vec<String>,
}

impl Sim {
    fn new(seed: u64, faults: Faults, tracing: bool) -> Self {
        let mut rng = Rng::new(seed);
        let plan = Plan::draw(&mut rng, faults);
        let t0 = Instant::now();
        let server = Server::new(plan.server.clone(), counter_entropy(seed << 8));
        let mut sim = Self {
            seed,
            rng,
            t0,
            now: t0,
            seq: 0,
            queue: BTreeMap::new(),
            server,
            life: 0,
            next_conn: 0,
            conns: BTreeMap::new(),
            by_client: BTreeMap::new(),
            by_server: BTreeMap::new(),
            incs: Vec::new(),
            slots: Vec::new(),
            wires: BTreeMap::new(),
            ended: BTreeMap::new(),
            seen: BTreeSet::new(),
            seen_tokens: BTreeSet::new(),
            probes: BTreeSet::new(),
            errs: BTreeSet::new(),
            answers: BTreeMap::new(),
            progress_sent: BTreeMap::new(),
            asks: BTreeMap::new(),
            get_seq: BTreeMap::new(),
            handles: BTreeMap::new(),
            tokens: BTreeMap::new(),
            violations: Vec::new(),
            stats: Stats {
                runs: 1,
                ..Stats::default()
            },
            tracing,
            trace: Vec::new(),
            plan,
        };
        let clients = std::mem::take(&mut sim.plan.clients);
        for (i, plan) in clients.into_iter().enumerate() {
            sim.at(t0 + plan.start, Action::Start(i));
            for (k, r) in plan.requests.iter().enumerate() {
                sim.at(t0 + r.at, Action::Issue(i, k));
            }
            if let Some(at) = plan.abandon {
                sim.at(t0 + at, Action::Abandon(i));
            }
            sim.slots.push(Slot {
                plan,
                inc: None,
                incarnations: 0,
                issued: 0,
                abandoned: 0,
            });
        }
        for at in sim.plan.restarts.clone() {
            sim.at(t0 + at, Action::Restart);
        }
        sim
    }

    fn at(&mut self, at: Instant, action: Action) {
        self.seq += 1;
        self.queue.insert((at, self.seq), action);
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        if self.tracing {
            let t = self.now - self.t0;
            self.trace
                .push(format!("{:>9.3}s {}", t.as_secs_f64(), line()));
        }
    }

    fn violation(&mut self, what: String) {
        let t = self.now - self.t0;
        self.log(|| format!("VIOLATION {what}"));
        self.violations.push(format!(
            "seed {} at {:.3}s: {what}",
            self.seed,
            t.as_secs_f64()
        ));
    }

    fn delay(&mut self) -> Duration {
        let max = self.plan.max_delay;
        self.rng.millis(0, max)
    }

    // -----------------------------------------------------------------------------------
    // The loop.

    fn run(&mut self) {
        let horizon = self.t0 + Duration::from_secs(4 * 3600);
        for _ in 0..MAX_STEPS {
            self.close_finished();
            let action = self.queue.keys().next().map(|k| k.0);
            let timer = self.next_timer();
            let next = match (action, timer) {
                (Some(a), Some(t)) => a.min(t),
                (Some(a), None) => a,
                (None, Some(t)) => t,
                (None, None) => return,
            };
            if next > horizon {
                let pending = self.queue.len();
                self.violation(format!(
                    "no quiet after 4 h of virtual time ({pending} actions queued, next timer {:?})",
                    timer.map(|t| t - self.t0)
                ));
                return;
            }
            self.now = self.now.max(next);
            if action.is_some_and(|a| a <= next) {
                let (_, action) = self.queue.pop_first().expect("an action");
                self.act(action);
            } else {
                let now = self.now;
                self.server.handle_timeout(now);
                for i in 0..self.incs.len() {
                    self.incs[i].client.handle_timeout(now);
                }
            }
            self.settle();
        }
        self.violation(format!("no quiet after {MAX_STEPS} steps (a livelock)"));
    }

    fn next_timer(&self) -> Option<Instant> {
        let clients = self.incs.iter().filter_map(|i| i.client.poll_timeout());
        self.server.poll_timeout().into_iter().chain(clients).min()
    }

    /// Closes every client whose requests all ended; once all did, the run winds down.
    fn close_finished(&mut self) {
        for s in 0..self.slots.len() {
            let slot = &self.slots[s];
            let issued_all = slot.issued + slot.abandoned == slot.plan.requests.len();
            let Some(i) = slot.inc else { continue };
            if !issued_all || self.incs[i].closing || self.incs[i].ended() {
                continue;
            }
            if self.incs[i].requests.values().all(|r| r.end.is_some()) {
                self.log(|| format!("client {i}: close"));
                self.incs[i].closing = true;
                let now = self.now;
                self.incs[i].client.close(now);
                self.settle();
            }
        }
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Start(s) => {
                if self.slots[s].inc.is_none() {
                    self.incarnate(s);
                }
            }
            Action::Issue(s, k) => self.issue(s, k),
            Action::Cancel(i, id) => self.cancel(i, &id),
            Action::Up(c) => self.upload(c),
            Action::Down(c, piece) => self.download(c, piece),
            Action::Cut(c) => self.cut(c),
            Action::ServerLearns(life, sx) => {
                if life == self.life {
                    let now = self.now;
                    self.server.handle_disconnect(now, sx);
                }
            }
            Action::ClientLearns(c) => {
                let now = self.now;
                if let Some(conn) = self.conns.get_mut(&c)
                    && !conn.client_end
                {
                    conn.client_end = true;
                    let (i, cx) = (conn.inc, conn.cx);
                    self.incs[i].client.handle_failure(now, cx);
                    self.forget(c);
                }
            }
            Action::Release(c) => self.release(c),
            Action::Abandon(s) => self.abandon(s),
            Action::Task(life, task) if life == self.life => self.task(task),
            Action::Task(..) => {}
            Action::Restart => self.restart(),
        }
    }

    /// Moves everything until nothing moves: transmits, events, applications.
    fn settle(&mut self) {
        loop {
            let mut moved = false;
            for i in 0..self.incs.len() {
                while let Some(t) = self.incs[i].client.poll_transmit() {
                    moved = true;
                    self.client_transmit(i, t);
                }
            }
            while let Some(x) = self.server.poll_ready() {
                moved = true;
                self.server_ready(x);
            }
            for i in 0..self.incs.len() {
                if let Some(w) = self.incs[i].client.session_id() {
                    self.incs[i].wire = Some(w.to_owned());
                }
                let mut events = Vec::new();
                while let Some(e) = self.incs[i].client.poll_event() {
                    events.push(e);
                }
                // A failed handshake (or re-initialization) fails the waiting requests
                // (`Closed`) just before it reports itself.
                if events.iter().any(|e| {
                    matches!(
                        e,
                        client::Event::ConnectFailed(_) | client::Event::ReconnectFailed(_)
                    )
                }) {
                    self.incs[i].connect_failed = true;
                }
                for e in events {
                    moved = true;
                    self.client_event(i, e);
                }
            }
            while let Some(e) = self.server.poll_event() {
                moved = true;
                self.server_event(e);
            }
            if !moved {
                return;
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // The net.

    fn client_transmit(&mut self, i: usize, t: client::Transmit) {
        match t {
            client::Transmit::Request {
                exchange,
                head,
                body,
            } => {
                self.stats.exchanges += 1;
                let c = self.next_conn;
                self.next_conn += 1;
                let get = head.method == http::Method::GET;
                let resume = head.headers.contains_key("last-event-id");
                self.log(|| {
                    format!(
                        "client {i} {exchange} = net {c}: {} {}{}",
                        head.method,
                        if resume { "resume " } else { "" },
                        String::from_utf8_lossy(&body)
                    )
                });
                let carries = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .filter(|v| v.get("method").is_some())
                    .and_then(|v| v.get("id")?.as_i64())
                    .map(RequestId::int);
                let mut up = VecDeque::new();
                up.push_back(Up::Head(head));
                for chunk in self.split(body) {
                    up.push_back(Up::Body(chunk));
                }
                up.push_back(Up::End);
                let cut_after = if self.rng.chance(self.plan.cut) && self.rng.chance(500) {
                    Some(self.rng.range(0, 12) as u32)
                } else {
                    None
                };
                if self.rng.chance(self.plan.cut) {
                    let span = if self.rng.chance(500) { 300 } else { 8000 };
                    let at = self.now + self.rng.millis(0, span);
                    self.at(at, Action::Cut(c));
                }
                let first = self.now + self.delay();
                self.conns.insert(
                    c,
                    Conn {
                        inc: i,
                        cx: exchange,
                        life: self.life,
                        sx: None,
                        get,
                        resume,
                        up,
                        down_clock: self.now,
                        pieces: 0,
                        cut_after,
                        held: false,
                        head_seen: false,
                        status: 0,
                        error_body: Vec::new(),
                        carries,
                        scan: Vec::new(),
                        saw_id: false,
                        dead: false,
                        server_end: false,
                        client_end: false,
                    },
                );
                self.by_client.insert((i, exchange), c);
                self.at(first, Action::Up(c));
            }
            client::Transmit::Abort(exchange) => {
                let Some(&c) = self.by_client.get(&(i, exchange)) else {
                    return;
                };
                self.log(|| format!("client {i} aborts {exchange} (net {c})"));
                let now = self.now;
                let conn = self.conns.get_mut(&c).expect("conn");
                conn.dead = true;
                conn.client_end = true;
                if let Some(sx) = conn.sx
                    && !conn.server_end
                    && conn.life == self.life
                {
                    self.server.handle_disconnect(now, sx);
                }
                self.forget(c);
            }
        }
    }

    /// Splits a body into random chunks (whole when chunking is off).
    fn split(&mut self, body: Bytes) -> Vec<Bytes> {
        if body.is_empty() {
            return Vec::new();
        }
        if !self.plan.chunks || body.len() < 2 || self.rng.chance(400) {
            return vec![body];
        }
        let n = self.rng.range(2, 4);
        let mut cuts: Vec<usize> = (1..n)
            .map(|_| self.rng.range(1, body.len() as u64 - 1) as usize)
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut out = Vec::new();
        let mut from = 0;
        for at in cuts {
            out.push(body.slice(from..at));
            from = at;
        }
        out.push(body.slice(from..));
        out
    }

    /// Counts a delivered piece; cuts the exchange when its count says so.
    fn piece(&mut self, c: u64) {
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        conn.pieces += 1;
        if conn.cut_after == Some(conn.pieces) {
            self.cut(c);
        }
    }

    fn upload(&mut self, c: u64) {
        let now = self.now;
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        if conn.dead || conn.life != self.life {
            return;
        }
        let Some(piece) = conn.up.pop_front() else {
            return;
        };
        let more = !conn.up.is_empty();
        match piece {
            Up::Head(head) => {
                let sx = self.server.handle_head(now, head);
                let conn = self.conns.get_mut(&c).expect("conn");
                conn.sx = Some(sx);
                self.by_server.insert(sx, c);
            }
            Up::Body(chunk) => {
                if let Some(sx) = conn.sx {
                    self.server.handle_body(now, sx, chunk);
                }
            }
            Up::End => {
                if let Some(sx) = conn.sx {
                    self.server.handle_body_end(now, sx);
                }
            }
        }
        if more {
            let at = now + self.delay();
            self.at(at, Action::Up(c));
        }
        self.piece(c);
    }

    /// The server has transmits for `x`: take them (unless its reader is held).
    fn server_ready(&mut self, x: server::ExchangeId) {
        let Some(&c) = self.by_server.get(&x) else {
            // Its connection is gone: drain and drop (the server forgets it at `End`).
            while let Some(t) = self.server.poll_transmit(x) {
                if matches!(t, server::Transmit::Abort) {
                    // Half-open: the client resumed before the server learnt of the cut.
                    self.stats.superseded += 1;
                }
            }
            return;
        };
        let conn = self.conns.get_mut(&c).expect("conn");
        if conn.held {
            return;
        }
        if self.plan.hold > 0 && self.rng.chance(self.plan.hold) {
            let hold = self.rng.millis(100, self.plan.max_hold);
            let conn = self.conns.get_mut(&c).expect("conn");
            conn.held = true;
            let i = conn.inc;
            let until = self.now + hold;
            self.incs[i].faults.push((self.now, until, Fault::Hold));
            self.post_faulted(c);
            self.stats.holds += 1;
            self.log(|| format!("net {c}: reader held for {hold:?}"));
            self.at(until, Action::Release(c));
            return;
        }
        self.drain(c, x);
    }

    fn release(&mut self, c: u64) {
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        conn.held = false;
        if conn.dead || conn.life != self.life {
            return;
        }
        if let Some(x) = conn.sx {
            self.drain(c, x);
        }
    }

    /// Takes every transmit the server has for `x` and puts it on the wire.
    fn drain(&mut self, c: u64, x: server::ExchangeId) {
        while let Some(t) = self.server.poll_transmit(x) {
            let pieces = match t {
                server::Transmit::Head(head) => vec![Down::Head(head)],
                server::Transmit::Data(bytes) => {
                    self.split(bytes).into_iter().map(Down::Data).collect()
                }
                server::Transmit::End => {
                    self.by_server.remove(&x);
                    if let Some(conn) = self.conns.get_mut(&c) {
                        conn.server_end = true;
                    }
                    vec![Down::End]
                }
                server::Transmit::Abort => {
                    self.stats.superseded += 1;
                    self.by_server.remove(&x);
                    if let Some(conn) = self.conns.get_mut(&c) {
                        conn.server_end = true;
                    }
                    vec![Down::Abort]
                }
            };
            for piece in pieces {
                let d = self.delay();
                let conn = self.conns.get_mut(&c).expect("conn");
                conn.down_clock = conn.down_clock.max(self.now) + d;
                let at = conn.down_clock;
                self.at(at, Action::Down(c, piece));
            }
        }
    }

    fn download(&mut self, c: u64, piece: Down) {
        let now = self.now;
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        if conn.dead {
            return;
        }
        let (i, cx) = (conn.inc, conn.cx);
        match piece {
            Down::Head(head) => {
                conn.head_seen = true;
                conn.status = head.status.as_u16();
                if let Some(id) = conn.carries.clone() {
                    self.incs[i].post_heads.insert(id);
                }
                let (status, get, resume) = (conn.status, conn.get, conn.resume);
                if get && status == 409 {
                    self.incs[i].get_failures.push(now);
                }
                self.log(|| format!("net {c}: head {status} (get {get}, resume {resume})"));
                self.incs[i].client.handle_head(now, cx, head);
            }
            Down::Data(bytes) => {
                if conn.status >= 300 {
                    conn.error_body.extend_from_slice(&bytes);
                } else if conn.get && !conn.saw_id {
                    conn.scan.extend_from_slice(&bytes);
                    conn.saw_id = dispatched_id(&conn.scan);
                }
                self.log(|| format!("net {c}: data {:?}", String::from_utf8_lossy(&bytes)));
                self.incs[i].client.handle_body(now, cx, bytes);
            }
            Down::End => {
                conn.client_end = true;
                let gap = conn.get
                    && conn.status == 400
                    && String::from_utf8_lossy(&conn.error_body).contains("no longer retained");
                if gap {
                    self.stats.gaps += 1;
                    self.incs[i].gaps.push(now);
                }
                self.log(|| format!("net {c}: end"));
                self.incs[i].client.handle_body_end(now, cx);
                self.forget(c);
                return;
            }
            Down::Abort => {
                conn.client_end = true;
                self.log(|| format!("net {c}: aborted by the server"));
                self.incs[i].client.handle_failure(now, cx);
                self.forget(c);
                return;
            }
        }
        self.piece(c);
    }

    /// Breaks exchange `c`: both sides learn it now.
    fn cut(&mut self, c: u64) {
        let now = self.now;
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        if conn.dead || conn.client_end {
            return;
        }
        conn.dead = true;
        let (i, cx, sx, get) = (conn.inc, conn.cx, conn.sx, conn.get);
        let refused = conn.refused();
        let live = !conn.server_end && conn.life == self.life;
        // Half-open: one side may learn of the cut later than the other.
        let (server_lag, client_lag) = match self.rng.below(10) {
            0..=2 => (self.rng.millis(10, 2000), Duration::ZERO),
            3..=4 => (Duration::ZERO, self.rng.millis(10, 2000)),
            _ => (Duration::ZERO, Duration::ZERO),
        };
        self.stats.cuts += 1;
        let until = now + server_lag.max(client_lag);
        self.incs[i].faults.push((now, until, Fault::Cut));
        self.post_faulted(c);
        if get && refused {
            self.incs[i].get_failures.push(now);
        }
        self.idless_end(c);
        self.log(|| {
            format!("net {c}: CUT (client {i} {cx}; server lag {server_lag:?}, client lag {client_lag:?})")
        });
        if let Some(sx) = sx
            && live
        {
            // Until the server learns, what it writes is taken and lost.
            self.by_server.remove(&sx);
            if server_lag.is_zero() {
                self.server.handle_disconnect(now, sx);
            } else {
                let life = self.life;
                self.at(now + server_lag, Action::ServerLearns(life, sx));
            }
        }
        if client_lag.is_zero() {
            self.conns.get_mut(&c).expect("conn").client_end = true;
            self.incs[i].client.handle_failure(now, cx);
            self.forget(c);
        } else {
            self.at(now + client_lag, Action::ClientLearns(c));
        }
    }

    /// A GET broke before the client saw any event id on it: what the server handed it
    /// and the network lost cannot be resumed (the property's one exception, see the
    /// module docs).
    fn idless_end(&mut self, c: u64) {
        let conn = &self.conns[&c];
        let refused = conn.head_seen && conn.status != 200;
        if !conn.get || conn.saw_id || refused {
            return;
        }
        let i = conn.inc;
        if let Some(wire) = self.incs[i].wire.clone() {
            self.incs[i].idless.push((wire, self.now));
        }
    }

    /// A fault hit exchange `c`: the request its POST carries may be lost with it.
    fn post_faulted(&mut self, c: u64) {
        let conn = &self.conns[&c];
        if let Some(id) = conn.carries.clone() {
            let i = conn.inc;
            self.incs[i].faulted_posts.insert(id);
        }
    }

    fn forget(&mut self, c: u64) {
        if self.conns.get(&c).is_some_and(Conn::finished) {
            let conn = self.conns.remove(&c).expect("conn");
            self.by_client.remove(&(conn.inc, conn.cx));
            if let Some(sx) = conn.sx
                && self.by_server.get(&sx) == Some(&c)
            {
                self.by_server.remove(&sx);
            }
        }
    }

    /// The server process restarts: every connection to it breaks, and the new one knows
    /// no session, stream or ring.
    fn restart(&mut self) {
        let now = self.now;
        self.stats.restarts += 1;
        self.log(|| "RESTART".into());
        self.life += 1;
        let entropy = counter_entropy((self.seed << 8) | u64::from(self.life));
        self.server = Server::new(self.plan.server.clone(), entropy);
        self.by_server.clear();
        for i in 0..self.incs.len() {
            self.incs[i].faults.push((now, now, Fault::Restart));
        }
        for ((life, _), wire) in &self.wires {
            if *life + 1 == self.life {
                self.ended.entry(wire.clone()).or_insert(now);
            }
        }
        for ask in self.asks.values_mut() {
            if matches!(ask, Ask::Open(_)) {
                *ask = Ask::Gone;
            }
        }
        let live: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.life + 1 == self.life && !c.dead)
            .map(|(&c, _)| c)
            .collect();
        for c in live {
            let conn = self.conns.get_mut(&c).expect("conn");
            conn.dead = true;
            conn.server_end = true;
            if !conn.client_end {
                conn.client_end = true;
                let (i, cx) = (conn.inc, conn.cx);
                if conn.get && conn.refused() {
                    self.incs[i].get_failures.push(now);
                }
                self.post_faulted(c);
                self.incs[i].client.handle_failure(now, cx);
            }
            self.forget(c);
        }
    }

    // -----------------------------------------------------------------------------------
    // The client application.

    fn incarnate(&mut self, s: usize) -> Option<usize> {
        let slot = &mut self.slots[s];
        if slot.incarnations >= MAX_INCARNATIONS {
            return None;
        }
        slot.incarnations += 1;
        let i = self.incs.len();
        let entropy = counter_entropy((self.seed << 16) ^ (i as u64 + 1) << 40);
        let mut client = Client::new(slot.plan.config.clone(), entropy);
        slot.inc = Some(i);
        client.connect(self.now);
        self.stats.incarnations += 1;
        self.log(|| format!("slot {s}: client {i} connects"));
        self.incs.push(Inc {
            slot: s,
            client,
            born: self.now,
            era: None,
            faults: Vec::new(),
            get_failures: Vec::new(),
            gaps: Vec::new(),
            faulted_posts: BTreeSet::new(),
            post_heads: BTreeSet::new(),
            closing: false,
            closed: false,
            connect_failed: false,
            wire: None,
            requests: BTreeMap::new(),
            tokens: BTreeMap::new(),
            asked: BTreeSet::new(),
            seq: BTreeMap::new(),
            idless: Vec::new(),
            resets: Vec::new(),
        });
        Some(i)
    }

    fn issue(&mut self, s: usize, k: usize) {
        let live = self.slots[s].inc.filter(|&i| self.incs[i].live());
        let Some(i) = live.or_else(|| self.incarnate(s)) else {
            self.slots[s].abandoned += 1;
            return;
        };
        let plan = self.slots[s].plan.requests[k];
        let token = format!("s{s}c{i}r{k}");
        let params =
            format!(r#"{{"name":"work","arguments":{{}},"_meta":{{"progressToken":"{token}"}}}}"#);
        let params = RawJson::new(&params).expect("JSON");
        let now = self.now;
        let deadline = now + plan.timeout;
        match self.incs[i]
            .client
            .request(now, "tools/call", Some(&params), Some(deadline))
        {
            Ok(id) => {
                self.slots[s].issued += 1;
                self.stats.requests += 1;
                self.log(|| format!("client {i}: request {id} token {token}"));
                self.incs[i].tokens.insert(token.clone(), id.clone());
                self.tokens.insert(token.clone(), (i, id.clone()));
                self.incs[i].requests.insert(
                    id.clone(),
                    Req {
                        token,
                        issued: now,
                        deadline,
                        end: None,
                        progress: 0,
                        last_progress: 0,
                    },
                );
                if let Some(after) = plan.cancel_after {
                    self.at(now + after, Action::Cancel(i, id));
                }
            }
            Err(e) => {
                self.violation(format!("client {i}: request refused: {e}"));
                self.slots[s].abandoned += 1;
            }
        }
    }

    fn abandon(&mut self, s: usize) {
        let Some(i) = self.slots[s].inc.filter(|&i| self.incs[i].live()) else {
            return;
        };
        self.log(|| format!("client {i}: closed by the application, mid-flight"));
        self.incs[i].closing = true;
        self.slots[s].inc = None;
        let now = self.now;
        self.incs[i].client.close(now);
    }

    fn cancel(&mut self, i: usize, id: &RequestId) {
        let Some(req) = self.incs[i].requests.get(id) else {
            return;
        };
        if req.end.is_some() || self.incs[i].ended() {
            return;
        }
        let now = self.now;
        if self.incs[i].client.cancel(now, id, Some("sim")) {
            self.stats.cancelled += 1;
            self.log(|| format!("client {i}: cancelled {id}"));
            self.end(i, id, "cancelled".into());
        } else {
            self.violation(format!(
                "client {i}: request {id} is in flight, yet cancel() says it is not (forgotten without an event)"
            ));
        }
    }

    /// The handshake settled `version` in `era`: what the client's revision allows, and
    /// what the server serves. A client that may speak 2026-07-28 (`Auto`) speaks it to a
    /// server that serves it, unless a fault touched its handshake (a probe cut after its
    /// head is no modern evidence: it falls back to `initialize`, which such a server also
    /// serves); to a session-era server it speaks the session era.
    fn connected(&mut self, i: usize, version: ProtocolVersion, era: Era) {
        let now = self.now;
        let eras = self.plan.eras;
        let inc = &self.incs[i];
        let revision = self.slots[inc.slot].plan.revision;
        let touched = inc.touched(inc.born, now);
        let served = self.server.supported_versions().contains(&version);
        let modern = version == ProtocolVersion::V2026_07_28;
        let allowed = match (revision, era) {
            (Revision::Exactly(v), Era::Sessions) => v.uses_initialize() && !modern,
            (Revision::Exactly(v), Era::Sessionless) => v == version,
            (Revision::Auto, Era::Sessionless) => modern,
            (Revision::Auto, Era::Sessions) => !modern && (!eras.contains(Eras::MODERN) || touched),
            _ => false,
        };
        if !served || !allowed {
            self.violation(format!(
                "client {i}: {revision:?} connected at {version} ({era:?}) to a server serving {eras:?} (fault touched: {touched})"
            ));
        }
        match era {
            Era::Sessionless => self.stats.modern_clients += 1,
            _ => self.stats.session_clients += 1,
        }
        if revision == Revision::Auto && era == Era::Sessions && eras.contains(Eras::MODERN) {
            self.stats.auto_fallbacks += 1;
        }
        self.incs[i].era = Some(era);
    }

    /// Records the end of request `id`; a second end is a violation.
    fn end(&mut self, i: usize, id: &RequestId, how: String) -> bool {
        let now = self.now;
        let Some(req) = self.incs[i].requests.get_mut(id) else {
            self.violation(format!(
                "client {i}: {how} for request {id}, which it never issued"
            ));
            return false;
        };
        if let Some((_, first)) = &req.end {
            let first = first.clone();
            self.violation(format!(
                "client {i}: request {id} ended twice: {first}, then {how}"
            ));
            return false;
        }
        if self.incs[i].era == Some(Era::Sessionless) {
            self.stats.modern_requests += 1;
            match how.as_str() {
                "response" => self.stats.modern_responses += 1,
                "cancelled" => self.stats.modern_cancelled += 1,
                "failed: Timeout" => self.stats.modern_timeouts += 1,
                _ => {}
            }
        }
        let req = self.incs[i].requests.get_mut(id).expect("request");
        req.end = Some((now, how));
        true
    }

    fn client_event(&mut self, i: usize, e: client::Event) {
        let now = self.now;
        match e {
            client::Event::Connected { version, era, .. } => {
                self.log(|| format!("client {i}: connected {version} ({era:?})"));
                self.connected(i, version, era);
            }
            client::Event::Reconnected { version, era, .. } => {
                self.log(|| format!("client {i}: reconnected {version} ({era:?})"));
                if era != Era::Sessions || self.incs[i].era != Some(Era::Sessions) {
                    let was = self.incs[i].era;
                    self.violation(format!(
                        "client {i}: re-initialized into {era:?} from {was:?} (only a session is re-initialized)"
                    ));
                }
            }
            client::Event::ConnectFailed(error) | client::Event::ReconnectFailed(error) => {
                self.log(|| format!("client {i}: connect failed: {error}"));
                let inc = &self.incs[i];
                if !inc.touched(self.t0, now) {
                    self.violation(format!(
                        "client {i}: handshake failed ({error}) with no fault touching it"
                    ));
                }
                self.incs[i].connect_failed = true;
            }
            client::Event::Response(m) => {
                let Some(id) = m.id().cloned() else {
                    return self.violation(format!("client {i}: a response without an id"));
                };
                let text = m.text().as_str().to_owned();
                if !self.end(i, &id, "response".into()) {
                    return;
                }
                self.stats.responses += 1;
                let req = &self.incs[i].requests[&id];
                let token = req.token.clone();
                let delivered = req.progress;
                self.log(|| format!("client {i}: response {id}"));
                // The server application answers some calls with an error (under a 404
                // or 200 at 2026-07-28, MODERN-9): the client hands it over as the
                // call's answer, and only for those.
                let error = m.kind() == Kind::Error;
                if error != self.errs.contains(&token) {
                    return self.violation(format!(
                        "client {i}: request {id} (token {token}) answered {}, though the server {}: {text}",
                        if error { "with an error" } else { "with a result" },
                        if error { "sent none" } else { "answered it with an error" },
                    ));
                }
                let v = serde_json::from_str::<serde_json::Value>(&text).unwrap_or_default();
                let echo = if error {
                    self.stats.error_responses += 1;
                    v["error"]["message"].as_str().map(str::to_owned)
                } else {
                    v["result"]["content"][0]["text"]
                        .as_str()
                        .map(str::to_owned)
                };
                if echo.as_deref() != Some(token.as_str()) {
                    return self.violation(format!(
                        "client {i}: request {id} (token {token}) got another request's response: {text}"
                    ));
                }
                if self.plan.mode != ResponseMode::Json {
                    let accepted = self.progress_sent.get(&token).map_or(0, |sent| {
                        sent.iter().filter(|(_, d)| *d != Delivery::Dropped).count()
                    }) as u64;
                    if delivered < accepted {
                        self.violation(format!(
                            "client {i}: request {id}: {delivered} of the {accepted} progress notifications the server accepted arrived before the response on the same stream"
                        ));
                    }
                }
            }
            client::Event::Failed { id, error } => {
                self.log(|| format!("client {i}: failed {id}: {error:?}"));
                if !self.end(i, &id, format!("failed: {error:?}")) {
                    return;
                }
                self.failure(i, &id, &error);
            }
            client::Event::Notification(m) => self.notification(i, &m),
            client::Event::Request(m) => self.server_request(i, &m),
            client::Event::SessionExpired => {
                let wire = self.incs[i].wire.clone();
                self.log(|| format!("client {i}: session expired ({wire:?})"));
                let ended = wire.as_ref().is_some_and(|w| self.ended.contains_key(w));
                if !ended {
                    self.violation(format!(
                        "client {i}: session {wire:?} reported expired, but the server never ended it"
                    ));
                }
            }
            client::Event::Closed => {
                self.log(|| format!("client {i}: closed"));
                self.incs[i].closed = true;
            }
            client::Event::StreamReset { error } => {
                let gap = matches!(&error, RequestError::ResumeFailed { status: 400, message } if message.contains("no longer retained"));
                let ok = match &error {
                    _ if gap => {
                        self.plan.small_rings && self.incs[i].gaps.iter().any(|&g| g <= self.now)
                    }
                    RequestError::ResumeFailed { status: 0, .. } => {
                        let max = self.slots[self.incs[i].slot].plan.max_attempts as usize;
                        self.incs[i].get_failures.len() >= max
                    }
                    _ => false,
                };
                if !ok {
                    self.violation(format!(
                        "client {i}: a stream reset without a cause: {error:?}"
                    ));
                }
                if let Some(wire) = self.incs[i].wire.clone() {
                    let now = self.now;
                    self.incs[i].resets.push((wire, now));
                }
            }
            other => self.violation(format!("client {i}: unexpected event {other:?}")),
        }
    }

    /// Property 3: is this failure allowed?
    fn failure(&mut self, i: usize, id: &RequestId, error: &RequestError) {
        let now = self.now;
        let inc = &self.incs[i];
        let req = &inc.requests[id];
        let (issued, deadline) = (req.issued, req.deadline);
        let modern = inc.era == Some(Era::Sessionless);
        let why = match error {
            RequestError::Timeout => {
                self.stats.timeouts += 1;
                let answered = self.answers.get(&req.token).copied();
                if now < deadline {
                    Some(format!(
                        "timed out {:?} before its deadline",
                        deadline - now
                    ))
                } else if let Some((at, d)) = answered
                    && d != Delivery::Dropped
                    && at + QUIET <= deadline
                    && !inc.touched(at, deadline)
                {
                    Some(format!(
                        "timed out, though the server accepted its answer ({d:?}) {:?} before the deadline and no fault touched the client since",
                        deadline - at
                    ))
                } else {
                    None
                }
            }
            RequestError::Broken { reached } => {
                // 2026-07-28 resumes nothing (MODERN-11, MODERN-12): a request whose
                // exchange broke is lost, and only a fault on that exchange breaks it.
                let server = *reached == Reached::Server;
                if server {
                    self.stats.broken_server += 1;
                } else {
                    self.stats.broken_unknown += 1;
                }
                let head = inc.post_heads.contains(id);
                if !modern {
                    Some(format!("{error:?} in the session era"))
                } else if !inc.faulted_posts.contains(id) {
                    Some(format!(
                        "{error:?}, though its POST was neither cut nor held and the server did not restart"
                    ))
                } else if server != head {
                    let saw = if head { "saw" } else { "never saw" };
                    Some(format!(
                        "{error:?}, though the client {saw} a response head for its POST"
                    ))
                } else {
                    None
                }
            }
            RequestError::StreamLost
            | RequestError::ResumeFailed { .. }
            | RequestError::SessionExpired
                if modern =>
            {
                Some(format!(
                    "{error:?} at 2026-07-28, where nothing resumes and there is no session"
                ))
            }
            RequestError::StreamLost => {
                // Without an id nothing was resumed: only its POST matters, or the
                // server ending the session under it (or restarting).
                self.stats.stream_lost += 1;
                let ended = inc
                    .faults
                    .iter()
                    .any(|&(a, _, f)| matches!(f, Fault::Expired | Fault::Restart) && a >= issued);
                (!inc.faulted_posts.contains(id) && !ended).then(|| {
                    "stream lost, though its POST was neither cut nor held and its session did not end".to_owned()
                })
            }
            RequestError::ResumeFailed {
                status: 400,
                message,
            } if message.contains("no longer retained") => {
                self.stats.resume_failed += 1;
                if !self.plan.small_rings {
                    Some("a gap with the default ring limits".to_owned())
                } else if !inc.gaps.iter().any(|&g| g <= now) {
                    Some("a gap the server never reported to this client".to_owned())
                } else {
                    None
                }
            }
            RequestError::ResumeFailed { status: 0, .. } => {
                self.stats.resume_failed += 1;
                let max = self.slots[inc.slot].plan.max_attempts as usize;
                let cuts = inc
                    .get_failures
                    .iter()
                    .filter(|&&t| t >= issued && t <= now)
                    .count();
                (cuts < max).then(|| {
                    format!("resume attempts ran out after only {cuts} GETs failed to connect (max_attempts {max})")
                })
            }
            RequestError::SessionExpired => {
                self.stats.session_expired += 1;
                let ended = inc
                    .wire
                    .as_ref()
                    .is_some_and(|w| self.ended.contains_key(w));
                (!ended).then(|| {
                    format!(
                        "session expired, but the server never ended session {:?}",
                        inc.wire
                    )
                })
            }
            RequestError::Closed => {
                if inc.closing {
                    self.stats.closed_by_app += 1;
                } else {
                    self.stats.closed += 1;
                }
                (!inc.connect_failed && !inc.closing)
                    .then(|| "closed, with no failed handshake and no close()".to_owned())
            }
            other => Some(format!("a failure that is never allowed here: {other:?}")),
        };
        if let Some(why) = why {
            self.violation(format!("client {i}: request {id}: {why}"));
        }
    }

    fn notification(&mut self, i: usize, m: &mcpwire::jsonrpc::Envelope) {
        if m.method() != Some("notifications/progress") {
            return self.violation(format!(
                "client {i}: unexpected notification {}",
                m.text().as_str()
            ));
        }
        let params: serde_json::Value = m
            .payload()
            .and_then(|p| serde_json::from_str(p.as_str()).ok())
            .unwrap_or_default();
        let token = params["progressToken"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let progress = params["progress"].as_u64().unwrap_or_default();
        self.stats.progress += 1;
        self.log(|| format!("client {i}: progress {token} {progress}"));
        if let Some(seq) = params["seq"].as_u64() {
            self.get_stream_seq(i, seq, m.text().as_str());
        }
        let Some(id) = self.incs[i].tokens.get(&token).cloned() else {
            return self.violation(format!(
                "client {i}: progress for token {token:?}, which it never sent"
            ));
        };
        let json = self.plan.mode == ResponseMode::Json;
        let req = self.incs[i].requests.get_mut(&id).expect("request");
        if progress <= req.last_progress {
            let last = req.last_progress;
            return self.violation(format!(
                "client {i}: request {id}: progress {progress} after {last} (repeated or out of order)"
            ));
        }
        req.last_progress = progress;
        req.progress += 1;
        if !json && req.end.as_ref().is_some_and(|(_, how)| how == "response") {
            self.violation(format!(
                "client {i}: request {id}: progress {progress} after its response on the same stream"
            ));
        }
    }

    /// A message of the standalone stream: `seq` must follow the last one exactly.
    fn get_stream_seq(&mut self, i: usize, seq: u64, text: &str) {
        let Some(wire) = self.incs[i].wire.clone() else {
            return self.violation(format!("client {i}: a stream message before any session"));
        };
        let (last, since) = self.incs[i].seq.get(&wire).copied().unwrap_or((0, self.t0));
        // A message after `last` that never came was handed to a GET the client saw no
        // id on, after `last` came (one it saw an id on would have been resumed, and
        // replayed it): the documented exception.
        let idless = self.incs[i]
            .idless
            .iter()
            .any(|(w, at)| *w == wire && *at >= since);
        let reset = self.incs[i]
            .resets
            .iter()
            .any(|(w, at)| *w == wire && *at >= since);
        if seq > last + 1 && idless {
            self.stats.idless_losses += seq - last - 1;
        } else if seq > last + 1 && reset {
            self.stats.reset_losses += seq - last - 1;
        } else if seq != last + 1 {
            self.violation(format!(
                "client {i}: standalone stream of session {wire}: seq {seq} after {last} ({text})"
            ));
        }
        if seq > last {
            self.incs[i].seq.insert(wire, (seq, self.now));
        }
    }

    fn server_request(&mut self, i: usize, m: &mcpwire::jsonrpc::Envelope) {
        let Some(id) = m.id().cloned() else {
            return;
        };
        self.stats.server_requests += 1;
        let wire = self.incs[i].wire.clone().unwrap_or_default();
        self.log(|| format!("client {i}: server request {id}"));
        if !self.incs[i].asked.insert((wire.clone(), id.clone())) {
            self.violation(format!(
                "client {i}: server request {id} of session {wire} delivered twice"
            ));
        }
        let params: serde_json::Value = m
            .payload()
            .and_then(|p| serde_json::from_str(p.as_str()).ok())
            .unwrap_or_default();
        if let Some(seq) = params["seq"].as_u64() {
            self.get_stream_seq(i, seq, m.text().as_str());
        }
        let result = RawJson::new(r#"{"roots":[]}"#).expect("JSON");
        let now = self.now;
        let _ = self.incs[i].client.respond(now, &id, &result);
    }

    // -----------------------------------------------------------------------------------
    // The server application.

    fn server_event(&mut self, e: server::Event) {
        let now = self.now;
        let life = self.life;
        match e {
            server::Event::Request(req) => {
                if req.era() == Era::Sessionless {
                    return self.sessionless_request(&req);
                }
                let Some(s) = req.session() else {
                    return self.violation("a request without a session".into());
                };
                if !self.seen.insert((life, s, req.id().clone())) {
                    self.violation(format!(
                        "server: request {} of session {s:?} arrived twice",
                        req.id()
                    ));
                }
                match req.method() {
                    "initialize" => {
                        if let Some(wire) = self.server.session_header(s) {
                            self.wires.insert((life, s), wire.to_owned());
                        }
                        let result = format!(
                            r#"{{"protocolVersion":"{}","capabilities":{{}},"serverInfo":{{"name":"sim","version":"1"}}}}"#,
                            req.version()
                        );
                        let result = RawJson::new(&result).expect("JSON");
                        if let Err(e) = self.server.respond(now, req.handle(), &result) {
                            self.violation(format!("server: initialize not answered: {e}"));
                        }
                    }
                    "tools/call" => self.plan_answer(&req),
                    other => self.violation(format!("server: unexpected request {other}")),
                }
            }
            server::Event::Notification { .. } => {}
            server::Event::Cancelled { request, .. } => {
                if self.probes.contains(&(life, request)) {
                    // A probe whose exchange went before the application answered it.
                    return;
                }
                // Only a request the client gave up on (cancel, or its deadline) is; at
                // 2026-07-28 also one whose response went with its connection
                // (MODERN-11): cut or held (the server ends a reader too slow), or its
                // client closed.
                let token = self.handles.get(&(life, request)).cloned();
                let found = token.as_ref().and_then(|t| self.tokens.get(t)).cloned();
                let inc = found.as_ref().map(|(i, _)| &self.incs[*i]);
                let req = found
                    .as_ref()
                    .and_then(|(i, id)| self.incs[*i].requests.get(id));
                let how = req
                    .and_then(|r| r.end.as_ref())
                    .map(|(_, how)| how.as_str());
                let modern = inc.is_some_and(|inc| inc.era == Some(Era::Sessionless));
                let gone = found.as_ref().is_some_and(|(i, id)| {
                    self.incs[*i].faulted_posts.contains(id) || how == Some("failed: Closed")
                });
                if modern {
                    self.stats.modern_server_cancels += 1;
                }
                let allowed =
                    matches!(how, Some("cancelled" | "failed: Timeout")) || modern && gone;
                if !allowed {
                    let how = how.map(str::to_owned);
                    self.violation(format!(
                        "server: request {token:?} cancelled, but its client ended it as {how:?}"
                    ));
                }
            }
            server::Event::Response { session, message } => {
                let id = message.id().cloned().unwrap_or(RequestId::int(-1));
                match self.asks.get_mut(&(life, id.clone())) {
                    Some(ask @ Ask::Open(_)) => *ask = Ask::Answered,
                    other => {
                        let state = format!("{other:?}");
                        self.violation(format!(
                            "server: response to server request {id} of {session:?} in state {state}"
                        ));
                    }
                }
            }
            server::Event::RequestTimedOut { session, id } => {
                match self.asks.get_mut(&(life, id.clone())) {
                    Some(ask @ Ask::Open(_)) => *ask = Ask::TimedOut,
                    other => {
                        let state = format!("{other:?}");
                        self.violation(format!(
                            "server: timeout of server request {id} of {session:?} in state {state}"
                        ));
                    }
                }
            }
            server::Event::SessionClosed { session, reason } => {
                let wire = self.wires.get(&(life, session)).cloned();
                self.log(|| format!("server: session {wire:?} closed: {reason:?}"));
                if let Some(wire) = wire {
                    self.ended.entry(wire.clone()).or_insert(now);
                    if reason == CloseReason::Expired {
                        self.stats.expiries += 1;
                        for inc in &mut self.incs {
                            if inc.wire.as_deref() == Some(wire.as_str()) {
                                inc.faults.push((now, now, Fault::Expired));
                            }
                        }
                    }
                }
                for ask in self.asks.values_mut() {
                    if *ask == Ask::Open(session) {
                        *ask = Ask::Gone;
                    }
                }
            }
            other => self.violation(format!("server: unexpected event {other:?}")),
        }
    }

    /// A request of 2026-07-28: the probe, answered at once with the revisions served (the
    /// core leaves `server/discover` to the application), or a `tools/call`.
    fn sessionless_request(&mut self, req: &server::IncomingRequest) {
        let now = self.now;
        let life = self.life;
        if let Some(s) = req.session() {
            return self.violation(format!("server: a sessionless request in session {s:?}"));
        }
        if !self.plan.eras.contains(Eras::MODERN) {
            return self.violation(format!(
                "server: a sessionless {} handed on by a server that does not serve 2026-07-28",
                req.method()
            ));
        }
        match req.method() {
            "server/discover" => {
                self.stats.probes += 1;
                self.probes.insert((life, req.handle()));
                let versions: Vec<String> = self
                    .server
                    .supported_versions()
                    .iter()
                    .map(|v| format!(r#""{v}""#))
                    .collect();
                let result = format!(
                    r#"{{"resultType":"complete","supportedVersions":[{}],"capabilities":{{"tools":{{}}}},"ttlMs":0,"cacheScope":"private"}}"#,
                    versions.join(",")
                );
                let result = RawJson::new(&result).expect("JSON");
                // Its exchange may be gone already (cut): nothing to answer then.
                let _ = self.server.respond(now, req.handle(), &result);
            }
            "tools/call" => {
                let token = serde_json::from_str::<serde_json::Value>(
                    req.message().payload().map_or("null", |p| p.as_str()),
                )
                .ok()
                .and_then(|v| Some(v["_meta"]["progressToken"].as_str()?.to_owned()))
                .unwrap_or_default();
                if !self.seen_tokens.insert(token.clone()) {
                    self.violation(format!("server: sessionless request {token} arrived twice"));
                }
                self.plan_answer(req);
            }
            other => self.violation(format!("server: unexpected sessionless request {other}")),
        }
    }

    /// A `tools/call`: progress, perhaps a question to the client, then the answer.
    fn plan_answer(&mut self, req: &server::IncomingRequest) {
        let params: serde_json::Value = req
            .message()
            .payload()
            .and_then(|p| serde_json::from_str(p.as_str()).ok())
            .unwrap_or_default();
        let token = params["_meta"]["progressToken"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let life = self.life;
        self.handles.insert((life, req.handle()), token.clone());
        let mut at = self.now;
        let total = self.rng.range(0, self.plan.max_progress);
        let ask = req.session().filter(|_| self.rng.chance(self.plan.ask));
        let ask_at = self.rng.range(0, total);
        for n in 1..=total {
            at += self.rng.millis(0, 1500);
            if ask_at + 1 == n
                && let Some(s) = ask
            {
                self.at(at, Action::Task(life, Task::Ask(s)));
            }
            let task = Task::Progress {
                handle: req.handle(),
                session: req.session(),
                token: token.clone(),
                n,
                total,
            };
            self.at(at, Action::Task(life, task));
        }
        if total == 0
            && let Some(s) = ask
        {
            self.at(at, Action::Task(life, Task::Ask(s)));
        }
        at += self.rng.millis(0, 3000);
        let error = self.rng.chance(self.plan.err).then(|| {
            if self.rng.chance(500) {
                ErrorCode::METHOD_NOT_FOUND
            } else {
                ErrorCode::INTERNAL_ERROR
            }
        });
        let task = Task::Answer {
            handle: req.handle(),
            token,
            error,
        };
        self.at(at, Action::Task(life, task));
    }

    fn task(&mut self, task: Task) {
        let now = self.now;
        let life = self.life;
        match task {
            Task::Progress {
                handle,
                session,
                token,
                n,
                total,
            } => {
                let json = self.plan.mode == ResponseMode::Json;
                let seq = session.map(|s| self.get_seq.get(&(life, s)).copied().unwrap_or(0) + 1);
                let seq_field = match seq {
                    Some(seq) if json => format!(r#","seq":{seq}"#),
                    _ => String::new(),
                };
                let params = format!(
                    r#"{{"progressToken":"{token}","progress":{n},"total":{total}{seq_field}}}"#
                );
                let params = RawJson::new(&params).expect("JSON");
                let sent = self.server.notify(
                    now,
                    Target::Request(handle),
                    "notifications/progress",
                    Some(&params),
                );
                if let Ok(d) = sent {
                    self.progress_sent.entry(token).or_default().push((n, d));
                    if json && let Some(s) = session {
                        *self.get_seq.entry((life, s)).or_default() += 1;
                    }
                }
            }
            Task::Ask(s) => {
                let seq = self.get_seq.get(&(life, s)).copied().unwrap_or(0) + 1;
                let params = format!(r#"{{"seq":{seq}}}"#);
                let params = RawJson::new(&params).expect("JSON");
                let deadline = now + self.rng.millis(3000, 20_000);
                if let Ok(id) = self.server.request(
                    now,
                    Target::Session(s),
                    "roots/list",
                    Some(&params),
                    Some(deadline),
                ) {
                    *self.get_seq.entry((life, s)).or_default() += 1;
                    self.asks.insert((life, id), Ask::Open(s));
                }
            }
            Task::Answer {
                handle,
                token,
                error,
            } => {
                let sent = match error {
                    // The message is the token, so that the client can tell whose it is.
                    Some(code) => self.server.respond_error(now, handle, code, &token, None),
                    None => {
                        let result =
                            format!(r#"{{"content":[{{"type":"text","text":"{token}"}}]}}"#);
                        let result = RawJson::new(&result).expect("JSON");
                        self.server.respond(now, handle, &result)
                    }
                };
                if let Ok(d) = sent {
                    self.log(|| format!("server: answered {token} (error {error:?}): {d:?}"));
                    if error.is_some() {
                        self.errs.insert(token.clone());
                    }
                    self.answered_abandoned(&token);
                    self.answers.insert(token, (now, d));
                }
            }
        }
    }

    /// The server application could answer `token`: at 2026-07-28 the client closes the
    /// response of a call it gives up on (cancel, deadline, close), and the server must
    /// learn it (MODERN-11) and settle the call, unless a fault took that connection
    /// first (the server learns of a half-open cut late).
    fn answered_abandoned(&mut self, token: &str) {
        let Some((i, id)) = self.tokens.get(token).cloned() else {
            return;
        };
        let inc = &self.incs[i];
        if inc.era != Some(Era::Sessionless) || inc.faulted_posts.contains(&id) {
            return;
        }
        let how = inc.requests[&id].end.as_ref().map(|(_, how)| how.clone());
        if matches!(
            how.as_deref(),
            Some("cancelled" | "failed: Timeout" | "failed: Closed")
        ) {
            self.violation(format!(
                "server: answered {token}, though its client ended it ({how:?}) and closed its response: the server never learnt (MODERN-11)"
            ));
        }
    }

    // -----------------------------------------------------------------------------------
    // The end.

    fn finish(mut self) -> Report {
        for i in 0..self.incs.len() {
            let open: Vec<RequestId> = self.incs[i]
                .requests
                .iter()
                .filter(|(_, r)| r.end.is_none())
                .map(|(id, _)| id.clone())
                .collect();
            for id in open {
                self.violation(format!("client {i}: request {id} never ended"));
            }
            if !self.incs[i].ended() {
                self.violation(format!("client {i}: never closed"));
            }
            if !self.incs[i].client.is_idle() {
                let c = format!("{:?}", self.incs[i].client);
                self.violation(format!("client {i}: not idle at the end: {c}"));
            }
        }
        let open: Vec<RequestId> = self
            .asks
            .iter()
            .filter(|((life, _), ask)| matches!(ask, Ask::Open(_)) && *life == self.life)
            .map(|((_, id), _)| id.clone())
            .collect();
        for id in open {
            self.violation(format!("server request {id} never ended"));
        }
        if !self.server.is_idle() {
            let s = format!("{:?}", self.server);
            self.violation(format!("server: not idle at the end: {s}"));
        }
        if !self.conns.is_empty() {
            let n = self.conns.len();
            self.violation(format!("{n} exchanges left in the net"));
        }
        Report {
            seed: self.seed,
            plan: self.plan.summary,
            violations: self.violations,
            stats: self.stats,
            trace: self.trace,
        }
    }
}

/// Whether an SSE body so far dispatched an event carrying an `id` (a line `id:…`, then
/// the blank line that ends its block). The server writes LF line ends.
fn dispatched_id(body: &[u8]) -> bool {
    let mut at = 0;
    while let Some(i) = find(&body[at..], b"id:") {
        let start = at + i;
        if (start == 0 || body[start - 1] == b'\n') && find(&body[start..], b"\n\n").is_some() {
            return true;
        }
        at = start + 3;
    }
    false
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
