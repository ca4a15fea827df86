//! Shared pieces of the tests whose calls each run in a `block_on` of a
//! current-thread runtime (the runtime is driven only while a call runs):
//! the stand-in server on a runtime of its own, the caller's runtime with
//! a locker that starts offline, and the loop of calls every 100 ms until
//! one is granted.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::net::TcpListener;
use tokio::runtime::Runtime;

use crate::stand_in::{self, args};

/// A multi-threaded runtime of one worker for the stand-in server, so that
/// it answers whatever the caller's runtime does, and a stand-in listener
/// bound on it, with its address.
pub fn a_stand_in_on_a_runtime_of_its_own() -> (Runtime, TcpListener, String) {
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let (listener, addr) = server_runtime.block_on(stand_in::bind());
    (server_runtime, listener, addr)
}

/// The caller's only runtime (current-thread), and a locker of `addr`
/// with `config` connected in a `block_on` of it, which must start
/// offline (the server does not welcome its first connection).
pub fn an_offline_locker_on_a_current_thread_runtime(
    addr: String,
    config: RemoteConfig,
) -> (Runtime, RemoteLocker) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let locker = runtime
        .block_on(RemoteLocker::connect(addr, config))
        .expect("an unreachable server leaves the locker offline, not an error");
    assert!(locker.connect_error().is_some(), "it starts offline");
    (runtime, locker)
}

/// One lock of "uid" every 100 ms, at most `calls` of them, each in a
/// `block_on` of `runtime` and given up after `give_up`, until one is
/// granted. Returns how many calls were made and, if none was granted,
/// what the last one returned (for the test's assertion message).
pub fn calls_until_one_is_granted(
    runtime: &Runtime,
    locker: &RemoteLocker,
    calls: usize,
    give_up: Duration,
) -> (usize, Option<String>) {
    let mut last = None;
    let mut made = 0;
    for _ in 0..calls {
        std::thread::sleep(Duration::from_millis(100));
        made += 1;
        let call = runtime
            .block_on(async { tokio::time::timeout(give_up, locker.lock(&args("uid"))).await });
        match call {
            Ok(Ok(true)) => {
                last = None;
                break;
            }
            other => last = Some(format!("{other:?}")),
        }
    }
    (made, last)
}
