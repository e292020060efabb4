//! The `mcpwire` binary: everything is in the library ([`mcpwire_cli::run`]).

use std::ffi::OsString;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    mcpwire_cli::run(&args)
}
