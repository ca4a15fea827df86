//! A call keeps its connection for the next call rather than hand it back
//! to the pool (src/sql/store/warm.rs).
//!
//! Reproduces a past break: every connection a call gave back to the pool
//! was pinged by the driver (sqlx 0.8 tests each connection it takes
//! back with a round trip of its own), one round trip more per call for
//! the server and the client: a lock and its unlock of a free name were
//! four round trips where the statements needed two. A loopback proxy
//! between a MariaDB locker and a real MariaDB counts the client's
//! commands by kind (the first byte of each packet's body after the
//! login: `COM_PING` is 0x0e).
//!
//! And what keeping must not cost: a connection left unused goes back to
//! the pool after 10 s whatever calls the locker made (a review found that
//! only lockers that had locked, whose background task did it, gave theirs
//! back), and one connection serves many tasks at once.
#![cfg(feature = "mysql")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_support::{MariaServer, PgServer};

/// Reads one packet of the client's: its header and body.
fn read_packet(stream: &mut TcpStream) -> Option<([u8; 4], Vec<u8>)> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut body = vec![0; len];
    stream.read_exact(&mut body).ok()?;
    Some((header, body))
}

/// What the proxy saw the clients send after their logins.
#[derive(Default)]
struct Seen {
    pings: AtomicUsize,
    commands: AtomicUsize,
}

