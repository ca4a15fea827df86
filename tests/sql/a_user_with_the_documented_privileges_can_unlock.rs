//! Reproduces a past break: where functions are not executable by PUBLIC by default (a common hardening), a locker user with the documented privileges (SELECT, INSERT, UPDATE, DELETE on both tables) connected, locked, and then failed every one-resource unlock on the release function, leaving its locks held until they expired.
//!
//! The DBA makes the tables with `schema()`'s statements under
//! `ALTER DEFAULT PRIVILEGES … REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC` and
//! grants what docs/sql.md says to grant; the locker runs with
//! `create_tables: false`.

use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_shared::args_from;
use crate::Servers;

fn args(uid: &str, name: &str) -> LockArgs {
    args_from(
        "tests/sql/a_user_with_the_documented_privileges_can_unlock.rs",
        uid,
        name,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_the_documented_privileges_can_unlock() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let settings = || config("ex_", Duration::from_secs(60), Duration::ZERO);
    servers
        .pg_server()
        .psql("ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC");
    let statements = quorum_lock::sql::schema(quorum_lock::sql::Backend::Postgres, &settings())
        .expect("the statements");
    for statement in statements {
        servers.pg_server().psql(&format!("{statement};"));
    }
    servers.pg_server().psql(
        "CREATE ROLE limited LOGIN; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON ex_entries, ex_fence TO limited",
    );

    let url = servers.pg_server().url_as("limited", "unused");
    let locker = SqlLocker::connect(
        &url,
        SqlConfig {
            create_tables: false,
            ..settings()
        },
    )
    .await
    .expect("the documented privileges are enough to connect");
    assert!(locker.lock(&args("u1", "n")).await.expect("lock"));
    let released = locker.unlock(&args("u1", "n")).await;
    assert!(
        matches!(released, Ok(true)),
        "the unlock of a held lock answered {released:?}"
    );
}
