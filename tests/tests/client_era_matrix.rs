//! The client's era matrix (MODERN-15, MODERN-26, LEGACY-6): the sans-IO client against
//! every server behaviour met in the field, under every way to configure its revision.
//! Each cell is what the requirements prescribe the client settles on (the revision and
//! era of `Event::Connected`, as `Client::negotiated` hands it back, or the exact
//! `Event::ConnectFailed`) and the requests it made on the way, in order: falling back
//! correctly is sending the right thing next.
//!
//! One table, [`rows`]: a row is a scripted server (what it answers to `server/discover`,
//! to `initialize`, and to a GET without a session), with the outcome expected under each
//! [`Column`]. Nothing here is a real server: [`run`] answers each request the client
//! transmits from the row, on one fixed instant. What every row does alike: a
//! `notifications/initialized` gets 202; a GET carrying a session (the standalone
//! stream) gets 405 (HTTP-GET-3); a POST to the URI a legacy `endpoint` event named gets
//! 202, its answer coming on the legacy stream (LEGACY-3, LEGACY-4); a session-era
//! server answers `initialize` with the revision offered if it serves it, else its
//! newest (JSONRPC-11).

use std::time::Instant;

use bytes::Bytes;
use mcpwire::client::{Client, Config, Event, RequestError, Revision, Transmit};
use mcpwire::{Era, ProtocolVersion};
use mcpwire_tests::pair::Pair;
use mcpwire_tests::server::counter_entropy;
use serde_json::{Value, json};

use ProtocolVersion::{V2024_11_05, V2025_03_26, V2025_06_18, V2025_11_25, V2026_07_28};

const MODERN: &str = "2026-07-28";
/// Every revision, as a dual-era server lists them (MODERN-19).
const ALL: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];
/// What a session-era server serves.
const SESSION_ERA: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// An older session-era server's revisions, newest 2025-06-18.
const OLDER: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];
/// The TypeScript SDK 1.x's answer to a request without a session (MODERN-26).
const TS_NO_SESSION: &str = "Bad Request: Mcp-Session-Id header is required";

/// How a client is configured: the matrix's columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    /// `Config::new`: `Revision::Auto`.
    Auto,
    Pin2026,
    Pin2025,
    Pin2025_03,
    Sessionless,
    Sessions,
    HttpSse,
    /// `Config::with_legacy_only(true)`: expected to be [`Column::HttpSse`] cell for cell.
    LegacyOnly,
}

impl Column {
    fn config(self) -> Config {
        let config = Config::new(Pair::endpoint());
        let revision = match self {
            Self::Auto => return config,
            Self::LegacyOnly => return config.with_legacy_only(true),
            Self::Pin2026 => Revision::Exactly(V2026_07_28),
            Self::Pin2025 => Revision::Exactly(V2025_11_25),
            Self::Pin2025_03 => Revision::Exactly(V2025_03_26),
            Self::Sessionless => Revision::Era(Era::Sessionless),
            Self::Sessions => Revision::Era(Era::Sessions),
            Self::HttpSse => Revision::Era(Era::HttpSse),
        };
        config.with_revision(revision)
    }

    /// The cell of a row's `expect` this column is checked against.
    fn index(self) -> usize {
        match self {
            Self::LegacyOnly => Self::HttpSse as usize,
            other => other as usize,
        }
    }
}

/// What the scripted server answers to one kind of request.
#[derive(Clone, Copy, Debug)]
enum Reply {
    /// This status, no body.
    Bare(u16),
    /// This status and a JSON-RPC error with this code, its `data.supported` listing
    /// these revisions if given. The request's id is echoed for the sessionless
    /// revision's codes; a session-era server's -32600/-32000 has `"id":null`, as the
    /// SDKs write it.
    Error(u16, i64, Option<&'static [&'static str]>),
    /// 200 and a `DiscoverResult` listing these revisions (MODERN-19).
    Discover(&'static [&'static str]),
    /// 200 and this result, verbatim.
    Result(&'static str),
    /// 200, an `InitializeResult` (the revision offered if listed, else the first
    /// listed) and an `Mcp-Session-Id`.
    Session(&'static [&'static str]),
    /// A legacy HTTP+SSE stream: 200 `text/event-stream`, the `endpoint` event, left open
    /// (LEGACY-1, LEGACY-2).
    Endpoint,
    /// 200 `application/json`, then the connection breaks mid-body.
    Broken,
}

