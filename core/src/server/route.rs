//! The inputs: request heads, bodies and disconnects, and the path, security and method
//! checks that route a head (docs/requirements.md §14.13).

use std::time::Instant;

use bytes::Bytes;
use http::header;
use http::{Method, StatusCode};

use super::Server;
use super::check;
use super::config::{Config, Eras, SessionMode};
use super::head::{McpHeaders, SessionHeader, VersionHeader};
use super::ids::ExchangeId;
use super::refuse::{Refuse, session_not_found};
use super::state::{Body, Exchange, Phase, Route};
use crate::Era;

/// Which of the configured paths a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Served {
    /// The MCP endpoint ([`Config::endpoint`]).
    Endpoint,
    /// The legacy SSE path ([`LegacyPaths::sse`](super::LegacyPaths::sse)).
    LegacySse,
    /// The legacy messages path ([`LegacyPaths::messages`](super::LegacyPaths::messages)).
    LegacyMessages,
}

/// The configured path a request's `path` stands for (HTTP-POST-1, LEGACY-1): the
/// configured paths are the ones clients call, and a request names one of them either
/// whole or by a tail of whole segments: what a router that nests the service under a
/// prefix and strips it passes on (axum's `nest_service("/mcp", …)` hands `/mcp` on as
/// `/`, `/mcp/sse` as `/sse`), `/` standing for the whole path. A path one of them has
/// whole wins; then the endpoint's tail, the legacy SSE path's, the messages path's.
pub(super) fn served_path(config: &Config, path: &str) -> Option<Served> {
    let legacy = config.legacy.as_ref();
    let configured = [
        (Served::Endpoint, Some(config.endpoint.as_str())),
        (Served::LegacySse, legacy.map(|l| l.sse.as_str())),
        (Served::LegacyMessages, legacy.map(|l| l.messages.as_str())),
    ];
    let find = |matches: fn(&str, &str) -> bool| {
        configured
            .iter()
            .find(|(_, c)| c.is_some_and(|c| matches(c, path)))
            .map(|&(served, _)| served)
    };
    find(|c, p| c == p).or_else(|| find(is_tail))
}

/// Whether `path` is what is left of `configured` once a router stripped a prefix of
/// whole segments from it: `/` for all of it, `/b` or `/a/b` of `/x/a/b`.
fn is_tail(configured: &str, path: &str) -> bool {
    if path == "/" {
        return configured.len() > 1;
    }
    path.starts_with('/') && configured.len() > path.len() && configured.ends_with(path)
}

impl Server {
    /// A request head arrived: returns the exchange it opens. The head may be answered
    /// at once (a refusal, 202 or a GET stream); the body, if any, follows with
    /// [`handle_body`](Self::handle_body) and [`handle_body_end`](Self::handle_body_end).
    pub fn handle_head(&mut self, now: Instant, head: http::request::Parts) -> ExchangeId {
        self.clock(now);
        let x = ExchangeId(self.key());
        if self.shutting_down {
            self.exchanges
                .insert(x, Exchange::new(Route::Refused, McpHeaders::none(), now));
            self.refuse_unavailable(x);
            return x;
        }
        let max_params = self.config.param_header_limit();
        let headers = McpHeaders::read(&head, max_params, |v| self.session_ids.get(v).copied());
        let route = match self.route(&head, &headers) {
            Ok(r) => r,
            Err(refuse) => {
                self.exchanges
                    .insert(x, Exchange::new(Route::Refused, headers, now));
                self.refuse(x, refuse);
                return x;
            }
        };
        let mut exchange = Exchange::new(route, headers, now);
        if let Some(len) = head
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            && len > self.config.max_body as u64
        {
            exchange.route = Route::Refused;
            self.exchanges.insert(x, exchange);
            self.refuse(
                x,
                Refuse::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
            );
            return x;
        }
        self.exchanges.insert(x, exchange);
        if let Some(wire) = self.unseen_session(&head, x) {
            self.park_for_session(x, wire);
            return x;
        }
        match route {
            Route::Get => self.open_get(now, x),
            Route::LegacyStream => self.open_legacy(now, x),
            Route::Delete => self.delete(now, x),
            Route::LegacyPost(_) | Route::LegacyUnseen | Route::Post | Route::Refused => {}
        }
        x
    }

    /// On a cluster node, the id of a session this node does not hold, which exchange
    /// `x` names under the session era (a modern request ignores it, SESSION-10): it may
    /// be another node's, so it is loaded before the exchange is served.
    fn unseen_session(
        &self,
        head: &http::request::Parts,
        x: ExchangeId,
    ) -> Option<std::sync::Arc<str>> {
        if !self.is_node() {
            return None;
        }
        let e = &self.exchanges[&x];
        if e.route == Route::LegacyUnseen {
            return legacy_session_id(&head.uri).map(Into::into);
        }
        let sessionless =
            matches!(&e.headers.version, VersionHeader::Known(v) if !v.uses_initialize());
        if e.headers.session != SessionHeader::Unknown
            || sessionless
            || !matches!(e.route, Route::Post | Route::Get | Route::Delete)
        {
            return None;
        }
        let wire = check::single(&head.headers, check::SESSION_ID).ok()??;
        super::cluster::is_session_id(wire).then(|| wire.into())
    }

