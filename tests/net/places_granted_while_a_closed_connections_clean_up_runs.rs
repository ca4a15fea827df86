//! Places of a closed connection granted, or ended, while the server's
//! clean-up thread is still busy ending that connection's places: the
//! grant's push finds the connection's records gone, yet every lock the
//! grant made stays charged and every place that ends ungranted gives its
//! charge back. docs/lock-servers.md, "Limits and memory": "A lock stays
//! counted until it is released ... or until it expired", "A place that
//! ends without a grant gives its charge back, also when its uid holds a
//! lock on some of its names under another set of names", and of the
//! charges in general, the server "counts too much rather than too
//! little".
//!
//! Each scene keeps the clean-up thread busy with places of 1,000 names
//! each on "held" (which H holds), so that a release can grant a closed
//! connection's place before the thread ends it. Real time (sockets),
//! every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, Node, TOKEN};
use crate::wire::{
    authenticate_as, call, frame, lock_request, lock_wait_request, read_frame, read_wait_request,
    response, OP_LOCK, OP_REFRESH, OP_RLOCK, OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// How many places of 1,000 names a connection keeps to busy the clean-up.
const BIG: u64 = 40;

/// Below this, no thousand-name place's charge (about 27 KiB) is left.
const NO_BIG_CHARGE: usize = 20 * 1024;

/// A server that never closes a connection for idleness.
async fn server() -> Node {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    start(config).await
}

/// A connection to `node` at protocol 6.
async fn connection(node: &Node) -> TcpStream {
    authenticate_as(&node.addr, TOKEN, VERSION_6)
        .await
        .expect("authenticated")
        .0
}

/// Waits over `conn` for `count` places (request ids from `first_id`):
/// place `i` is uid `{prefix}{i}`'s, ticket (`ticket`, i + 1), on 999
/// names of its own and "held".
async fn big_places(conn: &mut TcpStream, prefix: &str, ticket: u64, first_id: u64, count: u64) {
    let ttl = Duration::from_secs(60);
    for i in 0..count {
        let mut names: Vec<String> = (0..999).map(|n| format!("{prefix}{i}-{n}")).collect();
        names.push("held".to_string());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let id = first_id + i;
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

/// Whether `check` holds within `tries` looks, `step` apart.
async fn within(tries: u32, step: Duration, check: impl Fn() -> bool) -> bool {
    for _ in 0..tries {
        if check() {
            return true;
        }
        tokio::time::sleep(step).await;
    }
    check()
}

/// Whether `uid` holds an entry on `name`.
fn holds(node: &Node, uid: &str, name: &str) -> bool {
    node.locker
        .snapshot()
        .iter()
        .any(|info| &*info.uid == uid && info.resource == name)
}

/// Closes `busy` (the clean-up thread begins on their places), then `a`
/// once the thread is busy, and waits until `a`'s close has handed its
/// places over; returns how many names still wait.
async fn close_behind_busy_ones(node: &Node, busy: Vec<TcpStream>, a: TcpStream) -> usize {
    let all = node.locker.waiting();
    let conns = node.stats.connections();
    let closing = busy.len() + 1;
    drop(busy);
    let begun = within(5_000, Duration::from_millis(1), || {
        node.locker.waiting() < all
    })
    .await;
    assert!(begun, "the busy connections' places began to end");
    drop(a);
    let drained = within(5_000, Duration::from_millis(1), || {
        node.stats.connections() <= conns - closing
    })
    .await;
    assert!(drained, "A's close handed its places over");
    node.locker.waiting()
}

/// Closes `a`, whose own big places keep the clean-up thread busy, and
/// waits until the thread has begun ending them.
async fn close_busy(node: &Node, a: TcpStream) {
    let all = node.locker.waiting();
    drop(a);
    let begun = within(5_000, Duration::from_millis(1), || {
        node.locker.waiting() < all
    })
    .await;
    assert!(begun, "A's places began to end");
}

/// H2 releases "x" (request 2), read back within 5 s.
async fn h2_releases_x(h2: &mut TcpStream) {
    h2.write_all(&frame(&lock_request(2, OP_UNLOCK, "h2", &["x"])))
        .await
        .expect("sent");
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(h2, 4096))
        .await
        .expect("answered in time")
        .expect("a reply");
    assert_eq!(response(&reply), (2, &[REPLY_BOOL, 1][..]));
}

/// Waits until `waiting` names are left in line, and the clean-up thread
/// has given back the charges of the places it ended (it gives each back
/// just after it takes the place out of the table).
async fn clean_up_done(node: &Node, waiting: usize) {
    let ended = within(1_000, Duration::from_millis(10), || {
        node.locker.waiting() == waiting
    })
    .await;
    assert!(ended, "every closed place is ended");
    within(500, Duration::from_millis(10), || {
        node.stats.lock_bytes() < NO_BIG_CHARGE
    })
    .await;
}

/// H2 holds "x", H "held". Over A, U waits (ticket (1,1), the oldest) to
/// write "x", and A keeps 40 big places. A closes; while the clean-up
/// thread ends the others, H2 releases "x" and U's place is granted. Over
/// C, U then waits to read "x" under another ticket beside its own write
/// lock; that place expires in a second. Reproduces a past break, in
/// which the expired place gave back the charge of U's write lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_granted_while_its_closed_connection_ends_it_keeps_its_lock_charged() {
    let node = server().await;
    let mut h = connection(&node).await;
    let mut h2 = connection(&node).await;
    let mut a = connection(&node).await;
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
    big_places(&mut a, "b", 2, 2, BIG).await;
    assert_eq!(node.locker.waiting(), 1 + BIG as usize * 1000);

    close_busy(&node, a).await;
    h2_releases_x(&mut h2).await;
    clean_up_done(&node, 0).await;
    assert!(
        holds(&node, "U", "x"),
        "the release granted U's place before the clean-up ended it (the race this test \
         needs; run again if not)"
    );
    let charged = node.stats.lock_bytes();

    // U waits to read "x" over C, under another ticket, beside its own
    // write lock; the place expires in a second and C sweeps it.
    let mut c = connection(&node).await;
    let read = read_wait_request(1, "U", &["x"], (5, 1), Duration::from_secs(1), true);
    assert_eq!(call(&mut c, 1, &read).await, [REPLY_WAIT, QUEUED]);
    let beside = node.stats.lock_bytes();
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let after = node.stats.lock_bytes();
    assert!(
        holds(&node, "U", "x"),
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

/// H holds "held" and "w", H2 "x". Over A, U waits (ticket (1,1)) to
/// write "x", A keeping 40 big places; over C, U holds "y" and waits
/// (ticket (5,1), place_ttl 5 s) to write ["y", "w"], a set charged for
/// the place alone. A closes; while the clean-up runs, H2 releases "x"
/// and U's place on "x" is granted. C's place on ["y", "w"] then expires
/// ungranted while U keeps refreshing "y". Reproduces a past break, in
/// which the grant pushed to closed A cleared the place-only mark of every
/// set of U, so the refreshes of "y" kept the expired place's charge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_ending_after_its_uids_grant_reached_a_closed_connection_gives_its_charge_back() {
    let node = server().await;
    let mut h = connection(&node).await;
    let mut h2 = connection(&node).await;
    let mut a = connection(&node).await;
    let mut c = connection(&node).await;
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
    big_places(&mut a, "b", 2, 2, BIG).await;
    assert_eq!(node.locker.waiting(), 1 + BIG as usize * 1000);

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

    close_busy(&node, a).await;
    h2_releases_x(&mut h2).await;
    // Only C's place on [y, w] (two names) is left once A's are ended.
    clean_up_done(&node, 2).await;
    assert!(
        holds(&node, "U", "x"),
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
    assert!(
        holds(&node, "U", "y") && !holds(&node, "U", "w"),
        "U holds y and never got w"
    );
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

/// H holds "held", H2 "x". Over A, U waits (ticket (1,1)) to write
/// ["x", "y"], charged for the place alone, A keeping one big place; B1
/// and B2 keep 40 big places each and close first, then A. H2 releases
/// "x", granting U's place, then U releases "y" alone. Reproduces a past
/// break, in which the place's end, finding U no longer holding every
/// name under its ticket, gave back the charge of U's lock on "x".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_granted_to_a_closed_connection_keeps_its_lock_charged_after_a_release_of_its_other_names(
) {
    granted_behind_busy_ones(Beside::Nothing).await;
}

/// H holds "held", H2 "x". Over C, U holds a plain read lock on "y" (no
/// ticket); over A, U waits (ticket (1,1)) to read ["x", "y"], A keeping
/// one big place; B1 and B2 keep 40 big places each and close first, then
/// A. H2 releases "x", granting U's read place: a new entry on "x" under
/// the ticket, U's entry on "y" kept without one. Reproduces a past
/// break, in which the place's end, finding "y" not held under its ticket,
/// gave back the charge of U's read lock on "x".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_place_granted_to_a_closed_connection_beside_its_uids_read_lock_keeps_its_charge() {
    granted_behind_busy_ones(Beside::AReadLockOnY).await;
}

/// What U holds over C beside its place on ["x", "y"] over A.
#[derive(Clone, Copy, PartialEq)]
enum Beside {
    /// Nothing: U waits to write, and releases "y" once granted.
    Nothing,
    /// A plain read lock on "y": U waits to read.
    AReadLockOnY,
}

/// The scene of the two tests above.
async fn granted_behind_busy_ones(beside: Beside) {
    let node = server().await;
    let mut h = connection(&node).await;
    let mut h2 = connection(&node).await;
    let mut a = connection(&node).await;
    let mut b1 = connection(&node).await;
    let mut b2 = connection(&node).await;
    let mut c = connection(&node).await;
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
    let wait = if beside == Beside::AReadLockOnY {
        assert_eq!(
            call(&mut c, 1, &lock_request(1, OP_RLOCK, "U", &["y"])).await,
            [REPLY_BOOL, 1],
            "U reads y over C"
        );
        read_wait_request(1, "U", &["x", "y"], (1, 1), ttl, true)
    } else {
        lock_wait_request(1, "U", &["x", "y"], (1, 1), ttl, true)
    };
    let before_u = node.stats.lock_bytes();
    assert_eq!(
        call(&mut a, 1, &wait).await,
        [REPLY_WAIT, QUEUED],
        "U waits over A for x and y"
    );
    let u_charge = node.stats.lock_bytes() - before_u;
    assert!(u_charge > 0, "U's place is charged");
    big_places(&mut a, "a-", 3, 2, 1).await;
    big_places(&mut b1, "b1-", 2, 1, BIG).await;
    big_places(&mut b2, "b2-", 4, 1, BIG).await;
    assert_eq!(node.locker.waiting(), 2 + 1000 + 2 * BIG as usize * 1000);

    let busy_at_close = close_behind_busy_ones(&node, vec![b1, b2], a).await;
    // H2 releases x: the table grants U's place on [x, y], pushed to closed
    // A. Then U releases y alone, if it waited to write.
    assert_eq!(
        call(&mut h2, 2, &lock_request(2, OP_UNLOCK, "h2", &["x"])).await,
        [REPLY_BOOL, 1],
        "H2 releases x"
    );
    if beside == Beside::Nothing {
        assert_eq!(
            call(&mut c, 1, &lock_request(1, OP_UNLOCK, "U", &["y"])).await,
            [REPLY_BOOL, 1],
            "U releases y"
        );
    }
    let busy_after = node.locker.waiting();
    assert!(
        busy_after >= 1000,
        "the clean-up thread had not reached U's place yet (the race this test needs: \
         {busy_at_close} names waiting at A's close, {busy_after} after the grant; run again \
         if not)"
    );
    let holds_y = beside == Beside::AReadLockOnY;
    assert!(
        holds(&node, "U", "x") && holds(&node, "U", "y") == holds_y,
        "U holds x, granted by its place, and y only if it held it beside"
    );

    clean_up_done(&node, 0).await;
    assert!(holds(&node, "U", "x"), "U's lock on x stands");
    assert_eq!(holds(&node, "U", "y"), holds_y, "U's read lock on y stands");
    let left = node.stats.lock_bytes();
    // H's lock on held, U's read lock on y if any, U's lock on [x, y].
    let due = h_only + (before_u - h2_only) + u_charge;
    assert_eq!(
        left, due,
        "U's lock on x, granted by its place on [x, y], stands, yet the server charges {left} \
         bytes, not {due} (U's lock on [x, y] was charged {u_charge}): the place's end gave \
         the set's charge back as a place's"
    );
    drop(c);
    drop(h);
    drop(h2);
}
