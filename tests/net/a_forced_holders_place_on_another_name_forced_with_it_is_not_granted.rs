//! Reproduces: an admin's force of two names by name grants a forced holder's place on the other forced name (freed by the same force) before its places are ended, leaving it a lock that nothing charges.
//!
//! docs/lock-servers.md (admin): forcing a name open gives back the charge
//! of every lock that held it, and the server treats that lock as
//! released, refusing its refreshes, locks and waits: "its places in line
//! end too, on the forced names and elsewhere, so that none is granted to
//! it later".
//!
//! Scene: W locks "y". U locks "x", then waits (pushed) for "y" under the
//! same uid: queued behind W. The admin forces "x" and "y" open by name
//! in one call. The table's `Shard::clear` of "y" drops W's entry but
//! keeps U's place there (U holds "x", not "y"), and the promotion that
//! follows the force grants "y" to U, the forced uid, before anything
//! ends its places; the server then drops all of U's charges. Afterwards
//! the table keeps U's lock on "y" and the server charges nothing.
//! Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;

use crate::capped::ADMIN;
use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_FORCE_UNLOCK, OP_LOCK, QUEUED,
    REPLY_BOOL, REPLY_WAIT, VERSION_6,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_holders_place_on_another_name_forced_with_it_is_not_granted() {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut admin, _) = authenticate_as(&node.addr, ADMIN, VERSION_6).await.unwrap();

    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "W", &["y"])).await,
        [REPLY_BOOL, 1],
        "W locks y"
    );
    assert_eq!(
        call(&mut a, 2, &lock_request(2, OP_LOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U locks x"
    );
    let queued = call(
        &mut a,
        3,
        &lock_wait_request(3, "U", &["y"], (1, 1), Duration::from_secs(30), true),
    )
    .await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for y behind W: {queued:?}"
    );

    assert_eq!(
        call(
            &mut admin,
            1,
            &lock_request(1, OP_FORCE_UNLOCK, "", &["x", "y"])
        )
        .await,
        [REPLY_BOOL, 1],
        "the admin forces x and y open by name"
    );
    // Let any push and settling run.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let left: Vec<_> = node.locker.snapshot();
    let charged = node.stats.lock_bytes();
    assert!(
        left.is_empty(),
        "after forcing x and y open the table still holds (the server charging {charged} \
         bytes): {left:?}"
    );
    assert_eq!(node.locker.waiting(), 0, "a place is still in line");
    assert_eq!(charged, 0, "charged with nothing held");
    drop((a, admin));
}
