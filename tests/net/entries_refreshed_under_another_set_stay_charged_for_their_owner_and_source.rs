//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) and against the whole server
//! (1 GiB). A lock stays counted until it is released [...] or until it
//! expired", and "A refresh keeps every lock of its uid counted (the
//! entries it reaches may have been granted under another set of names,
//! whose charge pays for their owner and source)".
//!
//! A client takes single-name write locks under one uid, each with a
//! 512-byte owner and a 512-byte source, then refreshes all of their names
//! again and again as one new set with a one-byte owner and source: by
//! refresh calls, or by waits (a wait granted at once refreshes the
//! entries its uid holds on the names it asks for). The sets the locks
//! were granted as are never named again; if only the new set's charge
//! were kept, they would lapse while their entries live on, each still
//! keeping its lock's 1 KiB owner and source, and the connection would
//! end up holding, live, more such locks than a fresh connection may
//! take. (Past breaks: the refresh, then the wait, touched only the set
//! it named.) A 1 s validity, a 64 KiB cap per connection, an admin token
//! for the listing. Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockArgs, LockMode, NetLocker, Ticket, WaitReply};

use crate::capped::{self, bounded, ADMIN};
use crate::lockers;
use crate::node::{reservation_with, TOKEN};

fn big(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "o".repeat(512).into(),
        source: "s".repeat(512).into(),
        quorum: 1,
    }
}

fn bare(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    }
}

fn name(prefix: &str, i: usize) -> String {
    format!("{prefix}/{i:03}")
}

/// How the culprit refreshes its entries under the new set.
#[derive(Clone, Copy, Debug)]
enum Refresher {
    Refresh,
    Wait,
}

#[tokio::test]
async fn entries_refreshed_under_another_set_stay_charged_for_their_owner_and_source() {
    entries_refreshed_under_a_new_set(Refresher::Refresh).await;
}

#[tokio::test]
async fn entries_refreshed_by_a_wait_under_another_set_stay_charged_for_their_owner_and_source() {
    entries_refreshed_under_a_new_set(Refresher::Wait).await;
}

async fn entries_refreshed_under_a_new_set(by: Refresher) {
    let locker = lockers::without_quarantine("refreshed-under-another-set", Duration::from_secs(1));
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_bytes_per_connection = 64 * 1024;
    let (addr, _stop) = capped::serve(locker, config).await;
    let admin = bounded(
        "connect",
        RemoteLocker::connect(addr.clone(), RemoteConfig::new(ADMIN)),
    )
    .await
    .expect("admin connects");

    // How many such locks one connection may hold: a probe fills its cap.
    let probe = capped::connect(&addr, TOKEN).await;
    let mut most = 0;
    for i in 0..200 {
        match bounded("lock", probe.lock(&big("p", &[name("p", i)]))).await {
            Ok(true) => most += 1,
            _ => break,
        }
    }
    assert!((4..200).contains(&most), "the probe fills its cap: {most}");

    // Half as many, each its own lock (its own set) under one uid.
    let culprit = capped::connect(&addr, TOKEN).await;
    let first = most / 2;
    let names: Vec<String> = (0..first).map(|i| name("c", i)).collect();
    for n in &names {
        assert_eq!(
            bounded("lock", culprit.lock(&big("u", std::slice::from_ref(n)))).await,
            Ok(true)
        );
    }
    // All of them refreshed as one new set, for longer than the lapse.
    let all = bare("u", &names);
    let ticket = Ticket::now();
    for _ in 0..17 {
        match by {
            Refresher::Refresh => assert_eq!(
                bounded("refresh", culprit.refresh(&all)).await,
                Ok(true),
                "the refresh keeps every entry"
            ),
            Refresher::Wait => assert_eq!(
                bounded(
                    "wait",
                    culprit.lock_wait(&all, LockMode::Write, &reservation_with(ticket))
                )
                .await,
                Ok(WaitReply::Granted),
                "the wait is granted: the uid holds every name"
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // More such locks, until the cap refuses one.
    let mut more = 0;
    for i in first..first + 200 {
        match bounded("lock", culprit.lock(&big("u", &[name("c", i)]))).await {
            Ok(true) => more += 1,
            _ => break,
        }
    }
    let listed = bounded("list", admin.locks()).await.expect("listing");
    let live = listed
        .iter()
        .filter(|e| e.uid == "u" && e.owner.len() == 512 && e.source.len() == 512)
        .count();
    assert_eq!(
        live,
        first + more,
        "every lock of the culprit is in the table, with its 1 KiB owner and source"
    );
    assert!(
        live <= most,
        "a connection whose cap admits {most} locks with a 1 KiB owner and source holds {live} \
         of them live ({first} refreshed under another set by {by:?}, {more} taken after their own \
         sets lapsed)"
    );
}
