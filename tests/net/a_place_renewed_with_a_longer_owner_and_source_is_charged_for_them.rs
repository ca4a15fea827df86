//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) and against the whole server
//! (1 GiB)"; "A refresh keeps every lock of its uid counted (the entries
//! it reaches may have been granted under another set of names, whose
//! charge pays for their owner and source)"; "Threat model": a client
//! "can fill limits, each of which bounds it: per connection ... 64 MiB
//! of lock table".
//!
//! The ledger keys a uid's charge by its set of names alone, and charges
//! the set once, with the owner and source of the request that first
//! charged it. Over connection A, uid U waits (pushed, ticket (1,1)) on
//! ["x"], which H holds, with an owner and a source of one byte each: the
//! set is charged for them. U asks again with the same ticket for the
//! same names, now with an owner and a source of 512 bytes each: the
//! table replaces the place with the new request (its owner and source
//! with it), and the ledger finds the set charged and charges nothing
//! more. H releases "x": the table grants U's place, and U's entry on "x"
//! carries the 1 KiB owner and source. A refresh of U keeps it standing,
//! charged as the one-byte request. The same lock taken plainly by V over
//! another connection is charged some 1,000 bytes more: so a client may
//! hold about twice the lock table its limits allow (per connection and
//! in total), and for as long as it refreshes.
//! Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    args_request, call, duration, lock_request, read_frame, response, varint, OP_LOCK,
    OP_LOCK_WAIT, OP_REFRESH, OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_PUSH, REPLY_WAIT,
};
use quorum_lock::net::ServerConfig;

/// A pushed write wait of `uid` on `names` with this owner and source.
fn wait_with(id: u64, uid: &str, names: &[&str], owner: &[u8], source: &[u8]) -> Vec<u8> {
    let names: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
    let mut out = args_request(id, OP_LOCK_WAIT, uid.as_bytes(), &names, owner, source);
    out.push(1); // Mode::Write
    out.extend(varint(1));
    out.extend(varint(1));
    out.extend(duration(Duration::from_secs(60)));
    out.push(1); // pushed
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_renewed_with_a_longer_owner_and_source_is_charged_for_them() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut h, mut a, mut c] = authenticated(&node).await;
    let long = vec![b'o'; 512];

    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["x"])).await,
        [REPLY_BOOL, 1],
        "H holds x"
    );
    let h_only = node.stats.lock_bytes();
    assert_eq!(
        call(&mut a, 1, &wait_with(1, "U", &["x"], b"o", b"s")).await,
        [REPLY_WAIT, QUEUED],
        "U waits for x, with a one-byte owner and source"
    );
    let short_charge = node.stats.lock_bytes() - h_only;
    assert_eq!(
        call(&mut a, 2, &wait_with(2, "U", &["x"], &long, &long)).await,
        [REPLY_WAIT, QUEUED],
        "U asks again for x, same ticket, with a 512-byte owner and source"
    );

    // H releases x: U's place is granted, pushed to A.
    assert_eq!(
        call(&mut h, 2, &lock_request(2, OP_UNLOCK, "h", &["x"])).await,
        [REPLY_BOOL, 1],
        "H releases x"
    );
    let push = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut a, 64 * 1024))
        .await
        .expect("pushed in time")
        .expect("a push");
    let (id, body) = response(&push);
    assert_eq!(
        (id, body.first()),
        (0, Some(&REPLY_PUSH)),
        "U's grant pushed"
    );
    let entry = node
        .locker
        .snapshot()
        .into_iter()
        .find(|info| &*info.uid == "U" && info.resource == "x")
        .expect("U holds x");
    assert_eq!(
        (entry.owner.len(), entry.source.len()),
        (512, 512),
        "U's entry keeps the owner and source of its newest request"
    );
    let mut refresh = lock_request(3, OP_REFRESH, "U", &["x"]);
    refresh.push(0);
    assert_eq!(
        call(&mut a, 3, &refresh).await,
        [REPLY_BOOL, 1],
        "U refreshes its lock"
    );
    let u_charge = node.stats.lock_bytes();

    // The same lock taken plainly: V (a uid as long) on z (a name as long).
    assert_eq!(
        call(
            &mut c,
            1,
            &args_request(1, OP_LOCK, b"V", &[b"z"], &long, &long)
        )
        .await,
        [REPLY_BOOL, 1],
        "V locks z with a 512-byte owner and source"
    );
    let plain_charge = node.stats.lock_bytes() - u_charge;
    assert!(
        plain_charge > short_charge + 1000,
        "{plain_charge} vs {short_charge}"
    );
    assert_eq!(
        u_charge, plain_charge,
        "U's lock on x, with a 512-byte owner and source, stands refreshed yet is charged \
         {u_charge} bytes (what its place with a one-byte owner and source was charged, \
         {short_charge}), where the same lock taken plainly is charged {plain_charge}: the \
         ledger found the set charged when the place was renewed and charged nothing for its \
         longer owner and source"
    );
    drop((h, a, c));
}
