//! A holder that stalls past its lease, and the fencing gate that refuses
//! its late write.
//!
//! Two clients share a "storage" that accepts a write only with a fencing
//! token at least as new as the newest it has seen. Client A takes the lock
//! and writes, then its whole process stalls (here: the thread is blocked,
//! as by a long GC pause or SIGSTOP) for longer than the lock's validity.
//! Meanwhile the lock servers expire A's lock, and client B takes it and
//! writes. When A wakes up it still thinks it may write, and tries. The
//! storage refuses: A's token is older than B's.
//!
//! Run with `cargo run --example fencing`. Takes about three seconds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::{Dsync, FencingGate, Lease, LocalLocker, LockerConfig, NetLocker, StaleToken};

/// The protected resource: a value and the gate in front of it.
#[derive(Default)]
struct Storage {
    gate: FencingGate,
    value: Mutex<Vec<String>>,
}

impl Storage {
    /// Admits the write only with a fresh enough token. A real store would
    /// check and write atomically (one transaction, one compare-and-set).
    fn write(&self, token: u64, entry: &str) -> Result<(), StaleToken> {
        let mut value = self.value.lock().unwrap_or_else(|e| e.into_inner());
        self.gate.admit(token)?;
        value.push(entry.to_owned());
        Ok(())
    }
}

fn client(
    nodes: &[Arc<LocalLocker>],
    lease: Lease,
    owner: &str,
) -> Result<Dsync, quorum_lock::Error> {
    let lockers = nodes
        .iter()
        .map(|n| n.clone() as Arc<dyn NetLocker>)
        .collect();
    Dsync::builder(lockers).owner(owner).lease(lease).build()
}

// One thread, so that blocking it stalls the whole client process,
// refreshes included.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let validity = Duration::from_secs(2);
    let config = LockerConfig {
        validity,
        ..LockerConfig::default()
    };
    let nodes: Vec<Arc<LocalLocker>> = (0..3)
        .map(|i| Arc::new(LocalLocker::with_config(format!("node-{i}"), config)))
        .collect();
    let lease = Lease {
        validity,
        refresh_interval: Duration::from_millis(200),
        safety_margin: Duration::from_millis(500),
    };
    let (a, b) = (
        client(&nodes, lease, "client-a")?,
        client(&nodes, lease, "client-b")?,
    );
    let storage = Storage::default();

    let guard_a = a.rw_mutex(["ledger"])?.lock().await?;
    let token_a = guard_a.fencing_token().await?;
    storage.write(token_a, "A: first write")?;
    println!("A holds the lock with token {token_a} and writes");

    println!("A stalls for 2.5 s; its lock expires on the lock servers");
    std::thread::sleep(validity + Duration::from_millis(500));

    let guard_b = b.rw_mutex(["ledger"])?.lock().await?;
    let token_b = guard_b.fencing_token().await?;
    storage.write(token_b, "B: write after A lost the lock")?;
    println!("B holds the lock with token {token_b} and writes");

    // A wakes up and, without checking is_lost(), writes.
    match storage.write(token_a, "A: late write") {
        Ok(()) => return Err("the late write of A was accepted".into()),
        Err(stale) => println!("A's late write is refused: {stale}"),
    }
    assert!(guard_a.is_lost(), "A's guard reports the loss when asked");
    guard_b.unlock().await?;
    drop(guard_a);
    println!(
        "storage: {:?}",
        storage.value.lock().unwrap_or_else(|e| e.into_inner())
    );
    Ok(())
}
