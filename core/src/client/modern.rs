//! Revision 2026-07-28 on the client side: what a server's answer to the probe says of
//! its era (MODERN-15, MODERN-26), the revision settled on, and the shape of every
//! sessionless request (`_meta` spliced into its params, the headers that mirror its
//! body: MODERN-3, MODERN-4, MODERN-6).

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue};

use super::{RequestError, Revision};
use crate::jsonrpc::read::{WrongShape, members, skip, string};
use crate::jsonrpc::scan::{MAX_DEPTH_CAP, Scanner};
use crate::jsonrpc::{Envelope, ErrorCode, Message};
use crate::meta::{CLIENT_CAPABILITIES, CLIENT_INFO, PROTOCOL_VERSION};
use crate::{Era, ProtocolVersion};

/// What a server's answer to `server/discover` says of its era. Only positive modern
/// evidence keeps a client modern (MODERN-26): deployed session-era servers answer a
/// modern probe with 400 and -32600 or -32000, or a bare 400, 404 or 405.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Evidence {
    /// The revisions it serves: a `DiscoverResult`'s `supportedVersions`, or the
    /// `data.supported` of a -32022 (MODERN-5, MODERN-19), as the server wrote them.
    Lists(Vec<String>),
    /// A modern server that listed nothing: -32020 or -32021 in the body, a -32022
    /// without a list, or -32601 under 404 (MODERN-9).
    Modern,
    /// Nothing modern: an error of another kind, a bare status, a result that is not a
    /// `DiscoverResult`, no answer at all.
    None,
}

/// The evidence in an answer to the probe: its HTTP status and the JSON-RPC message it
/// carried, if any. The status matters only for -32601 (under 404 a modern server's,
/// under 200 a session-era server's that does not know the method); the modern codes
/// count under any status, so that a server answering them with 200 is still
/// understood.
pub(super) fn evidence(status: u16, message: Option<&Envelope>) -> Evidence {
    let Some(message) = message else {
        return Evidence::None;
    };
    match message.message() {
        Message::Response(response) => {
            let listed = serde_json::from_str::<serde_json::Value>(response.result.as_str())
                .ok()
                .and_then(|v| versions(v.get("supportedVersions")?));
            listed.map_or(Evidence::None, Evidence::Lists)
        }
        Message::Error(error) => {
            let modern = match error.error.code {
                ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
                | ErrorCode::HEADER_MISMATCH
                | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY => true,
                ErrorCode::METHOD_NOT_FOUND => status == 404,
                _ => false,
            };
            if !modern {
                return Evidence::None;
            }
            // A modern server names its revisions in any error it can (MODERN-26), as
            // -32022 must (MODERN-5).
            let listed = error.error.data.as_ref().and_then(|data| {
                let data = serde_json::from_str::<serde_json::Value>(data.as_str()).ok()?;
                versions(data.get("supported")?)
            });
            listed.map_or(Evidence::Modern, Evidence::Lists)
        }
        _ => Evidence::None,
    }
}

/// Where a refused `initialize` leaves the client, from the refusal's `evidence`: `None`
/// when it is no modern evidence (a session-era or legacy server's refusal). A modern
/// server's refusal (MODERN-15, MODERN-26) settles the sessionless revision for a
/// configuration that may speak it ([`Revision::Auto`]) and the server named or did not
/// rule out (MODERN-5); otherwise the handshake fails naming what the server offered.
pub(super) fn refused(evidence: &Evidence, revision: Revision) -> Option<Settled> {
    let listed = match evidence {
        Evidence::None => return None,
        Evidence::Modern if revision == Revision::Auto => {
            return Some(Settled::Modern(ProtocolVersion::LATEST));
        }
        Evidence::Modern => Vec::new(),
        Evidence::Lists(listed) => listed.clone(),
    };
    let best = listed
        .iter()
        .filter_map(|v| v.parse::<ProtocolVersion>().ok())
        .filter(|v| !v.uses_initialize())
        .max();
    Some(match best {
        Some(version) if revision == Revision::Auto => Settled::Modern(version),
        _ => Settled::Fail(RequestError::NoCommonRevision { offered: listed }),
    })
}

/// Whether `message` is the server's refusal of a call's `Mcp-Param-*` headers: -32020
/// (HeaderMismatch) naming them. Their tool's schema may have changed since it was
/// listed, so the client lists the tools again before it gives up (MODERN-7).
pub(super) fn refuses_mirrors(message: &Envelope) -> bool {
    match message.message() {
        Message::Error(e) => {
            e.error.code == ErrorCode::HEADER_MISMATCH
                && e.error.message.to_ascii_lowercase().contains("mcp-param")
        }
        _ => false,
    }
}

