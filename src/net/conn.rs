//! One authenticated client connection: callers encode their requests,
//! tagged by id, straight into a shared outbox that a writer task empties
//! with one write, and a reader task hands each response to the caller
//! waiting for that id.
//!
//! Both tasks run on the runtime that opened the connection. They can end
//! in many ways: the server closes the socket, a write fails, or that
//! runtime shuts down and drops them without running them to the end. Each
//! task therefore holds a [`DownOnDrop`], so that however it ends, the
//! connection is marked down at once and its owner is told to reconnect;
//! a send that finds the writer gone does the same.
//!
//! From protocol version 3 on, the server also sends messages that answer
//! no request (id 0): the reader hands pushes to the waits registered in
//! [`Pushes`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, Chain, ReadHalf};
use tokio::task::AbortHandle;
use tokio_util::codec::{Framed, FramedRead, LengthDelimitedCodec};

use super::io::BoxIo;
use super::peer_log::PeerLog;
use super::pushes::Pushes;
use super::sniff;
use super::wire::{self, Hello, Op, Reply, Request, Welcome};
use super::RemoteConfig;
use crate::quorum::deadline::within;
use crate::Error;
mod dialing;
mod outgoing;
mod reader;
mod recording;
mod replies;
mod secure;
#[cfg(test)]
mod tests;

pub(crate) use dialing::Dialing;
use replies::Replies;
use secure::{cannot_connect, secure, tls_refusal};

/// The reason of a call whose connection ended before its reply came; the
/// locker adds what follows (`RemoteLocker::call_on`).
pub(crate) const CLOSED_BEFORE_THE_REPLY: &str = "the connection closed before the reply arrived";

/// The reason of an attempt to connect that the locker gave up itself
/// (dropped, or another connection installed): no word on the server.
pub(crate) const GIVEN_UP_REASON: &str =
    "the attempt to connect was given up: the locker was dropped or has another connection";
use outgoing::{write_batches, Appended, Outgoing};

type Transport = Framed<BoxIo, LengthDelimitedCodec>;

/// An authenticated transport, and a second handle on its socket to shut
/// it down from outside the reader and writer: aborted on a runtime
/// nobody drives, they would keep it open (and its slot on the server) for
/// as long as that runtime lives.
struct Link {
    transport: Transport,
    closer: Option<socket2::Socket>,
}
/// What the reader reads: bytes left over from the handshake, then the socket.
type Incoming = Chain<std::io::Cursor<Bytes>, ReadHalf<BoxIo>>;
type OnClose = Box<dyn FnOnce(Ended) + Send>;

/// How a connection ended, as its owner is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The server closed it in good order (between frames) while no call
    /// waited for a reply: it closes connections that stay silent and hold
    /// nothing.
    Quietly,
    /// The same before it answered any call: an idle close of a
    /// connection nobody used, or a server that closes every connection
    /// as it welcomes it.
    QuietlyUnused,
    /// The same with calls waiting: an idle close seen only when a call
    /// drove the runtime (one driven inside each call's `block_on`), or a
    /// server that closes whenever it is asked something.
    QuietlyUnderCalls,
    /// The server sent a frame that is no response: the connection was
    /// dropped for it.
    Garbled,
    /// The socket failed: a reset, a stream cut in the middle of a frame,
    /// a failed write.
    Broken,
    /// Its reader or writer was dropped unfinished: the runtime they ran
    /// on shut down.
    Abandoned,
    /// Anything else on this side: a call left unanswered, or the locker
    /// closing it.
    Otherwise,
}

