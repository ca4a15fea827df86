//! docs/lock-servers.md, "Limits and memory": "A waiter that reconnected
//! and asks again over its new connection moves there: the new connection
//! counts its place [...] A place is the connection's it was asked over
//! last, one at a time: [...] when the one it asked over last closes, the
//! place ends though the other is open." So a place asked over B, the
//! connection asked over last, stays while B is open, whatever A does.
//!
//! Connection A waits for "x" under uid U with ticket T. A then pipelines
//! the release of "x" (which grants U's place and queues the push to A)
//! followed by many cheap requests, so that A's task forwards the push
//! only after its batch. Meanwhile the waiter asks again over B, with the
//! same uid and ticket, for "x" and "y" ("y" is held): the table keeps
//! that place on both names. A's `end_granted_place` finds U queued on
//! "x" and keeps A's record of its granted place. A refreshes U (its lock
//! on "x"), which makes A the uid's owner in the ledger, then closes: its
//! close ends the kept record as a place of its own, by ticket T, and
//! takes B's place on "x" out of the table while B is open.
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, frame, lock_request, lock_wait_request, read_frame, response, OP_LOCK,
    OP_REFRESH, OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_PUSH, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FILLER: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_last_over_an_open_connection_survives_the_close_of_one_whose_place_was_granted(
) {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut c, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut c, 2, &lock_request(2, OP_LOCK, "hy", &["y"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "v", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(
            &mut a,
            2,
            &lock_wait_request(2, "U", &["x"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits for x on A"
    );
    assert_eq!(node.locker.waiting(), 1);
    // One write: the release that grants U's place, then a long tail of
    // cheap requests keeping A's task in its batch.
    let mut batch = frame(&lock_request(3, OP_UNLOCK, "v", &["x"]));
    for i in 0..FILLER {
        batch.extend(frame(&lock_request(10 + i, OP_LOCK, "filler", &["held"])));
    }
    let reader = tokio::spawn(async move {
        a.write_all(&batch).await.unwrap();
        let (mut replies, mut pushed, mut push_after) = (0u64, false, None);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while replies < FILLER + 1 || !pushed {
            let reply = tokio::time::timeout_at(deadline, read_frame(&mut a, 64 * 1024))
                .await
                .expect("A's replies within 60 s")
                .expect("a frame");
            let (id, body) = response(&reply);
            if body.first() == Some(&REPLY_PUSH) {
                pushed = true;
                push_after = Some(replies);
            } else {
                let _ = id;
                replies += 1;
            }
        }
        (a, push_after)
    });
    // U's place is granted once the release ran; then B waits under U.
    let mut granted = false;
    for _ in 0..5_000 {
        if node.locker.waiting() == 0 {
            granted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(granted, "U's place granted by A's release");
    let b_wait = call(
        &mut b,
        1,
        &lock_wait_request(1, "U", &["x", "y"], (1, 1), ttl, true),
    )
    .await;
    let (mut a, push_after) = tokio::time::timeout(Duration::from_secs(90), reader)
        .await
        .expect("A's batch answered")
        .unwrap();
    eprintln!(
        "B's wait of U: {b_wait:?}; A's push after {push_after:?} replies; places {}",
        node.locker.waiting()
    );
    let before = node.locker.waiting();
    assert_eq!(before, 2, "B's place of U on x and y");
    // A refreshes U's lock on "x": the ledger's owner of U is A again.
    // (Pushes to A, a wound of U's grant by its own place over B, are
    // skipped.)
    // `Refresh(args, mode: None)`.
    let mut refresh = lock_request(2 * FILLER, OP_REFRESH, "U", &["x"]);
    refresh.push(0);
    a.write_all(&frame(&refresh)).await.unwrap();
    let mut refreshed = None;
    for _ in 0..10 {
        let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut a, 64 * 1024))
            .await
            .expect("a frame within 5 s")
            .expect("a frame");
        let (id, body) = response(&reply);
        if id == 2 * FILLER {
            refreshed = Some(body.to_vec());
            break;
        }
    }
    assert_eq!(refreshed, Some(vec![REPLY_BOOL, 1]), "A refreshes U");
    // A closes; its client reads the end of the stream.
    a.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), a.read_to_end(&mut rest))
        .await
        .expect("A's stream ends within 5 s");
    drop(a);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = node.locker.waiting();
    assert_eq!(
        after,
        before,
        "B, still open, asked for U's place last; A's close (its own place was granted) \
         took {} of the place's names out of the table",
        before - after
    );
    drop(b);
}
