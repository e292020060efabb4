//! [`ProtocolVersion`]: the MCP revisions this crate knows, and what each allows.

use std::fmt;
use std::str::FromStr;

/// An MCP protocol revision (the `protocolVersion` string, e.g. `"2025-06-18"`).
///
/// Ordered by date, so `v >= ProtocolVersion::V2025_06_18` reads as "this revision or later".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// 2024-11-05: the legacy HTTP+SSE transport.
    V2024_11_05,
    /// 2025-03-26: Streamable HTTP; JSON-RPC batches allowed.
    V2025_03_26,
    /// 2025-06-18: batches removed; `MCP-Protocol-Version` header.
    V2025_06_18,
    /// 2025-11-25: SEP-1699 polling, priming events, `retry`.
    V2025_11_25,
    /// 2026-07-28: sessionless; per-request `_meta`, mirrored headers.
    V2026_07_28,
}

impl ProtocolVersion {
    /// Every known revision, oldest first. A slice, so that adding a revision changes
    /// no public type.
    pub const ALL: &'static [Self] = &[
        Self::V2024_11_05,
        Self::V2025_03_26,
        Self::V2025_06_18,
        Self::V2025_11_25,
        Self::V2026_07_28,
    ];

    /// The newest known revision. It is sessionless and has no `initialize`: a client
    /// that negotiates in `initialize` offers [`LATEST_WITH_INITIALIZE`](Self::LATEST_WITH_INITIALIZE).
    pub const LATEST: Self = Self::V2026_07_28;

    /// The newest revision negotiated by `initialize` (JSONRPC-11).
    pub const LATEST_WITH_INITIALIZE: Self = Self::V2025_11_25;

    /// Whether the revision opens a session with `initialize` (2025-11-25 and earlier;
    /// docs/requirements.md §16 calls these the legacy era). 2026-07-28 carries the version in
    /// every request's `_meta` instead (MODERN-3).
    pub const fn uses_initialize(self) -> bool {
        !matches!(self, Self::V2026_07_28)
    }

    /// The revision string as it appears on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V2024_11_05 => "2024-11-05",
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    /// Whether JSON-RPC batches (arrays) may be received: 2025-03-26 only (BATCH-1, BATCH-6).
    /// 2024-11-05 never mentions them and the SDKs of that era did not send them.
    pub const fn allows_batches(self) -> bool {
        matches!(self, Self::V2025_03_26)
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a revision string this crate does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVersion;

impl fmt::Display for UnknownVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown mcp protocol version")
    }
}

impl std::error::Error for UnknownVersion {}

impl FromStr for ProtocolVersion {
    type Err = UnknownVersion;

    /// Exact match only: revision strings are compared byte for byte.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.as_str() == s)
            .ok_or(UnknownVersion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_and_order_by_date() {
        for &v in ProtocolVersion::ALL {
            assert_eq!(v.as_str().parse(), Ok(v));
        }
        assert!(ProtocolVersion::LATEST_WITH_INITIALIZE.uses_initialize());
        assert!(!ProtocolVersion::LATEST.uses_initialize());
        assert!(
            ProtocolVersion::ALL
                .windows(2)
                .all(|w| w[0] < w[1] && w[0].as_str() < w[1].as_str())
        );
        assert_eq!(
            "2025-06-18 ".parse::<ProtocolVersion>(),
            Err(UnknownVersion)
        );
    }

    #[test]
    fn batch_1_and_batch_6_only_2025_03_26_takes_batches() {
        let allowed: Vec<_> = ProtocolVersion::ALL
            .iter()
            .copied()
            .filter(|v| v.allows_batches())
            .collect();
        assert_eq!(allowed, [ProtocolVersion::V2025_03_26]);
    }
}

/// The generation of MCP over HTTP a conversation belongs to: the three in the field at
/// once. A server decides it per request from its path, headers and `_meta`
/// (MODERN-25; ARCHITECTURE.md "Protocol eras"); a client settles on one with each
/// server (MODERN-15, MODERN-26).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Era {
    /// Legacy HTTP+SSE (2024-11-05): a GET stream whose `endpoint` event names where to
    /// POST; every response comes over that stream.
    HttpSse,
    /// Streamable HTTP with `initialize` and sessions (2025-03-26 … 2025-11-25).
    Sessions,
    /// The sessionless revision (2026-07-28): every request stands alone with its
    /// `_meta`, and its response is its own JSON body or stream. A server that does not
    /// serve it answers such a POST 400 with -32022 and the revisions it serves
    /// (MODERN-5), so a dual-era client falls back to `initialize` (MODERN-15).
    Sessionless,
}

impl fmt::Display for Era {
    /// How a person names it: `legacy HTTP+SSE`, `Streamable HTTP with sessions`,
    /// `sessionless`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::HttpSse => "legacy HTTP+SSE",
            Self::Sessions => "Streamable HTTP with sessions",
            Self::Sessionless => "sessionless",
        })
    }
}
