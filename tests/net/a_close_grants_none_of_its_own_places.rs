//! Reproduces a past break: a close ends its connection's places one at a time, and ending one grants the next, a place of the same closed connection, which then holds the lock for the validity ahead of a live waiter.
#![cfg(feature = "net")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::node::{args, remote, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake};

#[derive(Default)]
struct Inbox(Mutex<Vec<(String, PushEvent)>>);

impl PushSink for Inbox {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        self.0.lock().unwrap().push((uid.to_owned(), event));
    }
}

fn pushed(inbox: &Arc<Inbox>) -> WaitArgs {
    WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(60),
        wake: Some(Wake::new(inbox.clone(), 0)),
    }
}

/// docs/guarantees.md: "a lock server drops the places of a connection as
/// soon as it closes: before its end of the socket closes", and a freed
/// lock goes to the waiter that waited longest. On each of 20 names x-i a
/// closed-to-be connection keeps two pushed places: first-i, asked on
/// x-i and "y" (held by someone else, so it waits at the head of x-i's
/// line), then second-i on x-i alone, behind it; a live waiter w-i waits
/// on x-i behind both. The connection closes: x-i is free of them all,
/// so each w-i is the one granted. The break: the close ends the places
/// one by one, and where it ends first-i before second-i, x-i is granted
/// to second-i, a place of the very connection that closed, which nobody
/// is told of; it then holds x-i for the validity (60 s) and w-i waits.
/// Bounded: 3 s for the grants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_grants_none_of_its_own_places_ahead_of_a_live_waiter() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let y = vec!["y".to_string()];
    assert!(holder.lock(&args("holder", &y)).await.unwrap());
    let closing = remote(&node).await;
    let live = remote(&node).await;
    let (dead_inbox, live_inbox) = (Arc::new(Inbox::default()), Arc::new(Inbox::default()));
    for i in 0..20 {
        let x = format!("x-{i}");
        let both = vec![x.clone(), "y".to_string()];
        let queued = closing
            .lock_wait(
                &args(&format!("first-{i}"), &both),
                LockMode::Write,
                &pushed(&dead_inbox),
            )
            .await
            .unwrap();
        assert_eq!(queued, WaitReply::Queued);
        let queued = closing
            .lock_wait(
                &args(&format!("second-{i}"), std::slice::from_ref(&x)),
                LockMode::Write,
                &pushed(&dead_inbox),
            )
            .await
            .unwrap();
        assert_eq!(queued, WaitReply::Queued);
        let queued = live
            .lock_wait(
                &args(&format!("w-{i}"), &[x]),
                LockMode::Write,
                &pushed(&live_inbox),
            )
            .await
            .unwrap();
        assert_eq!(queued, WaitReply::Queued);
    }
    drop(closing);
    let closed = Instant::now();
    let granted = |inbox: &Arc<Inbox>| {
        inbox
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, e)| *e == PushEvent::Granted)
            .count()
    };
    while granted(&live_inbox) < 20 && closed.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let held_by_closed: Vec<String> = node
        .locker
        .locks()
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.uid.starts_with("second-"))
        .map(|l| format!("{} by {}", l.resource, l.uid))
        .collect();
    assert_eq!(
        granted(&live_inbox),
        20,
        "live waiters granted 3 s after the other connection closed; names held by its closed \
         places: {held_by_closed:?}"
    );
    drop(live);
    drop(holder);
}
