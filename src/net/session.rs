//! One client connection on the server: the handshake, then requests
//! handled in order, with the replies to each read batch written together.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::codec::Framed;

use super::io::BoxIo;
use super::server::{Role, ServerState};
use super::wire::{
    self, ErrorKind, Hello, Op, Reply, Request, Response, Welcome, WireLockInfo, WireMode,
};
use crate::{LockArgs, NetLocker};

type Conn = Framed<BoxIo, tokio_util::codec::LengthDelimitedCodec>;

/// Serves one accepted connection, after the TLS handshake if configured.
pub(crate) async fn accept(stream: TcpStream, peer: SocketAddr, server: Arc<ServerState>) {
    let _ = stream.set_nodelay(true);
    #[cfg(feature = "tls")]
    if let Some(tls) = &server.config.tls {
        let handshake =
            tokio::time::timeout(server.config.handshake_timeout, tls.acceptor.accept(stream));
        match handshake.await {
            Ok(Ok(stream)) => return session(Box::new(stream), peer, server).await,
            Ok(Err(err)) => tracing::warn!(%peer, %err, "TLS handshake failed"),
            Err(_) => tracing::warn!(%peer, "no TLS handshake in time"),
        }
        return;
    }
    session(Box::new(stream), peer, server).await
}

async fn session(stream: BoxIo, peer: SocketAddr, server: Arc<ServerState>) {
    let mut conn = Framed::new(stream, wire::codec());
    let Some(role) = handshake(&mut conn, peer, &server).await else {
        return;
    };
    tracing::debug!(%peer, ?role, "client connected");
    let mut session = Session {
        server: &server,
        role,
        held: HashSet::new(),
    };
    loop {
        let frame = tokio::select! {
            frame = conn.next() => frame,
            () = server.shutdown.cancelled() => break,
        };
        // Handle this frame and every frame already buffered, then write all
        // the replies with one flush.
        let mut next = frame;
        loop {
            let response = match next {
                None => {
                    // The client stopped sending; it may still read replies.
                    let _ = SinkExt::<Bytes>::flush(&mut conn).await;
                    return;
                }
                Some(Ok(frame)) => session.handle(&frame).await,
                Some(Err(err)) => Err(format!("bad frame: {err}")),
            };
            match response {
                Ok(response) => {
                    if feed(&mut conn, &response).await.is_err() {
                        return;
                    }
                }
                Err(reason) => {
                    // The stream can no longer be trusted: say why and hang up.
                    tracing::warn!(%peer, %reason, "closing misbehaving connection");
                    let reply = Reply::Error {
                        kind: ErrorKind::InvalidArgument,
                        message: reason,
                    };
                    let _ = feed(&mut conn, &Response { id: 0, reply }).await;
                    let _ = SinkExt::<Bytes>::flush(&mut conn).await;
                    return;
                }
            }
            match conn.next().now_or_never() {
                Some(frame) => next = frame,
                None => break,
            }
        }
        if SinkExt::<Bytes>::flush(&mut conn).await.is_err() {
            return;
        }
    }
}

async fn feed<T: serde::Serialize>(conn: &mut Conn, message: &T) -> Result<(), ()> {
    let payload = wire::encode(message).map_err(|_| ())?;
    conn.feed(Bytes::from(payload)).await.map_err(|_| ())
}

async fn handshake(conn: &mut Conn, peer: SocketAddr, server: &ServerState) -> Option<Role> {
    let first = tokio::select! {
        first = tokio::time::timeout(server.config.handshake_timeout, conn.next()) => first,
        () = server.shutdown.cancelled() => return None,
    };
    let hello: Result<Hello, String> = match first {
        Ok(Some(Ok(frame))) => wire::decode(&frame).map_err(|e| e.to_string()),
        Ok(Some(Err(err))) => Err(format!("bad frame: {err}")),
        Ok(None) => return None,
        Err(_) => Err("no handshake in time".into()),
    };
    let verdict = match hello {
        Ok(hello) if hello.version != wire::PROTOCOL_VERSION => Err(format!(
            "protocol version {} is not supported; this server speaks {}",
            hello.version,
            wire::PROTOCOL_VERSION
        )),
        Ok(hello) => server
            .config
            .role_of(&hello.token)
            .ok_or_else(|| "invalid token".to_owned()),
        Err(reason) => Err(reason),
    };
    let welcome = match &verdict {
        Ok(role) => Welcome::Accepted {
            version: wire::PROTOCOL_VERSION,
            admin: *role == Role::Admin,
        },
        Err(reason) => {
            tracing::warn!(%peer, %reason, "rejected connection");
            Welcome::Rejected {
                reason: reason.clone(),
            }
        }
    };
    if feed(conn, &welcome).await.is_err() || SinkExt::<Bytes>::flush(conn).await.is_err() {
        return None;
    }
    verdict.ok()
}