pub(crate) struct Connection {
    endpoint: String,
    outgoing: Arc<Outgoing>,
    /// The calls waiting for their replies.
    replies: Replies,
    alive: AtomicBool,
    /// Set once the owner was told how the connection ended (`on_close`
    /// returned): until then its end is not yet judged.
    judged: AtomicBool,
    /// Set by the reader when the server ended the stream between frames.
    ended_cleanly: AtomicBool,
    /// Set by the reader when the server sent a frame that is no response.
    garbled: AtomicBool,
    /// Set by the reader or the writer when the socket failed under them
    /// (a reset, a stream cut in the middle of a frame).
    broken: AtomicBool,
    /// Set when the reader or writer task was dropped unfinished.
    abandoned: AtomicBool,
    /// Set once the server answered a call on it.
    answered: AtomicBool,
    /// Frames the reader has taken from the socket: one that moves is
    /// being driven.
    frames_read: AtomicU64,
    /// The socket, shut down when the connection goes down (see [`Link`]).
    closer: Option<socket2::Socket>,
    /// Taken by the first [`Connection::down`], so the owner hears once.
    on_close: Mutex<Option<OnClose>>,
    /// The reader and writer, aborted when the connection goes down so that
    /// the socket closes even if only one of them noticed.
    tasks: Mutex<Vec<AbortHandle>>,
    /// The server's lock validity, from its `Welcome`.
    validity: Duration,
    /// The protocol version both sides speak on this connection.
    version: u16,
}

impl Connection {
    /// Connects, authenticates, and starts the reader and writer tasks on
    /// the current runtime. `on_close` runs once when the connection goes
    /// down, from whatever noticed: a task, a call, or a runtime dropping
    /// the tasks as it shuts down. Pushes go to `pushes`.
    ///
    /// Offers [`RemoteConfig::protocol_version`] first; a server that
    /// rejects it for the version, naming an older version both speak, is
    /// asked again with that one (PROTOCOL.md, "Versioning"). The whole
    /// exchange takes at most the connect timeout.
    pub(crate) async fn open(
        endpoint: &str,
        config: &RemoteConfig,
        pushes: Arc<Pushes>,
        log: Arc<PeerLog>,
        dialing: &Arc<Dialing>,
        on_close: impl FnOnce(Ended) + Send + 'static,
    ) -> Result<Arc<Connection>, Error> {
        let connect_timeout = config.connect_timeout;
        let deadline = instant_after(tokio::time::Instant::now(), connect_timeout);
        let mut version = config.protocol_version;
        if !wire::speaks(version) {
            return Err(Error::InvalidArgument(format!(
                "protocol version {version} is not spoken by this client; use {} to {}",
                wire::MIN_PROTOCOL_VERSION,
                wire::PROTOCOL_VERSION
            )));
        }
        loop {
            let mut listed = None;
            let shaken = Self::handshake(endpoint, config, version, deadline, dialing, &mut listed);
            let (link, welcome) = match shaken.await {
                Ok(shaken) => shaken,
                // Its socket shut down by the locker (dropped, or another
                // connection in): whatever the attempt read then says
                // nothing of the server.
                Err(_) if listed.as_ref().is_some_and(|l| !l.is_listed()) => {
                    return Err(Error::LockerUnavailable {
                        endpoint: endpoint.to_owned(),
                        reason: GIVEN_UP_REASON.to_owned(),
                    });
                }
                Err(err) => return Err(err),
            };
            // Its socket shut down by the locker after the server's welcome
            // had arrived: the handshake went through on what was read,
            // but the connection is gone, by the locker's doing.
            if listed.as_ref().is_some_and(|l| !l.is_listed()) {
                return Err(Error::LockerUnavailable {
                    endpoint: endpoint.to_owned(),
                    reason: GIVEN_UP_REASON.to_owned(),
                });
            }
            // From here the connection's own closer shuts it down.
            drop(listed);
            let (accepted, validity) = match welcome {
                Welcome::Accepted {
                    version, validity, ..
                } => (version, validity),
                Welcome::Rejected { reason } => {
                    // The server's words, cut where they quote the token
                    // (a peer may quote what it refused) and escaped,
                    // before any log or error shows them.
                    // Only its head is searched: the search costs its
                    // length times the token's.
                    let (head, _) = crate::locker::peer_text_head(&reason);
                    let head = recording::without_token(head, config.token.as_bytes());
                    let reason = crate::locker::escape_peer_head(&head, reason.len());
                    if let Some(older) = wire::fallback_version(&reason, version) {
                        tracing::debug!(endpoint, offered = version, older, %reason, "lock server speaks an older protocol; asking again");
                        version = older;
                        continue;
                    }
                    if wire::is_version_rejection(&reason) {
                        // No older version both speak: the token may be
                        // right. A newer one both speak means the setting
                        // holds the locker back; none, an upgrade.
                        let newer = wire::versions_named(&reason)
                            .filter(|v| *v > version && wire::speaks(*v))
                            .max();
                        let held = config.protocol_version;
                        let what = match newer {
                            Some(newer) if newer > held => format!(
                                "this locker is held to version {held} by \
                                 RemoteConfig::protocol_version; raise it to {newer}"
                            ),
                            // Offered before in this exchange and turned
                            // away then: servers behind one address that
                            // speak different versions (one being upgraded).
                            Some(_) => "the server had turned a newer version away in the \
                                        same exchange: servers behind this address speak \
                                        different versions (an upgrade under way?); a later \
                                        attempt asks again"
                                .to_owned(),
                            None => format!(
                                "this client speaks {} to {}; upgrade the client or the server",
                                wire::MIN_PROTOCOL_VERSION,
                                wire::PROTOCOL_VERSION
                            ),
                        };
                        return Err(Error::LockerUnavailable {
                            endpoint: endpoint.to_owned(),
                            reason: format!(
                                "the server turned protocol version {version} away ({reason}); {what}"
                            ),
                        });
                    }
                    if wire::is_token_rejection(&reason) {
                        return Err(Error::Unauthorized {
                            endpoint: endpoint.to_owned(),
                            reason,
                        });
                    }
                    // No room for now, a handshake that came late or in
                    // part: nothing says the token is wrong; try later.
                    return Err(Error::LockerUnavailable {
                        endpoint: endpoint.to_owned(),
                        reason: format!("the server turned the connection away: {reason}"),
                    });
                }
            };
            // A server may answer with an older version it speaks; never a
            // newer one than offered.
            if accepted > version || !wire::speaks(accepted) {
                return Err(Error::LockerUnavailable {
                    endpoint: endpoint.to_owned(),
                    reason: format!(
                        "the server accepted protocol version {accepted}, but this client offered \
                         {version} and speaks {} to {}; upgrade the client or the server",
                        wire::MIN_PROTOCOL_VERSION,
                        wire::PROTOCOL_VERSION
                    ),
                });
            }
            return Ok(Connection::start(
                endpoint,
                link,
                Box::new(on_close),
                validity,
                accepted,
                pushes,
                log,
            ));
        }
    }

