//! What the application layer adds to the sessionless revision (2026-07-28): the shape of
//! every result (`resultType`, `serverInfo`, caching hints), `server/discover`, the
//! `logLevel` gate, multi round-trip answers and their sealed `requestState`.
//!
//! A handler answers as it would in any era; [`Responder::answer`] completes the answer
//! for the request's era, so no handler and no adapter repeats these rules.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::CallError;
use super::state::StateKey;
use bytes::BytesMut;

use crate::jsonrpc::{EncodeError, ErrorCode, Json, ToJson};
use crate::server::{RequestHandle, Server};

pub use crate::meta::{CLIENT_CAPABILITIES, LOG_LEVEL, SERVER_INFO, SUBSCRIPTION_ID};

/// The methods whose complete results carry caching hints (MODERN-22).
const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// The methods that may answer `input_required` (MODERN-23).
const ROUND_TRIPS: [&str; 3] = ["tools/call", "resources/read", "prompts/get"];

/// The severity of a `notifications/message`, least severe first (RFC 5424's levels).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warning`
    Warning,
    /// `error`
    Error,
    /// `critical`
    Critical,
    /// `alert`
    Alert,
    /// `emergency`
    Emergency,
}

impl LogLevel {
    /// The level a name denotes, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "debug" => Self::Debug,
            "info" => Self::Info,
            "notice" => Self::Notice,
            "warning" => Self::Warning,
            "error" => Self::Error,
            "critical" => Self::Critical,
            "alert" => Self::Alert,
            "emergency" => Self::Emergency,
            _ => return None,
        })
    }
}

/// Who may reuse a cached result (MODERN-22).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheScope {
    /// Any client, across authorization contexts.
    Public,
    /// Only the client that asked.
    Private,
}

impl CacheScope {
    /// Its name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Private => "private",
        }
    }
}

/// The caching hints of a complete result of `server/discover` and the five list and
/// read methods (MODERN-22): how long it may be reused and by whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheHint {
    /// `ttlMs`: milliseconds it stays fresh; 0 asks clients not to reuse it.
    pub ttl_ms: u64,
    /// `cacheScope`.
    pub scope: CacheScope,
}

impl CacheHint {
    /// Not to be reused, by anyone: the safe hint, and the default.
    pub const NONE: Self = Self {
        ttl_ms: 0,
        scope: CacheScope::Private,
    };

    /// The hint a complete result carries (a client's side: `tools/list`'s result, say),
    /// or `None` when it has no valid one: `ttlMs` not an integer ≥ 0, or `cacheScope`
    /// neither `public` nor `private` (MODERN-22). (A result that came after input
    /// requests, MODERN-23, must not be cached whatever it says.)
    pub fn read(result: &serde_json::Value) -> Option<Self> {
        let ttl_ms = result.get("ttlMs")?.as_u64()?;
        let scope = match result.get("cacheScope")?.as_str()? {
            "public" => CacheScope::Public,
            "private" => CacheScope::Private,
            _ => return None,
        };
        Some(Self { ttl_ms, scope })
    }
}

impl Default for CacheHint {
    fn default() -> Self {
        Self::NONE
    }
}

/// Whether a 2026-07-28 request of `method` may be answered `input_required`
/// (MODERN-23): `tools/call`, `resources/read` and `prompts/get`.
pub fn may_ask_input(method: &str) -> bool {
    Method::of(method).is_round_trip()
}

/// An `input_required` result (MODERN-23): the questions for the client, keyed as the
/// handler will read the answers from `params.inputResponses`, and the state to come
/// back with the retry. The layer seals the state; the handler reads it back in plain
/// text ([`CallInfo::request_state`](super::CallInfo::request_state)).
///
/// # Panics
/// Never; a `requests` value that is not an object is sent as it is, and refused by
/// the client.
pub fn input_required(requests: Value, state: Option<&str>) -> Value {
    let mut result = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(state) = state {
        result["requestState"] = Value::from(state);
    }
    result
}

/// An `elicitation/create` input request: a question for the user and the shape of the
/// answer (an object schema of primitive properties).
pub fn elicitation_request(message: &str, requested_schema: Value) -> Value {
    json!({"method": "elicitation/create",
           "params": {"message": message, "requestedSchema": requested_schema}})
}

/// A `sampling/createMessage` input request.
pub fn sampling_request(messages: Value, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage",
           "params": {"messages": messages, "maxTokens": max_tokens}})
}

/// A `roots/list` input request.
pub fn roots_request() -> Value {
    json!({"method": "roots/list", "params": {}})
}

