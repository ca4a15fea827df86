//! The refusal lines of the server's log name each refusal by its real
//! cause. A peer that starts a handshake and then sends the rest too
//! slowly (a slow-loris, holding a slot for the whole handshake timeout)
//! did send something: the line must not tell the operator that the
//! closed connections "sent nothing", which points at port scans and
//! health checks rather than at a peer that holds connections open.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::wire::{frame, hello, VERSION};
use crate::support::{wait_until, Scratch, Server, TOKEN};

/// Sends `start` to `server` and nothing more, waits for the server to
/// close the connection after its handshake timeout, and returns the log
/// line about it.
fn timeout_line_after(server: &Server, start: &[u8]) -> String {
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream.write_all(start).expect("the start of a handshake");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    let mut sink = [0u8; 256];
    while let Ok(n) = stream.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
    wait_until(Duration::from_secs(5), "the timeout's log line", || {
        server.log_text().contains("handshake timeout")
    });
    let log = server.log_text();
    log.lines()
        .find(|l| l.contains("handshake timeout"))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_handshake_sent_too_slowly_is_not_logged_as_a_connection_that_sent_nothing() {
    let dir = Scratch::new("slow-handshake-log-wording");
    let server = Server::start(&dir, &["--no-quarantine", "--handshake-timeout", "1s"]);
    // The first six bytes of a valid hello (its length and the start of
    // the payload), then nothing more.
    let whole = frame(&hello(VERSION, TOKEN.as_bytes()));
    let line = timeout_line_after(&server, &whole[..6]);
    assert!(
        !line.contains("sent nothing"),
        "a connection that sent {} bytes of its handshake is logged as one that sent \
         nothing: {line}",
        6
    );
}

/// The same with TLS: a peer that sent the start of a TLS record (a
/// ClientHello's header) and then nothing more did start TLS.
#[test]
fn a_tls_handshake_sent_too_slowly_is_not_logged_as_a_connection_that_did_not_start_tls() {
    let dir = Scratch::new("slow-tls-handshake-log-wording");
    let made = dir.certificate_for("127.0.0.1");
    let (cert, key) = (made.cert, made.key);
    let server = Server::start(
        &dir,
        &[
            "--no-quarantine",
            "--handshake-timeout",
            "1s",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ],
    );
    // A TLS 1.2 handshake record header announcing 512 bytes, and the
    // first bytes of a ClientHello; the rest never comes.
    let start = [
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ];
    let line = timeout_line_after(&server, &start);
    assert!(
        !line.contains("did not start TLS"),
        "a connection that sent the start of a ClientHello is logged as one that did not \
         start TLS: {line}"
    );
}