    /// Connects and exchanges `Hello` (of `version`) and `Welcome`, all
    /// before `deadline`. Each step that can run out of time says which it
    /// was, and an answer that is not a `Welcome` is named from its first
    /// bytes ([`sniff`]) at once, without waiting for the deadline.
    async fn handshake(
        endpoint: &str,
        config: &RemoteConfig,
        version: u16,
        deadline: tokio::time::Instant,
        dialing: &Arc<Dialing>,
        listed: &mut Option<dialing::Listed>,
    ) -> Result<(Link, Welcome), Error> {
        let connect_timeout = config.connect_timeout;
        let unavailable = |reason: String| Error::LockerUnavailable {
            endpoint: endpoint.to_owned(),
            reason,
        };
        // Listed before the connect starts, so that the locker can shut it
        // down until the handshake ends.
        let connecting = dialing::connect(dialing, endpoint, listed);
        let stream = match tokio::time::timeout_at(deadline, connecting).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(unavailable(cannot_connect(&e))),
            Err(_) => {
                return Err(unavailable(format!(
                    "no connection within {connect_timeout:?}: the host does not answer (it is \
                     down or unreachable, or a firewall drops the connection)"
                )))
            }
        };
        let _ = stream.set_nodelay(true);
        // The handle that shuts the connection down from any runtime; with
        // no descriptor free for it, the attempt fails for what it is.
        let closer = match socket2::SockRef::from(&stream).try_clone() {
            Ok(closer) => Some(closer),
            Err(e) => return Err(unavailable(cannot_connect(&e))),
        };
        let stream = match tokio::time::timeout_at(deadline, secure(stream, endpoint, config)).await
        {
            Ok(secured) => secured?,
            Err(_) => {
                return Err(unavailable(format!(
                    "the server accepted the connection but finished no TLS handshake within \
                     {connect_timeout:?}: it is stopped or overloaded, or it is not a lock \
                     server{SILENT}"
                )))
            }
        };
        // Read through a recording: what the server sent, length prefixes
        // included, names who answered when the exchange fails.
        let (stream, seen) = recording::Recording::new(stream);
        let mut transport = Framed::new(Box::new(stream) as BoxIo, wire::codec());
        let hello = Hello {
            version,
            token: config.token.clone(),
        };
        let hello = wire::encode(&hello)?;
        // What the server sent, in words; never the bytes of our own
        // `Hello` sent back (an echo service, a proxy looped to itself),
        // which hold the token.
        let sent: Vec<u8> = u32::try_from(hello.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes()
            .into_iter()
            .chain(hello.iter().copied())
            .collect();
        let named = |read: &[u8]| {
            if recording::holds_what_was_sent(read, &sent, config.token.as_bytes()) {
                "the server answered bytes that are not the lock protocol: what it was sent, \
                 sent back (an echo service, or a proxy that loops to itself); it is not a lock \
                 server"
                    .to_owned()
            } else {
                sniff::answer_from_server(read)
            }
        };
        let exchange = async {
            // With TLS 1.3 the server checks a client certificate only after
            // the client finished its side of the TLS handshake: a refusal
            // arrives here, as an alert, instead of a `Welcome`.
            if let Err(e) = transport.send(Bytes::from(hello.clone())).await {
                // The server may have closed before the `Hello` arrived; its
                // alert, if it sent one, says why.
                let alert = match transport.next().await {
                    Some(Err(read)) => tls_refusal(endpoint, &read),
                    _ => None,
                };
                return Err(alert
                    .or_else(|| tls_refusal(endpoint, &e))
                    .unwrap_or_else(|| unavailable(format!("handshake failed: {e}"))));
            }
            match transport.next().await {
                // A whole frame that is no `Welcome`: named by the bytes
                // as they came, its length too (an empty frame's body is
                // nothing to show).
                Some(Ok(frame)) => {
                    wire::decode::<Welcome>(&frame).map_err(|_| unavailable(named(&seen.bytes())))
                }
                Some(Err(e)) => Err(tls_refusal(endpoint, &e).unwrap_or_else(|| {
                    // A length beyond any frame, or a stream that ended in
                    // the middle of one: what was read says who answered.
                    let read = seen.bytes();
                    // Over TLS, a close without a close_notify is an end as
                    // a plain connection's, not a fault of TLS.
                    let ended = seen.ended() || e.kind() == std::io::ErrorKind::UnexpectedEof;
                    // Nothing, or the start of a frame of ours: a lock
                    // server closed, reset or cut off in its `Welcome`.
                    // Only a length beyond any frame (`InvalidData`) is
                    // judged by the bytes.
                    let ours = read.first().is_none_or(|&b| b == 0)
                        && e.kind() != std::io::ErrorKind::InvalidData;
                    if ours && ended {
                        unavailable(CLOSED_IN_THE_HANDSHAKE.into())
                    } else if ours {
                        unavailable(format!("handshake failed: {e}"))
                    } else if read.is_empty() {
                        // Nothing of the protocol came, and the stream did
                        // not end or break: a refusal (a TLS alert after
                        // the client's side of a TLS 1.3 handshake, say),
                        // which the server will give again.
                        unavailable(format!("the server refused the handshake: {e}"))
                    } else {
                        unavailable(named(&read))
                    }
                })),
                None => Err(unavailable(CLOSED_IN_THE_HANDSHAKE.into())),
            }
        };
        match tokio::time::timeout_at(deadline, exchange).await {
            Ok(Ok(welcome)) => Ok((Link { transport, closer }, welcome)),
            Ok(Err(err)) => Err(err),
            Err(_) => {
                let read = seen.bytes();
                Err(unavailable(if read.is_empty() {
                    format!(
                        "the server accepted the connection but did not answer the handshake \
                         within {connect_timeout:?}: it is stopped or overloaded, or it is not \
                         a lock server{SILENT}"
                    )
                } else if read.first() == Some(&0) {
                    // The start of a frame of ours, maybe: a lock server
                    // that stalled in the middle of its `Welcome`.
                    format!(
                        "the server began to answer the handshake but did not finish within \
                         {connect_timeout:?}: it is stopped or overloaded"
                    )
                } else {
                    format!(
                        "{}, and sent nothing more within {connect_timeout:?}",
                        named(&read)
                    )
                }))
            }
        }
    }

