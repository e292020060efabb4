//! Reference implementations and shared helpers for mcpwire's tests.
//!
//! - [`reference::sse`]: a spec-literal WHATWG `text/event-stream` decoder and a driver
//!   that runs mcpwire's decoder into the same owned form, for differential tests, property
//!   tests and fuzz targets. Depends only on `mcpwire` and `bytes`, so a cargo-fuzz crate
//!   can use it too.
//! - [`reference::resume`]: the canonical event id rule, written from its documented
//!   definition, for the event id property test and fuzz target.
//! - [`alloc`]: a counting global allocator for the allocation tests.
//! - [`server`]: a driver for `mcpwire::server::Server` on a virtual clock, for the
//!   server's requirement tests, properties and fuzz target.
//! - [`pair`]: a `Client` and a `Server` joined in memory on one virtual clock, for the
//!   client's requirement tests.
//! - [`server_ops`]: an op model of a server's life (client moves, time, the
//!   application's sends) built from bytes, run with every invariant checked after each
//!   op; shared by the `server_props` proptest and the `server_requests` fuzz target.
//! - [`shards`]: several servers serving one endpoint as its shards, driven as one (the
//!   op model runs on one to three of them).
//! - [`sim`]: a deterministic simulation of many clients and one server over a faulty
//!   network on a virtual clock, with the properties checked on every seed.
//! - [`splitmix64`]: the one 64-bit mixer behind every seeded source of the tests.
//! - [`cluster`]: several servers as the nodes of one cluster over a shared store kept
//!   in memory, the store driver contract performed literally.
//! - [`cluster_ops`]: an op model of a cluster under faults (clients resuming on any
//!   node, the store and notices coming and going, a node killed, garbage from the
//!   store), run by the `cluster_props` proptest and the `server_cluster` fuzz target.
//! - [`bridge`]: a stdio gateway in front of a server, its children played by the test;
//!   [`bridge_ops`]: an op model of it (sessions and 2026-07-28 calls, the children's
//!   answers, questions, garbage, exits and stalls), run by the `bridge_props` proptest
//!   and the `bridge_gateway` fuzz target.
//! - [`redis_server`]: a real `redis-server` of a test's own on 127.0.0.1 (installed with
//!   apt-get when missing), stopped and restarted on the same port at will.
//! - [`round_robin`]: a TCP proxy on 127.0.0.1 handing each new connection to the next
//!   of several upstreams, whose set can change and whose connections can all be cut.
//! - [`cutting_proxy`] (feature `tokio`): a TCP proxy on tokio that cuts one connection
//!   in N at a pseudo-random byte, for the chaos tests.

pub mod alloc;
pub mod bridge;
pub mod bridge_ops;
pub mod cluster;
pub mod cluster_ops;
#[cfg(feature = "tokio")]
pub mod cutting_proxy;
pub mod pair;
pub mod redis_server;
pub mod round_robin;
pub mod server;
pub mod server_ops;
pub mod shards;
pub mod sim;

/// SplitMix64's increment, the golden ratio in 64 bits: a generator's state advances by
/// it once per output.
pub const SPLITMIX64_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64 (Steele, Lea, Flood 2014): the output for generator state `x`, which is
/// `x` advanced by [`SPLITMIX64_GAMMA`] and then mixed. A generator yields
/// `splitmix64(state)` and adds the gamma to `state`; `splitmix64(0)` is the first
/// output of a generator seeded with 0. Not secure; tests only.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(SPLITMIX64_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Spec-literal oracles: naive transcriptions of the specifications the core implements.
pub mod reference {
    pub mod resume;
    pub mod sse;
}

/// The README's Rust examples, compiled and run as doc tests, so the README stays true to
/// the code.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;

#[cfg(test)]
mod tests {
    use super::{SPLITMIX64_GAMMA, splitmix64};

    #[test]
    fn splitmix64_matches_the_reference_sequence_for_seed_0() {
        // The first outputs of the reference SplitMix64 (splitmix64.c) seeded with 0.
        let mut state = 0u64;
        let outputs: Vec<u64> = (0..3)
            .map(|_| {
                let z = splitmix64(state);
                state = state.wrapping_add(SPLITMIX64_GAMMA);
                z
            })
            .collect();
        assert_eq!(
            outputs,
            [
                0xe220_a839_7b1d_cdaf,
                0x6e78_9e6a_a1b9_65f4,
                0x06c4_5d18_8009_454f
            ]
        );
    }
}
