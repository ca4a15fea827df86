//! A flood of connections that each send a whole handshake with a wrong
//! token while a client holds every client slot: the refusals are logged
//! by their real cause. docs/lock-servers.md ("Refused connections in the
//! log"): "Each line names its cause"; no line may call these connections
//! silent ("sent nothing", "send nothing"): every one of them sent bytes.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::wire::{frame, hello, lock_request, OP_LOCK, VERSION};
use crate::support::{Scratch, Server, TOKEN};

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
    stream
        .write_all(&frame(&lock_request(
            1,
            OP_LOCK,
            &uid,
            &[&format!("held-{i}")],
        )))
        .unwrap();
    let _ = read_frame(&mut stream);
    stream
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    WrongToken,
}

/// Connections of `kind`, 64 attempts in flight, the newest 32 kept open;
/// at most 100,000 or 20 s.
fn flood(addr: SocketAddr, kind: Kind, stop: Arc<AtomicBool>, opened: Arc<AtomicU64>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let bytes: Vec<u8> = match kind {
        Kind::WrongToken => frame(&hello(VERSION, b"wrong-token")),
    };
    runtime.block_on(async move {
        use tokio::io::AsyncWriteExt;
        let started = Instant::now();
        let mut open = VecDeque::new();
        let mut attempts = tokio::task::JoinSet::new();
        for _ in 0..100_000 {
            if stop.load(Ordering::Acquire) || started.elapsed() > Duration::from_secs(20) {
                break;
            }
            while attempts.len() < 64 {
                let bytes = bytes.clone();
                attempts.spawn(async move {
                    let mut s = tokio::net::TcpStream::connect(addr).await?;
                    s.write_all(&bytes).await?;
                    Ok::<_, std::io::Error>(s)
                });
            }
            if let Some(Ok(Ok(stream))) = attempts.join_next().await {
                opened.fetch_add(1, Ordering::Relaxed);
                open.push_back(stream);
                if open.len() > 32 {
                    open.pop_front();
                }
            }
        }
        attempts.abort_all();
    });
}

#[test]
fn a_flood_of_wrong_token_handshakes_is_not_logged_as_silent_connections() {
    let dir = Scratch::new("wrong-token-flood-wording");
    let slots = CLIENT_SLOTS.to_string();
    let server = Server::start_with_validity(
        &dir,
        "60s",
        &["--max-connections", &slots, "--no-quarantine"],
    );
    let addr = server.addr;
    let holders: Vec<TcpStream> = (0..CLIENT_SLOTS).map(|i| holder(addr, i)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let flooders: Vec<_> = (0..2)
        .map(|_| {
            let (stop, opened) = (stop.clone(), opened.clone());
            std::thread::spawn(move || flood(addr, Kind::WrongToken, stop, opened))
        })
        .collect();
    let waited = Instant::now();
    while opened.load(Ordering::Relaxed) < 3000 && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Release);
    for flooder in flooders {
        flooder.join().expect("flood thread");
    }
    drop(holders);
    // The server writes its last lines a moment later.
    std::thread::sleep(Duration::from_millis(300));
    let opened = opened.load(Ordering::Relaxed);
    let log = server.log_text();
    let silent: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sent nothing") || l.contains("send nothing"))
        .collect();
    assert!(
        opened >= 500 && silent.is_empty(),
        "{opened} connections, each of which sent a whole handshake with a wrong token; lines \
         that call them silent:\n{}",
        silent.join("\n")
    );
}
