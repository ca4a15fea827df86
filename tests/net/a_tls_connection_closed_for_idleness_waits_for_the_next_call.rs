//! Reproduces a past break: a TLS connection the server closed for idleness was read as broken (the server drops it without a TLS close_notify), so the locker went offline and reconnected in the background at once, taking the server's slot straight back, where the next call was to reopen it.
//!
//! docs/lock-servers.md ("Connection slots"): "A `RemoteLocker` whose
//! connection the server closed this way, with no wait or watch
//! registered, does not reconnect at once: its next call opens a
//! connection first (taking up to `connect_timeout`), and `is_online()`
//! stays true meanwhile." `ServerConfig::idle_timeout`: "`RemoteLocker`
//! opens a new connection with its next call." A TLS `LockServer` closes
//! an idle connection by dropping its stream, which sends no
//! close_notify; the client's TLS layer reads the end of the stream as
//! an error (`UnexpectedEof`), so the reader marks the connection broken,
//! the close counts as no idle close, and the background reconnect opens
//! a connection within the backoff's first step, with no call made. Over
//! plain TCP the same close waits for the next call.
//!
//! The server sits behind a loopback proxy that counts the connections it
//! is asked for: after one call and the idle close that follows it, no
//! other connection may come while no call is made. Real time (sockets
//! and TLS): an idle timeout of 200 ms, then a second with no call; every
//! wait is bounded.
#![cfg(feature = "tls")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{
    ClientTls, LockServer, RemoteConfig, RemoteLocker, ServerConfig, ServerTls,
};
use quorum_lock::{LocalLocker, NetLocker};
use tokio::net::{TcpListener, TcpStream};

use crate::loopback;
use crate::tls_files::{CA, NODE_CERT, NODE_KEY};

const TOKEN: &str = "client-secret";

const IDLE: Duration = Duration::from_millis(200);

/// Connections the proxy was asked for, and those that have ended.
#[derive(Default)]
struct Counts {
    opened: AtomicUsize,
    ended: AtomicUsize,
}

/// Forwards each connection on `listener` to `server` (at most 50),
/// counting them.
async fn proxy(listener: TcpListener, server: String, counts: Arc<Counts>) {
    for _ in 0..50 {
        let Ok((mut client, _)) = listener.accept().await else {
            return;
        };
        counts.opened.fetch_add(1, Ordering::SeqCst);
        let server = server.clone();
        let counts = counts.clone();
        tokio::spawn(async move {
            if let Ok(mut upstream) = TcpStream::connect(&server).await {
                let _ = tokio::time::timeout(
                    Duration::from_secs(30),
                    tokio::io::copy_bidirectional(&mut client, &mut upstream),
                )
                .await;
            }
            counts.ended.fetch_add(1, Ordering::SeqCst);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_connection_closed_for_idleness_waits_for_the_next_call() {
    let tls = ServerTls::from_pem(NODE_CERT, NODE_KEY).expect("server tls");
    let mut server_config = ServerConfig::new(TOKEN).tls(tls);
    server_config.idle_timeout = Some(IDLE);
    let server =
        LockServer::new(Arc::new(LocalLocker::new()), server_config).expect("valid config");
    let (bound, _stop) = loopback::serve(server).await;

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let proxy_addr = listener.local_addr().expect("proxy address");
    let counts = Arc::new(Counts::default());
    tokio::spawn(proxy(listener, bound.to_string(), counts.clone()));

    let mut config = RemoteConfig::new(TOKEN);
    config.tls = Some(
        ClientTls::new(CA)
            .and_then(|tls| tls.server_name("localhost"))
            .expect("client tls"),
    );
    let locker = tokio::time::timeout(
        Duration::from_secs(5),
        RemoteLocker::connect(proxy_addr.to_string(), config),
    )
    .await
    .expect("connect ended in time")
    .expect("the token is the server's");
    assert!(locker.is_online(), "{:?}", locker.connect_error());
    // One call answered: the connection served a call before it idled.
    tokio::time::timeout(Duration::from_secs(5), locker.health())
        .await
        .expect("health answered in time")
        .expect("health answered");
    assert_eq!(counts.opened.load(Ordering::SeqCst), 1);

    // The server closes it after IDLE of silence (well within 5 s).
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while counts.ended.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the server did not close the idle connection"
    );

    // A second with no call: the locker stays online and opens nothing
    // (with the break, a reconnect within 100 ms, and more after it as
    // each new connection idles out).
    let mut offline_seen = false;
    for _ in 0..200 {
        offline_seen |= !locker.is_online();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let opened = counts.opened.load(Ordering::SeqCst);
    assert!(
        opened == 1 && !offline_seen,
        "after the server closed the idle TLS connection, the locker opened {} more \
         connection(s) with no call made, and read offline meanwhile: {offline_seen}",
        opened - 1
    );

    // The next call reopens it.
    tokio::time::timeout(Duration::from_secs(5), locker.health())
        .await
        .expect("health answered in time")
        .expect("health answered after the reopen");
}
