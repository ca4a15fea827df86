//! The cause a server logs while peers without a token flood it with
//! connections that are refused at once (a wrong token), while the only
//! client slot is held: no slot then holds anything but that one client,
//! the handshakes of the flood and connections closed for the flood, so
//! the log must not say that every slot holds an authenticated connection
//! and tell the operator to raise --max-connections.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::raw::authenticated;
use crate::support::wire::{frame, hello, VERSION};
use crate::support::{Scratch, Server, ADMIN, TOKEN};

const THREADS: usize = 8;
const PER_THREAD: usize = 400;

#[test]
fn a_flood_of_wrong_tokens_is_not_logged_as_every_slot_authenticated() {
    let dir = Scratch::new("flood-log-wording");
    let server = Server::start(&dir, &["--max-connections", "1", "--admin-reserve", "1"]);
    let addr = server.addr;
    let _client = authenticated(addr, TOKEN);
    let started = Instant::now();
    let wrong = frame(&hello(VERSION, b"not-the-token"));
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let wrong = wrong.clone();
            s.spawn(move || {
                for _ in 0..PER_THREAD {
                    if started.elapsed() > Duration::from_secs(30) {
                        return;
                    }
                    let Ok(mut stream) = TcpStream::connect(addr) else {
                        continue;
                    };
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                    let _ = stream.write_all(&wrong);
                    let mut sink = [0u8; 512];
                    while let Ok(n) = stream.read(&mut sink) {
                        if n == 0 {
                            break;
                        }
                    }
                }
            });
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let log = server.log_text();
    let wrong_cause: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("every connection slot holds an authenticated connection"))
        .collect();
    assert!(
        log.contains("invalid token"),
        "the flood was not refused for its token, so this checks nothing: {log}"
    );
    assert!(
        wrong_cause.is_empty(),
        "{} connections without a valid token in {:?} logged as every slot authenticated: {:#?}",
        THREADS * PER_THREAD,
        started.elapsed(),
        wrong_cause
    );
}

/// The other side: when the client and the admin reserve really are all
/// held by authenticated connections, a newcomer is refused with the line
/// that tells the operator to raise the limits.
#[test]
fn slots_all_held_by_authenticated_connections_are_logged_as_such() {
    let dir = Scratch::new("all-authenticated-log-wording");
    let server = Server::start(&dir, &["--max-connections", "1", "--admin-reserve", "1"]);
    let _client = authenticated(server.addr, TOKEN);
    let _admin = authenticated(server.addr, ADMIN);
    let mut third = TcpStream::connect(server.addr).expect("connect");
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = third.write_all(&frame(&hello(VERSION, TOKEN.as_bytes())));
    let mut sink = [0u8; 512];
    // Closed at once: no slot is free, and none waits for a handshake.
    while let Ok(n) = third.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
    let began = Instant::now();
    let mut log = server.log_text();
    while !log.contains("every connection slot holds an authenticated connection")
        && began.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
        log = server.log_text();
    }
    assert!(
        log.contains("every connection slot holds an authenticated connection"),
        "a connection refused while a client and an admin held both slots was not logged as \
         such: {log}"
    );
}
