//! Reproduces a past break: a call whose request was wholly written (the server read all of it) failed saying "the request was not wholly sent", because a larger request taken in the same batch was still being written when its call timeout ran out.
//!
//! `Connection::call`: a call whose request the writer "did not take, or
//! not write in full" within the call timeout fails with
//! `LockerUnavailable` saying the request "was not wholly sent", and
//! gives the connection up. Here the writer takes a small request and
//! large ones in one batch; the server reads the small one whole and then
//! stops reading (it is busy with it, and answers nothing). The small
//! call's request reached the server whole: the server may have applied
//! it, and the call's error must not say it was never sent.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{Error, LockArgs, NetLocker};
use tokio::io::AsyncReadExt;
use tokio::net::TcpSocket;
use tokio::sync::oneshot;

use crate::stand_in;

/// A lock request of nearly the largest frame (2 MiB).
fn large(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: (0..1900)
            .map(|i| format!("{uid}/{i:04}/{}", "x".repeat(990)))
            .collect::<Vec<_>>()
            .into(),
        owner: "owner".into(),
        source: "source".into(),
        quorum: 1,
    }
}

// Current-thread: the calls append their frames before the writer runs,
// so that it takes them in one batch.
#[tokio::test]
async fn a_call_whose_request_was_wholly_written_is_not_said_unsent() {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("receive buffer");
    socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let listener = socket.listen(16).expect("listen");
    let addr = listener.local_addr().expect("address").to_string();

    let (first_tx, first_rx) = oneshot::channel::<Vec<u8>>();
    let server = tokio::spawn(async move {
        let mut stream = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut stream).await, "welcome");
        // Reads the first request whole, then nothing more, and answers
        // nothing: the connection stays open.
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).await.expect("length");
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
        stream.read_exact(&mut frame).await.expect("frame");
        let _ = first_tx.send(frame);
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(stream);
    });

    let mut config = stand_in::config();
    config.call_timeout = Duration::from_millis(500);
    let locker = RemoteLocker::connect(addr, config).await.expect("connect");
    assert!(locker.is_online());

    let small = stand_in::args("small");
    // More than the socket's buffers hold, however large the kernel
    // makes the sender's.
    let bigs: Vec<LockArgs> = (0..6).map(|i| large(&format!("big{i}"))).collect();
    let (small_result, big_result) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(locker.lock(&small), async {
            // Appended a moment after the small one (in the same poll,
            // before the writer runs), so that the small call's
            // timeout runs out first.
            std::thread::sleep(Duration::from_millis(50));
            futures::future::join_all(bigs.iter().map(|args| locker.lock(args))).await
        })
    })
    .await
    .expect("both calls end within their call timeout and some");
    let read = tokio::time::timeout(Duration::from_secs(1), first_rx)
        .await
        .ok()
        .and_then(Result::ok)
        .expect("the server read the first request whole");
    server.abort();

    assert!(
        read.len() < 1000,
        "the server's first request should be the small one ({} bytes)",
        read.len()
    );
    match &small_result {
        Err(Error::LockerUnavailable { reason, .. }) if reason.contains("not wholly sent") => {
            panic!(
                "the small call's request reached the server whole ({} bytes read), yet its \
                 error says it was not: {small_result:?} (the large call: {big_result:?})",
                read.len()
            )
        }
        _ => {}
    }
}
