//! A node in two groups of `--nodes` is refused (docs/groups.md), however
//! the group's text reaches it. `west=b=HOST:PORT` is checked as the lock
//! server `b=HOST:PORT` (a host `b=HOST`), but the group's nodes are
//! parsed again when it connects, and then `b=` reads as an id and the
//! group connects `HOST:PORT`, the node of the other group.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// Reproduces: `east=S;west=b=S` connects S in both groups (status exits 0) where `east=S;west=S` is refused (2).
#[test]
fn a_node_behind_a_second_id_is_refused_in_two_groups() {
    let dir = Scratch::new("node-groups-second-id");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let token = dir.token();
    let plain = format!("east={0};west={0}", server.addr);
    let hidden = format!("east={0};west=b={0}", server.addr);
    let status = |nodes: &str| {
        let args = [
            "status",
            "--health",
            "--nodes",
            nodes,
            "--token-file",
            &token,
        ];
        cli(&dir, &args, &[], LIMIT)
    };
    let refused = status(&plain);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(refused.stderr.contains("in both groups"), "{refused:?}");

    let shared = status(&hidden);
    assert_eq!(shared.code, Some(2), "{hidden}: {shared:?}");
}
