//! Reproduces a past break: a close whose places name at most 1,000 names is ended on the runtime serving clients, 1,000 passes over a long line in one go, and every other client waits for it.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{args, places_on, remote, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::NetLocker;

/// docs/guarantees.md: ending places "holds no other client up". A server
/// on one worker thread (what tokio gives a one-CPU host). Five
/// connections keep 1,000 places each on one held name, a line of 5,000; a
/// client with the client token keeps 1,000 more places there, each naming
/// that one name (1,000 names in all: ended where the connection closes),
/// and closes. Ending each place walks the whole line. Once the first of
/// them is gone, a probe locks a free name: it must be answered while the
/// close is still ending places, not after it ended them all in one go on
/// the thread that serves every client. Ordered, not timed: how many
/// places are left when the probe's answer comes. Bounded: each call
/// 60 s, the close's start 60 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_close_of_a_thousand_places_on_a_long_line_does_not_hold_other_clients_up() {
    const LINE: usize = 5_000;
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let probe = remote(&node).await;
    let mut line = Vec::new();
    for conn in 0..LINE / 1000 {
        let client = remote(&node).await;
        places_on(&client, &format!("line{conn}"), 1000, &held).await;
        line.push(client);
    }
    let hostile = remote(&node).await;
    places_on(&hostile, "hostile", 1000, &held).await;
    assert_eq!(node.locker.waiting(), LINE + 1000);
    drop(hostile);
    // The close has begun: this thread reads the table while the server's
    // one worker thread ends the places.
    let started = Instant::now();
    while node.locker.waiting() == LINE + 1000 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the close began within 60 s"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
    let free = args("probe", &["free".to_string()]);
    let granted = tokio::time::timeout(Duration::from_secs(60), probe.lock(&free))
        .await
        .expect("a lock within 60 s")
        .unwrap();
    let left = node.locker.waiting() - LINE;
    assert!(granted);
    assert!(
        left > 0,
        "a probe's lock of a free name was answered only once a closed connection had ended all \
         its 1,000 places on a line of {LINE}, one pass over the line each, in one go on the \
         thread serving every client"
    );
    drop(line);
    drop(holder);
}
