//! The checks of one request of the sessionless revision (2026-07-28): its `_meta` and
//! its `Mcp-*` headers, in the order the official conformance suite fixes, each failure
//! a typed [`Invalid`] with its status and JSON-RPC error (MODERN-3…9, MODERN-20,
//! MODERN-21, MODERN-24).
//!
//! Only `params._meta`, `params.name` and `params.uri` are read, borrowed from the body
//! by the JSON scanner (the rest is skipped without being built), so a request pays one
//! pass over its params and no allocation for them. A `tools/call` of a tool that mirrors arguments
//! into `Mcp-Param-*` headers ([`ToolMirrors`]) alone pays a second pass, which builds
//! its `arguments` to check them (MODERN-7, MODERN-8); any other tool costs one lookup.

use std::borrow::Cow;

use http::StatusCode;
use serde::Deserialize;

use super::head::{McpHeaders, VersionHeader};
use crate::ProtocolVersion;
use crate::jsonrpc::read::{WrongShape, first, members, null, skip, string};
use crate::jsonrpc::scan::{MAX_DEPTH_CAP, Scanner};
use crate::jsonrpc::{Envelope, ErrorCode, Kind};
use crate::meta::{CLIENT_CAPABILITIES, PROTOCOL_VERSION};
use crate::mirror::{MirrorError, ToolMirrors};

/// The methods the revision removed: answered 404 with -32601 (MODERN-21).
const REMOVED: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Just the revision `_meta` names, to decide the era of a request without a header.
#[derive(Deserialize)]
struct Named<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<NamedMeta<'a>>,
}

#[derive(Deserialize)]
struct NamedMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    version: Option<Cow<'a, str>>,
}

/// Whether a request's or notification's `params._meta` names a revision (MODERN-25).
pub(super) fn names_a_revision(message: &Envelope) -> bool {
    if !matches!(message.kind(), Kind::Request | Kind::Notification) {
        return false;
    }
    message.payload().is_some_and(|raw| {
        serde_json::from_str::<Named<'_>>(raw.as_str())
            .is_ok_and(|p| p.meta.is_some_and(|m| m.version.is_some()))
    })
}

/// The HTTP status of an error answer to a sessionless request: 404 for an unknown
/// method (MODERN-9), 400 for the revision's own errors (MODERN-4, MODERN-5, MODERN-20),
/// 200 for any other error (a tool's, or invalid params).
pub(super) fn error_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        ErrorCode::HEADER_MISMATCH
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// The params of a request, as far as the transport reads them: `name`, `uri` and the
/// protocol keys of `_meta`, borrowed from the body (unescaped only when they hold an
/// escape). An absent or `null` member is `None`, as in serde's reading of an `Option`.
#[derive(Default)]
struct Params<'a> {
    meta: Option<Meta<'a>>,
    name: Option<Cow<'a, str>>,
    uri: Option<Cow<'a, str>>,
}

/// The protocol keys of `_meta`.
#[derive(Default)]
struct Meta<'a> {
    version: Option<Cow<'a, str>>,
    /// `clientCapabilities` is there and not `null` (its content is the application's).
    capabilities: bool,
}

impl<'a> Params<'a> {
    /// One pass of the JSON scanner over `text` (the params, valid JSON already): the
    /// read members are taken, every other value skipped without being built.
    fn read(text: &'a str) -> Result<Self, WrongShape> {
        let mut scan = Scanner::new(text.as_bytes(), MAX_DEPTH_CAP);
        let mut params = Self::default();
        let (mut name, mut uri, mut meta) = (false, false, false);
        members(&mut scan, text, |scan, key| match key {
            "name" => {
                first(&mut name)?;
                params.name = string(scan, text)?;
                Ok(())
            }
            "uri" => {
                first(&mut uri)?;
                params.uri = string(scan, text)?;
                Ok(())
            }
            "_meta" => {
                first(&mut meta)?;
                params.meta = Meta::read(scan, text)?;
                Ok(())
            }
            _ => skip(scan),
        })?;
        scan.end().map_err(|_| WrongShape)?;
        Ok(params)
    }
}

