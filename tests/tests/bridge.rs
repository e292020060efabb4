//! `mcpwire::bridge::Gateway`, a stdio server behind the HTTP server, on a virtual clock:
//! BRIDGE-1 … BRIDGE-5 and STDIO-5, its children played by the test.

use std::time::Duration;

use mcpwire::bridge::{Config, Exit, Happening, Role};
use mcpwire_tests::bridge::{Rig, modern_meta};
use serde_json::{Value, json};

const V: &str = "2025-11-25";

fn tools() -> Value {
    json!({"tools": {"listChanged": true}})
}

fn call_body(id: u64, meta: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}},"_meta":{{{meta}}}}}}}"#
    )
}

/// A rig whose pool child (the first child) is ready.
fn pooled(config: Config) -> (Rig, mcpwire::bridge::ChildId) {
    let mut rig = Rig::new(config);
    let pool = rig.children_of(Role::Pool);
    assert_eq!(
        pool.len(),
        1,
        "BRIDGE-2: the first pool child starts at once"
    );
    rig.ready_pool_child(pool[0], &tools());
    assert!(rig.gateway.is_ready());
    (rig, pool[0])
}

#[test]
fn bridge_1_each_session_gets_its_own_child_and_ids_pass_through() {
    let mut rig = Rig::new(Config::new().with_pool(0));
    let (s1, c1) = rig.open_session(V);
    let (s2, c2) = rig.open_session(V);
    assert_ne!(c1, c2);
    assert_ne!(s1, s2);
    let x = rig.post(
        Some(&s1),
        Some(V),
        r#"{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"echo"}}"#,
    );
    let input = rig.take_input(c1);
    assert_eq!(input.len(), 1);
    assert_eq!(input[0]["id"], "abc", "the client's id as it is");
    assert!(
        rig.take_input(c2).is_empty(),
        "nothing for the other session"
    );
    rig.child_sends(
        c1,
        &json!({"jsonrpc":"2.0","id":"abc","result":{"content":[{"type":"text","text":"hi"}]}}),
    );
    let answer = rig.answer(x).expect("answered");
    assert_eq!(answer["id"], "abc");
    assert_eq!(answer["result"]["content"][0]["text"], "hi");
    assert!(answer["result"].get("resultType").is_none(), "unchanged");
}

#[test]
fn bridge_1_initialize_carries_the_negotiated_version_and_a_differing_child_is_corrected() {
    let mut rig = Rig::new(Config::new().with_pool(0));
    let x = rig.post(
        None,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    let child = rig.children_of(Role::Pool).len();
    assert_eq!(child, 0);
    let child = *rig.children.keys().next().unwrap();
    let init = rig.take_input(child);
    assert_eq!(
        init[0]["params"]["protocolVersion"], V,
        "the version the transport negotiated"
    );
    assert_eq!(init[0]["params"]["clientInfo"]["name"], "t");
    rig.child_sends(
        child,
        &json!({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"old","version":"0"}}}),
    );
    let answer = rig.answer(x).expect("answered");
    assert_eq!(answer["result"]["protocolVersion"], V);
    assert_eq!(answer["result"]["serverInfo"]["name"], "old");
    assert!(rig.reports.iter().any(|r| matches!(
        r,
        Happening::VersionDiffers { child, .. } if child == "2025-03-26"
    )));
}

#[test]
fn bridge_1_stdio_5_a_deleted_session_ends_its_child_in_three_steps() {
    let mut rig = Rig::new(
        Config::new()
            .with_pool(0)
            .with_grace(Duration::from_secs(2)),
    );
    let (session, child) = rig.open_session(V);
    let head = mcpwire_tests::server::Harness::head(
        "DELETE",
        "/mcp",
        &[("mcp-session-id", &session), ("mcp-protocol-version", V)],
    );
    rig.h.send(head, None);
    rig.pump();
    assert!(rig.child(child).input_closed, "STDIO-5: input closed first");
    assert!(!rig.child(child).terminated);
    rig.advance(Duration::from_secs(2));
    assert!(rig.child(child).terminated, "then SIGTERM");
    assert!(!rig.child(child).killed);
    rig.advance(Duration::from_secs(2));
    assert!(rig.child(child).killed, "then SIGKILL");
    rig.child_exits(child, Exit::Signal(9));
    assert_eq!(rig.gateway.children(), 0);
}

