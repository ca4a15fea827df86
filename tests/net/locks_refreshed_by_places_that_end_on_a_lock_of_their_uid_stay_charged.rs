//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) [...] A lock stays counted until it
//! is released [...] or until it expired", and "A place that ends without
//! a grant gives its charge back, also when its uid holds a lock on some
//! of its names under another set of names (that lock is charged as its
//! own set)".
//!
//! A client with the ordinary token cycles, for each of several uids: a
//! wait (a reservation, answered `Refused`) for the write lock on the 25
//! names its uid holds plus a name someone else holds, and then a plain
//! lock of the same uid on a name of its own, which ends that place. The
//! wait refreshes the uid's 25 entries, but touches only the place's own
//! set in the ledger, and the place's end gives that set's charge back
//! (it was charged for the place alone). The set the 25 entries were
//! granted as is never touched again and lapses. From then on the 25
//! entries live on, refreshed by every cycle, charged by nothing: only a
//! moment's headroom for the place is needed per cycle. Uid after uid, the
//! connection holds live more such locks than its cap admits. A 1 s
//! validity, a 64 KiB cap per connection. Real time (sockets), every call
//! and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockArgs, LockMode, NetLocker, Ticket, WaitReply};

use crate::lockers;
use crate::node::{remote, reservation_with, start_over, TOKEN};

const NAMES: usize = 25;
const UIDS: usize = 4;

fn args(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    }
}

fn names(prefix: &str) -> Vec<String> {
    (0..NAMES).map(|j| format!("{prefix}/{j:03}")).collect()
}

async fn bounded<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 5 s"))
}

#[tokio::test]
async fn locks_refreshed_by_places_that_end_on_a_lock_of_their_uid_stay_charged() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 64 * 1024;
    let node = start_over(
        lockers::config_without_quarantine(Duration::from_secs(1)),
        config,
    )
    .await;

    // How many locks of 25 names one connection may hold.
    let probe = remote(&node).await;
    let mut most = 0;
    for i in 0..20 {
        let lock = args(&format!("p{i}"), &names(&format!("p{i}")));
        match bounded("lock", probe.lock(&lock)).await {
            Ok(true) => most += 1,
            _ => break,
        }
    }
    assert!((1..UIDS).contains(&most), "the probe fills its cap: {most}");

    // Someone else holds "b", so that a wait naming it keeps a place.
    let holder = remote(&node).await;
    let blocker = args("v", &["b".to_string()]);
    assert_eq!(bounded("lock", holder.lock(&blocker)).await, Ok(true));

    let culprit = remote(&node).await;
    let tickets: Vec<Ticket> = (0..UIDS).map(|_| Ticket::now()).collect();
    // A call refused by the connection's limits is the limits holding:
    // the cycles end there.
    let over = |err: Option<&quorum_lock::Error>| {
        err.is_some_and(|err| err.to_string().contains("over its limit"))
    };
    'cycles: for i in 0..UIDS {
        let uid = format!("u{i}");
        let granted = bounded("lock", culprit.lock(&args(&uid, &names(&uid)))).await;
        if over(granted.as_ref().err()) {
            break 'cycles;
        }
        assert_eq!(granted, Ok(true), "lock {i} of 25 names is granted");
        // Cycle every uid so far for longer than the lapse.
        for _ in 0..14 {
            assert_eq!(bounded("refresh", holder.refresh(&blocker)).await, Ok(true));
            for (j, ticket) in tickets.iter().enumerate().take(i + 1) {
                let uid = format!("u{j}");
                let mut asked = names(&uid);
                asked.push("b".to_string());
                let waited = bounded(
                    "wait",
                    culprit.lock_wait(
                        &args(&uid, &asked),
                        LockMode::Write,
                        &reservation_with(*ticket),
                    ),
                )
                .await;
                if over(waited.as_ref().err()) {
                    break 'cycles;
                }
                assert!(
                    matches!(waited, Ok(WaitReply::Refused | WaitReply::Queued)),
                    "the wait keeps a place: {waited:?}"
                );
                let own = args(&uid, &[format!("z{j}")]);
                let granted = bounded("lock", culprit.lock(&own)).await;
                if over(granted.as_ref().err()) {
                    break 'cycles;
                }
                assert_eq!(granted, Ok(true));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    // Every uid's 25 names stand, live, in the table.
    let snapshot = node.locker.snapshot();
    let live = (0..UIDS)
        .filter(|i| {
            let uid = format!("u{i}");
            names(&uid)
                .iter()
                .all(|n| snapshot.iter().any(|e| e.uid == uid && &e.resource == n))
        })
        .count();
    assert!(
        live <= most,
        "a connection whose cap admits {most} locks of 25 names holds {live} of them live, \
         refreshed by waits whose places end on a lock of their uid ({} bytes charged in all on \
         the server)",
        node.stats.lock_bytes()
    );
}
