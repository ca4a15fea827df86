//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) ... The lock limit counts lock
//! ids"; "A lock or a place on new names under a uid that another
//! connection holds moves all of that uid's locks to this connection, so
//! it is admitted only when this connection's limits hold them all; a
//! refresh moves them without that check (refusing it would cost the
//! holder its lock)". "Threat model": a client "can fill limits, each of
//! which bounds it: per connection 100,000 locks"; only "a refresh over
//! another connection moves the charge there even past that connection's
//! own limits".
//!
//! `Ledger::reserve_as` admits nothing for a set it finds charged whose
//! request is no longer than the charge (`need` is `None`), then adopts the
//! uid's whole charge over the connection asking (`Inner::adopt`). The
//! previous fix (a reservation first drops a lapsed charge) made this
//! refused for a lock whose charge lapsed; a live lock taken again on the
//! same names over another connection still moves there, one lock id past
//! that connection's limit, although it is no refresh (the table refreshes
//! nothing for it) and refusing it costs nothing (the lock stands).
//!
//! A limit of one lock per connection. Over connection A uid U locks "x";
//! over connection B uid W locks "w", and B is full (V is refused). Over B,
//! U locks "x" again: it is to be refused. Real time (sockets), every call
//! bounded.
#![cfg(feature = "net")]

use crate::node::{start, TOKEN};
use crate::wire::{authenticate_as, call, lock_request, OP_LOCK, REPLY_BOOL, VERSION_6};
use quorum_lock::net::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_lock_taken_again_over_a_full_connection_is_refused() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_entries_per_connection = 1;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();

    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U locks x over A"
    );
    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1],
        "W locks w over B"
    );
    assert_ne!(
        call(&mut b, 2, &lock_request(2, OP_LOCK, "V", &["v"])).await[..],
        [REPLY_BOOL, 1],
        "control: B holds its one lock: V is refused over B"
    );
    let again = call(&mut b, 3, &lock_request(3, OP_LOCK, "U", &["x"])).await;
    assert_ne!(
        again[..],
        [REPLY_BOOL, 1],
        "connection B, limited to one lock and holding W's, is granted U's lock on x taken \
         again: U's charge was found for the same names and adopted by B without any admission"
    );
    drop((a, b));
}
