//! A request's MCP headers, read once from its head into plain data, and the one
//! function that decides its era from them and its body (MODERN-25).

use std::net::IpAddr;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

/// `Mcp-Method` (MODERN-6).
const MCP_METHOD: &str = "mcp-method";
/// `Mcp-Name` (MODERN-6).
const MCP_NAME: &str = "mcp-name";
/// The prefix of `Mcp-Param-{Name}` (MODERN-7), as `http` spells names: lowercase.
const MCP_PARAM_PREFIX: &str = "mcp-param-";

use super::check::{self, LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID};
use super::config::Eras;
use super::ids::{PeerAddr, SessionId};
use super::modern;
use crate::Era;
use crate::ProtocolVersion;
use crate::jsonrpc::Envelopes;

/// What `Mcp-Session-Id` named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SessionHeader {
    /// No such header.
    Absent,
    /// The id of a session this server minted (it may have ended since).
    Known(SessionId),
    /// An id this server never minted, a repeated header, or a value that is not visible
    /// ASCII: a session that does not exist (SESSION-7).
    Unknown,
}

/// What `MCP-Protocol-Version` named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum VersionHeader {
    /// No such header.
    Absent,
    /// A revision this library knows (served or not).
    Known(ProtocolVersion),
    /// Anything else, as sent (empty when repeated or not visible ASCII).
    Unknown(Box<str>),
}

/// The MCP headers of one request.
#[derive(Debug)]
pub(super) struct McpHeaders {
    pub(super) session: SessionHeader,
    pub(super) version: VersionHeader,
    pub(super) last_event_id: Option<Bytes>,
    /// `Mcp-Method` (MODERN-6); `None` when absent or repeated (see [`one`]).
    pub(super) method: Option<HeaderValue>,
    /// `Mcp-Name` (MODERN-6); `None` when absent or repeated.
    pub(super) name: Option<HeaderValue>,
    /// `Mcp-Param-*` (MODERN-7), kept only when `Mcp-Method` is `tools/call`.
    pub(super) params: ParamHeaders,
    /// The peer's address, when the driver put one in the head ([`PeerAddr`]).
    pub(super) peer: Option<IpAddr>,
}

/// The `Mcp-Param-*` fields of a request (MODERN-7), as received, up to a bound: what a
/// `tools/call` of a tool with mirrors is checked against once its body is read.
/// Empty, and unallocated, for a request that sends none.
#[derive(Debug, Default)]
pub(super) struct ParamHeaders {
    kept: Vec<(HeaderName, HeaderValue)>,
    /// How many there were, kept or not.
    count: usize,
}

impl ParamHeaders {
    /// The `Mcp-Param-*` fields of `headers` (every value of a repeated one), the first
    /// `max` kept: values are reference-counted, not copied.
    fn read(headers: &HeaderMap, max: usize) -> Self {
        let mut params = Self::default();
        for (name, value) in headers {
            if name.as_str().starts_with(MCP_PARAM_PREFIX) {
                params.count += 1;
                if params.kept.len() < max {
                    params.kept.push((name.clone(), value.clone()));
                }
            }
        }
        params
    }

    /// The fields kept, as the (name, value) pairs [`Mirrors::check`] takes.
    ///
    /// [`Mirrors::check`]: crate::mirror::Mirrors::check
    pub(super) fn pairs(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.kept.iter().map(|(n, v)| (n.as_str(), v.as_bytes()))
    }

    /// `Some((sent, kept))` when more were sent than kept.
    pub(super) fn overflow(&self) -> Option<(usize, usize)> {
        (self.count > self.kept.len()).then_some((self.count, self.kept.len()))
    }
}

/// The value of a mirrored header sent once. One sent twice has no value, so its check
/// fails as if it were missing (MODERN-6): a proxy that routes on another of its values
/// than the server reads would see another request than the server runs.
fn one(headers: &HeaderMap, name: &str) -> Option<HeaderValue> {
    let mut all = headers.get_all(name).iter();
    let first = all.next()?;
    all.next().is_none().then(|| first.clone())
}

impl McpHeaders {
    /// None of them (an exchange refused before they were read).
    pub(super) fn none() -> Self {
        Self {
            session: SessionHeader::Absent,
            version: VersionHeader::Absent,
            last_event_id: None,
            method: None,
            name: None,
            params: ParamHeaders::default(),
            peer: None,
        }
    }

