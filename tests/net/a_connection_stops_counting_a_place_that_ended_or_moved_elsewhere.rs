//! docs/lock-servers.md, "Limits and memory": "A connection may hold at
//! most 1024 places in line; beyond that a waiter gets an error saying
//! so"; "A release of a waiter's uid, or a lock call or wait granted to it
//! at once, ends its places, over whichever connection it comes, and
//! every connection a place was asked over stops counting it"; "A place is
//! the connection's it was asked over last, one at a time: the connection
//! it was asked over before stops counting it".
//!
//! Each scene runs a server that allows one place per connection: a
//! waiter's place over connection A ends or moves by something done over
//! another connection, and A, holding no place in the table, must then fit
//! a wait of another uid. Each reproduces a past break, in which A kept
//! the record of a place the table no longer had and was refused until the
//! record expired. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use tokio::net::TcpStream;

use crate::node::{start, Node, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, GRANTED, OP_LOCK, OP_UNLOCK, QUEUED,
    REPLY_BOOL, REPLY_WAIT, VERSION_6,
};
use quorum_lock::net::ServerConfig;

const TTL: Duration = Duration::from_secs(60);

/// A server allowing one place per connection, and three connections to
/// it: A and B for the waiter, C for the others. Over C, "h" holds "held"
/// and "h2" holds "held2".
struct Scene {
    node: Node,
    a: TcpStream,
    b: TcpStream,
    c: TcpStream,
}

async fn scene() -> Scene {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let (a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut c, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    for (id, uid, name) in [(1, "h", "held"), (2, "h2", "held2")] {
        assert_eq!(
            call(&mut c, id, &lock_request(id, OP_LOCK, uid, &[name])).await,
            [REPLY_BOOL, 1]
        );
    }
    Scene { node, a, b, c }
}

/// `uid`'s wait for `names` with `ticket` (pushes on), asserted queued.
async fn queued(conn: &mut TcpStream, id: u64, uid: &str, names: &[&str], ticket: (u64, u64)) {
    assert_eq!(
        call(
            conn,
            id,
            &lock_wait_request(id, uid, names, ticket, TTL, true)
        )
        .await,
        [REPLY_WAIT, QUEUED],
        "{uid} waits for {names:?}"
    );
}

/// `uid`'s reservation (a place without pushes) on "held" over A: a grant
/// of it is never pushed, so A's replies come in order.
async fn reserved(a: &mut TcpStream, uid: &str) {
    let reply = call(
        a,
        1,
        &lock_wait_request(1, uid, &["held"], (1, 1), TTL, false),
    )
    .await;
    assert_eq!(
        reply.first(),
        Some(&REPLY_WAIT),
        "{uid} keeps a place over A"
    );
}

/// A wait of another uid over A, which A has room for.
async fn assert_a_wait_fits(scene: &mut Scene, why: &str) {
    let places = scene.node.locker.waiting();
    let body = call(
        &mut scene.a,
        99,
        &lock_wait_request(99, "W", &["held"], (9, 1), TTL, true),
    )
    .await;
    assert_eq!(
        body.first(),
        Some(&REPLY_WAIT),
        "{why}; the table keeps {places} place(s), yet A's wait for another uid is refused \
         under a limit of one place: {}",
        String::from_utf8_lossy(&body)
    );
}

/// `uid`'s reservation on "held" over A, standing in line, then the
/// release of "held" by "h" over C: the lock is free for `uid` to take
/// over another connection.
async fn reserved_then_held_freed(s: &mut Scene, uid: &str) {
    reserved(&mut s.a, uid).await;
    assert_eq!(s.node.locker.waiting(), 1, "the reservation stands in line");
    assert_eq!(
        call(&mut s.c, 3, &lock_request(3, OP_UNLOCK, "h", &["held"])).await,
        [REPLY_BOOL, 1]
    );
}

/// `uid`'s wait (with pushes) for `names` under `ticket` over `conn`,
/// asserted granted at once (`why` says how it could be).
async fn granted_at_once(
    conn: &mut TcpStream,
    uid: &str,
    names: &[&str],
    ticket: (u64, u64),
    why: &str,
) {
    assert_eq!(
        call(
            conn,
            1,
            &lock_wait_request(1, uid, names, ticket, TTL, true)
        )
        .await,
        [REPLY_WAIT, GRANTED],
        "{why}"
    );
}

/// U's release of "held" (call `id`) over `conn`, the connection named
/// `over`, after which the table must keep no place: `ended` says which
/// of U's places it ended.
async fn released_ending_every_place(
    conn: &mut TcpStream,
    node: &Node,
    id: u64,
    over: &str,
    ended: &str,
) {
    let released = call(conn, id, &lock_request(id, OP_UNLOCK, "U", &["held"])).await;
    assert_eq!(
        node.locker.waiting(),
        0,
        "the release over {over} ended {ended} ({released:?})"
    );
}

/// The waiter asks again over B, same uid, ticket and names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_over_another_connection_stops_counting_on_the_first() {
    let mut s = scene().await;
    queued(&mut s.a, 1, "U", &["held"], (1, 1)).await;
    queued(&mut s.b, 1, "U", &["held"], (1, 1)).await;
    assert_eq!(s.node.locker.waiting(), 1, "one place, B's now");
    assert_a_wait_fits(&mut s, "U's place moved to B").await;
}

