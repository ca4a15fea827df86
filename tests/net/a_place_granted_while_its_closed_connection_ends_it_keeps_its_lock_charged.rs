//! docs/lock-servers.md, "Limits and memory": "A place that ends without a
//! grant gives its charge back, also when its uid holds a lock on some of
//! its names under another set of names (that lock is charged as its own
//! set)", "Locks count against their connection ... and against the whole
//! server (1 GiB) ... A lock stays counted until it is released ... or
//! until it expired", and (`Session::close`) "A release of theirs may then
//! grant a place of this connection not yet ended ...; that grant lasts
//! its validity."
//!
//! H2 holds "x"; H holds "held". Over connection A, uid U waits (pushed,
//! ticket (1,1), the oldest) to write "x": its set ["x"] is charged for the
//! place alone. A also keeps 40 places of 1,000 names each (on "held"),
//! so that when A closes its places go to the clean-up thread, which ends
//! them youngest first, U's last. While it ends the others, H2 releases
//! "x": the table grants U's place, still standing, and pushes the grant
//! to A's sink, whose records were drained at the close, so
//! `ConnSink::push` finds no names for the wait (`names_of` -> None) and
//! `Ledger::granted` leaves the set marked as charged for a place alone
//! (`for_place`), though it now pays for U's write lock on "x" (the
//! clean-up then keeps the charge: U holds "x" by a grant of its ticket).
//! Over connection C, U then waits to read "x" under another ticket
//! (queued beside its own write lock, place_ttl 1 s). When that place
//! expires, `end_places` takes the set for one that pays for no entry
//! (`for_place_alone` and no grant under the new place's ticket) and
//! gives back the whole set's charge: U's write lock on "x" stands, for
//! its validity, with no charge at all.
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, duration, frame, lock_request, lock_wait_request, read_frame, response,
    varint, OP_LOCK, OP_LOCK_WAIT, OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;

const BIG: u64 = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_granted_while_its_closed_connection_ends_it_keeps_its_lock_charged() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let node = start(config).await;
    let (mut h, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut h2, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut h2, 1, &lock_request(1, OP_LOCK, "h2", &["x"])).await,
        [REPLY_BOOL, 1]
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

    // A closes; once the clean-up thread has begun ending its places
    // (youngest first), H2 releases "x", U's place still standing.
    drop(a);
    let mut begun = false;
    for _ in 0..5_000 {
        if node.locker.waiting() < all {
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
    for _ in 0..1_000 {
        if node.locker.waiting() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(node.locker.waiting(), 0, "A's places are all ended");
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
    let u_holds_x = || {
        node.locker
            .snapshot()
            .iter()
            .any(|info| &*info.uid == "U" && info.resource == "x")
    };
    assert!(
        u_holds_x(),
        "the release granted U's place before the clean-up ended it (the race this test \
         needs; run again if not)"
    );
    let charged = node.stats.lock_bytes();

    // U waits to read "x" over C, under another ticket, beside its own
    // write lock; the place expires in a second and C sweeps it.
    let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let mut read = lock_request(1, OP_LOCK_WAIT, "U", &["x"]);
    read.push(0); // Mode::Read
    read.extend(varint(5));
    read.extend(varint(1));
    read.extend(duration(Duration::from_secs(1)));
    read.push(1);
    assert_eq!(call(&mut c, 1, &read).await, [REPLY_WAIT, QUEUED]);
    let beside = node.stats.lock_bytes();
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let after = node.stats.lock_bytes();
    assert!(
        u_holds_x(),
        "U's write lock on x stands (its validity is 60 s)"
    );
    assert_eq!(node.locker.waiting(), 0, "U's read place expired");
    assert!(
        after >= charged,
        "U's write lock on x stands, but the server charges {after} bytes in all, less than \
         the {charged} it charged with that lock (H's lock on held and U's on x), {beside} with \
         U's read place beside it: the expired place gave back the charge of U's lock"
    );
    drop(c);
}
