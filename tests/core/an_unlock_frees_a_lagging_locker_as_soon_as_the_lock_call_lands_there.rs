//! A lock won by a quorum while one locker's call was still on its way
//! (a lagging node) is freed there as soon as that call lands, not only
//! once its answer has come back: the release sends that locker an unlock
//! at once, behind the call. Before, the entry stayed until the answer
//! returned and the call undid its own grant, and the holder's next lock
//! of the name met it there.

use std::time::Duration;

use crate::common::*;
use tokio::time::sleep;

#[tokio::test(start_paused = true)]
async fn an_unlock_frees_a_lagging_locker_as_soon_as_the_lock_call_lands_there() {
    for (mode, write) in [("write", true), ("read", false)] {
        let c = faulty_cluster(3, 7);
        // Locker 2 applies every call at once and answers 500 ms later.
        c.faults[2].set(Behaviour::SlowReply(Duration::from_millis(500)));
        let m = c.ds.rw_mutex(["jobs"]).unwrap();
        let held_on_2 = || !c.nodes[2].snapshot().is_empty();
        if write {
            let guard = m.lock().await.unwrap();
            assert!(held_on_2(), "{mode}: the lagging locker applied the lock");
            guard.unlock().await.unwrap();
        } else {
            let guard = m.read().await.unwrap();
            assert!(held_on_2(), "{mode}: the lagging locker applied the lock");
            guard.unlock().await.unwrap();
        }
        sleep(Duration::from_millis(1)).await;
        assert!(
            !held_on_2(),
            "{mode}: the lagging locker still holds the entry 1 ms after the unlock (its lock call's answer is 499 ms away)"
        );
        // The call's answer comes back later and is undone: nothing left.
        assert_no_leaks(&c.nodes, mode).await;

        // A guard dropped rather than unlocked sends it as well.
        let m = c.ds.rw_mutex(["reports"]).unwrap();
        let guard = m.lock().await.unwrap();
        assert!(
            held_on_2(),
            "{mode}: the lagging locker applied the second lock"
        );
        drop(guard);
        sleep(Duration::from_millis(1)).await;
        assert!(
            !held_on_2(),
            "{mode}: a dropped guard left the lagging locker's entry 1 ms after the drop"
        );
        assert_no_leaks(&c.nodes, mode).await;
    }
}
