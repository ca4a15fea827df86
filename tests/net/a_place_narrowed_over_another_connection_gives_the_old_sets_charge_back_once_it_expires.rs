//! docs/lock-servers.md, "Limits and memory": "A waiter that reconnected
//! and asks again over its new connection moves there: the new connection
//! counts its place, and whatever the old connection's place covered
//! beyond the new request's names is taken out of the table when the old
//! place ends (it expires, or the old connection closes)", "A place that
//! ends without a grant gives its charge back", and "A place is charged as
//! a lock is while its connection keeps it, and as long after it expires
//! as a lock".
//!
//! H holds "held". Over connection A, uid U waits with ticket T for
//! ["held", "y"] (the set ["held", "y"] is charged for the place); over
//! connection B it asks again, same ticket, for ["held"] alone (charged as
//! the set ["held"], and U's whole charge moves to B). The table keeps one
//! place of U, on "held" (the old request's place on "y" is taken out at
//! once); A keeps its record of the old place, which the new request covers
//! only in part, until that place ends. It ends (expires) a validity later
//! (1 s). A then sends nothing (idle close off): nothing ever sweeps A's
//! expired record, so `end_places` never settles it, and since each of U's
//! renewals over B touches every set of U, the old set ["held", "y"] stays
//! charged beside ["held"] for as long as U waits on. Over one connection
//! the same two waits leave one set charged (checked first, as the
//! expected figure).
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start_over, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_LOCK, OP_REFRESH, OP_UNLOCK, QUEUED,
    REPLY_BOOL, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use quorum_lock::LockerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_narrowed_over_another_connection_gives_the_old_sets_charge_back_once_it_expires() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let locker = LockerConfig {
        validity: Duration::from_secs(1),
        ..LockerConfig::default()
    };
    let node = start_over(locker, config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut h, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    let h_only = node.stats.lock_bytes();

    // The expected figure: the same two waits of V over one connection, C,
    // leave only the newest set charged.
    for (id, names) in [(1, &["held", "y"][..]), (2, &["held"][..])] {
        assert_eq!(
            call(
                &mut c,
                id,
                &lock_wait_request(id, "V", names, (9, 1), ttl, true)
            )
            .await,
            [REPLY_WAIT, QUEUED],
            "V waits over C for {names:?}"
        );
    }
    let narrowed = node.stats.lock_bytes() - h_only;
    assert_eq!(
        call(&mut c, 3, &lock_request(3, OP_UNLOCK, "V", &["held"])).await,
        [REPLY_BOOL, 0],
        "V gives its place up"
    );
    assert_eq!(
        node.stats.lock_bytes(),
        h_only,
        "V's charge went with its place"
    );

    // The same two waits of U, the first over A, the second over B.
    assert_eq!(
        call(
            &mut a,
            1,
            &lock_wait_request(1, "U", &["held", "y"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over A for held and y"
    );
    assert_eq!(
        call(
            &mut b,
            1,
            &lock_wait_request(1, "U", &["held"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U asks again over B for held alone, same ticket"
    );
    assert_eq!(node.locker.waiting(), 1, "U's one place, on held");
    // U keeps waiting over B, and H keeps its lock, for 3 s (3 validities;
    // A's record of the old place expired 1 s in). A sends nothing.
    for id in 2..12 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            call(
                &mut b,
                id,
                &lock_wait_request(id, "U", &["held"], (1, 1), ttl, true)
            )
            .await,
            [REPLY_WAIT, QUEUED],
            "U renews its place over B"
        );
        let mut refresh = lock_request(id, OP_REFRESH, "h", &["held"]);
        refresh.push(0); // no mode
        assert_eq!(
            call(&mut h, id, &refresh).await,
            [REPLY_BOOL, 1],
            "H refreshes"
        );
    }
    assert_eq!(node.locker.waiting(), 1, "U's one place, on held");
    let charged = node.stats.lock_bytes();
    assert_eq!(
        charged,
        h_only + narrowed,
        "U's one place is charged {} bytes, as over one connection {narrowed}: the set of its \
         old place over A (held and y), out of the table since B's wait and expired 2 s ago, \
         is still charged 3 s (3 validities) on",
        charged - h_only
    );
    drop(a);
}
