//! Reproduces a past break: a call failing at once before the backoff's step said "reconnecting in the background" while nothing reconnects in the background.
//!
//! docs/lock-servers.md: "One closed in good order before it served a
//! call is still opened again by the next call, not in the background;
//! from the second in a row within 10 s, not before the backoff's step,
//! and a call before it fails at once." Since c2e7e87 that call starts no
//! background task (right), yet its error still says "not connected,
//! reconnecting in the background" (at ccdad0a it started one, and said
//! so truly): whoever reads the `unreachable` list of a failed lock is
//! told a reconnect is under way while none is, and none will be until
//! another call comes.
//!
//! Set-up as in a_connection_closed_before_it_served_a_call_is_not_reopened_in_the_background:
//! a server that welcomes each connection 30 ms after its hello and closes
//! it at once; calls that give up after 1 ms; a step drawn up to 3 s.
#![cfg(feature = "net")]

use std::sync::atomic::Ordering;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;

use crate::stand_in;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_of_a_call_failing_before_the_step_says_what_follows() {
    let (listener, addr) = stand_in::bind().await;
    let (server, accepted, closed) = stand_in::closing_each_connection_before_a_call(listener);
    let config = stand_in::config_stepping(Duration::from_secs(3));
    let locker = RemoteLocker::connect(addr, config).await.expect("connect");

    // Each round: once every connection was closed (and the client saw
    // it), one call. It reopens (the first close) or, from the second
    // close in a row, fails at once before the step.
    let mut failed_at_once = None;
    for _ in 0..6 {
        let made = accepted.load(Ordering::Relaxed);
        assert!(
            stand_in::until_counted(&closed, made).await,
            "the server closed each connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        let call =
            tokio::time::timeout(Duration::from_millis(1), locker.lock(&stand_in::args("u"))).await;
        if let Ok(Err(err)) = &call
            && accepted.load(Ordering::Relaxed) == made
        {
            failed_at_once = Some(err.to_string());
            break;
        }
        assert!(
            stand_in::until_counted(&accepted, made + 1).await,
            "the call reopened"
        );
    }
    let Some(said) = failed_at_once else {
        panic!("set-up: a call failed at once before the step");
    };
    let after_calls = accepted.load(Ordering::Relaxed);
    // No call, past the step (at most 3 s).
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let without_calls = accepted.load(Ordering::Relaxed) - after_calls;
    drop(locker);
    server.abort();
    assert!(
        !(said.contains("reconnecting in the background") && without_calls == 0),
        "a call failing before the step says a background reconnect is under way, yet with no \
         call made for 3.5 s, {without_calls} connection(s) were opened: {said}"
    );
}
