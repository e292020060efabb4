//! A [`Gateway`] in front of a [`Harness`] server, its children played by the test: what
//! the gateway writes to a child is kept as parsed lines, and the test writes the
//! child's output itself. Everything runs on the harness's virtual clock.

use std::collections::BTreeMap;
use std::time::Duration;

use mcpwire::app::Settings;
use mcpwire::bridge::{Action, ChildId, Config as BridgeConfig, Exit, Gateway, Happening, Role};
use mcpwire::server::{Config, Eras, ExchangeId};
use serde_json::Value;

use crate::server::{Harness, post_head};

/// What the gateway did to one child.
#[derive(Debug, Default)]
pub struct Child {
    /// Its role, from the spawn.
    pub role: Option<Role>,
    /// Every line written to its input, parsed, not taken by the test yet.
    pub input: Vec<Value>,
    /// Its input was closed.
    pub input_closed: bool,
    /// It was sent SIGTERM.
    pub terminated: bool,
    /// It was sent SIGKILL.
    pub killed: bool,
}

/// The server, the gateway and the children.
pub struct Rig {
    /// The server and its clock.
    pub h: Harness,
    /// The gateway under test.
    pub gateway: Gateway,
    /// Each child by id, in the order they were spawned.
    pub children: BTreeMap<ChildId, Child>,
    /// What the gateway reported, oldest first.
    pub reports: Vec<Happening>,
    /// The same reports with the child each names, oldest first.
    pub reported: Vec<(ChildId, Happening)>,
}

/// A 2026-07-28 request's `_meta` members: the protocol keys, with `capabilities`.
pub fn modern_meta(capabilities: &str) -> String {
    format!(
        r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{capabilities}"#
    )
}

impl Rig {
    /// A server on every era with a gateway of `config`.
    pub fn new(config: BridgeConfig) -> Self {
        Self::with_server(Config::new().with_eras(Eras::ALL), config)
    }

    /// A server with `server` and a gateway of `config`.
    pub fn with_server(server: Config, config: BridgeConfig) -> Self {
        let h = Harness::new(server);
        let gateway = Gateway::new(
            config,
            &Settings::new(),
            &mut |dst: &mut [u8]| dst.fill(7),
            h.now,
        );
        let mut rig = Self {
            h,
            gateway,
            children: BTreeMap::new(),
            reports: Vec::new(),
            reported: Vec::new(),
        };
        rig.pump();
        rig
    }

