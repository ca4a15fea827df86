//! Reproduces a past break: a MySQL server (or whoever answers for it with TLS off) that refuses the session statement of a connection a MySQL locker's doorbell ring opens has its words logged whole, password and escape sequences included, since the ring runs in a task outside the locker's masking.
//!
//! docs/sql.md, "Credentials and TLS": the password is "never shown:
//! `endpoint()`, errors, logs and `Debug`"; a password the database quotes
//! back is shown as `***`; "any other event of the driver's whose words
//! quote a secret, hold a control character or run over 2 KiB (a database
//! error it logs, say: sqlx logs a failed session statement of a new
//! connection with the server's words, on MySQL and MariaDB as on
//! PostgreSQL)" is logged masked, escaped and cut. The section names as
//! not covered only an application without a tracing subscriber, the ping
//! with which the driver puts a connection back into its pool, and the
//! `UNLISTEN` of a dropped listener.
//!
//! What happens instead: a call that passes a turn on rings the waiters'
//! doorbells from a task of its own (`src/sql/doorbell.rs`, `ring`, a
//! `tokio::spawn`) that runs the doorbell procedure through the locker's
//! pool outside its masking. When the pool opens a connection for it, its
//! session statements run in the driver's `after_connect` hook, and a
//! refusal is logged by the driver at ERROR (`error returned from
//! after_connect`) as the server wrote it, once per attempt until the
//! call timeout.
//!
//! Set-up: a real MariaDB; locker A (pool of one connection) reaches it
//! through a loopback proxy, locker B directly. A holds `res` and `res2`
//! (two names: a release of one name on MariaDB is one stored procedure
//! call, which rings in the database), B waits in line for `res`. Then the proxy turns hostile: a ping is refused with plain words
//! (so the driver closes A's only connection as it puts it back), and the
//! first statement after the login of any new connection is refused with
//! words quoting the password, a terminal escape and a line break. A
//! releases both names: the release commits on A's connection, and the ring's
//! connection is refused. (The locker keeps a connection for its next
//! call rather than give it back to the pool, which would ping it: so the
//! proxy also closes A's connection after that commit, and the ring, which
//! takes the kept connection first, finds it closed and opens another.)
#![cfg(feature = "mysql")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker, Timeouts};

use crate::log_capture::Capture;
use crate::sql_support::{MariaServer, MARIA_PASSWORD};

/// The hostile refusal: the password, a terminal title, a line break and
/// a forged line.
fn refusal() -> String {
    format!("denied for quorum with {MARIA_PASSWORD}\u{1b}]0;owned\u{7}\n2026-12-01 ERROR forged")
}

/// Reads one packet of the client's: its header and body.
fn read_packet(stream: &mut TcpStream) -> Option<([u8; 4], Vec<u8>)> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut body = vec![0; len];
    stream.read_exact(&mut body).ok()?;
    Some((header, body))
}

/// An ERR packet answering the packet of sequence id `seq`.
fn err_packet(seq: u8, message: &str) -> Vec<u8> {
    let mut body = vec![0xff];
    body.extend(1227u16.to_le_bytes());
    body.extend(b"#42000");
    body.extend(message.as_bytes());
    let len = (body.len() as u32).to_le_bytes();
    let mut out = vec![len[0], len[1], len[2], seq.wrapping_add(1)];
    out.extend(body);
    out
}

