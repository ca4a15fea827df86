//! Reproduces a past break: an old connection of a uid closing ends the place that uid keeps under a newer ticket over another, still open connection, so a later waiter overtakes it.
#![cfg(feature = "net")]

use crate::node::{args, places_once_clean_ups_ran, remote, reservation_with, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Ticket, WaitReply};

/// A holder holds `held`. A waiter keeps a place on it over a first
/// connection, then asks again with the same uid under a new ticket over a
/// second connection, which stays open and keeps the place. A later waiter
/// queues behind it. The first connection closes: only its own place may
/// go ("a lock server drops the places of a connection as soon as it
/// closes"); the second connection's place stays, and once the holder lets
/// go the later waiter is refused ("a freed lock goes to the waiter that
/// waited longest"). Bounded: the clean-ups are awaited at most 500 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_kept_over_an_open_connection_survives_the_close_of_the_uids_old_connection() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let second = remote(&node).await;
    let later = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let first = remote(&node).await;
    let uid = "waiter";
    let old = reservation_with(Ticket::now());
    let reply = first
        .lock_wait(&args(uid, &held), LockMode::Write, &old)
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Refused, "a reservation over the first");
    let kept = reservation_with(Ticket::now());
    let reply = second
        .lock_wait(&args(uid, &held), LockMode::Write, &kept)
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Refused, "a reservation over the second");
    let behind = reservation_with(Ticket::now());
    let reply = later
        .lock_wait(&args("later", &held), LockMode::Write, &behind)
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Refused, "the later waiter queues");
    assert_eq!(node.locker.waiting(), 2);
    drop(first);
    // The uid's place and the later waiter's are left once the clean-ups
    // ran; the break leaves the later waiter's only.
    let places = places_once_clean_ups_ran(&node, 0, &held, |places| places <= 1).await;
    assert!(holder.unlock(&args("holder", &held)).await.unwrap());
    let overtook = later
        .lock_wait(&args("later", &held), LockMode::Write, &behind)
        .await
        .unwrap();
    assert_eq!(
        (places, overtook),
        (2, WaitReply::Refused),
        "(places in the table, the later waiter's answer) after the uid's old connection closed: \
         the place its open connection keeps was ended, and the later waiter took its turn"
    );
}