/// What a cell comes to.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// `Event::Connected` at this revision and era.
    Up(ProtocolVersion, Era),
    /// `ConnectFailed(NoCommonRevision { offered })`, naming what the server offered.
    NoCommon(&'static [&'static str]),
    /// `ConnectFailed(Http { status, message })`.
    Http(u16, &'static str),
    /// `ConnectFailed(BadResponse(why))`, `why` containing this.
    Bad(&'static str),
}

use Outcome::{Bad, Http, NoCommon, Up};

/// The requests a client made, labelled: a POST by its body's `method` (and the
/// revision `initialize` offers), `legacy …` when POSTed to the URI an `endpoint` event
/// named; a GET, with `(session)` when it carries `Mcp-Session-Id`.
type Sent = &'static [&'static str];

const NOTHING: Sent = &[];
const PROBE: Sent = &["server/discover"];
const GET: Sent = &["GET"];
const I25: Sent = &["initialize 2025-11-25"];
const I03: Sent = &["initialize 2025-03-26"];
const PROBE_I25: Sent = &["server/discover", "initialize 2025-11-25"];
const S25: Sent = &[
    "initialize 2025-11-25",
    "notifications/initialized",
    "GET (session)",
];
const S03: Sent = &[
    "initialize 2025-03-26",
    "notifications/initialized",
    "GET (session)",
];
const PROBE_S25: Sent = &[
    "server/discover",
    "initialize 2025-11-25",
    "notifications/initialized",
    "GET (session)",
];
const PROBE_S06: Sent = &[
    "server/discover",
    "initialize 2025-06-18",
    "notifications/initialized",
    "GET (session)",
];
const LEGACY: Sent = &[
    "GET",
    "legacy initialize 2024-11-05",
    "legacy notifications/initialized",
];
const F25: Sent = &[
    "initialize 2025-11-25",
    "GET",
    "legacy initialize 2024-11-05",
    "legacy notifications/initialized",
];
const F03: Sent = &[
    "initialize 2025-03-26",
    "GET",
    "legacy initialize 2024-11-05",
    "legacy notifications/initialized",
];
const PROBE_F25: Sent = &[
    "server/discover",
    "initialize 2025-11-25",
    "GET",
    "legacy initialize 2024-11-05",
    "legacy notifications/initialized",
];

const MOD: Outcome = Up(V2026_07_28, Era::Sessionless);
const SSE: Outcome = Up(V2024_11_05, Era::HttpSse);

/// One server behaviour and its expected outcome per [`Column`], in the order `[Auto,
/// Pin2026, Pin2025, Pin2025_03, Sessionless, Sessions, HttpSse]`.
struct Row {
    name: &'static str,
    discover: Reply,
    initialize: Reply,
    get: Reply,
    expect: [(Outcome, Sent); 7],
}

/// A revision handed back (`Exactly(2026-07-28)`) is spoken from the first request, with
/// no probe (MODERN-26): connected at once, whatever the server.
const HANDED_BACK: (Outcome, Sent) = (MOD, NOTHING);

