//! What the server sent in the handshake, as it came: the codec takes a
//! frame's length out of its buffer as soon as the length has arrived, so
//! its buffer cannot tell "the start of a frame of ours" (a lock server
//! that stalled or was cut off in its `Welcome`) from "nothing" or from a
//! stranger's bytes. The handshake reads through a [`Recording`] and
//! judges what came from [`Seen`].
//!
//! Invariant: `Seen::bytes` is a prefix of the stream, at most
//! [`RECORDED`] bytes; `ended` is set once a read found the stream's end.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::net::io::BoxIo;

/// How many of the first bytes are kept: enough to name a peer by them.
const RECORDED: usize = 64;

/// The first bytes read, and whether the stream ended.
#[derive(Default)]
pub(super) struct Seen {
    bytes: Mutex<Vec<u8>>,
    ended: AtomicBool,
}

impl Seen {
    /// The first bytes read (at most 64).
    pub(super) fn bytes(&self) -> Vec<u8> {
        self.bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether a read found the end of the stream.
    pub(super) fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }
}

/// Whether `read`, what a peer sent in the handshake, holds what this
/// client sent it (`sent`, the `Hello` frame with its length, which holds
/// the `token`): our own bytes sent back as they were, or a run of six of
/// the token's bytes (the whole of a shorter token, from four) anywhere in
/// it, quoted after words of the peer's own or sent back without its
/// length. Then nothing of it may be shown. (Shorter runs turn up in
/// honest answers: "ent-" of "client-secret" is in an HTTP server's
/// "Content-Length".)
pub(super) fn holds_what_was_sent(read: &[u8], sent: &[u8], token: &[u8]) -> bool {
    token_quoted_at(read, token, 6).is_some()
        || (read.len() > 4 && (sent.starts_with(read) || read.starts_with(sent)))
}

/// Where in `text` a run of `run` of the `token`'s bytes (the whole of a
/// shorter token, from four) first begins, if anywhere.
fn token_quoted_at(text: &[u8], token: &[u8], run: usize) -> Option<usize> {
    let run = token.len().min(run);
    if run < 4 {
        return None;
    }
    text.windows(run)
        .position(|w| token.windows(run).any(|t| t == w))
}

/// A lock server's `reason` for turning the client away as it may be
/// shown: cut where it begins to quote the client's `token` (a run of
/// eight of its bytes, the whole of a shorter one), with a word saying
/// so. Eight, not the six of [`holds_what_was_sent`]: these are a
/// server's words, read as words, and a token made of words ("client-")
/// shares six letters with honest ones ("client connections"). A peer
/// already holds the token it was sent; what this stops is a server or a
/// proxy that quotes what it refused putting the token in the client's
/// logs.
pub(super) fn without_token<'a>(reason: &'a str, token: &[u8]) -> std::borrow::Cow<'a, str> {
    let Some(mut at) = token_quoted_at(reason.as_bytes(), token, 8) else {
        return std::borrow::Cow::Borrowed(reason);
    };
    while !reason.is_char_boundary(at) {
        at -= 1;
    }
    std::borrow::Cow::Owned(format!(
        "{}[the rest quoted this client's token and is not shown]",
        &reason[..at]
    ))
}

/// A stream that keeps its first bytes in a [`Seen`]. Once those are kept,
/// a read costs one comparison more than the stream's own.
pub(super) struct Recording {
    inner: BoxIo,
    seen: Arc<Seen>,
    full: bool,
}

impl Recording {
    pub(super) fn new(inner: BoxIo) -> (Recording, Arc<Seen>) {
        let seen = Arc::new(Seen::default());
        let recording = Recording {
            inner,
            seen: seen.clone(),
            full: false,
        };
        (recording, seen)
    }
}

impl AsyncRead for Recording {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let asked = buf.remaining() > 0;
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = &buf.filled()[before..];
                if read.is_empty() && asked {
                    this.seen.ended.store(true, Ordering::Release);
                } else if !this.full {
                    let mut bytes = this
                        .seen
                        .bytes
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    let room = RECORDED - bytes.len();
                    bytes.extend_from_slice(&read[..read.len().min(room)]);
                    this.full = bytes.len() == RECORDED;
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl AsyncWrite for Recording {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