    /// Moves events to the gateway and the gateway's actions to the children until
    /// both are quiet.
    pub fn pump(&mut self) {
        loop {
            self.h.drain();
            let events = self.h.take_events();
            let mut busy = !events.is_empty();
            for event in events {
                self.gateway
                    .handle_event(&mut self.h.server, self.h.now, event);
            }
            while let Some(action) = self.gateway.poll_action() {
                busy = true;
                self.act(action);
            }
            if !busy {
                self.h.drain();
                if self.h.events.is_empty() {
                    return;
                }
            }
        }
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Spawn { child, role } => {
                let fresh = self.children.insert(
                    child,
                    Child {
                        role: Some(role),
                        ..Child::default()
                    },
                );
                assert!(fresh.is_none(), "{child} spawned twice");
            }
            Action::Write { child, bytes } => {
                let c = self.children.get_mut(&child).expect("a spawned child");
                assert!(!c.input_closed, "{child}: written after its input closed");
                assert!(bytes.ends_with(b"\n"), "whole lines");
                for line in bytes[..bytes.len() - 1].split(|b| *b == b'\n') {
                    c.input
                        .push(serde_json::from_slice(line).expect("a JSON line (STDIO-1)"));
                }
                self.gateway.child_wrote(child, bytes.len());
            }
            Action::CloseInput { child } => self.child(child).input_closed = true,
            Action::Terminate { child } => self.child(child).terminated = true,
            Action::Kill { child } => self.child(child).killed = true,
            Action::Report(report) => {
                self.reported.push((report.child, report.what.clone()));
                self.reports.push(report.what);
            }
            other => panic!("an action the rig does not know: {other:?}"),
        }
    }

    /// The child `child`.
    pub fn child(&mut self, child: ChildId) -> &mut Child {
        self.children.get_mut(&child).expect("a spawned child")
    }

    /// The children of `role`, oldest first.
    pub fn children_of(&self, role: Role) -> Vec<ChildId> {
        self.children
            .iter()
            .filter(|(_, c)| c.role == Some(role))
            .map(|(id, _)| *id)
            .collect()
    }

    /// Takes what was written to `child` so far.
    pub fn take_input(&mut self, child: ChildId) -> Vec<Value> {
        std::mem::take(&mut self.child(child).input)
    }

    /// `child` writes `text` (raw bytes, lines and all) on its output.
    pub fn child_says(&mut self, child: ChildId, text: &str) {
        self.gateway
            .child_output(&mut self.h.server, self.h.now, child, text.as_bytes());
        self.pump();
    }

    /// `child` writes one message.
    pub fn child_sends(&mut self, child: ChildId, message: &Value) {
        self.child_says(child, &format!("{message}\n"));
    }

    /// `child` ended.
    pub fn child_exits(&mut self, child: ChildId, exit: Exit) {
        self.gateway
            .child_exited(&mut self.h.server, self.h.now, child, exit);
        self.pump();
    }

    /// Moves the clock on by `d` and runs the server's and the gateway's timers.
    pub fn advance(&mut self, d: Duration) {
        self.h.now += d;
        self.h.server.handle_timeout(self.h.now);
        self.gateway.handle_timeout(&mut self.h.server, self.h.now);
        self.pump();
    }

    /// POSTs `body` in the session `session` (its `Mcp-Session-Id`) at `version`.
    pub fn post(&mut self, session: Option<&str>, version: Option<&str>, body: &str) -> ExchangeId {
        let x = self.h.post(session, version, body);
        self.pump();
        x
    }

    /// POSTs a 2026-07-28 request, its `Mcp-*` headers made from `method` and `name`.
    pub fn post_modern(&mut self, method: &str, name: Option<&str>, body: &str) -> ExchangeId {
        let mut headers = vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
        ];
        if let Some(name) = name {
            headers.push(("mcp-name", name));
        }
        let x = self.h.send(post_head(&headers), Some(body));
        self.pump();
        x
    }

    /// The JSON-RPC answer exchange `x` carries so far (as a JSON body or as the SSE
    /// event that answers), if any.
    pub fn answer(&self, x: ExchangeId) -> Option<Value> {
        let reply = self.h.reply(x);
        reply.head.as_ref()?;
        if reply.header("content-type") == Some("text/event-stream") {
            return reply
                .messages()
                .into_iter()
                .rev()
                .find(|m| m.get("result").is_some() || m.get("error").is_some());
        }
        (!reply.body.is_empty()).then(|| reply.json())
    }

    /// Opens a session at `version` through the gateway: `initialize` goes to a new
    /// child, which the test answers as a stdio server would. Returns the session's
    /// `Mcp-Session-Id` and the child.
    pub fn open_session(&mut self, version: &str) -> (String, ChildId) {
        let x = self.post(
            None,
            None,
            &format!(
                r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{"sampling":{{}}}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
            ),
        );
        let child = *self
            .children
            .keys()
            .last()
            .expect("a child for the session");
        let init = self.take_input(child);
        assert_eq!(init.len(), 1, "{init:?}");
        assert_eq!(init[0]["method"], "initialize");
        self.child_sends(
            child,
            &serde_json::json!({"jsonrpc":"2.0","id":init[0]["id"],"result":{
                "protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "stdio-server", "version": "1"}}}),
        );
        let reply = self.h.reply(x);
        let session = reply
            .header("mcp-session-id")
            .expect("a session id")
            .to_owned();
        self.post(
            Some(&session),
            Some(version),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        let initialized = self.take_input(child);
        assert_eq!(initialized[0]["method"], "notifications/initialized");
        (session, child)
    }

    /// Answers the pool child's `initialize` (the gateway sends it when it starts the
    /// child) as a stdio server with `capabilities`.
    pub fn ready_pool_child(&mut self, child: ChildId, capabilities: &Value) {
        let init = self.take_input(child);
        assert_eq!(init[0]["method"], "initialize", "{init:?}");
        self.child_sends(
            child,
            &serde_json::json!({"jsonrpc":"2.0","id":init[0]["id"],"result":{
                "protocolVersion": "2025-11-25", "capabilities": capabilities,
                "serverInfo": {"name": "stdio-server", "version": "1"}}}),
        );
        let mut initialized = self.take_input(child);
        assert_eq!(initialized[0]["method"], "notifications/initialized");
        // What the gateway wrote next (a request that waited) stays for the test.
        initialized.remove(0);
        self.child(child).input = initialized;
    }
}
