//! The other way round: a client that speaks only stdio, served by a remote server
//! through the client core (`mcpwire bridge --remote`, BRIDGE-6).

use std::collections::{HashSet, VecDeque};

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};

use crate::ProtocolVersion;
use crate::app::SERVER_INFO;
use crate::client::CallError;
use crate::jsonrpc::{Envelope, ErrorCode, Json, Message, Outgoing, RequestId, ToJson};
use crate::stdio::{self, Decoder, LineError};

/// What a [`Relay`] asks its adapter to do, in order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RelayAction {
    /// Connect the client core to the remote server, declaring the local client's
    /// capabilities and identity; then tell [`Relay::connected`] or
    /// [`Relay::connect_failed`].
    Connect {
        /// The local client's `capabilities`.
        capabilities: Value,
        /// Its `clientInfo`.
        client_info: Value,
    },
    /// Send this request to the remote server; tell [`Relay::answered`] its outcome
    /// under the same id.
    Call {
        /// The local client's id for it.
        id: RequestId,
        /// The method.
        method: String,
        /// The params, as the local client wrote them (its progress token included:
        /// the server's progress for it comes back with it).
        params: Option<Value>,
    },
    /// Give up the call (the local client cancelled it).
    Cancel {
        /// The local client's id for it.
        id: RequestId,
    },
    /// Send this notification to the remote server.
    Notify {
        /// The method.
        method: String,
        /// The params.
        params: Option<Value>,
    },
    /// Answer the remote server's request `id` (what the local client answered).
    Respond {
        /// The server's id, as it came.
        id: RequestId,
        /// The result, or the error's code, message and data.
        answer: Result<Value, (ErrorCode, String, Option<Value>)>,
    },
    /// Write these lines to the local client.
    Write(Bytes),
    /// A line from the local client held no message (STDIO-6).
    BadLine(LineError),
    /// The local client's input ended: close the client core, then exit.
    Close,
}

/// Where the relay is with the local client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No `initialize` yet.
    Fresh,
    /// The local client's `initialize` waits for the remote handshake.
    Connecting,
    /// Requests flow.
    Ready,
    /// The local input ended: what is in flight is still answered, then the relay
    /// closes.
    Closed,
}

/// How many local requests may wait for the handshake.
const MAX_EARLY: usize = 1024;

/// The id of the relay's own `server/discover`, asked when the handshake brought no
/// description (a 2026-07-28 server spoken to without a probe).
const DESCRIBE: &str = "mcpwire-bridge/describe";

/// A local stdio client and a remote server: the decisions of `mcpwire bridge --remote`
/// (BRIDGE-6). The local client's `initialize` starts the client core's own handshake
/// (whatever revision it negotiates, legacy HTTP+SSE included) and is answered with the
/// remote server's description; requests and notifications go to the remote with the
/// local ids kept for the answers; the server's messages (notifications, progress under
/// the local client's own tokens, requests) come back on the local client's input as
/// they are, and the local client's answers go back to the server. `ping` is answered
/// here.
#[derive(Debug)]
pub struct Relay {
    decoder: Decoder,
    phase: Phase,
    /// The local `initialize`: its id and offered revision.
    init: Option<(RequestId, Option<ProtocolVersion>)>,
    /// Local requests in flight at the remote.
    calls: HashSet<RequestId>,
    /// Local requests that came before the handshake ended.
    early: VecDeque<(RequestId, String, Option<Value>)>,
    /// The server's requests the local client has not answered.
    asked: HashSet<RequestId>,
    actions: VecDeque<RelayAction>,
    /// [`RelayAction::Close`] was given.
    closed: bool,
}

impl Default for Relay {
    fn default() -> Self {
        Self::new(stdio::Limits::new())
    }
}

impl Relay {
    /// A relay reading the local client's lines under `lines`.
    pub fn new(lines: stdio::Limits) -> Self {
        Self {
            decoder: Decoder::with_limits(lines),
            phase: Phase::Fresh,
            init: None,
            calls: HashSet::new(),
            early: VecDeque::new(),
            asked: HashSet::new(),
            actions: VecDeque::new(),
            closed: false,
        }
    }

    /// The next thing for the adapter to do.
    pub fn poll_action(&mut self) -> Option<RelayAction> {
        self.actions.pop_front()
    }

    /// Local requests in flight at the remote.
    pub fn in_flight(&self) -> usize {
        self.calls.len()
    }

    /// `bytes` came from the local client (its standard output, our input).
    pub fn local_input(&mut self, bytes: &[u8]) {
        self.decoder.push(bytes);
        self.drain();
    }

