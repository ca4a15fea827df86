//! Reproduces a past break: a lock server whose listing holds an owner of more than 65,535 characters makes `quorum-lock locks` panic (`Formatting argument out of range`) and exit 101, listing nothing of any node.
//!
//! docs/cli.md: "What the nodes send is shown escaped ... nothing a node
//! sends can add a row, move the cursor, retitle or clear the terminal";
//! `--per-node` "works however many nodes are down", and a listing with a
//! quorum names the nodes that did not answer and exits 0. A node's
//! listing is its words, which a hostile or older node (or another user of
//! the same Redis or database, writing the entries) chooses.
//!
//! What happens instead: the command aligns its columns with
//! `format!("{cell:<width$}")` (`cli/src/admin.rs`, `table`), and the
//! standard library panics on a width above `u16::MAX`. One cell of 70,000
//! characters in a column other than the last (OWNER here) ends the
//! command with a panic: the operator sees no listing at all, of that node
//! or any other.
//!
//! The server is a stand-in on a loopback port speaking protocol version 5
//! in raw frames; its one lock has an owner of 70,000 plain letters.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::support::wire::{
    duration, frame, read_varint, string, varint, OP_HEALTH, OP_LIST, OP_STATUS, REPLY_ERROR,
    REPLY_HEALTH, REPLY_STATUS,
};
use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(60);

/// The owner's length: above the widest a format width may be.
const OWNER_LEN: usize = 70_000;

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
                let owner = "o".repeat(OWNER_LEN);
                // resource, uid, owner, source
                for text in ["reports", "uid-1", owner.as_str(), "src"] {
                    reply.extend(string(text.as_bytes()));
                }
                reply.push(1); // Write
                reply.extend(duration(Duration::from_secs(3)));
                reply.extend(duration(Duration::from_secs(1)));
            }
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
fn a_listing_cell_wider_than_a_format_width_does_not_crash_the_command() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
    let node = listener.local_addr().expect("its address").to_string();
    std::thread::spawn(move || {
        // Bounded: each command makes a connection or two.
        for stream in listener.incoming().take(8) {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || serve(stream));
        }
    });
    let dir = Scratch::new("listing-cell-wider-than-a-format-width");
    let admin = dir.admin();
    for args in [
        vec!["locks", "--nodes", node.as_str()],
        vec!["locks", "--per-node", "--nodes", node.as_str()],
    ] {
        let mut all = args.clone();
        all.extend(["--admin-token-file", admin.as_str()]);
        let shown = cli(&dir, &all, &[], LIMIT);
        assert!(
            shown.code == Some(0) && !shown.stderr.contains("panicked"),
            "{args:?}: exit {:?}; stderr: {}",
            shown.code,
            shown.stderr.chars().take(600).collect::<String>()
        );
        assert!(
            shown.stdout.contains("reports"),
            "{args:?}: the lock is not listed: {}",
            shown.stderr.chars().take(600).collect::<String>()
        );
    }
}
