//! docs/lock-servers.md, "Limits and memory": "A lock stays counted until it
//! is released ..., or until it expired and the locker's next expiry pass
//! ... gave back its memory"; "A refresh keeps every lock of its uid
//! counted"; "A set of names is charged for the longest owner and source a
//! request of its uid named it with ..., and the growth is admitted against
//! the limits as a new lock is; a refused request gives its growth back";
//! "A request the table refuses takes nothing and refreshes nothing".
//! "Threat model": a refresh "over them refused with an error that says so,
//! having refreshed nothing".
//!
//! A refresh of a lock whose set is charged, sent with a longer owner and
//! source, is asked of the table first and only then charged for the
//! growth (`reserve_refresh`): over the connection's cap the growth is
//! refused, and the server answers "refresh refused", but the table has
//! already refreshed the entries, and the ledger never touched the uid's
//! charge. A client that keeps refreshing its lock so keeps it standing in
//! the table while its charge lapses as if nobody refreshed it: the lock
//! stands uncharged, and the connection's room is free for more.
//!
//! Uid U locks "x" with a one-byte owner and source (charged under a cap
//! that has no room for 1 KiB more), then refreshes it every 200 ms with
//! a 512-byte owner and source. A 1 s validity (charges lapse 3 s after
//! their last touch). Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{start_over, TOKEN};
use crate::wire::{
    args_request, authenticate_as, call, OP_LOCK, OP_REFRESH, REPLY_BOOL, REPLY_ERROR, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use quorum_lock::LockerConfig;

const VALIDITY: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_refreshed_with_a_longer_owner_over_the_cap_stays_charged() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    // Room for U's lock as first charged (about 1,650 bytes), not for its
    // 1 KiB longer owner and source (about 2,670).
    config.max_bytes_per_connection = 2_000;
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
            &args_request(1, OP_LOCK, b"U", &[b"x"], b"o", b"s")
        )
        .await,
        [REPLY_BOOL, 1],
        "U locks x with a one-byte owner and source"
    );
    let charged = node.stats.lock_bytes();
    assert!(
        charged > 0 && charged < 2_000 && charged + 1_000 > 2_000,
        "{charged}"
    );

    // U keeps refreshing x, with a 512-byte owner and source.
    let started = Instant::now();
    let (mut refused, mut id) = (0, 1);
    while started.elapsed() < Duration::from_secs(6) {
        id += 1;
        let mut refresh = args_request(id, OP_REFRESH, b"U", &[b"x"], &long, &long);
        refresh.push(0);
        let reply = call(&mut a, id, &refresh).await;
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
                 {bytes} bytes in all where the lock was charged {charged}: the refreshes the \
                 cap refused for their longer owner refreshed the entry and left its charge \
                 to lapse",
                started.elapsed(),
                entry.refreshed.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(a);
}
