//! A client that released its lock with a release naming more names than
//! the lock was granted with is closed for idleness once the validity
//! after the lock's grant has passed, as for a lock that expired without a
//! release, and not kept open for ever.
//!
//! docs/lock-servers.md: a connection that holds nothing is closed after
//! `idle_timeout`; "a lock that expired without a release counts for the
//! validity after it was last granted or refreshed, then no more, and so
//! does a lock released under other names than it was granted with, since
//! the server charges a lock by its exact set of names". The server charges a
//! lock by the exact set of names it was granted with, and gives the
//! charge back for a release of that set, or once it lapses. A raw client
//! locks `["held"]` under a uid, then releases that uid with an `Unlock`
//! naming `["held", "other"]`: the release removes the entry (it answers
//! true) and the table is empty. The connection must be closed within ten
//! idle timeouts after the validity (4 s here), and not kept for ever.
//! Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::NetLocker;
use tokio::io::AsyncWriteExt;

use crate::lockers;
use crate::loopback;
use crate::node::TOKEN;
use crate::wire::{
    authenticate, closed_within, frame, lock_request, read_frame, response, OP_LOCK, OP_UNLOCK,
    REPLY_BOOL,
};

const VALIDITY: Duration = Duration::from_secs(4);
const IDLE: Duration = Duration::from_millis(200);

#[tokio::test]
async fn a_silent_client_that_released_its_lock_by_more_names_is_closed_for_idleness() {
    let locker = lockers::without_quarantine("node", VALIDITY);
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let (addr, serving) = loopback::serve_while_the_runtime_runs(server).await;

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

    // The released lock counts as an expired one would: for the validity
    // after its grant, then no more.
    let closed = closed_within(&mut stream, VALIDITY + 10 * IDLE).await;
    serving.abort();
    closed.expect(
        "a silent connection that released its only lock under more names is closed within \
         ten idle timeouts after the validity",
    );
}
