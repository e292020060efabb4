//! The client's writing and reading: requests out, messages in, streams resumed.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use http::header::{self, HeaderValue};

use super::modern::{self, ResultType, Settled};
use super::{
    Body, Client, Event, ExKind, Exchange, ExchangeId, Handshake, Outbound, Phase, RequestError,
    Stream, StreamKind, Transmit, split,
};
use crate::jsonrpc::{Envelope, Kind, Outgoing, RawJson, RequestId, Resolution, body_text};
use crate::sse::Item;
use crate::{Era, ProtocolVersion};

impl Client {
    /// A request head for `uri` with the session's headers.
    pub(super) fn head(&self, method: Method, uri: http::Uri) -> http::request::Parts {
        let (mut head, ()) = http::Request::new(()).into_parts();
        head.method = method;
        // The application's headers (none of them the transport's own), then the
        // transport's.
        head.headers.clone_from(&self.config.headers);
        if let Some(authority) = uri.authority()
            && let Ok(host) = HeaderValue::from_str(authority.as_str())
        {
            head.headers.insert(header::HOST, host);
        }
        head.uri = uri;
        let h = &mut head.headers;
        if head.method == Method::POST {
            h.insert(
                header::ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            );
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        } else if head.method == Method::GET {
            h.insert(
                header::ACCEPT,
                HeaderValue::from_static("text/event-stream"),
            );
        }
        if self.era != Era::HttpSse {
            if let Some(session) = &self.session {
                h.insert("mcp-session-id", session.clone());
            }
            if let Some(version) = self.version {
                h.insert(
                    "mcp-protocol-version",
                    HeaderValue::from_static(version.as_str()),
                );
            }
        }
        head
    }

    /// Queues an HTTP request.
    pub(super) fn transmit(
        &mut self,
        kind: ExKind,
        head: http::request::Parts,
        body: Bytes,
    ) -> u64 {
        let x = self.next;
        self.next += 1;
        self.exchanges.insert(
            x,
            Exchange {
                kind,
                body: Body::Head,
            },
        );
        self.out.push_back(Transmit::Request {
            exchange: ExchangeId(x),
            head,
            body,
        });
        x
    }

    /// POSTs one message body to the endpoint (or the legacy POST URI), with `extra`
    /// headers beside the session's.
    pub(super) fn send_post(
        &mut self,
        body: Bytes,
        ids: Vec<RequestId>,
        extra: &[(http::HeaderName, HeaderValue)],
    ) -> u64 {
        let uri = match (self.era, &self.legacy_post) {
            (Era::HttpSse, Some(uri)) => uri.clone(),
            _ => self.config.endpoint.clone(),
        };
        let mut head = self.head(Method::POST, uri);
        for (name, value) in extra {
            head.headers.insert(name, value.clone());
        }
        self.transmit(ExKind::Post { ids }, head, body)
    }

    /// Sends now if connected and the server has the handshake's end, else queues for
    /// after it.
    pub(super) fn send_or_wait(&mut self, message: Outbound) {
        if self.phase == Phase::Connected && self.acknowledging.is_none() {
            self.send_outbound(message);
        } else {
            self.waiting.push_back(message);
        }
    }

