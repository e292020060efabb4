//! An op model of the stdio gateway ([`Gateway`](mcpwire::bridge::Gateway) behind the
//! HTTP server, its children played by the model through a [`Rig`]), shared by the
//! `bridge_props` proptest and the `bridge_gateway` fuzz target: bytes become a
//! [`Setup`] and a list of [`Op`]s ([`ops`]) that [`run`] plays, so a failing fuzz input
//! replays as a test.
//!
//! The clients open sessions at any 2025 revision and call tools in them (BRIDGE-1),
//! call tools on 2026-07-28 with or without the `elicitation` and `sampling`
//! capabilities and progress tokens (BRIDGE-2), answer the children's questions (a
//! POSTed response in a session; a retry with `inputResponses` and the `requestState`
//! of the `input_required` answer on 2026-07-28, BRIDGE-3), cancel (a
//! `notifications/cancelled` in a session, a dropped connection on 2026-07-28) and
//! DELETE sessions. The children answer their `initialize` or fail it, answer the
//! requests they were given (whole or in two chunks), send progress, ask questions and
//! give them up, write garbage lines (STDIO-6) and responses to ids nobody sent, exit,
//! and stay silent past the stall timeout (BRIDGE-4). Time passes.
//!
//! [`run`] keeps its own account of which request runs on which child under which id
//! and checks after every op, panicking with the op and what was wrong:
//!
//! - every line written to a child is one JSON-RPC message (STDIO-1: the rig parses);
//! - each HTTP request gets at most one JSON-RPC answer, carrying its own id, and an
//!   answer never reaches another request or session (a child's result carries the
//!   number of the request it was given; a progress notification carries the token of
//!   the request of its exchange; a question reaches only its session);
//! - a session request reaches its session's child with its id (BRIDGE-1); a
//!   2026-07-28 request reaches a pool child with an id unique among that child's
//!   requests in flight, its progress token replaced by that id and the protocol's
//!   `_meta` keys left out (BRIDGE-2); a pool child never runs two requests at once
//!   (one it asked a question for, parked, counts), no pool child idles while a
//!   request waits, and the pool and the session children stay within their bounds
//!   (BRIDGE-5); a request the client cancelled never reaches a child;
//! - the child's answer reaches its request (the session's as it is, the 2026-07-28
//!   one completed); a question of a pool child is an `input_required` answer listing
//!   exactly the questions open on it, or -32601 to the child when the client cannot
//!   take it, or -32603 when it runs nothing; the retry's answers reach exactly the
//!   questions they answer, each carrying what the client answered to it (BRIDGE-3);
//!   a question is abandoned (the child's request cancelled) once, and only once, its
//!   retry is late;
//! - a child that exits or stalls fails exactly the requests the model has in flight
//!   on it, each with -32603, and reports how many (BRIDGE-4); a child is stalled only
//!   when it owed an answer and was silent for the stall timeout, and always then; a
//!   response to an unknown id and a garbage line answer nothing;
//! - `children()` is the number of children started and not exited; and at the end,
//!   once every child has answered what it was given and every question was
//!   abandoned, every request not cancelled has its answer and `in_flight()` is 0, and
//!   once every child exited, `children()` is 0.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use arbitrary::Unstructured;
use mcpwire::bridge::{ChildId, Config, Exit, Happening, Role};
use mcpwire::server::ExchangeId;
use serde_json::{Value, json};

use crate::bridge::{Rig, modern_meta};
use crate::server::Harness;

/// The most ops one input makes.
pub const MAX_OPS: usize = 128;

/// How long a child with requests waiting may stay silent.
pub const STALL: Duration = Duration::from_secs(10);

/// How long a pool child's question waits for the client's retry.
pub const INPUT_WAIT: Duration = Duration::from_secs(30);

/// The 2025 revisions a session opens at.
pub const REVISIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];

/// The gateway's bounds for one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    /// Pool children (0 to 2).
    pub pool: usize,
    /// 2026-07-28 requests waiting for a pool child (1 to 3).
    pub max_waiting: usize,
    /// Session children (1 to 3).
    pub max_children: usize,
}

impl Setup {
    /// The gateway's configuration.
    pub fn config(self) -> Config {
        Config::new()
            .with_pool(self.pool)
            .with_max_waiting(self.max_waiting)
            .with_max_children(self.max_children)
            .with_stall(STALL)
            .with_input_wait(INPUT_WAIT)
            .with_grace(Duration::from_secs(2))
    }
}

/// One move. Numbers pick a session, a child, a request or a flight modulo how many
/// there are then.
#[derive(Clone, Debug)]
pub enum Op {
    /// A client POSTs `initialize` at revision `REVISIONS[.0 % 3]`.
    Open(u8),
    /// A child whose `initialize` is open answers it (`ok`) or fails it; `.2` picks the
    /// revision a session child says (not always the negotiated one).
    InitAnswer(u8, bool, u8),
    /// `tools/call` in session `session`, id from `id`, with a progress token or not.
    SessionCall {
        /// The session.
        session: u8,
        /// The JSON-RPC id.
        id: u8,
        /// Whether it has a progress token.
        progress: bool,
    },
    /// A 2026-07-28 `tools/call`: id from `id`, capabilities `caps` (bit 0
    /// elicitation, bit 1 sampling), with a progress token or not.
    ModernCall {
        /// The JSON-RPC id.
        id: u8,
        /// The capabilities.
        caps: u8,
        /// Whether it has a progress token.
        progress: bool,
    },
    /// Child `.0` answers its request `.1` (a result, or an error when `.2` is odd),
    /// the line cut in two chunks at `.3` (whole when 0).
    Answer(u8, u8, u8, u8),
    /// Child `.0` sends progress for its request `.1`.
    Progress(u8, u8),
    /// Child `.0` asks its client something: `elicitation/create`, or
    /// `sampling/createMessage` when `.1`.
    Ask(u8, bool),
    /// Child `.0` gives up its open question `.1` (`notifications/cancelled`).
    GiveUp(u8, u8),
    /// A session's client answers question `.0` it received (POSTs the response).
    ClientAnswer(u8),
    /// A 2026-07-28 client retries `input_required` answer `.0` with the answers to the
    /// questions picked by the bits of `.1`, with a progress token or not.
    Retry(u8, u8, bool),
    /// Child `.0` writes garbage line `.1`.
    Garbage(u8, u8),
    /// Child `.0` answers an id nobody sent.
    Unknown(u8),
    /// Child `.0` exits with status `.1`.
    Exit(u8, u8),
    /// Time passes beyond the stall timeout.
    Stall,
    /// The client gives up request `.0`: `notifications/cancelled` in a session, its
    /// connection dropped on 2026-07-28.
    Cancel(u8),
    /// DELETE of session `.0`.
    Delete(u8),
    /// Time passes: `.0` × 150 ms.
    Advance(u8),
    /// Pool child `.0` answers its request while its question waits for the client's
    /// retry (the child gave up waiting): the child is free, and the retry gets the
    /// answer.
    AnswerParked(u8),
}

/// The setup and the ops `data` makes (at most [`MAX_OPS`]).
pub fn ops(data: &[u8]) -> (Setup, Vec<Op>) {
    let mut u = Unstructured::new(data);
    let setup = Setup {
        pool: u.int_in_range(0..=2).unwrap_or(1),
        max_waiting: u.int_in_range(1..=3).unwrap_or(2),
        max_children: u.int_in_range(1..=3).unwrap_or(2),
    };
    let mut ops = Vec::new();
    while ops.len() < MAX_OPS && !u.is_empty() {
        // Weighted towards what moves a request: calls, answers, questions.
        const KINDS: [u8; 29] = [
            0, 0, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 6, 6, 7, 8, 9, 9, 10, 11, 12, 13, 14, 15, 16,
            17, 17, 4,
        ];
        let Ok(kind) = u.choose(&KINDS).copied() else {
            break;
        };
        let b = |u: &mut Unstructured<'_>| u.arbitrary::<u8>().unwrap_or(0);
        let t = |u: &mut Unstructured<'_>| u.arbitrary::<bool>().unwrap_or(false);
        ops.push(match kind {
            0 => Op::Open(b(&mut u)),
            1 => Op::InitAnswer(b(&mut u), b(&mut u) % 8 != 0, b(&mut u)),
            2 => Op::SessionCall {
                session: b(&mut u),
                id: b(&mut u),
                progress: t(&mut u),
            },
            3 => Op::ModernCall {
                id: b(&mut u),
                caps: b(&mut u),
                progress: t(&mut u),
            },
            4 => Op::Answer(b(&mut u), b(&mut u), b(&mut u), b(&mut u)),
            5 => Op::Progress(b(&mut u), b(&mut u)),
            6 => Op::Ask(b(&mut u), t(&mut u)),
            7 => Op::GiveUp(b(&mut u), b(&mut u)),
            8 => Op::ClientAnswer(b(&mut u)),
            9 => Op::Retry(b(&mut u), b(&mut u), t(&mut u)),
            10 => Op::Garbage(b(&mut u), b(&mut u)),
            11 => Op::Unknown(b(&mut u)),
            12 => Op::Exit(b(&mut u), b(&mut u)),
            13 => Op::Stall,
            14 => Op::Cancel(b(&mut u)),
            15 => Op::Delete(b(&mut u)),
            16 => Op::AnswerParked(b(&mut u)),
            _ => Op::Advance(b(&mut u)),
        });
    }
    (setup, ops)
}

