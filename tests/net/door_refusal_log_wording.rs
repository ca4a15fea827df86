//! A connection that sends nothing while every slot is held by one that
//! is still in its handshake waits at the door and is closed when it stays
//! silent: the line the server writes for it names that cause, not a
//! flood, when no flood happened (docs/lock-servers.md, "Refused
//! connections in the log": "Each line names its cause").
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::log_capture::Capture;
use crate::loopback;
use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::LocalLocker;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const TOKEN: &str = "client-secret";

// The server's tasks run on this test's thread (a current-thread
// runtime), where the capture is the default subscriber.
#[tokio::test]
async fn two_silent_connections_are_not_logged_as_a_flood() {
    let (capture, _guard) = Capture::install();
    let mut config = ServerConfig::new(TOKEN);
    config.max_connections = 1;
    config.admin_reserve = 0;
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let (bound, _stop) = loopback::serve(server).await;

    // The first holds the only slot, still in its handshake.
    // (The server accepts in order; the second follows at once, well
    // within the first's 100 ms of grace.)
    let _first = TcpStream::connect(bound).await.expect("connect");
    // The second arrives within 100 ms of it, says nothing, and is closed.
    let mut second = TcpStream::connect(bound).await.expect("connect");
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(2), second.read(&mut byte)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "the second connection was not closed: {closed:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;

    let warnings = capture.at_least(tracing::Level::WARN);
    assert!(
        !warnings.is_empty(),
        "the closed connection was not logged at all"
    );
    let flood: Vec<_> = warnings
        .iter()
        .filter(|line| line.contains("flood") || line.contains("faster than"))
        .collect();
    assert!(
        flood.is_empty(),
        "two connections in all were logged as a flood: {flood:?}"
    );
}