    /// Encodes a message for the era and POSTs it.
    pub(super) fn send_outbound(&mut self, message: Outbound) {
        let (id, method, params) = match message {
            Outbound::Encoded(body) => {
                self.send_post(body, Vec::new(), &[]);
                return;
            }
            Outbound::Call { id, method, params } => (id, method, params),
        };
        let text = params.as_deref().and_then(|p| std::str::from_utf8(p).ok());
        let (params, extra) = if self.era == Era::Sessionless {
            let read = match (text, &params) {
                (Some(t), _) => match modern::read_params(t) {
                    Ok(read) => Some(read),
                    Err(e) => {
                        let ids: Vec<RequestId> = id.into_iter().collect();
                        return self.fail_unsent(ids, RequestError::Unsendable(e.to_string()));
                    }
                },
                (None, Some(_)) => {
                    let ids: Vec<RequestId> = id.into_iter().collect();
                    let error = RequestError::Unsendable("the params are not UTF-8".into());
                    return self.fail_unsent(ids, error);
                }
                (None, None) => None,
            };
            let spliced = match (&read, text) {
                (Some(read), Some(text)) => read.with_meta(text, &self.meta),
                _ => modern::meta_only(&self.meta),
            };
            let mut extra = modern::mirrored_headers(&method, read.as_ref());
            match self.param_headers(&method, read.as_ref()) {
                Ok(params) => extra.extend(params),
                Err(error) => {
                    let ids: Vec<RequestId> = id.into_iter().collect();
                    return self.fail_unsent(ids, error);
                }
            }
            (Some(spliced), extra)
        } else {
            (params, Vec::new())
        };
        let raw = params
            .as_deref()
            .and_then(|p| std::str::from_utf8(p).ok())
            .map(RawJson::validated);
        let raw = raw.as_ref().map(|r| r as &dyn crate::jsonrpc::ToJson);
        let mut body = bytes::BytesMut::new();
        let written = match &id {
            Some(id) => Outgoing::Request {
                id,
                method: &method,
                params: raw,
            }
            .write(&mut body),
            None => Outgoing::Notification {
                method: &method,
                params: raw,
            }
            .write(&mut body),
        };
        let ids: Vec<RequestId> = id.into_iter().collect();
        if written.is_err() {
            // Params that are no JSON text: a message the application could not have
            // sent in any era.
            let error = RequestError::Unsendable("it could not be encoded".into());
            return self.fail_unsent(ids, error);
        }
        self.send_post(body.freeze(), ids, &extra);
    }

    /// The `Mcp-Param-*` headers of a sessionless `tools/call` of a tool whose listed
    /// schema mirrors arguments (MODERN-7, MODERN-8): none for any other request, or a
    /// tool the client has not seen listed.
    fn param_headers(
        &self,
        method: &str,
        read: Option<&modern::Read<'_>>,
    ) -> Result<Vec<(http::HeaderName, HeaderValue)>, RequestError> {
        let Some(read) = read.filter(|_| method == "tools/call") else {
            return Ok(Vec::new());
        };
        if let Some(name) = read.name.as_deref().filter(|n| self.dropped.contains(*n)) {
            return Err(RequestError::Unsendable(format!(
                "the tool {name:?} was listed with invalid x-mcp-header annotations, so its \
                 calls cannot carry the headers they must (MODERN-7)"
            )));
        }
        let Some(mirrors) = read.name.as_deref().and_then(|n| self.mirrors.get(n)) else {
            return Ok(Vec::new());
        };
        let arguments = match read.arguments {
            Some(text) => serde_json::from_str(text)
                .map_err(|e| RequestError::Unsendable(format!("arguments: {e}")))?,
            None => serde_json::Value::Null,
        };
        let pairs = mirrors
            .encode(&arguments)
            .map_err(|e| RequestError::Unsendable(e.to_string()))?;
        pairs
            .into_iter()
            .map(|(name, value)| {
                match (
                    http::HeaderName::try_from(name.as_str()),
                    HeaderValue::try_from(value.as_str()),
                ) {
                    (Ok(name), Ok(value)) => Ok((name, value)),
                    _ => Err(RequestError::Unsendable(format!("{name} is not a header"))),
                }
            })
            .collect()
    }

    /// A request that could not leave as its era needs: it fails (the handshake's, the
    /// handshake).
    fn fail_unsent(&mut self, ids: Vec<RequestId>, error: RequestError) {
        if self.probe.as_ref().is_some_and(|p| ids.contains(p)) {
            return self.connect_failed(error);
        }
        for id in ids {
            if self.pending.cancel(&id).is_some() {
                self.push_failed(id, error.clone());
            }
        }
    }

    /// Encodes and sends (or queues) a message that carries no request.
    pub(super) fn send_message(
        &mut self,
        message: &Outgoing<'_>,
    ) -> Result<(), super::ClientError> {
        if self.phase == Phase::Closed {
            return Err(super::ClientError::NotConnected);
        }
        let mut body = bytes::BytesMut::new();
        message.write(&mut body)?;
        self.send_or_wait(Outbound::Encoded(body.freeze()));
        Ok(())
    }

