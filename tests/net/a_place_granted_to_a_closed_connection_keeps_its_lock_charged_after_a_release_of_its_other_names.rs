//! docs/lock-servers.md, "Limits and memory": "A lock stays counted until
//! it is released (a release in the other mode, which removes no entry,
//! leaves it counted ...)", "A release that removes an entry on only some
//! of its names (the others held in the other mode, say) keeps the lock's
//! charge until it lapses", and of the charges in general, the server
//! "counts too much rather than too little".
//!
//! H holds "held", H2 holds "x". Over connection A, uid U waits (pushed,
//! ticket (1,1)) to write ["x", "y"], charged as that set for the place
//! alone, and A keeps a place of 1,000 names on "held", so that its close
//! hands its places to the clean-up thread. Two connections B1 and B2 keep
//! 40 places of 1,000 names each on "held" and close first, so that the
//! clean-up thread is still busy with them when A closes. Once A's close
//! has drained its records, H2 releases "x" and the table grants U's place
//! on ["x", "y"]; its push finds A's records gone, so `ConnSink::push`
//! clears no set's place-only mark (`Ledger::granted(uid, None)`), leaving
//! it to the place's own end. U then releases "y" alone (names ["y"], a
//! set never charged: the set ["x", "y"] must keep its charge until it
//! lapses). When the clean-up thread reaches U's place, `end_places` asks
//! `holds_granted_to(["x", "y"], (1,1))`: "y" is gone, so no; the set is
//! still marked for the place alone, so its charge goes, though U's write
//! lock on "x" (granted by that very place) stands, charged for nothing.
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_LOCK, OP_UNLOCK, QUEUED, REPLY_BOOL,
    REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::net::TcpStream;

const BIG: u64 = 40;

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
async fn a_place_granted_to_a_closed_connection_keeps_its_lock_charged_after_a_release_of_its_other_names(
) {
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
    let before_u = node.stats.lock_bytes();
    assert_eq!(
        call(
            &mut a,
            1,
            &lock_wait_request(1, "U", &["x", "y"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over A to write x and y"
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

    // H2 releases x: the table grants U's place on [x, y], pushed to closed
    // A. Then U releases y alone.
    assert_eq!(
        call(&mut h2, 2, &lock_request(2, OP_UNLOCK, "h2", &["x"])).await,
        [REPLY_BOOL, 1],
        "H2 releases x"
    );
    assert_eq!(
        call(&mut c, 1, &lock_request(1, OP_UNLOCK, "U", &["y"])).await,
        [REPLY_BOOL, 1],
        "U releases y"
    );
    let busy_after = node.locker.waiting();
    assert!(
        busy_after >= 1000,
        "the clean-up thread had not reached U's place yet (the race this test needs: \
         {busy_at_close} names waiting at A's close, {busy_after} after U's release; run again \
         if not)"
    );
    let u_holds = |name: &str| {
        node.locker
            .snapshot()
            .iter()
            .any(|info| &*info.uid == "U" && info.resource == name)
    };
    assert!(
        u_holds("x") && !u_holds("y"),
        "U holds x, granted by its place"
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
    let left = node.stats.lock_bytes();
    assert_eq!(
        left,
        h_only + u_charge,
        "U's write lock on x, granted by its place on [x, y], stands, yet the server charges \
         {left} bytes, not {} (H's lock on held and U's lock's {u_charge}): the place's end \
         gave the set's charge back as a place's, since the grant pushed to closed A left it \
         marked for the place alone and U no longer held y",
        h_only + u_charge
    );
    drop(c);
    drop(h);
    drop(h2);
}
