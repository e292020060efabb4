//! [`Entropy`]: the randomness the state machines need, injected; [`OsEntropy`], the
//! operating system's generator, the source to pass in production.

/// The source of the randomness the state machines need: session ids and the event
/// store's epoch (server), reconnection jitter (client). The core draws none itself: an
/// adapter passes the operating system's generator ([`OsEntropy`]), a test or a
/// simulation a seeded one, so a run can be replayed exactly. A session id takes 16
/// bytes (128 bits, SESSION-2), so the source must be cryptographically secure in
/// production: a constant or a counter lets anyone guess the session ids, and a server
/// whose source repeats mints one session and then refuses the next (503, "the entropy
/// source repeats").
pub trait Entropy {
    /// Fills `dst` with random bytes.
    fn fill(&mut self, dst: &mut [u8]);
}

impl<F: FnMut(&mut [u8])> Entropy for F {
    fn fill(&mut self, dst: &mut [u8]) {
        self(dst)
    }
}

/// The operating system's random generator (`getrandom(2)` on Linux, `getentropy` on
/// macOS, `ProcessPrng` on Windows, through the [`getrandom`] crate): the [`Entropy`]
/// to pass in production, `Box::new(mcpwire::OsEntropy)`.
///
/// The state machines never draw randomness themselves; this is a source the driver
/// hands them, like any other. It is behind the default cargo feature `os-entropy`:
/// with `default-features = false` the core has no dependency on the operating
/// system's generator (for `wasm32-unknown-unknown`, where `getrandom` needs a backend
/// chosen, or for a driver that brings its own).
///
/// ```
/// use mcpwire::server::{Config, Server};
///
/// let server = Server::new(Config::new(), Box::new(mcpwire::OsEntropy));
/// # drop(server);
/// ```
///
/// # Panics
///
/// `fill` panics if the operating system's generator fails (it has no entropy to give,
/// or the platform has none). Without it no session id is safe, so it stops rather than
/// guess.
#[cfg(feature = "os-entropy")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OsEntropy;

#[cfg(feature = "os-entropy")]
impl Entropy for OsEntropy {
    fn fill(&mut self, dst: &mut [u8]) {
        if let Err(e) = getrandom::fill(dst) {
            panic!("the operating system's random generator failed: {e}");
        }
    }
}

#[cfg(all(test, feature = "os-entropy"))]
mod tests {
    use super::{Entropy, OsEntropy};

    #[test]
    fn os_entropy_fills_and_does_not_repeat() {
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        OsEntropy.fill(&mut a);
        OsEntropy.fill(&mut b);
        // Two 128-bit draws are equal, or all zero, with probability 2^-128.
        assert_ne!(a, b);
        assert_ne!(a, [0; 16]);
    }
}