/// The strings of a JSON array of strings.
fn versions(list: &serde_json::Value) -> Option<Vec<String>> {
    list.as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// What a sessionless response is (MODERN-18, MODERN-23).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ResultType {
    /// The answer: a result without `resultType` (an older server's), `complete`, or an
    /// error.
    Complete,
    /// `input_required`: the server asks the client for input first.
    InputRequired,
}

/// A sessionless response's `resultType`.
///
/// # Errors
/// [`RequestError::BadResponse`] for any other value: an unknown `resultType` makes the
/// response invalid (MODERN-23).
pub(super) fn result_type(message: &Envelope) -> Result<ResultType, RequestError> {
    let Message::Response(response) = message.message() else {
        return Ok(ResultType::Complete);
    };
    let text = response.result.as_str();
    let mut scan = Scanner::new(text.as_bytes(), MAX_DEPTH_CAP);
    if scan.peek() != Some(b'{') {
        return Ok(ResultType::Complete);
    }
    let mut kind = None;
    let walked = members(&mut scan, text, |scan, key| match key {
        "resultType" => string(scan, text).map(|v| kind = v),
        _ => skip(scan),
    });
    match (walked, kind.as_deref()) {
        (Ok(()), None | Some("complete")) => Ok(ResultType::Complete),
        (Ok(()), Some("input_required")) => Ok(ResultType::InputRequired),
        (Ok(()), Some(other)) => Err(RequestError::BadResponse(format!(
            "unknown resultType {other:?}"
        ))),
        (Err(WrongShape), _) => Err(RequestError::BadResponse(
            "resultType is not a string".into(),
        )),
    }
}

/// Where the probe leaves the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Settled {
    /// Sessionless, at this revision: connected.
    Modern(ProtocolVersion),
    /// Open a session: `initialize`, offering this revision.
    Initialize(ProtocolVersion),
    /// No revision both speak: the handshake fails with this.
    Fail(RequestError),
}

/// The revision to settle on, from the probe's `evidence`, the revision it `offered`,
/// what the configuration allows (`revision`), and `initialize`'s revision when it
/// falls back (`fallback`).
pub(super) fn settle(
    evidence: &Evidence,
    offered: ProtocolVersion,
    revision: Revision,
    fallback: ProtocolVersion,
) -> Settled {
    let modern_only = !matches!(revision, Revision::Auto);
    match evidence {
        Evidence::Lists(listed) => {
            let known: Vec<ProtocolVersion> =
                listed.iter().filter_map(|v| v.parse().ok()).collect();
            let allowed = |v: &ProtocolVersion| match revision {
                Revision::Exactly(pinned) => *v == pinned,
                _ => true,
            };
            if let Some(best) = known
                .iter()
                .copied()
                .filter(|v| !v.uses_initialize() && allowed(v))
                .max()
            {
                return Settled::Modern(best);
            }
            if !modern_only
                && let Some(best) = known.iter().copied().filter(|v| v.uses_initialize()).max()
            {
                return Settled::Initialize(best);
            }
            Settled::Fail(RequestError::NoCommonRevision {
                offered: listed.clone(),
            })
        }
        Evidence::Modern => Settled::Modern(offered),
        Evidence::None if modern_only => Settled::Fail(RequestError::NoCommonRevision {
            offered: Vec::new(),
        }),
        Evidence::None => Settled::Initialize(fallback),
    }
}

/// The era a configuration starts in before any answer: the probe's, unless it names
/// an older one.
pub(super) fn first_era(revision: Revision) -> Era {
    match revision {
        Revision::Auto | Revision::Era(Era::Sessionless) => Era::Sessionless,
        Revision::Exactly(v) if !v.uses_initialize() => Era::Sessionless,
        Revision::Era(Era::HttpSse) => Era::HttpSse,
        Revision::Exactly(_) | Revision::Era(_) => Era::Sessions,
    }
}

/// The protocol members of every request's `_meta` at `version` (MODERN-3), rendered
/// once per connection: `"…/protocolVersion":"…","…/clientCapabilities":{…},"…/clientInfo":{…}`.
pub(super) fn protocol_members(
    version: ProtocolVersion,
    capabilities: &str,
    name: &str,
    client_version: &str,
) -> String {
    let info = serde_json::json!({"name": name, "version": client_version});
    format!(
        r#""{PROTOCOL_VERSION}":"{version}","{CLIENT_CAPABILITIES}":{capabilities},"{CLIENT_INFO}":{info}"#
    )
}

