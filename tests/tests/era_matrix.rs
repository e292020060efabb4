//! The era matrix (MODERN-25): every client behaviour against every server configuration,
//! each cell the era, status and JSON-RPC error code the requirements prescribe
//! (MODERN-2, MODERN-4, MODERN-5, MODERN-15, MODERN-16, MODERN-20, MODERN-21, MODERN-24,
//! MODERN-26, and the session era's SESSION-7 and VERSION-4 where a request is
//! session-era).
//!
//! One table, [`rows`]: a row is what a client sends, with the outcome expected from each
//! of the four servers of [`Server`]. Each cell runs on a fresh server through the
//! sans-IO [`Harness`]. A request the core dispatches is answered by the test (what the
//! application answers is not the core's business); the cell then checks the request's
//! `era()` and session, and that its response is framed as that era frames it (JSON or
//! an SSE stream, event ids only in the session era, `Mcp-Session-Id` only on a
//! session's response). A refusal is read from its body: status, code, the id echoed
//! for the revision's own errors, and `error.data.supported` when it names revisions.
//!
//! A cell whose outcome the core gets wrong in a file this suite may not change is
//! listed in [`EXPECTED_BUGS`] with the reason, and still expects the right outcome: the
//! test fails when a listed cell starts to pass, so a fixed bug leaves the list.

use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{
    CloseReason, Config, Era, Eras, Event, ExchangeId, IncomingRequest, LegacyPaths, SessionId,
    Target,
};
use mcpwire_tests::server::{Harness, Reply, post_head};
use serde_json::Value;

/// The sessionless revision.
const MODERN: &str = "2026-07-28";
/// The newest revision of the session era.
const V2025: &str = "2025-11-25";
/// The protocol keys of a 2026-07-28 request's `_meta` (MODERN-3).
const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
/// The same keys naming the session era's revision.
const META_2025: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}"#;
/// A session id no server here minted (a client's stale one).
const NEVER_MINTED: &str = "0123456789abcdef0123456789abcdef";
/// What a client that believes it has a session sends to a server that never made one.
const BELIEVED_LIVE: &str = "fedcba9876543210fedcba9876543210";

/// The server configurations, the matrix's columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    /// Every era, and the legacy HTTP+SSE paths.
    All,
    /// The sessionless revision alone (`Eras::MODERN`).
    Modern,
    /// The session era alone (`Eras::SESSIONS`).
    Sessions,
    /// Every era, without the legacy paths.
    AllNoLegacy,
}

impl Server {
    fn config(self) -> Config {
        match self {
            Self::All => Config::new()
                .with_eras(Eras::ALL)
                .with_legacy(Some(LegacyPaths::default())),
            Self::Modern => Config::new().with_eras(Eras::MODERN),
            Self::Sessions => Config::new().with_eras(Eras::SESSIONS),
            Self::AllNoLegacy => Config::new().with_eras(Eras::ALL).with_legacy(None),
        }
    }

    fn column(self) -> usize {
        self as usize
    }

    fn serves_sessions(self) -> bool {
        self != Self::Modern
    }
}

/// Which session a request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sid {
    /// No `Mcp-Session-Id`.
    No,
    /// One minted by `initialize` just before (where the server keeps sessions; on a
    /// modern-only server, an id the client believes live: [`BELIEVED_LIVE`]).
    Live,
    /// [`NEVER_MINTED`].
    Stale,
}

/// How the test answers a dispatched request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// At once: a JSON body.
    Json,
    /// A progress notification first, so an SSE stream, then the result.
    Stream,
}

/// What the client sends.
#[derive(Clone, Debug)]
enum Send {
    /// A POST to the MCP endpoint.
    Post {
        session: Sid,
        headers: &'static [(&'static str, &'static str)],
        body: String,
        answer: Answer,
    },
    /// A GET or DELETE on the MCP endpoint.
    Bodiless {
        method: &'static str,
        session: Sid,
        headers: &'static [(&'static str, &'static str)],
    },
    /// Legacy HTTP+SSE: GET on the legacy path, then `initialize` POSTed to the URI its
    /// `endpoint` event announces (LEGACY-1…4).
    Legacy,
    /// A POST to the legacy messages path naming a session that never was.
    LegacyPostUnknown,
}

impl Send {
    fn session(&self) -> Sid {
        match self {
            Self::Post { session, .. } | Self::Bodiless { session, .. } => *session,
            Self::Legacy | Self::LegacyPostUnknown => Sid::No,
        }
    }
}