fn rows() -> Vec<Row> {
    use Reply::{Bare, Broken, Discover, Endpoint, Error, Result, Session};
    let modern_get = Bare(405); // MODERN-2: no GET on a modern-only server.
    let session_get = Error(400, -32000, None);
    // A session-era server (MODERN-26's field lessons): whatever it answers the probe,
    // `initialize` works; the sessionless era has nothing to settle on.
    let session_only = |name, discover, get, http: (u16, &'static str)| Row {
        name,
        discover,
        initialize: Session(SESSION_ERA),
        get,
        expect: [
            (Up(V2025_11_25, Era::Sessions), PROBE_S25),
            HANDED_BACK,
            (Up(V2025_11_25, Era::Sessions), S25),
            (Up(V2025_03_26, Era::Sessions), S03),
            (NoCommon(&[]), PROBE),
            (Up(V2025_11_25, Era::Sessions), S25),
            (Http(http.0, http.1), GET),
        ],
    };
    // A legacy HTTP+SSE server: POSTs to the SSE URL are refused with `status`, a GET
    // opens the stream (LEGACY-6, MODERN-15).
    let legacy = |name, status| Row {
        name,
        discover: Bare(status),
        initialize: Bare(status),
        get: Endpoint,
        expect: [
            (SSE, PROBE_F25),
            HANDED_BACK,
            (SSE, F25),
            (SSE, F03),
            (NoCommon(&[]), PROBE),
            (SSE, F25),
            (SSE, LEGACY),
        ],
    };
    // A modern server whose probe answer proves it modern (MODERN-26), and whose answer
    // to `initialize` is a modern error: a session-era client learns what it offers
    // instead of taking it for a legacy server (MODERN-15), and its GET is refused
    // (MODERN-2).
    let modern = |name, discover, initialize, offered: Sent| Row {
        name,
        discover,
        initialize,
        get: modern_get,
        expect: [
            (MOD, PROBE),
            HANDED_BACK,
            (NoCommon(offered), I25),
            (NoCommon(offered), I03),
            (MOD, PROBE),
            (NoCommon(offered), I25),
            (Http(405, ""), GET),
        ],
    };
    vec![
        // 1. Modern-only, naming its revisions in its error to `initialize` (MODERN-5,
        // MODERN-26).
        modern(
            "modern-only, 400 -32022 to initialize",
            Discover(&[MODERN]),
            Error(400, -32022, Some(&[MODERN])),
            &[MODERN],
        ),
        // What mcpwire's own modern-only server answers an `initialize` without
        // `MCP-Protocol-Version` (the era matrix of the server).
        modern(
            "modern-only, 400 -32020 naming its revisions to initialize",
            Discover(&[MODERN]),
            Error(400, -32020, Some(&[MODERN])),
            &[MODERN],
        ),
        // `initialize` is a removed method (MODERN-21), answered as MODERN-9 says.
        modern(
            "modern-only, 404 -32601 to initialize",
            Discover(&[MODERN]),
            Error(404, -32601, None),
            &[],
        ),
        // 2. Dual-era: the probe settles 2026-07-28; a session-era configuration gets
        // its session; a GET without one is the session era's 400 (TS SDK).
        Row {
            name: "dual-era",
            discover: Discover(ALL),
            initialize: Session(SESSION_ERA),
            get: session_get,
            expect: [
                (MOD, PROBE),
                HANDED_BACK,
                (Up(V2025_11_25, Era::Sessions), S25),
                (Up(V2025_03_26, Era::Sessions), S03),
                (MOD, PROBE),
                (Up(V2025_11_25, Era::Sessions), S25),
                (Http(400, TS_NO_SESSION), GET),
            ],
        },
        // 3.–7. Session-era servers: no modern evidence in their answer to the probe.
        session_only(
            "session-only, 400 -32600 to the probe",
            Error(400, -32600, None),
            session_get,
            (400, TS_NO_SESSION),
        ),
        session_only(
            "session-only, 400 -32000 to the probe (TS SDK 1.x)",
            Error(400, -32000, None),
            session_get,
            (400, TS_NO_SESSION),
        ),
        session_only(
            "session-only, bare 400 to the probe",
            Bare(400),
            Bare(400),
            (400, ""),
        ),
        session_only(
            "session-only, bare 404 to the probe",
            Bare(404),
            Bare(404),
            (404, ""),
        ),
        session_only(
            "session-only, bare 405 to the probe",
            Bare(405),
            Bare(405),
            (405, ""),
        ),
        // 9. -32601 under 200 is a session-era server's (MODERN-26 counts it only
        // under 404).
        session_only(
            "session-only, 200 -32601 to the probe",
            Error(200, -32601, None),
            session_get,
            (400, TS_NO_SESSION),
        ),
        // mcpwire's own session-only server names its revisions in a -32022 (MODERN-5):
        // the best listed is offered in `initialize`, not the client's default.
        Row {
            name: "session-only, 400 -32022 naming older revisions to the probe",
            discover: Error(400, -32022, Some(OLDER)),
            initialize: Session(OLDER),
            get: session_get,
            expect: [
                (Up(V2025_06_18, Era::Sessions), PROBE_S06),
                HANDED_BACK,
                (Up(V2025_06_18, Era::Sessions), S25),
                (Up(V2025_03_26, Era::Sessions), S03),
                (NoCommon(OLDER), PROBE),
                (Up(V2025_06_18, Era::Sessions), S25),
                (Http(400, TS_NO_SESSION), GET),
            ],
        },
        // 5.–8. Legacy HTTP+SSE servers.
        legacy("legacy HTTP+SSE, POST 400", 400),
        legacy("legacy HTTP+SSE, POST 404", 404),
        legacy("legacy HTTP+SSE, POST 405", 405),
        // 9. Modern errors with the wrong status still prove a modern server.
        modern(
            "modern, 200 -32022 naming its revisions",
            Error(200, -32022, Some(&[MODERN])),
            Error(200, -32022, Some(&[MODERN])),
            &[MODERN],
        ),
        modern(
            "modern, 200 -32020",
            Error(200, -32020, None),
            Error(200, -32020, None),
            &[],
        ),
        modern(
            "modern, 200 -32021",
            Error(200, -32021, None),
            Error(200, -32021, None),
            &[],
        ),
        modern(
            "modern without server/discover, 404 -32601",
            Error(404, -32601, None),
            Error(404, -32601, None),
            &[],
        ),
        // 10. A modern server the client cannot speak to: no revision it knows
        // (MODERN-5: report that none exists), or an invalid DiscoverResult (MODERN-23:
        // an unknown `resultType` is invalid).
        Row {
            name: "modern, only revisions the client does not know",
            discover: Discover(&["2027-01-01"]),
            initialize: Error(400, -32022, Some(&["2027-01-01"])),
            get: modern_get,
            expect: [
                (NoCommon(&["2027-01-01"]), PROBE),
                HANDED_BACK,
                (NoCommon(&["2027-01-01"]), I25),
                (NoCommon(&["2027-01-01"]), I03),
                (NoCommon(&["2027-01-01"]), PROBE),
                (NoCommon(&["2027-01-01"]), I25),
                (Http(405, ""), GET),
            ],
        },
        Row {
            name: "modern, an empty supportedVersions",
            discover: Discover(&[]),
            initialize: Error(400, -32022, Some(&[])),
            get: modern_get,
            expect: [
                (NoCommon(&[]), PROBE),
                HANDED_BACK,
                (NoCommon(&[]), I25),
                (NoCommon(&[]), I03),
                (NoCommon(&[]), PROBE),
                (NoCommon(&[]), I25),
                (Http(405, ""), GET),
            ],
        },
        Row {
            name: "modern, an unknown resultType",
            discover: Result(
                r#"{"resultType":"deferred","supportedVersions":["2026-07-28"],"capabilities":{}}"#,
            ),
            initialize: Error(400, -32022, Some(&[MODERN])),
            get: modern_get,
            expect: [
                (Bad("resultType"), PROBE),
                HANDED_BACK,
                (NoCommon(&[MODERN]), I25),
                (NoCommon(&[MODERN]), I03),
                (Bad("resultType"), PROBE),
                (NoCommon(&[MODERN]), I25),
                (Http(405, ""), GET),
            ],
        },
        Row {
            name: "modern, input_required to server/discover",
            discover: Result(
                r#"{"resultType":"input_required","inputRequests":{},"requestState":"s"}"#,
            ),
            initialize: Error(400, -32022, Some(&[MODERN])),
            get: modern_get,
            expect: [
                (Bad("input_required"), PROBE),
                HANDED_BACK,
                (NoCommon(&[MODERN]), I25),
                (NoCommon(&[MODERN]), I03),
                (Bad("input_required"), PROBE),
                (NoCommon(&[MODERN]), I25),
                (Http(405, ""), GET),
            ],
        },
        // The probe's answer is lost: no evidence, so `initialize` (MODERN-26), whose
        // modern refusal names a revision the default client speaks (MODERN-5: pick a
        // common one).
        Row {
            name: "modern-only, the probe's answer breaks, 400 -32022 to initialize",
            discover: Broken,
            initialize: Error(400, -32022, Some(&[MODERN])),
            get: modern_get,
            expect: [
                (MOD, PROBE_I25),
                HANDED_BACK,
                (NoCommon(&[MODERN]), I25),
                (NoCommon(&[MODERN]), I03),
                (NoCommon(&[]), PROBE),
                (NoCommon(&[MODERN]), I25),
                (Http(405, ""), GET),
            ],
        },
        Row {
            name: "modern-only, the probe's answer breaks, 404 -32601 to initialize",
            discover: Broken,
            initialize: Error(404, -32601, None),
            get: modern_get,
            expect: [
                (MOD, PROBE_I25),
                HANDED_BACK,
                (NoCommon(&[]), I25),
                (NoCommon(&[]), I03),
                (NoCommon(&[]), PROBE),
                (NoCommon(&[]), I25),
                (Http(405, ""), GET),
            ],
        },
    ]
}