    /// The local client's output ended: what it cut short is reported; the requests
    /// in flight (and a handshake under way) are still answered, and then the relay
    /// closes ([`RelayAction::Close`]). Nothing new is taken.
    pub fn local_ended(&mut self) {
        self.decoder.finish();
        self.drain();
        if self.phase != Phase::Closed {
            self.phase = Phase::Closed;
            self.close_when_drained();
        }
    }

    /// Gives up what is still owed after the input ended (the adapter's patience ran
    /// out): the relay closes now.
    pub fn abandon(&mut self) {
        self.phase = Phase::Closed;
        self.init = None;
        self.early.clear();
        for id in std::mem::take(&mut self.calls) {
            self.actions.push_back(RelayAction::Cancel { id });
        }
        self.close_when_drained();
    }

    /// Once the input ended and nothing is owed to the local client: close.
    fn close_when_drained(&mut self) {
        let drained = self.init.is_none() && self.calls.is_empty() && self.early.is_empty();
        if self.phase == Phase::Closed && drained && !self.closed {
            self.closed = true;
            self.actions.push_back(RelayAction::Close);
        }
    }

    fn drain(&mut self) {
        while let Some(item) = self.decoder.poll_item() {
            match item {
                Ok(message) => self.local_message(&message),
                Err(e) => self.actions.push_back(RelayAction::BadLine(e)),
            }
        }
    }

    fn local_message(&mut self, message: &Envelope) {
        if self.phase == Phase::Closed {
            return;
        }
        match message.message() {
            Message::Request(request) => {
                let params: Option<Value> = request
                    .params
                    .and_then(|p| serde_json::from_str(p.as_str()).ok());
                self.local_request(request.id, &request.method, params);
            }
            Message::Notification(note) => {
                let params: Option<Value> = note
                    .params
                    .and_then(|p| serde_json::from_str(p.as_str()).ok());
                match &*note.method {
                    // The client core runs its own handshake.
                    "notifications/initialized" => {}
                    "notifications/cancelled" => {
                        let id = params
                            .as_ref()
                            .and_then(|p| p.get("requestId"))
                            .and_then(request_id);
                        if let Some(id) = id {
                            if self.calls.remove(&id) {
                                self.actions.push_back(RelayAction::Cancel { id });
                            } else {
                                self.early.retain(|(i, _, _)| *i != id);
                            }
                        }
                    }
                    method => self.actions.push_back(RelayAction::Notify {
                        method: method.to_owned(),
                        params,
                    }),
                }
            }
            Message::Response(response) => {
                if self.asked.remove(&response.id) {
                    let result =
                        serde_json::from_str(response.result.as_str()).unwrap_or(Value::Null);
                    self.actions.push_back(RelayAction::Respond {
                        id: response.id,
                        answer: Ok(result),
                    });
                }
            }
            Message::Error(e) => {
                if let Some(id) = e.id.filter(|id| self.asked.remove(id)) {
                    let data = e
                        .error
                        .data
                        .and_then(|d| serde_json::from_str(d.as_str()).ok());
                    self.actions.push_back(RelayAction::Respond {
                        id,
                        answer: Err((e.error.code, e.error.message.into_owned(), data)),
                    });
                }
            }
        }
    }

    fn local_request(&mut self, id: RequestId, method: &str, params: Option<Value>) {
        match (method, self.phase) {
            ("initialize", Phase::Fresh) => {
                let params = params.unwrap_or_else(|| json!({}));
                let offered = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .and_then(|v| v.parse::<ProtocolVersion>().ok())
                    .filter(|v| v.uses_initialize());
                self.init = Some((id, offered));
                self.phase = Phase::Connecting;
                self.actions.push_back(RelayAction::Connect {
                    capabilities: params
                        .get("capabilities")
                        .cloned()
                        .unwrap_or_else(|| json!({})),
                    client_info: params
                        .get("clientInfo")
                        .cloned()
                        .unwrap_or_else(|| json!({})),
                });
            }
            ("initialize", _) => {
                self.write_error(&id, ErrorCode::INVALID_REQUEST, "initialize came twice");
            }
            // Answered here: the relay is alive, and 2026-07-28 has no ping (MODERN-21).
            ("ping", _) => self.write(&Outgoing::Response {
                id: &id,
                result: &Json(json!({})),
            }),
            (_, Phase::Fresh) => {
                self.write_error(&id, ErrorCode::INVALID_REQUEST, "send initialize first");
            }
            (_, Phase::Connecting) => {
                if self.early.len() >= MAX_EARLY {
                    self.write_error(
                        &id,
                        ErrorCode::INTERNAL_ERROR,
                        "the server is busy; try again",
                    );
                } else {
                    self.early.push_back((id, method.to_owned(), params));
                }
            }
            (_, Phase::Ready) => {
                self.calls.insert(id.clone());
                self.actions.push_back(RelayAction::Call {
                    id,
                    method: method.to_owned(),
                    params,
                });
            }
            (_, Phase::Closed) => {}
        }
    }

