//! Lost locks and how waits end: a lost lock freed when its holder lets
//! go (never another lock, nor a count or reentrant hold still in use),
//! `Dsync::finish_releases` and its bound, and why a wait gave up when the
//! cluster went down.
//!
//! Every test runs on paused time with fixed seeds, except where a thread
//! or a multi-thread runtime is the point (then said so).
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, Lease, LockerConfig, Timeouts, WaitReason};
use tokio::time::{sleep, Instant};

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, 25)
}

/// Entries on every locker whose resource starts with `prefix`.
pub(crate) fn entries_on(cluster: &TestCluster, prefix: &str) -> usize {
    cluster
        .lockers()
        .iter()
        .map(|l| {
            l.snapshot()
                .iter()
                .filter(|e| e.resource.starts_with(prefix))
                .count()
        })
        .sum()
}

/// Entries of `uid` on every locker.
fn entries_of_uid(cluster: &TestCluster, uid: &str) -> usize {
    cluster
        .lockers()
        .iter()
        .map(|l| l.snapshot().iter().filter(|e| e.uid == uid).count())
        .sum()
}

fn margin() -> Duration {
    Lease::default().safety_margin
}

/// Refreshes to lockers 1 and 2 hang until `lost` resolves, then the
/// lockers answer again (their entries are still there).
async fn lose_through_hang(cluster: &TestCluster, lost: impl std::future::Future<Output = ()>) {
    cluster.set_hang(true, &[1, 2]).unwrap();
    lost.await;
    cluster.set_hang(false, &[1, 2]).unwrap();
}

// ---------------------------------------------------------------------
// 1. A lost lock freed as soon as its holder lets go (holder_stopped).
// ---------------------------------------------------------------------

/// Passes (attack failed): `holder_stopped` of one guard does not touch
/// the loss signal of another acquisition. Two locks of one client are lost
/// together; dropping one frees only its entries, and the other, still
/// held, keeps its entries for the safety margin.
#[tokio::test(start_paused = true)]
async fn dropping_one_lost_lock_does_not_free_another() {
    let cluster = TestCluster::new(3, 2501);
    let h = client(&cluster, "h");
    let a = h.rw_mutex(["r25a"]).unwrap().lock().await.unwrap();
    let b = h.rw_mutex(["r25b"]).unwrap().lock().await.unwrap();
    let (a_lost, b_lost) = (a.lost(), b.lost());
    lose_through_hang(&cluster, async move {
        futures::join!(a_lost, b_lost);
    })
    .await;
    let lost_at = Instant::now();
    assert!(a.is_lost() && b.is_lost());
    assert_eq!(entries_on(&cluster, "r25b"), 3);

    drop(a);
    sleep(Duration::from_secs(1)).await;
    assert_eq!(entries_on(&cluster, "r25a"), 0, "a's holder let go");
    assert_eq!(
        entries_on(&cluster, "r25b"),
        3,
        "b's holder still works: its entries stay for the margin"
    );
    tokio::time::sleep_until(lost_at + margin() / 2).await;
    assert_eq!(entries_on(&cluster, "r25b"), 3);
    drop(b);
    h.finish_releases(Duration::from_secs(5)).await.unwrap();
    assert_eq!(entries_on(&cluster, "r25"), 0);
}

