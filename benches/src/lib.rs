//! Corpora and helpers for the mcpwire benches.
