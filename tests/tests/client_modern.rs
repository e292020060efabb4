//! The client core at revision 2026-07-28 against the server core, in memory: the probe
//! and what its answer settles (MODERN-15, MODERN-26), the shape of every sessionless
//! request (MODERN-3, MODERN-4, MODERN-6), answers with a status (MODERN-5, MODERN-9),
//! `resultType` (MODERN-18), and cancellation by closing (MODERN-11).

use mcpwire::client::{self, Event, Revision};
use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{self, Eras};
use mcpwire::{Era, ProtocolVersion};
use mcpwire_tests::pair::Pair;

const DISCOVERED: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private"}"#;

fn header<'a>(head: &'a http::request::Parts, name: &str) -> Option<&'a str> {
    head.headers.get(name).and_then(|v| v.to_str().ok())
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("JSON")
}

/// The connection event, taken.
fn connected(p: &mut Pair) -> (ProtocolVersion, Era, Option<serde_json::Value>) {
    let at = p
        .client_events
        .iter()
        .position(|e| matches!(e, Event::Connected { .. }))
        .unwrap_or_else(|| panic!("connected: {:?}", p.client_events));
    match p.client_events.remove(at) {
        Event::Connected {
            version,
            era,
            result,
            ..
        } => (version, era, result.map(|r| json(r.text().as_str()))),
        _ => unreachable!(),
    }
}

/// Connects with `config` to a server serving `eras`; the probe, if any, is answered
/// as an application would (the core leaves `server/discover` to it).
fn connect(eras: Eras, config: client::Config) -> Pair {
    let mut p = Pair::new(server::Config::new().with_eras(eras), config);
    p.client.connect(p.now);
    p.run();
    if let Some(at) = p
        .server_events
        .iter()
        .position(|e| matches!(e, server::Event::Request(r) if r.method() == "server/discover"))
    {
        let server::Event::Request(probe) = p.server_events.remove(at) else {
            unreachable!()
        };
        let result = RawJson::new(DISCOVERED).unwrap();
        p.server.respond(p.now, probe.handle(), &result).unwrap();
        p.run();
    }
    p
}

/// The error a request of the application's failed with, if it failed.
fn failure(p: &Pair, id: &mcpwire::jsonrpc::RequestId) -> Option<client::RequestError> {
    p.client_events.iter().find_map(|e| match e {
        Event::Failed { id: i, error } if i == id => Some(error.clone()),
        _ => None,
    })
}

/// A call whose `region` a tool may mirror.
const DEPLOY_EU: &str = r#"{"name":"deploy","arguments":{"region":"eu"}}"#;

/// Calls a tool with `params` (JSON text), and lets both sides settle; the call's id.
fn call(p: &mut Pair, params: &str) -> mcpwire::jsonrpc::RequestId {
    let params = RawJson::new(params).unwrap();
    let id = p
        .client
        .request(p.now, "tools/call", Some(&params), None)
        .unwrap();
    p.run();
    id
}

fn auto() -> client::Config {
    client::Config::new(Pair::endpoint())
}

