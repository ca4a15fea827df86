//! docs/guarantees.md, "A waiter's place is a lease": "a lock server drops
//! the places of a connection as soon as it closes. Places naming up to
//! 1,000 names together [...] are ended before the server's end of the
//! socket closes, so a client that reads the end of the stream finds them
//! gone."
//!
//! A client holds "x" under uid "v" and waits for it under uid "u", with
//! pushes. In one write it releases "x" (granting u's place; the push is
//! queued) and asks a new wait of "u" for "held", which another client
//! holds. The server handles both frames before it forwards the push, and
//! forwarding the push forgets u's place on the connection: the new one,
//! which the lock table keeps. The client then closes the connection and
//! reads the end of the stream: u's place on "held" is still in the table
//! (it stays until its ttl, up to the validity, with nobody to push to).
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, remote, start, TOKEN};
use crate::wire::{
    authenticate_as, call, closed_within, frame, lock_request, lock_wait_request, read_frame,
    response, OP_LOCK, OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use quorum_lock::NetLocker;
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_before_its_uids_grant_was_pushed_is_dropped_when_its_connection_closes() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let node = start(config).await;
    let holder = remote(&node).await;
    assert_eq!(
        holder.lock(&args("holder", &["held".to_string()])).await,
        Ok(true)
    );
    let (mut a, welcome) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    assert_eq!(&welcome[..2], &[0, 6], "accepted");
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "v", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(
            &mut a,
            2,
            &lock_wait_request(2, "u", &["x"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED]
    );
    let mut batch = frame(&lock_request(3, OP_UNLOCK, "v", &["x"]));
    batch.extend(frame(&lock_wait_request(
        4,
        "u",
        &["held"],
        (1, 2),
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
        match got {
            3 => released = Some(body.to_vec()),
            4 => waited = Some(body.to_vec()),
            _ => pushed = true,
        }
    }
    assert_eq!(released, Some(vec![REPLY_BOOL, 1]), "released");
    assert_eq!(waited, Some(vec![REPLY_WAIT, QUEUED]), "u waits for held");
    assert!(pushed, "u's grant of x pushed");
    assert_eq!(node.locker.waiting(), 1, "u's place on held stands");

    a.shutdown().await.unwrap();
    closed_within(&mut a, Duration::from_secs(5))
        .await
        .expect("the server closes its end");
    // A moment more than the promise needs.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let places = node.locker.waiting();
    assert_eq!(
        places, 0,
        "the connection closed (its client read the end of the stream, and 200 ms passed), \
         but the lock table keeps {places} place of it"
    );
}