    /// Path, security and method checks, in the documented precedence.
    pub(super) fn route(
        &mut self,
        head: &http::request::Parts,
        mcp: &McpHeaders,
    ) -> Result<Route, Refuse> {
        let Some(served) = served_path(&self.config, head.uri.path()) else {
            return Err(Refuse::new(StatusCode::NOT_FOUND, self.not_found_message()));
        };
        let legacy_sse = served == Served::LegacySse;
        let legacy_post = served == Served::LegacyMessages;
        if !check::host_allowed(&head.headers, &head.uri, &self.config.hosts) {
            return Err(Refuse::new(StatusCode::FORBIDDEN, "host not allowed"));
        }
        if !check::origin_allowed(&head.headers, &self.config.origins) {
            return Err(Refuse::new(StatusCode::FORBIDDEN, "origin not allowed"));
        }
        if let Some(authorize) = self.authorizer.as_mut()
            && let Err(refusal) = authorize(head)
        {
            let message = if refusal.status == StatusCode::UNAUTHORIZED {
                "unauthorized"
            } else {
                "forbidden"
            };
            return Err(Refuse::new(refusal.status, message).challenge(refusal.challenge));
        }
        let headers = &head.headers;
        let sse = check::accepts(headers, "text", "event-stream");
        if legacy_sse {
            if head.method != Method::GET {
                return Err(
                    Refuse::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").allow("GET"),
                );
            }
            if headers.contains_key(header::ACCEPT) && !sse {
                return Err(Refuse::new(
                    StatusCode::NOT_ACCEPTABLE,
                    "must accept text/event-stream",
                ));
            }
            return Ok(Route::LegacyStream);
        }
        if legacy_post {
            if head.method != Method::POST {
                return Err(
                    Refuse::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").allow("POST"),
                );
            }
            if !check::is_json_body(headers) {
                return Err(Refuse::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "content-type must be application/json",
                ));
            }
            let id = legacy_session_id(&head.uri);
            let session = id
                .and_then(|id| self.session_ids.get(id).copied())
                .filter(|s| self.sessions.get(s).is_some_and(|s| s.legacy));
            return match session {
                Some(s) => Ok(Route::LegacyPost(s)),
                // Perhaps another node's: loaded before it is served.
                None if self.is_node() && id.is_some_and(super::cluster::is_session_id) => {
                    Ok(Route::LegacyUnseen)
                }
                None => Err(session_not_found()),
            };
        }
        let stateless = self.config.sessions == SessionMode::Stateless;
        // A GET or DELETE is sessionless (405, MODERN-2) only where that revision is
        // served: a server of the session era alone serves GET and DELETE to its
        // sessions, so it answers one under a modern header as the session era does.
        let sessionless = self.config.eras.contains(Eras::MODERN)
            && mcp.era(self.config.eras, None) == Era::Sessionless;
        let allow = match (
            stateless || sessionless,
            self.config.get_stream,
            self.config.delete,
        ) {
            (false, true, true) => "GET, POST, DELETE",
            (false, true, false) => "GET, POST",
            (false, false, true) => "POST, DELETE",
            _ => "POST",
        };
        match head.method {
            Method::POST => {
                if !(sse && check::accepts(headers, "application", "json")) {
                    return Err(Refuse::new(
                        StatusCode::NOT_ACCEPTABLE,
                        "must accept application/json and text/event-stream",
                    ));
                }
                if !check::is_json_body(headers) {
                    return Err(Refuse::new(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        "content-type must be application/json",
                    ));
                }
                Ok(Route::Post)
            }
            Method::GET if stateless || !self.config.get_stream || sessionless => Err(Refuse::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "no standalone stream",
            )
            .allow(allow)),
            Method::GET => {
                if !sse {
                    return Err(Refuse::new(
                        StatusCode::NOT_ACCEPTABLE,
                        "must accept text/event-stream",
                    ));
                }
                Ok(Route::Get)
            }
            Method::DELETE if stateless || !self.config.delete || sessionless => Err(Refuse::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "sessions cannot be deleted",
            )
            .allow(allow)),
            Method::DELETE => Ok(Route::Delete),
            _ => {
                Err(Refuse::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").allow(allow))
            }
        }
    }

    /// What a request for another path is told: the paths this server serves, so that a
    /// newcomer who guessed the path learns the right one.
    pub(super) fn not_found_message(&self) -> String {
        let endpoint = &self.config.endpoint;
        match &self.config.legacy {
            Some(l) => format!(
                "not an MCP endpoint: this server's is {endpoint} (legacy HTTP+SSE: GET {})",
                l.sse
            ),
            None => format!("not an MCP endpoint: this server's is {endpoint}"),
        }
    }

    /// A chunk of `exchange`'s body. Counted against the body limit as it arrives (413
    /// at once when passed); ignored once the exchange was answered.
    pub fn handle_body(&mut self, now: Instant, exchange: ExchangeId, chunk: Bytes) {
        self.clock(now);
        let max = self.config.max_body;
        let Some(e) = self.exchanges.get_mut(&exchange) else {
            return;
        };
        if e.phase != Phase::Body || e.route == Route::Refused || chunk.is_empty() {
            return;
        }
        e.body_len = e.body_len.saturating_add(chunk.len());
        if e.body_len > max {
            e.route = Route::Refused;
            e.body = Body::Empty;
            self.refuse(
                exchange,
                Refuse::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
            );
            return;
        }
        e.body.push(chunk);
    }

    /// `exchange`'s body is complete: the message is parsed and dispatched.
    pub fn handle_body_end(&mut self, now: Instant, exchange: ExchangeId) {
        self.clock(now);
        let x = exchange;
        let Some(e) = self.exchanges.get_mut(&x) else {
            return;
        };
        if e.phase != Phase::Body {
            return;
        }
        if e.parked {
            // Dispatched once its session is loaded (`session_loaded`).
            e.phase = Phase::Parked;
            return;
        }
        e.phase = Phase::Dispatching;
        let body = e.body.take();
        match e.route {
            Route::Post => self.post(now, x, body),
            Route::LegacyPost(s) => self.legacy_post(now, x, s, body),
            Route::Get
            | Route::LegacyStream
            | Route::LegacyUnseen
            | Route::Delete
            | Route::Refused => {}
        }
    }

    /// The client went away (the connection closed or the request was reset). In the
    /// session era not a cancellation (HTTP-POST-12): open requests stay open, and a
    /// resumable stream keeps its frames for a resume. A legacy session ends with its
    /// stream. A sessionless request is cancelled with its connection (MODERN-11):
    /// [`Event::Cancelled`](super::Event::Cancelled), and nothing more is sent for it.
    pub fn handle_disconnect(&mut self, now: Instant, exchange: ExchangeId) {
        self.clock(now);
        self.forget_exchange(exchange);
    }
}

