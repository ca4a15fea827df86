//! Reproduces a past break: a peer that sends the four bytes of its `Hello`'s length and then nothing more is logged, when the handshake timeout closes it, as one of the "closed connections that sent nothing".
//!
//! docs/lock-servers.md, "Threat model": refusals are logged throttled per
//! cause, and the handshake's refusals are worded by their real cause (the
//! slow-loris test slow_handshake_log_wording.rs sends six bytes). The
//! server tells "sent nothing" from "sent only part of a handshake" by
//! whether its read buffer is empty, but the length-delimited codec takes
//! a frame's length out of that buffer as soon as the four bytes have
//! come: a peer that stops right after them (the cheapest way to hold a
//! connection for the whole handshake timeout) reads as one that sent
//! nothing, which points the operator at port checks instead.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::wire::{frame, hello, VERSION};
use crate::support::{wait_until, Scratch, Server, TOKEN};

#[test]
fn a_handshake_stalled_after_its_length_is_not_logged_as_one_that_sent_nothing() {
    let dir = Scratch::new("handshake-stalled-after-its-length");
    let server = Server::start(&dir, &["--no-quarantine", "--handshake-timeout", "1s"]);
    let whole = frame(&hello(VERSION, TOKEN.as_bytes()));
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .write_all(&whole[..4])
        .expect("the length of a hello");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    let mut sink = [0u8; 256];
    // Bounded: the server closes after its 1 s handshake timeout, and each
    // read waits at most 5 s.
    for _ in 0..64 {
        match stream.read(&mut sink) {
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
    wait_until(Duration::from_secs(5), "the timeout's log line", || {
        server.log_text().contains("handshake timeout")
    });
    let log = server.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("handshake timeout"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        !line.contains("sent nothing"),
        "a connection that sent the 4 bytes of its hello's length is logged as one that sent \
         nothing: {line}"
    );
}