/// The waiter asks again over B under a new uid with the same ticket (the
/// table keeps one place per waiter, by uid or by ticket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_asked_again_under_a_new_uid_over_another_connection_stops_counting_on_the_first() {
    let mut s = scene().await;
    queued(&mut s.a, 1, "U1", &["held"], (1, 1)).await;
    queued(&mut s.b, 1, "U2", &["held"], (1, 1)).await;
    assert_eq!(s.node.locker.waiting(), 1, "one place, B's now");
    assert_a_wait_fits(&mut s, "the waiter's place moved to B").await;
}

/// The waiter's reservation over A (no pushes) is granted by its ask over
/// B once the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_granted_when_asked_over_another_connection_stops_counting_on_the_first() {
    let mut s = scene().await;
    reserved_then_held_freed(&mut s, "U").await;
    granted_at_once(
        &mut s.b,
        "U",
        &["held"],
        (1, 1),
        "U's ask over B is granted",
    )
    .await;
    assert_eq!(s.node.locker.waiting(), 0, "no place is left");
    assert_a_wait_fits(&mut s, "U's place was granted over B").await;
}

/// The waiter's uid takes a plain lock on the place's names over B once
/// they are free (its place over A a reservation, as above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_whose_uid_takes_a_plain_lock_over_another_connection_stops_counting_on_the_first()
{
    let mut s = scene().await;
    reserved_then_held_freed(&mut s, "U").await;
    assert_eq!(
        call(&mut s.b, 1, &lock_request(1, OP_LOCK, "U", &["held"])).await,
        [REPLY_BOOL, 1],
        "U's plain lock over B is granted"
    );
    assert_eq!(s.node.locker.waiting(), 0, "no place is left");
    assert_a_wait_fits(&mut s, "U was granted a plain lock over B").await;
}

/// A release of the waiter's uid over B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_fits_after_its_connections_only_place_was_released_over_another_connection() {
    let mut s = scene().await;
    queued(&mut s.a, 1, "U", &["held"], (1, 1)).await;
    released_ending_every_place(&mut s.b, &s.node, 1, "B", "U's place").await;
    assert_a_wait_fits(&mut s, "U was released over B").await;
}

/// A release over C of the waiter's uid, whose charge a lock of other
/// names over C moved there (the record was looked for where the charge
/// was).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_of_a_waiting_uid_held_elsewhere_ends_the_record_of_the_connection_it_waited_over(
) {
    let mut s = scene().await;
    queued(&mut s.a, 1, "U", &["held"], (1, 1)).await;
    assert_eq!(
        call(&mut s.c, 3, &lock_request(3, OP_LOCK, "U", &["z"])).await,
        [REPLY_BOOL, 1],
        "U locks z over C, which now counts U"
    );
    released_ending_every_place(&mut s.c, &s.node, 4, "C", "U's place").await;
    assert_a_wait_fits(&mut s, "U was released over C").await;
}

/// A release over C of a uid that waits over A and B under two tickets
/// (the index of records kept one connection per uid).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_of_a_uid_waiting_over_two_connections_ends_the_record_of_each_place_it_ends() {
    let mut s = scene().await;
    queued(&mut s.a, 1, "U", &["held"], (1, 1)).await;
    queued(&mut s.b, 1, "U", &["held2"], (2, 1)).await;
    assert_eq!(s.node.locker.waiting(), 2, "two places of U in the table");
    released_ending_every_place(&mut s.c, &s.node, 3, "C", "U's places").await;
    assert_a_wait_fits(&mut s, "U was released over C").await;
}

/// A waiting lock of the uid over B, on a free name, granted at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_granted_to_a_uid_ends_its_places_over_other_connections() {
    let mut s = scene().await;
    queued(&mut s.a, 1, "U", &["held"], (1, 1)).await;
    granted_at_once(
        &mut s.b,
        "U",
        &["free"],
        (2, 1),
        "U's waiting lock over B is granted at once",
    )
    .await;
    assert_eq!(s.node.locker.waiting(), 0, "U's place over A ended");
    assert_a_wait_fits(&mut s, "a lock was granted to U over B").await;
}