/// Which session a dispatched request came with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sess {
    /// None (the sessionless revision, or a legacy request: see [`Outcome::Legacy`]).
    None,
    /// One minted by this request (`initialize`), announced in its response head.
    Minted,
    /// The live session it named.
    Live,
}

/// The outcome of one cell.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// Dispatched to the application in this era with this session, and its answer
    /// framed as that era frames it.
    Served(Era, Sess),
    /// 202 with an empty body: a notification, handed to the application.
    Accepted,
    /// Refused: the status and the JSON-RPC error code of the body.
    Refused(u16, i64),
    /// Refused as [`Outcome::Refused`], the error's `data.supported` naming exactly the
    /// revisions the server serves (MODERN-5, MODERN-26).
    RefusedNaming(u16, i64),
    /// 405 with this `Allow` (MODERN-2, MODERN-25).
    NotAllowed(&'static str),
    /// The session's standalone GET stream: 200, `text/event-stream`, left open.
    GetStream,
    /// DELETE ended the session: 200, and the application is told.
    Deleted,
    /// The legacy stream announced its POST URI, the POST was 202, the request reached
    /// the application as `Era::HttpSse` in the stream's session, and its answer came
    /// on the stream.
    Legacy,
    /// Anything else, described (a response framed wrongly, an event out of place).
    Odd(String),
}

use Outcome::{Accepted, Deleted, GetStream, Legacy, NotAllowed, Refused, RefusedNaming, Served};

/// One row: a client behaviour and its expected outcome per [`Server`], in the order
/// `[All, Modern, Sessions, AllNoLegacy]`.
struct Row {
    name: &'static str,
    send: Send,
    expect: [Outcome; 4],
}

/// Cells the core gets wrong in a file this suite may not change: (server, row, why).
/// Checked exactly: a listed cell must still fail, an unlisted one must pass.
const EXPECTED_BUGS: &[(Server, &str, &str)] = &[];

const FULL: &[(&str, &str)] = &[
    ("mcp-protocol-version", MODERN),
    ("mcp-method", "tools/call"),
    ("mcp-name", "echo"),
];
const NAMED_ONLY: &[(&str, &str)] = &[("mcp-method", "tools/call"), ("mcp-name", "echo")];
const METHOD_TWICE: &[(&str, &str)] = &[
    ("mcp-protocol-version", MODERN),
    ("mcp-method", "tools/call"),
    ("mcp-method", "tools/list"),
    ("mcp-name", "echo"),
];
const NAME_TWICE: &[(&str, &str)] = &[
    ("mcp-protocol-version", MODERN),
    ("mcp-method", "tools/call"),
    ("mcp-name", "echo"),
    ("mcp-name", "other"),
];
const HEADER_2025: &[(&str, &str)] = &[("mcp-protocol-version", V2025)];
const HEADER_2025_NAMED: &[(&str, &str)] = &[
    ("mcp-protocol-version", V2025),
    ("mcp-method", "tools/call"),
    ("mcp-name", "echo"),
];
const HEADER_MODERN: &[(&str, &str)] = &[("mcp-protocol-version", MODERN)];
const INITIALIZE_MODERN: &[(&str, &str)] = &[
    ("mcp-protocol-version", MODERN),
    ("mcp-method", "initialize"),
];
const DISCOVER: &[(&str, &str)] = &[
    ("mcp-protocol-version", MODERN),
    ("mcp-method", "server/discover"),
];
const NONE: &[(&str, &str)] = &[];
const SSE: &[(&str, &str)] = &[("accept", "text/event-stream")];
const SSE_MODERN: &[(&str, &str)] = &[
    ("accept", "text/event-stream"),
    ("mcp-protocol-version", MODERN),
];

/// A `tools/call` of `echo`, id 7, with this `_meta` member (or none).
fn call(meta: Option<&str>) -> String {
    let meta = meta.map(|m| format!(",{m}")).unwrap_or_default();
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"echo","arguments":{{}}{meta}}}}}"#
    )
}

/// A 2025 `initialize`, id 1, with this `_meta` member (or none).
fn initialize(meta: Option<&str>) -> String {
    let meta = meta.map(|m| format!(",{m}")).unwrap_or_default();
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{V2025}","capabilities":{{}},"clientInfo":{{"name":"c","version":"1"}}{meta}}}}}"#
    )
}

