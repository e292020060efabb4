//! A private CA made for a test, and a certificate it issued for 127.0.0.1 (and
//! `localhost`), as PEM files in a directory of their own, removed when dropped.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// A CA, and a certificate it issued for `localhost` and 127.0.0.1 with its key, as
/// PEM files in a directory of their own (removed when dropped).
pub(crate) struct Pki {
    dir: PathBuf,
}

impl Pki {
    pub(crate) fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mcpwire-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "mcpwire test CA");
        let ca = ca.self_signed(&ca_key).expect("the CA certificate");
        let key = KeyPair::generate().expect("a server key");
        let cert = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("server params")
            .signed_by(&key, &ca, &ca_key)
            .expect("the server certificate");
        let pki = Self { dir };
        std::fs::write(pki.path("ca.pem"), ca.pem()).expect("ca.pem");
        std::fs::write(pki.path("cert.pem"), cert.pem()).expect("cert.pem");
        std::fs::write(pki.path("key.pem"), key.serialize_pem()).expect("key.pem");
        // A key that is not the certificate's.
        let other = KeyPair::generate().expect("another key");
        std::fs::write(pki.path("other-key.pem"), other.serialize_pem()).expect("other-key.pem");
        pki
    }

    pub(crate) fn path(&self, file: &str) -> String {
        self.dir
            .join(file)
            .to_str()
            .expect("a UTF-8 path")
            .to_owned()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
