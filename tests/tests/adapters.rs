//! The shared scenario suite: every scenario of [`scenarios`] runs on both adapters,
//! `mcpwire-tokio` and `mcpwire-blocking`, each serving `mcpwire serve`'s reference tools
//! with the configuration of the `mcpwire serve` options named in the test; the test
//! then asserts the two adapters' transcripts are equal. Both drive one core, and none
//! of them decides anything about MCP: what reaches the wire must be the same, byte for
//! byte of MCP (session ids and event ids included, from the same seeded entropy). A
//! third run, on the tokio adapter split into shards as `mcpwire serve` runs by default,
//! must give the same transcript but for the values of its ids.
//!
//! The raw scenarios ([`scenarios::wire`]) speak HTTP through ureq: initialize,
//! tools/list, tools/call answered as JSON and as SSE, progress, a resume after a
//! polling close, DELETE, and bad input. The client scenarios ([`scenarios::clients`])
//! run the blocking client and the tokio client against each server: a call with
//! progress, DELETE on close, and calls resumed through polling closes.
//!
//! Each test is named after the requirements it shows (docs/requirements.md).

mod scenarios;

use mcpwire::server::Config;
use scenarios::{clients, on_both, on_both_with, wire};

// Raw requests.

#[test]
fn session_1_session_3_http_post_5_http_post_7_initialize_issues_a_session_and_tools_list_answers()
{
    on_both(&[], wire::initialize_and_list);
}

#[test]
fn http_post_7_a_tools_call_is_answered_with_one_json_body() {
    on_both(&[], wire::tools_call_json);
}

#[test]
fn http_post_7_json_response_mode_answers_a_call_with_a_progress_token_as_json() {
    on_both(&["--json-response"], wire::tools_call_json_mode);
}

#[test]
fn http_post_7_http_post_11_http_post_13_sse_response_mode_streams_priming_then_the_result_then_ends()
 {
    on_both(&["--sse-response"], wire::tools_call_sse);
}

#[test]
fn http_post_9_resume_1_progress_notifications_precede_the_result_on_the_request_stream() {
    on_both(&[], wire::progress);
}

#[test]
fn resume_4_resume_5_resume_9_resume_10_a_polling_close_is_resumed_and_each_message_arrives_once() {
    on_both(
        &["--poll-ms", "0", "--retry-ms", "20"],
        wire::resume_after_polling_close,
    );
}

#[test]
fn resume_14_http_get_9_a_resume_at_once_after_a_close_or_a_silent_death_gets_the_rest_once() {
    on_both(&[], wire::resume_takes_over);
}

#[test]
fn session_1_max_sessions_bounds_the_sessions_and_one_more_initialize_is_503_while_all_are_active()
{
    on_both(&["--max-sessions", "1"], wire::max_sessions);
}

#[test]
fn http_delete_1_http_delete_3_session_7_delete_ends_the_session_and_its_id_gets_404() {
    on_both(&[], wire::delete);
}

#[test]
fn http_post_3_a_wrong_accept_is_406_and_a_wrong_content_type_415() {
    on_both(&[], wire::accept_and_content_type);
}

#[test]
fn http_post_6_malformed_json_is_400_with_a_parse_error_and_no_id() {
    on_both(&[], wire::malformed_bodies);
}

#[test]
fn session_6_session_7_a_missing_session_is_400_and_an_unknown_one_404() {
    on_both(&[], wire::missing_and_unknown_session);
}

#[test]
fn sec_1_sec_2_sec_7_a_foreign_origin_or_host_is_403() {
    on_both(&[], wire::foreign_origin_and_host);
}

#[test]
fn batch_6_version_4_session_11_a_batch_a_bad_version_and_a_second_initialize_are_400() {
    on_both(&[], wire::refused_messages);
}

#[test]
fn http_post_6_an_oversized_body_is_413_by_length_or_as_it_streams_in() {
    let config = mcpwire_cli::reference::config(&[] as &[&str])
        .expect("the default options")
        .with_max_body(1024);
    on_both_with(&config, wire::oversized_body);
}

#[test]
fn http_post_1_http_get_2_http_get_9_other_paths_404_other_methods_405_a_second_get_409() {
    on_both(&[], wire::paths_methods_and_streams);
}

#[test]
fn resume_6_another_sessions_last_event_id_is_400_and_replays_nothing() {
    on_both(&[], wire::foreign_last_event_id);
}

// The clients.

#[test]
fn http_post_9_http_delete_1_the_blocking_client_calls_with_progress_and_deletes_its_session() {
    on_both(&[], clients::blocking_client);
}

#[test]
fn http_post_9_http_delete_1_the_tokio_client_calls_with_progress_and_deletes_its_session() {
    on_both(&[], clients::tokio_client);
}

#[test]
fn resume_4_resume_9_resume_11_the_blocking_client_resumes_through_polling_closes() {
    on_both(
        &["--poll-ms", "0", "--retry-ms", "20"],
        clients::blocking_client_resumes,
    );
}

#[test]
fn resume_4_resume_9_resume_11_the_tokio_client_resumes_through_polling_closes() {
    on_both(
        &["--poll-ms", "0", "--retry-ms", "20"],
        clients::tokio_client_resumes,
    );
}

/// The harness itself: every server (both adapters, and the sharded tokio one) starts
/// from the same configuration and stops at the end; a default `Config` (no legacy paths) is accepted as well as `mcpwire serve`'s.
#[test]
fn both_adapters_start_on_loopback_and_stop() {
    for adapter in scenarios::ADAPTERS {
        let server = scenarios::Server::start_with(adapter, Config::new());
        assert!(server.addr.ip().is_loopback(), "SEC-3: {}", server.addr);
        assert_eq!(server.session_count(), 0);
    }
}
