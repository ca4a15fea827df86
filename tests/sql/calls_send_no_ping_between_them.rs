//! Reproduces a past break: every connection a call gave back to the pool
//! was pinged by the driver (sqlx 0.8 tests each connection it takes
//! back with a round trip of its own), one round trip more per call for
//! the server and the client: a lock and its unlock of a free name were
//! four round trips where the statements needed two.
//!
//! A loopback proxy between a MariaDB locker and a real MariaDB counts the
//! client's commands by kind (the first byte of each packet's body after
//! the login: `COM_PING` is 0x0e).
#![cfg(feature = "mysql")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::sql_support::MariaServer;

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

fn args(uid: &str, name: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![name.to_owned()].into(),
        owner: "test".into(),
        source: "tests/sql/calls_send_no_ping_between_them.rs".into(),
        quorum: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_and_unlocks_on_mariadb_send_no_ping_between_them() {
    let Some(server) = MariaServer::start() else {
        return;
    };
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
