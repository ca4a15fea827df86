//! Reproduces a past break: an older wait naming two resources that one younger uid holds under two wakes (two waiting calls) pushed `Wounded` through the first grant's wake only: the waiter of the other grant was never told, since a request now wounds each uid once whatever wake its grants were made with.
//!
//! `NetLocker::lock_wait` (rustdoc): "When `wait.ticket` is older than the
//! ticket of a grant it waits behind, the locker pushes
//! `PushEvent::Wounded` to that grant's waiter." docs/guarantees.md: the
//! wounded waiter "gives every grant back and waits again". Here uid
//! "young" is granted "a" through one wake and then "b" through another
//! (a waiter that asked again through a new wake, for the name it was
//! missing); an older writer then waits for both names. Each grant's
//! waiter should hear of the wound; `wound_younger` skips a uid it
//! wounded already for this request, so "b"'s waiter hears nothing.
#![cfg(feature = "testing")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::{
    LocalLocker, LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply,
    Wake,
};

#[derive(Default)]
struct Seen(Mutex<Vec<(String, PushEvent)>>);

impl PushSink for Seen {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        self.0.lock().unwrap().push((uid.to_owned(), event));
    }
}

fn args(uid: &str, resources: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: resources.iter().map(|r| r.to_string()).collect(),
        owner: "owner".into(),
        source: "tests/core".into(),
        quorum: 1,
    }
}

fn wait(ticket: Ticket, sink: &Arc<Seen>) -> WaitArgs {
    WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(5),
        wake: Some(Wake::new(sink.clone(), 0)),
    }
}

#[tokio::test]
async fn an_older_wait_wounds_each_grant_a_younger_uid_holds_under_another_wake() {
    let node = LocalLocker::new();
    let older = Ticket::now();
    let younger = Ticket::now();
    let first = Arc::new(Seen::default());
    let second = Arc::new(Seen::default());

    let granted_a = node
        .lock_wait(
            &args("young", &["a"]),
            LockMode::Write,
            &wait(younger, &first),
        )
        .await
        .expect("an answer");
    assert_eq!(granted_a, WaitReply::Granted, "control: a is free");
    let granted_b = node
        .lock_wait(
            &args("young", &["b"]),
            LockMode::Write,
            &wait(younger, &second),
        )
        .await
        .expect("an answer");
    assert_eq!(granted_b, WaitReply::Granted, "control: b is free");
    let held: Vec<String> = node
        .snapshot()
        .into_iter()
        .filter(|e| e.uid == "young")
        .map(|e| e.resource)
        .collect();
    assert_eq!(held.len(), 2, "control: young holds a and b: {held:?}");

    let queued = node
        .lock_wait(
            &args("old", &["a", "b"]),
            LockMode::Write,
            &wait(older, &Arc::new(Seen::default())),
        )
        .await
        .expect("an answer");
    assert_eq!(queued, WaitReply::Queued, "control: the older writer waits");

    let told_first = first.0.lock().unwrap().clone();
    let told_second = second.0.lock().unwrap().clone();
    eprintln!("a's waiter was pushed {told_first:?}; b's waiter {told_second:?}");
    assert!(
        told_first.contains(&("young".to_owned(), PushEvent::Wounded)),
        "control: the grant of a is wounded"
    );
    assert!(
        told_second.contains(&("young".to_owned(), PushEvent::Wounded)),
        "the older writer waits behind young's grant of b too, yet b's waiter was pushed \
         {told_second:?}: the request wounded the uid once, through a's wake only"
    );
}
