//! A newcomer's mistakes, each answered with what happened and what to do: `mcpwire call`
//! with `https://` to a plain-http server, a wrong path, `--legacy` on the Streamable
//! HTTP endpoint, an unknown tool or arguments that do not fit, bad JSON-ARGS, a timeout;
//! `mcpwire serve` with a path without its `/`, a host name for `--addr`, counts of 0,
//! a port already taken. Every call is run with both clients (tokio, `--blocking`), and
//! against both servers where the server's answer is the point. And the servers' session
//! ids come from the operating system's generator: two processes never mint the same.
//!
//! Loopback (127.0.0.1) only; every server is killed when its test ends, every call has a
//! `--timeout-ms`, and every other process is waited for a bounded time.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{ADAPTERS, BIN, Server, start, start_on};

/// The two clients of `mcpwire call`.
const CLIENTS: [(&str, &[&str]); 2] = [("tokio", &[]), ("blocking", &["--blocking"])];

/// Runs `mcpwire ARGS`, killed if it has not ended within 20 s.
fn run(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcpwire runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("its status").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("its output");
            panic!(
                "mcpwire {args:?} still running after 20 s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("its output")
}

/// `mcpwire call --timeout-ms 10000 FLAGS… URL ARGS…`.
fn call(flags: &[&str], url: &str, args: &[&str]) -> Output {
    let mut all = vec!["call", "--timeout-ms", "10000"];
    all.extend(flags);
    all.push(url);
    all.extend(args);
    run(&all)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that `out` failed with `code` and that its stderr holds every one of `says`.
#[track_caller]
fn assert_says(out: &Output, code: i32, says: &[&str]) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    for s in says {
        assert!(err.contains(s), "expected {s:?} in:\n{err}");
    }
    err
}

/// The `http://127.0.0.1:PORT` of a server.
fn base(server: &Server) -> String {
    format!("http://{}", server.addr)
}

#[test]
fn https_to_a_plain_http_server_says_it_does_not_speak_tls_and_names_the_http_url() {
    let server = start(&[]);
    let url = format!("https://{}/mcp", server.addr);
    for (client, flags) in CLIENTS {
        let out = call(flags, &url, &["echo", r#"{"text":"hi"}"#]);
        let err = assert_says(
            &out,
            1,
            &[
                &format!("the server at {} does not speak TLS", server.addr),
                &format!("if it serves plain HTTP, call {}/mcp", base(&server)),
            ],
        );
        // The cause stays, after the what-to-do: rustls' own words.
        assert!(err.contains("InvalidContentType"), "{client}: {err}");
    }
}

/// The server's 404 names its endpoint (and its legacy SSE endpoint); `mcpwire call`
/// prints that and the URL to call instead, built from the path the server named (so a
/// server on `--path /custom` gets `/custom`), on both servers and with both clients.
#[test]
fn a_wrong_path_prints_the_servers_endpoint_and_the_url_to_call() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &["--path", "/custom"]);
        let url = format!("{}/mcp", base(&server));
        for (client, flags) in CLIENTS {
            let out = call(flags, &url, &["echo", r#"{"text":"hi"}"#]);
            let err = assert_says(
                &out,
                1,
                &[
                    "http 404: not an MCP endpoint: this server's is /custom (legacy HTTP+SSE: GET /sse)",
                    &format!(
                        "/mcp is not an endpoint of this server: call its endpoint, {}/custom",
                        base(&server)
                    ),
                ],
            );
            assert!(!err.contains("Usage:"), "{adapter:?} {client}: {err}");
            // With --legacy, the way to the legacy endpoint.
            let legacy: Vec<&str> = flags.iter().copied().chain(["--legacy"]).collect();
            let out = call(&legacy, &url, &["echo", r#"{"text":"hi"}"#]);
            assert_says(
                &out,
                1,
                &[&format!(
                    "its legacy SSE endpoint is /sse; call that with --legacy: mcpwire call \
                     --legacy {}/sse",
                    base(&server)
                )],
            );
        }
    }
}

/// A 404 from a server that does not name its endpoint (not mcpwire): check the path.
#[test]
fn a_404_without_the_servers_path_says_to_check_the_path() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    // Answers every request 404 with no body, until the test's process ends.
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let url = format!("http://{addr}/api");
    for (_, flags) in CLIENTS {
        let out = call(flags, &url, &["echo"]);
        assert_says(
            &out,
            1,
            &[
                "http 404",
                "/api is not an MCP endpoint of this server: check the URL's path",
            ],
        );
    }
}

#[test]
fn legacy_pointed_at_the_streamable_endpoint_names_the_sse_endpoint_or_dropping_legacy() {
    let server = start(&[]);
    let url = format!("{}/mcp", base(&server));
    for (_, flags) in CLIENTS {
        let legacy: Vec<&str> = flags.iter().copied().chain(["--legacy"]).collect();
        let out = call(&legacy, &url, &["echo", r#"{"text":"hi"}"#]);
        assert_says(
            &out,
            1,
            &[
                // The server's words, then what they mean and what to do.
                "http 400: missing Mcp-Session-Id",
                &format!("{url} is not a legacy HTTP+SSE endpoint"),
                &format!(
                    "--legacy needs the server's SSE endpoint (mcpwire serve's: {}/sse)",
                    base(&server)
                ),
                "or drop --legacy",
            ],
        );
    }
}

/// An unknown tool: the command that lists the tools, which the test then runs as
/// printed; arguments that do not fit the tool: the same command, for the schemas.
#[test]
fn an_unknown_tool_says_how_to_list_the_tools() {
    for adapter in ADAPTERS {
        let server = start_on(adapter, &[]);
        let url = format!("{}/mcp", base(&server));
        for (client, flags) in CLIENTS {
            let out = call(flags, &url, &["nope"]);
            let err = assert_says(
                &out,
                1,
                &[
                    r#"error -32602: no tool named "nope""#,
                    "the server has no tool 'nope'",
                ],
            );
            let listed = err
                .split("list its tools with: ")
                .nth(1)
                .and_then(|rest| rest.lines().next())
                .unwrap_or_else(|| panic!("{adapter:?} {client}: no command in {err}"));
            let expected = match client {
                "blocking" => format!("mcpwire call --blocking {url}"),
                _ => format!("mcpwire call {url}"),
            };
            assert_eq!(listed, expected);
            let words: Vec<&str> = listed.split_whitespace().skip(2).collect();
            let out = call(&[], words[words.len() - 1], &words[..words.len() - 1]);
            assert!(out.status.success(), "{listed}: {}", stderr(&out));
            let list = String::from_utf8_lossy(&out.stdout);
            assert!(list.contains(r#""name":"echo""#), "{list}");

            let out = call(flags, &url, &["echo", r#"{"txt":"hi"}"#]);
            assert_says(
                &out,
                1,
                &[
                    "missing field `text`",
                    &format!(
                        "the arguments do not fit the input schema of 'echo'; list the tools \
                         with their schemas with: {expected}"
                    ),
                ],
            );
        }
    }
}

/// Bad JSON-ARGS: the JSON error alone (no usage text), the input with a caret under the
/// place, one line of hint; exit status 2, as for usage errors. Nothing is sent: the URL
/// has no server.
#[test]
fn bad_json_args_print_the_error_alone_with_the_input_and_a_hint() {
    const HINT: &str = "hint: JSON-ARGS is one argument, a JSON object with its keys and \
                        strings in double quotes, in single quotes for the shell: \
                        '{\"text\":\"hi\"}'";
    let url = "http://127.0.0.1:1/mcp";
    for (input, expected) in [
        (
            "{text:hi}",
            vec![
                "mcpwire call: JSON-ARGS is not valid JSON: key must be a string at line 1 column 2",
                "    {text:hi}",
                "     ^",
                HINT,
            ],
        ),
        (
            r#"{"text": "héllo", "n": 1 2}"#,
            vec![
                "mcpwire call: JSON-ARGS is not valid JSON: expected `,` or `}` at line 1 column 27",
                r#"    {"text": "héllo", "n": 1 2}"#,
                "                             ^",
                HINT,
            ],
        ),
        (
            "[1, 2]",
            vec![
                "mcpwire call: JSON-ARGS must be a JSON object (the arguments by name), not an array:",
                "    [1, 2]",
                HINT,
            ],
        ),
        (
            "",
            vec![
                "mcpwire call: JSON-ARGS is empty: give the tool's arguments, or leave JSON-ARGS out for none ({})",
                HINT,
            ],
        ),
    ] {
        let out = call(&[], url, &["echo", input]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{input:?}: {err}");
        assert_eq!(err.lines().collect::<Vec<_>>(), expected, "{input:?}");
    }
    // The shell split an unquoted object: the words left over, and the same hint.
    let out = call(&[], url, &["echo", "{\"text\":", "\"a", "b\"}"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            r#"mcpwire call: too many arguments: '"a' 'b"}' after JSON-ARGS"#,
            HINT
        ]
    );
}

#[test]
fn a_timeout_says_how_to_wait_longer() {
    let server = start(&[]);
    let url = format!("{}/mcp", base(&server));
    for (_, flags) in CLIENTS {
        let mut all = vec!["call", "--timeout-ms", "300"];
        all.extend(flags);
        all.extend([url.as_str(), "slow_count", r#"{"n":4,"delay_ms":500}"#]);
        let out = run(&all);
        assert_says(
            &out,
            1,
            &["the server did not answer within 300 ms: give it longer with --timeout-ms N"],
        );
    }
    let out = call(&["--timeout-ms", "0"], &url, &["echo"]);
    let err = assert_says(
        &out,
        2,
        &["--timeout-ms: 0 would give up before the server could answer; give 1 or more"],
    );
    assert!(!err.contains("Usage:"), "{err}");
}

/// `mcpwire serve`'s bad values: exit status 2, the message alone, saying what to give.
#[test]
fn serve_refuses_option_values_that_cannot_work() {
    for (args, says) in [
        (
            &["--path", "mcp"][..],
            "--path: 'mcp' does not start with '/'; give the endpoint's path as in a URL, e.g. /mcp",
        ),
        (&["--path", "/a b"], "--path: '/a b' is not a URL path"),
        (
            &["--path", "/mcp?x=1"],
            "--path: '/mcp?x=1' is not a URL path",
        ),
        (
            &["--path", "/sse"],
            "--path: /sse is a path of the legacy HTTP+SSE transport, served beside the \
             endpoint (GET /sse, POST /messages): choose another path, or add --no-legacy",
        ),
        (
            &["--max-sessions", "0"],
            "--max-sessions: '0' is not a count of 1 or more",
        ),
        (
            &["--shards", "0"],
            "--shards: '0' is not a count from 1 to 256",
        ),
        (
            &["--poll-ms", "99999999999"],
            "--poll-ms: '99999999999' is not milliseconds from 0 to 86400000 (a day)",
        ),
        (
            &["--retry-ms", "-5"],
            "--retry-ms: '-5' is not milliseconds",
        ),
        (
            &["--addr", "localhost"],
            "--addr: 'localhost' has no port; give HOST:PORT, e.g. 127.0.0.1:8080, \
             localhost:8080 or [::1]:8080",
        ),
        (&["--addr", ":8080"], "--addr: ':8080' has no host"),
        (
            &["--addr", "localhost:99999"],
            "--addr: '99999' is not a port: give 1 to 65535, or 0 for a free one",
        ),
        (
            &["--tls-cert", "cert.pem"],
            "--tls-cert and --tls-key go together: give both, or neither for http",
        ),
    ] {
        let all: Vec<&str> = ["serve"].into_iter().chain(args.iter().copied()).collect();
        let out = run(&all);
        let err = assert_says(&out, 2, &[&format!("mcpwire serve: {says}")]);
        assert!(!err.contains("Usage:"), "{args:?}: {err}");
    }
    // An option without its value is a usage error of shape: with the usage text.
    let out = run(&["serve", "--path"]);
    let err = assert_says(&out, 2, &["--path needs a path"]);
    assert!(err.contains("Usage: mcpwire serve"), "{err}");
}

/// `--addr` takes a host name (resolved: `localhost` is 127.0.0.1 here, IPv4 first), and
/// `--path` another endpoint, or a legacy path once the legacy transport is off.
#[test]
fn serve_listens_on_a_host_name_and_a_path_of_its_own() {
    for adapter in ADAPTERS {
        // After start's `--addr 127.0.0.1:0`: the last one counts.
        let server = start_on(
            adapter,
            &["--addr", "localhost:0", "--path", "/sse", "--no-legacy"],
        );
        assert!(server.addr.starts_with("127.0.0.1:"), "{}", server.addr);
        let url = format!("{}/sse", base(&server));
        let out = call(&[], &url, &["echo", r#"{"text":"named"}"#]);
        assert!(out.status.success(), "{adapter:?}: {}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains(r#""text":"named""#));
    }
}

/// A port already taken: what happened, and what to do.
#[test]
fn serve_on_a_taken_port_says_so() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = taken.local_addr().expect("its address").to_string();
    for adapter in ADAPTERS {
        let all: Vec<&str> = ["serve", "--addr", &addr]
            .into_iter()
            .chain(adapter.iter().copied())
            .collect();
        let out = run(&all);
        assert_says(
            &out,
            1,
            &[
                &format!("mcpwire serve: cannot listen on {addr}: "),
                "another process listens there: stop it, or give another port with --addr",
            ],
        );
    }
}

/// The first session id a server at `addr` mints.
fn session_id(addr: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let mut stream = TcpStream::connect(addr).expect("the server");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    write!(
        stream,
        "POST /mcp HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("the request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("the response");
    response
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id: ")
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no Mcp-Session-Id in {response}"))
}

/// SESSION-2: `mcpwire serve` draws session ids from the operating system's generator
/// (`mcpwire::OsEntropy`): each process's first id is its own (a constant or a counter
/// would give two processes the same), and one process mints many distinct ones.
#[test]
fn session_2_serve_draws_its_session_ids_from_the_operating_system() {
    for adapter in ADAPTERS {
        let (a, b) = (start_on(adapter, &[]), start_on(adapter, &[]));
        let (first_a, first_b) = (session_id(&a.addr), session_id(&b.addr));
        assert_ne!(first_a, first_b, "{adapter:?}");
        let mut ids: Vec<String> = (0..5).map(|_| session_id(&a.addr)).collect();
        ids.push(first_a);
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 6, "{adapter:?}: {ids:?}");
    }
}
