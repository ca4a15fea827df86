//! A pushed grant of uid U's place to connection A, forwarded only after a
//! long batch of A's, while U asks again to wait over connection B.
//!
//! Connection A waits for "x" under U (pushes on), then pipelines the
//! release of "x" (which grants U's place and queues the push to A)
//! followed by many cheap requests, so that A's task forwards the push
//! only after its batch. Meanwhile B asks a wait of U for "x" and "y"
//! ("y" is held): the table keeps that place of U on "x". A's
//! `end_granted_place` then finds a place of U on the recorded names, B's,
//! and must not take it for A's own. Real time (sockets), every call and
//! loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::authenticated;
use crate::node::{start, Node, TOKEN};
use crate::wire::{
    call, frame, lock_request, lock_wait_request, read_frame, response, OP_LOCK, OP_REFRESH,
    OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_PUSH, REPLY_WAIT,
};
use quorum_lock::net::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const FILLER: u64 = 20_000;
const TTL: Duration = Duration::from_secs(60);

/// Plays the scene up to A's push read, with B's wait asked under
/// `b_ticket`, and returns the server and the connections A and B.
async fn grant_pushed_to_a_while_u_waits_over_b(
    b_ticket: (u64, u64),
) -> (Node, TcpStream, TcpStream) {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut a, mut b, mut c] = authenticated(&node).await;
    for (id, uid, name) in [(1, "h", "held"), (2, "hy", "y")] {
        assert_eq!(
            call(&mut c, id, &lock_request(id, OP_LOCK, uid, &[name])).await,
            [REPLY_BOOL, 1]
        );
    }
    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "v", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(
            &mut a,
            2,
            &lock_wait_request(2, "U", &["x"], (1, 1), TTL, true)
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
            let (_, body) = response(&reply);
            if body.first() == Some(&REPLY_PUSH) {
                pushed = true;
                push_after = Some(replies);
            } else {
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
        &lock_wait_request(1, "U", &["x", "y"], b_ticket, TTL, true),
    )
    .await;
    let (a, push_after) = tokio::time::timeout(Duration::from_secs(90), reader)
        .await
        .expect("A's batch answered")
        .unwrap();
    eprintln!(
        "B's wait of U: {b_wait:?}; A's push after {push_after:?} replies; places {}",
        node.locker.waiting()
    );
    (node, a, b)
}

/// docs/lock-servers.md, "Limits and memory": "A connection may hold at
/// most 1024 places in line; beyond that a waiter gets an error saying
/// so." A's only place was granted, so it holds none and its next wait
/// fits under a limit of one, though U waits over B under another ticket.
/// (A past break: A kept the record of its granted place.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connections_granted_place_stops_counting_when_its_uid_waits_elsewhere() {
    let (_node, mut a, _b) = grant_pushed_to_a_while_u_waits_over_b((1, 2)).await;
    let body = call(
        &mut a,
        2 * FILLER,
        &lock_wait_request(2 * FILLER, "W", &["held"], (2, 1), TTL, true),
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

/// docs/lock-servers.md, "Limits and memory": "A place is the connection's
/// it was asked over last, one at a time: [...] when the one it asked over
/// last closes, the place ends though the other is open." B asks U's place
/// last, under A's ticket; A refreshes U (the ledger's owner of U is A
/// again) and closes. B's place must stay. (A past break: A's close ended
/// its kept record by the shared ticket and took B's place on "x".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_last_over_an_open_connection_survives_the_close_of_one_whose_place_was_granted(
) {
    let (node, mut a, b) = grant_pushed_to_a_while_u_waits_over_b((1, 1)).await;
    let before = node.locker.waiting();
    assert_eq!(before, 2, "B's place of U on x and y");
    // `Refresh(args, mode: None)`; pushes to A (a wound of U's grant by its
    // own place over B) are skipped.
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
