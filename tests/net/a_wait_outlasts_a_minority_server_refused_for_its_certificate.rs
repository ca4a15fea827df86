//! Reproduces a past break: a wait for a held lock failed at once with `Error::Tls` when one lock server of three, its connection closed for idleness, was reopened through an address that now answered with a certificate for other names, though the other two servers queued the wait and granted it once the holder let go.
//!
//! docs/lock-servers.md, what `connect_all` does when servers misbehave:
//! "TLS refused over a certificate (`Error::Tls`) is treated as a server
//! that is down, unless the servers that refuse leave too few for a write
//! quorum"; docs/guarantees.md, "Progress with a minority down": "A lock
//! is granted while a minority of lockers fail, hang or refuse".
//! `Error::Tls` (src/error.rs): "the locker keeps retrying, since a
//! server may be given a new certificate".
//!
//! The scene (real time, sockets and TLS; every wait bounded): three TLS
//! lock servers; the client reaches server 0 through a loopback proxy.
//! "x" (in process, on the servers' own tables) holds "res". Server 0
//! closes the client's idle connection (idle timeout 200 ms); the proxy
//! then sends new connections to another TLS server, whose certificate
//! (signed by the same CA) names other hosts: a server address routed to
//! another service for a while. The client's `lock_timeout(5 s)` of "res"
//! is queued by servers 1 and 2; its call to server 0 opens the
//! connection again (src/net/client/reopen.rs), meets the certificate
//! and fails with `Error::Tls`, which the wait takes as permanent
//! (src/lock/wait_round.rs, `permanent`, from `Error::is_retryable`) and
//! ends the whole wait with, 3 ms in (5 runs of 5). "x" lets go 1 s in;
//! servers 1 and 2 would grant the client then (and do, 1 s in, when the
//! proxy is left pointing at server 0: checked while writing this test).
//! In process, a locker whose calls fail with `Error::Tls` beside two
//! that answer makes `lock()` of a free name fail at once the same way.
#![cfg(feature = "tls")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{
    ClientTls, LockServer, RemoteConfig, RemoteLocker, ServerConfig, ServerTls,
};
use quorum_lock::{Dsync, Error, LocalLocker, NetLocker};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::certificate_naming_other_hosts::{CERT, KEY};
use crate::loopback;
use crate::tls_files::{CA, NODE_CERT, NODE_KEY};

const TOKEN: &str = "client-secret";

/// Serves `table` over TLS with `cert`, until the returned sender drops.
async fn serve(
    table: Arc<LocalLocker>,
    cert: &[u8],
    key: &[u8],
    idle: Option<Duration>,
) -> (std::net::SocketAddr, oneshot::Sender<()>) {
    let tls = ServerTls::from_pem(cert, key).expect("server tls");
    let mut config = ServerConfig::new(TOKEN).tls(tls);
    if idle.is_some() {
        config.idle_timeout = idle;
    }
    let server = LockServer::new(table, config).expect("valid config");
    let (bound, stop) = loopback::serve(server).await;
    (bound, stop)
}

/// Forwards each connection (at most 50) to `home`, or to `away` while
/// `rerouted` is set.
async fn proxy(listener: TcpListener, home: String, away: String, rerouted: Arc<AtomicBool>) {
    for _ in 0..50 {
        let Ok((mut client, _)) = listener.accept().await else {
            return;
        };
        let to = if rerouted.load(Ordering::SeqCst) {
            away.clone()
        } else {
            home.clone()
        };
        tokio::spawn(async move {
            if let Ok(mut upstream) = TcpStream::connect(&to).await {
                let _ = tokio::time::timeout(
                    Duration::from_secs(30),
                    tokio::io::copy_bidirectional(&mut client, &mut upstream),
                )
                .await;
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_outlasts_a_minority_server_refused_for_its_certificate() {
    let tables: Vec<Arc<LocalLocker>> = (0..3).map(|_| Arc::new(LocalLocker::new())).collect();
    let (home, _stop0) = serve(
        tables[0].clone(),
        NODE_CERT,
        NODE_KEY,
        Some(Duration::from_millis(200)),
    )
    .await;
    let (s1, _stop1) = serve(tables[1].clone(), NODE_CERT, NODE_KEY, None).await;
    let (s2, _stop2) = serve(tables[2].clone(), NODE_CERT, NODE_KEY, None).await;
    let (away, _stop_away) = serve(Arc::new(LocalLocker::new()), CERT, KEY, None).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let proxy_addr = listener.local_addr().expect("proxy address");
    let rerouted = Arc::new(AtomicBool::new(false));
    tokio::spawn(proxy(
        listener,
        home.to_string(),
        away.to_string(),
        rerouted.clone(),
    ));

    let mut config = RemoteConfig::new(TOKEN);
    config.connect_timeout = Duration::from_secs(2);
    config.tls = Some(
        ClientTls::new(CA)
            .and_then(|tls| tls.server_name("localhost"))
            .expect("client tls"),
    );
    let mut links: Vec<Arc<dyn NetLocker>> = Vec::new();
    for addr in [proxy_addr, s1, s2] {
        let locker = tokio::time::timeout(
            Duration::from_secs(5),
            RemoteLocker::connect(addr.to_string(), config.clone()),
        )
        .await
        .expect("connect ended in time")
        .expect("the token is the server's");
        assert!(locker.is_online(), "{addr}: {:?}", locker.connect_error());
        links.push(Arc::new(locker));
    }
    let w = Dsync::builder(links)
        .owner("w")
        .build()
        .expect("valid coordinator");
    let x = Dsync::builder(
        tables
            .iter()
            .map(|t| t.clone() as Arc<dyn NetLocker>)
            .collect(),
    )
    .owner("x")
    .build()
    .expect("valid coordinator");
    let held = x
        .rw_mutex(["res"])
        .unwrap()
        .lock()
        .await
        .expect("x holds res");

    // Server 0 closes w's idle connection; new ones go elsewhere from here.
    tokio::time::sleep(Duration::from_millis(600)).await;
    rerouted.store(true, Ordering::SeqCst);

    let mutex = w.rw_mutex(["res"]).unwrap();
    let wait = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let got = mutex.lock_timeout(Duration::from_secs(5)).await;
        (got.map(|g| g.granted_by()), started.elapsed())
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let early = wait.is_finished();
    held.unlock().await.expect("x lets go");
    let (got, took) = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the wait ended in time")
        .expect("the wait task ended");
    eprintln!("w's lock_timeout gave {got:?} after {took:?} (ended before x let go: {early})");
    assert!(
        !matches!(got, Err(Error::Tls { .. })),
        "only server 0 of 3 refused w (its certificate), servers 1 and 2 queued the wait and \
         x let go 1 s in, yet w's lock_timeout(5s) failed after {took:?} with {got:?}"
    );
    assert!(
        got.is_ok(),
        "servers 1 and 2 grant w once x let go: {got:?}"
    );
}
