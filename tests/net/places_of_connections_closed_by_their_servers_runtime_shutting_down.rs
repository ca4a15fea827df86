//! Reproduces a past break: a lock server whose runtime shuts down leaves its connections' places in line standing in the table it serves, blocking its in-process users until the places' time-to-live.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::loopback;
use crate::node::{args, reservation, TOKEN};
use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockMode, NetLocker, WaitReply};

/// A program serves its `LocalLocker` over a lock server on a runtime of
/// its own, and ends that runtime while a client waits in line (a
/// reservation kept 60 s). The connection closes with the runtime, so its place must go
/// ("a lock server drops the places of a connection as soon as it
/// closes"): the program's own callers of the table it keeps must not find
/// a waiter nobody will ever renew ahead of them.
async fn places_left_when_the_servers_runtime_ends(
    build: fn() -> tokio::runtime::Runtime,
    end: fn(tokio::runtime::Runtime),
    how: &str,
) {
    let locker = Arc::new(LocalLocker::new());
    let x = vec!["x".to_string()];
    assert!(locker.lock(&args("holder", &x)).await.unwrap());

    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = locker.clone();
    let server_thread = std::thread::spawn(move || {
        let runtime = build();
        runtime.block_on(async move {
            let server = LockServer::new(served, ServerConfig::new(TOKEN)).expect("valid config");
            // The server's own shutdown signal never fires: the runtime
            // going away is what ends it.
            let (bound, _) = loopback::serve_while_the_runtime_runs(server).await;
            addr_tx.send(bound.to_string()).expect("the test waits");
            let _ = stop_rx.await;
        });
        end(runtime);
    });
    let addr = addr_rx.recv().expect("the server's address");

    let client = RemoteLocker::connect(addr, RemoteConfig::new(TOKEN))
        .await
        .expect("connect");
    let reply = client
        .lock_wait(&args("waiter", &x), LockMode::Write, &reservation())
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Refused, "a reservation behind the holder");
    assert_eq!(locker.waiting(), 1, "the waiter's place is in the table");

    // The program shuts its server's runtime down; the connection closes.
    stop_tx.send(()).expect("the server runs");
    tokio::task::spawn_blocking(move || server_thread.join().expect("the server thread"))
        .await
        .unwrap();

    // Bounded: 40 looks over 2 s, well within the place's 60 s.
    let mut places = locker.waiting();
    for _ in 0..40 {
        if places == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        places = locker.waiting();
    }
    // What the standing place does to the program's own callers.
    assert!(locker.unlock(&args("holder", &x)).await.unwrap());
    let newcomer = locker.lock(&args("newcomer", &x)).await;
    drop(client);
    assert!(
        places == 0 && matches!(newcomer, Ok(true)),
        "2 s after the server's runtime ended ({how}), closing its connection, the table it served \
         keeps {places} place(s) of that connection (kept for 60 s), and an in-process lock of \
         the freed name, which nobody holds, got {newcomer:?}"
    );
}

/// A current-thread runtime shut down with `shutdown_background`.
#[tokio::test]
async fn a_servers_runtime_shut_down_leaves_no_place_of_its_connections_standing() {
    places_left_when_the_servers_runtime_ends(
        || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
        },
        tokio::runtime::Runtime::shutdown_background,
        "a current-thread runtime, shutdown_background",
    )
    .await;
}

/// A multi-thread runtime simply dropped. Its workers drop the connections'
/// tasks while the runtime's drop shuts the blocking pool down, so whether
/// the clean-up is refused depends on which comes first: alone, the pool's
/// shutdown came first in every run; beside other tests it may not.
#[tokio::test]
async fn a_servers_multi_thread_runtime_dropped_leaves_no_place_of_its_connections_standing() {
    places_left_when_the_servers_runtime_ends(
        || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime")
        },
        drop,
        "a multi-thread runtime, dropped",
    )
    .await;
}
