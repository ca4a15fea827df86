//! The transport's ceiling, for the benchmark harness (feature `testing`;
//! not part of the API): a trivial lock server that speaks the protocol's
//! framing and encoding but keeps no lock table and answers every request
//! at once, and a trivial client that runs lock-then-unlock cycles on a
//! quorum of such servers with nothing but the transport in the way.
//!
//! Both follow the design PROTOCOL.md describes ("Why this transport"):
//! one connection per server, requests tagged by id, callers that encode
//! into the connection's outbox and a writer that yields once and then
//! writes the whole outbox with one write; a server that decodes every
//! request of a read, encodes all replies into one buffer and writes it
//! with one write. What they leave out is everything the library does on
//! top: the lock table, waiting, released-uid memory, timeouts per call,
//! the coordinator's bookkeeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::wire::{
    self, Hello, Op, Reply, Request, Response, Welcome, WireArgs, WireWaitReply, MAX_FRAME,
    PROTOCOL_VERSION,
};
use crate::Error;

/// The validity the trivial server announces.
const VALIDITY: Duration = Duration::from_secs(60);

/// Serves connections on `listener` until the task is dropped: the
/// handshake (a client presenting `token` is accepted at the newest version
/// both speak), then every request answered at once, as granted.
pub async fn serve(listener: TcpListener, token: String) {
    let token: Arc<str> = token.into();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(session(stream, token.clone()));
            }
            Err(err) => {
                tracing::warn!(%err, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Room for this many bytes is made before every read, so that one read
/// takes whatever has arrived rather than the rest of one frame.
const READ_ROOM: usize = 16 * 1024;

/// The next whole frame's payload in `buf`, taken out of it; `Ok(None)`
/// until one has arrived, an error for a length over [`MAX_FRAME`].
fn next_frame(buf: &mut BytesMut) -> Result<Option<BytesMut>, Error> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if len > MAX_FRAME {
        return Err(Error::InvalidArgument(format!(
            "a frame of {len} bytes is over the limit"
        )));
    }
    if buf.len() < 4 + len {
        buf.reserve(4 + len - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len)))
}

/// The answer a table that grants everything gives.
fn answer(op: &Op) -> Reply {
    match op {
        Op::LockWait { .. } => Reply::Wait(WireWaitReply::Granted),
        Op::Fence { .. } => Reply::Fence(Some(1)),
        Op::List => Reply::Locks(Vec::new()),
        Op::ListPage { .. } => Reply::LocksPage {
            entries: Vec::new(),
            more: false,
        },
        Op::Health => Reply::Health {
            quarantined: false,
            entries: 0,
        },
        Op::Status => Reply::Status {
            quarantine_left: None,
            entries: 0,
        },
        Op::Leader { .. } => Reply::Leader(None),
        _ => Reply::Bool(true),
    }
}

async fn session(stream: TcpStream, token: Arc<str>) {
    let _ = stream.set_nodelay(true);
    if let Err(err) = serve_session(stream, &token).await {
        tracing::debug!(%err, "trivial session ended");
    }
}

async fn serve_session(mut stream: TcpStream, token: &str) -> Result<(), Error> {
    let io = |e: std::io::Error| Error::LockerUnavailable {
        endpoint: "trivial server".into(),
        reason: e.to_string(),
    };
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut output = BytesMut::with_capacity(16 * 1024);
    // The handshake.
    let hello = loop {
        if let Some(frame) = next_frame(&mut input)? {
            break wire::decode::<Hello>(&frame)?;
        }
        if stream.read_buf(&mut input).await.map_err(io)? == 0 {
            return Ok(());
        }
    };
    let welcome = if hello.token != token {
        Welcome::Rejected {
            reason: wire::INVALID_TOKEN.into(),
        }
    } else if !wire::speaks(hello.version) {
        Welcome::Rejected {
            reason: wire::unsupported_version(hello.version),
        }
    } else {
        Welcome::Accepted {
            version: hello.version.min(PROTOCOL_VERSION),
            admin: false,
            validity: VALIDITY,
        }
    };
    let accepted = matches!(welcome, Welcome::Accepted { .. });
    wire::encode_frame(&welcome, &mut output)?;
    stream.write_all(&output).await.map_err(io)?;
    output.clear();
    if !accepted {
        return Ok(());
    }
    // Requests: every frame of a read answered into one buffer, written
    // with one write.
    loop {
        while let Some(frame) = next_frame(&mut input)? {
            let request = wire::decode::<Request>(&frame)?;
            let response = Response {
                id: request.id,
                reply: answer(&request.op),
            };
            wire::encode_frame(&response, &mut output)?;
        }
        if !output.is_empty() {
            stream.write_all(&output).await.map_err(io)?;
            output.clear();
        }
        input.reserve(READ_ROOM);
        if stream.read_buf(&mut input).await.map_err(io)? == 0 {
            return Ok(());
        }
    }
}

