//! docs/lock-servers.md, "Threat model": a client "can fill limits, each
//! of which bounds it: per connection 100,000 locks, 64 MiB of lock table
//! and 1024 places in line". "Limits and memory": "A lock or a place on
//! new names under a uid that another connection holds moves all of that
//! uid's locks to this connection, so it is admitted only when this
//! connection's limits hold them all; a refresh moves them without that
//! check (refusing it would cost the holder its lock)."
//!
//! And: "A place granted later (its grant pushed) ends itself only: the
//! uid's places over other connections may have been asked after that
//! grant, and stay, each counted where it was asked, until they end."
//!
//! H holds "x" and ["y1", "y2", "y3"]. Uid U waits over connection A for
//! ["x"] (ticket (1,1), pushed). Then U waits over connection C for
//! ["y1", "y2", "y3"] (ticket (2,1)): new names, so U's whole charge (both
//! places' sets) moves to C, within C's limits; both places stand. A,
//! charged nothing now, fills its byte limit with locks of other uids. H
//! releases "x": U's place over A is granted and the grant pushed to A,
//! and `Session::forward` touches U's charge over A (`Ledger::touch`),
//! which moves all of U's charge to A without a limit check, the place
//! over C among it: neither a refresh nor a request of the client, and A
//! stays over `max_bytes_per_connection` while U lives.
//! Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    call, lock_request, lock_wait_request, read_frame, response, OP_LOCK, OP_UNLOCK, QUEUED,
    REPLY_BOOL, REPLY_ERROR, REPLY_PUSH, REPLY_WAIT,
};
use quorum_lock::net::ServerConfig;

const LIMIT: usize = 9_000;

/// The connection's bytes a refusal of the byte limit names.
fn bytes_named(body: &[u8]) -> Option<usize> {
    let text = String::from_utf8_lossy(body);
    let at = text.find("would take ")? + "would take ".len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_pushed_over_a_full_connection_does_not_move_its_uids_other_locks_there() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = LIMIT;
    config.idle_timeout = None;
    let node = start(config).await;
    let total = || node.stats.lock_bytes();
    let [mut a, mut c, mut d, mut h] = authenticated(&node).await;
    let ttl = Duration::from_secs(60);
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(
            &mut h,
            2,
            &lock_request(2, OP_LOCK, "h2", &["y1", "y2", "y3"])
        )
        .await,
        [REPLY_BOOL, 1]
    );
    // What a lock of "W" on ["w"] is charged, measured over D.
    let before = total();
    assert_eq!(
        call(&mut d, 1, &lock_request(1, OP_LOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1]
    );
    let w = total() - before;
    assert_eq!(
        call(&mut d, 2, &lock_request(2, OP_UNLOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(total(), before, "W's charge given back");

    let before = total();
    assert_eq!(
        call(
            &mut a,
            1,
            &lock_wait_request(1, "U", &["x"], (1, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over A for x"
    );
    let place = total() - before;
    let before = total();
    assert_eq!(
        call(
            &mut c,
            1,
            &lock_wait_request(1, "U", &["y1", "y2", "y3"], (2, 1), ttl, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "U waits over C for new names, held too, which takes U's charge"
    );
    let u = place + (total() - before);
    assert!(u <= LIMIT, "U's charge ({u}) fits C");
    // A, charged nothing now, takes as much as its limit holds.
    let mut on_a = 0;
    let mut id = 2;
    for n in 0..20 {
        let uid = format!("V{n}");
        let name = format!("v{n}");
        let before = total();
        let body = call(&mut a, id, &lock_request(id, OP_LOCK, &uid, &[&name])).await;
        id += 1;
        if body != [REPLY_BOOL, 1] {
            assert_eq!(body.first(), Some(&REPLY_ERROR), "refused by the limit");
            break;
        }
        on_a += total() - before;
    }
    assert!(
        on_a <= LIMIT && on_a + w > LIMIT,
        "A is full: {on_a} of {LIMIT}"
    );

    // H lets go of x: U's place over A is granted, and the grant pushed.
    assert_eq!(
        call(&mut h, 3, &lock_request(3, OP_UNLOCK, "h", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    let push = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut a, 64 * 1024))
        .await
        .expect("a push within 5 s")
        .expect("a frame");
    assert_eq!(
        response(&push).1.first(),
        Some(&REPLY_PUSH),
        "U's grant pushed to A"
    );
    // Past the moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        node.locker.waiting(),
        3,
        "U's place over C stands, on its 3 names"
    );
    let body = call(&mut a, id, &lock_request(id, OP_LOCK, "X", &["w"])).await;
    let named = bytes_named(&body).unwrap_or_else(|| {
        panic!(
            "X over full A (charged as W) is refused by its byte limit: {}",
            String::from_utf8_lossy(&body)
        )
    });
    let usage = named - w;
    assert!(
        usage <= LIMIT,
        "A is charged {usage} bytes, over its limit of {LIMIT} (its own locks {on_a}, U's \
         {u}): the grant pushed over A moved U's other locks there without a limit check"
    );
}
