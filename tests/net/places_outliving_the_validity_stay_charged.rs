//! Reproduces a past break: a place kept longer than the locker's validity loses its charge after the validity while it stands in line, so a connection keeps more places than its byte limit allows.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, start_over, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, LockerConfig, NetLocker, Ticket, WaitArgs, WaitReply};

/// A place of `uid` on 200 names of its own and "held", kept 60 s.
async fn place(client: &RemoteLocker, uid: &str) -> Result<WaitReply, quorum_lock::Error> {
    let mut names: Vec<String> = (0..200).map(|i| format!("{uid}-n{i}")).collect();
    names.push("held".to_string());
    let wait = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(60),
        wake: None,
    };
    tokio::time::timeout(
        Duration::from_secs(10),
        client.lock_wait(&args(uid, &names), LockMode::Write, &wait),
    )
    .await
    .expect("an answer within 10 s")
}

/// docs/lock-servers.md: "A place is charged as a lock is while its
/// connection keeps it", and per connection at most
/// `max_bytes_per_connection`. A server over a locker of 1 s validity,
/// whose places a waiter may ask to keep for up to 60 s. A holder keeps
/// "held" (refreshing it); a client fills its connection with places of
/// 201 names on it until the byte limit refuses one, and keeps them (open
/// connection, places of 60 s). The break: 1.5 s later the ledger takes
/// every charge untouched for the validity as lapsed, places included,
/// so the next place is admitted, and as many more as fit the limit
/// again, while the table still keeps every earlier one: the locker ends a
/// place at its validity at the latest, but gives back its memory only at
/// its next expiry pass, up to a second (or a validity) later. A charge
/// now stays that much longer, and the connection ends its own record of
/// a place at the validity too, taking the place out of the table as its
/// charge goes: the table never keeps more places than the limit admits.
/// Bounded: each call 10 s, 200 places.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn places_kept_past_the_validity_stay_charged_while_they_stand() {
    let locker_config = LockerConfig {
        validity: Duration::from_secs(1),
        ..LockerConfig::default()
    };
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 2 * 1024 * 1024;
    let node = start_over(locker_config, config).await;
    let locker = node.locker.clone();
    let stats = node.stats.clone();
    let connect = || RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN));
    let holder = connect().await.unwrap();
    let held = args("holder", &["held".to_string()]);
    assert!(holder.lock(&held).await.unwrap());
    let refreshing = tokio::spawn(async move {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let _ = holder.refresh(&held).await;
        }
    });
    let client = connect().await.unwrap();
    // Before the first place's charge is made: every charge is younger.
    let first_asked = tokio::time::Instant::now();
    let mut kept = 0;
    while kept < 200 {
        match place(&client, &format!("a{kept}")).await {
            Ok(WaitReply::Refused) => kept += 1,
            Ok(other) => panic!("a reservation, not {other:?}"),
            Err(_) => break,
        }
    }
    assert!(
        kept > 0 && kept < 200,
        "the byte limit refused place {kept}"
    );
    let charged = stats.lock_bytes();
    // Past the validity of every place, before the expiry pass after it.
    tokio::time::sleep_until(first_asked + Duration::from_millis(1500)).await;
    let mut more = 0;
    while more < 200 {
        match place(&client, &format!("b{more}")).await {
            Ok(WaitReply::Refused) => more += 1,
            Ok(other) => panic!("a reservation, not {other:?}"),
            Err(_) => break,
        }
    }
    // More may be admitted once the expired places are gone from the
    // table (the connection ends those it kept, as they lapse at the
    // validity), never beside them.
    let places = locker.waiting();
    assert!(
        places <= kept * 201,
        "the connection kept {kept} places up to its byte limit ({charged} bytes charged), then \
         {more} more 1.5 s later while the table kept them all ({places} places on names, {} \
         bytes charged)",
        stats.lock_bytes()
    );
    refreshing.abort();
    drop(node);
}