/// Why a request's params cannot be sent at 2026-07-28.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ParamsError {
    /// Params are not a JSON object (every MCP request's are).
    NotObject,
    /// `_meta` is there but not an object.
    MetaNotObject,
    /// `_meta` sets a key the client sets itself.
    Reserved(&'static str),
}

impl std::fmt::Display for ParamsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotObject => f.write_str("params must be a JSON object"),
            Self::MetaNotObject => f.write_str("params._meta must be a JSON object"),
            Self::Reserved(key) => write!(f, "params._meta sets {key}, which the client sets"),
        }
    }
}

/// What a request's params hold for its headers, and where its `_meta` members go.
#[derive(Debug)]
pub(super) struct Read<'a> {
    /// `params.name` (tools/call, prompts/get) or `params.uri` (resources/read).
    pub(super) name: Option<Cow<'a, str>>,
    pub(super) uri: Option<Cow<'a, str>>,
    /// The text of `params.arguments`, if any.
    pub(super) arguments: Option<&'a str>,
    splice: Splice,
}

/// Where the protocol members are written into the params text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Splice {
    /// Into the application's `_meta` object, just after its `{`; `empty` when it has no
    /// member (no comma follows).
    IntoMeta { at: usize, empty: bool },
    /// A new `_meta` member before the params' closing brace at `at`.
    Append { at: usize, empty: bool },
}

/// Reads `text`, a request's params (valid JSON: the client wrote it), for a sessionless
/// request.
///
/// # Errors
/// [`ParamsError`] when `_meta` cannot be completed: params or `_meta` not objects, or
/// a protocol key already set.
pub(super) fn read_params(text: &str) -> Result<Read<'_>, ParamsError> {
    let mut scan = Scanner::new(text.as_bytes(), MAX_DEPTH_CAP);
    let (mut name, mut uri, mut arguments, mut meta) = (None, None, None, None);
    if scan.peek() != Some(b'{') {
        return Err(ParamsError::NotObject);
    }
    let mut failure = None;
    let walked = members(&mut scan, text, |scan, key| match key {
        "name" => string(scan, text).map(|v| name = v),
        "uri" => string(scan, text).map(|v| uri = v),
        "arguments" => {
            scan.peek();
            let start = scan.pos();
            skip(scan)?;
            arguments = text.get(start..scan.pos());
            Ok(())
        }
        "_meta" => {
            if scan.peek() != Some(b'{') {
                failure = Some(ParamsError::MetaNotObject);
                return Err(WrongShape);
            }
            let at = scan.pos() + 1;
            let mut empty = true;
            members(scan, text, |scan, key| {
                empty = false;
                if let Some(key) = [PROTOCOL_VERSION, CLIENT_CAPABILITIES, CLIENT_INFO]
                    .into_iter()
                    .find(|k| *k == key)
                {
                    failure = Some(ParamsError::Reserved(key));
                    return Err(WrongShape);
                }
                skip(scan)
            })?;
            meta = Some(Splice::IntoMeta { at, empty });
            Ok(())
        }
        _ => skip(scan),
    });
    if let Some(failure) = failure {
        return Err(failure);
    }
    // A member the client does not read may be of any type; one it reads (name, uri)
    // of the wrong type is the server's to refuse, so the request goes as written.
    if walked.is_err() {
        return Err(ParamsError::NotObject);
    }
    let close = scan.pos() - 1;
    let splice = meta.unwrap_or(Splice::Append {
        at: close,
        empty: text[..close].trim_end().ends_with('{'),
    });
    Ok(Read {
        name,
        uri,
        arguments,
        splice,
    })
}

impl Read<'_> {
    /// `text` (the params this was read from) with `members` in its `_meta`.
    pub(super) fn with_meta(&self, text: &str, members: &str) -> Bytes {
        let mut out = BytesMut::with_capacity(text.len() + members.len() + 12);
        match self.splice {
            Splice::IntoMeta { at, empty } => {
                out.extend_from_slice(&text.as_bytes()[..at]);
                out.extend_from_slice(members.as_bytes());
                if !empty {
                    out.extend_from_slice(b",");
                }
                out.extend_from_slice(&text.as_bytes()[at..]);
            }
            Splice::Append { at, empty } => {
                out.extend_from_slice(&text.as_bytes()[..at]);
                if !empty {
                    out.extend_from_slice(b",");
                }
                out.extend_from_slice(br#""_meta":{"#);
                out.extend_from_slice(members.as_bytes());
                out.extend_from_slice(b"}");
                out.extend_from_slice(&text.as_bytes()[at..]);
            }
        }
        out.freeze()
    }
}

