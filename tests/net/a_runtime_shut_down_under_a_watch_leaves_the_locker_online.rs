//! "When that runtime shuts down, the connection is gone but the locker
//! still counts as online (`is_online`: nothing says its server is out of
//! reach), and the next call connects again from its own runtime ... so a
//! runtime per call works" (`RemoteLocker` rustdoc, "Runtimes"; the same
//! in docs/lock-servers.md). Neither says "unless a wait or watch is
//! registered". Here an observer's watch (ttl 30 s) is registered, on a
//! runtime that is then dropped, with the server up and answering all.
//!
//! The client treats the end of a connection whose runtime shut down as
//! a reopen only when no wait or watch is registered (`on_close`:
//! `ended == Ended::Abandoned && idle`); otherwise it schedules the
//! background reconnect, whose task is spawned on the runtime being shut
//! down and dies with it. So the locker says it is offline with its
//! server up, and the next call, on a runtime of its own, fails at once
//! ("not connected") as no attempt is due yet. A lock held through
//! `lock_wait` keeps its registration until it is released, so with a
//! runtime per call its refresh fails the same way.
//!
//! Reproduces a past break: with a watch registered, the reconnect was spawned on the dying runtime and the locker went offline.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{LockArgs, NetLocker, PushEvent, PushSink, RetryPolicy, Wake, WatchArgs};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::calls_in_a_block_on::a_stand_in_on_a_runtime_of_its_own;
use crate::stand_in::{self, args};
use crate::wire;

struct Nowhere;

impl PushSink for Nowhere {
    fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Welcomes the connection, then answers a leader request "no leader"
/// and every other request `true`, until the client goes.
async fn serve(mut stream: TcpStream) {
    if wire::read_frame(&mut stream, 4096).await.is_err() || !stand_in::welcome(&mut stream).await {
        return;
    }
    while let Ok(request) = wire::read_frame(&mut stream, 1 << 20).await {
        let (id, rest) = wire::response(&request);
        let mut reply = wire::varint(id);
        if rest.first() == Some(&wire::OP_LEADER) {
            reply.extend([wire::REPLY_LEADER, 0]);
        } else {
            reply.extend([wire::REPLY_BOOL, 1]);
        }
        if stream.write_all(&wire::frame(&reply)).await.is_err() {
            return;
        }
    }
}

#[test]
fn a_runtime_shut_down_under_a_watch_leaves_the_locker_online_and_the_next_call_through() {
    let (server_runtime, listener, addr) = a_stand_in_on_a_runtime_of_its_own();
    let server = server_runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });

    let mut config = stand_in::config();
    // A background attempt, were one made, comes late: what is tested is
    // what the next call does.
    config.reconnect = RetryPolicy {
        initial: Duration::from_secs(5),
        max: Duration::from_secs(5),
    };
    let look = LockArgs {
        uid: "observer".into(),
        resources: vec!["election".to_owned()].into(),
        owner: "owner".into(),
        source: "source".into(),
        quorum: 1,
    };
    let watch = WatchArgs {
        ttl: Duration::from_secs(30),
        wake: Wake::new(Arc::new(Nowhere), 1),
    };

    // Connected, and the watch set, on a runtime dropped afterwards.
    let locker = {
        let runtime = current_thread();
        let locker = runtime.block_on(async {
            let locker = RemoteLocker::connect(addr, config).await.expect("connect");
            let leader =
                tokio::time::timeout(Duration::from_secs(3), locker.leader(&look, Some(&watch)))
                    .await;
            assert!(matches!(leader, Ok(Ok(None))), "leader: {leader:?}");
            locker
        });
        drop(runtime);
        locker
    };
    std::thread::sleep(Duration::from_millis(100));
    let online = locker.is_online();
    let why = locker.connect_error();

    // The next call, on a runtime of its own.
    let runtime = current_thread();
    let call = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid"))).await
    });
    drop(runtime);
    drop(locker);
    server.abort();
    drop(server_runtime);

    assert!(
        online,
        "the runtime of the connection shut down, the server is up, and the locker says it is \
         offline (connect error: {why:?}); the next call: {call:?}"
    );
    assert!(
        matches!(call, Ok(Ok(true))),
        "the next call after the runtime of the connection shut down, with the server up, did \
         not get through: {call:?}"
    );
}