/// Frames sent and received by a [`TrivialClient`], for per-lock counts.
#[derive(Debug, Default)]
pub struct FrameCounts {
    /// Request frames appended to the outboxes.
    pub sent: AtomicU64,
    /// Response frames read.
    pub received: AtomicU64,
}

/// One client's progress through a phase (lock or unlock): the phase's
/// number in the high bits, the replies counted for it in the low 16.
struct Slot {
    state: AtomicU64,
    ready: Notify,
}

const COUNT_BITS: u32 = 16;
const CLIENT_BITS: u32 = 20;

/// A trivial client of a cluster of lock servers: one connection per
/// server, and cycles that send a lock to every server, wait for a quorum
/// of replies, then do the same with an unlock.
pub struct TrivialClient {
    conns: Vec<Arc<Outbox>>,
    slots: Arc<Vec<Slot>>,
    quorum: u64,
    /// Frames sent and received over every connection.
    pub frames: Arc<FrameCounts>,
    /// The reader and writer tasks, stopped when the client is dropped.
    tasks: Vec<tokio::task::AbortHandle>,
}

#[derive(Default)]
struct Outbox {
    frames: Mutex<BytesMut>,
    ready: Notify,
}

impl Outbox {
    fn append(&self, request: &Request) -> Result<(), Error> {
        let was_empty = {
            let mut frames = self.frames.lock().unwrap_or_else(PoisonError::into_inner);
            let was_empty = frames.is_empty();
            wire::encode_frame(request, &mut frames)?;
            was_empty
        };
        if was_empty {
            self.ready.notify_one();
        }
        Ok(())
    }
}

