//! Reproduces a past break: two table prefixes that differ only in case (`pc_`, `PC_`) got one set of index names on PostgreSQL, which folds unquoted names to lower case, so the second locker's tables were never made: `connect()` returned Ok and every call then failed with 42P01 (no such table); and an entries table dropped under a running locker was never made again.
//!
//! The table names are quoted, and so tell the prefixes apart; the index
//! names were not. Each locker must get tables of its own, on both
//! databases, and grant on them; a name its tables need that something
//! else holds is an error at `connect`; and a table dropped while it runs
//! is made again by its next call, in quarantine.

use std::time::Duration;

use quorum_lock::sql::SqlLocker;
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::Servers;

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["name".to_owned()].into(),
        owner: "test".into(),
        source: "tests/sql/each_locker_gets_and_keeps_tables_of_its_own.rs".into(),
        quorum: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixes_differing_only_in_case_each_get_working_tables() {
    let Some(servers) = Servers::start() else {
        return;
    };
    for url in [servers.pg.clone(), servers.maria.clone()] {
        let lower =
            SqlLocker::connect(&url, config("pc_", Duration::from_secs(60), Duration::ZERO))
                .await
                .expect("a database");
        let upper =
            SqlLocker::connect(&url, config("PC_", Duration::from_secs(60), Duration::ZERO))
                .await
                .expect("a database");
        // Each its own tables: the same name is free on both.
        assert!(
            lower.lock(&args("lower")).await.expect("a lock on pc_"),
            "{url}: pc_"
        );
        assert!(
            upper
                .lock(&args("upper"))
                .await
                .unwrap_or_else(|e| panic!("{url}: a lock on PC_: {e}")),
            "{url}: PC_ is a table of its own"
        );
    }
}

/// An object of another kind already holding a name the tables need: the
/// creation is rolled back, and `connect` says so rather than answer Ok
/// over tables that do not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_the_tables_need_taken_by_something_else_is_an_error_at_connect() {
    let Some(servers) = Servers::start() else {
        return;
    };
    servers
        .run(
            &servers.pg,
            "CREATE TABLE squatter (x int); CREATE INDEX taken_entries_by_uid ON squatter (x)"
                .into(),
        )
        .await;
    let made = SqlLocker::connect(
        &servers.pg,
        config("taken_", Duration::from_secs(60), Duration::ZERO),
    )
    .await;
    let Err(err) = made else {
        panic!("connect answered Ok over tables it could not create");
    };
    let text = err.to_string();
    assert!(
        text.contains("cannot create the table") && text.contains("table_prefix"),
        "{text}"
    );
}

/// An entries table dropped under a running locker is made again by the
/// next call (or the one after), in a new epoch: in quarantine, since grants were made from
/// the table that was dropped. Before, every call failed with 42P01 (no
/// such table) for as long as the locker ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entries_table_dropped_under_a_running_locker_is_made_again_in_quarantine() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let quarantine = Duration::from_secs(30);
    for url in [servers.pg.clone(), servers.maria.clone()] {
        let locker =
            SqlLocker::connect(&url, config("dropped_", Duration::from_secs(1), quarantine))
                .await
                .expect("a database");
        let _ = locker.lock(&args("before")).await;
        servers.run(&url, "DROP TABLE dropped_entries".into()).await;
        let first = locker.lock(&args("after-drop")).await;
        let Err(err) = first else {
            panic!("{url}: a lock answered {first:?} with its table dropped");
        };
        // The call that finds the table gone says so, or (a grant or
        // release by a stored routine that finds no table hands over to
        // the transaction, which makes it again) already finds the new
        // epoch's quarantine.
        let said = err.to_string();
        assert!(
            said.contains("does not exist") || said.contains("refusing new grants"),
            "{url}: {err}"
        );
        let again = locker.quarantine_left().await;
        let left = again
            .unwrap_or_else(|e| panic!("{url}: the table was not made again: {e}"))
            .unwrap_or_else(|| panic!("{url}: the table made again is not in quarantine"));
        assert!(
            left > quarantine - Duration::from_secs(10) && left <= quarantine,
            "{url}: {left:?}"
        );
    }
}
