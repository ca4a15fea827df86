//! Reproduces a past break: after an admin forced open one name of each of a client's two-name locks, the client keeps the other names' entries alive and uncharged for as long as it likes by refreshing each lock's whole set, and fills the lock table's cap again on top of them.
//!
//! docs/lock-servers.md, "A compromised client": forcing a name open gives
//! back at once the charge of every lock that held it, and "a lock on more
//! names than were forced keeps its entries on the others, uncharged,
//! until they expire within the validity". A refresh of the whole set
//! finds the forced name missing, so it answers `false`, but it refreshes
//! the entries it still finds, and since it found one it is not a refresh
//! "that refreshes nothing": the charge it would need is gone, and the
//! server neither charges the entries again nor drops them. They never
//! expire while the client refreshes, and the ledger no longer counts them:
//! the table holds more than `max_lock_bytes` lets one client take.
//!
//! A server with a 16 KiB lock table, a 1 s validity and an admin token; a
//! client fills the table with locks on two names each, the admin forces
//! the first name of each open (as `quorum-lock force-unlock NAME` does),
//! the client refreshes each lock's two names every 200 ms for three
//! validities, then fills the table again. Real time (sockets), every
//! call bounded.
#![cfg(feature = "net")]

use quorum_lock::net::ServerConfig;
use quorum_lock::NetLocker;

use crate::capped::{self, bounded, ADMIN};
use crate::forced_by_name;
use crate::node::TOKEN;

#[tokio::test]
async fn entries_left_by_a_partial_force_count_against_the_client_however_it_refreshes() {
    let args = forced_by_name::culprit_args("tests/net/entries_left_by_a_partial_force_count_against_the_client_however_it_refreshes.rs");
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 16 * 1024;
    let (addr, _stop) = forced_by_name::serve("partial-force", config).await;

    let culprit = capped::connect(&addr, TOKEN).await;
    let first = capped::fill(&culprit, "1", &["a", "b"], args).await;
    assert!(!first.is_empty(), "the first fill takes locks");
    let admin = capped::connect(&addr, ADMIN).await;
    let at_the_cap = bounded("list", admin.locks()).await.expect("listing").len();

    // The admin forces the first name of each lock open.
    forced_by_name::force_the_first_name_of_each(&admin, &first, args).await;

    // The client refreshes each lock's whole set for three validities.
    forced_by_name::refresh_for_three_validities(&culprit, &first).await;

    // Then fills the table again.
    let second = capped::fill(&culprit, "2", &["a", "b"], args).await;
    let (entries, left_over) =
        forced_by_name::entries_and_left_over_of_the_first_fill(&admin).await;
    // What the force left and the client kept refreshing is charged to
    // it again: with it, the client stays within its cap.
    assert!(
        entries <= at_the_cap,
        "{left_over} entries left by the force outlived three validities, uncharged; the \
         client then took {} more locks ({} entries in the table, {at_the_cap} at the cap)",
        second.len(),
        entries
    );
}
