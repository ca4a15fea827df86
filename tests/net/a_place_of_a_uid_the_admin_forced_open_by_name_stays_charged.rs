//! Reproduces: an admin's force by name of a uid's lock drops the charge of that uid's place in line on other names, which the table keeps (and later grants), uncharged.
//!
//! docs/lock-servers.md, "Limits and memory": "A place is charged as a
//! lock is while its connection keeps it"; "an observer's watch ...
//! forcing the observer's uid open ends its locks, not its watches, which
//! stay charged" (what the table keeps stays charged). "Threat model":
//! "forcing a name open gives back at once the charge of every lock that
//! held it" — the lock's, not that of a place the table keeps.
//!
//! Scene: V locks "y". U locks "x", then waits (pushed) for "y" under the
//! same uid: the table keeps U's entry on x and U's place on y. The admin
//! forces "x" open by name. The table still keeps U's place on y; V
//! releases y, and the table grants U's place: U holds y. The server's
//! charge must not fall to nothing while it does. Real time (sockets),
//! every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;

use crate::capped::ADMIN;
use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_FORCE_UNLOCK, OP_LOCK, OP_UNLOCK,
    QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_of_a_uid_the_admin_forced_open_by_name_stays_charged() {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut admin, _) = authenticate_as(&node.addr, ADMIN, VERSION_6).await.unwrap();

    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "V", &["y"])).await,
        [REPLY_BOOL, 1],
        "V locks y"
    );
    let v_only = node.stats.lock_bytes();
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
        "U waits for y: {queued:?}"
    );
    let with_place = node.stats.lock_bytes();
    assert!(with_place > v_only, "{with_place} > {v_only}");

    assert_eq!(
        call(&mut admin, 1, &lock_request(1, OP_FORCE_UNLOCK, "", &["x"])).await,
        [REPLY_BOOL, 1],
        "the admin forces x open by name"
    );
    let after_force = node.stats.lock_bytes();
    assert!(
        after_force > v_only,
        "after the admin forced x open, the table still keeps U's place on y, yet the server \
         charges {after_force} bytes, V's lock alone ({v_only}); with the place it charged \
         {with_place}"
    );

    assert_eq!(
        call(&mut a, 4, &lock_request(4, OP_UNLOCK, "V", &["y"])).await,
        [REPLY_BOOL, 1],
        "V releases y"
    );
    let held = node
        .locker
        .snapshot()
        .into_iter()
        .any(|info| info.uid == "U" && info.resource == "y");
    assert!(held, "the table granted U's place on y");
    assert!(
        node.stats.lock_bytes() > 0,
        "U holds y in the table, granted from the place, yet the server charges nothing"
    );
    drop((a, admin));
}
