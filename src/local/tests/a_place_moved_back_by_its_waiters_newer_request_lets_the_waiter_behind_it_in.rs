//! Reproduces: a waiter asking again under its uid with a newer ticket
//! moves its place back in a line, behind a waiter that then stands first
//! on a free name, and nobody grants that waiter: it waits for its own
//! re-check (or for some other change of that line) though nothing holds
//! what it waits for.
//!
//! src/local/waiting.rs: one waiter keeps the places of its newest request
//! only ("a place is never a grant: ending one only lets others in
//! sooner"); a place that leaves the head of a free name's line must let
//! the next waiter in, as a place that ends does (forced places included,
//! `forced_places.rs`).
//!
//! Scene: P holds "a". R read-waits for {a, d}: its place on the free
//! name d waits for a. W write-waits for d, behind R's place there. R
//! asks again, under its uid, with a newer ticket, for the write lock on
//! d alone: its place on a ends and its place on d is the newer request's,
//! behind W's. W stands first on d, which nobody holds, so W is granted
//! (pushed) as R's request moves its place back; it was left waiting.

use std::sync::Arc;

use futures::executor::block_on;

use super::args;
use super::pushed::{long_lived, pushed, Grants};
use crate::{LockMode, NetLocker, WaitReply};

#[test]
fn a_place_moved_back_by_its_waiters_newer_request_lets_the_waiter_behind_it_in() {
    let l = long_lived();
    let grants = Arc::new(Grants::default());
    assert!(block_on(l.lock(&args("P", &["a"]))).unwrap());
    let wait = |uid: &str, names: &[&str], mode, at| {
        block_on(l.lock_wait(&args(uid, names), mode, &pushed(at, &grants))).unwrap()
    };
    assert_eq!(wait("R", &["a", "d"], LockMode::Read, 1), WaitReply::Queued);
    assert_eq!(
        wait("W", &["d"], LockMode::Write, 2),
        WaitReply::Queued,
        "W waits behind R's place on d"
    );
    assert_eq!(
        wait("R", &["d"], LockMode::Write, 3),
        WaitReply::Queued,
        "R asks again for d alone, with a newer ticket: behind W"
    );
    let granted = std::mem::take(&mut *grants.0.lock().unwrap());
    let holders: Vec<_> = l
        .snapshot()
        .into_iter()
        .map(|e| (e.resource, e.uid))
        .collect();
    assert_eq!(
        granted,
        ["W"],
        "W stands first on d, which nobody holds, once R's place there moved behind it; \
         table now {holders:?}, {} places in line",
        l.waiting()
    );
    assert!(
        holders.contains(&("d".to_owned(), "W".to_owned())),
        "W holds d: {holders:?}"
    );
}
