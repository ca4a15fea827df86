//! What one connection keeps standing in a lock server's lines: never more
//! places than `max_waiters_per_connection`, each charged, whatever mix of
//! waits and releases it sends; and a waiter that asks again (a new
//! ticket, or the same one under a new uid) keeps only its newest places.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, names, remote, reservation, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

/// With `max_waiters_per_connection` at 2: each step waits (a reservation
/// on 201 names), then releases its uid naming another resource. The
/// server forgets the connection's place on the release, but the lock
/// table keeps it, so the connection's next waits are never refused for
/// the limit and the places pile up in the table.
#[tokio::test]
async fn a_connection_never_keeps_more_places_than_its_waiter_limit() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 2;
    config.max_bytes_per_connection = 64 << 20;
    let node = start(config).await;
    let client = remote(&node).await;
    assert!(client
        .lock(&args("holder", &["held".to_string()]))
        .await
        .unwrap());
    let mut refused_for_limit = 0;
    for step in 0..10 {
        let uid = format!("w{step:03}");
        match client
            .lock_wait(&args(&uid, &names(step)), LockMode::Write, &reservation())
            .await
        {
            Ok(WaitReply::Refused) => {}
            Ok(other) => panic!("step {step}: {other:?}"),
            Err(err) => {
                assert!(err.to_string().contains("too many queued waiters"), "{err}");
                refused_for_limit += 1;
            }
        }
        let released = client.unlock(&args(&uid, &["elsewhere".to_string()])).await;
        assert!(released.is_ok(), "{released:?}");
    }
    let places = node.locker.waiting();
    eprintln!(
        "places in the table: {places}; waits refused for the limit: {refused_for_limit}; \
         lock bytes charged: {}",
        node.stats.lock_bytes()
    );
    assert!(
        places <= 2 * 201,
        "one connection with a limit of 2 waiters keeps {places} places ({} requests of 201 \
         names) in the lock table; {refused_for_limit} waits were refused for the limit",
        places / 201
    );
}

/// One uid asks again and again with a new ticket each time, for other
/// names: the server keeps, and charges, the places of its newest request
/// only.
#[tokio::test]
async fn a_uid_asking_again_with_new_tickets_keeps_only_its_newest_places() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 1 << 20;
    let node = start(config).await;
    let client = remote(&node).await;
    assert!(client
        .lock(&args("holder", &["held".to_string()]))
        .await
        .unwrap());
    let holders = node.stats.lock_bytes();
    let mut charged = None;
    for step in 0..30 {
        let reply = client
            .lock_wait(
                &args("one-uid", &names(step)),
                LockMode::Write,
                &reservation(),
            )
            .await;
        assert_eq!(reply.unwrap(), WaitReply::Refused, "step {step}");
        assert_eq!(node.locker.waiting(), 201, "step {step}");
        let now = node.stats.lock_bytes() - holders;
        assert_eq!(*charged.get_or_insert(now), now, "step {step}");
    }
}

/// Two uids and two tickets crossed: (a, t1), (b, t2), (a, t2), (b, t1),
/// ... each on names of its own. Every request replaces the places of the
/// uid and of the ticket it names; at most two requests stand at a time.
#[tokio::test]
async fn crossed_uids_and_tickets_keep_at_most_two_requests_standing() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 1 << 20;
    let node = start(config).await;
    let client = remote(&node).await;
    assert!(client
        .lock(&args("holder", &["held".to_string()]))
        .await
        .unwrap());
    let tickets = [Ticket::now(), Ticket::now()];
    let mut most = 0;
    for step in 0..40 {
        let uid = ["a", "b"][step % 2];
        let ticket = tickets[(step / 2 + step % 2) % 2];
        let wait = WaitArgs {
            ticket,
            place_ttl: Duration::from_secs(60),
            wake: None,
        };
        let reply = client
            .lock_wait(&args(uid, &names(step)), LockMode::Write, &wait)
            .await;
        assert_eq!(reply.unwrap(), WaitReply::Refused, "step {step}");
        most = most.max(node.locker.waiting());
    }
    assert!(most <= 2 * 201, "{most} places stood at once");
}
