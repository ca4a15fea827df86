//! docs/lock-servers.md, "Limits and memory": "A place is charged as a
//! lock is while its connection keeps it [...]. A place that ends without
//! a grant gives its charge back, also when its uid holds a lock on some
//! of its names under another set of names (that lock is charged as its
//! own set)." Each scene here lets a 300 ms place expire beside locks of
//! its uid, lets its connection settle it (a connection looks for its
//! expired places at most once a second, at its next wait), and checks
//! that the place's charge went and nothing else's did. Each reproduces a
//! past break, named in its doc comment. Real time (sockets), every call
//! bounded.
#![cfg(feature = "net")]

use std::future::Future;
use std::time::Duration;

use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::{LockArgs, LockMode, NetLocker, Proclamation, Ticket, WaitArgs, WaitReply};

use crate::node::{args, remote, reservation, start, Node, TOKEN};

/// `what`'s answer, within 5 s.
async fn answer<T>(what: &str, call: impl Future<Output = Result<T, quorum_lock::Error>>) -> T {
    tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 5 s"))
        .unwrap_or_else(|err| panic!("{what}: {err}"))
}

fn names(of: &[&str]) -> Vec<String> {
    of.iter().map(|n| n.to_string()).collect()
}

/// `uid`'s wait for `wanted` in `mode` with a place of 300 ms, which the
/// names' holders keep from being granted.
async fn wait_with_a_short_place(
    node: &Node,
    waiter: &RemoteLocker,
    wanted: &LockArgs,
    mode: LockMode,
) {
    let before = node.stats.lock_bytes();
    let short = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_millis(300),
        wake: None,
    };
    let waited = answer("u's wait", waiter.lock_wait(wanted, mode, &short)).await;
    assert!(
        matches!(waited, WaitReply::Queued | WaitReply::Refused),
        "the wait keeps a place, not {waited:?}"
    );
    assert!(node.stats.lock_bytes() > before, "the place is charged");
}

/// Waits past the places' expiry and the once-a-second look for them,
/// then has each of `waiters` settle its expired places by a wait of its
/// own on a free name (granted at once, released again).
async fn settle_expired_places(waiters: &[&RemoteLocker]) {
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    for (i, waiter) in waiters.iter().enumerate() {
        let free = args(&format!("x{i}"), &[format!("free{i}")]);
        let reply = answer(
            "x's wait",
            waiter.lock_wait(&free, LockMode::Write, &reservation()),
        )
        .await;
        assert_eq!(reply, WaitReply::Granted);
        assert!(answer("x's release", waiter.unlock(&free)).await);
    }
}

/// `u` holds "a" and waits for "a" and "b" (`v` holds "b"), over its
/// first connection and then, with `renewed`, over a second one; once the
/// place expired and each connection settled it, the server charges what
/// it did before the wait.
async fn a_place_beside_its_uids_lock(renewed: bool) {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (client, other) = (remote(&node).await, remote(&node).await);
    let mut waiters: Vec<RemoteLocker> = vec![client];
    if renewed {
        waiters.push(remote(&node).await);
    }
    let held = args("u", &names(&["a"]));
    assert!(answer("u's lock on a", waiters[0].lock(&held)).await);
    assert!(answer("v's lock on b", other.lock(&args("v", &names(&["b"])))).await);
    let before = node.stats.lock_bytes();
    let both = args("u", &names(&["a", "b"]));
    // One ticket for both asks: the second renews the first's place.
    let short = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_millis(300),
        wake: None,
    };
    for waiter in &waiters {
        let waited = answer("u's wait", waiter.lock_wait(&both, LockMode::Write, &short)).await;
        assert!(
            matches!(waited, WaitReply::Queued | WaitReply::Refused),
            "{waited:?}"
        );
        assert!(node.stats.lock_bytes() > before, "the place is charged");
    }
    settle_expired_places(&waiters.iter().collect::<Vec<_>>()).await;
    for _ in 0..3 {
        assert!(answer("u's refresh", waiters[0].refresh(&held)).await);
    }
    assert_eq!(node.locker.waiting(), 0, "the place expired from the table");
    assert_eq!(
        node.stats.lock_bytes(),
        before,
        "after u's place on a and b expired (asked over {} connection(s)), the server still \
         charges its bytes (u's lock on a and v's on b were charged {before} bytes before the \
         wait)",
        waiters.len()
    );
}

