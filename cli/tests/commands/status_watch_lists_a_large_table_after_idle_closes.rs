//! `status --watch` keeps its connections between snapshots; with an
//! interval longer than the server's `--idle-timeout`, the server closes
//! the admin's connection between two snapshots and the next one connects
//! again. Every snapshot must still list a table of more than one reply
//! (here 5000 entries, over the 4096 one reply carries): the new connection
//! speaks protocol version 6, which pages the listing.
//!
//! Reproduces a past break: the second snapshot showed the node unreachable and exited 69.

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{LockArgs, NetLocker};

use crate::support::{cli, remote_config, Scratch, Server, TOKEN};

const LIMIT: Duration = Duration::from_secs(40);
const CALLS: usize = 5;
const NAMES: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_snapshot_of_status_watch_lists_a_large_table_across_idle_closes() {
    let dir = Scratch::new("status-watch-large-table-idle");
    let server =
        Server::start_with_validity(&dir, "60s", &["--no-quarantine", "--idle-timeout", "1s"]);
    let addr = server.addr.to_string();
    // A client holding 5000 entries; its connection holds locks, so the
    // server keeps it open.
    let locker = RemoteLocker::connect(addr.clone(), remote_config(TOKEN))
        .await
        .expect("connect with the client token");
    for call in 0..CALLS {
        let resources: Vec<String> = (0..NAMES).map(|i| format!("flood/{call}/{i:04}")).collect();
        let args = LockArgs {
            uid: format!("00000000-0000-4000-8000-00000000000{call}").into(),
            resources: resources.into(),
            owner: "holder".into(),
            source: "test".into(),
            quorum: 1,
        };
        assert_eq!(locker.lock(&args).await, Ok(true), "lock call {call}");
    }

    let admin = dir.admin();
    let args = [
        "status",
        "--nodes",
        &addr,
        "--admin-token-file",
        &admin,
        "--watch",
        "--interval",
        "3s",
        "--count",
        "2",
    ];
    let done = tokio::task::block_in_place(|| cli(&dir, &args, &[], LIMIT));
    let rows = done.stdout.lines().filter(|l| l.contains("flood/")).count();
    assert_eq!(
        rows,
        2 * CALLS * NAMES,
        "two snapshots of {} locks each; exit {:?}\nstdout (without the rows):\n{}\nstderr:\n{}",
        CALLS * NAMES,
        done.code,
        done.stdout
            .lines()
            .filter(|l| !l.contains("flood/"))
            .collect::<Vec<_>>()
            .join("\n"),
        done.stderr.trim()
    );
}
