//! A waiter that asks over two open connections by turns: its place is the
//! connection's it asked over last, ends when that one closes, and comes
//! back where its ticket ranks it when the waiter asks over the other.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, remote, reservation_with, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Ticket, WaitReply};

/// A holder holds `held`. A waiter asks with one uid and ticket over its
/// first connection, its second, then its first again; a later waiter
/// queues behind it. The first connection closes: the place was the
/// first's (docs/lock-servers.md, "A place is the connection's it was
/// asked over last"), so it ends and only the later waiter's is left. The
/// waiter asks again over the second: its older ticket ranks it ahead, so
/// once the holder lets go the later waiter is refused and the waiter is
/// granted. Bounded: the clean-up is awaited at most 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_over_two_connections_is_the_last_ones_and_comes_back_by_its_ticket() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let second = remote(&node).await;
    let later = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let first = remote(&node).await;
    let waiter = args("waiter", &held);
    let old = reservation_with(Ticket::now());
    for (over, conn) in [
        ("first", &first),
        ("second", &second),
        ("first again", &first),
    ] {
        let reply = conn
            .lock_wait(&waiter, LockMode::Write, &old)
            .await
            .unwrap();
        assert_eq!(
            reply,
            WaitReply::Refused,
            "the waiter's place, asked over the {over}"
        );
    }
    let behind = reservation_with(Ticket::now());
    let reply = later
        .lock_wait(&args("later", &held), LockMode::Write, &behind)
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Refused, "the later waiter queues");
    assert_eq!(node.locker.waiting(), 2);
    drop(first);
    let mut waited = 0;
    while node.locker.waiting() > 1 && waited < 500 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    assert_eq!(
        node.locker.waiting(),
        1,
        "places left once the connection the waiter asked over last closed: its place ended with it"
    );
    let reply = second
        .lock_wait(&waiter, LockMode::Write, &old)
        .await
        .unwrap();
    assert_eq!(
        reply,
        WaitReply::Refused,
        "the waiter's place, asked again over the second"
    );
    assert_eq!(node.locker.waiting(), 2);
    assert!(holder.unlock(&args("holder", &held)).await.unwrap());
    let reply = later
        .lock_wait(&args("later", &held), LockMode::Write, &behind)
        .await
        .unwrap();
    assert_eq!(
        reply,
        WaitReply::Refused,
        "the later waiter, behind the waiter's older ticket"
    );
    let reply = second
        .lock_wait(&waiter, LockMode::Write, &old)
        .await
        .unwrap();
    assert_eq!(
        reply,
        WaitReply::Granted,
        "the waiter, ranked by its ticket"
    );
}
