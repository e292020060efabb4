//! Multi round-trip requests on the client side (MODERN-23). When a server answers
//! `input_required`, each of its input requests reaches the application as an
//! [`Event::Request`], the same event a session-era server's request to the client
//! arrives as, and is answered the same way ([`Client::respond`]). Once every one is
//! answered, the client asks again: the same method and params, a new id, the answers
//! in `inputResponses` under the server's keys, and `requestState` echoed as it came
//! (left out when none came). The application sees one call: its answer arrives under
//! the id `request` returned, whatever ids the rounds used. Rounds are bounded
//! ([`Config::with_max_rounds`](super::Config::with_max_rounds)).

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::{Asked, Client, Event, Outbound, RequestError};
use crate::jsonrpc::{Envelope, Message, Outgoing, RequestId, ToJson};

/// A call that may be asked for input: what it asks again with.
#[derive(Debug)]
pub(super) struct Call {
    method: Box<str>,
    params: Option<Bytes>,
    deadline: Option<Instant>,
    /// The rounds asked so far: 0 for the application's own request.
    round: u32,
    /// The application's id, once a round asked again under another.
    origin: Option<RequestId>,
    /// Whether the tools were listed again for it already (a call's `Mcp-Param-*`
    /// headers refused: at most once per call).
    relisted: Relisted,
}

/// Whether a call had the tools listed again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Relisted {
    No,
    Once,
}

impl Call {
    pub(super) fn new(method: &str, params: Option<Bytes>, deadline: Option<Instant>) -> Self {
        Self {
            method: method.into(),
            params,
            deadline,
            round: 0,
            origin: None,
            relisted: Relisted::No,
        }
    }

    /// Whether a refusal of its `Mcp-Param-*` headers may be met by listing the tools
    /// again: a `tools/call`, not relisted yet.
    pub(super) fn may_relist(&self) -> bool {
        &*self.method == "tools/call" && self.relisted == Relisted::No
    }
}

/// A call whose `Mcp-Param-*` headers the server refused (-32020), while the client
/// lists the tools again: their schemas may have changed since they were listed
/// (MODERN-7). The call goes again once they are in; if they cannot be had, the refusal
/// is the call's answer.
#[derive(Debug)]
pub(super) struct Relist {
    call: Call,
    app: RequestId,
    refusal: Envelope,
}

/// A call waiting for the application's answers to its input requests.
#[derive(Debug)]
struct Gathering {
    call: Call,
    /// `requestState` as it came, to echo.
    state: Option<String>,
    /// Each key's answer (JSON text), once given.
    answers: BTreeMap<String, Option<Bytes>>,
}

/// The multi round-trip state of a client.
#[derive(Debug, Default)]
pub(super) struct Rounds {
    /// By the application's id.
    gathering: BTreeMap<RequestId, Gathering>,
    /// The input requests handed to the application: (its call's id, the key).
    inputs: BTreeMap<RequestId, (RequestId, String)>,
    /// The id of each round in flight after the first: the application's id.
    retries: BTreeMap<RequestId, RequestId>,
    next_input: u64,
}

impl Rounds {
    pub(super) fn is_empty(&self) -> bool {
        self.gathering.is_empty() && self.inputs.is_empty() && self.retries.is_empty()
    }

    /// The earliest deadline of a call waiting for the application's input.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.gathering
            .values()
            .filter_map(|g| g.call.deadline)
            .min()
    }

    /// The application's id of the request sent as `wire`, forgetting the mapping.
    pub(super) fn origin(&mut self, wire: &RequestId) -> RequestId {
        self.retries.remove(wire).unwrap_or_else(|| wire.clone())
    }

    /// The id a call of the application's is in flight under, if a round asked again.
    fn wire_of(&self, app: &RequestId) -> Option<RequestId> {
        self.retries
            .iter()
            .find_map(|(wire, a)| (a == app).then(|| wire.clone()))
    }
}

