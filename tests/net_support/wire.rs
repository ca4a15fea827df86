//! Raw protocol bytes for tests that must misbehave on purpose: frames are
//! a 4-byte big-endian length and a postcard payload (src/net/wire.rs).
//! Encoded by hand, independently of the library, so that a test fails if
//! the encoding changes unnoticed.

#![allow(dead_code)]

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The protocol version these bytes follow.
pub const VERSION: u16 = 2;

/// `Op` variant indexes, in declaration order.
pub const OP_LOCK: u8 = 0;
pub const OP_RLOCK: u8 = 1;
pub const OP_UNLOCK: u8 = 2;
pub const OP_REFRESH: u8 = 4;
pub const OP_LIST: u8 = 6;
pub const OP_HEALTH: u8 = 7;

/// A length-prefixed frame around `payload`.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

/// postcard's unsigned varint: 7 bits a byte, least significant first.
pub fn varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

pub fn string(bytes: &[u8]) -> Vec<u8> {
    let mut out = varint(bytes.len() as u64);
    out.extend_from_slice(bytes);
    out
}

/// `Hello { version, token }`.
pub fn hello(version: u16, token: &[u8]) -> Vec<u8> {
    let mut out = varint(u64::from(version));
    out.extend(string(token));
    out
}

/// `Request { id, op }` for an op without arguments (List, Health).
pub fn request(id: u64, op: u8) -> Vec<u8> {
    let mut out = varint(id);
    out.push(op);
    out
}

/// `Request { id, op: Lock/Unlock(WireArgs) }`.
pub fn lock_request(id: u64, op: u8, uid: &str, resources: &[&str]) -> Vec<u8> {
    let mut out = request(id, op);
    out.extend(string(uid.as_bytes()));
    out.extend(varint(resources.len() as u64));
    for r in resources {
        out.extend(string(r.as_bytes()));
    }
    out.extend(string(b"raw-test"));
    out.extend(string(b"tests/net_support/wire.rs"));
    out.extend(varint(1));
    out
}

/// Reads one frame, at most `limit` bytes of payload.
pub async fn read_frame(stream: &mut TcpStream, limit: usize) -> io::Result<Vec<u8>> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await?;
    let len = u32::from_be_bytes(header) as usize;
    if len > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes"),
        ));
    }
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).await?;
    Ok(payload)
}

/// `Request { id, op }` with arguments of any size, for tests of limits.
pub fn args_request(
    id: u64,
    op: u8,
    uid: &[u8],
    resources: &[&[u8]],
    owner: &[u8],
    source: &[u8],
) -> Vec<u8> {
    let mut out = request(id, op);
    out.extend(string(uid));
    out.extend(varint(resources.len() as u64));
    for r in resources {
        out.extend(string(r));
    }
    out.extend(string(owner));
    out.extend(string(source));
    out.extend(varint(1));
    out
}

/// Connects and authenticates with `token`; returns the Welcome payload
/// (`[0, version, admin, validity secs.., validity nanos..]` when accepted).
pub async fn authenticate(addr: &str, token: &str) -> io::Result<(TcpStream, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(&frame(&hello(VERSION, token.as_bytes())))
        .await?;
    let welcome = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut stream, 4096))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no welcome"))??;
    Ok((stream, welcome))
}

/// Reads until the server closes the connection (EOF or reset) and returns
/// what it sent; an error if it is still open after `limit`.
pub async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Result<Vec<u8>, String> {
    let mut received = Vec::new();
    let read_all = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
                // A reset is the server closing with our bytes unread.
                Err(_) => return,
            }
        }
    };
    let finished = tokio::time::timeout(limit, read_all).await;
    match finished {
        Ok(()) => Ok(received),
        Err(_) => Err(format!("still open after {limit:?}")),
    }
}
