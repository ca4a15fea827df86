//! "A `RemoteLocker` whose connection the server closed [for idleness],
//! with no wait or watch registered, does not reconnect at once: its next
//! call opens a connection first", and "The reopen runs as a task of its
//! own, so a caller that gives up (its own timeout, a `select!`) does not
//! stop it" (docs/lock-servers.md, `idle_timeout`). A server may close
//! idle connections after any `idle_timeout` above zero (here 300 ms, as
//! `--idle-timeout 300ms` would).
//!
//! So: the server closes the first connection for idleness; a call
//! reopens and its caller gives up at once; the reopened connection,
//! which nobody used, is closed for idleness in turn. With no call made
//! after that, the locker must open no connection, and stays online.
//!
//! The client counts the second close of an unused connection within
//! `SETTLED` (10 s) as a server that closes every connection as it
//! welcomes it (`Ended::QuietlyUnused` with `short_lived` above 0): it
//! reconnects in the background, the server closes that unused
//! connection for idleness too, and so on for as long as the locker
//! lives, with no call made; between connections the locker is offline
//! and calls fail at once with the server up.
//!
//! Reproduces a past break: a second unused idle close started a background reconnect loop and left the locker offline.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;

use crate::stand_in;

const IDLE: Duration = Duration::from_millis(300);

async fn welcome_then_idle_close(mut stream: tokio::net::TcpStream) {
    if stand_in::welcome(&mut stream).await {
        tokio::time::sleep(IDLE).await;
        stand_in::close_as_idle(stream).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_connection_nobody_used_closed_as_idle_waits_for_the_next_call() {
    let (listener, addr) = stand_in::bind().await;
    let (second_closed_tx, second_closed_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        // The first connection (`connect`'s), and the one reopened for the
        // caller that gave up: each closed after IDLE with nothing asked.
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        welcome_then_idle_close(first).await;
        let second = stand_in::accept_hello(&listener).await.expect("reopen");
        welcome_then_idle_close(second).await;
        let _ = second_closed_tx.send(());
        // Then: how many connections come in 3 s, with no call made?
        let mut later = 0;
        let until = tokio::time::Instant::now() + Duration::from_secs(3);
        while let Ok(Some(stream)) =
            tokio::time::timeout_at(until, stand_in::accept_hello(&listener)).await
        {
            later += 1;
            tokio::spawn(welcome_then_idle_close(stream));
        }
        later
    });

    let locker = RemoteLocker::connect(addr, stand_in::config())
        .await
        .expect("connect");
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the server closed the first connection"
    );
    assert!(locker.is_online(), "an idle close leaves the locker online");

    // A caller that gives up at once: the reopen goes on without it.
    let gave_up = tokio::time::timeout(Duration::ZERO, locker.lock(&stand_in::args("a"))).await;
    assert!(
        gave_up.is_err(),
        "the caller gave up before the reopen ended"
    );

    tokio::time::timeout(Duration::from_secs(5), second_closed_rx)
        .await
        .expect("the reopen connected and the server closed it within 5 s")
        .expect("server");
    // Shortly after the second idle close, is the locker online?
    tokio::time::sleep(Duration::from_millis(30)).await;
    let online = locker.is_online();

    let later = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server's count ends in 3 s")
        .expect("server");
    drop(locker);
    assert_eq!(
        later, 0,
        "with no call made after the server closed the reopened connection for idleness, the \
         locker opened {later} connections in 3 s (online just after that close: {online})"
    );
    assert!(online, "the second idle close left the locker offline");
}