impl TrivialClient {
    /// Connects to every server in `addrs` with `token`, for up to
    /// `clients` concurrent cycles (at most 2^20).
    pub async fn connect(addrs: &[String], token: &str, clients: usize) -> Result<Self, Error> {
        if clients >= 1 << CLIENT_BITS || addrs.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{clients} clients on {} servers",
                addrs.len()
            )));
        }
        let slots: Arc<Vec<Slot>> = Arc::new(
            (0..clients)
                .map(|_| Slot {
                    state: AtomicU64::new(0),
                    ready: Notify::new(),
                })
                .collect(),
        );
        let frames = Arc::new(FrameCounts::default());
        let quorum = (addrs.len() / 2 + 1) as u64;
        let mut conns = Vec::with_capacity(addrs.len());
        let mut tasks = Vec::new();
        for addr in addrs {
            let unavailable = |reason: String| Error::LockerUnavailable {
                endpoint: addr.clone(),
                reason,
            };
            let mut stream = TcpStream::connect(addr.as_str())
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            let _ = stream.set_nodelay(true);
            let mut buf = BytesMut::new();
            wire::encode_frame(
                &Hello {
                    version: PROTOCOL_VERSION,
                    token: token.to_owned(),
                },
                &mut buf,
            )?;
            stream
                .write_all(&buf)
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            buf.clear();
            let welcome = loop {
                if let Some(frame) = next_frame(&mut buf)? {
                    break wire::decode::<Welcome>(&frame)?;
                }
                if stream
                    .read_buf(&mut buf)
                    .await
                    .map_err(|e| unavailable(e.to_string()))?
                    == 0
                {
                    return Err(unavailable("closed during the handshake".into()));
                }
            };
            if let Welcome::Rejected { reason } = welcome {
                return Err(unavailable(crate::locker::escape_peer_text(&reason)));
            }
            let (read, write) = stream.into_split();
            let outbox = Arc::new(Outbox::default());
            let writer = tokio::spawn(write_batches(write, outbox.clone()));
            let reader = tokio::spawn(read_replies(
                read,
                buf,
                slots.clone(),
                quorum,
                frames.clone(),
            ));
            tasks.extend([writer.abort_handle(), reader.abort_handle()]);
            conns.push(outbox);
        }
        Ok(TrivialClient {
            conns,
            slots,
            quorum,
            frames,
            tasks,
        })
    }

    /// One lock-then-unlock cycle of `client` (below the `clients` given
    /// to [`connect`](Self::connect)) with `args`: two [`phase`](Self::phase)s.
    pub async fn cycle(
        &self,
        client: usize,
        args: &crate::LockArgs,
        timeout: Duration,
    ) -> Result<(), Error> {
        self.phase(client, args, false, timeout).await?;
        self.phase(client, args, true, timeout).await
    }

    /// Sends a lock (or with `unlock`, an unlock) of `args` for `client`
    /// to every server and returns once a quorum answered, or fails after
    /// `timeout`. One phase at a time per client.
    pub async fn phase(
        &self,
        client: usize,
        args: &crate::LockArgs,
        unlock: bool,
        timeout: Duration,
    ) -> Result<(), Error> {
        let slot = self
            .slots
            .get(client)
            .ok_or_else(|| Error::InvalidArgument(format!("no client {client}")))?;
        let args = WireArgs::from(args);
        let phase = (slot.state.load(Ordering::Acquire) >> COUNT_BITS) + 1;
        slot.state.store(phase << COUNT_BITS, Ordering::Release);
        let id = (phase << CLIENT_BITS) | client as u64;
        let op = if unlock {
            Op::Unlock(args)
        } else {
            Op::Lock(args)
        };
        let request = Request { id, op };
        for conn in &self.conns {
            conn.append(&request)?;
        }
        self.frames
            .sent
            .fetch_add(self.conns.len() as u64, Ordering::Relaxed);
        let quorum = async {
            while slot.state.load(Ordering::Acquire) & ((1 << COUNT_BITS) - 1) < self.quorum {
                slot.ready.notified().await;
            }
        };
        tokio::time::timeout(timeout, quorum)
            .await
            .map_err(|_| Error::LockerTimeout {
                endpoint: "trivial cluster".into(),
                after: timeout,
            })
    }
}

impl Drop for TrivialClient {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn write_batches(mut io: OwnedWriteHalf, outbox: Arc<Outbox>) {
    let mut batch = BytesMut::new();
    loop {
        outbox.ready.notified().await;
        tokio::task::yield_now().await;
        loop {
            {
                let mut frames = outbox.frames.lock().unwrap_or_else(PoisonError::into_inner);
                if frames.is_empty() {
                    break;
                }
                std::mem::swap(&mut *frames, &mut batch);
            }
            if io.write_all(&batch).await.is_err() {
                return;
            }
            batch.clear();
        }
    }
}

async fn read_replies(
    mut io: OwnedReadHalf,
    mut buf: BytesMut,
    slots: Arc<Vec<Slot>>,
    quorum: u64,
    frames: Arc<FrameCounts>,
) {
    loop {
        loop {
            let frame = match next_frame(&mut buf) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => return,
            };
            let Ok(response) = wire::decode::<Response>(&frame) else {
                return;
            };
            frames.received.fetch_add(1, Ordering::Relaxed);
            let client = (response.id & ((1 << CLIENT_BITS) - 1)) as usize;
            let phase = response.id >> CLIENT_BITS;
            let Some(slot) = slots.get(client) else {
                continue;
            };
            // Counted only for the phase the client is in: a late reply to
            // an earlier phase is dropped.
            let mut state = slot.state.load(Ordering::Acquire);
            while state >> COUNT_BITS == phase {
                match slot.state.compare_exchange_weak(
                    state,
                    state + 1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        if (state + 1) & ((1 << COUNT_BITS) - 1) == quorum {
                            slot.ready.notify_one();
                        }
                        break;
                    }
                    Err(now) => state = now,
                }
            }
        }
        buf.reserve(READ_ROOM);
        match io.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
