//! docs/lock-servers.md, "Limits and memory": "A place that ends without a
//! grant gives its charge back", and "A waiter that reconnected and asks
//! again over its new connection moves there: the new connection counts
//! its place". Over one connection a waiter that asks again for more names
//! keeps only its newest request's set charged (the server gives the old
//! set back). And "A refresh keeps every lock of its uid counted": a
//! charge left behind lasts as long as the client keeps its uid alive.
//!
//! H holds "held". Over connection A, uid U waits with ticket T for
//! ["held"]: the set ["held"] is charged for the place. Over connection B,
//! U asks again with the same ticket for ["held", "x"] (a superset): the
//! table renews U's place on "held" and adds one on "x", charged as the
//! set ["held", "x"]; the server ends A's record of the old place (its
//! names are all covered). But `end_places`' `decide` finds B's newer
//! place covering every name of the old one and returns `None`, and the
//! loop then `continue`s without settling the old set's charge: ["held"]
//! stays charged beside ["held", "x"]. U keeps waiting over B (as a waiter
//! does, renewing its place) for longer than a charge lapses (validity
//! 1 s): every renewal touches every set of U, so the old set's charge
//! never goes. Over one connection the same two waits leave one set
//! charged (checked first, as the expected figure).
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
async fn a_place_widened_over_another_connection_gives_the_old_sets_charge_back() {
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
    for (id, names) in [(1, &["held"][..]), (2, &["held", "x"][..])] {
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
    let widened = node.stats.lock_bytes() - h_only;
    assert_eq!(
        call(&mut c, 3, &lock_request(3, OP_UNLOCK, "V", &["held", "x"])).await,
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
            &lock_wait_request(1, "U", &["held"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over A for held"
    );
    assert_eq!(
        call(
            &mut b,
            1,
            &lock_wait_request(1, "U", &["held", "x"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U asks again over B for held and x, same ticket"
    );
    assert_eq!(node.locker.waiting(), 2, "U's places on held and x");
    // U keeps waiting over B, and H keeps its lock, for 3 s (3 validities).
    for id in 2..12 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            call(
                &mut b,
                id,
                &lock_wait_request(id, "U", &["held", "x"], (1, 1), ttl, true)
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
    let charged = node.stats.lock_bytes();
    assert_eq!(
        charged,
        h_only + widened,
        "U's one place is charged {} bytes, as over one connection {widened}: the set of its \
         place over A, which B's wider wait took over, is still charged 3 s (3 validities) on",
        charged - h_only
    );
}
