//! "A `RemoteLocker` whose connection the server closed [for idleness],
//! with no wait or watch registered, does not reconnect at once: its next
//! call opens a connection first" (docs/lock-servers.md, `idle_timeout`);
//! else "the client would take the slot straight back, for nothing". A
//! watch is "kept for `watch.ttl`" (`RemoteLocker::leader`), as on the
//! server. So once an observer's watch has lapsed and the server closed
//! the silent connection, the locker must open no connection until its
//! next call.
//!
//! The client counts a lapsed watch as registered until its registry is
//! swept (which only happens once it has grown), so the idle close counts
//! as a broken connection: the background reconnect takes the slot back
//! at once, the server closes it again an idle timeout later, and so on
//! for as long as the locker lives, with no call made.
//!
//! Reproduces a past break: lapsed watches counted as registered, and every idle close was reconnected at once.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{LockArgs, NetLocker, PushEvent, PushSink, Wake, WatchArgs};
use tokio::io::AsyncWriteExt;

use crate::stand_in;
use crate::wire;

struct Nowhere;

impl PushSink for Nowhere {
    fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_watch_lapsed_an_idle_close_waits_for_the_next_call() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(async move {
        // The first connection: welcomed, its leader request answered
        // "no leader", then closed as idle once the watch has lapsed.
        let mut first = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut first).await);
        let request = wire::read_frame(&mut first, 1 << 20)
            .await
            .expect("leader request");
        let (id, _) = wire::response(&request);
        let mut reply = wire::varint(id);
        reply.extend([wire::REPLY_LEADER, 0]);
        first.write_all(&wire::frame(&reply)).await.expect("answer");
        tokio::time::sleep(Duration::from_millis(400)).await;
        stand_in::close_as_idle(first).await;
        // Then: how many connections come in 2 s, with no call made?
        let mut later = 0;
        let until = tokio::time::Instant::now() + Duration::from_secs(2);
        while let Ok(Some(stream)) =
            tokio::time::timeout_at(until, stand_in::accept_hello(&listener)).await
        {
            later += 1;
            stand_in::welcome_then_close_as_idle(stream).await;
        }
        later
    });

    let locker = RemoteLocker::connect(addr, stand_in::config())
        .await
        .expect("connect");
    let look = LockArgs {
        uid: "observer".into(),
        resources: vec!["election".to_owned()].into(),
        owner: "owner".into(),
        source: "source".into(),
        quorum: 1,
    };
    let watch = WatchArgs {
        ttl: Duration::from_millis(100),
        wake: Wake::new(Arc::new(Nowhere), 1),
    };
    assert_eq!(
        locker.leader(&look, Some(&watch)).await.expect("leader"),
        None
    );

    let later = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server's count ends in 2 s")
        .expect("server");
    drop(locker);
    assert_eq!(
        later, 0,
        "with the watch lapsed and no call made, the locker opened {later} connections in 2 s \
         after the server closed its connection for idleness"
    );
}