impl<'a> Meta<'a> {
    /// `_meta`: an object, or `null`.
    fn read(scan: &mut Scanner<'a>, text: &'a str) -> Result<Option<Self>, WrongShape> {
        if null(scan)? {
            return Ok(None);
        }
        let mut meta = Self::default();
        let (mut version, mut capabilities) = (false, false);
        members(scan, text, |scan, key| match key {
            PROTOCOL_VERSION => {
                first(&mut version)?;
                meta.version = string(scan, text)?;
                Ok(())
            }
            CLIENT_CAPABILITIES => {
                first(&mut capabilities)?;
                meta.capabilities = !null(scan)?;
                if meta.capabilities {
                    skip(scan)?;
                }
                Ok(())
            }
            _ => skip(scan),
        })?;
        Ok(Some(meta))
    }
}

/// Just `params.arguments`, read only for a tool that mirrors some of them.
#[derive(Deserialize)]
struct Arguments {
    #[serde(default)]
    arguments: Option<serde_json::Value>,
}

/// A request of the sessionless revision that passed the transport's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Checked {
    /// The revision it speaks (one the server serves).
    pub(super) version: ProtocolVersion,
}

/// Why a request of the sessionless revision is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Invalid {
    /// No `MCP-Protocol-Version` header (MODERN-4, MODERN-16).
    NoVersionHeader,
    /// `params._meta` lacks a required key, or is not an object of the right shape
    /// (MODERN-20: -32602, not -32020).
    Meta(&'static str),
    /// The header and `_meta` name different revisions (MODERN-4).
    VersionMismatch,
    /// A revision this server does not serve (MODERN-5), as the client wrote it.
    Unsupported(String),
    /// `Mcp-Method` is missing or differs from the body's `method` (MODERN-6).
    MethodHeader,
    /// `Mcp-Name` is missing or differs from `params.name` / `params.uri` (MODERN-6).
    NameHeader,
    /// A `tools/call` argument and its `Mcp-Param-*` header disagree, the header is
    /// missing, malformed or repeated, or it comes without the argument (MODERN-7,
    /// MODERN-8).
    ParamHeader(MirrorError),
    /// A `tools/call` of a tool with mirrors sent more `Mcp-Param-*` fields than the
    /// server keeps ([`Config::with_max_param_headers`]), so it cannot be checked.
    ///
    /// [`Config::with_max_param_headers`]: super::Config::with_max_param_headers
    TooManyParamHeaders {
        /// How many were sent.
        sent: usize,
        /// How many the server keeps.
        max: usize,
    },
    /// A method this revision removed (MODERN-21).
    Removed,
    /// Not one request or notification (MODERN-1): a batch, or a response.
    NotOneMessage,
}

impl Invalid {
    /// The status and JSON-RPC error code it is answered with.
    pub(super) fn status_and_code(&self) -> (StatusCode, ErrorCode) {
        match self {
            Self::Meta(_) => (StatusCode::BAD_REQUEST, ErrorCode::INVALID_PARAMS),
            Self::Unsupported(_) => (
                StatusCode::BAD_REQUEST,
                ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            ),
            Self::Removed => (StatusCode::NOT_FOUND, ErrorCode::METHOD_NOT_FOUND),
            Self::NotOneMessage => (StatusCode::BAD_REQUEST, ErrorCode::INVALID_REQUEST),
            Self::NoVersionHeader
            | Self::VersionMismatch
            | Self::MethodHeader
            | Self::NameHeader
            | Self::ParamHeader(_)
            | Self::TooManyParamHeaders { .. } => {
                (StatusCode::BAD_REQUEST, ErrorCode::HEADER_MISMATCH)
            }
        }
    }

