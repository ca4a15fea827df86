//! Reproduces a past break: an authenticated client that sent the first bytes of a request and then nothing more was never closed for idleness, holding nothing, so it kept its connection slot for ever.
//!
//! docs/lock-servers.md ("Connection slots"): "A connection that sends
//! nothing for `idle_timeout` while it holds nothing on the server [...] is
//! closed, which frees its slot." The server counts bytes of a request
//! already read as hearing from the client at every idle check, however
//! long ago they came, so five bytes sent once keep the slot open.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{authenticate, closed_within};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn a_client_silent_in_the_middle_of_a_request_is_closed_for_idleness() {
    let idle_timeout = Duration::from_millis(300);
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(idle_timeout);
    let node = start(config).await;

    // The control: a client silent after its handshake is closed.
    let (mut silent, _) = authenticate(&node.addr, TOKEN)
        .await
        .expect("authenticates");
    closed_within(&mut silent, Duration::from_secs(5))
        .await
        .expect("a silent connection holding nothing is closed");

    // A request of 100 bytes announced, one byte of it sent, then silence.
    let (mut stalled, _) = authenticate(&node.addr, TOKEN)
        .await
        .expect("authenticates");
    let mut partial = 100u32.to_be_bytes().to_vec();
    partial.push(0);
    stalled.write_all(&partial).await.expect("writes");
    // Ten idle timeouts of silence, holding nothing.
    let limit = 10 * idle_timeout;
    closed_within(&mut stalled, limit)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "a client silent for {limit:?} after the first bytes of a request, holding \
             nothing, is still connected (idle timeout {idle_timeout:?})"
            )
        });
}
