//! The `RemoteLocker` rustdoc ("Runtimes"): "While the server is out of
//! reach, the attempts to connect follow one backoff, kept by the locker
//! rather than by a task"; docs/lock-servers.md: a connection closed in
//! good order before it served a call is opened again by the next call,
//! "from the second in a row within 10 s, not before the backoff's step".
//!
//! A hostile server welcomes each connection (after 30 ms) and closes it
//! in good order at once. From the second such close in a row,
//! `on_close` sets `schedule.due` to the backoff's step and
//! `reopen_next`. A call before the step fails at once, and on its way
//! out (`connection()`) calls `reconnect_later`, which spawns a
//! background task sleeping until that same `due`. When the step comes,
//! the task wakes and dials; and a call made while that dial runs finds
//! `reopen_next` still set and the step passed (`join_or_start`: nothing
//! looks at the runner), so it starts a reopen of its own: two attempts
//! at each step, one by the task and one by the call, where the backoff
//! allows one.
//!
//! The test counts connections the server accepted within 10 ms of the
//! one before (after the first two, which are the connect and the
//! reopen after the first idle close). With a step of at most 400 ms
//! drawn at random, one attempt per step lands within 10 ms of the last
//! about one step in forty; two attempts per step do so at nearly every
//! step.
//!
//! Reproduces a past break: a call reopened beside the background task at each step, two attempts per step.
#![cfg(feature = "net")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::{NetLocker, RetryPolicy};
use tokio::time::Instant;

use crate::stand_in;

const WATCHED: Duration = Duration::from_secs(4);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backed_off_reopen_is_made_once_per_step() {
    let (listener, addr) = stand_in::bind().await;
    let accepted: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = accepted.clone();
    let server = tokio::spawn(async move {
        for _ in 0..500 {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            seen.lock().unwrap().push(Instant::now());
            tokio::spawn(async move {
                if crate::wire::read_frame(&mut stream, 4096).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
                if stand_in::welcome(&mut stream).await {
                    stand_in::close_as_idle(stream).await;
                }
            });
        }
    });

    let mut config = RemoteConfig::new(stand_in::TOKEN);
    config.connect_timeout = Duration::from_millis(500);
    config.call_timeout = Duration::from_secs(1);
    // A constant ceiling: each step is a random wait of at most 400 ms.
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(400),
        max: Duration::from_millis(400),
    };
    let locker = RemoteLocker::connect(addr, config)
        .await
        .expect("the first connection is welcomed");
    let began = Instant::now();
    let mut calls = 0;
    while began.elapsed() < WATCHED && calls < 3_000 {
        calls += 1;
        let _ =
            tokio::time::timeout(Duration::from_secs(2), locker.lock(&stand_in::args("u"))).await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    drop(locker);
    server.abort();
    let times = accepted.lock().unwrap().clone();
    let pairs = times
        .windows(2)
        .skip(2)
        .filter(|w| w[1].saturating_duration_since(w[0]) < Duration::from_millis(10))
        .count();
    assert!(
        pairs <= 3,
        "of {} connections in {WATCHED:?}, {pairs} came within 10 ms of the one before: \
         two attempts at each step of the backoff",
        times.len()
    );
}
