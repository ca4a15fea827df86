//! Reproduces a past break: a waiter that asks again over a new connection while its old connection closes can lose its new place (the old one's clean-up ends it), so a later lock of the name overtakes it.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, remote, reservation, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, WaitReply};

/// Each step: a holder holds `a{step}` and `b{step}`; a waiter keeps a
/// place on both over a fresh connection, then asks again with the same
/// uid and ticket for `a{step}` alone over a long-lived connection (it
/// reconnected) while the first connection closes. The server answers
/// that it keeps the place ("the new connection counts its place, and
/// whatever the old connection's place covered beyond the new request's
/// names is taken out of the table when ... the old connection closes").
/// Once the holder lets `a{step}` go, a plain lock of it by a newcomer must
/// be refused while the waiter waits ("a plain request is refused while
/// anyone conflicting waits"; "a freed lock goes to the waiter that
/// waited longest"). Bounded: 2,000 steps (stopping at the third overtaking), each waiting at most 200 ms for
/// the old connection's clean-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_asking_again_as_its_old_connection_closes_keeps_its_place() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let second = remote(&node).await;
    let newcomer = remote(&node).await;
    let mut overtaken = Vec::new();
    for step in 0..2000 {
        let (a, b) = (format!("a{step}"), format!("b{step}"));
        let both = vec![a.clone(), b.clone()];
        let one = vec![a.clone()];
        let holder_uid = format!("holder{step}");
        assert!(holder.lock(&args(&holder_uid, &both)).await.unwrap());
        let uid = format!("w{step}");
        let wait = reservation();
        let first = remote(&node).await;
        let reply = first
            .lock_wait(&args(&uid, &both), LockMode::Write, &wait)
            .await
            .unwrap();
        assert_eq!(reply, WaitReply::Refused, "step {step}: a reservation");
        let closing = tokio::spawn(async move { drop(first) });
        let again = second
            .lock_wait(&args(&uid, &one), LockMode::Write, &wait)
            .await
            .unwrap();
        assert_eq!(again, WaitReply::Refused, "step {step}: the place is kept");
        closing.await.unwrap();
        // The old connection's place on b{step} goes with its clean-up.
        for _ in 0..20 {
            if node.locker.waiting() <= 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let places = node.locker.waiting();
        assert!(holder.unlock(&args(&holder_uid, &both)).await.unwrap());
        let new_uid = format!("new{step}");
        let got = newcomer.lock(&args(&new_uid, &one)).await.unwrap();
        if got {
            overtaken.push((step, places));
            let _ = newcomer.unlock(&args(&new_uid, &one)).await;
        }
        let _ = second.unlock(&args(&uid, &one)).await;
        if overtaken.len() >= 3 {
            break;
        }
    }
    assert!(
        overtaken.is_empty(),
        "(step, places in the table) where the waiter, told its place on the new connection \
         was kept, had none once its old connection's clean-up ran, and a newcomer's plain lock \
         of the freed name was granted ahead of it: {overtaken:?}"
    );
}
