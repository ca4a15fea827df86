//! A uid whose lock expired and whose charge lapsed is charged as a new
//! uid when it locks again, over whichever connection, whether or not the
//! server's own sweep of its ledger got to the lapsed charge first.
//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) ... The lock limit counts lock
//! ids"; "A lock stays counted until it is released ... or until it
//! expired and the locker's next expiry pass gave back its memory"; "A
//! uid whose charge lapsed counts as a new lock"; only "a refresh moves
//! them without that check".
//!
//! Each scene: a 3 s validity (charges lapse 5 s after their last touch);
//! U's lock is taken half a second after the server's start, so that its
//! lapse falls between the server's sweeps of its ledger (at most once a
//! validity, at its expiry passes a second apart), and U asks again just
//! after the lapse, before the next sweep. Real time (sockets), every call
//! bounded.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::lockers;
use crate::node::{start, start_over, Node, TOKEN};
use crate::wire::{
    args_request, authenticate_as, call, lock_request, OP_LOCK, OP_REFRESH, OP_UNLOCK, REPLY_BOOL,
    VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::net::TcpStream;

const VALIDITY: Duration = Duration::from_secs(3);
/// The charge's lapse for this validity: the validity and two expiry
/// passes of a second each.
const LAPSE: Duration = Duration::from_secs(5);

/// A server of `config` (idle close off), over a locker of a 3 s
/// validity, half an expiry pass after its start.
async fn server(mut config: ServerConfig) -> Node {
    config.idle_timeout = None;
    let locker = lockers::config_without_quarantine(VALIDITY);
    let node = start_over(locker, config).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    node
}

async fn connection(node: &Node) -> TcpStream {
    authenticate_as(&node.addr, TOKEN, VERSION_6)
        .await
        .expect("authenticated")
        .0
}

/// Just after the lapse of a charge last touched at `granted`.
fn after_the_lapse(granted: Instant) -> Instant {
    granted + LAPSE + Duration::from_millis(5)
}

/// `uid` refreshes `name` over `conn` (request ids after `id`) until
/// `until`, every 300 ms at most.
async fn refreshing(conn: &mut TcpStream, id: &mut u64, uid: &str, name: &str, until: Instant) {
    while Instant::now() < until {
        *id += 1;
        let mut refresh = lock_request(*id, OP_REFRESH, uid, &[name]);
        refresh.push(0);
        assert_eq!(
            call(conn, *id, &refresh).await,
            [REPLY_BOOL, 1],
            "{uid} refreshed"
        );
        let left = until.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_millis(300))).await;
    }
}

/// A limit of one lock per connection. Over A, U locks "x" and lets it
/// expire; over B, W locks "w" and keeps it refreshed. Just after U's
/// lapse, U locks "x" again over B, which holds its one lock W: a new lock
/// over a full connection, to be refused. Reproduces a past break, in
/// which a set found charged with no longer text needed no admission, so
/// no prune ran, and B adopted the lapsed charge past its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lock_taken_again_over_a_full_connection_is_limited_as_a_new_lock() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 1;
    let node = server(config).await;
    let (mut a, mut b) = (connection(&node).await, connection(&node).await);
    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U locks x over A"
    );
    let granted = Instant::now();
    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1],
        "W locks w over B"
    );
    assert_ne!(
        call(&mut b, 2, &lock_request(2, OP_LOCK, "V", &["v"])).await[..],
        [REPLY_BOOL, 1],
        "B holds its one lock: V is refused over B"
    );
    let mut id = 2;
    refreshing(&mut b, &mut id, "W", "w", after_the_lapse(granted)).await;
    assert!(
        node.locker.snapshot().iter().all(|info| info.uid != "U"),
        "U's lock on x expired"
    );
    id += 1;
    let again = call(&mut b, id, &lock_request(id, OP_LOCK, "U", &["x"])).await;
    assert_ne!(
        again[..],
        [REPLY_BOOL, 1],
        "connection B, limited to one lock and holding W's, is granted U's lock on x, whose \
         entry had expired and whose charge had lapsed: the lapsed charge was found for the \
         same names and adopted by B without any admission"
    );
    drop((a, b));
}

