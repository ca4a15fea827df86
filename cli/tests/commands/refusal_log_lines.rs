//! A real server's log under floods of every kind of refused connection:
//! a wrong protocol version, a first frame that is no handshake, one too
//! large, no handshake in time, no room for the client token or for one
//! more connection from the address, frames a client sends that cannot be
//! decoded, and, with TLS, plain text or nothing where a TLS handshake
//! belongs. Each flood writes at most one line a second per cause.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::raw::authenticated;
use crate::support::wire::{frame, hello, VERSION};
use crate::support::{Scratch, Server, TOKEN};

const FLOOD: usize = 300;

/// Connects, sends `bytes`, and reads until the server closes (at most
/// 3 s).
fn refused(addr: SocketAddr, bytes: &[u8]) {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(3)));
    let _ = stream.write_all(bytes);
    let mut sink = [0u8; 4096];
    while let Ok(n) = stream.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
}

/// Warnings in the server's log.
fn warnings(server: &Server) -> Vec<String> {
    server
        .log_text()
        .lines()
        .filter(|l| l.contains("WARN"))
        .map(str::to_owned)
        .collect()
}

/// Runs `flood`, then checks that the warnings it added are at most one a
/// second (and one more for the second it started in), and that it was
/// logged at all.
fn check(what: &str, server: &Server, failures: &mut Vec<String>, flood: impl FnOnce()) {
    // A cause's earlier line (another flood's) would hold this one back.
    std::thread::sleep(Duration::from_millis(1100));
    let before = warnings(server).len();
    let started = Instant::now();
    flood();
    // Lines of the last refusals may still be on their way.
    std::thread::sleep(Duration::from_millis(300));
    let added: Vec<String> = warnings(server).split_off(before);
    let allowed = started.elapsed().as_secs() as usize + 2;
    assert!(
        !added.is_empty() || what.starts_with("connections closed"),
        "{what}: not logged at all, so this checks nothing: {}",
        server.log_text()
    );
    if added.len() > allowed {
        failures.push(format!(
            "{what}: {} warnings for {FLOOD} refusals in {:?} (at most {allowed}); first: {:?}",
            added.len(),
            started.elapsed(),
            added.first()
        ));
    }
}

#[test]
fn every_kind_of_refused_connection_is_logged_at_most_once_a_second() {
    let dir = Scratch::new("refusal-log-lines");
    let mut failures = Vec::new();

    let server = Server::start(&dir, &["--handshake-timeout", "300ms"]);
    let addr = server.addr;
    check("wrong protocol version", &server, &mut failures, || {
        for _ in 0..FLOOD {
            refused(addr, &frame(&hello(999, TOKEN.as_bytes())));
        }
    });
    check("first frame no handshake", &server, &mut failures, || {
        for _ in 0..FLOOD {
            refused(addr, &frame(&[0xff; 12]));
        }
    });
    check("first frame too large", &server, &mut failures, || {
        for _ in 0..FLOOD {
            refused(addr, &(1u32 << 20).to_be_bytes());
        }
    });
    check("no handshake in time", &server, &mut failures, || {
        let silent: Vec<TcpStream> = (0..FLOOD)
            .filter_map(|_| TcpStream::connect(addr).ok())
            .collect();
        std::thread::sleep(Duration::from_millis(1500));
        drop(silent);
    });
    check(
        "undecodable frames after the handshake",
        &server,
        &mut failures,
        || {
            for _ in 0..FLOOD {
                let mut stream = authenticated(addr, TOKEN);
                let _ = stream.write_all(&frame(&[0xff; 12]));
                let mut sink = [0u8; 4096];
                while let Ok(n) = stream.read(&mut sink) {
                    if n == 0 {
                        break;
                    }
                }
            }
        },
    );
    drop(server);

    let server = Server::start(&dir, &["--max-connections-per-address", "1"]);
    let addr = server.addr;
    let _held = authenticated(addr, TOKEN);
    check("the address's share in use", &server, &mut failures, || {
        for _ in 0..FLOOD {
            refused(addr, &frame(&hello(VERSION, TOKEN.as_bytes())));
        }
    });
    drop(server);

    let server = Server::start(&dir, &["--max-connections", "1"]);
    let addr = server.addr;
    let _held = authenticated(addr, TOKEN);
    check(
        "every client connection in use",
        &server,
        &mut failures,
        || {
            for _ in 0..FLOOD {
                refused(addr, &frame(&hello(VERSION, TOKEN.as_bytes())));
            }
        },
    );
    drop(server);

    let made = dir.certificate_for("127.0.0.1");
    let (cert, key) = (made.cert, made.key);
    let server = Server::start(
        &dir,
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--handshake-timeout",
            "300ms",
        ],
    );
    let addr = server.addr;
    check("plain text to a TLS server", &server, &mut failures, || {
        for _ in 0..FLOOD {
            refused(addr, &frame(&hello(VERSION, TOKEN.as_bytes())));
        }
    });
    check(
        "a TLS record that is no handshake",
        &server,
        &mut failures,
        || {
            // An alert record (type 21) of TLS 1.2 where a ClientHello belongs.
            for _ in 0..FLOOD {
                refused(addr, &[21, 3, 3, 0, 2, 2, 40]);
            }
        },
    );
    check("no TLS handshake in time", &server, &mut failures, || {
        let silent: Vec<TcpStream> = (0..FLOOD)
            .filter_map(|_| TcpStream::connect(addr).ok())
            .collect();
        std::thread::sleep(Duration::from_millis(1500));
        drop(silent);
    });
    check(
        "connections closed in the TLS handshake",
        &server,
        &mut failures,
        || {
            for _ in 0..FLOOD {
                // The start of a ClientHello record, then nothing more.
                if let Ok(mut stream) = TcpStream::connect(addr) {
                    let _ = stream.write_all(&[22, 3, 1, 0, 200, 1, 0, 0, 196, 3, 3]);
                }
            }
        },
    );
    drop(server);

    assert!(failures.is_empty(), "{failures:#?}");
}