/// What a run reached, so that a test can tell the model moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Sessions opened (their `initialize` answered with a result).
    pub sessions: usize,
    /// Requests answered with a child's result.
    pub results: usize,
    /// `input_required` answers.
    pub input_required: usize,
    /// Requests failed with -32603.
    pub failed: usize,
    /// Children stalled.
    pub stalls: usize,
    /// Questions abandoned.
    pub abandoned: usize,
    /// Answers to questions that reached their child.
    pub questions_answered: usize,
}

/// Plays the ops `data` makes; panics at the first violation.
pub fn run_bytes(data: &[u8]) -> Seen {
    let (setup, ops) = ops(data);
    run(setup, &ops)
}

/// Plays `ops` on a gateway of `setup`, then settles (every child answers, every
/// question is abandoned, every child exits); what it reached. Panics at the first
/// violation, naming the op.
pub fn run(setup: Setup, ops: &[Op]) -> Seen {
    let mut m = Model::new(setup);
    m.observe("the start", &mut Step::default());
    for (i, op) in ops.iter().enumerate() {
        let what = format!("op {i} {op:?}");
        m.play(&what, op);
    }
    m.settle();
    m.seen
}

/// What kind of HTTP request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A session's `initialize` (session index).
    Init(usize),
    /// A session's `tools/call` (session index).
    Session(usize),
    /// A 2026-07-28 `tools/call`.
    Modern,
}

/// One HTTP request of a client.
#[derive(Debug)]
struct Req {
    x: ExchangeId,
    id: Value,
    kind: Kind,
    /// Its progress token.
    token: Option<Value>,
    /// The request whose arguments the child got: itself, or the first of a chain of
    /// retries.
    origin: usize,
    /// bit 0: elicitation, bit 1: sampling.
    caps: u8,
    /// Its JSON-RPC answer, once it came.
    answer: Option<Value>,
    /// The HTTP status of its answer.
    status: u16,
    /// The client gave it up (or its session went): no answer is owed.
    over: bool,
    /// The client gave it up itself (cancel, disconnect).
    cancelled: bool,
    /// Reached a child.
    forwarded: bool,
    /// The body length seen last.
    seen_len: Option<usize>,
    /// Progress values seen on its exchange.
    progress: Vec<f64>,
}

/// One session of the model.
#[derive(Debug)]
struct Session {
    version: &'static str,
    init: usize,
    child: Option<ChildId>,
    sid: Option<String>,
    dead: bool,
}

/// A request a child was given and has not answered (nor been told to drop).
#[derive(Debug, Clone)]
struct Flight {
    wire: Value,
    /// The request whose arguments it carries.
    origin: usize,
    /// The HTTP request waiting for it; `None` while parked (a 2026-07-28 question
    /// waits for the client's retry).
    holder: Option<usize>,
    /// The progress token the child was given.
    token: Option<Value>,
    /// Requests whose `input_required` answer's state resumes it (while parked).
    park_reqs: Vec<usize>,
    /// When it was parked last.
    parked_at: Option<Instant>,
    /// Progress sent so far.
    progress: u32,
    /// Questions asked since it was parked from running (the gateway's keys `q1` …).
    keys: usize,
}

/// A question a child asked.
#[derive(Debug, Clone)]
struct Question {
    id: Value,
    marker: String,
    /// The child answered it, or gave it up.
    closed: bool,
    /// What the gateway wrote back to the child for it.
    answer: Option<Value>,
    /// Asked while this flight (by wire) was parked or ran (a pool child).
    flight: Option<Value>,
}

/// One child as the model sees it.
#[derive(Debug)]
struct ChildM {
    role: Role,
    exited: bool,
    stopping: bool,
    /// Its `initialize` is open: the id, and the session request it answers.
    init: Option<(Value, Option<usize>)>,
    ready: bool,
    flights: Vec<Flight>,
    questions: Vec<Question>,
    next_q: u64,
    last_output: Instant,
    /// When it began to owe an answer (spawn, or its first request when it owed none).
    owing_since: Instant,
}

impl ChildM {
    fn owes(&self) -> bool {
        !self.exited
            && !self.stopping
            && (self.init.is_some() || self.flights.iter().any(|f| f.holder.is_some()))
    }

    fn live(&self) -> bool {
        !self.exited && !self.stopping
    }
}

/// A question a session's client received.
#[derive(Debug)]
struct ClientQuestion {
    session: usize,
    id: Value,
    marker: String,
    answered: bool,
}

/// What must hold once an op is done.
#[derive(Debug)]
enum Must {
    /// The request is answered with a result carrying `r<marker>`.
    Result(usize, usize),
    /// The request is answered with an error of this code (and a message containing
    /// the text).
    Error(usize, i64, Option<String>),
    /// The request is answered `input_required` listing exactly these markers.
    InputRequired(usize, Vec<String>),
    /// The request is answered with a result carrying `r<marker>`, or -32602.
    ResultOrStale(usize, usize),
    /// The request is not answered.
    Pending(usize),
    /// The request reached a child, or was answered.
    Reached(usize),
    /// The child got a response to its question (by id), an error of this code when
    /// given.
    ChildGot(ChildId, Value, Option<i64>),
    /// The child was told to drop its request `wire`.
    ChildCancelled(ChildId, Value),
    /// The child's input is closed.
    Stopped(ChildId),
}

/// What an op expects.
#[derive(Debug, Default)]
struct Step {
    /// The requests that may get an answer in this op (`None`: any).
    allowed: Option<BTreeSet<usize>>,
    musts: Vec<Must>,
    /// Time passed: the children that owed an answer before.
    owing_before: Option<BTreeSet<ChildId>>,
    /// Children whose input the op closed, with the requests that were waiting on
    /// them (their `initialize` included).
    stopped: Vec<(ChildId, Vec<usize>)>,
}

impl Step {
    fn only(reqs: &[usize]) -> Self {
        Self {
            allowed: Some(reqs.iter().copied().collect()),
            ..Self::default()
        }
    }
}

struct Model {
    rig: Rig,
    setup: Setup,
    reqs: Vec<Req>,
    sessions: Vec<Session>,
    children: BTreeMap<ChildId, ChildM>,
    client_questions: Vec<ClientQuestion>,
    reports_seen: usize,
    next_token: u64,
    seen: Seen,
    /// Requests whose parked request the child answered: a retry of them gets that
    /// answer or is stale (request → the child's marker).
    answered_parked: BTreeMap<usize, usize>,
    /// The ops played so far, for the message of a violation.
    trail: Vec<String>,
}

fn id_of(b: u8) -> Value {
    if b % 2 == 0 {
        json!(u64::from(b / 2 % 5))
    } else {
        json!(format!("s{}", b / 2 % 5))
    }
}

const GARBAGE: [&[u8]; 7] = [
    b"Debugger attached.\n",
    b"{}\n",
    b"[]\n",
    b"{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}\n",
    b"\xff\xfe not UTF-8\n",
    b"{\"jsonrpc\":\"2.0\",\"result\":{}}\n",
    b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-1,\"message\":\"x\"}}\n",
];

impl Model {
    fn new(setup: Setup) -> Self {
        let rig = Rig::new(setup.config());
        Self {
            rig,
            setup,
            reqs: Vec::new(),
            sessions: Vec::new(),
            children: BTreeMap::new(),
            client_questions: Vec::new(),
            reports_seen: 0,
            next_token: 1,
            seen: Seen::default(),
            answered_parked: BTreeMap::new(),
            trail: Vec::new(),
        }
    }

