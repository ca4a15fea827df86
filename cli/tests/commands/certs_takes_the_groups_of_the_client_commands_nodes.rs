//! `certs --nodes` takes "the client commands' list" (docs/cli.md), and
//! that list may now hold groups (`east=A,B;west=C`), as the docs' own
//! `QUORUM_LOCK_NODES` example does. A list of groups must give every
//! group's servers a certificate, or at least be refused saying what is
//! wrong with it, not as a list carrying credentials with a bad host.

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

/// Reproduces: `certs --nodes` of groups exits 2 calling node 1 a bad host in a list carrying credentials.
#[test]
fn certs_takes_the_groups_of_the_client_commands_nodes() {
    let dir = Scratch::new("certs-node-groups");
    let out = dir.file("tls");
    let out = out.display().to_string();
    let nodes = "east=127.0.0.1:7070,127.0.0.2:7070;west=127.0.0.3:7070";
    let made = cli(
        &dir,
        &["certs", "--dir", &out, "--nodes", nodes],
        &[],
        LIMIT,
    );
    assert_eq!(made.code, Some(0), "{made:?}");
    for host in ["127.0.0.1", "127.0.0.2", "127.0.0.3"] {
        let cert = dir.file(&format!("tls/node-{host}.pem"));
        assert!(cert.exists(), "no certificate for {host}: {made:?}");
    }
}