/// What the client settled on, as far as a cell tells.
#[derive(Debug)]
enum Settled {
    Up(ProtocolVersion, Era),
    Failed(RequestError),
    /// No single handshake event, or a client whose accessors disagree with it.
    Odd(String),
}

impl Outcome {
    fn holds(self, settled: &Settled) -> bool {
        match (self, settled) {
            (Up(v, e), Settled::Up(version, era)) => (v, e) == (*version, *era),
            (NoCommon(want), Settled::Failed(RequestError::NoCommonRevision { offered })) => {
                offered.iter().map(String::as_str).eq(want.iter().copied())
            }
            (Http(s, m), Settled::Failed(RequestError::Http { status, message })) => {
                (s, m) == (*status, message.as_str())
            }
            (Bad(why), Settled::Failed(RequestError::BadResponse(text))) => text.contains(why),
            _ => false,
        }
    }
}

/// The label of a request in [`Sent`].
fn label(head: &http::request::Parts, body: &Value) -> String {
    if head.method == http::Method::GET {
        return match head.headers.contains_key("mcp-session-id") {
            true => "GET (session)".into(),
            false => "GET".into(),
        };
    }
    let legacy = if head.uri.path() == Pair::endpoint().path() {
        ""
    } else {
        "legacy "
    };
    let method = body["method"].as_str().unwrap_or("?");
    match body["params"]["protocolVersion"].as_str() {
        Some(offered) if method == "initialize" => format!("{legacy}{method} {offered}"),
        _ => format!("{legacy}{method}"),
    }
}

