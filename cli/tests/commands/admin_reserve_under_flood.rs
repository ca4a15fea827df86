//! The admin reserve against a client that holds every client slot and,
//! at the same time, floods the server with connections that never
//! authenticate: the admin's `status` still gets through (it may be
//! delayed, never kept out).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::wire::{frame, hello, lock_request, OP_LOCK, VERSION};
use crate::support::{cli, Scratch, Server, TOKEN};

const CLIENT_SLOTS: usize = 8;

fn read_frame(stream: &mut TcpStream) -> Vec<u8> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).expect("a frame header");
    let len = u32::from_be_bytes(header) as usize;
    assert!(len < 1 << 16, "frame of {len} bytes");
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).expect("a frame");
    payload
}

/// A client-token connection that holds a lock, so that no idle timeout
/// closes it.
fn holder(addr: SocketAddr, i: usize) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(&frame(&hello(VERSION, TOKEN.as_bytes())))
        .unwrap();
    let welcome = read_frame(&mut stream);
    assert_eq!(welcome.first(), Some(&0), "holder {i} not accepted");
    let uid = format!("00000000-0000-4000-8000-{i:012}");
    let name = format!("held-{i}");
    stream
        .write_all(&frame(&lock_request(1, OP_LOCK, &uid, &[&name])))
        .unwrap();
    let _ = read_frame(&mut stream);
    stream
}

#[test]
fn a_client_holding_every_slot_and_flooding_handshakes_does_not_keep_the_admin_out() {
    let dir = Scratch::new("admin-reserve-flood");
    let slots = CLIENT_SLOTS.to_string();
    let server = Server::start_with_validity(
        &dir,
        "60s",
        &["--max-connections", &slots, "--no-quarantine"],
    );
    let addr = server.addr;
    let holders: Vec<TcpStream> = (0..CLIENT_SLOTS).map(|i| holder(addr, i)).collect();

    // The flood: connections that say nothing, each kept open until 32
    // newer ones are, bounded in count and time.
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let flooders: Vec<_> = (0..4)
        .map(|_| {
            let (stop, opened) = (stop.clone(), opened.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut open = VecDeque::new();
                while !stop.load(Ordering::Relaxed)
                    && started.elapsed() < Duration::from_secs(30)
                    && opened.load(Ordering::Relaxed) < 200_000
                {
                    if let Ok(stream) = TcpStream::connect(addr) {
                        opened.fetch_add(1, Ordering::Relaxed);
                        open.push_back(stream);
                        if open.len() > 32 {
                            open.pop_front();
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));

    let node = addr.to_string();
    let admin = dir.admin();
    let mut outcomes = Vec::new();
    let mut got_in = 0;
    for _ in 0..10 {
        let status = cli(
            &dir,
            &["status", "--nodes", &node, "--admin-token-file", &admin],
            &[],
            Duration::from_secs(20),
        );
        if status.code == Some(0) {
            got_in += 1;
        }
        outcomes.push(format!("{:?}: {}", status.code, status.stderr.trim()));
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for flooder in flooders {
        flooder.join().expect("flooder");
    }
    drop(holders);
    eprintln!(
        "{} flood connections; admin got in {got_in} of 10: {outcomes:#?}",
        opened.load(Ordering::Relaxed)
    );
    assert!(
        got_in == 10,
        "the admin was kept out {} of 10 times during the flood ({} connections): {outcomes:#?}\nserver log: {}",
        10 - got_in,
        opened.load(Ordering::Relaxed),
        server
            .log_text()
            .lines()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
}
