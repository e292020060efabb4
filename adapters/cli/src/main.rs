//! `mcpwire`: the core from a terminal.
fn main() {}
