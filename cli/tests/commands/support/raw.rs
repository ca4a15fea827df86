//! Connections that speak the wire protocol by hand, for tests that play
//! a client (or an attacker) below the command line.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::wire::{frame, hello, lock_request, OP_LOCK, VERSION};
use super::TOKEN;

/// One frame's payload; `None` when the connection ends or sends a frame
/// of 64 KiB or more first.
pub fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_be_bytes(header) as usize;
    if len >= 1 << 16 {
        return None;
    }
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).ok()?;
    Some(payload)
}

/// A connection that presented `token` and was accepted.
pub fn authenticated(addr: SocketAddr, token: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    stream
        .write_all(&frame(&hello(VERSION, token.as_bytes())))
        .expect("send the handshake");
    let welcome = read_frame(&mut stream).expect("a welcome");
    assert_eq!(welcome.first(), Some(&0), "not accepted");
    stream
}

/// A client-token connection that holds a lock on `held-{i}`, so that no
/// idle timeout closes it.
pub fn holder(addr: SocketAddr, i: usize) -> TcpStream {
    let mut stream = authenticated(addr, TOKEN);
    let uid = format!("00000000-0000-4000-8000-{i:012}");
    let name = format!("held-{i}");
    stream
        .write_all(&frame(&lock_request(1, OP_LOCK, &uid, &[&name])))
        .expect("send the lock");
    let _ = read_frame(&mut stream);
    stream
}
