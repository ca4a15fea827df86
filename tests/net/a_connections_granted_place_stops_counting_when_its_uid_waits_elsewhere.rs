//! docs/lock-servers.md, "Limits and memory": "A connection may hold at
//! most 1024 places in line; beyond that a waiter gets an error saying
//! so." A connection whose only place was granted holds no place, so its
//! next wait fits under a limit of one.
//!
//! Connection A waits for "x" under uid U (pushes on). A then pipelines
//! the release of "x" (which grants U's place there and queues the push
//! to A) followed by many cheap requests, so that A's task forwards the
//! push only after its batch. Meanwhile connection B asks a wait of the
//! same uid U for "x" and "y" ("y" is held): the table keeps that place
//! of U on "x". When A forwards the grant, `end_granted_place` finds a
//! place of U on the recorded names (B's, under another ticket) and keeps
//! A's record of its own place, which the table granted. A, holding no
//! place in the table, is then refused a wait for the limit.
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, frame, lock_request, lock_wait_request, read_frame, response, OP_LOCK,
    OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_PUSH, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;

const FILLER: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connections_granted_place_stops_counting_when_its_uid_waits_elsewhere() {
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
        &lock_wait_request(1, "U", &["x", "y"], (1, 2), ttl, true),
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
    // A's only place was granted: it holds none, and a wait fits.
    let body = call(
        &mut a,
        2 * FILLER,
        &lock_wait_request(2 * FILLER, "W", &["held"], (2, 1), ttl, true),
    )
    .await;
    assert_eq!(
        body.first(),
        Some(&REPLY_WAIT),
        "A's only place was granted (its push read), yet its wait for another uid is refused \
         under a limit of one place: {}",
        String::from_utf8_lossy(&body)
    );
}
