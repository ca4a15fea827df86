//! Synchronous code often makes a runtime for each call (`Runtime::new()`
//! then `block_on`, then drop). The `RemoteLocker` rustdoc ("Runtimes")
//! promises that when the runtime of the connection shuts down, "the next
//! call fails with `Error::LockerUnavailable` and reconnects from its own
//! runtime, and calls succeed again once that is done". With a server up
//! and answering everything, calls made this way must get through.
//!
//! The reconnect a failing call starts is a task on the caller's runtime,
//! dropped with it as soon as the call returns; the dropped task frees
//! the reconnect slot, so the next call finds no reconnect "parked" to
//! take over, starts another one on its own runtime, and fails at once:
//! for ever.
//!
//! Reproduces a past break: with a runtime per call, every call failed "not connected" for ever.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;

use crate::stand_in::{self, args};

fn fresh_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn calls_each_on_a_runtime_of_their_own_get_through_with_the_server_up() {
    let server_runtime = fresh_runtime();
    let (listener, addr) = server_runtime.block_on(stand_in::bind());
    let server = server_runtime.spawn(stand_in::welcome_and_grant_every_connection(listener));

    // Connected from a runtime of its own, dropped afterwards: the
    // connection goes down with it.
    let locker = {
        let runtime = fresh_runtime();
        let locker = runtime
            .block_on(RemoteLocker::connect(addr, stand_in::config()))
            .expect("connect");
        assert!(locker.protocol_version().is_some(), "connected");
        locker
    };

    // One call every 100 ms for at most 5 s, each on a runtime of its own.
    let mut outcomes = Vec::new();
    let mut through = false;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let runtime = fresh_runtime();
        let call = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid"))).await
        });
        drop(runtime);
        if matches!(call, Ok(Ok(true))) {
            through = true;
            break;
        }
        outcomes.push(format!("{call:?}"));
    }
    drop(locker);
    server.abort();
    drop(server_runtime);
    assert!(
        through,
        "{} calls, each on a runtime of its own, never got through in 5 s to a server that is up \
         and grants everything; the last: {}",
        outcomes.len(),
        outcomes.last().cloned().unwrap_or_default()
    );
}
