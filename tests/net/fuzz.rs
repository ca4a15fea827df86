//! Randomized frames against an in-process `LockServer`: random bytes,
//! random length prefixes, truncated and mutated valid frames, before and
//! after the handshake, over many connections at once. The server must
//! never panic, must close every such connection, and must keep serving a
//! well-behaved client throughout and afterwards.
//!
//! Set `QUORUM_LOCK_FUZZ_SEED=<n>` to replay a run; the seed is printed on
//! failure.

#![cfg(feature = "net")]

use crate::loopback;
use crate::wire;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig, MAX_FRAME};
use quorum_lock::{Dsync, LocalLocker, NetLocker};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use wire::{
    authenticate, closed_within, frame, hello, lock_request, request, OP_HEALTH, OP_LIST, OP_LOCK,
    OP_UNLOCK,
};

const TOKEN: &str = "fuzz-token";
const WORKERS: u64 = 8;
const CONNECTIONS_PER_WORKER: usize = 150;

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics on any thread, including the server's tasks, whose panics
/// tokio would otherwise swallow.
fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

/// Prints the seed if the test fails, however it fails.
struct SeedReport(u64);

impl Drop for SeedReport {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "net_fuzz failed with seed {0}; replay with QUORUM_LOCK_FUZZ_SEED={0}",
                self.0
            );
        }
    }
}

fn random_bytes(rng: &mut SmallRng, max: usize) -> Vec<u8> {
    let len = rng.random_range(0..=max);
    (0..len).map(|_| rng.random()).collect()
}

/// Valid requests to mutate or truncate.
fn valid_requests(rng: &mut SmallRng) -> Vec<Vec<u8>> {
    let id = rng.random_range(1..1_000_000);
    vec![
        request(id, OP_HEALTH),
        request(id, OP_LIST),
        lock_request(id, OP_LOCK, "fuzz-uid", &["fuzz/a", "fuzz/b"]),
        lock_request(id, OP_UNLOCK, "fuzz-uid", &["fuzz/a"]),
    ]
}

/// One misbehaving connection; its bytes are all sent, then the write side
/// is closed, so the server must hang up within the limit.
async fn bad_connection(addr: &str, rng: &mut SmallRng) -> Result<(), String> {
    let case = rng.random_range(0..7u8);
    let authenticated = case >= 3;
    let mut stream = if authenticated {
        let (stream, welcome) = authenticate(addr, TOKEN)
            .await
            .map_err(|e| format!("case {case}: {e}"))?;
        if welcome.first() != Some(&0) {
            return Err(format!("case {case}: handshake refused: {welcome:?}"));
        }
        stream
    } else {
        TcpStream::connect(addr)
            .await
            .map_err(|e| format!("case {case}: {e}"))?
    };
    let bytes = match case {
        // Noise from the first byte.
        0 => random_bytes(rng, 512),
        // A random length prefix (often far beyond MAX_FRAME), then noise.
        1 => {
            let len: u32 = match rng.random_range(0..3u8) {
                0 => rng.random(),
                1 => (MAX_FRAME as u32).wrapping_add(rng.random_range(0..16)),
                _ => rng.random_range(0..64),
            };
            [&len.to_be_bytes()[..], &random_bytes(rng, 64)].concat()
        }
        // A hello with a random version and token, possibly cut short.
        2 => {
            let mut bytes = frame(&hello(rng.random(), &random_bytes(rng, 40)));
            let keep = rng.random_range(0..=bytes.len());
            bytes.truncate(keep);
            bytes
        }
        // Well-framed random payloads after the handshake.
        3 => (0..rng.random_range(1..5))
            .flat_map(|_| frame(&random_bytes(rng, 256)))
            .collect(),
        // Valid requests with random bytes flipped.
        4 | 5 => {
            let mut out = Vec::new();
            for mut payload in valid_requests(rng) {
                for _ in 0..rng.random_range(1..4) {
                    let at = rng.random_range(0..payload.len());
                    payload[at] = rng.random();
                }
                out.extend(frame(&payload));
            }
            out
        }
        // A valid request frame cut short.
        _ => {
            let requests = valid_requests(rng);
            let mut bytes = frame(&requests[rng.random_range(0..requests.len())]);
            let keep = rng.random_range(1..bytes.len());
            bytes.truncate(keep);
            bytes
        }
    };
    // The server may hang up before reading everything: that is fine.
    let _ = stream.write_all(&bytes).await;
    let _ = stream.shutdown().await;
    closed_within(&mut stream, Duration::from_secs(5))
        .await
        .map(drop)
        .map_err(|e| format!("case {case} ({} bytes): {e}", bytes.len()))
}

async fn good_client(addr: &str) -> Dsync {
    let locker = RemoteLocker::connect(addr, RemoteConfig::new(TOKEN))
        .await
        .expect("good client connects");
    Dsync::new(vec![Arc::new(locker) as Arc<dyn NetLocker>]).expect("one locker")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_frames_never_break_the_server() {
    count_panics();
    let seed = std::env::var("QUORUM_LOCK_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    let _report = SeedReport(seed);
    eprintln!("net_fuzz seed {seed}");

    let mut config = ServerConfig::new(TOKEN);
    config.handshake_timeout = Duration::from_millis(500);
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).unwrap();
    let (addr, stop_server, serving) = loopback::serve_with_its_task(server).await;
    let addr = addr.to_string();

    let ds = good_client(&addr).await;
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let good = {
        let (ds, stop, rounds) = (ds.clone(), stop.clone(), rounds.clone());
        tokio::spawn(async move {
            let mutex = ds.rw_mutex(["good"]).unwrap();
            while !stop.load(Ordering::SeqCst) {
                let guard = mutex
                    .lock_timeout(Duration::from_secs(3))
                    .await
                    .expect("good client locks");
                guard.unlock().await.expect("good client unlocks");
                rounds.fetch_add(1, Ordering::SeqCst);
            }
        })
    };

    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let addr = addr.clone();
            tokio::spawn(async move {
                let mut rng =
                    SmallRng::seed_from_u64(seed ^ worker.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                for i in 0..CONNECTIONS_PER_WORKER {
                    if let Err(e) = bad_connection(&addr, &mut rng).await {
                        return Err(format!("worker {worker}, connection {i}: {e}"));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        let result = tokio::time::timeout(Duration::from_secs(60), worker).await;
        result
            .expect("a fuzz worker got stuck")
            .expect("a fuzz worker panicked")
            .unwrap();
    }

    stop.store(true, Ordering::SeqCst);
    tokio::time::timeout(Duration::from_secs(10), good)
        .await
        .expect("good client stuck")
        .unwrap();
    assert!(
        rounds.load(Ordering::SeqCst) > 0,
        "the good client made no progress"
    );
    // Still serving a fresh client after all that.
    let fresh = good_client(&addr).await;
    let guard = fresh
        .rw_mutex(["after"])
        .unwrap()
        .lock_timeout(Duration::from_secs(3))
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    assert!(!serving.is_finished(), "the server stopped");
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "something panicked (seed {seed})"
    );
    let _ = stop_server.send(());
    tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("server did not stop")
        .unwrap();
    eprintln!(
        "net_fuzz: {} connections, {} good rounds",
        WORKERS as usize * CONNECTIONS_PER_WORKER,
        rounds.load(Ordering::SeqCst)
    );
}
