//! Reproduces a past break: `finish_releases` takes back a dropped guard's release being sent on its own runtime; when its own send to a locker fails but the release's lands, it queues its copy again and reports that unlock pending at its bound, though every locker freed the lock.
//!
//! `Dsync::finish_releases` (rustdoc): it waits "until every release this
//! client (and its clones) handed to the background has finished", and
//! fails with `Error::ReleasesPending` "when releases are still running at
//! the bound"; `pending` is "Releases still running". docs/guarantees.md,
//! "Any runtime": `finish_releases` sends a release's unlocks again at once
//! ("an unlock goes by uid, so one sent twice frees nothing else").
//!
//! The scene, on tokio's paused clock: guard "a" is dropped on the driven
//! runtime, and `finish_releases(10 s)` is called at once: it takes the
//! release's batch back and sends it itself before the release task runs.
//! Locker 0 refuses (connection refused, retryable) the first unlock it is
//! sent (the call's), takes the second (the release's, which lands at
//! 0 s), and refuses those after. Every locker freed "a" at 0 s and the
//! release ended, yet the call queued its failed copy again, keeps it
//! retried, and at its bound reports it as a release still running.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::{connection_refused, Call};
use crate::common::release_on_its_way::finish_releases_beside_a_driven_release;

const SEED: u64 = 7603;

#[test]
fn finish_releases_is_ok_once_the_release_whose_batch_it_took_back_landed_its_unlocks() {
    let unlocks = Arc::new(AtomicUsize::new(0));
    let counted = unlocks.clone();
    let (finished, left) =
        finish_releases_beside_a_driven_release(SEED, Duration::from_secs(10), |locker, armed| {
            locker.refusing(move |call, _| {
                if call != Call::Unlock || !armed.load(Ordering::SeqCst) {
                    return None;
                }
                // The second unlock locker 0 is sent is taken; the others
                // are refused.
                let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                (n != 2).then(connection_refused)
            })
        });
    let sent = unlocks.load(Ordering::SeqCst);
    eprintln!(
        "finish_releases(10 s): {finished:?}; lockers holding a then {left:?}; unlocks sent to \
         locker 0: {sent}"
    );
    assert_eq!(
        left,
        [false, false, false],
        "control: every locker freed a (locker 0 took the release's unlock)"
    );
    assert!(
        sent >= 2,
        "control: locker 0 was sent the call's unlock and the release's"
    );
    assert!(
        finished.is_ok(),
        "every locker freed a and the release ended by the bound; the call reports its own \
         failed copy, queued again and retried, as a release still running: {finished:?}"
    );
    assert_eq!(
        sent, 2,
        "the call's failed copy is moot once the release's unlock landed, yet it was sent again"
    );
}
