//! The frames callers queue for the writer, and the writer that sends
//! them in batches.
//!
//! Invariant: `untaken_since` is set when the outbox stops being empty
//! and cleared when the writer takes its frames, so a call can tell a
//! writer that has not run for a whole call timeout. Frames are written
//! in the order appended, so a frame is written whole once `written`
//! reaches the byte count at its end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncWriteExt, WriteHalf};
use tokio::sync::Notify;

use super::DownOnDrop;
use crate::net::io::BoxIo;
use crate::net::wire::{self, Request};
use crate::Error;

/// A write buffer above this capacity is given back once it was written,
/// rather than kept for the life of the connection.
const LARGE_BUFFER: usize = 64 * 1024;

/// The frames callers encoded and the writer has not taken yet.
#[derive(Default)]
pub(super) struct Outgoing {
    outbox: Mutex<Outbox>,
    /// Wakes the writer when the outbox stops being empty.
    pub(super) ready: Notify,
    /// How many frames the writer has taken: a call that times out before
    /// its frame was taken knows the writer is not running.
    pub(super) taken: AtomicU64,
    /// How many bytes of frames the writer has handed to the socket: a
    /// call that times out with its frame taken but its last byte not
    /// written knows the writer stopped mid-write (its runtime not driven,
    /// or the server not reading). Counted as each write is flushed, so a
    /// frame written whole counts whatever the rest of its batch does.
    pub(super) written: AtomicU64,
}

/// A frame put in the outbox: its number, counted from 1, where it ends
/// in the bytes ever appended, and how long the frames before it had
/// waited for the writer.
pub(super) struct Appended {
    pub(super) number: u64,
    pub(super) end: u64,
    pub(super) waited: Duration,
}

#[derive(Default)]
struct Outbox {
    frames: BytesMut,
    /// How many frames were ever appended.
    appended: u64,
    /// How many bytes were ever appended.
    bytes: u64,
    /// Since when the frames there have waited for the writer.
    untaken_since: Option<tokio::time::Instant>,
}

impl Outgoing {
    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Encodes `request` at the end of the outbox and wakes the writer if
    /// it was empty. Returns the frame's number and how long the frames
    /// already there had waited.
    pub(super) fn append(&self, request: &Request) -> Result<Appended, Error> {
        let (appended, was_empty) = {
            let mut outbox = self.outbox();
            let was_empty = outbox.frames.is_empty();
            let now = tokio::time::Instant::now();
            let waited = outbox
                .untaken_since
                .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
            let before = outbox.frames.len();
            wire::encode_frame(request, &mut outbox.frames)?;
            let len = outbox.frames.len().saturating_sub(before);
            outbox.bytes = outbox.bytes.saturating_add(len as u64);
            outbox.appended += 1;
            if was_empty {
                outbox.untaken_since = Some(now);
            }
            (
                Appended {
                    number: outbox.appended,
                    end: outbox.bytes,
                    waited,
                },
                was_empty,
            )
        };
        if was_empty {
            self.ready.notify_one();
        }
        Ok(appended)
    }

    /// Swaps the outbox's frames for the empty `spare`; false when there
    /// were none.
    fn take(&self, spare: &mut BytesMut) -> bool {
        let mut outbox = self.outbox();
        if outbox.frames.is_empty() {
            return false;
        }
        std::mem::swap(&mut outbox.frames, spare);
        outbox.untaken_since = None;
        self.taken.store(outbox.appended, Ordering::Release);
        true
    }
}

/// Writes the outbox. Once woken it yields once, so that callers running
/// at the same moment can append their frames, then writes everything
/// appended with one write: one syscall for many requests. Frames appended
/// while it writes go out with the next write.
pub(super) async fn write_batches(
    mut io: WriteHalf<BoxIo>,
    outgoing: Arc<Outgoing>,
    down: DownOnDrop,
) {
    let mut batch = BytesMut::new();
    loop {
        outgoing.ready.notified().await;
        tokio::task::yield_now().await;
        while outgoing.take(&mut batch) {
            if write_counted(&mut io, &batch, &outgoing.written)
                .await
                .is_err()
            {
                if let Some(conn) = down.conn.upgrade() {
                    conn.broken.store(true, Ordering::Release);
                }
                return;
            }
            if batch.capacity() > LARGE_BUFFER {
                batch = BytesMut::new();
            } else {
                batch.clear();
            }
        }
    }
}

/// Writes all of `batch`, adding each write's bytes to `written` once
/// they are flushed: a TLS layer takes bytes into a buffer of its own and
/// sends them to the socket only as it is flushed, which an idle runtime
/// never does. (On plain TCP a flush does nothing.)
async fn write_counted(
    io: &mut WriteHalf<BoxIo>,
    mut batch: &[u8],
    written: &AtomicU64,
) -> std::io::Result<()> {
    while !batch.is_empty() {
        let n = io.write(batch).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        io.flush().await?;
        written.fetch_add(n as u64, Ordering::Release);
        batch = &batch[n..];
    }
    Ok(())
}
