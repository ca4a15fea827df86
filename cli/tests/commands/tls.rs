//! TLS end to end: a server started with a certificate, and `run` trusting
//! its CA; a client without TLS cannot get in.

use std::time::Duration;

use crate::support::{cli, nodes, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn run_over_tls_and_plain_text_is_refused() {
    let dir = Scratch::new("net-tls");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("certificate");
    std::fs::write(dir.file("cert.pem"), cert.cert.pem()).expect("write cert");
    std::fs::write(dir.file("key.pem"), cert.signing_key.serialize_pem()).expect("write key");
    let cert_path = dir.file("cert.pem").display().to_string();
    let key_path = dir.file("key.pem").display().to_string();
    let tls = [
        "--no-quarantine",
        "--tls-cert",
        &cert_path,
        "--tls-key",
        &key_path,
    ];
    let servers = [
        Server::start(&dir, &tls),
        Server::start(&dir, &tls),
        Server::start(&dir, &tls),
    ];
    let token = dir.token();
    let list = nodes(&servers);

    let secure = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &list,
            "--token-file",
            &token,
            "--tls-ca",
            &cert_path,
            // The servers' validity: a longer lease is refused.
            "--validity",
            "6s",
            "job",
            "--",
            "sh",
            "-c",
            "exit 4",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(secure.code, Some(4), "{secure:?}");

    let plain = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &list,
            "--token-file",
            &token,
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(
        plain.code,
        Some(69),
        "a plain-text client must not reach a TLS server: {plain:?}"
    );

    let missing = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &list,
            "--token-file",
            &token,
            "--tls-ca",
            "/nonexistent.pem",
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(missing.code, Some(2), "{missing:?}");
    assert!(missing.stderr.contains("/nonexistent.pem"), "{missing:?}");
}
