//! Reproduces a past break: after a second close in a row before any call was served, a call failing before the step starts a background dial.
//!
//! docs/lock-servers.md: "One closed in good order before it served a
//! call is still opened again by the next call, not in the background;
//! from the second in a row within 10 s, not before the backoff's step,
//! and a call before it fails at once."
//!
//! A server welcomes each connection and closes it in good order at once.
//! After the second such close `on_close` sets the step and
//! `reopen_next`. A call before the step fails at once, and on its way
//! out `connection()` calls `reconnect_later`, which spawns a background
//! task that dials once the step is due, with no call made: the
//! connection is opened again in the background.
//!
//! The calls that reopen give up after 1 ms (the reopen goes on as a task
//! of its own) and the server welcomes each connection 30 ms after its
//! hello, so that no request is ever sent and each close is one before
//! the connection served a call. The step is drawn at random up to
//! 3 s; a call that comes after it (it reopens instead of failing at
//! once) is followed by another.
#![cfg(feature = "net")]

use std::sync::atomic::Ordering;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;

use crate::stand_in;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_connection_is_opened_without_a_call() {
    let (listener, addr) = stand_in::bind().await;
    let (server, accepted, closed) = stand_in::closing_each_connection_before_a_call(listener);
    let config = stand_in::config_stepping(Duration::from_secs(3));
    let locker = RemoteLocker::connect(addr, config).await.expect("connect");

    // Each round: once every connection was closed (and the client saw
    // it), one call. It reopens (the first close) or, from the second
    // close in a row, fails at once before the step.
    let mut failed_at_once = false;
    for _ in 0..6 {
        let made = accepted.load(Ordering::Relaxed);
        assert!(
            stand_in::until_counted(&closed, made).await,
            "the server closed each connection"
        );
        // The client must have seen the close before the next call: a
        // call sent on a connection the server already closed is a close
        // under a call, which is reconnected from in the background. A
        // fixed pause was too short once on a loaded machine.
        assert!(
            tokio::time::timeout(Duration::from_secs(5), async {
                // Down for 20 ms in a row: a reopen still in its
                // handshake reads as down before its connection is in.
                let mut down_since = None;
                loop {
                    if locker.protocol_version().is_some() {
                        down_since = None;
                    } else if down_since
                        .get_or_insert_with(tokio::time::Instant::now)
                        .elapsed()
                        >= Duration::from_millis(20)
                    {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
            .await
            .is_ok(),
            "the client saw the server close the connection"
        );
        let call =
            tokio::time::timeout(Duration::from_millis(1), locker.lock(&stand_in::args("u"))).await;
        if matches!(call, Ok(Err(_))) && accepted.load(Ordering::Relaxed) == made {
            failed_at_once = true;
            break;
        }
        assert!(
            stand_in::until_counted(&accepted, made + 1).await,
            "the call reopened"
        );
    }
    assert!(failed_at_once, "a call failed at once before the step");
    let after_calls = accepted.load(Ordering::Relaxed);
    // No call, past the step (at most 3 s).
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let without_calls = accepted.load(Ordering::Relaxed) - after_calls;
    drop(locker);
    server.abort();
    assert_eq!(
        without_calls, 0,
        "with no call made for 3.5 s, {without_calls} connection(s) were opened in the \
         background to a server that closes each connection before it serves a call"
    );
}
