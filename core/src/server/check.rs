//! Reading the request head: media types, `Origin` and `Host` against their allow-lists,
//! and the MCP headers. Pure functions of the head, so each rule is tested alone.

use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_TYPE, HOST, ORIGIN};

use super::config::Allow;

/// `Mcp-Session-Id` (SESSION-1; header names are case-insensitive, so V3's
/// `MCP-Session-Id` is the same header).
pub(super) const SESSION_ID: &str = "mcp-session-id";
/// `MCP-Protocol-Version` (VERSION-1).
pub(super) const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Last-Event-ID` (SSE-PARSE-20, RESUME-4).
pub(super) const LAST_EVENT_ID: &str = "last-event-id";

const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Whether the `Accept` header admits `ty/sub`: a listed `ty/sub`, `ty/*` or `*/*` with a
/// non-zero `q`. Parameters other than `q` are ignored; an absent header admits nothing
/// (HTTP-POST-3 and HTTP-GET-2 make listing the types a MUST).
pub(super) fn accepts(headers: &HeaderMap, ty: &str, sub: &str) -> bool {
    headers.get_all(ACCEPT).iter().any(|value| {
        let Ok(value) = value.to_str() else {
            return false;
        };
        value.split(',').any(|range| {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                let p = p.trim();
                p.len() >= 2
                    && p[..2].eq_ignore_ascii_case("q=")
                    && p[2..].trim().parse::<f32>().is_ok_and(|q| q <= 0.0)
            });
            let Some((t, s)) = media.split_once('/') else {
                return false;
            };
            !refused
                && (t == "*" && s == "*"
                    || t.eq_ignore_ascii_case(ty) && (s == "*" || s.eq_ignore_ascii_case(sub)))
        })
    })
}

/// Whether `Content-Type` is `application/json` (parameters such as `charset` allowed).
pub(super) fn is_json_body(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// The one value of a header, as text; `Err` when it is repeated or not visible ASCII.
pub(super) fn single<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, ()> {
    let mut all = headers.get_all(name).iter();
    let Some(first) = all.next() else {
        return Ok(None);
    };
    if all.next().is_some() {
        return Err(());
    }
    first.to_str().map(|v| Some(v.trim())).map_err(|_| ())
}

/// Whether the request's `Origin` is allowed. A request without one (a non-browser
/// client) is not refused by this rule (SEC-2).
pub(super) fn origin_allowed(headers: &HeaderMap, allow: &Allow) -> bool {
    let Some(origin) = headers.get(ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    match allow {
        Allow::Any => true,
        Allow::Loopback => origin
            .split_once("://")
            .filter(|(scheme, _)| {
                scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
            })
            .is_some_and(|(_, authority)| is_loopback_authority(authority)),
        Allow::List(list) => list.iter().any(|entry| authority_matches(entry, origin)),
    }
}

/// Whether the request's `Host` (or, in HTTP/2, the URI's authority) is allowed: DNS
/// rebinding sends a browser to an attacker's name that resolves to loopback (SEC-7). A
/// request naming no host is refused unless the policy is [`Allow::Any`].
pub(super) fn host_allowed(headers: &HeaderMap, uri: &http::Uri, allow: &Allow) -> bool {
    if *allow == Allow::Any {
        return true;
    }
    let host = match headers.get(HOST) {
        Some(h) => h.to_str().ok(),
        None => uri.authority().map(|a| a.as_str()),
    };
    let Some(host) = host else {
        return false;
    };
    match allow {
        Allow::Any => true,
        Allow::Loopback => is_loopback_authority(host),
        Allow::List(list) => list.iter().any(|entry| authority_matches(entry, host)),
    }
}

/// `name` or `name:port` (the name may be a bracketed IPv6 literal).
fn split_port(authority: &str) -> (&str, Option<&str>) {
    let (name, rest) = match authority.strip_prefix('[') {
        Some(v6) => match v6.find(']') {
            Some(end) => authority.split_at(end + 2),
            None => return (authority, None),
        },
        None => match authority.rfind(':') {
            Some(colon) => authority.split_at(colon),
            None => return (authority, None),
        },
    };
    match rest.strip_prefix(':') {
        Some(port) => (name, Some(port)),
        None if rest.is_empty() => (name, None),
        None => (authority, None),
    }
}

fn is_loopback_authority(authority: &str) -> bool {
    let (name, port) = split_port(authority);
    port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && LOOPBACK.iter().any(|l| l.eq_ignore_ascii_case(name))
}

/// `value` against an allow-list entry: equal, or equal but for a port the entry omits.
fn authority_matches(entry: &str, value: &str) -> bool {
    if entry.eq_ignore_ascii_case(value) {
        return true;
    }
    // Compare everything before the port: for an origin, "scheme://name".
    let (scheme, rest) = match value.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, value),
    };
    let (entry_scheme, entry_rest) = match entry.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, entry),
    };
    let same_scheme = match (scheme, entry_scheme) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        (None, None) => true,
        _ => false,
    };
    let (name, _) = split_port(rest);
    let (entry_name, entry_port) = split_port(entry_rest);
    same_scheme && entry_port.is_none() && name.eq_ignore_ascii_case(entry_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn http_post_3_accept_lists_both_types_wildcards_and_q_zero() {
        let both = headers(&[("accept", "application/json, text/event-stream")]);
        assert!(accepts(&both, "application", "json") && accepts(&both, "text", "event-stream"));
        let split = headers(&[("accept", "application/json"), ("accept", "text/*;q=0.5")]);
        assert!(accepts(&split, "text", "event-stream"));
        let any = headers(&[("accept", "*/*")]);
        assert!(accepts(&any, "text", "event-stream"));
        let refused = headers(&[("accept", "application/json, text/event-stream;q=0")]);
        assert!(!accepts(&refused, "text", "event-stream"));
        assert!(!accepts(&HeaderMap::new(), "application", "json"));
        assert!(!accepts(
            &headers(&[("accept", "text/html")]),
            "application",
            "json"
        ));
        assert!(!accepts(
            &headers(&[("accept", "garbage")]),
            "application",
            "json"
        ));
    }

    #[test]
    fn content_type_json_with_parameters_only() {
        assert!(is_json_body(&headers(&[(
            "content-type",
            "application/json"
        )])));
        assert!(is_json_body(&headers(&[(
            "content-type",
            "Application/JSON; charset=utf-8"
        )])));
        assert!(!is_json_body(&headers(&[("content-type", "text/plain")])));
        assert!(!is_json_body(&HeaderMap::new()));
    }

    #[test]
    fn sec_1_sec_2_loopback_origins_and_lists() {
        let ok = |o: &'static str, allow: &Allow| origin_allowed(&headers(&[("origin", o)]), allow);
        assert!(origin_allowed(&HeaderMap::new(), &Allow::Loopback));
        for o in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:8080",
        ] {
            assert!(ok(o, &Allow::Loopback), "{o}");
        }
        for o in [
            "http://evil.example",
            "http://localhost.evil.example",
            "null",
            "file://localhost",
            "http://127.0.0.1:",
            "http://127.0.0.1:80x",
        ] {
            assert!(!ok(o, &Allow::Loopback), "{o}");
        }
        let list = Allow::List(vec![
            "https://app.example".into(),
            "http://a.test:8080".into(),
        ]);
        assert!(ok("https://APP.example:444", &list));
        assert!(ok("http://a.test:8080", &list));
        assert!(!ok("http://a.test:8081", &list));
        assert!(!ok("http://app.example", &list));
        assert!(ok("http://anything", &Allow::Any));
    }

    #[test]
    fn sec_7_host_against_dns_rebinding() {
        let uri = http::Uri::from_static("/mcp");
        let ok =
            |h: &'static str, allow: &Allow| host_allowed(&headers(&[("host", h)]), &uri, allow);
        assert!(ok("127.0.0.1:8080", &Allow::Loopback));
        assert!(ok("localhost", &Allow::Loopback));
        assert!(ok("[::1]:9", &Allow::Loopback));
        assert!(!ok("rebind.attacker.example:8080", &Allow::Loopback));
        assert!(!host_allowed(&HeaderMap::new(), &uri, &Allow::Loopback));
        let h2 = http::Uri::from_static("http://localhost:1/mcp");
        assert!(host_allowed(&HeaderMap::new(), &h2, &Allow::Loopback));
        let list = Allow::List(vec!["mcp.example".into()]);
        assert!(ok("mcp.example:443", &list) && !ok("other.example", &list));
    }

    #[test]
    fn single_header_values() {
        let h = headers(&[("mcp-session-id", "abc"), ("x", "1"), ("x", "2")]);
        assert_eq!(single(&h, SESSION_ID), Ok(Some("abc")));
        assert_eq!(single(&h, "x"), Err(()));
        assert_eq!(single(&h, "absent"), Ok(None));
    }
}