    /// Runs the reader and writer of an authenticated transport on the
    /// current runtime.
    fn start(
        endpoint: &str,
        link: Link,
        on_close: OnClose,
        validity: Duration,
        version: u16,
        pushes: Arc<Pushes>,
        log: Arc<PeerLog>,
    ) -> Arc<Connection> {
        let Link { transport, closer } = link;
        let parts = transport.into_parts();
        let (read_half, write_half) = tokio::io::split(parts.io);
        // Whatever the server sent right after its `Welcome` was read with
        // it, and is read again first, before the socket.
        let leftover = std::io::Cursor::new(parts.read_buf.freeze());
        let stream = FramedRead::new(
            leftover.chain(read_half),
            crate::net::framing::Framing::new(wire::codec()),
        );
        let conn = Connection::new(endpoint, closer, on_close, validity, version);
        let writer = tokio::spawn(write_batches(
            write_half,
            conn.outgoing.clone(),
            DownOnDrop::new(&conn, "writer"),
        ));
        let reader = tokio::spawn(reader::read_responses(
            stream,
            conn.clone(),
            pushes,
            log,
            DownOnDrop::new(&conn, "reader"),
        ));
        conn.tasks()
            .extend([writer.abort_handle(), reader.abort_handle()]);
        // A task that ended before its handle was stored found nothing to
        // abort; the other one must not outlive it.
        if !conn.is_alive() {
            writer.abort();
            reader.abort();
        }
        conn
    }

