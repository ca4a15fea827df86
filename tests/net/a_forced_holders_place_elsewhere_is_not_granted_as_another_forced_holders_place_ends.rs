//! Reproduces two ways an admin's force by name granted a forced holder a
//! lock on a name nobody forced, charged to nobody: ending one forced
//! holder's place moved a line on and granted the next forced holder's
//! place there, whether the server's loop over the forced holders ended it
//! or the table's own force did.
//!
//! docs/lock-servers.md (admin): a forced uid's places in line end too,
//! "and while the server remembers the force, no line that moves on grants
//! a place of that uid ..., whatever order its places end in".
//!
//! Scene: Q read-locks "z". U locks "x"; W locks "y". U waits (pushed) for
//! the write lock on `u_waits_on`, first in z's line; W waits (pushed) for
//! a read lock on "z", behind U. The admin forces "x" and "y" open by name.
//! With U waiting on "z" alone, the server's loop ends U's place first and
//! z's line moved on to W; with U waiting on "y" and "z", the table's force
//! dropped U's place from y's line and ended the rest of it on "z", with
//! the same result. Afterwards only Q's lock may stand, and only it may be
//! charged. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;

use crate::capped::ADMIN;
use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, read_wait_request, OP_FORCE_UNLOCK,
    OP_LOCK, OP_RLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};

const TTL: Duration = Duration::from_secs(30);

async fn forcing_x_and_y_grants_no_forced_holder_z(u_waits_on: &[&str]) {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut q, mut u, mut w] = authenticated(&node).await;
    let (mut admin, _) = authenticate_as(&node.addr, ADMIN, VERSION_6).await.unwrap();

    assert_eq!(
        call(&mut q, 1, &lock_request(1, OP_RLOCK, "Q", &["z"])).await,
        [REPLY_BOOL, 1],
        "Q read-locks z"
    );
    let q_alone = node.stats.lock_bytes();
    for (conn, uid, name) in [(&mut u, "U", "x"), (&mut w, "W", "y")] {
        assert_eq!(
            call(conn, 1, &lock_request(1, OP_LOCK, uid, &[name])).await,
            [REPLY_BOOL, 1],
            "{uid} locks {name}"
        );
    }
    let wait = lock_wait_request(2, "U", u_waits_on, (1, 1), TTL, true);
    let queued = call(&mut u, 2, &wait).await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for the write lock on {u_waits_on:?}: {queued:?}"
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
        "U waiting on {u_waits_on:?}: after forcing x and y open, the table holds locks of the \
         forced uids (the server charging {charged} bytes, Q's read lock alone {q_alone}): {left:?}"
    );
    assert_eq!(node.locker.waiting(), 0, "a place is still in line");
    assert_eq!(charged, q_alone, "charged for Q's lock alone");
    drop((q, u, w, admin));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_end_of_one_forced_holders_place_grants_no_other_forced_holder() {
    forcing_x_and_y_grants_no_forced_holder_z(&["z"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tables_end_of_one_forced_holders_place_grants_no_other_forced_holder() {
    forcing_x_and_y_grants_no_forced_holder_z(&["y", "z"]).await;
}
