//! The connection's reader: each response to its caller, each push to
//! its waiter, and how the stream ended, for the connection's close.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;
use tokio_util::codec::FramedRead;

use super::{Connection, DownOnDrop, Incoming};
use crate::net::framing::Framing;
use crate::net::peer_log::PeerLog;
use crate::net::pushes::Pushes;
use crate::net::wire::{self, Reply, Response};

/// Hands each response to its caller and each push to its waiter. `_down`
/// is an argument, not a local, so that it also fires for a task dropped
/// before it was first polled.
pub(super) async fn read_responses(
    mut stream: FramedRead<Incoming, Framing>,
    conn: Arc<Connection>,
    pushes: Arc<Pushes>,
    log: Arc<PeerLog>,
    _down: DownOnDrop,
) {
    loop {
        let frame = match stream.next().await {
            Some(Ok(frame)) => frame,
            None => {
                conn.ended_cleanly.store(true, Ordering::Release);
                break;
            }
            // Over TLS, a server that drops the connection without a
            // close_notify (as one closing it for idleness does) ends the
            // stream with this error: between frames, it is an end in
            // good order too.
            Some(Err(e))
                if e.kind() == std::io::ErrorKind::UnexpectedEof
                    && stream.read_buffer().is_empty()
                    && !stream.decoder().in_frame() =>
            {
                conn.ended_cleanly.store(true, Ordering::Release);
                break;
            }
            Some(Err(_)) => {
                conn.broken.store(true, Ordering::Release);
                break;
            }
        };
        conn.frames_read.fetch_add(1, Ordering::Release);
        let Ok(response) = wire::decode::<Response>(&frame) else {
            conn.garbled.store(true, Ordering::Release);
            log.undecodable.note(|count| {
                tracing::warn!(
                    endpoint = %conn.endpoint,
                    count,
                    "undecodable response; dropping the connection (`count` connections \
                     since the last such line)"
                );
            });
            break;
        };
        if response.id != wire::UNSOLICITED {
            conn.deliver(response.id, response.reply);
            continue;
        }
        match response.reply {
            Reply::Push { uid, event } => {
                if !pushes.deliver(&uid, event.into()) {
                    // The server's words: escaped for the log.
                    let uid = crate::locker::escape_peer_text(&uid);
                    tracing::trace!(endpoint = %conn.endpoint, %uid, "push for a uid nobody waits on");
                }
            }
            reply => {
                log.unsolicited_errors.note(|count| {
                    // An error's words, escaped and with secrets masked;
                    // of any other reply, its kind only (a value's bytes
                    // would be shown as numbers, which no masking catches).
                    let reply = match &reply {
                        Reply::Error { kind, message } => {
                            format!("{kind:?}: {}", crate::locker::escape_peer_text(message))
                        }
                        other => other.kind().to_owned(),
                    };
                    tracing::warn!(
                        endpoint = %conn.endpoint,
                        %reply,
                        count,
                        "server reported an error to no request (`count` such replies since \
                         the last such line)"
                    );
                });
            }
        }
    }
}
