//! The admin reserve against a client with the ordinary token that holds
//! every client slot and keeps opening more connections that present the
//! client token (each refused as `server busy` once authenticated): the
//! reserve is for "handshakes and the admin token", and client-token
//! connections may not take it, so the admin's `status` must get in every
//! time, however many clients are connected.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::wire::{frame, hello, lock_request, OP_LOCK, VERSION};
use crate::support::{cli, Scratch, Server, TOKEN};

const CLIENT_SLOTS: usize = 8;
const TRIES: usize = 10;

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_be_bytes(header) as usize;
    if len >= 1 << 16 {
        return None;
    }
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).ok()?;
    Some(payload)
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
    let welcome = read_frame(&mut stream).expect("a welcome");
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
fn client_token_handshakes_beyond_the_client_slots_do_not_keep_the_admin_out() {
    let dir = Scratch::new("admin-reserve-client-handshakes");
    let slots = CLIENT_SLOTS.to_string();
    let server = Server::start_with_validity(
        &dir,
        "60s",
        &["--max-connections", &slots, "--no-quarantine"],
    );
    let addr = server.addr;
    let holders: Vec<TcpStream> = (0..CLIENT_SLOTS).map(|i| holder(addr, i)).collect();

    // Client-token handshakes, one after the other on each thread, bounded
    // in count and time.
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let hello = frame(&hello(VERSION, TOKEN.as_bytes()));
    let flooders: Vec<_> = (0..4)
        .map(|_| {
            let (stop, opened, hello) = (stop.clone(), opened.clone(), hello.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed)
                    && started.elapsed() < Duration::from_secs(40)
                    && opened.load(Ordering::Relaxed) < 200_000
                {
                    let Ok(mut stream) = TcpStream::connect(addr) else {
                        continue;
                    };
                    opened.fetch_add(1, Ordering::Relaxed);
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                    let _ = stream.write_all(&hello);
                    let _ = read_frame(&mut stream);
                }
            })
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
        "the admin was kept out {} of {TRIES} times by {} client-token connections: {kept_out:#?}",
        kept_out.len(),
        opened.load(Ordering::Relaxed)
    );
}