    fn new(
        endpoint: &str,
        closer: Option<socket2::Socket>,
        on_close: OnClose,
        validity: Duration,
        version: u16,
    ) -> Arc<Connection> {
        Arc::new(Connection {
            endpoint: endpoint.to_owned(),
            closer,
            broken: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            answered: AtomicBool::new(false),
            frames_read: AtomicU64::new(0),
            outgoing: Arc::default(),
            replies: Replies::default(),
            alive: AtomicBool::new(true),
            judged: AtomicBool::new(false),
            ended_cleanly: AtomicBool::new(false),
            garbled: AtomicBool::new(false),
            on_close: Mutex::new(Some(on_close)),
            tasks: Mutex::default(),
            validity,
            version,
        })
    }

    /// How long the server keeps an entry that is not refreshed.
    pub(crate) fn validity(&self) -> Duration {
        self.validity
    }

    /// The protocol version spoken on this connection.
    pub(crate) fn version(&self) -> u16 {
        self.version
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Down, but its owner not yet told how it ended: what follows its end
    /// (a reopen by the next call, a reconnect) is not decided yet.
    pub(crate) fn is_ending(&self) -> bool {
        !self.alive.load(Ordering::Acquire) && !self.judged.load(Ordering::Acquire)
    }

    /// Closes the connection on purpose (its locker is gone): no reconnect
    /// follows unless `on_close` decides otherwise.
    pub(crate) fn close(&self) {
        self.down("closed by its locker");
    }

    /// Marks the connection dead, stops both tasks, fails every waiting
    /// call, and runs `on_close`. Only the first call does anything.
    ///
    /// Runs from task destructors too, possibly while a runtime shuts down,
    /// so it takes no lock while calling out.
    fn down(&self, why: &str) {
        if !self.alive.swap(false, Ordering::AcqRel) {
            return;
        }
        tracing::debug!(endpoint = %self.endpoint, why, "connection down");
        let tasks = std::mem::take(&mut *self.tasks());
        for task in tasks {
            task.abort();
        }
        if let Some(closer) = &self.closer {
            let _ = closer.shutdown(std::net::Shutdown::Both);
        }
        // Every call still waiting loses its slot and is woken: it fails
        // with "closed". A reply already in its slot stays for its call.
        let (waiters, waited) = self.replies.fail_waiting();
        let ended = if self.garbled.load(Ordering::Acquire) {
            Ended::Garbled
        } else if self.ended_cleanly.load(Ordering::Acquire) && waited == 0 {
            if self.answered.load(Ordering::Acquire) {
                Ended::Quietly
            } else {
                Ended::QuietlyUnused
            }
        } else if self.ended_cleanly.load(Ordering::Acquire) {
            // Calls still waiting were sent as the server closed: they
            // fail, and the server has not acted on them.
            Ended::QuietlyUnderCalls
        } else if self.broken.load(Ordering::Acquire) {
            Ended::Broken
        } else if self.abandoned.load(Ordering::Acquire) {
            Ended::Abandoned
        } else {
            Ended::Otherwise
        };
        for waiter in waiters {
            waiter.wake();
        }
        let on_close = self
            .on_close
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(on_close) = on_close {
            on_close(ended);
        }
        self.judged.store(true, Ordering::Release);
    }

    fn tasks(&self) -> MutexGuard<'_, Vec<AbortHandle>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `reply` in the slot of request `id` and wakes its call, if it
    /// still waits (the reader).
    fn deliver(&self, id: u64, reply: Reply) {
        if self.replies.deliver(id, reply) {
            self.answered.store(true, Ordering::Release);
        }
    }

    /// Sends `op` as request `id` and waits at most `timeout` for its reply.
    /// Cancel safe: dropping the future forgets the request; a reply that
    /// still arrives is discarded.
    pub(crate) async fn call(&self, id: u64, op: Op, timeout: Duration) -> Result<Reply, Error> {
        let waiting = self.replies.wait_for(id);
        // Checked after the insert: `down` clears the slots after marking the
        // connection dead, so a call racing with it either sees it dead here
        // or has its slot dropped, and never waits for the timeout.
        if !self.is_alive() {
            return Err(self.closed());
        }
        let Appended {
            number: frame,
            end,
            waited,
        } = self.outgoing.append(&Request { id, op })?;
        // Frames left by calls that gave up sooner have waited a whole
        // call timeout: the writer is not running, whoever asks.
        if !waited.is_zero() && waited >= timeout {
            self.down("the writer took no request within the call timeout");
            return Err(self.not_sent(timeout));
        }
        // A fan-out polling this call wakes it at its deadline; alone it
        // arms a timer of its own (see `quorum::deadline`).
        let deadline = crate::quorum::clock::after(tokio::time::Instant::now(), timeout);
        let reply = within(deadline, waiting.reply()).await;
        drop(waiting);
        match reply {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) => {
                self.down("a reply slot was dropped");
                Err(self.closed())
            }
            Err(_) if self.outgoing.taken.load(Ordering::Acquire) < frame => {
                // Our frame sat in the queue for the whole timeout. The
                // writer runs on the runtime that opened the connection; it
                // is not being driven (a current-thread runtime outside its
                // `block_on`), or the server has stopped reading.
                self.down("the writer took no request within the call timeout");
                Err(self.not_sent(timeout))
            }
            Err(_) if self.outgoing.written.load(Ordering::Acquire) < end => {
                // Taken, but not all of it reached the socket: the writer
                // stopped mid-write, for the same two reasons.
                self.down("the writer did not finish a request within the call timeout");
                Err(self.not_sent(timeout))
            }
            Err(_) if self.reader_is_stalled().await => {
                // The server answered; the reader, on the runtime that
                // opened the connection, is not being driven to read it.
                self.down("replies sit unread within the call timeout");
                Err(Error::LockerUnavailable {
                    endpoint: self.endpoint.clone(),
                    reason: format!(
                        "the server answered, but nothing read the answer within {timeout:?}: \
                         the runtime that opened the connection is not running its tasks; \
                         reconnecting from this runtime"
                    ),
                })
            }
            Err(_) => Err(Error::LockerTimeout {
                endpoint: self.endpoint.clone(),
                after: timeout,
            }),
        }
    }

