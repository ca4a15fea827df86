//! Reproduces: forcing two names open, the table's own ending of a forced holder's place on a third name (after the forced lines moved on) grants that name to another forced holder queued there, whose charges the server then drops, leaving it a lock that nothing charges.
//!
//! docs/lock-servers.md (admin): the forced holders' "places in line end
//! too, on the forced names (before their lines move on) and elsewhere
//! (right after), so that none is granted to it later"; the one window
//! admitted is "a release of another name in that instant". Nobody
//! releases anything here.
//!
//! Scene: Q read-locks "z". U locks "x"; W locks "y". U waits (pushed) for
//! the write lock on "y" and "z": queued on both, first in z's line. W
//! waits (pushed) for a read lock on "z": queued behind U's write place.
//! The admin forces "x" and "y" open by name. The table clears both names,
//! drops U's place from y's line (src/local/table/forced.rs
//! `drop_places_of`), and then ends what is left of it on "z"
//! (src/local/forcing.rs, the `left` loop, `end_place`): z's line moves on
//! and grants W, a forced holder whose place on "z" alone no forced line
//! held, a read lock there. The server then drops all of W's charges. The
//! table keeps W's read lock on "z" and the server charges Q's alone.
//! (Unlike the server's `forced_holders` loop, this is inside the table's
//! own force call.) Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;

use crate::capped::ADMIN;
use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, read_wait_request, OP_FORCE_UNLOCK,
    OP_LOCK, OP_RLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};

const TTL: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_holders_place_elsewhere_is_not_granted_when_the_table_ends_another_forced_holders_place(
) {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut q, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut u, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut w, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut admin, _) = authenticate_as(&node.addr, ADMIN, VERSION_6).await.unwrap();

    assert_eq!(
        call(&mut q, 1, &lock_request(1, OP_RLOCK, "Q", &["z"])).await,
        [REPLY_BOOL, 1],
        "Q read-locks z"
    );
    let q_alone = node.stats.lock_bytes();
    assert_eq!(
        call(&mut u, 1, &lock_request(1, OP_LOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U locks x"
    );
    assert_eq!(
        call(&mut w, 1, &lock_request(1, OP_LOCK, "W", &["y"])).await,
        [REPLY_BOOL, 1],
        "W locks y"
    );
    let queued = call(
        &mut u,
        2,
        &lock_wait_request(2, "U", &["y", "z"], (1, 1), TTL, true),
    )
    .await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for the write lock on y and z: {queued:?}"
    );
    let queued = call(
        &mut w,
        2,
        &read_wait_request(2, "W", &["z"], (2, 1), TTL, true),
    )
    .await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "W waits for a read lock on z behind U's write place: {queued:?}"
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
    let left: Vec<_> = node
        .locker
        .snapshot()
        .into_iter()
        .filter(|info| &*info.uid != "Q")
        .collect();
    let charged = node.stats.lock_bytes();
    assert!(
        left.is_empty(),
        "after forcing x and y open, the table holds locks of the forced uids (the server \
         charging {charged} bytes, Q's read lock alone {q_alone}): {left:?}"
    );
    assert_eq!(node.locker.waiting(), 0, "a place is still in line");
    assert_eq!(charged, q_alone, "charged for Q's lock alone");
    drop((q, u, w, admin));
}
