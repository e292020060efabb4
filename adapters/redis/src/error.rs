//! What can go wrong between a node and Redis.

use std::fmt;
use std::time::Duration;

/// Why Redis could not be used: at start-up ([`RedisStore::connect`](crate::RedisStore::connect)),
/// or later, as told to [`RedisOptions::with_on_event`](crate::RedisOptions::with_on_event).
/// Its text never holds the URL's password.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum RedisStoreError {
    /// The URL is not a Redis URL.
    InvalidUrl(redis::RedisError),
    /// Redis at `addr` could not be reached, or refused the connection.
    Unreachable {
        /// `host:port` (no credentials).
        addr: String,
        /// What the connection met.
        source: redis::RedisError,
    },
    /// Redis at `addr` did not answer within `after`.
    TimedOut {
        /// `host:port` (no credentials).
        addr: String,
        /// How long it was given.
        after: Duration,
    },
    /// A command failed: the connection broke, or Redis answered an error.
    Command(redis::RedisError),
    /// Redis answered something of a shape the driver does not know (another program's
    /// data under the prefix?): what was expected.
    Unexpected(&'static str),
}

impl RedisStoreError {
    /// Whether this error says Redis cannot be reached now (the connection is gone or
    /// hangs), rather than that it refused one command.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::TimedOut { .. } => true,
            Self::Command(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_unrecoverable_error()
            }
            Self::InvalidUrl(_) | Self::Unexpected(_) => false,
        }
    }
}

impl fmt::Display for RedisStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidUrl(e) => write!(f, "invalid Redis URL: {e}"),
            Self::Unreachable { addr, source } => {
                write!(f, "cannot reach Redis at {addr}: {source}")
            }
            Self::TimedOut { addr, after } => {
                write!(f, "Redis at {addr} did not answer within {after:?}")
            }
            Self::Command(e) => write!(f, "Redis command failed: {e}"),
            Self::Unexpected(what) => write!(f, "unexpected reply from Redis: {what}"),
        }
    }
}

impl std::error::Error for RedisStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::InvalidUrl(e) | Self::Unreachable { source: e, .. } | Self::Command(e) => Some(e),
            Self::TimedOut { .. } | Self::Unexpected(_) => None,
        }
    }
}
