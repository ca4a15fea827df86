//! Argument checking, runtime requirements, guard lifecycle and the lock
//! table as seen by the lockers.

use std::time::Duration;

use crate::common::*;
use futures::executor::block_on;
use quorum_lock::{
    Dsync, Error, LockMode, NetLocker, RetryPolicy, Timeouts, MAX_RESOURCES, MAX_RESOURCE_NAME_LEN,
};

fn assert_invalid<T: std::fmt::Debug>(result: Result<T, Error>, what: &str) {
    match result {
        Err(err @ Error::InvalidArgument(_)) => assert!(!err.is_retryable(), "{what}"),
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn quorum_sizes_match_dsync() {
    let expected = [
        (1, 1, 1),
        (2, 1, 2),
        (3, 2, 2),
        (4, 2, 3),
        (5, 3, 3),
        (16, 8, 9),
    ];
    for (n, read, write) in expected {
        let (ds, _) = cluster(n);
        assert_eq!(
            (ds.read_quorum(), ds.write_quorum()),
            (read, write),
            "n = {n}"
        );
    }
}

#[test]
fn invalid_resource_lists_are_rejected() {
    let (ds, _) = cluster(3);
    assert_invalid(ds.rw_mutex(Vec::<String>::new()), "empty list");
    assert_invalid(ds.rw_mutex(["a", ""]), "empty name");
    let too_long = "x".repeat(MAX_RESOURCE_NAME_LEN + 1);
    assert_invalid(ds.rw_mutex([too_long.as_str()]), "over-long name");
    let too_many: Vec<String> = (0..=MAX_RESOURCES).map(|i| format!("r{i}")).collect();
    assert_invalid(ds.rw_mutex(too_many), "too many names");

    // The limits themselves are allowed, and duplicates do not count twice.
    let longest = "x".repeat(MAX_RESOURCE_NAME_LEN);
    assert!(ds.rw_mutex([longest.as_str()]).is_ok());
    let most: Vec<String> = (0..MAX_RESOURCES).map(|i| format!("r{i}")).collect();
    assert!(ds.rw_mutex(most.iter().chain(&most).cloned()).is_ok());
    let m = ds.rw_mutex(["c", "a", "b", "a"]).unwrap();
    assert_eq!(m.resources(), ["a", "b", "c"]);
}

#[test]
fn names_with_control_characters_are_refused_everywhere() {
    let (ds, lockers) = cluster(3);
    for name in ["job\n1", "\u{1b}[31mred", "nul\0"] {
        assert_invalid(ds.rw_mutex([name]), "a lock name");
        assert_invalid(ds.election(name), "an election name");
        assert_invalid(ds.semaphore(name, 2), "a semaphore name");
    }
    let err = ds.rw_mutex(["job\n1"]).expect_err("refused");
    assert!(
        err.to_string().contains("U+000A (line feed) at byte 3"),
        "{err}"
    );
    // A locker refuses them too, for callers that build the arguments.
    let args = quorum_lock::LockArgs {
        uid: "u".into(),
        resources: vec!["two\nlines".to_owned()].into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    };
    assert_invalid(block_on(lockers[0].lock(&args)), "a locker's lock");
    assert!(lockers[0].snapshot().is_empty());
}

#[tokio::test]
async fn a_source_set_is_recorded_instead_of_the_callers_location() {
    let (ds, lockers) = cluster(3);
    let job = ds.with_source("run: ./backup.sh --full").expect("a source");
    let guard = job.rw_mutex(["backup"]).unwrap().lock().await.unwrap();
    let permit = job.semaphore("pool", 2).unwrap().acquire().await.unwrap();
    let leading = job
        .election("scheduler")
        .unwrap()
        .campaign(&b"me"[..])
        .await
        .unwrap();
    let plain = ds.rw_mutex(["other"]).unwrap().lock().await.unwrap();
    let mut sourced = Vec::new();
    for info in lockers[0].snapshot() {
        if info.resource == "other" {
            // The original keeps the caller's location.
            assert!(info.source.starts_with("tests/core/basics.rs:"), "{info:?}");
        } else {
            assert_eq!(info.source, "run: ./backup.sh --full", "{info:?}");
            sourced.push(info.resource);
        }
    }
    for resource in ["backup", "semaphore/pool/", "election/scheduler"] {
        assert!(
            sourced.iter().any(|r| r.starts_with(resource)),
            "{resource} not held with the source: {sourced:?}"
        );
    }
    drop((guard, permit, leading, plain));
    for bad in ["", "two\nlines", &"x".repeat(513)] {
        assert_invalid(ds.with_source(bad), "a bad source");
    }
}

#[test]
fn invalid_coordinators_are_rejected() {
    assert_invalid(Dsync::new(Vec::new()), "no lockers");
    let zero_acquire = Timeouts {
        acquire: Duration::ZERO,
        ..Timeouts::default()
    };
    assert_invalid(
        Dsync::builder(as_lockers(&nodes(1)))
            .timeouts(zero_acquire)
            .build(),
        "zero acquire timeout",
    );
    let zero_unlock = Timeouts {
        unlock: Duration::ZERO,
        ..Timeouts::default()
    };
    assert_invalid(
        Dsync::builder(as_lockers(&nodes(1)))
            .timeouts(zero_unlock)
            .build(),
        "zero unlock timeout",
    );
    assert_invalid(
        Dsync::builder(as_lockers(&nodes(1))).owner("").build(),
        "empty owner",
    );
    // A zero retry policy is legal: it just never waits.
    let no_wait = RetryPolicy {
        initial: Duration::ZERO,
        max: Duration::ZERO,
    };
    assert!(Dsync::builder(as_lockers(&nodes(1)))
        .retry(no_wait)
        .build()
        .is_ok());
}

#[test]
fn acquiring_outside_a_runtime_returns_no_runtime() {
    let (ds, nodes) = cluster(3);
    let m = ds.rw_mutex(["r"]).unwrap();
    assert_eq!(block_on(m.lock()).unwrap_err(), Error::NoRuntime);
    assert_eq!(block_on(m.read()).unwrap_err(), Error::NoRuntime);
    assert_eq!(block_on(m.try_lock()).unwrap_err(), Error::NoRuntime);
    assert_eq!(block_on(m.try_read()).unwrap_err(), Error::NoRuntime);
    let second = Duration::from_secs(1);
    assert_eq!(
        block_on(m.lock_timeout(second)).unwrap_err(),
        Error::NoRuntime
    );
    assert_eq!(
        block_on(m.read_timeout(second)).unwrap_err(),
        Error::NoRuntime
    );
    assert!(!Error::NoRuntime.is_retryable());
    assert!(leftovers(&nodes).is_empty(), "{:?}", leftovers(&nodes));
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn dropping_a_guard_after_its_runtime_is_gone_does_not_panic() {
    let (ds, nodes) = cluster(3);
    let rt = paused_runtime();
    let (w, r) = rt.block_on(async {
        let w = ds.rw_mutex(["w"]).unwrap().lock().await.unwrap();
        let r = ds.rw_mutex(["r"]).unwrap().read().await.unwrap();
        (w, r)
    });
    drop(rt);
    drop(w);
    drop(r);
    // Dropped outside any runtime: released on the runtime the `Dsync`
    // keeps for such work (docs/guarantees.md, "Any runtime"), on a thread
    // of its own, in real time.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while nodes.iter().any(|node| !node.snapshot().is_empty()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the entries of guards dropped after their runtime was gone stayed: {:?}",
            nodes.iter().map(|n| n.snapshot()).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_guard_dropped_on_another_thread_is_released_on_its_runtime() {
    let (ds, nodes) = cluster(3);
    let rt = paused_runtime();
    let guard = rt.block_on(async { ds.rw_mutex(["r"]).unwrap().lock().await.unwrap() });
    std::thread::spawn(move || drop(guard)).join().unwrap();
    rt.block_on(assert_no_leaks(&nodes, "dropped on a plain thread"));
}

#[tokio::test(start_paused = true)]
async fn unlock_confirms_and_clears_every_node() {
    for n in SIZES {
        let (ds, nodes) = cluster_seeded(n, n as u64);
        let m = ds.rw_mutex(["jobs/1"]).unwrap();

        let w = m.lock().await.unwrap();
        assert_eq!(w.resources(), ["jobs/1"]);
        assert_eq!(w.granted_by(), n, "n = {n}");
        for node in &nodes {
            let entries = node.snapshot();
            assert_eq!(entries.len(), 1, "n = {n}: {entries:?}");
            let e = &entries[0];
            assert_eq!((e.resource.as_str(), e.uid.as_str()), ("jobs/1", w.uid()));
            assert_eq!((e.owner.as_str(), e.mode), ("test-client", LockMode::Write));
            assert!(e.source.contains("basics.rs"), "source {:?}", e.source);
        }
        w.unlock().await.unwrap();
        // Ok means a quorum confirmed: at least that many are empty already.
        let empty = nodes.iter().filter(|n| n.snapshot().is_empty()).count();
        assert!(empty >= ds.write_quorum(), "n = {n}: only {empty} empty");

        let r = m.read().await.unwrap();
        assert_eq!(holders_of(&nodes, r.uid()), n);
        r.unlock().await.unwrap();
        assert_no_leaks(&nodes, &format!("n = {n}")).await;
    }
}

#[tokio::test(start_paused = true)]
async fn dropped_guards_are_released_in_the_background() {
    for n in SIZES {
        let (ds, nodes) = cluster(n);
        let m = ds.rw_mutex(["r"]).unwrap();
        drop(m.lock().await.unwrap());
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(
            leftovers(&nodes).is_empty(),
            "n = {n}: write guard not released"
        );
        // The lock is really free again, for writers and readers.
        drop(m.try_read().await.unwrap());
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(
            leftovers(&nodes).is_empty(),
            "n = {n}: read guard not released"
        );
        m.try_lock().await.unwrap().unlock().await.unwrap();
        assert_no_leaks(&nodes, &format!("n = {n}")).await;
    }
}

#[tokio::test(start_paused = true)]
async fn every_acquisition_has_a_fresh_uid() {
    let (ds, nodes) = cluster(3);
    let m = ds.rw_mutex(["r"]).unwrap();
    let mut uids = std::collections::HashSet::new();
    for _ in 0..10 {
        let g = m.lock().await.unwrap();
        assert!(!g.uid().is_empty());
        assert!(uids.insert(g.uid().to_owned()), "uid {} reused", g.uid());
        g.unlock().await.unwrap();
    }
    let (a, b) = (m.read().await.unwrap(), m.read().await.unwrap());
    assert_ne!(a.uid(), b.uid());
    drop((a, b));
    assert_no_leaks(&nodes, "fresh uids").await;
}

#[tokio::test(start_paused = true)]
async fn unlock_is_idempotent_at_the_locker_level() {
    let node = nodes(1).remove(0);
    let a = args("uid-1", &["x", "y"]);
    assert_eq!(node.lock(&a).await, Ok(true));
    assert_eq!(
        node.lock(&a).await,
        Ok(true),
        "re-locking with the same uid"
    );
    assert_eq!(
        node.snapshot().len(),
        2,
        "one entry per resource, not per call"
    );
    assert_eq!(node.lock(&args("uid-2", &["y"])).await, Ok(false));
    assert_eq!(
        node.runlock(&a).await,
        Ok(false),
        "wrong mode must not release"
    );
    assert_eq!(node.snapshot().len(), 2);
    assert_eq!(
        node.unlock(&args("uid-2", &["x"])).await,
        Ok(false),
        "wrong uid"
    );
    assert_eq!(node.unlock(&a).await, Ok(true));
    assert_eq!(node.unlock(&a).await, Ok(false));
    assert!(node.snapshot().is_empty());

    let r = args("reader", &["x"]);
    assert_eq!(node.rlock(&r).await, Ok(true));
    assert_eq!(node.rlock(&r).await, Ok(true));
    assert_eq!(node.snapshot().len(), 1, "{:?}", node.snapshot());
    assert_eq!(node.runlock(&r).await, Ok(true));
    assert_eq!(node.runlock(&r).await, Ok(false));
    assert!(node.snapshot().is_empty());

    // The coordinator's unlock leaves nothing a second unlock could find.
    let (ds, nodes) = cluster(3);
    let g = ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    let again = args(g.uid(), &["r"]);
    g.unlock().await.unwrap();
    for node in &nodes {
        assert_eq!(node.unlock(&again).await, Ok(false));
    }
}

#[tokio::test(start_paused = true)]
async fn a_held_guard_is_not_lost() {
    let (ds, nodes) = cluster(3);
    let g = ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    let token = g.loss_token();
    let lost = tokio::time::timeout(Duration::from_secs(600), g.lost()).await;
    assert!(lost.is_err(), "lost() resolved while the lock was held");
    assert!(!g.is_lost() && !token.is_cancelled());
    // Cancelling the child token is the caller's business, not a loss.
    token.cancel();
    assert!(!g.is_lost());
    assert_eq!(holders_of(&nodes, g.uid()), 3);
    g.unlock().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_guard_notices_when_its_entries_are_forced_open() {
    let (ds, nodes) = cluster(3);
    let m = ds.rw_mutex(["r"]).unwrap();
    let g = m.lock().await.unwrap();
    for node in &nodes {
        assert_eq!(node.force_unlock(&args("", &["r"])).await, Ok(true));
    }
    // Somebody else now holds the lock, so the first guard is worthless.
    let other = m.try_lock().await.unwrap();
    let noticed = tokio::time::timeout(Duration::from_secs(600), g.lost()).await;
    assert!(
        noticed.is_ok() && g.is_lost(),
        "guard {} never noticed",
        g.uid()
    );
    drop(other);
}

/// Acquiring outside a runtime returns `NoRuntime`; unlocking must not be
/// worse. The guard remembers the runtime it was acquired on and releases
/// there, or reports `NoRuntime` once that runtime is gone.
#[test]
fn unlocking_outside_a_runtime_context_does_not_panic() {
    let nodes = nodes(3);
    let faults: Vec<_> = nodes
        .iter()
        .map(|n| FaultyLocker::wrap(n.clone()))
        .collect();
    let short = Timeouts {
        unlock: Duration::from_millis(50),
        ..Timeouts::default()
    };
    let ds = Dsync::builder(as_lockers(&faults))
        .timeouts(short)
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let m = ds.rw_mutex(["r"]).unwrap();
    let (first, second) = rt.block_on(async {
        let first = m.lock().await.unwrap();
        let second = ds.rw_mutex(["s"]).unwrap().lock().await.unwrap();
        (first, second)
    });
    // Hanging lockers force the release to need a timer.
    faults.iter().for_each(|f| f.set(Behaviour::Hang));
    let outcome = std::thread::spawn(move || block_on(first.unlock())).join();
    let outcome = outcome.expect("unlock panicked on a plain thread");
    let unconfirmed = Error::ReleaseUnconfirmed {
        confirmed: 0,
        quorum: 2,
        lockers: 3,
    };
    assert_eq!(outcome, Err(unconfirmed.clone()));

    // With the acquiring runtime gone, the release still runs (on a runtime
    // of its own) instead of giving up.
    drop(rt);
    assert_eq!(block_on(second.unlock()), Err(unconfirmed));
}