fn post(session: Sid, headers: &'static [(&'static str, &'static str)], body: String) -> Send {
    Send::Post {
        session,
        headers,
        body,
        answer: Answer::Json,
    }
}

fn bodiless(
    method: &'static str,
    session: Sid,
    headers: &'static [(&'static str, &'static str)],
) -> Send {
    Send::Bodiless {
        method,
        session,
        headers,
    }
}

/// The matrix. Where a cell's outcome is not spelled out by the requirements, the
/// comment says which reading it takes and why.
fn rows() -> Vec<Row> {
    let sessionless = Served(Era::Sessionless, Sess::None);
    let minted = Served(Era::Sessions, Sess::Minted);
    let live = Served(Era::Sessions, Sess::Live);
    // The session era's transport refusals carry -32000 (missing session, an unserved
    // version header: VERSION-4), an unknown session's 404 -32001 (SESSION-7).
    let missing_session = Refused(400, -32000);
    let unknown_session = Refused(404, -32001);
    let wrong_path = Refused(404, -32000);
    vec![
        // MODERN-3, MODERN-10; on the session-only server the revision is not served:
        // -32022 naming the revisions that are (MODERN-5), so the client falls back
        // (MODERN-15).
        Row {
            name: "modern request, _meta and every header",
            send: post(Sid::No, FULL, call(Some(META))),
            expect: [
                sessionless.clone(),
                sessionless.clone(),
                RefusedNaming(400, -32022),
                sessionless.clone(),
            ],
        },
        // MODERN-10, MODERN-12: a stream of its own, without event ids.
        Row {
            name: "modern request answered on a stream",
            send: Send::Post {
                session: Sid::No,
                headers: FULL,
                body: call(Some(META)),
                answer: Answer::Stream,
            },
            expect: [
                sessionless.clone(),
                sessionless.clone(),
                RefusedNaming(400, -32022),
                sessionless.clone(),
            ],
        },
        // MODERN-25: without a header the `_meta` names the revision, so the request is
        // modern, and a modern request without the header is -32020 (MODERN-4). A
        // server that also serves older revisions MAY read a missing header as
        // 2025-03-26 (MODERN-16), but the `_meta` is positive evidence of the modern
        // revision, which MODERN-25 follows, on every server.
        Row {
            name: "modern _meta without MCP-Protocol-Version",
            send: post(Sid::No, NAMED_ONLY, call(Some(META))),
            expect: [
                Refused(400, -32020),
                Refused(400, -32020),
                Refused(400, -32020),
                Refused(400, -32020),
            ],
        },
        // MODERN-20: a missing `_meta` is -32602, checked before the revision is, so
        // on the session-only server too.
        Row {
            name: "modern header without _meta",
            send: post(Sid::No, FULL, call(None)),
            expect: [
                Refused(400, -32602),
                Refused(400, -32602),
                Refused(400, -32602),
                Refused(400, -32602),
            ],
        },
        // MODERN-25, MODERN-16: session-era where sessions are served. The modern-only
        // server refuses it for its missing header (MODERN-16, MODERN-4) and names its
        // revisions (MODERN-26).
        Row {
            name: "initialize without a version header",
            send: post(Sid::No, NONE, initialize(None)),
            expect: [
                minted.clone(),
                RefusedNaming(400, -32020),
                minted.clone(),
                minted.clone(),
            ],
        },
        // The modern-only server: every request is sessionless (MODERN-2), and this one
        // has no `_meta`, which is checked first (MODERN-20); the error names the
        // revisions served (MODERN-26).
        Row {
            name: "initialize with MCP-Protocol-Version 2025-11-25",
            send: post(Sid::No, HEADER_2025, initialize(None)),
            expect: [
                minted.clone(),
                RefusedNaming(400, -32602),
                minted.clone(),
                minted.clone(),
            ],
        },
        // MODERN-25, MODERN-21: the conformance suite's probe (modern header, `_meta`,
        // `Mcp-Method`) is a removed method where the revision is served; on the
        // session-only server the revision is not served (MODERN-5). Every error to an
        // `initialize` on the sessionless path names the revisions (MODERN-26 asks it
        // of a modern-only server; it helps a dual-era client as much).
        Row {
            name: "initialize with the modern header and _meta",
            send: post(Sid::No, INITIALIZE_MODERN, initialize(Some(META))),
            expect: [
                RefusedNaming(404, -32601),
                RefusedNaming(404, -32601),
                RefusedNaming(400, -32022),
                RefusedNaming(404, -32601),
            ],
        },
        // Unclear: MODERN-25 calls an `initialize` under a modern header a removed
        // method, but the revision's checks come in the order the conformance suite
        // fixes (MODERN-20's missing `_meta` before anything else, as its
        // `server/discover` probes require), so a 2025 `initialize` body under a modern
        // header is -32602 first. Either is a modern error a client recognises.
        Row {
            name: "initialize with the modern header only (2025 body)",
            send: post(Sid::No, HEADER_MODERN, initialize(None)),
            expect: [
                RefusedNaming(400, -32602),
                RefusedNaming(400, -32602),
                RefusedNaming(400, -32602),
                RefusedNaming(400, -32602),
            ],
        },
        // MODERN-25: a live session wins over modern `_meta` keys. On the modern-only
        // server the session id means nothing (MODERN-2): the 2025 header and the
        // modern `_meta` disagree (MODERN-4).
        Row {
            name: "live session, 2025-11-25 header, modern _meta",
            send: post(Sid::Live, HEADER_2025_NAMED, call(Some(META))),
            expect: [
                live.clone(),
                Refused(400, -32020),
                live.clone(),
                live.clone(),
            ],
        },
        Row {
            name: "live session answered on a stream",
            send: Send::Post {
                session: Sid::Live,
                headers: HEADER_2025_NAMED,
                body: call(Some(META)),
                answer: Answer::Stream,
            },
            expect: [
                live.clone(),
                Refused(400, -32020),
                live.clone(),
                live.clone(),
            ],
        },
        Row {
            name: "live session, no version header, modern _meta",
            send: post(Sid::Live, NAMED_ONLY, call(Some(META))),
            expect: [
                live.clone(),
                Refused(400, -32020),
                live.clone(),
                live.clone(),
            ],
        },
        // MODERN-25: the live session makes it session-era even under a modern header;
        // the session era does not serve 2026-07-28, so VERSION-4's 400. The
        // modern-only server ignores the id (MODERN-2) and serves it.
        Row {
            name: "live session, modern header, modern _meta",
            send: post(Sid::Live, FULL, call(Some(META))),
            expect: [
                missing_session.clone(),
                sessionless.clone(),
                missing_session.clone(),
                missing_session.clone(),
            ],
        },
        Row {
            name: "live session, modern header, _meta 2025-11-25",
            send: post(Sid::Live, FULL, call(Some(META_2025))),
            expect: [
                missing_session.clone(),
                Refused(400, -32020),
                missing_session.clone(),
                missing_session.clone(),
            ],
        },
        // MODERN-25: an id the server never minted names no session; the modern header
        // decides.
        Row {
            name: "stale session id, modern header and _meta",
            send: post(Sid::Stale, FULL, call(Some(META))),
            expect: [
                sessionless.clone(),
                sessionless.clone(),
                RefusedNaming(400, -32022),
                sessionless.clone(),
            ],
        },
        // SESSION-7 where sessions are served; the modern-only server checks it as the
        // revision (no `_meta`: MODERN-20).
        Row {
            name: "stale session id, 2025-11-25 header, no _meta",
            send: post(Sid::Stale, HEADER_2025, call(None)),
            expect: [
                unknown_session.clone(),
                Refused(400, -32602),
                unknown_session.clone(),
                unknown_session.clone(),
            ],
        },
        // MODERN-25: neither header nor `_meta` version is session-era (MODERN-16), and
        // a session-era request needs its session.
        Row {
            name: "no session, no version header, no _meta",
            send: post(Sid::No, NONE, call(None)),
            expect: [
                missing_session.clone(),
                Refused(400, -32020),
                missing_session.clone(),
                missing_session.clone(),
            ],
        },
        // MODERN-4: the header and `_meta` disagree, checked before the revision is
        // looked up (so on the session-only server too).
        Row {
            name: "header 2026-07-28, _meta 2025-11-25",
            send: post(Sid::No, FULL, call(Some(META_2025))),
            expect: [
                Refused(400, -32020),
                Refused(400, -32020),
                Refused(400, -32020),
                Refused(400, -32020),
            ],
        },
        // MODERN-25: a handshake-era header makes it session-era whatever `_meta`
        // says; without a session that is 400 (what session-era servers in the field
        // answer, MODERN-26). The modern-only server sees the disagreement.
        Row {
            name: "header 2025-11-25, _meta 2026-07-28, no session",
            send: post(Sid::No, HEADER_2025_NAMED, call(Some(META))),
            expect: [
                missing_session.clone(),
                Refused(400, -32020),
                missing_session.clone(),
                missing_session.clone(),
            ],
        },
        // MODERN-6: a repeated `Mcp-Method` or `Mcp-Name` is malformed (its combined
        // value, RFC 9110 §5.3, is not the body's), so -32020; an intermediary routing
        // on the other value would disagree with what the server runs. On the
        // session-only server -32022 comes first (MODERN-5).
        Row {
            name: "Mcp-Method repeated, the body's method first",
            send: post(Sid::No, METHOD_TWICE, call(Some(META))),
            expect: [
                Refused(400, -32020),
                Refused(400, -32020),
                RefusedNaming(400, -32022),
                Refused(400, -32020),
            ],
        },
        Row {
            name: "Mcp-Name repeated, the body's name first",
            send: post(Sid::No, NAME_TWICE, call(Some(META))),
            expect: [
                Refused(400, -32020),
                Refused(400, -32020),
                RefusedNaming(400, -32022),
                Refused(400, -32020),
            ],
        },
        // MODERN-24: a notification needs no `Mcp-Method`; 202. The session-only server
        // may refuse it with a 4xx whose error has no id (-32022: not served).
        Row {
            name: "modern notification without Mcp-Method",
            send: post(
                Sid::No,
                HEADER_MODERN,
                format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":99,{META}}}}}"#
                ),
            ),
            expect: [Accepted, Accepted, RefusedNaming(400, -32022), Accepted],
        },
        // Read as: MODERN-24's "`Mcp-*` headers" are MODERN-6's `Mcp-Method` and
        // `Mcp-Name`; `MCP-Protocol-Version` is required on every POST (MODERN-4), and
        // MODERN-24 allows a 4xx whose error has no id.
        Row {
            name: "modern notification without any header",
            send: post(
                Sid::No,
                NONE,
                format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":99,{META}}}}}"#
                ),
            ),
            expect: [
                Refused(400, -32020),
                Refused(400, -32020),
                Refused(400, -32020),
                Refused(400, -32020),
            ],
        },
        // MODERN-19, MODERN-20: `server/discover` takes `_meta`; without it -32602.
        Row {
            name: "server/discover with the header, without _meta",
            send: post(
                Sid::No,
                DISCOVER,
                r#"{"jsonrpc":"2.0","id":101,"method":"server/discover","params":{}}"#.into(),
            ),
            expect: [
                Refused(400, -32602),
                Refused(400, -32602),
                Refused(400, -32602),
                Refused(400, -32602),
            ],
        },
        // LEGACY-1…4 where the legacy paths are set; elsewhere the path is not served.
        Row {
            name: "legacy GET /sse, then POST to the announced endpoint",
            send: Send::Legacy,
            expect: [
                Legacy,
                wrong_path.clone(),
                wrong_path.clone(),
                wrong_path.clone(),
            ],
        },
        Row {
            name: "legacy POST naming no legacy session",
            send: Send::LegacyPostUnknown,
            expect: [
                unknown_session.clone(),
                wrong_path.clone(),
                wrong_path.clone(),
                wrong_path.clone(),
            ],
        },
        // MODERN-25: a GET or DELETE without a session, where a session era is served,
        // is session-era and needs one; the modern-only server answers 405 with
        // `Allow: POST` (MODERN-2).
        Row {
            name: "GET without a session",
            send: bodiless("GET", Sid::No, SSE),
            expect: [
                missing_session.clone(),
                NotAllowed("POST"),
                missing_session.clone(),
                missing_session.clone(),
            ],
        },
        Row {
            name: "GET with a live session",
            send: bodiless("GET", Sid::Live, SSE),
            expect: [GetStream, NotAllowed("POST"), GetStream, GetStream],
        },
        Row {
            name: "GET with a stale session",
            send: bodiless("GET", Sid::Stale, SSE),
            expect: [
                unknown_session.clone(),
                NotAllowed("POST"),
                unknown_session.clone(),
                unknown_session.clone(),
            ],
        },
        // A GET naming the modern revision and no session is a modern GET: 405 where the
        // revision is served (MODERN-2). Unclear on the session-only server: MODERN-25's
        // 405 is for a server that serves no session era, MODERN-2's for one limited to
        // the revision, and this one serves GET to its sessions (an `Allow: POST` would
        // be false, RFC 9110), so it answers as the session era: the session is missing.
        Row {
            name: "GET with the modern header, no session",
            send: bodiless("GET", Sid::No, SSE_MODERN),
            expect: [
                NotAllowed("POST"),
                NotAllowed("POST"),
                missing_session.clone(),
                NotAllowed("POST"),
            ],
        },
        Row {
            name: "DELETE without a session",
            send: bodiless("DELETE", Sid::No, NONE),
            expect: [
                missing_session.clone(),
                NotAllowed("POST"),
                missing_session.clone(),
                missing_session.clone(),
            ],
        },
        Row {
            name: "DELETE with a live session",
            send: bodiless("DELETE", Sid::Live, NONE),
            expect: [Deleted, NotAllowed("POST"), Deleted, Deleted],
        },
        Row {
            name: "DELETE with the modern header, no session",
            send: bodiless("DELETE", Sid::No, HEADER_MODERN),
            expect: [
                NotAllowed("POST"),
                NotAllowed("POST"),
                missing_session.clone(),
                NotAllowed("POST"),
            ],
        },
    ]
}

