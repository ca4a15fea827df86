//! docs/lock-servers.md, "Limits and memory": "A connection may hold at
//! most 1024 places in line; beyond that a waiter gets an error saying
//! so." And "every place the table keeps is counted by an open
//! connection".
//!
//! A client holds "x{n}" under one uid and waits for it under another, U,
//! with pushes. Then, in one write, it releases "x{n}" (which grants U's
//! place there and queues the push) and asks a new wait of U for "held",
//! which another uid holds: the server handles both frames of the batch
//! before it forwards the push, so the new wait is queued (and replaces
//! U's granted place in the connection's record) first; the push then
//! arrives and forgets U's place — the new one, which the lock table keeps.
//! Repeated with fresh uids, one connection whose limit is 2 places keeps
//! many more places in the table, none refused for the limit.
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, frame, lock_request, lock_wait_request, read_frame, response, OP_LOCK,
    OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_ERROR, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_pushed_behind_a_new_wait_of_its_uid_leaves_that_wait_counted() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 2;
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, welcome) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    assert_eq!(&welcome[..2], &[0, 6], "accepted");
    let mut id = 1u64;
    let mut next = || {
        id += 1;
        id
    };
    let i = next();
    assert_eq!(
        call(&mut a, i, &lock_request(i, OP_LOCK, "holder", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    let ttl = Duration::from_secs(60);
    let steps = 6u64;
    let mut refused = 0;
    for step in 0..steps {
        let x = format!("x{step}");
        let (v, u) = (format!("v{step}"), format!("u{step}"));
        let i = next();
        assert_eq!(
            call(&mut a, i, &lock_request(i, OP_LOCK, &v, &[&x])).await,
            [REPLY_BOOL, 1],
            "step {step}: v holds x"
        );
        let i = next();
        let body = call(
            &mut a,
            i,
            &lock_wait_request(i, &u, &[&x], (step + 1, 1), ttl, true),
        )
        .await;
        if body.first() == Some(&REPLY_ERROR) {
            refused += 1;
            continue;
        }
        assert_eq!(body, [REPLY_WAIT, QUEUED], "step {step}: u waits for x");
        // One write: the release grants u's place (its push is queued), and
        // u's new wait for "held" is handled in the same batch.
        let (release, wait) = (next(), next());
        let mut batch = frame(&lock_request(release, OP_UNLOCK, &v, &[&x]));
        batch.extend(frame(&lock_wait_request(
            wait,
            &u,
            &["held"],
            (step + 1, 2),
            ttl,
            true,
        )));
        a.write_all(&batch).await.unwrap();
        let (mut released, mut waited, mut pushed) = (None, None, false);
        for _ in 0..10 {
            if released.is_some() && waited.is_some() && pushed {
                break;
            }
            let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut a, 64 * 1024))
                .await
                .expect("a frame within 5 s")
                .expect("a frame");
            let (got, body) = response(&reply);
            if got == release {
                released = Some(body.to_vec());
            } else if got == wait {
                waited = Some(body.to_vec());
            } else {
                pushed = true;
            }
        }
        assert_eq!(released, Some(vec![REPLY_BOOL, 1]), "step {step}: released");
        let waited = waited.expect("the wait answered");
        if waited.first() == Some(&REPLY_ERROR) {
            refused += 1;
            continue;
        }
        assert_eq!(
            waited,
            [REPLY_WAIT, QUEUED],
            "step {step}: u waits for held"
        );
        assert!(pushed, "step {step}: u's grant of x pushed");
    }
    let places = node.locker.waiting();
    assert!(
        places <= 2,
        "one connection whose limit is 2 places keeps {places} places in the lock table \
         ({refused} waits refused for the limit over {steps} steps)"
    );
}
