//! TLS end to end: `quorum-lock certs` writes a CA and certificates; a
//! server started with a certificate, and `run` trusting its CA; a client
//! without TLS cannot get in.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::support::{cli, nodes, Finished, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// Runs `quorum-lock certs ARGS`.
fn certs(dir: &Scratch, args: &[&str]) -> Finished {
    let mut all = vec!["certs"];
    all.extend_from_slice(args);
    cli(dir, &all, &[], LIMIT)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

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

#[test]
fn certs_writes_its_files_once_and_keeps_the_ca() {
    let dir = Scratch::new("certs-files");
    let out = dir.file("tls");
    let out_text = out.display().to_string();
    let made = certs(
        &dir,
        &[
            "--dir",
            &out_text,
            "--node",
            "127.0.0.1:7001",
            "--nodes",
            "db1.example.net:7070,127.0.0.1:7002",
            "--client",
            "backup",
        ],
    );
    assert_eq!(made.code, Some(0), "{made:?}");
    let files = [
        ("ca.pem", 0o644),
        ("ca-key.pem", 0o600),
        ("node-127.0.0.1.pem", 0o644),
        ("node-127.0.0.1-key.pem", 0o600),
        ("node-db1.example.net.pem", 0o644),
        ("node-db1.example.net-key.pem", 0o600),
        ("client-backup.pem", 0o644),
        ("client-backup-key.pem", 0o600),
    ];
    for (name, expected) in files {
        let path = out.join(name);
        assert_eq!(mode(&path), expected, "{name}");
        assert!(
            made.stdout.contains(&path.display().to_string()),
            "{name} not reported: {made:?}"
        );
    }
    assert_eq!(mode(&out), 0o700);
    // Two ports of one host share its certificate.
    assert!(made.stdout.contains("(ports 7001, 7002)"), "{made:?}");
    assert!(
        made.stdout
            .contains(&format!("--tls-client-ca {out_text}/ca.pem")),
        "{made:?}"
    );

    let ca = std::fs::read(out.join("ca.pem")).expect("ca");
    let node = std::fs::read(out.join("node-127.0.0.1.pem")).expect("node cert");
    let again = certs(&dir, &["--dir", &out_text, "--node", "127.0.0.1"]);
    assert_eq!(again.code, Some(2), "{again:?}");
    assert!(again.stderr.contains("refusing to overwrite"), "{again:?}");
    assert!(again.stderr.contains("node-127.0.0.1.pem"), "{again:?}");
    assert!(again.stderr.contains("--force"), "{again:?}");
    assert_eq!(
        std::fs::read(out.join("node-127.0.0.1.pem")).expect("node cert"),
        node
    );

    let forced = certs(
        &dir,
        &["--dir", &out_text, "--node", "127.0.0.1", "--force"],
    );
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert!(
        forced.stdout.contains("Signed with the CA in"),
        "{forced:?}"
    );
    assert_eq!(
        std::fs::read(out.join("ca.pem")).expect("ca"),
        ca,
        "the CA is kept"
    );
    assert_ne!(
        std::fs::read(out.join("node-127.0.0.1.pem")).expect("node cert"),
        node
    );
    assert_eq!(mode(&out.join("node-127.0.0.1-key.pem")), 0o600);

    let nothing = certs(&dir, &["--dir", &out_text]);
    assert_eq!(nothing.code, Some(2), "{nothing:?}");
    assert!(nothing.stderr.contains("nothing to do"), "{nothing:?}");

    std::fs::remove_file(out.join("ca-key.pem")).expect("remove the CA key");
    let keyless = certs(&dir, &["--dir", &out_text, "--node", "db2.example.net"]);
    assert_eq!(keyless.code, Some(2), "{keyless:?}");
    assert!(keyless.stderr.contains("ca-key.pem"), "{keyless:?}");

    for bad in [
        ["--node", "bad_host!"],
        ["--client", "../x"],
        ["--node", "host:0"],
    ] {
        let refused = certs(&dir, &["--dir", &out_text, bad[0], bad[1]]);
        assert_eq!(refused.code, Some(2), "{bad:?}: {refused:?}");
    }
}
