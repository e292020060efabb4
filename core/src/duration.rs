//! Configured durations, bounded so that `Instant + duration` cannot overflow (which
//! panics): a configuration of `Duration::MAX` means "for ever" and must not take a
//! server down at its first deadline.

use std::time::Duration;

/// A hundred years: longer than any process lives, and far from `Instant`'s limits.
pub(crate) const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// `d`, at most [`FOREVER`].
pub(crate) fn bounded(d: Duration) -> Duration {
    d.min(FOREVER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_duration_added_to_now_does_not_overflow() {
        let now = std::time::Instant::now();
        assert!(now.checked_add(bounded(Duration::MAX)).is_some());
        assert_eq!(bounded(Duration::from_secs(5)), Duration::from_secs(5));
    }
}
