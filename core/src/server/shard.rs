//! Splitting one endpoint between several [`Server`](super::Server)s by session
//! ([`Config::shards`]): which shard a request head belongs to.

use http::request::Parts;

use super::check::{SESSION_ID, single};
use super::config::Config;

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
    let path = head.uri.path();
    let id = if path == config.endpoint {
        single(&head.headers, SESSION_ID).ok()??
    } else if config.legacy.as_ref().is_some_and(|l| path == l.messages) {
        head.uri
            .query()?
            .split('&')
            .find_map(|kv| kv.strip_prefix("sessionId="))?
    } else {
        return None;
    };
    let stamp = id
        .get(..2)
        .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))?;
    let stamp = u8::from_str_radix(stamp, 16).ok()?;
    Some(usize::from(stamp) % count.max(1))
}