/// Reproduces a past break: a place that expired beside an entry of its
/// uid kept its set's charge, which every refresh of the uid's lock kept
/// alive, though `u`'s own lock on "a" pays for that entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_place_beside_its_uids_lock_is_not_charged_while_the_lock_is_refreshed() {
    a_place_beside_its_uids_lock(false).await;
}

/// Reproduces a past break: a wait renewed over a second connection found
/// its set charged, so that connection's place did not know the charge was
/// the place's own, and kept it beside the uid's lock after it expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_place_renewed_over_another_connection_is_not_charged_beside_its_uids_lock() {
    a_place_beside_its_uids_lock(true).await;
}

/// Reproduces a past break: `u` read-locks "a", "b" and "c" as one set and
/// waits for the write lock on "a" and "b" (`v` reads "b"); the expired
/// place kept its charge because its uid holds every one of its names
/// (under the larger set), and each refresh of the read lock kept it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_place_inside_its_uids_larger_read_lock_is_not_charged_while_the_lock_is_refreshed(
) {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (client, other) = (remote(&node).await, remote(&node).await);
    let held = args("u", &names(&["a", "b", "c"]));
    assert!(answer("u's read lock on a, b, c", client.rlock(&held)).await);
    assert!(
        answer(
            "v's read lock on b",
            other.rlock(&args("v", &names(&["b"])))
        )
        .await
    );
    let before = node.stats.lock_bytes();
    wait_with_a_short_place(
        &node,
        &client,
        &args("u", &names(&["a", "b"])),
        LockMode::Write,
    )
    .await;
    settle_expired_places(&[&client]).await;
    for _ in 0..3 {
        assert!(answer("u's refresh", client.refresh(&held)).await);
    }
    assert_eq!(node.locker.waiting(), 0, "the place expired from the table");
    assert_eq!(
        node.stats.lock_bytes(),
        before,
        "after u's place on a and b expired, the server still charges its bytes while u \
         refreshes its read lock on a, b and c (u's and v's read locks were charged {before} \
         bytes before the wait)"
    );
}

/// Reproduces a past break: connection 1 holds `u`'s lock on "a"; over
/// connection 2, `u` waits for "b" (`v` holds it), which moves `u`'s
/// charge there; connection 1's refresh of "a" moves it back. The expired
/// place was given back only while `u` was charged to connection 2, so
/// the charge for "b" stayed, kept by each refresh of "a".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_whose_uid_is_refreshed_over_another_connection_gives_its_charge_back_when_it_expires(
) {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (first, second, other) = (
        remote(&node).await,
        remote(&node).await,
        remote(&node).await,
    );
    let held = args("u", &names(&["a"]));
    assert!(answer("u's lock on a", first.lock(&held)).await);
    assert!(answer("v's lock on b", other.lock(&args("v", &names(&["b"])))).await);
    let before = node.stats.lock_bytes();
    wait_with_a_short_place(&node, &second, &args("u", &names(&["b"])), LockMode::Write).await;
    // Connection 1 refreshes u's lock: u is charged to it again.
    assert!(answer("u's refresh", first.refresh(&held)).await);
    settle_expired_places(&[&second]).await;
    for _ in 0..3 {
        assert!(answer("u's refresh", first.refresh(&held)).await);
    }
    assert_eq!(node.locker.waiting(), 0, "the place expired from the table");
    assert_eq!(
        node.stats.lock_bytes(),
        before,
        "after u's place on b expired, the server still charges its bytes while connection 1 \
         refreshes u's lock on a (u's and v's locks were charged {before} bytes before the wait)"
    );
}

