//! A peer without a token learns nothing about the server's tokens from
//! what the server answers it. docs/lock-servers.md, "Security": the
//! server compares keyed digests of the tokens "so the time a handshake
//! takes depends only on what the peer sent, not on the configured
//! tokens' bytes or lengths"; "Threat model": "A peer without a token can
//! only open connections and send a 4 KiB handshake within the handshake
//! timeout ... and can learn nothing about the tokens from the time a
//! handshake takes."
//!
//! The refusal of a first frame that is text quotes the peer's first line
//! back to it, with every run of 8 bytes of a secret the server holds (its
//! own client and admin tokens) masked as `***`: the answer then depends
//! on the tokens' bytes, and tells a peer without a token whether any
//! eight bytes it sent are part of a token. From eight bytes it knows or
//! guessed, it learns the rest one byte at a time, a few dozen
//! connections per byte.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::support::{Scratch, Server, ADMIN, TOKEN};

/// What `server` answers a peer that connects, sends `sent` and reads
/// until the server closes (at most 5 s).
fn answer(server: SocketAddr, sent: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(server).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    stream.write_all(sent).expect("send the line");
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 || answer.len() > 64 * 1024 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    answer
}

/// A server with the test tokens, and one with other tokens of the same
/// lengths.
fn two_servers(a: &Scratch, b: &Scratch) -> (Server, Server) {
    std::fs::write(b.file("token"), "elbow-grease\n").expect("write a token");
    std::fs::write(b.file("admin"), "xanthic-owl\n").expect("write an admin token");
    (
        Server::start(a, &["--no-quarantine"]),
        Server::start(b, &["--no-quarantine"]),
    )
}

#[test]
fn the_refusal_of_a_peer_without_a_token_does_not_depend_on_the_tokens() {
    let (a, b) = (
        Scratch::new("refusal-oracle-a"),
        Scratch::new("refusal-oracle-b"),
    );
    let (with_test_tokens, with_others) = two_servers(&a, &b);
    for sent in [
        format!("hello {TOKEN}\r\n"),
        format!("hello {ADMIN}\r\n"),
        // Any eight bytes of a token.
        format!("hello {}\r\n", &TOKEN[1..9]),
    ] {
        let one = answer(with_test_tokens.addr, sent.as_bytes());
        let other = answer(with_others.addr, sent.as_bytes());
        assert_eq!(
            String::from_utf8_lossy(&one),
            String::from_utf8_lossy(&other),
            "two servers answer a peer without a token that sent {sent:?} differently, \
             according to their tokens"
        );
    }
}

#[test]
fn a_peer_without_a_token_cannot_learn_the_token_from_eight_of_its_bytes() {
    let dir = Scratch::new("refusal-oracle-extend");
    let server = Server::start(&dir, &["--no-quarantine"]);
    // Eight bytes the peer knows or guessed; the server tells it the rest.
    let mut known = TOKEN[..8].to_owned();
    let mut connections = 0;
    'byte: while known.len() < 64 {
        let last = &known[known.len() - 7..];
        for c in (b' '..=b'~').map(char::from) {
            connections += 1;
            let sent = format!("hello {last}{c}\r\n");
            let told = String::from_utf8_lossy(&answer(server.addr, sent.as_bytes())).into_owned();
            if told.contains("***") {
                known.push(c);
                continue 'byte;
            }
        }
        break;
    }
    assert_ne!(
        known, TOKEN,
        "a peer without a token learned the whole client token from its first eight bytes, \
         in {connections} connections"
    );
}
