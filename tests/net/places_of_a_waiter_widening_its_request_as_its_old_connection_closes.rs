//! Reproduces a past break: a waiter that asks again over its new connection for more names as its old connection closes can lose its new places on them (the old connection's clean-up reads the new connection's earlier, narrower place), so a plain lock of those names overtakes it.
#![cfg(feature = "net")]

use crate::node::{args, names, places_once_clean_ups_ran, remote, reservation, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, WaitReply};

/// A holder holds `held`. Each step: a waiter keeps a place on `names(step)`
/// (200 names and `held`) over a fresh connection; it reconnected, and asks
/// again with the same uid and ticket over a long-lived connection, first
/// for `held` alone, then for all of `names(step)` again while the first
/// connection closes. The server answers that it keeps the place each time
/// ("a waiter that reconnected and asks again over its new connection moves
/// there: the new connection counts its place, and whatever the old
/// connection's place covered beyond the new request's names is taken out
/// of the table when ... the old connection closes"): the new request names
/// all of them, so none may go. A newcomer's plain lock of one of the 200
/// names (nobody holds them) must then be refused while the waiter waits
/// ("a plain request is refused while anyone conflicting waits"). Bounded:
/// 1,000 steps (stopping at the third overtaking), each waiting at most
/// 500 ms for the clean-ups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_widening_its_request_as_its_old_connection_closes_keeps_its_places() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let second = remote(&node).await;
    let newcomer = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let mut overtaken = Vec::new();
    for step in 0..1000 {
        let all = names(step);
        let uid = format!("w{step}");
        let wait = reservation();
        let first = remote(&node).await;
        let reply = first
            .lock_wait(&args(&uid, &all), LockMode::Write, &wait)
            .await
            .unwrap();
        assert_eq!(reply, WaitReply::Refused, "step {step}: a reservation");
        let narrow = second
            .lock_wait(&args(&uid, &held), LockMode::Write, &wait)
            .await
            .unwrap();
        assert_eq!(narrow, WaitReply::Refused, "step {step}: the place moved");
        let closing = tokio::spawn(async move { drop(first) });
        let again = second
            .lock_wait(&args(&uid, &all), LockMode::Write, &wait)
            .await
            .unwrap();
        assert_eq!(again, WaitReply::Refused, "step {step}: the place is kept");
        closing.await.unwrap();
        // Once the sentinel's place is gone, so is whatever the first's
        // clean-up ends.
        let places = places_once_clean_ups_ran(&node, step, &held, |places| {
            places == all.len() || places == 1
        })
        .await;
        let probe = vec![all[0].clone()];
        let new_uid = format!("new{step}");
        let got = newcomer.lock(&args(&new_uid, &probe)).await.unwrap();
        if got {
            overtaken.push((step, places));
            let _ = newcomer.unlock(&args(&new_uid, &probe)).await;
        }
        let _ = second.unlock(&args(&uid, &all)).await;
        if overtaken.len() >= 3 {
            break;
        }
    }
    assert!(
        overtaken.is_empty(),
        "(step, places in the table) where the waiter, told its places on all 201 names were \
         kept on its new connection, had lost them once its old connection's clean-up ran, and a \
         newcomer's plain lock of one of those names was granted ahead of it: {overtaken:?}"
    );
}
