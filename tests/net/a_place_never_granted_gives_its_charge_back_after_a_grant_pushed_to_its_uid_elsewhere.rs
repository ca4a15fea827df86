//! docs/lock-servers.md, "Limits and memory": "A place that ends without a
//! grant gives its charge back, also when its uid holds a lock on some of
//! its names under another set of names (that lock is charged as its own
//! set); where the uid holds every one of its names that way, the place's
//! charge stays until those locks go". And "A refresh keeps every lock of
//! its uid counted": a charge left behind lasts as long as the client
//! refreshes its uid.
//!
//! Uid U holds a plain lock on "x" (set ["x"]). Over connection A it waits
//! (ticket T1) for "x" and "y" ("y" held by H): the set ["x", "y"] is
//! charged for the place alone. Over connection B, U waits (ticket T2) for
//! "z", held by H too; H lets "z" go and the table pushes U's grant of "z"
//! to B. The ledger, told only the uid of a pushed grant, takes every set
//! of U for a grant (`Ledger::granted`), the place's set ["x", "y"] among
//! them, which was never granted. A closes: the place ends without a
//! grant, U holding only "x" of its names, under the set ["x"]; but its
//! charge stays beside U's entry on "x", and lasts while U refreshes its
//! locks over B for longer than a charge lapses (validity 1 s, lapse 3 s).
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::one_second_node_and;
use crate::wire::{
    call, closed_within, frame, lock_request, lock_wait_request, read_frame, response, OP_LOCK,
    OP_REFRESH, OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_PUSH, REPLY_WAIT,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Sends request `id` and reads its reply, within 5 s, counting the pushes
/// read before it.
async fn call_past_pushes(stream: &mut TcpStream, id: u64, payload: &[u8]) -> (Vec<u8>, usize) {
    stream.write_all(&frame(payload)).await.expect("sent");
    let mut pushes = 0;
    for _ in 0..16 {
        let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(stream, 64 * 1024))
            .await
            .expect("answered in time")
            .expect("a reply");
        let (got, body) = response(&reply);
        if got == 0 && body.first() == Some(&REPLY_PUSH) {
            pushes += 1;
            continue;
        }
        assert_eq!(got, id);
        return (body.to_vec(), pushes);
    }
    panic!("no reply to request {id} among 16 frames");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_never_granted_gives_its_charge_back_after_a_grant_pushed_to_its_uid_elsewhere() {
    let (node, [mut a, mut b, mut h]) = one_second_node_and().await;
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "hy", &["y"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut h, 2, &lock_request(2, OP_LOCK, "hz", &["z"])).await,
        [REPLY_BOOL, 1]
    );
    let before = node.stats.lock_bytes();
    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U locks x"
    );
    let u_x = node.stats.lock_bytes() - before;
    assert_eq!(
        call(
            &mut a,
            2,
            &lock_wait_request(2, "U", &["x", "y"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits for x and y over A"
    );
    let place = node.stats.lock_bytes() - before - u_x;
    assert!(place > 0, "the place is charged");
    let before_z = node.stats.lock_bytes();
    assert_eq!(
        call(
            &mut b,
            1,
            &lock_wait_request(1, "U", &["z"], (2, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits for z over B"
    );
    let u_z = node.stats.lock_bytes() - before_z;
    assert_eq!(
        call(&mut h, 3, &lock_request(3, OP_UNLOCK, "hz", &["z"])).await,
        [REPLY_BOOL, 1],
        "H lets z go: U's place there is granted, and pushed to B"
    );
    // B reads the push (before the reply to its next request, at worst).
    let mut refresh = lock_request(2, OP_REFRESH, "U", &["z"]);
    refresh.push(0);
    let (body, pushes) = call_past_pushes(&mut b, 2, &refresh).await;
    assert_eq!(body, [REPLY_BOOL, 1], "U holds z ({pushes} pushes read)");
    // A closes; its place ends once the client reads the end of the stream.
    a.shutdown().await.unwrap();
    closed_within(&mut a, Duration::from_secs(5))
        .await
        .expect("A closed");
    assert_eq!(node.locker.waiting(), 0, "A's place ended at its close");
    assert_eq!(
        call(&mut h, 4, &lock_request(4, OP_UNLOCK, "hy", &["y"])).await,
        [REPLY_BOOL, 1]
    );
    // U keeps its locks on x and z, refreshed over B, for past a lapse.
    let until = tokio::time::Instant::now() + Duration::from_millis(4_500);
    let mut id = 10;
    while tokio::time::Instant::now() < until {
        for name in ["x", "z"] {
            let mut refresh = lock_request(id, OP_REFRESH, "U", &[name]);
            refresh.push(0);
            let (body, _) = call_past_pushes(&mut b, id, &refresh).await;
            assert_eq!(body, [REPLY_BOOL, 1], "U holds {name}");
            id += 1;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let left = node.stats.lock_bytes();
    assert_eq!(
        left,
        u_x + u_z,
        "only U's locks on x and z stand ({} bytes), but {left} bytes are charged: the ended \
         place's {place} bytes stay while U is refreshed",
        u_x + u_z
    );
}
