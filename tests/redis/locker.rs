//! `RedisLocker` against real `redis-server` processes on loopback ports:
//! the locker conformance suite, and exclusion through a `Dsync` over three
//! Redis nodes under contention.
//!
//! Each test starts its own `redis-server` (no persistence, a free port)
//! and stops it by its PID. Without `redis-server` on the PATH the tests
//! print that they were skipped, unless `QUORUM_LOCK_REQUIRE_REDIS` is set
//! (as `.ci/run` does), which makes a missing server a failure.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::{check_locker, History};
use quorum_lock::{Dsync, LockMode, RetryPolicy, Timeouts};

use crate::redis_support::{locker, RedisServer};

#[tokio::test]
async fn redis_lockers_conform() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let report = check_locker(|| locker(&server, Duration::from_secs(60)))
        .await
        .unwrap_or_else(|broken| panic!("{broken}"));
    // Redis offers everything the suite checks, waiting with pushes,
    // fencing and election included, so nothing is skipped.
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(report.passed.len(), 13, "{:?}", report.passed);
    assert!(
        report
            .passed
            .contains(&"a proclamation lives with its entry and watches are pushed"),
        "{:?}",
        report.passed
    );
}

#[tokio::test]
async fn an_entry_nobody_refreshes_expires_on_the_redis_clock() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let redis = locker(&server, Duration::from_millis(300)).await;
    let args = |uid: &str| quorum_lock::LockArgs {
        uid: uid.into(),
        resources: vec!["expiring".to_owned()].into(),
        owner: "test".into(),
        source: "tests/redis/locker.rs".into(),
        quorum: 1,
    };
    assert!(redis.rlock(&args("reader-1")).await.unwrap());
    assert!(redis.rlock(&args("reader-2")).await.unwrap());
    // reader-2 keeps refreshing for 3 validities; reader-1 does not, and
    // must expire on its own although the key stays alive.
    for _ in 0..9 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            redis.refresh(&args("reader-2")).await.unwrap(),
            "a refreshed reader expired"
        );
    }
    assert!(
        !redis.refresh(&args("reader-1")).await.unwrap(),
        "an unrefreshed reader outlived its validity"
    );
    let listed: Vec<String> = redis
        .locks()
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.uid)
        .collect();
    assert_eq!(listed, ["reader-2"]);
    assert!(
        !redis.lock(&args("writer")).await.unwrap(),
        "a writer beside a live reader"
    );
    assert!(redis.runlock(&args("reader-2")).await.unwrap());
    assert!(redis.lock(&args("writer")).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_redis_nodes_keep_writers_apart() {
    let Some(servers) = RedisServer::start_many(3) else {
        return;
    };
    let mut lockers = Vec::new();
    for server in &servers {
        lockers.push(locker(server, Duration::from_secs(60)).await);
    }
    let ds = Dsync::builder(lockers)
        .owner("redis-test")
        .build()
        .expect("valid settings");
    let history = Arc::new(History::new());
    let mut workers = Vec::new();
    for _ in 0..6 {
        let (ds, history) = (ds.clone(), history.clone());
        workers.push(tokio::spawn(async move {
            let mutex = ds.rw_mutex(["shared"])?;
            for _ in 0..15 {
                let guard = mutex.lock().await?;
                history.acquired(guard.uid(), guard.resources(), LockMode::Write);
                tokio::task::yield_now().await;
                history.released(guard.uid());
                guard.unlock().await?;
            }
            Ok::<(), quorum_lock::Error>(())
        }));
    }
    for worker in workers {
        tokio::time::timeout(Duration::from_secs(60), worker)
            .await
            .expect("the workers finish within 60 s")
            .expect("joins")
            .expect("every lock and unlock succeeds");
    }
    history.check().expect("no two writers overlapped");
    // An acquired and a released event per hold.
    assert_eq!(history.len(), 180);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_a_push_not_by_its_recheck() {
    let Some(servers) = RedisServer::start_many(3) else {
        return;
    };
    let mut lockers = Vec::new();
    for server in &servers {
        lockers.push(locker(server, Duration::from_secs(60)).await);
    }
    // A re-check and a retry far beyond the test's bound: only a push can
    // wake the waiter in time.
    let ds = Dsync::builder(lockers)
        .retry(RetryPolicy {
            initial: Duration::from_secs(120),
            max: Duration::from_secs(120),
        })
        .timeouts(Timeouts {
            wait_recheck: Duration::from_secs(120),
            ..Timeouts::default()
        })
        .build()
        .expect("valid settings");
    let mutex = ds.rw_mutex(["pushed"]).expect("a valid name");
    let held = mutex.lock().await.expect("the first lock");
    let waiter = tokio::spawn({
        let mutex = mutex.clone();
        async move { mutex.lock().await.map(|guard| guard.uid().to_owned()) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "granted while the lock was held");
    held.unlock().await.expect("unlock");
    let uid = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter was woken long before its re-check")
        .expect("joins")
        .expect("the waiter's lock");
    assert!(!uid.is_empty());
}

/// Collects the pushes a locker sends.
#[derive(Default)]
struct Inbox(std::sync::Mutex<Vec<(String, quorum_lock::PushEvent)>>);

impl quorum_lock::PushSink for Inbox {
    fn push(&self, _slot: usize, uid: &str, event: quorum_lock::PushEvent) {
        self.0.lock().unwrap().push((uid.to_owned(), event));
    }
}

impl Inbox {
    fn granted(&self, uid: &str) -> bool {
        self.0
            .lock()
            .unwrap()
            .iter()
            .any(|(u, e)| u == uid && *e == quorum_lock::PushEvent::Granted)
    }

    /// Whether a grant for `uid` is pushed within `bound`.
    async fn granted_within(&self, uid: &str, bound: Duration) -> bool {
        let give_up = tokio::time::Instant::now() + bound;
        while !self.granted(uid) {
            if tokio::time::Instant::now() >= give_up {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }
}

/// The connection and the push listener live on the runtime that made
/// them; a locker used on another runtime after that one ended connects
/// and listens again there.
#[test]
fn pushes_outlive_the_runtime_that_started_them() {
    use quorum_lock::NetLocker;
    let Some(server) = RedisServer::start() else {
        return;
    };
    let args = runtimes_args;
    let inbox = Arc::new(Inbox::default());
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    };
    let first = runtime();
    let redis: Arc<dyn NetLocker> = first.block_on(locker(&server, Duration::from_secs(60)));
    first.block_on(async {
        assert!(redis.lock(&args("holder-1")).await.unwrap());
        queued_then_pushed(&redis, &inbox, "holder-1", "waiter-1").await;
    });
    drop(first);

    let second = runtime();
    second.block_on(async {
        // The first runtime's connection is gone: one call may fail on it.
        let mut granted = redis.lock(&args("holder-2")).await;
        if granted.is_err() {
            granted = redis.lock(&args("holder-2")).await;
        }
        assert!(granted.expect("a new connection on this runtime"));
        queued_then_pushed(&redis, &inbox, "holder-2", "waiter-2").await;
    });
}

fn runtimes_args(uid: &str) -> quorum_lock::LockArgs {
    quorum_lock::LockArgs {
        uid: uid.into(),
        resources: vec!["runtimes".to_owned()].into(),
        owner: "test".into(),
        source: "tests/redis/locker.rs".into(),
        quorum: 1,
    }
}

/// `waiter` queues behind `holder`, which then unlocks: the waiter must be
/// pushed its grant, and is then unlocked.
async fn queued_then_pushed(
    redis: &Arc<dyn quorum_lock::NetLocker>,
    inbox: &Arc<Inbox>,
    holder: &str,
    waiter: &str,
) {
    use quorum_lock::{Ticket, WaitArgs, WaitReply, Wake};
    let args = runtimes_args;
    let wait = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(30),
        wake: Some(Wake::new(inbox.clone(), 0)),
    };
    let reply = redis.lock_wait(&args(waiter), LockMode::Write, &wait).await;
    assert_eq!(reply.unwrap(), WaitReply::Queued);
    assert!(redis.unlock(&args(holder)).await.unwrap());
    assert!(
        inbox.granted_within(waiter, Duration::from_secs(5)).await,
        "{waiter} was not pushed its grant"
    );
    assert!(redis.unlock(&args(waiter)).await.unwrap());
}
