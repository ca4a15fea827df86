//! Reproduces a past break: a client whose hello reached the server after the server's handshake timeout was told its token was rejected (`Error::Unauthorized`, "check the token"), and `connect` failed, though the token was the server's own.
//!
//! `RemoteLocker::connect`: "An unreachable server is not an error ... A
//! server that rejects the token is an error: [`Error::Unauthorized`]";
//! docs/lock-servers.md: "A rejected token is an error ... it is a
//! setting to fix, not an outage to wait out". A lock server closes a
//! connection that sent no handshake within its handshake timeout, and
//! tells the peer so in a `Rejected` ("no handshake in time"): nothing
//! about the token, which it never read. Here the client's runtime is not
//! driven between its TCP connect and its hello (a process paused, a
//! runtime starved) for longer than the server's handshake timeout; the
//! token is right. A slow handshake is an outage to wait out: the locker
//! should start offline and keep trying (or connect again at once), not
//! fail as a setting to fix. (And in the background, an `Unauthorized`
//! stops the reconnect task for good.)
#![cfg(feature = "net")]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteLocker, ServerConfig};
use quorum_lock::{Error, LocalLocker, NetLocker};

use crate::loopback;
use crate::stand_in;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_the_server_timed_out_is_not_said_a_rejected_token() {
    let token = stand_in::config().token;
    let mut server_config = ServerConfig::new(token);
    server_config.handshake_timeout = Duration::from_millis(200);
    let server = LockServer::new(Arc::new(LocalLocker::new()), server_config).expect("server");
    let (bound, stop, serving) = loopback::serve_with_its_task(server).await;
    let addr = bound.to_string();

    // The client's connect, on a current-thread runtime of its own: polled
    // once (its TCP connect under way), then not driven for 600 ms, three
    // times the server's handshake timeout, then driven to its end.
    let made = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut config = stand_in::config();
        config.connect_timeout = Duration::from_secs(3);
        let mut connect = Box::pin(RemoteLocker::connect(addr, config));
        // Exactly one poll: the TCP connect starts, nothing more.
        let first = runtime.block_on(std::future::poll_fn(|cx| {
            std::task::Poll::Ready(connect.as_mut().poll(cx))
        }));
        assert!(
            first.is_pending(),
            "one poll does not finish a connect and its handshake"
        );
        std::thread::sleep(Duration::from_millis(600));
        let made = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), connect)
                .await
                .expect("connect ended in time")
        });
        // Its offline state and reason, read on its own runtime.
        made.map(|locker| (locker.is_online(), locker.connect_error()))
    })
    .await
    .expect("client thread");
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), serving).await;

    let err = match made {
        Ok((true, _)) => return,
        Ok((false, why)) => why.expect("offline, with a reason"),
        Err(err) => err,
    };
    assert!(
        !matches!(err, Error::Unauthorized { .. }),
        "the server timed the handshake out, never reading the token (the server's own); the \
         client reports a rejected token: {err}"
    );
}
