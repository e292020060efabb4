//! The runtime-neutral half of an adapter's client: the core with the table of the
//! application's callers, so that the tokio and blocking clients differ only in how they
//! move bytes, time and answers, and decide nothing about the protocol.
//!
//! An adapter keeps one [`Calls`] under its lock. The application's requests go through
//! it with the adapter's per-call sender `S` (a channel's sending half); after every
//! input the adapter drives [`Calls::pump`], which turns the core's events into
//! [`Delivery`]s: a call's progress and its one outcome to that call's sender, the
//! server's own messages and the session's fate to the application's receiver, and the
//! first handshake's outcome to the `connect` that waits for it.

use std::collections::HashMap;
use std::fmt;
use std::time::Instant;

use serde_json::Value;

use super::{Client, ClientError, Event, RequestError, ServerMessage};
use crate::jsonrpc::{Envelope, ErrorCode, Json, Message, RequestId};
use crate::{Era, ProtocolVersion};

/// Why a call an application made through an adapter got no result: the one error
/// vocabulary of both adapters' clients.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallError {
    /// The server answered with a JSON-RPC error.
    Rpc {
        /// The code.
        code: i64,
        /// The message.
        message: String,
        /// The error's `data`, if it had any.
        data: Option<Value>,
    },
    /// No answer came: a broken stream (saying whether the request may have run), an
    /// expired session, a timeout, a cancel, …
    Request(RequestError),
    /// The client did not take the request (too many in flight, params it cannot send).
    Refused(ClientError),
    /// The client is closed.
    Closed,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rpc { code, message, .. } => write!(f, "error {code}: {message}"),
            Self::Request(e) => e.fmt(f),
            Self::Refused(e) => e.fmt(f),
            Self::Closed => f.write_str("the client is closed"),
        }
    }
}

impl std::error::Error for CallError {}

impl From<ClientError> for CallError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::NotConnected => Self::Closed,
            e => Self::Refused(e),
        }
    }
}

/// One `notifications/progress` for a call, read from its params.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// How far the work is (increasing with each notification).
    pub progress: f64,
    /// The total, when the server knows it.
    pub total: Option<f64>,
    /// A human-readable message, if the server sent one.
    pub message: Option<String>,
    /// The notification as received.
    pub notification: Envelope,
}

/// What a call's sender receives: any number of progress notifications (a tool call's)
/// or subscribed notifications (a listen's), then exactly one outcome.
#[derive(Debug)]
pub enum CallUpdate {
    /// Progress of the call's work.
    Progress(Progress),
    /// A notification on a `subscriptions/listen` stream (MODERN-13), after its
    /// `notifications/subscriptions/acknowledged`.
    Notification(Envelope),
    /// The result, or why there is none. Nothing follows it.
    Done(Result<Value, CallError>),
}

/// The application's side of one call, kept by an adapter's call handle: whether its
/// outcome came, and the outcome until it is taken. The handle feeds it what its channel
/// yields ([`take`](Self::take)) and hands the rest (progress, notifications) on.
#[derive(Debug, Default)]
pub struct CallState(Stage);

#[derive(Debug, Default)]
enum Stage {
    #[default]
    Waiting,
    Ready(Result<Value, CallError>),
    Taken,
}

impl CallState {
    /// A call waiting for its outcome.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the outcome is still to come: until then the handle reads its channel.
    pub fn is_waiting(&self) -> bool {
        matches!(self.0, Stage::Waiting)
    }

    /// One read of the call's channel (`None`: the channel closed, as when the client
    /// went): the update for the application, or `None` once the outcome came (kept for
    /// [`result`](Self::result)).
    pub fn take(&mut self, update: Option<CallUpdate>) -> Option<CallUpdate> {
        match update {
            Some(CallUpdate::Done(r)) => {
                self.0 = Stage::Ready(r);
                None
            }
            Some(update) => Some(update),
            None => {
                self.0 = Stage::Ready(Err(CallError::Closed));
                None
            }
        }
    }

    /// The outcome, once ([`CallError::Closed`] if it never came or was taken).
    pub fn result(&mut self) -> Result<Value, CallError> {
        match std::mem::replace(&mut self.0, Stage::Taken) {
            Stage::Ready(r) => r,
            Stage::Waiting | Stage::Taken => Err(CallError::Closed),
        }
    }
}