/// The `sessionId` of a legacy POST's query (LEGACY-3), if it has one.
fn legacy_session_id(uri: &http::Uri) -> Option<&str> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("sessionId="))
}

#[cfg(test)]
mod tests {
    use super::{Config, Served, served_path};
    use crate::server::LegacyPaths;

    #[test]
    fn http_post_1_a_nested_service_is_called_by_a_tail_of_its_paths() {
        let config = Config::new().with_legacy(Some(LegacyPaths {
            sse: "/mcp/sse".into(),
            messages: "/mcp/messages".into(),
        }));
        for (path, served) in [
            // Called whole (a router that keeps the path, or none).
            ("/mcp", Some(Served::Endpoint)),
            ("/mcp/sse", Some(Served::LegacySse)),
            ("/mcp/messages", Some(Served::LegacyMessages)),
            // Nested under `/mcp`, the prefix stripped.
            ("/", Some(Served::Endpoint)),
            ("/sse", Some(Served::LegacySse)),
            ("/messages", Some(Served::LegacyMessages)),
            // Not a tail of whole segments, or not one of these paths.
            ("/cp", None),
            ("mcp", None),
            ("", None),
            ("/mcp/", None),
            ("/other", None),
            ("/x/mcp", None),
        ] {
            assert_eq!(served_path(&config, path), served, "{path:?}");
        }
    }

    #[test]
    fn legacy_1_a_path_had_whole_wins_over_a_tail() {
        // `/sse` is the legacy path whole, and no tail of the endpoint's.
        let config = Config::new()
            .with_endpoint("/api/mcp")
            .with_legacy(Some(LegacyPaths::default()));
        assert_eq!(served_path(&config, "/sse"), Some(Served::LegacySse));
        assert_eq!(served_path(&config, "/mcp"), Some(Served::Endpoint));
        // `/` is a tail of each: the endpoint's first.
        assert_eq!(served_path(&config, "/"), Some(Served::Endpoint));
        // The endpoint `/`: only `/` (a service nested with `with_endpoint("/")`).
        let root = Config::new().with_endpoint("/");
        assert_eq!(served_path(&root, "/"), Some(Served::Endpoint));
        assert_eq!(served_path(&root, "/mcp"), None);
    }
}
