//! [`Config`]: the client's endpoint, what it offers in `initialize`, and its bounds.

use std::time::Duration;

use crate::{Era, ProtocolVersion};

/// Which revision a client speaks, and how it finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Revision {
    /// The best the server offers (MODERN-15, MODERN-26): `server/discover` at
    /// [`ProtocolVersion::LATEST`]; the sessionless revision on positive modern evidence
    /// only, else `initialize` (2025-11-25 or the best the server listed), else legacy
    /// HTTP+SSE (with [`Config::with_legacy_fallback`]). The default.
    Auto,
    /// This revision alone, in its era: a sessionless one is spoken from the first
    /// request, with no probe (a server that does not speak it answers that request with
    /// an error); a session-era one is offered in
    /// `initialize` (the server may answer another it prefers, as that handshake
    /// allows), with the legacy fallback if configured. Hand back what
    /// [`Client::negotiated`](super::Client::negotiated) learned to skip the probe next
    /// time (MODERN-26: cache the era per origin).
    Exactly(ProtocolVersion),
    /// This era alone: for the sessionless era the newest revision both speak, found by
    /// `server/discover` (the handshake fails naming what the server offered when there
    /// is none); for the others as [`Exactly`](Self::Exactly) their newest.
    Era(Era),
}

/// Everything a [`Client`](super::Client) decides by policy.
#[derive(Clone, Debug)]
#[must_use]
pub struct Config {
    pub(super) endpoint: http::Uri,
    pub(super) version: ProtocolVersion,
    pub(super) revision: Revision,
    pub(super) client_name: String,
    pub(super) client_version: String,
    pub(super) capabilities: String,
    pub(super) get_stream: bool,
    pub(super) legacy_fallback: bool,
    pub(super) reinitialize: bool,
    pub(super) max_pending: usize,
    pub(super) max_body: usize,
    pub(super) sse: crate::sse::Limits,
    pub(super) backoff: Duration,
    pub(super) max_backoff: Duration,
    pub(super) max_attempts: u32,
    pub(super) max_retry: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) max_rounds: u32,
    pub(super) headers: http::HeaderMap,
}

impl Config {
    /// A client of the MCP endpoint at `endpoint` (an absolute `http` or `https` URI),
    /// finding the best revision the server offers ([`Revision::Auto`]: 2026-07-28, else
    /// [`ProtocolVersion::LATEST_WITH_INITIALIZE`] in `initialize`), no capabilities, the
    /// standalone GET stream on, legacy fallback on, no automatic re-initialization,
    /// 1,024 requests in flight, 4 MiB JSON bodies, the SSE decoder's default limits, and
    /// reconnection after 1 s doubling up to 30 s, 5 attempts, when the server gave no
    /// `retry`, a server's `retry` honoured up to 5 minutes, and 30 s for the handshake.
    pub fn new(endpoint: http::Uri) -> Self {
        Self {
            endpoint,
            version: ProtocolVersion::LATEST_WITH_INITIALIZE,
            revision: Revision::Auto,
            client_name: "mcpwire".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            capabilities: "{}".into(),
            get_stream: true,
            legacy_fallback: true,
            reinitialize: false,
            max_pending: 1024,
            max_body: 4 << 20,
            sse: crate::sse::Limits::default(),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_attempts: 5,
            max_retry: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(30),
            max_rounds: 8,
            headers: http::HeaderMap::new(),
        }
    }

    /// Adds a header to every request the client sends (POST, GET, DELETE; resumes and
    /// the legacy transport's too): `Authorization: Bearer …` (SEC-5), say, or a
    /// gateway's key. Appended, so a name may repeat. The headers the transport itself
    /// decides ([`is_transport_header`]: `Host`, `Accept`, `Content-Type`,
    /// `Mcp-Session-Id`, `MCP-Protocol-Version`, `Last-Event-ID`, the body's framing) are
    /// not taken: the client sets them, or leaves them out, itself.
    /// [`Client::set_header`](super::Client::set_header) changes one later (a refreshed
    /// token).
    pub fn with_header(mut self, name: http::HeaderName, value: http::HeaderValue) -> Self {
        if !is_transport_header(&name) {
            self.headers.append(name, value);
        }
        self
    }