/// What [`Calls::pump`] hands the adapter to deliver.
#[derive(Debug)]
pub enum Delivery<S> {
    /// For the call whose sender this is.
    Call(S, CallUpdate),
    /// For the application's receiver of server messages.
    Message(ServerMessage),
    /// The first handshake's outcome, for the `connect` waiting on it.
    Connected(Result<(), RequestError>),
}

struct Caller<S> {
    sender: S,
    /// The progress token its params carry, when progress is routed to it.
    token: Option<String>,
    /// Whether it is a `subscriptions/listen`, whose tagged notifications are its own.
    kind: CallKind,
}

/// What a caller is owed besides its outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallKind {
    /// Its outcome, and progress if it has a token.
    Request,
    /// The notifications of its subscription (MODERN-13).
    Listen,
}

/// The client core and the application's callers. See the [`client`](crate::client) module docs.
pub struct Calls<S> {
    core: Client,
    callers: HashMap<RequestId, Caller<S>>,
    /// Progress token → the call it belongs to.
    tokens: HashMap<String, RequestId>,
    next_token: u64,
    /// The latest handshake's revision and era.
    negotiated: Option<(ProtocolVersion, Era)>,
    /// The latest handshake's response: the `InitializeResult`, or the `DiscoverResult`.
    described: Option<Envelope>,
}

impl<S> fmt::Debug for Calls<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Calls")
            .field("core", &self.core)
            .field("callers", &self.callers.len())
            .finish_non_exhaustive()
    }
}

impl<S: Clone> Calls<S> {
    /// The callers of `core`, none yet.
    pub fn new(core: Client) -> Self {
        Self {
            core,
            callers: HashMap::new(),
            tokens: HashMap::new(),
            next_token: 1,
            negotiated: None,
            described: None,
        }
    }

    /// The core, for the driver's side: transmits, response heads and bodies, time.
    pub fn core(&mut self) -> &mut Client {
        &mut self.core
    }

    /// The revision and era of the latest handshake ([`Delivery::Connected`], or a
    /// re-initialization's [`ServerMessage::Reconnected`]); before the first, the newest
    /// revision (what an adapter's `connect` returns only after is never asked then).
    pub fn negotiated(&self) -> (ProtocolVersion, Era) {
        self.negotiated
            .unwrap_or((ProtocolVersion::LATEST, Era::Sessionless))
    }

    /// The server's description from the latest handshake: the `result` of its
    /// `InitializeResult`, or at 2026-07-28 of its `DiscoverResult` (capabilities,
    /// `serverInfo` or its `_meta`, instructions); `None` before it, or when the server
    /// proved modern without one (MODERN-26).
    pub fn described(&self) -> Option<Value> {
        let payload = self.described.as_ref()?.payload()?;
        serde_json::from_str(payload.as_str()).ok()
    }

    /// Sends a request; its outcome goes to `sender` as [`CallUpdate::Done`]. A
    /// `deadline` fails it with [`RequestError::Timeout`] (and cancels it at the server).
    ///
    /// # Errors
    /// The core's refusal ([`CallError::Refused`], [`CallError::Closed`]).
    pub fn call(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&Value>,
        deadline: Option<Instant>,
        sender: S,
    ) -> Result<RequestId, CallError> {
        let params = params.map(Json);
        let id = self
            .core
            .request(now, method, params.as_ref().map(|p| p as _), deadline)?;
        self.callers.insert(
            id.clone(),
            Caller {
                sender,
                token: None,
                kind: CallKind::Request,
            },
        );
        Ok(id)
    }

