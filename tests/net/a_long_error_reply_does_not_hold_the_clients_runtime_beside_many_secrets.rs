//! Reproduces a past break: a server that answers a call with an error of two megabytes holds the client's runtime thread for seconds when the process holds thirty secrets, every window of the whole message looked up in each secret's runs before it is cut to the 2 KiB shown.
//!
//! docs/lock-servers.md, "Threat model", a hostile server (or, without
//! TLS, anyone answering in its place): it "cannot reach beyond what the
//! library returns"; its text is masked and escaped before it enters an
//! error, and at most 2 KiB of it is shown (`escape_peer_text`).
//!
//! What happens instead: `escape_peer_text` masks the whole text first
//! (`secrets::covered`: for each 8-byte window, a lookup in the runs of
//! each remembered secret, up to 4,096 of them; a PostgreSQL password file
//! "may hold hundreds"), and only then cuts it to 2 KiB: text length
//! times secrets, synchronously, inside the call's future, at every error
//! reply. With thirty secrets a 2 MiB reply holds the thread for
//! seconds; on a current-thread runtime nothing else runs meanwhile (the
//! refreshes of the locks the application holds among them).
//!
//! A stand-in on 127.0.0.1 welcomes the client and answers every request
//! with an `Unavailable` error of 2 MiB. The process remembers 30
//! secrets (`remember_secret`, as a locker over a password file of 30
//! lines would). A ticker task on the same current-thread runtime records
//! the longest gap between its 10 ms ticks during one lock call. Real
//! time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quorum_lock::net::RemoteLocker;
use quorum_lock::NetLocker;
use tokio::io::AsyncWriteExt;

use crate::{stand_in, wire};

/// Secrets the process holds: a password file of thirty lines (a hundred
/// took 54 s in a debug build).
const SECRETS: usize = 30;

/// The error reply's message, just under the frame limit.
const MESSAGE_LEN: usize = (2 << 20) - 64;

/// The longest the runtime may be held: far more than masking and cutting
/// the 2 KiB shown needs, far less than looking up every window of two
/// megabytes in thirty secrets takes.
const HELD_BOUND: Duration = Duration::from_secs(1);

#[tokio::test]
async fn a_long_error_reply_does_not_hold_the_clients_runtime_beside_many_secrets() {
    for i in 0..SECRETS {
        quorum_lock::remember_secret(&format!("pgpass-line-{i:04}-Zq8rT"));
    }
    let (listener, addr) = stand_in::bind().await;
    let peer = tokio::spawn(async move {
        while let Some(mut stream) = stand_in::accept_hello(&listener).await {
            if !stand_in::welcome(&mut stream).await {
                continue;
            }
            tokio::spawn(async move {
                while let Ok(request) = wire::read_frame(&mut stream, 1 << 20).await {
                    let (id, _) = wire::response(&request);
                    let mut error = wire::varint(id);
                    error.push(wire::REPLY_ERROR);
                    error.push(wire::KIND_UNAVAILABLE);
                    error.extend(wire::string(&vec![b'x'; MESSAGE_LEN]));
                    if stream.write_all(&wire::frame(&error)).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let locker = tokio::time::timeout(
        Duration::from_secs(10),
        RemoteLocker::connect(addr, stand_in::config()),
    )
    .await
    .expect("connect ends within its timeout")
    .expect("the stand-in welcomes the client");
    let longest = Arc::new(Mutex::new(Duration::ZERO));
    let ticker = {
        let longest = longest.clone();
        tokio::spawn(async move {
            let mut last = Instant::now();
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let now = Instant::now();
                let mut longest = longest.lock().unwrap();
                *longest = (*longest).max(now - last);
                last = now;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let began = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(120),
        locker.lock(&stand_in::args("long-error")),
    )
    .await;
    let took = began.elapsed();
    tokio::time::sleep(Duration::from_millis(50)).await;
    ticker.abort();
    peer.abort();
    assert!(
        matches!(result, Ok(Err(_))),
        "the lock call did not end with the server's error: {result:?}"
    );
    let held = *longest.lock().unwrap();
    assert!(
        held <= HELD_BOUND,
        "the client's runtime was held for {held:?} (the call took {took:?}) by one error \
         reply of {MESSAGE_LEN} bytes, with {SECRETS} secrets remembered"
    );
}
