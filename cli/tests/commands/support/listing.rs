//! A stand-in lock server for the listing scenes: on a loopback port, in
//! raw frames of protocol version 5, it welcomes any token as an admin
//! and lists one write lock of "reports" with the owner and source a
//! scene chooses (a node's hostile or oversized text). Threads end with
//! their connection; every read is bounded in time.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use super::wire::{
    duration, frame, read_varint, string, varint, OP_HEALTH, OP_LIST, OP_STATUS, REPLY_ERROR,
    REPLY_HEALTH, REPLY_STATUS,
};

/// `Reply::Locks` variant index.
const REPLY_LOCKS: u8 = 1;
/// `ErrorKind::Unavailable`.
const KIND_UNAVAILABLE: u8 = 2;

/// Starts the stand-in, serving at most 8 connections (each command makes
/// one or two), and returns its address.
pub fn listing_server(owner: String, source: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
    let node = listener.local_addr().expect("its address").to_string();
    let lock = Arc::new((owner, source));
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(stream) = stream else { continue };
            let lock = lock.clone();
            std::thread::spawn(move || serve(stream, &lock.0, &lock.1));
        }
    });
    node
}

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_be_bytes(header) as usize;
    if len > 1 << 20 {
        return None;
    }
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).ok()?;
    Some(payload)
}

fn serve(mut stream: TcpStream, owner: &str, source: &str) -> Option<()> {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    read_frame(&mut stream)?;
    // Accepted { version: 5, admin: true, validity: 6s }.
    let mut welcome = vec![0];
    welcome.extend(varint(5));
    welcome.push(1);
    welcome.extend(duration(Duration::from_secs(6)));
    stream.write_all(&frame(&welcome)).ok()?;
    for _ in 0..16 {
        let request = read_frame(&mut stream)?;
        let (id, rest) = read_varint(&request)?;
        let mut reply = varint(id);
        match rest.first().copied() {
            Some(OP_LIST) => {
                reply.push(REPLY_LOCKS);
                reply.extend(varint(1));
                // resource, uid, owner, source
                for text in ["reports", "uid-1", owner, source] {
                    reply.extend(string(text.as_bytes()));
                }
                reply.push(1); // Write
                reply.extend(duration(Duration::from_secs(3)));
                reply.extend(duration(Duration::from_secs(1)));
            }
            // Status { quarantine_left: None, entries: 1 }.
            Some(OP_STATUS) => reply.extend([REPLY_STATUS, 0, 1]),
            Some(OP_HEALTH) => reply.extend([REPLY_HEALTH, 0, 1]),
            _ => {
                reply.extend([REPLY_ERROR, KIND_UNAVAILABLE]);
                reply.extend(string(b"not served here"));
            }
        }
        stream.write_all(&frame(&reply)).ok()?;
    }
    Some(())
}
