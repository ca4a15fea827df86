//! The admin token gets in over TLS while every client slot is held and
//! peers without a token keep opening connections that never start TLS.
#![cfg(feature = "tls")]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::{
    ClientTls, LockServer, RemoteConfig, RemoteLocker, ServerConfig, ServerTls,
};
use quorum_lock::{LocalLocker, LockArgs, NetLocker};

use crate::loopback;

/// How often the admin asks for the status during the flood.
const ATTEMPTS: usize = 30;
const TOKEN: &str = "client-secret";
const ADMIN: &str = "admin-secret";
/// A self-signed certificate for localhost and 127.0.0.1.
const CERT: &[u8] = include_bytes!("../data/test-cert.pem");
const KEY: &[u8] = include_bytes!("../data/test-key.pem");

/// Opens plain TCP connections to `port`, 64 attempts in flight at any
/// time, never sending a byte and keeping the newest 32 open; at most
/// 100,000 connections or 20 s.
fn flood(port: u16, stop: Arc<AtomicBool>, opened: Arc<AtomicU64>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let started = Instant::now();
        let mut open = VecDeque::new();
        let mut attempts = tokio::task::JoinSet::new();
        for _ in 0..100_000 {
            if stop.load(Ordering::Acquire) || started.elapsed() > Duration::from_secs(20) {
                break;
            }
            while attempts.len() < 64 {
                attempts.spawn(tokio::net::TcpStream::connect(("127.0.0.1", port)));
            }
            if let Some(Ok(Ok(stream))) = attempts.join_next().await {
                opened.fetch_add(1, Ordering::Relaxed);
                open.push_back(stream);
                if open.len() > 32 {
                    open.pop_front();
                }
            }
        }
        attempts.abort_all();
    });
}

/// Every client slot held, two peers flooding: how often the admin's
/// status call was refused, and how many connections the flood opened.
async fn admin_during_flood(tls: bool) -> (Vec<String>, u64) {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    if tls {
        config = config.tls(ServerTls::from_pem(CERT, KEY).expect("server tls"));
    }
    config.max_connections = 1;
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let (bound, stop_server) = loopback::serve(server).await;
    let endpoint = format!("127.0.0.1:{}", bound.port());
    let tls_config = |token: &str| {
        let mut config = RemoteConfig::new(token);
        if tls {
            config.tls = Some(ClientTls::new(CERT).expect("client tls"));
        }
        config
    };

    // One client holds a lock on the only client slot.
    let holder = RemoteLocker::connect(endpoint.clone(), tls_config(TOKEN))
        .await
        .expect("connect");
    let held = LockArgs {
        uid: "u".into(),
        resources: vec!["held".to_string()].into(),
        owner: "holder".into(),
        source: "tests/net".into(),
        quorum: 1,
    };
    assert!(holder.lock(&held).await.unwrap());

    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    // Two peers flood at once.
    let flooders: Vec<_> = (0..2)
        .map(|_| {
            let (stop, opened) = (stop.clone(), opened.clone());
            let port = bound.port();
            std::thread::spawn(move || flood(port, stop, opened))
        })
        .collect();
    // Let the flood fill the slots first.
    while opened.load(Ordering::Relaxed) < 500 && !flooders.iter().all(|f| f.is_finished()) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // An attempt is the admin's `status` with one try more on a fresh
    // connection when the first was turned away at the door (a reset in
    // the handshake), as `quorum-lock status` does: a flood may delay the
    // admin, not keep it out.
    let mut refusals = Vec::new();
    for _ in 0..ATTEMPTS {
        let mut refused = None;
        for _ in 0..2 {
            let admin = RemoteLocker::connect(endpoint.clone(), tls_config(ADMIN))
                .await
                .expect("connect as admin");
            match admin.status().await {
                Ok(_) => {
                    refused = None;
                    break;
                }
                Err(err) => refused = Some(err.to_string()),
            }
        }
        refusals.extend(refused);
    }
    stop.store(true, Ordering::Release);
    for flooder in flooders {
        flooder.join().expect("flood thread");
    }
    let _ = stop_server.send(());
    let opened = opened.load(Ordering::Relaxed);
    assert!(opened >= 500, "the flood opened only {opened} connections");
    (refusals, opened)
}

fn check(refusals: &[String], opened: u64) {
    // A flood may delay the admin, but not keep it out: at most one
    // attempt in ten may be refused.
    assert!(
        refusals.len() <= ATTEMPTS / 10,
        "the admin was refused {} of {ATTEMPTS} times during a flood of {opened} connections; \
         the first: {:?}",
        refusals.len(),
        refusals.first()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_gets_in_over_tls_during_a_flood_of_connections_that_never_start_tls() {
    let (refusals, opened) = admin_during_flood(true).await;
    check(&refusals, opened);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_gets_in_during_a_flood_of_connections_that_send_nothing() {
    let (refusals, opened) = admin_during_flood(false).await;
    check(&refusals, opened);
}
