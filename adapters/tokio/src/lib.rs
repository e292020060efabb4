//! Drives the mcpwire core with tokio IO.
