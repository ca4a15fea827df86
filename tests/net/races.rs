//! Races between connections that carry the same uid:
//! a lock and the unlock of the same uid, sent at the same moment on two
//! connections, must never leave an entry behind. Before the fix the
//! released-uid check was not atomic with the grant, and the tombstone was
//! recorded after the unlock, so the lock could slip in between.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::loopback;
use crate::wire::{authenticate, frame, lock_request, read_frame, OP_LOCK, OP_UNLOCK};
use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::LocalLocker;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const TOKEN: &str = "client-secret";

/// Sends `frames` and reads `frames.len()` replies, within 10 s.
async fn exchange(mut stream: TcpStream, frames: Vec<u8>, replies: usize) -> TcpStream {
    stream.write_all(&frames).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        for _ in 0..replies {
            read_frame(&mut stream, 4096).await.unwrap();
        }
    })
    .await
    .expect("replies within 10 s");
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_racing_its_own_unlock_on_another_connection_leaves_nothing() {
    let locker = Arc::new(LocalLocker::new());
    let server = LockServer::new(locker.clone(), ServerConfig::new(TOKEN)).unwrap();
    let (addr, serving) = loopback::serve_while_the_runtime_runs(server).await;
    let addr = addr.to_string();
    let (mut a, _) = authenticate(&addr, TOKEN).await.unwrap();
    let (mut b, _) = authenticate(&addr, TOKEN).await.unwrap();

    // Bounded in count and time: at most 3000 rounds of 50 pairs, 20 s.
    const PAIRS: usize = 50;
    let started = Instant::now();
    let mut leaked = Vec::new();
    for round in 0..3000usize {
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
        let mut locks = Vec::new();
        let mut unlocks = Vec::new();
        for i in 0..PAIRS {
            let uid = format!("race-{round}-{i}");
            let name = format!("r-{round}-{i}");
            let id = (round * PAIRS + i + 1) as u64;
            locks.extend(frame(&lock_request(id, OP_LOCK, &uid, &[&name])));
            unlocks.extend(frame(&lock_request(id, OP_UNLOCK, &uid, &[&name])));
        }
        let (sa, sb) = tokio::join!(
            tokio::spawn(exchange(a, locks, PAIRS)),
            tokio::spawn(exchange(b, unlocks, PAIRS))
        );
        (a, b) = (sa.unwrap(), sb.unwrap());
        leaked = locker.snapshot();
        if !leaked.is_empty() {
            break;
        }
    }
    assert!(
        leaked.is_empty(),
        "a lock granted after its own unlock was left behind: {:?}",
        leaked.iter().map(|e| &e.uid).collect::<Vec<_>>()
    );
    serving.abort();
}
