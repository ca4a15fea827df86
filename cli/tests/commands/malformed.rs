//! A real server process faced with garbage, oversized frames, undecodable
//! payloads and handshakes that never finish closes those connections and
//! keeps serving a well-behaved client at the same time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::wire::{self, authenticate, closed_within, frame, hello, request, OP_HEALTH};
use crate::support::{dsync, Scratch, Server, TOKEN};
use quorum_lock::net::MAX_FRAME;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// Sends `bytes` on a fresh connection and expects the server to hang up.
async fn rejected(addr: &str, bytes: &[u8], what: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    closed_within(&mut stream, CLOSE_LIMIT)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Authenticates, sends `bytes`, and expects the server to hang up.
async fn rejected_after_handshake(addr: &str, bytes: &[u8], what: &str) -> Vec<u8> {
    let (mut stream, welcome) = authenticate(addr, TOKEN).await.unwrap();
    assert_eq!(welcome[..3], [0, 2, 0], "{what}: not accepted as a client");
    stream.write_all(bytes).await.unwrap();
    closed_within(&mut stream, CLOSE_LIMIT)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn malformed_connections_are_closed_while_good_clients_are_served() {
    let dir = Scratch::new("net-malformed");
    let server = Server::start(&dir, &["--no-quarantine", "--handshake-timeout", "1s"]);
    let addr = server.addr.to_string();

    // The hand-made encoding is right: a raw client gets a health reply.
    let (mut raw, _) = authenticate(&addr, TOKEN).await.unwrap();
    raw.write_all(&frame(&request(9, OP_HEALTH))).await.unwrap();
    let reply = wire::read_frame(&mut raw, 64).await.unwrap();
    assert_eq!(
        &reply[..3],
        [9, 2, 0],
        "Response {{ id: 9, Health {{ quarantined: false, .. }} }}"
    );

    let ds = dsync(&[server.addr], TOKEN, "good-client").await;
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let good = {
        let (ds, stop, done) = (ds.clone(), stop.clone(), done.clone());
        tokio::spawn(async move {
            let mutex = ds.rw_mutex(["good"]).unwrap();
            while !stop.load(Ordering::SeqCst) {
                let guard = mutex
                    .lock_timeout(Duration::from_secs(3))
                    .await
                    .expect("good client locks");
                guard.unlock().await.expect("good client unlocks");
                done.fetch_add(1, Ordering::SeqCst);
            }
        })
    };

    // Handshakes that never complete: silent, or half a header. They are
    // all open at once and must not slow the good client.
    let mut idle = Vec::new();
    for i in 0..20 {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        if i % 2 == 1 {
            stream.write_all(&[0, 0]).await.unwrap();
        }
        idle.push(stream);
    }
    let before = done.load(Ordering::SeqCst);

    let http = rejected(&addr, b"GET / HTTP/1.1\r\nHost: lock\r\n\r\n", "garbage").await;
    assert_eq!(
        http.get(4),
        Some(&1),
        "expected Welcome::Rejected, got {http:?}"
    );
    let huge = ((MAX_FRAME + 1) as u32).to_be_bytes();
    rejected(
        &addr,
        &[&huge[..], b"more"].concat(),
        "oversized frame before the handshake",
    )
    .await;
    let undecodable = frame(&[0xff, 0xff, 0xff, 0xff, 0xff]);
    let reply = rejected(&addr, &undecodable, "undecodable hello").await;
    assert!(
        String::from_utf8_lossy(&reply).contains("malformed"),
        "{reply:?}"
    );
    let future = frame(&hello(99, TOKEN.as_bytes()));
    let reply = rejected(&addr, &future, "unknown protocol version").await;
    assert!(
        String::from_utf8_lossy(&reply).contains("protocol version 99"),
        "{reply:?}"
    );

    rejected_after_handshake(
        &addr,
        &u32::MAX.to_be_bytes(),
        "oversized frame after the handshake",
    )
    .await;
    let reply =
        rejected_after_handshake(&addr, &frame(&[0x05, 0xee, 0xff]), "undecodable request").await;
    assert_eq!(
        reply.get(4..6),
        Some(&[0, 3][..]),
        "expected Response {{ id: 0, Error }}: {reply:?}"
    );
    let mut truncated = frame(&request(3, OP_HEALTH));
    truncated.truncate(5);
    let (mut stream, _) = authenticate(&addr, TOKEN).await.unwrap();
    stream.write_all(&truncated).await.unwrap();
    stream.shutdown().await.unwrap();
    closed_within(&mut stream, CLOSE_LIMIT)
        .await
        .expect("truncated frame then EOF");

    for (i, stream) in idle.iter_mut().enumerate() {
        let reply = closed_within(stream, CLOSE_LIMIT)
            .await
            .unwrap_or_else(|e| panic!("idle {i}: {e}"));
        // The even ones sent nothing, the odd ones half a header.
        let said = if i % 2 == 0 {
            "no handshake in time"
        } else {
            "only part of a handshake in time"
        };
        assert!(
            String::from_utf8_lossy(&reply).contains(said),
            "idle {i}: {reply:?}"
        );
    }

    let during = done.load(Ordering::SeqCst) - before;
    assert!(
        during >= 10,
        "the good client made only {during} rounds meanwhile"
    );
    stop.store(true, Ordering::SeqCst);
    tokio::time::timeout(Duration::from_secs(10), good)
        .await
        .expect("good client stuck")
        .unwrap();
    let guard = ds
        .rw_mutex(["good"])
        .unwrap()
        .lock_timeout(Duration::from_secs(3))
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    assert!(server.log_text().contains("could not be decoded"));
    assert!(!server.log_text().contains("panicked"));
}
