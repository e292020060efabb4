//! The application layer on the 2026-07-28 revision over real HTTP, on a sharded
//! service: `server/discover`, and `subscriptions/listen` hearing changes announced by a
//! tool on another connection (and so, likely, another shard) and by the application
//! outside any call, then ending gracefully (MODERN-13, MODERN-14, MODERN-19).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcpwire::server::Config;
use mcpwire_tests::server::counter_entropy;
use mcpwire_tokio::app::{
    self, AppHandle, BoxFuture, Call, CallError, Change, Handler, Settings, Tools, text_result,
};
use mcpwire_tokio::server::serve;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// The tools, with `tools.listChanged` declared and the layer's handle kept.
struct App {
    tools: Tools,
    handle: OnceLock<AppHandle>,
}

impl Handler for App {
    fn capabilities(&self) -> Value {
        json!({"tools": {"listChanged": true}})
    }

    fn tool_mirrors(&self) -> mcpwire::mirror::ToolMirrors {
        self.tools.tool_mirrors()
    }

    fn started(&self, app: AppHandle) {
        self.handle.set(app).expect("started once");
    }

    fn call(&self, call: Call) -> BoxFuture<Result<Value, CallError>> {
        self.tools.call(call)
    }
}

async fn start() -> (std::net::SocketAddr, Arc<App>) {
    let tools = Tools::new().with_tool(
        "touch",
        "Changes the tool list.",
        json!({"type": "object"}),
        |call: Call, _: Value| async move {
            call.changed(&Change::Tools);
            Ok(text_result("touched"))
        },
    )
    .with_tool(
        "deploy",
        "Deploys to a region, mirrored in Mcp-Param-Region.",
        json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
        |_: Call, args: Value| async move { Ok(text_result(&args["region"].to_string())) },
    );
    let handler = Arc::new(App {
        tools,
        handle: OnceLock::new(),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = app::mount_sharded_with(
        4,
        Config::new(),
        counter_entropy(5),
        Arc::clone(&handler) as Arc<dyn Handler>,
        &Settings::new(),
    );
    tokio::spawn(serve(listener, service));
    (addr, handler)
}

/// POSTs a 2026-07-28 request on a connection of its own; the response's body stream.
async fn post(
    addr: std::net::SocketAddr,
    method: &str,
    name: Option<&str>,
    body: String,
) -> http::Response<hyper::body::Incoming> {
    post_with(addr, method, name, &[], body).await
}

/// [`post`] with more headers.
async fn post_with(
    addr: std::net::SocketAddr,
    method: &str,
    name: Option<&str>,
    extra: &[(&str, &str)],
    body: String,
) -> http::Response<hyper::body::Incoming> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut b = http::Request::post("/mcp")
        .header("host", addr.to_string())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        b = b.header("mcp-name", name);
    }
    for (name, value) in extra {
        b = b.header(*name, *value);
    }
    send.send_request(b.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .unwrap()
}

/// The next JSON message of an SSE body (skipping comments), within 5 s.
async fn next_message(body: &mut hyper::body::Incoming, buffer: &mut String) -> Option<Value> {
    loop {
        if let Some(at) = buffer.find("\n\n") {
            let event: String = buffer.drain(..at + 2).collect();
            let data: String = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if !data.is_empty() {
                return Some(serde_json::from_str(&data).unwrap());
            }
            continue;
        }
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("a frame within 5 s")?
            .unwrap();
        if let Ok(data) = frame.into_data() {
            buffer.push_str(std::str::from_utf8(&data).unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_14_modern_19_server_discover_over_http_lists_every_revision() {
    let (addr, _) = start().await;
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{META}}}}}"#);
    let response = post(addr, "server/discover", None, body).await;
    assert_eq!(response.status(), 200);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let reply: Value = serde_json::from_slice(&bytes).unwrap();
    let result = &reply["result"];
    assert_eq!(result["resultType"], "complete");
    let versions = result["supportedVersions"].as_array().unwrap();
    assert!(versions.iter().any(|v| v == "2026-07-28"));
    assert!(versions.iter().any(|v| v == "2025-11-25"));
    assert_eq!(
        result["capabilities"],
        json!({"tools": {"listChanged": true}})
    );
    assert!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_13_a_listen_hears_changes_from_any_shard_and_ends_gracefully() {
    let (addr, app) = start().await;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"listen:0","method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},{META}}}}}"#
    );
    let response = post(addr, "subscriptions/listen", None, body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let mut stream = response.into_body();
    let mut buffer = String::new();
    let ack = next_message(&mut stream, &mut buffer).await.unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen:0"
    );
    // Three calls on connections of their own: with four shards taken in turn, at least
    // one lands on another shard than the listen.
    for id in 1..=3 {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"touch","arguments":{{}},{META}}}}}"#
        );
        let answer = post(addr, "tools/call", Some("touch"), body).await;
        assert_eq!(answer.status(), 200);
        let changed = next_message(&mut stream, &mut buffer).await.unwrap();
        assert_eq!(changed["method"], "notifications/tools/list_changed");
        assert_eq!(
            changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "listen:0"
        );
    }
    // The application, outside any call.
    let handle = app.handle.get().expect("the layer's handle");
    handle.changed(&Change::Tools);
    let changed = next_message(&mut stream, &mut buffer).await.unwrap();
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    handle.changed(&Change::Prompts);
    // The graceful end: the listen's result, then the stream ends.
    handle.end_listens();
    let end = next_message(&mut stream, &mut buffer).await.unwrap();
    assert_eq!(end["id"], "listen:0", "no prompts change came first: {end}");
    assert_eq!(
        end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen:0"
    );
    assert_eq!(next_message(&mut stream, &mut buffer).await, None);
}