/// docs/lock-servers.md, "Limits and memory": "A lock stays counted until
/// it is released [...], or until it expired". Reproduces a past break:
/// `u` waits over connection 1 for the write lock on "a" and "b" (`v`
/// reads "b"), charging the set for the place; over connection 2, `u`
/// read-locks "a" and "b" (the same set, which now pays for these entries
/// too); connection 1 refreshes `u`, and connection 2 releases `u`'s read
/// lock on "b" only. The expiring place gave the set's charge back while
/// `u`'s entry on "a", granted under it, stood: an entry nothing charged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_ending_beside_what_is_left_of_a_lock_granted_under_its_set_keeps_that_locks_charge(
) {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (first, second, other) = (
        remote(&node).await,
        remote(&node).await,
        remote(&node).await,
    );
    assert!(
        answer(
            "v's read lock on b",
            other.rlock(&args("v", &names(&["b"])))
        )
        .await
    );
    let v_only = node.stats.lock_bytes();
    let both = args("u", &names(&["a", "b"]));
    wait_with_a_short_place(&node, &first, &both, LockMode::Write).await;
    assert!(answer("u's read lock on a and b", second.rlock(&both)).await);
    assert!(answer("u's refresh", first.refresh(&both)).await);
    assert!(
        answer(
            "u's release of b",
            second.runlock(&args("u", &names(&["b"])))
        )
        .await
    );
    settle_expired_places(&[&first]).await;
    assert!(
        node.locker
            .snapshot()
            .iter()
            .any(|e| e.uid == "u" && e.resource == "a"),
        "u's read entry on a stands (validity 60 s)"
    );
    assert!(
        node.stats.lock_bytes() > v_only,
        "u's read entry on a, granted under the set [a, b], stands in the table, yet the server \
         charges only v's read lock ({v_only} bytes): the place's end gave the set's charge back"
    );
}

/// docs/lock-servers.md, "Limits and memory": "a leader's proclamation
/// counts its value, name and uid plus about 840 bytes against the
/// leader's lock, and goes with its release". Reproduces a past break:
/// `u` holds the write lock on "a" and "c" and proclaims a 4 KiB value on
/// "a" (charged under the one-name set ["a"]), then waits to read "a",
/// which keeps a place charged as ["a"] too; the place's end dropped every
/// charge under that set, the proclamation's with its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proclamation_stays_charged_when_its_leaders_place_on_its_name_alone_expires() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let client = remote(&node).await;
    let lock = args("u", &names(&["a", "c"]));
    assert!(answer("u's write lock on a and c", client.lock(&lock)).await);
    let election = args("u", &names(&["a"]));
    let p = Proclamation::new(1, 0, vec![b'x'; 4096]).expect("a proclamation");
    assert!(
        answer("u's proclamation", client.proclaim(&election, &p)).await,
        "u holds a for writing: its proclamation is kept"
    );
    let before = node.stats.lock_bytes();
    // u holds a for writing: its read wait keeps a place.
    wait_with_a_short_place(&node, &client, &election, LockMode::Read).await;
    settle_expired_places(&[&client]).await;
    for _ in 0..3 {
        assert!(answer("u's refresh", client.refresh(&lock)).await);
    }
    assert_eq!(node.locker.waiting(), 0, "the place expired from the table");
    let leader = answer("the leader of a", client.leader(&election, None)).await;
    assert!(
        leader.is_some(),
        "u's write entry on a stands, and its proclamation with it: {leader:?}"
    );
    let now = node.stats.lock_bytes();
    assert!(
        now >= before,
        "u's write lock on a and c and its proclamation on a stand in the table, refreshed, and \
         were charged {before} bytes; after u's read place on a expired the server charges {now} \
         bytes: the place's end gave the proclamation's charge back with its own"
    );
}
