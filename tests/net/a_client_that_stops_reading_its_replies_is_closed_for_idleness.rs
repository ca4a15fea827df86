//! Reproduces a past break: an authenticated client that sent requests without reading their replies, then fell silent holding nothing, kept its connection slot for ever: the server waited on the full socket with no idle timeout.
//!
//! docs/lock-servers.md ("Connection slots"): "A connection that sends
//! nothing for `idle_timeout` while it holds nothing on the server [...] is
//! closed, which frees its slot." The server writes a batch's replies and
//! waits for the socket to take them before it looks at the idle timer
//! again (src/net/session.rs, `serve`: `feed` and the flush after a batch),
//! so a client that never reads holds its slot with nothing charged to it,
//! and with `max_connections_per_address` of 1 its address is turned away.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{authenticate, closed_within, frame, read_varint, request, OP_HEALTH};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;

/// The reason of a `Welcome::Rejected`, or `None` for an `Accepted`.
fn rejection(welcome: &[u8]) -> Option<String> {
    match welcome.first() {
        Some(0) => None,
        Some(1) => {
            let (_, reason) = read_varint(&welcome[1..]).expect("a reason");
            Some(String::from_utf8_lossy(reason).into_owned())
        }
        other => panic!("not a Welcome: {other:?}"),
    }
}

#[tokio::test]
async fn a_client_that_stops_reading_its_replies_is_closed_for_idleness() {
    let idle_timeout = Duration::from_millis(300);
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(idle_timeout);
    config.max_connections_per_address = 1;
    let node = start(config).await;

    // The control: a silent client holding nothing is closed, and its
    // address's one slot is free again.
    let (mut silent, welcome) = authenticate(&node.addr, TOKEN)
        .await
        .expect("authenticates");
    assert_eq!(rejection(&welcome), None);
    closed_within(&mut silent, Duration::from_secs(5))
        .await
        .expect("a silent connection holding nothing is closed");
    drop(silent);

    // Health requests, pipelined, their replies never read, until the
    // server stops taking them (its replies fill both sockets' buffers).
    let (mut deaf, welcome) = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let (stream, welcome) = authenticate(&node.addr, TOKEN).await.expect("answered");
            if rejection(&welcome).is_none() {
                return (stream, welcome);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the freed slot is taken");
    assert_eq!(rejection(&welcome), None);
    let batch: Vec<u8> = (1..=10_000u64)
        .flat_map(|id| frame(&request(id, OP_HEALTH)))
        .collect();
    let mut blocked = false;
    for _ in 0..2_000 {
        match tokio::time::timeout(Duration::from_millis(500), deaf.write_all(&batch)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => panic!("the server closed the connection while it was sending: {err}"),
            Err(_) => {
                blocked = true;
                break;
            }
        }
    }
    assert!(
        blocked,
        "the server kept taking requests whose replies were not read"
    );

    // Silence, holding nothing, not reading: the server must close the
    // connection once it is stuck on the full socket for the idle
    // timeout. It may still be working through the requests the sockets
    // hold when the client stops (on a loaded machine the client's write
    // stalls first because the server is slow, not because it is stuck),
    // so the next connection from the address is tried every 100 ms for
    // 30 s: long enough for that work, and far short of "for ever".
    let silent_since = tokio::time::Instant::now();
    let mut refused = 0;
    loop {
        let (_next, welcome) = authenticate(&node.addr, TOKEN).await.expect("answered");
        let Some(reason) = rejection(&welcome) else {
            break;
        };
        refused += 1;
        assert!(
            silent_since.elapsed() < Duration::from_secs(30),
            "a client silent for 30 s (idle timeout {idle_timeout:?}), holding nothing, still \
             holds its slot because it does not read its replies: the next connection from its \
             address was refused {refused} times, the last: {reason}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(deaf);
}