/// MODERN-7, MODERN-8: the tool table hands its `x-mcp-header` marks to the core when
/// mounted, so a call whose `Mcp-Param-Region` disagrees with its arguments is refused
/// before any handler runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_7_a_tools_mirrored_parameters_are_checked_against_its_headers() {
    let (addr, _) = start().await;
    let body = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"deploy","arguments":{{"region":"eu-west"}},{META}}}}}"#
        )
    };
    let right = post_with(
        addr,
        "tools/call",
        Some("deploy"),
        &[("mcp-param-region", "eu-west")],
        body(1),
    )
    .await;
    assert_eq!(right.status(), 200);
    let wrong = post_with(
        addr,
        "tools/call",
        Some("deploy"),
        &[("mcp-param-region", "us-east")],
        body(2),
    )
    .await;
    assert_eq!(wrong.status(), 400);
    let bytes = wrong.into_body().collect().await.unwrap().to_bytes();
    let reply: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(reply["error"]["code"], -32020, "{reply}");
    let missing = post(addr, "tools/call", Some("deploy"), body(3)).await;
    assert_eq!(
        missing.status(),
        400,
        "the body has a region, the headers none"
    );
}

/// The client's side of a listen (MODERN-13): `McpClient::listen` opens the stream, its
/// `Call` yields the acknowledgement and then the changes it subscribed to (a tool's, on
/// another connection, and the application's), not the others; the server's graceful end
/// ends it with the listen's result. A session-era client has no such request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_13_the_client_listens_until_the_server_ends_the_stream() {
    use mcpwire_tokio::client::{CallError as ClientError, McpClient};
    let (addr, app) = start().await;
    let uri: http::Uri = format!("http://{addr}/mcp").parse().unwrap();
    let config = mcpwire::client::Config::new(uri.clone());
    let (client, _messages) = McpClient::connect(config, counter_entropy(6))
        .await
        .expect("connected");
    assert_eq!(client.era(), mcpwire::Era::Sessionless);
    // What was learned, to hand back next time (MODERN-26).
    let learned = mcpwire::client::Revision::Exactly(mcpwire::ProtocolVersion::V2026_07_28);
    assert_eq!(client.negotiated(), Some(learned));
    let mut listen = client
        .listen(json!({"toolsListChanged": true}))
        .expect("listening");
    let ack = next(&mut listen).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    let touched = client.call_tool("touch", json!({})).await.unwrap();
    assert_eq!(touched["content"][0]["text"], "touched");
    let changed = next(&mut listen).await;
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    let handle = app.handle.get().expect("the layer's handle");
    handle.changed(&Change::Prompts);
    handle.changed(&Change::Tools);
    let changed = next(&mut listen).await;
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "no prompts change reaches a listen that did not ask for it"
    );
    handle.end_listens();
    let end = tokio::time::timeout(Duration::from_secs(5), listen.result())
        .await
        .expect("in time")
        .expect("the listen's result");
    assert!(
        end["_meta"]["io.modelcontextprotocol/subscriptionId"].is_string()
            || end["_meta"]["io.modelcontextprotocol/subscriptionId"].is_number(),
        "{end}"
    );
    client.close().await;

    let sessions = mcpwire::client::Config::new(uri)
        .with_revision(mcpwire::client::Revision::Era(mcpwire::Era::Sessions));
    let (client, _messages) = McpClient::connect(sessions, counter_entropy(7))
        .await
        .expect("connected");
    assert!(matches!(
        client.listen(json!({"toolsListChanged": true})),
        Err(ClientError::Request(
            mcpwire::client::RequestError::Unsendable(_)
        ))
    ));
    client.close().await;
}

/// The next notification of a listen, as JSON, within 5 s.
async fn next(listen: &mut mcpwire_tokio::client::Call) -> Value {
    let n = tokio::time::timeout(Duration::from_secs(5), listen.notification())
        .await
        .expect("in time")
        .expect("a notification");
    serde_json::from_str(n.text().as_str()).unwrap()
}
