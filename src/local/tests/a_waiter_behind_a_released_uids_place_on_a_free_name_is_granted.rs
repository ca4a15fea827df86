//! A uid released here is refused every lock and wait from its release on,
//! so its places left on names its unlock did not cover can never be
//! granted (a line that moves on drops them). A waiter standing behind
//! such a place, on a name nobody holds, waits for nothing: it must be
//! granted, at the latest when it asks again, not left waiting until the
//! released uid's place expires or some other name of that uid's request
//! is freed (docs/lock-servers.md: "a client's unlock of some of its uid's
//! names thus also ends that uid's places on the others, as they come to
//! the head of their lines"; docs/guarantees.md: a waiter whose names are
//! free is granted at once).
//!
//! Scene: g holds f. x holds a and waits for d and f together: its place
//! stands at the head of d's line (d is free, f is not). y waits for d
//! behind it. x's uid is released (a confirmed unlock of a): its wait is
//! refused from now on. d is free and the only place ahead of y can never
//! be granted, yet y is not let in, neither by the release nor when it
//! asks again under its ticket; it stays until x's place expires (here its
//! place_ttl, 60 s; the coordinator's 3 s) or g lets go of f.

use std::sync::Arc;
use std::time::Duration;

use futures::executor::block_on;

use super::{args, Granted};
use crate::{LocalLocker, LockMode, NetLocker, Ticket, WaitArgs, WaitReply, Wake};

#[test]
fn a_waiter_behind_a_released_uids_place_on_a_free_name_is_granted() {
    let l = LocalLocker::new();
    let sink = Arc::new(Granted::default());
    let wait = |ticket: Ticket| WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(60),
        wake: Some(Wake::new(sink.clone(), 0)),
    };
    let (tx, ty) = (Ticket::now(), Ticket::now());
    block_on(async {
        assert!(l.lock(&args("g", &["f"])).await.unwrap());
        assert!(l.lock(&args("x", &["a"])).await.unwrap());
        let r = l
            .lock_wait(&args("x", &["d", "f"]), LockMode::Write, &wait(tx))
            .await;
        assert_eq!(r.unwrap(), WaitReply::Queued, "x waits for f");
        let r = l
            .lock_wait(&args("y", &["d"]), LockMode::Write, &wait(ty))
            .await;
        assert_eq!(
            r.unwrap(),
            WaitReply::Queued,
            "y waits behind x's place on d"
        );
        // x's uid is released: a confirmed unlock.
        assert!(l.unlock(&args("x", &["a"])).await.unwrap());
        let r = l
            .lock_wait(&args("x", &["d", "f"]), LockMode::Write, &wait(tx))
            .await;
        assert_eq!(r.unwrap(), WaitReply::Refused, "x's waits are refused now");
        // y's re-check, under its ticket.
        let r = l
            .lock_wait(&args("y", &["d"]), LockMode::Write, &wait(ty))
            .await;
        let pushed = sink.0.lock().unwrap().clone();
        let holds_d = l
            .snapshot()
            .iter()
            .any(|e| e.resource == "d" && e.uid == "y");
        assert!(
            holds_d,
            "y left waiting on free d behind released x's place: its re-check answered {r:?}, \
             pushed {pushed:?}, entries {:?}, places {}",
            super::entries(&l),
            l.waiting()
        );
    });
}
