//! Reproduces: an admin's force by name takes the list of the name's
//! holders (`holders_of`) before it waits for its turn among the
//! server's walks of the whole table (`walking`, one at a time, which
//! clients' forces of a uid alone also take); a reader that joins the
//! name meanwhile is forced open with the others when the force runs
//! (its entry goes, its uid is noted forced), but the server gives back
//! only the charges of the uids it listed: the reader's lock stays
//! charged with nothing held, against its connection and the server's
//! total, until the charge lapses.
//!
//! docs/lock-servers.md (admin): "forcing a name open gives back at once
//! the charge of every lock that held it"; "Limits and memory": the
//! server never charges less, nor keeps charging what the table no longer
//! keeps beyond the documented lapse of an expired lock.
//!
//! Scene: B0..B59 lock 30,000 names (a large table); U read-locks "x".
//! Sixty clients each force open a uid of their own alone (each a walk of
//! the whole table, one at a time). The admin forces "x" open by name,
//! its turn behind theirs; meanwhile R read-locks "x". When the admin's
//! force is answered, nothing holds "x" and nothing but B's locks may be
//! charged. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;

use crate::capped::ADMIN;
use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, OP_FORCE_UNLOCK, OP_LOCK, OP_RLOCK, REPLY_BOOL, VERSION_6,
};

const FLOOD: u64 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_taken_on_a_name_while_the_admins_force_of_it_waits_its_turn_goes_with_its_charge() {
    tokio::time::timeout(Duration::from_secs(60), scene())
        .await
        .expect("the scene is over within 60 s");
}

async fn scene() {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut b, mut r] = authenticated(&node).await;
    let (mut admin, _) = authenticate_as(&node.addr, ADMIN, VERSION_6).await.unwrap();
    for k in 0..60u64 {
        let names: Vec<String> = (0..500).map(|i| format!("n{k}-{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let id = k + 1;
        let uid = format!("B{k}");
        assert_eq!(
            call(&mut b, id, &lock_request(id, OP_LOCK, &uid, &names)).await,
            [REPLY_BOOL, 1],
            "{uid} locks 500 names"
        );
    }
    let b_only = node.stats.lock_bytes();
    assert_eq!(
        call(&mut r, 1, &lock_request(1, OP_RLOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U read-locks x"
    );
    let mut flood = Vec::new();
    for k in 0..FLOOD {
        let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
        flood.push(tokio::spawn(async move {
            let own = format!("nobody{k}");
            call(&mut c, 1, &lock_request(1, OP_FORCE_UNLOCK, &own, &[])).await
        }));
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    let forcing = tokio::spawn(async move {
        call(&mut admin, 1, &lock_request(1, OP_FORCE_UNLOCK, "", &["x"])).await
    });
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(
        call(&mut r, 2, &lock_request(2, OP_RLOCK, "R", &["x"])).await,
        [REPLY_BOOL, 1],
        "R read-locks x"
    );
    let r_charged = node.stats.lock_bytes();
    assert_eq!(
        forcing.await.unwrap(),
        [REPLY_BOOL, 1],
        "the admin forces x open by name"
    );
    for f in flood {
        f.await.unwrap();
    }
    let on_x: Vec<String> = node
        .locker
        .snapshot()
        .into_iter()
        .filter(|e| e.resource == "x")
        .map(|e| e.uid)
        .collect();
    assert!(
        on_x.is_empty(),
        "scene: R's read lock was taken before the force ran, so the force cleared it: {on_x:?}"
    );
    let after = node.stats.lock_bytes();
    assert_eq!(
        after,
        b_only,
        "nothing holds x after the admin forced it open, yet the server charges {} bytes \
         beyond B's locks ({b_only}): R's read lock, taken while the force waited its turn, \
         forced open with U's but its charge kept (with R: {r_charged})",
        after as i64 - b_only as i64
    );
}
