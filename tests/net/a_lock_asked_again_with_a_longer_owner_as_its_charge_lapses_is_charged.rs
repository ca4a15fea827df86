//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) and against the whole server";
//! "A set of names is charged for the longest owner and source a request
//! of its uid named it with (a place asked again, a lock taken again, with
//! longer ones: the table keeps the newest), and the growth is admitted
//! against the limits as a new lock is". "Threat model": a client "can
//! fill limits, each of which bounds it".
//!
//! `Ledger::reserve_as` measures the growth against the set it finds
//! charged, then admits it; an admission over a limit prunes the lapsed
//! charges first, which may remove that very set (its lock expired, and
//! nothing touched it for the lapse). The growth then fits, but there is
//! no set left to grow: `Inner::found` finds nothing and charges nothing,
//! and the reservation still answers that the set is charged. The lock is
//! granted uncharged; a refresh with a one-byte owner and source then
//! charges it as that, while its entry keeps the 1 KiB of owner and
//! source it was granted with, for as long as the client refreshes.
//!
//! Uid U locks "x" with a one-byte owner and source under a per-connection
//! cap with no room for 1 KiB more, lets it expire, and just after its
//! charge's lapse (a 3 s validity: 5 s) locks "x" again with a 512-byte
//! owner and source; then refreshes it with a one-byte owner and source.
//! A lock refused over the cap is right (a new lock of 1 KiB of owner and
//! source does not fit); a lock granted must be charged as it is. (U's lock
//! is taken half a second after the server's start, so that its lapse
//! falls between the server's sweeps of its ledger, at most once a
//! validity, which would prune the lapsed charge before the request.) Real time
//! (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{start_over, TOKEN};
use crate::wire::{
    args_request, authenticate_as, call, OP_LOCK, OP_REFRESH, REPLY_BOOL, VERSION_6,
};
use quorum_lock::net::ServerConfig;
use quorum_lock::LockerConfig;

const VALIDITY: Duration = Duration::from_secs(3);
/// The charge's lapse for this validity: the validity and two expiry
/// passes of a second each.
const LAPSE: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_asked_again_with_a_longer_owner_as_its_charge_lapses_is_charged() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
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
    // Half a pass after the server's start: the server sweeps its ledger
    // at most once a validity, at its expiry passes, a second apart from
    // its start and from U's expiry, and so not within half a second of
    // U's lapse.
    tokio::time::sleep(Duration::from_millis(500)).await;
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

    // Not refreshed: expired, and its charge lapses at LAPSE.
    tokio::time::sleep((granted + LAPSE + Duration::from_millis(5)).duration_since(Instant::now()))
        .await;
    let again = call(
        &mut a,
        2,
        &args_request(2, OP_LOCK, b"U", &[b"x"], &long, &long),
    )
    .await;
    if again[..] != [REPLY_BOOL, 1] {
        // Charged as a new lock (the sweep pruned the lapsed charge first,
        // or the reservation saw its set go): refused over the cap.
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
         lock taken plainly is charged {plain}: the admission of its growth pruned the lapsed \
         set it was to grow, and the reservation charged nothing",
        entry.owner.len(),
        entry.source.len()
    );
    drop(a);
}
