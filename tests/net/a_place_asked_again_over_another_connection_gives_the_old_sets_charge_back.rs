//! A waiter that asks again over another connection, under the same
//! ticket, for fewer or more names: its old set's charge goes, as it does
//! when the same two waits come over one connection. docs/lock-servers.md,
//! "Limits and memory": "A waiter that reconnected and asks again over its
//! new connection moves there: the new connection counts its place, and
//! whatever the old connection's place covered beyond the new request's
//! names is taken out of the table when the old place ends (it expires,
//! or the old connection closes)", "A place that ends without a grant
//! gives its charge back", and "A refresh keeps every lock of its uid
//! counted": a charge left behind lasts as long as the client keeps its
//! uid alive.
//!
//! H holds "held" (validity 1 s). V's two waits over one connection C give
//! the expected figure; then U waits over A for the first names and asks
//! again over B for the second, renewing there (and H refreshing) for 3 s,
//! three validities, while A sends nothing (idle close off). Real time
//! (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::one_second_node_and;
use crate::wire::{
    call, lock_request, lock_wait_request, OP_LOCK, OP_REFRESH, OP_UNLOCK, QUEUED, REPLY_BOOL,
    REPLY_WAIT,
};

/// U asks over A for ["held", "y"], then over B for ["held"] alone: the
/// table keeps one place of U, and A keeps its record of the old place
/// until that place expires a validity later. Reproduces a past break, in
/// which nothing swept A's expired record, so the old set stayed charged
/// beside the new one for as long as U renewed over B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_narrowed_over_another_connection_gives_the_old_sets_charge_back_once_it_expires() {
    asked_again_over_another_connection(&["held", "y"], &["held"]).await;
}

/// U asks over A for ["held"], then over B for ["held", "x"]: the table
/// renews U's place on "held" and adds one on "x", and A's record of the
/// old place ends at once (B's request covers it). Reproduces a past
/// break, in which the old place's end, finding B's newer place covering
/// every name, kept the old set's charge beside the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_widened_over_another_connection_gives_the_old_sets_charge_back() {
    asked_again_over_another_connection(&["held"], &["held", "x"]).await;
}

/// The scene of the two tests above: a wait for `first` over A, then for
/// `second` over B, both under U's ticket.
async fn asked_again_over_another_connection(first: &[&str], second: &[&str]) {
    let (node, [mut a, mut b, mut c, mut h]) = one_second_node_and().await;
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    let h_only = node.stats.lock_bytes();

    // The expected figure: the same two waits of V over one connection, C,
    // leave only the newest set charged.
    for (id, names) in [(1, first), (2, second)] {
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
    let over_one = node.stats.lock_bytes() - h_only;
    assert_eq!(
        call(&mut c, 3, &lock_request(3, OP_UNLOCK, "V", second)).await,
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
            &lock_wait_request(1, "U", first, (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over A for {first:?}"
    );
    assert_eq!(
        call(
            &mut b,
            1,
            &lock_wait_request(1, "U", second, (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U asks again over B for {second:?}, same ticket"
    );
    assert_eq!(
        node.locker.waiting(),
        second.len(),
        "U's places on {second:?}"
    );
    // U keeps waiting over B, and H keeps its lock, for 3 s (3 validities).
    // A sends nothing.
    for id in 2..12 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            call(
                &mut b,
                id,
                &lock_wait_request(id, "U", second, (1, 1), ttl, true)
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
    assert_eq!(
        node.locker.waiting(),
        second.len(),
        "U's places on {second:?}"
    );
    let charged = node.stats.lock_bytes();
    assert_eq!(
        charged,
        h_only + over_one,
        "U's place is charged {} bytes, as over one connection {over_one}: the set of its old \
         place over A ({first:?}), which B's wait ({second:?}) took over, is still charged 3 s \
         (3 validities) on",
        charged - h_only
    );
    drop(a);
}
