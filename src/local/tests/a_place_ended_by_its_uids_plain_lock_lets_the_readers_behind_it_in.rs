//! Reproduces: a plain lock of a waiter's uid ends its place in the line
//! of a name it grants, but the line does not move on: a reader queued
//! behind that (write) place stays in line beside the new read lock,
//! though nothing in its way is left, until its own re-check.
//!
//! src/local/waiting.rs: "a place is never a grant: ending one only lets
//! others in sooner"; a lock server's plain lock ends the uid's places
//! (requests.rs `grant`), and the readers behind a place that ended are
//! granted as the line moves on (see `forced_places.rs` for places ended
//! by a force).
//!
//! Scene: P holds "y". U write-waits for {x, y}: its place on the free
//! name x waits for y. R read-waits for x, behind U's write place. U then
//! takes a plain read lock on x, which ends U's place there. x is read by
//! U alone and R stands first in its line: R is granted (pushed). Here it
//! is left waiting.

use std::sync::Arc;

use futures::executor::block_on;

use super::args;
use super::pushed::{long_lived, pushed, Grants};
use crate::{LockMode, NetLocker, WaitReply};

#[test]
fn a_place_ended_by_its_uids_plain_lock_lets_the_readers_behind_it_in() {
    let l = long_lived();
    let grants = Arc::new(Grants::default());
    assert!(block_on(l.lock(&args("P", &["y"]))).unwrap());
    let wait = |uid: &str, names: &[&str], mode, at| {
        block_on(l.lock_wait(&args(uid, names), mode, &pushed(at, &grants))).unwrap()
    };
    assert_eq!(
        wait("U", &["x", "y"], LockMode::Write, 1),
        WaitReply::Queued
    );
    assert_eq!(
        wait("R", &["x"], LockMode::Read, 2),
        WaitReply::Queued,
        "R waits behind U's write place on x"
    );
    assert!(
        block_on(l.rlock(&args("U", &["x"]))).unwrap(),
        "U read-locks x"
    );
    let granted = std::mem::take(&mut *grants.0.lock().unwrap());
    let held: Vec<_> = l
        .snapshot()
        .into_iter()
        .map(|e| (e.resource, e.uid, e.mode))
        .collect();
    assert_eq!(
        granted,
        ["R"],
        "R stands first on x, read by U alone, once U's write place there ended; table now \
         {held:?}, {} places in line",
        l.waiting()
    );
}
