//! Reproduces a past break: `run` with a PostgreSQL or MySQL node whose password comes from `PGPASSWORD` or `MYSQL_PWD` (the URL without one) hands that password to its command's environment.
//!
//! docs/cli.md, `run`: "The command does **not** get quorum-lock's
//! secrets ... `QUORUM_LOCK_NODES` and `QUORUM_LOCK_REDIS` (whose URLs may
//! hold passwords) ... A token lets whoever has it take any lock ... a job
//! under a lock has no business with them" (and `SECRETS` in
//! cli/src/child.rs: "the variables of quorum-lock's environment that hold
//! a secret or say where one is"); docs/lock-servers.md counts `PGPASSWORD`
//! and `MYSQL_PWD` among "the secrets the process holds for its lockers",
//! and docs/sql.md says the driver takes the password from `PGPASSWORD`
//! when the URL gives none. So the database password is quorum-lock's
//! secret exactly as a password in `QUORUM_LOCK_NODES` is, and more
//! powerful than the client token ("a user with write access to the table
//! can break any lock", docs/sql.md); yet only the URL form is removed:
//! the same password moved out of the URL, as PostgreSQL's own tools
//! advise, reaches the command, which can then rewrite the lock tables.
//!
//! Two lock servers and a PostgreSQL URL without a password (to a port
//! where nothing listens: the two servers are a quorum of three), the
//! password in `PGPASSWORD`; the command writes its environment to a file.
//! `PGPASSFILE` (where the password is, as `QUORUM_LOCK_TOKEN_FILE` says
//! where the token is) and `MYSQL_PWD` are set too.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(30);
const PASSWORD: &str = "Pg-env-Secret-4f7a2c";

#[test]
fn a_database_password_from_the_environment_is_kept_from_the_command() {
    let dir = Scratch::new("db-password-env");
    let one = Server::start(&dir, &["--no-quarantine"]);
    let two = Server::start(&dir, &["--no-quarantine"]);
    let nodes = format!("{},{},postgres://locks@127.0.0.1:1/app", one.addr, two.addr);
    let token = dir.token();
    let path = dir.path.display().to_string();
    let passfile = dir.file("pgpass").display().to_string();
    std::fs::write(&passfile, format!("*:*:*:locks:{PASSWORD}\n")).expect("password file");
    let env = [
        ("QUORUM_LOCK_NODES", nodes.as_str()),
        ("QUORUM_LOCK_TOKEN_FILE", token.as_str()),
        ("PGPASSWORD", PASSWORD),
        ("PGPASSFILE", passfile.as_str()),
        ("MYSQL_PWD", PASSWORD),
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
            "env > $D/env",
        ],
        &env,
        LIMIT,
    );
    assert_eq!(done.code, Some(0), "the command did not run: {done:?}");
    let seen = dir.read("env");
    assert!(
        seen.contains("QUORUM_LOCK_NAME=job"),
        "not the command's environment: {seen}"
    );
    assert!(
        !seen.lines().any(|l| l.starts_with("QUORUM_LOCK_NODES=")),
        "the node list reached the command: {seen}"
    );
    for name in ["PGPASSWORD", "PGPASSFILE", "MYSQL_PWD"] {
        assert!(
            !seen.lines().any(|l| l.starts_with(&format!("{name}="))),
            "the command got {name}, the database password (or where it is) that quorum-lock \
             used for its PostgreSQL node, while the same password in QUORUM_LOCK_NODES is \
             removed: {}",
            seen.lines()
                .filter(|l| l.starts_with("PG") || l.starts_with("MYSQL"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