    /// The error's message.
    pub(super) fn message(&self) -> Cow<'static, str> {
        match self {
            Self::NoVersionHeader => "missing MCP-Protocol-Version header".into(),
            Self::Meta(what) => Cow::Borrowed(what),
            Self::VersionMismatch => {
                "MCP-Protocol-Version header and _meta protocolVersion differ".into()
            }
            Self::Unsupported(v) => format!("unsupported protocol version {v:?}").into(),
            Self::MethodHeader => "Mcp-Method header missing or not the body's method".into(),
            Self::NameHeader => {
                "Mcp-Name header missing or not the body's params.name or params.uri".into()
            }
            Self::ParamHeader(e) => e.to_string().into(),
            Self::TooManyParamHeaders { sent, max } => format!(
                "header mismatch: {sent} Mcp-Param-* headers, more than the {max} this server \
                 reads, so the tool's cannot be checked"
            )
            .into(),
            Self::Removed => "method not found: removed in this protocol revision".into(),
            Self::NotOneMessage => "a POST carries one request or one notification".into(),
        }
    }
}

/// Checks a request of the sessionless revision against its headers, in the order the
/// conformance suite fixes: the version header, the required `_meta` keys, header and
/// `_meta` agreement, a served revision, `Mcp-Method`, `Mcp-Name`, then for a
/// `tools/call` of a tool in `tools` its `Mcp-Param-*` headers (MODERN-7, MODERN-8),
/// removed methods. A notification is checked for its revision only (MODERN-24: no
/// `Mcp-*` header is required of it). `served` lists the modern revisions served.
pub(super) fn check(
    headers: &McpHeaders,
    message: &Envelope,
    served: &[ProtocolVersion],
    tools: &ToolMirrors,
) -> Result<Checked, Invalid> {
    let method = match message.kind() {
        Kind::Request | Kind::Notification => message.method().unwrap_or_default(),
        Kind::Response | Kind::Error => return Err(Invalid::NotOneMessage),
    };
    let header_version = match &headers.version {
        VersionHeader::Absent => None,
        VersionHeader::Known(v) => Some(Cow::Borrowed(v.as_str())),
        VersionHeader::Unknown(v) => Some(Cow::Borrowed(&**v)),
    };
    if message.kind() == Kind::Notification {
        let version = header_version.ok_or(Invalid::NoVersionHeader)?;
        return served_version(&version, served).map(|version| Checked { version });
    }
    let header_version = header_version.ok_or(Invalid::NoVersionHeader)?;
    let params = match message.payload() {
        Some(raw) => Params::read(raw.as_str())
            .map_err(|WrongShape| Invalid::Meta("params or its _meta has the wrong shape"))?,
        None => Params::default(),
    };
    let meta = params
        .meta
        .ok_or(Invalid::Meta("params._meta is required in this revision"))?;
    let meta_version = meta.version.ok_or(Invalid::Meta(
        "_meta lacks io.modelcontextprotocol/protocolVersion",
    ))?;
    if !meta.capabilities {
        return Err(Invalid::Meta(
            "_meta lacks io.modelcontextprotocol/clientCapabilities",
        ));
    }
    if meta_version != header_version {
        return Err(Invalid::VersionMismatch);
    }
    let version = served_version(&meta_version, served)?;
    if headers
        .method
        .as_ref()
        .is_none_or(|h| h.as_bytes() != method.as_bytes())
    {
        return Err(Invalid::MethodHeader);
    }
    let named = match crate::mirror::name_member(method) {
        Some("uri") => Some(&params.uri),
        Some(_) => Some(&params.name),
        None => None,
    };
    if let Some(value) = named {
        let agrees = match (&headers.name, value) {
            (Some(header), Some(value)) => header_names(header.as_bytes(), value),
            _ => false,
        };
        if !agrees {
            return Err(Invalid::NameHeader);
        }
    }
    if method == "tools/call"
        && let Some(mirrors) = params.name.as_deref().and_then(|name| tools.get(name))
    {
        if let Some((sent, max)) = headers.params.overflow() {
            return Err(Invalid::TooManyParamHeaders { sent, max });
        }
        // MODERN-7: the second pass, for this tool only. The body parsed already, so
        // only a repeated `arguments` member, or one nested past serde_json's depth
        // limit, fails here.
        let arguments = match message.payload() {
            Some(raw) => {
                serde_json::from_str::<Arguments>(raw.as_str())
                    .map_err(|_| {
                        Invalid::Meta("params.arguments is repeated or nested too deeply")
                    })?
                    .arguments
            }
            None => None,
        };
        let arguments = arguments.unwrap_or(serde_json::Value::Null);
        mirrors
            .check(&arguments, headers.params.pairs())
            .map_err(Invalid::ParamHeader)?;
    }
    if REMOVED.contains(&method) {
        return Err(Invalid::Removed);
    }
    Ok(Checked { version })
}