/// Passes (attack failed): two permits of one handle share the count's
/// read lock. When both are lost and one is dropped, the count's entries
/// (which keep a holder of another `k` out) and the slot of the permit
/// still held stay for the margin; a client that opens the name with
/// another `k` is still refused. They go once the last permit goes.
#[tokio::test(start_paused = true)]
async fn a_lost_count_shared_by_a_held_permit_is_kept() {
    let cluster = TestCluster::new(3, 2502);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let sem = h.semaphore("r25s", 2).unwrap();
    let p1 = sem.acquire().await.unwrap();
    let p2 = sem.acquire().await.unwrap();
    let p1_uid = p1.uid().to_owned();
    let count_before = entries_on(&cluster, "semaphore/r25s/count-bit");
    assert!(count_before > 0);
    let (l1, l2) = (p1.lost(), p2.lost());
    lose_through_hang(&cluster, async move {
        futures::join!(l1, l2);
    })
    .await;
    let lost_at = Instant::now();

    drop(p2); // one holder stopped; p1's holder still works
    sleep(Duration::from_secs(1)).await;
    assert_eq!(
        entries_on(&cluster, "semaphore/r25s/count-bit"),
        count_before,
        "the count is still shared by p1"
    );
    // A slot's lock: `permit/I` and the two `held/I/D/V` digits, on each
    // of 3 lockers.
    let slot_entries = 3 * 3;
    assert_eq!(
        entries_of_uid(&cluster, &p1_uid),
        slot_entries,
        "p1's slot stays"
    );
    let other = o.semaphore("r25s", 3).unwrap().try_acquire().await;
    assert!(
        matches!(
            other,
            Err(Error::PermitsMismatch { .. } | Error::WouldBlock)
        ),
        "another k must not hold while p1's holder works: {other:?}"
    );
    tokio::time::sleep_until(lost_at + margin() / 2).await;
    assert_eq!(entries_of_uid(&cluster, &p1_uid), slot_entries);

    drop(p1);
    h.finish_releases(Duration::from_secs(5)).await.unwrap();
    assert_eq!(entries_on(&cluster, "semaphore/r25s"), 0);
    assert!(lost_at.elapsed() < margin(), "freed once the last let go");
}

/// Passes (attack failed): a reentrant hold is one lock; dropping a nested
/// guard of a lost hold (or a nested acquire refused with `LockLost`, which
/// drops a temporary share of the hold) does not free it while the outer
/// guard lives. The last guard frees it at once.
#[tokio::test(start_paused = true)]
async fn a_lost_reentrant_hold_is_kept_until_its_last_guard() {
    let cluster = TestCluster::new(3, 2503);
    let h = client(&cluster, "h");
    let m = h.rw_mutex(["r25r"]).unwrap();
    let holder = h.holder();
    let outer = holder.lock(&m).await.unwrap();
    let inner = holder.lock(&m).await.unwrap();
    let lost = outer.lost();
    lose_through_hang(&cluster, lost).await;
    let lost_at = Instant::now();

    drop(inner);
    let again = holder.lock(&m).await;
    assert!(matches!(again, Err(Error::LockLost)), "{again:?}");
    sleep(Duration::from_secs(1)).await;
    assert_eq!(
        entries_on(&cluster, "r25r"),
        3,
        "the outer guard still works"
    );
    tokio::time::sleep_until(lost_at + margin() / 2).await;
    assert_eq!(entries_on(&cluster, "r25r"), 3);
    drop(outer);
    h.finish_releases(Duration::from_secs(5)).await.unwrap();
    assert_eq!(entries_on(&cluster, "r25r"), 0);
}

/// Passes (attack failed): a lost `Leadership` that its holder keeps (the
/// repeater stops on the loss, but nothing inside drops the lock) keeps
/// its entries for the margin; another candidate cannot lead meanwhile.
#[tokio::test(start_paused = true)]
async fn a_lost_leadership_still_held_keeps_its_entries() {
    let cluster = TestCluster::new(3, 2504);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let leading = h
        .election("r25e")
        .unwrap()
        .campaign(b"h".to_vec())
        .await
        .unwrap();
    let lost = leading.lost();
    lose_through_hang(&cluster, lost).await;
    let lost_at = Instant::now();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(entries_of_uid(&cluster, leading.uid()), 3);
    let other = o
        .election("r25e")
        .unwrap()
        .try_campaign(b"o".to_vec())
        .await;
    assert!(matches!(other, Err(Error::WouldBlock)), "{other:?}");
    tokio::time::sleep_until(lost_at + margin() / 2).await;
    assert_eq!(entries_of_uid(&cluster, leading.uid()), 3);
    let uid = leading.uid().to_owned();
    drop(leading);
    h.finish_releases(Duration::from_secs(5)).await.unwrap();
    assert_eq!(entries_of_uid(&cluster, &uid), 0);
}

// ---------------------------------------------------------------------
// 2. finish_releases and the Outstanding count.
// ---------------------------------------------------------------------

