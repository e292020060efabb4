//! Correlation: the client's table of requests awaiting responses, and the server's
//! per-session set of request ids in flight.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::time::Instant;

use super::error::ErrorCode;
use super::id::RequestId;

/// Why the client could not register a request (local limits, not the peer's doing).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PendingError {
    /// The table already holds its maximum number of requests: wait for responses.
    TooMany {
        /// The configured limit.
        limit: usize,
    },
    /// Every integer id has been issued (after 2⁶³ − 1 requests).
    IdsExhausted,
}

impl fmt::Display for PendingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooMany { limit } => write!(f, "more than {limit} requests pending"),
            Self::IdsExhausted => f.write_str("request ids exhausted"),
        }
    }
}

impl std::error::Error for PendingError {}

/// Why the server would not begin handling a request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InFlightError {
    /// Peer violation: the request's id is still in flight in this session (JSONRPC-3).
    Reused(RequestId),
    /// Limit: the session already has its maximum number of requests in flight.
    TooMany {
        /// The configured limit.
        limit: usize,
    },
}

impl InFlightError {
    /// The code of the error response to send for the refused request: -32600 for a
    /// reused id; -32603 for the server's own limit (JSON-RPC has no "busy" code).
    pub const fn jsonrpc_code(&self) -> ErrorCode {
        match self {
            Self::Reused(_) => ErrorCode::INVALID_REQUEST,
            Self::TooMany { .. } => ErrorCode::INTERNAL_ERROR,
        }
    }
}

impl fmt::Display for InFlightError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reused(id) => write!(f, "request id {id} is already in flight"),
            Self::TooMany { limit } => write!(f, "more than {limit} requests in flight"),
        }
    }
}

impl std::error::Error for InFlightError {}

/// What became of a response's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution<T> {
    /// It answered a pending request, which is now complete; here is its token.
    Matched(T),
    /// An id this table issued that is no longer pending: a duplicate response, or one
    /// that arrived after the request was cancelled or expired.
    Stale,
    /// An id this table never issued (another kind, or never handed out).
    Unknown,
}

#[derive(Debug)]
struct Entry<T> {
    token: T,
    deadline: Option<Instant>,
}

/// The client side of correlation (JSONRPC-3, JSONRPC-4, §14.11): issues request ids,
/// remembers each request's caller token and deadline, and matches responses by id,
/// whichever stream they arrive on.
///
/// Ids are the integers 1, 2, 3, … (or from the offset of
/// [`starting_at`](Pending::starting_at)) and are never reused, so a late or duplicate response
/// is recognised ([`Resolution::Stale`]) without remembering finished requests. Lookups
/// are `O(log n)` in a `BTreeMap`; the core keeps no hash map that would need a random
/// seed. Time is an argument: the table never reads a clock.
///
/// # Driving the deadlines
///
/// As every time-driven type of the core: [`poll_timeout`](Self::poll_timeout) gives
/// the earliest deadline; at that time the driver calls
/// [`handle_timeout(now)`](Self::handle_timeout), which expires every request due by
/// `now`, then drains [`poll_expired`](Self::poll_expired) until `None` and fails each
/// request it returns (-32001, and a `notifications/cancelled` to the peer).
///
/// ```
/// use std::time::{Duration, Instant};
/// use mcpwire::jsonrpc::{Pending, Resolution};
///
/// let t0 = Instant::now();
/// let mut pending = Pending::new(16);
/// let id = pending.register("caller", Some(t0 + Duration::from_secs(30)))?;
/// assert_eq!(pending.poll_timeout(), Some(t0 + Duration::from_secs(30)));
///
/// pending.handle_timeout(t0 + Duration::from_secs(31));
/// assert_eq!(pending.poll_expired(), Some((id.clone(), "caller")));
/// assert_eq!(pending.poll_expired(), None);
/// // A response that arrives now is too late.
/// assert_eq!(pending.resolve(&id), Resolution::Stale);
/// # Ok::<(), mcpwire::jsonrpc::PendingError>(())
/// ```
#[derive(Debug)]
pub struct Pending<T> {
    // INVARIANT: every key of `entries` is in first..next; every (deadline, id) in
    // `deadlines` belongs to an entry of `entries` with that deadline, and back. An id in
    // `expired` is in first..next and not in `entries`. entries.len() + expired.len() <= max
    // after every register.
    entries: BTreeMap<i64, Entry<T>>,
    deadlines: BTreeSet<(Instant, i64)>,
    expired: VecDeque<(i64, T)>,
    first: i64,
    next: i64,
    max: usize,
}

