//! Reproduces a past break: a silent connection whose only place in line expired in the table (at the locker's validity) is kept open for the place_ttl it asked, up to 60 s, as if it still held the place.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, start_over, TOKEN};
use crate::wire::{
    authenticate_as, closed_within, frame, lock_wait_request, read_frame, QUEUED, REPLY_WAIT,
    VERSION_3,
};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockerConfig, NetLocker};
use tokio::io::AsyncWriteExt;

/// docs/lock-servers.md, "Connection slots": "A connection that sends
/// nothing for `idle_timeout` while it holds nothing on the server (no
/// lock, no place in line, ...) is closed, which frees its slot". A server
/// over a locker of a 1 s validity, idle timeout 300 ms. A holder keeps
/// "x" (refreshing it); a raw version-3 client asks a pushed wait on "x"
/// with a place_ttl of 60 s and falls silent. The table keeps a place for
/// the validity at most (`min(place_ttl, validity)`), so 1.5 s later it
/// keeps none, and nothing of the client's is charged live. The break:
/// the connection remembers its place for the 60 s it asked, and the idle
/// close counts it as held, so the connection stays open; it should be
/// closed within a few idle timeouts of the place's end. Bounded: 8 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_whose_place_expired_in_the_table_is_closed_for_idleness() {
    let locker_config = LockerConfig {
        validity: Duration::from_secs(1),
        ..LockerConfig::default()
    };
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(Duration::from_millis(300));
    let node = start_over(locker_config, config).await;
    let locker = node.locker.clone();
    let addr = node.addr.clone();
    let holder = RemoteLocker::connect(addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .unwrap();
    let held = args("holder", &["x".to_string()]);
    assert_eq!(holder.lock(&held).await, Ok(true));
    let refreshing = tokio::spawn(async move {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = holder.refresh(&held).await;
        }
    });

    let (mut silent, welcome) = authenticate_as(&addr, TOKEN, VERSION_3).await.unwrap();
    assert_eq!(&welcome[..2], &[0, 3], "accepted");
    let wait = lock_wait_request(1, "waiter", &["x"], (1, 1), Duration::from_secs(60), true);
    silent.write_all(&frame(&wait)).await.unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut silent, 4096))
        .await
        .expect("a reply within 5 s")
        .unwrap();
    assert_eq!(reply, [1, REPLY_WAIT, QUEUED], "queued");
    assert_eq!(locker.waiting(), 1, "its place");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        locker.waiting(),
        0,
        "the table ended the place at the validity"
    );
    let closed = closed_within(&mut silent, Duration::from_millis(6_500)).await;
    assert!(
        closed.is_ok(),
        "a connection silent for 8 s, whose one place the table ended at 1 s, is still open \
         (idle timeout 300 ms)"
    );
    refreshing.abort();
    drop(node);
}