struct Session<'a> {
    server: &'a ServerState,
    role: Role,
    /// Uids granted over this connection and not yet released.
    held: HashSet<Arc<str>>,
}

impl Session<'_> {
    /// The response to one frame, or why the connection must close.
    async fn handle(&mut self, frame: &[u8]) -> Result<Response, String> {
        let request: Request = wire::decode(frame).map_err(|e| e.to_string())?;
        let reply = self.dispatch(request.op).await;
        Ok(Response {
            id: request.id,
            reply,
        })
    }

    async fn dispatch(&mut self, op: Op) -> Reply {
        let locker = &*self.server.locker;
        let released = &self.server.released;
        match op {
            Op::Lock(args) | Op::RLock(args) | Op::Refresh(args, _)
                if released.contains(&args.uid) =>
            {
                // Overtaken by its own release: granting would leave an
                // entry that nobody unlocks.
                Reply::Bool(false)
            }
            Op::Lock(args) => self.grant(args.into(), Kind::Write).await,
            Op::RLock(args) => self.grant(args.into(), Kind::Read).await,
            Op::Unlock(args) => self.release(args.into(), Kind::Write).await,
            Op::RUnlock(args) => self.release(args.into(), Kind::Read).await,
            Op::ForceUnlock(args) if args.uid.is_empty() && self.role != Role::Admin => {
                forbidden("forcing resources open")
            }
            Op::ForceUnlock(args) => self.release(args.into(), Kind::Force).await,
            Op::Refresh(args, mode) => {
                let args = LockArgs::from(args);
                let result = match mode {
                    Some(mode) => locker.refresh_mode(&args, mode.into()).await,
                    None => locker.refresh(&args).await,
                };
                if matches!(result, Ok(false)) {
                    self.held.remove(&args.uid);
                }
                Reply::from_result(result)
            }
            Op::List if self.role != Role::Admin => forbidden("listing locks"),
            Op::List => Reply::Locks(list(locker)),
            Op::Health => Reply::Health {
                quarantined: locker.is_quarantined(),
                entries: locker.snapshot().len() as u64,
            },
        }
    }

    async fn grant(&mut self, args: LockArgs, kind: Kind) -> Reply {
        let limit = self.server.config.max_entries_per_connection;
        if self.held.len() >= limit && !self.held.contains(&args.uid) {
            return Reply::Error {
                kind: ErrorKind::Unavailable,
                message: format!("this connection already holds {limit} locks; release some first"),
            };
        }
        let locker = &*self.server.locker;
        let result = match kind {
            Kind::Read => locker.rlock(&args).await,
            _ => locker.lock(&args).await,
        };
        if matches!(result, Ok(true)) {
            self.held.insert(args.uid.clone());
        }
        Reply::from_result(result)
    }

    async fn release(&mut self, args: LockArgs, kind: Kind) -> Reply {
        let locker = &*self.server.locker;
        let result = match kind {
            Kind::Write => locker.unlock(&args).await,
            Kind::Read => locker.runlock(&args).await,
            Kind::Force => locker.force_unlock(&args).await,
        };
        self.server.released.remember(&args.uid);
        self.held.remove(&args.uid);
        Reply::from_result(result)
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Read,
    Write,
    Force,
}

fn forbidden(what: &str) -> Reply {
    Reply::Error {
        kind: ErrorKind::Forbidden,
        message: format!("{what} needs the admin token"),
    }
}

fn list(locker: &crate::LocalLocker) -> Vec<WireLockInfo> {
    let now = Instant::now();
    locker
        .snapshot()
        .into_iter()
        .map(|info| WireLockInfo {
            resource: info.resource,
            uid: info.uid,
            owner: info.owner,
            source: info.source,
            mode: WireMode::from(info.mode),
            age: now.saturating_duration_since(info.acquired),
            since_refresh: now.saturating_duration_since(info.refreshed),
        })
        .collect()
}
