//! Reproduces a past break: an authenticated client trickling a request in, a byte every 200 ms (well within the 1 s idle timeout), was closed for idleness because the bytes it sent since the last idle check were exactly the frame's length, which the codec takes out of the read buffer.
//!
//! docs/lock-servers.md ("Connection slots"): "A connection that sends
//! nothing for `idle_timeout` while it holds nothing on the server [...] is
//! closed [...]; so is one that stops in the middle of a request for that
//! long". A client that never stops for more than 400 ms neither sends
//! nothing for the idle timeout nor stops in the middle of a request.
//!
//! The scene: idle timeout 1 s. After its handshake a client sends the
//! four bytes of a 64-byte request's length one at a time, 200 ms apart
//! (at 0.2, 0.4, 0.6 and 0.8 s), then the body, a byte every 200 ms from
//! 1.2 s on. At the first idle check (1 s), the read buffer is as long as
//! at the start (empty: the length was taken out), and the connection is
//! closed as silent.
//!
//! Suspected cause: src/net/session.rs `serve`, `Event::Idle` (around line
//! 200): hearing from the client is judged by `conn.read_buffer().len() !=
//! partial`, but `LengthDelimitedCodec` removes a frame's length from the
//! buffer as soon as it has all come (src/net/framing.rs), so bytes sent
//! since the last check can leave the length unchanged.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::authenticate;
use quorum_lock::net::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

#[tokio::test]
async fn a_client_trickling_a_request_across_its_length_is_not_closed_for_idleness() {
    let idle_timeout = Duration::from_secs(1);
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(idle_timeout);
    let node = start(config).await;

    let (mut stream, _) = authenticate(&node.addr, TOKEN)
        .await
        .expect("authenticates");
    let t0 = Instant::now();
    // When each byte goes out, after the handshake: the length's four,
    // 200 ms apart, then the body's, 200 ms apart from 1.2 s on.
    let mut schedule: Vec<(Duration, u8)> = 64u32
        .to_be_bytes()
        .iter()
        .enumerate()
        .map(|(i, &b)| (Duration::from_millis(200 * (i as u64 + 1)), b))
        .collect();
    for k in 0..12u64 {
        schedule.push((Duration::from_millis(1_200 + 200 * k), 0));
    }
    let mut buf = [0u8; 256];
    for (at, byte) in schedule {
        // Until the byte is due, watch for the server closing.
        let due = t0 + at;
        match tokio::time::timeout_at(due, stream.read(&mut buf)).await {
            Err(_) => {}
            Ok(read) => panic!(
                "the server closed ({read:?}) a connection {:?} after its handshake, while it \
                 was sending a request a byte every 200 ms at most 400 ms apart (idle timeout \
                 {idle_timeout:?})",
                t0.elapsed()
            ),
        }
        if let Err(err) = stream.write_all(&[byte]).await {
            panic!(
                "the server closed a connection {:?} after its handshake, while it was sending \
                 a request a byte every 200 ms at most 400 ms apart ({err})",
                t0.elapsed()
            );
        }
    }
    eprintln!("still open {:?} after its handshake", t0.elapsed());
}