#[test]
fn bridge_3_a_session_childs_question_goes_on_its_call_and_the_answer_comes_back() {
    let mut rig = Rig::new(Config::new().with_pool(0));
    let (session, child) = rig.open_session(V);
    let x = rig.post(
        Some(&session),
        Some(V),
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sample"}}"#,
    );
    rig.take_input(child);
    rig.child_sends(
        child,
        &json!({"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":10}}),
    );
    let events = rig.h.reply(x).messages();
    let question = events
        .iter()
        .find(|m| m["method"] == "sampling/createMessage")
        .expect("the question on the call's stream");
    let server_id = question["id"].clone();
    let answer = json!({"jsonrpc":"2.0","id":server_id,"result":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}});
    let a = rig.post(Some(&session), Some(V), &answer.to_string());
    assert_eq!(rig.h.reply(a).status(), 202);
    let input = rig.take_input(child);
    assert_eq!(input.len(), 1);
    assert_eq!(input[0]["id"], 0, "the child's own id");
    assert_eq!(input[0]["result"]["model"], "m");
    // Progress goes to the request whose token it names.
    rig.child_sends(
        child,
        &json!({"jsonrpc":"2.0","id":5,"result":{"content":[]}}),
    );
    assert_eq!(rig.answer(x).expect("answered")["id"], 5);
}

#[test]
fn bridge_2_modern_requests_go_to_an_initialized_pool_child_with_ids_remapped() {
    let (mut rig, pool) = pooled(Config::new().with_pool(2));
    let discover = rig.post_modern(
        "server/discover",
        None,
        &format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{"_meta":{{{}}}}}}}"#,
            modern_meta("{}")
        ),
    );
    let found = rig.answer(discover).expect("answered");
    assert_eq!(found["result"]["capabilities"], tools(), "{found}");
    assert_eq!(
        found["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "stdio-server"
    );
    let meta = format!(r#"{},"progressToken":"tok""#, modern_meta("{}"));
    let x = rig.post_modern("tools/call", Some("echo"), &call_body(42, &meta));
    let input = rig.take_input(pool);
    assert_eq!(input.len(), 1, "{input:?}");
    let wire = input[0]["id"].clone();
    assert_ne!(wire, 42, "the child's own id");
    let sent_meta = &input[0]["params"]["_meta"];
    assert_eq!(sent_meta["progressToken"], wire, "the token remapped");
    assert!(
        sent_meta
            .get("io.modelcontextprotocol/protocolVersion")
            .is_none(),
        "the protocol's keys left out: {sent_meta}"
    );
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":wire,"progress":1}}),
    );
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":wire,"result":{"content":[{"type":"text","text":"hi"}]}}),
    );
    let messages = rig.h.reply(x).messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["params"]["progressToken"], "tok");
    assert_eq!(messages[1]["id"], 42);
    assert_eq!(messages[1]["result"]["resultType"], "complete");
}

#[test]
fn bridge_2_one_request_per_child_more_children_then_a_queue() {
    let (mut rig, first) = pooled(Config::new().with_pool(2));
    let meta = modern_meta("{}");
    let a = rig.post_modern("tools/call", Some("echo"), &call_body(1, &meta));
    let b = rig.post_modern("tools/call", Some("echo"), &call_body(2, &meta));
    let pool = rig.children_of(Role::Pool);
    assert_eq!(pool.len(), 2, "a second child for the second request");
    let second = pool[1];
    rig.ready_pool_child(second, &tools());
    let c = rig.post_modern("tools/call", Some("echo"), &call_body(3, &meta));
    assert_eq!(rig.children_of(Role::Pool).len(), 2, "the pool is full");
    let on_first = rig.take_input(first);
    let on_second = rig.take_input(second);
    assert_eq!(on_first.len(), 1);
    assert_eq!(on_second.len(), 1, "{on_second:?}");
    // The first child answers; the waiting request goes to it.
    let wire = on_first[0]["id"].clone();
    rig.child_sends(
        first,
        &json!({"jsonrpc":"2.0","id":wire,"result":{"content":[]}}),
    );
    assert_eq!(rig.answer(a).expect("answered")["id"], 1);
    let next = rig.take_input(first);
    assert_eq!(next.len(), 1);
    assert_ne!(next[0]["id"], wire, "a new id on that child");
    let wire2 = on_second[0]["id"].clone();
    rig.child_sends(
        second,
        &json!({"jsonrpc":"2.0","id":wire2,"result":{"content":[]}}),
    );
    assert_eq!(rig.answer(b).expect("answered")["id"], 2);
    rig.child_sends(
        first,
        &json!({"jsonrpc":"2.0","id":next[0]["id"],"result":{"content":[]}}),
    );
    assert_eq!(rig.answer(c).expect("answered")["id"], 3);
}

