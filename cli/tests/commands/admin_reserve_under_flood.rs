//! The admin reserve against a client that holds every client slot while
//! the server is flooded: the admin's `status` still gets through every
//! time (it may be delayed, never kept out; docs/lock-servers.md). The
//! floods: connections that never authenticate, and connections that
//! present the client token one after the other (each refused as `server
//! busy` once authenticated), which kept the admin out 4 to 6 times in 10
//! while a newcomer could evict a handshake in progress.

use std::collections::VecDeque;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::raw::{holder, read_frame};
use crate::support::wire::{frame, hello, VERSION};
use crate::support::{cli, Scratch, Server, TOKEN};

const CLIENT_SLOTS: usize = 8;
const TRIES: usize = 10;
const FLOODERS: usize = 4;

/// Starts a server whose client slots are all held, runs `flood` on
/// `FLOODERS` threads (bounded in count and time; each gets the server's
/// address, the stop flag and the count of connections opened), and
/// asserts that the admin's `status` gets in every one of `TRIES` times.
fn admin_gets_in_every_time(name: &str, flood: fn(SocketAddr, &AtomicBool, &AtomicUsize)) {
    let dir = Scratch::new(name);
    let slots = CLIENT_SLOTS.to_string();
    let server = Server::start_with_validity(
        &dir,
        "60s",
        &["--max-connections", &slots, "--no-quarantine"],
    );
    let addr = server.addr;
    let holders: Vec<TcpStream> = (0..CLIENT_SLOTS).map(|i| holder(addr, i)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|_| {
            let (stop, opened) = (stop.clone(), opened.clone());
            std::thread::spawn(move || flood(addr, &stop, &opened))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));

    let node = addr.to_string();
    let admin = dir.admin();
    let mut kept_out = Vec::new();
    for _ in 0..TRIES {
        let status = cli(
            &dir,
            &["status", "--nodes", &node, "--admin-token-file", &admin],
            &[],
            Duration::from_secs(20),
        );
        if status.code != Some(0) {
            kept_out.push(format!("{:?}: {}", status.code, status.stderr.trim()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for flooder in flooders {
        flooder.join().expect("flooder");
    }
    drop(holders);
    assert!(
        kept_out.is_empty(),
        "the admin was kept out {} of {TRIES} times by {} flood connections: {kept_out:#?}\n\
         server log: {}",
        kept_out.len(),
        opened.load(Ordering::Relaxed),
        server
            .log_text()
            .lines()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Whether a flooder goes on: not stopped, under 30 s and 200,000
/// connections in all.
fn goes_on(started: Instant, stop: &AtomicBool, opened: &AtomicUsize) -> bool {
    !stop.load(Ordering::Relaxed)
        && started.elapsed() < Duration::from_secs(30)
        && opened.load(Ordering::Relaxed) < 200_000
}

#[test]
fn a_client_holding_every_slot_and_flooding_handshakes_does_not_keep_the_admin_out() {
    // Connections that say nothing, each kept open until 32 newer ones are.
    admin_gets_in_every_time("admin-reserve-flood", |addr, stop, opened| {
        let started = Instant::now();
        let mut open = VecDeque::new();
        while goes_on(started, stop, opened) {
            if let Ok(stream) = TcpStream::connect(addr) {
                opened.fetch_add(1, Ordering::Relaxed);
                open.push_back(stream);
                if open.len() > 32 {
                    open.pop_front();
                }
            }
        }
    });
}

#[test]
fn client_token_handshakes_beyond_the_client_slots_do_not_keep_the_admin_out() {
    admin_gets_in_every_time("admin-reserve-client-handshakes", |addr, stop, opened| {
        let started = Instant::now();
        let hello = frame(&hello(VERSION, TOKEN.as_bytes()));
        while goes_on(started, stop, opened) {
            let Ok(mut stream) = TcpStream::connect(addr) else {
                continue;
            };
            opened.fetch_add(1, Ordering::Relaxed);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = stream.write_all(&hello);
            let _ = read_frame(&mut stream);
        }
    });
}
