//! Reproduces: one waiter (one uid, one ticket) keeps two requests in
//! line on names the two do not share (a `LocalLocker` ends an older
//! request's places only when the two share a name, docs/guarantees.md
//! "A waiter's place is a lease"). When one release frees the heads of
//! both, the promotion's batch of waiters for several names drops all but
//! one of them (`promotion.rs` dedups the batch by ticket and uid): the
//! other stands first on names nobody holds and is not granted, until its
//! own re-check.
//!
//! Scene: P writes {b, c}. U read-waits for {b, d} (ticket 5): its place
//! on the free name d waits for b. U then read-waits, same uid and
//! ticket, for {a, c}: its place on the free name a waits for c; the two
//! requests share no name, so both keep their places. P lets go of
//! {b, c}: every name the two requests cover is free and U stands first
//! in every line, so U is granted both (pushed). Here one is left.

use std::sync::Arc;

use futures::executor::block_on;

use super::args;
use super::pushed::{long_lived, pushed, Grants};
use crate::{LockMode, NetLocker, WaitReply};

#[test]
fn two_requests_of_one_waiter_on_other_names_freed_together_are_both_granted() {
    let l = long_lived();
    let grants = Arc::new(Grants::default());
    assert!(block_on(l.lock(&args("P", &["b", "c"]))).unwrap());
    let wait = |names: &[&str]| {
        block_on(l.lock_wait(&args("U", names), LockMode::Read, &pushed(5, &grants))).unwrap()
    };
    assert_eq!(wait(&["b", "d"]), WaitReply::Queued, "P writes b");
    assert_eq!(wait(&["a", "c"]), WaitReply::Queued, "P writes c");
    assert_eq!(l.waiting(), 4, "both requests keep their places");
    assert!(block_on(l.unlock(&args("P", &["b", "c"]))).unwrap());
    let granted = std::mem::take(&mut *grants.0.lock().unwrap());
    let mut held: Vec<_> = l
        .snapshot()
        .into_iter()
        .map(|e| (e.resource, e.uid))
        .collect();
    held.sort();
    let all = ["a", "b", "c", "d"].map(|n| (n.to_owned(), "U".to_owned()));
    assert_eq!(
        held,
        all,
        "U stands first on every name, and nobody holds any: both its requests \
         are granted (pushes: {granted:?}), {} places left in line",
        l.waiting()
    );
    // Its own re-check of each request would grant it.
    assert_eq!(wait(&["a", "c"]), WaitReply::Granted);
    assert_eq!(wait(&["b", "d"]), WaitReply::Granted);
}
