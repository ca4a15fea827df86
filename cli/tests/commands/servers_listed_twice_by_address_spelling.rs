//! One lock server named by two spellings of its IP address is one node:
//! `127.0.0.1`, `127.1` (the short form every resolver takes), the
//! IPv4-mapped IPv6 address `[::ffff:127.0.0.1]` and the 32-bit number
//! `2130706433` all connect to the same listener. The command line
//! compares hosts by "an IP address in its canonical form" so that a
//! server listed twice is refused (exit 2, "listed twice"); otherwise its
//! vote counts twice and one server alone grants the lock.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_lock_server_listed_twice_by_two_spellings_of_its_address_is_refused() {
    let dir = Scratch::new("servers-listed-twice-address");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let port = server.addr.port();
    let token = dir.token();
    let mut accepted = Vec::new();
    for other in ["127.1", "[::ffff:127.0.0.1]", "2130706433"] {
        let list = format!("127.0.0.1:{port},{other}:{port}");
        let ran = dir.file(&format!("ran-{}", accepted.len()));
        let _ = std::fs::remove_file(&ran);
        let marker = format!("touch {}", ran.display());
        let run = cli(
            &dir,
            &[
                "run",
                "--nodes",
                &list,
                "--token-file",
                &token,
                "--connect-timeout",
                "2s",
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
        if ran.exists() || run.code != Some(2) || !run.stderr.contains("listed twice") {
            accepted.push(format!("{list}: command ran: {}, {run:?}", ran.exists()));
        }
    }
    assert!(
        accepted.is_empty(),
        "one lock server listed twice was taken as two nodes:\n{}",
        accepted.join("\n")
    );
}
