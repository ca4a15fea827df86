//! Reproduces a past break: a client with the ordinary token refreshes uids it never locked, each naming one resource twice; the server refuses each refresh but keeps a charge for it, so such refreshes fill the lock table's cap with charges for no entry, which the admin can neither list nor force open, and which the client keeps for as long as it repeats them.
//!
//! docs/lock-servers.md, "A compromised client": "Filling the lock table
//! ... denies other clients, but not the admin: ... an admin can then list
//! the culprit's locks ... and force them open: forcing a name open gives
//! back at once the charge of every lock that held it"; "A refresh that
//! finds none of its names held refreshes no charge (so a client cannot
//! keep a charge alive by refreshing other names under its uid)"; "Limits
//! and memory": a request that names one resource twice is refused.
//!
//! `Session::refresh` (src/net/requests.rs) checks only the text of a
//! request before it asks `LocalLocker::holds_any`
//! (src/local/server_queries.rs), which refuses the duplicate like every
//! locker call and answers `true` for a refusal (`unwrap_or(true)`). So the
//! refresh is taken for one reaching entries nothing charges for, and is
//! charged (`Ledger::reserve`); the locker then refuses it, and asked
//! again, `holds_any` again answers `true`, so the charge is kept and
//! touched. Each later refresh with the same list touches it again. (The
//! session checks only the uid, owner and source itself, so names every
//! locker refuses for another reason, an empty one or one with a control
//! character, reach the ledger the same way.)
//!
//! A server with a 64 KiB table cap and a 1 s validity. A client refreshes
//! uids it never locked, each naming a 1,000-byte name twice, until the
//! server refuses one for the cap; it keeps refreshing them for 3 s (three
//! validities). Then the admin lists the locks (none) and forces the name
//! open, and another client locks a free name: refused, the table full.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockArgs, NetLocker};

use crate::capped::{bounded, ADMIN};
use crate::lockers;
use crate::loopback;
use crate::node::TOKEN;

fn args(uid: &str, names: Vec<String>) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.into(),
        owner: "culprit".into(),
        source: "tests/net/a_refresh_naming_a_resource_twice_leaves_no_charge.rs".into(),
        quorum: 1,
    }
}

#[tokio::test]
async fn a_refresh_naming_a_resource_twice_leaves_no_charge() {
    let locker = lockers::without_quarantine("twice", Duration::from_secs(1));
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 64 * 1024;
    let server = LockServer::new(locker, config).expect("valid config");
    let stats = server.stats();
    let (addr, _stop) = loopback::serve(server).await;
    let addr = addr.to_string();
    let connect = |token: &'static str| {
        let addr = addr.clone();
        async move {
            bounded(
                "connect",
                RemoteLocker::connect(addr, RemoteConfig::new(token)),
            )
            .await
            .expect("connect")
        }
    };
    let culprit = connect(TOKEN).await;
    let other = connect(TOKEN).await;
    let admin = connect(ADMIN).await;

    let name = "n".repeat(1000);
    let twice = |i: usize| args(&format!("phantom-{i:04}"), vec![name.clone(), name.clone()]);
    let mut refreshed = Vec::new();
    for i in 0..200 {
        let answer = bounded("refresh", culprit.refresh(&twice(i))).await;
        let shown = format!("{answer:?}");
        if shown.contains("lock table is full") {
            break;
        }
        assert!(
            shown.contains("given twice"),
            "control: the refresh is refused for the duplicate: {shown}"
        );
        refreshed.push(twice(i));
    }
    assert!(
        !refreshed.is_empty(),
        "control: the first refreshes are refused for the duplicate"
    );
    // Three validities: a charge nobody touches lapses within one.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        for lock in &refreshed {
            let _ = bounded("refresh", culprit.refresh(lock)).await;
        }
    }

    let listed = bounded("list", admin.locks())
        .await
        .expect("the admin lists");
    let forced = bounded("force", admin.force_unlock(&args("", vec![name.clone()]))).await;
    let charged = stats.lock_bytes();
    let free = args("other-0000", vec!["free".to_owned()]);
    let locked = bounded("lock", other.lock(&free)).await;
    assert!(
        matches!(locked, Ok(true)),
        "after {} refreshes naming one name twice under uids never locked (each refused for \
         the duplicate), the lock table holds {} locks (the admin's listing) and the admin \
         forced the name open ({forced:?}), yet the server charges {charged} bytes of its \
         64 KiB cap and refuses another client's lock of a free name: {locked:?}",
        refreshed.len(),
        listed.len(),
    );
}
