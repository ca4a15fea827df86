//! A peer on a loopback port that is no lock server: it answers every
//! connection with fixed bytes once the client sent something, as a Redis
//! server answers a command it does not know, then holds the connection
//! open until the client closes it, so that only its answer can tell the
//! client what it is. Stopped, its threads joined, on drop.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What Redis answers to a line it cannot run.
pub const REDIS_ERROR: &[u8] =
    b"-ERR unknown command '\\x00\\x00\\x00', with args beginning with: \r\n";

pub struct FakePeer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl FakePeer {
    pub fn answering(answer: &'static [u8]) -> FakePeer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a fake peer");
        let addr = listener.local_addr().expect("fake peer address");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let acceptor = std::thread::spawn(move || {
            let mut peers = Vec::new();
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                peers.push(std::thread::spawn(move || serve(stream, answer)));
            }
            for peer in peers {
                let _ = peer.join();
            }
        });
        FakePeer {
            addr,
            stop,
            acceptor: Some(acceptor),
        }
    }
}

fn serve(mut stream: TcpStream, answer: &[u8]) {
    let mut buf = [0u8; 512];
    if matches!(stream.read(&mut buf), Ok(0) | Err(_)) {
        return;
    }
    if stream.write_all(answer).is_err() {
        return;
    }
    // Until the client goes: its process exits, so this ends.
    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
}

impl Drop for FakePeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the acceptor, which then sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}