    /// A stream that owes the responses to `ids` still pending.
    pub(super) fn new_stream(&mut self, kind: StreamKind, ids: &[RequestId]) -> u64 {
        let t = self.next;
        self.next += 1;
        let mut owed = std::collections::BTreeSet::new();
        for id in ids {
            if self.pending.contains(id) || self.init_id.as_ref() == Some(id) {
                owed.insert(id.clone());
                self.owed_by.insert(id.clone(), t);
            }
        }
        self.streams.insert(
            t,
            Stream {
                kind,
                owed,
                last_id: String::new(),
                retry: None,
                attempts: 0,
                conn: None,
            },
        );
        t
    }

    pub(super) fn remove_stream(&mut self, t: u64) {
        if let Some(stream) = self.streams.remove(&t) {
            for id in stream.owed {
                self.owed_by.remove(&id);
            }
        }
        if self.get_stream == Some(t) {
            self.get_stream = None;
        }
        self.timers.retain(|(_, s)| *s != t);
    }

    pub(super) fn drop_streams(&mut self) {
        let all: Vec<u64> = self.streams.keys().copied().collect();
        for t in all {
            self.remove_stream(t);
        }
    }

    /// `id` no longer waits on any stream.
    pub(super) fn forget_owed(&mut self, id: &RequestId) {
        if let Some(t) = self.owed_by.remove(id)
            && let Some(stream) = self.streams.get_mut(&t)
        {
            stream.owed.remove(id);
        }
    }

    /// Fails every request in flight.
    pub(super) fn fail_all(&mut self, error: RequestError) {
        let all: Vec<RequestId> = self.pending.drain().map(|(id, _)| id).collect();
        for id in all {
            self.forget_owed(&id);
            if self.init_id.as_ref() == Some(&id) || self.probe.as_ref() == Some(&id) {
                continue;
            }
            self.push_failed(id, error.clone());
        }
        self.fail_gathering(&error);
        // What waited for the handshake goes too: its requests were failed above.
        self.waiting.clear();
    }

    /// Fails those of `ids` still in flight. The handshake's requests are not the
    /// application's: `initialize` failing fails the handshake; the probe failing is no
    /// modern evidence, so the client falls back (MODERN-26).
    pub(super) fn fail_ids(&mut self, now: Instant, ids: &[RequestId], error: RequestError) {
        if self.init_id.as_ref().is_some_and(|i| ids.contains(i)) {
            return self.connect_failed(error);
        }
        if self.probe.as_ref().is_some_and(|p| ids.contains(p)) {
            return self.probe_answered(now, 200, None);
        }
        for id in ids {
            if self.pending.cancel(id).is_some() {
                self.forget_owed(id);
                self.push_failed(id.clone(), error.clone());
            }
        }
    }

    /// Reads every item the stream's decoder has.
    pub(super) fn drain_stream(&mut self, now: Instant, x: u64, t: u64) {
        loop {
            let Some(Exchange {
                body: Body::Sse(decoder, _),
                ..
            }) = self.exchanges.get_mut(&x)
            else {
                return;
            };
            // The stream's last id moves only when this connection's decoder moved it: a
            // resumed connection starts with a fresh decoder whose id is empty, and that
            // emptiness must not erase the id the stream resumes from (RESUME-12).
            let before = decoder.last_event_id().to_owned();
            let item = decoder.poll_item();
            let after = decoder.last_event_id();
            if after != before
                && let Some(stream) = self.streams.get_mut(&t)
            {
                stream.last_id = after.to_owned();
            }
            let item = match item {
                Ok(Some(item)) => item,
                Ok(None) => break,
                // A line or event over the limits was dropped; the rest goes on.
                Err(_) => continue,
            };
            match item {
                Item::Event(event) => {
                    let kind = self.streams.get(&t).map(|s| s.kind);
                    match (kind, event.event_type()) {
                        (Some(StreamKind::Legacy), "endpoint") => {
                            let data = event.data().to_owned();
                            self.legacy_endpoint(now, &data);
                        }
                        (Some(_), "" | "message") => self.message_data(now, event.into_data()),
                        _ => {}
                    }
                }
                Item::Retry(retry) => {
                    if let Some(stream) = self.streams.get_mut(&t) {
                        stream.retry = Some(retry);
                    }
                }
                Item::Comment(_) => {}
            }
        }
    }

