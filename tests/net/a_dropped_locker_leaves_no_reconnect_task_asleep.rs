//! Reproduces a past break: a locker dropped while offline left its background reconnect task asleep until the attempt due, as long as the reconnect policy's ceiling, on a runtime that then counted it as alive.
//!
//! The background reconnect "stops when it connects, when the token is
//! rejected, when the locker is dropped, or when a newer task supersedes
//! it" (`reconnect_later`), and "No task holds the locker while it waits
//! for a connection" (`RemoteLocker` rustdoc, "Runtimes"). Here a locker
//! made for an address nothing listens on starts offline with its
//! reconnect task asleep towards the next attempt (the policy's first
//! step: up to 10 minutes); the locker is dropped, and the task should
//! end with it, not at the end of its sleep. A program that makes and
//! drops lockers for servers that are down (a cluster's membership
//! changing, a health check) would otherwise gather one sleeping task
//! per locker, for as long as the policy's ceiling.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{NetLocker, RetryPolicy};

use crate::stand_in;

#[tokio::test(start_paused = true)]
async fn a_dropped_locker_leaves_no_reconnect_task_asleep() {
    // Bound, not listening: connections are refused at once.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let addr = socket.local_addr().expect("address").to_string();

    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let mut config = stand_in::config();
    config.reconnect = RetryPolicy {
        initial: Duration::from_secs(600),
        max: Duration::from_secs(600),
    };
    let locker = tokio::time::timeout(Duration::from_secs(5), RemoteLocker::connect(addr, config))
        .await
        .expect("connect ended in time")
        .expect("a server that is down is no error");
    assert!(!locker.is_online(), "nothing listens there");
    let with_locker = metrics.num_alive_tasks();
    assert!(
        with_locker > before,
        "the offline locker runs its background reconnect ({before} tasks before, \
         {with_locker} with the locker)"
    );

    // The task runs to its sleep.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    drop(locker);
    // A moment for the task to notice (in paused time: 1 ms, with every
    // task run to its next wait).
    let dropped = tokio::time::Instant::now();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    let after = metrics.num_alive_tasks();
    // How long it lives on, in paused time (bounded: past the ceiling).
    let mut ended_after = None;
    for _ in 0..=610 {
        if metrics.num_alive_tasks() == before {
            ended_after = Some(dropped.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    drop(socket);
    assert_eq!(
        after, before,
        "the locker is dropped: its reconnect task should end with it, not sleep on towards \
         an attempt for no locker (the reconnect policy's ceiling is 600 s here); it ended \
         {ended_after:?} after the drop"
    );
}
