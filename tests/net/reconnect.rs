//! A `RemoteLocker` outlives the runtime it was made on: when that runtime
//! shuts down, its connection is gone, the locker still counts as online
//! (nothing says its server is out of reach), and the next caller connects
//! again from its own runtime. The server runs on its own thread and
//! runtime, so that only the client's runtimes come and go.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{Error, LocalLocker, LockArgs, NetLocker, RetryPolicy};
use tokio::runtime::{Builder, Runtime};
use tokio::sync::oneshot;

const TOKEN: &str = "client-secret";

/// A lock server on its own thread and runtime; stopped and joined on drop.
struct Node {
    addr: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Node {
    fn start(addr: &str) -> Node {
        let addr: std::net::SocketAddr = addr.parse().expect("address");
        let (stop, stopped) = oneshot::channel::<()>();
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = current_thread();
            runtime.block_on(async move {
                let server =
                    LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new(TOKEN))
                        .expect("valid config");
                let (bound, serve) = server
                    .bind(addr, async {
                        let _ = stopped.await;
                    })
                    .await
                    .expect("bind loopback");
                bound_tx.send(bound.to_string()).expect("test waits");
                let _ = serve.await;
            });
        });
        let addr = bound_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the server thread bound its port");
        Node {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn current_thread() -> Runtime {
    Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn multi_thread() -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

fn config() -> RemoteConfig {
    let mut config = RemoteConfig::new(TOKEN);
    config.connect_timeout = Duration::from_secs(1);
    config.call_timeout = Duration::from_secs(2);
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(100),
    };
    config
}

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["r".to_string()].into(),
        owner: "test".into(),
        source: "tests/net/reconnect.rs".into(),
        quorum: 1,
    }
}

/// Calls `lock` on `runtime` until one goes through: at most 50 attempts,
/// 20 ms apart (the reconnect waits at most 100 ms between tries), and
/// returns whether it was granted.
fn lock_eventually(runtime: &Runtime, locker: &RemoteLocker, uid: &str) -> bool {
    runtime.block_on(async {
        for _ in 0..50 {
            match locker.lock(&args(uid)).await {
                Ok(granted) => return granted,
                Err(err) => {
                    assert!(
                        matches!(err, Error::LockerUnavailable { .. }),
                        "unexpected error {err:?}"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        panic!("the locker did not reconnect within 50 attempts");
    })
}

fn outlives_the_runtime_that_connected_it(first: Runtime, later: Runtime) {
    let node = Node::start("127.0.0.1:0");
    let locker = first
        .block_on(RemoteLocker::connect(node.addr.clone(), config()))
        .expect("connect");
    assert!(first.block_on(locker.lock(&args("held"))).expect("lock"));
    assert!(locker.is_online());

    drop(first);
    assert!(
        locker.protocol_version().is_none(),
        "the connection's tasks died with their runtime, yet the locker has a connection"
    );
    assert!(
        locker.is_online(),
        "a runtime that shut down says nothing against the server: the next call connects"
    );

    // The entry lives on in the server: the locker is the same client.
    let granted = lock_eventually(&later, &locker, "other");
    assert!(!granted, "the server lost the entry taken before");
    assert!(locker.is_online());
    assert!(later
        .block_on(locker.unlock(&args("held")))
        .expect("unlock"));
    assert!(later.block_on(locker.lock(&args("other"))).expect("lock"));
}

#[test]
fn a_locker_outlives_the_current_thread_runtime_that_connected_it() {
    outlives_the_runtime_that_connected_it(current_thread(), current_thread());
}

#[test]
fn a_locker_outlives_the_multi_thread_runtime_that_connected_it() {
    outlives_the_runtime_that_connected_it(multi_thread(), current_thread());
}

#[test]
fn a_reconnect_dropped_with_its_runtime_does_not_block_the_next_one() {
    // Reserve a port, then close it so that nothing listens there yet.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|probe| probe.local_addr())
        .expect("reserve a port")
        .to_string();
    let first = current_thread();
    let locker = first
        .block_on(RemoteLocker::connect(addr.clone(), config()))
        .expect("an unreachable server is not an error");
    assert!(!locker.is_online());
    // The reconnect task started on `first` and is dropped with it.
    drop(first);

    let _node = Node::start(&addr);
    let later = current_thread();
    assert!(lock_eventually(&later, &locker, "u"));
    assert!(locker.is_online());
}

#[tokio::test]
async fn a_dropped_locker_closes_its_connection() {
    let node = Node::start("127.0.0.1:0");
    // A relay between the locker and the server ends when both sides have
    // closed: it shows whether the locker's socket outlives the locker.
    let relay = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let relay_addr = relay.local_addr().expect("address").to_string();
    let server_addr = node.addr.clone();
    let relayed = tokio::spawn(async move {
        let (mut client, _) = relay.accept().await?;
        let mut server = tokio::net::TcpStream::connect(server_addr).await?;
        tokio::io::copy_bidirectional(&mut client, &mut server).await
    });
    let locker = RemoteLocker::connect(relay_addr, config())
        .await
        .expect("connect");
    assert!(locker.lock(&args("u")).await.expect("lock"));
    drop(locker);
    let ended = tokio::time::timeout(Duration::from_secs(5), relayed).await;
    assert!(
        matches!(ended, Ok(Ok(Ok(_)))),
        "the connection stayed open after its locker was dropped: {ended:?}"
    );
}