    /// Which revision to speak, and how to find it ([`Revision`]).
    pub fn with_revision(mut self, revision: Revision) -> Self {
        self.revision = revision;
        match revision {
            Revision::Exactly(version) if version.uses_initialize() => self.version = version,
            Revision::Era(Era::HttpSse) => self.version = ProtocolVersion::V2024_11_05,
            _ => {}
        }
        self
    }

    /// [`with_revision`](Self::with_revision)`(Revision::Exactly(version))`: a
    /// session-era revision is the one offered in `initialize` (JSONRPC-11).
    pub fn with_version(self, version: ProtocolVersion) -> Self {
        self.with_revision(Revision::Exactly(version))
    }

    /// `clientInfo` in `initialize`.
    pub fn with_client_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.client_name = name.into();
        self.client_version = version.into();
        self
    }

    /// `capabilities` in `initialize`, as JSON object text (not checked here: the server
    /// answers a bad one with an error).
    pub fn with_capabilities(mut self, json: impl Into<String>) -> Self {
        self.capabilities = json.into();
        self
    }

    /// Whether to open the standalone GET stream once initialized (HTTP-GET-1).
    pub fn with_get_stream(mut self, open: bool) -> Self {
        self.get_stream = open;
        self
    }

    /// Whether a 400, 404 or 405 to `initialize` falls back to HTTP+SSE (LEGACY-6).
    pub fn with_legacy_fallback(mut self, fallback: bool) -> Self {
        self.legacy_fallback = fallback;
        self
    }

    /// Speak only the legacy HTTP+SSE transport (2024-11-05): GET the endpoint for its
    /// stream at once, without trying Streamable HTTP first. For servers known to be old
    /// (the fallback of [`with_legacy_fallback`](Self::with_legacy_fallback) finds them
    /// too, one POST later).
    pub fn with_legacy_only(self, legacy: bool) -> Self {
        match (legacy, self.revision) {
            (true, _) => self.with_revision(Revision::Era(Era::HttpSse)),
            (false, Revision::Era(Era::HttpSse)) => self.with_revision(Revision::Auto),
            (false, _) => self,
        }
    }

    /// Whether a session the server ended (404, SESSION-8) is re-initialized at once.
    pub fn with_reinitialize(mut self, reinitialize: bool) -> Self {
        self.reinitialize = reinitialize;
        self
    }

    /// The most requests awaiting their response.
    pub fn with_max_pending(mut self, requests: usize) -> Self {
        self.max_pending = requests;
        self
    }

    /// The largest JSON response body, in bytes.
    pub fn with_max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The SSE decoder's limits on every stream.
    pub fn with_sse_limits(mut self, limits: crate::sse::Limits) -> Self {
        self.sse = limits;
        self
    }

    /// Reconnection when the server sent no `retry`: the first delay, its cap, and how
    /// many attempts a stream gets before its requests fail (RESUME-12).
    pub fn with_backoff(mut self, first: Duration, cap: Duration, attempts: u32) -> Self {
        self.backoff = first;
        self.max_backoff = cap;
        self.max_attempts = attempts;
        self
    }

    /// The longest server `retry` honoured (RESUME-11); a longer one is shortened to this,
    /// so a bad `retry` cannot park a stream for days (docs/requirements.md §14.10).
    pub fn with_max_retry(mut self, cap: Duration) -> Self {
        self.max_retry = crate::duration::bounded(cap);
        self
    }

    /// How many times a server may answer one call `input_required` before the call
    /// fails (MODERN-23); 8 by default.
    pub fn with_max_rounds(mut self, rounds: u32) -> Self {
        self.max_rounds = rounds;
        self
    }

    /// How long the handshake may take before it fails with
    /// [`RequestError::Timeout`](super::RequestError::Timeout).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = crate::duration::bounded(timeout);
        self
    }
}

/// Whether the client transport decides header `name` itself, so that an application's
/// value for it ([`Config::with_header`], [`Client::set_header`](super::Client::set_header))
/// is not taken: a forged session id or protocol version, or a body framing of its own,
/// would break the exchange.
pub fn is_transport_header(name: &http::HeaderName) -> bool {
    use http::header;
    [
        header::HOST,
        header::ACCEPT,
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::CONNECTION,
    ]
    .contains(name)
        || ["mcp-session-id", "mcp-protocol-version", "last-event-id"].contains(&name.as_str())
}