impl<T> Pending<T> {
    /// Default for the most requests in flight.
    pub const DEFAULT_MAX: usize = 1024;

    /// An empty table that holds at most `max_pending` requests.
    pub fn new(max_pending: usize) -> Self {
        Self::starting_at(max_pending, 1)
    }

    /// An empty table whose ids count up from `first` (at least 1): tables that must not
    /// issue the same ids (the nodes of a cluster) each start at their own offset.
    pub fn starting_at(max_pending: usize, first: i64) -> Self {
        let first = first.max(1);
        Self {
            entries: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            expired: VecDeque::new(),
            first,
            next: first,
            max: max_pending,
        }
    }

    /// Whether this table issued `id` (pending or not).
    pub fn issued(&self, id: &RequestId) -> bool {
        id.as_int()
            .is_some_and(|n| (self.first..self.next).contains(&n))
    }

    /// Issues the next id for a request and remembers `token` (the caller's handle) until
    /// the response arrives, the request is cancelled, or `deadline` passes.
    ///
    /// # Errors
    /// [`PendingError::TooMany`] when the table is full: expired requests not yet taken
    /// with [`poll_expired`](Self::poll_expired) count against the limit too, so memory
    /// stays bounded however the driver polls. [`PendingError::IdsExhausted`].
    pub fn register(
        &mut self,
        token: T,
        deadline: Option<Instant>,
    ) -> Result<RequestId, PendingError> {
        if self.entries.len() + self.expired.len() >= self.max {
            return Err(PendingError::TooMany { limit: self.max });
        }
        let id = self.next;
        self.next = id.checked_add(1).ok_or(PendingError::IdsExhausted)?;
        if let Some(at) = deadline {
            self.deadlines.insert((at, id));
        }
        self.entries.insert(id, Entry { token, deadline });
        Ok(RequestId::int(id))
    }

    /// Matches a response (or error response) id to its request and completes it.
    pub fn resolve(&mut self, id: &RequestId) -> Resolution<T> {
        match id.as_int() {
            Some(n) => match self.remove(n) {
                Some(token) => Resolution::Matched(token),
                None if (self.first..self.next).contains(&n) => Resolution::Stale,
                None => Resolution::Unknown,
            },
            None => Resolution::Unknown,
        }
    }

    /// Gives up on a pending request and returns its token; a later response is
    /// [`Resolution::Stale`]. The caller tells the peer with a `notifications/cancelled`
    /// ([`MessageBuf::push_cancelled`](super::MessageBuf::push_cancelled)).
    pub fn cancel(&mut self, id: &RequestId) -> Option<T> {
        self.remove(id.as_int()?)
    }

    /// Removes every pending request and returns them with their tokens, in id order:
    /// when the connection or the session is gone (fail each with -32000, or re-send).
    /// Ids keep counting, so a late response to a drained request is
    /// [`Resolution::Stale`], never matched to a newer request. Requests already expired
    /// stay queued for [`poll_expired`](Self::poll_expired): each token comes out once.
    pub fn drain(&mut self) -> impl Iterator<Item = (RequestId, T)> + use<T> {
        self.deadlines.clear();
        std::mem::take(&mut self.entries)
            .into_iter()
            .map(|(id, entry)| (RequestId::int(id), entry.token))
    }