    fn now(&self) -> Instant {
        self.rig.h.now
    }

    #[track_caller]
    fn fail(&self, what: &str, why: &str) -> ! {
        let tail: Vec<&String> = self.trail.iter().rev().take(12).rev().collect();
        panic!("bridge op model: after {what}: {why}\n  recent ops: {tail:#?}")
    }

    fn new_req(&mut self, x: ExchangeId, id: Value, kind: Kind, token: Option<Value>, caps: u8) {
        let n = self.reqs.len();
        self.reqs.push(Req {
            x,
            id,
            kind,
            token,
            origin: n,
            caps,
            answer: None,
            status: 0,
            over: false,
            cancelled: false,
            forwarded: false,
            seen_len: None,
            progress: Vec::new(),
        });
    }

    /// Live children of the model, in order.
    fn live_children(&self) -> Vec<ChildId> {
        self.children
            .iter()
            .filter(|(_, c)| c.live())
            .map(|(id, _)| *id)
            .collect()
    }

    fn pick<T: Copy>(list: &[T], i: u8) -> Option<T> {
        (!list.is_empty()).then(|| list[usize::from(i) % list.len()])
    }

    fn session_headers(&self, s: usize) -> Option<(String, &'static str)> {
        let session = &self.sessions[s];
        Some((session.sid.clone()?, session.version))
    }

    fn play(&mut self, what: &str, op: &Op) {
        self.trail.push(what.to_owned());
        let mut step = Step::default();
        match op {
            Op::Open(v) => step = self.open(REVISIONS[usize::from(*v) % 3]),
            Op::InitAnswer(c, ok, v) => {
                let starting: Vec<ChildId> = self
                    .children
                    .iter()
                    .filter(|(_, c)| c.live() && c.init.is_some())
                    .map(|(id, _)| *id)
                    .collect();
                if let Some(child) = Self::pick(&starting, *c) {
                    step = self.init_answer(child, *ok, *v);
                }
            }
            Op::SessionCall {
                session,
                id,
                progress,
            } => {
                let open: Vec<usize> = (0..self.sessions.len())
                    .filter(|s| self.sessions[*s].sid.is_some())
                    .collect();
                if let Some(s) = Self::pick(&open, *session) {
                    step = self.session_call(s, id_of(*id), *progress);
                }
            }
            Op::ModernCall { id, caps, progress } => {
                step = self.modern_call(id_of(*id), caps & 3, *progress);
            }
            Op::Answer(c, f, error, at) => {
                let busy = self
                    .children_with(|c| c.live() && c.flights.iter().any(|f| f.holder.is_some()));
                if let Some(child) = Self::pick(&busy, *c) {
                    let held: Vec<usize> = (0..self.children[&child].flights.len())
                        .filter(|i| self.children[&child].flights[*i].holder.is_some())
                        .collect();
                    let at_flight = Self::pick(&held, *f).expect("a held flight");
                    step = self.child_answers(child, at_flight, error % 2 == 1, *at);
                }
            }
            Op::AnswerParked(c) => {
                let parked = self
                    .children_with(|c| c.live() && c.flights.iter().any(|f| f.holder.is_none()));
                if let Some(child) = Self::pick(&parked, *c) {
                    let at_flight = self.children[&child]
                        .flights
                        .iter()
                        .position(|f| f.holder.is_none())
                        .expect("a parked flight");
                    step = self.child_answers(child, at_flight, false, 0);
                }
            }
            Op::Progress(c, f) => {
                let busy = self.children_with(|c| c.live() && !c.flights.is_empty());
                if let Some(child) = Self::pick(&busy, *c) {
                    step = self.progress(child, *f);
                }
            }
            Op::Ask(c, sampling) => {
                if let Some(child) = Self::pick(&self.live_children(), *c) {
                    step = self.ask(child, *sampling);
                }
            }
            Op::GiveUp(c, q) => {
                let asking =
                    self.children_with(|c| c.live() && c.questions.iter().any(|q| !q.closed));
                if let Some(child) = Self::pick(&asking, *c) {
                    step = self.give_up(child, *q);
                }
            }
            Op::ClientAnswer(q) => {
                let open: Vec<usize> = (0..self.client_questions.len())
                    .filter(|i| !self.client_questions[*i].answered)
                    .collect();
                if let Some(i) = Self::pick(&open, *q) {
                    step = self.client_answer(i);
                }
            }
            Op::Retry(r, mask, progress) => {
                let asked: Vec<usize> = (0..self.reqs.len())
                    .filter(|r| input_required(self.reqs[*r].answer.as_ref()))
                    .collect();
                if let Some(r) = Self::pick(&asked, *r) {
                    step = self.retry(r, *mask, *progress);
                }
            }
            Op::Garbage(c, g) => {
                if let Some(child) = Self::pick(&self.live_children(), *c) {
                    let line = GARBAGE[usize::from(*g) % GARBAGE.len()];
                    step = Step::only(&[]);
                    self.output(child, line);
                }
            }
            Op::Unknown(c) => {
                if let Some(child) = Self::pick(&self.live_children(), *c) {
                    step = Step::only(&[]);
                    let id = if c % 2 == 0 {
                        json!(424_242)
                    } else {
                        json!("nobody")
                    };
                    let line = json!({"jsonrpc":"2.0","id":id,"result":{"content":[]}});
                    self.output(child, format!("{line}\n").as_bytes());
                }
            }
            Op::Exit(c, code) => {
                let alive = self.children_with(|c| !c.exited);
                if let Some(child) = Self::pick(&alive, *c) {
                    step = self.exit(child, i32::from(*code));
                }
            }
            Op::Stall => step = self.advance(STALL + Duration::from_secs(1), true),
            Op::Cancel(r) => {
                let open: Vec<usize> = (0..self.reqs.len())
                    .filter(|r| {
                        let req = &self.reqs[*r];
                        req.answer.is_none() && !req.over && !matches!(req.kind, Kind::Init(_))
                    })
                    .collect();
                if let Some(r) = Self::pick(&open, *r) {
                    step = self.cancel(r);
                }
            }
            Op::Delete(s) => {
                let open: Vec<usize> = (0..self.sessions.len())
                    .filter(|s| self.sessions[*s].sid.is_some())
                    .collect();
                if let Some(s) = Self::pick(&open, *s) {
                    step = self.delete(s);
                }
            }
            Op::Advance(t) => {
                step = self.advance(Duration::from_millis(150 * u64::from(*t)), false);
            }
        }
        self.observe(what, &mut step);
    }

    fn children_with(&self, f: impl Fn(&ChildM) -> bool) -> Vec<ChildId> {
        self.children
            .iter()
            .filter(|(_, c)| f(c))
            .map(|(id, _)| *id)
            .collect()
    }

    /// The child writes `bytes` on its output.
    fn output(&mut self, child: ChildId, bytes: &[u8]) {
        let now = self.now();
        if let Some(c) = self.children.get_mut(&child) {
            c.last_output = now;
        }
        self.rig
            .gateway
            .child_output(&mut self.rig.h.server, now, child, bytes);
        self.rig.pump();
    }

    fn send(&mut self, child: ChildId, message: &Value) {
        self.output(child, format!("{message}\n").as_bytes());
    }

    // ---- The clients' moves ------------------------------------------------------

