//! After the server closed an idle connection, the next call reopens it
//! and calls made meanwhile wait for that reopen rather than fail
//! (docs/lock-servers.md: the next call "opens a connection first", and
//! `is_online()` stays true meanwhile). The call that reopens may be
//! dropped while it does (a caller's own timeout, a `select!`): a call
//! that was waiting for it must still get a connection (the reopen goes
//! on without its caller), not fail as "not connected" with the server
//! reachable.
//!
//! The server answers the reopen's handshake after a second (the connect
//! timeout is 2 s), and every later connection at once.
//!
//! Reproduces a past break: the waiting call failed "not connected" with the server reachable.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::sync::oneshot;

use crate::stand_in::{self, args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_a_reopen_whose_caller_was_dropped_connects_itself() {
    let (listener, addr) = stand_in::bind().await;
    let (slow_hello_tx, slow_hello_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // The reopen: its handshake is answered only after a second.
        let mut slow = stand_in::accept_hello(&listener).await.expect("hello");
        let _ = slow_hello_tx.send(());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if stand_in::welcome(&mut slow).await {
                stand_in::grant_all(slow).await;
            }
        });
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    let mut config = stand_in::config();
    config.connect_timeout = Duration::from_secs(2);
    config.call_timeout = Duration::from_secs(5);
    let locker = RemoteLocker::connect(addr, config).await.expect("connect");
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the idle close"
    );
    assert!(locker.is_online(), "an idle close leaves the locker online");

    // The reopening call gives up after 300 ms, while the server is slow
    // with its handshake; the other call was made while it reopened.
    let first = args("a");
    let reopening = tokio::time::timeout(Duration::from_millis(300), locker.lock(&first));
    let waiting = async {
        let _ = slow_hello_rx.await;
        locker.lock(&args("b")).await
    };
    let (dropped, waited) = tokio::join!(reopening, waiting);
    server.abort();
    assert!(
        dropped.is_err(),
        "the first call was meant to time out: {dropped:?}"
    );
    assert_eq!(
        waited,
        Ok(true),
        "a call that waited for a reopen whose caller was dropped failed instead of \
         connecting (the server answers every new connection at once)"
    );
}
