//! Locks over clusters where some lockers fail, hang, refuse or answer late.

use std::time::Duration;

use crate::common::*;
use quorum_lock::{Error, Timeouts, Unreachable};
use tokio::time::{sleep, Instant};

const FAULTS: [Behaviour; 3] = [Behaviour::Fail, Behaviour::Hang, Behaviour::Refuse];

#[tokio::test(start_paused = true)]
async fn a_tolerable_minority_of_faults_does_not_stop_or_slow_a_lock() {
    let acquire = Timeouts::default().acquire;
    for n in SIZES {
        for fault in FAULTS {
            let c = faulty_cluster(n, n as u64);
            let ctx = format!("n = {n}, {fault:?}");
            let (writes_lost, _) = write_faults(&c.ds);
            c.set_first(writes_lost, fault);
            let m = c.ds.rw_mutex(["r"]).unwrap();

            let start = Instant::now();
            let w = m.lock().await.unwrap();
            // Decided by the healthy quorum, without waiting for the rest.
            let took = start.elapsed();
            assert!(took < acquire / 10, "{ctx}: took {took:?}");
            assert_eq!(w.granted_by(), c.ds.write_quorum(), "{ctx}");
            let healthy = &c.nodes[writes_lost..];
            assert_eq!(holders_of(healthy, w.uid()), healthy.len(), "{ctx}");
            w.unlock().await.unwrap();

            c.heal();
            let (reads_lost, _) = read_faults(&c.ds);
            c.set_first(reads_lost, fault);
            let start = Instant::now();
            let r = m.read().await.unwrap();
            let took = start.elapsed();
            assert!(took < acquire / 10, "{ctx}: took {took:?}");
            assert_eq!(r.granted_by(), c.ds.read_quorum(), "{ctx}");
            r.unlock().await.unwrap();

            c.heal();
            assert_no_leaks(&c.nodes, &ctx).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn too_many_failing_lockers_make_the_quorum_unavailable() {
    for n in SIZES {
        let c = faulty_cluster(n, n as u64);
        let ctx = format!("n = {n}");
        let m = c.ds.rw_mutex(["r"]).unwrap();
        let (_, too_many) = write_faults(&c.ds);
        c.set_first(too_many, Behaviour::Fail);
        let start = Instant::now();
        let quorum = c.ds.write_quorum();
        let want = Error::QuorumUnavailable {
            answered: quorum - 1,
            quorum,
            lockers: n,
            unreachable: refused(too_many),
        };
        assert_eq!(m.try_lock().await.unwrap_err(), want, "{ctx}");
        // Nothing left to wait for: every locker has answered.
        assert_eq!(start.elapsed(), Duration::ZERO, "{ctx}");
        // A wait that gives up says the cluster is down, not that the lock
        // is held elsewhere: a handler that skips on `Timeout` must not
        // skip its job while the cluster is down.
        let waited = m.lock_timeout(Duration::from_secs(3)).await.unwrap_err();
        assert_eq!(waited, want, "{ctx}");

        c.heal();
        let (_, too_many) = read_faults(&c.ds);
        c.set_first(too_many, Behaviour::Fail);
        let quorum = c.ds.read_quorum();
        let want = Error::QuorumUnavailable {
            answered: quorum - 1,
            quorum,
            lockers: n,
            unreachable: refused(too_many),
        };
        assert_eq!(m.try_read().await.unwrap_err(), want, "{ctx}");
        assert_eq!(
            m.read_timeout(Duration::from_secs(3)).await.unwrap_err(),
            want,
            "{ctx}"
        );

        // The healthy lockers granted parts of those rounds; all were undone.
        c.heal();
        let partial: usize = c.faults.iter().map(|f| f.grants()).sum();
        assert!(n < 3 || partial > 0, "{ctx}: no partial grant to undo");
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

#[tokio::test(start_paused = true)]
async fn too_many_hanging_lockers_time_the_round_out() {
    let acquire = Timeouts::default().acquire;
    for n in SIZES {
        let c = faulty_cluster(n, n as u64);
        let ctx = format!("n = {n}");
        let m = c.ds.rw_mutex(["r"]).unwrap();
        let (_, too_many) = write_faults(&c.ds);
        c.set_first(too_many, Behaviour::Hang);
        let start = Instant::now();
        let quorum = c.ds.write_quorum();
        let silent = |what: &str| -> Vec<Unreachable> {
            (0..too_many)
                .map(|i| Unreachable {
                    endpoint: format!("faulty(node-{i})"),
                    reason: what.to_owned(),
                })
                .collect()
        };
        let want = Error::QuorumUnavailable {
            answered: quorum - 1,
            quorum,
            lockers: n,
            unreachable: silent("no answer within 1.0s"),
        };
        assert_eq!(m.try_lock().await.unwrap_err(), want, "{ctx}");
        let took = start.elapsed();
        assert!(
            took >= acquire && took < acquire * 2,
            "{ctx}: took {took:?}"
        );
        let waited = m.lock_timeout(Duration::from_secs(3)).await.unwrap_err();
        assert!(
            matches!(&waited, Error::QuorumUnavailable { unreachable, .. }
                if unreachable.len() == too_many
                    && unreachable.iter().all(|u| u.reason.starts_with("no answer"))),
            "{ctx}: {waited:?}"
        );

        let (_, too_many) = read_faults(&c.ds);
        c.heal();
        c.set_first(too_many, Behaviour::Hang);
        let err = m.try_read().await.unwrap_err();
        assert!(
            matches!(err, Error::QuorumUnavailable { .. }),
            "{ctx}: {err:?}"
        );

        c.heal();
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

#[tokio::test(start_paused = true)]
async fn too_many_refusals_would_block() {
    for n in SIZES {
        let c = faulty_cluster(n, n as u64);
        let ctx = format!("n = {n}");
        let m = c.ds.rw_mutex(["r"]).unwrap();
        let (_, too_many) = write_faults(&c.ds);
        c.set_first(too_many, Behaviour::Refuse);
        assert_eq!(m.try_lock().await.unwrap_err(), Error::WouldBlock, "{ctx}");
        let waited = m.lock_timeout(Duration::from_secs(3)).await.unwrap_err();
        assert_eq!(waited, Error::Timeout, "{ctx}");

        let (_, too_many) = read_faults(&c.ds);
        c.heal();
        c.set_first(too_many, Behaviour::Refuse);
        assert_eq!(m.try_read().await.unwrap_err(), Error::WouldBlock, "{ctx}");

        c.heal();
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiting_lock_gets_through_once_the_outage_ends() {
    for n in SIZES {
        let c = faulty_cluster(n, n as u64);
        let ctx = format!("n = {n}");
        c.set_first(n, Behaviour::Fail);
        let m = c.ds.rw_mutex(["r"]).unwrap();
        let waiter = tokio::spawn(async move { m.lock().await });
        sleep(Duration::from_secs(10)).await;
        assert!(
            !waiter.is_finished(),
            "{ctx}: granted with every locker down"
        );
        c.heal();
        // The backoff is capped at RetryPolicy::max (1 s).
        sleep(Duration::from_secs(2)).await;
        assert!(
            waiter.is_finished(),
            "{ctx}: still waiting after the outage"
        );
        let w = waiter.await.unwrap().unwrap();
        assert_eq!(holders_of(&c.nodes, w.uid()), n, "{ctx}");
        w.unlock().await.unwrap();
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

#[tokio::test(start_paused = true)]
async fn late_grants_after_a_won_round_are_kept_until_unlock() {
    let late = Duration::from_millis(300);
    for n in SIZES.into_iter().filter(|n| *n >= 3) {
        let c = faulty_cluster(n, n as u64);
        let ctx = format!("n = {n}");
        let (slow, _) = write_faults(&c.ds);
        c.set_first(slow, Behaviour::Delay(late));
        let m = c.ds.rw_mutex(["r"]).unwrap();

        let start = Instant::now();
        let w = m.lock().await.unwrap();
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "{ctx}: waited for the slow minority"
        );
        assert_eq!(w.granted_by(), c.ds.write_quorum(), "{ctx}");
        sleep(late * 2).await;
        assert_eq!(w.granted_by(), n, "{ctx}: late grants were not recorded");
        assert_eq!(
            holders_of(&c.nodes, w.uid()),
            n,
            "{ctx}: late grants were undone"
        );
        w.unlock().await.unwrap();
        assert_no_leaks(&c.nodes, &ctx).await;

        let (slow, _) = read_faults(&c.ds);
        c.set_first(slow, Behaviour::Delay(late));
        let r = m.read().await.unwrap();
        sleep(late * 2).await;
        assert_eq!(holders_of(&c.nodes, r.uid()), n, "{ctx}");
        // Dropping, unlike unlock, does not wait; it must still reach all.
        drop(r);
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

#[tokio::test(start_paused = true)]
async fn grants_landing_after_unlock_are_undone() {
    let late = Duration::from_millis(300);
    for n in SIZES.into_iter().filter(|n| *n >= 3) {
        let c = faulty_cluster(n, n as u64);
        let ctx = format!("n = {n}");
        let (slow, _) = write_faults(&c.ds);
        c.set_first(slow, Behaviour::Delay(late));
        let m = c.ds.rw_mutex(["r"]).unwrap();
        m.lock().await.unwrap().unlock().await.unwrap();
        let (slow, _) = read_faults(&c.ds);
        c.set_first(slow, Behaviour::Delay(late));
        drop(m.read().await.unwrap());

        sleep(late * 2).await;
        let late_grants: usize = c.faults[..slow].iter().map(|f| f.grants()).sum();
        assert!(late_grants > 0, "{ctx}: no grant landed after the release");
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

/// A call that timed out may still have been applied: the coordinator has to
/// release on lockers that failed, not only on those that granted.
#[tokio::test(start_paused = true)]
async fn grants_whose_answer_timed_out_are_released() {
    let past_deadline = Timeouts::default().acquire * 2;
    for n in SIZES {
        let c = faulty_cluster(n, n as u64);
        let ctx = format!("n = {n}");
        let m = c.ds.rw_mutex(["r"]).unwrap();
        let (tolerable, too_many) = write_faults(&c.ds);
        c.set_first(tolerable, Behaviour::SlowReply(past_deadline));
        let w = m.lock().await.unwrap();
        sleep(past_deadline * 2).await;
        assert_eq!(
            holders_of(&c.nodes, w.uid()),
            n,
            "{ctx}: slow grants missing"
        );
        w.unlock().await.unwrap();
        assert_no_leaks(&c.nodes, &ctx).await;

        c.set_first(too_many, Behaviour::SlowReply(past_deadline));
        let err = m.try_lock().await.unwrap_err();
        assert!(
            matches!(err, Error::QuorumUnavailable { .. }),
            "{ctx}: {err:?}"
        );
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

#[tokio::test(start_paused = true)]
async fn late_grants_after_a_lost_round_are_released() {
    let late = Duration::from_millis(200);
    for n in SIZES.into_iter().filter(|n| *n >= 2) {
        for fault in [Behaviour::Fail, Behaviour::Refuse] {
            let c = faulty_cluster(n, n as u64);
            let ctx = format!("n = {n}, {fault:?}");
            // Enough faults to decide the round at once; the remaining
            // lockers grant only after it has been decided.
            let (_, decisive) = write_faults(&c.ds);
            c.set_first(n, Behaviour::Delay(late));
            c.set_first(decisive, fault);
            let m = c.ds.rw_mutex(["r"]).unwrap();

            let start = Instant::now();
            let err = m.try_lock().await.unwrap_err();
            assert_eq!(
                start.elapsed(),
                Duration::ZERO,
                "{ctx}: round was not decided early"
            );
            match fault {
                Behaviour::Refuse => assert_eq!(err, Error::WouldBlock, "{ctx}"),
                _ => assert!(
                    matches!(err, Error::QuorumUnavailable { .. }),
                    "{ctx}: {err:?}"
                ),
            }
            sleep(late * 2).await;
            let late_grants: usize = c.faults[decisive..].iter().map(|f| f.grants()).sum();
            assert_eq!(late_grants, n - decisive, "{ctx}: grants never arrived");
            assert_no_leaks(&c.nodes, &ctx).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn unlock_reports_whether_a_quorum_confirmed() {
    let unlock = Timeouts::default().unlock;
    for n in SIZES {
        for fault in [Behaviour::Fail, Behaviour::Hang] {
            let c = faulty_cluster(n, n as u64);
            let ctx = format!("n = {n}, {fault:?}");
            let m = c.ds.rw_mutex(["r"]).unwrap();

            let (tolerable, too_many) = write_faults(&c.ds);
            let w = m.lock().await.unwrap();
            c.set_first(tolerable, fault);
            let start = Instant::now();
            w.unlock().await.unwrap();
            assert_eq!(start.elapsed(), Duration::ZERO, "{ctx}");
            c.heal();
            assert_no_leaks(&c.nodes, &ctx).await;

            let w = m.lock().await.unwrap();
            c.set_first(too_many, fault);
            let start = Instant::now();
            let quorum = c.ds.write_quorum();
            let want = Error::ReleaseUnconfirmed {
                confirmed: quorum - 1,
                quorum,
                lockers: n,
            };
            assert_eq!(w.unlock().await.unwrap_err(), want, "{ctx}");
            // It waits no longer than the unlock deadline; lockers that keep
            // failing fast may make it give up a little earlier.
            assert!(start.elapsed() <= unlock, "{ctx}: {:?}", start.elapsed());
            if matches!(fault, Behaviour::Hang) {
                assert_eq!(start.elapsed(), unlock, "{ctx}");
            }
            // The release goes on in the background and succeeds once the
            // lockers are back within Timeouts::release_retry.
            sleep(Duration::from_secs(10)).await;
            assert!(
                !leftovers(&c.nodes).is_empty(),
                "{ctx}: released while down"
            );
            c.heal();
            assert_no_leaks(&c.nodes, &ctx).await;

            let (_, too_many) = read_faults(&c.ds);
            let r = m.read().await.unwrap();
            c.set_first(too_many, fault);
            let err = r.unlock().await.unwrap_err();
            assert!(
                matches!(err, Error::ReleaseUnconfirmed { .. }),
                "{ctx}: {err:?}"
            );
            c.heal();
            assert_no_leaks(&c.nodes, &ctx).await;
        }
    }
}

/// A locker that never granted (it failed or refused at acquire time) is
/// known not to hold the lock, so it counts towards the release quorum even
/// when some lockers that did grant are down at unlock time.
#[tokio::test(start_paused = true)]
async fn lockers_that_never_held_the_lock_count_as_released() {
    for n in SIZES.into_iter().filter(|n| *n >= 3) {
        for fault in [Behaviour::Fail, Behaviour::Refuse] {
            let c = faulty_cluster(n, n as u64);
            let ctx = format!("n = {n}, {fault:?}");
            let (spare, _) = write_faults(&c.ds);
            c.set_first(spare, fault);
            let w = c.ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
            c.heal();
            for f in &c.faults[n - spare..] {
                f.set(Behaviour::Fail);
            }
            assert_eq!(w.unlock().await, Ok(()), "{ctx}");
            c.heal();
            assert_no_leaks(&c.nodes, &ctx).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn background_release_gives_up_after_release_retry() {
    // An explicit limit shorter than the validity: the retries stop there.
    let limit = Duration::from_secs(30);
    let c = faulty_cluster_with(3, 3, |b| {
        b.timeouts(Timeouts {
            release_retry: limit,
            ..Timeouts::default()
        })
    });
    let w = c.ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    c.set_first(3, Behaviour::Fail);
    let err = w.unlock().await.unwrap_err();
    assert!(
        matches!(err, Error::ReleaseUnconfirmed { confirmed: 0, .. }),
        "{err:?}"
    );
    sleep(limit + Duration::from_secs(1)).await;
    c.heal();
    sleep(Duration::from_secs(5)).await;
    // The retries have stopped, so healing the lockers removed nothing...
    assert_eq!(leftovers(&c.nodes).len(), 3, "{:#?}", leftovers(&c.nodes));
    // ...and the lockers expire what the client gave up on, once the
    // validity has passed since the grant.
    sleep(quorum_lock::LockerConfig::default().validity).await;
    assert!(leftovers(&c.nodes).is_empty(), "{:#?}", leftovers(&c.nodes));
}

/// With the default limit the background retries go on for as long as the
/// entries can exist: lockers that come back just before the validity runs
/// out are still cleaned up, so nothing is left on a reachable locker.
#[tokio::test(start_paused = true)]
async fn background_release_retries_while_the_entry_can_exist() {
    let c = faulty_cluster(3, 3);
    let w = c.ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    c.set_first(3, Behaviour::Fail);
    assert!(w.unlock().await.is_err());
    let validity = quorum_lock::LockerConfig::default().validity;
    sleep(validity - Duration::from_secs(5)).await;
    assert_eq!(leftovers(&c.nodes).len(), 3, "released while down");
    c.heal();
    // One backoff step (at most RetryPolicy::max) later, the queue drained.
    sleep(Duration::from_millis(1_100)).await;
    assert!(leftovers(&c.nodes).is_empty(), "{:#?}", leftovers(&c.nodes));
}

/// Enough lockers refuse at once to rule out a quorum, and the slow ones
/// answer well within `Timeouts::acquire`: the lock is held, the cluster is
/// fine, so "too few answered in time" would be the wrong diagnosis.
#[tokio::test(start_paused = true)]
async fn a_held_lock_with_slow_lockers_would_block() {
    for n in SIZES {
        let c = faulty_cluster(n, n as u64);
        let m = c.ds.rw_mutex(["r"]).unwrap();
        let held = m.lock().await.unwrap();
        let (_, refusing) = write_faults(&c.ds);
        c.set_first(n - refusing, Behaviour::Delay(Duration::from_millis(100)));
        let start = Instant::now();
        assert_eq!(
            m.try_lock().await.unwrap_err(),
            Error::WouldBlock,
            "n = {n}"
        );
        assert_eq!(start.elapsed(), Duration::ZERO, "n = {n}");
        held.unlock().await.unwrap();
        assert_no_leaks(&c.nodes, &format!("n = {n}")).await;
    }
}

/// What the first `count` lockers of a faulty cluster say when they fail
/// every call.
fn refused(count: usize) -> Vec<Unreachable> {
    (0..count)
        .map(|i| Unreachable {
            endpoint: format!("faulty(node-{i})"),
            reason: "injected failure".to_owned(),
        })
        .collect()
}