    fn open(&mut self, version: &'static str) -> Step {
        let s = self.sessions.len();
        let n = self.reqs.len();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{"sampling":{{}},"elicitation":{{}}}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        );
        let x = self.rig.post(None, None, &body);
        self.new_req(x, json!(0), Kind::Init(s), None, 0);
        self.sessions.push(Session {
            version,
            init: n,
            child: None,
            sid: None,
            dead: false,
        });
        // Its child is the one spawned now, if any.
        Step::only(&[n])
    }

    fn init_answer(&mut self, child: ChildId, ok: bool, v: u8) -> Step {
        let c = &self.children[&child];
        let Some((id, req)) = c.init.clone() else {
            return Step::default();
        };
        let role = c.role;
        let mut step = Step::default();
        match (role, ok) {
            (Role::Pool, true) => {
                self.send(
                    child,
                    &json!({"jsonrpc":"2.0","id":id,"result":{
                        "protocolVersion":"2025-11-25","capabilities":{"tools":{}},
                        "serverInfo":{"name":"stdio-server","version":"1"}}}),
                );
                if let Some(c) = self.children.get_mut(&child) {
                    c.init = None;
                    c.ready = true;
                }
            }
            (Role::Pool, false) => {
                self.send(
                    child,
                    &json!({"jsonrpc":"2.0","id":id,"error":{"code":-32000,"message":"no"}}),
                );
                if let Some(c) = self.children.get_mut(&child) {
                    c.init = None;
                }
                step.musts.push(Must::Stopped(child));
            }
            (Role::Session(_), ok) => {
                let req = req.expect("a session's initialize");
                let Kind::Init(s) = self.reqs[req].kind else {
                    unreachable!()
                };
                let said = REVISIONS[usize::from(v) % 3];
                let line = if ok {
                    json!({"jsonrpc":"2.0","id":id,"result":{
                        "protocolVersion":said,"capabilities":{"tools":{}},
                        "serverInfo":{"name":"stdio-server","version":"1"},
                        "content":[{"type":"text","text":format!("r{req}")}]}})
                } else {
                    json!({"jsonrpc":"2.0","id":id,"error":{"code":-32000,"message":"no"}})
                };
                self.send(child, &line);
                if let Some(c) = self.children.get_mut(&child) {
                    c.init = None;
                    c.ready = ok;
                }
                if ok {
                    step.musts.push(Must::Result(req, req));
                    let sid = self
                        .rig
                        .h
                        .reply(self.reqs[req].x)
                        .header("mcp-session-id")
                        .map(str::to_owned);
                    if let Some(sid) = sid {
                        let version = self.sessions[s].version;
                        self.rig.post(
                            Some(&sid),
                            Some(version),
                            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                        );
                        self.sessions[s].sid = Some(sid);
                    }
                } else {
                    step.musts.push(Must::Error(req, -32000, None));
                    step.musts.push(Must::Stopped(child));
                    self.sessions[s].dead = true;
                }
            }
        }
        step
    }

    fn session_call(&mut self, s: usize, id: Value, progress: bool) -> Step {
        let Some((sid, version)) = self.session_headers(s) else {
            return Step::default();
        };
        let n = self.reqs.len();
        let token = progress.then(|| json!(format!("t{n}")));
        let mut params = json!({"name":"echo","arguments":{"n":n}});
        if let Some(token) = &token {
            params["_meta"] = json!({"progressToken": token});
        }
        let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":params});
        let x = self.rig.post(Some(&sid), Some(version), &body.to_string());
        self.new_req(x, id, Kind::Session(s), token, 0);
        let mut step = Step::only(&[n]);
        let serving = self.sessions[s]
            .child
            .is_some_and(|c| self.children[&c].live() && self.children[&c].ready);
        if serving && !self.sessions[s].dead {
            step.musts.push(Must::Reached(n));
        }
        step
    }

    fn modern_body(n: usize, id: &Value, caps: u8, token: Option<&Value>, extra: &str) -> String {
        let mut capabilities = Vec::new();
        if caps & 1 != 0 {
            capabilities.push(r#""elicitation":{}"#);
        }
        if caps & 2 != 0 {
            capabilities.push(r#""sampling":{}"#);
        }
        let mut meta = modern_meta(&format!("{{{}}}", capabilities.join(",")));
        if let Some(token) = token {
            let _ = write!(meta, r#","progressToken":{token}"#);
        }
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"n":{n}}}{extra},"_meta":{{{meta}}}}}}}"#
        )
    }

    fn next_token(&mut self) -> Value {
        self.next_token += 1;
        if self.next_token % 2 == 0 {
            json!(self.next_token)
        } else {
            json!(format!("p{}", self.next_token))
        }
    }

    fn idle_pool_child(&self) -> bool {
        self.children
            .values()
            .any(|c| c.role == Role::Pool && c.live() && c.ready && c.flights.is_empty())
    }

    fn modern_call(&mut self, id: Value, caps: u8, progress: bool) -> Step {
        let n = self.reqs.len();
        let token = progress.then(|| self.next_token());
        let body = Self::modern_body(n, &id, caps, token.as_ref(), "");
        let idle = self.idle_pool_child();
        let x = self.rig.post_modern("tools/call", Some("echo"), &body);
        self.new_req(x, id, Kind::Modern, token, caps);
        let mut step = Step::only(&[n]);
        if idle {
            step.musts.push(Must::Reached(n));
        }
        step
    }

    fn cancel(&mut self, r: usize) -> Step {
        let mut step = Step::only(&[]);
        let on = self.flight_of(r);
        match self.reqs[r].kind {
            Kind::Session(s) => {
                let Some((sid, version)) = self.session_headers(s) else {
                    return Step::default();
                };
                let body = json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                    "params":{"requestId":self.reqs[r].id,"reason":"enough"}});
                self.rig.post(Some(&sid), Some(version), &body.to_string());
            }
            Kind::Modern => {
                let now = self.now();
                self.rig.h.server.handle_disconnect(now, self.reqs[r].x);
                self.rig.pump();
                // The child it ran on is free: a waiting request may go to it.
                step.allowed = None;
            }
            Kind::Init(_) => return Step::default(),
        }
        self.reqs[r].over = true;
        self.reqs[r].cancelled = true;
        if let Some((child, wire)) = on {
            step.musts.push(Must::ChildCancelled(child, wire));
        }
        step
    }

    /// The child and wire id a request waits on, if it does.
    fn flight_of(&self, r: usize) -> Option<(ChildId, Value)> {
        self.children.iter().find_map(|(id, c)| {
            if !c.live() {
                return None;
            }
            c.flights
                .iter()
                .find(|f| f.holder == Some(r))
                .map(|f| (*id, f.wire.clone()))
        })
    }

    fn delete(&mut self, s: usize) -> Step {
        let Some((sid, version)) = self.session_headers(s) else {
            return Step::default();
        };
        let head = Harness::head(
            "DELETE",
            "/mcp",
            &[("mcp-session-id", &sid), ("mcp-protocol-version", version)],
        );
        self.rig.h.send(head, None);
        self.rig.pump();
        let mut step = Step::default();
        if !self.sessions[s].dead
            && let Some(child) = self.sessions[s].child
            && self.children[&child].live()
        {
            step.musts.push(Must::Stopped(child));
        }
        self.sessions[s].dead = true;
        for req in &mut self.reqs {
            if matches!(req.kind, Kind::Session(t) | Kind::Init(t) if t == s)
                && req.answer.is_none()
            {
                req.over = true;
            }
        }
        step
    }

    fn client_answer(&mut self, i: usize) -> Step {
        let q = &self.client_questions[i];
        let (s, id, marker) = (q.session, q.id.clone(), q.marker.clone());
        self.client_questions[i].answered = true;
        let Some((sid, version)) = self.session_headers(s) else {
            return Step::default();
        };
        let body =
            json!({"jsonrpc":"2.0","id":id,"result":{"action":"accept","content":{"for":marker}}});
        self.rig.post(Some(&sid), Some(version), &body.to_string());
        let mut step = Step::only(&[]);
        // The child that asked gets it, with its own id, while it lives.
        if !self.sessions[s].dead
            && let Some(child) = self.sessions[s].child
            && self.children[&child].live()
            && let Some(q) = self.children[&child]
                .questions
                .iter()
                .find(|q| q.marker == marker && !q.closed && q.answer.is_none())
        {
            step.musts.push(Must::ChildGot(child, q.id.clone(), None));
        }
        step
    }

    fn retry(&mut self, r: usize, mask: u8, progress: bool) -> Step {
        let answer = self.reqs[r].answer.clone().unwrap_or_default();
        let result = &answer["result"];
        let state = result["requestState"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let requests = result["inputRequests"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut responses = serde_json::Map::new();
        let mut answered = BTreeSet::new();
        for (i, (key, request)) in requests.iter().enumerate() {
            if mask & (1 << (i % 8)) != 0 {
                let marker = request["params"]["marker"].as_str().unwrap_or_default();
                responses.insert(
                    key.clone(),
                    json!({"action":"accept","content":{"for":marker}}),
                );
                answered.insert(marker.to_owned());
            }
        }
        let origin = self.reqs[r].origin;
        let caps = self.reqs[r].caps;
        let n = self.reqs.len();
        let id = id_of(mask);
        let token = progress.then(|| self.next_token());
        let extra = format!(
            r#","inputResponses":{},"requestState":{}"#,
            Value::Object(responses),
            json!(state)
        );
        let body = Self::modern_body(origin, &id, caps, token.as_ref(), &extra);
        // Where the request it continues waits, if it still does.
        let parked = self.children.iter().find_map(|(child, c)| {
            if !c.live() {
                return None;
            }
            c.flights
                .iter()
                .position(|f| f.holder.is_none() && f.park_reqs.contains(&r))
                .map(|at| (*child, at))
        });
        let x = self.rig.post_modern("tools/call", Some("echo"), &body);
        self.new_req(x, id, Kind::Modern, token, caps);
        self.reqs[n].origin = origin;
        self.reqs[n].forwarded = true;
        let mut step = Step::only(&[n]);
        let Some((child, at)) = parked else {
            step.musts.push(match self.answered_parked.get(&r) {
                Some(origin) => Must::ResultOrStale(n, *origin),
                None => Must::Error(n, -32602, None),
            });
            return step;
        };
        let now = self.now();
        let c = self.children.get_mut(&child).expect("a child");
        let wire = c.flights[at].wire.clone();
        let mut open = Vec::new();
        for q in &mut c.questions {
            if q.closed || q.answer.is_some() || q.flight.as_ref() != Some(&wire) {
                continue;
            }
            if answered.contains(&q.marker) {
                step.musts.push(Must::ChildGot(child, q.id.clone(), None));
            } else {
                open.push(q.marker.clone());
            }
        }
        let owed = c.owes();
        if open.is_empty() && !owed {
            c.owing_since = now;
        }
        let flight = &mut c.flights[at];
        if open.is_empty() {
            flight.holder = Some(n);
            flight.keys = 0;
            flight.park_reqs.clear();
            flight.parked_at = None;
            step.musts.push(Must::Pending(n));
        } else {
            flight.park_reqs.push(n);
            flight.parked_at = Some(now);
            step.musts.push(Must::InputRequired(n, open));
        }
        step
    }

    // ---- The children's moves ----------------------------------------------------

    fn child_answers(&mut self, child: ChildId, at_flight: usize, error: bool, at: u8) -> Step {
        let c = &self.children[&child];
        let flight = c.flights[at_flight].clone();
        let role = c.role;
        let line = if error {
            json!({"jsonrpc":"2.0","id":flight.wire,"error":{"code":-32000,"message":format!("e{}", flight.origin)}})
        } else {
            json!({"jsonrpc":"2.0","id":flight.wire,"result":{"content":[{"type":"text","text":format!("r{}", flight.origin)}]}})
        };
        let line = format!("{line}\n");
        // The request is over on the child.
        let c = self.children.get_mut(&child).expect("a child");
        c.flights.retain(|g| g.wire != flight.wire);
        for q in &mut c.questions {
            if q.flight.as_ref() == Some(&flight.wire) {
                // A question of a request that is over is answered by nobody.
                q.flight = None;
            }
        }
        let mut step = match flight.holder {
            // The next waiting request may go to the child now (a pool child).
            Some(r) if role == Role::Pool => Step {
                allowed: Some([r].into()),
                ..Step::default()
            },
            Some(r) => Step::only(&[r]),
            None => Step::only(&[]),
        };
        if let Some(r) = flight.holder
            && !self.reqs[r].over
        {
            step.musts.push(if error {
                Must::Error(r, -32000, Some(format!("e{}", flight.origin)))
            } else {
                Must::Result(r, flight.origin)
            });
        }
        if flight.holder.is_none() {
            // Parked: the answer has nobody to go to yet; a retry gets it or is stale.
            for r in flight.park_reqs {
                self.answered_parked.insert(r, flight.origin);
            }
        }
        let bytes = line.as_bytes();
        let cut = usize::from(at) % bytes.len();
        if cut == 0 {
            self.output(child, bytes);
        } else {
            self.output(child, &bytes[..cut]);
            self.output(child, &bytes[cut..]);
        }
        step
    }

    fn progress(&mut self, child: ChildId, f: u8) -> Step {
        let c = self.children.get_mut(&child).expect("a child");
        let at = usize::from(f) % c.flights.len();
        c.flights[at].progress += 1;
        let flight = c.flights[at].clone();
        let token = flight.token.clone().unwrap_or_else(|| flight.wire.clone());
        let line = json!({"jsonrpc":"2.0","method":"notifications/progress",
            "params":{"progressToken":token,"progress":flight.progress}});
        self.send(child, &line);
        Step::only(&[])
    }

    fn ask(&mut self, child: ChildId, sampling: bool) -> Step {
        let c = self.children.get_mut(&child).expect("a child");
        c.next_q += 1;
        let k = c.next_q;
        // Each child numbers its questions itself, so two children use the same ids.
        let id = if k % 2 == 0 {
            json!(k)
        } else {
            json!(format!("q{k}"))
        };
        let marker = format!("{child}-ask-{k}");
        let (method, params) = if sampling {
            (
                "sampling/createMessage",
                json!({"marker":marker,"messages":[],"maxTokens":1}),
            )
        } else {
            (
                "elicitation/create",
                json!({"marker":marker,"message":"name?","requestedSchema":{"type":"object","properties":{}}}),
            )
        };
        let role = c.role;
        let mut step = Step::only(&[]);
        let mut flight_wire = None;
        if role == Role::Pool {
            match c.flights.first_mut() {
                Some(flight) => {
                    flight_wire = Some(flight.wire.clone());
                    match flight.holder {
                        Some(r) => {
                            let need = if sampling { 2 } else { 1 };
                            if self.reqs[r].caps & need != 0 {
                                flight.holder = None;
                                flight.keys = 1;
                                flight.park_reqs = vec![r];
                                flight.parked_at = Some(self.rig.h.now);
                                step = Step::only(&[r]);
                                step.musts
                                    .push(Must::InputRequired(r, vec![marker.clone()]));
                            } else {
                                flight_wire = None;
                                step.musts
                                    .push(Must::ChildGot(child, id.clone(), Some(-32601)));
                            }
                        }
                        None => flight.keys += 1,
                    }
                }
                None => {
                    step.musts
                        .push(Must::ChildGot(child, id.clone(), Some(-32603)));
                }
            }
        }
        c.questions.push(Question {
            id: id.clone(),
            marker,
            closed: false,
            answer: None,
            flight: flight_wire,
        });
        let line = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        self.send(child, &line);
        step
    }

    fn give_up(&mut self, child: ChildId, q: u8) -> Step {
        let c = self.children.get_mut(&child).expect("a child");
        let open: Vec<usize> = (0..c.questions.len())
            .filter(|i| !c.questions[*i].closed)
            .collect();
        let Some(i) = Self::pick(&open, q) else {
            return Step::default();
        };
        c.questions[i].closed = true;
        let id = c.questions[i].id.clone();
        let line = json!({"jsonrpc":"2.0","method":"notifications/cancelled",
            "params":{"requestId":id,"reason":"timed out"}});
        self.send(child, &line);
        Step::only(&[])
    }

    fn exit(&mut self, child: ChildId, code: i32) -> Step {
        let c = &self.children[&child];
        let mut step = Step::default();
        let why = format!("exited with status {code}");
        if !c.stopping {
            for f in &c.flights {
                if let Some(r) = f.holder
                    && !self.reqs[r].over
                {
                    step.musts.push(Must::Error(r, -32603, Some(why.clone())));
                }
            }
            if let Some((_, Some(r))) = &c.init
                && !self.reqs[*r].over
            {
                step.musts.push(Must::Error(*r, -32603, Some(why.clone())));
            }
        }
        let expected = c.flights.iter().filter(|f| f.holder.is_some()).count()
            + usize::from(matches!(c.init, Some((_, Some(_)))));
        let was_stopping = c.stopping;
        let now = self.now();
        self.rig
            .gateway
            .child_exited(&mut self.rig.h.server, now, child, Exit::Code(code));
        self.rig.pump();
        let c = self.children.get_mut(&child).expect("a child");
        c.exited = true;
        c.flights.clear();
        c.init = None;
        if let Role::Session(_) = c.role
            && let Some(s) = self.sessions.iter().position(|s| s.child == Some(child))
        {
            self.sessions[s].dead = true;
        }
        let reported = self.rig.reported[self.reports_seen..]
            .iter()
            .find_map(|(c, h)| match h {
                Happening::Exited { failed, .. } if *c == child => Some(*failed),
                _ => None,
            });
        match reported {
            Some(failed) if failed != expected => self.fail(
                "an exit",
                &format!("{child} exited with {expected} request(s) in flight; reported {failed}"),
            ),
            None if !was_stopping || expected > 0 => {
                self.fail("an exit", &format!("{child}'s exit not reported"))
            }
            _ => {}
        }
        step
    }

    fn advance(&mut self, d: Duration, stall: bool) -> Step {
        let owing: BTreeSet<ChildId> = self
            .children
            .iter()
            .filter(|(_, c)| c.owes())
            .map(|(id, _)| *id)
            .collect();
        let mut step = Step::default();
        if stall {
            for child in &owing {
                step.musts.push(Must::Stopped(*child));
            }
        }
        step.owing_before = Some(owing);
        self.rig.advance(d);
        step
    }

    // ---- Checking ----------------------------------------------------------------

    /// Reads what the op did (the children's input, the reports, the answers) and
    /// checks it against the model and the op's expectations.
    fn observe(&mut self, what: &str, step: &mut Step) {
        self.sync_children(what, step);
        self.read_inputs(what);
        self.read_reports(what, step);
        self.read_answers(what, step);
        self.check_musts(what, step);
        self.check_global(what);
    }

    fn sync_children(&mut self, what: &str, step: &mut Step) {
        let now = self.now();
        let spawned: Vec<(ChildId, Option<Role>, bool)> = self
            .rig
            .children
            .iter()
            .map(|(id, c)| (*id, c.role, c.input_closed))
            .collect();
        for (id, role, closed) in spawned {
            if !self.children.contains_key(&id) {
                let role = role.unwrap_or_else(|| self.fail(what, "a child without a role"));
                self.children.insert(
                    id,
                    ChildM {
                        role,
                        exited: false,
                        stopping: false,
                        init: None,
                        ready: false,
                        flights: Vec::new(),
                        questions: Vec::new(),
                        next_q: 0,
                        last_output: now,
                        owing_since: now,
                    },
                );
                if let Role::Session(_) = role {
                    // The newest session without a child is the one it serves.
                    match self
                        .sessions
                        .iter()
                        .rposition(|s| s.child.is_none() && !s.dead)
                    {
                        Some(s) => self.sessions[s].child = Some(id),
                        None => self.fail(what, &format!("{id}: a session child for no session")),
                    }
                }
            }
            let c = self.children.get_mut(&id).expect("a child");
            if closed && !c.stopping {
                c.stopping = true;
                let mut waiting: Vec<usize> = c.flights.iter().filter_map(|f| f.holder).collect();
                if let Some((_, Some(r))) = c.init {
                    waiting.push(r);
                }
                c.flights.clear();
                c.init = None;
                // Their requests are failed (a stall: see the reports) or dropped with
                // their session.
                step.stopped.push((id, waiting));
                if let Role::Session(_) = self.children[&id].role
                    && let Some(s) = self.sessions.iter().position(|s| s.child == Some(id))
                {
                    self.sessions[s].dead = true;
                }
            }
        }
    }

    fn read_inputs(&mut self, what: &str) {
        let ids: Vec<ChildId> = self.children.keys().copied().collect();
        for child in ids {
            let input = std::mem::take(
                &mut self
                    .rig
                    .children
                    .get_mut(&child)
                    .expect("a spawned child")
                    .input,
            );
            for message in input {
                self.child_reads(what, child, &message);
            }
        }
    }

    /// One message written to `child`.
    fn child_reads(&mut self, what: &str, child: ChildId, m: &Value) {
        let now = self.now();
        if m["jsonrpc"] != "2.0" {
            self.fail(
                what,
                &format!("{child} was given a line that is not JSON-RPC 2.0: {m}"),
            );
        }
        let c = self.children.get(&child).expect("a child");
        if c.exited {
            self.fail(
                what,
                &format!("{child} was written to after it exited: {m}"),
            );
        }
        let method = m.get("method").and_then(Value::as_str);
        let id = m.get("id");
        match (method, id) {
            (Some("initialize"), Some(id)) => {
                if c.init.is_some() || c.ready {
                    self.fail(what, &format!("{child} was initialized twice: {m}"));
                }
                let req = match c.role {
                    Role::Pool => {
                        if *id != json!(0)
                            || m["params"]["protocolVersion"] != "2025-11-25"
                            || m["params"]["capabilities"]["elicitation"].is_null()
                        {
                            self.fail(what, &format!("a pool child's initialize: {m}"));
                        }
                        None
                    }
                    Role::Session(_) => {
                        let Some(s) = self.sessions.iter().position(|s| s.child == Some(child))
                        else {
                            self.fail(what, &format!("{child}: initialize of no session"));
                        };
                        let req = self.sessions[s].init;
                        if *id != self.reqs[req].id {
                            self.fail(what, &format!("BRIDGE-1: initialize id changed: {m}"));
                        }
                        if m["params"]["protocolVersion"] != self.sessions[s].version {
                            self.fail(
                                what,
                                &format!(
                                    "BRIDGE-1: initialize at {} carries another version: {m}",
                                    self.sessions[s].version
                                ),
                            );
                        }
                        self.reqs[req].forwarded = true;
                        Some(req)
                    }
                };
                let c = self.children.get_mut(&child).expect("a child");
                c.init = Some((id.clone(), req));
                c.owing_since = now;
            }
            (Some(method), Some(wire)) => {
                let Some(n) = m["params"]["arguments"]["n"].as_u64() else {
                    self.fail(
                        what,
                        &format!("{child} got a request the model never sent: {m}"),
                    );
                };
                let n = usize::try_from(n).expect("small");
                if n >= self.reqs.len() || method != "tools/call" {
                    self.fail(
                        what,
                        &format!("{child} got a request the model never sent: {m}"),
                    );
                }
                let req = &self.reqs[n];
                if req.cancelled {
                    self.fail(
                        what,
                        &format!("request {n} reached {child} after its client gave it up: {m}"),
                    );
                }
                if req.forwarded {
                    self.fail(what, &format!("request {n} reached a child twice: {m}"));
                }
                if req.answer.is_some() {
                    self.fail(
                        what,
                        &format!("request {n} reached {child} after its answer: {m}"),
                    );
                }
                let params = &m["params"];
                if params.get("requestState").is_some() || params.get("inputResponses").is_some() {
                    self.fail(what, &format!("a retry's members reached {child}: {m}"));
                }
                let token = params["_meta"].get("progressToken").cloned();
                match (req.kind, c.role) {
                    (Kind::Session(s), Role::Session(_)) => {
                        if self.sessions[s].child != Some(child) {
                            self.fail(what, &format!("session {s}'s request {n} reached {child}"));
                        }
                        if *wire != req.id {
                            self.fail(
                                what,
                                &format!("BRIDGE-1: request {n}'s id {} became {wire}", req.id),
                            );
                        }
                        if token != req.token {
                            self.fail(what, &format!("BRIDGE-1: request {n}'s token changed: {m}"));
                        }
                    }
                    (Kind::Modern, Role::Pool) => {
                        if !c.ready || c.init.is_some() {
                            self.fail(
                                what,
                                &format!(
                                    "request {n} reached {child} before its initialize was answered"
                                ),
                            );
                        }
                        if let Some(f) = c.flights.first() {
                            self.fail(
                                what,
                                &format!(
                                    "BRIDGE-2: request {n} reached pool {child} while it runs request {} (id {}{})",
                                    f.origin,
                                    f.wire,
                                    if f.holder.is_none() { ", parked" } else { "" }
                                ),
                            );
                        }
                        if c.flights.iter().any(|f| f.wire == *wire) {
                            self.fail(what, &format!("BRIDGE-2: id {wire} in use on {child}"));
                        }
                        let want = req.token.as_ref().map(|_| wire.clone());
                        if token != want {
                            self.fail(
                                what,
                                &format!(
                                    "BRIDGE-2: request {n}'s token is {token:?}, not its id: {m}"
                                ),
                            );
                        }
                        if let Some(meta) = params["_meta"].as_object()
                            && meta
                                .keys()
                                .any(|k| k.starts_with("io.modelcontextprotocol/"))
                        {
                            self.fail(
                                what,
                                &format!(
                                    "BRIDGE-2: the protocol's _meta keys reached {child}: {m}"
                                ),
                            );
                        }
                    }
                    (kind, role) => {
                        self.fail(
                            what,
                            &format!("a {kind:?} request {n} reached a child of {role}"),
                        );
                    }
                }
                let owed = c.owes();
                let c = self.children.get_mut(&child).expect("a child");
                c.flights.push(Flight {
                    wire: wire.clone(),
                    origin: n,
                    holder: Some(n),
                    token,
                    park_reqs: Vec::new(),
                    parked_at: None,
                    progress: 0,
                    keys: 0,
                });
                if !owed {
                    c.owing_since = now;
                }
                self.reqs[n].forwarded = true;
            }
            (Some("notifications/cancelled"), None) => {
                let wire = &m["params"]["requestId"];
                let Some(at) = c.flights.iter().position(|f| f.wire == *wire) else {
                    if c.role == Role::Pool {
                        self.fail(
                            what,
                            &format!("{child} told to drop {wire}, which it does not run: {m}"),
                        );
                    }
                    return;
                };
                let flight = c.flights[at].clone();
                match flight.holder {
                    Some(r) if !self.reqs[r].cancelled => {
                        self.fail(
                            what,
                            &format!(
                                "{child} told to drop request {r}, which its client still waits for"
                            ),
                        );
                    }
                    Some(_) => {}
                    None => {
                        // Abandoned: its question waited past the input wait.
                        let since = flight.parked_at.expect("parked");
                        if now < since + INPUT_WAIT {
                            self.fail(
                                what,
                                &format!("BRIDGE-3: {child}'s request abandoned {:?} after its question, before the input wait", now - since),
                            );
                        }
                        self.seen.abandoned += 1;
                    }
                }
                let c = self.children.get_mut(&child).expect("a child");
                c.flights.remove(at);
                for q in &mut c.questions {
                    if q.flight.as_ref() == Some(wire) {
                        q.flight = None;
                    }
                }
            }
            (Some(_), None) => {}
            (None, Some(id)) => {
                // The answer to one of its questions.
                let Some(q) = c
                    .questions
                    .iter()
                    .position(|q| q.id == *id && q.answer.is_none())
                else {
                    self.fail(
                        what,
                        &format!(
                            "{child} got an answer to a question it did not ask (or twice): {m}"
                        ),
                    );
                };
                let question = &c.questions[q];
                if let Some(marker) = m["result"]["content"]["for"].as_str()
                    && marker != question.marker
                {
                    self.fail(
                        what,
                        &format!(
                            "BRIDGE-3: {child}'s question {} ({}) got the answer the client gave to {marker}: {m}",
                            question.id, question.marker
                        ),
                    );
                }
                if m.get("result").is_some() {
                    self.seen.questions_answered += 1;
                }
                let c = self.children.get_mut(&child).expect("a child");
                c.questions[q].answer = Some(m.clone());
            }
            (None, None) => self.fail(what, &format!("{child} got a message of no kind: {m}")),
        }
    }

    fn read_reports(&mut self, what: &str, step: &mut Step) {
        let now = self.now();
        let new: Vec<(ChildId, Happening)> = self.rig.reported[self.reports_seen..].to_vec();
        self.reports_seen = self.rig.reported.len();
        for (child, happening) in new {
            if let Happening::Stalled { failed, .. } = happening {
                self.seen.stalls += 1;
                let Some(owing) = &step.owing_before else {
                    self.fail(what, &format!("{child} stalled while no time passed"));
                };
                if !owing.contains(&child) {
                    self.fail(what, &format!("BRIDGE-4: {child} stalled, owing nothing"));
                }
                let c = &self.children[&child];
                let quiet = now.saturating_duration_since(c.last_output.max(c.owing_since));
                if quiet < STALL {
                    self.fail(
                        what,
                        &format!("BRIDGE-4: {child} stalled after {quiet:?} of silence"),
                    );
                }
                let Some(at) = step.stopped.iter().position(|(c, _)| *c == child) else {
                    self.fail(
                        what,
                        &format!("{child} reported stalled, its input not closed"),
                    );
                };
                let (_, waiting) = step.stopped.remove(at);
                if failed != waiting.len() {
                    self.fail(
                        what,
                        &format!("BRIDGE-4: {child} stalled with requests {waiting:?} in flight; reported {failed} failed"),
                    );
                }
                for r in waiting {
                    if !self.reqs[r].cancelled {
                        step.musts
                            .push(Must::Error(r, -32603, Some("stalled".into())));
                    }
                }
            }
        }
        // Stopped otherwise (a DELETE, the session's end, a failed `initialize`): their
        // requests go with their session.
        for (_, waiting) in std::mem::take(&mut step.stopped) {
            for r in waiting {
                if self.reqs[r].answer.is_none() {
                    self.reqs[r].over = true;
                }
            }
        }
    }

    fn read_answers(&mut self, what: &str, step: &Step) {
        for n in 0..self.reqs.len() {
            let reply = self.rig.h.reply(self.reqs[n].x);
            if reply.head.is_none() || Some(reply.body.len()) == self.reqs[n].seen_len {
                continue;
            }
            self.reqs[n].seen_len = Some(reply.body.len());
            let status = reply.status();
            let messages = if reply.header("content-type") == Some("text/event-stream") {
                reply.messages()
            } else if reply.body.is_empty() {
                Vec::new()
            } else {
                match serde_json::from_slice::<Value>(&reply.body) {
                    Ok(v) => vec![v],
                    Err(e) => {
                        self.fail(what, &format!("request {n}: a body that is not JSON: {e}"))
                    }
                }
            };
            let mut answers = Vec::new();
            let mut progress = Vec::new();
            for m in messages {
                match (m.get("method").and_then(Value::as_str), m.get("id")) {
                    (Some("notifications/progress"), None) => {
                        let token = &m["params"]["progressToken"];
                        if self.reqs[n].token.as_ref() != Some(token) {
                            self.fail(
                                what,
                                &format!("progress of token {token} reached request {n} (token {:?}): {m}", self.reqs[n].token),
                            );
                        }
                        progress.push(m["params"]["progress"].as_f64().unwrap_or(-1.0));
                    }
                    (Some(_), None) => {}
                    (Some(_), Some(id)) => self.client_gets_question(what, n, id, &m),
                    (None, _) => answers.push(m),
                }
            }
            if progress.windows(2).any(|w| w[0] >= w[1]) {
                self.fail(
                    what,
                    &format!("request {n}: progress out of order: {progress:?}"),
                );
            }
            self.reqs[n].progress = progress;
            if answers.len() > 1 {
                self.fail(
                    what,
                    &format!("request {n} answered {} times: {answers:?}", answers.len()),
                );
            }
            let Some(answer) = answers.pop() else {
                continue;
            };
            let req = &self.reqs[n];
            if let Some(earlier) = &req.answer {
                if *earlier != answer {
                    self.fail(
                        what,
                        &format!("request {n}'s answer changed: {earlier} then {answer}"),
                    );
                }
                continue;
            }
            if answer["id"] != req.id && !(status >= 400 && answer["id"].is_null()) {
                self.fail(
                    what,
                    &format!(
                        "request {n} (id {}) answered with id {}: {answer}",
                        req.id, answer["id"]
                    ),
                );
            }
            if req.cancelled {
                self.fail(
                    what,
                    &format!("request {n} answered after its client gave it up: {answer}"),
                );
            }
            if let Some(allowed) = &step.allowed
                && !allowed.contains(&n)
            {
                self.fail(
                    what,
                    &format!("request {n} answered by an op that answers nothing of it: {answer}"),
                );
            }
            if let Some(text) = answer["result"]["content"][0]["text"].as_str()
                && text.starts_with('r')
                && text != format!("r{}", req.origin)
            {
                self.fail(
                    what,
                    &format!("BRIDGE-4: request {n} got the answer to {text}: {answer}"),
                );
            }
            if answer["error"]["code"] == -32603 {
                self.seen.failed += 1;
            }
            if input_required(Some(&answer)) {
                self.seen.input_required += 1;
            } else if answer.get("result").is_some() {
                if matches!(req.kind, Kind::Init(_)) {
                    self.seen.sessions += 1;
                } else {
                    self.seen.results += 1;
                }
            }
            if let Kind::Init(s) = req.kind
                && answer.get("result").is_none()
            {
                self.sessions[s].dead = true;
            }
            self.reqs[n].status = status;
            self.reqs[n].answer = Some(answer);
        }
    }

    fn client_gets_question(&mut self, what: &str, n: usize, id: &Value, m: &Value) {
        let marker = m["params"]["marker"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let s = match self.reqs[n].kind {
            Kind::Session(s) | Kind::Init(s) => s,
            Kind::Modern => self.fail(
                what,
                &format!("a server request on a 2026-07-28 exchange: {m}"),
            ),
        };
        let asker = self
            .children
            .iter()
            .find(|(_, c)| c.questions.iter().any(|q| q.marker == marker))
            .map(|(id, _)| *id);
        if asker.is_none() || asker != self.sessions[s].child {
            self.fail(
                what,
                &format!("session {s} got a question of {asker:?}: {m}"),
            );
        }
        if !self
            .client_questions
            .iter()
            .any(|q| q.session == s && q.id == *id)
        {
            self.client_questions.push(ClientQuestion {
                session: s,
                id: id.clone(),
                marker,
                answered: false,
            });
        }
    }

    fn check_musts(&mut self, what: &str, step: &mut Step) {
        for must in std::mem::take(&mut step.musts) {
            let answer = |r: usize| self.reqs[r].answer.as_ref();
            let ok = match &must {
                Must::Result(r, marker) => {
                    answer(*r).is_some_and(|a| {
                        a["result"]["content"][0]["text"] == format!("r{marker}")
                            && (matches!(self.reqs[*r].kind, Kind::Session(_) | Kind::Init(_))
                                || a["result"]["resultType"] == "complete")
                    }) && self.check_init_version(*r)
                }
                Must::Error(r, code, text) => answer(*r).is_some_and(|a| {
                    a["error"]["code"] == *code
                        && text.as_ref().is_none_or(|t| {
                            a["error"]["message"]
                                .as_str()
                                .is_some_and(|m| m.contains(t.as_str()))
                        })
                }),
                Must::InputRequired(r, markers) => answer(*r).is_some_and(|a| {
                    let result = &a["result"];
                    let mut got: Vec<String> = result["inputRequests"]
                        .as_object()
                        .map(|o| {
                            o.values()
                                .map(|q| {
                                    q["params"]["marker"]
                                        .as_str()
                                        .unwrap_or_default()
                                        .to_owned()
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    got.sort();
                    let mut want = markers.clone();
                    want.sort();
                    result["resultType"] == "input_required"
                        && result["requestState"].is_string()
                        && got == want
                }),
                Must::ResultOrStale(r, marker) => answer(*r).is_some_and(|a| {
                    a["result"]["content"][0]["text"] == format!("r{marker}")
                        || a["error"]["code"] == -32602
                }),
                Must::Pending(r) => answer(*r).is_none(),
                Must::Reached(r) => self.reqs[*r].forwarded || answer(*r).is_some(),
                Must::ChildGot(child, id, code) => {
                    self.children[child].questions.iter().any(|q| {
                        q.id == *id
                            && q.answer
                                .as_ref()
                                .is_some_and(|a| code.is_none_or(|c| a["error"]["code"] == c))
                    }) || self.children[child].exited
                }
                Must::ChildCancelled(child, wire) => {
                    let c = &self.children[child];
                    c.exited || c.stopping || !c.flights.iter().any(|f| f.wire == *wire)
                }
                Must::Stopped(child) => {
                    let c = &self.children[child];
                    c.exited || c.stopping
                }
            };
            if !ok {
                let got = match &must {
                    Must::Result(r, _)
                    | Must::Error(r, ..)
                    | Must::InputRequired(r, _)
                    | Must::ResultOrStale(r, _)
                    | Must::Pending(r)
                    | Must::Reached(r) => format!("; request {r} has {:?}", self.reqs[*r].answer),
                    Must::ChildGot(child, ..) => {
                        format!(
                            "; {child}'s questions: {:?}",
                            self.children[child].questions
                        )
                    }
                    _ => String::new(),
                };
                self.fail(what, &format!("expected {must:?}{got}"));
            }
        }
    }

    /// A session's `initialize` result carries the negotiated version.
    fn check_init_version(&self, r: usize) -> bool {
        match self.reqs[r].kind {
            Kind::Init(s) => self.reqs[r]
                .answer
                .as_ref()
                .is_some_and(|a| a["result"]["protocolVersion"] == self.sessions[s].version),
            _ => true,
        }
    }

    fn check_global(&mut self, what: &str) {
        let now = self.now();
        let alive = self.children.values().filter(|c| !c.exited).count();
        if self.rig.gateway.children() != alive {
            self.fail(
                what,
                &format!(
                    "children() is {}; {alive} started and not exited",
                    self.rig.gateway.children()
                ),
            );
        }
        let pool = self
            .children
            .values()
            .filter(|c| !c.exited && c.role == Role::Pool)
            .count();
        if pool > self.setup.pool {
            self.fail(
                what,
                &format!("BRIDGE-5: {pool} pool children, bound {}", self.setup.pool),
            );
        }
        // Children being ended do not count: their sessions are over.
        let sessions = self
            .children
            .values()
            .filter(|c| c.live() && c.role != Role::Pool)
            .count();
        if sessions > self.setup.max_children {
            self.fail(
                what,
                &format!(
                    "BRIDGE-5: {sessions} session children, bound {}",
                    self.setup.max_children
                ),
            );
        }
        for (id, c) in &self.children {
            if c.role == Role::Pool && c.flights.len() > 1 {
                self.fail(
                    what,
                    &format!("BRIDGE-2: pool {id} runs {} requests", c.flights.len()),
                );
            }
            for f in &c.flights {
                if f.holder.is_none()
                    && c.live()
                    && let Some(at) = f.parked_at
                    && now >= at + INPUT_WAIT
                {
                    self.fail(
                        what,
                        &format!("BRIDGE-3: {id}'s question is late and not abandoned"),
                    );
                }
            }
        }
        if self.idle_pool_child() {
            let waiting = (0..self.reqs.len()).find(|r| {
                let req = &self.reqs[*r];
                req.kind == Kind::Modern && !req.forwarded && req.answer.is_none() && !req.over
            });
            if let Some(r) = waiting {
                self.fail(
                    what,
                    &format!("BRIDGE-2: request {r} waits while a pool child idles"),
                );
            }
        }
    }

    /// Every child answers what it was given, every question is abandoned, the clients
    /// get their answers; then every child exits.
    fn settle(&mut self) {
        self.trail.push("settle".into());
        for round in 0..64 {
            let what = format!("settling (round {round})");
            let mut moved = false;
            // A child whose input closed exits, as a stdio server does.
            for child in self.children_with(|c| c.stopping && !c.exited) {
                let mut step = self.exit(child, 0);
                self.observe(&what, &mut step);
                moved = true;
            }
            for child in self.live_children() {
                if self.children[&child].init.is_some() {
                    let mut step = self.init_answer(child, true, 2);
                    self.observe(&what, &mut step);
                    moved = true;
                    continue;
                }
                let held = self.children[&child]
                    .flights
                    .iter()
                    .position(|f| f.holder.is_some());
                if let Some(at) = held {
                    let mut step = self.child_answers(child, at, false, 0);
                    self.observe(&what, &mut step);
                    moved = true;
                }
            }
            if !moved {
                let parked = self
                    .children
                    .values()
                    .any(|c| c.live() && c.flights.iter().any(|f| f.holder.is_none()));
                let waiting = self.reqs.iter().any(|r| r.answer.is_none() && !r.over);
                if !parked && !waiting {
                    break;
                }
                let mut step = self.advance(INPUT_WAIT + Duration::from_secs(1), false);
                self.observe(&what, &mut step);
            }
        }
        let what = "settling";
        for (n, req) in self.reqs.iter().enumerate() {
            if req.answer.is_none() && !req.over {
                self.fail(what, &format!("request {n} never answered: {req:?}"));
            }
        }
        if self.rig.gateway.in_flight() != 0 {
            self.fail(
                what,
                &format!(
                    "in_flight() is {} with everything answered",
                    self.rig.gateway.in_flight()
                ),
            );
        }
        for child in self.children_with(|c| !c.exited) {
            let mut step = self.exit(child, 0);
            self.observe(what, &mut step);
        }
        if self.rig.gateway.children() != 0 {
            self.fail(
                what,
                &format!(
                    "children() is {} once all exited",
                    self.rig.gateway.children()
                ),
            );
        }
        if self.rig.gateway.in_flight() != 0 {
            self.fail(
                what,
                &format!(
                    "in_flight() is {} once all exited",
                    self.rig.gateway.in_flight()
                ),
            );
        }
    }
}

fn input_required(answer: Option<&Value>) -> bool {
    answer.is_some_and(|a| a["result"]["resultType"] == "input_required")
}
