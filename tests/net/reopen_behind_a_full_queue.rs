//! Shared set-up of the tests whose reopen is parked in its TCP connect
//! behind a listener's full accept queue: the listener, and a locker whose
//! first connection the stand-in closed as idle, so that its next call
//! reopens.
#![cfg(feature = "net")]

use std::sync::{mpsc, Arc};
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::{stand_in, wire};

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

/// The call a parked-reopen test makes on its idle runtime: a lock of
/// "uid-parked" that starts the reopen and gives up after 300 ms. It drops
/// its handle on the locker, so that the test's may be the last, and says
/// whether it gave up.
pub async fn a_call_given_up_after_300_ms(locker: Arc<RemoteLocker>) -> bool {
    let parked_args = stand_in::args("uid-parked");
    let gave_up = tokio::time::timeout(Duration::from_millis(300), locker.lock(&parked_args))
        .await
        .is_err();
    drop(locker);
    gave_up
}

/// Waits (at most 10 s, off the test's runtime) for the idle runtime's
/// call to end, and asserts that it gave up.
pub async fn the_call_on_the_idle_runtime_gave_up(gave_up: mpsc::Receiver<bool>) {
    let gave_up =
        tokio::task::spawn_blocking(move || gave_up.recv_timeout(Duration::from_secs(10)))
            .await
            .expect("thread")
            .expect("the call on the idle runtime ended");
    assert!(gave_up, "the call waited for the reopen and gave up");
}

/// Accepts the connection that filled the accept queue (it must be there
/// within a second), which frees the queue for the kernel's second SYN.
pub async fn accept_the_blocker(listener: &TcpListener) -> TcpStream {
    let (blocked, _) = tokio::time::timeout(Duration::from_secs(1), listener.accept())
        .await
        .expect("the blocker in time")
        .expect("the blocker");
    blocked
}

/// Whether the server's end `parked` of the parked connect is closed
/// within a second; then lets the idle runtime be dropped (`release`, and
/// the join of `idle_thread`) and, if it was not closed, whether it is
/// within a second after: what held it open.
pub async fn closed_within_a_second_and_once_the_runtime_is_dropped(
    parked: &mut TcpStream,
    release: mpsc::Sender<()>,
    idle_thread: std::thread::JoinHandle<()>,
) -> (Result<Vec<u8>, String>, Result<Vec<u8>, String>) {
    let closed = wire::closed_within(parked, Duration::from_secs(1)).await;
    let _ = release.send(());
    let _ = tokio::task::spawn_blocking(move || idle_thread.join()).await;
    let after = match &closed {
        Ok(_) => Ok(Vec::new()),
        Err(_) => wire::closed_within(parked, Duration::from_secs(1)).await,
    };
    (closed, after)
}

/// The builder of the current-thread runtime a parked-reopen test lets go
/// idle: with its timers and I/O enabled, as the locker's tasks need.
pub fn an_idle_runtime() -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    builder
}
