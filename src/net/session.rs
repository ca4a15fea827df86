//! One client connection on the server: the handshake, then requests
//! handled in order, with the replies to each read batch written together,
//! and (protocol version 3) the pushes for the connection's waiters written
//! as they come.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::Framed;

use super::config::PUSH_QUEUE;
use super::io::BoxIo;
use super::labels::{AuthRefusal, Limit};
use super::ledger::{proclamation_bytes, watch_bytes, Board, Over};
use super::refusals::{Cause, Refused};
use super::state::{Role, ServerState, Slot};
use super::waits::{Place, PollKey, Waits, MAX_PLACE_TTL, POLL_PLACE_TTL};
use super::wire::{
    self, ErrorKind, Hello, Op, Reply, Request, Response, Welcome, WireArgs, WireLockInfo,
    WireMode, WireProclamation, WirePushEvent, WireTicket, WireWaitReply,
};
use super::{malformed, sniff};
use crate::locker::proclamation::WatchArgs;
use crate::locker::wait::{PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake};
use crate::{Error, LockArgs, LockMode, NetLocker};

/// A push on its way from the lock table to the connection's task.
type Pushed = (Box<str>, PushEvent);

type Conn = Framed<BoxIo, tokio_util::codec::LengthDelimitedCodec>;

/// A frame above this size makes the session drop its read buffer once the
/// batch is handled.
const LARGE_FRAME: usize = 64 * 1024;

/// Replies buffered past this many bytes are written before the next one is
/// encoded.
const FLUSH_AT: usize = 64 * 1024;

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
            Ok(Err(err)) => match super::tls::accept_failure(&err) {
                (true, why) => {
                    if let Some(refused) = server.refusals.due(Cause::TlsFailed) {
                        tracing::warn!(%peer, %err, refused, "TLS handshake failed: {why} \
                            (`refused` counts TLS failures since the last such line)");
                    }
                }
                (false, why) => tracing::debug!(%peer, %err, "{why}"),
            },
            Err(_) => {
                if let Some(refused) = server.refusals.due(Cause::TlsTimeout) {
                    tracing::warn!(%peer, refused, timeout = ?server.config.handshake_timeout,
                        "no TLS handshake within the handshake timeout: closed connections \
                         that did not start TLS (`refused` counts them since the last such line)");
                }
            }
        }
        server.metrics.auth_refused(AuthRefusal::Tls);
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
    conn.codec_mut().set_max_frame_length(wire::MAX_FRAME);
    let (role, version) = role;
    tracing::debug!(%peer, ?role, version, "client connected");
    let (pushes, mut pushed) = mpsc::channel(PUSH_QUEUE);
    let session = Session {
        server: &server,
        role,
        id: slot.id(),
        version,
        wake: Wake::new(Arc::new(ConnSink { pushes }), 0),
        waits: Mutex::new(Waits::new(server.config.max_waiters_per_connection)),
    };
    serve(&mut conn, peer, &session, &mut pushed).await;
}

/// What woke the connection's task.
enum Event {
    Frame(Option<Result<bytes::BytesMut, std::io::Error>>),
    Push(Pushed),
    Shutdown,
    /// The idle timeout may have passed.
    Idle,
}

