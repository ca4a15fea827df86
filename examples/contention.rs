//! Several tasks contend for locks on an in-process five-node cluster.
//!
//! Run with `cargo run --release --example contention`.
//!
//! 1. Eight writers increment a shared balance with a read, a pause and a
//!    write. Without the lock, updates would be lost; with it, none are.
//! 2. Readers and writers share a "catalog" resource; the example counts how
//!    often readers overlapped each other and checks that a writer never
//!    overlapped anyone.
//! 3. `try_lock` on a held name fails at once with `WouldBlock`.
//!
//! At the end every node's lock table must be empty.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::{Dsync, Error, LocalLocker, NetLocker};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const WRITERS: usize = 8;
const INCREMENTS: usize = 200;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let nodes: Vec<Arc<LocalLocker>> = (1..=5)
        .map(|i| Arc::new(LocalLocker::named(format!("node-{i}"))))
        .collect();
    let ds = Dsync::new(
        nodes
            .iter()
            .map(|n| n.clone() as Arc<dyn NetLocker>)
            .collect(),
    )?;
    println!(
        "cluster: {} in-process nodes, write quorum {}, read quorum {}",
        nodes.len(),
        ds.write_quorum(),
        ds.read_quorum()
    );

    let lost = lost_update_demo(&ds).await?;
    let violations = readers_and_writers_demo(&ds).await?;

    let held = ds.rw_mutex(["report"])?.lock().await?;
    match ds.rw_mutex(["report"])?.try_lock().await {
        Err(Error::WouldBlock) => println!("try_lock on a held name: WouldBlock, as expected"),
        other => println!("try_lock on a held name: unexpected {other:?}"),
    }
    held.unlock().await?;

    // Failed rounds release their partial grants in the background: wait
    // for those releases, as a process about to exit should.
    ds.finish_releases(Duration::from_secs(2)).await?;
    let leftovers: usize = nodes.iter().map(|n| n.snapshot().len()).sum();
    println!("entries left on the nodes after everyone finished: {leftovers}");
    if lost != 0 || violations != 0 || leftovers != 0 {
        return Err(format!(
            "{lost} lost updates, {violations} violations, {leftovers} leaked entries"
        )
        .into());
    }
    Ok(())
}

/// Writers do a deliberately racy read-pause-write under the lock.
async fn lost_update_demo(ds: &Dsync) -> Result<i64, BoxError> {
    let balance = Arc::new(AtomicI64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (mutex, balance) = (ds.rw_mutex(["accounts/alice"]), balance.clone());
            tokio::spawn(async move {
                let mutex = mutex?;
                let mut waited = Duration::ZERO;
                for _ in 0..INCREMENTS {
                    let asked = Instant::now();
                    let guard = mutex.lock().await?;
                    waited = waited.max(asked.elapsed());
                    let seen = balance.load(Ordering::SeqCst);
                    tokio::task::yield_now().await; // let the others run: they must not get in
                    balance.store(seen + 1, Ordering::SeqCst);
                    guard.unlock().await?;
                }
                Ok::<_, Error>((w, waited))
            })
        })
        .collect();
    for task in tasks {
        let (w, waited) = task.await??;
        println!("  writer {w}: {INCREMENTS} increments, longest wait {waited:?}");
    }
    let expected = (WRITERS * INCREMENTS) as i64;
    let got = balance.load(Ordering::SeqCst);
    println!(
        "lost updates: {} (balance {got} of {expected}) in {:?}",
        expected - got,
        started.elapsed()
    );
    Ok(expected - got)
}

/// Readers overlap each other; writers overlap nobody.
async fn readers_and_writers_demo(ds: &Dsync) -> Result<usize, BoxError> {
    let readers_inside = Arc::new(AtomicUsize::new(0));
    let writers_inside = Arc::new(AtomicUsize::new(0));
    let max_readers = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..12)
        .map(|t| {
            let mutex = ds.rw_mutex(["catalog"]);
            let (readers, writers) = (readers_inside.clone(), writers_inside.clone());
            let (max_readers, violations) = (max_readers.clone(), violations.clone());
            tokio::spawn(async move {
                let mutex = mutex?;
                for round in 0..50 {
                    if (t + round) % 4 == 0 {
                        let guard = mutex.lock().await?;
                        if writers.fetch_add(1, Ordering::SeqCst) != 0
                            || readers.load(Ordering::SeqCst) != 0
                        {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        tokio::time::sleep(Duration::from_micros(200)).await;
                        writers.fetch_sub(1, Ordering::SeqCst);
                        guard.unlock().await?;
                    } else {
                        let guard = mutex.read().await?;
                        let now = readers.fetch_add(1, Ordering::SeqCst) + 1;
                        max_readers.fetch_max(now, Ordering::SeqCst);
                        if writers.load(Ordering::SeqCst) != 0 {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        tokio::time::sleep(Duration::from_micros(200)).await;
                        readers.fetch_sub(1, Ordering::SeqCst);
                        guard.unlock().await?;
                    }
                }
                Ok::<_, Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    println!(
        "readers/writers: up to {} readers at once, {} exclusion violations",
        max_readers.load(Ordering::SeqCst),
        violations.load(Ordering::SeqCst)
    );
    Ok(violations.load(Ordering::SeqCst))
}
