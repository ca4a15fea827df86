//! Reproduces: after an admin forces two names open, the server's own ending of one forced holder's place on a third name promotes that line and grants it to another forced holder, whose charges the server then drops, leaving it a lock that nothing charges.
//!
//! docs/lock-servers.md (admin): forcing a name open "gives back at once
//! the charge of every lock that held it, and the server then treats that
//! lock as released ...: its places in line end too, on the forced names
//! (before their lines move on) and elsewhere (right after), so that none
//! is granted to it later". The one window the docs admit is "a release
//! of another name in that instant"; here nobody releases anything.
//!
//! Scene: Q read-locks "z". U1 locks "x" and waits (pushed) for the write
//! lock on "z": queued at the head of z's line. U2 locks "y" and waits
//! (pushed) for a read lock on "z": queued behind U1's write place. The
//! admin forces "x" and "y" open by name. The table clears both and
//! notes U1 and U2 as forced; neither has a place on a forced name, so
//! the table leaves z's line alone. The server then ends the places of
//! the forced holders one uid at a time (src/net/requests.rs `release`,
//! the `forced_holders` loop): ending U1's write place lets z's line move,
//! and the promotion grants U2 (forced, not yet handled) a read lock on
//! "z"; the loop then reaches U2 and drops all its charges. The table
//! keeps U2's read lock on "z" and the server charges Q's alone.
//! Real time (sockets), every call bounded.
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
async fn a_forced_holders_place_elsewhere_is_not_granted_by_ending_another_forced_holders_place() {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut q, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut one, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut two, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut admin, _) = authenticate_as(&node.addr, ADMIN, VERSION_6).await.unwrap();

    assert_eq!(
        call(&mut q, 1, &lock_request(1, OP_RLOCK, "Q", &["z"])).await,
        [REPLY_BOOL, 1],
        "Q read-locks z"
    );
    let q_alone = node.stats.lock_bytes();
    assert_eq!(
        call(&mut one, 1, &lock_request(1, OP_LOCK, "U1", &["x"])).await,
        [REPLY_BOOL, 1],
        "U1 locks x"
    );
    let queued = call(
        &mut one,
        2,
        &lock_wait_request(2, "U1", &["z"], (1, 1), TTL, true),
    )
    .await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U1 waits for the write lock on z: {queued:?}"
    );
    assert_eq!(
        call(&mut two, 1, &lock_request(1, OP_LOCK, "U2", &["y"])).await,
        [REPLY_BOOL, 1],
        "U2 locks y"
    );
    let queued = call(
        &mut two,
        2,
        &read_wait_request(2, "U2", &["z"], (2, 1), TTL, true),
    )
    .await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U2 waits for a read lock on z behind U1's write place: {queued:?}"
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
    drop((q, one, two, admin));
}
