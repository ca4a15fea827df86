//! A lock server that answers with hostile text, as a server run by an
//! attacker would, or one of a version that stored whatever its clients
//! sent: a listing whose owner, source, uid and name carry escape
//! sequences, a bell, DEL, a C1 control, a bidirectional override and a
//! newline that forges a row; error replies and a handshake rejection with
//! the same. It speaks protocol version 5 in raw frames (see
//! tests/net_support/wire.rs), on a loopback port, from threads that end
//! when it is dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::wire::{
    duration, frame, read_varint, string, varint, OP_HEALTH, OP_LIST, OP_STATUS, REPLY_ERROR,
    REPLY_HEALTH, REPLY_STATUS,
};

/// Text that would retitle the terminal, ring it, clear it, reverse what
/// follows, and start a forged row of the listing.
pub const HOSTILE: &str =
    "bob\u{1b}]0;pwned\u{7}\u{1b}[2J\u{7f}\u{9b}31m\u{202e}gpj.exe\r\nforged-row  write  mallory";

/// What a hostile server does with a handshake.
#[derive(Clone, Copy)]
pub enum Welcome {
    /// Accepts any token, as an admin.
    Admin,
    /// Rejects every token with [`HOSTILE`] as the reason.
    Reject,
}

/// `Reply::Locks` variant index.
const REPLY_LOCKS: u8 = 1;
/// `ErrorKind::Unavailable`.
const KIND_UNAVAILABLE: u8 = 2;

pub struct HostileServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl HostileServer {
    pub fn start(welcome: Welcome) -> HostileServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a hostile server");
        let addr = listener.local_addr().expect("its address");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let acceptor = std::thread::spawn(move || {
            let mut peers = Vec::new();
            // Bounded: a test makes a handful of connections.
            for stream in listener.incoming().take(64) {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                peers.push(std::thread::spawn(move || serve(stream, welcome)));
            }
            for peer in peers {
                let _ = peer.join();
            }
        });
        HostileServer {
            addr,
            stop,
            acceptor: Some(acceptor),
        }
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the acceptor, which then sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
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

fn serve(mut stream: TcpStream, welcome: Welcome) {
    // A client that goes away mid-test must not hold the thread forever.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    if read_frame(&mut stream).is_none() {
        return;
    }
    let answer = match welcome {
        Welcome::Admin => {
            // Accepted { version: 5, admin: true, validity: 6s }.
            let mut out = vec![0];
            out.extend(varint(5));
            out.push(1);
            out.extend(duration(Duration::from_secs(6)));
            out
        }
        Welcome::Reject => {
            let mut out = vec![1];
            out.extend(string(HOSTILE.as_bytes()));
            out
        }
    };
    if stream.write_all(&frame(&answer)).is_err() || matches!(welcome, Welcome::Reject) {
        return;
    }
    while let Some(request) = read_frame(&mut stream) {
        let Some((id, rest)) = read_varint(&request) else {
            return;
        };
        let mut reply = varint(id);
        match rest.first().copied() {
            Some(OP_LIST) => {
                reply.push(REPLY_LOCKS);
                reply.extend(varint(1));
                for text in [
                    // resource, uid, owner, source
                    "reports\u{1b}[8m",
                    "uid\u{1b}]0;x\u{7}",
                    HOSTILE,
                    "src\u{202e}\nsecond-forged-row",
                ] {
                    reply.extend(string(text.as_bytes()));
                }
                reply.push(1); // Write
                reply.extend(duration(Duration::from_secs(3)));
                reply.extend(duration(Duration::from_secs(1)));
            }
            Some(OP_STATUS) => {
                // Status { quarantine_left: None, entries: 1 }.
                reply.extend([REPLY_STATUS, 0, 1]);
            }
            Some(OP_HEALTH) => reply.extend([REPLY_HEALTH, 0, 1]),
            // Every lock call: an error with the hostile text.
            _ => {
                reply.extend([REPLY_ERROR, KIND_UNAVAILABLE]);
                reply.extend(string(HOSTILE.as_bytes()));
            }
        }
        if stream.write_all(&frame(&reply)).is_err() {
            return;
        }
    }
}
