//! A database server listed twice in `--nodes` would count twice towards
//! the quorum, so that it alone could grant a lock that needs a majority.
//! The command line refuses such a list, whatever the URLs' passwords
//! hold; and with a real PostgreSQL, one server listed twice beside one
//! that is down does not run the command.

use std::time::Duration;

use crate::sql_support::PgServer;
use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn a_database_server_listed_twice_is_refused_whatever_its_password_holds() {
    let dir = Scratch::new("sql-duplicates-refused");
    let token = dir.token();
    let mut accepted = Vec::new();
    // Nothing listens on ports 1 and 2: the list is checked before that.
    for password in ["Pss1", "P@ss1", "P%40ss1"] {
        for second_db in ["locks", "other"] {
            let nodes = format!(
                "postgres://app@127.0.0.1:1/locks?password={password},\
                 postgres://app@127.0.0.1:1/{second_db}?password={password},\
                 postgres://app@127.0.0.1:2/locks"
            );
            let done = cli(
                &dir,
                &[
                    "run",
                    "--nodes",
                    &nodes,
                    "--token-file",
                    &token,
                    "--connect-timeout",
                    "200ms",
                    "-n",
                    "job",
                    "--",
                    "true",
                ],
                &[],
                LIMIT,
            );
            if !done.stderr.contains("is listed twice") {
                accepted.push(format!(
                    "password {password:?}, databases locks and {second_db}: {}",
                    done.stderr.trim()
                ));
            }
        }
    }
    assert!(
        accepted.is_empty(),
        "lists with one server twice not refused: {accepted:#?}"
    );
}

#[test]
fn one_postgres_server_listed_twice_does_not_make_a_quorum_alone() {
    let Some(pg) = PgServer::start() else {
        return;
    };
    pg.psql("CREATE DATABASE quorum2");
    let dir = Scratch::new("sql-duplicates-quorum");
    let token = dir.token();
    // Past the quarantine of a server start, for a validity of 1s.
    std::thread::sleep(Duration::from_millis(1500));
    let port = pg.port();
    // The password sits in the query and holds an `@`; trust
    // authentication does not check it.
    let nodes = format!(
        "postgres://postgres@127.0.0.1:{port}/quorum?password=P@ss1,\
         postgres://postgres@127.0.0.1:{port}/quorum2?password=P@ss1,\
         postgres://postgres@127.0.0.1:1/quorum"
    );
    let path = dir.path.display().to_string();
    let done = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            "--validity",
            "1s",
            "--connect-timeout",
            "500ms",
            "-n",
            "job",
            "--",
            "sh",
            "-c",
            "touch \"$D/ran\"",
        ],
        &[("D", &path)],
        LIMIT,
    );
    assert!(
        !dir.file("ran").exists(),
        "one PostgreSQL server, listed twice, granted a lock that needs 2 of 3 servers alone: \
         {done:?}"
    );
}
