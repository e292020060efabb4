//! The small copyable handles the driver and the application carry, and the entropy seam.

use std::fmt;

/// One HTTP request and its response, from the head the driver hands in
/// ([`Server::handle_head`](super::Server::handle_head)) to the end of the response (or the
/// client's disconnect). Never reused by one [`Server`](super::Server).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeId(pub(super) u64);

impl ExchangeId {
    /// The number, for logs.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ExchangeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "x{}", self.0)
    }
}

/// One session (an `initialize` of the session era, or one legacy HTTP+SSE stream), as the
/// server knows it. Not the `Mcp-Session-Id` value, which is secret-like and is read with
/// [`Server::session_header`](super::Server::session_header); this handle is a counter,
/// never reused, so a handle of an ended session never names a newer one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub(super) u64);

impl SessionId {
    /// The number, for logs.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}", self.0)
    }
}

/// One SSE stream the server serves: a POST's response stream, a session's standalone GET
/// stream, or a legacy HTTP+SSE stream. A stream outlives its connections: a resumable one
/// is continued by later GETs with `Last-Event-ID` (RESUME-7). It maps to at most one
/// [`RingId`](crate::resume::RingId) of the event store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub(super) u64);

impl StreamId {
    /// The number, for logs.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}", self.0)
    }
}

/// One client request the application has been handed and not yet answered: what
/// [`Server::respond`](super::Server::respond) and the related sends take. It names the
/// request within its session and the stream that owes its response, so an answer can
/// never reach another session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestHandle(pub(super) u64);

impl RequestHandle {
    /// The number, for logs.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// A handle of this number, for the crate's tests outside the server.
    #[cfg(test)]
    pub(crate) const fn from_raw(n: u64) -> Self {
        Self(n)
    }
}

/// The address of the peer that sent a request, for
/// [`Config::with_max_sessions_per_peer`](super::Config::with_max_sessions_per_peer): a
/// driver that knows it puts it in the request head's extensions
/// (`parts.extensions.insert(PeerAddr(ip))`). Behind a proxy every client has the
/// proxy's address, so leave that cap off there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerAddr(pub std::net::IpAddr);
