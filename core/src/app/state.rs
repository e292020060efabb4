//! `requestState` of multi round-trip requests (MODERN-23), sealed with an HMAC.
//!
//! A 2026-07-28 server that needs more from the client answers `input_required` with
//! the questions and, optionally, a `requestState` the client echoes byte for byte on
//! its retry. The client is not to be trusted with it: a handler that reads its state
//! back must know it is the one it handed out, for this method and this tool (or
//! prompt, or resource). The layer seals every state a handler hands out and opens
//! every one a client sends back before the handler sees it, so a handler writes and
//! reads plain text and a tampered or foreign state never reaches it.
//!
//! A sealed state is `<state in base64url>.<HMAC-SHA256 in base64url>`, the MAC taken
//! over a version tag, the method, the name the request mirrors in `Mcp-Name`
//! (`params.name`, or `params.uri` for `resources/read`) and the state. It protects
//! integrity, not secrecy: the state travels readable, so a handler puts no secret in
//! it. It carries no expiry (the layer reads no clock; a handler that needs one writes
//! a time into its state) and is not single-use (MODERN-23 asks that only of states
//! whose replay matters, which a handler tracks itself).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};

use crate::Entropy;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Separates the MAC's inputs; names the format, so a later one cannot be confused
/// with it.
const TAG: &[u8] = b"mcpwire requestState v1";

/// The most bytes of a sealed state the layer opens: a state is the handler's, and
/// one this long is an attack, not a retry.
pub const MAX_SEALED_STATE: usize = 64 * 1024;

/// The key that seals `requestState` (32 bytes). Every node that may receive a retry
/// must hold the same key; by default each server draws its own from the injected
/// entropy ([`StateKey::from_entropy`]).
#[derive(Clone)]
pub struct StateKey([u8; 32]);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

impl StateKey {
    /// A key of these bytes (shared by the nodes of one deployment).
    pub const fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// A key drawn from `entropy`.
    pub fn from_entropy(entropy: &mut dyn Entropy) -> Self {
        let mut bytes = [0; 32];
        entropy.fill(&mut bytes);
        Self(bytes)
    }

    fn mac(&self, method: &str, name: &str, state: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        for part in [TAG, method.as_bytes(), name.as_bytes()] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.update(state);
        mac
    }

    /// `state` sealed for a request of `method` naming `name`.
    pub fn seal(&self, method: &str, name: &str, state: &str) -> String {
        let tag = self
            .mac(method, name, state.as_bytes())
            .finalize()
            .into_bytes();
        let mut sealed = URL_SAFE_NO_PAD.encode(state);
        sealed.push('.');
        URL_SAFE_NO_PAD.encode_string(tag, &mut sealed);
        sealed
    }

    /// The state `sealed` holds, if this key sealed it for `method` and `name`.
    ///
    /// # Errors
    /// [`StateError`] when it is too long, malformed, sealed for another request or by
    /// another key, or altered by a single bit.
    pub fn open(&self, method: &str, name: &str, sealed: &str) -> Result<String, StateError> {
        if sealed.len() > MAX_SEALED_STATE {
            return Err(StateError::TooLong);
        }
        let (state, tag) = sealed.split_once('.').ok_or(StateError::Malformed)?;
        let state = URL_SAFE_NO_PAD
            .decode(state)
            .map_err(|_| StateError::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| StateError::Malformed)?;
        // Canonical encodings only: base64 with spare bits set would open to the same
        // bytes, and "byte for byte" means one spelling.
        let state = String::from_utf8(state).map_err(|_| StateError::Malformed)?;
        if URL_SAFE_NO_PAD.encode(&state).len() + 1 + URL_SAFE_NO_PAD.encode(&tag).len()
            != sealed.len()
        {
            return Err(StateError::Malformed);
        }
        self.mac(method, name, state.as_bytes())
            .verify_slice(&tag)
            .map_err(|_| StateError::Forged)?;
        Ok(state)
    }
}

/// Why a `requestState` a client sent back was refused (answered -32602).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateError {
    /// Longer than [`MAX_SEALED_STATE`].
    TooLong,
    /// Not a state this layer hands out (not two base64url parts, not UTF-8).
    Malformed,
    /// Its MAC does not hold: altered, sealed by another key, or for another request.
    Forged,
    /// Not a string.
    NotText,
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::TooLong => "requestState is too long",
            Self::Malformed => "requestState is not one this server handed out",
            Self::Forged => "requestState integrity check failed",
            Self::NotText => "requestState must be a string",
        })
    }
}

impl std::error::Error for StateError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> StateKey {
        StateKey::new([byte; 32])
    }

    #[test]
    fn modern_23_a_sealed_state_opens_to_itself_for_its_own_request_only() {
        let sealed = key(1).seal("tools/call", "book", "step=2;name=Ann");
        assert_eq!(
            key(1).open("tools/call", "book", &sealed).as_deref(),
            Ok("step=2;name=Ann")
        );
        assert_eq!(
            key(2).open("tools/call", "book", &sealed),
            Err(StateError::Forged),
            "another key"
        );
        assert_eq!(
            key(1).open("tools/call", "other", &sealed),
            Err(StateError::Forged),
            "another tool"
        );
        assert_eq!(
            key(1).open("prompts/get", "book", &sealed),
            Err(StateError::Forged),
            "another method"
        );
    }

    #[test]
    fn modern_23_a_tampered_state_is_refused() {
        let k = key(7);
        let sealed = k.seal("tools/call", "t", "ok");
        for bad in [
            format!("{sealed}-TAMPERED"),
            format!("{sealed}A"),
            sealed.replacen('.', "", 1),
            format!("x{sealed}"),
            String::new(),
            ".".into(),
            "not sealed".into(),
        ] {
            assert!(k.open("tools/call", "t", &bad).is_err(), "{bad:?} opened");
        }
        // Every single-character change to the state part is caught.
        let dot = sealed.find('.').unwrap();
        for at in 0..dot {
            let mut bytes = sealed.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(bytes).unwrap();
            assert!(k.open("tools/call", "t", &altered).is_err(), "{altered}");
        }
    }

    #[test]
    fn the_name_and_method_are_length_prefixed_so_their_boundary_cannot_move() {
        let sealed = key(3).seal("ab", "c", "s");
        assert_eq!(key(3).open("a", "bc", &sealed), Err(StateError::Forged));
    }

    #[test]
    fn an_overlong_state_is_refused_before_decoding() {
        let long = "A".repeat(MAX_SEALED_STATE + 1);
        assert_eq!(key(1).open("m", "n", &long), Err(StateError::TooLong));
    }

    #[test]
    fn a_key_from_entropy_is_the_entropy_and_never_printed() {
        struct Fixed;
        impl Entropy for Fixed {
            fn fill(&mut self, dst: &mut [u8]) {
                dst.fill(9);
            }
        }
        let drawn = StateKey::from_entropy(&mut Fixed);
        let sealed = key(9).seal("m", "n", "s");
        assert_eq!(drawn.open("m", "n", &sealed).as_deref(), Ok("s"));
        assert_eq!(format!("{drawn:?}"), "StateKey(..)");
    }
}