    /// The client core connected: the local `initialize` is answered with the remote
    /// server's description (`result`: its `InitializeResult`, or its `DiscoverResult`
    /// at 2026-07-28), at the revision the local client offered when it is one with a
    /// handshake (else 2025-11-25), and the requests that waited go out. Without a
    /// description (a 2026-07-28 server reached without a probe), the relay first asks
    /// for one with `server/discover` ([`RelayAction::Call`], answered as any).
    pub fn connected(&mut self, result: Option<&Value>) {
        if self.init.is_none() {
            return;
        }
        if result.is_none() {
            let id = RequestId::string(DESCRIBE);
            self.calls.insert(id.clone());
            self.actions.push_back(RelayAction::Call {
                id,
                method: "server/discover".into(),
                params: None,
            });
            return;
        }
        self.describe(result);
    }

    /// Answers the local `initialize` with `result`, the remote server's description.
    fn describe(&mut self, result: Option<&Value>) {
        let Some((id, offered)) = self.init.take() else {
            return;
        };
        let result = result.cloned().unwrap_or_else(|| json!({}));
        let version = offered.unwrap_or(ProtocolVersion::V2025_11_25);
        let server_info = result
            .get("serverInfo")
            .or_else(|| result.get("_meta").and_then(|m| m.get(SERVER_INFO)))
            .cloned()
            .unwrap_or_else(|| json!({"name": "remote", "version": "unknown"}));
        let mut answer = json!({
            "protocolVersion": version.as_str(),
            "capabilities": result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            "serverInfo": server_info,
        });
        if let Some(instructions) = result.get("instructions") {
            answer["instructions"] = instructions.clone();
        }
        self.write(&Outgoing::Response {
            id: &id,
            result: &Json(answer),
        });
        let draining = self.phase == Phase::Closed;
        self.phase = Phase::Ready;
        for (id, method, params) in std::mem::take(&mut self.early) {
            self.local_request(id, &method, params);
        }
        if draining {
            self.phase = Phase::Closed;
            self.close_when_drained();
        }
    }

    /// The client core could not connect: the local `initialize` fails with why, and
    /// so do the requests that waited; a new `initialize` may try again.
    pub fn connect_failed(&mut self, why: &str) {
        let Some((id, _)) = self.init.take() else {
            return;
        };
        let message = format!("cannot reach the remote server: {why}");
        self.write_error(&id, ErrorCode::INTERNAL_ERROR, &message);
        for (id, _, _) in std::mem::take(&mut self.early) {
            self.write_error(&id, ErrorCode::INTERNAL_ERROR, &message);
        }
        if self.phase == Phase::Connecting {
            self.phase = Phase::Fresh;
        }
        self.close_when_drained();
    }

    /// A call's outcome at the remote: the local client's answer, under its id. A call
    /// it cancelled gets nothing.
    pub fn answered(&mut self, id: &RequestId, outcome: Result<Value, CallError>) {
        if !self.calls.remove(id) {
            return;
        }
        if id.as_str() == Some(DESCRIBE) {
            let description = outcome.unwrap_or_else(|_| json!({}));
            return self.describe(Some(&description));
        }
        match outcome {
            Ok(result) => self.write(&Outgoing::Response {
                id,
                result: &Json(result),
            }),
            Err(CallError::Rpc {
                code,
                message,
                data,
            }) => {
                let data = data.map(Json);
                self.write(&Outgoing::Error {
                    id: Some(id),
                    code: ErrorCode(code),
                    message: &message,
                    data: data.as_ref().map(|d| d as &dyn ToJson),
                });
            }
            Err(other) => self.write_error(id, ErrorCode::INTERNAL_ERROR, &other.to_string()),
        }
        self.close_when_drained();
    }

    /// A notification of the remote server (progress under the local client's token,
    /// a log message, a list change): to the local client as it is.
    pub fn server_notification(&mut self, message: &Envelope) {
        self.write_text(message.text().as_str());
    }

    /// A request of the remote server (sampling, elicitation, roots; at 2026-07-28 an
    /// input request the client core turned into one): to the local client under the
    /// id it came with, which its answer carries back.
    pub fn server_request(&mut self, message: &Envelope) {
        if let Some(id) = message.id() {
            self.asked.insert(id.clone());
        }
        self.write_text(message.text().as_str());
    }

