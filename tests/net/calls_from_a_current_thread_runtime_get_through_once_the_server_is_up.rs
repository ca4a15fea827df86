//! A program with one current-thread runtime drives it only in
//! `block_on`, and the common way to use a locker from synchronous code
//! is one `block_on` per call. A locker made while its server was
//! unreachable "keeps probing with backoff and the next call after it
//! reconnects goes through" (`RemoteLocker`): the server comes up, and
//! such calls, from a runtime driven by each of them, must get through.
//!
//! Reproduces a past break: a call to an offline locker is ready at its first
//! poll, and a current-thread `block_on` returns a future ready at its
//! first poll without running any spawned task; the reconnect is such a
//! task, so it never runs, and every call fails "not connected" for ever.
//! (Each reconnect found parked is replaced by another on the same
//! runtime, which does not run either: the run queue grows meanwhile.)
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::RetryPolicy;

use crate::calls_in_a_block_on::{
    a_stand_in_on_a_runtime_of_its_own, an_offline_locker_on_a_current_thread_runtime,
    calls_until_one_is_granted,
};
use crate::stand_in;

#[test]
fn calls_each_in_a_block_on_get_through_once_the_server_is_up() {
    // The server, on a runtime of its own: the first connection is reset
    // before any welcome (the server is not up yet), every later one is
    // welcomed and granted all it asks.
    let (server_runtime, listener, addr) = a_stand_in_on_a_runtime_of_its_own();
    let server = server_runtime.spawn(async move {
        if let Some(first) = stand_in::accept_hello(&listener).await {
            stand_in::reset(first);
        }
        stand_in::welcome_and_grant_every_connection(listener).await;
    });

    let mut config = stand_in::config();
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(200),
    };
    // The caller's only runtime.
    let (runtime, locker) = an_offline_locker_on_a_current_thread_runtime(addr, config);

    // One call every 100 ms for at most 5 s, each in a `block_on` of its
    // own (a call waits at most its call timeout, 2 s).
    let (_, last) = calls_until_one_is_granted(&runtime, &locker, 50, Duration::from_secs(3));
    // Reconnect tasks spawned on this runtime and never run.
    let queued = runtime.metrics().num_alive_tasks();
    drop(locker);
    drop(runtime);
    server.abort();
    drop(server_runtime);
    assert!(
        last.is_none(),
        "calls from a current-thread runtime, each driving it, never got through in 5 s to a \
         server that is up ({queued} tasks alive on its runtime); the last: {}",
        last.unwrap_or_default()
    );
}
