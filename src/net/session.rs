//! One client connection on the server: the handshake, then requests
//! handled in order, with the replies to each read batch written together,
//! and (protocol version 3) the pushes for the connection's waiters written
//! as they come.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::Framed;

use super::config::PUSH_QUEUE;
use super::io::BoxIo;
use super::labels::{AuthRefusal, Limit};
use super::refusals::{Cause, Refused};
use super::requests::{ConnSink, Pushed, Session};
use super::state::{Role, ServerState, Slot};
use super::waits::Waits;
use super::wire::{self, ErrorKind, Hello, Reply, Response, Welcome, WirePushEvent};
use super::{malformed, sniff};
use crate::locker::wait::{PushEvent, Wake};
use crate::quorum::clock::after;

type Conn = Framed<BoxIo, crate::net::framing::Framing>;

/// A frame above this size makes the session drop its read buffer once the
/// batch is handled.
const LARGE_FRAME: usize = 64 * 1024;

/// How long one connection's batch of requests may keep its thread before
/// it lets the other connections' tasks run: a request may cost tens of
/// milliseconds (a thousand names, each with hundreds of holders or places
/// to look through), and a batch of them pipelined on a few connections
/// would otherwise keep every thread of the server from the other clients
/// for seconds.
const TURN: std::time::Duration = std::time::Duration::from_millis(1);

/// Replies buffered past this many bytes are written before the next one is
/// encoded.
const FLUSH_AT: usize = 64 * 1024;

/// Serves one accepted connection, after the TLS handshake if configured.
/// The slot is held until the connection closes.
pub(crate) async fn accept(stream: TcpStream, peer: SocketAddr, slot: Slot) {
    let server = slot.state().clone();
    let _ = stream.set_nodelay(true);
    // One deadline for the TLS handshake and the lock handshake together:
    // the handshake timeout bounds how long a peer without a token stays.
    let deadline = after(tokio::time::Instant::now(), server.config.handshake_timeout);
    // The first byte is waited for apart: from then on the connection is in
    // its handshake, which a newcomer may not cut short before its grace
    // (a silent one may be evicted for a newcomer that spoke at once); and
    // with TLS, a peer that never starts it and one that starts it too
    // slowly are told apart in the log.
    let mut first = [0u8; 1];
    let started = tokio::time::timeout_at(deadline, stream.peek(&mut first));
    let started = tokio::select! {
        started = started => started,
        () = slot.evicted() => return,
    };
    let started = match started {
        // Gone before saying anything: a port check, or a client that gave
        // up. Nobody to answer, and nothing wrong with the server.
        Ok(Ok(0)) | Ok(Err(_)) => {
            tracing::debug!(%peer, "closed before its handshake");
            return;
        }
        Ok(Ok(_)) => {
            server.spoke_pending(slot.id());
            true
        }
        Err(_) => false,
    };
    #[cfg(feature = "tls")]
    if let Some(tls) = &server.config.tls {
        let handshake = async {
            if started {
                tokio::time::timeout_at(deadline, tls.acceptor.accept(stream)).await
            } else {
                // Past the deadline already: times out at once.
                tokio::time::timeout_at(deadline, std::future::pending()).await
            }
        };
        let handshake = tokio::select! {
            handshake = handshake => handshake,
            () = slot.evicted() => return,
        };
        match handshake {
            Ok(Ok(stream)) => {
                return session(Box::new(stream), peer, server, slot, deadline, true).await
            }
            Ok(Err(err)) => match super::tls::accept_failure(&err) {
                (true, why) => {
                    if let Some(refused) = server.refusals.due(Cause::TlsFailed) {
                        tracing::warn!(%peer, %err, refused, "TLS handshake failed: {why} \
                            (`refused` counts TLS failures since the last such line)");
                    }
                }
                (false, why) => tracing::debug!(%peer, %err, "{why}"),
            },
            Err(_) if !started => {
                if let Some(refused) = server.refusals.due(Cause::TlsTimeout) {
                    tracing::warn!(%peer, refused, timeout = ?server.config.handshake_timeout,
                        "no TLS handshake within the handshake timeout: closed connections \
                         that did not start TLS (`refused` counts them since the last such line)");
                }
            }
            Err(_) => {
                if let Some(refused) = server.refusals.due(Cause::TlsSlow) {
                    tracing::warn!(%peer, refused, timeout = ?server.config.handshake_timeout,
                        "TLS handshake not finished within the handshake timeout: closed \
                         connections that started TLS and then sent too little, too slowly \
                         (`refused` counts them since the last such line)");
                }
            }
        }
        server.metrics.auth_refused(AuthRefusal::Tls);
        return;
    }
    // Without a first byte by the deadline, the handshake below times out
    // at once and says so.
    let _ = started;
    session(Box::new(stream), peer, server, slot, deadline, false).await
}

