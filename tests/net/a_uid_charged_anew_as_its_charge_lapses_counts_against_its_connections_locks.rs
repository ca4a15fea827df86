//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) ... The lock limit counts lock
//! ids"; "Threat model": a client "can fill limits, each of which bounds
//! it: per connection 100,000 locks".
//!
//! `Ledger::reserve_as` decides whether a new set's uid is new to the
//! ledger (and so one more lock of its connection) before it admits the
//! set; an admission over a limit prunes the lapsed charges first, which
//! may remove that uid's own lapsed charge. The set is then charged under
//! a record made anew, yet the connection's count of locks, which the prune
//! lowered by the uid, is not raised again: the connection holds one lock
//! id more than it counts, and may take one more than its limit allows, for
//! as long as it refreshes them. Each lapse repeats it.
//!
//! A limit of one lock per connection, a lock table of room for two and a
//! half locks, a 3 s validity (charges lapse 5 s after their last touch).
//! Over connection A uid U locks "x" and lets it expire; over connection B
//! uid W locks "w" and keeps it refreshed. Just after U's lapse, U locks
//! "y" over A: the table is full, the prune makes room. W is released, and
//! V locks "v" over A, which then holds U's and V's locks. (U's lock is
//! taken half a second after the server's start, so that its lapse falls
//! between the server's sweeps of its ledger, at most once a validity,
//! which would prune U's charge before its request and count it afresh.) Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{start, start_over, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, OP_LOCK, OP_REFRESH, OP_UNLOCK, REPLY_BOOL, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use quorum_lock::LockerConfig;

const VALIDITY: Duration = Duration::from_secs(3);
/// The charge's lapse for this validity: the validity and two expiry
/// passes of a second each.
const LAPSE: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uid_charged_anew_as_its_charge_lapses_counts_against_its_connections_locks() {
    // What one lock of a one-byte uid and name costs.
    let one = {
        let node = start(ServerConfig::new(TOKEN)).await;
        let (mut s, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
        assert_eq!(
            call(&mut s, 1, &lock_request(1, OP_LOCK, "Q", &["q"])).await,
            [REPLY_BOOL, 1]
        );
        node.stats.lock_bytes()
    };
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_entries_per_connection = 1;
    config.max_lock_bytes = 2 * one + one / 2;
    let node = start_over(
        LockerConfig {
            validity: VALIDITY,
            quarantine: Duration::ZERO,
        },
        config,
    )
    .await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    // Half a pass after the server's start: the server sweeps its ledger
    // at most once a validity, at its expiry passes, a second apart from
    // its start, and so not within half a second of U's lapse.
    tokio::time::sleep(Duration::from_millis(500)).await;

    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U locks x over A"
    );
    let granted = Instant::now();
    assert_ne!(
        call(&mut a, 9, &lock_request(9, OP_LOCK, "V", &["v"])).await[..],
        [REPLY_BOOL, 1],
        "A holds its one lock: V is refused over A"
    );
    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1],
        "W locks w over B"
    );
    assert_eq!(node.stats.lock_bytes(), 2 * one);
    // W stays refreshed; U expires, and its charge lapses at LAPSE.
    let mut id = 1;
    let until = granted + LAPSE + Duration::from_millis(5);
    while Instant::now() < until {
        id += 1;
        let mut refresh = lock_request(id, OP_REFRESH, "W", &["w"]);
        refresh.push(0);
        assert_eq!(
            call(&mut b, id, &refresh).await,
            [REPLY_BOOL, 1],
            "W refreshed"
        );
        let left = until.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_millis(300))).await;
    }
    assert_eq!(
        call(&mut a, 2, &lock_request(2, OP_LOCK, "U", &["y"])).await,
        [REPLY_BOOL, 1],
        "U locks y over A, in the room U's lapsed charge leaves"
    );
    id += 1;
    assert_eq!(
        call(&mut b, id, &lock_request(id, OP_UNLOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1],
        "W releases w"
    );
    let v = call(&mut a, 3, &lock_request(3, OP_LOCK, "V", &["v"])).await;
    assert_ne!(
        v[..],
        [REPLY_BOOL, 1],
        "connection A, limited to one lock, holds U's lock on y and is granted V's lock on v \
         too: U's charge, made anew where the admission's prune removed its lapsed one, was \
         not counted as a lock of A"
    );
    drop((a, b));
}
