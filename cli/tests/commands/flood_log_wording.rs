//! The cause a server logs while peers without a token flood it with
//! connections that are refused at once (a wrong token), while the only
//! client slot is held: no slot then holds anything but that one client,
//! the handshakes of the flood and connections closed for the flood, so
//! the log must not say that every slot holds an authenticated connection
//! and tell the operator to raise --max-connections.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::wire::{frame, hello, VERSION};
use crate::support::{Scratch, Server, TOKEN};

const THREADS: usize = 8;
const PER_THREAD: usize = 400;

fn authenticated(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(&frame(&hello(VERSION, TOKEN.as_bytes())))
        .unwrap();
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).expect("a welcome");
    let mut welcome = vec![0; u32::from_be_bytes(header) as usize];
    stream.read_exact(&mut welcome).expect("a welcome");
    assert_eq!(welcome.first(), Some(&0), "not accepted");
    stream
}

#[test]
fn a_flood_of_wrong_tokens_is_not_logged_as_every_slot_authenticated() {
    let dir = Scratch::new("flood-log-wording");
    let server = Server::start(&dir, &["--max-connections", "1", "--admin-reserve", "1"]);
    let addr = server.addr;
    let _client = authenticated(addr);
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