/// How a scripted answer ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Complete,
    Open,
    Broken,
}

/// A scripted answer: status, headers, body, how it ends, and a message for the legacy
/// stream.
struct Wire {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    end: End,
    on_stream: Option<String>,
}

impl Wire {
    fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_string(),
            end: End::Complete,
            on_stream: None,
        }
    }

    fn bare(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: String::new(),
            end: End::Complete,
            on_stream: None,
        }
    }
}

/// An `InitializeResult` answering `request`, from a server serving `served`.
fn initialize_result(request: &Value, served: &[&str]) -> Value {
    let offered = request["params"]["protocolVersion"].as_str().unwrap_or("");
    let version = if served.contains(&offered) {
        offered
    } else {
        served[0]
    };
    json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "protocolVersion": version,
        "capabilities": {},
        "serverInfo": {"name": "scripted", "version": "1"},
    }})
}

/// The scripted server of `row`: its answer to `request` (head and parsed body).
fn answer(row: &Row, head: &http::request::Parts, request: &Value) -> Wire {
    if head.method == http::Method::GET {
        if head.headers.contains_key("mcp-session-id") {
            return Wire::bare(405);
        }
        return reply(row.get, request);
    }
    if head.uri.path() != Pair::endpoint().path() {
        let mut wire = Wire::bare(202);
        if request["method"] == "initialize" {
            wire.on_stream = Some(initialize_result(request, &["2024-11-05"]).to_string());
        }
        return wire;
    }
    match request["method"].as_str() {
        Some("server/discover") => reply(row.discover, request),
        Some("initialize") => reply(row.initialize, request),
        _ => Wire::bare(202),
    }
}

