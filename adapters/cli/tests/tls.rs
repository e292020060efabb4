//! `mcpwire call` over `https://`, with each client (tokio, `--blocking`): against an
//! in-process `mcpwire serve` (the reference tools on mcpwire-tokio) behind rustls, with
//! a certificate issued by a private CA made for the test. With `--cacert` naming that
//! CA the call succeeds (HTTP-POST-1: the endpoint is an `https` URL); without it the
//! built-in Mozilla roots do not know the CA, and the call fails saying so.
//! Loopback only; the server stops with the test's runtime.

#[path = "common/inproc.rs"]
mod inproc;

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA, and a certificate it issued for `localhost` and 127.0.0.1 with its key.
struct Pki {
    ca_pem: String,
    leaf: CertificateDer<'static>,
    leaf_key: PrivateKeyDer<'static>,
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "mcpwire test CA");
    let ca = ca.self_signed(&ca_key).expect("the CA certificate");
    let leaf_key = KeyPair::generate().expect("a server key");
    let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("server params")
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("the server certificate");
    Pki {
        ca_pem: ca.pem(),
        leaf: leaf.der().clone(),
        leaf_key: PrivatePkcs8KeyDer::from(leaf_key.serialize_der()).into(),
    }
}

/// `mcpwire serve`'s reference tools over TLS on 127.0.0.1; the address, and the runtime
/// that runs it (dropping it stops the server).
fn serve_tls(pki: &Pki) -> (std::net::SocketAddr, tokio::runtime::Runtime) {
    let inproc::InProcess {
        runtime,
        listener,
        addr,
        service,
    } = inproc::reference_server();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("the default versions")
        .with_no_client_auth()
        .with_single_cert(vec![pki.leaf.clone()], pki.leaf_key.clone_key())
        .expect("the server certificate fits its key");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    runtime.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, service) = (acceptor.clone(), service.clone());
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: skipped.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let io = hyper_util::rt::TokioIo::new(tls);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    (addr, runtime)
}

fn call(url: &str, flags: &[&str]) -> std::process::Output {
    inproc::call(url, flags, "slow_count", r#"{"n":2,"delay_ms":10}"#)
}

#[test]
fn http_post_1_mcpwire_call_over_https_trusts_the_cacert_roots_and_only_them() {
    let pki = pki();
    let dir = std::env::temp_dir().join(format!("mcpwire-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).expect("the CA file");
    let ca_file = ca_file.to_str().expect("a UTF-8 path").to_owned();
    let (addr, _runtime) = serve_tls(&pki);
    for (client, flags) in [("tokio", &[][..]), ("blocking", &["--blocking"][..])] {
        for host in ["127.0.0.1".to_owned(), "localhost".to_owned()] {
            let url = format!("https://{host}:{}/mcp", addr.port());
            let trusted: Vec<&str> = flags
                .iter()
                .copied()
                .chain(["--cacert", &ca_file])
                .collect();
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
        }
        // Mozilla's roots do not know the test CA: the handshake fails, and says why.
        let url = format!("https://127.0.0.1:{}/mcp", addr.port());
        let out = call(&url, flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{client}: {stderr}");
        assert!(
            stderr.contains("cannot connect") && stderr.to_lowercase().contains("certificate"),
            "{client}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cacert_file_without_a_certificate_is_a_usage_error() {
    let dir = std::env::temp_dir().join(format!("mcpwire-tls-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").expect("the file");
    let out = call(
        "https://127.0.0.1:1/mcp",
        &["--cacert", empty.to_str().expect("a UTF-8 path")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--cacert: no certificate in"), "{stderr}");
    let out = call(
        "https://127.0.0.1:1/mcp",
        &["--cacert", "/nonexistent/ca.pem"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--cacert: cannot read"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
