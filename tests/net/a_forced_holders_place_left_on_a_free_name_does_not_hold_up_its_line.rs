//! Reproduces: the lock table's own force of a name drops a forced holder's place from the line that moves on next but leaves the rest of that place on a free name, where a live waiter behind it is granted nothing until the dead place expires.
//!
//! docs/lock-servers.md (threat model, the admin's force by name): the
//! forced holders' places "end too, on the forced names (before their
//! lines move on) and elsewhere (right after); and while the server
//! remembers the force, no line that moves on grants a place of that uid
//! (it is dropped from the line instead), whatever order its places end
//! in". A `LocalLocker`'s `force_unlock` is that force
//! (`force_unlock_as(args, true)`, src/local/contract.rs).
//!
//! Scene, on a `LocalLocker` alone: Q locks "c"; F locks "d". F waits
//! (pushed) for the write lock on "b" and "c": first in both lines, "b"
//! free. W waits (pushed) for "b" alone, behind F. "d" is forced open by
//! name: F is cleared and noted forced, but its place stood on no forced
//! line, so nothing ends it (src/local/forcing.rs, `left` holds only the
//! places dropped from the forced lines). Q releases "c": c's line moves
//! on and drops F's place there (src/local/table/promote.rs, the `forced`
//! predicate), but F's place on "b" stays, at the head of a line nobody
//! holds, which nothing moves on: W is not granted, and asking again it
//! is still queued behind F, until F's place expires (60 s here, at most
//! the validity).
#![cfg(feature = "net")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::node::args;
use quorum_lock::{
    LocalLocker, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake,
};

#[derive(Default)]
struct Inbox(Mutex<Vec<(String, PushEvent)>>);

impl PushSink for Inbox {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        self.0.lock().unwrap().push((uid.to_owned(), event));
    }
}

fn pushed(inbox: &Arc<Inbox>, ticket: Ticket) -> WaitArgs {
    WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(60),
        wake: Some(Wake::new(inbox.clone(), 0)),
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_holders_place_left_on_a_free_name_does_not_hold_up_its_line() {
    let locker = LocalLocker::new();
    let (dead, live) = (Arc::new(Inbox::default()), Arc::new(Inbox::default()));
    assert!(locker.lock(&args("Q", &names(&["c"]))).await.unwrap());
    assert!(locker.lock(&args("F", &names(&["d"]))).await.unwrap());
    let f = args("F", &names(&["b", "c"]));
    assert_eq!(
        locker
            .lock_wait(&f, LockMode::Write, &pushed(&dead, Ticket::now()))
            .await
            .unwrap(),
        WaitReply::Queued,
        "F waits for b and c"
    );
    let w = args("W", &names(&["b"]));
    let w_ticket = Ticket::now();
    assert_eq!(
        locker
            .lock_wait(&w, LockMode::Write, &pushed(&live, w_ticket))
            .await
            .unwrap(),
        WaitReply::Queued,
        "W waits for b behind F"
    );
    assert!(
        locker
            .force_unlock(&args("", &names(&["d"])))
            .await
            .unwrap(),
        "d forced open by name"
    );
    assert!(
        locker.unlock(&args("Q", &names(&["c"]))).await.unwrap(),
        "Q releases c"
    );
    let again = locker
        .lock_wait(&w, LockMode::Write, &pushed(&live, w_ticket))
        .await
        .unwrap();
    let held: Vec<_> = locker
        .snapshot()
        .into_iter()
        .map(|i| (i.uid.to_string(), i.resource.to_string()))
        .collect();
    let pushes = live.0.lock().unwrap().clone();
    assert!(
        again == WaitReply::Granted
            || pushes
                .iter()
                .any(|(uid, e)| uid == "W" && *e == PushEvent::Granted),
        "b is free (held: {held:?}) and W is the only live waiter for it, yet W is neither pushed \
         a grant ({pushes:?}) nor granted asking again ({again:?}): {} places still in line \
         (the forced F's dead place on b ahead of W)",
        locker.waiting()
    );
}
