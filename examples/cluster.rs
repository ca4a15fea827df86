//! A lock-server cluster and its clients in one process, over real TCP on
//! 127.0.0.1.
//!
//! Run with `cargo run --release --features net --example cluster`, or add
//! `-- --servers 3 --clients 8 --seconds 5`.
//!
//! Starts the servers as brand-new nodes (no quarantine, like
//! `quorum-lock server --no-quarantine`), gives each client its own `Dsync`
//! with one `RemoteLocker` per server (`connect_all`), and lets the clients
//! contend for one lock for a few seconds. Under the lock each does a racy
//! read-pause-write on a shared counter, so any overlap would lose an
//! update. Prints locks per client and the longest wait, then shuts the
//! servers down.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::{connect_all, LockServer, RemoteConfig, ServerConfig};
use quorum_lock::{Dsync, LocalLocker};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TOKEN: &str = "example-token";

struct Settings {
    servers: usize,
    clients: usize,
    seconds: u64,
}

/// `--servers N --clients N --seconds N`, each optional.
fn settings() -> Result<Settings, BoxError> {
    let mut s = Settings {
        servers: 5,
        clients: 4,
        seconds: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value: u64 = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .parse()
            .map_err(|e| format!("{flag}: {e}"))?;
        match flag.as_str() {
            "--servers" => s.servers = value as usize,
            "--clients" => s.clients = value as usize,
            "--seconds" => s.seconds = value,
            other => {
                return Err(
                    format!("unknown flag {other}; use --servers, --clients, --seconds").into(),
                )
            }
        }
    }
    if s.servers == 0 || s.clients == 0 || s.seconds == 0 || s.seconds > 600 {
        return Err("servers and clients must be positive, seconds in 1..=600".into());
    }
    Ok(s)
}

/// What one client did.
#[derive(Default)]
struct Report {
    locks: u64,
    max_wait: Duration,
    total_wait: Duration,
}

async fn client(
    ds: Dsync,
    counter: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Result<Report, quorum_lock::Error> {
    let mutex = ds.rw_mutex(["shared-counter"])?;
    let mut report = Report::default();
    while !stop.load(Ordering::Relaxed) {
        let asked = Instant::now();
        let guard = mutex.lock_timeout(Duration::from_secs(10)).await?;
        let waited = asked.elapsed();
        report.max_wait = report.max_wait.max(waited);
        report.total_wait += waited;
        // Racy on purpose: only the lock keeps increments from being lost.
        let value = counter.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_micros(200)).await;
        counter.store(value + 1, Ordering::SeqCst);
        report.locks += 1;
        guard.unlock().await?;
        // Some work outside the lock; without it the last holder, whose
        // retry needs no backoff, would win nearly every round.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // What a client about to go away does: wait for its releases still in
    // the background (failed rounds' partial grants), bounded.
    ds.finish_releases(Duration::from_secs(2)).await?;
    Ok(report)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let s = settings()?;
    let mut addrs = Vec::new();
    let mut servers: Vec<(oneshot::Sender<()>, JoinHandle<()>)> = Vec::new();
    for i in 0..s.servers {
        let locker = Arc::new(LocalLocker::named(format!("server-{i}")));
        let server = LockServer::new(locker, ServerConfig::new(TOKEN))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let (addr, serve) = server
            .bind("127.0.0.1:0".parse()?, async {
                let _ = stopped.await;
            })
            .await?;
        addrs.push(addr.to_string());
        servers.push((stop, tokio::spawn(serve)));
    }
    println!("{} lock servers on {}", s.servers, addrs.join(", "));

    let counter = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..s.clients {
        let lockers = connect_all(&addrs, RemoteConfig::new(TOKEN)).await?;
        let ds = Dsync::builder(lockers)
            .owner(format!("client-{c}"))
            .build()?;
        tasks.push(tokio::spawn(client(ds, counter.clone(), stop.clone())));
    }
    println!(
        "{} clients contend for one lock for {} s (write quorum {} of {})",
        s.clients,
        s.seconds,
        quorum_lock::quorum::write_quorum(s.servers),
        s.servers
    );
    tokio::time::sleep(Duration::from_secs(s.seconds)).await;
    stop.store(true, Ordering::Relaxed);

    let mut total = 0;
    println!(
        "{:<10} {:>7} {:>12} {:>12}",
        "client", "locks", "mean wait", "max wait"
    );
    for (c, task) in tasks.into_iter().enumerate() {
        let r = task.await??;
        let mean = r
            .total_wait
            .checked_div(r.locks.max(1) as u32)
            .unwrap_or_default();
        println!(
            "client-{c:<3} {:>7} {:>12.1?} {:>12.1?}",
            r.locks, mean, r.max_wait
        );
        total += r.locks;
    }
    // Waiting is by polling with jittered backoff, not a queue, so the
    // split between clients is uneven; the sum is what must add up.
    let lost = total - counter.load(Ordering::SeqCst);
    println!(
        "total locks {total}, counter {}, lost updates {lost}",
        counter.load(Ordering::SeqCst)
    );

    for (stop, serving) in servers {
        let _ = stop.send(());
        serving.await?;
    }
    println!("servers shut down");
    if lost != 0 {
        return Err(format!("{lost} lost updates: mutual exclusion failed").into());
    }
    Ok(())
}
