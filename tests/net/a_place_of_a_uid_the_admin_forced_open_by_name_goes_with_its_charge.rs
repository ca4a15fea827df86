//! Reproduces: an admin's force by name of a uid's lock dropped the charge
//! of that uid's place in line on other names, which the table kept, and
//! later granted, uncharged.
//!
//! docs/lock-servers.md: forcing a name open gives back the charge of
//! every lock that held it, and the server treats that lock as released,
//! refusing its waits: its places in line go with it, in the table as in
//! the charges, so that nothing the table keeps is charged to nobody.
//!
//! Scene: V locks "y". U locks "x", then waits (pushed) for "y" under the
//! same uid. The admin forces "x" open by name: U's place on y goes, and
//! its charge with it. V releases y: nobody is granted it, and nothing is
//! left charged. The same when the admin forces "x" and "y" in one call
//! (the force freed y's line itself: U's place there was once granted in
//! the force's own promotion), and when U's place is on the forced name
//! itself. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use tokio::net::TcpStream;

use quorum_lock::net::ServerConfig;

use crate::capped::ADMIN;
use crate::node::{start, Node, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_FORCE_UNLOCK, OP_LOCK, OP_RLOCK,
    OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_6,
};

/// A server with an admin token, a client connection and the admin's.
async fn server() -> (Node, TcpStream, TcpStream) {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.idle_timeout = None;
    let node = start(config).await;
    let (a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (admin, _) = authenticate_as(&node.addr, ADMIN, VERSION_6).await.unwrap();
    (node, a, admin)
}

/// V locks y; U locks x and waits for y. Returns what V's lock alone is
/// charged, and what V's lock, U's lock and U's place are.
async fn u_holds_x_and_waits_for_y(node: &Node, a: &mut TcpStream) -> (usize, usize) {
    assert_eq!(
        call(a, 1, &lock_request(1, OP_LOCK, "V", &["y"])).await,
        [REPLY_BOOL, 1],
        "V locks y"
    );
    let v_only = node.stats.lock_bytes();
    assert_eq!(
        call(a, 2, &lock_request(2, OP_LOCK, "U", &["x"])).await,
        [REPLY_BOOL, 1],
        "U locks x"
    );
    let wait = lock_wait_request(3, "U", &["y"], (1, 1), Duration::from_secs(30), true);
    let queued = call(a, 3, &wait).await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for y: {queued:?}"
    );
    let with_place = node.stats.lock_bytes();
    assert!(with_place > v_only, "{with_place} > {v_only}");
    (v_only, with_place)
}

async fn force(admin: &mut TcpStream, names: &[&str]) {
    assert_eq!(
        call(admin, 1, &lock_request(1, OP_FORCE_UNLOCK, "", names)).await,
        [REPLY_BOOL, 1],
        "the admin forces {names:?} open by name"
    );
}

/// Nothing in the table, nothing in line, nothing charged.
fn nothing_left(node: &Node, when: &str) {
    let left: Vec<_> = node.locker.snapshot();
    assert!(left.is_empty(), "{when}: the table holds {left:?}");
    assert_eq!(node.locker.waiting(), 0, "{when}: a place is still in line");
    assert_eq!(
        node.stats.lock_bytes(),
        0,
        "{when}: charged with nothing held"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_of_a_uid_the_admin_forced_open_by_name_goes_with_its_charge() {
    let (node, mut a, mut admin) = server().await;
    let (v_only, with_place) = u_holds_x_and_waits_for_y(&node, &mut a).await;
    force(&mut admin, &["x"]).await;
    assert_eq!(
        node.locker.waiting(),
        0,
        "the table keeps a place of U, whose lock the admin forced open"
    );
    assert_eq!(
        node.stats.lock_bytes(),
        v_only,
        "after the force the server charges V's lock alone ({v_only} bytes); with U's place it \
         charged {with_place}"
    );
    assert_eq!(
        call(&mut a, 4, &lock_request(4, OP_UNLOCK, "V", &["y"])).await,
        [REPLY_BOOL, 1],
        "V releases y"
    );
    nothing_left(&node, "after V released y");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_holders_place_on_another_name_forced_with_it_is_not_granted() {
    let (node, mut a, mut admin) = server().await;
    u_holds_x_and_waits_for_y(&node, &mut a).await;
    force(&mut admin, &["x", "y"]).await;
    // Let any push and settling run.
    tokio::time::sleep(Duration::from_millis(200)).await;
    nothing_left(&node, "after x and y were forced open together");
}

/// U read-locks x beside V and waits for the write lock there. Forcing x
/// open drops both readers; U's place on x must go with them, not be
/// granted to U as the line comes free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_holders_place_on_the_forced_name_is_not_granted_to_it() {
    let (node, mut a, mut admin) = server().await;
    for (id, uid) in [(1, "V"), (2, "U")] {
        assert_eq!(
            call(&mut a, id, &lock_request(id, OP_RLOCK, uid, &["x"])).await,
            [REPLY_BOOL, 1],
            "{uid} read-locks x"
        );
    }
    let wait = lock_wait_request(3, "U", &["x"], (1, 1), Duration::from_secs(30), true);
    let queued = call(&mut a, 3, &wait).await;
    assert_eq!(
        queued[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for the write lock: {queued:?}"
    );
    force(&mut admin, &["x"]).await;
    nothing_left(&node, "after x was forced open");
}