/// A proxy to `upstream` that passes everything and counts the commands
/// of each connection after its login. Bounded: 64 connections, reads
/// end with their sockets.
fn counting_proxy(upstream: SocketAddr, seen: Arc<Seen>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for client in listener.incoming().take(64) {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let (mut from_server, mut to_client) = (
                server.try_clone().expect("clone"),
                client.try_clone().expect("clone"),
            );
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let Ok(n) = from_server.read(&mut buf) else {
                        return;
                    };
                    if n == 0 || to_client.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
            let (mut from_client, mut to_server, seen) = (client, server, seen.clone());
            std::thread::spawn(move || {
                // The handshake response first, then commands.
                let mut logged_in = false;
                while let Some((header, body)) = read_packet(&mut from_client) {
                    if logged_in {
                        seen.commands.fetch_add(1, Ordering::SeqCst);
                        if body.first() == Some(&0x0e) {
                            seen.pings.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    logged_in = true;
                    let mut whole = header.to_vec();
                    whole.extend(body);
                    if to_server.write_all(&whole).is_err() {
                        return;
                    }
                }
                let _ = to_server.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    addr
}

/// The URL of `server` through a new counting proxy, and what it counts.
fn through_a_counting_proxy(server: &MariaServer) -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let upstream: SocketAddr = format!("127.0.0.1:{}", server.port())
        .parse()
        .expect("addr");
    let via = counting_proxy(upstream, seen.clone());
    let url = server.url().replace(
        &format!(":{}/", server.port()),
        &format!(":{}/", via.port()),
    );
    assert_ne!(url, server.url(), "the URL goes through the proxy");
    (url, seen)
}

fn args(uid: &str, name: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![name.to_owned()].into(),
        owner: "test".into(),
        source: "tests/sql/kept_connections.rs".into(),
        quorum: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_and_unlocks_on_mariadb_send_no_ping_between_them() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let (url, seen) = through_a_counting_proxy(&server);
    let locker = SqlLocker::connect(
        &url,
        SqlConfig {
            table_prefix: "noping_".to_owned(),
            validity: Duration::from_secs(60),
            quarantine: Duration::ZERO,
            call_timeout: Duration::from_secs(5),
            ..SqlConfig::default()
        },
    )
    .await
    .expect("a database");
    // Set-up (tables, procedures) and a first call out of the count.
    assert!(locker.lock(&args("warm", "warm-up")).await.expect("a lock"));
    assert!(locker
        .unlock(&args("warm", "warm-up"))
        .await
        .expect("an unlock"));
    // The driver pings from a task of its own after the call returns: let
    // any ping of the warm-up reach the proxy before counting.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (pings, commands) = (
        seen.pings.load(Ordering::SeqCst),
        seen.commands.load(Ordering::SeqCst),
    );
    for i in 0..20 {
        let call = args(&format!("u{i}"), &format!("free-{i}"));
        assert!(locker.lock(&call).await.expect("a lock"));
        assert!(locker.unlock(&call).await.expect("an unlock"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pinged = seen.pings.load(Ordering::SeqCst) - pings;
    let sent = seen.commands.load(Ordering::SeqCst) - commands;
    assert_eq!(
        pinged, 0,
        "20 locks and unlocks of free names sent {pinged} pings among {sent} commands"
    );
    // Two statements per lock and unlock, one round trip each; a prepared
    // statement's preparation (the first of each) aside.
    assert!(
        sent <= 2 * 20 + 4,
        "20 locks and unlocks of free names sent {sent} commands"
    );
}

/// A locker whose only calls are releases (no lock: the background task
/// that polls waiters never starts) hands its kept connection back to the
/// pool after 10 s unused, where the pool tests it (a ping through the
/// proxy) and its idle timeout applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_left_unused_goes_back_to_the_pool_whatever_calls_the_locker_made() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let (url, seen) = through_a_counting_proxy(&server);
    let mut settings = config("idle_", Duration::from_secs(60), Duration::ZERO);
    settings.pool_size = 4;
    let locker = SqlLocker::connect(&url, settings)
        .await
        .expect("a database");
    // The first release sets the tables up.
    let nobody = args("nobody", "never-locked");
    assert!(!locker.unlock(&nobody).await.expect("an unlock"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = seen.pings.load(Ordering::SeqCst);
    assert!(!locker.unlock(&nobody).await.expect("an unlock"));
    tokio::time::sleep(Duration::from_millis(11_500)).await;
    let pings = seen.pings.load(Ordering::SeqCst) - before;
    assert!(
        pings >= 1,
        "11.5 s after its last call the locker's connection was never given back to the pool \
         ({pings} pings among {} commands)",
        seen.commands.load(Ordering::SeqCst)
    );
}

/// One connection, eight tasks locking and unlocking names of their own
/// and one shared name at once: every call is served (takers and keepers
/// racing on the one connection never leave it kept while a call waits
/// for the pool).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_serves_many_tasks_at_once() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let mut settings = config("one_conn_", Duration::from_secs(60), Duration::ZERO);
    settings.pool_size = 1;
    // Each call may wait for the seven others' turns on the one connection:
    // a call timeout that a busy machine cannot reach.
    settings.call_timeout = Duration::from_secs(5);
    let locker = Arc::new(
        SqlLocker::connect(&server.url(), settings)
            .await
            .expect("a database"),
    );
    let mut tasks = Vec::new();
    for t in 0..8 {
        let locker = locker.clone();
        tasks.push(tokio::spawn(async move {
            let mut failed = Vec::new();
            for i in 0..25 {
                let own = args(&format!("t{t}-{i}"), &format!("own-{t}-{i}"));
                if let Err(err) = locker.lock(&own).await {
                    failed.push(format!("lock {t}/{i}: {err}"));
                }
                if let Err(err) = locker.unlock(&own).await {
                    failed.push(format!("unlock {t}/{i}: {err}"));
                }
                let shared = args(&format!("s{t}-{i}"), "shared");
                match locker.lock(&shared).await {
                    Ok(true) => {
                        if let Err(err) = locker.unlock(&shared).await {
                            failed.push(format!("unlock shared {t}/{i}: {err}"));
                        }
                    }
                    Ok(false) => {}
                    Err(err) => failed.push(format!("lock shared {t}/{i}: {err}")),
                }
            }
            failed
        }));
    }
    let mut failed = Vec::new();
    for task in tasks {
        failed.extend(task.await.expect("a task"));
    }
    assert!(
        failed.is_empty(),
        "{} calls failed: {failed:#?}",
        failed.len()
    );
}
