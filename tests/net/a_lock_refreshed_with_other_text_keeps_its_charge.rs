//! A lock refreshed with a longer, or a shorter, owner and source than it
//! was granted with stays charged at least what its grant was charged.
//! docs/lock-servers.md, "Limits and memory": "A lock stays counted until
//! it is released ..., or until it expired"; "A refresh keeps every lock
//! of its uid counted"; "A set of names is charged for the longest owner
//! and source a request of its uid named it with (...; a refresh, which
//! stores neither, grows nothing)". "Threat model": a client "can fill
//! limits, each of which bounds it: per connection ... 64 MiB of lock
//! table".
//!
//! Both scenes run under a per-connection cap with no room for the longer
//! text, a 1 s validity (a charge untouched for 3 s lapses). Each
//! reproduces a past break: a refresh's longer text was charged as growth
//! after the table had refreshed the entries, and its refusal over the cap
//! left the standing lock's charge to lapse. Real time (sockets), every
//! call bounded.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::lockers;
use crate::node::{start_over, Node, TOKEN};
use crate::wire::{
    args_request, authenticate_as, call, OP_LOCK, OP_REFRESH, REPLY_BOOL, REPLY_ERROR, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use tokio::net::TcpStream;

const VALIDITY: Duration = Duration::from_secs(1);

/// A server whose connections may hold `cap` bytes, and one connection to
/// it over which U has locked "x" with this owner and source; what the
/// lock is charged.
async fn locked(cap: usize, owner: &[u8], source: &[u8]) -> (Node, TcpStream, usize) {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_bytes_per_connection = cap;
    let locker = lockers::config_without_quarantine(VALIDITY);
    let node = start_over(locker, config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    assert_eq!(
        call(
            &mut a,
            1,
            &args_request(1, OP_LOCK, b"U", &[b"x"], owner, source)
        )
        .await,
        [REPLY_BOOL, 1],
        "U locks x with a {}-byte owner and a {}-byte source",
        owner.len(),
        source.len()
    );
    let charged = node.stats.lock_bytes();
    (node, a, charged)
}

/// A refresh of U's lock on "x" with this owner and source, as request
/// `id`.
fn refresh(id: u64, owner: &[u8], source: &[u8]) -> Vec<u8> {
    let mut out = args_request(id, OP_REFRESH, b"U", &[b"x"], owner, source);
    out.push(0);
    out
}

/// U locks "x" with a one-byte owner and source (about 1,650 bytes under a
/// 2,000-byte cap, no room for 1 KiB more), then refreshes it every 200 ms
/// with a 512-byte owner and source for 6 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_refreshed_with_a_longer_owner_over_the_cap_stays_charged() {
    let (node, mut a, charged) = locked(2_000, b"o", b"s").await;
    assert!(
        charged > 0 && charged < 2_000 && charged + 1_000 > 2_000,
        "{charged}"
    );
    let long = vec![b'o'; 512];
    let started = Instant::now();
    let (mut refused, mut id) = (0, 1);
    while started.elapsed() < Duration::from_secs(6) {
        id += 1;
        let reply = call(&mut a, id, &refresh(id, &long, &long)).await;
        if reply.first() == Some(&REPLY_ERROR) {
            refused += 1;
        }
        let live = node
            .locker
            .snapshot()
            .into_iter()
            .find(|info| info.uid == "U" && info.resource == "x")
            .filter(|info| info.refreshed.elapsed() < VALIDITY);
        if let Some(entry) = live {
            let bytes = node.stats.lock_bytes();
            assert!(
                bytes >= charged,
                "after {:?} of refreshes ({refused} of them answered \"refresh refused\"), U's \
                 lock on x stands in the table, refreshed {:?} ago, yet the server charges \
                 {bytes} bytes in all where the lock was charged {charged}",
                started.elapsed(),
                entry.refreshed.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(a);
}

/// U locks "x" with a 512-byte owner and a one-byte source under a
/// 2,400-byte cap (no room for 512 more), refreshes it every 100 ms with a
/// 512-byte owner and source for 3 s, then with one-byte ones for 3 s:
/// every refresh is answered, and the charge never falls (a past break
/// let it lapse, then charged it anew as the one-byte refresh's text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_refreshed_with_longer_then_shorter_text_keeps_the_charge_of_its_grant() {
    const CAP: usize = 2_400;
    let long = vec![b'o'; 512];
    let (node, mut a, charged) = locked(CAP, &long, b"s").await;
    assert!(charged < CAP && charged + 511 > CAP, "{charged}");
    let mut id = 1;
    let mut answers = Vec::new();
    let mut lowest = charged;
    for (owner, source) in [(&long[..], &long[..]), (&b"o"[..], &b"s"[..])] {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(3) {
            id += 1;
            answers.push(call(&mut a, id, &refresh(id, owner, source)).await);
            lowest = lowest.min(node.stats.lock_bytes());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(
        answers.iter().all(|reply| reply[..] == [REPLY_BOOL, 1]),
        "every refresh kept the lock: {answers:?}"
    );
    let entry = node
        .locker
        .snapshot()
        .into_iter()
        .find(|info| info.uid == "U" && info.resource == "x")
        .expect("U still holds x");
    assert_eq!(entry.owner.len(), 512, "U's entry keeps its 512-byte owner");
    let now = node.stats.lock_bytes().min(lowest);
    assert!(
        now >= charged,
        "U's lock on x, its entry with a 512-byte owner, stands refreshed and is charged {now} \
         bytes, where it was charged {charged} when granted"
    );
    drop(a);
}
