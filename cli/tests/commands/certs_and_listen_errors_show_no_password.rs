//! `certs --nodes` takes "lock servers as a comma-separated list, as the
//! client commands' --nodes", so an operator may hand it the cluster's
//! list, database and Redis URLs with their passwords included; and a node
//! URL may land in `server --listen` by mistake. docs/cli.md: "Passwords
//! never appear in the tool's output, errors or logs ... That holds for
//! usage errors too". Each refusal names the entry without its password.

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn certs_refuses_a_node_url_without_showing_its_password() {
    let dir = Scratch::new("certs-url-errors");
    let tls = dir.file("tls");
    let tls = tls.to_str().expect("a UTF-8 path");
    for (flag, list, secret) in [
        (
            "--nodes",
            "10.0.0.1:7070,postgres://locks:CertsSecret1@db1/app,10.0.0.3:7070",
            "CertsSecret1",
        ),
        (
            "--nodes",
            "redis://:CertsSecret2@cache:6379",
            "CertsSecret2",
        ),
        (
            "--node",
            "mysql://locks:CertsSecret3@db2:3306/app",
            "CertsSecret3",
        ),
    ] {
        let run = cli(&dir, &["certs", "--dir", tls, flag, list], &[], LIMIT);
        assert_eq!(run.code, Some(2), "{flag} {list}: {run:?}");
        for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
            assert!(
                !text.contains(secret),
                "certs {flag}: the password {secret} shows on {stream}: {text:?}"
            );
        }
    }
}

#[test]
fn server_refuses_a_url_as_its_listen_address_without_showing_its_password() {
    let dir = Scratch::new("listen-url-errors");
    let token = dir.token();
    let run = cli(
        &dir,
        &[
            "server",
            "--listen",
            "redis://:ListenSecret1@127.0.0.1:6379",
            "--token-file",
            &token,
        ],
        &[],
        LIMIT,
    );
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        !run.stderr.contains("ListenSecret1") && !run.stdout.contains("ListenSecret1"),
        "the password shows: {run:?}"
    );
}
