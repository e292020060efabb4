//! https end to end: `mcpwire serve --tls-cert --tls-key` (rustls) with a certificate that
//! a private CA made for the test issued, and `mcpwire call` with each client (tokio,
//! `--blocking`). With `--cacert` naming that CA the call succeeds (HTTP-POST-1: the
//! endpoint is an `https` URL); without it the built-in Mozilla roots
//! do not know the CA, and the call fails saying so. Bad TLS options are usage errors.
//! Loopback only; the server is killed when the test ends.

mod common;
#[path = "common/pki.rs"]
mod pki;

use std::process::{Command, Output};

use common::{BIN, start};
use pki::Pki;

fn call(url: &str, flags: &[&str]) -> Output {
    Command::new(BIN)
        .args(["call", "--timeout-ms", "20000"])
        .args(flags)
        .args([url, "slow_count", r#"{"n":2,"delay_ms":10}"#])
        .output()
        .expect("mcpwire call runs")
}

fn serve_usage_error(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("serve")
        .args(["--addr", "127.0.0.1:0"])
        .args(args)
        .output()
        .expect("mcpwire serve runs");
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn http_post_1_mcpwire_call_over_https_trusts_the_cacert_roots_and_only_them() {
    let pki = Pki::new("tls");
    let (cert, key, ca) = (
        pki.path("cert.pem"),
        pki.path("key.pem"),
        pki.path("ca.pem"),
    );
    let server = start(&["--tls-cert", &cert, "--tls-key", &key]);
    let port = server.addr.rsplit(':').next().expect("a port");
    for (client, flags) in [("tokio", &[][..]), ("blocking", &["--blocking"][..])] {
        // By IP (the certificate names 127.0.0.1): the tests reach nothing but 127.0.0.1.
        let url = format!("https://127.0.0.1:{port}/mcp");
        let trusted: Vec<&str> = flags.iter().copied().chain(["--cacert", &ca]).collect();
        let out = call(&url, &trusted);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{client} {url}: {stderr}");
        assert!(stdout.contains(r#""text":"2""#), "{client}: {stdout}");
        assert_eq!(
            stderr.matches("progress {").count(),
            2,
            "{client}: {stderr}"
        );
        // Mozilla's roots do not know the test CA: the handshake fails, and says why.
        let url = format!("https://127.0.0.1:{port}/mcp");
        let out = call(&url, flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{client}: {stderr}");
        assert!(
            stderr.contains("cannot connect") && stderr.contains("UnknownIssuer"),
            "{client}: {stderr}"
        );
        // Plain HTTP to the TLS port is no MCP exchange either: the answer is not HTTP, and
        // the https URL is named.
        let out = call(&format!("http://127.0.0.1:{port}/mcp"), flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{client}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "the server at 127.0.0.1:{port} did not answer in HTTP (a server that speaks \
                 TLS answers plain HTTP so); if it serves https, call https://127.0.0.1:{port}/mcp"
            )),
            "{client}: {stderr}"
        );
    }
}

#[test]
fn bad_tls_options_are_usage_errors() {
    let pki = Pki::new("tls-usage");
    let (cert, key, ca) = (
        pki.path("cert.pem"),
        pki.path("key.pem"),
        pki.path("ca.pem"),
    );
    let other = pki.path("other-key.pem");
    let says = serve_usage_error(&["--tls-cert", &cert]);
    assert!(
        says.contains("--tls-cert and --tls-key go together"),
        "{says}"
    );
    let says = serve_usage_error(&["--tls-cert", &cert, "--tls-key", &other]);
    assert!(says.contains("do not fit"), "{says}");
    let says = serve_usage_error(&["--tls-cert", &cert, "--tls-key", &key, "--blocking"]);
    assert!(says.contains("tokio adapter only"), "{says}");
    let says = serve_usage_error(&["--tls-cert", &key, "--tls-key", &key]);
    assert!(says.contains("--tls-cert: no certificate in"), "{says}");
    let says = serve_usage_error(&["--tls-cert", &cert, "--tls-key", &ca]);
    assert!(says.contains("--tls-key: no private key"), "{says}");
    for (file, says) in [
        (key.as_str(), "--cacert: no certificate in"),
        ("/nonexistent/ca.pem", "--cacert: cannot read"),
    ] {
        let out = call("https://127.0.0.1:1/mcp", &["--cacert", file]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}
