//! For the cli tests that need a server this process controls (its authorization hook):
//! `mcpwire serve`'s reference tools on mcpwire-tokio, mounted on a
//! runtime of its own, with a loopback listener the test serves as it needs; and
//! `mcpwire call` against it.

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::Arc;

use mcpwire_tokio::server::McpService;

/// The `mcpwire` binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

/// The reference service, not yet serving: the test spawns its accept loop on `runtime`
/// with `listener`. Dropping the runtime stops it.
pub(crate) struct InProcess {
    pub(crate) runtime: tokio::runtime::Runtime,
    pub(crate) listener: tokio::net::TcpListener,
    pub(crate) addr: SocketAddr,
    pub(crate) service: McpService,
}

/// `mcpwire serve`'s default configuration and reference tools, on 127.0.0.1.
pub(crate) fn reference_server() -> InProcess {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let service = {
        let _entered = runtime.enter();
        mcpwire_tokio::app::mount(
            mcpwire_cli::reference::config(&[] as &[&str]).expect("the default config"),
            Box::new(counter_entropy),
            Arc::new(mcpwire_cli::reference::tools()),
        )
    };
    InProcess {
        runtime,
        listener,
        addr,
        service,
    }
}

/// Session ids for a test's server: distinct, not secret.
fn counter_entropy(dst: &mut [u8]) {
    use std::sync::atomic::{AtomicU8, Ordering};
    static NEXT: AtomicU8 = AtomicU8::new(1);
    for b in dst {
        *b = NEXT.fetch_add(1, Ordering::Relaxed);
    }
}

/// `mcpwire call --timeout-ms 20000 FLAGS… URL TOOL ARGS`.
pub(crate) fn call(url: &str, flags: &[&str], tool: &str, args: &str) -> Output {
    Command::new(BIN)
        .args(["call", "--timeout-ms", "20000"])
        .args(flags)
        .args([url, tool, args])
        .output()
        .expect("mcpwire call runs")
}
