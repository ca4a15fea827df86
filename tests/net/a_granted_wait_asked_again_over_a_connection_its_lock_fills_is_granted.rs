//! docs/guarantees.md: a waiter is "asked again each `wait_recheck`, which
//! renews the place and any grant already made" (`src/lock/wait_round.rs`:
//! "Every locker is also asked again each `Timeouts::wait_recheck`, which
//! renews the place and any grant already made, and stands in for a push
//! that was lost"). docs/lock-servers.md, "Limits and memory": "A place is
//! charged as a lock is while its connection keeps it ...; one a uid keeps
//! beside its own lock on the same names (waiting for the write lock while
//! it holds the read lock) is charged apart from that lock", and a lock
//! "taken again" is charged for what it grows, nothing more.
//!
//! A wait asked again for the write lock its uid already holds keeps no
//! place: the table answers `Granted` at once. But `Session::ask` charges
//! a place beside the uid's entries whenever the set is charged and the
//! uid holds any of its names (`Ledger::reserve_beside`), before asking
//! the table, and the charge of that place that will not exist must fit
//! the connection's byte limit: on a connection whose limit holds the
//! lock, the waiter's re-check of its own grant is refused over the limit
//! (and renews nothing), where it is to be granted again.
//!
//! A first server measures what the lock of uid U on "x" is charged. A
//! second server allows each connection exactly that many bytes. Over
//! connection A, U waits (pushed, ticket (1,1)) for "x" and is granted at
//! once; U asks the same wait again: it is to be granted. Real time
//! (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{authenticate_as, call, lock_wait_request, GRANTED, REPLY_WAIT, VERSION_6};
use quorum_lock::net::ServerConfig;

const TTL: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_wait_asked_again_over_a_connection_its_lock_fills_is_granted() {
    let wait = |id| lock_wait_request(id, "U", &["x"], (1, 1), TTL, true);
    // What U's lock on x is charged, on a server without tight limits.
    let charged = {
        let mut config = ServerConfig::new(TOKEN);
        config.idle_timeout = None;
        let probe = start(config).await;
        let (mut a, _) = authenticate_as(&probe.addr, TOKEN, VERSION_6)
            .await
            .unwrap();
        assert_eq!(call(&mut a, 1, &wait(1)).await, [REPLY_WAIT, GRANTED]);
        let charged = probe.stats.lock_bytes();
        assert_eq!(
            call(&mut a, 2, &wait(2)).await,
            [REPLY_WAIT, GRANTED],
            "control: without tight limits, the wait asked again is granted again"
        );
        charged
    };
    assert!(charged > 0);

    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_bytes_per_connection = charged;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    assert_eq!(
        call(&mut a, 1, &wait(1)).await,
        [REPLY_WAIT, GRANTED],
        "U's wait for x is granted at once over A, whose limit is U's lock's charge"
    );
    assert_eq!(node.stats.lock_bytes(), charged, "U's lock is charged");
    let again = call(&mut a, 2, &wait(2)).await;
    assert_eq!(
        again[..],
        [REPLY_WAIT, GRANTED],
        "U's wait for x asked again over A (a re-check of its grant, which keeps no place) is \
         refused instead of granted again: reply {:?} ({}); the server charged a place beside \
         U's write lock that the table does not keep, and A's limit holds only the lock",
        again,
        String::from_utf8_lossy(&again)
    );
    assert_eq!(node.locker.waiting(), 0, "no place in line");
    assert_eq!(
        node.stats.lock_bytes(),
        charged,
        "U's lock alone is charged"
    );
    drop(a);
}