/// A limit of one lock per connection and a lock table of room for two
/// and a half locks. Over A, U locks "x" and lets it expire; over B, W
/// locks "w" and keeps it refreshed. Just after U's lapse, U locks "y"
/// over A (the table is full: the admission's prune makes room); W is
/// released, and V locks "v" over A. Reproduces a past break, in which
/// the uid, found before the prune removed its lapsed charge, was not
/// counted again as a lock of A, which then held U's and V's locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uid_charged_anew_as_its_charge_lapses_counts_against_its_connections_locks() {
    // What one lock of a one-byte uid and name costs.
    let one = {
        let node = start(ServerConfig::new(TOKEN)).await;
        let mut s = connection(&node).await;
        assert_eq!(
            call(&mut s, 1, &lock_request(1, OP_LOCK, "Q", &["q"])).await,
            [REPLY_BOOL, 1]
        );
        node.stats.lock_bytes()
    };
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 1;
    config.max_lock_bytes = 2 * one + one / 2;
    let node = server(config).await;
    let (mut a, mut b) = (connection(&node).await, connection(&node).await);
    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U locks x over A"
    );
    let granted = Instant::now();
    assert_ne!(
        call(&mut a, 9, &lock_request(9, OP_LOCK, "V", &["v"])).await[..],
        [REPLY_BOOL, 1],
        "A holds its one lock: V is refused over A"
    );
    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1],
        "W locks w over B"
    );
    assert_eq!(node.stats.lock_bytes(), 2 * one);
    let mut id = 1;
    refreshing(&mut b, &mut id, "W", "w", after_the_lapse(granted)).await;
    assert_eq!(
        call(&mut a, 2, &lock_request(2, OP_LOCK, "U", &["y"])).await,
        [REPLY_BOOL, 1],
        "U locks y over A, in the room U's lapsed charge leaves"
    );
    id += 1;
    assert_eq!(
        call(&mut b, id, &lock_request(id, OP_UNLOCK, "W", &["w"])).await,
        [REPLY_BOOL, 1],
        "W releases w"
    );
    let v = call(&mut a, 3, &lock_request(3, OP_LOCK, "V", &["v"])).await;
    assert_ne!(
        v[..],
        [REPLY_BOOL, 1],
        "connection A, limited to one lock, holds U's lock on y and is granted V's lock on v \
         too: U's charge, made anew where the admission's prune removed its lapsed one, was \
         not counted as a lock of A"
    );
    drop((a, b));
}

/// A per-connection cap of 2,000 bytes, no room for 1 KiB more. Over A, U
/// locks "x" with a one-byte owner and source, lets it expire, and just
/// after its lapse locks "x" again with a 512-byte owner and source, then
/// refreshes it with one-byte ones. A refusal over the cap is right; a
/// lock granted must be charged as it is. Reproduces a past break, in
/// which the admission of the set's growth pruned the lapsed set it was to
/// grow, and the reservation charged nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_asked_again_with_a_longer_owner_as_its_charge_lapses_is_charged() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 2_000;
    let node = server(config).await;
    let mut a = connection(&node).await;
    let long = vec![b'o'; 512];
    assert_eq!(
        call(
            &mut a,
            1,
            &args_request(1, OP_LOCK, b"U", &[b"x"], b"o", b"s")
        )
        .await,
        [REPLY_BOOL, 1],
        "U locks x with a one-byte owner and source"
    );
    let granted = Instant::now();
    let short = node.stats.lock_bytes();
    // The same lock with a 512-byte owner and source: 1,022 bytes more.
    let plain = short + 1_022;
    assert!(short < 2_000 && plain > 2_000, "{short}");

    // Not refreshed: expired, and its charge lapses.
    tokio::time::sleep(after_the_lapse(granted).saturating_duration_since(Instant::now())).await;
    let again = call(
        &mut a,
        2,
        &args_request(2, OP_LOCK, b"U", &[b"x"], &long, &long),
    )
    .await;
    if again[..] != [REPLY_BOOL, 1] {
        // Charged as a new lock: refused over the cap.
        return;
    }
    let entry = node
        .locker
        .snapshot()
        .into_iter()
        .find(|info| info.uid == "U" && info.resource == "x")
        .expect("U holds x");
    let at_grant = node.stats.lock_bytes();

    // Refreshed with a one-byte owner and source, as any refresh may be.
    let mut id = 2;
    while granted.elapsed() < LAPSE + Duration::from_secs(3) {
        id += 1;
        let mut refresh = args_request(id, OP_REFRESH, b"U", &[b"x"], b"o", b"s");
        refresh.push(0);
        assert_eq!(
            call(&mut a, id, &refresh).await,
            [REPLY_BOOL, 1],
            "refreshed"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let now = node.stats.lock_bytes();
    assert!(
        at_grant >= plain && now >= plain,
        "U's lock on x, granted again with a {}-byte owner and a {}-byte source, was charged \
         {at_grant} bytes when granted and {now} bytes after 3 s of refreshes, where the same \
         lock taken plainly is charged {plain}",
        entry.owner.len(),
        entry.source.len()
    );
    drop(a);
}
