//! Shared set-up of the tests whose reopen is parked in its TCP connect
//! behind a listener's full accept queue: the listener, and a locker whose
//! first connection the stand-in closed as idle, so that its next call
//! reopens.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::net::{TcpListener, TcpSocket};

use crate::stand_in;

/// A loopback listener whose accept queue holds one connection: a
/// connection nobody accepts fills it, and the next SYN is dropped (the
/// kernel sends it again about a second later).
pub fn bind_with_a_queue_of_one() -> (TcpListener, String) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let listener = socket.listen(0).expect("listen");
    let addr = listener.local_addr().expect("address").to_string();
    (listener, addr)
}

/// A locker of `endpoint` (served by `listener`) with `config`, whose first
/// connection the stand-in welcomed and, 50 ms later, closed as idle. It
/// asserts that the locker saw the idle close and reads online again
/// within a second (its next call reopens): the state every parked-reopen
/// test starts from.
pub async fn a_locker_after_an_idle_close(
    listener: &TcpListener,
    endpoint: String,
    config: RemoteConfig,
) -> Arc<RemoteLocker> {
    let connecting = tokio::spawn(RemoteLocker::connect(endpoint, config));
    let first = tokio::time::timeout(Duration::from_secs(5), stand_in::accept_hello(listener))
        .await
        .expect("the first connection in time")
        .expect("its hello");
    let locker = Arc::new(
        tokio::time::timeout(Duration::from_secs(5), async {
            let mut first = first;
            assert!(stand_in::welcome(&mut first).await, "welcome");
            let locker = connecting.await.expect("task").expect("connect");
            tokio::time::sleep(Duration::from_millis(50)).await;
            stand_in::close_as_idle(first).await;
            locker
        })
        .await
        .expect("connected in time"),
    );
    assert!(
        stand_in::until_connected(&locker, false).await,
        "the idle close"
    );
    // Its end is read a moment after the connection is marked down.
    let online = tokio::time::timeout(Duration::from_secs(1), async {
        while !locker.is_online() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(online.is_ok(), "the next call reopens");
    locker
}
