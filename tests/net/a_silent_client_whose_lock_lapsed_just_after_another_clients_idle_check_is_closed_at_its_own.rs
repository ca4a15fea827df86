//! Reproduces a past break: a silent client whose only lock lapsed a moment after another idle connection's check pruned the server's lapsed charges is kept open for a whole further idle timeout: its own check finds the prune not yet due again and counts its lapsed charge as held.
//!
//! docs/lock-servers.md: "A connection that sends nothing for
//! `idle_timeout` while it holds nothing on the server (...; a lock that
//! expired without a release counts for the validity after it was last
//! granted or refreshed, then no more) is closed, which frees its slot."
//! `Ledger::holds` drops a connection's lapsed charges only through the
//! server's rate-limited prune (at most one per validity/60); a check
//! within that time after another connection's prune, whose own charges
//! lapsed after it, reads them as held, and the connection's idle timer
//! is set a whole idle timeout further.
//!
//! A server with a validity of 12 s (so a prune per 200 ms at most) and an
//! idle timeout 60 ms longer. Client A locks, and client B 130 ms later;
//! both fall silent. A's idle check, 12.06 s after its lock, finds its
//! charge lapsed and prunes (B's, 70 ms from lapsing, stays); B's check,
//! 12.06 s after its lock, comes 130 ms after that prune: B's lock lapsed
//! 60 ms before, yet B stays open until its next check, 12 s later.
//! Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{LockServer, ServerConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::lockers;
use crate::loopback;
use crate::node::TOKEN;
use crate::wire::{
    authenticate, closed_within, frame, lock_request, read_frame, response, OP_LOCK, REPLY_BOOL,
};

const VALIDITY: Duration = Duration::from_secs(12);
const IDLE: Duration = Duration::from_millis(12_060);
/// How long after A's lock B locks.
const GAP: Duration = Duration::from_millis(130);

/// Authenticates and takes one lock on `name` as `uid`; returns the
/// stream and when the grant came back.
async fn lock_once(addr: &str, uid: &str, name: &str) -> (TcpStream, Instant) {
    let (mut stream, _) = authenticate(addr, TOKEN).await.expect("authenticates");
    stream
        .write_all(&frame(&lock_request(1, OP_LOCK, uid, &[name])))
        .await
        .expect("request sent");
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut stream, 64 * 1024))
        .await
        .expect("answered in time")
        .expect("a reply");
    assert_eq!(
        response(&reply),
        (1, &[REPLY_BOOL, 1][..]),
        "the lock is granted"
    );
    (stream, Instant::now())
}

#[tokio::test]
async fn a_silent_client_whose_lock_lapsed_just_after_another_clients_idle_check_is_closed_at_its_own(
) {
    let locker = lockers::without_quarantine("node", VALIDITY);
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let (addr, serving) = loopback::serve_while_the_runtime_runs(server).await;
    let addr = addr.to_string();

    let (mut a, a_locked) = lock_once(&addr, "client-a", "a").await;
    tokio::time::sleep_until(a_locked + GAP).await;
    let (mut b, b_locked) = lock_once(&addr, "client-b", "b").await;
    eprintln!(
        "B locked {:?} after A",
        b_locked.saturating_duration_since(a_locked)
    );

    // A's idle check finds its charge lapsed, and prunes: A is closed.
    let a_closed = closed_within(&mut a, IDLE + Duration::from_secs(2)).await;
    eprintln!("A closed after {:?}: {a_closed:?}", a_locked.elapsed());
    assert!(
        a_closed.is_ok(),
        "control: A, silent with its lock lapsed, is closed at its idle check"
    );
    // B has been silent for the idle timeout, its lock lapsed: closed at
    // its own idle check, not one idle timeout later.
    let b_closed = closed_within(
        &mut b,
        (b_locked + IDLE + Duration::from_secs(2)) - Instant::now(),
    )
    .await;
    let after = b_locked.elapsed();
    serving.abort();
    assert!(
        b_closed.is_ok(),
        "B, silent for the idle timeout ({IDLE:?}) with its only lock lapsed ({VALIDITY:?} \
         validity), is still open {after:?} after its lock: its idle check came within \
         validity/60 of A's prune (B locked {GAP:?} after A, so its charge had not lapsed \
         yet at that prune), so its lapsed charge counted as held ({b_closed:?})"
    );
}
