//! The sockets of connections still in their handshake, so that the
//! locker that gives them up can shut them down: a handshake parked on a
//! runtime nobody drives would otherwise keep its socket, and the slot the
//! server gave it, for as long as that runtime lives.
//!
//! Invariant: a socket is listed from before its TCP connect starts (the
//! kernel may finish a connect its task never sees) until its handshake
//! ends (then the connection's own closer takes over, or it is dropped);
//! once [`Dialing::close`] ran, a new one is shut down as it is listed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::{lookup_host, TcpSocket, TcpStream};

/// See the module docs.
#[derive(Default)]
pub(crate) struct Dialing {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next: u64,
    sockets: HashMap<u64, socket2::Socket>,
    closed: bool,
}

impl Dialing {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lists `socket` until the returned guard is dropped; shuts it down
    /// at once when this was closed. Fails when the socket's second handle
    /// cannot be made (no descriptor free): that attempt fails as a
    /// connect does, for what it is, rather than read as given up.
    fn enter(self: &Arc<Self>, socket: socket2::SockRef<'_>) -> std::io::Result<Listed> {
        let socket = socket.try_clone()?;
        let mut state = self.state();
        let id = state.next;
        state.next = state.next.wrapping_add(1);
        if state.closed {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        } else {
            state.sockets.insert(id, socket);
        }
        Ok(Listed {
            dialing: self.clone(),
            id,
        })
    }

    /// Shuts down every socket still in its handshake: a connection is in
    /// (one opened now would be closed as late anyway).
    pub(crate) fn shut_down_all(&self) {
        let sockets: Vec<socket2::Socket> = self.state().sockets.drain().map(|(_, s)| s).collect();
        for socket in sockets {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }

    /// The locker is gone: every socket in its handshake, now or later, is
    /// shut down.
    pub(crate) fn close(&self) {
        self.state().closed = true;
        self.shut_down_all();
    }
}

/// Connects to `endpoint` (each address it resolves to in turn) with a
/// socket listed in `dialing` before its connect starts; `listed` holds
/// the latest one's listing, so that the caller can tell, whatever the
/// attempt ends with, whether the locker gave it up. The error of the
/// last address tried, as `TcpStream::connect` would give it.
pub(super) async fn connect(
    dialing: &Arc<Dialing>,
    endpoint: &str,
    listed: &mut Option<Listed>,
) -> std::io::Result<TcpStream> {
    let mut last = None;
    for addr in lookup_host(endpoint).await? {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        };
        // A host without IPv6, say: the next address may do.
        let socket = match socket {
            Ok(socket) => socket,
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        let entered = match dialing.enter(socket2::SockRef::from(&socket)) {
            Ok(entered) => listed.insert(entered),
            Err(e) => {
                *listed = None;
                return Err(e);
            }
        };
        // Shutting down a socket still connecting does not stop its
        // connect: one given up before or while it connects (the locker
        // dropped, another connection installed) is closed once connected.
        if !entered.is_listed() {
            return Err(given_up());
        }
        match socket.connect(addr).await {
            Ok(stream) if listed.as_ref().is_some_and(Listed::is_listed) => return Ok(stream),
            Ok(stream) => {
                let _ = socket2::SockRef::from(&stream).shutdown(std::net::Shutdown::Both);
                return Err(given_up());
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "could not resolve to any addresses",
        )
    }))
}

fn given_up() -> std::io::Error {
    std::io::Error::other(
        "the attempt was given up: the locker was dropped, or another connection is in",
    )
}

/// A socket listed in [`Dialing`]; dropped when its handshake ends.
pub(super) struct Listed {
    dialing: Arc<Dialing>,
    id: u64,
}

impl Listed {
    /// Whether it is still listed: not given up by [`Dialing::close`] or
    /// [`Dialing::shut_down_all`].
    pub(super) fn is_listed(&self) -> bool {
        self.dialing.state().sockets.contains_key(&self.id)
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        self.dialing.state().sockets.remove(&self.id);
    }
}
