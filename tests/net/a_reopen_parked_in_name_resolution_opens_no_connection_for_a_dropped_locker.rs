//! Reproduces a past break: a reopen parked while it resolved the endpoint's name connects after its locker was dropped, and the socket holds a slot on the server for as long as its idle runtime lives.
//!
//! src/net/conn/dialing.rs: "once [`Dialing::close`] ran, a new one is
//! shut down as it is listed". docs/lock-servers.md: "A connection still
//! in its TCP connect or its handshake when the locker is dropped [...]
//! has its socket shut down at once, even when its task sits on a runtime
//! nobody drives."
//!
//! `dialing::connect` resolves the endpoint itself, then lists each socket
//! before its connect. A socket listed after the locker was dropped is
//! "shut down" while it is not connected yet: on Linux that shutdown is a
//! no-op for the connect (ENOTCONN), which then goes through. An attempt
//! that was resolving a host name when the locker was dropped therefore
//! opens a TCP connection for a locker that no longer exists, and when its
//! runtime goes idle again that connection keeps its slot on the server.
//!
//! Set-up: the idle runtime has one blocking thread, held by a gate, so
//! the reopen's name lookup (`localhost`, resolved on the blocking pool)
//! waits for certain until the test lets it go, after dropping the locker.
//! The listener's accept queue of one is taken by a connection nobody
//! accepts, so the reopen's SYN is dropped and sent again by the kernel
//! about a second later, by when its runtime is idle and the queue free.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::reopen_behind_a_full_queue::{
    a_call_given_up_after_300_ms, a_locker_after_an_idle_close, accept_the_blocker,
    an_idle_runtime, bind_with_a_queue_of_one,
    closed_within_a_second_and_once_the_runtime_is_dropped, the_call_on_the_idle_runtime_gave_up,
};
use crate::stand_in;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_started_after_the_locker_was_dropped_holds_no_slot_on_the_server() {
    let (listener, addr) = bind_with_a_queue_of_one();
    let port = listener.local_addr().expect("address").port();
    // A name, so that the attempt resolves it on the blocking pool.
    let endpoint = format!("localhost:{port}");

    let mut config = stand_in::config();
    // Room for the kernel's second SYN (the idle runtime's timers do not
    // run anyway).
    config.connect_timeout = Duration::from_secs(5);
    let locker = a_locker_after_an_idle_close(&listener, endpoint, config).await;

    // The queue's one place, taken by a connection nobody accepts yet.
    let blocker = TcpStream::connect(&addr).await.expect("the blocker");

    // A call on a current-thread runtime whose one blocking thread is
    // held: it starts the reopen, whose name lookup waits for that thread,
    // and gives up 300 ms later. The runtime then stays idle.
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let (drive_tx, drive_rx) = std::sync::mpsc::channel::<()>();
    let (driven_tx, driven_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (gave_up_tx, gave_up_rx) = std::sync::mpsc::channel::<bool>();
    let parked_locker = locker.clone();
    let idle_thread = std::thread::spawn(move || {
        let runtime = an_idle_runtime()
            .max_blocking_threads(1)
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let (busy_tx, busy_rx) = tokio::sync::oneshot::channel::<()>();
            let _gate = tokio::task::spawn_blocking(move || {
                let _ = busy_tx.send(());
                let _ = gate_rx.recv_timeout(Duration::from_secs(30));
            });
            let _ = tokio::time::timeout(Duration::from_secs(5), busy_rx).await;
            let gave_up = a_call_given_up_after_300_ms(parked_locker).await;
            let _ = gave_up_tx.send(gave_up);
        });
        // Driven once more, briefly, when told.
        if drive_rx.recv_timeout(Duration::from_secs(30)).is_ok() {
            runtime.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
            let _ = driven_tx.send(());
        }
        let _ = release_rx.recv_timeout(Duration::from_secs(30));
        drop(runtime);
    });
    the_call_on_the_idle_runtime_gave_up(gave_up_rx).await;

    // The last handle on the locker goes, while its reopen still waits
    // for the name lookup: nothing of the attempt is on the network yet.
    assert_eq!(
        Arc::strong_count(&locker),
        1,
        "the test holds the only locker"
    );
    drop(locker);

    // The lookup may run now, and the idle runtime runs for 300 ms: the
    // reopen's task goes on, then parks again.
    let _ = gate_tx.send(());
    let _ = drive_tx.send(());
    let driven =
        tokio::task::spawn_blocking(move || driven_rx.recv_timeout(Duration::from_secs(10)))
            .await
            .expect("thread");
    assert!(driven.is_ok(), "the idle runtime was driven");

    // The queue is free: a connect under way goes through with the
    // kernel's second SYN, though its task sits parked.
    let blocked = accept_the_blocker(&listener).await;
    let parked = tokio::time::timeout(Duration::from_secs(4), listener.accept()).await;
    let (closed, after) = match parked {
        // No connection reached the server: nothing holds a slot.
        Err(_) => (Ok(Vec::new()), Ok(Vec::new())),
        Ok(Err(e)) => panic!("accept: {e}"),
        Ok(Ok((mut parked, _))) => {
            // What held it: once the idle runtime is dropped, it closes.
            closed_within_a_second_and_once_the_runtime_is_dropped(
                &mut parked,
                release_tx,
                idle_thread,
            )
            .await
        }
    };
    drop((blocker, blocked));
    assert!(
        closed.is_ok(),
        "a connection the reopen started after its locker was dropped reached the server and \
         is {} (closed once the idle runtime was dropped: {})",
        closed.err().unwrap_or_default(),
        after.is_ok()
    );
}
