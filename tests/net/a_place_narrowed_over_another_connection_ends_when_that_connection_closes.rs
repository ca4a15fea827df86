//! docs/lock-servers.md, "Limits and memory": "A place is the connection's
//! it was asked over last, one at a time: the connection it was asked over
//! before stops counting it (unless the old place stood on names the new
//! request does not name, which it keeps until it ends), and a waiter
//! asking over two open connections by turns moves its place back and
//! forth, and when the one it asked over last closes, the place ends
//! though the other is open."
//!
//! H holds "held". Over connection A, uid U waits with ticket T for
//! ["held", "y"]; over connection B it asks again, same ticket, for
//! ["held"] alone. The table keeps one place of U, on "held", asked over
//! B (the old request's place on "y" is taken out); A keeps its record of
//! the old place, which stood on "y" too (as the docs allow). B, the
//! connection the place was asked over last, closes: the place should end.
//! It does not: `end_places`' `decide` takes A's record of the older
//! place (same uid, same ticket, names covering "held") for a newer place
//! of the waiter over another connection and keeps the names it covers,
//! so the table keeps U's place on "held", ahead of everyone after T in
//! line, with its grant to be pushed to the closed B.
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    call, closed_within, lock_request, lock_wait_request, OP_LOCK, QUEUED, REPLY_BOOL, REPLY_WAIT,
};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_narrowed_over_another_connection_ends_when_that_connection_closes() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut a, mut b, mut h] = authenticated(&node).await;
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
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
        "U asks again over B, same ticket, for held alone"
    );
    assert_eq!(
        node.locker.waiting(),
        1,
        "one place of U, on held, asked over B"
    );
    b.shutdown().await.unwrap();
    closed_within(&mut b, Duration::from_secs(5))
        .await
        .expect("B closed");
    let mut left = node.locker.waiting();
    for _ in 0..100 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        left = node.locker.waiting();
    }
    assert_eq!(
        left, 0,
        "B, the connection U's place was asked over last, closed 1 s ago, yet the table keeps \
         the place (A is open, and still records U's older place on held and y)"
    );
    drop(a);
}
