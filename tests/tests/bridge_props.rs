//! Property: the stdio gateway keeps every request, answer, question and id where it
//! belongs, whatever the order of the clients' calls, retries, cancels and DELETEs and
//! of the children's answers, progress, questions, garbage lines, exits and stalls
//! (BRIDGE-1 … BRIDGE-5, STDIO-1, STDIO-6). The model is `mcpwire_tests::bridge_ops`,
//! which the `bridge_gateway` fuzz target runs too.

use std::time::Duration;

use mcpwire::bridge::{ChildId, Config, Role};
use mcpwire_tests::bridge::{Rig, modern_meta};
use mcpwire_tests::bridge_ops::{self, Op, Setup};
use proptest::prelude::*;
use serde_json::json;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn bridge_1_bridge_2_bridge_3_bridge_4_bridge_5_op_model_holds(
        data in proptest::collection::vec(any::<u8>(), 0..1024)
    ) {
        bridge_ops::run_bytes(&data);
    }
}

fn setup(pool: usize) -> Setup {
    Setup {
        pool,
        max_waiting: 2,
        max_children: 2,
    }
}

/// The model moves: a session answered, a 2026-07-28 call asked a question and
/// answered after the retry, a stalled child, an abandoned question.
#[test]
fn bridge_1_bridge_3_bridge_4_the_model_answers_asks_and_stalls() {
    let ops = [
        Op::Open(2),
        Op::InitAnswer(0, true, 2),
        Op::InitAnswer(0, true, 0),
        Op::SessionCall {
            session: 0,
            id: 1,
            progress: true,
        },
        Op::Progress(0, 0),
        Op::Answer(0, 0, 0, 7),
        Op::ModernCall {
            id: 3,
            caps: 1,
            progress: true,
        },
        Op::Progress(1, 0),
        Op::Ask(1, false),
        Op::Retry(0, 0xff, false),
        Op::Answer(1, 0, 0, 0),
        Op::SessionCall {
            session: 0,
            id: 2,
            progress: false,
        },
        Op::Stall,
        Op::ModernCall {
            id: 4,
            caps: 1,
            progress: false,
        },
        Op::Ask(0, false),
        Op::Advance(255),
    ];
    let seen = bridge_ops::run(setup(1), &ops);
    eprintln!("{seen:?}");
    assert!(seen.sessions >= 1, "{seen:?}");
    assert!(seen.results >= 2, "{seen:?}");
    assert!(seen.input_required >= 1, "{seen:?}");
    assert!(seen.stalls >= 1, "{seen:?}");
}

fn pooled() -> (Rig, ChildId) {
    let mut rig = Rig::new(
        Config::new()
            .with_pool(1)
            .with_stall(Duration::from_secs(10)),
    );
    let pool = rig.children_of(Role::Pool)[0];
    rig.ready_pool_child(pool, &json!({"tools": {}}));
    (rig, pool)
}

fn call(id: u64, extra: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{}}{extra},"_meta":{{{}}}}}}}"#,
        modern_meta(r#"{"elicitation":{},"sampling":{}}"#)
    )
}

/// The `input_required` answer of exchange `x`: its one key and its state.
fn asked(rig: &Rig, x: mcpwire::server::ExchangeId) -> (String, String) {
    let answer = rig.answer(x).expect("answered");
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let keys: Vec<&String> = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys.len(), 1, "{answer}");
    (
        keys[0].clone(),
        result["requestState"].as_str().unwrap().to_owned(),
    )
}

/// Found by the op model (`Ask`, `GiveUp`, `Ask`, `Retry`): a pool child's question
/// asked while its request is parked gets the key `q{open questions + 1}`, so once a
/// question of that parking is given up (or answered by a partial retry) the new one
/// gets a key the client already holds for another question, and the client's answer
/// to the old question is written to the child as the answer to the new one.
#[test]
fn bridge_3_a_question_asked_after_one_was_given_up_gets_its_own_key() {
    let (mut rig, pool) = pooled();
    let x = rig.post_modern("tools/call", Some("echo"), &call(1, ""));
    rig.take_input(pool);
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}}),
    );
    let (key, state) = asked(&rig, x);
    // The child gives its question up and asks another one.
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"e"}}),
    );
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}),
    );
    // The client answers the question it was shown: the elicitation.
    let retry = call(
        2,
        &format!(
            r#","inputResponses":{{"{key}":{{"action":"accept","content":{{"name":"Ada"}}}}}},"requestState":"{state}""#
        ),
    );
    let y = rig.post_modern("tools/call", Some("echo"), &retry);
    let input = rig.take_input(pool);
    assert!(
        input.iter().all(|m| m["id"] != "s"),
        "the sampling question got the elicitation's answer: {input:?}"
    );
    // The sampling question is still open: the retry is asked it.
    let (_, _) = asked(&rig, y);
}

