//! One authenticated client connection: requests tagged by id go out
//! through a writer task that batches them, and a reader task hands each
//! response to the caller waiting for that id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::io::BoxIo;
use super::wire::{self, Hello, Op, Reply, Request, Response, Welcome};
use super::RemoteConfig;
use crate::Error;

type Transport = Framed<BoxIo, LengthDelimitedCodec>;
type Pending = Mutex<HashMap<u64, oneshot::Sender<Reply>>>;

pub(crate) struct Connection {
    endpoint: String,
    frames: mpsc::UnboundedSender<Bytes>,
    pending: Pending,
    alive: AtomicBool,
    /// The server's lock validity, from its `Welcome`.
    validity: Duration,
}

impl Connection {
    /// Connects, authenticates, and starts the reader and writer tasks.
    /// `on_close` runs once when the connection breaks.
    pub(crate) async fn open(
        endpoint: &str,
        config: &RemoteConfig,
        on_close: impl FnOnce() + Send + 'static,
    ) -> Result<Arc<Connection>, Error> {
        let connect_timeout = config.connect_timeout;
        let unavailable = |reason: String| Error::LockerUnavailable {
            endpoint: endpoint.to_owned(),
            reason,
        };
        let handshake = async {
            let stream = TcpStream::connect(endpoint)
                .await
                .map_err(|e| unavailable(format!("cannot connect: {e}")))?;
            let _ = stream.set_nodelay(true);
            let stream: BoxIo = match secure(stream, config).await {
                Ok(stream) => stream,
                Err(e) => return Err(unavailable(format!("TLS handshake failed: {e}"))),
            };
            let mut transport = Framed::new(stream, wire::codec());
            let hello = Hello {
                version: wire::PROTOCOL_VERSION,
                token: config.token.clone(),
            };
            transport
                .send(Bytes::from(wire::encode(&hello)?))
                .await
                .map_err(|e| unavailable(format!("handshake failed: {e}")))?;
            match transport.next().await {
                Some(Ok(frame)) => Ok((transport, wire::decode::<Welcome>(&frame)?)),
                Some(Err(e)) => Err(unavailable(format!("handshake failed: {e}"))),
                None => Err(unavailable(
                    "the server closed the connection during the handshake".into(),
                )),
            }
        };
        let (transport, welcome) = tokio::time::timeout(connect_timeout, handshake)
            .await
            .map_err(|_| unavailable(format!("no handshake within {connect_timeout:?}")))??;
        let validity = match welcome {
            Welcome::Accepted { validity, .. } => validity,
            Welcome::Rejected { reason } => {
                return Err(Error::Unauthorized {
                    endpoint: endpoint.to_owned(),
                    reason,
                })
            }
        };
        let (sink, stream) = transport.split();
        let (frames, queued) = mpsc::unbounded_channel();
        let conn = Arc::new(Connection {
            endpoint: endpoint.to_owned(),
            frames,
            pending: Mutex::default(),
            alive: AtomicBool::new(true),
            validity,
        });
        tokio::spawn(write_batches(sink, queued));
        tokio::spawn(read_responses(stream, conn.clone(), on_close));
        Ok(conn)
    }

    /// How long the server keeps an entry that is not refreshed.
    pub(crate) fn validity(&self) -> Duration {
        self.validity
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<u64, oneshot::Sender<Reply>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `op` as request `id` and waits at most `timeout` for its reply.
    /// Cancel safe: dropping the future forgets the request; a reply that
    /// still arrives is discarded.
    pub(crate) async fn call(&self, id: u64, op: Op, timeout: Duration) -> Result<Reply, Error> {
        let payload = Bytes::from(wire::encode(&Request { id, op })?);
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id, tx);
        let forget = Forget { conn: self, id };
        if self.frames.send(payload).is_err() {
            return Err(self.closed());
        }
        let reply = tokio::time::timeout(timeout, rx).await;
        drop(forget);
        match reply {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(self.closed()),
            Err(_) => Err(Error::LockerTimeout {
                endpoint: self.endpoint.clone(),
                after: timeout,
            }),
        }
    }

    fn closed(&self) -> Error {
        Error::LockerUnavailable {
            endpoint: self.endpoint.clone(),
            reason: "the connection closed before the reply arrived".into(),
        }
    }
}

/// Wraps the stream in TLS when the config asks for it.
async fn secure(stream: TcpStream, config: &RemoteConfig) -> std::io::Result<BoxIo> {
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        let stream = tls
            .connector
            .connect(tls.server_name.clone(), stream)
            .await?;
        return Ok(Box::new(stream));
    }
    let _ = config;
    Ok(Box::new(stream))
}

/// Removes a request's reply slot when its caller stops waiting.
struct Forget<'a> {
    conn: &'a Connection,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.conn.pending().remove(&self.id);
    }
}

/// Writes queued frames. After the first frame of a batch it yields once, so
/// that callers running at the same moment can queue theirs, then writes
/// everything queued with one flush: one syscall for many requests.
async fn write_batches(
    mut sink: SplitSink<Transport, Bytes>,
    mut queued: mpsc::UnboundedReceiver<Bytes>,
) {
    while let Some(first) = queued.recv().await {
        tokio::task::yield_now().await;
        if sink.feed(first).await.is_err() {
            return;
        }
        while let Ok(next) = queued.try_recv() {
            if sink.feed(next).await.is_err() {
                return;
            }
        }
        if sink.flush().await.is_err() {
            return;
        }
    }
}

async fn read_responses(
    mut stream: SplitStream<Transport>,
    conn: Arc<Connection>,
    on_close: impl FnOnce(),
) {
    while let Some(Ok(frame)) = stream.next().await {
        let Ok(response) = wire::decode::<Response>(&frame) else {
            tracing::warn!(endpoint = %conn.endpoint, "undecodable response; dropping the connection");
            break;
        };
        if let Some(waiter) = conn.pending().remove(&response.id) {
            let _ = waiter.send(response.reply);
        } else if response.id == 0 {
            tracing::warn!(endpoint = %conn.endpoint, reply = ?response.reply, "server reported an error");
        }
    }
    conn.alive.store(false, Ordering::Release);
    // Dropping the senders wakes every waiting caller with "closed".
    conn.pending().clear();
    tracing::debug!(endpoint = %conn.endpoint, "connection closed");
    on_close();
}
