//! docs/lock-servers.md, "Limits and memory": "A place that ends without a
//! grant gives its charge back, also when its uid holds a lock on some of
//! its names under another set of names (that lock is charged as its own
//! set)", and "where the uid holds every one of its names by grants under
//! the place's own ticket, the place's charge stays until those locks go"
//! (the one exception, which does not apply here: U never held "w").
//!
//! H holds "held" and "w"; H2 holds "x". Over connection A, uid U waits
//! (pushed, ticket (1,1), the oldest) to write "x", and A keeps 40 places
//! of 1,000 names each on "held", so that its close hands them to the
//! clean-up thread. Over connection C, U holds a plain write lock on "y"
//! (set ["y"]) and waits (ticket (5,1), place_ttl 5 s) to write ["y", "w"]:
//! that set is charged for the place alone. A closes; while the clean-up
//! thread ends its places, H2 releases "x" and the table grants U's place
//! on "x", whose push finds A's records gone: `ConnSink::push` passes no
//! names, and `Ledger::granted(uid, None)` clears the place-only mark of
//! *every* set of U, ["y", "w"] among them, though that set was never
//! granted. When C's place on ["y", "w"] expires, `end_places` finds U
//! holding "y" (by its plain lock, under no ticket), and, the mark gone,
//! keeps the set's charge as if it paid for entries; every refresh of U's
//! lock on "y" touches it, so it never lapses while U refreshes.
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, frame, lock_request, lock_wait_request, read_frame, response, OP_LOCK,
    OP_REFRESH, OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;

const BIG: u64 = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_ending_after_its_uids_grant_reached_a_closed_connection_gives_its_charge_back() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut h, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut h2, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held", "w"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut h2, 1, &lock_request(1, OP_LOCK, "h2", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut c, 1, &lock_request(1, OP_LOCK, "U", &["y"])).await,
        [REPLY_BOOL, 1],
        "U locks y over C"
    );
    assert_eq!(
        call(
            &mut a,
            1,
            &lock_wait_request(1, "U", &["x"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over A to write x"
    );
    for i in 0..BIG {
        let mut names: Vec<String> = (0..999).map(|n| format!("b{i}-{n}")).collect();
        names.push("held".to_string());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let id = i + 2;
        let uid = format!("b{i}");
        assert_eq!(
            call(
                &mut a,
                id,
                &lock_wait_request(id, &uid, &names, (2, i + 1), ttl, true)
            )
            .await,
            [REPLY_WAIT, QUEUED],
            "{uid} waits over A"
        );
    }
    let all = 1 + BIG as usize * 1000;
    assert_eq!(node.locker.waiting(), all);

    // U waits over C for ["y", "w"] (w held by H): a new set, charged for
    // the place alone.
    let before_place = node.stats.lock_bytes();
    assert_eq!(
        call(
            &mut c,
            2,
            &lock_wait_request(2, "U", &["y", "w"], (5, 1), Duration::from_secs(5), true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over C for y and w"
    );
    let place_charge = node.stats.lock_bytes() - before_place;
    assert!(place_charge > 0, "the place on [y, w] is charged");

    // A closes; once the clean-up thread has begun ending its places
    // (youngest first), H2 releases "x", U's place still standing.
    drop(a);
    let mut begun = false;
    for _ in 0..5_000 {
        if node.locker.waiting() < all + 2 {
            begun = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(begun, "A's places began to end");
    h2.write_all(&frame(&lock_request(2, OP_UNLOCK, "h2", &["x"])))
        .await
        .unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut h2, 4096))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response(&reply), (2, &[REPLY_BOOL, 1][..]));
    // Only C's place on [y, w] (two names) is left once A's are ended.
    for _ in 0..1_000 {
        if node.locker.waiting() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(node.locker.waiting(), 2, "A's places are all ended");
    // The clean-up thread gives each place's charge back just after it
    // takes the place out of the table: wait (5 s at most) until the
    // charges of the thousand-name places, about 27 KiB each, are all gone
    // (what is left here is a few KiB).
    for _ in 0..500 {
        if node.stats.lock_bytes() < 20 * 1024 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let u_holds = |name: &str| {
        node.locker
            .snapshot()
            .iter()
            .any(|info| &*info.uid == "U" && info.resource == name)
    };
    assert!(
        u_holds("x"),
        "the release granted U's place before the clean-up ended it (the race this test \
         needs; run again if not)"
    );
    let with_place = node.stats.lock_bytes();

    // C's place on [y, w] ends without a grant (its place_ttl), while U
    // keeps refreshing its lock on y over C.
    let until = tokio::time::Instant::now() + Duration::from_secs(9);
    let mut id = 10;
    while tokio::time::Instant::now() < until {
        let mut refresh = lock_request(id, OP_REFRESH, "U", &["y"]);
        refresh.push(0);
        assert_eq!(
            call(&mut c, id, &refresh).await,
            [REPLY_BOOL, 1],
            "U holds y"
        );
        id += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(node.locker.waiting(), 0, "C's place on [y, w] expired");
    assert!(u_holds("y") && !u_holds("w"), "U holds y and never got w");
    let left = node.stats.lock_bytes();
    assert_eq!(
        left,
        with_place - place_charge,
        "C's place on [y, w] ended without a grant, but the server still charges {left} \
         bytes, as much as with the place ({with_place}), and not {} (without the place's \
         {place_charge}): the grant pushed to closed A cleared the place-only mark of every \
         set of U, and the refreshes of y keep the place's charge alive",
        with_place - place_charge
    );
    drop(c);
    drop(h);
}