/// What a 2026-07-28 answer gets beside the handler's value.
#[derive(Debug)]
pub(super) struct Shape {
    pub(super) method: Method,
    /// The hint for a complete result of a cacheable method.
    pub(super) cache: CacheHint,
    pub(super) server_info: Arc<Identity>,
    /// What seals an `input_required` result's state, for a method that may answer one.
    pub(super) seal: Option<Seal>,
}

/// How a method's results are shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Method {
    /// One of the six with caching hints.
    Cacheable,
    /// One that may answer `input_required`.
    RoundTrip,
    /// `resources/read`: both.
    CacheableRoundTrip,
    /// Any other.
    Plain,
}

impl Method {
    pub(super) fn of(method: &str) -> Self {
        match (CACHEABLE.contains(&method), ROUND_TRIPS.contains(&method)) {
            (true, true) => Self::CacheableRoundTrip,
            (true, false) => Self::Cacheable,
            (false, true) => Self::RoundTrip,
            (false, false) => Self::Plain,
        }
    }

    pub(super) fn is_cacheable(self) -> bool {
        matches!(self, Self::Cacheable | Self::CacheableRoundTrip)
    }

    pub(super) fn is_round_trip(self) -> bool {
        matches!(self, Self::RoundTrip | Self::CacheableRoundTrip)
    }
}

/// The key and the request a state is sealed for.
#[derive(Debug)]
pub(super) struct Seal {
    pub(super) key: Arc<StateKey>,
    pub(super) method: Box<str>,
    pub(super) name: Box<str>,
}

/// How a call is answered: its handle, and, for the sessionless revision, what its
/// result gets beside the handler's value. Made with the call by the
/// [`Dispatcher`](super::Dispatcher); the adapter keeps it while the handler runs and
/// answers through it once [`finish`](super::Dispatcher::finish) says to.
#[derive(Debug)]
#[must_use]
pub struct Responder {
    handle: RequestHandle,
    shape: Option<Box<Shape>>,
}

impl Responder {
    pub(super) fn plain(handle: RequestHandle) -> Self {
        Self {
            handle,
            shape: None,
        }
    }

    pub(super) fn modern(handle: RequestHandle, shape: Shape) -> Self {
        Self {
            handle,
            shape: Some(Box::new(shape)),
        }
    }

    /// The request it answers.
    pub fn handle(&self) -> RequestHandle {
        self.handle
    }

    /// Answers the request with a handler's `result`, completed for its era (see
    /// [`complete`](Self::complete)), serialized straight into the response. An answer
    /// to a request no longer open (cancelled, session gone) is dropped, as the core
    /// drops it.
    pub fn answer(self, server: &mut Server, now: Instant, result: Result<Value, CallError>) {
        let handle = self.handle;
        let _ = match self.completed(result) {
            Ok(Completed::Value(value)) => server.respond(now, handle, &Json(&value)),
            Ok(Completed::Plain(object, identity)) => server.respond(
                now,
                handle,
                &Spliced {
                    object: &object,
                    members: &identity.members,
                },
            ),
            Err(e) => {
                let data = e.data.as_ref().map(Json);
                let data = data.as_ref().map(|d| d as &dyn ToJson);
                server.respond_error(now, handle, e.code, &e.message, data)
            }
        };
    }

    /// A handler's answer as the client gets it. On the sessionless revision: every
    /// result gets `resultType: "complete"` unless it says otherwise (MODERN-18) and
    /// the server's identity in `_meta` (MODERN-3); a complete result of a cacheable
    /// method gets the configured `ttlMs` and `cacheScope` unless it has them
    /// (MODERN-22); an `input_required` one is allowed only for the three methods that
    /// may ask, needs `inputRequests` or `requestState`, and has its state sealed
    /// (MODERN-23); -32002 becomes -32602 (MODERN-21). Other eras get the answer as it
    /// is.
    ///
    /// # Errors
    /// The handler's error; -32603 for an `input_required` answer the revision forbids.
    pub fn complete(&self, result: Result<Value, CallError>) -> Result<Value, CallError> {
        self.completed(result).map(Completed::into_value)
    }

