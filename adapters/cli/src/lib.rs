//! `mcpwire`: the mcpwire core from a terminal. The binary is `src/main.rs`, one call of
//! [`run`]; the commands live in this library so that the end-to-end bench runs the very
//! `mcpwire serve` users run.
//!
//! Each subcommand is a thin driver: it owns the terminal, files and standard streams and
//! hands bytes to the core (through `mcpwire-blocking`); what the bytes mean is decided
//! in `mcpwire`.
//!
//! - `mcpwire serve`: a reference MCP server (its configuration and tools are in
//!   [`reference`](mod@reference), for running it in-process).
//! - `mcpwire bridge --stdio CMD`: a stdio MCP server on HTTP, in every era.
//! - `mcpwire call URL TOOL [JSON-ARGS]`: call one tool.
//! - `mcpwire decode [FILE]`: decode a `text/event-stream` into JSON lines.

#![deny(missing_docs)]

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

mod bridge;
mod call;
mod conformance;
mod decode;
mod log;
mod serve;

/// What `mcpwire serve` serves, to run in-process: its configuration for a command line
/// and its two tools on each adapter. The shared scenario suite (`tests/tests/adapters.rs`)
/// starts both adapters from these, so it speaks to the very server users run.
pub mod reference {
    pub use crate::serve::{blocking_tools, config, tools};
}

/// The top-level usage text; each subcommand adds its own.
const USAGE: &str = "\
mcpwire: the mcpwire protocol core from a terminal

Usage: mcpwire <COMMAND> [ARGS]

Commands:
  serve [OPTIONS]           run a reference MCP server on 127.0.0.1:8080/mcp
  bridge --stdio CMD        serve a stdio MCP server over HTTP, in every era
  call URL TOOL [ARGS]      call one tool of an MCP server, print progress and result
  decode [OPTIONS] [FILE]   decode a text/event-stream into JSON lines
  help [COMMAND]            print this help, or a command's

Options:
  -h, --help                print this help
  -V, --version             print the version

Run `mcpwire <COMMAND> --help` (`mcpwire serve --help`, `mcpwire bridge --help`, `mcpwire call --help`,
`mcpwire decode --help`) for each command's options.
";

/// Exit status for bad usage (1 is for failures of the work itself).
const EXIT_USAGE: u8 = 2;

/// Runs `mcpwire` with `args` (the program name left out): parses the command, runs it,
/// and returns its exit status (2 for bad usage, 1 for a failed command).
pub fn run(args: &[OsString]) -> ExitCode {
    let command = args.first().map(|a| a.to_string_lossy().into_owned());
    match command.as_deref() {
        None => usage_error("mcpwire", "missing command", USAGE),
        Some("-h" | "--help") => print_help(USAGE),
        Some("help") => match args.get(1).map(|a| a.to_string_lossy()).as_deref() {
            None => print_help(USAGE),
            Some("decode") => print_help(decode::USAGE),
            Some("serve") => print_help(serve::USAGE),
            Some("bridge") => print_help(bridge::USAGE),
            Some("call") => print_help(call::USAGE),
            Some(other) => usage_error("mcpwire", &format!("unknown command '{other}'"), USAGE),
        },
        Some("-V" | "--version") => {
            println!("mcpwire {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("decode") => decode::main(&args[1..]),
        Some("serve") => serve::main(&args[1..]),
        Some("bridge") => bridge::main(&args[1..]),
        Some("call") => call::main(&args[1..]),
        Some(other) => usage_error("mcpwire", &format!("unknown command '{other}'"), USAGE),
    }
}

/// Why a command line cannot run, and so how to report it (exit status 2 either way).
#[derive(Debug)]
enum BadUsage {
    /// Its shape is wrong (an unknown option, an option without its value, a missing
    /// argument): reported with the usage text, which shows the shape.
    Shape(String),
    /// A value cannot be right: reported alone, since the message says what is wrong
    /// with it and what to give instead, and the usage text would bury it.
    Value(String),
}

impl BadUsage {
    /// The message, whichever the kind.
    fn message(&self) -> &str {
        match self {
            Self::Shape(m) | Self::Value(m) => m,
        }
    }

    /// Reports it under `prog` (see [`usage_error`] and [`value_error`]).
    fn report(&self, prog: &str, usage: &str) -> ExitCode {
        match self {
            Self::Shape(m) => usage_error(prog, m, usage),
            Self::Value(m) => value_error(prog, m),
        }
    }
}

/// Most errors of a command line are of a value (a file that cannot be read, a number
/// out of range).
impl From<String> for BadUsage {
    fn from(message: String) -> Self {
        Self::Value(message)
    }
}

/// The certificates of the PEM file at `path` (for the option `flag`), at least one.
fn read_pem_certificates(
    flag: &str,
    path: &str,
) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{flag}: cannot read {path}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{flag}: {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{flag}: no certificate in {path}"));
    }
    Ok(certs)
}

/// Runs `work` on a new multi-threaded tokio runtime; a runtime that cannot start is
/// reported under `prog` and fails.
fn block_on(prog: &str, work: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(work),
        Err(e) => {
            eprintln!("{prog}: cannot start the runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints `usage` to stdout and succeeds.
fn print_help(usage: &str) -> ExitCode {
    // A closed stdout (`mcpwire --help | true`) is not worth an error.
    let _ = std::io::stdout().write_all(usage.as_bytes());
    ExitCode::SUCCESS
}

/// Reports a usage error with the usage text on stderr; exit status 2.
fn usage_error(prog: &str, message: &str, usage: &str) -> ExitCode {
    eprint!("{prog}: {message}\n\n{usage}");
    ExitCode::from(EXIT_USAGE)
}

/// Reports a bad value alone on stderr (its message says what to do); exit status 2, as
/// for any usage error.
fn value_error(prog: &str, message: &str) -> ExitCode {
    eprintln!("{prog}: {message}");
    ExitCode::from(EXIT_USAGE)
}