async fn session(
    stream: BoxIo,
    peer: SocketAddr,
    server: Arc<ServerState>,
    slot: Slot,
    deadline: tokio::time::Instant,
    over_tls: bool,
) {
    // Small frames only until the peer proved it holds a token.
    let mut conn = Framed::new(
        stream,
        crate::net::framing::Framing::new(wire::hello_codec()),
    );
    let Some(role) = handshake(&mut conn, peer, &server, &slot, deadline, over_tls).await else {
        return;
    };
    conn.codec_mut()
        .codec_mut()
        .set_max_frame_length(wire::MAX_FRAME);
    let (role, version) = role;
    tracing::debug!(%peer, ?role, version, "client connected");
    let (pushes, mut pushed) = mpsc::channel(PUSH_QUEUE);
    let waits = Arc::new(Mutex::new(Waits::of_connection(
        server.config.max_waiters_per_connection,
        slot.id(),
        server.recorders.clone(),
    )));
    server.register_waits(slot.id(), &waits);
    let sink = Arc::new(ConnSink::new(
        pushes,
        Arc::downgrade(&server),
        Arc::downgrade(&waits),
    ));
    let session = Session {
        server: server.clone(),
        role,
        id: slot.id(),
        version,
        wake: Wake::new(sink.clone(), 0),
        waits,
        sink,
    };
    serve(&mut conn, peer, &session, &mut pushed).await;
    // A few places end before the socket closes, so that what the client
    // reads as the end of the stream means they are gone; many are handed
    // to the clean-up thread (see `Session::close`).
    session.close(slot).await;
}

/// What woke the connection's task.
enum Event {
    Frame(Option<Result<bytes::BytesMut, std::io::Error>>),
    Push(Pushed),
    Shutdown,
    /// The idle timeout may have passed.
    Idle,
    /// Places of this connection may have expired.
    Sweep,
}