    /// Reads them from `head`; `session` looks an `Mcp-Session-Id` value up. At most
    /// `max_params` `Mcp-Param-*` fields are kept, and only when `Mcp-Method` is
    /// `tools/call`: only such a request is checked against them (a request whose body
    /// says otherwise fails its `Mcp-Method` check first), so any other pays nothing.
    pub(super) fn read(
        head: &http::request::Parts,
        max_params: usize,
        session: impl FnOnce(&str) -> Option<SessionId>,
    ) -> Self {
        let headers: &HeaderMap = &head.headers;
        let method = one(headers, MCP_METHOD);
        let params = if method
            .as_ref()
            .is_some_and(|m| m.as_bytes() == b"tools/call")
        {
            ParamHeaders::read(headers, max_params)
        } else {
            ParamHeaders::default()
        };
        Self {
            session: match check::single(headers, SESSION_ID) {
                Ok(None) => SessionHeader::Absent,
                Ok(Some(v)) => session(v).map_or(SessionHeader::Unknown, SessionHeader::Known),
                Err(()) => SessionHeader::Unknown,
            },
            version: match check::single(headers, PROTOCOL_VERSION) {
                Ok(None) => VersionHeader::Absent,
                Ok(Some(v)) => v
                    .parse()
                    .map_or_else(|_| VersionHeader::Unknown(v.into()), VersionHeader::Known),
                Err(()) => VersionHeader::Unknown("".into()),
            },
            last_event_id: headers
                .get(LAST_EVENT_ID)
                .map(|v| Bytes::copy_from_slice(v.as_bytes())),
            method,
            name: one(headers, MCP_NAME),
            params,
            peer: head.extensions.get::<PeerAddr>().map(|p| p.0),
        }
    }

