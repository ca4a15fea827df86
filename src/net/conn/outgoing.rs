//! The frames callers queue for the writer, and the writer that sends
//! them in batches.
//!
//! Invariant: `untaken_since` is set when the outbox stops being empty
//! and cleared when the writer takes its frames, so a call can tell a
//! writer that has not run for a whole call timeout; `written` never
//! passes `taken`, and a frame counts as written only once all its bytes
//! are in the socket.

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
    /// How many frames the writer has wholly written to the socket: a
    /// call that times out with its frame taken but not all written knows
    /// the writer stopped mid-write (its runtime not driven, or the server
    /// not reading).
    pub(super) written: AtomicU64,
}

/// A frame put in the outbox: its number, counted from 1, and how long
/// the frames before it had waited for the writer.
pub(super) struct Appended {
    pub(super) number: u64,
    pub(super) waited: Duration,
}

#[derive(Default)]
struct Outbox {
    frames: BytesMut,
    /// How many frames were ever appended.
    appended: u64,
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
            wire::encode_frame(request, &mut outbox.frames)?;
            outbox.appended += 1;
            if was_empty {
                outbox.untaken_since = Some(now);
            }
            (
                Appended {
                    number: outbox.appended,
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

    /// Swaps the outbox's frames for the empty `spare`; the number of the
    /// last frame taken, or `None` when there were none.
    fn take(&self, spare: &mut BytesMut) -> Option<u64> {
        let mut outbox = self.outbox();
        if outbox.frames.is_empty() {
            return None;
        }
        std::mem::swap(&mut outbox.frames, spare);
        outbox.untaken_since = None;
        self.taken.store(outbox.appended, Ordering::Release);
        Some(outbox.appended)
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
        while let Some(last) = outgoing.take(&mut batch) {
            if io.write_all(&batch).await.is_err() || io.flush().await.is_err() {
                if let Some(conn) = down.conn.upgrade() {
                    conn.broken.store(true, Ordering::Release);
                }
                return;
            }
            outgoing.written.store(last, Ordering::Release);
            if batch.capacity() > LARGE_BUFFER {
                batch = BytesMut::new();
            } else {
                batch.clear();
            }
        }
    }
}
