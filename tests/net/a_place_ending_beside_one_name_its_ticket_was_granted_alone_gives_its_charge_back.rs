//! docs/lock-servers.md, "Limits and memory": "A place that ends without a
//! grant gives its charge back, also when its uid holds a lock on some of
//! its names under another set of names (that lock is charged as its own
//! set); where the uid holds every one of its names that way, the place's
//! charge stays until those locks go". And "A refresh keeps every lock of
//! its uid counted": a charge left behind lasts as long as the client
//! refreshes its uid.
//!
//! Over connection A, uid U waits with ticket T for "x" alone, which is
//! free: granted, charged as the set ["x"]. U then waits with the same
//! ticket T for "x" and "y" ("y" held by H): the set ["x", "y"] is charged
//! for the place alone. A closes: the place ends without a grant, and U
//! holds only "x" of its names, under the set ["x"]. But the server keeps
//! the place's charge whenever U holds any of its names by a grant to the
//! place's ticket (`holds_granted_to`), and U's entry on "x" carries T from
//! its own earlier wait. After H lets "y" go, U refreshes "x" over B for
//! longer than a charge lapses (validity 1 s, lapse 3 s): the server still
//! charges the ended place's set beside U's lock on "x".
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::one_second_node_and;
use crate::wire::{
    call, closed_within, lock_request, lock_wait_request, GRANTED, OP_LOCK, OP_REFRESH, OP_UNLOCK,
    QUEUED, REPLY_BOOL, REPLY_WAIT,
};
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_ending_beside_one_name_its_ticket_was_granted_alone_gives_its_charge_back() {
    let (node, [mut a, mut b, mut h]) = one_second_node_and().await;
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["y"])).await,
        [REPLY_BOOL, 1]
    );
    let h_only = node.stats.lock_bytes();
    assert_eq!(
        call(
            &mut a,
            1,
            &lock_wait_request(1, "U", &["x"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, GRANTED],
        "U is granted x at once"
    );
    let u_x = node.stats.lock_bytes() - h_only;
    assert_eq!(
        call(
            &mut a,
            2,
            &lock_wait_request(2, "U", &["x", "y"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits for x and y under the same ticket"
    );
    let with_place = node.stats.lock_bytes();
    assert!(with_place > h_only + u_x, "the place is charged");
    // A closes; its place ends once the client reads the end of the stream.
    a.shutdown().await.unwrap();
    closed_within(&mut a, Duration::from_secs(5))
        .await
        .expect("A closed");
    assert_eq!(node.locker.waiting(), 0, "A's place ended at its close");
    assert_eq!(
        call(&mut h, 2, &lock_request(2, OP_UNLOCK, "h", &["y"])).await,
        [REPLY_BOOL, 1]
    );
    // U keeps its lock on x, refreshed over B, for past a charge's lapse.
    let until = tokio::time::Instant::now() + Duration::from_millis(4_500);
    let mut id = 10;
    while tokio::time::Instant::now() < until {
        let mut refresh = lock_request(id, OP_REFRESH, "U", &["x"]);
        refresh.push(0);
        assert_eq!(
            call(&mut b, id, &refresh).await,
            [REPLY_BOOL, 1],
            "U holds x"
        );
        id += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let left = node.stats.lock_bytes();
    assert_eq!(
        left,
        u_x,
        "only U's lock on x stands ({u_x} bytes), but {left} bytes are charged: the ended \
         place's {} bytes stay while U is refreshed",
        with_place - h_only - u_x
    );
}
