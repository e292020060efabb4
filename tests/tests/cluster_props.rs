//! Property: several nodes of one cluster under faults never deliver a progress step or
//! an answer twice, and lose none once the answer came (RESUME-5, RESUME-14), whatever
//! the order of clients' resumes, application sends, store outages, slow notices, a
//! killed node and garbage from the store; and legacy HTTP+SSE clients POSTing on any
//! node get each answer on their stream at most once (LEGACY-4). The model is
//! `mcpwire_tests::cluster_ops`, which the `server_cluster` fuzz target runs too.

use mcpwire_tests::cluster_ops::{self, Op, Seen};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn resume_5_resume_14_a_cluster_under_faults_delivers_every_step_once(
        data in proptest::collection::vec(any::<u8>(), 0..1024)
    ) {
        if let Err(violation) = cluster_ops::run_bytes(&data) {
            prop_assert!(false, "{}", violation);
        }
    }
}

/// The model moves: a call answered after its stream moved to another node, and legacy
/// requests POSTed on the two other nodes answered on the stream of the first.
#[test]
fn legacy_4_resume_5_the_model_answers_across_nodes() {
    let ops = [
        Op::Initialize(0),
        Op::Call(0, 0),
        Op::Progress(0),
        Op::Disconnect(0),
        Op::Resume(0, 1),
        Op::Answer(0),
        Op::LegacyOpen(0),
        Op::LegacyPost(1, 0),
        Op::LegacyPost(2, 0),
        Op::Advance(10),
    ];
    let seen = cluster_ops::run(3, &ops).expect("no violation");
    assert_eq!(
        seen,
        Seen {
            answered: 1,
            legacy_answered: 2
        }
    );
}