/// Runs one cell on a fresh `server`.
fn run(server: Server, send: &Send) -> Outcome {
    let mut h = Harness::new(server.config());
    let live = match (send.session(), server.serves_sessions()) {
        (Sid::Live, true) => {
            let (wire, session) = h.initialize(V2025);
            Some((wire, session))
        }
        _ => None,
    };
    let wire = match send.session() {
        Sid::No => None,
        Sid::Live => Some(
            live.as_ref()
                .map_or(BELIEVED_LIVE.to_owned(), |l| l.0.clone()),
        ),
        Sid::Stale => Some(NEVER_MINTED.to_owned()),
    };
    let live = live.map(|l| l.1);
    match send {
        Send::Post {
            headers,
            body,
            answer,
            ..
        } => {
            let mut all: Vec<(&str, &str)> = headers.to_vec();
            if let Some(w) = &wire {
                all.push(("mcp-session-id", w));
            }
            let x = h.send(post_head(&all), Some(body));
            let id: Value = serde_json::from_str::<Value>(body)
                .ok()
                .and_then(|b| b.get("id").cloned())
                .unwrap_or(Value::Null);
            observe_post(&mut h, x, live, *answer, &id)
        }
        Send::Bodiless {
            method, headers, ..
        } => {
            let mut all: Vec<(&str, &str)> = headers.to_vec();
            if let Some(w) = &wire {
                all.push(("mcp-session-id", w));
            }
            let x = h.send(Harness::head(method, "/mcp", &all), None);
            observe_bodiless(&mut h, x, method)
        }
        Send::Legacy => legacy(&mut h),
        Send::LegacyPostUnknown => {
            let x = h.send(
                Harness::head(
                    "POST",
                    &format!("/messages?sessionId={NEVER_MINTED}"),
                    &[("content-type", "application/json")],
                ),
                Some(&call(None)),
            );
            let supported = supported(&h);
            refusal(&h.reply(x), &Value::Null, &supported)
        }
    }
}

