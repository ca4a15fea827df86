//! Reproduces a past break: a client that forces open its own uid everywhere drops the uid's whole charge, the charge of its watches with it, while the watches stand on the election boards until their ttl; a connection allowed one lock thus keeps watch after watch uncharged.
//!
//! src/net/ledger.rs, `Board::Watch`: "An observer's watch, which lives
//! until it fires or its ttl (at most the validity) runs out: charged to
//! the observer's uid until that uid goes untouched for the lapse, as a
//! lock is." docs/lock-servers.md ("A compromised client"): a client "can
//! fill limits, each of which bounds it".
//!
//! A force of a uid without names (the client token may force its own
//! uid) that removes an entry calls `Ledger::release(uid, None)`, which
//! clears the uid's sets and boards, watches included; the locker's force
//! leaves watches alone (they hang on no entry). Here: a server that lets a
//! connection hold one lock. A raw client takes a lock under a uid,
//! watches a resource under that uid, and forces the uid open; then it
//! tries locks under fresh uids, which were admitted though the first
//! watch still stood (the break). They must be refused over the limit,
//! the first watch must stand (a proclamation on its resource is pushed
//! to it), and its charge must stay.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{NetLocker, Proclamation};

use crate::node::{args, remote, start, TOKEN};
use crate::wire::{
    authenticate_as, call, leader_request, lock_request, read_frame, response, CHANGED,
    OP_FORCE_UNLOCK, OP_LOCK, REPLY_BOOL, REPLY_ERROR, REPLY_LEADER, REPLY_PUSH, VERSION_5,
};

const ROUNDS: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_stays_charged_after_its_uid_is_forced_open() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 1;
    let node = start(config).await;
    let (mut raw, _) = authenticate_as(&node.addr, TOKEN, VERSION_5)
        .await
        .expect("authenticated");

    let mut id = 0;
    let mut refused = 0;
    for round in 0..ROUNDS {
        let uid = format!("observer-{round}");
        let held = format!("held-{round}");
        let watched = format!("watched-{round}");
        id += 1;
        let locked = call(&mut raw, id, &lock_request(id, OP_LOCK, &uid, &[&held])).await;
        if round > 0 {
            // The first round's watch still stands, charged to its uid:
            // the connection's one lock is taken.
            assert_eq!(
                locked.first(),
                Some(&REPLY_ERROR),
                "round {round}: a lock under a new uid is refused while the first round's \
                 watch stands (charged now: {} bytes): {locked:?}",
                node.stats.lock_bytes()
            );
            assert!(
                String::from_utf8_lossy(&locked).contains("already holds 1 locks"),
                "round {round}: refused over the connection's limit: {:?}",
                String::from_utf8_lossy(&locked)
            );
            refused += 1;
            continue;
        }
        assert_eq!(
            locked,
            [REPLY_BOOL, 1],
            "round {round}: the connection's one lock is admitted"
        );
        id += 1;
        let read = call(
            &mut raw,
            id,
            &leader_request(id, &uid, &[&watched], Some(Duration::from_secs(30))),
        )
        .await;
        assert_eq!(
            read,
            [REPLY_LEADER, 0],
            "round {round}: no leader; watching"
        );
        id += 1;
        let forced = call(&mut raw, id, &lock_request(id, OP_FORCE_UNLOCK, &uid, &[])).await;
        assert_eq!(
            forced,
            [REPLY_BOOL, 1],
            "round {round}: its own uid forced open"
        );
    }
    assert_eq!(refused, ROUNDS - 1);

    // The first watch still stands: a leader on its resource is pushed to it.
    let leader = remote(&node).await;
    let lock = args("leader", &["watched-0".to_string()]);
    assert_eq!(leader.lock(&lock).await, Ok(true));
    let charged = node.stats.lock_bytes();
    let p = Proclamation::new(1, 0, &b"v"[..]).expect("a proclamation");
    assert_eq!(leader.proclaim(&lock, &p).await, Ok(true));
    let pushed = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut raw, 1 << 16))
        .await
        .expect("pushed within 5 s")
        .expect("a push");
    let (push_id, push) = response(&pushed);
    assert_eq!(push_id, 0);
    let mut expected = vec![REPLY_PUSH, b"observer-0".len() as u8];
    expected.extend_from_slice(b"observer-0");
    expected.push(CHANGED);
    assert_eq!(push, expected, "the first round's watch stands");

    let leaders_lock = {
        // What the leader's lock alone is charged: the server's count
        // before the watcher's rounds is zero, so measure it on a server
        // of its own.
        let alone = start(ServerConfig::new(TOKEN)).await;
        let client = remote(&alone).await;
        assert_eq!(client.lock(&lock).await, Ok(true));
        alone.stats.lock_bytes()
    };
    assert!(
        charged > leaders_lock,
        "a watch stands for a connection whose uid was forced open, and the server charges \
         {charged} bytes, no more than the leader's lock alone ({leaders_lock}): the force of \
         its uid dropped its charge"
    );
}
