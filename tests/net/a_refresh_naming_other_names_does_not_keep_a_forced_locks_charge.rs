//! Reproduces a past break: after an admin forced open, name by name, the two-name locks of a client that filled the lock table, the client keeps the table full for everyone else by refreshing each lock's uid under a name it never held.
//!
//! docs/lock-servers.md, "A compromised client": "a name forced open gives
//! back at once the charge of every lock on exactly that set of names, and
//! a lock on a larger set gives its charge back when the client's next
//! refresh of it finds none of its names held (or when it lapses, a
//! validity after its last refresh)". A refresh that finds nothing held
//! gives back the charge only for the set of names the refresh itself
//! named, while it marks every charge of the uid touched: a refresh of
//! the uid under another name (one it never held) finds none of the
//! lock's names held, gives back nothing, and keeps the charge from ever
//! lapsing. Every other client's lock is refused as over the lock table's
//! cap, with an empty table.
//!
//! A server with a 16 KiB lock table and an admin token; a client fills
//! the table with locks on two names each, the admin forces each name
//! open by itself (as `quorum-lock force-unlock NAME` does), the client
//! refreshes each lock's uid naming a decoy name (refused: nothing is
//! held), and another client asks for one lock. No sleeps: every step is
//! one call, each bounded.
#![cfg(feature = "net")]

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockArgs, NetLocker};

use crate::capped::{self, bounded, ADMIN};
use crate::forced_by_name;
use crate::node::{start, TOKEN};

fn args(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "culprit".into(),
        source: "tests/net/a_refresh_naming_other_names_does_not_keep_a_forced_locks_charge.rs"
            .into(),
        quorum: 1,
    }
}

#[tokio::test]
async fn a_refresh_naming_other_names_does_not_keep_a_forced_locks_charge() {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 16 * 1024;
    let node = start(config).await;
    let culprit = capped::connect(&node.addr, TOKEN).await;

    // The culprit fills the table with locks on two names each.
    let held = forced_by_name::locks_until_the_table_is_full(&culprit, |i| {
        args(
            &format!("hog-{i}"),
            &[format!("hog/{i}/a"), format!("hog/{i}/b")],
        )
    })
    .await;

    // The admin forces each name open by itself.
    let admin = capped::connect(&node.addr, ADMIN).await;
    for lock in &held {
        for name in lock.resources.iter() {
            let by_name = args("", std::slice::from_ref(name));
            assert_eq!(
                bounded("force", admin.force_unlock(&by_name)).await,
                Ok(true),
                "forced open"
            );
        }
    }
    forced_by_name::assert_the_table_is_empty(&admin).await;

    // The culprit refreshes each uid under a name it never held: none of
    // the lock's names is held.
    for (i, lock) in held.iter().enumerate() {
        let decoy = args(&lock.uid, &[format!("decoy/{i}")]);
        assert_eq!(
            bounded("refresh", culprit.refresh(&decoy)).await,
            Ok(false),
            "nothing to refresh"
        );
    }

    // Another client asks for one lock, in an empty table.
    forced_by_name::a_lock_in_the_emptied_table_is_granted(
        &node.addr,
        &args("victim", &["victim/1".to_owned()]),
    )
    .await;
}
