//! docs/lock-servers.md, "Connection slots": a connection silent for
//! `idle_timeout` that holds nothing is closed, and "a lock that expired
//! without a release counts for the validity after it was last granted or
//! refreshed, then no more". Each scene: a server over a locker of a 3 s
//! validity, idle timeout 300 ms; a raw client takes a lock on "mine" at
//! `granted`, makes a request that is refused 2.5 s later, then falls
//! silent. Its lock expires unreleased at `granted` + 3 s: from then it
//! holds nothing, and it should be closed within a few idle timeouts, not
//! a validity after the refusal (`granted` + 5.5 s). Bounded: each wait
//! 5 s.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::lockers;
use crate::node::{start_over, Node, TOKEN};
use crate::wire::{
    authenticate_as, call, closed_within, lock_request, proclaim_request, OP_LOCK, REPLY_BOOL,
    VERSION_3, VERSION_5,
};

const VALIDITY: Duration = Duration::from_secs(3);
const IDLE: Duration = Duration::from_millis(300);

/// A lock server of the scenes' validity and idle timeout.
async fn server() -> Node {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let locker = lockers::config_without_quarantine(VALIDITY);
    start_over(locker, config).await
}

/// Takes the lock on "mine", then 2.5 s later runs `refused`, which must
/// be refused; then, silent, the connection must close once the lock has
/// expired.
async fn scene(client: &mut TcpStream, what: &str, refused: impl AsyncFnOnce(&mut TcpStream)) {
    let granted = Instant::now();
    assert_eq!(
        call(client, 1, &lock_request(1, OP_LOCK, "mine-uid", &["mine"])).await,
        [REPLY_BOOL, 1]
    );
    tokio::time::sleep_until(granted + Duration::from_millis(2_500)).await;
    refused(client).await;
    // Silent from here. Its lock expires at `granted` + 3 s.
    let closed = closed_within(client, Duration::from_millis(2_000)).await;
    assert!(
        closed.is_ok(),
        "{:?} after its only lock was granted (validity 3 s, idle timeout 300 ms), a silent \
         connection whose lock expired is still open: its refused {what} 2.5 s after the grant \
         made the expired lock count longer",
        granted.elapsed()
    );
}

/// Reproduces a past break: a refused lock request touches its connection's charges as a grant would, so a lock of the connection that expired without a release counts for the idle close a validity after the refusal, not after its last grant.
///
/// The refused request's reservation stamped the connection's usage as
/// touched (`Ledger::reserve` sets `Usage::touched`), and `undo` left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_lock_does_not_keep_an_expired_lock_counted_for_the_idle_close() {
    let node = server().await;
    // Another client holds "theirs", refreshing it.
    let (mut other, _) = authenticate_as(&node.addr, TOKEN, VERSION_3).await.unwrap();
    let theirs = |id| lock_request(id, OP_LOCK, "theirs-uid", &["theirs"]);
    assert_eq!(call(&mut other, 1, &theirs(1)).await, [REPLY_BOOL, 1]);
    let refreshing = tokio::spawn(async move {
        for id in 2..100u64 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = call(&mut other, id, &theirs(id)).await;
        }
    });
    let (mut client, _) = authenticate_as(&node.addr, TOKEN, VERSION_3).await.unwrap();
    scene(&mut client, "request", async |client: &mut TcpStream| {
        let wants = lock_request(2, OP_LOCK, "wants-theirs", &["theirs"]);
        assert_eq!(
            call(client, 2, &wants).await,
            [REPLY_BOOL, 0],
            "refused: another client holds it"
        );
    })
    .await;
    refreshing.abort();
}

/// Reproduces a past break: a refused proclamation touches its connection's charges as a kept one would (`undo_board` put back the bytes, not the touch), so a lock of the connection that expired without a release counts for the idle close a validity after the refusal, not after its last grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_proclamation_does_not_keep_an_expired_lock_counted_for_the_idle_close() {
    let node = server().await;
    let locker = &node.locker;
    let (mut client, _) = authenticate_as(&node.addr, TOKEN, VERSION_5).await.unwrap();
    scene(
        &mut client,
        "proclamation",
        async |client: &mut TcpStream| {
            let proclaim = proclaim_request(2, "stranger-uid", &["theirs"], 1, 0, b"value");
            assert_eq!(
                call(client, 2, &proclaim).await,
                [REPLY_BOOL, 0],
                "refused: the uid holds nothing on \"theirs\""
            );
            assert!(
                !locker.snapshot().iter().any(|e| e.uid == "stranger-uid"),
                "the refused proclamation keeps nothing"
            );
        },
    )
    .await;
}
