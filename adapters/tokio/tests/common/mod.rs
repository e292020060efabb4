//! Shared by the tokio adapter's tests: a service on 127.0.0.1 whose application answers
//! `initialize` and holds every other request open, handing it to the test to answer.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use mcpwire::conn::Limits;
use mcpwire::jsonrpc::RawJson;
use mcpwire::server::{Config, Event, RequestHandle};
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::server::{McpService, ServeOptions, serve_with};
use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedReceiver;

/// A running service and what its application holds.
#[allow(dead_code)] // Each test file uses what it needs.
pub(crate) struct Held {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// The service, for the test's answers.
    pub(crate) service: McpService,
    /// Every request but `initialize`, held open, in arrival order.
    pub(crate) requests: UnboundedReceiver<RequestHandle>,
    /// The server's log lines.
    pub(crate) log: Arc<Mutex<Vec<String>>>,
}

/// Serves `config` with `limits` on an ephemeral loopback port.
pub(crate) async fn start_held(config: Config, limits: Limits) -> Held {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (service, mut events) = McpService::new(config, counter_entropy(3));
    let (held, requests) = tokio::sync::mpsc::unbounded_channel();
    let app = service.clone();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            let Event::Request(request) = event else {
                continue;
            };
            if request.method() == "initialize" {
                let result = format!(
                    r#"{{"protocolVersion":"{}","capabilities":{{}},"serverInfo":{{"name":"t","version":"1"}}}}"#,
                    request.version()
                );
                let result = RawJson::new(&result).unwrap();
                app.with_server(|s, now| s.respond(now, request.handle(), &result).unwrap());
            } else {
                let _ = held.send(request.handle());
            }
        }
    });
    let log = Arc::new(Mutex::new(Vec::new()));
    let lines = Arc::clone(&log);
    let options = ServeOptions::new()
        .with_limits(limits)
        .with_log(Arc::new(move |line: &str| {
            lines.lock().unwrap().push(line.to_owned())
        }));
    tokio::spawn(serve_with(listener, service.clone(), options));
    Held {
        addr,
        service,
        requests,
        log,
    }
}
