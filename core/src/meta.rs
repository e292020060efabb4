//! The `_meta` keys of revision 2026-07-28 (MODERN-3, MODERN-13, MODERN-21): one
//! vocabulary for the server's checks, the application layer and the client.

/// The revision a request speaks (MODERN-3, MODERN-4).
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The client's capabilities on every request (MODERN-3, MODERN-20).
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The client's identity on every request (MODERN-3; optional for servers to require).
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The server's identity on every result (MODERN-3).
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The least severe log level the client wants for a request (MODERN-21).
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// What ties a notification to its `subscriptions/listen` (MODERN-13).
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
