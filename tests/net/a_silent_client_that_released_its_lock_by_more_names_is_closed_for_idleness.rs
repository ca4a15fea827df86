//! Reproduces a past break: a client that released its lock with a release naming more names than it was granted keeps its connection counted as holding a lock for a whole validity, so the idle close leaves it open.
//!
//! docs/lock-servers.md: "A connection that sends nothing for
//! `idle_timeout` while it holds nothing on the server (no lock, no place
//! in line, no leader's proclamation, no watch charged to it; ...) is
//! closed". A raw client locks `["held"]` under a uid, then releases that
//! uid with an `Unlock` naming `["held", "other"]`: the release removes
//! the entry (it answers true) and the table is empty. The ledger drops
//! a charge only for the exact set a release names, so the lock's charge
//! stays until it lapses, and the connection counts as holding a lock
//! until the validity (4 s here) has passed, far beyond the 200 ms idle
//! timeout. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::{LocalLocker, LockerConfig, NetLocker};
use tokio::io::AsyncWriteExt;

use crate::node::TOKEN;
use crate::wire::{
    authenticate, closed_within, frame, lock_request, read_frame, response, OP_LOCK, OP_UNLOCK,
    REPLY_BOOL,
};

const VALIDITY: Duration = Duration::from_secs(4);
const IDLE: Duration = Duration::from_millis(200);

#[tokio::test]
async fn a_silent_client_that_released_its_lock_by_more_names_is_closed_for_idleness() {
    let locker = Arc::new(LocalLocker::with_config(
        "node",
        LockerConfig {
            validity: VALIDITY,
            quarantine: Duration::ZERO,
        },
    ));
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let (addr, serve) = server
        .bind(
            "127.0.0.1:0".parse().expect("an address"),
            std::future::pending(),
        )
        .await
        .expect("bind loopback");
    let serving = tokio::spawn(serve);

    let (mut stream, _) = authenticate(&addr.to_string(), TOKEN)
        .await
        .expect("authenticates");
    let requests = [
        (1, OP_LOCK, &["held"][..], "the lock is granted"),
        (
            2,
            OP_UNLOCK,
            &["held", "other"][..],
            "the release removes the entry",
        ),
    ];
    for (id, op, names, what) in requests {
        stream
            .write_all(&frame(&lock_request(id, op, "let-go", names)))
            .await
            .expect("request sent");
        let reply =
            tokio::time::timeout(Duration::from_secs(5), read_frame(&mut stream, 64 * 1024))
                .await
                .expect("answered in time")
                .expect("a reply");
        assert_eq!(response(&reply), (id, &[REPLY_BOOL, 1][..]), "{what}");
    }
    assert!(
        locker.locks().await.expect("listing").is_empty(),
        "the table holds nothing"
    );
    assert_eq!(locker.waiting(), 0, "and no place");

    // Holding nothing, the connection is closed within a few idle
    // timeouts, well before the validity.
    let closed = closed_within(&mut stream, 10 * IDLE).await;
    serving.abort();
    closed.expect(
        "a silent connection that released its only lock is closed within ten idle timeouts",
    );
}
