//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB)"; "a leader's proclamation counts
//! its value, name and uid plus about 840 bytes against the leader's
//! lock, and goes with its release"; "A lock stays counted until it is
//! released (a release in the other mode, which removes no entry, leaves
//! it counted [...]), or until it expired".
//!
//! Each round, under a uid of its own, the client takes the write lock on
//! one name "aNN" (set ["aNN"]) and the read lock on another, "bNN" (set
//! ["bNN"]), and proclaims on "aNN" with a 4 KiB value. It then releases
//! the read lock on "aNN" and "bNN" together: the table removes the read
//! entry on "bNN" (so the release answers `true`) and leaves the write
//! entry on "aNN", and with it the proclamation, which lives as long as
//! that entry (a validity). The ledger keeps both sets charged (the
//! release named another set), but drops a proclamation on every name of
//! the released larger set (`Ledger::release`, looking for one by name),
//! whatever mode the release removed entries in: each proclamation stands
//! uncharged for the validity, and the connection holds, round after
//! round, well past `max_bytes_per_connection`. Real time (sockets), 40
//! rounds at most, every call bounded, well within the 60 s validity.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{NetLocker, Proclamation};

use crate::node::{args, remote, start, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proclamation_stays_charged_after_a_read_release_of_a_larger_set_that_leaves_its_write_lock(
) {
    let limit = 64 * 1024;
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = limit;
    let node = start(config).await;
    let client = remote(&node).await;
    let within = Duration::from_secs(5);
    let p = Proclamation::new(1, 0, vec![b'x'; 4096]).expect("a proclamation");
    // What one round keeps in the table, as the server charges it when
    // it is made: the two locks and the proclamation.
    let mut round_bytes = 0;
    let mut done = 0;
    for round in 0..40 {
        let uid = format!("u{round:02}");
        let write_a = args(&uid, &[format!("a{round:02}")]);
        let read_b = args(&uid, &[format!("b{round:02}")]);
        let both = args(&uid, &[format!("a{round:02}"), format!("b{round:02}")]);
        let start_bytes = node.stats.lock_bytes();
        let call = tokio::time::timeout(within, client.lock(&write_a));
        if !matches!(
            call.await.expect("a write lock: an answer within 5 s"),
            Ok(true)
        ) {
            break;
        }
        let call = tokio::time::timeout(within, client.rlock(&read_b));
        if !matches!(
            call.await.expect("a read lock: an answer within 5 s"),
            Ok(true)
        ) {
            break;
        }
        let call = tokio::time::timeout(within, client.proclaim(&write_a, &p));
        if !matches!(
            call.await.expect("a proclamation: an answer within 5 s"),
            Ok(true)
        ) {
            break;
        }
        if round == 0 {
            round_bytes = node.stats.lock_bytes() - start_bytes;
        }
        let call = tokio::time::timeout(within, client.runlock(&both));
        assert!(
            call.await
                .expect("a read release of both: an answer within 5 s")
                .unwrap(),
            "round {round}: the read entry on b{round:02} is removed"
        );
        done += 1;
    }
    // Every round's write entry and proclamation still stand.
    for round in 0..done {
        let write_a = args(&format!("u{round:02}"), &[format!("a{round:02}")]);
        let call = tokio::time::timeout(within, client.leader(&write_a, None));
        let leader = call.await.expect("a leader: an answer within 5 s");
        assert!(
            matches!(&leader, Ok(Some(_))),
            "round {round}: the write entry and its proclamation stand: {leader:?}"
        );
    }
    assert!(
        round_bytes > 4096,
        "a round is charged ({round_bytes} bytes)"
    );
    assert!(
        done * round_bytes <= limit,
        "the connection holds {done} proclamations of 4 KiB, each with its leader's write lock \
         and (charged, released under other names) read lock: {done} rounds of {round_bytes} \
         bytes, over its limit of {limit} bytes; the server charges {} bytes in all, each \
         proclamation's charge dropped by a read release of a larger set that left its write \
         entry",
        node.stats.lock_bytes()
    );
}
