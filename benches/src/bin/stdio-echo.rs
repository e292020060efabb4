//! `stdio-echo`: the stdio MCP server the bridge bench puts behind every gateway
//! (`cargo bench --bench e2e -- bridge`). It answers at once, so the gateway is what is
//! measured: `initialize` (the offered revision), `ping`, `tools/list` and
//! `tools/call echo {text}`; notifications are read and dropped. Newline-delimited
//! JSON-RPC on stdin and stdout; a batch of lines is answered with one flush. Exits when
//! its input ends.

use std::io::{BufRead, BufWriter, Write};

use serde_json::{Value, json};

fn main() {
    let mut input = std::io::BufReader::with_capacity(64 << 10, std::io::stdin().lock());
    let mut output = BufWriter::new(std::io::stdout().lock());
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if let Some(answer) = answer(&line) {
            let _ = serde_json::to_writer(&mut output, &answer);
            let _ = output.write_all(b"\n");
        }
        // Flush once the lines that came together are answered.
        if input.buffer().is_empty() && output.flush().is_err() {
            return;
        }
    }
}

/// The answer to one line, if it is a request.
fn answer(line: &str) -> Option<Value> {
    let message: Value = serde_json::from_str(line).ok()?;
    let id = message.get("id")?.clone();
    let method = message.get("method")?.as_str()?;
    let params = message.get("params");
    let result = match method {
        "initialize" => json!({
            "protocolVersion": params.and_then(|p| p.get("protocolVersion")).cloned()
                .unwrap_or_else(|| json!("2025-11-25")),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stdio-echo", "version": "1.0.0"},
        }),
        "ping" => json!({}),
        "tools/list" => json!({"tools": [{
            "name": "echo",
            "description": "Returns its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }]}),
        "tools/call" => {
            let text = params
                .and_then(|p| p.get("arguments"))
                .and_then(|a| a.get("text"))
                .cloned()
                .unwrap_or_else(|| json!(""));
            json!({"content": [{"type": "text", "text": text}]})
        }
        other => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("no method {other}")}}));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}