    /// One event's data: skipped when empty (a priming event, §14.5), else one message or
    /// (2025-03-26) a batch.
    fn message_data(&mut self, now: Instant, data: crate::Utf8Bytes) {
        if data.is_empty() {
            return;
        }
        let version = self.version.unwrap_or(ProtocolVersion::V2025_03_26);
        if let Ok(envelopes) = self.classifier.envelopes(data, version) {
            for message in split(envelopes) {
                self.message(now, message);
            }
        }
    }

    /// Routes one message from the server.
    pub(super) fn message(&mut self, now: Instant, message: Envelope) {
        match message.kind() {
            Kind::Response | Kind::Error => {
                let Some(id) = message.id().cloned() else {
                    return;
                };
                if self.pending.token(&id).is_none() {
                    // Unknown, or answered already: never delivered twice.
                    return;
                }
                if self.probe.as_ref() == Some(&id) {
                    return self.probe_answered(now, 200, Some(&message));
                }
                let asked = match self.pending.resolve(&id) {
                    Resolution::Matched(asked) => asked,
                    Resolution::Stale | Resolution::Unknown => super::Asked::Other,
                };
                self.forget_owed(&id);
                if self.init_id.as_ref() == Some(&id) {
                    return self.handshake_done(now, message);
                }
                if self.era != Era::Sessionless {
                    return self.events.push_back(Event::Response(message));
                }
                let kind = match modern::result_type(&message) {
                    Ok(kind) => kind,
                    Err(error) => return self.push_failed(id, error),
                };
                let message = match (kind, asked) {
                    (_, super::Asked::Relist(relist)) => {
                        return self.relisted(&id, *relist, message);
                    }
                    (_, super::Asked::RoundTrip(call))
                        if call.may_relist() && modern::refuses_mirrors(&message) =>
                    {
                        return self.relist(&id, *call, message);
                    }
                    (ResultType::InputRequired, super::Asked::RoundTrip(call)) => {
                        return self.input_required(now, id, *call, &message);
                    }
                    (ResultType::InputRequired, _) => {
                        let error = RequestError::BadResponse(
                            "input_required to a method that may not ask (MODERN-23)".into(),
                        );
                        return self.push_failed(id, error);
                    }
                    (ResultType::Complete, super::Asked::ToolsList) => self.tools_listed(message),
                    (ResultType::Complete, _) => message,
                };
                let app = self.rounds.origin(&id);
                let message = self.as_answer_to(message, &app);
                self.events.push_back(Event::Response(message));
            }
            Kind::Request if message.method() == Some("ping") => {
                // A `ping` must be answered promptly with an empty result: the client does
                // it, so that no application has to (and none can forget to).
                if let (Some(id), Ok(empty)) = (message.id().cloned(), RawJson::new("{}")) {
                    let _ = self.send_message(&Outgoing::Response {
                        id: &id,
                        result: &empty,
                    });
                }
            }
            Kind::Request => self.events.push_back(Event::Request(message)),
            Kind::Notification => self.events.push_back(Event::Notification(message)),
        }
    }

    /// A JSON response body: one response or (2025-03-26) an array of them.
    pub(super) fn json_body(&mut self, now: Instant, ids: &[RequestId], body: Bytes) {
        let version = self.version.unwrap_or(ProtocolVersion::V2025_03_26);
        let parsed = body_text(body).and_then(|text| self.classifier.envelopes(text, version));
        match parsed {
            Ok(envelopes) => {
                for message in split(envelopes) {
                    self.message(now, message);
                }
            }
            Err(e) => {
                let error = RequestError::BadResponse(e.to_string());
                if self.init_id.as_ref().is_some_and(|i| ids.contains(i)) {
                    return self.connect_failed(error);
                }
                return self.fail_ids(now, ids, error);
            }
        }
        if self
            .init_id
            .as_ref()
            .is_some_and(|i| ids.contains(i) && self.pending.contains(i))
        {
            return self.connect_failed(RequestError::BadResponse("no InitializeResult".into()));
        }
        if self.probe.as_ref().is_some_and(|p| ids.contains(p)) {
            return self.probe_answered(now, 200, None);
        }
        self.fail_ids(
            now,
            ids,
            RequestError::BadResponse("the body held no response for it".into()),
        );
    }

