//! After the server closed an idle connection, the next call opens it
//! again. A server that then accepts connections but never answers a
//! handshake (stopped, overloaded) is unreachable; callers whose own
//! timeouts are shorter than the connect timeout drop their calls before
//! any reopen ends. The locker must still come to say it is offline, and
//! why, rather than online for as long as callers keep giving up.
//!
//! Reproduces a past break: each dropped reopen left the idle-close flag
//! for the next caller and started no reconnect, so the hung server was
//! reported online for ever.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;

use crate::stand_in::{self, args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_give_up_on_a_silent_server_leave_the_locker_offline() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(async move {
        let first = stand_in::accept_hello(&listener).await.expect("hello");
        stand_in::welcome_then_close_as_idle(first).await;
        // Every later handshake is read and never answered.
        let mut held = Vec::new();
        while let Some(stream) = stand_in::accept_hello(&listener).await {
            held.push(stream);
        }
    });

    let locker = RemoteLocker::connect(addr, stand_in::config())
        .await
        .expect("connect");
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the idle close"
    );
    assert!(locker.is_online(), "online after an idle close");

    // Callers that wait 100 ms each (the connect timeout is 500 ms).
    for n in 0..4 {
        let uid = format!("uid-{n}");
        let call = tokio::time::timeout(Duration::from_millis(100), locker.lock(&args(&uid))).await;
        assert!(
            !matches!(call, Ok(Ok(_))),
            "a silent server answered: {call:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Well past the connect timeout, with no call under way.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let online = locker.is_online();
    let why = locker.connect_error();
    server.abort();
    assert!(
        !online,
        "the locker says it is online though every attempt to reach its silent server \
         gave up (connect error: {why:?})"
    );
    assert!(
        why.is_some(),
        "an offline locker says why it cannot connect"
    );
}
