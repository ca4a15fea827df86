//! docs/lock-servers.md: a waiter that reconnected and asks again over its
//! new connection moves there, "so every place the table keeps is counted
//! by an open connection". Here the old connection refreshed the uid after
//! the waiter moved (the lock server then charges the uid to it), and the
//! old place expired before that connection closed.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, remote, reservation, start, Node, TOKEN};
use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

#[tokio::test]
async fn a_place_is_not_kept_after_every_connection_that_asked_for_it_closed() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());

    // The old connection: a reservation for 1 s on "held" and "other";
    // the reconnected waiter asks for "held" alone.
    let old = remote(&node).await;
    let both = vec!["held".to_string(), "other".to_string()];
    a_waiter_moves_and_its_old_connection_refreshes(&node, &old, &both, &held).await;
    drop(old);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let places = node.locker.waiting();
    // Whether the place stands in line: "held" is freed, a newcomer asks.
    assert!(holder.unlock(&args("holder", &held)).await.unwrap());
    let newcomer = remote(&node)
        .await
        .lock_wait(&args("newcomer", &held), LockMode::Write, &reservation())
        .await;
    assert_eq!(
        places, 0,
        "every connection that asked for the uid's place closed, yet the table keeps {places} \
         place(s); a newcomer on the freed name got {newcomer:?}"
    );
}

/// As above, with the reconnected waiter asking again for the very names
/// it asked for before: the places the table keeps must stay charged
/// ("the ledger never charges less than the table keeps").
#[tokio::test]
async fn places_a_reconnected_waiter_left_stay_charged_while_the_table_keeps_them() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let holders = node.stats.lock_bytes();

    let names = crate::node::names(0);
    let old = remote(&node).await;
    a_waiter_moves_and_its_old_connection_refreshes(&node, &old, &names, &names).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let places = node.locker.waiting();
    let charged = node.stats.lock_bytes() - holders;
    assert!(
        places == 0 || charged > 0,
        "the table keeps {places} places of the reconnected waiter, and the ledger charges \
         {charged} bytes for them"
    );
}

/// Repeated by one client: each step a waiter asks on 1000 names over a
/// long-lived connection with a short place, "reconnects" (a fresh
/// connection asks again with a 60 s place, then closes), and the
/// long-lived connection refreshes the uid. At most three connections are
/// open at once, each allowed 1024 places in line; the table must not keep
/// more places than its open connections count.
#[tokio::test]
async fn a_client_cannot_pile_up_places_by_refreshing_over_its_old_connection() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let old = remote(&node).await;
    for step in 0..20usize {
        let uid = format!("w{step:03}");
        let mut names: Vec<String> = (0..999).map(|i| format!("p{step:03}-{i:04}")).collect();
        names.push("held".to_string());
        let short = WaitArgs {
            ticket: Ticket::now(),
            place_ttl: Duration::from_millis(20),
            wake: None,
        };
        let reply = old
            .lock_wait(&args(&uid, &names), LockMode::Write, &short)
            .await;
        assert_eq!(reply.unwrap(), WaitReply::Refused, "step {step}");
        let new = remote(&node).await;
        let reply = new
            .lock_wait(&args(&uid, &names), LockMode::Write, &reservation())
            .await;
        assert_eq!(reply.unwrap(), WaitReply::Refused, "step {step}");
        let _ = old.refresh(&args(&uid, &names)).await;
        drop(new);
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    // The long-lived connection settles its expired places.
    let free = vec!["free".to_string()];
    let reply = old
        .lock_wait(&args("v", &free), LockMode::Write, &reservation())
        .await;
    assert_eq!(reply.unwrap(), WaitReply::Granted);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let places = node.locker.waiting();
    let charged = node.stats.lock_bytes();
    assert!(
        places <= 1024,
        "after 20 steps the table keeps {places} places in line (one connection open besides \
         the holder's, 1024 places allowed per connection); {charged} lock bytes charged"
    );
}

/// The scenario the first two tests share: the waiter "w" asks over `old`
/// for `asked_first` with a 1 s place and is refused; it reconnects (a new
/// connection asks for `asked_again` with a 60 s place, refused too); `old`
/// refreshes the uid on `asked_again` (it holds nothing, yet the refresh
/// succeeds). The waiter goes away; then the old place expires, and `old`,
/// asking for (granted) and releasing "free", settles it. `old` stays open.
async fn a_waiter_moves_and_its_old_connection_refreshes(
    node: &Node,
    old: &RemoteLocker,
    asked_first: &[String],
    asked_again: &[String],
) {
    let short = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(1),
        wake: None,
    };
    let reply = old
        .lock_wait(&args("w", asked_first), LockMode::Write, &short)
        .await;
    assert_eq!(reply.unwrap(), WaitReply::Refused);
    let new = remote(node).await;
    let reply = new
        .lock_wait(&args("w", asked_again), LockMode::Write, &reservation())
        .await;
    assert_eq!(reply.unwrap(), WaitReply::Refused);
    let refreshed = old.refresh(&args("w", asked_again)).await;
    assert!(refreshed.is_ok(), "{refreshed:?}");
    drop(new);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let free = vec!["free".to_string()];
    let reply = old
        .lock_wait(&args("v", &free), LockMode::Write, &reservation())
        .await;
    assert_eq!(reply.unwrap(), WaitReply::Granted);
    assert!(old.unlock(&args("v", &free)).await.unwrap());
}