    /// The era of a request on the MCP endpoint (MODERN-25), from its headers and, for a
    /// POST, its body, among the `eras` served:
    /// - an `Mcp-Session-Id` this server minted, or a version header naming a revision
    ///   of the session era, is the session era, whatever modern `_meta` keys the body
    ///   carries (an id it never minted names no session and decides nothing);
    /// - a version header naming a modern revision is the sessionless era, an
    ///   `initialize` included (a removed method there, MODERN-21);
    /// - otherwise (no header, or one naming no known revision) a body whose `_meta`
    ///   names a revision is sessionless, and anything else, `initialize` without a
    ///   header among it, is the session era (read as 2025-03-26, MODERN-16);
    /// - a server that serves no session era ignores `Mcp-Session-Id` (MODERN-2) and takes
    ///   every request as sessionless, to be checked as such.
    ///
    /// The legacy HTTP+SSE era is not decided here: it has paths of its own.
    pub(super) fn era(&self, eras: Eras, body: Option<&Envelopes>) -> Era {
        let sessions = eras.contains(Eras::SESSIONS);
        let decided = match &self.version {
            _ if sessions && matches!(self.session, SessionHeader::Known(_)) => Era::Sessions,
            // An id this server never minted names no session: the headers decide.
            VersionHeader::Known(v) if v.uses_initialize() => Era::Sessions,
            VersionHeader::Known(_) => Era::Sessionless,
            VersionHeader::Unknown(_) | VersionHeader::Absent => match body {
                Some(Envelopes::Single(m)) if modern::names_a_revision(m) => Era::Sessionless,
                _ => Era::Sessions,
            },
        };
        if sessions { decided } else { Era::Sessionless }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(headers: &[(&str, &str)]) -> McpHeaders {
        let mut request = http::Request::post("/mcp");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let head = request.body(()).unwrap().into_parts().0;
        McpHeaders::read(&head, 4, |v| (v == "live").then_some(SessionId(7)))
    }

    #[test]
    fn session_7_the_session_header_is_known_unknown_or_absent() {
        assert_eq!(read(&[]).session, SessionHeader::Absent);
        let known = read(&[("mcp-session-id", "live")]);
        assert_eq!(known.session, SessionHeader::Known(SessionId(7)));
        let unknown = read(&[("mcp-session-id", "gone")]);
        assert_eq!(unknown.session, SessionHeader::Unknown);
        let twice = read(&[("mcp-session-id", "live"), ("mcp-session-id", "live")]);
        assert_eq!(twice.session, SessionHeader::Unknown);
    }

    #[test]
    fn version_1_the_version_header_is_parsed_once() {
        assert_eq!(read(&[]).version, VersionHeader::Absent);
        let known = read(&[("mcp-protocol-version", " 2025-06-18 ")]);
        assert_eq!(
            known.version,
            VersionHeader::Known(ProtocolVersion::V2025_06_18)
        );
        let unknown = read(&[("mcp-protocol-version", "v999")]);
        assert_eq!(unknown.version, VersionHeader::Unknown("v999".into()));
    }

    fn body(text: &'static str) -> Envelopes {
        let text = crate::jsonrpc::body_text(Bytes::from_static(text.as_bytes())).unwrap();
        crate::jsonrpc::Classifier::default()
            .envelopes(text, ProtocolVersion::V2025_03_26)
            .unwrap()
    }

    const MODERN_META: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    const PLAIN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;

    #[test]
    fn modern_25_the_version_header_decides_the_era() {
        let all = Eras::ALL;
        assert_eq!(read(&[]).era(all, None), Era::Sessions);
        let session_era = read(&[("mcp-protocol-version", "2025-11-25")]);
        assert_eq!(session_era.era(all, None), Era::Sessions);
        let modern = read(&[("mcp-protocol-version", "2026-07-28")]);
        assert_eq!(modern.era(all, None), Era::Sessionless);
        assert_eq!(modern.era(all, Some(&body(INIT))), Era::Sessionless);
        let unknown = read(&[("mcp-protocol-version", "2099-01-01")]);
        assert_eq!(unknown.era(all, Some(&body(PLAIN))), Era::Sessions);
    }

    #[test]
    fn modern_25_a_session_or_a_session_era_header_wins_over_modern_meta() {
        let body = body(MODERN_META);
        let session = read(&[("mcp-session-id", "live")]);
        assert_eq!(session.era(Eras::ALL, Some(&body)), Era::Sessions);
        let header = read(&[("mcp-protocol-version", "2025-11-25")]);
        assert_eq!(header.era(Eras::ALL, Some(&body)), Era::Sessions);
    }

    #[test]
    fn modern_25_an_id_this_server_never_minted_decides_nothing() {
        let stale = read(&[
            ("mcp-session-id", "gone"),
            ("mcp-protocol-version", "2026-07-28"),
        ]);
        assert_eq!(
            stale.era(Eras::ALL, Some(&body(MODERN_META))),
            Era::Sessionless
        );
        let stale_old = read(&[("mcp-session-id", "gone")]);
        assert_eq!(stale_old.era(Eras::ALL, Some(&body(PLAIN))), Era::Sessions);
    }

    #[test]
    fn modern_25_modern_16_without_a_header_the_meta_decides() {
        let none = read(&[]);
        assert_eq!(
            none.era(Eras::ALL, Some(&body(MODERN_META))),
            Era::Sessionless
        );
        assert_eq!(none.era(Eras::ALL, Some(&body(PLAIN))), Era::Sessions);
        assert_eq!(none.era(Eras::ALL, Some(&body(INIT))), Era::Sessions);
    }

    #[test]
    fn modern_2_a_modern_only_server_takes_every_request_as_sessionless() {
        let session = read(&[
            ("mcp-session-id", "live"),
            ("mcp-protocol-version", "2025-11-25"),
        ]);
        assert_eq!(
            session.era(Eras::MODERN, Some(&body(PLAIN))),
            Era::Sessionless
        );
        assert_eq!(read(&[]).era(Eras::MODERN, None), Era::Sessionless);
    }

    fn pairs(h: &McpHeaders) -> Vec<(String, String)> {
        h.params
            .pairs()
            .map(|(n, v)| (n.to_owned(), String::from_utf8_lossy(v).into_owned()))
            .collect()
    }

    #[test]
    fn modern_7_mcp_param_headers_of_a_tools_call_are_kept() {
        let h = read(&[
            ("mcp-method", "tools/call"),
            ("Mcp-Param-Region", "eu"),
            ("mcp-name", "deploy"),
            ("mcp-param-region", "us"),
            ("MCP-PARAM-Count", "3"),
        ]);
        // Every value of a repeated field, so the check can refuse the repeat.
        assert_eq!(
            pairs(&h),
            [
                ("mcp-param-region".to_owned(), "eu".to_owned()),
                ("mcp-param-region".to_owned(), "us".to_owned()),
                ("mcp-param-count".to_owned(), "3".to_owned()),
            ]
        );
        assert_eq!(h.params.overflow(), None);
    }

    #[test]
    fn modern_7_mcp_param_headers_are_read_only_for_tools_call() {
        for method in [None, Some("tools/list"), Some("TOOLS/CALL")] {
            let mut list = vec![("mcp-param-region", "eu")];
            if let Some(m) = method {
                list.push(("mcp-method", m));
            }
            let h = read(&list);
            assert_eq!(pairs(&h), [], "{method:?}");
            assert_eq!(h.params.overflow(), None);
            assert_eq!(h.params.kept.capacity(), 0, "nothing allocated");
        }
        let none = read(&[("mcp-method", "tools/call")]);
        assert_eq!(none.params.kept.capacity(), 0, "nothing allocated");
    }

    #[test]
    fn modern_7_mcp_param_headers_are_bounded() {
        let names: Vec<String> = (0..6).map(|i| format!("mcp-param-p{i}")).collect();
        let mut list = vec![("mcp-method", "tools/call")];
        list.extend(names.iter().map(|n| (n.as_str(), "v")));
        let h = read(&list);
        assert_eq!(h.params.pairs().count(), 4, "the bound read() is given");
        assert_eq!(h.params.overflow(), Some((6, 4)));
        let exact = read(&list[..5]);
        assert_eq!(exact.params.overflow(), None);
    }
}
