//! Reproduces a past break: two table prefixes that differ only in case (`pc_`, `PC_`) got one set of index names on PostgreSQL, which folds unquoted names to lower case, so the second locker's tables were never made: `connect()` returned Ok and every call then failed with 42P01 (no such table).
//!
//! The table names are quoted, and so tell the prefixes apart; the index
//! names were not. Each locker must get tables of its own, on both
//! databases, and grant on them.

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
        source: "tests/sql/prefixes_differing_in_case_get_tables_of_their_own.rs".into(),
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
