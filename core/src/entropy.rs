//! [`Entropy`]: the randomness the state machines need, injected.

/// The source of the randomness the state machines need: session ids and the event
/// store's epoch (server), reconnection jitter (client). The core draws none itself: an
/// adapter passes the operating system's generator, a test or a simulation a seeded one,
/// so a run can be replayed exactly. A session id takes 16 bytes (128 bits, SESSION-2),
/// so the source must be cryptographically secure in production.
pub trait Entropy {
    /// Fills `dst` with random bytes.
    fn fill(&mut self, dst: &mut [u8]);
}

impl<F: FnMut(&mut [u8])> Entropy for F {
    fn fill(&mut self, dst: &mut [u8]) {
        self(dst)
    }
}