    /// The earliest deadline of a pending request: when to call
    /// [`handle_timeout`](Self::handle_timeout).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(at, _)| at)
    }

    /// Expires every pending request whose deadline is at or before `now`, earliest
    /// deadline first (ties by id); [`poll_expired`](Self::poll_expired) hands them out.
    /// An expired request is no longer pending: a response to it is
    /// [`Resolution::Stale`]. Calling it early is a no-op.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            // INVARIANT: a deadline belongs to an entry.
            if let Some(entry) = self.entries.remove(&id) {
                self.expired.push_back((id, entry.token));
            }
        }
    }

    /// The next request that [`handle_timeout`](Self::handle_timeout) expired, with its
    /// token; call until `None`.
    #[must_use]
    pub fn poll_expired(&mut self) -> Option<(RequestId, T)> {
        self.expired
            .pop_front()
            .map(|(id, token)| (RequestId::int(id), token))
    }

    /// The token of pending request `id`, without completing it: a server checks that a
    /// response comes from the session the request was sent in before it resolves it.
    pub fn token(&self, id: &RequestId) -> Option<&T> {
        id.as_int()
            .and_then(|n| self.entries.get(&n))
            .map(|e| &e.token)
    }

    /// Whether `id` is pending.
    pub fn contains(&self, id: &RequestId) -> bool {
        id.as_int().is_some_and(|n| self.entries.contains_key(&n))
    }

    /// Requests pending (expired ones not counted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no request is pending.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn remove(&mut self, id: i64) -> Option<T> {
        let entry = self.entries.remove(&id)?;
        if let Some(at) = entry.deadline {
            self.deadlines.remove(&(at, id));
        }
        Some(entry.token)
    }
}

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX)
    }
}

/// The server side of correlation: the ids of one session's requests still being
/// handled, so a peer that reuses an id in flight is caught (JSONRPC-3) instead of
/// having two responses with one id. Bounded, so a peer cannot grow it without limit.
#[derive(Debug)]
pub struct InFlight {
    ids: BTreeSet<RequestId>,
    max: usize,
}

impl InFlight {
    /// Default for the most requests in flight per session.
    pub const DEFAULT_MAX: usize = 1024;

    /// An empty set that admits at most `max_in_flight` requests.
    pub fn new(max_in_flight: usize) -> Self {
        Self {
            ids: BTreeSet::new(),
            max: max_in_flight,
        }
    }

    /// Records that the request `id` is being handled.
    ///
    /// # Errors
    /// [`InFlightError::Reused`] when `id` is already in flight (answer -32600 and leave
    /// the first request alone); [`InFlightError::TooMany`] when the set is full.
    pub fn begin(&mut self, id: &RequestId) -> Result<(), InFlightError> {
        if self.ids.contains(id) {
            return Err(InFlightError::Reused(id.clone()));
        }
        if self.ids.len() >= self.max {
            return Err(InFlightError::TooMany { limit: self.max });
        }
        self.ids.insert(id.clone());
        Ok(())
    }

    /// Records that the response to `id` was sent (or the request was cancelled);
    /// returns whether it was in flight.
    pub fn end(&mut self, id: &RequestId) -> bool {
        self.ids.remove(id)
    }

    /// Whether `id` is in flight.
    pub fn contains(&self, id: &RequestId) -> bool {
        self.ids.contains(id)
    }

    /// Requests in flight.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

impl Default for InFlight {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn jsonrpc_3_ids_are_never_reused_and_late_answers_are_stale() {
        let mut p = Pending::new(8);
        let a = p.register("a", None).unwrap();
        let b = p.register("b", None).unwrap();
        assert_ne!(a, b);
        assert_eq!(p.resolve(&b), Resolution::Matched("b"));
        assert_eq!(p.resolve(&b), Resolution::Stale);
        assert_eq!(p.cancel(&a), Some("a"));
        assert_eq!(p.resolve(&a), Resolution::Stale);
        let c = p.register("c", None).unwrap();
        assert!(c != a && c != b);
        assert_eq!(p.resolve(&RequestId::int(99)), Resolution::Unknown);
        assert_eq!(p.resolve(&RequestId::string("3")), Resolution::Unknown);
        assert_eq!(p.resolve(&RequestId::int(0)), Resolution::Unknown);
        assert!(p.contains(&c) && p.len() == 1);
    }

