//! One client connection on the server: the handshake, then requests
//! handled in order, with the replies to each read batch written together.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::codec::Framed;

use super::io::BoxIo;
use super::server::{Role, ServerState, Slot};
use super::wire::{
    self, ErrorKind, Hello, Op, Reply, Request, Response, Welcome, WireArgs, WireLockInfo, WireMode,
};
use crate::{LockArgs, LockMode, NetLocker};

type Conn = Framed<BoxIo, tokio_util::codec::LengthDelimitedCodec>;

/// A frame above this size makes the session drop its read buffer once the
/// batch is handled.
const LARGE_FRAME: usize = 64 * 1024;

/// Serves one accepted connection, after the TLS handshake if configured.
/// The slot is held until the connection closes.
pub(crate) async fn accept(stream: TcpStream, peer: SocketAddr, slot: Slot) {
    let server = slot.state().clone();
    let _ = stream.set_nodelay(true);
    #[cfg(feature = "tls")]
    if let Some(tls) = &server.config.tls {
        let handshake =
            tokio::time::timeout(server.config.handshake_timeout, tls.acceptor.accept(stream));
        let handshake = tokio::select! {
            handshake = handshake => handshake,
            () = slot.evicted() => return,
        };
        match handshake {
            Ok(Ok(stream)) => return session(Box::new(stream), peer, server, &slot).await,
            Ok(Err(err)) => tracing::warn!(%peer, %err, "TLS handshake failed"),
            Err(_) => tracing::warn!(%peer, "no TLS handshake in time"),
        }
        return;
    }
    session(Box::new(stream), peer, server, &slot).await
}

async fn session(stream: BoxIo, peer: SocketAddr, server: Arc<ServerState>, slot: &Slot) {
    // Small frames only until the peer proved it holds a token.
    let mut conn = Framed::new(stream, wire::hello_codec());
    let Some(role) = handshake(&mut conn, peer, &server, slot).await else {
        return;
    };
    slot.authenticated();
    conn.codec_mut().set_max_frame_length(wire::MAX_FRAME);
    tracing::debug!(%peer, ?role, "client connected");
    let session = Session {
        server: &server,
        role,
        id: slot.id(),
    };
    serve(&mut conn, peer, &session).await;
}

