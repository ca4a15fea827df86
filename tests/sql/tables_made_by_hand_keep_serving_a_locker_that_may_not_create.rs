//! Reproduces a past break: on tables made by hand (or by an older version) without the release function, a locker with create_tables left on whose user may not create objects was refused at connect, though every call it makes works without the function.
//!
//! The documented set-up for a user that may not run DDL: the tables made
//! once by a user who may, and `SELECT`, `INSERT`, `UPDATE` and `DELETE`
//! granted on both. `create_tables` is on by default and was harmless
//! there before the function existed; upgrading the library must not stop
//! such a locker from connecting (the release can take the full
//! transaction).

use std::time::Duration;

use quorum_lock::sql::SqlLocker;
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::args_from;
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from(
        "tests/sql/tables_made_by_hand_keep_serving_a_locker_that_may_not_create.rs",
        uid,
        name,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_made_by_hand_keep_serving_a_locker_that_may_not_create() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let settings = || config("hd_", Duration::from_secs(60), Duration::ZERO);
    // The tables as an older version (or the documented statements before
    // the function) made them, by a user who may.
    let maker = SqlLocker::connect(&servers.pg, settings())
        .await
        .expect("a database");
    assert!(maker.lock(&args("warm", "warm-up")).await.expect("lock"));
    assert!(maker
        .unlock(&args("warm", "warm-up"))
        .await
        .expect("unlock"));
    drop(maker);
    servers.pg_server().psql(
        "DROP FUNCTION IF EXISTS hd_release_v2(text, text, text); \
         REVOKE CREATE ON SCHEMA public FROM PUBLIC; \
         CREATE ROLE limited LOGIN; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON hd_entries, hd_fence TO limited",
    );

    let url = servers.pg_server().url_as("limited", "unused");
    let locker = SqlLocker::connect(&url, settings()).await;
    let locker = match locker {
        Ok(locker) => locker,
        Err(err) => panic!(
            "a locker whose user has the documented privileges was refused at connect: {err}"
        ),
    };
    assert!(locker.lock(&args("u1", "n")).await.expect("lock"));
    assert!(locker.unlock(&args("u1", "n")).await.expect("unlock"));
}
