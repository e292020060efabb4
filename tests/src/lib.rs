//! Reference implementations and shared helpers for mcpwire's tests.
