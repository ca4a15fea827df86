//! Reproduces a past break: `run` with a PostgreSQL node hands the command `PGSSLKEY`/`PGSSLCERT`, the driver's client key (inline PEM or its file) that quorum-lock used to log in to that node.
//!
//! docs/cli.md, `run`: the command does not get quorum-lock's secrets,
//! among them `QUORUM_LOCK_TLS_KEY` and `QUORUM_LOCK_TLS_CERT` (the lock
//! servers' client key, a file's path); with a PostgreSQL node,
//! `PGPASSWORD` and `PGPASSFILE` are removed too, since "they hold (or say
//! where to find)" the credential of a node whose URL gives none. The
//! PostgreSQL driver (sqlx, `PgConnectOptions::new`) takes the client
//! certificate and key of a node from `PGSSLCERT` and `PGSSLKEY` when the
//! URL names none, and takes the value as the key itself when it is PEM
//! text (`-----BEGIN ...-----`): with `clientcert=verify-full` (`cert`
//! authentication) that key is the node's whole credential, a password by
//! another name, and more powerful than the client token ("a user with
//! write access to the table can break any lock", docs/sql.md). Yet the
//! command gets it.
//!
//! Three lock servers and a PostgreSQL URL without a password or key (to a
//! port where nothing listens: the three servers are a quorum of four),
//! the key inline in `PGSSLKEY` and the certificate's file in
//! `PGSSLCERT`; the command writes its environment to a file.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(30);
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIPgKeySecret5b1d0c9e8f7a6b5c4d3e2f1a0b9c8d7e6\n-----END PRIVATE KEY-----";

#[test]
fn a_postgres_client_key_from_the_environment_is_kept_from_the_command() {
    let dir = Scratch::new("pg-client-key-env");
    let one = Server::start(&dir, &["--no-quarantine"]);
    let two = Server::start(&dir, &["--no-quarantine"]);
    let three = Server::start(&dir, &["--no-quarantine"]);
    let nodes = format!(
        "{},{},{},postgres://locks@127.0.0.1:1/app",
        one.addr, two.addr, three.addr
    );
    let token = dir.token();
    let path = dir.path.display().to_string();
    let cert = dir.file("client.crt").display().to_string();
    std::fs::write(&cert, "not a certificate\n").expect("certificate file");
    let env = [
        ("QUORUM_LOCK_NODES", nodes.as_str()),
        ("QUORUM_LOCK_TOKEN_FILE", token.as_str()),
        ("PGSSLKEY", KEY),
        ("PGSSLCERT", cert.as_str()),
        ("D", path.as_str()),
    ];
    let done = cli(
        &dir,
        &[
            "run",
            "--timeout",
            "10s",
            "job",
            "--",
            "sh",
            "-c",
            "env > $D/env-out",
        ],
        &env,
        LIMIT,
    );
    assert_eq!(done.code, Some(0), "the command did not run: {done:?}");
    let seen = dir.read("env-out");
    assert!(
        seen.contains("QUORUM_LOCK_NAME=job"),
        "not the command's environment: {seen}"
    );
    assert!(
        !seen.lines().any(|l| l.starts_with("QUORUM_LOCK_TLS_KEY=")),
        "control: the lock servers' client key is removed"
    );
    for name in ["PGSSLKEY", "PGSSLCERT"] {
        assert!(
            !seen.lines().any(|l| l.starts_with(&format!("{name}="))),
            "the command got {name}, the client key (or its certificate) quorum-lock's \
             PostgreSQL node logs in with, while PGPASSWORD, PGPASSFILE and \
             QUORUM_LOCK_TLS_KEY are removed: {}",
            seen.lines()
                .filter(|l| l.starts_with("PGSSL"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
}