/// The params of a request that had none, at 2026-07-28: just the protocol members.
pub(super) fn meta_only(members: &str) -> Bytes {
    Bytes::from(format!(r#"{{"_meta":{{{members}}}}}"#))
}

/// The `Mcp-Method` and `Mcp-Name` headers of a sessionless message (MODERN-6): the
/// method, and for the three named methods the name or URI, encoded as header values
/// are (MODERN-8: the base64 sentinel where the text cannot go as it is).
pub(super) fn mirrored_headers(
    method: &str,
    read: Option<&Read<'_>>,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = Vec::with_capacity(2);
    if let Ok(value) = HeaderValue::from_str(method) {
        headers.push((HeaderName::from_static("mcp-method"), value));
    }
    let named = match crate::mirror::name_member(method) {
        Some("uri") => read.and_then(|r| r.uri.as_deref()),
        Some(_) => read.and_then(|r| r.name.as_deref()),
        None => None,
    };
    if let Some(value) = named
        .map(crate::mirror::encode_str)
        .and_then(|v| HeaderValue::from_str(&v).ok())
    {
        headers.push((HeaderName::from_static("mcp-name"), value));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Classifier;

    fn message(text: &'static str) -> Envelope {
        let text = crate::jsonrpc::body_text(Bytes::from_static(text.as_bytes())).unwrap();
        Classifier::default().envelope(text).unwrap()
    }

    const V26: ProtocolVersion = ProtocolVersion::V2026_07_28;
    const V25: ProtocolVersion = ProtocolVersion::V2025_11_25;

    #[test]
    fn modern_26_only_positive_evidence_is_modern() {
        let discover = message(
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{}}}"#,
        );
        assert_eq!(
            evidence(200, Some(&discover)),
            Evidence::Lists(vec!["2026-07-28".into(), "2025-11-25".into()])
        );
        let unsupported = message(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"no","data":{"supported":["2025-11-25"],"requested":"2026-07-28"}}}"#,
        );
        assert_eq!(
            evidence(400, Some(&unsupported)),
            Evidence::Lists(vec!["2025-11-25".into()])
        );
        for modern in [
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m"}}"#,
        ] {
            assert_eq!(
                evidence(400, Some(&message(modern))),
                Evidence::Modern,
                "{modern}"
            );
            // A server that answers them with 200 is understood all the same.
            assert_eq!(
                evidence(200, Some(&message(modern))),
                Evidence::Modern,
                "{modern}"
            );
        }
        let not_found =
            message(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}"#);
        assert_eq!(evidence(404, Some(&not_found)), Evidence::Modern);
        assert_eq!(evidence(200, Some(&not_found)), Evidence::None);
        // The field's session-era answers (MODERN-26).
        for legacy in [
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Mcp-Session-Id header is required"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
        ] {
            assert_eq!(
                evidence(400, Some(&message(legacy))),
                Evidence::None,
                "{legacy}"
            );
        }
        assert_eq!(evidence(405, None), Evidence::None);
    }

    #[test]
    fn modern_18_modern_23_an_unknown_result_type_is_invalid() {
        for ok in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"m"}}"#,
        ] {
            assert!(result_type(&message(ok)).is_ok(), "{ok}");
        }
        for bad in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"partial"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":3}}"#,
        ] {
            assert!(
                matches!(
                    result_type(&message(bad)),
                    Err(RequestError::BadResponse(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn modern_15_modern_26_a_refused_initialize_is_read_for_modern_evidence() {
        // Any modern error may name the revisions (MODERN-26), not only -32022.
        let mismatch = message(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"m","data":{"supported":["2026-07-28"]}}}"#,
        );
        let named = Evidence::Lists(vec!["2026-07-28".into()]);
        assert_eq!(evidence(400, Some(&mismatch)), named);
        let pinned = Revision::Exactly(V25);
        assert_eq!(refused(&Evidence::None, Revision::Auto), None);
        assert_eq!(refused(&named, Revision::Auto), Some(Settled::Modern(V26)));
        assert_eq!(
            refused(&Evidence::Modern, Revision::Auto),
            Some(Settled::Modern(V26))
        );
        for revision in [pinned, Revision::Era(Era::Sessions)] {
            assert_eq!(
                refused(&named, revision),
                Some(Settled::Fail(RequestError::NoCommonRevision {
                    offered: vec!["2026-07-28".into()]
                }))
            );
            assert_eq!(
                refused(&Evidence::Modern, revision),
                Some(Settled::Fail(RequestError::NoCommonRevision {
                    offered: Vec::new()
                }))
            );
        }
        let unknown = Evidence::Lists(vec!["2099-01-01".into()]);
        assert_eq!(
            refused(&unknown, Revision::Auto),
            Some(Settled::Fail(RequestError::NoCommonRevision {
                offered: vec!["2099-01-01".into()]
            }))
        );
    }

    #[test]
    fn modern_15_modern_5_the_best_common_revision_is_chosen() {
        let lists = |l: &[&str]| Evidence::Lists(l.iter().map(|s| (*s).to_owned()).collect());
        let auto = Revision::Auto;
        assert_eq!(
            settle(&lists(&["2025-11-25", "2026-07-28"]), V26, auto, V25),
            Settled::Modern(V26)
        );
        assert_eq!(
            settle(&lists(&["2025-06-18", "2025-11-25"]), V26, auto, V25),
            Settled::Initialize(V25)
        );
        assert_eq!(
            settle(&lists(&["2025-06-18"]), V26, auto, V25),
            Settled::Initialize(ProtocolVersion::V2025_06_18)
        );
        assert_eq!(
            settle(&lists(&["2099-01-01"]), V26, auto, V25),
            Settled::Fail(RequestError::NoCommonRevision {
                offered: vec!["2099-01-01".into()]
            })
        );
        assert_eq!(
            settle(&Evidence::Modern, V26, auto, V25),
            Settled::Modern(V26)
        );
        assert_eq!(
            settle(&Evidence::None, V26, auto, V25),
            Settled::Initialize(V25)
        );
        // Pinned to the sessionless era: no fallback, a clear failure instead.
        let pinned = Revision::Exactly(V26);
        assert_eq!(
            settle(&lists(&["2025-11-25"]), V26, pinned, V25),
            Settled::Fail(RequestError::NoCommonRevision {
                offered: vec!["2025-11-25".into()]
            })
        );
        assert!(matches!(
            settle(&Evidence::None, V26, Revision::Era(Era::Sessionless), V25),
            Settled::Fail(RequestError::NoCommonRevision { .. })
        ));
    }

    #[test]
    fn modern_3_meta_is_spliced_into_any_params() {
        let members = r#""k":1"#;
        for (params, spliced) in [
            (r#"{}"#, r#"{"_meta":{"k":1}}"#),
            (r#"{ }"#, r#"{ "_meta":{"k":1}}"#),
            (r#"{"name":"t"}"#, r#"{"name":"t","_meta":{"k":1}}"#),
            (
                r#"{"name":"t","_meta":{"progressToken":7}}"#,
                r#"{"name":"t","_meta":{"k":1,"progressToken":7}}"#,
            ),
            (r#"{"_meta":{}}"#, r#"{"_meta":{"k":1}}"#),
        ] {
            let read = read_params(params).unwrap();
            assert_eq!(
                &read.with_meta(params, members)[..],
                spliced.as_bytes(),
                "{params}"
            );
        }
        assert_eq!(&meta_only(members)[..], br#"{"_meta":{"k":1}}"#);
    }

    #[test]
    fn modern_3_params_that_cannot_carry_meta_are_refused() {
        assert_eq!(read_params("[1]").unwrap_err(), ParamsError::NotObject);
        assert_eq!(
            read_params(r#"{"_meta":[]}"#).unwrap_err(),
            ParamsError::MetaNotObject
        );
        assert_eq!(
            read_params(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}"#)
                .unwrap_err(),
            ParamsError::Reserved(PROTOCOL_VERSION)
        );
    }

    #[test]
    fn modern_6_modern_8_method_and_name_are_mirrored() {
        let params = r#"{"name":"héllo","arguments":{"a":[1]}}"#;
        let read = read_params(params).unwrap();
        let headers = mirrored_headers("tools/call", Some(&read));
        assert_eq!(headers[0].1, "tools/call");
        assert_eq!(headers[1].0, "mcp-name");
        assert_eq!(
            crate::mirror::decode(headers[1].1.as_bytes()).unwrap(),
            "héllo"
        );
        let read = read_params(r#"{"uri":"file:///a"}"#).unwrap();
        let headers = mirrored_headers("resources/read", Some(&read));
        assert_eq!(headers[1].1, "file:///a");
        assert_eq!(mirrored_headers("tools/list", None).len(), 1);
    }
}
