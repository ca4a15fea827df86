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
//! Three lock servers, and a PostgreSQL and a MySQL URL without a password
//! (to a port where nothing listens: the three servers are a quorum of
//! five), the password in `PGPASSWORD` and `MYSQL_PWD`; the command writes
//! its environment to a file. `PGPASSFILE` (where the password is, as
//! `QUORUM_LOCK_TOKEN_FILE` says where the token is) is set too. Without a
//! database among the nodes, the drivers' variables are not quorum-lock's,
//! and a job that uses them for a database of its own keeps them.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(30);
const PASSWORD: &str = "Pg-env-Secret-4f7a2c";

/// The environment `run` gives its command with the node list `nodes` and
/// the drivers' password variables set.
fn command_environment(dir: &Scratch, nodes: &str, out: &str) -> String {
    let token = dir.token();
    let path = dir.path.display().to_string();
    let passfile = dir.file("pgpass").display().to_string();
    std::fs::write(&passfile, format!("*:*:*:locks:{PASSWORD}\n")).expect("password file");
    let env = [
        ("QUORUM_LOCK_NODES", nodes),
        ("QUORUM_LOCK_TOKEN_FILE", token.as_str()),
        ("PGPASSWORD", PASSWORD),
        ("PGPASSFILE", passfile.as_str()),
        ("MYSQL_PWD", PASSWORD),
        ("D", path.as_str()),
    ];
    let script = format!("env > $D/{out}");
    let done = cli(
        dir,
        &["run", "--timeout", "10s", "job", "--", "sh", "-c", &script],
        &env,
        LIMIT,
    );
    assert_eq!(done.code, Some(0), "the command did not run: {done:?}");
    let seen = dir.read(out);
    assert!(
        seen.contains("QUORUM_LOCK_NAME=job"),
        "not the command's environment: {seen}"
    );
    assert!(
        !seen.lines().any(|l| l.starts_with("QUORUM_LOCK_NODES=")),
        "the node list reached the command: {seen}"
    );
    seen
}

fn has(seen: &str, name: &str) -> bool {
    seen.lines().any(|l| l.starts_with(&format!("{name}=")))
}

#[test]
fn a_database_password_from_the_environment_is_kept_from_the_command() {
    let dir = Scratch::new("db-password-env");
    let one = Server::start(&dir, &["--no-quarantine"]);
    let two = Server::start(&dir, &["--no-quarantine"]);
    let three = Server::start(&dir, &["--no-quarantine"]);
    let servers = format!("{},{},{}", one.addr, two.addr, three.addr);
    let with_databases =
        format!("{servers},postgres://locks@127.0.0.1:1/app,mysql://locks@127.0.0.1:1/app");
    let seen = command_environment(&dir, &with_databases, "env-with-databases");
    for name in ["PGPASSWORD", "PGPASSFILE", "MYSQL_PWD"] {
        assert!(
            !has(&seen, name),
            "the command got {name}, the database password (or where it is) that quorum-lock \
             used for its database nodes, while the same password in QUORUM_LOCK_NODES is \
             removed: {}",
            seen.lines()
                .filter(|l| l.starts_with("PG") || l.starts_with("MYSQL"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // Lock servers only: the variables are the job's own.
    let seen = command_environment(&dir, &servers, "env-servers-only");
    for name in ["PGPASSWORD", "PGPASSFILE", "MYSQL_PWD"] {
        assert!(
            has(&seen, name),
            "{name} was removed though no node is a database: a job's own database password"
        );
    }
}