/// The served revision `text` names; [`Invalid::Unsupported`] otherwise.
fn served_version(text: &str, served: &[ProtocolVersion]) -> Result<ProtocolVersion, Invalid> {
    text.parse::<ProtocolVersion>()
        .ok()
        .filter(|v| served.contains(v))
        .ok_or_else(|| Invalid::Unsupported(text.to_owned()))
}

/// Whether an `Mcp-Name` value names `value`: decoded (optional whitespace trimmed, the
/// `=?base64?…?=` sentinel undone, MODERN-8), then compared exactly (values are
/// case-sensitive, MODERN-6).
fn header_names(header: &[u8], value: &str) -> bool {
    crate::mirror::decode(header).is_ok_and(|decoded| decoded == value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Classifier;

    const MODERN: [ProtocolVersion; 1] = [ProtocolVersion::V2026_07_28];
    /// No tool mirrors anything.
    const NONE: ToolMirrors = ToolMirrors::new();

    fn headers(list: &[(&str, &str)]) -> McpHeaders {
        let mut request = http::Request::post("/mcp");
        for (name, value) in list {
            request = request.header(*name, *value);
        }
        let head = request.body(()).unwrap().into_parts().0;
        McpHeaders::read(&head, 4, |_| None)
    }

    fn body(text: &'static str) -> Envelope {
        let text = crate::jsonrpc::body_text(bytes::Bytes::from_static(text.as_bytes())).unwrap();
        Classifier::default()
            .envelope(text)
            .expect("a JSON-RPC message")
    }

    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

    fn call(params: &str) -> Envelope {
        let text =
            format!(r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{{params}}}}}"#);
        body(Box::leak(text.into_boxed_str()))
    }

    fn full_headers() -> McpHeaders {
        headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ])
    }

    #[test]
    fn modern_3_modern_6_a_complete_request_passes() {
        let checked = check(
            &full_headers(),
            &call(&format!(r#""name":"echo",{META}"#)),
            &MODERN,
            &NONE,
        );
        assert_eq!(
            checked,
            Ok(Checked {
                version: ProtocolVersion::V2026_07_28
            })
        );
    }

    #[test]
    fn modern_4_modern_16_the_version_header_is_required() {
        let h = headers(&[("mcp-method", "tools/call"), ("mcp-name", "echo")]);
        let e = check(
            &h,
            &call(&format!(r#""name":"echo",{META}"#)),
            &MODERN,
            &NONE,
        );
        assert_eq!(e, Err(Invalid::NoVersionHeader));
        assert_eq!(
            Invalid::NoVersionHeader.status_and_code(),
            (StatusCode::BAD_REQUEST, ErrorCode::HEADER_MISMATCH)
        );
    }

    #[test]
    fn modern_20_missing_meta_keys_are_invalid_params_before_any_header_comparison() {
        let h = headers(&[("mcp-protocol-version", "2026-07-28")]);
        for params in [
            r#""name":"echo""#,
            r#""name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}"#,
            r#""name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
            r#""name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":7}"#,
        ] {
            let e = check(&h, &call(params), &MODERN, &NONE).unwrap_err();
            assert!(matches!(e, Invalid::Meta(_)), "{params}: {e:?}");
            assert_eq!(e.status_and_code().1, ErrorCode::INVALID_PARAMS);
        }
    }

    #[test]
    fn modern_20_params_are_read_as_json_not_as_text() {
        let v = "io.modelcontextprotocol/protocolVersion";
        let c = "io.modelcontextprotocol/clientCapabilities";
        // Escapes in keys and values are read, whitespace anywhere, other members skipped
        // however nested, members in any order, a null capability's sibling taken.
        for params in [
            format!(r#""n\u0061me":"ec\u0068o", "x":[{{"_meta":1}}], {META}"#),
            format!(
                r#" "_meta" : {{ "{c}" : {{"a":[1,{{"b":null}}]}}, "{v}":"2026-07-28" }} , "name" : "echo" "#
            ),
            format!(
                r#""uri":null,"name":"echo","_meta":{{"other":{{"{v}":1}},"{v}":"2026-07-28","{c}":[]}}"#
            ),
        ] {
            let e = check(&full_headers(), &call(&params), &MODERN, &NONE);
            assert!(e.is_ok(), "{params}: {e:?}");
        }
        // A null `_meta` or capability is absent; a read member of the wrong type, or
        // given twice, is the wrong shape: all -32602 (MODERN-20).
        for params in [
            r#""name":"echo","_meta":null"#.to_owned(),
            format!(r#""name":"echo","_meta":{{"{v}":"2026-07-28","{c}":null}}"#),
            r#""name":"echo","_meta":[]"#.to_owned(),
            format!(r#""name":7,{META}"#),
            format!(r#""name":"echo","name":"echo",{META}"#),
            format!(r#""name":"echo",{META},"_meta":{{}}"#),
            format!(
                r#""name":"echo","_meta":{{"{v}":"2026-07-28","{v}":"2026-07-28","{c}":{{}}}}"#
            ),
            format!(r#""name":"\ud800",{META}"#),
        ] {
            let e = check(&full_headers(), &call(&params), &MODERN, &NONE).unwrap_err();
            assert!(matches!(e, Invalid::Meta(_)), "{params}: {e:?}");
        }
    }

    /// serde's reading of the same members: the oracle the scanner's reading must agree
    /// with, on objects (serde would also take a JSON array as a struct, by position,
    /// which the scanner refuses: `_meta` and params are objects).
    #[derive(serde::Deserialize)]
    struct SerdeParams<'a> {
        #[serde(rename = "_meta", borrow, default)]
        meta: Option<SerdeMeta<'a>>,
        #[serde(borrow, default)]
        name: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        uri: Option<Cow<'a, str>>,
    }

    #[derive(serde::Deserialize)]
    struct SerdeMeta<'a> {
        #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
        version: Option<Cow<'a, str>>,
        #[serde(rename = "io.modelcontextprotocol/clientCapabilities", default)]
        capabilities: Option<serde::de::IgnoredAny>,
    }

    type Read = Option<(
        Option<(Option<String>, bool)>,
        Option<String>,
        Option<String>,
    )>;

    fn by_scanner(text: &str) -> Read {
        let p = Params::read(text).ok()?;
        let meta = p
            .meta
            .map(|m| (m.version.map(Cow::into_owned), m.capabilities));
        Some((
            meta,
            p.name.map(Cow::into_owned),
            p.uri.map(Cow::into_owned),
        ))
    }

    fn by_serde(text: &str) -> Read {
        let p: SerdeParams<'_> = serde_json::from_str(text).ok()?;
        let meta = p
            .meta
            .map(|m| (m.version.map(Cow::into_owned), m.capabilities.is_some()));
        Some((
            meta,
            p.name.map(Cow::into_owned),
            p.uri.map(Cow::into_owned),
        ))
    }

    /// A JSON value of the kinds a member may hold (no arrays where serde would read
    /// a struct by position).
    fn leaf() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("null".to_owned()),
            Just("7".to_owned()),
            Just("true".to_owned()),
            Just(r#""2026-07-28""#.to_owned()),
            Just(r#""ec\u0068o""#.to_owned()),
            Just(r#""\ud800""#.to_owned()),
            Just(r#"{"a":[1,{"b":null}]}"#.to_owned()),
            Just("{}".to_owned()),
            Just("[]".to_owned()),
        ]
    }

    fn object(
        keys: &'static [&'static str],
        value: impl proptest::strategy::Strategy<Value = String>,
    ) -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        proptest::collection::vec((proptest::sample::select(keys), value), 0..5).prop_map(
            |members| {
                let members: Vec<String> = members
                    .iter()
                    .map(|(k, v)| format!(r#" "{k}" : {v}"#))
                    .collect();
                format!("{{{}}}", members.join(","))
            },
        )
    }

    proptest::proptest! {
        #[test]
        fn modern_20_the_scanner_reads_params_as_serde_does(
            text in object(
                &["name", "uri", "n\\u0061me", "_meta", "other"],
                proptest::prop_oneof![
                    leaf(),
                    object(
                        &[
                            "io.modelcontextprotocol/protocolVersion",
                            "io.modelcontextprotocol/clientCapabilities",
                            "io.modelcontextprotocol/clientInfo",
                            "io.modelcontextprotocol\\/protocolVersion",
                        ],
                        leaf(),
                    ),
                ],
            )
        ) {
            let meta_is_array = text.contains(r#""_meta" : ["#);
            proptest::prop_assume!(!meta_is_array);
            proptest::prop_assert_eq!(by_scanner(&text), by_serde(&text), "{}", text);
        }
    }

    #[test]
    fn modern_20_client_info_is_optional() {
        let with_info = r#""name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}"#;
        assert!(check(&full_headers(), &call(with_info), &MODERN, &NONE).is_ok());
    }

    #[test]
    fn modern_4_a_mismatch_comes_before_an_unsupported_version() {
        let meta = r#""name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}"#;
        let e = check(&full_headers(), &call(meta), &MODERN, &NONE);
        assert_eq!(e, Err(Invalid::VersionMismatch));
    }

    #[test]
    fn modern_5_an_unsupported_version_is_named_as_written() {
        let h = headers(&[
            ("mcp-protocol-version", "v999.0.0"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ]);
        let meta = r#""name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}"#;
        let e = check(&h, &call(meta), &MODERN, &NONE).unwrap_err();
        assert_eq!(e, Invalid::Unsupported("v999.0.0".into()));
        assert_eq!(
            e.status_and_code(),
            (
                StatusCode::BAD_REQUEST,
                ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            )
        );
    }

    #[test]
    fn modern_6_mcp_method_and_mcp_name_must_match_the_body() {
        let params = format!(r#""name":"echo",{META}"#);
        let wrong_method = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "TOOLS/CALL"),
            ("mcp-name", "echo"),
        ]);
        assert_eq!(
            check(&wrong_method, &call(&params), &MODERN, &NONE),
            Err(Invalid::MethodHeader)
        );
        let no_name = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
        ]);
        assert_eq!(
            check(&no_name, &call(&params), &MODERN, &NONE),
            Err(Invalid::NameHeader)
        );
        let wrong_name = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "Echo"),
        ]);
        assert_eq!(
            check(&wrong_name, &call(&params), &MODERN, &NONE),
            Err(Invalid::NameHeader)
        );
        // Optional whitespace around the value is not part of it.
        let padded = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "  echo  "),
        ]);
        assert!(check(&padded, &call(&params), &MODERN, &NONE).is_ok());
        // MODERN-8: a name may come in the sentinel ("echo" in base64).
        let encoded = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?ZWNobw==?="),
        ]);
        assert!(check(&encoded, &call(&params), &MODERN, &NONE).is_ok());
    }

    #[test]
    fn modern_6_resources_read_is_named_by_its_uri() {
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "resources/read"),
            ("mcp-name", "test://a"),
        ]);
        let read = body(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        );
        assert!(check(&h, &read, &MODERN, &NONE).is_ok());
    }

    #[test]
    fn modern_21_removed_methods_are_404_with_method_not_found() {
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "ping"),
        ]);
        let ping = body(
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        );
        let e = check(&h, &ping, &MODERN, &NONE).unwrap_err();
        assert_eq!(e, Invalid::Removed);
        assert_eq!(
            e.status_and_code(),
            (StatusCode::NOT_FOUND, ErrorCode::METHOD_NOT_FOUND)
        );
    }

    #[test]
    fn modern_24_a_notification_needs_no_mcp_headers() {
        let h = headers(&[("mcp-protocol-version", "2026-07-28")]);
        let note = body(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        );
        assert!(check(&h, &note, &MODERN, &NONE).is_ok());
    }

    #[test]
    fn modern_1_a_response_is_not_a_message_a_client_posts() {
        let h = headers(&[("mcp-protocol-version", "2026-07-28")]);
        let response = body(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(
            check(&h, &response, &MODERN, &NONE),
            Err(Invalid::NotOneMessage)
        );
    }

    // --- MODERN-7, MODERN-8: Mcp-Param-* -----------------------------------------------

    /// The conformance suite's tool: `value`, a string mirrored as `Mcp-Param-Value`.
    fn mirrored_tools() -> ToolMirrors {
        let schema = serde_json::json!({"type": "object", "properties": {
            "value": {"type": "string", "x-mcp-header": "Value"},
            "count": {"type": "integer", "x-mcp-header": "Count"}},
            "required": ["value"]});
        ToolMirrors::from_schemas([("mirrored", &schema)]).unwrap()
    }

    fn mirrored_call(arguments: &str) -> Envelope {
        call(&format!(
            r#""name":"mirrored","arguments":{arguments},{META}"#
        ))
    }

    fn param_headers(params: &[(&str, &str)]) -> McpHeaders {
        let mut list = vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "mirrored"),
        ];
        list.extend_from_slice(params);
        headers(&list)
    }

    fn param_check(params: &[(&str, &str)], arguments: &str) -> Result<Checked, Invalid> {
        check(
            &param_headers(params),
            &mirrored_call(arguments),
            &MODERN,
            &mirrored_tools(),
        )
    }

    fn refused_naming(result: Result<Checked, Invalid>, header: &str) {
        let e = result.expect_err("refused");
        assert!(matches!(e, Invalid::ParamHeader(_)), "{e:?}");
        assert_eq!(
            e.status_and_code(),
            (StatusCode::BAD_REQUEST, ErrorCode::HEADER_MISMATCH)
        );
        assert!(e.message().contains(header), "{}", e.message());
    }

    #[test]
    fn modern_7_modern_8_conformance_custom_header_cases() {
        let hello = r#"{"value":"Hello"}"#;
        assert!(param_check(&[("mcp-param-value", "=?base64?SGVsbG8=?=")], hello).is_ok());
        refused_naming(
            param_check(&[("mcp-param-value", "=?base64?SGVsbG8?=")], hello),
            "Mcp-Param-Value",
        );
        refused_naming(
            param_check(&[("mcp-param-value", "=?base64?SGVs!!!bG8=?=")], hello),
            "Mcp-Param-Value",
        );
        // Literal text: one marker alone, or none, is the value itself.
        let b64 = r#"{"value":"SGVsbG8="}"#;
        assert!(param_check(&[("mcp-param-value", "SGVsbG8=")], b64).is_ok());
        let half = r#"{"value":"=?base64?SGVsbG8="}"#;
        assert!(param_check(&[("mcp-param-value", "=?base64?SGVsbG8=")], half).is_ok());
        refused_naming(param_check(&[], hello), "Mcp-Param-Value");
    }

    #[test]
    fn modern_7_right_and_wrong_values_integers_numerically() {
        let args = r#"{"value":"a","count":42}"#;
        let ok = [("mcp-param-value", "a"), ("mcp-param-count", "42")];
        assert!(param_check(&ok, args).is_ok());
        let numeric = [("mcp-param-value", "a"), ("mcp-param-count", "42.0")];
        assert!(param_check(&numeric, args).is_ok());
        let wrong = [("mcp-param-value", "a"), ("mcp-param-count", "43")];
        refused_naming(param_check(&wrong, args), "Mcp-Param-Count");
        let case = [("mcp-param-value", "A"), ("mcp-param-count", "42")];
        refused_naming(param_check(&case, args), "Mcp-Param-Value");
    }

    #[test]
    fn modern_7_a_header_without_its_argument_and_a_repeated_header_are_refused() {
        refused_naming(
            param_check(
                &[("mcp-param-value", "a"), ("mcp-param-count", "1")],
                r#"{"value":"a"}"#,
            ),
            "Mcp-Param-Count",
        );
        refused_naming(
            param_check(
                &[("mcp-param-value", "a"), ("mcp-param-value", "a")],
                r#"{"value":"a"}"#,
            ),
            "Mcp-Param-Value",
        );
    }

    #[test]
    fn modern_7_an_unrecognised_mcp_param_header_is_ignored() {
        let extra = [("mcp-param-value", "a"), ("mcp-param-other", "x")];
        assert!(param_check(&extra, r#"{"value":"a"}"#).is_ok());
    }

    #[test]
    fn modern_7_without_arguments_no_header_is_expected() {
        let h = param_headers(&[]);
        let bare = call(&format!(r#""name":"mirrored",{META}"#));
        assert!(check(&h, &bare, &MODERN, &mirrored_tools()).is_ok());
    }

    #[test]
    fn modern_7_a_tool_without_mirrors_is_not_checked() {
        // `echo` is not in the table: its Mcp-Param-* headers are ignored, and its
        // arguments are never read (they could not be: they are not even an object).
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
            ("mcp-param-value", "=?base64?!!?="),
        ]);
        let params = format!(r#""name":"echo","arguments":"not an object",{META}"#);
        assert!(check(&h, &call(&params), &MODERN, &mirrored_tools()).is_ok());
    }

    #[test]
    fn modern_7_the_name_header_is_checked_first() {
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "other"),
        ]);
        let e = check(
            &h,
            &mirrored_call(r#"{"value":"a"}"#),
            &MODERN,
            &mirrored_tools(),
        );
        assert_eq!(e, Err(Invalid::NameHeader));
    }

    #[test]
    fn modern_7_too_many_param_headers_are_refused_for_a_tool_with_mirrors() {
        let names: Vec<String> = (0..5).map(|i| format!("mcp-param-x{i}")).collect();
        let mut params: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "1")).collect();
        params.push(("mcp-param-value", "a"));
        // `headers()` keeps 4.
        let e = param_check(&params, r#"{"value":"a"}"#).unwrap_err();
        assert_eq!(e, Invalid::TooManyParamHeaders { sent: 6, max: 4 });
        assert_eq!(
            e.status_and_code(),
            (StatusCode::BAD_REQUEST, ErrorCode::HEADER_MISMATCH)
        );
        assert!(e.message().contains("6 Mcp-Param-*"), "{}", e.message());
    }

    #[test]
    fn modern_7_modern_24_a_notification_is_never_checked_for_mirrors() {
        let h = headers(&[("mcp-protocol-version", "2026-07-28")]);
        let note = body(
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"mirrored","arguments":{"value":"a"}}}"#,
        );
        assert!(check(&h, &note, &MODERN, &mirrored_tools()).is_ok());
    }
}