impl Client {
    /// The server answered `wire`, a call that may be asked for input, with
    /// `input_required`: hand its input requests to the application, or ask again at
    /// once when it only sent a state to echo.
    pub(super) fn input_required(
        &mut self,
        now: Instant,
        wire: RequestId,
        mut call: Call,
        message: &Envelope,
    ) {
        call.origin = None;
        let app = self.rounds.origin(&wire);
        if call.round >= self.config.max_rounds {
            return self.push_failed(
                app,
                RequestError::BadResponse(format!(
                    "the server asked for input more than {} times",
                    self.config.max_rounds
                )),
            );
        }
        let Message::Response(response) = message.message() else {
            return;
        };
        let result =
            serde_json::from_str::<serde_json::Value>(response.result.as_str()).unwrap_or_default();
        let state = match result.get("requestState") {
            None => None,
            Some(serde_json::Value::String(state)) => Some(state.clone()),
            Some(_) => {
                return self.push_failed(
                    app,
                    RequestError::BadResponse("requestState is not a string".into()),
                );
            }
        };
        let requests = match result.get("inputRequests") {
            None => serde_json::Map::new(),
            Some(serde_json::Value::Object(requests)) => requests.clone(),
            Some(_) => {
                return self.push_failed(
                    app,
                    RequestError::BadResponse("inputRequests is not an object".into()),
                );
            }
        };
        if requests.is_empty() && state.is_none() {
            return self.push_failed(
                app,
                RequestError::BadResponse(
                    "input_required with neither inputRequests nor requestState".into(),
                ),
            );
        }
        let mut asked = Vec::with_capacity(requests.len());
        for (key, request) in &requests {
            let Some(method) = request.get("method").and_then(|m| m.as_str()) else {
                return self.push_failed(
                    app,
                    RequestError::BadResponse(format!("input request {key:?} has no method")),
                );
            };
            let id = RequestId::string(&format!("mcpwire-input-{}", self.rounds.next_input));
            self.rounds.next_input += 1;
            let params = request.get("params").map(crate::jsonrpc::Json);
            let envelope = self.envelope_of(&Outgoing::Request {
                id: &id,
                method,
                params: params.as_ref().map(|p| p as &dyn ToJson),
            });
            let Some(envelope) = envelope else {
                return self.push_failed(
                    app,
                    RequestError::BadResponse(format!("input request {key:?} is not a request")),
                );
            };
            asked.push((id, key.clone(), envelope));
        }
        let answers = asked
            .iter()
            .map(|(_, key, _)| (key.clone(), None))
            .collect();
        self.rounds.gathering.insert(
            app.clone(),
            Gathering {
                call,
                state,
                answers,
            },
        );
        if asked.is_empty() {
            return self.ask_again(now, &app);
        }
        for (id, key, envelope) in asked {
            self.rounds.inputs.insert(id, (app.clone(), key));
            self.events.push_back(Event::Request(envelope));
        }
    }

    /// The application's answer to an input request: `Some` when `id` was one (and
    /// the call asks again once every answer is in), `None` when it is a server's
    /// request of the session eras.
    pub(super) fn input_answer(
        &mut self,
        now: Instant,
        id: &RequestId,
        answer: Result<&dyn ToJson, RequestError>,
    ) -> Option<Result<(), super::ClientError>> {
        let Some((app, key)) = self.rounds.inputs.remove(id) else {
            // At 2026-07-28 the server sends no requests (MODERN-10): an answer to
            // anything but a live input request (one whose call was cancelled, say)
            // has no one to go to.
            return (self.era == crate::Era::Sessionless).then_some(Ok(()));
        };
        let answer = match answer {
            Ok(result) => {
                let mut text = BytesMut::new();
                if let Err(e) = result.write_json(&mut text) {
                    self.rounds.inputs.insert(id.clone(), (app, key));
                    return Some(Err(e.into()));
                }
                text.freeze()
            }
            Err(error) => {
                // The call cannot go on without it: it fails, and its other input
                // requests are forgotten.
                self.drop_gathering(&app);
                self.push_failed(app, error);
                return Some(Ok(()));
            }
        };
        let complete = self.rounds.gathering.get_mut(&app).is_some_and(|g| {
            g.answers.insert(key, Some(answer));
            g.answers.values().all(Option::is_some)
        });
        if complete {
            self.ask_again(now, &app);
        }
        Some(Ok(()))
    }

