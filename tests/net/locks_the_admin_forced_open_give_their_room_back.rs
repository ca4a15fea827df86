//! Reproduces a past break: after an admin forced open the locks of a client that filled the lock table, the table stayed full for everyone else for as long as that client kept refreshing the locks it no longer held.
//!
//! docs/lock-servers.md, "A compromised client": "Filling the lock table
//! ... denies other clients, but not the admin: ... an admin can then list
//! the culprit's locks, by owner and source as the client gave them, and
//! force them open"; a lock's charge "lasts until it is released or
//! expires". A force-open by name (no uid, as `quorum-lock force-unlock
//! NAME` sends it) removes the entries but not their charges in the
//! ledger (only a release that names a uid frees one), and the culprit's
//! refresh of a uid whose entries are gone still marks its charge touched,
//! so the charge never lapses either: every other client's lock keeps
//! being refused as over `max_lock_bytes`, with an empty table.
//!
//! A server with a 16 KiB lock table and an admin token; a client fills
//! the table, the admin forces each of its names open, the client
//! refreshes each lock (refused: nothing is held), and another client
//! asks for one lock. No sleeps: every step is one call, each bounded.
#![cfg(feature = "net")]

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockArgs, NetLocker};

use crate::capped::{self, bounded, ADMIN};
use crate::forced_by_name;
use crate::node::{start, TOKEN};

fn args(uid: &str, name: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![name.to_owned()].into(),
        owner: "culprit".into(),
        source: "tests/net/locks_the_admin_forced_open_give_their_room_back.rs".into(),
        quorum: 1,
    }
}

#[tokio::test]
async fn locks_the_admin_forced_open_give_their_room_back() {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 16 * 1024;
    let node = start(config).await;
    let culprit = capped::connect(&node.addr, TOKEN).await;

    // The culprit fills the table: locks until one is refused.
    let held = forced_by_name::locks_until_the_table_is_full(&culprit, |i| {
        args(&format!("hog-{i}"), &format!("hog/{i}"))
    })
    .await;

    // The admin forces each of its names open, by name.
    let admin = capped::connect(&node.addr, ADMIN).await;
    for lock in &held {
        let by_name = LockArgs {
            uid: "".into(),
            ..lock.clone()
        };
        assert_eq!(
            bounded("force", admin.force_unlock(&by_name)).await,
            Ok(true),
            "forced open"
        );
    }
    forced_by_name::assert_the_table_is_empty(&admin).await;

    // The culprit refreshes what it no longer holds.
    for lock in &held {
        assert_eq!(
            bounded("refresh", culprit.refresh(lock)).await,
            Ok(false),
            "nothing to refresh"
        );
    }

    // Another client asks for one lock, in an empty table.
    forced_by_name::a_lock_in_the_emptied_table_is_granted(&node.addr, &args("victim", "victim/1"))
        .await;
}
