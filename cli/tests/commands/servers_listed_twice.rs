//! A lock server listed twice in --nodes is refused (exit 2, "listed
//! twice") whatever the spelling of its port: `127.0.0.1:7070` and
//! `127.0.0.1:07070` are one host as written and one port, so one server,
//! whose vote would count twice (Redis nodes are compared by the port
//! number already). Nothing runs under a lock that one server granted alone.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_lock_server_listed_twice_with_a_zero_padded_port_is_refused() {
    let dir = Scratch::new("servers-listed-twice");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let addr = server.addr;
    let list = format!("{addr},{}:0{}", addr.ip(), addr.port());
    let token = dir.token();
    let ran = dir.file("ran");
    let marker = format!("touch {}", ran.display());
    let run = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &list,
            "--token-file",
            &token,
            "--timeout",
            "5s",
            "job",
            "--",
            "sh",
            "-c",
            &marker,
        ],
        &[],
        LIMIT,
    );
    assert!(
        !ran.exists(),
        "the command ran under a lock granted by one server counted twice ({list}): {run:?}"
    );
    assert_eq!(run.code, Some(2), "{list}: {run:?}");
    assert!(run.stderr.contains("listed twice"), "{list}: {run:?}");
}

/// Host names are compared without case, as database URLs already are
/// (`postgres://LOCALHOST:1/a,postgres://localhost:1/b` is refused): DNS
/// names do not tell case apart, so `LOCALHOST:P` and `localhost:P` are
/// one server, for lock servers and Redis nodes alike.
#[test]
fn a_node_listed_twice_with_its_host_in_another_case_is_refused() {
    let dir = Scratch::new("servers-listed-twice-case");
    let token = dir.token();
    let mut accepted = Vec::new();
    for (flag, list) in [
        ("--nodes", "localhost:1,LOCALHOST:1"),
        ("--redis", "redis://localhost:1,redis://LOCALHOST:1"),
    ] {
        let run = cli(
            &dir,
            &[
                "run",
                flag,
                list,
                "--token-file",
                &token,
                "--connect-timeout",
                "1s",
                "--timeout",
                "2s",
                "job",
                "--",
                "true",
            ],
            &[],
            LIMIT,
        );
        if run.code != Some(2) || !run.stderr.contains("listed twice") {
            accepted.push(format!("{flag} {list}: {run:?}"));
        }
    }
    assert!(
        accepted.is_empty(),
        "one server listed twice was taken as two nodes:\n{}",
        accepted.join("\n")
    );
}
