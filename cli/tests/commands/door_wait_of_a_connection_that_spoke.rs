//! How long a connection that spoke waits at the door for a slot.
//! docs/lock-servers.md ("A peer without a token"): "A newcomer that finds
//! no such one waits at the door, without a slot ...: one that had sent
//! nothing for its first bytes, at most 100 ms, one that spoke for a slot,
//! at most 200 ms"; and "Each line names its cause" ("Refused connections
//! in the log").
//!
//! The scene, on one server with 5 slots (`--max-connections 1` and the
//! admin reserve of 4), all on loopback and without any flood: five
//! connections that send a partial handshake take the slots; five more
//! that do the same a moment later wait at the door and take the slots
//! when the first five have had their 100 ms; the admin, whose whole
//! handshake came 50 ms after the first five, waits at the door behind
//! them, and a slot is free for it (the second five having had their 100
//! ms) about 150 ms after it came: within its 200 ms.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::wire::{frame, hello, VERSION};
use crate::support::{Scratch, Server, ADMIN};

/// A connection that sends two bytes of a frame header and nothing more.
fn partial(addr: std::net::SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.write_all(&[0, 0]).expect("two bytes");
    stream
}

/// What the admin got, how long it waited, how long the setup took, and
/// the server's log.
struct Scene {
    outcome: std::io::Result<std::io::Result<Vec<u8>>>,
    waited: Duration,
    setup: Duration,
    log: String,
}

fn scene(test: &str) -> Scene {
    let dir = Scratch::new(test);
    let server =
        Server::start_with_validity(&dir, "60s", &["--max-connections", "1", "--no-quarantine"]);
    let addr = server.addr;
    let t0 = Instant::now();
    let first: Vec<TcpStream> = (0..5).map(|_| partial(addr)).collect();
    std::thread::sleep(Duration::from_millis(5));
    let second: Vec<TcpStream> = (0..5).map(|_| partial(addr)).collect();
    let setup = t0.elapsed();
    std::thread::sleep(Duration::from_millis(50).saturating_sub(setup));

    let came = Instant::now();
    let mut admin = TcpStream::connect(addr).expect("connect");
    admin
        .write_all(&frame(&hello(VERSION, ADMIN.as_bytes())))
        .expect("admin hello");
    admin
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut header = [0u8; 4];
    let outcome = admin.read_exact(&mut header).map(|()| {
        let len = u32::from_be_bytes(header) as usize;
        let mut payload = vec![0; len.min(1 << 16)];
        admin.read_exact(&mut payload).map(|()| payload)
    });
    let waited = came.elapsed();
    drop((first, second));
    // The log is written by the server a moment later.
    std::thread::sleep(Duration::from_millis(100));
    let log = server.log_text();
    Scene {
        outcome,
        waited,
        setup,
        log,
    }
}

#[test]
fn an_admin_that_spoke_waits_at_the_door_up_to_200_ms_for_a_slot() {
    let Scene {
        outcome,
        waited,
        setup,
        log,
    } = scene("door-wait-spoke");
    match outcome {
        Ok(Ok(welcome)) if welcome.first() == Some(&0) => {}
        other => panic!(
            "the admin, whose handshake came at once, was not let in after {waited:?} at the \
             door (setup took {setup:?}): {other:?}\nserver log:\n{log}"
        ),
    }
}

#[test]
fn no_log_line_says_connections_sent_nothing_when_every_one_spoke() {
    let Scene { log, .. } = scene("door-wait-spoke-log");
    assert!(
        !log.contains("sent nothing") && !log.contains("send nothing"),
        "every connection sent bytes (the admin its whole handshake), yet the server logged \
         one as silent:\n{log}"
    );
}

/// More connections that spoke than the door has room for (256), while
/// every slot is taken: those the door closes to make room had all sent
/// bytes, so no line may call them silent.
#[test]
fn a_full_door_of_connections_that_spoke_is_not_logged_as_silent() {
    let dir = Scratch::new("door-full-spoke-log");
    let server =
        Server::start_with_validity(&dir, "60s", &["--max-connections", "1", "--no-quarantine"]);
    let addr = server.addr;
    let started = Instant::now();
    let mut open: Vec<TcpStream> = Vec::new();
    // Bounded: 5 for the slots, 320 for the door, or 5 s.
    while open.len() < 325 && started.elapsed() < Duration::from_secs(5) {
        open.push(partial(addr));
    }
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(400));
    drop(open);
    let log = server.log_text();
    assert!(
        !log.contains("closed silent connections") && !log.contains("sent nothing"),
        "every connection sent bytes ({:?} to open them), yet the server logged them as \
         silent:\n{log}",
        took
    );
}
