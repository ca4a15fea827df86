//! An admin command whose first connection the server closes in the
//! handshake (as a server at its connection limit does to make room under
//! a flood) takes the next one instead of reporting the server
//! unreachable. Reproduces a flake of `admin_reserve_under_flood` on a loaded
//! machine, where the admin's first connection was closed at the door.

use std::io::{copy, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::support::{cli, Scratch, Server};

/// A loopback proxy to `target` that closes the first `close` connections
/// as soon as it has read a byte of them, and forwards the rest. Serves
/// at most 8 connections.
fn closing_proxy(target: SocketAddr, close: usize) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let addr = listener.local_addr().expect("its address");
    let proxy = std::thread::spawn(move || {
        for (i, stream) in listener.incoming().take(8).enumerate() {
            let Ok(mut client) = stream else { continue };
            if i < close {
                let _ = client.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = client.read(&mut [0u8; 1]);
                let _ = client.shutdown(Shutdown::Both);
                continue;
            }
            let Ok(server) = TcpStream::connect(target) else {
                continue;
            };
            let (mut up_from, mut up_to) = (client.try_clone().expect("clone"), server);
            let (mut down_from, mut down_to) = (up_to.try_clone().expect("clone"), client);
            std::thread::spawn(move || {
                let _ = copy(&mut up_from, &mut up_to);
                let _ = up_to.shutdown(Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = copy(&mut down_from, &mut down_to);
                let _ = down_to.flush();
                let _ = down_to.shutdown(Shutdown::Write);
            });
        }
    });
    (addr, proxy)
}

#[test]
fn status_takes_the_next_connection_after_one_closed_in_the_handshake() {
    let dir = Scratch::new("status-closed-in-handshake");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let (proxy, _proxy) = closing_proxy(server.addr, 1);
    let node = proxy.to_string();
    let admin = dir.admin();
    let status = cli(
        &dir,
        &["status", "--nodes", &node, "--admin-token-file", &admin],
        &[],
        Duration::from_secs(20),
    );
    assert_eq!(status.code, Some(0), "{status:?}");
    assert!(status.stdout.contains(&node), "{status:?}");
}