fn reply(reply: Reply, request: &Value) -> Wire {
    let id = &request["id"];
    match reply {
        Reply::Bare(status) => Wire::bare(status),
        Reply::Error(status, code, supported) => {
            let (message, id) = match code {
                -32600 => ("Invalid Request", &Value::Null),
                -32000 => (TS_NO_SESSION, &Value::Null),
                -32020 => ("Header mismatch", id),
                -32021 => ("Missing required client capability", id),
                -32022 => ("Unsupported protocol version", id),
                _ => ("Method not found", id),
            };
            let mut error = json!({"code": code, "message": message});
            if let Some(supported) = supported {
                error["data"] = json!({"supported": supported, "requested": "2025-11-25"});
            }
            Wire::json(status, &json!({"jsonrpc": "2.0", "id": id, "error": error}))
        }
        Reply::Discover(versions) => Wire::json(
            200,
            &json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "complete",
                "supportedVersions": versions,
                "capabilities": {},
                "ttlMs": 0,
                "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "1"}},
            }}),
        ),
        Reply::Result(result) => {
            let result: Value = serde_json::from_str(result).expect("a JSON result");
            Wire::json(200, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Reply::Session(served) => {
            let mut wire = Wire::json(200, &initialize_result(request, served));
            wire.headers.push(("mcp-session-id", "s-1".into()));
            wire
        }
        Reply::Endpoint => Wire {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            body: "event: endpoint\ndata: /messages?sessionId=l-1\n\n".into(),
            end: End::Open,
            on_stream: None,
        },
        Reply::Broken => Wire {
            body: r#"{"jsonrpc":"2.0","#.into(),
            end: End::Broken,
            ..Wire::json(200, &Value::Null)
        },
    }
}