    /// The `initialize` response arrived.
    fn handshake_done(&mut self, now: Instant, result: Envelope) {
        let _ = now;
        self.init_id = None;
        if result.kind() == Kind::Error {
            let message = match result.message() {
                crate::jsonrpc::Message::Error(e) => e.error.message.clone().into_owned(),
                _ => String::new(),
            };
            let error = RequestError::Http {
                status: 200,
                message,
            };
            return self.initialize_refused(200, Some(&result), error);
        }
        let version = result
            .payload()
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p.as_str()).ok())
            .and_then(|v| {
                v.get("protocolVersion")?
                    .as_str()?
                    .parse::<ProtocolVersion>()
                    .ok()
            })
            .filter(|v| v.uses_initialize());
        let Some(version) = version else {
            return self.connect_failed(RequestError::BadResponse(
                "the server offered no protocol version this client speaks".into(),
            ));
        };
        self.version = Some(version);
        self.phase = Phase::Connected;
        let mut body = bytes::BytesMut::new();
        let _ = Outgoing::Notification {
            method: "notifications/initialized",
            params: None,
        }
        .write(&mut body);
        // What waits goes out once the server has answered this (`acknowledged`).
        self.acknowledging = Some(self.send_post(body.freeze(), Vec::new(), &[]));
        if self.config.get_stream && self.era == Era::Sessions {
            let t = self.new_stream(StreamKind::Get, &[]);
            self.get_stream = Some(t);
            self.reconnect(t);
        }
        self.report_handshake(version, Some(result));
    }

    /// A sessionless `tools/list` result: each tool's `x-mcp-header` annotations are
    /// read into the mirrors its calls carry; a tool whose annotations are invalid is
    /// dropped from the result, and [`Event::ToolDropped`] says why (MODERN-7).
    pub(super) fn tools_listed(&mut self, message: Envelope) -> Envelope {
        let crate::jsonrpc::Message::Response(response) = message.message() else {
            return message;
        };
        let Ok(mut result) = serde_json::from_str::<serde_json::Value>(response.result.as_str())
        else {
            return message;
        };
        let Some(tools) = result.get_mut("tools").and_then(|t| t.as_array_mut()) else {
            return message;
        };
        let before = tools.len();
        let mut dropped = Vec::new();
        tools.retain(|tool| {
            let Some(name) = tool.get("name").and_then(|n| n.as_str()) else {
                return true;
            };
            let schema = tool.get("inputSchema").unwrap_or(&serde_json::Value::Null);
            match crate::mirror::Mirrors::from_input_schema(schema) {
                Ok(mirrors) => {
                    self.mirrors.insert(name, mirrors);
                    self.dropped.remove(name);
                    true
                }
                Err(error) => {
                    self.mirrors.remove(name);
                    self.dropped.insert(name.to_owned());
                    dropped.push((name.to_owned(), error.to_string()));
                    false
                }
            }
        });
        if tools.len() == before {
            return message;
        }
        for (tool, reason) in dropped {
            self.events.push_back(Event::ToolDropped { tool, reason });
        }
        // The response again, with the result the application may see.
        let result = result.to_string();
        let rebuilt = self.envelope_of(&Outgoing::Response {
            id: &response.id,
            result: &RawJson::validated(&result),
        });
        rebuilt.unwrap_or(message)
    }

    /// `message` encoded and classified as if it had come from the server: an answer the
    /// client rewrites for the application (a tool list without the dropped tools, a
    /// later round's answer under the application's id).
    pub(super) fn envelope_of(&self, message: &Outgoing<'_>) -> Option<Envelope> {
        let mut text = bytes::BytesMut::new();
        message.write(&mut text).ok()?;
        let text = body_text(text.freeze()).ok()?;
        self.classifier.envelope(text).ok()
    }

    /// The probe's answer: an HTTP `status` and the message it carried, if any. The
    /// evidence settles the era (MODERN-15, MODERN-26): sessionless and connected,
    /// `initialize`, or a failed handshake naming what the server offered.
    pub(super) fn probe_answered(&mut self, now: Instant, status: u16, message: Option<&Envelope>) {
        let Some(id) = self.probe.take() else {
            return;
        };
        let _ = self.pending.cancel(&id);
        self.forget_owed(&id);
        // The probe's exchange is done with, whatever is left of it.
        self.abort_carrying(&id);
        // A result of an unknown `resultType` is invalid (MODERN-23), and `server/discover`
        // may not ask for input: the probe's answer cannot be a `DiscoverResult` then.
        let invalid = match message.map(modern::result_type) {
            Some(Err(error)) => Some(error),
            Some(Ok(ResultType::InputRequired)) => Some(RequestError::BadResponse(
                "input_required to server/discover (MODERN-23)".into(),
            )),
            _ => None,
        };
        if let Some(error) = invalid {
            return self.connect_failed(error);
        }
        let offered = self.version.unwrap_or(ProtocolVersion::LATEST);
        let evidence = modern::evidence(status, message);
        match modern::settle(
            &evidence,
            offered,
            self.config.revision,
            self.config.version,
        ) {
            Settled::Modern(version) => {
                let result = message.filter(|m| m.kind() == Kind::Response).cloned();
                self.modern_connected(version, result);
            }
            Settled::Initialize(version) => {
                self.phase = Phase::Idle;
                self.initialize(now, version, false);
            }
            Settled::Fail(error) => self.connect_failed(error),
        }
    }

    /// Connected at a sessionless revision: no session, no standalone stream; what
    /// waited goes out, shaped for it.
    pub(super) fn modern_connected(&mut self, version: ProtocolVersion, result: Option<Envelope>) {
        if self.version.is_some_and(|v| v != version) && !self.set_meta(version) {
            return;
        }
        self.era = Era::Sessionless;
        self.version = Some(version);
        self.phase = Phase::Connected;
        self.report_handshake(version, result);
        for message in std::mem::take(&mut self.waiting) {
            self.send_outbound(message);
        }
    }

    /// Exchange `x` got its response head or failed: if it carried
    /// `notifications/initialized`, the messages that waited for the server to have it
    /// go out now (whatever the answer: an error is the server's to report on them).
    pub(super) fn acknowledged(&mut self, x: u64) {
        if self.acknowledging != Some(x) {
            return;
        }
        self.acknowledging = None;
        if self.phase == Phase::Connected {
            for message in std::mem::take(&mut self.waiting) {
                self.send_outbound(message);
            }
        }
    }

    /// Aborts the exchanges whose POST carried `id`, with their streams: nothing more of
    /// them is read.
    pub(super) fn abort_carrying(&mut self, id: &RequestId) {
        let carrying: Vec<u64> = self
            .exchanges
            .iter()
            .filter(|(_, e)| matches!(&e.kind, ExKind::Post { ids } if ids.contains(id)))
            .map(|(x, _)| *x)
            .collect();
        for x in carrying {
            if let Some(Exchange {
                body: Body::Sse(_, t),
                ..
            }) = self.exchanges.remove(&x)
            {
                self.remove_stream(t);
            }
            self.out.push_back(Transmit::Abort(ExchangeId(x)));
        }
    }

    /// `initialize` was refused: an error status, or a JSON-RPC error under 200, whose
    /// body may hold `message`. A modern error there is a modern server's, not a legacy
    /// one's (MODERN-15, MODERN-26): the sessionless revision if the configuration may
    /// speak it, else the handshake fails naming what the server offered. Otherwise 400,
    /// 404 or 405 falls back to HTTP+SSE (LEGACY-6), and anything else fails the
    /// handshake with `error`.
    pub(super) fn initialize_refused(
        &mut self,
        status: u16,
        message: Option<&Envelope>,
        error: RequestError,
    ) {
        match modern::refused(&modern::evidence(status, message), self.config.revision) {
            Some(Settled::Modern(version)) => {
                if let Some(id) = self.init_id.take() {
                    let _ = self.pending.cancel(&id);
                    self.forget_owed(&id);
                }
                if self.set_meta(version) {
                    self.modern_connected(version, None);
                }
            }
            Some(Settled::Fail(error)) => self.connect_failed(error),
            _ if self.config.legacy_fallback
                && self.era == Era::Sessions
                && matches!(status, 400 | 404 | 405) =>
            {
                self.open_legacy_stream();
            }
            _ => self.connect_failed(error),
        }
    }

    pub(super) fn connect_failed(&mut self, error: RequestError) {
        self.acknowledging = None;
        self.phase = Phase::Closed;
        // Nothing was negotiated (a revision tried on the way is not `version()`).
        self.version = None;
        // The handshake's own requests are reported as the ConnectFailed, not as failures.
        self.fail_all(RequestError::Closed);
        self.init_id = None;
        self.probe = None;
        self.drop_streams();
        for x in std::mem::take(&mut self.exchanges).into_keys() {
            self.out.push_back(Transmit::Abort(ExchangeId(x)));
        }
        self.events.push_back(match self.handshake {
            Handshake::First => Event::ConnectFailed(error),
            Handshake::Again => Event::ReconnectFailed(error),
        });
    }

    /// The handshake settled on `version` (in the era set): [`Event::Connected`], or
    /// [`Event::Reconnected`] for a re-initialization's.
    fn report_handshake(&mut self, version: ProtocolVersion, result: Option<Envelope>) {
        let era = self.era;
        self.events.push_back(match self.handshake {
            Handshake::First => Event::Connected {
                version,
                era,
                result,
            },
            Handshake::Again => Event::Reconnected {
                version,
                era,
                result,
            },
        });
    }

    /// 404 to a request with a session id (SESSION-8).
    pub(super) fn session_expired(&mut self, now: Instant) {
        // The session ended before the first handshake finished (the resume of the
        // `initialize` stream was answered 404: the server restarted, say): the handshake
        // fails, as a refused resume of its stream does. Re-initializing here would report
        // `Reconnected` for a session the application was never told of, and `Connected`
        // never.
        if self.phase == Phase::Initializing && self.handshake == Handshake::First {
            return self.connect_failed(RequestError::SessionExpired);
        }
        self.fail_all(RequestError::SessionExpired);
        self.drop_streams();
        for x in std::mem::take(&mut self.exchanges).into_keys() {
            self.out.push_back(Transmit::Abort(ExchangeId(x)));
        }
        self.session = None;
        self.version = None;
        self.init_id = None;
        // The new session is found as the first was, with `initialize` (the server keeps
        // sessions, so it is not probed again): Streamable HTTP first (with the
        // fallback), or a new legacy stream whose `endpoint` event names where to POST.
        let legacy_only = self.config.revision == super::Revision::Era(Era::HttpSse);
        self.era = Era::Sessions;
        self.legacy_post = None;
        self.acknowledging = None;
        self.events.push_back(Event::SessionExpired);
        if self.config.reinitialize {
            self.handshake = Handshake::Again;
            self.phase = Phase::Idle;
            self.initialize(now, self.config.version, legacy_only);
        } else {
            self.phase = Phase::Closed;
            self.events.push_back(Event::Closed);
        }
    }

    /// The legacy transport's GET (LEGACY-6): its stream's `endpoint` event names where to POST.
    pub(super) fn open_legacy_stream(&mut self) {
        self.era = Era::HttpSse;
        let t = self.new_stream(StreamKind::Legacy, &[]);
        let head = self.head(Method::GET, self.config.endpoint.clone());
        self.transmit(ExKind::Get { stream: t }, head, Bytes::new());
    }

    /// The legacy `endpoint` event: resolve, check the origin (§14.14), send `initialize`.
    fn legacy_endpoint(&mut self, now: Instant, data: &str) {
        if self.legacy_post.is_some() {
            return;
        }
        let Some(uri) = resolve(&self.config.endpoint, data) else {
            return self.connect_failed(RequestError::BadResponse(format!(
                "the endpoint event names another origin or no URI: {data:?}"
            )));
        };
        self.legacy_post = Some(uri);
        // The initialize request is still pending under its id: send it again, there.
        let Some(id) = self.init_id.clone() else {
            return;
        };
        let _ = now;
        // `connect` checked that the capabilities are JSON, so the body is always there.
        let body = self
            .initialize_body(&id, ProtocolVersion::V2024_11_05)
            .unwrap_or_default();
        self.send_post(body, Vec::new(), &[]);
    }

    /// A stream's connection ended (cleanly or not).
    pub(super) fn stream_ended(&mut self, now: Instant, t: u64, x: u64) {
        let Some(stream) = self.streams.get_mut(&t) else {
            return;
        };
        if stream.conn == Some(x) {
            stream.conn = None;
        }
        if self.phase == Phase::Closed {
            return self.remove_stream(t);
        }
        match stream.kind {
            StreamKind::Legacy => {
                // The legacy session lives exactly as long as its stream.
                if self.phase == Phase::Initializing {
                    return self.connect_failed(RequestError::StreamLost);
                }
                return self.session_expired(now);
            }
            StreamKind::Post if stream.owed.is_empty() => return self.remove_stream(t),
            // Nothing resumes a response at 2026-07-28 (MODERN-12): its requests are lost.
            StreamKind::Post if self.era == Era::Sessionless => {
                let reached = super::Reached::Server;
                return self.stream_failed(now, t, RequestError::Broken { reached });
            }
            StreamKind::Post if stream.last_id.is_empty() => {
                return self.stream_failed(now, t, RequestError::StreamLost);
            }
            StreamKind::Post | StreamKind::Get => {}
        }
        stream.attempts += 1;
        if stream.attempts > self.config.max_attempts {
            return self.stream_failed(
                now,
                t,
                RequestError::ResumeFailed {
                    status: 0,
                    message: String::new(),
                },
            );
        }
        let delay = match stream.retry {
            Some(retry) => retry.min(self.config.max_retry),
            None => {
                let attempts = stream.attempts;
                self.backoff(attempts)
            }
        };
        self.timers.insert((now + delay, t));
    }

    /// A stream cannot go on: its requests fail (the handshake, if it owed the
    /// `initialize` response).
    pub(super) fn stream_failed(&mut self, now: Instant, t: u64, error: RequestError) {
        let Some(stream) = self.streams.get(&t) else {
            return;
        };
        let owed: Vec<RequestId> = stream.owed.iter().cloned().collect();
        let standalone = stream.kind == StreamKind::Get;
        self.remove_stream(t);
        if self.probe.as_ref().is_some_and(|p| owed.contains(p)) {
            return self.probe_answered(now, 200, None);
        }
        if self.init_id.as_ref().is_some_and(|i| owed.contains(i)) {
            return self.connect_failed(error);
        }
        self.fail_ids(now, &owed, error.clone());
        if standalone && self.phase == Phase::Connected {
            // The standalone stream owes no response, but the server's messages since its
            // last event may be gone: say so, and open a fresh one so later ones arrive.
            self.events.push_back(Event::StreamReset { error });
            let fresh = self.new_stream(StreamKind::Get, &[]);
            self.get_stream = Some(fresh);
            let delay = self.backoff(1);
            self.timers.insert((now + delay, fresh));
        }
    }

    /// GETs stream `t` again: a resume after its last id, or a fresh GET stream.
    pub(super) fn reconnect(&mut self, t: u64) {
        let Some(stream) = self.streams.get(&t) else {
            return;
        };
        let mut head = self.head(Method::GET, self.config.endpoint.clone());
        if !stream.last_id.is_empty()
            && let Ok(value) = HeaderValue::from_str(&stream.last_id)
        {
            head.headers.insert("last-event-id", value);
        }
        self.transmit(ExKind::Get { stream: t }, head, Bytes::new());
    }

    /// The delay before attempt `n` (1-based) when the server gave no `retry`: doubling
    /// from the configured first delay, capped, with jitter in its upper half.
    fn backoff(&mut self, n: u32) -> Duration {
        let base = self
            .config
            .backoff
            .saturating_mul(1u32 << (n.saturating_sub(1)).min(16))
            .min(self.config.max_backoff);
        let mut byte = [0u8; 1];
        self.entropy.fill(&mut byte);
        base / 2 + base / 2 * u32::from(byte[0]) / 255
    }
}

/// The legacy POST URI: `data` resolved against the SSE URL, on the same origin only.
fn resolve(base: &http::Uri, data: &str) -> Option<http::Uri> {
    let data = data.trim();
    let scheme = base.scheme()?.clone();
    let authority = base.authority()?.clone();
    if data.contains("://") {
        let uri: http::Uri = data.parse().ok()?;
        let same = uri.scheme() == Some(&scheme)
            && uri.authority().map(|a| a.as_str().to_ascii_lowercase())
                == Some(authority.as_str().to_ascii_lowercase());
        return same.then_some(uri);
    }
    let path = if data.starts_with('/') {
        data.to_owned()
    } else {
        let dir = base.path().rsplit_once('/').map_or("", |(dir, _)| dir);
        format!("{dir}/{data}")
    };
    http::Uri::builder()
        .scheme(scheme)
        .authority(authority)
        .path_and_query(path)
        .build()
        .ok()
}