    /// [`complete`](Self::complete), leaving the two members nearly every result lacks
    /// (`resultType` and `_meta`) to be written with it rather than built as values: the
    /// server's identity is rendered once, not cloned into each result.
    fn completed(&self, result: Result<Value, CallError>) -> Result<Completed, CallError> {
        let Some(shape) = &self.shape else {
            return result.map(Completed::Value);
        };
        let mut value = match result {
            Ok(value) => value,
            Err(mut e) => {
                if e.code == ErrorCode::RESOURCE_NOT_FOUND {
                    e.code = ErrorCode::INVALID_PARAMS;
                }
                return Err(e);
            }
        };
        let Value::Object(object) = &mut value else {
            return Ok(Completed::Value(value));
        };
        match object.get("resultType").map(Value::as_str) {
            None | Some(Some("complete")) if shape.method.is_cacheable() => {
                object
                    .entry("ttlMs")
                    .or_insert_with(|| shape.cache.ttl_ms.into());
                object
                    .entry("cacheScope")
                    .or_insert_with(|| shape.cache.scope.as_str().into());
            }
            Some(Some("input_required")) => seal(shape, object)?,
            _ => {}
        }
        if !object.contains_key("resultType") && !object.contains_key("_meta") {
            let Value::Object(object) = value else {
                unreachable!("matched as an object above")
            };
            return Ok(Completed::Plain(object, Arc::clone(&shape.server_info)));
        }
        object
            .entry("resultType")
            .or_insert_with(|| Value::from("complete"));
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry(SERVER_INFO)
                .or_insert_with(|| shape.server_info.value.clone());
        }
        Ok(Completed::Value(value))
    }
}

/// A completed result: a value, or an object that lacks `resultType` and `_meta` and
/// gets both from the server's [`Identity`] as it is written.
enum Completed {
    Value(Value),
    Plain(Map<String, Value>, Arc<Identity>),
}

impl Completed {
    fn into_value(self) -> Value {
        match self {
            Self::Value(value) => value,
            Self::Plain(mut object, identity) => {
                object.insert("resultType".into(), "complete".into());
                let meta = Map::from_iter([(SERVER_INFO.to_owned(), identity.value.clone())]);
                object.insert("_meta".into(), Value::Object(meta));
                Value::Object(object)
            }
        }
    }
}

/// The server's identity on every sessionless result (MODERN-3): its value, and the
/// members a result without `resultType` and `_meta` gains, rendered once.
#[derive(Debug)]
pub(super) struct Identity {
    value: Value,
    /// `"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":…}`.
    members: Box<str>,
}

impl Identity {
    pub(super) fn new(value: Value) -> Self {
        let meta = json!({ SERVER_INFO: &value });
        let members = format!(r#""resultType":"complete","_meta":{meta}"#).into();
        Self { value, members }
    }
}

/// An object written with some members appended: serde_json writes the object, and
/// `members` (JSON text, `"key":value,…`) go in before its closing brace.
struct Spliced<'a> {
    object: &'a Map<String, Value>,
    members: &'a str,
}

impl ToJson for Spliced<'_> {
    fn write_json(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        let start = dst.len();
        Json(self.object).write_json(dst)?;
        // serde_json wrote `{…}`: its last byte is the closing brace.
        dst.truncate(dst.len() - 1);
        if dst.len() - start > 1 {
            dst.extend_from_slice(b",");
        }
        dst.extend_from_slice(self.members.as_bytes());
        dst.extend_from_slice(b"}");
        Ok(())
    }
}

/// Checks an `input_required` result and seals its state.
fn seal(shape: &Shape, object: &mut Map<String, Value>) -> Result<(), CallError> {
    let Some(seal) = shape.seal.as_ref().filter(|_| shape.method.is_round_trip()) else {
        return Err(CallError::internal(
            "only tools/call, resources/read and prompts/get may answer input_required",
        ));
    };
    if !object.contains_key("inputRequests") && !object.contains_key("requestState") {
        return Err(CallError::internal(
            "an input_required result needs inputRequests or requestState",
        ));
    }
    match object.get_mut("requestState") {
        None => Ok(()),
        Some(Value::String(state)) => {
            *state = seal.key.seal(&seal.method, &seal.name, state);
            Ok(())
        }
        Some(_) => Err(CallError::internal("requestState must be a string")),
    }
}