/// The revisions the server serves, as -32022 and discover name them.
fn supported(h: &Harness) -> Vec<String> {
    h.server
        .supported_versions()
        .iter()
        .map(|v| v.as_str().to_owned())
        .collect()
}

/// What a POST came to.
fn observe_post(
    h: &mut Harness,
    x: ExchangeId,
    live: Option<SessionId>,
    answer: Answer,
    id: &Value,
) -> Outcome {
    let mut requests = Vec::new();
    let mut notifications = 0;
    for event in h.take_events() {
        match event {
            Event::Request(r) => requests.push(r),
            Event::Notification { session: None, .. } => notifications += 1,
            other => return Outcome::Odd(format!("unexpected event {other:?}")),
        }
    }
    match (requests.len(), notifications) {
        (0, 0) => {
            let supported = supported(h);
            refusal(&h.reply(x), id, &supported)
        }
        (0, 1) => {
            let reply = h.reply(x);
            if reply.head.is_none() || reply.status() != 202 || !reply.body.is_empty() {
                return Outcome::Odd(format!("a notification answered {reply:?}"));
            }
            Accepted
        }
        (1, 0) => served(h, x, requests.remove(0), live, answer, id),
        (r, n) => Outcome::Odd(format!("{r} requests and {n} notifications dispatched")),
    }
}

