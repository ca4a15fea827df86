//! Reproduces a past break: after an admin forced open one name of each of a client's nine-name locks, the client refreshes one remaining name first, is charged again for that one name only, and then keeps all eight remaining names alive by refreshing them together, uncharged, filling the lock table's cap again on top of them.
//!
//! docs/lock-servers.md, "A compromised client": a lock on more names than
//! were forced "keeps its entries on the others until they expire, and is
//! charged for them again when its client refreshes it". The server charges
//! again the set the first refresh names, and only when the uid has no
//! charge; a later refresh naming more of the uid's entries finds a charge
//! and adds nothing. So the entries its refreshes keep alive are charged as
//! one name each lock, and the client holds more than `max_lock_bytes`
//! lets one client take, for as long as it refreshes.
//!
//! A server with a 64 KiB lock table, a 1 s validity and an admin token; a
//! client fills the table with locks on nine names each, the admin forces
//! the first name of each open, the client refreshes each lock's second
//! name alone, then the eight names left together every 200 ms for three
//! validities, then fills the table again. Real time (sockets), every call
//! bounded.
#![cfg(feature = "net")]

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockArgs, NetLocker};

use crate::capped::{self, bounded, ADMIN};
use crate::forced_by_name;
use crate::node::TOKEN;

#[tokio::test]
async fn entries_left_by_a_partial_force_are_charged_whole_whatever_the_first_refresh_names() {
    let args = forced_by_name::culprit_args("tests/net/entries_left_by_a_partial_force_are_charged_whole_whatever_the_first_refresh_names.rs");
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 64 * 1024;
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

    // The client refreshes each lock's second name alone, then the eight
    // names left together for three validities. (The server refuses them
    // now: a uid forced open is one it released. What is checked is that
    // the client stays within its cap, whatever the refreshes answer.)
    for lock in &first {
        let one = args(&lock.uid, &lock.resources[1..2]);
        let _ = bounded("refresh", culprit.refresh(&one)).await;
    }
    let left: Vec<LockArgs> = first
        .iter()
        .map(|lock| args(&lock.uid, &lock.resources[1..]))
        .collect();
    forced_by_name::refresh_for_three_validities(&culprit, &left).await;

    // Then fills the table again.
    let second = capped::fill(&culprit, "2", &forced_by_name::NINE, args).await;
    let (entries, left_over) =
        forced_by_name::entries_and_left_over_of_the_first_fill(&admin).await;
    // What the force left and the client kept refreshing is charged to
    // it again: with it, the client stays within its cap.
    assert!(
        entries <= at_the_cap,
        "{left_over} entries left by the force outlived three validities, charged as one name \
         a lock; the client then took {} more locks ({} entries in the table, {at_the_cap} at the cap)",
        second.len(),
        entries
    );
}
