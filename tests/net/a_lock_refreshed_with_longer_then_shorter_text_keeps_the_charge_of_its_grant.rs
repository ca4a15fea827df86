//! docs/lock-servers.md, "Limits and memory": "A lock stays counted until it
//! is released ..., or until it expired"; "A set of names is charged for
//! the longest owner and source a request of its uid named it with (...:
//! the table keeps the newest), and the growth is admitted against the
//! limits as a new lock is; a refused request gives its growth back"; "A
//! refresh keeps every lock of its uid counted (the entries it reaches may
//! have been granted under another set of names, whose charge pays for
//! their owner and source)". "Threat model": a client "can fill limits,
//! each of which bounds it: per connection ... 64 MiB of lock table".
//!
//! A refresh sent with a longer owner and source than its lock was charged
//! for is refused for the growth only after the table refreshed the
//! entries (`reserve_refresh` comes after the locker's refresh), and the
//! refusal touches no charge. So a client keeps its lock standing while
//! the lock's charge lapses; once it lapsed, a refresh with a one-byte
//! owner and source finds the entries uncharged and charges them as that
//! refresh's text, not as the entries' own. From then on the lock, whose
//! entry keeps its 512-byte owner, is charged some 500 bytes less than the
//! same lock taken plainly, for as long as the client refreshes it.
//!
//! Uid U locks "x" with a 512-byte owner and a one-byte source under a
//! per-connection cap with no room for 512 more bytes; refreshes it every
//! 100 ms with a 512-byte owner and source for 3 s (a 1 s validity: the
//! charge lapsed in that time), then with a one-byte owner and source for
//! 3 s more. A refresh stores no owner or source, and now grows no
//! charge: each is answered, and the lock's charge never falls.
//! Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{start_over, TOKEN};
use crate::wire::{
    args_request, authenticate_as, call, OP_LOCK, OP_REFRESH, REPLY_BOOL, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use quorum_lock::LockerConfig;

const VALIDITY: Duration = Duration::from_secs(1);
const CAP: usize = 2_400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_refreshed_with_longer_then_shorter_text_keeps_the_charge_of_its_grant() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_bytes_per_connection = CAP;
    let node = start_over(
        LockerConfig {
            validity: VALIDITY,
            quarantine: Duration::ZERO,
        },
        config,
    )
    .await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let long = vec![b'o'; 512];

    assert_eq!(
        call(
            &mut a,
            1,
            &args_request(1, OP_LOCK, b"U", &[b"x"], &long, b"s")
        )
        .await,
        [REPLY_BOOL, 1],
        "U locks x with a 512-byte owner and a one-byte source"
    );
    let charged = node.stats.lock_bytes();
    assert!(charged < CAP && charged + 511 > CAP, "{charged}");

    let mut id = 1;
    let mut refresh = |owner: &[u8], source: &[u8]| {
        id += 1;
        let mut out = args_request(id, OP_REFRESH, b"U", &[b"x"], owner, source);
        out.push(0);
        (id, out)
    };
    // Refreshed with a 512-byte owner and source for 3 s (3 validities:
    // a charge left untouched lapses in that time), then with a one-byte
    // owner and source for 3 s more, as any refresh may be sent; the lock
    // stays charged at least what it was at its grant all along.
    let mut answers = Vec::new();
    let mut lowest = charged;
    for (owner, source) in [(&long[..], &long[..]), (&b"o"[..], &b"s"[..])] {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(3) {
            let (id, out) = refresh(owner, source);
            answers.push(call(&mut a, id, &out).await);
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
         bytes, where it was charged {charged} when granted: its charge lapsed under refreshes \
         refused (after the table refreshed them) for a longer owner, and a refresh with a \
         one-byte owner and source charged it anew as that"
    );
    drop(a);
}