/// The result of `server/discover` before [`Responder::complete`] (MODERN-14,
/// MODERN-19): every revision the server serves, the application's capabilities.
pub(super) fn discover(server: &Server, capabilities: Value) -> Value {
    let versions: Vec<&str> = server
        .supported_versions()
        .into_iter()
        .map(crate::ProtocolVersion::as_str)
        .collect();
    json!({"supportedVersions": versions, "capabilities": capabilities})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(method: &str) -> Shape {
        Shape {
            method: Method::of(method),
            cache: CacheHint {
                ttl_ms: 5000,
                scope: CacheScope::Public,
            },
            server_info: Arc::new(Identity::new(json!({"name": "s", "version": "1"}))),
            seal: Method::of(method).is_round_trip().then(|| Seal {
                key: Arc::new(StateKey::new([4; 32])),
                method: method.into(),
                name: "t".into(),
            }),
        }
    }

    fn modern(method: &str) -> Responder {
        Responder::modern(RequestHandle::from_raw(1), shape(method))
    }

    #[test]
    fn modern_18_modern_3_a_result_gets_result_type_and_server_info() {
        let done = modern("tools/call")
            .complete(Ok(json!({"content": []})))
            .unwrap();
        assert_eq!(
            done,
            json!({"content": [], "resultType": "complete",
                   "_meta": {SERVER_INFO: {"name": "s", "version": "1"}}})
        );
        // What the handler set stays.
        let own = json!({"resultType": "complete", "_meta": {SERVER_INFO: {"name": "own", "version": "2"}, "k": 1}});
        assert_eq!(modern("tools/call").complete(Ok(own.clone())).unwrap(), own);
    }

    #[test]
    fn modern_3_a_plain_result_is_written_with_the_identity_spliced_in() {
        for result in [
            json!({}),
            json!({"content": [{"type": "text", "text": "hi"}]}),
        ] {
            let responder = modern("tools/call");
            let Ok(Completed::Plain(object, identity)) = responder.completed(Ok(result.clone()))
            else {
                panic!("{result} is written with the identity spliced in");
            };
            let mut buf = BytesMut::new();
            Spliced {
                object: &object,
                members: &identity.members,
            }
            .write_json(&mut buf)
            .unwrap();
            let written: Value = serde_json::from_slice(&buf).unwrap();
            assert_eq!(written, responder.complete(Ok(result)).unwrap());
        }
    }

    #[test]
    fn modern_22_cacheable_complete_results_get_the_hint_and_others_do_not() {
        for method in CACHEABLE {
            let done = modern(method).complete(Ok(json!({}))).unwrap();
            assert_eq!(done["ttlMs"], 5000, "{method}");
            assert_eq!(done["cacheScope"], "public", "{method}");
            assert_eq!(
                CacheHint::read(&done),
                Some(CacheHint {
                    ttl_ms: done["ttlMs"].as_u64().unwrap(),
                    scope: CacheScope::Public
                }),
                "{method}"
            );
        }
        let call = modern("tools/call").complete(Ok(json!({}))).unwrap();
        assert!(call.get("ttlMs").is_none() && call.get("cacheScope").is_none());
        let own = modern("tools/list")
            .complete(Ok(
                json!({"tools": [], "ttlMs": 1, "cacheScope": "private"}),
            ))
            .unwrap();
        assert_eq!(
            (own["ttlMs"].clone(), own["cacheScope"].clone()),
            (json!(1), json!("private"))
        );
    }

    #[test]
    fn modern_23_input_required_is_sealed_and_only_for_the_three_methods() {
        let asked = input_required(json!({"q": roots_request()}), Some("round=1"));
        let done = modern("tools/call").complete(Ok(asked.clone())).unwrap();
        assert_eq!(done["resultType"], "input_required");
        assert!(
            done.get("ttlMs").is_none(),
            "MODERN-22: no hint on input_required"
        );
        let sealed = done["requestState"].as_str().unwrap();
        assert_ne!(sealed, "round=1");
        let key = StateKey::new([4; 32]);
        assert_eq!(
            key.open("tools/call", "t", sealed).as_deref(),
            Ok("round=1")
        );
        let e = modern("tools/list").complete(Ok(asked)).unwrap_err();
        assert_eq!(e.code, ErrorCode::INTERNAL_ERROR);
        let e = modern("tools/call")
            .complete(Ok(json!({"resultType": "input_required"})))
            .unwrap_err();
        assert!(e.message.contains("inputRequests"), "{}", e.message);
    }

    #[test]
    fn modern_21_resource_not_found_becomes_invalid_params_only_on_the_modern_path() {
        let gone = CallError {
            code: ErrorCode::RESOURCE_NOT_FOUND,
            message: "gone".into(),
            data: Some(json!({"uri": "x"})),
        };
        let e = modern("resources/read")
            .complete(Err(gone.clone()))
            .unwrap_err();
        assert_eq!(
            (e.code, e.data),
            (ErrorCode::INVALID_PARAMS, Some(json!({"uri": "x"})))
        );
        let plain = Responder::plain(RequestHandle::from_raw(1));
        assert_eq!(plain.complete(Err(gone.clone())), Err(gone));
        assert_eq!(plain.complete(Ok(json!({}))), Ok(json!({})));
    }

    #[test]
    fn log_levels_are_ordered_by_severity() {
        assert!(LogLevel::parse("debug").unwrap() < LogLevel::parse("info").unwrap());
        assert!(LogLevel::parse("error").unwrap() < LogLevel::parse("emergency").unwrap());
        assert_eq!(LogLevel::parse("Debug"), None);
    }
}