    /// Whether the reader is not being driven: bytes wait in the socket
    /// unread, and still do a moment later with no frame read meanwhile.
    /// Bytes that arrived just now wait a few microseconds for a reader
    /// that runs, so one look could blame the runtime for a server that
    /// was only slow with this call's answer.
    async fn reader_is_stalled(&self) -> bool {
        if !self.reply_sits_unread() {
            return false;
        }
        let read = self.frames_read.load(Ordering::Acquire);
        tokio::time::sleep(STALL_CHECK).await;
        self.frames_read.load(Ordering::Acquire) == read && self.reply_sits_unread()
    }

    /// Whether bytes (or the end of the stream) wait in the socket unread:
    /// a reader that runs takes them as they come. The second handle
    /// shares the socket's non-blocking mode, so this never waits.
    fn reply_sits_unread(&self) -> bool {
        let Some(closer) = &self.closer else {
            return false;
        };
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        closer.peek(&mut byte).is_ok()
    }

    /// The error of a call whose request the writer did not take, or not
    /// write in full, within `timeout`.
    fn not_sent(&self, timeout: Duration) -> Error {
        Error::LockerUnavailable {
            endpoint: self.endpoint.clone(),
            reason: format!(
                "the request was not wholly sent within {timeout:?}: the runtime that opened the \
                 connection is not running its tasks, or the server stopped reading; \
                 reconnecting from this runtime"
            ),
        }
    }

