//! A node listed twice in a node list is refused (exit 2, "listed twice"),
//! whatever the spelling: its vote would count twice, and one server alone
//! would grant the lock. Nothing runs under such a lock. A lock server is
//! one node whatever the spelling of its port (`07070` is `7070`), of its
//! host's case (DNS names do not tell case apart, as database URLs are
//! already compared) and of its IP address (`127.1`, the IPv4-mapped
//! `[::ffff:127.0.0.1]` and the number `2130706433` all reach
//! `127.0.0.1`, as every resolver reads them); a Redis node whatever its
//! host's case.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// Runs a command under `flag list`; what went wrong if the list was not
/// refused as naming one node twice, or if the command ran.
fn not_refused(dir: &Scratch, flag: &str, list: &str) -> Option<String> {
    let token = dir.token();
    let ran = dir.file("ran");
    let _ = std::fs::remove_file(&ran);
    let marker = format!("touch {}", ran.display());
    let run = cli(
        dir,
        &[
            "run",
            flag,
            list,
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
    let refused = !ran.exists() && run.code == Some(2) && run.stderr.contains("listed twice");
    (!refused).then(|| format!("{flag} {list}: command ran: {}, {run:?}", ran.exists()))
}

fn assert_all_refused(failures: Vec<Option<String>>) {
    let failures: Vec<String> = failures.into_iter().flatten().collect();
    assert!(
        failures.is_empty(),
        "one server listed twice was taken as two nodes:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_lock_server_listed_twice_with_a_zero_padded_port_is_refused() {
    let dir = Scratch::new("servers-listed-twice");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let addr = server.addr;
    let list = format!("{addr},{}:0{}", addr.ip(), addr.port());
    assert_all_refused(vec![not_refused(&dir, "--nodes", &list)]);
}

#[test]
fn a_node_listed_twice_with_its_host_in_another_case_is_refused() {
    let dir = Scratch::new("servers-listed-twice-case");
    assert_all_refused(vec![
        not_refused(&dir, "--nodes", "localhost:1,LOCALHOST:1"),
        not_refused(&dir, "--redis", "redis://localhost:1,redis://LOCALHOST:1"),
    ]);
}

#[test]
fn a_lock_server_listed_twice_by_two_spellings_of_its_address_is_refused() {
    let dir = Scratch::new("servers-listed-twice-address");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let port = server.addr.port();
    let failures = ["127.1", "[::ffff:127.0.0.1]", "2130706433"]
        .iter()
        .map(|other| not_refused(&dir, "--nodes", &format!("127.0.0.1:{port},{other}:{port}")))
        .collect();
    assert_all_refused(failures);
}
