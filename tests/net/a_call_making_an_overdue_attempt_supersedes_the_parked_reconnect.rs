//! Reproduces a past break: a call's overdue attempt and the parked reconnect task dial in the same backoff step.
//!
//! The `RemoteLocker` rustdoc ("Runtimes"): while the server is out of
//! reach "the attempts to connect follow one backoff, kept by the locker
//! rather than by a task"; where no task makes them (a runtime "driven
//! only inside each call's `block_on`"), "the first call that finds an
//! attempt overdue starts it as a task of its own". src/net/client/
//! reconnect.rs: "A superseded task ends at its next note."
//!
//! A locker made on a current-thread runtime driven only inside each
//! call's `block_on`, with its server out of reach (the handshake is never
//! answered): the background reconnect is spawned there and never runs.
//! Once it is overdue and its beat stale, the next call on that runtime
//! starts the attempt itself (`reopen::join_or_start`, `overdue`), but
//! leaves the schedule's runner as it was. Its `block_on` then drives the
//! old task too, which finds itself still the runner and the attempt due,
//! and dials beside the call's attempt: two attempts in one step.
#![cfg(feature = "net")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::{NetLocker, RetryPolicy};

use crate::calls_in_a_block_on::{
    a_stand_in_on_a_runtime_of_its_own, an_offline_locker_on_a_current_thread_runtime,
};
use crate::stand_in::{self, args};

#[test]
fn one_attempt_is_made_when_a_call_takes_over_an_overdue_step() {
    // The server, on a runtime of its own: it accepts every connection,
    // notes when, reads the hello and never answers it.
    let (server_runtime, listener, addr) = a_stand_in_on_a_runtime_of_its_own();
    let accepted: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
    let noted = accepted.clone();
    let server = server_runtime.spawn(async move {
        let mut held = Vec::new();
        for _ in 0..100 {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            noted.lock().unwrap().push(std::time::Instant::now());
            held.push(stream);
        }
    });

    let mut config = stand_in::config();
    config.connect_timeout = Duration::from_millis(300);
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(100),
    };
    // The caller's only runtime, driven inside each call's `block_on`.
    let (runtime, locker) = an_offline_locker_on_a_current_thread_runtime(addr, config);

    // Past the step (at most 10 ms) and past the patience with a silent
    // task (the connect timeout and 250 ms).
    std::thread::sleep(Duration::from_millis(800));
    let before = accepted.lock().unwrap().len();
    let call = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid"))).await
    });
    // Room for the server to note what the call's runtime dialled.
    std::thread::sleep(Duration::from_millis(100));
    let during: Vec<std::time::Instant> = accepted.lock().unwrap()[before..].to_vec();
    drop(locker);
    drop(runtime);
    server.abort();
    drop(server_runtime);
    assert!(
        matches!(call, Ok(Err(_))),
        "the call fails: the server never answers ({call:?})"
    );
    let apart: Vec<Duration> = during.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(
        during.len(),
        1,
        "the call that took over the overdue step dialled {} times (gaps {apart:?}), where the \
         backoff allows one attempt: the parked reconnect dialled beside it",
        during.len()
    );
}