/// Found by the op model (`Ask`, then the child answers its request): a pool child
/// that answers its request while its question waits for the client's retry (it gave
/// up waiting) has its answer dropped ("a response that belongs to nothing open"), and
/// stays reserved for the retry: the next request waits instead of running on it, and
/// the retry is boarded on a request the child already finished, so it waits until the
/// stall timeout, which then ends the healthy child and fails the retry with -32603.
#[test]
fn bridge_3_a_child_that_answers_its_parked_request_is_free_and_the_answer_is_kept() {
    let (mut rig, pool) = pooled();
    let x = rig.post_modern("tools/call", Some("echo"), &call(1, ""));
    let wire = rig.take_input(pool)[0]["id"].clone();
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}}),
    );
    let (key, state) = asked(&rig, x);
    // The child stops waiting for its answer and finishes the request.
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"e"}}),
    );
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":wire,"result":{"content":[{"type":"text","text":"done"}]}}),
    );
    // Another request runs on the child at once: it is free.
    let z = rig.post_modern("tools/call", Some("echo"), &call(3, ""));
    let next = rig.take_input(pool);
    assert_eq!(next.len(), 1, "the child is free: {next:?}");
    rig.child_sends(
        pool,
        &json!({"jsonrpc":"2.0","id":next[0]["id"],"result":{"content":[]}}),
    );
    assert_eq!(rig.answer(z).expect("answered")["id"], 3);
    // The retry gets the child's answer (or, at least, an answer at once).
    let retry = call(
        2,
        &format!(
            r#","inputResponses":{{"{key}":{{"action":"accept","content":{{}}}}}},"requestState":"{state}""#
        ),
    );
    let y = rig.post_modern("tools/call", Some("echo"), &retry);
    let answer = rig.answer(y).expect("the retry is answered at once");
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");
    rig.advance(Duration::from_secs(11));
    assert!(!rig.child(pool).input_closed, "the healthy child lives on");
}

/// Found by the op model (`Ask` on one pool child, `GiveUp` on another, `Retry`): a
/// pool child's `notifications/cancelled` for a question of its own withdraws the open
/// question of that id of every parked request, whichever child asked it. Children
/// number their requests each from their own counter, so two children asking with id 0
/// is the common case: the retry then finds no question open, does not write the
/// client's answer to the child that waits for it, and waits itself for a child that
/// waits for that answer, until the stall timeout ends the child.
#[test]
fn bridge_3_a_childs_cancel_withdraws_only_its_own_question() {
    let mut rig = Rig::new(
        Config::new()
            .with_pool(2)
            .with_stall(Duration::from_secs(10)),
    );
    let first = rig.children_of(Role::Pool)[0];
    rig.ready_pool_child(first, &json!({"tools": {}}));
    let x = rig.post_modern("tools/call", Some("echo"), &call(1, ""));
    rig.take_input(first);
    let y = rig.post_modern("tools/call", Some("echo"), &call(2, ""));
    let second = rig.children_of(Role::Pool)[1];
    rig.ready_pool_child(second, &json!({"tools": {}}));
    assert_eq!(
        rig.take_input(second).len(),
        1,
        "the second call runs there"
    );
    let elicit = json!({"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}});
    rig.child_sends(first, &elicit);
    rig.child_sends(second, &elicit);
    let (key, state) = asked(&rig, x);
    asked(&rig, y);
    // The second child gives its own question up.
    rig.child_sends(
        second,
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}}),
    );
    let retry = call(
        3,
        &format!(
            r#","inputResponses":{{"{key}":{{"action":"accept","content":{{"name":"Ada"}}}}}},"requestState":"{state}""#
        ),
    );
    rig.post_modern("tools/call", Some("echo"), &retry);
    let input = rig.take_input(first);
    assert!(
        input
            .iter()
            .any(|m| m["id"] == 0 && m["result"]["content"]["name"] == "Ada"),
        "the first child gets the client's answer: {input:?}"
    );
}
