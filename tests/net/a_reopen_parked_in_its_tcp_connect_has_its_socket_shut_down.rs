//! docs/lock-servers.md: "A connection still in its TCP connect or its
//! handshake when the locker is dropped, or when another connection is
//! installed, has its socket shut down at once, even when its task sits on
//! a runtime nobody drives." The `RemoteLocker` rustdoc ("Runtimes") says
//! why: one parked on an idle runtime "would otherwise keep its slot on
//! the server for as long as that runtime lives".
//!
//! `Dialing` once listed a socket only when its task had seen `connect`
//! return. A reopen whose task parked while the TCP handshake was still
//! under way (its runtime went idle) was not listed, though the kernel
//! completes that handshake without the task: the server accepts the
//! connection, and its socket stayed open for as long as the idle runtime
//! lived.
//!
//! To park the reopen in its TCP connect for certain, the listener has a
//! backlog of one, taken by a connection nobody accepts: the reopen's SYN
//! is dropped and sent again by the kernel about a second later, by when
//! its runtime is idle and the queue free.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::net::{TcpListener, TcpStream};

use crate::reopen_behind_a_full_queue::{
    a_call_given_up_after_300_ms, a_locker_after_an_idle_close, accept_the_blocker,
    an_idle_runtime, bind_with_a_queue_of_one,
    closed_within_a_second_and_once_the_runtime_is_dropped, the_call_on_the_idle_runtime_gave_up,
};
use crate::stand_in::{self, args};

/// Reproduces a past break: a reopen parked in its TCP connect kept the socket the server accepted open after its locker was dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_accepted_for_a_parked_connect_closes_when_the_locker_is_dropped() {
    // Room for the kernel's second SYN: the idle runtime's timers do not
    // run anyway.
    let mut p = a_reopen_parked_in_its_tcp_connect(Duration::from_secs(5)).await;
    let locker = p.locker.take().expect("the locker");
    assert_eq!(
        Arc::strong_count(&locker),
        1,
        "the test holds the only locker"
    );
    drop(locker);
    p.closes_within_a_second("its locker was dropped").await;
}

/// Reproduces a past break: a reopen parked in its TCP connect kept the socket the server accepted open after another connection was installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_accepted_for_a_parked_connect_closes_when_a_connection_is_installed() {
    // Room for the kernel's second SYN (the idle runtime's timers do not
    // run anyway), and not much more: the call that installs a connection
    // waits this long, and 250 ms, for the parked reopen.
    let p = a_reopen_parked_in_its_tcp_connect(Duration::from_millis(1500)).await;
    let locker = p.locker.clone().expect("the locker");
    // A call on this (driven) runtime waits out the parked reopen's time,
    // then opens a connection of its own, which the server serves.
    let call = tokio::spawn({
        let locker = locker.clone();
        async move { locker.lock(&args("uid-installed")).await }
    });
    let mut installed =
        tokio::time::timeout(Duration::from_secs(5), stand_in::accept_hello(&p.listener))
            .await
            .expect("the call's own connection in time")
            .expect("its hello");
    assert!(stand_in::welcome(&mut installed).await, "welcome");
    let server = tokio::spawn(stand_in::grant_all(installed));
    let granted = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call in time")
        .expect("task");
    assert!(
        matches!(granted, Ok(true)),
        "the call got through on its own connection: {granted:?}"
    );
    assert!(
        locker.protocol_version().is_some(),
        "a connection is installed"
    );
    p.closes_within_a_second("another connection was installed")
        .await;
    server.abort();
}

/// A locker whose reopen sits parked in its TCP connect on an idle
/// current-thread runtime, and the socket the server accepted for it.
struct Parked {
    listener: TcpListener,
    locker: Option<Arc<RemoteLocker>>,
    parked: TcpStream,
    /// The connection that took the queue's one place, and its accepted end.
    queue: (TcpStream, TcpStream),
    release: std::sync::mpsc::Sender<()>,
    idle_thread: std::thread::JoinHandle<()>,
}

/// After an idle close, a call on a current-thread runtime starts the
/// reopen (its SYN dropped by the full queue) and gives up 300 ms later;
/// the runtime then stays idle, not dropped. The queue is freed, and the
/// kernel's second SYN gets the parked connect through.
async fn a_reopen_parked_in_its_tcp_connect(connect_timeout: Duration) -> Parked {
    let (listener, addr) = bind_with_a_queue_of_one();

    let mut config = stand_in::config();
    config.connect_timeout = connect_timeout;
    let locker = a_locker_after_an_idle_close(&listener, addr.clone(), config).await;

    // The queue's one place, taken by a connection nobody accepts yet.
    let blocker = TcpStream::connect(&addr).await.expect("the blocker");

    // A call on a current-thread runtime starts the reopen (its SYN is
    // dropped) and gives up 300 ms later; the runtime then stays idle,
    // not dropped, with the reopen parked in its TCP connect.
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (gave_up_tx, gave_up_rx) = std::sync::mpsc::channel::<bool>();
    let parked_locker = locker.clone();
    let idle_thread = std::thread::spawn(move || {
        let runtime = an_idle_runtime().build().expect("runtime");
        runtime.block_on(async move {
            let gave_up = a_call_given_up_after_300_ms(parked_locker).await;
            let _ = gave_up_tx.send(gave_up);
        });
        let _ = release_rx.recv_timeout(Duration::from_secs(30));
        drop(runtime);
    });
    the_call_on_the_idle_runtime_gave_up(gave_up_rx).await;

    // The queue is free: the kernel's second SYN gets the parked connect
    // through, and the server accepts it, though its task sits parked.
    let blocked = accept_the_blocker(&listener).await;
    let (parked, _) = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .expect("the parked connect reached the server in time")
        .expect("its socket");

    Parked {
        listener,
        locker: Some(locker),
        parked,
        queue: (blocker, blocked),
        release: release_tx,
        idle_thread,
    }
}

impl Parked {
    /// The parked connect's socket is closed within a second of `what`.
    async fn closes_within_a_second(mut self, what: &str) {
        // What held it: once the idle runtime is dropped, it closes.
        let (closed, after) = closed_within_a_second_and_once_the_runtime_is_dropped(
            &mut self.parked,
            self.release,
            self.idle_thread,
        )
        .await;
        drop((self.queue, self.locker, self.listener));
        assert!(
            closed.is_ok(),
            "the socket of a reopen parked in its TCP connect, accepted by the server, is {} once \
             {what} (closed once the idle runtime was dropped: {})",
            closed.err().unwrap_or_default(),
            after.is_ok()
        );
    }
}
