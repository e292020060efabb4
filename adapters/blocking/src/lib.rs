//! Drives the mcpwire core with blocking IO.