    /// Every answer of `app`'s call is in: the same request again, under a new id.
    fn ask_again(&mut self, now: Instant, app: &RequestId) {
        let _ = now;
        let Some(gathering) = self.rounds.gathering.remove(app) else {
            return;
        };
        let Gathering {
            mut call,
            state,
            answers,
        } = gathering;
        let params = with_answers(call.params.as_deref(), &answers, state.as_deref());
        call.round += 1;
        self.send_again(app, call, params);
    }

    /// `call` of the application's `app` goes again with `params`, under a new id.
    fn send_again(&mut self, app: &RequestId, mut call: Call, params: Bytes) {
        call.origin = Some(app.clone());
        let method = call.method.clone();
        let deadline = call.deadline;
        let wire = match self
            .pending
            .register(Asked::RoundTrip(Box::new(call)), deadline)
        {
            Ok(wire) => wire,
            Err(_) => {
                return self.push_failed(
                    app.clone(),
                    RequestError::Unsendable("too many requests in flight".into()),
                );
            }
        };
        self.rounds.retries.insert(wire.clone(), app.clone());
        self.send_or_wait(Outbound::Call {
            id: Some(wire),
            method,
            params: Some(params),
        });
    }

    /// The server refused the `Mcp-Param-*` headers of `wire`, a `tools/call`: list the
    /// tools again (under an id that answers for the application's call), then the call
    /// goes again with the headers their schemas now ask for.
    pub(super) fn relist(&mut self, wire: &RequestId, mut call: Call, refusal: Envelope) {
        let app = self.rounds.origin(wire);
        call.relisted = Relisted::Once;
        let deadline = call.deadline;
        let relist = Relist {
            call,
            app: app.clone(),
            refusal: refusal.clone(),
        };
        let Ok(list) = self
            .pending
            .register(Asked::Relist(Box::new(relist)), deadline)
        else {
            let answer = self.as_answer_to(refusal, &app);
            return self.events.push_back(Event::Response(answer));
        };
        // A failure of the listing is the call's, under the application's id.
        self.rounds.retries.insert(list.clone(), app);
        self.send_or_wait(Outbound::Call {
            id: Some(list),
            method: "tools/list".into(),
            params: None,
        });
    }

    /// The answer to the listing of [`relist`](Self::relist), under `list`: the mirrors
    /// are refreshed and the call goes again; without tools, the refusal is its answer.
    pub(super) fn relisted(&mut self, list: &RequestId, relist: Relist, answer: Envelope) {
        let Relist { call, app, refusal } = relist;
        self.rounds.origin(list);
        if answer.kind() != crate::jsonrpc::Kind::Response {
            let answer = self.as_answer_to(refusal, &app);
            return self.events.push_back(Event::Response(answer));
        }
        let _ = self.tools_listed(answer);
        let params = call.params.clone().unwrap_or_default();
        self.send_again(&app, call, params);
    }

    /// Forgets a gathering call and its unanswered input requests.
    fn drop_gathering(&mut self, app: &RequestId) -> bool {
        self.rounds.inputs.retain(|_, (a, _)| a != app);
        self.rounds.gathering.remove(app).is_some()
    }

    /// Cancels the rounds of `app`, the application's id: `Some(wire)` is the id its
    /// request is in flight under, if not `app`; `None` when nothing was in flight
    /// (it was waiting for input: now forgotten), `Some(app)` otherwise.
    pub(super) fn cancel_rounds(&mut self, app: &RequestId) -> Option<RequestId> {
        if self.drop_gathering(app) {
            return None;
        }
        Some(self.rounds.wire_of(app).unwrap_or_else(|| app.clone()))
    }

    /// Fails with [`RequestError::Timeout`] the calls whose deadline passed while they
    /// waited for the application's input (nothing of theirs is at the server).
    pub(super) fn expire_gathering(&mut self, now: Instant) {
        let expired: Vec<RequestId> = self
            .rounds
            .gathering
            .iter()
            .filter(|(_, g)| g.call.deadline.is_some_and(|at| at <= now))
            .map(|(app, _)| app.clone())
            .collect();
        for app in expired {
            self.drop_gathering(&app);
            self.events.push_back(Event::Failed {
                id: app,
                error: RequestError::Timeout,
            });
        }
    }

