//! A line that moves on drops the place of a uid released here instead of
//! granting it, and "a client's unlock of some of its uid's names thus also
//! ends that uid's places on the others, as they come to the head of their
//! lines" (docs/lock-servers.md). Readers are let in together: "for
//! readers, every reader queued before the first writer, together"
//! (docs/guarantees.md).
//!
//! Scene: h holds c. Reader r1, writer x and reader r2 wait for c, in that
//! order. x's uid is released (a confirmed unlock of a, which it held).
//! h lets go of c: r1 is granted, and x's place, which can never be
//! granted now, comes to the head of the line. It must be dropped and r2
//! let in with r1 (c is read by r1 only, and nobody else waits). Instead
//! the promotion stops at x's write place (a writer is not let in beside
//! a reader) before asking whether its uid was released: x's place stays
//! at the head and r2 waits behind it until
//! r1 lets go or x's place expires.

use std::sync::Arc;

use futures::executor::block_on;

use super::{args, entries, queue, Granted};
use crate::{LocalLocker, LockMode, NetLocker};

#[test]
fn readers_behind_a_released_writers_place_are_let_in_with_the_readers_before_it() {
    let l = LocalLocker::new();
    let sink = Arc::new(Granted::default());
    block_on(async {
        assert!(l.lock(&args("h", &["c"])).await.unwrap());
        assert!(l.lock(&args("x", &["a"])).await.unwrap());
        queue(&l, &sink, "r1", &["c"], LockMode::Read, true).await;
        queue(&l, &sink, "x", &["c"], LockMode::Write, true).await;
        queue(&l, &sink, "r2", &["c"], LockMode::Read, true).await;
        // x's uid is released: its waits are refused from now on.
        assert!(l.unlock(&args("x", &["a"])).await.unwrap());
        assert!(
            !l.lock(&args("x", &["e"])).await.unwrap(),
            "released uid refused"
        );
        assert!(l.unlock(&args("h", &["c"])).await.unwrap());
    });
    let pushed = sink.0.lock().unwrap().clone();
    let readers: Vec<_> = entries(&l).into_iter().map(|(_, uid, _)| uid).collect();
    assert!(
        readers == ["r1", "r2"] && l.waiting() == 0,
        "r2 left behind released x's place at the head of c: holders {readers:?}, \
         pushed {pushed:?}, places left {}",
        l.waiting()
    );
}