#[test]
fn bridge_2_requests_before_the_pool_is_ready_wait_for_it() {
    let mut rig = Rig::new(Config::new().with_pool(1));
    let pool = rig.children_of(Role::Pool)[0];
    let x = rig.post_modern(
        "tools/call",
        Some("echo"),
        &call_body(9, &modern_meta("{}")),
    );
    assert_eq!(rig.answer(x), None, "it waits");
    rig.ready_pool_child(pool, &tools());
    let input = rig.take_input(pool);
    assert_eq!(input.len(), 1);
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":input[0]["id"],"result":{"content":[]}}),
    );
    assert_eq!(rig.answer(x).expect("answered")["id"], 9);
}

#[test]
fn bridge_3_a_pool_childs_question_is_an_input_required_answer_and_the_retry_brings_it_back() {
    let (mut rig, pool) = pooled(Config::new().with_pool(1));
    let meta = modern_meta(r#"{"elicitation":{}}"#);
    let x = rig.post_modern("tools/call", Some("echo"), &call_body(1, &meta));
    let wire = rig.take_input(pool)[0]["id"].clone();
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}}),
    );
    let first = rig.answer(x).expect("answered");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let (key, question) = result["inputRequests"]
        .as_object()
        .and_then(|o| o.iter().next())
        .expect("one question");
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["message"], "name?");
    let state = result["requestState"].as_str().expect("a state");
    assert!(
        !state.contains("bridge:"),
        "sealed, not in the clear: {state}"
    );
    let retry = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}},"inputResponses":{{"{key}":{{"action":"accept","content":{{"name":"Ada"}}}}}},"requestState":"{state}","_meta":{{{meta}}}}}}}"#
    );
    let y = rig.post_modern("tools/call", Some("echo"), &retry);
    let input = rig.take_input(pool);
    assert_eq!(input.len(), 1, "{input:?}");
    assert_eq!(input[0]["id"], 7, "the answer to the child's own id");
    assert_eq!(input[0]["result"]["content"]["name"], "Ada");
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":wire,"result":{"content":[{"type":"text","text":"Ada"}]}}),
    );
    let done = rig.answer(y).expect("answered");
    assert_eq!(done["id"], 2);
    assert_eq!(done["result"]["resultType"], "complete");
    // The state was used up.
    let again = rig.post_modern(
        "tools/call",
        Some("echo"),
        &retry.replace(r#""id":2"#, r#""id":3"#),
    );
    assert_eq!(
        rig.answer(again).expect("answered")["error"]["code"],
        -32602
    );
}

#[test]
fn bridge_3_a_question_the_client_cannot_take_is_refused_to_the_child() {
    let (mut rig, pool) = pooled(Config::new().with_pool(1));
    let x = rig.post_modern(
        "tools/call",
        Some("echo"),
        &call_body(1, &modern_meta("{}")),
    );
    rig.take_input(pool);
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}),
    );
    let input = rig.take_input(pool);
    assert_eq!(input[0]["id"], 3);
    assert_eq!(input[0]["error"]["code"], -32601, "{input:?}");
    assert_eq!(rig.answer(x), None, "the call still runs");
}

#[test]
fn bridge_3_an_abandoned_question_cancels_the_childs_request() {
    let (mut rig, pool) = pooled(
        Config::new()
            .with_pool(1)
            .with_input_wait(Duration::from_secs(30)),
    );
    let meta = modern_meta(r#"{"roots":{}}"#);
    rig.post_modern("tools/call", Some("echo"), &call_body(1, &meta));
    let wire = rig.take_input(pool)[0]["id"].clone();
    rig.child_sends(pool, &json!({"jsonrpc":"2.0","id":1,"method":"roots/list"}));
    rig.advance(Duration::from_secs(31));
    let input = rig.take_input(pool);
    assert_eq!(input[0]["method"], "notifications/cancelled");
    assert_eq!(input[0]["params"]["requestId"], wire);
    assert!(rig.reports.contains(&Happening::InputAbandoned));
    // The child is free again.
    let y = rig.post_modern("tools/call", Some("echo"), &call_body(2, &meta));
    let next = rig.take_input(pool);
    assert_eq!(next.len(), 1);
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":next[0]["id"],"result":{"content":[]}}),
    );
    assert_eq!(rig.answer(y).expect("answered")["id"], 2);
}