    fn closed(&self) -> Error {
        Error::LockerUnavailable {
            endpoint: self.endpoint.clone(),
            reason: CLOSED_BEFORE_THE_REPLY.into(),
        }
    }
}

/// Marks the connection down when the task holding it ends, whether it
/// returned or was dropped unfinished by a runtime shutting down. Holds a
/// weak reference so that the writer does not keep alive the connection
/// whose channel it waits on.
struct DownOnDrop {
    conn: Weak<Connection>,
    task: &'static str,
}

impl DownOnDrop {
    fn new(conn: &Arc<Connection>, task: &'static str) -> Self {
        DownOnDrop {
            conn: Arc::downgrade(conn),
            task,
        }
    }
}

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.upgrade() {
            let why = if std::thread::panicking() {
                "panicked"
            } else {
                "ended"
            };
            // A task that returns has set why first (a clean end, a broken
            // socket, a garbled frame); one without, its runtime dropped.
            conn.abandoned.store(true, Ordering::Release);
            conn.down(&format!("the {} task {why}", self.task));
        }
    }
}

/// `at + wait`, or a year after `at` when that is past what an instant
/// holds (a timeout of `Duration::MAX`).
pub(crate) fn instant_after(at: tokio::time::Instant, wait: Duration) -> tokio::time::Instant {
    at.checked_add(wait)
        .unwrap_or_else(|| at + Duration::from_secs(86_400 * 365))
}

/// How long a call that timed out with bytes unread in the socket gives
/// the reader to take them before it counts the reader as not driven.
const STALL_CHECK: Duration = Duration::from_millis(20);

/// Said of a server that closed the connection before its `Welcome`.
const CLOSED_IN_THE_HANDSHAKE: &str = "the server closed the connection during the handshake";

/// Said of a server that stays silent: it may speak another protocol,
/// one that waits for a request of its own.
const SILENT: &str = " (a Redis server, for one, says nothing to a lock client)";
