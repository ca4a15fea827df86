//! Faults of real `redis-server` processes under a `Dsync` of
//! `RedisLocker`s: exclusion under contention over 3 and 5 nodes, a node
//! killed with SIGKILL, nodes restarted without persistence while a lock is
//! held (the restart quarantine), and a majority frozen with SIGSTOP while a
//! lock is held (the holder hears of the loss before anyone else is
//! granted the lock).
//!
//! Real processes need real time: every wait is bounded, and the tests
//! assert orderings and outcomes, never how long something took.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::redis_support::{locker_with, wait_out_quarantine, RedisServer};
use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::testing::History;
use quorum_lock::{
    DRWMutex, Dsync, Error, Lease, LockMode, NetLocker, RetryPolicy, Timeouts, WriteGuard,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, timeout, Instant};

/// Lockers for `servers`, one connection each, with `config`.
async fn lockers(servers: &[RedisServer], config: &RedisConfig) -> Vec<Arc<dyn NetLocker>> {
    let mut out = Vec::new();
    for server in servers {
        out.push(locker_with(server, config.clone()).await);
    }
    out
}

/// A client over its own connections to `servers`.
async fn client(
    servers: &[RedisServer],
    config: &RedisConfig,
    owner: &str,
    lease: Lease,
    timeouts: Timeouts,
) -> Dsync {
    Dsync::builder(lockers(servers, config).await)
        .owner(owner)
        .lease(lease)
        .timeouts(timeouts)
        .retry(RetryPolicy {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(100),
        })
        .build()
        .expect("valid client settings")
}

/// Fresh servers hold nothing from before: no quarantine needed.
fn fresh(validity: Duration) -> RedisConfig {
    RedisConfig {
        validity,
        quarantine: Duration::ZERO,
        call_timeout: Duration::from_millis(500),
        ..RedisConfig::default()
    }
}

/// Every entry left on `servers` under the default prefix.
async fn entries(servers: &[RedisServer]) -> usize {
    let mut total = 0;
    for server in servers {
        let node = locker_with(server, fresh(Duration::from_secs(60))).await;
        total += node.locks().await.expect("a node lists its entries").len();
    }
    total
}

