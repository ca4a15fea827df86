//! Reproduces a past break: a place kept over one connection goes uncharged once the same uid's place (under another ticket) lapses on another connection, so a client keeps places in the table that no limit counts.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, names, remote, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

fn wait(place_ttl: Duration) -> WaitArgs {
    WaitArgs {
        ticket: Ticket::now(),
        place_ttl,
        wake: None,
    }
}

/// A client (compromised: it holds the client token) asks for a place on
/// 201 names under one uid over connection `a` with a short time-to-live,
/// then for the same place under the same uid with another ticket over
/// connection `b`, kept 60 s. The table keeps `b`'s place. Once `a`'s own
/// record of its place lapses (`a` asks for something else a second
/// later), the server must keep charging the place `b` keeps ("a place is
/// charged as a lock is while its connection keeps it"; "every place the
/// table keeps is counted by an open connection"; the limits of "a
/// compromised client" bound what it keeps).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_kept_over_a_connection_stays_charged_when_its_uids_place_lapses_elsewhere() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let base = node.stats.lock_bytes();

    let (a, b) = (remote(&node).await, remote(&node).await);
    let all = names(0);
    let reply = a
        .lock_wait(
            &args("w", &all),
            LockMode::Write,
            &wait(Duration::from_millis(50)),
        )
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Refused, "a reservation over a");
    let reply = b
        .lock_wait(
            &args("w", &all),
            LockMode::Write,
            &wait(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Refused, "a reservation over b");
    assert_eq!(node.locker.waiting(), all.len());
    let charged = node.stats.lock_bytes() - base;
    assert!(charged > 0, "the place is charged");

    // `a`'s record of its place lapses; its next request settles it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let free = vec!["free".to_string()];
    let reply = a
        .lock_wait(
            &args("probe", &free),
            LockMode::Write,
            &wait(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Granted);
    assert!(a.unlock(&args("probe", &free)).await.unwrap());

    let places = node.locker.waiting();
    let now_charged = node.stats.lock_bytes() - base;
    assert!(
        places == 0 || now_charged >= charged,
        "the table keeps {places} places of the uid (connection b's, kept 60 s), but the server \
         charges {now_charged} bytes for them (it charged {charged} before a's record lapsed)"
    );
}
