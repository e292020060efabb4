//! Splitting one endpoint between several [`Server`](super::Server)s by session
//! ([`Config::shards`]): which shard a request head belongs to.

use http::request::Parts;

use super::check::{SESSION_ID, single};
use super::config::Config;
use super::route::{Served, served_path};

/// The shard, of `count` built with [`Config::shards`], that holds the session `head`
/// names: by its `Mcp-Session-Id` on the endpoint, or its `sessionId` query parameter on
/// the legacy messages path. `None` when it names none (an `initialize`, a stateless
/// request, a legacy SSE GET, anything refused before a session is looked up): any shard
/// gives the same answer, so a driver may pick one by load or in turn.
///
/// A session-less request's state lives in its own exchange, so every later request
/// that touches a session's state (its GET stream, a resume, an answer to its server
/// request, a cancel, DELETE) names the session and reaches the shard that minted it.
/// An id no shard minted maps to some shard, which answers 404 as an unsharded server
/// would (SESSION-7).
///
/// `config` gives the paths; a `count` of 0 is taken as 1.
pub fn shard_of(config: &Config, count: usize, head: &Parts) -> Option<usize> {
    // The path as the server reads it, nested under a router's prefix or not.
    let id = match served_path(config, head.uri.path())? {
        Served::Endpoint => single(&head.headers, SESSION_ID).ok()??,
        Served::LegacyMessages => head
            .uri
            .query()?
            .split('&')
            .find_map(|kv| kv.strip_prefix("sessionId="))?,
        Served::LegacySse => return None,
    };
    let stamp = id
        .get(..2)
        .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))?;
    let stamp = u8::from_str_radix(stamp, 16).ok()?;
    Some(usize::from(stamp) % count.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(path: &str, session: Option<&str>) -> Parts {
        let mut b = http::Request::post(path);
        if let Some(s) = session {
            b = b.header(SESSION_ID, s);
        }
        b.body(()).unwrap().into_parts().0
    }

    /// HTTP-POST-1: nested under a router that strips `/mcp`, a session's request still
    /// reaches the shard that minted it.
    #[test]
    fn http_post_1_a_nested_request_goes_to_its_sessions_shard() {
        let config = Config::new().with_legacy(Some(super::super::LegacyPaths::default()));
        let id = "05aa00000000000000000000000000ff";
        assert_eq!(shard_of(&config, 4, &head("/mcp", Some(id))), Some(1));
        assert_eq!(shard_of(&config, 4, &head("/", Some(id))), Some(1));
        let legacy = format!("/messages?sessionId={id}");
        assert_eq!(shard_of(&config, 4, &head(&legacy, None)), Some(1));
        assert_eq!(shard_of(&config, 4, &head("/elsewhere", Some(id))), None);
        assert_eq!(shard_of(&config, 4, &head("/sse", None)), None);
    }
}
