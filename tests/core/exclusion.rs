//! Who may hold a lock together with whom, on healthy clusters of every size.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use quorum_lock::{DRWMutex, Error, LockMode, NetLocker};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, timeout, Instant};

/// Long enough for any healthy contention in these tests to resolve; a
/// deadlock or livelock shows up as a failed `timeout` instead of a hang.
const PATIENCE: Duration = Duration::from_secs(600);

/// Runs one writer per mutex at the same instant; each holds its guard
/// across an await. Returns the most writers ever inside at once.
async fn race_writers(mutexes: Vec<DRWMutex>) -> usize {
    let writers = mutexes.len();
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = mutexes
        .into_iter()
        .map(|m| {
            let (inside, most, done) = (inside.clone(), most.clone(), done.clone());
            tokio::spawn(async move {
                let g = m.lock().await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                sleep(Duration::from_millis(10)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                g.unlock().await.unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let all = futures::future::join_all(tasks);
    let joined = timeout(PATIENCE, all)
        .await
        .expect("writers never finished");
    joined
        .into_iter()
        .for_each(|r| r.expect("writer task panicked"));
    assert_eq!(
        done.load(Ordering::SeqCst),
        writers,
        "not every writer got the lock"
    );
    most.load(Ordering::SeqCst)
}

#[tokio::test(start_paused = true)]
async fn simultaneous_writers_through_one_client_are_serialized() {
    for n in SIZES {
        for writers in [2, 3] {
            let (ds, nodes) = cluster_seeded(n, (n * 10 + writers) as u64);
            let m = ds.rw_mutex(["r"]).unwrap();
            let most = race_writers(vec![m; writers]).await;
            assert_eq!(most, 1, "n = {n}, {writers} writers");
            assert_no_leaks(&nodes, &format!("n = {n}, {writers} writers")).await;
        }
    }
}

/// Separate clients see the nodes with different latencies, so their rounds
/// interleave at the lockers and can split the vote.
#[tokio::test(start_paused = true)]
async fn simultaneous_writers_from_separate_clients_are_serialized() {
    let mut contended = 0;
    for seed in 0..4u64 {
        for n in SIZES {
            for writers in [2, 3] {
                let mut rng = SmallRng::seed_from_u64(seed);
                let nodes = nodes(n);
                let mut links = Vec::new();
                let mutexes = (0..writers)
                    .map(|w| {
                        let client_links: Vec<Arc<dyn NetLocker>> = nodes
                            .iter()
                            .map(|node| {
                                let link = FaultyLocker::wrap(node.clone());
                                let ms = rng.random_range(0..20);
                                link.set(Behaviour::Delay(Duration::from_millis(ms)));
                                links.push(link.clone());
                                link as Arc<dyn NetLocker>
                            })
                            .collect();
                        let ds = client(client_links, seed * 100 + w as u64);
                        ds.rw_mutex(["r"]).unwrap()
                    })
                    .collect();
                let ctx = format!("seed {seed}, n = {n}, {writers} writers");
                assert_eq!(race_writers(mutexes).await, 1, "{ctx}");
                assert_no_leaks(&nodes, &ctx).await;
                // More grants than winners need means some round lost a split vote.
                let grants: usize = links.iter().map(|l| l.grants()).sum();
                contended += usize::from(grants > writers * n);
            }
        }
    }
    assert!(
        contended > 0,
        "no race ever split the vote; the test proves nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn different_resources_do_not_block_each_other() {
    for n in SIZES {
        let (ds, nodes) = cluster(n);
        let a = ds.rw_mutex(["a"]).unwrap();
        let held = a.lock().await.unwrap();
        assert_eq!(
            a.try_lock().await.unwrap_err(),
            Error::WouldBlock,
            "n = {n}"
        );

        let b = ds.rw_mutex(["b"]).unwrap().try_lock().await.unwrap();
        let c = ds.rw_mutex(["c"]).unwrap().try_read().await.unwrap();
        let de = ds.rw_mutex(["d", "e"]).unwrap().try_lock().await.unwrap();
        for guard_uid in [held.uid(), b.uid(), c.uid(), de.uid()] {
            assert_eq!(holders_of(&nodes, guard_uid), n, "n = {n}");
        }
        drop((held, b, c, de));
        assert_no_leaks(&nodes, &format!("n = {n}")).await;
    }
}

#[tokio::test(start_paused = true)]
async fn readers_share_the_lock() {
    for n in SIZES {
        let (ds, nodes) = cluster(n);
        let m = ds.rw_mutex(["r"]).unwrap();
        let r1 = m.read().await.unwrap();
        let r2 = m.try_read().await.unwrap();
        let r3 = m.read_timeout(Duration::ZERO).await.unwrap();
        sleep(Duration::from_millis(1)).await;
        for node in &nodes {
            let entries = node.snapshot();
            let mut uids: Vec<_> = entries.iter().map(|e| e.uid.as_str()).collect();
            uids.sort_unstable();
            let mut want = [r1.uid(), r2.uid(), r3.uid()];
            want.sort_unstable();
            assert_eq!(uids, want, "n = {n}");
            assert!(entries.iter().all(|e| e.mode == LockMode::Read));
        }
        drop((r1, r2, r3));
        assert_no_leaks(&nodes, &format!("n = {n}")).await;
    }
}

#[tokio::test(start_paused = true)]
async fn readers_keep_a_writer_out_until_the_last_one_leaves() {
    for n in SIZES {
        let (ds, nodes) = cluster_seeded(n, n as u64);
        let m = ds.rw_mutex(["r"]).unwrap();
        let (r1, r2) = (m.read().await.unwrap(), m.read().await.unwrap());
        assert_eq!(
            m.try_lock().await.unwrap_err(),
            Error::WouldBlock,
            "n = {n}"
        );
        let start = Instant::now();
        let waited = m.lock_timeout(Duration::from_secs(2)).await.unwrap_err();
        assert_eq!(waited, Error::Timeout, "n = {n}");
        assert!(
            start.elapsed() >= Duration::from_secs(2),
            "n = {n}: gave up early"
        );

        let writer = tokio::spawn({
            let m = m.clone();
            async move { m.lock().await }
        });
        sleep(Duration::from_secs(5)).await;
        r1.unlock().await.unwrap();
        sleep(Duration::from_secs(5)).await;
        assert!(
            !writer.is_finished(),
            "n = {n}: writer got in beside a reader"
        );
        r2.unlock().await.unwrap();
        let w = timeout(PATIENCE, writer).await.unwrap().unwrap().unwrap();
        assert_eq!(holders_of(&nodes, w.uid()), n, "n = {n}");
        assert_eq!(m.try_read().await.unwrap_err(), Error::WouldBlock);
        w.unlock().await.unwrap();
        assert_no_leaks(&nodes, &format!("n = {n}")).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_writer_keeps_readers_out() {
    for n in SIZES {
        let (ds, nodes) = cluster_seeded(n, n as u64);
        let m = ds.rw_mutex(["r"]).unwrap();
        let w = m.lock().await.unwrap();
        assert_eq!(
            m.try_read().await.unwrap_err(),
            Error::WouldBlock,
            "n = {n}"
        );
        assert_eq!(
            m.try_lock().await.unwrap_err(),
            Error::WouldBlock,
            "n = {n}"
        );
        let waited = m.read_timeout(Duration::from_secs(2)).await.unwrap_err();
        assert_eq!(waited, Error::Timeout, "n = {n}");
        assert_eq!(
            m.lock_timeout(Duration::ZERO).await.unwrap_err(),
            Error::Timeout
        );

        let readers: Vec<_> = (0..3)
            .map(|_| {
                let m = m.clone();
                tokio::spawn(async move { m.read().await })
            })
            .collect();
        sleep(Duration::from_secs(5)).await;
        assert!(readers.iter().all(|r| !r.is_finished()), "n = {n}");
        w.unlock().await.unwrap();
        let mut guards = Vec::new();
        for r in readers {
            guards.push(timeout(PATIENCE, r).await.unwrap().unwrap().unwrap());
        }
        // They hold it together.
        let all_held = guards
            .iter()
            .all(|g| holders_of(&nodes, g.uid()) >= ds.read_quorum());
        assert!(all_held, "n = {n}");
        drop(guards);
        assert_no_leaks(&nodes, &format!("n = {n}")).await;
    }
}

#[tokio::test(start_paused = true)]
async fn free_locks_are_granted_at_once_by_every_variant() {
    for n in SIZES {
        let (ds, nodes) = cluster(n);
        let m = ds.rw_mutex(["r"]).unwrap();
        let start = Instant::now();
        m.try_lock().await.unwrap().unlock().await.unwrap();
        m.lock_timeout(Duration::ZERO)
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        m.lock_timeout(Duration::from_secs(1))
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        m.try_read().await.unwrap().unlock().await.unwrap();
        m.read_timeout(Duration::from_secs(1))
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "n = {n}: a free lock waited"
        );
        assert_no_leaks(&nodes, &format!("n = {n}")).await;
    }
}

#[tokio::test(start_paused = true)]
async fn multi_resource_locks_are_all_or_nothing() {
    for n in SIZES {
        let (ds, nodes) = cluster(n);
        let ctx = format!("n = {n}");
        let b = ds.rw_mutex(["b"]).unwrap().lock().await.unwrap();
        let ab = ds.rw_mutex(["b", "a"]).unwrap();
        assert_eq!(ab.try_lock().await.unwrap_err(), Error::WouldBlock, "{ctx}");
        assert_eq!(ab.try_read().await.unwrap_err(), Error::WouldBlock, "{ctx}");
        let waited = ab.lock_timeout(Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(waited, Error::Timeout, "{ctx}");
        sleep(SETTLE).await;
        let entries = leftovers(&nodes);
        assert!(
            entries.iter().all(|(_, e)| e.uid == b.uid()),
            "{ctx}: {entries:#?}"
        );
        assert!(
            ds.rw_mutex(["a"]).unwrap().try_lock().await.is_ok(),
            "{ctx}"
        );
        b.unlock().await.unwrap();

        let both = ab.lock().await.unwrap();
        assert_eq!(both.resources(), ["a", "b"]);
        for node in &nodes {
            let held: Vec<_> = node
                .snapshot()
                .into_iter()
                .map(|e| (e.resource, e.uid))
                .collect();
            let want = [("a", both.uid()), ("b", both.uid())].map(|(r, u)| (r.into(), u.into()));
            assert_eq!(held, want, "{ctx}");
        }
        for part in ["a", "b"] {
            let m = ds.rw_mutex([part]).unwrap();
            assert_eq!(m.try_read().await.unwrap_err(), Error::WouldBlock, "{ctx}");
        }
        both.unlock().await.unwrap();

        // A shared lock on one name admits readers of the pair, not writers.
        let rb = ds.rw_mutex(["b"]).unwrap().read().await.unwrap();
        ab.try_read().await.unwrap().unlock().await.unwrap();
        assert_eq!(ab.try_lock().await.unwrap_err(), Error::WouldBlock, "{ctx}");
        rb.unlock().await.unwrap();
        assert_no_leaks(&nodes, &ctx).await;
    }
}