#[test]
fn modern_15_modern_14_modern_22_auto_probes_server_discover_and_settles_on_2026_07_28() {
    let mut p = connect(Eras::ALL, auto().with_capabilities(r#"{"sampling":{}}"#));
    let (version, era, result) = connected(&mut p);
    assert_eq!(
        (version, era),
        (ProtocolVersion::V2026_07_28, Era::Sessionless)
    );
    let result = result.expect("the DiscoverResult");
    assert_eq!(result["result"]["supportedVersions"][0], "2026-07-28");
    // Its caching hints, read with the server's vocabulary (MODERN-22).
    assert_eq!(
        client::CacheHint::read(&result["result"]),
        Some(client::CacheHint {
            ttl_ms: 0,
            scope: client::CacheScope::Private
        })
    );
    assert_eq!(p.client.negotiated(), Some(Revision::Exactly(version)));
    // The probe: a sessionless request like any other (MODERN-3, MODERN-4, MODERN-6).
    let probe = &p.requests[0];
    assert_eq!(probe.method, "POST");
    assert_eq!(header(probe, "mcp-method"), Some("server/discover"));
    assert_eq!(header(probe, "mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(header(probe, "mcp-session-id"), None);
    // Nothing else: no initialize, no GET stream, no session.
    assert_eq!(p.requests.len(), 1, "{:?}", p.requests);
    assert!(p.client.session_id().is_none());
}

#[test]
fn modern_3_modern_4_modern_6_a_call_carries_meta_and_mirroring_headers() {
    let mut p = connect(
        Eras::ALL,
        auto()
            .with_capabilities(r#"{"sampling":{}}"#)
            .with_client_info("tester", "9"),
    );
    connected(&mut p);
    let params = RawJson::new(
        r#"{"name":"ech\u006f","arguments":{"text":"hi"},"_meta":{"progressToken":3}}"#,
    )
    .unwrap();
    let id = p
        .client
        .request(p.now, "tools/call", Some(&params), None)
        .unwrap();
    p.run();
    let head = p.requests.last().unwrap();
    assert_eq!(header(head, "mcp-method"), Some("tools/call"));
    assert_eq!(header(head, "mcp-name"), Some("echo"));
    assert_eq!(header(head, "mcp-protocol-version"), Some("2026-07-28"));
    // The server's checks passed: it hands the request on, sessionless.
    let request = p.take_server_request();
    assert_eq!(request.era(), Era::Sessionless);
    let sent = json(request.message().text().as_str());
    let meta = &sent["params"]["_meta"];
    assert_eq!(meta["progressToken"], 3);
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json(r#"{"sampling":{}}"#)
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"],
        json(r#"{"name":"tester","version":"9"}"#)
    );
    assert_eq!(sent["params"]["arguments"]["text"], "hi");
    let result = RawJson::new(r#"{"resultType":"complete","content":[]}"#).unwrap();
    p.server.respond(p.now, request.handle(), &result).unwrap();
    p.run();
    let answered = p
        .client_events
        .iter()
        .any(|e| matches!(e, Event::Response(m) if m.id() == Some(&id)));
    assert!(answered, "{:?}", p.client_events);
}

#[test]
fn modern_15_a_session_only_server_is_spoken_to_with_initialize() {
    // It answers the probe 400 with -32022 listing its revisions (MODERN-5): the best
    // of them is offered in `initialize`.
    let mut p = connect(Eras::SESSIONS, auto());
    p.accept_initialize();
    let (version, era, _) = connected(&mut p);
    assert_eq!(
        (version, era),
        (ProtocolVersion::V2025_11_25, Era::Sessions)
    );
    assert!(p.client.session_id().is_some());
    assert_eq!(
        header(&p.requests[0], "mcp-method"),
        Some("server/discover")
    );
    assert_eq!(header(&p.requests[1], "mcp-method"), None);
    assert_eq!(p.client.negotiated(), Some(Revision::Exactly(version)));
}

#[test]
fn modern_15_a_client_pinned_to_the_sessionless_era_says_what_the_server_offered() {
    let p = connect(
        Eras::SESSIONS,
        auto().with_revision(Revision::Era(Era::Sessionless)),
    );
    let failed = p.client_events.iter().find_map(|e| match e {
        Event::ConnectFailed(error) => Some(error.clone()),
        _ => None,
    });
    let Some(client::RequestError::NoCommonRevision { offered }) = failed else {
        panic!("{:?}", p.client_events);
    };
    assert!(offered.iter().any(|v| v == "2025-11-25"), "{offered:?}");
    assert!(!p.client.is_connected());
}

#[test]
fn modern_26_a_revision_handed_back_is_spoken_without_a_probe() {
    let mut p = connect(
        Eras::ALL,
        auto().with_revision(Revision::Exactly(ProtocolVersion::V2026_07_28)),
    );
    let (version, era, result) = connected(&mut p);
    assert_eq!(
        (version, era, result),
        (ProtocolVersion::V2026_07_28, Era::Sessionless, None)
    );
    assert!(p.requests.is_empty(), "{:?}", p.requests);
}

#[test]
fn modern_9_an_error_answered_with_a_status_is_the_requests_answer() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    // `ping` is gone from this revision: 404 with -32601 (MODERN-21, MODERN-9).
    let id = p.client.request(p.now, "ping", None, None).unwrap();
    p.run();
    let answer = p
        .client_events
        .iter()
        .find_map(|e| match e {
            Event::Response(m) if m.id() == Some(&id) => Some(json(m.text().as_str())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{:?}", p.client_events));
    assert_eq!(answer["error"]["code"], -32601);
}

#[test]
fn modern_18_an_unknown_result_type_fails_the_request() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    let id = p.client.request(p.now, "tools/list", None, None).unwrap();
    p.run();
    let request = p.take_server_request();
    let result = RawJson::new(r#"{"resultType":"eventually","tools":[]}"#).unwrap();
    p.server.respond(p.now, request.handle(), &result).unwrap();
    p.run();
    assert!(
        matches!(failure(&p, &id), Some(client::RequestError::BadResponse(_))),
        "{:?}",
        p.client_events
    );
}

#[test]
fn modern_11_cancelling_closes_the_response_and_the_server_learns_it() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    let id = call(&mut p, r#"{"name":"slow","arguments":{}}"#);
    let request = p.take_server_request();
    let before = p.requests.len();
    assert!(p.client.cancel(p.now, &id, Some("enough")));
    p.run();
    // No notifications/cancelled POST: the close is the cancellation.
    assert_eq!(p.requests.len(), before, "{:?}", &p.requests[before..]);
    let cancelled = p.server_events.iter().any(
        |e| matches!(e, server::Event::Cancelled { request: r, .. } if *r == request.handle()),
    );
    assert!(cancelled, "{:?}", p.server_events);
    // A late answer goes nowhere.
    let result = RawJson::new(r#"{"content":[]}"#).unwrap();
    assert!(p.server.respond(p.now, request.handle(), &result).is_err());
}

/// Lists `tools` (a JSON array) in answer to a `tools/list` the client sends now;
/// returns the application's view of the result.
fn list_tools(p: &mut Pair, tools: &str) -> serde_json::Value {
    let id = p.client.request(p.now, "tools/list", None, None).unwrap();
    p.run();
    let request = p.take_server_request();
    let result = format!(r#"{{"resultType":"complete","tools":{tools}}}"#);
    let result = RawJson::new(&result).unwrap();
    p.server.respond(p.now, request.handle(), &result).unwrap();
    p.run();
    p.client_events
        .iter()
        .find_map(|e| match e {
            Event::Response(m) if m.id() == Some(&id) => Some(json(m.text().as_str())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{:?}", p.client_events))
}

const MIRRORING: &str = r#"[
  {"name":"deploy","inputSchema":{"type":"object","properties":{
    "region":{"type":"string","x-mcp-header":"Region"},
    "priority":{"type":"integer","x-mcp-header":"Priority"},
    "verbose":{"type":"boolean","x-mcp-header":"Verbose"},
    "greeting":{"type":"string","x-mcp-header":"NonAscii"},
    "query":{"type":"string"}}}},
  {"name":"bad_number","inputSchema":{"type":"object","properties":{
    "ratio":{"type":"number","x-mcp-header":"Ratio"}}}},
  {"name":"bad_duplicate","inputSchema":{"type":"object","properties":{
    "a":{"type":"string","x-mcp-header":"MyField"},
    "b":{"type":"string","x-mcp-header":"myfield"}}}}
]"#;

#[test]
fn modern_7_tools_with_invalid_annotations_are_dropped_and_the_application_told() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    let listed = list_tools(&mut p, MIRRORING);
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["deploy"]);
    assert_eq!(listed["result"]["resultType"], "complete");
    let dropped: Vec<&str> = p
        .client_events
        .iter()
        .filter_map(|e| match e {
            Event::ToolDropped { tool, reason } => {
                assert!(!reason.is_empty());
                Some(tool.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(dropped, ["bad_number", "bad_duplicate"]);
    // Its calls could not carry the headers they must: refused, unsent.
    let sent = p.requests.len();
    let id = call(&mut p, r#"{"name":"bad_number","arguments":{"ratio":0.5}}"#);
    assert_eq!(p.requests.len(), sent);
    assert!(
        matches!(failure(&p, &id), Some(client::RequestError::Unsendable(_))),
        "{:?}",
        p.client_events
    );
}

#[test]
fn modern_7_modern_8_a_call_mirrors_its_annotated_arguments() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    list_tools(&mut p, MIRRORING);
    let params = RawJson::new(
        r#"{"name":"deploy","arguments":{"region":"us-west1","priority":42,"verbose":null,"greeting":"Hello, 世界","query":"SELECT 1"}}"#,
    )
    .unwrap();
    p.client
        .request(p.now, "tools/call", Some(&params), None)
        .unwrap();
    p.run();
    let head = p.requests.last().unwrap();
    assert_eq!(header(head, "mcp-param-region"), Some("us-west1"));
    assert_eq!(header(head, "mcp-param-priority"), Some("42"));
    // Null: no header (MODERN-7); not annotated: none either.
    assert_eq!(header(head, "mcp-param-verbose"), None);
    assert_eq!(header(head, "mcp-param-query"), None);
    // Non-ASCII goes in the sentinel (MODERN-8).
    assert_eq!(
        header(head, "mcp-param-nonascii"),
        Some("=?base64?SGVsbG8sIOS4lueVjA==?=")
    );
    assert_eq!(header(head, "mcp-method"), Some("tools/call"));
    assert_eq!(p.take_server_request().method(), "tools/call");
}

#[test]
fn modern_7_an_argument_no_header_can_carry_fails_the_call_unsent() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    list_tools(&mut p, MIRRORING);
    let sent = p.requests.len();
    let id = call(
        &mut p,
        r#"{"name":"deploy","arguments":{"region":{"not":"a string"}}}"#,
    );
    assert_eq!(p.requests.len(), sent, "nothing is sent");
    assert!(
        matches!(failure(&p, &id), Some(client::RequestError::Unsendable(_))),
        "{:?}",
        p.client_events
    );
}

/// Calls `tool` and answers the call's first round with `result` (an
/// `input_required`, say); returns the application's id.
fn call_answered(p: &mut Pair, tool: &str, result: &str) -> mcpwire::jsonrpc::RequestId {
    let params = format!(r#"{{"name":"{tool}","arguments":{{"n":1}}}}"#);
    let id = call(p, &params);
    let request = p.take_server_request();
    let result = RawJson::new(result).unwrap();
    p.server.respond(p.now, request.handle(), &result).unwrap();
    p.run();
    id
}

/// The input requests the client handed the application, taken.
fn input_requests(p: &mut Pair) -> Vec<mcpwire::jsonrpc::Envelope> {
    let mut out = Vec::new();
    p.client_events.retain(|e| match e {
        Event::Request(m) => {
            out.push(m.clone());
            false
        }
        _ => true,
    });
    out
}

const ASKS: &str = r#"{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"sure?","requestedSchema":{"type":"object"}}}},"requestState":"{\"nonce\":\"n1\"}"}"#;

#[test]
fn modern_23_input_requests_reach_the_application_and_the_call_is_asked_again() {
    let mut p = connect(Eras::ALL, auto().with_capabilities(r#"{"elicitation":{}}"#));
    connected(&mut p);
    let id = call_answered(&mut p, "echo_state", ASKS);
    // The server's input request, as a session-era server's request would come.
    let asked = input_requests(&mut p);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].method(), Some("elicitation/create"));
    assert_eq!(json(asked[0].text().as_str())["params"]["message"], "sure?");
    let accept = RawJson::new(r#"{"action":"accept","content":{}}"#).unwrap();
    p.client
        .respond(p.now, asked[0].id().unwrap(), &accept)
        .unwrap();
    p.run();
    // The same call again: a new id, the answers under the server's keys, the state
    // as it came.
    let retry = p.take_server_request();
    let sent = json(retry.message().text().as_str());
    assert_ne!(retry.message().id(), Some(&id));
    assert_eq!(sent["params"]["name"], "echo_state");
    assert_eq!(sent["params"]["arguments"]["n"], 1);
    assert_eq!(
        sent["params"]["inputResponses"]["confirm"]["action"],
        "accept"
    );
    assert_eq!(sent["params"]["requestState"], r#"{"nonce":"n1"}"#);
    assert_eq!(
        sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    let done = RawJson::new(r#"{"resultType":"complete","content":[]}"#).unwrap();
    p.server.respond(p.now, retry.handle(), &done).unwrap();
    p.run();
    // One call for the application: its answer under the id it was given.
    let answers: Vec<_> = p
        .client_events
        .iter()
        .filter_map(|e| match e {
            Event::Response(m) => Some(m.id().cloned()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, [Some(id)]);
    // Nothing of the call is left: no rounds, no input requests, no exchange.
    assert!(p.client.is_idle(), "{:?}", p.client);
}

#[test]
fn modern_23_without_a_state_the_retry_has_no_request_state() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    let only_asks =
        r#"{"resultType":"input_required","inputRequests":{"roots":{"method":"roots/list"}}}"#;
    call_answered(&mut p, "no_state", only_asks);
    let asked = input_requests(&mut p);
    let roots = RawJson::new(r#"{"roots":[]}"#).unwrap();
    p.client
        .respond(p.now, asked[0].id().unwrap(), &roots)
        .unwrap();
    p.run();
    let retry = p.take_server_request();
    let sent = json(retry.message().text().as_str());
    assert!(sent["params"].get("requestState").is_none(), "{sent}");
    assert_eq!(
        sent["params"]["inputResponses"]["roots"]["roots"],
        serde_json::json!([])
    );
}

#[test]
fn modern_23_rounds_are_bounded() {
    let mut p = connect(Eras::ALL, auto().with_max_rounds(2));
    connected(&mut p);
    let state_only = r#"{"resultType":"input_required","requestState":"again"}"#;
    let id = call_answered(&mut p, "forever", state_only);
    // A state alone is asked again at once; the server keeps asking.
    for _ in 0..2 {
        let retry = p.take_server_request();
        let result = RawJson::new(state_only).unwrap();
        p.server.respond(p.now, retry.handle(), &result).unwrap();
        p.run();
    }
    assert!(
        matches!(failure(&p, &id), Some(client::RequestError::BadResponse(_))),
        "{:?}",
        p.client_events
    );
    assert!(p.client.is_idle(), "{:?}", p.client);
}

#[test]
fn modern_23_an_input_refused_fails_the_call_and_a_cancel_while_asking_is_local() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    let id = call_answered(&mut p, "echo_state", ASKS);
    let asked = input_requests(&mut p);
    p.client
        .respond_error(
            p.now,
            asked[0].id().unwrap(),
            mcpwire::jsonrpc::ErrorCode::METHOD_NOT_FOUND,
            "no elicitation here",
        )
        .unwrap();
    p.run();
    assert!(
        matches!(
            failure(&p, &id),
            Some(client::RequestError::InputRefused { .. })
        ),
        "{:?}",
        p.client_events
    );
    // Cancelled while the application is asked: nothing goes to the server, and a late
    // answer goes nowhere.
    let id = call_answered(&mut p, "echo_state", ASKS);
    let asked = input_requests(&mut p);
    let sent = p.requests.len();
    assert!(p.client.cancel(p.now, &id, None));
    let accept = RawJson::new(r#"{"action":"accept"}"#).unwrap();
    p.client
        .respond(p.now, asked[0].id().unwrap(), &accept)
        .unwrap();
    p.run();
    assert_eq!(p.requests.len(), sent, "{:?}", &p.requests[sent..]);
    assert!(p.client.is_idle(), "{:?}", p.client);
}

/// Answers the next server request (`method`) with the error `code` and `message`.
fn refuse(p: &mut Pair, method: &str, code: i64, message: &str) {
    let request = p.take_server_request();
    assert_eq!(request.method(), method);
    p.server
        .respond_error(
            p.now,
            request.handle(),
            mcpwire::jsonrpc::ErrorCode(code),
            message,
            None,
        )
        .unwrap();
    p.run();
}

/// The answer the application got for `id`, as JSON.
fn answer(p: &Pair, id: &mcpwire::jsonrpc::RequestId) -> serde_json::Value {
    let answers: Vec<serde_json::Value> = p
        .client_events
        .iter()
        .filter_map(|e| match e {
            Event::Response(m) if m.id() == Some(id) => Some(json(m.text().as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 1, "{:?}", p.client_events);
    answers.into_iter().next().unwrap()
}

#[test]
fn modern_7_a_refused_mcp_param_header_lists_the_tools_again_and_the_call_goes_again_once() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    // Listed before the tool mirrored anything: the call carries no Mcp-Param header.
    list_tools(
        &mut p,
        r#"[{"name":"deploy","inputSchema":{"type":"object"}}]"#,
    );
    p.client_events.clear();
    let id = call(&mut p, DEPLOY_EU);
    assert_eq!(header(p.requests.last().unwrap(), "mcp-param-region"), None);
    refuse(
        &mut p,
        "tools/call",
        -32020,
        "header mismatch: Mcp-Param-Region is required",
    );
    // The client lists the tools itself; the application sees nothing of it.
    let relist = p.take_server_request();
    assert_eq!(relist.method(), "tools/list");
    let tools = format!(r#"{{"resultType":"complete","tools":{MIRRORING}}}"#);
    p.server
        .respond(p.now, relist.handle(), &RawJson::new(&tools).unwrap())
        .unwrap();
    p.run();
    // The call again, under a new id, with the header the schema now asks for.
    let again = p.take_server_request();
    assert_eq!(again.method(), "tools/call");
    assert_ne!(again.message().id(), Some(&id));
    assert_eq!(
        header(p.requests.last().unwrap(), "mcp-param-region"),
        Some("eu")
    );
    let done = RawJson::new(r#"{"resultType":"complete","content":[]}"#).unwrap();
    p.server.respond(p.now, again.handle(), &done).unwrap();
    p.run();
    assert_eq!(answer(&p, &id)["result"]["content"], serde_json::json!([]));
    assert!(
        !p.client_events
            .iter()
            .any(|e| matches!(e, Event::Response(m) if m.id() != Some(&id))),
        "the listing is the client's own: {:?}",
        p.client_events
    );
    assert!(p.client.is_idle(), "{:?}", p.client);

    // A second refusal of the same call is its answer: the tools are listed once.
    let id = call(&mut p, DEPLOY_EU);
    let mismatch = "header mismatch: Mcp-Param-Region differs from the argument";
    refuse(&mut p, "tools/call", -32020, mismatch);
    let relist = p.take_server_request();
    p.server
        .respond(p.now, relist.handle(), &RawJson::new(&tools).unwrap())
        .unwrap();
    p.run();
    refuse(&mut p, "tools/call", -32020, mismatch);
    assert_eq!(answer(&p, &id)["error"]["code"], -32020);
    assert!(p.client.is_idle(), "{:?}", p.client);
}

#[test]
fn modern_7_without_tools_the_refusal_is_the_calls_answer() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    let id = call(&mut p, DEPLOY_EU);
    refuse(&mut p, "tools/call", -32020, "Mcp-Param-Region is required");
    refuse(&mut p, "tools/list", -32603, "cannot list now");
    let refused = answer(&p, &id);
    assert_eq!(refused["error"]["code"], -32020);
    assert_eq!(refused["error"]["message"], "Mcp-Param-Region is required");
    // Any other -32020 (not about Mcp-Param) is answered at once.
    let id = call(&mut p, DEPLOY_EU);
    refuse(
        &mut p,
        "tools/call",
        -32020,
        "Mcp-Name differs from params.name",
    );
    assert_eq!(answer(&p, &id)["error"]["code"], -32020);
    assert!(p.client.is_idle(), "{:?}", p.client);
}

#[test]
fn modern_23_a_call_waiting_for_input_times_out_at_its_deadline() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    let params = RawJson::new(r#"{"name":"echo_state","arguments":{}}"#).unwrap();
    let deadline = p.now + std::time::Duration::from_secs(5);
    let id = p
        .client
        .request(p.now, "tools/call", Some(&params), Some(deadline))
        .unwrap();
    p.run();
    let request = p.take_server_request();
    p.server
        .respond(p.now, request.handle(), &RawJson::new(ASKS).unwrap())
        .unwrap();
    p.run();
    let asked = input_requests(&mut p);
    assert_eq!(asked.len(), 1);
    // The application never answers: the call's deadline still holds.
    assert_eq!(p.client.poll_timeout(), Some(deadline));
    p.advance(std::time::Duration::from_secs(6));
    assert_eq!(failure(&p, &id), Some(client::RequestError::Timeout));
    assert!(p.client.is_idle(), "{:?}", p.client);
    // A late answer goes nowhere.
    let accept = RawJson::new(r#"{"action":"accept"}"#).unwrap();
    p.client
        .respond(p.now, asked[0].id().unwrap(), &accept)
        .unwrap();
    p.run();
    assert!(p.requests.iter().all(|r| r.method == http::Method::POST));
    assert!(p.client.is_idle(), "{:?}", p.client);
}

#[test]
fn modern_11_modern_12_a_broken_response_fails_the_call_saying_it_may_have_run() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    let id = call(&mut p, r#"{"name":"slow","arguments":{}}"#);
    let request = p.take_server_request();
    // The server has begun: a progress notification is on the call's stream.
    let progress = RawJson::new(r#"{"progressToken":"t","progress":1}"#).unwrap();
    p.server
        .notify(
            p.now,
            server::Target::Request(request.handle()),
            "notifications/progress",
            Some(&progress),
        )
        .unwrap();
    p.run();
    assert!(
        p.client_events
            .iter()
            .any(|e| matches!(e, Event::Notification(_))),
        "{:?}",
        p.client_events
    );
    let sent = p.requests.len();
    p.cut_all();
    assert_eq!(
        failure(&p, &id),
        Some(client::RequestError::Broken {
            reached: client::Reached::Server
        })
    );
    // Nothing resumes it (no event ids at 2026-07-28), and nothing sends it again.
    p.advance(std::time::Duration::from_secs(30));
    assert_eq!(p.requests.len(), sent, "{:?}", &p.requests[sent..]);
    assert!(p.client.is_idle(), "{:?}", p.client);
}

#[test]
fn modern_3_params_the_revision_cannot_carry_fail_the_request_unsent() {
    let mut p = connect(Eras::ALL, auto());
    connected(&mut p);
    let sent = p.requests.len();
    for params in [
        "[1,2]",
        r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}"#,
    ] {
        let params = RawJson::new(params).unwrap();
        let id = p
            .client
            .request(p.now, "tools/call", Some(&params), None)
            .unwrap();
        p.run();
        assert!(
            matches!(failure(&p, &id), Some(client::RequestError::Unsendable(_))),
            "{:?}",
            p.client_events
        );
    }
    // A notification has no answer to fail: it is refused at once.
    let params = RawJson::new("7").unwrap();
    assert!(
        p.client
            .notify(p.now, "notifications/x", Some(&params))
            .is_err()
    );
    p.run();
    assert_eq!(p.requests.len(), sent, "nothing was sent");
    assert!(p.client.is_idle(), "{:?}", p.client);
}