    #[test]
    fn deadlines_expire_in_order_and_not_early() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut p = Pending::new(8);
        let late = p.register(2, Some(t0 + 2 * s)).unwrap();
        let early = p.register(1, Some(t0 + s)).unwrap();
        let never = p.register(0, None).unwrap();
        assert_eq!(p.poll_timeout(), Some(t0 + s));
        p.handle_timeout(t0);
        assert_eq!(p.poll_expired(), None);
        assert_eq!(p.len(), 3);
        p.handle_timeout(t0 + 3 * s);
        assert_eq!(p.poll_timeout(), None);
        assert_eq!(p.len(), 1);
        assert!(!p.contains(&early));
        assert_eq!(p.poll_expired(), Some((early, 1)));
        assert_eq!(p.poll_expired(), Some((late.clone(), 2)));
        assert_eq!(p.poll_expired(), None);
        assert_eq!(p.resolve(&late), Resolution::Stale);
        assert_eq!(p.resolve(&never), Resolution::Matched(0));
    }

    #[test]
    fn resolving_removes_the_deadline() {
        let t0 = Instant::now();
        let mut p = Pending::new(8);
        let id = p.register((), Some(t0)).unwrap();
        assert_eq!(p.resolve(&id), Resolution::Matched(()));
        assert_eq!(p.poll_timeout(), None);
        p.handle_timeout(t0);
        assert_eq!(p.poll_expired(), None);
    }

    #[test]
    fn drain_fails_everything_and_later_answers_are_stale() {
        let t0 = Instant::now();
        let mut p = Pending::new(8);
        let a = p.register("a", Some(t0)).unwrap();
        let b = p.register("b", None).unwrap();
        assert_eq!(p.drain().collect::<Vec<_>>(), [(a.clone(), "a"), (b, "b")]);
        assert!(p.is_empty() && p.poll_timeout().is_none());
        let c = p.register("c", None).unwrap();
        assert_ne!(c, a);
        assert_eq!(p.resolve(&a), Resolution::Stale);
        assert_eq!(p.resolve(&c), Resolution::Matched("c"));
    }

    #[test]
    fn expired_requests_not_yet_polled_count_against_the_limit() {
        let t0 = Instant::now();
        let mut p = Pending::new(1);
        let id = p.register("a", Some(t0)).unwrap();
        p.handle_timeout(t0);
        assert!(p.is_empty());
        assert_eq!(
            p.register("b", None),
            Err(PendingError::TooMany { limit: 1 })
        );
        // Drained requests do not include expired ones: each token comes out once.
        assert_eq!(p.drain().count(), 0);
        assert_eq!(p.poll_expired(), Some((id, "a")));
        assert!(p.register("b", None).is_ok());
    }

    #[test]
    fn the_table_is_bounded() {
        let mut p = Pending::new(2);
        p.register((), None).unwrap();
        let id = p.register((), None).unwrap();
        assert_eq!(
            p.register((), None),
            Err(PendingError::TooMany { limit: 2 })
        );
        p.resolve(&id);
        assert!(p.register((), None).is_ok());
    }

    #[test]
    fn jsonrpc_3_server_detects_an_id_reused_in_flight() {
        let mut f = InFlight::new(2);
        let one = RequestId::int(1);
        f.begin(&one).unwrap();
        let reused = f.begin(&one).unwrap_err();
        assert_eq!(reused, InFlightError::Reused(one.clone()));
        assert_eq!(reused.jsonrpc_code(), ErrorCode::INVALID_REQUEST);
        f.begin(&RequestId::string("1")).unwrap();
        assert_eq!(
            f.begin(&RequestId::int(2)),
            Err(InFlightError::TooMany { limit: 2 })
        );
        assert!(f.end(&one));
        assert!(!f.end(&one));
        f.begin(&one).unwrap();
    }
}