/// Answers a dispatched request as the test's application and checks its framing.
fn served(
    h: &mut Harness,
    x: ExchangeId,
    request: IncomingRequest,
    live: Option<SessionId>,
    answer: Answer,
    id: &Value,
) -> Outcome {
    let era = request.era();
    let sess = match (request.session(), live) {
        (None, _) => Sess::None,
        (Some(s), Some(l)) if s == l => Sess::Live,
        (Some(_), _) => Sess::Minted,
    };
    if answer == Answer::Stream {
        let progress = RawJson::new(r#"{"progressToken":"p","progress":1}"#).expect("JSON");
        if let Err(e) = h.server.notify(
            h.now,
            Target::Request(request.handle()),
            "notifications/progress",
            Some(&progress),
        ) {
            return Outcome::Odd(format!("no progress on the request's stream: {e}"));
        }
    }
    let result = if request.method() == "initialize" {
        format!(
            r#"{{"protocolVersion":"{}","capabilities":{{}},"serverInfo":{{"name":"m","version":"1"}}}}"#,
            request.version()
        )
    } else {
        r#"{"content":[],"resultType":"complete"}"#.to_owned()
    };
    h.answer(&request, &result);
    let reply = h.reply(x);
    // `Mcp-Session-Id` goes on the responses of a session, and only there (MODERN-2).
    let expected_header = request
        .session()
        .filter(|_| era == Era::Sessions)
        .and_then(|s| h.server.session_header(s))
        .map(str::to_owned);
    if reply.header("mcp-session-id").map(str::to_owned) != expected_header {
        return Outcome::Odd(format!(
            "{era:?} response with Mcp-Session-Id {:?}, expected {expected_header:?}",
            reply.header("mcp-session-id")
        ));
    }
    if reply.head.is_none() || reply.status() != 200 || !reply.ended {
        return Outcome::Odd(format!("the answer was not a whole 200: {reply:?}"));
    }
    let response = match answer {
        Answer::Json => {
            if reply.header("content-type") != Some("application/json") {
                return Outcome::Odd(format!("not JSON: {reply:?}"));
            }
            reply.json()
        }
        Answer::Stream => {
            if reply.header("content-type") != Some("text/event-stream") {
                return Outcome::Odd(format!("not a stream: {reply:?}"));
            }
            let messages = reply.messages();
            if messages.len() != 2 || messages[0]["method"] != "notifications/progress" {
                return Outcome::Odd(format!("the stream carried {messages:?}"));
            }
            // Event ids: every message of a session's stream has one (resumable);
            // none on the sessionless revision (MODERN-12).
            let events: Vec<_> = reply
                .events()
                .into_iter()
                .filter(|e| !e.data().is_empty())
                .collect();
            let with_ids = events.iter().filter(|e| !e.id().is_empty()).count();
            let want = if era == Era::Sessionless {
                0
            } else {
                events.len()
            };
            if with_ids != want {
                return Outcome::Odd(format!(
                    "{era:?} stream with {with_ids} of {} events carrying ids",
                    events.len()
                ));
            }
            messages[1].clone()
        }
    };
    if &response["id"] != id || response.get("result").is_none() {
        return Outcome::Odd(format!("the response {response} is not the answer"));
    }
    Served(era, sess)
}

/// A refused exchange's outcome, its body checked: a JSON-RPC error, the request's id
/// echoed in the revision's own errors, `data.supported` (when present) naming exactly
/// the revisions served.
fn refusal(reply: &Reply, id: &Value, supported: &[String]) -> Outcome {
    if reply.head.is_none() || !reply.ended {
        return Outcome::Odd(format!("no whole answer: {reply:?}"));
    }
    if reply.header("content-type") != Some("application/json") {
        return Outcome::Odd(format!("a refusal without a JSON body: {reply:?}"));
    }
    let body = reply.json();
    let Some(code) = body["error"]["code"].as_i64() else {
        return Outcome::Odd(format!("no JSON-RPC error: {body}"));
    };
    let status = reply.status();
    if status == 405 {
        return match reply.header("allow") {
            Some("POST") => NotAllowed("POST"),
            other => Outcome::Odd(format!("405 with Allow {other:?}")),
        };
    }
    let modern_code = matches!(code, -32020 | -32021 | -32022 | -32602 | -32601);
    if modern_code && &body["id"] != id {
        return Outcome::Odd(format!("{code} without the request's id {id}: {body}"));
    }
    match body["error"]["data"].get("supported") {
        None => Refused(status, code),
        Some(named) => {
            let named: Vec<&str> = named
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if named == supported {
                RefusedNaming(status, code)
            } else {
                Outcome::Odd(format!("{code} names {named:?}, serves {supported:?}"))
            }
        }
    }
}

/// What a GET or DELETE on the MCP endpoint came to.
fn observe_bodiless(h: &mut Harness, x: ExchangeId, method: &str) -> Outcome {
    let reply = h.reply(x);
    let events = h.take_events();
    let Some(head) = &reply.head else {
        return Outcome::Odd("no head".into());
    };
    if head.status != 200 {
        return refusal(&reply, &Value::Null, &supported(h));
    }
    match method {
        "GET" if reply.header("content-type") == Some("text/event-stream") && !reply.ended => {
            GetStream
        }
        "DELETE"
            if reply.ended
                && h.server.session_count() == 0
                && events.iter().any(|e| {
                    matches!(
                        e,
                        Event::SessionClosed {
                            reason: CloseReason::Deleted,
                            ..
                        }
                    )
                }) =>
        {
            Deleted
        }
        _ => Outcome::Odd(format!("{method} answered {reply:?}, events {events:?}")),
    }
}

/// Legacy HTTP+SSE: the stream, its `endpoint` event, a POST there, the answer on the
/// stream (LEGACY-1…4).
fn legacy(h: &mut Harness) -> Outcome {
    let g = h.send(
        Harness::head("GET", "/sse", &[("accept", "text/event-stream")]),
        None,
    );
    let reply = h.reply(g);
    if reply.head.as_ref().is_none_or(|head| head.status != 200) {
        return refusal(&reply, &Value::Null, &supported(h));
    }
    let events = reply.events();
    let Some(endpoint) = events
        .first()
        .filter(|e| e.event_type() == "endpoint")
        .map(|e| e.data().to_owned())
    else {
        return Outcome::Odd(format!("no endpoint event: {events:?}"));
    };
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
    let x = h.send(
        Harness::head("POST", &endpoint, &[("content-type", "application/json")]),
        Some(body),
    );
    if h.reply(x).status() != 202 {
        return Outcome::Odd(format!("the legacy POST got {:?}", h.reply(x)));
    }
    let request = h.take_request();
    if request.era() != Era::HttpSse || request.session().is_none() {
        return Outcome::Odd(format!(
            "a legacy request dispatched as {:?} in {:?}",
            request.era(),
            request.session()
        ));
    }
    h.answer(&request, r#"{"protocolVersion":"2024-11-05"}"#);
    let messages = h.reply(g).messages();
    if messages.last().is_none_or(|m| m["id"] != 1) {
        return Outcome::Odd(format!("the answer is not on the stream: {messages:?}"));
    }
    Legacy
}

/// Runs `server`'s column of the matrix and checks it against [`EXPECTED_BUGS`].
fn column(server: Server) {
    let rows = rows();
    let mut failures = Vec::new();
    for row in &rows {
        let expected = &row.expect[server.column()];
        let observed = run(server, &row.send);
        let listed = EXPECTED_BUGS
            .iter()
            .find(|(s, name, _)| *s == server && *name == row.name);
        match (observed == *expected, listed) {
            (true, None) => {}
            (true, Some((_, _, why))) => failures.push(format!(
                "{server:?} / {:?}: passes now ({observed:?}); remove it from EXPECTED_BUGS ({why})",
                row.name
            )),
            (false, Some(_)) => {}
            (false, None) => failures.push(format!(
                "{server:?} / {:?}: expected {expected:?}, got {observed:?}",
                row.name
            )),
        }
    }
    for (s, name, _) in EXPECTED_BUGS {
        if *s == server && !rows.iter().any(|r| r.name == *name) {
            failures.push(format!("EXPECTED_BUGS names no row {name:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cells wrong:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

#[test]
fn modern_25_era_matrix_all_eras_with_legacy() {
    column(Server::All);
}

#[test]
fn modern_25_modern_2_era_matrix_modern_only() {
    column(Server::Modern);
}

#[test]
fn modern_25_modern_5_era_matrix_sessions_only() {
    column(Server::Sessions);
}

#[test]
fn modern_25_era_matrix_all_eras_without_legacy() {
    column(Server::AllNoLegacy);
}

/// The table itself: row names are unique, so a failure names one row.
#[test]
fn modern_25_era_matrix_rows_are_named_apart() {
    let rows = rows();
    let mut names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), rows.len(), "duplicate row names");
}
