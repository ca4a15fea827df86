//! A stand-in for a lock server of an older protocol version: of version 2,
//! as released before version 3, or of version 3, as released before
//! version 4. It speaks only its versions, rejects any other in the
//! handshake with the reason those servers gave, grants every lock, and
//! closes the connection over a request it cannot decode (one of a newer
//! version). It records what clients sent, so that tests can check a newer
//! client fell back.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::wire::{
    accepted, frame, read_frame, read_varint, rejected, string, varint, OP_HEALTH, REPLY_BOOL,
    REPLY_ERROR, REPLY_HEALTH,
};

/// What the old server saw.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// The version of every `Hello`, in order.
    pub hellos: Vec<u16>,
    /// The op index of every request, in order.
    pub ops: Vec<u8>,
}

pub struct OldServer {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    task: JoinHandle<()>,
}

impl OldServer {
    /// A version-2 server: listens on 127.0.0.1 and accepts `token`.
    pub async fn start(token: &str) -> OldServer {
        Self::start_speaking(token, 2).await
    }

    /// A server of versions 2 to `newest` (2 or 3). It serves only the
    /// requests of version 2, whatever version the connection speaks.
    pub async fn start_speaking(token: &str, newest: u16) -> OldServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let token = token.to_owned();
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            // Bounded: a test makes a handful of connections.
            for _ in 0..64 {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(stream, token.clone(), newest, shared.clone()));
            }
        });
        OldServer { addr, seen, task }
    }

    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for OldServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: TcpStream, token: String, newest: u16, seen: Arc<Mutex<Seen>>) {
    let Ok(hello) = read_frame(&mut stream, 4096).await else {
        return;
    };
    let Some((version, rest)) = read_varint(&hello) else {
        return;
    };
    let version = version as u16;
    seen.lock().unwrap().hellos.push(version);
    let offered = read_varint(rest).and_then(|(len, rest)| rest.get(..len as usize));
    let welcome = if !(2..=newest).contains(&version) {
        // The exact words of a version-2 or version-3 server.
        let spoken = if newest == 2 { "2" } else { "2 and 3" };
        rejected(&format!(
            "protocol version {version} is not supported; this server speaks {spoken}"
        ))
    } else if offered != Some(token.as_bytes()) {
        rejected("invalid token")
    } else {
        accepted(version, Duration::from_secs(6))
    };
    let accepted_now = welcome[0] == 0;
    if stream.write_all(&frame(&welcome)).await.is_err() || !accepted_now {
        return;
    }
    loop {
        let Ok(request) = read_frame(&mut stream, 2 << 20).await else {
            return;
        };
        let Some((id, rest)) = read_varint(&request) else {
            return;
        };
        let op = rest.first().copied().unwrap_or(u8::MAX);
        seen.lock().unwrap().ops.push(op);
        let mut reply = varint(id);
        match op {
            0..=5 => reply.extend([REPLY_BOOL, 1]),
            // Not in quarantine, no entries.
            OP_HEALTH => reply.extend([REPLY_HEALTH, 0, 0]),
            _ => {
                // What a version-2 server does with a request it cannot
                // decode: an error with id 0, and hang up.
                let mut error = varint(0);
                error.extend([REPLY_ERROR, 0]);
                error.extend(string(
                    b"malformed message: Found an enum discriminant that was not expected",
                ));
                let _ = stream.write_all(&frame(&error)).await;
                return;
            }
        }
        if stream.write_all(&frame(&reply)).await.is_err() {
            return;
        }
    }
}
