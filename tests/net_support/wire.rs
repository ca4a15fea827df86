//! Raw protocol bytes for tests that must misbehave on purpose: frames are
//! a 4-byte big-endian length and a postcard payload (src/net/wire.rs).
//! Encoded by hand, independently of the library, so that a test fails if
//! the encoding changes unnoticed.

#![allow(dead_code)]

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The protocol version these bytes follow unless a test says otherwise:
/// a version-2 client, as every client before version 3 was.
pub const VERSION: u16 = 2;

/// The version with waiting locks, pushes and fencing tokens.
pub const VERSION_3: u16 = 3;

/// The version with `Status`.
pub const VERSION_4: u16 = 4;

/// The version with leader election: `Proclaim`, `Leader`, `Changed`.
pub const VERSION_5: u16 = 5;

/// The version with listings in pages: `ListPage`, `LocksPage`.
pub const VERSION_6: u16 = 6;

/// `Op` variant indexes, in declaration order.
pub const OP_LOCK: u8 = 0;
pub const OP_RLOCK: u8 = 1;
pub const OP_UNLOCK: u8 = 2;
pub const OP_RUNLOCK: u8 = 3;
pub const OP_REFRESH: u8 = 4;
pub const OP_FORCE_UNLOCK: u8 = 5;
pub const OP_LIST: u8 = 6;
pub const OP_HEALTH: u8 = 7;
/// Version 3.
pub const OP_LOCK_WAIT: u8 = 8;
pub const OP_FENCE: u8 = 9;
/// Version 4.
pub const OP_STATUS: u8 = 10;
/// Version 5.
pub const OP_PROCLAIM: u8 = 11;
pub const OP_LEADER: u8 = 12;
/// Version 6.
pub const OP_LIST_PAGE: u8 = 13;

/// `Reply` variant indexes.
pub const REPLY_BOOL: u8 = 0;
pub const REPLY_HEALTH: u8 = 2;
pub const REPLY_ERROR: u8 = 3;
/// Version 3.
pub const REPLY_WAIT: u8 = 4;
pub const REPLY_FENCE: u8 = 5;
pub const REPLY_PUSH: u8 = 6;
/// Version 4.
pub const REPLY_STATUS: u8 = 7;
/// Version 5.
pub const REPLY_LEADER: u8 = 8;
/// Version 6.
pub const REPLY_LOCKS_PAGE: u8 = 9;

/// `ErrorKind` variant indexes.
pub const KIND_INVALID_ARGUMENT: u8 = 0;
pub const KIND_UNAVAILABLE: u8 = 2;

/// `WaitReply` and `PushEvent` variant indexes.
pub const GRANTED: u8 = 0;
pub const QUEUED: u8 = 1;
pub const REFUSED: u8 = 2;
pub const WOUNDED: u8 = 1;
/// Version 5.
pub const CHANGED: u8 = 2;

/// postcard's `Duration`: seconds as a varint, then nanoseconds.
pub fn duration(d: Duration) -> Vec<u8> {
    let mut out = varint(d.as_secs());
    out.extend(varint(u64::from(d.subsec_nanos())));
    out
}

/// `Request { id, op: LockWait { args, mode, ticket, place_ttl, push } }`
/// for a write lock.
pub fn lock_wait_request(
    id: u64,
    uid: &str,
    resources: &[&str],
    ticket: (u64, u64),
    place_ttl: Duration,
    push: bool,
) -> Vec<u8> {
    wait_request(1, id, uid, resources, ticket, place_ttl, push)
}

/// [`lock_wait_request`] for a read lock.
pub fn read_wait_request(
    id: u64,
    uid: &str,
    resources: &[&str],
    ticket: (u64, u64),
    place_ttl: Duration,
    push: bool,
) -> Vec<u8> {
    wait_request(0, id, uid, resources, ticket, place_ttl, push)
}

/// A wait in `mode` (0 `Mode::Read`, 1 `Mode::Write`).
fn wait_request(
    mode: u8,
    id: u64,
    uid: &str,
    resources: &[&str],
    ticket: (u64, u64),
    place_ttl: Duration,
    push: bool,
) -> Vec<u8> {
    let mut out = lock_request(id, OP_LOCK_WAIT, uid, resources);
    out.push(mode);
    out.extend(varint(ticket.0));
    out.extend(varint(ticket.1));
    out.extend(duration(place_ttl));
    out.push(u8::from(push));
    out
}

/// `Request { id, op: Proclaim { args, proclamation: { term, seq, value } } }`.
pub fn proclaim_request(
    id: u64,
    uid: &str,
    resources: &[&str],
    term: u64,
    seq: u64,
    value: &[u8],
) -> Vec<u8> {
    let mut out = lock_request(id, OP_PROCLAIM, uid, resources);
    out.extend(varint(term));
    out.extend(varint(seq));
    out.extend(string(value));
    out
}

/// `Request { id, op: Leader { args, watch } }`.
pub fn leader_request(id: u64, uid: &str, resources: &[&str], watch: Option<Duration>) -> Vec<u8> {
    let mut out = lock_request(id, OP_LEADER, uid, resources);
    match watch {
        Some(ttl) => {
            out.push(1);
            out.extend(duration(ttl));
        }
        None => out.push(0),
    }
    out
}

/// Reads a varint at the front of `bytes`; the value and the rest.
pub fn read_varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, &bytes[i + 1..]));
        }
    }
    None
}

/// Splits a `Response` payload into its id and the reply's bytes.
pub fn response(payload: &[u8]) -> (u64, &[u8]) {
    read_varint(payload).expect("a response id")
}

/// `Welcome::Accepted { version, admin: false, validity }`.
pub fn accepted(version: u16, validity: Duration) -> Vec<u8> {
    let mut out = vec![0];
    out.extend(varint(u64::from(version)));
    out.push(0);
    out.extend(duration(validity));
    out
}

/// `Welcome::Rejected { reason }`.
pub fn rejected(reason: &str) -> Vec<u8> {
    let mut out = vec![1];
    out.extend(string(reason.as_bytes()));
    out
}

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
    authenticate_as(addr, token, VERSION).await
}

/// [`authenticate`] offering protocol `version`.
pub async fn authenticate_as(
    addr: &str,
    token: &str,
    version: u16,
) -> io::Result<(TcpStream, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(&frame(&hello(version, token.as_bytes())))
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

/// Sends `payload` (a request of id `id`) and reads its reply, within 5 s:
/// the reply's body, after the id, which must be `id`.
pub async fn call(stream: &mut TcpStream, id: u64, payload: &[u8]) -> Vec<u8> {
    stream.write_all(&frame(payload)).await.expect("sent");
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(stream, 64 * 1024))
        .await
        .expect("answered in time")
        .expect("a reply");
    let (got, body) = response(&reply);
    assert_eq!(got, id);
    body.to_vec()
}
