//! A [`Client`] and a [`Server`] joined in memory, on one virtual clock: every request
//! the client transmits is handed to the server, every transmit of the server back to the
//! client. Tests play the server's application from [`Pair::server_events`] and cut
//! exchanges to make faults.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mcpwire::client::{self, Client};
use mcpwire::server::{self, Server, Transmit};

use crate::server::counter_entropy;

/// The client and the server, and what each handed its application.
pub struct Pair {
    /// The client under test.
    pub client: Client,
    /// The server under test.
    pub server: Server,
    /// The virtual time.
    pub now: Instant,
    c2s: BTreeMap<client::ExchangeId, server::ExchangeId>,
    s2c: BTreeMap<server::ExchangeId, client::ExchangeId>,
    /// Every client request head seen, in order (for header checks).
    pub requests: Vec<http::request::Parts>,
    /// Events of the client, oldest first, not yet taken.
    pub client_events: Vec<client::Event>,
    /// Events of the server, oldest first, not yet taken.
    pub server_events: Vec<server::Event>,
}

impl Pair {
    /// A pair with these configurations (the client's endpoint should be
    /// `http://127.0.0.1:8080/mcp`, which the server's defaults accept).
    pub fn new(server: server::Config, client: client::Config) -> Self {
        Self {
            client: Client::new(client, counter_entropy(2)),
            server: Server::new(server, counter_entropy(1)),
            now: Instant::now(),
            c2s: BTreeMap::new(),
            s2c: BTreeMap::new(),
            requests: Vec::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
        }
    }

    /// The endpoint the default server serves.
    pub fn endpoint() -> http::Uri {
        http::Uri::from_static("http://127.0.0.1:8080/mcp")
    }

    /// Moves everything until neither side has anything to hand over.
    pub fn run(&mut self) {
        for _ in 0..10_000 {
            if !self.step() {
                return;
            }
        }
        panic!("the pair did not settle");
    }

    fn step(&mut self) -> bool {
        let mut moved = false;
        while let Some(t) = self.client.poll_transmit() {
            moved = true;
            match t {
                client::Transmit::Request {
                    exchange,
                    head,
                    body,
                } => {
                    self.requests.push(head.clone());
                    let x = self.server.handle_head(self.now, head);
                    if !body.is_empty() {
                        self.server.handle_body(self.now, x, body);
                    }
                    self.server.handle_body_end(self.now, x);
                    self.c2s.insert(exchange, x);
                    self.s2c.insert(x, exchange);
                }
                client::Transmit::Abort(exchange) => {
                    if let Some(x) = self.c2s.remove(&exchange) {
                        self.s2c.remove(&x);
                        self.server.handle_disconnect(self.now, x);
                    }
                }
            }
        }
        while let Some(x) = self.server.poll_ready() {
            while let Some(t) = self.server.poll_transmit(x) {
                moved = true;
                let Some(&c) = self.s2c.get(&x) else {
                    continue;
                };
                match t {
                    Transmit::Head(head) => self.client.handle_head(self.now, c, head),
                    Transmit::Data(bytes) => self.client.handle_body(self.now, c, bytes),
                    Transmit::End => {
                        self.s2c.remove(&x);
                        self.c2s.remove(&c);
                        self.client.handle_body_end(self.now, c);
                    }
                    Transmit::Abort => {
                        self.s2c.remove(&x);
                        self.c2s.remove(&c);
                        self.client.handle_failure(self.now, c);
                    }
                }
            }
        }
        while let Some(e) = self.client.poll_event() {
            moved = true;
            self.client_events.push(e);
        }
        while let Some(e) = self.server.poll_event() {
            moved = true;
            self.server_events.push(e);
        }
        moved
    }

    /// Breaks every open exchange's connection: both sides see it fail.
    pub fn cut_all(&mut self) {
        for (c, x) in std::mem::take(&mut self.c2s) {
            self.s2c.remove(&x);
            self.server.handle_disconnect(self.now, x);
            self.client.handle_failure(self.now, c);
        }
        self.run();
    }

    /// Moves the clock on by `d`, runs both sides' timers, settles.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.server.handle_timeout(self.now);
        self.client.handle_timeout(self.now);
        self.run();
    }

    /// Takes the next server request event, answering nothing.
    pub fn take_server_request(&mut self) -> server::IncomingRequest {
        let at = self
            .server_events
            .iter()
            .position(|e| matches!(e, server::Event::Request(_)))
            .expect("a server request event");
        match self.server_events.remove(at) {
            server::Event::Request(r) => r,
            _ => unreachable!(),
        }
    }

    /// Answers the server's `initialize` request with the negotiated version and settles.
    pub fn accept_initialize(&mut self) {
        let init = self.take_server_request();
        assert_eq!(init.method(), "initialize");
        let result = format!(
            r#"{{"protocolVersion":"{}","capabilities":{{}},"serverInfo":{{"name":"s","version":"1"}}}}"#,
            init.version()
        );
        let result = mcpwire::jsonrpc::RawJson::new(&result).expect("JSON");
        self.server
            .respond(self.now, init.handle(), &result)
            .expect("initialize answered");
        self.run();
    }

    /// Connects the client: the handshake, answered by the server.
    pub fn connect(&mut self) {
        self.client.connect(self.now);
        self.run();
        self.accept_initialize();
        assert!(self.client.is_connected(), "{:?}", self.client_events);
    }
}
