//! A uid released here is refused a lock or a wait from then on (the
//! record of released uids: "no entry comes back after a confirmed
//! unlock"). Its place in another name's line, left from before the
//! release, must not be granted either when that line moves on: the grant
//! would be an entry its holder no longer knows of, pushed after its
//! confirmed release.

use std::sync::Arc;

use futures::executor::block_on;

use super::{args, entries, queue, Granted};
use crate::{LocalLocker, LockMode, NetLocker};

#[test]
fn a_uid_released_on_other_names_is_not_granted_its_place() {
    let l = LocalLocker::new();
    let sink = Arc::new(Granted::default());
    block_on(async {
        assert!(l.lock(&args("h", &["b"])).await.unwrap());
        // x holds a, and waits for b behind h.
        assert!(l.lock(&args("x", &["a"])).await.unwrap());
        queue(&l, &sink, "x", &["b"], LockMode::Write, true).await;
        // x is released (a confirmed unlock of its uid): a later lock of
        // it is refused.
        assert!(l.unlock(&args("x", &["a"])).await.unwrap());
        assert!(
            !l.lock(&args("x", &["c"])).await.unwrap(),
            "released uid refused"
        );
        // h lets go of b.
        assert!(l.unlock(&args("h", &["b"])).await.unwrap());
    });
    let pushed = sink.0.lock().unwrap().clone();
    assert!(
        entries(&l).is_empty() && pushed.is_empty(),
        "released uid x granted after its unlock: entries {:?}, pushed {pushed:?}",
        entries(&l)
    );
}
