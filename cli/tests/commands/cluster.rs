//! Five real lock-server processes under load from several clients: one is
//! SIGKILLed and restarted on the same port (in quarantine, the default),
//! mutual exclusion holds throughout, the load keeps going with four of five
//! up, and the restarted node rejoins: once two other nodes are killed, the
//! load can only proceed with its grants.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{dsync, remote_config, Scratch, Server, ADMIN, TOKEN};
use quorum_lock::net::RemoteLocker;
use quorum_lock::Dsync;

/// Who is inside the critical section, checked on every entry, plus every
/// interval for an overlap check at the end and a counter that a lost
/// update would leave short.
#[derive(Default)]
struct Checker {
    inside: Mutex<Option<usize>>,
    violations: AtomicUsize,
    intervals: Mutex<Vec<(Instant, Instant, usize)>>,
    counter: AtomicU64,
    sections: AtomicU64,
}

impl Checker {
    async fn critical_section(&self, client: usize) {
        let start = Instant::now();
        {
            let mut inside = self.inside.lock().unwrap();
            if let Some(other) = inside.replace(client) {
                eprintln!("VIOLATION: client {client} entered while client {other} was inside");
                self.violations.fetch_add(1, Ordering::SeqCst);
            }
        }
        // A racy read-pause-write: any overlap loses an increment.
        let value = self.counter.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(2)).await;
        self.counter.store(value + 1, Ordering::SeqCst);
        self.sections.fetch_add(1, Ordering::SeqCst);
        *self.inside.lock().unwrap() = None;
        self.intervals
            .lock()
            .unwrap()
            .push((start, Instant::now(), client));
    }

    fn overlaps(&self) -> usize {
        let mut intervals = self.intervals.lock().unwrap().clone();
        intervals.sort_by_key(|i| i.0);
        intervals.windows(2).filter(|w| w[1].0 < w[0].1).count()
    }
}

async fn load(
    client: usize,
    ds: Dsync,
    checker: Arc<Checker>,
    stop: Arc<AtomicBool>,
) -> (u64, u64) {
    let mutex = ds.rw_mutex(["shared-counter"]).unwrap();
    let (mut done, mut failed) = (0, 0);
    while !stop.load(Ordering::SeqCst) {
        match mutex.lock_timeout(Duration::from_secs(4)).await {
            Ok(guard) => {
                checker.critical_section(client).await;
                // A release a dead node cannot confirm is fine: the guard
                // is gone either way and the entries expire.
                let _ = guard.unlock().await;
                done += 1;
            }
            Err(_) => failed += 1,
        }
    }
    (done, failed)
}

/// Lets the load run for `phase` and checks that it made at least `min`
/// critical sections meanwhile.
async fn expect_progress(checker: &Checker, min: u64, phase: Duration, what: &str) -> u64 {
    let before = checker.sections.load(Ordering::SeqCst);
    tokio::time::sleep(phase).await;
    let made = checker.sections.load(Ordering::SeqCst) - before;
    eprintln!("{what}: {made} critical sections in {phase:?}");
    assert!(
        made >= min,
        "{what}: only {made} critical sections in {phase:?}"
    );
    made
}

async fn health(addr: SocketAddr) -> Option<bool> {
    let locker = RemoteLocker::connect(addr.to_string(), remote_config(ADMIN))
        .await
        .ok()?;
    locker
        .health()
        .await
        .ok()
        .map(|(quarantined, _)| quarantined)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_node_restarts_in_quarantine_and_rejoins_under_load() {
    let dir = Scratch::new("net-cluster");
    let mut servers: Vec<Server> = (0..5)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();

    let checker = Arc::new(Checker::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    for client in 0..4 {
        let ds = dsync(&addrs, TOKEN, &format!("client-{client}")).await;
        clients.push(ds.clone());
        tasks.push(tokio::spawn(load(
            client,
            ds,
            checker.clone(),
            stop.clone(),
        )));
    }

    expect_progress(&checker, 10, Duration::from_millis(1500), "all five up").await;

    let victim = 2;
    let addr = servers[victim].addr;
    tokio::task::block_in_place(|| servers[victim].kill());
    expect_progress(&checker, 10, Duration::from_millis(1500), "four of five up").await;

    // Same port, default settings: the restarted node starts in quarantine.
    let restarted = tokio::task::block_in_place(|| Server::restart_at(&dir, addr, &[]));
    servers[victim] = restarted;
    assert_eq!(
        health(addr).await,
        Some(true),
        "a restarted node must start in quarantine"
    );
    expect_progress(
        &checker,
        10,
        Duration::from_millis(1500),
        "one node in quarantine",
    )
    .await;

    // Every client reconnects by itself, and the quarantine ends.
    let start = Instant::now();
    while !clients.iter().all(|ds| ds.lockers()[victim].is_online())
        || health(addr).await != Some(false)
    {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the restarted node did not rejoin"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("restarted node rejoined after {:?}", start.elapsed());

    // With 0 and 1 gone, a write quorum (3) needs the restarted node.
    tokio::task::block_in_place(|| {
        servers[0].kill();
        servers[1].kill();
    });
    expect_progress(
        &checker,
        10,
        Duration::from_millis(1500),
        "three of five up, including the restarted node",
    )
    .await;

    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for (client, task) in tasks.into_iter().enumerate() {
        let (done, failed) = tokio::time::timeout(Duration::from_secs(15), task)
            .await
            .expect("a client did not stop")
            .expect("a client panicked");
        eprintln!("client {client}: {done} locks, {failed} failed waits");
        assert!(done > 0, "client {client} never got the lock");
        total += done;
    }
    assert_eq!(
        checker.violations.load(Ordering::SeqCst),
        0,
        "two holders at once"
    );
    assert_eq!(checker.overlaps(), 0, "overlapping critical sections");
    assert_eq!(
        checker.counter.load(Ordering::SeqCst),
        total,
        "lost updates"
    );
    assert!(
        servers[victim].log_text().contains("quarantine"),
        "the restarted server did not log its quarantine"
    );
}
