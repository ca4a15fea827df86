//! docs/lock-servers.md, "Limits and memory": "A lock stays counted until
//! it is released", "A place that ends without a grant gives its charge
//! back" (this one was granted), and of the charges in general, the server
//! "counts too much rather than too little".
//!
//! H holds "held", H2 holds "x" (write). Over connection C, uid U holds a
//! plain read lock on "y" (set ["y"], an entry with no ticket). Over
//! connection A, U waits (pushed, ticket (1,1)) to *read* ["x", "y"],
//! charged as that set for the place alone (which moves U's charge to A),
//! and A keeps a place of 1,000 names on "held", so that its close hands
//! its places to the clean-up thread. B1 and B2 keep 40 places of 1,000
//! names each on "held" and close first, keeping the clean-up thread busy.
//! Once A's close has drained its records, H2 releases "x" and the table
//! grants U's read place: a new entry on "x" carrying ticket (1,1), and on
//! "y" U's existing read entry (no ticket) is kept. The push finds A's
//! records gone, so no set's place-only mark is cleared. When the clean-up
//! thread ends U's place, `holds_granted_to(["x", "y"], (1,1))` is false
//! ("y" is held, but not under the ticket), the set is still marked for
//! the place alone, and its charge goes, though U's read lock on "x",
//! granted by that place and paid for by nothing else, stands. No release
//! of U is needed (U's uid is not tombstoned, nothing of U was refused).
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_LOCK, OP_LOCK_WAIT, OP_RLOCK,
    OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::net::TcpStream;

const BIG: u64 = 40;

/// A wait to *read* `resources`, pushed (the helper asks for writes).
fn read_wait_request(
    id: u64,
    uid: &str,
    resources: &[&str],
    ticket: (u64, u64),
    place_ttl: Duration,
) -> Vec<u8> {
    let mut out = lock_request(id, OP_LOCK_WAIT, uid, resources);
    out.push(0); // Mode::Read
    out.extend(crate::wire::varint(ticket.0));
    out.extend(crate::wire::varint(ticket.1));
    out.extend(crate::wire::duration(place_ttl));
    out.push(1);
    out
}

/// Waits over `conn` for `BIG` places of 1,000 names each on "held".
async fn big_places(conn: &mut TcpStream, prefix: &str, ticket: u64) {
    let ttl = Duration::from_secs(60);
    for i in 0..BIG {
        let mut names: Vec<String> = (0..999).map(|n| format!("{prefix}{i}-{n}")).collect();
        names.push("held".to_string());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let id = i + 1;
        let uid = format!("{prefix}{i}");
        assert_eq!(
            call(
                conn,
                id,
                &lock_wait_request(id, &uid, &names, (ticket, i + 1), ttl, true)
            )
            .await,
            [REPLY_WAIT, QUEUED],
            "{uid} waits"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_place_granted_to_a_closed_connection_beside_its_uids_read_lock_keeps_its_charge() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut h, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut h2, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b1, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b2, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    let h_only = node.stats.lock_bytes();
    assert_eq!(
        call(&mut h2, 1, &lock_request(1, OP_LOCK, "h2", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    let h2_only = node.stats.lock_bytes();
    assert_eq!(
        call(&mut c, 1, &lock_request(1, OP_RLOCK, "U", &["y"])).await,
        [REPLY_BOOL, 1],
        "U reads y over C"
    );
    let before_u = node.stats.lock_bytes();
    assert_eq!(
        call(
            &mut a,
            1,
            &read_wait_request(1, "U", &["x", "y"], (1, 1), ttl)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over A to read x and y"
    );
    let u_charge = node.stats.lock_bytes() - before_u;
    assert!(u_charge > 0, "U's place is charged");
    // A's own big place: 1,002 names in all, ended on the clean-up thread.
    {
        let mut names: Vec<String> = (0..999).map(|n| format!("a-{n}")).collect();
        names.push("held".to_string());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(
            call(
                &mut a,
                2,
                &lock_wait_request(2, "a-big", &names, (3, 1), ttl, true)
            )
            .await,
            [REPLY_WAIT, QUEUED]
        );
    }
    big_places(&mut b1, "b1-", 2).await;
    big_places(&mut b2, "b2-", 4).await;
    let all = 2 + 1000 + 2 * BIG as usize * 1000;
    assert_eq!(node.locker.waiting(), all);

    // B1 and B2 close: the clean-up thread ends their 80 places.
    let conns = node.stats.connections();
    drop(b1);
    drop(b2);
    let mut begun = false;
    for _ in 0..5_000 {
        if node.locker.waiting() < all {
            begun = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(begun, "B's places began to end");
    // A closes: its records are drained at once, its places handed to the
    // clean-up thread, behind B's.
    drop(a);
    let mut drained = false;
    for _ in 0..5_000 {
        if node.stats.connections() <= conns - 3 {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(drained, "A's close handed its places over");
    let busy_at_close = node.locker.waiting();

    // H2 releases x: the table grants U's read place on [x, y], pushed to
    // closed A.
    assert_eq!(
        call(&mut h2, 2, &lock_request(2, OP_UNLOCK, "h2", &["x"])).await,
        [REPLY_BOOL, 1],
        "H2 releases x"
    );
    let busy_after = node.locker.waiting();
    assert!(
        busy_after >= 1000,
        "the clean-up thread had not reached U's place yet (the race this test needs: \
         {busy_at_close} names waiting at A's close, {busy_after} after the grant; run again \
         if not)"
    );
    let u_holds = |name: &str| {
        node.locker
            .snapshot()
            .iter()
            .any(|info| &*info.uid == "U" && info.resource == name)
    };
    assert!(
        u_holds("x") && u_holds("y"),
        "U reads x, granted by its place, and y"
    );

    // Everything handed over is ended, and its charges given back.
    for _ in 0..1_000 {
        if node.locker.waiting() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(node.locker.waiting(), 0, "every closed place is ended");
    for _ in 0..500 {
        if node.stats.lock_bytes() < 20 * 1024 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(u_holds("x"), "U's write lock on x stands");
    assert!(u_holds("y"), "U's read lock on y stands");
    let left = node.stats.lock_bytes();
    assert_eq!(
        left,
        before_u - (h2_only - h_only) + u_charge,
        "U's read lock on x, granted by its place on [x, y], stands, yet the server charges \
         {left} bytes, not {} (H's lock on held, U's on y and U's lock on [x, y]'s \
         {u_charge}): the place's end gave the set's charge back as a place's, since the grant \
         pushed to closed A left it marked for the place alone and U's entry on y carries no \
         ticket",
        before_u - (h2_only - h_only) + u_charge
    );
    drop(c);
    drop(h);
    drop(h2);
}
