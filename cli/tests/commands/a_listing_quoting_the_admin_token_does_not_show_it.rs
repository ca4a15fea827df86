//! Reproduces a past break: a lock server whose listing quotes the admin token (an owner, uid, source or name holding it) has `quorum-lock locks` print the token whole.
//!
//! docs/lock-servers.md, "Threat model": a hostile or misconfigured server
//! "already holds the token a client sent it; what it could still do is put
//! that token in the client's errors and logs, for whoever reads those, by
//! quoting it back", and any run of 8 or more bytes of a secret the process
//! handed a locker is shown as `***`. The library masks the words it puts
//! in its errors; the command line prints a listing's owner, uid, source
//! and name as the server sent them (escaped, never masked), so the admin
//! token the command was given is printed to the terminal, and into
//! whatever file or ticket the listing is pasted.
//!
//! The server is a stand-in on a loopback port speaking protocol version 5
//! in raw frames: it welcomes any token as an admin and lists one lock
//! whose owner and source quote the admin token. Threads that end with
//! their connection; every read bounded in time.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::support::wire::{
    duration, frame, read_varint, string, varint, OP_HEALTH, OP_LIST, OP_STATUS, REPLY_ERROR,
    REPLY_HEALTH, REPLY_STATUS,
};
use crate::support::{cli, Scratch, ADMIN};

const LIMIT: Duration = Duration::from_secs(20);

/// `Reply::Locks` variant index.
const REPLY_LOCKS: u8 = 1;
/// `ErrorKind::Unavailable`.
const KIND_UNAVAILABLE: u8 = 2;

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

fn serve(mut stream: TcpStream) -> Option<()> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
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
                let owner = format!("ops ({ADMIN})");
                let source = format!("run: deploy --token {ADMIN}");
                // resource, uid, owner, source
                for text in ["reports", "uid-1", &owner, &source] {
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

#[test]
fn a_listing_quoting_the_admin_token_does_not_show_it() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
    let node = listener.local_addr().expect("its address").to_string();
    std::thread::spawn(move || {
        // Bounded: each command makes a connection or two.
        for stream in listener.incoming().take(8) {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || serve(stream));
        }
    });
    let dir = Scratch::new("listing-quoting-the-admin-token");
    let admin = dir.admin();
    for command in ["locks", "status"] {
        let shown = cli(
            &dir,
            &[command, "--nodes", &node, "--admin-token-file", &admin],
            &[],
            LIMIT,
        );
        assert_eq!(shown.code, Some(0), "{command}: {shown:?}");
        assert!(
            shown.stdout.contains("reports"),
            "{command}: not listed: {shown:?}"
        );
        for piece in ADMIN.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            for (stream, text) in [("stdout", &shown.stdout), ("stderr", &shown.stderr)] {
                assert!(
                    !text.contains(piece),
                    "{command}: {stream} shows the admin token ({piece} is a piece of it): {text}"
                );
            }
        }
    }
}