    fn write_text(&mut self, text: &str) {
        if self.closed {
            return;
        }
        let mut line = BytesMut::with_capacity(text.len() + 1);
        stdio::encode_text(text, &mut line);
        self.actions.push_back(RelayAction::Write(line.freeze()));
    }

    fn write(&mut self, message: &Outgoing<'_>) {
        if self.closed {
            return;
        }
        let mut line = BytesMut::with_capacity(message.len_hint() + 1);
        if stdio::encode(message, &mut line).is_ok() {
            self.actions.push_back(RelayAction::Write(line.freeze()));
        }
    }

    fn write_error(&mut self, id: &RequestId, code: ErrorCode, message: &str) {
        self.write(&Outgoing::Error {
            id: Some(id),
            code,
            message,
            data: None,
        });
    }
}

fn request_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::String(s) => Some(RequestId::string(s)),
        Value::Number(n) => n.as_i64().map(RequestId::int),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(relay: &mut Relay) -> Vec<Value> {
        let mut out = Vec::new();
        let mut rest = Vec::new();
        while let Some(action) = relay.poll_action() {
            match action {
                RelayAction::Write(bytes) => {
                    assert!(bytes.ends_with(b"\n"));
                    out.push(serde_json::from_slice(&bytes).unwrap());
                }
                other => rest.push(other),
            }
        }
        relay.actions.extend(rest);
        out
    }

    fn actions(relay: &mut Relay) -> Vec<RelayAction> {
        std::iter::from_fn(|| relay.poll_action()).collect()
    }

    fn ready() -> Relay {
        let mut relay = Relay::default();
        relay.local_input(
            br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"ide","version":"9"}}}
