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
//! - [`sim`]: a deterministic simulation of many clients and one server over a faulty
//!   network on a virtual clock, with the properties checked on every seed.

pub mod alloc;
pub mod pair;
pub mod server;
pub mod server_ops;
pub mod sim;

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
