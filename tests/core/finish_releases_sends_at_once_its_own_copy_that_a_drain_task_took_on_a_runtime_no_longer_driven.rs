//! Reproduces a past break: an unlock `finish_releases` took back and that a drain task on another runtime then took to send is passed over by that same call once that runtime stops being driven: it waits for the batch to be overdue and fails with `ReleasesPending` though the locker answers.
//!
//! `Dsync::finish_releases` (rustdoc): "A release whose task sits on a
//! runtime that is no longer driven (a guard dropped as its `block_on`
//! returned) is sent again from here, at once"; "Fails with
//! [`Error::ReleasesPending`] when releases are still running at the bound
//! (a lock server is unreachable, say)". docs/guarantees.md, "Any runtime":
//! a release a runtime began and then stopped driving ("a retry a drain
//! task was sending" among them) is recorded as on its way, and
//! "`finish_releases` sends a release's unlocks again at once, without
//! waiting for them to be overdue".
//!
//! The scene (real clock, as runtimes must stop being driven; unlock
//! timeout 2 s, so a batch is overdue 4.1 s after it was taken): runtime
//! `other`, driven by a thread of its own, has a drain task on locker 2's
//! queue (an unlock of "a" that locker 2 refused, delivered since), kept
//! going by the record of "y", whose guard was dropped as `idle`'s
//! `block_on` returned. Locker 2 hangs. A `finish_releases(3 s)` call on
//! runtime `finishing` takes "y"'s records back at its first look, then
//! `finishing` is not driven for a moment; `other`'s drain task takes
//! locker 2's copy and sends it (it hangs there), then `other` stops being
//! driven. Locker 2 answers again and `finishing` is driven again: the call
//! should send locker 2 its unlock at once; it passes over the batch, made
//! of copies it took itself, until it is overdue.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::testing::{CallKind, TestCluster};
use quorum_lock::Timeouts;

use crate::common::{self, holding, holds};

const SEED: u64 = 61_004;

#[test]
fn finish_releases_sends_at_once_its_own_copy_that_a_drain_task_took_on_a_runtime_no_longer_driven()
{
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let nodes = cluster.nodes();
    let ds = common::with_timeouts(
        cluster.net_lockers(),
        SEED,
        Timeouts {
            unlock: Duration::from_secs(2),
            ..Timeouts::default()
        },
    );
    let (a, y) = common::runtime().block_on(async {
        (
            common::try_lock(&ds, "a").await,
            common::try_lock(&ds, "y").await,
        )
    });
    let (uid_a, uid_y) = (a.uid().to_owned(), y.uid().to_owned());

    // `other`, driven by its own thread until told to stop, drops "a"
    // while locker 2 refuses: a drain task on locker 2's queue there.
    nodes[2].set_refuse(true);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let other = std::thread::spawn(move || {
        let rt = common::runtime();
        rt.block_on(async move {
            drop(a);
            let _ = stopped.await;
        });
        rt
    });
    std::thread::sleep(Duration::from_millis(2500));

    // "y" dropped as `idle`'s `block_on` returns: recorded, never run.
    let idle = common::runtime();
    idle.block_on(async move { drop(y) });

    // Locker 2 answers: `other`'s drain task delivers "a" and goes on for
    // "y"'s record.
    nodes[2].set_refuse(false);
    let started = Instant::now();
    while holds(&cluster.lockers()[2], &uid_a) {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "control: other's drain task delivers a's unlock to locker 2"
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    // Locker 2 hangs; the call's first look takes "y"'s records back, then
    // `finishing` is not driven for a moment.
    nodes[2].set_hang(true);
    let seen = nodes[2].stats(CallKind::Unlock).seen;
    let finishing = common::runtime();
    let began = Instant::now();
    let call = {
        let ds = ds.clone();
        finishing.spawn(async move { ds.finish_releases(Duration::from_secs(3)).await })
    };
    finishing.block_on(async {
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    });
    // `other`'s drain task takes locker 2's copy and sends it.
    let started = Instant::now();
    while nodes[2].stats(CallKind::Unlock).seen < seen + 1 {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "control: other's drain task sends locker 2 the copy"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = stop.send(());
    let other = other.join().expect("other's thread ends");
    assert!(
        holds(&cluster.lockers()[2], &uid_y),
        "control: locker 2 still holds y"
    );

    // Locker 2 answers again; `finishing` is driven again.
    nodes[2].set_hang(false);
    let finished = finishing
        .block_on(call)
        .expect("finish_releases does not panic");
    let took = began.elapsed();
    let left = holding(cluster.lockers(), &uid_y);
    eprintln!("finish_releases(3 s): {finished:?} after {took:?}; lockers holding y: {left:?}");
    assert!(
        finished.is_ok() && left == [false, false, false],
        "locker 2 answers, yet finish_releases(3 s) returned {finished:?} after {took:?} with \
         the lockers holding y {left:?}: the unlock it took back sits with a drain task on a \
         runtime no longer driven, and the call passes over it (it took it once already) until \
         it is overdue instead of sending it at once"
    );
    drop(other);
    drop(idle);
}