/// Writers and readers of several clients take turns on one name; every
/// hold is recorded in a `History`, and a racy counter counts writes.
async fn contend(nodes: usize, seed: u64) {
    let Some(servers) = RedisServer::start_many(nodes) else {
        return;
    };
    let config = fresh(Duration::from_secs(60));
    let history = Arc::new(History::new());
    let counter = Arc::new(Mutex::new(0u64));
    let mut writes = 0u64;
    let mut workers = Vec::new();
    let mut clients = Vec::new();
    for c in 0..3u64 {
        let ds = client(
            &servers,
            &config,
            &format!("client-{c}"),
            Lease::default(),
            Timeouts::default(),
        )
        .await;
        clients.push(ds.clone());
        for t in 0..2u64 {
            let mut rng = SmallRng::seed_from_u64(seed * 100 + c * 10 + t);
            let modes: Vec<LockMode> = (0..12)
                .map(|_| {
                    if rng.random_bool(0.6) {
                        LockMode::Write
                    } else {
                        LockMode::Read
                    }
                })
                .collect();
            writes += modes.iter().filter(|m| **m == LockMode::Write).count() as u64;
            let (ds, history, counter) = (ds.clone(), history.clone(), counter.clone());
            workers.push(tokio::spawn(async move {
                let mutex = ds.rw_mutex(["shared"]).map_err(|e| e.to_string())?;
                for mode in modes {
                    let (uid, unlock) = match mode {
                        LockMode::Write => {
                            let guard = mutex.lock().await.map_err(|e| format!("lock: {e}"))?;
                            let uid = guard.uid().to_owned();
                            history.acquired(&uid, ["shared"], mode);
                            // Read, pause, write: a lost update if two
                            // writers overlapped.
                            let seen = *counter.lock().unwrap();
                            sleep(Duration::from_millis(2)).await;
                            *counter.lock().unwrap() = seen + 1;
                            history.released(&uid);
                            (uid, guard.unlock().await)
                        }
                        LockMode::Read => {
                            let guard = mutex.read().await.map_err(|e| format!("read: {e}"))?;
                            let uid = guard.uid().to_owned();
                            history.acquired(&uid, ["shared"], mode);
                            sleep(Duration::from_millis(2)).await;
                            history.released(&uid);
                            (uid, guard.unlock().await)
                        }
                    };
                    unlock.map_err(|e| format!("unlock of {uid}: {e}"))?;
                }
                Ok::<(), String>(())
            }));
        }
    }
    for worker in workers {
        timeout(Duration::from_secs(90), worker)
            .await
            .expect("the workers finish within 90 s")
            .expect("joins")
            .expect("every lock and unlock succeeds");
    }
    history.check().expect("no conflicting holders overlapped");
    assert_eq!(
        history.len(),
        2 * 6 * 12,
        "an acquire and a release per hold"
    );
    assert_eq!(*counter.lock().unwrap(), writes, "a write was lost");
    // An unlock returns once a quorum let go; the other nodes' unlocks
    // (and the undo of a grant that arrived after the unlock) may still be
    // on their way, so wait for them before counting what is left.
    for ds in &clients {
        ds.finish_releases(Duration::from_secs(10))
            .await
            .expect("every client's releases finish");
    }
    assert_eq!(
        entries(&servers).await,
        0,
        "entries left after every unlock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_redis_nodes_keep_readers_and_writers_apart() {
    contend(3, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_redis_nodes_keep_readers_and_writers_apart() {
    contend(5, 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_are_granted_and_released_with_one_of_three_nodes_killed() {
    let Some(mut servers) = RedisServer::start_many(3) else {
        return;
    };
    let config = fresh(Duration::from_secs(60));
    let timeouts = Timeouts {
        unlock: Duration::from_secs(2),
        ..Timeouts::default()
    };
    let a = client(&servers, &config, "a", Lease::default(), timeouts).await;
    let b = client(&servers, &config, "b", Lease::default(), timeouts).await;
    let held = a.rw_mutex(["job"]).unwrap().lock().await.expect("a lock");
    assert!(held.granted_by() >= 2);
    held.unlock().await.expect("an unlock");

    tokio::task::block_in_place(|| servers[2].kill());

    let history = Arc::new(History::new());
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let mut workers = Vec::new();
    for ds in [a.clone(), b.clone()] {
        let (history, tokens) = (history.clone(), tokens.clone());
        workers.push(tokio::spawn(async move {
            let mutex = ds.rw_mutex(["job"])?;
            for _ in 0..8 {
                let guard = mutex.lock().await?;
                let granted = guard.granted_by();
                history.acquired(guard.uid(), ["job"], LockMode::Write);
                let token = guard.fencing_token().await?;
                history.fenced(guard.uid(), token);
                tokens.lock().unwrap().push(token);
                history.released(guard.uid());
                guard.unlock().await?;
                assert!(granted <= 2, "granted by {granted} of 3 with one dead");
            }
            let reader = mutex.read().await?;
            reader.unlock().await?;
            Ok::<(), Error>(())
        }));
    }
    for worker in workers {
        timeout(Duration::from_secs(60), worker)
            .await
            .expect("the workers finish within 60 s")
            .expect("joins")
            .expect("every lock, token and unlock succeeds over two nodes");
    }
    history.check().expect("no two writers overlapped");
    history.check_fencing().expect("fencing tokens grew");
    assert_eq!(tokens.lock().unwrap().len(), 16);
    assert_eq!(
        entries(&servers[..2]).await,
        0,
        "entries left on the live nodes"
    );
}

/// The lease of the restart and pause tests: refreshed every 250 ms,
/// trusted for 1.5 s of a 2 s validity.
fn short_lease() -> (Lease, Timeouts) {
    let lease = Lease {
        validity: Duration::from_secs(2),
        refresh_interval: Duration::from_millis(250),
        safety_margin: Duration::from_millis(500),
    };
    let timeouts = Timeouts {
        acquire: Duration::from_millis(500),
        refresh: Duration::from_millis(300),
        unlock: Duration::from_secs(1),
        ..Timeouts::default()
    };
    (lease, timeouts)
}

/// Whether the node behind `server` lists an entry of `uid`.
async fn node_holds(server: &RedisServer, uid: &str) -> bool {
    let node = RedisLocker::connect(&server.url(), fresh(Duration::from_secs(60)))
        .await
        .expect("connect to a node");
    node.locks()
        .await
        .expect("a node lists its entries")
        .iter()
        .any(|e| e.uid == uid)
}

/// Three nodes whose quarantine covers the validity, as it must once nodes
/// can restart with locks held; a holder and another client; and the
/// holder's lock on "held", taken once every fresh server's quarantine is
/// over and then on all three nodes.
///
/// Every node, not a bare quorum: the servers start in different seconds,
/// so a lock taken as soon as two of them are past their quarantine can
/// miss the third for good (a refresh re-creates a missing entry only
/// during a quarantine), and the restart of one of the other two then
/// rightly costs the holder its lock (its refreshes reach one entry of
/// three) and lets the other client in, which is not what these tests are
/// about.
struct Restarts {
    servers: Vec<RedisServer>,
    holder: Dsync,
    other: DRWMutex,
    held: WriteGuard,
}

async fn restarts() -> Option<Restarts> {
    let servers = RedisServer::start_many(3)?;
    let (lease, timeouts) = short_lease();
    let config = RedisConfig {
        validity: lease.validity,
        quarantine: lease.validity,
        call_timeout: Duration::from_millis(500),
        ..RedisConfig::default()
    };
    let holder = client(&servers, &config, "holder", lease, timeouts).await;
    let other = client(&servers, &config, "other", lease, timeouts).await;
    // The servers just started, so they refuse grants until their
    // quarantine is over.
    for server in &servers {
        wait_out_quarantine(&locker_with(server, config.clone()).await).await;
    }
    let held = holder
        .rw_mutex(["held"])
        .unwrap()
        .lock_timeout(Duration::from_secs(15))
        .await
        .expect("granted once the quarantine is over");
    // The grant needs two answers; the third may still be on its way.
    let give_up = Instant::now() + Duration::from_secs(5);
    for (i, server) in servers.iter().enumerate() {
        while !node_holds(server, held.uid()).await {
            assert!(Instant::now() < give_up, "node {i} never got the lock");
            sleep(Duration::from_millis(20)).await;
        }
    }
    Some(Restarts {
        servers,
        holder,
        other: other.rw_mutex(["held"]).unwrap(),
        held,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_empty_while_a_lock_is_held_grants_it_to_nobody_else() {
    let Some(mut r) = restarts().await else {
        return;
    };
    let uid = r.held.uid().to_owned();
    tokio::task::block_in_place(|| r.servers[0].restart_empty());
    assert!(
        !node_holds(&r.servers[0], &uid).await,
        "node 0 kept its keys"
    );
    // Nobody else is granted the lock, in one round or waiting past the
    // restarted node's quarantine (2 s): ten refresh periods and more.
    let tried = r.other.try_lock().await;
    assert!(tried.is_err(), "granted {tried:?}");
    let waited = r.other.lock_timeout(Duration::from_secs(3)).await;
    assert!(
        matches!(waited, Err(Error::Timeout | Error::Quarantined { .. })),
        "{waited:?}"
    );
    // And the holder kept it all along.
    assert!(!r.held.is_lost(), "the holder lost its lock");
    assert!(!r.held.loss_token().is_cancelled());
    r.held.unlock().await.expect("the holder's unlock");
    // Waiting, not one round: the release may still be on its way to one
    // node, and the timed-out wait's place to another.
    let next = r
        .other
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("granted after the unlock");
    next.unlock().await.expect("unlock");
    drop(r.holder);
}

/// A restarted node gets the holder's entry back from its refreshes during
/// its quarantine, so that the lock is again on every node: a later
/// failure of another node does not cost the holder its lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_gets_the_holders_entry_back_and_a_later_crash_costs_nothing() {
    let Some(mut r) = restarts().await else {
        return;
    };
    let uid = r.held.uid().to_owned();
    tokio::task::block_in_place(|| r.servers[0].restart_empty());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !node_holds(&r.servers[0], &uid).await {
        let online: Vec<bool> = r.holder.lockers().iter().map(|l| l.is_online()).collect();
        assert!(
            Instant::now() < deadline,
            "the holder's entry was not re-created on the restarted node within 10 s \
             (the holder's lockers online: {online:?})"
        );
        sleep(Duration::from_millis(100)).await;
    }
    // Past the restarted node's quarantine, a second node dies: the holder
    // still has two of three.
    sleep(Duration::from_secs(3)).await;
    tokio::task::block_in_place(|| r.servers[1].kill());
    sleep(Duration::from_secs(3)).await;
    assert!(!r.held.is_lost(), "the holder lost its lock");
    let tried = r.other.try_lock().await;
    assert!(tried.is_err(), "granted {tried:?}");
    r.held.unlock().await.expect("the holder's unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_by_a_frozen_majority_hears_of_it_before_anyone_is_granted() {
    let Some(servers) = RedisServer::start_many(3) else {
        return;
    };
    let (lease, timeouts) = short_lease();
    let config = RedisConfig {
        call_timeout: Duration::from_millis(300),
        ..fresh(lease.validity)
    };
    let a = client(&servers, &config, "holder", lease, timeouts).await;
    let b = client(&servers, &config, "other", lease, timeouts).await;
    let history = Arc::new(History::new());
    let events: Arc<Mutex<Vec<(Instant, &'static str)>>> = Arc::default();
    let log = {
        let events = events.clone();
        move |what: &'static str| events.lock().unwrap().push((Instant::now(), what))
    };

    let held = a
        .rw_mutex(["contested"])
        .unwrap()
        .lock()
        .await
        .expect("a lock");
    let uid = held.uid().to_owned();
    history.acquired(&uid, ["contested"], LockMode::Write);
    let told = tokio::spawn({
        let (lost, history, log, uid) = (held.lost(), history.clone(), log.clone(), uid.clone());
        async move {
            lost.await;
            history.lost_signalled(&uid);
            log("holder told of the loss");
        }
    });

    log("majority frozen");
    servers[0].pause();
    servers[1].pause();
    let waiter = tokio::spawn({
        let (mutex, history, log) = (
            b.rw_mutex(["contested"]).unwrap(),
            history.clone(),
            log.clone(),
        );
        async move {
            let guard = mutex.lock_timeout(Duration::from_secs(30)).await?;
            history.acquired(guard.uid(), ["contested"], LockMode::Write);
            log("other client granted");
            history.released(guard.uid());
            guard.unlock().await
        }
    });
    // Frozen for longer than the validity, so that every entry the holder
    // had there has expired by the servers' clocks when they thaw: the
    // waiter can then be granted at once, and only the holder's loss
    // signal keeps the order.
    sleep(lease.validity + Duration::from_millis(500)).await;
    log("majority thawed");
    servers[0].resume();
    servers[1].resume();

    timeout(Duration::from_secs(30), told)
        .await
        .expect("the holder is told of the loss")
        .expect("joins");
    timeout(Duration::from_secs(40), waiter)
        .await
        .expect("the other client is granted the lock within 40 s")
        .expect("joins")
        .expect("the other client's lock and unlock");
    assert!(held.is_lost());
    assert_eq!(held.unlock().await, Err(Error::LockLost));

    let mut events = events.lock().unwrap().clone();
    events.sort_by_key(|(at, _)| *at);
    let order: Vec<&str> = events.iter().map(|(_, what)| *what).collect();
    let at = |what: &str| order.iter().position(|w| *w == what).expect("logged");
    assert!(
        at("majority frozen") < at("holder told of the loss")
            && at("holder told of the loss") < at("other client granted"),
        "wrong order: {order:?}"
    );
    assert!(
        at("majority thawed") < at("other client granted"),
        "granted while a majority was frozen: {order:?}"
    );
    history
        .check()
        .expect("no overlap of holder and other client");
}