/// Runs one cell: a fresh client configured by `column` against `row`'s server, until it
/// has nothing more to send. Returns what it settled on and the requests it made.
fn run(row: &Row, column: Column) -> (Settled, Vec<String>) {
    let now = Instant::now();
    let mut client = Client::new(column.config(), counter_entropy(7));
    client.connect(now);
    let mut sent = Vec::new();
    let mut stream = None;
    while let Some(transmit) = client.poll_transmit() {
        let Transmit::Request {
            exchange,
            head,
            body,
        } = transmit
        else {
            continue;
        };
        if sent.len() == 16 {
            return (Settled::Odd("more than 16 requests".into()), sent);
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        sent.push(label(&head, &request));
        let wire = answer(row, &head, &request);
        let mut response = http::Response::builder().status(wire.status);
        for (name, value) in &wire.headers {
            response = response.header(*name, value);
        }
        let (parts, ()) = response.body(()).expect("a response head").into_parts();
        client.handle_head(now, exchange, parts);
        if !wire.body.is_empty() {
            client.handle_body(now, exchange, Bytes::from(wire.body));
        }
        match wire.end {
            End::Complete => client.handle_body_end(now, exchange),
            End::Open => stream = Some(exchange),
            End::Broken => client.handle_failure(now, exchange),
        }
        if let (Some(message), Some(legacy)) = (wire.on_stream, stream) {
            let event = format!("event: message\ndata: {message}\n\n");
            client.handle_body(now, legacy, Bytes::from(event));
        }
    }
    let events: Vec<Event> = std::iter::from_fn(|| client.poll_event()).collect();
    (settled(&client, events), sent)
}

/// The one handshake event among `events`, checked against the client's accessors
/// (`negotiated` is what an application hands back next time: MODERN-26).
fn settled(client: &Client, events: Vec<Event>) -> Settled {
    let mut outcomes = events.into_iter().filter_map(|event| match event {
        Event::Connected { version, era, .. } => Some(Settled::Up(version, era)),
        Event::ConnectFailed(error) => Some(Settled::Failed(error)),
        _ => None,
    });
    let (Some(outcome), None) = (outcomes.next(), outcomes.next()) else {
        return Settled::Odd("not exactly one Connected or ConnectFailed".into());
    };
    let negotiated = match &outcome {
        Settled::Up(_, Era::HttpSse) => Some(Revision::Era(Era::HttpSse)),
        Settled::Up(version, _) => Some(Revision::Exactly(*version)),
        _ => None,
    };
    let accessors = match &outcome {
        Settled::Up(version, era) => (Some(*version), Some(*era)),
        _ => (None, None),
    };
    let connected = negotiated.is_some();
    let actual = (
        client.version(),
        client.is_connected().then(|| client.era()),
    );
    if client.negotiated() != negotiated
        || client.is_connected() != connected
        || actual != accessors
    {
        return Settled::Odd(format!(
            "{outcome:?}, but negotiated() {:?}, version() {:?}, era() {:?}, is_connected() {}",
            client.negotiated(),
            client.version(),
            client.era(),
            client.is_connected()
        ));
    }
    outcome
}

/// Runs `column` over every row; a failure names each wrong cell with what was expected
/// and what came, and the requests of both.
fn column(column: Column) {
    let rows = rows();
    let mut wrong = Vec::new();
    for row in &rows {
        let (expected, expected_sent) = row.expect[column.index()];
        let (settled, sent) = run(row, column);
        if !expected.holds(&settled) || sent != expected_sent {
            let got = match &settled {
                Settled::Odd(why) => format!("something odd: {why}"),
                other => format!("{other:?}"),
            };
            wrong.push(format!(
                "{:?} x {column:?}:\n  expected {expected:?} after {expected_sent:?}\n  got      {got} after {sent:?}",
                row.name
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cells wrong:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );
}

#[test]
fn modern_15_modern_26_legacy_6_client_era_matrix_auto() {
    column(Column::Auto);
}

#[test]
fn modern_26_client_era_matrix_handed_back_2026_07_28() {
    column(Column::Pin2026);
}

#[test]
fn jsonrpc_11_modern_5_legacy_6_client_era_matrix_pinned_2025_11_25() {
    column(Column::Pin2025);
}

#[test]
fn jsonrpc_11_modern_5_legacy_6_client_era_matrix_pinned_2025_03_26() {
    column(Column::Pin2025_03);
}

#[test]
fn modern_5_modern_15_modern_26_client_era_matrix_sessionless_era() {
    column(Column::Sessionless);
}

#[test]
fn modern_15_legacy_6_client_era_matrix_sessions_era() {
    column(Column::Sessions);
}

#[test]
fn legacy_6_modern_2_client_era_matrix_http_sse_era() {
    column(Column::HttpSse);
}

#[test]
fn legacy_6_client_era_matrix_legacy_only_is_the_http_sse_era() {
    column(Column::LegacyOnly);
}

/// The table itself: row names are unique, so a failure names one cell.
#[test]
fn client_era_matrix_rows_are_named_apart() {
    let rows = rows();
    let mut names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), rows.len(), "duplicate row names");
}
