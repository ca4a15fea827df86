//! Reproduces a past break: a waiter asking again over its new connection as its old one closes can keep its place with no charge (the old connection's clean-up drops the charge the new request found and kept), so the table keeps a place no limit counts.
#![cfg(feature = "net")]

use crate::node::{args, places_once_clean_ups_ran, remote, reservation, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, WaitReply};

/// A holder holds `held`. Each step: a waiter keeps a place on 999 names
/// and `held` over a fresh connection; it reconnected, and asks again with
/// the same uid, ticket and names over a long-lived connection while the
/// first one closes. The server answers that it keeps the place, and must
/// charge it to the new connection ("a place is charged as a lock is while
/// its connection keeps it"; "a waiter that reconnected and asks again over
/// its new connection moves there: the new connection counts its place").
/// Bounded: 300 steps (stopping at the third uncharged place), each waiting
/// at most 500 ms for the clean-ups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnected_waiters_place_stays_charged_as_its_old_connection_closes() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let second = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let base = node.stats.lock_bytes();
    let mut uncharged = Vec::new();
    for step in 0..300 {
        let mut all: Vec<String> = (0..999).map(|i| format!("s{step}-{i}")).collect();
        all.push("held".to_string());
        let uid = format!("w{step}");
        let wait = reservation();
        let first = remote(&node).await;
        let reply = first
            .lock_wait(&args(&uid, &all), LockMode::Write, &wait)
            .await
            .unwrap();
        assert_eq!(reply, WaitReply::Refused, "step {step}: a reservation");
        let closing = tokio::spawn(async move { drop(first) });
        let again = second
            .lock_wait(&args(&uid, &all), LockMode::Write, &wait)
            .await
            .unwrap();
        assert_eq!(again, WaitReply::Refused, "step {step}: the place is kept");
        closing.await.unwrap();
        let places =
            places_once_clean_ups_ran(&node, step, &held, |places| places <= all.len()).await;
        let charged = node.stats.lock_bytes() - base;
        if places > 0 && charged == 0 {
            uncharged.push((step, places));
        }
        let _ = second.unlock(&args(&uid, &all)).await;
        if uncharged.len() >= 3 {
            break;
        }
    }
    assert!(
        uncharged.is_empty(),
        "(step, places in the table) where the waiter's place, kept on its new connection, was \
         charged nothing once its old connection's clean-up ran: {uncharged:?}"
    );
}
