//! The admin reserve at its edge value `--admin-reserve 0`: the
//! `--admin-reserve` help says the reserve is kept "so that `status` and
//! `locks` with the admin token get in however many clients are
//! connected", and docs/lock-servers.md ("Connection slots") says the same
//! of the admin token. A server that accepts a reserve of 0 cannot keep
//! that promise; it should refuse the value, or let the admin in anyway.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::support::wire::{frame, hello, lock_request, OP_LOCK, VERSION};
use crate::support::{cli, Scratch, Server, TOKEN};

fn read_frame(stream: &mut TcpStream) -> Vec<u8> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).expect("a frame header");
    let len = u32::from_be_bytes(header) as usize;
    assert!(len < 1 << 16, "frame of {len} bytes");
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).expect("a frame");
    payload
}

/// A client-token connection that holds a lock, so that no idle timeout
/// closes it.
fn holder(addr: SocketAddr, i: usize) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(&frame(&hello(VERSION, TOKEN.as_bytes())))
        .unwrap();
    let welcome = read_frame(&mut stream);
    assert_eq!(welcome.first(), Some(&0), "holder {i} not accepted");
    let uid = format!("00000000-0000-4000-8000-{i:012}");
    let name = format!("held-{i}");
    stream
        .write_all(&frame(&lock_request(1, OP_LOCK, &uid, &[&name])))
        .unwrap();
    let _ = read_frame(&mut stream);
    stream
}

/// `quorum-lock status` with the admin token: its exit code and stderr.
fn admin_status(dir: &Scratch, addr: SocketAddr) -> (Option<i32>, String) {
    let node = addr.to_string();
    let admin = dir.admin();
    let status = cli(
        dir,
        &["status", "--nodes", &node, "--admin-token-file", &admin],
        &[],
        Duration::from_secs(20),
    );
    (status.code, status.stderr.trim().to_owned())
}

#[test]
fn with_an_admin_reserve_of_zero_the_admin_gets_in_or_the_server_refuses_the_setting() {
    let dir = Scratch::new("admin-reserve-zero");
    let started = Server::try_start(
        &dir,
        "127.0.0.1:0",
        "60s",
        &[
            "--max-connections",
            "2",
            "--admin-reserve",
            "0",
            "--no-quarantine",
        ],
    );
    let Ok(server) = started else {
        // Refusing a reserve that cannot keep its promise is fine.
        return;
    };
    let holders: Vec<TcpStream> = (0..2).map(|i| holder(server.addr, i)).collect();
    let (code, stderr) = admin_status(&dir, server.addr);
    drop(holders);
    assert_eq!(
        code,
        Some(0),
        "the server accepted --admin-reserve 0, and with its 2 client slots held the \
         admin's status was kept out: {stderr}\nserver log: {}",
        server.log_text()
    );
}