"#,
        );
        assert_eq!(
            actions(&mut relay),
            [RelayAction::Connect {
                capabilities: json!({"sampling": {}}),
                client_info: json!({"name": "ide", "version": "9"}),
            }]
        );
        relay.connected(Some(&json!({
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "remote-server", "version": "2"}, "instructions": "be nice"
        })));
        let answer = lines(&mut relay);
        assert_eq!(answer[0]["id"], 0);
        assert_eq!(
            answer[0]["result"]["protocolVersion"], "2025-06-18",
            "the local offer"
        );
        assert_eq!(answer[0]["result"]["serverInfo"]["name"], "remote-server");
        assert_eq!(answer[0]["result"]["instructions"], "be nice");
        relay
    }

    #[test]
    fn bridge_6_initialize_is_answered_with_the_remote_servers_description() {
        let mut relay = ready();
        relay.local_input(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
        assert!(
            actions(&mut relay).is_empty(),
            "the client core ran its own handshake"
        );
        // A 2026-07-28 remote: the description is its DiscoverResult.
        let mut modern = Relay::default();
        modern.local_input(b"{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2030-01-01\"}}\n");
        actions(&mut modern);
        modern.connected(Some(
            &json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "_meta": {SERVER_INFO: {"name": "m", "version": "1"}}}),
        ));
        let answer = lines(&mut modern);
        assert_eq!(answer[0]["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(answer[0]["result"]["serverInfo"]["name"], "m");
        assert_eq!(answer[0]["result"]["capabilities"], json!({"tools": {}}));
        // Without a description, the relay asks for one first.
        let mut bare = Relay::default();
        bare.local_input(
            b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}\n",
        );
        actions(&mut bare);
        bare.connected(None);
        let acts = actions(&mut bare);
        let [RelayAction::Call { id, method, .. }] = &acts[..] else {
            panic!("{acts:?}");
        };
        assert_eq!(method, "server/discover");
        bare.answered(
            id,
            Ok(json!({"capabilities": {"prompts": {}}, "_meta": {SERVER_INFO: {"name": "d"}}})),
        );
        let answer = lines(&mut bare);
        assert_eq!(answer[0]["id"], 0);
        assert_eq!(answer[0]["result"]["serverInfo"]["name"], "d");
    }

    #[test]
    fn bridge_6_calls_keep_the_local_ids_and_server_messages_pass_through() {
        let mut relay = ready();
        relay.local_input(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","_meta":{"progressToken":7}}}
{"jsonrpc":"2.0","id":5,"method":"ping"}
"#);
        let pong = lines(&mut relay);
        assert_eq!(pong, [json!({"jsonrpc": "2.0", "id": 5, "result": {}})]);
        assert_eq!(
            actions(&mut relay),
            [RelayAction::Call {
                id: RequestId::string("a"),
                method: "tools/call".into(),
                params: Some(json!({"name": "echo", "_meta": {"progressToken": 7}})),
            }]
        );
        let progress = crate::jsonrpc::Classifier::default()
            .envelope(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}"#.into())
            .unwrap();
        relay.server_notification(&progress);
        let ask = crate::jsonrpc::Classifier::default()
            .envelope(
                r#"{"jsonrpc":"2.0","id":"who","method":"elicitation/create","params":{}}"#.into(),
            )
            .unwrap();
        relay.server_request(&ask);
        let out = lines(&mut relay);
        assert_eq!(out[0]["params"]["progressToken"], 7);
        assert_eq!(out[1]["id"], "who");
        relay.local_input(b"{\"jsonrpc\":\"2.0\",\"id\":\"who\",\"result\":{\"action\":\"decline\"}}\n{\"jsonrpc\":\"2.0\",\"id\":\"nobody\",\"result\":{}}\n");
        assert_eq!(
            actions(&mut relay),
            [RelayAction::Respond {
                id: RequestId::string("who"),
                answer: Ok(json!({"action": "decline"})),
            }],
            "an answer to nothing asked is dropped"
        );
        relay.answered(&RequestId::string("a"), Ok(json!({"content": []})));
        relay.answered(&RequestId::string("a"), Ok(json!({"twice": true})));
        let out = lines(&mut relay);
        assert_eq!(
            out,
            [json!({"jsonrpc": "2.0", "id": "a", "result": {"content": []}})]
        );
    }

    #[test]
    fn bridge_6_a_cancel_gives_the_call_up_and_errors_keep_their_code() {
        let mut relay = ready();
        relay.local_input(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}\n");
        let acts = actions(&mut relay);
        assert_eq!(
            acts[2],
            RelayAction::Cancel {
                id: RequestId::int(1)
            }
        );
        relay.answered(&RequestId::int(1), Ok(json!({})));
        relay.answered(
            &RequestId::int(2),
            Err(CallError::Rpc {
                code: -32601,
                message: "no".into(),
                data: Some(json!({"x": 1})),
            }),
        );
        let out = lines(&mut relay);
        assert_eq!(out.len(), 1, "nothing for the cancelled call");
        assert_eq!(
            out[0]["error"],
            json!({"code": -32601, "message": "no", "data": {"x": 1}})
        );
    }

    #[test]
    fn bridge_6_requests_before_the_handshake_wait_and_a_failed_one_fails_them() {
        let mut relay = Relay::default();
        relay.local_input(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}\n");
        assert_eq!(
            lines(&mut relay)[0]["error"]["code"],
            -32600,
            "initialize first"
        );
        relay.local_input(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
        actions(&mut relay);
        relay.connect_failed("connection refused");
        let out = lines(&mut relay);
        assert_eq!(out.len(), 2);
        assert!(
            out[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("connection refused")
        );
        assert_eq!(out[1]["id"], 1);
        relay.local_input(b"not json\n");
        relay.local_ended();
        let acts = actions(&mut relay);
        assert!(matches!(acts[0], RelayAction::BadLine(_)));
        assert_eq!(acts[1], RelayAction::Close);
    }

    #[test]
    fn bridge_6_what_is_in_flight_when_the_input_ends_is_still_answered() {
        let mut relay = Relay::default();
        // A client that writes its lines and closes at once (a shell pipe).
        relay.local_input(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
        relay.local_ended();
        assert!(matches!(
            actions(&mut relay)[..],
            [RelayAction::Connect { .. }]
        ));
        relay.connected(Some(&json!({"capabilities": {}})));
        let acts = actions(&mut relay);
        assert!(
            matches!(acts[0], RelayAction::Write(_)),
            "initialize answered"
        );
        assert!(
            matches!(acts[1], RelayAction::Call { .. }),
            "the waiting call goes out"
        );
        assert_eq!(acts.len(), 2, "not closed yet: {acts:?}");
        relay.answered(&RequestId::int(1), Ok(json!({"tools": []})));
        let acts = actions(&mut relay);
        assert!(matches!(acts[0], RelayAction::Write(_)));
        assert_eq!(acts[1], RelayAction::Close);
        // Given up: what is still in flight is cancelled, and the relay closes.
        let mut relay = ready();
        relay.local_input(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}\n");
        relay.local_ended();
        actions(&mut relay);
        relay.abandon();
        assert_eq!(
            actions(&mut relay),
            [
                RelayAction::Cancel {
                    id: RequestId::int(7)
                },
                RelayAction::Close
            ]
        );
    }
}
