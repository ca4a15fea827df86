//! Reproduces: a waiter asking again under its uid and ticket, for the
//! read lock where its place asked for the write lock, keeps its place
//! where it stood (same ticket), but the place no longer conflicts with
//! the readers queued behind it. The line does not move on: a reader
//! behind it on a free name stays waiting, though nothing in its way is
//! left, until its own re-check.
//!
//! src/local/waiting.rs: "a place is never a grant: ending one only lets
//! others in sooner"; one waiter keeps the places of its newest request
//! only, so the write place is replaced by the read place, and a place
//! that no longer stands in a waiter's way must let it in as a place that
//! leaves the line does (`enqueue` pushes the name only when the place
//! moved back).
//!
//! Scene: P holds "b". W write-waits for {a, b} (ticket 1): its place on
//! the free name a waits for b. R read-waits for a (ticket 2), behind W's
//! write place. W asks again, same uid and ticket, for the read lock on
//! {a, b}: still queued (P writes b). On a, nobody holds anything and the
//! only place ahead of R is W's read place: R is granted (pushed). Here
//! it is left waiting.

use std::sync::Arc;

use futures::executor::block_on;

use super::args;
use super::pushed::{long_lived, pushed, Grants};
use crate::{LockMode, NetLocker, WaitReply};

#[test]
fn a_place_turned_from_write_to_read_by_its_waiters_request_lets_the_readers_behind_it_in() {
    let l = long_lived();
    let grants = Arc::new(Grants::default());
    assert!(block_on(l.lock(&args("P", &["b"]))).unwrap());
    let wait = |uid: &str, names: &[&str], mode, at| {
        block_on(l.lock_wait(&args(uid, names), mode, &pushed(at, &grants))).unwrap()
    };
    assert_eq!(
        wait("W", &["a", "b"], LockMode::Write, 1),
        WaitReply::Queued
    );
    assert_eq!(
        wait("R", &["a"], LockMode::Read, 2),
        WaitReply::Queued,
        "R waits behind W's write place on a"
    );
    assert_eq!(
        wait("W", &["a", "b"], LockMode::Read, 1),
        WaitReply::Queued,
        "W asks again for the read lock: P still writes b"
    );
    let granted = std::mem::take(&mut *grants.0.lock().unwrap());
    let holders: Vec<_> = l
        .snapshot()
        .into_iter()
        .map(|e| (e.resource, e.uid))
        .collect();
    assert_eq!(
        granted,
        ["R"],
        "only W's read place stands ahead of R on a, which nobody holds; \
         table now {holders:?}, {} places in line",
        l.waiting()
    );
    // R's own re-check would grant it: nothing stands in its way.
    assert_eq!(wait("R", &["a"], LockMode::Read, 2), WaitReply::Granted);
}