async fn serve(
    conn: &mut Conn,
    peer: SocketAddr,
    session: &Session<'_>,
    pushed: &mut mpsc::Receiver<Pushed>,
) {
    let server = session.server;
    // The timer is moved on only when it fires, not at every request.
    let idle_timeout = server.config.idle_timeout;
    let mut last_heard = Instant::now();
    let idle = tokio::time::sleep(idle_timeout.unwrap_or_default());
    tokio::pin!(idle);
    loop {
        read_room(conn);
        let event = tokio::select! {
            frame = conn.next() => Event::Frame(frame),
            Some(push) = pushed.recv() => Event::Push(push),
            () = server.shutdown.cancelled() => Event::Shutdown,
            () = &mut idle, if idle_timeout.is_some() => Event::Idle,
        };
        let frame = match event {
            Event::Frame(frame) => {
                last_heard = Instant::now();
                frame
            }
            Event::Shutdown => break,
            Event::Idle => {
                let timeout = idle_timeout.unwrap_or_default();
                let now = Instant::now();
                let quiet = now.duration_since(last_heard) >= timeout;
                // Bytes of a request already read count as hearing from it.
                if quiet && conn.read_buffer().is_empty() && session.holds_nothing() {
                    tracing::debug!(%peer, ?timeout, "closing a connection that was silent and held nothing");
                    let _ = SinkExt::<Bytes>::flush(conn).await;
                    return;
                }
                let next = if quiet { now } else { last_heard };
                idle.as_mut().reset(next + timeout);
                continue;
            }
            Event::Push(push) => {
                // Every push already queued goes out with this one.
                if session.forward(conn, push).await.is_err()
                    || forward_queued(conn, session, pushed).await.is_err()
                    || SinkExt::<Bytes>::flush(conn).await.is_err()
                {
                    return;
                }
                continue;
            }
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
                Some(Err(err)) if closed(&err) => {
                    // A client that went away without the courtesies (most
                    // do, on exit): a close, not misbehaviour. Nothing of a
                    // frame it may have cut short is acted upon.
                    tracing::debug!(%peer, %err, "client closed the connection abruptly");
                    return;
                }
                Some(Err(err)) => {
                    if too_big(&err) {
                        server.metrics.refused_by(Limit::Frame);
                    }
                    Err(malformed::bad_frame(
                        &err,
                        conn.read_buffer(),
                        wire::MAX_FRAME,
                    ))
                }
            };
            match response {
                Ok(response) => {
                    if feed(conn, &response).await.is_err() {
                        return;
                    }
                }
                Err(reason) => {
                    // The stream can no longer be trusted: say why and hang
                    // up, in one line a second at most however many
                    // connections do it.
                    if let Some(closed) = server.refusals.due(Cause::Misbehaving) {
                        tracing::warn!(%peer, %reason, closed,
                            "closed connections that sent a frame that could not be decoded \
                             (`closed` counts them since the last such line)");
                    }
                    let reply = Reply::Error {
                        kind: ErrorKind::InvalidArgument,
                        message: reason,
                    };
                    let _ = feed(conn, &Response { id: 0, reply }).await;
                    let _ = SinkExt::<Bytes>::flush(conn).await;
                    return;
                }
            }
            read_room(conn);
            match conn.next().now_or_never() {
                Some(frame) => next = frame,
                None => break,
            }
        }
        // Pushes caused by this batch (or queued meanwhile) go out after
        // its replies, in the same flush.
        if forward_queued(conn, session, pushed).await.is_err()
            || SinkExt::<Bytes>::flush(conn).await.is_err()
        {
            return;
        }
        // A large request leaves a read buffer of its size behind; give it
        // back rather than keep it for the life of an idle connection.
        if large && conn.read_buffer().is_empty() {
            *conn.read_buffer_mut() = bytes::BytesMut::new();
        }
    }
}

/// Room kept free in the read buffer before every read of an
/// authenticated connection: the codec asks only for what the frame in
/// progress lacks, so after a batch the buffer's free tail can be a few
/// hundred bytes, and a read that fills it leaves the rest of the batch
/// for another read (two `recvfrom`s per batch instead of one). The
/// codec's own starting capacity, so the buffer stays within
/// `CONNECTION_OVERHEAD`; in steady state the reserve only moves what is
/// left to the front.
const READ_ROOM: usize = 8 * 1024;

fn read_room(conn: &mut Conn) {
    conn.read_buffer_mut().reserve(READ_ROOM);
}

/// Feeds every push already queued, without waiting for more.
async fn forward_queued(
    conn: &mut Conn,
    session: &Session<'_>,
    pushed: &mut mpsc::Receiver<Pushed>,
) -> Result<(), ()> {
    while let Ok(push) = pushed.try_recv() {
        session.forward(conn, push).await?;
    }
    Ok(())
}

/// Encodes `message` straight into the connection's write buffer; the
/// caller's next flush sends it. A buffer past [`FLUSH_AT`] is flushed at
/// once, so a client that pipelines many requests cannot make it grow
/// without bound.
async fn feed<T: serde::Serialize>(conn: &mut Conn, message: &T) -> Result<(), ()> {
    wire::encode_frame(message, conn.write_buffer_mut()).map_err(|_| ())?;
    if conn.write_buffer().len() >= FLUSH_AT {
        SinkExt::<Bytes>::flush(conn).await.map_err(|_| ())?;
    }
    Ok(())
}