    /// Calls the tool `name` with `arguments`: `tools/call` with a progress token of its
    /// own, so that the server's progress for it reaches `sender` as
    /// [`CallUpdate::Progress`], before the outcome.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub fn call_tool(
        &mut self,
        now: Instant,
        name: &str,
        arguments: Value,
        deadline: Option<Instant>,
        sender: S,
    ) -> Result<RequestId, CallError> {
        let token = format!("mcpwire-{}", self.next_token);
        self.next_token += 1;
        let params = serde_json::json!({
            "name": name,
            "arguments": arguments,
            "_meta": {"progressToken": token},
        });
        let id = self.call(now, "tools/call", Some(&params), deadline, sender)?;
        if let Some(caller) = self.callers.get_mut(&id) {
            caller.token = Some(token.clone());
        }
        self.tokens.insert(token, id.clone());
        Ok(id)
    }

    /// Opens a `subscriptions/listen` stream (2026-07-28, MODERN-13) for `notifications`
    /// (`{"toolsListChanged": true, "resourceSubscriptions": ["file:///x"], …}`): every
    /// notification the server tags with this request's id goes to `sender` as
    /// [`CallUpdate::Notification`], the acknowledgement first, until the server ends the
    /// stream ([`CallUpdate::Done`]) or the application [`cancel`](Self::cancel)s it,
    /// which closes it.
    ///
    /// # Errors
    /// [`RequestError::Unsendable`] in the older eras, which have no such request: their
    /// list changes come as [`ServerMessage::Notification`]s on the session's stream.
    /// Otherwise as [`call`](Self::call).
    pub fn listen(
        &mut self,
        now: Instant,
        notifications: Value,
        sender: S,
    ) -> Result<RequestId, CallError> {
        if self.core.era() != Era::Sessionless {
            return Err(CallError::Request(RequestError::Unsendable(format!(
                "subscriptions/listen is a request of 2026-07-28, and this client speaks {}: \
                 list changes come with the server's messages",
                self.core.era()
            ))));
        }
        let params = serde_json::json!({ "notifications": notifications });
        let id = self.call(now, "subscriptions/listen", Some(&params), None, sender)?;
        if let Some(caller) = self.callers.get_mut(&id) {
            caller.kind = CallKind::Listen;
        }
        Ok(id)
    }

    /// Gives up on call `id`: nothing more reaches its sender, and the server is told
    /// (MODERN-11 at 2026-07-28: its response closes; else `notifications/cancelled`).
    pub fn cancel(&mut self, now: Instant, id: &RequestId) {
        if let Some(caller) = self.callers.remove(id) {
            self.forget_token(caller.token);
            self.core.cancel(now, id, Some("the caller gave up"));
        }
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub fn notify(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&Value>,
    ) -> Result<(), CallError> {
        let params = params.map(Json);
        Ok(self
            .core
            .notify(now, method, params.as_ref().map(|p| p as _))?)
    }

    /// Answers a server→client request ([`ServerMessage::Request`]) with `result`.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub fn respond(
        &mut self,
        now: Instant,
        id: &RequestId,
        result: &Value,
    ) -> Result<(), CallError> {
        Ok(self.core.respond(now, id, &Json(result))?)
    }

    /// Answers a server→client request with a JSON-RPC error.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub fn respond_error(
        &mut self,
        now: Instant,
        id: &RequestId,
        code: ErrorCode,
        message: &str,
    ) -> Result<(), CallError> {
        Ok(self.core.respond_error(now, id, code, message)?)
    }

    /// Hands out what the core's events mean, each to whom it concerns, in the core's
    /// order: a call's progress before its outcome, a server message sent before a
    /// response before that response's outcome.
    pub fn pump(&mut self, mut deliver: impl FnMut(Delivery<S>)) {
        while let Some(event) = self.core.poll_event() {
            self.route(event, &mut deliver);
        }
    }

    fn route(&mut self, event: Event, deliver: &mut impl FnMut(Delivery<S>)) {
        match event {
            Event::Connected {
                version,
                era,
                result,
            } => {
                self.negotiated = Some((version, era));
                self.described = result;
                deliver(Delivery::Connected(Ok(())));
            }
            Event::ConnectFailed(e) => {
                self.end_all_with(&mut *deliver);
                deliver(Delivery::Connected(Err(e)));
            }
            Event::Reconnected {
                version,
                era,
                result,
            } => {
                self.negotiated = Some((version, era));
                self.described = result;
                deliver(Delivery::Message(ServerMessage::Reconnected {
                    version,
                    era,
                }));
            }
            Event::ReconnectFailed(e) => {
                self.end_all_with(&mut *deliver);
                deliver(Delivery::Message(ServerMessage::ReconnectFailed(e)));
            }
            Event::Response(m) => {
                let Some(caller) = m.id().and_then(|id| self.callers.remove(id)) else {
                    return;
                };
                self.forget_token(caller.token);
                deliver(Delivery::Call(caller.sender, CallUpdate::Done(outcome(&m))));
            }
            Event::Failed { id, error } => {
                if let Some(caller) = self.callers.remove(&id) {
                    self.forget_token(caller.token);
                    let done = CallUpdate::Done(Err(CallError::Request(error)));
                    deliver(Delivery::Call(caller.sender, done));
                }
            }
            Event::Notification(m) => match self.owner_of(&m) {
                Some((sender, update)) => deliver(Delivery::Call(sender, update)),
                None => deliver(Delivery::Message(ServerMessage::Notification(m))),
            },
            Event::Request(m) => deliver(Delivery::Message(ServerMessage::Request(m))),
            Event::StreamReset { error } => {
                deliver(Delivery::Message(ServerMessage::StreamReset(error)));
            }
            Event::SessionExpired => deliver(Delivery::Message(ServerMessage::SessionExpired)),
            Event::ToolDropped { tool, reason } => {
                deliver(Delivery::Message(ServerMessage::ToolDropped {
                    tool,
                    reason,
                }));
            }
            Event::Closed => {
                self.end_all_with(&mut *deliver);
                if self.negotiated.is_none() {
                    // Closed before the first handshake finished: `connect` learns it.
                    deliver(Delivery::Connected(Err(RequestError::Closed)));
                }
            }
        }
    }

    /// The call a notification belongs to, with its sender and the update: a listen's
    /// notification (tagged with its id: MODERN-13), or progress under a call's token.
    fn owner_of(&self, m: &Envelope) -> Option<(S, CallUpdate)> {
        let params: Value = serde_json::from_str(m.payload()?.as_str()).ok()?;
        let listen = params
            .get("_meta")
            .and_then(|meta| meta.get(crate::meta::SUBSCRIPTION_ID))
            .and_then(|id| match id {
                Value::Number(n) => n.as_i64().map(RequestId::int),
                Value::String(s) => Some(RequestId::string(s)),
                _ => None,
            })
            .and_then(|id| self.callers.get(&id))
            .filter(|caller| caller.kind == CallKind::Listen);
        if let Some(caller) = listen {
            return Some((caller.sender.clone(), CallUpdate::Notification(m.clone())));
        }
        if m.method() != Some("notifications/progress") {
            return None;
        }
        let token = params.get("progressToken")?.as_str()?;
        let caller = self.callers.get(self.tokens.get(token)?)?;
        let progress = Progress {
            progress: params.get("progress")?.as_f64()?,
            total: params.get("total").and_then(Value::as_f64),
            message: params
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
            notification: m.clone(),
        };
        Some((caller.sender.clone(), CallUpdate::Progress(progress)))
    }

    fn forget_token(&mut self, token: Option<String>) {
        if let Some(token) = token {
            self.tokens.remove(&token);
        }
    }

    /// The client closed (or its handshake failed): every call still waiting ends with
    /// [`CallError::Closed`]. (The core failed those in flight already; this is the
    /// backstop that lets no caller wait for ever.)
    fn end_all_with(&mut self, deliver: &mut impl FnMut(Delivery<S>)) {
        self.tokens.clear();
        for (_, caller) in self.callers.drain() {
            deliver(Delivery::Call(
                caller.sender,
                CallUpdate::Done(Err(CallError::Closed)),
            ));
        }
    }
}

/// A response's outcome for its caller: the result, or the server's error.
fn outcome(m: &Envelope) -> Result<Value, CallError> {
    match m.message() {
        Message::Response(r) => serde_json::from_str(r.result.as_str()).map_err(|e| {
            CallError::Request(RequestError::BadResponse(format!(
                "the result is not JSON: {e}"
            )))
        }),
        Message::Error(e) => Err(CallError::Rpc {
            code: e.error.code.0,
            message: e.error.message.into_owned(),
            data: e
                .error
                .data
                .as_ref()
                .and_then(|d| serde_json::from_str(d.as_str()).ok()),
        }),
        Message::Request(_) | Message::Notification(_) => Err(CallError::Request(
            RequestError::BadResponse("a request or notification came as the answer".into()),
        )),
    }
}
