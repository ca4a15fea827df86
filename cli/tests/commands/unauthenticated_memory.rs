//! What peers without a token can make a real server hold: as many
//! connections as it keeps (its slots and those being evicted), each
//! sending as much of a handshake as the server reads before it gives up,
//! stay within the memory budget the server states at start-up ("peers
//! without a token can add at most N MiB"), with TLS as without.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::{Scratch, Server};

/// `max_connections + admin_reserve + EVICTING` with the defaults.
const CONNECTIONS: usize = 512 + 4 + 8;

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// The budget the server logged at start-up, in MiB.
fn stated_budget_mib(server: &Server) -> usize {
    let log = server.log_text();
    let words = "peers without a token can add at most ";
    let at = log.find(words).expect("the budget line") + words.len();
    log[at..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a number of MiB")
}

/// The start of a ClientHello announcing 65,023 bytes, in records of 16
/// KiB, one byte short of complete: rustls keeps it all while it waits.
fn partial_client_hello() -> Vec<u8> {
    let len: usize = 65_023;
    let mut message = vec![1];
    message.extend(&(len as u32).to_be_bytes()[1..]);
    message.extend([3, 3]);
    message.resize(4 + len - 1, b'A');
    let mut records = Vec::new();
    for chunk in message.chunks(16 * 1024) {
        records.extend([22, 3, 1]);
        records.extend((chunk.len() as u16).to_be_bytes());
        records.extend(chunk);
    }
    records
}

/// A plain handshake frame announcing 4096 bytes, one byte short.
fn partial_hello_frame() -> Vec<u8> {
    let mut frame = 4096u32.to_be_bytes().to_vec();
    frame.push(2);
    frame.resize(4 + 4095, b'A');
    frame
}

/// Opens [`CONNECTIONS`] connections that each send `bytes`, and returns
/// the most the server's memory grew while they were open (in KiB).
fn growth_kib(server: &Server, bytes: &[u8]) -> usize {
    let pid = server.pid();
    let addr: SocketAddr = server.addr;
    // A few connections first, so that what the first ones set up once
    // is not counted.
    for _ in 0..8 {
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.write_all(&bytes[..64]);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kib(pid);
    let mut open = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        let mut stream = TcpStream::connect(addr).expect("connect");
        let _ = stream.write_all(bytes);
        open.push(stream);
    }
    let mut peak = before;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        peak = peak.max(rss_kib(pid));
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(open);
    peak.saturating_sub(before)
}

#[test]
fn peers_without_a_token_stay_within_the_stated_budget_with_and_without_tls() {
    let dir = Scratch::new("unauthenticated-memory");
    let mut over = Vec::new();

    let plain = Server::start(&dir, &["--handshake-timeout", "30s"]);
    let budget = stated_budget_mib(&plain) * 1024;
    let grew = growth_kib(&plain, &partial_hello_frame());
    eprintln!("plain: grew {grew} KiB, budget {budget} KiB");
    if grew > budget {
        over.push(format!("plain: grew {grew} KiB, budget {budget} KiB"));
    }
    drop(plain);

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
            "30s",
        ],
    );
    let budget = stated_budget_mib(&server) * 1024;
    let grew = growth_kib(&server, &partial_client_hello());
    eprintln!("TLS: grew {grew} KiB, budget {budget} KiB");
    if grew > budget {
        over.push(format!(
            "TLS: {CONNECTIONS} connections, each with a ClientHello one byte short of its \
             65,023 bytes, grew the server by {grew} KiB; its stated budget is {budget} KiB"
        ));
    }
    assert!(over.is_empty(), "{over:#?}");
}