/// Authenticates the peer; its role and the protocol version it speaks.
async fn handshake(
    conn: &mut Conn,
    peer: SocketAddr,
    server: &ServerState,
    slot: &Slot,
) -> Option<(Role, u16)> {
    let first = tokio::select! {
        first = tokio::time::timeout(server.config.handshake_timeout, conn.next()) => first,
        () = server.shutdown.cancelled() => return None,
        () = slot.evicted() => {
            tracing::debug!(%peer, "closed before its handshake to make room for a new connection");
            return None;
        }
    };
    let malformed = |reason: String| (AuthRefusal::Malformed, reason);
    let hello: Result<Hello, (AuthRefusal, String)> = match first {
        Ok(Some(Ok(frame))) => wire::decode(&frame).map_err(|e| malformed(e.to_string())),
        Ok(Some(Err(err))) if closed(&err) => {
            // Gone before saying anything: a port check, or a client that
            // gave up. Nobody to answer, and nothing wrong with the server.
            tracing::debug!(%peer, %err, "closed before its handshake");
            return None;
        }
        Ok(Some(Err(err))) if too_big(&err) => {
            server.metrics.refused_by(Limit::HelloFrame);
            // Any text, TLS record or other protocol gets here with its
            // first four bytes: say what spoke, if it is plain.
            let read = conn.read_buffer();
            let reason = sniff::client_that_sent(read).unwrap_or_else(|| {
                let refused = malformed::bad_frame(&err, read, wire::MAX_HELLO_FRAME);
                format!("{refused} before the handshake")
            });
            Err(malformed(reason))
        }
        Ok(Some(Err(err))) => Err(malformed(format!("bad frame: {err}"))),
        Ok(None) => return None,
        Err(_) => Err((AuthRefusal::Timeout, "no handshake in time".into())),
    };
    // The version is checked first, as version-2 servers did: a client
    // that is refused for its version asks again with an older one.
    let verdict = match hello {
        Ok(hello) if !wire::speaks(hello.version) => Err((
            AuthRefusal::Version,
            wire::unsupported_version(hello.version),
        )),
        Ok(hello) => server
            .role_of(&hello.token)
            .map(|role| (role, hello.version))
            .ok_or_else(|| (AuthRefusal::Token, "invalid token".to_owned())),
        Err(refused) => Err(refused),
    };
    // Only a peer with a token learns whether there is room for it.
    let verdict = match verdict {
        Ok((role, version)) => match slot.admit(role) {
            Ok(()) => Ok((role, version)),
            Err(busy) => Err(Refused::Busy(busy)),
        },
        Err((why, reason)) => {
            server.metrics.auth_refused(why);
            Err(Refused::Auth(why, reason))
        }
    };
    let welcome = match &verdict {
        Ok((role, version)) => Welcome::Accepted {
            version: *version,
            admin: *role == Role::Admin,
            validity: server.locker.config().validity,
        },
        Err(refused) => {
            refused.log(peer, &server.refusals, server.config.handshake_timeout);
            Welcome::Rejected {
                reason: refused.reason().to_owned(),
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
    /// The protocol version the client speaks.
    version: u16,
    /// Where the lock table pushes this connection's grants and wounds,
    /// and the `Changed` of its watches.
    wake: Wake,
    /// The places this connection holds in line. Only this connection's
    /// task locks it, so it is never contended.
    waits: Mutex<Waits>,
}

/// Hands pushes from the lock table to the connection's task. Never
/// blocks: when the task is gone or too far behind, the push is dropped
/// (the waiter learns of its grant when it asks again).
struct ConnSink {
    pushes: mpsc::Sender<Pushed>,
}

impl PushSink for ConnSink {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.pushes.try_send((uid.into(), event)) {
            tracing::debug!(%uid, ?event, "push queue full; dropping the push");
        }
    }
}

/// How a version-2 poll or a version-3 wait asks the lock table.
struct Asked {
    mode: LockMode,
    ticket: Ticket,
    place_ttl: Duration,
    push: bool,
}

/// Whether a read failed because the client went away rather than because
/// it broke the protocol: a TLS client that sent no close_notify, a socket
/// reset because the client closed it with replies unread, a peer that
/// vanished from the network, or a stream that ended in the middle of a
/// frame (a client killed while it wrote; nothing of the cut frame is
/// acted upon).
fn closed(err: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    match err.kind() {
        ErrorKind::UnexpectedEof
        | ErrorKind::ConnectionReset
        | ErrorKind::ConnectionAborted
        | ErrorKind::BrokenPipe
        | ErrorKind::NotConnected
        | ErrorKind::TimedOut
        | ErrorKind::HostUnreachable
        | ErrorKind::NetworkUnreachable => true,
        // The codec's end of stream inside a frame has no kind of its own
        // (tokio-util's `Decoder::decode_eof`); its words are all there is.
        ErrorKind::Other => err
            .get_ref()
            .is_some_and(|inner| inner.to_string() == "bytes remaining on stream"),
        _ => false,
    }
}

/// Whether the codec refused a frame for its length.
fn too_big(err: &std::io::Error) -> bool {
    err.get_ref()
        .is_some_and(|inner| inner.is::<tokio_util::codec::LengthDelimitedCodecError>())
}

impl Session<'_> {
    /// The lock arguments of a request, or the reply refusing them when a
    /// field is beyond the protocol's limits, or holds text a listing
    /// could not show (refused before anything is kept for the request:
    /// a place, a charge, a tombstone).
    fn checked(&self, args: WireArgs) -> Result<LockArgs, Reply> {
        match args.oversize {
            Some(reason) => {
                self.server.metrics.refused_by(Limit::FieldLength);
                Err(Reply::Error {
                    kind: ErrorKind::InvalidArgument,
                    message: format!("{reason}; see the limits in PROTOCOL.md"),
                })
            }
            None => {
                let args = LockArgs::from(args);
                args.validate_text().map_err(Reply::from_error)?;
                Ok(args)
            }
        }
    }

    /// A reply refusing a lock over a limit of the lock table.
    fn over(&self, over: Over) -> Reply {
        self.server.metrics.refused_by(over.limit);
        unavailable(over.message)
    }

    /// The response to one frame, or why the connection must close.
    async fn handle(&self, frame: &[u8]) -> Result<Response, String> {
        let request: Request = wire::decode(frame).map_err(|e| e.to_string())?;
        let started = self.server.metrics.started(&request.op);
        let reply = self.dispatch(request.op).await;
        self.server.metrics.answered(started, &reply);
        Ok(Response {
            id: request.id,
            reply,
        })
    }

    async fn dispatch(&self, op: Op) -> Reply {
        let locker = &*self.server.locker;
        if op.since() > self.version {
            return Reply::Error {
                kind: ErrorKind::InvalidArgument,
                message: format!(
                    "this request needs protocol version {}, but the connection speaks {}; \
                     reconnect with a newer Hello",
                    op.since(),
                    self.version
                ),
            };
        }
        match op {
            Op::LockWait {
                args,
                mode,
                ticket,
                place_ttl,
                push,
            } => self.wait(args, mode.into(), ticket, place_ttl, push).await,
            Op::Fence { args, mode, floor } => self.fence(args, mode.into(), floor).await,
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
                entries: self.entries(),
            },
            Op::Status => Reply::Status {
                quarantine_left: locker.quarantine_left(),
                entries: self.entries(),
            },
            Op::Proclaim { args, proclamation } => self.proclaim(args, proclamation).await,
            Op::Leader { args, watch } => self.leader(args, watch).await,
        }
    }

    /// The arguments of an election call: within the protocol's limits,
    /// and naming exactly one resource (the election's name).
    fn election_args(&self, args: WireArgs) -> Result<LockArgs, Reply> {
        let args = self.checked(args)?;
        if args.resources.len() != 1 {
            return Err(invalid(format!(
                "an election call names exactly one resource (the election's name), not {}",
                args.resources.len()
            )));
        }
        Ok(args)
    }

    /// Stores a leader's proclamation with its entry (version 5).
    ///
    /// The value is charged to the leader's uid as its lock is, before the
    /// locker is asked, and stays charged while the proclamation may be
    /// kept: until the lock on the resource is released or the uid's
    /// charge lapses. In quarantine the locker stores it on an entry the
    /// uid holds but answers with its quarantine error; the charge then
    /// stays when the uid holds the entry.
    async fn proclaim(&self, args: WireArgs, proclamation: WireProclamation) -> Reply {
        let args = match self.election_args(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        if let Some(reason) = proclamation.oversize() {
            self.server.metrics.refused_by(Limit::FieldLength);
            return invalid(format!("{reason}; see the limits in PROTOCOL.md"));
        }
        let proclamation = match proclamation.into_proclamation() {
            Ok(p) => p,
            Err(err) => return Reply::from_error(err),
        };
        let ledger = &self.server.ledger;
        let bytes = proclamation_bytes(&args, proclamation.value.len());
        let reserved = match ledger.reserve_board(self.id, &args, Board::Proclamation, bytes) {
            Ok(reserved) => reserved,
            Err(over) => return self.over(over),
        };
        let locker = &*self.server.locker;
        let result = locker.proclaim(&args, &proclamation).await;
        let kept = match &result {
            Ok(stored) => *stored,
            Err(err) if err.is_quarantine() => locker.holds_all(&args, LockMode::Write),
            Err(_) => false,
        };
        if !kept {
            ledger.undo_board(&args.uid, reserved);
        }
        Reply::from_result(result)
    }

    /// Reads the leader of one resource (version 5); with `watch`, also
    /// keeps a watch for `args.uid` that pushes `Changed` on this
    /// connection.
    ///
    /// The watch lives at most [`MAX_PLACE_TTL`] and the server's validity,
    /// so that its charge in the ledger (which lapses once the uid went
    /// untouched for the validity) never ends before it. A watch whose
    /// connection closed lapses by its ttl; its push, if it fires first,
    /// finds the connection's queue closed and is dropped.
    async fn leader(&self, args: WireArgs, watch: Option<Duration>) -> Reply {
        let args = match self.election_args(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        let locker = &*self.server.locker;
        let answer = |result: Result<Option<crate::Proclamation>, Error>| match result {
            Ok(found) => Reply::Leader(found.as_ref().map(WireProclamation::from)),
            Err(err) => Reply::from_error(err),
        };
        let Some(ttl) = watch else {
            return answer(locker.leader(&args, None).await);
        };
        if ttl.is_zero() {
            return invalid(format!(
                "a watch ttl of zero keeps no watch; send how long the server should keep the \
                 watch without hearing from the observer (at most {MAX_PLACE_TTL:?})"
            ));
        }
        let ttl = ttl.min(MAX_PLACE_TTL).min(locker.config().validity);
        let ledger = &self.server.ledger;
        let reserved = match ledger.reserve_board(self.id, &args, Board::Watch, watch_bytes(&args))
        {
            Ok(reserved) => reserved,
            Err(over) => return self.over(over),
        };
        let watch = WatchArgs {
            ttl,
            wake: self.wake.clone(),
        };
        let result = locker.leader(&args, Some(&watch)).await;
        // Refused arguments (or too many watches) keep no watch; in
        // quarantine the watch is kept although the answer is an error.
        if matches!(result, Err(Error::InvalidArgument(_))) {
            ledger.undo_board(&args.uid, reserved);
        }
        answer(result)
    }

    /// How many entries the table holds: counted shard by shard, without
    /// copying the table (a copy once took a full server far over its
    /// memory budget and held a runtime worker for seconds).
    fn entries(&self) -> u64 {
        self.server.locker.counts().entries as u64
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
    ///
    /// A version-2 client's lock takes a place in line first ([`poll`]).
    ///
    /// [`poll`]: Self::poll
    async fn grant(&self, args: WireArgs, mode: LockMode) -> Reply {
        let args = match self.checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        if self.version < wire::V3 {
            if let Some(reply) = self.poll(&args, mode).await {
                return reply;
            }
        }
        let released = &self.server.released;
        if released.contains(&args.uid) {
            // Overtaken by its own release: granting would leave an entry
            // that nobody unlocks.
            return Reply::Bool(false);
        }
        let ledger = &self.server.ledger;
        let reserved = match ledger.reserve(self.id, &args) {
            Ok(reserved) => reserved,
            Err(over) => return self.over(over),
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
        self.end_place(&args.uid);
        if released.contains(&args.uid) {
            self.undo_grant(&args).await;
            return Reply::Bool(false);
        }
        ledger.touch(self.id, &args.uid);
        Reply::Bool(true)
    }

    /// A version-2 client's plain lock, made fair: it is asked as a wait
    /// with the ticket this poller drew when the connection first saw it
    /// (same owner, resources and mode), and a place that is only a
    /// reservation, kept for [`POLL_PLACE_TTL`] and renewed by each poll.
    /// The poller therefore keeps its turn between polls, and push waiters
    /// that came later cannot overtake it. `None` when the connection
    /// already remembers as many pollers or places as it may: then the
    /// lock is asked plainly.
    async fn poll(&self, args: &LockArgs, mode: LockMode) -> Option<Reply> {
        let key = PollKey {
            owner: args.owner.clone(),
            resources: args.resources.clone(),
            mode,
        };
        let ticket = self.waits().poller(key.clone(), Instant::now())?;
        let asked = Asked {
            mode,
            ticket,
            place_ttl: POLL_PLACE_TTL,
            push: false,
        };
        Some(match self.ask(args, &asked).await {
            Ok(WaitReply::Granted) => {
                self.waits().poller_done(&key);
                Reply::Bool(true)
            }
            Ok(WaitReply::Queued | WaitReply::Refused) => Reply::Bool(false),
            Err(Refusal::Full(_)) => return None,
            Err(Refusal::Reply(reply)) => reply,
        })
    }

    /// A version-3 waiting lock.
    async fn wait(
        &self,
        args: WireArgs,
        mode: LockMode,
        ticket: WireTicket,
        place_ttl: Duration,
        push: bool,
    ) -> Reply {
        let args = match self.checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        if place_ttl.is_zero() {
            return Reply::Error {
                kind: ErrorKind::InvalidArgument,
                message: format!(
                    "a place_ttl of zero keeps no place; send how long the server should keep the \
                     place without hearing from the waiter (at most {MAX_PLACE_TTL:?})"
                ),
            };
        }
        let asked = Asked {
            mode,
            ticket: ticket.into(),
            place_ttl: place_ttl.min(MAX_PLACE_TTL),
            push,
        };
        match self.ask(&args, &asked).await {
            Ok(reply) => Reply::Wait(WireWaitReply::from(reply)),
            Err(Refusal::Full(limit)) => {
                self.server.metrics.refused_by(Limit::WaitersPerConnection);
                unavailable(format!(
                    "too many queued waiters on this connection ({limit}); wait until some are \
                 granted or give them up, spread the waits over more connections, or raise the \
                 server's limit (--max-waiters-per-connection)"
                ))
            }
            Err(Refusal::Reply(reply)) => reply,
        }
    }

    /// Asks the lock table for `args` as a waiter, guarded against a
    /// racing release of the uid as [`grant`](Self::grant) is, and brings
    /// the ledger and this connection's places up to date with the answer.
    ///
    /// A place stays charged to the ledger as a lock is while this
    /// connection keeps it: a pushed one may become a lock at any moment,
    /// and a reservation stands on its names all the same. The table may
    /// keep a reservation while it answers `Refused` (it cannot push it),
    /// so for a reservation both answers count as a place. A place that
    /// ends without a grant this connection saw (expired, or superseded by
    /// the same waiter's newer request) is settled by
    /// [`ended`](Self::ended), which takes what is left of it out of the
    /// table before its charge goes.
    async fn ask(&self, args: &LockArgs, asked: &Asked) -> Result<WaitReply, Refusal> {
        let released = &self.server.released;
        if released.contains(&args.uid) {
            return Ok(WaitReply::Refused);
        }
        let (room, expired) = {
            let mut waits = self.waits();
            let expired = waits.sweep(Instant::now());
            let room = waits
                .has_room(&args.uid, asked.ticket)
                .then_some(())
                .ok_or(waits.limit());
            (room, expired)
        };
        self.ended(expired, Ending::Lapsed);
        room.map_err(Refusal::Full)?;
        let ledger = &self.server.ledger;
        let reserved = ledger
            .reserve(self.id, args)
            .map_err(|over| Refusal::Reply(self.over(over)))?;
        let locker = &*self.server.locker;
        let wait = WaitArgs {
            ticket: asked.ticket,
            place_ttl: asked.place_ttl,
            wake: asked.push.then(|| self.wake.clone()),
        };
        let reply = match locker.lock_wait(args, asked.mode, &wait).await {
            Ok(reply) => reply,
            Err(err) => {
                ledger.undo(&args.uid, reserved);
                return Err(Refusal::Reply(Reply::from_error(err)));
            }
        };
        match (reply, asked.push) {
            (WaitReply::Granted, _) => {
                // The table ended this waiter's places, under any uid.
                let superseded = self.waits().supersede(args, asked.ticket);
                self.ended(superseded, Ending::Superseded(args));
                if released.contains(&args.uid) {
                    self.undo_grant(args).await;
                    return Ok(WaitReply::Refused);
                }
                ledger.touch(self.id, &args.uid);
            }
            // A reservation may be kept although the answer says the table
            // will not push it; count it as kept until it expires.
            (WaitReply::Queued, _) | (WaitReply::Refused, false) => {
                if released.contains(&args.uid) {
                    // The release may have run before the place existed:
                    // give the place up, and a grant pushed meanwhile.
                    let _ = locker.leave_queue(args);
                    self.waits().end(&args.uid);
                    self.undo_grant(args).await;
                    return Ok(WaitReply::Refused);
                }
                let place = Place {
                    args: args.clone(),
                    mode: asked.mode,
                    ticket: asked.ticket,
                    expires: Instant::now() + asked.place_ttl,
                };
                let superseded = self.waits().queued(place);
                self.ended(superseded, Ending::Superseded(args));
            }
            (WaitReply::Refused, true) => {
                ledger.undo(&args.uid, reserved);
                let place = self.waits().end(&args.uid);
                self.ended(place, Ending::Lapsed);
            }
        }
        Ok(reply)
    }

    /// Whether the connection keeps nothing on the server that needs it
    /// open: no lock, place in line, proclamation or watch charged to it.
    /// Places that expired are settled first.
    fn holds_nothing(&self) -> bool {
        let expired = self.waits().sweep(Instant::now());
        self.ended(expired, Ending::Lapsed);
        self.waits().is_empty() && !self.server.ledger.holds(self.id)
    }

    /// The uid was granted or released: its place, if it had one, is
    /// over.
    fn end_place(&self, uid: &str) -> Option<Place> {
        let mut waits = self.waits();
        if waits.is_empty() {
            return None;
        }
        waits.end(uid)
    }

    /// Settles places that ended without a grant this connection saw:
    /// expired, superseded by the same waiter's newer request (under
    /// another uid, or for other names), refused, or given up because the
    /// connection closed. What is left of each in the lock table goes (a
    /// superseded place may stand on names the newer request does not
    /// name; an expired one may not be swept yet). Its charge goes unless
    /// the table holds an entry of its uid on those names: a pushed place
    /// may have been granted meanwhile, and the entries keep the charge
    /// until they are released or it lapses. So the ledger never charges
    /// less than the table keeps.
    ///
    /// A place whose waiter has asked again over another connection since
    /// (it reconnected; the ledger then charges that connection) belongs
    /// to that connection now, and is left alone: the table keeps one place
    /// per waiter, and it is the newer connection's.
    fn ended(&self, places: impl IntoIterator<Item = Place>, how: Ending<'_>) {
        let locker = &*self.server.locker;
        let ledger = &self.server.ledger;
        for place in places {
            let uid = &place.args.uid;
            if ledger.owner(uid).is_some_and(|conn| conn != self.id) {
                continue;
            }
            let (ticket, keep) = match how {
                // Every place of the uid: its waiter is gone.
                Ending::Closed => (None, &[][..]),
                Ending::Lapsed | Ending::Released => (Some(place.ticket), &[][..]),
                // The uid's own newer request renewed its places on the
                // names it asked for again.
                Ending::Superseded(newer) if newer.uid == *uid => {
                    (Some(place.ticket), &newer.resources[..])
                }
                Ending::Superseded(_) => (Some(place.ticket), &[][..]),
            };
            if !locker.end_place(&place.args, ticket, keep).held {
                ledger.release(uid, Some(&place.args.resources));
            }
        }
    }

    /// Draws a fencing token.
    async fn fence(&self, args: WireArgs, mode: LockMode, floor: u64) -> Reply {
        let args = match self.checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        match self.server.locker.fence(&args, mode, floor).await {
            Ok(token) => Reply::Fence(token),
            Err(err) => Reply::from_error(err),
        }
    }

    /// Writes a push from the lock table. A grant ends the place and
    /// starts the entry's life in the ledger.
    async fn forward(&self, conn: &mut Conn, (uid, event): Pushed) -> Result<(), ()> {
        if event == PushEvent::Changed && self.version < wire::V5 {
            // Only a version-5 request registers a watch, so this does not
            // happen; a client of an older version could not decode it.
            return Ok(());
        }
        if event == PushEvent::Granted {
            self.end_place(&uid);
            self.server.ledger.touch(self.id, &uid);
        }
        let push = Response {
            id: wire::UNSOLICITED,
            reply: Reply::Push {
                uid: uid.into(),
                event: WirePushEvent::from(event),
            },
        };
        feed(conn, &push).await
    }

    fn waits(&self) -> MutexGuard<'_, Waits> {
        self.waits.lock().unwrap_or_else(PoisonError::into_inner)
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
        let args = match self.checked(args) {
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
        // A release also ends the uid's place in line, in any mode.
        let place = if args.uid.is_empty() {
            None
        } else {
            self.end_place(&args.uid)
        };
        // Only a release that removed something frees the charge: one in
        // the wrong mode removes nothing and must not make the entries
        // free of charge. A place that was only waiting holds no entry: a
        // release in its mode (or forced) leaves nothing of the uid.
        let waited = place.as_ref().is_some_and(|p| match kind {
            Kind::Write => p.mode == LockMode::Write,
            Kind::Read => p.mode == LockMode::Read,
            Kind::Force => true,
        });
        let removed = matches!(result, Ok(true));
        if (removed || (waited && result.is_ok())) && !args.uid.is_empty() {
            let everywhere = matches!(kind, Kind::Force) && args.resources.is_empty();
            let resources = (!everywhere).then_some(&args.resources[..]);
            self.server.ledger.release(&args.uid, resources);
        }
        // The place ended here may stand on names this release did not
        // name: what is left of it in the table goes too, so that the
        // connection's limit on places counts every place the table keeps.
        if let Some(place) = place {
            self.ended(std::iter::once(place), Ending::Released);
        }
        Reply::from_result(result)
    }

    /// Refreshes a lock; in quarantine, with a mode, the locker may re-create
    /// its entries.
    ///
    /// Such a re-grant creates entries as a lock does, so it is charged and
    /// limited as a lock is (it once was not counted at all). A uid
    /// this server does not know is still re-granted: after a restart the
    /// server cannot tell a lock it granted before from a new one, and
    /// refusing would cost a live holder its lock, which is what the
    /// quarantine exists to prevent. A uid released here is refused as
    /// for a lock, and a re-grant racing its release is undone as in
    /// [`grant`](Self::grant).
    async fn refresh(&self, args: WireArgs, mode: Option<LockMode>) -> Reply {
        let args = match self.checked(args) {
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
                Err(over) => return self.over(over),
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
        // In quarantine the locker answers with its quarantine error even
        // when it re-created the entries (the answer must not count), so
        // that answer may have created them as `Ok(true)` may: ask.
        let kept = match (&result, mode) {
            (Ok(held), _) => *held,
            (Err(err), Some(mode)) if may_create && err.is_quarantine() => {
                locker.holds_all(&args, mode)
            }
            (Err(_), _) => false,
        };
        match (kept, reserved) {
            (true, _) if released.contains(&args.uid) => {
                if may_create {
                    self.undo_grant(&args).await;
                }
                return Reply::Bool(false);
            }
            // Entries nothing here knew of (a re-grant as quarantine ended
            // under us): charge them, there is no refusing them now.
            (true, _) if !known => ledger.charge_unconditionally(self.id, &args),
            (true, _) => {}
            (false, Some(reserved)) => ledger.undo(&args.uid, reserved),
            (false, None) => {}
        }
        Reply::from_result(result)
    }
}

/// How places of this connection ended: see [`Session::ended`].
#[derive(Clone, Copy)]
enum Ending<'a> {
    /// Expired, or refused.
    Lapsed,
    /// Its waiter released the uid (on any names).
    Released,
    /// The same waiter asked again with these arguments.
    Superseded(&'a LockArgs),
    /// The connection closed.
    Closed,
}

/// Why a wait was not asked.
enum Refusal {
    /// The connection holds as many places as it may (the limit).
    Full(usize),
    /// Refused with this reply.
    Reply(Reply),
}

impl Drop for Session<'_> {
    /// The connection closed (or its task was aborted): its waiters can no
    /// longer be told of a grant, so their places go, and with them the
    /// turns they would have taken from others. Grants stay; their holders
    /// still release or refresh them.
    fn drop(&mut self) {
        let places: Vec<Place> = {
            let waits = self.waits.get_mut().unwrap_or_else(PoisonError::into_inner);
            if waits.is_empty() {
                return;
            }
            waits.drain().collect()
        };
        tracing::debug!(
            places = places.len(),
            "connection closed; giving up its places in line"
        );
        self.ended(places, Ending::Closed);
    }
}

fn invalid(message: String) -> Reply {
    Reply::Error {
        kind: ErrorKind::InvalidArgument,
        message,
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