async fn serve(conn: &mut Conn, peer: SocketAddr, session: &Session<'_>) {
    let server = session.server;
    loop {
        let frame = tokio::select! {
            frame = conn.next() => frame,
            () = server.shutdown.cancelled() => break,
        };
        // Handle this frame and every frame already buffered, then write all
        // the replies with one flush.
        let mut next = frame;
        let mut large = false;
        loop {
            let response = match next {
                None => {
                    // The client stopped sending; it may still read replies.
                    let _ = SinkExt::<Bytes>::flush(conn).await;
                    return;
                }
                Some(Ok(frame)) => {
                    large |= frame.len() > LARGE_FRAME;
                    session.handle(&frame).await
                }
                Some(Err(err)) => Err(format!("bad frame: {err}")),
            };
            match response {
                Ok(response) => {
                    if feed(conn, &response).await.is_err() {
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
                    let _ = feed(conn, &Response { id: 0, reply }).await;
                    let _ = SinkExt::<Bytes>::flush(conn).await;
                    return;
                }
            }
            match conn.next().now_or_never() {
                Some(frame) => next = frame,
                None => break,
            }
        }
        if SinkExt::<Bytes>::flush(conn).await.is_err() {
            return;
        }
        // A large request leaves a read buffer of its size behind; give it
        // back rather than keep it for the life of an idle connection.
        if large && conn.read_buffer().is_empty() {
            *conn.read_buffer_mut() = bytes::BytesMut::new();
        }
    }
}

async fn feed<T: serde::Serialize>(conn: &mut Conn, message: &T) -> Result<(), ()> {
    let payload = wire::encode(message).map_err(|_| ())?;
    conn.feed(Bytes::from(payload)).await.map_err(|_| ())
}

async fn handshake(
    conn: &mut Conn,
    peer: SocketAddr,
    server: &ServerState,
    slot: &Slot,
) -> Option<Role> {
    let first = tokio::select! {
        first = tokio::time::timeout(server.config.handshake_timeout, conn.next()) => first,
        () = server.shutdown.cancelled() => return None,
        () = slot.evicted() => {
            tracing::debug!(%peer, "closed before its handshake to make room for a new connection");
            return None;
        }
    };
    let hello: Result<Hello, String> = match first {
        Ok(Some(Ok(frame))) => wire::decode(&frame).map_err(|e| e.to_string()),
        Ok(Some(Err(err))) => Err(format!("bad frame: {err}")),
        Ok(None) => return None,
        Err(_) => Err("no handshake in time".into()),
    }
    .map_err(|reason| {
        if reason.contains("frame size too big") {
            format!(
                "{reason}: at most {} bytes may be sent before the handshake",
                wire::MAX_HELLO_FRAME
            )
        } else {
            reason
        }
    });
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
            validity: server.locker.config().validity,
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
    /// Names this connection in the server's ledger.
    id: u64,
}

/// The lock arguments of a request, or the reply refusing them when a field
/// is beyond the protocol's limits.
fn checked(args: WireArgs) -> Result<LockArgs, Reply> {
    match args.oversize {
        Some(reason) => Err(Reply::Error {
            kind: ErrorKind::InvalidArgument,
            message: format!("{reason}; see the limits in PROTOCOL.md"),
        }),
        None => Ok(args.into()),
    }
}

impl Session<'_> {
    /// The response to one frame, or why the connection must close.
    async fn handle(&self, frame: &[u8]) -> Result<Response, String> {
        let request: Request = wire::decode(frame).map_err(|e| e.to_string())?;
        let reply = self.dispatch(request.op).await;
        Ok(Response {
            id: request.id,
            reply,
        })
    }

    async fn dispatch(&self, op: Op) -> Reply {
        let locker = &*self.server.locker;
        match op {
            Op::Lock(args) => self.grant(args, LockMode::Write).await,
            Op::RLock(args) => self.grant(args, LockMode::Read).await,
            Op::Unlock(args) => self.release(args, Kind::Write).await,
            Op::RUnlock(args) => self.release(args, Kind::Read).await,
            Op::ForceUnlock(args) if args.uid.is_empty() && self.role != Role::Admin => {
                forbidden("forcing resources open")
            }
            Op::ForceUnlock(args) => self.release(args, Kind::Force).await,
            Op::Refresh(args, mode) => self.refresh(args, mode.map(LockMode::from)).await,
            Op::List if self.role != Role::Admin => forbidden("listing locks"),
            Op::List => Reply::Locks(list(locker)),
            Op::Health => Reply::Health {
                quarantined: locker.is_quarantined(),
                entries: self.entries().await,
            },
        }
    }

    /// How many entries the table holds. Counting copies the table, so one
    /// count runs at a time: clients asking together cannot multiply that
    /// copy.
    async fn entries(&self) -> u64 {
        let _one = self.server.counting.lock().await;
        self.server.locker.snapshot().len() as u64
    }

    /// Grants a lock, atomically with respect to a release of its uid.
    ///
    /// Why no entry can outlive a release of the same uid, whatever the
    /// interleaving with another connection: a release records the
    /// tombstone *before* it unlocks ([`release`](Self::release)), and a
    /// grant looks for the tombstone again *after* the locker granted. If
    /// that look finds none, the tombstone was recorded after the grant,
    /// so the release's unlock also runs after it and removes the entry;
    /// if it finds one, the grant is undone here. (The tombstone lock
    /// orders the two looks.) The look before the grant only saves work.
    /// The one gap: a tombstone forgotten between the two (it is kept for
    /// the validity, or less under a flood of releases past
    /// `max_released_bytes`); the entry then expires after the validity.
    async fn grant(&self, args: WireArgs, mode: LockMode) -> Reply {
        let args = match checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        let released = &self.server.released;
        if released.contains(&args.uid) {
            // Overtaken by its own release: granting would leave an entry
            // that nobody unlocks.
            return Reply::Bool(false);
        }
        let ledger = &self.server.ledger;
        let reserved = match ledger.reserve(self.id, &args) {
            Ok(reserved) => reserved,
            Err(message) => return unavailable(message),
        };
        let locker = &*self.server.locker;
        let result = match mode {
            LockMode::Read => locker.rlock(&args).await,
            LockMode::Write => locker.lock(&args).await,
        };
        if !matches!(result, Ok(true)) {
            ledger.undo(&args.uid, reserved);
            return Reply::from_result(result);
        }
        if released.contains(&args.uid) {
            self.undo_grant(&args).await;
            return Reply::Bool(false);
        }
        ledger.touch(self.id, &args.uid);
        Reply::Bool(true)
    }

    /// Removes what a grant for a uid released meanwhile created.
    async fn undo_grant(&self, args: &LockArgs) {
        tracing::debug!(uid = %args.uid, "grant raced its own release; undone");
        // By uid and resources, whatever the mode. Afterwards none of these
        // entries exists, whoever removed them, so the charge goes too.
        let _ = self.server.locker.force_unlock(args).await;
        self.server.ledger.release(&args.uid, Some(&args.resources));
    }

    /// Releases by uid. The tombstone is recorded before the unlock, which
    /// is what makes [`grant`](Self::grant) safe against this release.
    async fn release(&self, args: WireArgs, kind: Kind) -> Reply {
        let args = match checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        self.server.released.remember(&args.uid);
        let locker = &*self.server.locker;
        let result = match kind {
            Kind::Write => locker.unlock(&args).await,
            Kind::Read => locker.runlock(&args).await,
            Kind::Force => locker.force_unlock(&args).await,
        };
        // Only a release that removed something frees the charge: one in
        // the wrong mode removes nothing and must not make the entries
        // free of charge.
        if matches!(result, Ok(true)) && !args.uid.is_empty() {
            let everywhere = matches!(kind, Kind::Force) && args.resources.is_empty();
            let resources = (!everywhere).then_some(&args.resources[..]);
            self.server.ledger.release(&args.uid, resources);
        }
        Reply::from_result(result)
    }

    /// Refreshes a lock; in quarantine, with a mode, the locker may re-create
    /// its entries.
    ///
    /// Such a re-grant creates entries as a lock does, so it is charged and
    /// limited as a lock is (issue #9: it was not counted at all). A uid
    /// this server does not know is still re-granted: after a restart the
    /// server cannot tell a lock it granted before from a new one, and
    /// refusing would cost a live holder its lock, which is what the
    /// quarantine exists to prevent. A uid released here is refused as
    /// for a lock, and a re-grant racing its release is undone as in
    /// [`grant`](Self::grant).
    async fn refresh(&self, args: WireArgs, mode: Option<LockMode>) -> Reply {
        let args = match checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        let released = &self.server.released;
        if released.contains(&args.uid) {
            return Reply::Bool(false);
        }
        let (locker, ledger) = (&*self.server.locker, &self.server.ledger);
        let may_create = mode.is_some() && locker.is_quarantined();
        let reserved = if may_create {
            match ledger.reserve(self.id, &args) {
                Ok(reserved) => Some(reserved),
                Err(message) => return unavailable(message),
            }
        } else {
            None
        };
        let result = match mode {
            Some(mode) => locker.refresh_mode(&args, mode).await,
            None => locker.refresh(&args).await,
        };
        // After the locker's refresh, so the charge never lapses before
        // the entries it pays for; also on failure, since a partial refresh
        // still refreshes the entries it found.
        let known = ledger.touch(self.id, &args.uid);
        match (&result, reserved) {
            (Ok(true), _) if released.contains(&args.uid) => {
                if may_create {
                    self.undo_grant(&args).await;
                }
                return Reply::Bool(false);
            }
            // Entries nothing here knew of (a re-grant as quarantine ended
            // under us): charge them, there is no refusing them now.
            (Ok(true), _) if !known => ledger.charge_unconditionally(self.id, &args),
            (Ok(true), _) => {}
            (_, Some(reserved)) => ledger.undo(&args.uid, reserved),
            (_, None) => {}
        }
        Reply::from_result(result)
    }
}

fn unavailable(message: String) -> Reply {
    Reply::Error {
        kind: ErrorKind::Unavailable,
        message,
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