/// Reproduces a past break (fixed; the test checks the fix): `unlock()` polled outside any runtime runs the release
/// on a private runtime that lingers `min(Timeouts::unlock, 5 s)`. An
/// unlock that a locker refused goes to that locker's retry queue, and the
/// drain task is spawned on the private runtime, which then shuts down:
/// the drainer is dropped (its `ReleaseToken` with it) and the pending
/// unlock stays in the queue with no task to send it. `finish_releases`
/// then returns `Ok` at once, and the locker keeps the entry until it
/// expires, although it answers again right after: a retried unlock that
/// is neither sent nor reported.
#[test]
fn finish_releases_after_an_unlock_outside_any_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let cluster = TestCluster::new(3, 2505);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(25)
        .timeouts(Timeouts {
            // The private runtime lingers this long (and a failed unlock
            // goes to the queue at once, since the shortest background
            // wait, 10 ms, is longer).
            unlock: Duration::from_millis(1),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let guard = rt.block_on(async { ds.rw_mutex(["r25u"]).unwrap().lock().await.unwrap() });
    let uid = guard.uid().to_owned();
    cluster.set_refuse(true, &[2]).unwrap();
    // A plain thread, another executor: no tokio runtime here.
    let unlocked = futures::executor::block_on(guard.unlock());
    assert_eq!(unlocked, Ok(()), "a quorum confirmed");
    // The private runtime has lingered and shut down by now.
    std::thread::sleep(Duration::from_millis(300));
    cluster.set_refuse(false, &[2]).unwrap();

    let finished = rt.block_on(ds.finish_releases(Duration::from_secs(5)));
    rt.block_on(async { sleep(Duration::from_secs(30)).await });
    let left = entries_of_uid(&cluster, &uid);
    assert!(
        finished.is_err() || left == 0,
        "finish_releases returned {finished:?} while locker 2 (reachable for 30 s) still holds \
         {left} entry of the released lock, and no task will send its unlock"
    );
}

/// Passes (attack failed): across a seeded mixed workload (dropped guards,
/// abandoned waits, lost locks, semaphore permits, slow nodes and lost
/// replies) `finish_releases` returning `Ok` once every node is healthy
/// means that no entry of the client is left anywhere.
#[tokio::test(start_paused = true)]
async fn finish_releases_ok_means_nothing_left() {
    for seed in 0..6u64 {
        let cluster = TestCluster::new(5, 2506 + seed);
        let h = common::seeded(cluster.net_lockers(), "h", seed);
        let slow = Latency::Uniform {
            min: Duration::ZERO,
            max: Duration::from_millis(300),
        };
        cluster.set_latency(slow, &[0, 1, 2, 3, 4]).unwrap();
        cluster.drop_replies(0.2, true, &[3]).unwrap();
        let m = h.rw_mutex(["r25w"]).unwrap();
        let sem = h.semaphore("r25ws", 2).unwrap();
        let mut tasks = Vec::new();
        for i in 0..4u64 {
            let (m, sem) = (m.clone(), sem.clone());
            tasks.push(tokio::spawn(async move {
                for j in 0..3u64 {
                    match (i + j) % 3 {
                        0 => {
                            if let Ok(g) = m.lock_timeout(Duration::from_millis(150)).await {
                                sleep(Duration::from_millis(20)).await;
                                drop(g);
                            }
                        }
                        1 => {
                            if let Ok(p) = sem.acquire_timeout(Duration::from_millis(400)).await {
                                sleep(Duration::from_millis(10)).await;
                                if j % 2 == 0 {
                                    drop(p);
                                } else {
                                    let _ = p.unlock().await;
                                }
                            }
                        }
                        _ => {
                            let wait = m.read();
                            let _ = tokio::time::timeout(Duration::from_millis(50), wait).await;
                        }
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // One lock that is lost and then dropped.
        cluster
            .set_latency(Latency::Fixed(Duration::ZERO), &[0, 1, 2, 3, 4])
            .unwrap();
        cluster.drop_replies(0.0, false, &[3]).unwrap();
        let g = h.rw_mutex(["r25wl"]).unwrap().lock().await.unwrap();
        cluster.set_hang(true, &[1, 2, 3]).unwrap();
        g.lost().await;
        cluster.heal_all();
        drop(g);

        h.finish_releases(Duration::from_secs(300))
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let left: Vec<_> = cluster
            .lockers()
            .iter()
            .flat_map(|l| l.snapshot())
            .filter(|e| e.owner == "h")
            .map(|e| (e.resource, e.uid))
            .collect();
        assert!(
            left.is_empty(),
            "seed {seed}: finish_releases said Ok with entries left: {left:?}"
        );
    }
}

/// Passes (attack failed): `finish_releases` never waits past its bound,
/// even when a release hangs and a drain task retries, and a zero bound
/// answers at once.
#[tokio::test(start_paused = true)]
async fn finish_releases_keeps_its_bound() {
    let cluster = TestCluster::new(3, 2507);
    let h = client(&cluster, "h");
    let g = h.rw_mutex(["r25b"]).unwrap().lock().await.unwrap();
    cluster.set_hang(true, &[0, 1, 2]).unwrap();
    drop(g);
    let start = Instant::now();
    let err = h.finish_releases(Duration::ZERO).await.unwrap_err();
    assert!(matches!(err, Error::ReleasesPending { .. }), "{err:?}");
    assert_eq!(start.elapsed(), Duration::ZERO);
    let err = h
        .finish_releases(Duration::from_millis(7_300))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::ReleasesPending { pending, .. } if pending >= 1),
        "{err:?}"
    );
    assert_eq!(start.elapsed(), Duration::from_millis(7_300));
    cluster.set_hang(false, &[0, 1, 2]).unwrap();
    h.finish_releases(Duration::from_secs(120)).await.unwrap();
    assert_eq!(entries_on(&cluster, "r25b"), 0);
}

// ---------------------------------------------------------------------
// 3. Why a wait gave up.
// ---------------------------------------------------------------------

/// A campaign with a deadline reads why it gave up from its own waits, not
/// from a clone's: a clone that began to campaign later and gave up does
/// not make the first campaign, which waited the whole time on a cluster
/// with 2 of 3 lockers down, say `Error::Timeout`; and `waiting()` speaks
/// for the first campaign again once the clone's wait ended. (Reproduces a
/// past break: the board kept only the latest wait, ended or not.)
#[tokio::test(start_paused = true)]
async fn campaign_timeout_reads_another_campaigns_status() {
    let cluster = TestCluster::new(3, 2508);
    let h = client(&cluster, "h");
    cluster.crash(&[1, 2]).unwrap();
    let election = h.election("r25c").unwrap();
    let (clone, watcher) = (election.clone(), election.clone());
    let first = tokio::spawn(async move {
        election
            .campaign_timeout(b"a".to_vec(), Duration::from_secs(10))
            .await
    });
    sleep(Duration::from_secs(1)).await;
    let before = watcher.waiting().map(|status| status.reason());
    assert_eq!(before, Some(WaitReason::NoQuorum));
    let second = clone
        .campaign_timeout(b"b".to_vec(), Duration::from_secs(1))
        .await;
    assert!(
        matches!(second, Err(Error::QuorumUnavailable { .. })),
        "{second:?}"
    );
    // The first campaign still waits, and says why.
    assert_eq!(
        watcher.waiting().map(|status| status.reason()),
        Some(WaitReason::NoQuorum)
    );
    let first = first.await.unwrap();
    assert!(
        matches!(first, Err(Error::QuorumUnavailable { .. })),
        "only 1 of 3 lockers was reachable the whole time, yet: {first:?}"
    );
}

/// Reproduces a past break (fixed; the test checks the fix): `campaign_timeout` maps "no wait is running" to
/// `Error::Timeout`. A campaign that got the lock and then cannot draw its
/// term or proclaim because 2 of 3 lockers went down keeps retrying
/// outside any wait, so at its deadline it says "held elsewhere" while no
/// other candidate exists and the cluster has no quorum.
#[tokio::test(start_paused = true)]
async fn campaign_timeout_while_proclaiming_on_a_cluster_that_went_down() {
    let cluster = TestCluster::new(3, 2509);
    let h = client(&cluster, "h");
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let election = h.election("r25p").unwrap();
    let campaign = tokio::spawn(async move {
        election
            .campaign_timeout(b"a".to_vec(), Duration::from_secs(3))
            .await
    });
    // Granted at 100 ms; the term is being drawn from 100 ms to 200 ms.
    sleep(Duration::from_millis(150)).await;
    assert_eq!(entries_on(&cluster, "election/r25p"), 3, "granted");
    cluster.crash(&[1, 2]).unwrap();
    let result = campaign.await.unwrap();
    assert!(
        matches!(
            result,
            Err(Error::QuorumUnavailable { .. } | Error::Quarantined { .. })
        ),
        "nobody else campaigned and 2 of 3 lockers are down, yet: {result:?}"
    );
}

/// Reproduces a past break (fixed; the test checks the fix): `Semaphore::acquire_timeout` maps "no wait is running"
/// to `Error::Timeout`. An acquirer at the head of the line takes the
/// count with one-round calls that keep no status; when 2 of 3 lockers go
/// down then, it retries outside any wait and at its deadline says "held
/// elsewhere" although no permit is held and the cluster has no quorum.
#[tokio::test(start_paused = true)]
async fn acquire_timeout_while_taking_the_count_on_a_cluster_that_went_down() {
    let cluster = TestCluster::new(3, 2510);
    let h = client(&cluster, "h");
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let sem = h.semaphore("r25q", 1).unwrap();
    let acquire = tokio::spawn(async move { sem.acquire_timeout(Duration::from_secs(3)).await });
    // The line is granted at 100 ms; the count is asked for from 100 ms.
    sleep(Duration::from_millis(150)).await;
    assert_eq!(entries_on(&cluster, "semaphore/r25q/queue"), 3, "in line");
    cluster.crash(&[1, 2]).unwrap();
    let result = acquire.await.unwrap();
    assert!(
        matches!(
            result,
            Err(Error::QuorumUnavailable { .. } | Error::Quarantined { .. })
        ),
        "no permit is held and 2 of 3 lockers are down, yet: {result:?}"
    );
}

/// Reproduces a past break (fixed; the test checks the fix): a wait keeps counting a grant from a locker whose later
/// calls failed (on purpose: the entry lives its validity). The status
/// counts it as granted forever, even long after the locker must have
/// expired it. A waiter cut off from 3 of 5 lockers, two of which had
/// granted it, is told after 120 s that the lock is "held elsewhere"
/// (`Error::Timeout`), though only 2 lockers are reachable and even a
/// release by the holder could not give it a quorum.
#[tokio::test(start_paused = true)]
async fn lock_timeout_counts_expired_grants_of_unreachable_lockers() {
    let cluster = TestCluster::new(5, 2511);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    // o holds the lock on lockers 0, 1, 2 only.
    cluster.partition("o", &[3, 4]).unwrap();
    let held = o.rw_mutex(["r25x"]).unwrap().lock().await.unwrap();
    cluster.heal_partition("o", &[3, 4]).unwrap();
    let mutex = h.rw_mutex(["r25x"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move { waiter.lock_timeout(Duration::from_secs(120)).await });
    sleep(Duration::from_secs(2)).await;
    let status = mutex.waiting().expect("waiting");
    assert_eq!((status.granted, status.held_elsewhere), (2, 3), "{status}");
    // h is cut off from 2, 3 and 4: only 2 of 5 lockers are reachable.
    cluster.partition("h", &[2, 3, 4]).unwrap();
    sleep(Duration::from_secs(90)).await;
    let status = mutex.waiting().expect("waiting");
    let expired = cluster.lockers()[3]
        .snapshot()
        .iter()
        .all(|e| e.owner != "h");
    assert!(expired, "locker 3 expired h's grant by now");
    assert_eq!(
        status.reason(),
        WaitReason::NoQuorum,
        "h reaches 2 of 5 lockers and its grants on 3 and 4 expired; status: {status:?}"
    );
    let result = wait.await.unwrap();
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "{result:?}"
    );
    drop(held);
}

/// Reproduces a past break (fixed; the test checks the fix): `QuorumUnavailable` from `Election::leader` (and from
/// `proclaim`) names no unreachable locker: the election's rounds call the
/// lockers through `call_with_deadline`, not `call_locker`, so their
/// failures are never noted, and `unreachable_since(began)` finds nothing
/// (or an unrelated older failure).
#[tokio::test(start_paused = true)]
async fn election_quorum_unavailable_names_the_unreachable_lockers() {
    let cluster = TestCluster::new(3, 2512);
    let h = client(&cluster, "h");
    cluster.set_refuse(true, &[1, 2]).unwrap();
    let err = h.election("r25l").unwrap().leader().await.unwrap_err();
    let Error::QuorumUnavailable { unreachable, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(unreachable.len(), 2, "two lockers refused: {err}");
}

/// Fails (break, docs): `Holder::lock_timeout` gives up with
/// `Error::Timeout` while it waits for a clone's acquisition of the same
/// lock, even when that acquisition is stuck because 2 of 3 lockers are
/// down; `Error::Timeout` is now documented as "only when held elsewhere".
#[tokio::test(start_paused = true)]
async fn reentrant_lock_timeout_behind_a_clone_on_a_cluster_that_is_down() {
    let cluster = TestCluster::new(3, 2513);
    let h = client(&cluster, "h");
    cluster.crash(&[1, 2]).unwrap();
    let m = h.rw_mutex(["r25h"]).unwrap();
    let holder = h.holder();
    let (clone, m2) = (holder.clone(), m.clone());
    let stuck = tokio::spawn(async move { clone.lock(&m2).await });
    sleep(Duration::from_secs(1)).await;
    let result = holder.lock_timeout(&m, Duration::from_secs(2)).await;
    stuck.abort();
    assert!(
        !matches!(result, Err(Error::Timeout)),
        "nothing holds it; 2 of 3 lockers are down: {result:?}"
    );
}

/// Passes (attack failed): with 2 of 3 lockers restarted into a 60 s
/// quarantine, a wait that gives up after 10 s fails with `Quarantined`,
/// whose time left is what remains of the quarantine (about 50 s), not
/// what the first refusal said.
#[tokio::test(start_paused = true)]
async fn the_quarantine_left_counts_down() {
    let config = LockerConfig {
        quarantine: Duration::from_secs(60),
        ..LockerConfig::default()
    };
    let cluster = TestCluster::with_config(3, 2514, config);
    let h = client(&cluster, "h");
    cluster.restart(&[1, 2]).unwrap();
    let err = h
        .rw_mutex(["r25q"])
        .unwrap()
        .lock_timeout(Duration::from_secs(10))
        .await
        .unwrap_err();
    let Error::Quarantined { left, .. } = &err else {
        panic!("{err:?}");
    };
    let left = left.expect("the lockers said");
    assert!(
        left <= Duration::from_secs(50) && left > Duration::from_secs(48),
        "{left:?}"
    );
}

/// Passes (attack failed): odd inputs. A zero timeout, a one-locker
/// cluster that is down, and a held lock each give the right error
/// without a panic; a wait that was cancelled leaves no status behind.
#[tokio::test(start_paused = true)]
async fn odd_waits() {
    let one = TestCluster::new(1, 2515);
    let h = client(&one, "h");
    let m = h.rw_mutex(["r25o"]).unwrap();
    one.crash(&[0]).unwrap();
    let err = m.lock_timeout(Duration::ZERO).await.unwrap_err();
    assert!(matches!(err, Error::QuorumUnavailable { .. }), "{err:?}");
    let err = m.lock_timeout(Duration::from_secs(3)).await.unwrap_err();
    assert!(matches!(err, Error::QuorumUnavailable { .. }), "{err:?}");
    one.heal_all();
    let o = client(&one, "o");
    let held = o.rw_mutex(["r25o"]).unwrap().lock().await.unwrap();
    let err = m.lock_timeout(Duration::ZERO).await.unwrap_err();
    assert_eq!(err, Error::Timeout);
    let waiter = m.clone();
    let wait = tokio::spawn(async move { waiter.lock().await });
    sleep(Duration::from_millis(10)).await;
    assert!(m.waiting().is_some());
    wait.abort();
    let _ = wait.await;
    assert!(m.waiting().is_none(), "a cancelled wait leaves no status");
    drop(held);
}

// ---------------------------------------------------------------------
// 4. Arc::into_inner for the semaphore's shared count.
// ---------------------------------------------------------------------

/// Passes (attack failed): on a multi-thread runtime (not paused: threads
/// are the point), two permits of one handle are unlocked at the same time
/// on two threads while a third acquire of the handle may be reusing the
/// shared count. After everything is unlocked, exactly one release of the
/// count ran: no count entry is left, and nothing waits in the background.
#[test]
fn permits_unlocked_at_once_release_the_count_once() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cluster = Arc::new(TestCluster::new(3, 2516));
        let h = client(&cluster, "h");
        for round in 0..60u32 {
            let sem = h.semaphore("r25i", 3).unwrap();
            let p1 = sem.acquire().await.unwrap();
            let p2 = sem.acquire().await.unwrap();
            let third = sem.clone();
            let (a, b, c) = (
                tokio::spawn(async move { p1.unlock().await }),
                tokio::spawn(async move { p2.unlock().await }),
                tokio::spawn(async move { third.try_acquire().await }),
            );
            assert_eq!(a.await.unwrap(), Ok(()));
            assert_eq!(b.await.unwrap(), Ok(()));
            if let Ok(p3) = c.await.unwrap() {
                p3.unlock().await.unwrap();
            }
            h.finish_releases(Duration::from_secs(10)).await.unwrap();
            assert_eq!(
                entries_on(&cluster, "semaphore/r25i"),
                0,
                "round {round}: an entry was left"
            );
        }
    });
}

// ---------------------------------------------------------------------
// 1 (continued) and 5: where freeing a lost lock early lets someone in.
// ---------------------------------------------------------------------

/// Passes (attack failed), and shows what `quorum-lock lock` (cli/src/hold.rs)
/// gives away. A holder granted by 3 of 5 lockers (two were cut off when
/// it locked) loses a refresh quorum when it is cut off from one of them.
/// While it keeps its lost guard, nobody else is granted for the margin.
/// Once it drops the guard, its entries on the lockers it still reaches
/// are freed at once and another writer is granted right away, about 10 s
/// before the entry it could not reach would have expired: correct for a
/// holder that has stopped, which `hold` cannot know of the script that
/// relies on it (it drops the guard the moment the loss fires).
#[tokio::test(start_paused = true)]
async fn a_dropped_lost_guard_lets_a_writer_in_at_once() {
    let cluster = TestCluster::new(5, 2517);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    cluster.partition("h", &[3, 4]).unwrap();
    let guard = h.rw_mutex(["r25d"]).unwrap().lock().await.unwrap();
    cluster.heal_partition("h", &[3, 4]).unwrap();
    cluster.partition("h", &[2]).unwrap();
    guard.lost().await;
    let lost_at = Instant::now();
    let theirs = o.rw_mutex(["r25d"]).unwrap();
    for wait in [Duration::from_secs(1), margin() / 2] {
        tokio::time::sleep_until(lost_at + wait).await;
        let other = theirs.try_lock().await;
        assert!(matches!(other, Err(Error::WouldBlock)), "{other:?}");
    }
    drop(guard);
    // (finish_releases would wait for the force-unlock call to locker 2,
    // which h cannot reach, until its 5 s deadline.)
    sleep(Duration::from_millis(100)).await;
    let other = theirs.try_lock().await;
    assert!(other.is_ok(), "{other:?}");
    assert!(
        lost_at.elapsed() < margin(),
        "granted before the margin ended"
    );
    assert_eq!(
        cluster.lockers()[2]
            .snapshot()
            .iter()
            .filter(|e| e.owner == "h")
            .count(),
        1,
        "h's entry on locker 2 was still alive when o was granted"
    );
}

// ---------------------------------------------------------------------
// 3 (continued): odd values in the new errors.
// ---------------------------------------------------------------------

/// Fails (break, debug builds): the new errors format durations with
/// `error::seconds`, which adds one to `as_secs()` when the
/// fraction is at least half a second and so overflows for
/// `Duration::MAX`, the "no limit" every setting accepts. For instance
/// `finish_releases(Duration::MAX)` that ends at its bound (a paused
/// runtime auto-advances to it when a release can never finish) fails with
/// `ReleasesPending { waited: Duration::MAX }`, and printing it panics.
#[test]
fn errors_with_the_longest_durations_print() {
    let pending = Error::ReleasesPending {
        pending: 1,
        waited: Duration::MAX,
    };
    let quarantined = Error::Quarantined {
        quarantined: vec!["a:1".into()],
        left: Some(Duration::MAX),
        quorum: 2,
        lockers: 3,
    };
    for err in [pending, quarantined] {
        let printed = std::panic::catch_unwind(|| err.to_string());
        assert!(printed.is_ok(), "printing {err:?} panicked");
    }
}