async fn serve(
    conn: &mut Conn,
    peer: SocketAddr,
    session: &Session,
    pushed: &mut mpsc::Receiver<Pushed>,
) {
    let server = &*session.server;
    // The timer is moved on only when it fires, not at every request.
    let idle_timeout = server.config.idle_timeout;
    let mut last_heard = Instant::now();
    // Where a request in progress stood at the last idle check (the bytes
    // buffered, and whether its length was read: the codec takes the
    // length out of the buffer): a change since is hearing from the
    // client, and none for the timeout is silence, even in the middle of a
    // request.
    let mut partial = (0, false);
    let idle = tokio::time::sleep(idle_timeout.unwrap_or_default());
    tokio::pin!(idle);
    // While the connection keeps places, their expiry is looked for at
    // least every `PLACE_SWEEP` even if the client sends nothing: an
    // expired place's charge must go though its waiter went silent (its
    // uid's refreshes elsewhere would keep it).
    let sweep = tokio::time::sleep(PLACE_SWEEP);
    tokio::pin!(sweep);
    let mut sweeping = false;
    loop {
        read_room(conn);
        let event = tokio::select! {
            frame = conn.next() => Event::Frame(frame),
            Some(push) = pushed.recv() => Event::Push(push),
            () = server.shutdown.cancelled() => Event::Shutdown,
            () = &mut idle, if idle_timeout.is_some() => Event::Idle,
            () = &mut sweep, if sweeping => Event::Sweep,
        };
        let frame = match event {
            Event::Frame(frame) => {
                last_heard = Instant::now();
                frame
            }
            Event::Shutdown => break,
            Event::Sweep => {
                sweeping = session.settle_expired_places();
                if sweeping {
                    sweep.as_mut().reset(Instant::now() + PLACE_SWEEP);
                }
                continue;
            }
            Event::Idle => {
                let timeout = idle_timeout.unwrap_or_default();
                let now = Instant::now();
                let progress = (conn.read_buffer().len(), conn.codec().in_frame());
                if progress != partial {
                    partial = progress;
                    last_heard = now;
                }
                let quiet = now.duration_since(last_heard) >= timeout;
                if quiet && session.holds_nothing() {
                    tracing::debug!(%peer, ?timeout, "closing a connection that was silent and held nothing");
                    let _ = flush(conn, Some(session)).await;
                    return;
                }
                let next = if quiet { now } else { last_heard };
                idle.as_mut().reset(after(next, timeout));
                continue;
            }
            Event::Push(push) => {
                // Every push already queued goes out with this one.
                if session.forward(conn, push).await.is_err()
                    || forward_queued(conn, session, pushed).await.is_err()
                    || flush(conn, Some(session)).await.is_err()
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
        let mut turn = std::time::Instant::now();
        loop {
            let response = match next {
                None => {
                    // The client stopped sending; it may still read replies.
                    let _ = flush(conn, Some(session)).await;
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
                    if feed(conn, Some(session), &response).await.is_err() {
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
                    let _ = feed(conn, Some(session), &Response { id: 0, reply }).await;
                    let _ = flush(conn, Some(session)).await;
                    return;
                }
            }
            if turn.elapsed() >= TURN {
                tokio::task::yield_now().await;
                turn = std::time::Instant::now();
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
            || flush(conn, Some(session)).await.is_err()
        {
            return;
        }
        partial = (conn.read_buffer().len(), conn.codec().in_frame());
        if !sweeping && session.keeps_places() {
            sweeping = true;
            sweep.as_mut().reset(Instant::now() + PLACE_SWEEP);
        }
        // A large request leaves a read buffer of its size behind; give it
        // back rather than keep it for the life of an idle connection.
        if large && conn.read_buffer().is_empty() {
            *conn.read_buffer_mut() = bytes::BytesMut::new();
        }
    }
}

/// How often a connection that keeps places looks for expired ones while
/// its client is silent (a request looks too, at most once a second).
const PLACE_SWEEP: std::time::Duration = std::time::Duration::from_secs(1);

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
    session: &Session,
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
async fn feed<T: serde::Serialize>(
    conn: &mut Conn,
    session: Option<&Session>,
    message: &T,
) -> Result<(), ()> {
    wire::encode_frame(message, conn.write_buffer_mut()).map_err(|_| ())?;
    if conn.write_buffer().len() >= FLUSH_AT {
        flush(conn, session).await?;
    }
    Ok(())
}

/// Sends what the write buffer holds. With a `session`, a client that
/// reads nothing for the idle timeout while it holds nothing on the server
/// is hung up on (`Err`), as a silent one is: a full socket keeps no slot;
/// and the server's shutdown ends the wait.
async fn flush(conn: &mut Conn, session: Option<&Session>) -> Result<(), ()> {
    let Some(session) = session else {
        return SinkExt::<Bytes>::flush(conn).await.map_err(|_| ());
    };
    let server = &*session.server;
    loop {
        let idle = async {
            match server.config.idle_timeout {
                Some(timeout) => tokio::time::sleep(timeout).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            flushed = SinkExt::<Bytes>::flush(&mut *conn) => return flushed.map_err(|_| ()),
            () = server.shutdown.cancelled() => return Err(()),
            () = idle => {
                if session.holds_nothing() {
                    tracing::debug!(timeout = ?server.config.idle_timeout,
                        "closing a connection that read nothing and held nothing");
                    return Err(());
                }
            }
        }
    }
}

/// Authenticates the peer; its role and the protocol version it speaks.
/// `over_tls`: the peer finished a TLS handshake first.
async fn handshake(
    conn: &mut Conn,
    peer: SocketAddr,
    server: &ServerState,
    slot: &Slot,
    deadline: tokio::time::Instant,
    over_tls: bool,
) -> Option<(Role, u16)> {
    let first = tokio::select! {
        first = tokio::time::timeout_at(deadline, conn.next()) => first,
        () = server.shutdown.cancelled() => return None,
        () = slot.evicted() => {
            tracing::debug!(%peer, "closed before its handshake to make room for a new connection");
            return None;
        }
    };
    let malformed = |reason: String| Refused::auth(AuthRefusal::Malformed, reason);
    let hello: Result<Hello, Refused> = match first {
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
            // The peer is told what kind of client it looks like; only
            // the log quotes its bytes (secrets masked).
            Err(match sniff::refusal_of_client_that_sent(read) {
                Some((told, logged)) => Refused::foreign(told, logged),
                None => {
                    let refused = malformed::bad_frame(&err, read, wire::MAX_HELLO_FRAME);
                    malformed(format!("{refused} before the handshake"))
                }
            })
        }
        Ok(Some(Err(err))) => Err(malformed(format!("bad frame: {err}"))),
        Ok(None) => {
            // Gone before saying anything, as above (a reset the server saw
            // when it first looked at the connection reads as an end).
            tracing::debug!(%peer, "closed before its handshake");
            return None;
        }
        // Nothing read, and no frame begun (a peer that stopped after
        // the four bytes of its length has begun one).
        // A peer that finished TLS and then said nothing (a TLS health
        // check, another TLS service's client) is not a silent one.
        Err(_) if conn.read_buffer().is_empty() && !conn.codec().in_frame() && over_tls => {
            Err(Refused::silent_after_tls())
        }
        Err(_) if conn.read_buffer().is_empty() && !conn.codec().in_frame() => {
            Err(Refused::auth(AuthRefusal::Timeout, "no handshake in time"))
        }
        Err(_) => Err(Refused::partial_hello()),
    };
    // The version is checked first, as version-2 servers did: a client
    // that is refused for its version asks again with an older one.
    let verdict = match hello {
        Ok(hello) if !wire::speaks(hello.version) => Err(Refused::auth(
            AuthRefusal::Version,
            wire::unsupported_version(hello.version),
        )),
        Ok(hello) => server
            .role_of(&hello.token)
            .map(|role| (role, hello.version))
            .ok_or_else(|| Refused::auth(AuthRefusal::Token, wire::INVALID_TOKEN)),
        Err(refused) => Err(refused),
    };
    // Only a peer with a token learns whether there is room for it.
    let verdict = match verdict {
        Ok((role, version)) => match slot.admit(role) {
            Ok(()) => Ok((role, version)),
            Err(busy) => Err(Refused::Busy(busy)),
        },
        Err(refused) => {
            if let Refused::Auth { why, .. } = &refused {
                server.metrics.auth_refused(*why);
            }
            Err(refused)
        }
    };
    let welcome = match &verdict {
        Ok((role, version)) => Welcome::Accepted {
            version: *version,
            admin: *role == Role::Admin,
            validity: server.locker.config().validity,
        },
        Err(refused) => {
            server.refused_pending(slot.id());
            refused.log(peer, &server.refusals, server.config.handshake_timeout);
            Welcome::Rejected {
                reason: refused.reason().to_owned(),
            }
        }
    };
    if feed(conn, None, &welcome).await.is_err() || flush(conn, None).await.is_err() {
        return None;
    }
    verdict.ok()
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
        // The stream ended inside a frame: `Framing::decode_eof` says so
        // with `UnexpectedEof`, above.
        _ => false,
    }
}

/// Whether the codec refused a frame for its length.
fn too_big(err: &std::io::Error) -> bool {
    err.get_ref()
        .is_some_and(|inner| inner.is::<tokio_util::codec::LengthDelimitedCodecError>())
}

impl Session {
    /// Writes a push from the lock table. A grant ends the place and
    /// starts the entry's life in the ledger.
    async fn forward(&self, conn: &mut Conn, (uid, event, number): Pushed) -> Result<(), ()> {
        if event == PushEvent::Changed && self.version < wire::V5 {
            // Only a version-5 request registers a watch, so this does not
            // happen; a client of an older version could not decode it.
            return Ok(());
        }
        if event == PushEvent::Granted {
            // The uid's places over other connections stay: they may have
            // been asked after this grant, and the table keeps them until
            // they end (each is its connection's to count). The uid's
            // charge stays where it is (the push touched it): a push is no
            // request of this connection's, and moving the uid here would
            // pass this connection's limits unchecked; the client's next
            // refresh over it moves it, as any refresh does.
            self.end_granted_place(&uid, number);
        }
        let push = Response {
            id: wire::UNSOLICITED,
            reply: Reply::Push {
                uid: uid.into(),
                event: WirePushEvent::from(event),
            },
        };
        feed(conn, Some(self), &push).await
    }
}