    /// Fails every call waiting for input (the client closed, the session ended).
    pub(super) fn fail_gathering(&mut self, error: &RequestError) {
        let apps: Vec<RequestId> = self.rounds.gathering.keys().cloned().collect();
        self.rounds.inputs.clear();
        self.rounds.gathering.clear();
        for app in apps {
            self.events.push_back(Event::Failed {
                id: app,
                error: error.clone(),
            });
        }
    }

    /// Reports the failure of the request sent as `wire` under the application's id.
    pub(super) fn push_failed(&mut self, wire: RequestId, error: RequestError) {
        let id = self.rounds.origin(&wire);
        self.events.push_back(Event::Failed { id, error });
    }

    /// A response to a round after the first, under the application's id.
    pub(super) fn as_answer_to(&self, message: Envelope, app: &RequestId) -> Envelope {
        if message.id() == Some(app) {
            return message;
        }
        let rebuilt = match message.message() {
            Message::Response(response) => self.envelope_of(&Outgoing::Response {
                id: app,
                result: &response.result,
            }),
            Message::Error(error) => self.envelope_of(&Outgoing::Error {
                id: Some(app),
                code: error.error.code,
                message: &error.error.message,
                data: error.error.data.as_ref().map(|d| d as &dyn ToJson),
            }),
            _ => None,
        };
        rebuilt.unwrap_or(message)
    }
}

/// The params of a round after the first: the original ones with `inputResponses` (the
/// answers under the server's keys; none when it asked nothing) and `requestState`
/// (when one came).
fn with_answers(
    params: Option<&[u8]>,
    answers: &BTreeMap<String, Option<Bytes>>,
    state: Option<&str>,
) -> Bytes {
    let mut members = String::new();
    if !answers.is_empty() {
        members.push_str(r#""inputResponses":{"#);
        for (i, (key, answer)) in answers.iter().enumerate() {
            if i > 0 {
                members.push(',');
            }
            members.push_str(&serde_json::Value::from(key.as_str()).to_string());
            members.push(':');
            members.push_str(
                answer
                    .as_deref()
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .unwrap_or("null"),
            );
        }
        members.push('}');
    }
    if let Some(state) = state {
        if !members.is_empty() {
            members.push(',');
        }
        members.push_str(r#""requestState":"#);
        members.push_str(&serde_json::Value::from(state).to_string());
    }
    let text = params
        .and_then(|p| std::str::from_utf8(p).ok())
        .map(str::trim)
        .filter(|p| p.starts_with('{') && p.ends_with('}'))
        .unwrap_or("{}");
    let inner = text[1..text.len() - 1].trim();
    let mut out = String::with_capacity(text.len() + members.len() + 2);
    out.push('{');
    out.push_str(inner);
    if !inner.is_empty() && !members.is_empty() {
        out.push(',');
    }
    out.push_str(&members);
    out.push('}');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_23_a_retry_carries_the_answers_and_the_state_as_they_came() {
        let answers = BTreeMap::from([
            (
                "confirm".to_owned(),
                Some(Bytes::from_static(br#"{"action":"accept"}"#)),
            ),
            (
                "roots".to_owned(),
                Some(Bytes::from_static(br#"{"roots":[]}"#)),
            ),
        ]);
        let params = br#"{"name":"t","arguments":{"a":1}}"#;
        let retried = with_answers(Some(params), &answers, Some("s\"tate"));
        let v: serde_json::Value = serde_json::from_slice(&retried).unwrap();
        assert_eq!(v["name"], "t");
        assert_eq!(v["arguments"]["a"], 1);
        assert_eq!(v["inputResponses"]["confirm"]["action"], "accept");
        assert_eq!(v["inputResponses"]["roots"]["roots"], serde_json::json!([]));
        assert_eq!(v["requestState"], "s\"tate");
        // No state came: no `requestState` at all (not null); nothing asked: no
        // `inputResponses`.
        let retried = with_answers(Some(br#"{}"#), &BTreeMap::new(), Some("x"));
        assert_eq!(&retried[..], br#"{"requestState":"x"}"#);
        let retried = with_answers(None, &answers, None);
        let v: serde_json::Value = serde_json::from_slice(&retried).unwrap();
        assert!(v.get("requestState").is_none());
        assert!(v.get("inputResponses").is_some());
    }
}