#[test]
fn bridge_4_a_child_that_dies_fails_exactly_the_calls_in_flight_and_its_session_ends() {
    let mut rig = Rig::new(Config::new().with_pool(0));
    let (s1, c1) = rig.open_session(V);
    let (s2, c2) = rig.open_session(V);
    let a = rig.post(
        Some(&s1),
        Some(V),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}"#,
    );
    let b = rig.post(
        Some(&s1),
        Some(V),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}"#,
    );
    let other = rig.post(
        Some(&s2),
        Some(V),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}"#,
    );
    rig.child_says(c1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"res");
    rig.child_exits(c1, Exit::Code(1));
    for x in [a, b] {
        let answer = rig.answer(x).expect("answered");
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("exited with status 1"),
            "{answer}"
        );
    }
    assert_eq!(rig.answer(other), None, "the other session's call runs on");
    assert!(
        rig.reports
            .iter()
            .any(|r| matches!(r, Happening::Exited { failed: 2, .. }))
    );
    assert!(
        rig.reports
            .iter()
            .any(|r| matches!(r, Happening::BadLine(_))),
        "the cut line reported"
    );
    let gone = rig.post(
        Some(&s1),
        Some(V),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    );
    assert_eq!(
        rig.h.reply(gone).status(),
        404,
        "the session ended with its child"
    );
    let (_, fresh) = rig.open_session(V);
    assert_ne!(fresh, c1, "a new session starts a fresh child");
    let _ = c2;
}

#[test]
fn bridge_4_a_garbage_line_is_reported_and_loses_nothing() {
    let mut rig = Rig::new(Config::new().with_pool(0));
    let (session, child) = rig.open_session(V);
    let x = rig.post(
        Some(&session),
        Some(V),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#,
    );
    rig.child_says(
        child,
        "Debugger attached.\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n",
    );
    let answer = rig.answer(x).expect("answered");
    assert_eq!(answer["id"], 1);
    assert!(answer.get("result").is_some(), "{answer}");
    let bad: Vec<_> = rig
        .reports
        .iter()
        .filter_map(|r| match r {
            Happening::BadLine(e) => Some(e.excerpt().to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(bad, ["Debugger attached."]);
}

#[test]
fn bridge_4_a_silent_child_stalls_and_fails_its_calls() {
    let mut rig = Rig::new(
        Config::new()
            .with_pool(0)
            .with_stall(Duration::from_secs(10)),
    );
    let (session, child) = rig.open_session(V);
    // Idle: no request waits, no stall however long.
    rig.advance(Duration::from_secs(60));
    assert!(!rig.child(child).input_closed);
    let x = rig.post(
        Some(&session),
        Some(V),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang"}}"#,
    );
    rig.advance(Duration::from_secs(6));
    rig.child_says(child, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"working\"}}\n");
    rig.advance(Duration::from_secs(6));
    assert!(
        !rig.child(child).input_closed,
        "output restarts the stall clock"
    );
    rig.advance(Duration::from_secs(5));
    let answer = rig.answer(x).expect("answered");
    assert_eq!(answer["error"]["code"], -32603);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stalled")
    );
    assert!(rig.child(child).input_closed, "and the child is ended");
}

#[test]
fn bridge_4_a_pool_child_that_dies_is_replaced_for_the_next_request() {
    let (mut rig, pool) = pooled(Config::new().with_pool(1));
    let meta = modern_meta("{}");
    let x = rig.post_modern("tools/call", Some("echo"), &call_body(1, &meta));
    rig.take_input(pool);
    rig.child_exits(pool, Exit::Signal(11));
    assert_eq!(rig.answer(x).expect("answered")["error"]["code"], -32603);
    let y = rig.post_modern("tools/call", Some("echo"), &call_body(2, &meta));
    let fresh = *rig.children_of(Role::Pool).last().unwrap();
    assert_ne!(fresh, pool);
    rig.ready_pool_child(fresh, &tools());
    let input = rig.take_input(fresh);
    rig.child_sends(
        fresh,
        &json!({"jsonrpc":"2.0","id":input[0]["id"],"result":{"content":[]}}),
    );
    assert_eq!(rig.answer(y).expect("answered")["id"], 2);
}

#[test]
fn bridge_5_a_full_queue_and_a_child_that_does_not_read_answer_busy() {
    let (mut rig, pool) = pooled(Config::new().with_pool(1).with_max_waiting(1));
    let meta = modern_meta("{}");
    rig.post_modern("tools/call", Some("echo"), &call_body(1, &meta));
    rig.post_modern("tools/call", Some("echo"), &call_body(2, &meta));
    let third = rig.post_modern("tools/call", Some("echo"), &call_body(3, &meta));
    let answer = rig.answer(third).expect("answered");
    assert_eq!(answer["error"]["code"], -32603);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("busy")
    );
    let _ = pool;

    // A session child that reads nothing: its unwritten bytes are bounded.
    let mut rig = Rig::new(Config::new().with_pool(0).with_max_unwritten(300));
    let (session, child) = rig.open_session(V);
    rig.gateway.child_wrote(child, 0);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "x".repeat(400)
    );
    let x = rig.post(Some(&session), Some(V), &big);
    let answer = rig.answer(x).expect("answered");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(rig.take_input(child).is_empty());
}

