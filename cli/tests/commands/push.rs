//! Coordinators waiting on real `quorum-lock server` processes: a waiter
//! is handed the lock by push when its holder releases it, without
//! polling; an old-style polling client (protocol version 2) and push
//! clients contending on one name all make progress; fencing
//! tokens from guards increase across holders and across restarts of
//! every server.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{lease, remote_config, Scratch, Server, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::{Dsync, Lease, NetLocker, RetryPolicy, Timeouts, Waiting};

async fn lockers(addrs: &[SocketAddr], config: &RemoteConfig) -> Vec<Arc<dyn NetLocker>> {
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    for addr in addrs {
        let locker = RemoteLocker::connect(addr.to_string(), config.clone())
            .await
            .expect("connect to a test server");
        lockers.push(Arc::new(locker));
    }
    lockers
}

/// A client that never polls within the test's time: retries and rechecks
/// only every minute, so a waiter that gets the lock sooner was pushed.
async fn patient(addrs: &[SocketAddr], owner: &str) -> Dsync {
    let minute = Duration::from_secs(60);
    Dsync::builder(lockers(addrs, &remote_config(TOKEN)).await)
        .owner(owner)
        .lease(Lease {
            validity: Duration::from_secs(120),
            refresh_interval: Duration::from_secs(20),
            safety_margin: Duration::from_secs(20),
        })
        .timeouts(Timeouts {
            wait_recheck: minute,
            ..Timeouts::default()
        })
        .retry(RetryPolicy {
            initial: minute,
            max: minute,
        })
        .build()
        .expect("valid client settings")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_is_handed_the_lock_by_push_across_processes() {
    let dir = Scratch::new("net-push-handoff");
    let servers: Vec<Server> = (0..5)
        .map(|_| Server::start_with_validity(&dir, "120s", &["--no-quarantine"]))
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let (a, b) = (
        patient(&addrs, "holder").await,
        patient(&addrs, "waiter").await,
    );

    for round in 0..3 {
        let held = a.rw_mutex(["handoff"]).unwrap().lock().await.unwrap();
        let mutex = b.rw_mutex(["handoff"]).unwrap();
        let waiter = tokio::spawn(async move {
            let guard = mutex.lock().await;
            (guard, Instant::now())
        });
        // The waiter queues on every server; it cannot get the lock yet.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "round {round}: granted while held");
        let released = Instant::now();
        held.unlock().await.unwrap();
        let (guard, got) = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .unwrap_or_else(|_| panic!("round {round}: no hand-off within 10 s: it was not pushed"))
            .unwrap();
        let guard = guard.unwrap();
        eprintln!(
            "round {round}: handed over {:?} after the release",
            got - released
        );
        guard.unlock().await.unwrap();
    }
}

/// Counts critical sections per client and checks that no two overlap.
#[derive(Default)]
struct Turns {
    inside: AtomicBool,
    violations: AtomicU64,
    per_client: Mutex<Vec<u64>>,
}

async fn contend(ds: Dsync, client: usize, turns: Arc<Turns>, stop: Arc<AtomicBool>) {
    let mutex = ds.rw_mutex(["contended"]).unwrap();
    // Bounded: at most 400 attempts, and the test stops it sooner.
    for _ in 0..400 {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(guard) = mutex.lock_timeout(Duration::from_secs(4)).await else {
            continue;
        };
        if turns.inside.swap(true, Ordering::SeqCst) {
            turns.violations.fetch_add(1, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        turns.inside.store(false, Ordering::SeqCst);
        turns.per_client.lock().unwrap()[client] += 1;
        let _ = guard.unlock().await;
    }
}

async fn client(addrs: &[SocketAddr], owner: &str, waiting: Waiting, version: u16) -> Dsync {
    let mut config = remote_config(TOKEN);
    config.protocol_version = version;
    Dsync::builder(lockers(addrs, &config).await)
        .owner(owner)
        .lease(lease())
        .waiting(waiting)
        .build()
        .expect("valid client settings")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn polling_and_push_clients_on_one_name_all_make_progress() {
    let dir = Scratch::new("net-push-mixed");
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    // The polling client speaks protocol version 2, as clients from before
    // push waiting do: the server keeps its turn between polls. (A
    // version-3 client in `Waiting::Poll` sends plain locks, which do not
    // jump the line, and gets no turn kept.)
    let clients = [
        ("push-1", Waiting::Push, 3),
        ("push-2", Waiting::Push, 3),
        ("poll-v2", Waiting::Poll, 2),
    ];
    let turns = Arc::new(Turns::default());
    *turns.per_client.lock().unwrap() = vec![0; clients.len()];
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (i, (owner, waiting, version)) in clients.iter().enumerate() {
        let ds = client(&addrs, owner, *waiting, *version).await;
        tasks.push(tokio::spawn(contend(ds, i, turns.clone(), stop.clone())));
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(15), task)
            .await
            .expect("a client stuck")
            .unwrap();
    }
    let counts = turns.per_client.lock().unwrap().clone();
    eprintln!("critical sections per client: {counts:?}");
    assert_eq!(turns.violations.load(Ordering::SeqCst), 0);
    for ((owner, _, _), count) in clients.iter().zip(&counts) {
        assert!(*count >= 5, "{owner} starved: {counts:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn guard_fencing_tokens_increase_across_holders_and_server_restarts() {
    let dir = Scratch::new("net-push-fence");
    let mut servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let ds = client(&addrs, "fencer", Waiting::Push, 3).await;
    let mutex = ds.rw_mutex(["fenced"]).unwrap();

    let mut tokens = Vec::new();
    for _ in 0..3 {
        let guard = mutex.lock().await.unwrap();
        let token = guard.fencing_token().await.unwrap();
        // Asked again, the same holder gets at least as much.
        assert!(guard.fencing_token().await.unwrap() >= token);
        tokens.push(token);
        guard.unlock().await.unwrap();
    }
    let reader = mutex.read().await.unwrap();
    tokens.push(reader.fencing_token().await.unwrap());
    reader.unlock().await.unwrap();

    // Every server dies and comes back on its port, without its table.
    for (server, addr) in servers.iter_mut().zip(&addrs) {
        server.kill();
        *server = Server::restart_at(&dir, *addr, &["--no-quarantine"]);
    }
    let guard = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match mutex.lock_timeout(Duration::from_secs(2)).await {
                Ok(guard) => return guard,
                Err(err) => eprintln!("after the restart: {err}"),
            }
        }
    })
    .await
    .expect("the lock again after the restarts");
    tokens.push(guard.fencing_token().await.unwrap());
    guard.unlock().await.unwrap();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens must increase from holder to holder: {tokens:?}"
    );
}
