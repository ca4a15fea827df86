//! Reproduces a past break: on a server nobody calls, the charge of a lock that expired unreleased is never dropped: `ServerStats::lock_bytes` (the `quorum_lock_server_lock_bytes` gauge) counts it forever, as only a limit check or an idle connection's check prunes lapsed charges.
//!
//! docs/lock-servers.md ("A compromised client"): reconnecting "does not
//! reset a lock's charge, which lasts until it is released or expires";
//! docs/metrics.md: `quorum_lock_server_lock_bytes` is the "Bytes the table
//! is charged for, against `--max-lock-bytes`"; src/net/ledger.rs: a charge
//! lapses once nothing refreshed its uid for `Limits::lapse` (validity +
//! 2 x min(1 s, validity)).
//!
//! Here: a locker of a 1 s validity; a client takes a lock and its
//! connection closes. The expiry timer drops the entry after 1 s; the
//! charge lapses at 3 s. At 5 s the table is empty and the server still
//! reports the lock's bytes as charged (and keeps the ledger's record of
//! the uid), however long it stays idle.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::NetLocker;

use crate::lockers;
use crate::node::{args, remote, start_over, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_locks_charge_goes_on_an_idle_server() {
    let node = start_over(
        lockers::config_without_quarantine(Duration::from_secs(1)),
        ServerConfig::new(TOKEN),
    )
    .await;
    let client = remote(&node).await;
    let lock = args("expires-unreleased", &["a".to_string()]);
    let granted = tokio::time::timeout(Duration::from_secs(5), client.lock(&lock))
        .await
        .expect("answered within 5 s");
    assert_eq!(granted, Ok(true));
    let charged = node.stats.lock_bytes();
    assert!(charged > 0, "the lock is charged");
    drop(client);

    // Well past the validity (1 s) and the charge's lapse (3 s).
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        node.locker.snapshot().is_empty(),
        "the lock expired: {:#?}",
        node.locker.snapshot()
    );
    assert_eq!(
        node.stats.lock_bytes(),
        0,
        "the server still counts the charge of a lock that expired 4 s ago (charged at grant: \
         {charged} bytes)"
    );
}
