//! Reproduces a past break: a refused lock request touches its connection's charges as a grant would, so a lock of the connection that expired without a release counts for the idle close a validity after the refusal, not after its last grant.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::{LocalLocker, LockerConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::node::TOKEN;
use crate::wire::{
    authenticate_as, closed_within, frame, lock_request, read_frame, response, OP_LOCK, REPLY_BOOL,
    VERSION_3,
};

const VALIDITY: Duration = Duration::from_secs(3);
const IDLE: Duration = Duration::from_millis(300);

async fn lock(stream: &mut TcpStream, id: u64, uid: &str, name: &str) -> Vec<u8> {
    stream
        .write_all(&frame(&lock_request(id, OP_LOCK, uid, &[name])))
        .await
        .expect("request sent");
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(stream, 64 * 1024))
        .await
        .expect("answered in time")
        .expect("a reply");
    let (got, body) = response(&reply);
    assert_eq!(got, id);
    body.to_vec()
}

/// docs/lock-servers.md, "Connection slots": a connection silent for
/// `idle_timeout` that holds nothing is closed, and "a lock that expired
/// without a release counts for the validity after it was last granted or
/// refreshed, then no more". A server over a locker of a 3 s validity,
/// idle timeout 300 ms. A raw client takes a lock on "mine" at `granted`;
/// 2.5 s later it asks a lock on "theirs", which another client holds, and
/// is refused; then it falls silent. Its lock expires unreleased at
/// `granted` + 3 s: from then it holds nothing, and it should be closed
/// within a few idle timeouts. The break: the refused request's
/// reservation stamped the connection's usage as touched (`Ledger::reserve`
/// sets `Usage::touched`, and `undo` leaves it), so the idle close counts
/// the expired lock until a validity after the refusal, `granted` + 5.5 s.
/// Bounded: each wait 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_lock_does_not_keep_an_expired_lock_counted_for_the_idle_close() {
    let locker = Arc::new(LocalLocker::with_config(
        "node",
        LockerConfig {
            validity: VALIDITY,
            quarantine: Duration::ZERO,
        },
    ));
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let (addr, serve) = server
        .bind(
            "127.0.0.1:0".parse().expect("an address"),
            std::future::pending(),
        )
        .await
        .expect("bind loopback");
    let serving = tokio::spawn(serve);
    let addr = addr.to_string();

    // Another client holds "theirs", refreshing it.
    let (mut other, _) = authenticate_as(&addr, TOKEN, VERSION_3).await.unwrap();
    assert_eq!(
        lock(&mut other, 1, "theirs-uid", "theirs").await,
        [REPLY_BOOL, 1]
    );
    let refreshing = tokio::spawn(async move {
        for id in 2..100u64 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = lock(&mut other, id, "theirs-uid", "theirs").await;
        }
    });

    let (mut client, _) = authenticate_as(&addr, TOKEN, VERSION_3).await.unwrap();
    let granted = tokio::time::Instant::now();
    assert_eq!(
        lock(&mut client, 1, "mine-uid", "mine").await,
        [REPLY_BOOL, 1]
    );
    tokio::time::sleep_until(granted + Duration::from_millis(2_500)).await;
    assert_eq!(
        lock(&mut client, 2, "wants-theirs", "theirs").await,
        [REPLY_BOOL, 0],
        "refused: another client holds it"
    );
    // Silent from here. Its lock expires at `granted` + 3 s.
    let closed = closed_within(&mut client, Duration::from_millis(2_000)).await;
    refreshing.abort();
    serving.abort();
    assert!(
        closed.is_ok(),
        "{:?} after its only lock was granted (validity 3 s, idle timeout 300 ms), a silent \
         connection whose lock expired is still open: its refused request 2.5 s after the grant \
         made the expired lock count longer",
        granted.elapsed()
    );
}