/// A proxy to `upstream` that passes everything until `hostile` is set;
/// then it refuses pings, closes a connection accepted before at its
/// first command after a `COMMIT` (as a server that went away would), and
/// a connection accepted after that has every statement after the
/// driver's own `SET sql_mode` refused with [`refusal`]. Bounded: 64
/// connections, reads end with their sockets.
fn proxy(upstream: SocketAddr, hostile: Arc<AtomicBool>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for client in listener.incoming().take(64) {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let born_hostile = hostile.load(Ordering::SeqCst);
            let hostile = hostile.clone();
            let to_client = Arc::new(Mutex::new(client.try_clone().expect("clone")));
            let (mut from_server, back) = (server.try_clone().expect("clone"), to_client.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let Ok(n) = from_server.read(&mut buf) else {
                        return;
                    };
                    if n == 0 || back.lock().unwrap().write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
            let (mut from_client, mut to_server) = (client, server);
            std::thread::spawn(move || {
                // The handshake response, then commands.
                let (mut logged_in, mut committed) = (false, false);
                while let Some((header, body)) = read_packet(&mut from_client) {
                    let command = body.first().copied();
                    let now_hostile = hostile.load(Ordering::SeqCst);
                    if logged_in && now_hostile && !born_hostile && committed {
                        break;
                    }
                    if now_hostile
                        && command == Some(0x03)
                        && body[1..].eq_ignore_ascii_case(b"COMMIT")
                    {
                        committed = true;
                    }
                    if logged_in && now_hostile && command == Some(0x0e) {
                        let _ = to_client
                            .lock()
                            .unwrap()
                            .write_all(&err_packet(header[3], "ping refused"));
                        continue;
                    }
                    if logged_in
                        && born_hostile
                        && command == Some(0x03)
                        && !body[1..].starts_with(b"SET sql_mode")
                    {
                        let _ = to_client
                            .lock()
                            .unwrap()
                            .write_all(&err_packet(header[3], &refusal()));
                        continue;
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

fn node(url: &str, owner: &str, pool_size: u32) -> Dsync {
    let locker = SqlLocker::new(
        url,
        SqlConfig {
            table_prefix: "bell_".to_owned(),
            validity: Duration::from_secs(60),
            quarantine: Duration::ZERO,
            call_timeout: Duration::from_secs(2),
            poll_interval: Duration::from_secs(30),
            pool_size,
            ..SqlConfig::default()
        },
    )
    .expect("a URL");
    Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
        .owner(owner)
        .timeouts(Timeouts {
            wait_recheck: Duration::from_secs(20),
            ..Timeouts::default()
        })
        .build()
        .expect("a client")
}

#[tokio::test]
async fn a_refusal_of_a_connection_a_doorbell_ring_opens_is_not_logged_raw() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let (logs, _guard) = Capture::install();
    let hostile = Arc::new(AtomicBool::new(false));
    let upstream: SocketAddr = format!("127.0.0.1:{}", server.port())
        .parse()
        .expect("addr");
    let via = proxy(upstream, hostile.clone());
    let direct = format!("{}?ssl-mode=disabled", server.url());
    let proxied = format!("mysql://quorum:{MARIA_PASSWORD}@{via}/quorum?ssl-mode=disabled");
    let holder = node(&proxied, "holder", 1);
    let waiter = node(&direct, "waiter", 4);
    let held = tokio::time::timeout(
        Duration::from_secs(20),
        holder.rw_mutex(["res", "res2"]).expect("names").lock(),
    )
    .await
    .expect("bounded")
    .expect("res held");
    let mutex = waiter.rw_mutex(["res"]).expect("a name");
    let wait = tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(10)).await });
    // In line, and its doorbell asleep, by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    hostile.store(true, Ordering::SeqCst);
    let _ = tokio::time::timeout(Duration::from_secs(10), held.unlock()).await;
    // The ring's attempts run within the call timeout (2 s).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _ = tokio::time::timeout(Duration::from_secs(15), wait).await;
    let lines = logs.lines();
    let quoting: Vec<&String> = lines.iter().filter(|l| l.contains("denied")).collect();
    assert!(
        !quoting.is_empty(),
        "the hostile refusal was never logged (no ring opened a connection?): {lines:#?}"
    );
    for line in &quoting {
        assert!(
            !line.contains(MARIA_PASSWORD) && !line.chars().any(|c| c.is_control()),
            "a log line ({} such lines) quotes the database's refusal unmasked and unescaped: \
             {line:?}",
            quoting.len()
        );
    }
}
