//! Reproduces a past break: a refused proclamation touches its connection's charges as a kept one would (`undo_board` puts back the bytes, not the touch), so a lock of the connection that expired without a release counts for the idle close a validity after the refusal, not after its last grant.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::{LocalLocker, LockerConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::node::TOKEN;
use crate::wire::{
    authenticate_as, closed_within, frame, lock_request, proclaim_request, read_frame, response,
    OP_LOCK, REPLY_BOOL, VERSION_5,
};

const VALIDITY: Duration = Duration::from_secs(3);
const IDLE: Duration = Duration::from_millis(300);

async fn call(stream: &mut TcpStream, id: u64, payload: &[u8]) -> Vec<u8> {
    stream.write_all(&frame(payload)).await.expect("sent");
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
/// refreshed, then no more". The fix for review 90 made a refused lock put
/// back the touch its reservation made (`Ledger::undo`); a refused
/// proclamation still does not (`Ledger::undo_board` restores the bytes
/// only). A server over a locker of a 3 s validity, idle timeout 300 ms. A
/// raw client takes a lock on "mine" at `granted`; 2.5 s later it
/// proclaims on "theirs" under a uid that holds nothing, which is refused;
/// then it falls silent. Its lock expires unreleased at `granted` + 3 s:
/// from then it holds nothing, and it should be closed within a few idle
/// timeouts. It stays open until `granted` + 5.5 s, a validity after the
/// refused proclamation. Bounded: each wait 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_proclamation_does_not_keep_an_expired_lock_counted_for_the_idle_close() {
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

    let (mut client, _) = authenticate_as(&addr, TOKEN, VERSION_5).await.unwrap();
    let granted = tokio::time::Instant::now();
    assert_eq!(
        call(
            &mut client,
            1,
            &lock_request(1, OP_LOCK, "mine-uid", &["mine"])
        )
        .await,
        [REPLY_BOOL, 1]
    );
    tokio::time::sleep_until(granted + Duration::from_millis(2_500)).await;
    let refused = call(
        &mut client,
        2,
        &proclaim_request(2, "stranger-uid", &["theirs"], 1, 0, b"value"),
    )
    .await;
    assert_eq!(
        refused,
        [REPLY_BOOL, 0],
        "refused: the uid holds nothing on \"theirs\""
    );
    assert!(
        !locker.snapshot().iter().any(|e| e.uid == "stranger-uid"),
        "the refused proclamation keeps nothing"
    );
    // Silent from here. Its lock expires at `granted` + 3 s.
    let closed = closed_within(&mut client, Duration::from_millis(2_000)).await;
    serving.abort();
    assert!(
        closed.is_ok(),
        "{:?} after its only lock was granted (validity 3 s, idle timeout 300 ms), a silent \
         connection whose lock expired is still open: its refused proclamation 2.5 s after the \
         grant made the expired lock count longer",
        granted.elapsed()
    );
}
