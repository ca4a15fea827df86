//! Reproduces a past break: a client whose locks an admin forced open by one name each floods the server with releases of uids it never held (free: they are charged nothing), which pushes the forced uids out of the record of released uids; its refreshes of the names the force left then succeed again, are charged on top of a table it has filled again meanwhile, and keep it over the lock table's cap for as long as it refreshes.
//!
//! docs/lock-servers.md, "A compromised client": a client "can fill
//! limits, each of which bounds it: ... in total the lock table's 1 GiB";
//! "forcing a name open gives back at once the charge of every lock that
//! held it, and the server then treats that lock as released, refusing its
//! refreshes, locks and waits (what is left of a lock on more names than
//! were forced expires within the validity ...)". The server treats a
//! forced uid as released only while the record of released uids keeps it,
//! and that record (now shared with the locker, with the server's
//! `max_released_bytes`) forgets its oldest uids as soon as anyone
//! releases more: a release of a uid nobody holds is remembered as any
//! other. The refreshes that then reach the entries the force left are
//! charged without a limit check (`Ledger::charge_unconditionally`), so
//! the client keeps them alive, charged over its cap, for as long as it
//! refreshes.
//!
//! As `entries_left_by_a_partial_force_are_charged_whole_whatever_the_first_refresh_names`
//! (a 64 KiB lock table, a 1 s validity, an admin token), with
//! `max_released_bytes` at 64 KiB (`--max-released-bytes 64KiB`): after
//! the admin's force, the client releases 300 uids it never held, refills
//! the table, and refreshes the eight names left of each forced lock every
//! 200 ms for three validities. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockArgs, NetLocker};

use crate::capped::{self, bounded, ADMIN};
use crate::forced_by_name;
use crate::node::TOKEN;

#[tokio::test]
async fn a_lock_forced_open_by_name_stays_refused_after_a_flood_of_releases() {
    let args = forced_by_name::culprit_args(
        "tests/net/a_lock_forced_open_by_name_stays_refused_after_a_flood_of_releases.rs",
    );
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 64 * 1024;
    config.max_released_bytes = 64 * 1024;
    let (addr, _stop) = forced_by_name::serve("partial-force", config).await;

    let culprit = capped::connect(&addr, TOKEN).await;
    let first = capped::fill(&culprit, "1", &forced_by_name::NINE, args).await;
    assert!(
        first.len() >= 2,
        "the first fill takes locks: {}",
        first.len()
    );
    let admin = capped::connect(&addr, ADMIN).await;
    let at_the_cap = bounded("list", admin.locks()).await.expect("listing").len();

    // The admin forces the first name of each lock open.
    forced_by_name::force_the_first_name_of_each(&admin, &first, args).await;

    // The client releases uids it never held: each is remembered, and
    // pushes the oldest (the forced ones) out of the record.
    for i in 0..300 {
        let name = format!("flood/{i}");
        let never_held = args(&format!("flood-uid-{i:04}"), &[name]);
        let _ = bounded("unlock", culprit.unlock(&never_held)).await;
    }

    // It refills the table, then refreshes the eight names left of each
    // forced lock for three validities.
    let second = capped::fill(&culprit, "2", &forced_by_name::NINE, args).await;
    let left: Vec<LockArgs> = first
        .iter()
        .map(|lock| args(&lock.uid, &lock.resources[1..]))
        .collect();
    let mut granted = 0;
    let until = tokio::time::Instant::now() + 3 * forced_by_name::VALIDITY;
    while tokio::time::Instant::now() < until {
        for lock in &left {
            if bounded("refresh", culprit.refresh(lock)).await == Ok(true) {
                granted += 1;
            }
        }
        for lock in &second {
            let _ = bounded("refresh", culprit.refresh(lock)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let (entries, left_over) =
        forced_by_name::entries_and_left_over_of_the_first_fill(&admin).await;
    assert!(
        granted == 0 && entries <= at_the_cap,
        "the locks forced open were refreshed {granted} times after the flood of releases; \
         {left_over} entries left by the force outlived three validities beside the {} locks of \
         the refill: {} entries in the table, {at_the_cap} at the cap",
        second.len(),
        entries
    );
}
