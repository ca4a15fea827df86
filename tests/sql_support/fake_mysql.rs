//! A fake MySQL server on a loopback port, speaking just enough of the
//! protocol for a locker to log in (no database needed): a handshake
//! without TLS or an authentication plugin, an OK to the login and to the
//! driver's own `SET sql_mode=...`, and an error of the test's words to
//! every other statement, the locker's session statements first. One
//! thread, a bounded number of connections, every read bounded in time.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// A fake that refuses every statement after the driver's own with an
/// error (1227, `42000`) whose message is `message`.
pub fn refusing_statements(message: Vec<u8>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake MySQL");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        // Bounded: the pool tries again within the call timeout only.
        for stream in listener.incoming().take(64) {
            let Ok(stream) = stream else { continue };
            let _ = serve_one(stream, &message);
        }
    });
    addr
}

/// Reads one packet: its sequence id and body.
fn read_packet(stream: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    if len > 1 << 16 {
        return None;
    }
    let mut body = vec![0; len];
    stream.read_exact(&mut body).ok()?;
    Some((header[3], body))
}

/// A packet of `body` with sequence id `seq`.
fn packet(seq: u8, body: &[u8]) -> Vec<u8> {
    assert!(body.len() < 1 << 24, "a packet under 16 MiB");
    let len = u32::try_from(body.len())
        .expect("a packet under 16 MiB")
        .to_le_bytes();
    let mut out = vec![len[0], len[1], len[2], seq];
    out.extend(body);
    out
}

/// An OK packet's body.
fn ok() -> Vec<u8> {
    vec![0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00]
}

/// The server's handshake: protocol 10, no TLS, no authentication plugin.
fn handshake() -> Vec<u8> {
    // CLIENT_LONG_PASSWORD (MySQL), PROTOCOL_41, TRANSACTIONS,
    // SECURE_CONNECTION.
    let caps: u32 = 1 | 512 | 8192 | (1 << 15);
    let mut body = vec![10];
    body.extend(b"8.0.36\0");
    body.extend(7u32.to_le_bytes());
    body.extend(b"abcdefgh");
    body.push(0);
    body.extend(&caps.to_le_bytes()[..2]);
    body.push(45); // utf8mb4_general_ci
    body.extend(2u16.to_le_bytes());
    body.extend(&caps.to_le_bytes()[2..]);
    body.push(0);
    body.extend([0u8; 6]);
    body.extend([0u8; 4]);
    body.extend(b"ijklmnopqrst");
    body.push(0);
    body
}

/// Serves one connection: the login goes through, the driver's own
/// `SET sql_mode` is answered OK, every other statement is refused with
/// an error whose message is `message`.
fn serve_one(mut stream: TcpStream, message: &[u8]) -> Option<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(&packet(0, &handshake())).ok()?;
    let (seq, _response) = read_packet(&mut stream)?;
    stream.write_all(&packet(seq.wrapping_add(1), &ok())).ok()?;
    // Bounded: a few statements at most before the driver gives up.
    for _ in 0..64 {
        let (seq, body) = read_packet(&mut stream)?;
        match body.first() {
            Some(0x03) if body[1..].starts_with(b"SET sql_mode") => {
                stream.write_all(&packet(seq.wrapping_add(1), &ok())).ok()?;
            }
            Some(0x03) => {
                let mut err = vec![0xff];
                err.extend(1227u16.to_le_bytes());
                err.extend(b"#42000");
                err.extend(message);
                stream.write_all(&packet(seq.wrapping_add(1), &err)).ok()?;
            }
            Some(0x01) | None => return Some(()),
            Some(_) => {
                stream.write_all(&packet(seq.wrapping_add(1), &ok())).ok()?;
            }
        }
    }
    Some(())
}
