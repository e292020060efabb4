//! Property: several nodes of one cluster under faults never deliver a progress step or
//! an answer twice, and lose none once the answer came (RESUME-5, RESUME-14), whatever
//! the order of clients' resumes, application sends, store outages, slow notices, a
//! killed node and garbage from the store. The model is `mcpwire_tests::cluster_ops`,
//! which the `server_cluster` fuzz target runs too.

use mcpwire_tests::cluster_ops;
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