#[test]
fn bridge_5_sessions_past_the_bound_get_no_child() {
    let mut rig = Rig::new(Config::new().with_pool(0).with_max_children(1));
    rig.open_session(V);
    let x = rig.post(
        None,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    let answer = rig.answer(x).expect("answered");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(rig.children.len(), 1);
}

#[test]
fn bridge_2_a_closed_modern_stream_cancels_on_the_child_and_frees_it() {
    let (mut rig, pool) = pooled(Config::new().with_pool(1));
    let meta = format!(r#"{},"progressToken":1"#, modern_meta("{}"));
    let x = rig.post_modern("tools/call", Some("echo"), &call_body(1, &meta));
    let wire = rig.take_input(pool)[0]["id"].clone();
    // A progress notification opens the SSE stream; the client then goes away.
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":wire,"progress":1}}),
    );
    rig.h.server.handle_disconnect(rig.h.now, x);
    rig.pump();
    let input = rig.take_input(pool);
    assert_eq!(input.len(), 1, "{input:?}");
    assert_eq!(input[0]["method"], "notifications/cancelled");
    assert_eq!(input[0]["params"]["requestId"], wire);
    let y = rig.post_modern(
        "tools/call",
        Some("echo"),
        &call_body(2, &modern_meta("{}")),
    );
    let next = rig.take_input(pool);
    assert_eq!(next.len(), 1, "the child is free again");
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":next[0]["id"],"result":{"content":[]}}),
    );
    assert_eq!(rig.answer(y).expect("answered")["id"], 2);
}

#[test]
fn bridge_2_list_changes_of_a_pool_child_reach_the_listens() {
    let (mut rig, pool) = pooled(Config::new().with_pool(1));
    let listen = format!(
        r#"{{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},"_meta":{{{}}}}}}}"#,
        modern_meta("{}")
    );
    let x = rig.post_modern("subscriptions/listen", None, &listen);
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}),
    );
    let messages = rig.h.reply(x).messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[1]["method"], "notifications/tools/list_changed");
    assert_eq!(
        messages[1]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L"
    );
}

#[test]
fn bridge_5_session_8_at_the_bound_an_idle_sessions_child_makes_room() {
    // As `mcpwire bridge` sets it up: as many sessions as children.
    let server = mcpwire::server::Config::new()
        .with_eras(mcpwire::server::Eras::ALL)
        .with_max_sessions(1);
    let mut rig = Rig::with_server(server, Config::new().with_pool(0).with_max_children(1));
    let (first, old) = rig.open_session(V);
    let (second, new) = rig.open_session(V);
    assert_ne!(first, second);
    assert_ne!(old, new, "a child for the new session");
    assert!(
        rig.child(old).input_closed,
        "the evicted session's child ends"
    );
    let x = rig.post(
        Some(&second),
        Some(V),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    );
    let input = rig.take_input(new);
    assert_eq!(input[0]["method"], "tools/list");
    rig.child_sends(new, &json!({"jsonrpc":"2.0","id":1,"result":{"tools":[]}}));
    assert_eq!(rig.answer(x).expect("answered")["id"], 1);
}
