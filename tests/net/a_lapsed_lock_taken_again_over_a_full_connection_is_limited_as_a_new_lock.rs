//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) ... The lock limit counts lock
//! ids"; "A lock stays counted until it is released ... or until it
//! expired and the locker's next expiry pass gave back its memory";
//! "Threat model": a client "can fill limits, each of which bounds it:
//! per connection 100,000 locks". Only "a refresh moves them without that
//! check (refusing it would cost the holder its lock)".
//!
//! `Ledger::reserve_as` admits nothing for a set it finds charged whose
//! request is no longer than the charge (`need` is `None`), so no prune is
//! made and the uid's standing is taken as the ledger still has it, lapsed
//! or not. A uid whose lock expired, and whose charge lapsed but was not
//! pruned yet, is thus taken again on the same names over another
//! connection without any admission: its lapsed charge is adopted there,
//! one lock id more than that connection may hold, although what it asks
//! for is a new lock (its entries are gone; nothing of it is refreshed or
//! kept), and the connection keeps it as long as it refreshes it.
//!
//! A limit of one lock per connection, a 3 s validity (charges lapse 5 s
//! after their last touch). Over connection A uid U locks "x" and lets it
//! expire; over connection B uid W locks "w" and keeps it refreshed. Just
//! after U's lapse, before the server's next sweep of its ledger, U locks
//! "x" again over B, which holds its one lock W: a new lock over a full
//! connection, to be refused. (U's lock is taken half a second after the
//! server's start, so that its lapse falls between the server's sweeps of
//! its ledger, at most once a validity.) Real time (sockets), every call
//! bounded.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{start_over, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, OP_LOCK, OP_REFRESH, REPLY_BOOL, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use quorum_lock::LockerConfig;

const VALIDITY: Duration = Duration::from_secs(3);
/// The charge's lapse for this validity: the validity and two expiry
/// passes of a second each.
const LAPSE: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lock_taken_again_over_a_full_connection_is_limited_as_a_new_lock() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_entries_per_connection = 1;
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
    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1],
        "W locks w over B"
    );
    assert_ne!(
        call(&mut b, 2, &lock_request(2, OP_LOCK, "V", &["v"])).await[..],
        [REPLY_BOOL, 1],
        "B holds its one lock: V is refused over B"
    );
    // W stays refreshed; U expires, and its charge lapses at LAPSE.
    let mut id = 2;
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
    assert!(
        node.locker.snapshot().iter().all(|info| info.uid != "U"),
        "U's lock on x expired"
    );
    id += 1;
    let again = call(&mut b, id, &lock_request(id, OP_LOCK, "U", &["x"])).await;
    assert_ne!(
        again[..],
        [REPLY_BOOL, 1],
        "connection B, limited to one lock and holding W's, is granted U's lock on x, whose \
         entry had expired and whose charge had lapsed: the lapsed charge was found for the \
         same names and adopted by B without any admission"
    );
    drop((a, b));
}
